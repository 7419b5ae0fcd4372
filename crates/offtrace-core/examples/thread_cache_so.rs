//! offtrace-core in a shared object, for `tests/thread_cache.rs`: the thread-pointer cache of
//! the thread state (`src/thread_cache.rs`) checked where it matters, with the state in dynamic
//! TLS (`dlopen`), so that a stale cache slot points at another thread's (or freed) storage.
//! In an executable a thread reusing a dead thread's TCB also reuses its static TLS, and a stale
//! slot would name the right address by accident: there, no check could fail.
//!
//! Each check makes a thread's *first* offtrace call `current_thread_id()` (the cached kernel
//! id in the state the cache hands out) and compares it with `gettid`: a state of another
//! thread, live or dead, carries that thread's id.

#![allow(unsafe_code, missing_docs)]

use std::cell::Cell;
use std::sync::mpsc;

use offtrace_core::current_thread_id;

/// Whether the state the cache hands this thread is its own.
fn own_state() -> bool {
    // SAFETY: `gettid` has no preconditions.
    current_thread_id() == unsafe { libc::gettid() } as u64
}

/// A thread whose first offtrace call comes from a thread-local destructor.
struct FirstCallAtTlsExit(Cell<bool>);

impl Drop for FirstCallAtTlsExit {
    fn drop(&mut self) {
        if self.0.get() && !own_state() {
            WRONG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

thread_local! {
    static AT_TLS_EXIT: FirstCallAtTlsExit = const { FirstCallAtTlsExit(Cell::new(false)) };
}

static WRONG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A pthread key whose destructor makes a thread's first offtrace call (after its TLS
/// destructors have run, where offtrace's own key destructor has not run yet or runs again).
extern "C" fn first_call_at_key_exit(_: *mut libc::c_void) {
    if !own_state() {
        WRONG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn key() -> libc::pthread_key_t {
    static KEY: std::sync::OnceLock<libc::pthread_key_t> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: a valid out-pointer and a plain function; this library is never unloaded by
        // the test.
        assert_eq!(unsafe { libc::pthread_key_create(&mut k, Some(first_call_at_key_exit)) }, 0);
        k
    })
}

/// One thread of kind `i % 3`: its first offtrace call in its body, in a thread-local
/// destructor, or in a pthread-key destructor (and then a few more in its body for the first
/// kind, so that its slot is in use while it lives).
fn one_thread(i: u32) {
    match i % 3 {
        0 => {
            for _ in 0..4 {
                if !own_state() {
                    WRONG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        1 => AT_TLS_EXIT.with(|f| f.0.set(true)),
        _ => {
            // SAFETY: the key exists; any non-null value makes its destructor run.
            unsafe { libc::pthread_setspecific(key(), std::ptr::dangling::<libc::c_void>()) };
        }
    }
}

/// Starts and joins threads `rounds` times, `width` at a time (glibc reuses the joined
/// threads' stacks and TCBs, so their thread pointers, for the next round's): the number of
/// checks that found another thread's state; `u64::MAX` if a thread could not start.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_thread_cache_churn(rounds: u32, width: u32) -> u64 {
    let r = std::panic::catch_unwind(|| {
        WRONG.store(0, std::sync::atomic::Ordering::Relaxed);
        for r in 0..rounds {
            let hs: Vec<_> = (0..width).map(|w| std::thread::Builder::new().spawn(move || one_thread(r + w))).collect();
            for h in hs {
                h.ok()?.join().ok()?;
            }
        }
        Some(WRONG.load(std::sync::atomic::Ordering::Relaxed))
    });
    r.ok().flatten().unwrap_or(u64::MAX)
}

/// Forks while `live` threads that took cache slots are alive (and blocked), then, in the
/// child, starts and joins `child_threads` threads one by one (glibc hands the parent
/// threads' stacks, TCBs included, to them): the child's exit status is the number of its
/// threads that got another thread's state (255 if one could not start). Returns that status,
/// or -1 if the fork or the wait failed.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_thread_cache_fork(live: u32, child_threads: u32) -> i32 {
    let r = std::panic::catch_unwind(|| {
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut release = Vec::new();
        let mut hs = Vec::new();
        for _ in 0..live {
            let (tx, rx) = mpsc::channel::<()>();
            let ready = ready_tx.clone();
            hs.push(std::thread::spawn(move || {
                let ok = own_state();
                let _ = ready.send(ok);
                let _ = rx.recv();
            }));
            release.push(tx);
        }
        let mut wrong_before = 0;
        for _ in 0..live {
            wrong_before += i32::from(!ready_rx.recv().unwrap_or(false));
        }
        // SAFETY: the other threads are blocked in `recv` (no lock of the allocator or of
        // offtrace held); the child starts threads, checks and leaves with `_exit`.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let mut wrong = 0;
            for _ in 0..child_threads {
                match std::thread::spawn(own_state).join() {
                    Ok(true) => {}
                    Ok(false) => wrong += 1,
                    Err(_) => wrong = 255,
                }
            }
            // SAFETY: `_exit` ends the child without the parent's exit path.
            unsafe { libc::_exit(wrong.min(255)) };
        }
        drop(release);
        for h in hs {
            let _ = h.join();
        }
        if child < 0 {
            return -1;
        }
        let mut status = 0;
        // SAFETY: `child` is our child; `status` is writable.
        if unsafe { libc::waitpid(child, &mut status, 0) } != child || !libc::WIFEXITED(status) {
            return -1;
        }
        if wrong_before != 0 { 255 } else { libc::WEXITSTATUS(status) }
    });
    r.unwrap_or(-1)
}
