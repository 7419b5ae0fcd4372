//! A crashing program keeps its last records: on a fatal signal the records already in the rings
//! reach the file before the process dies, and the process dies as it would have.
//!
//! [`Config::with_crash_flush`](crate::Config::with_crash_flush) installs, when a recording
//! starts (once per process), a handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT and SIGTERM
//! (`SA_SIGINFO | SA_ONSTACK`, and `SA_RESTART` where the handler it replaces had it); a signal
//! whose disposition is `SIG_IGN` is left alone. The handler, on the thread the signal hit:
//!
//! 1. notes the signal and the thread in one atomic word (the first signal only: a signal that
//!    repeats, or hits a second thread, never asks for a second flush);
//! 2. wakes the writer (`wakeup.rs`: an atomic swap and a `futex` wake);
//! 3. waits, polling with `nanosleep`, until the writer has drained every ring, written a
//!    `crash` `Info` record and closed the chunk (`flush_chunk`: the bytes are in the kernel),
//!    or [`CRASH_FLUSH_TIMEOUT`] passed (the crash may have happened inside `malloc` or with a
//!    lock the writer needs: after the bound the process dies anyway, and a chunk cut short is
//!    skipped by the reader, which checks each chunk's length and crc);
//! 4. chains: to the handler installed before ours, called the way its flags say (`SA_SIGINFO`,
//!    its mask, `SA_NODEFER`, `SA_RESETHAND`), or, where there was none, restores `SIG_DFL` and
//!    sends itself the same signal with the same `siginfo` (`rt_tgsigqueueinfo`): when the
//!    handler returns the signal is delivered with its default action, so the exit status,
//!    the core dump and the parent's view are those of a run without offtrace.
//!
//! No `End` record is written: the program may survive the signal (a handler installed before
//! ours that recovers, or a runtime that uses SIGSEGV on purpose), and then the recording goes
//! on. A trace cut by a crash reads as a truncated one whose last chunk holds the last records and
//! the `crash` note.
//!
//! Not done: the writer thread's own crash waits for nothing; a forked child (no writer) waits
//! for nothing; a handler the program installs after ours replaces ours (never re-installed).
//! The writer thread starts with SIGTERM blocked ([`with_sigterm_blocked`]), so that a `kill` of
//! the process is handled by a thread that is not the one that must do the flushing (the process
//! then takes a `kill` as it would without the writer thread; only a SIGTERM sent to the
//! writer's own thread id, `tgkill`, stays pending). The record path is unchanged: nothing here
//! runs per record.

#![allow(unsafe_code)] // sigaction, signal-handler state

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// The longest a fatal signal waits for the writer's flush before the process dies.
pub const CRASH_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// How often the waiting handler looks whether the flush is done.
const POLL: Duration = Duration::from_millis(1);

/// The signals whose default action ends the process and that a crash or a scheduler sends.
const SIGNALS: [libc::c_int; 6] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT, libc::SIGTERM];

/// A recording's crash state (in its `Inner`).
#[derive(Debug, Default)]
pub(crate) struct CrashState {
    /// `signal << 32 | tid` of the first fatal signal, 0 while none came.
    noted: AtomicU64,
    /// The writer closed the chunk with every record pushed before the signal was noted.
    flushed: AtomicBool,
    /// The writer thread's tid, 0 before it runs: its own crash does not wait for itself, nor
    /// does its own `flush` (`recorder::flush`, from a sink or a tool on that thread).
    writer_tid: AtomicU32,
    /// The process that started the recording (a forked child has no writer).
    pid: AtomicU32,
}

impl CrashState {
    /// A recording's state, in the process that starts it (published with the recording:
    /// `install`'s Release, the handler's Acquire).
    pub(crate) fn in_this_process() -> Self {
        Self { pid: AtomicU32::new(std::process::id()), ..Default::default() }
    }

    /// At the start of the writer thread.
    pub(crate) fn writer_started(&self) {
        // Relaxed: read only by a signal handler, which at worst waits its bound in vain.
        self.writer_tid.store(gettid(), Ordering::Relaxed);
    }

    /// Whether the calling thread is this recording's writer thread.
    pub(crate) fn on_writer_thread(&self) -> bool {
        // Relaxed: the writer stores its tid before its first cycle, and that thread reads its
        // own store; any other thread finds another tid, or 0 before the writer runs.
        gettid() == self.writer_tid.load(Ordering::Relaxed)
    }

    /// The signal and thread of a crash the writer has not flushed yet (writer thread).
    pub(crate) fn pending(&self) -> Option<(i32, u32)> {
        // Acquire: pairs with the handler's AcqRel claim; what the crashed thread pushed before
        // it was already published by its pushes' own Release stores.
        let n = self.noted.load(Ordering::Acquire);
        (n != 0 && !self.flushed.load(Ordering::Relaxed)).then_some(((n >> 32) as i32, n as u32))
    }

    /// The writer closed the chunk holding everything pushed before [`Self::pending`] said so.
    pub(crate) fn flushed(&self) {
        // Release: the chunk's write happens before the handler that sees this lets it die.
        self.flushed.store(true, Ordering::Release);
    }

    /// The handler's steps 1 to 3 (see the module docs). Async-signal-safe.
    fn flush_before_death(&self, sig: libc::c_int, wakeup: &crate::wakeup::Wakeup) {
        let tid = gettid();
        // Relaxed: set once before the writer's first cycle (a stale 0 only means we wait).
        if tid == self.writer_tid.load(Ordering::Relaxed)
            // SAFETY: getpid has no preconditions and is async-signal-safe.
            || unsafe { libc::getpid() } as u32 != self.pid.load(Ordering::Relaxed)
        {
            return;
        }
        let note = (u64::from(sig as u32) << 32) | u64::from(tid);
        // AcqRel: the first claim wins; a later one (same or another thread) only waits for the
        // same flush.
        if self.noted.compare_exchange(0, note, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            wakeup.wake();
        }
        // The bound is on the clock, not a count of polls: on a loaded machine a 1 ms sleep
        // takes longer.
        let deadline = monotonic_ns().saturating_add(CRASH_FLUSH_TIMEOUT.as_nanos() as u64);
        // Acquire: pairs with `flushed`'s Release.
        while !self.flushed.load(Ordering::Acquire) && monotonic_ns() < deadline {
            let ts = libc::timespec { tv_sec: 0, tv_nsec: POLL.as_nanos() as libc::c_long };
            // SAFETY: nanosleep is async-signal-safe; `ts` is valid, the remainder unused.
            unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        }
    }
}

/// CLOCK_MONOTONIC in ns, async-signal-safe (clock_gettime is; `Instant` does not promise it).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the valid timespec on this stack frame.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// Runs `spawn` (which starts the writer thread) with SIGTERM blocked on the calling thread, so
/// that the writer starts with it blocked and keeps it so: a `kill` of the process is then never
/// handled by the thread that must do the flushing, not even in the moment between the thread's
/// creation and the mask it would set itself (a pending SIGTERM landed there in 16 of 30 runs
/// of `sigterm_keeps_every_record_and_dies_of_sigterm`'s child on a loaded machine: the handler
/// then waited its full bound for its own thread). A SIGTERM that comes meanwhile is delivered
/// when the mask is restored.
pub(crate) fn with_sigterm_blocked<T>(spawn: impl FnOnce() -> T) -> T {
    let mut term = empty_set();
    let mut before = empty_set();
    // SAFETY:
    // - both sets are initialised sigset_t on this stack frame;
    // - pthread_sigmask changes this thread's mask only, and the old mask is put back below.
    unsafe {
        libc::sigaddset(&mut term, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &term, &mut before);
    }
    let spawned = spawn();
    // SAFETY: `before` is the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) };
    spawned
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and is async-signal-safe.
    unsafe { libc::gettid() as u32 }
}

fn empty_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

/// The action each signal had before ours, written once before ours is installed.
struct Previous {
    action: [UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>; SIGNALS.len()],
    /// `action[i]` is written (Release before ours is installed; Acquire in the handler).
    ready: [AtomicBool; SIGNALS.len()],
    /// The previous handler had `SA_RESETHAND` and was called once: from now on, the default.
    reset: [AtomicBool; SIGNALS.len()],
}

// SAFETY: each `action[i]` is written once, by `install` under `INSTALL`'s `Once`, before
// `ready[i]` is set with Release; it is read only after `ready[i]` is seen with Acquire.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous {
    action: [const { UnsafeCell::new(std::mem::MaybeUninit::uninit()) }; SIGNALS.len()],
    ready: [const { AtomicBool::new(false) }; SIGNALS.len()],
    reset: [const { AtomicBool::new(false) }; SIGNALS.len()],
};

static INSTALL: std::sync::Once = std::sync::Once::new();

/// Whether the environment leaves the crash handler on: `OFFTRACE_CRASH_HANDLER=0` turns it off
/// (for a program whose own signal handling must see no other handler; `docs/cli.md`).
pub fn crash_flush_wanted() -> bool {
    std::env::var_os("OFFTRACE_CRASH_HANDLER").is_none_or(|v| v != "0")
}

/// Installs the handler for the fatal signals, once per process (see the module docs).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY:
            // - sigaction with a null new action only reads the current one into `old`;
            // - `PREVIOUS.action[i]` is written here only, before `ready[i]` (see `Previous`).
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
                    continue; // ignored: the signal does not end the process; leave it so
                }
                (*PREVIOUS.action[i].get()).write(old);
                PREVIOUS.ready[i].store(true, Ordering::Release);
                let mut ours: libc::sigaction = std::mem::zeroed();
                ours.sa_sigaction = on_fatal_signal as *const () as libc::sighandler_t;
                // SA_RESTART as the previous handler had it: a program whose handler relies on
                // EINTR (CPython's does not set it) must still see its blocking calls interrupted.
                // With no previous handler the process dies, and it does not matter.
                ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | (old.sa_flags & libc::SA_RESTART);
                libc::sigemptyset(&mut ours.sa_mask);
                libc::sigaction(sig, &ours, std::ptr::null_mut());
            }
        }
    });
}

extern "C" fn on_fatal_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno's location is this thread's; the handler gives the interrupted code its
    // errno back.
    let errno = unsafe { *libc::__errno_location() };
    if let Some(inner) = crate::recorder::current() {
        inner.crash.flush_before_death(sig, &inner.wakeup);
    }
    // SAFETY: `sig`, `info` and `ctx` are the kernel's arguments to this SA_SIGINFO handler.
    unsafe { chain(sig, info, ctx) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Step 4 of the module docs.
///
/// # Safety
///
/// Called from [`on_fatal_signal`] with its arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else { return };
    // Acquire: pairs with `install`'s Release; `action[i]` is written.
    let previous = if PREVIOUS.ready[i].load(Ordering::Acquire) && !PREVIOUS.reset[i].load(Ordering::Relaxed) {
        // SAFETY: written before `ready[i]` and never again (see `Previous`).
        Some(unsafe { (*PREVIOUS.action[i].get()).assume_init_ref() })
    } else {
        None
    };
    match previous {
        Some(old) if old.sa_sigaction == libc::SIG_IGN => {}
        Some(old) if old.sa_sigaction != libc::SIG_DFL => {
            if old.sa_flags & libc::SA_RESETHAND != 0 {
                // Relaxed: read by this handler only, on a later signal.
                PREVIOUS.reset[i].store(true, Ordering::Relaxed);
            }
            // The mask the previous handler asked for while it runs; ours blocks `sig` already.
            let mut saved = empty_set();
            // SAFETY:
            // - sigprocmask-style calls are async-signal-safe and change this thread's mask only;
            // - the handler address came from sigaction, with the signature its flags say;
            // - `info` and `ctx` are the kernel's, valid for this handler's duration.
            unsafe {
                let mut block = old.sa_mask;
                libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut saved);
                if old.sa_flags & libc::SA_NODEFER != 0 {
                    block = empty_set();
                    libc::sigaddset(&mut block, sig);
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &block, std::ptr::null_mut());
                }
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(old.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    f(sig);
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &saved, std::ptr::null_mut());
            }
        }
        _ => {
            // SAFETY: as in `die_by_default`'s contract: the kernel's `info`, this thread.
            unsafe { die_by_default(sig, info) };
        }
    }
}

/// Restores the default action and sends the thread the same signal with the same `siginfo`:
/// delivered when the handler returns (it is blocked until then), it ends the process the way
/// it would have without us, fault address and core dump included.
///
/// # Safety
///
/// `info` is null or the kernel's siginfo for this handler.
unsafe fn die_by_default(sig: libc::c_int, info: *mut libc::siginfo_t) {
    // SAFETY:
    // - sigaction, getpid, gettid and the two system calls are async-signal-safe;
    // - `dfl` is a zeroed sigaction (SIG_DFL, no flags, an empty mask);
    // - rt_tgsigqueueinfo to our own thread accepts the kernel's siginfo as it is.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        let (pid, tid) = (libc::getpid(), libc::gettid());
        let queued = !info.is_null() && libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, info) == 0;
        if !queued {
            libc::syscall(libc::SYS_tgkill, pid, tid, sig);
        }
    }
}
