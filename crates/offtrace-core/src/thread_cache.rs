//! The calling thread's state without `__tls_get_addr`: a cache keyed by the thread pointer.
//!
//! Applications load offtrace as a shared object (`dlopen`), where rustc uses the
//! general-dynamic TLS model: every `thread_local!` access is a call to `__tls_get_addr` (12
//! instructions with the call, 1-2 ns on the development VM; stable Rust has no other model,
//! TLSDESC is broken in glibc < 2.40, bug 31372, and an initial-exec variable written in
//! assembly puts the library's whole TLS block in static TLS, which `dlopen` then refuses). The
//! record paths read the thread's state once per emit ([`crate::correlation::thread_state`]);
//! this module gives them its address without that call:
//!
//! - **The thread pointer** is readable without a call: `%fs:0` on x86-64 (the TCB's self
//!   pointer, which the x86-64 TLS ABI puts there), `tpidr_el0` on aarch64. It is unique among
//!   the live threads of a process. Other targets use the thread-local.
//! - **A static direct-mapped table** of [`TABLE_LEN`] slots, indexed by a Fibonacci hash of
//!   the thread pointer. A slot holds a thread pointer (0 = free) and the address of that
//!   thread's [`ThreadState`] (the const, destructor-free thread-local `THREAD`, which stays
//!   where it is). The fast path: hash, load the slot's thread pointer, compare with ours, load
//!   its state: about ten instructions, no call, no pointer to chase (a table of pointers to
//!   heap entries, tried first, cost one dependent load more and a pool to keep the entries).
//!   In an executable, where a thread-local is one `%fs`-relative access, the look-up costs
//!   those ten instructions more (`docs/overhead.md`, *As applications load it*).
//! - **Only the owner's thread pointer matches.** A thread takes a free slot with a
//!   compare-exchange of its thread pointer for 0, then stores its state; it alone clears it
//!   (at its exit). So a slot whose thread pointer equals ours was taken by this thread, and the
//!   state read next is this thread's own earlier store (program order): the look-up's loads
//!   are `Relaxed`. The release is `Release` and the take `Acquire`, so that a previous
//!   owner's store of its state comes before the next owner's in the state's modification
//!   order (the loom model, `loom_a_slot_hands_out_only_its_owners_state`, fails with both
//!   `Relaxed`). A reader that races with another thread's take or release of the slot reads a
//!   thread pointer that is not its own and takes the slow path.
//! - **The slow path** (first emit of a thread, its slot held by another thread) reads `THREAD`
//!   through the thread-local and tries to take the slot; on success it notes the slot in the
//!   thread's state (`ThreadState::cache_entry`) and in a pthread key whose destructor releases
//!   it. Two live threads whose pointers hash to one slot: the first keeps it, the other takes
//!   the slow path on every emit until the slot is free (correct, about 2 ns slower).
//! - **Thread exit**: glibc reuses a dead thread's stack and TCB, hence its thread pointer, for
//!   a later thread. The key's destructor runs on the exiting thread after its TLS destructors
//!   (`__call_tls_dtors`, then the pthread-key destructors), before the thread is gone, so
//!   before any thread can reuse its TCB (the kernel clears the dead thread's tid when it is
//!   gone, and glibc reuses the stack only after that: the release's store happens-before the
//!   new thread's first look-up). It frees the slot and marks the thread's state released.
//!   Emits after that (later key destructors, `__libc_thread_freeres`) take the slow path and
//!   use `THREAD` without taking a slot (`THREAD` has no destructor: it stays valid to the
//!   thread's end). Never a panic, never another thread's state. A pthread key rather than a
//!   destructor-bearing thread-local: TLS destructors run first, so emits from them stay on the
//!   fast path; and a thread whose first emit comes from a TLS destructor or a key destructor
//!   still has its slot released (a thread-local destructor registered once glibc's
//!   `__call_tls_dtors` has run never runs; a key set during the key destructors' rounds makes
//!   glibc run another round). The main thread's `exit` runs no key destructor, and ends the
//!   process: its TCB is never reused. What is left: a thread whose *first* emit comes in the fourth and last
//!   round (`PTHREAD_DESTRUCTOR_ITERATIONS`), which takes another library's key destructor
//!   re-arming itself three times and then calling a traced runtime; its slot would outlive it.
//!   Not covered.
//! - **Unloading**: the key's destructor is code of this library. A library destructor
//!   (`.fini_array`, run by `dlclose` when the library is really unmapped; offtrace's agent is
//!   `NODELETE` and never is) deletes the key first, so no thread exit calls into unmapped code;
//!   the table goes with the library.
//! - **Fork**: the child has one thread, and glibc hands the dead parent threads' stacks (and
//!   TCBs) to the child's new threads. A `pthread_atfork` child handler empties the table, so a
//!   child thread reusing a parent thread's TCB cannot match that thread's slot; the forking
//!   thread takes its slot again on its next slow path.

#![allow(unsafe_code)] // the thread pointer (asm), the pthread key
#![cfg_attr(loom, allow(dead_code))] // under loom the record paths read `THREAD` directly; the model runs the table

use crate::correlation::ThreadState;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// Slots in the table (a power of two): 64 KB of `.bss`, touched only where threads hash.
pub(crate) const TABLE_BITS: u32 = 12;
pub(crate) const TABLE_LEN: usize = 1 << TABLE_BITS;

/// One slot: the owner's thread pointer (0 = free) and its state.
#[repr(C, align(16))]
pub(crate) struct Slot {
    tp: AtomicUsize,
    state: AtomicPtr<ThreadState>,
}

/// Fibonacci hash of a thread pointer: the top `bits` bits of its product with 2^64 / phi.
#[inline(always)]
fn hash(tp: usize, bits: u32) -> usize {
    ((tp as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// The direct-mapped table, `N` a power of two. Generic over its length and given the thread
/// pointer, so that the loom model and the unit tests run the shipped logic on a small table
/// with injected thread pointers.
pub(crate) struct Table<const N: usize> {
    slots: [Slot; N],
}

impl<const N: usize> Table<N> {
    const BITS: u32 = N.trailing_zeros();

    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self { slots: [const { Slot { tp: AtomicUsize::new(0), state: AtomicPtr::new(std::ptr::null_mut()) } }; N] }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            slots: std::array::from_fn(|_| Slot {
                tp: AtomicUsize::new(0),
                state: AtomicPtr::new(std::ptr::null_mut()),
            }),
        }
    }

    /// The slot of thread pointer `tp`.
    #[inline(always)]
    pub(crate) fn slot(&self, tp: usize) -> &Slot {
        &self.slots[hash(tp, Self::BITS)]
    }

    /// The state of the thread whose pointer is `tp` (the caller), if it holds its slot.
    #[inline(always)]
    pub(crate) fn lookup(&self, tp: usize) -> Option<*const ThreadState> {
        let s = self.slot(tp);
        // Relaxed (both): only the owner stores its thread pointer into a slot and only the
        // owner clears it, so a match means this thread took the slot, and `state` is then
        // this thread's own earlier store (program order; earlier owners' stores precede it in
        // the state's modification order: see `take`). An owner that has exited cleared the
        // slot before its TCB could be reused (see the module docs).
        if s.tp.load(Ordering::Relaxed) == tp { Some(s.state.load(Ordering::Relaxed).cast_const()) } else { None }
    }

    /// Takes the slot of `tp` for the calling thread (pointer `tp`, state `state`) if it is
    /// free; `true` if the thread holds it now.
    pub(crate) fn take(&self, tp: usize, state: *const ThreadState) -> bool {
        let s = self.slot(tp);
        // Acquire (success): pairs with the Release of the previous owner's `release`, so its
        // store of its state precedes ours in the state's modification order and our look-ups
        // read ours (without it, the previous owner's store could come later in that order:
        // the loom model finds that). Relaxed on failure: nothing is read then.
        match s.tp.compare_exchange(0, tp, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {
                // Relaxed: read by this thread only (`lookup`), after this store.
                s.state.store(state.cast_mut(), Ordering::Relaxed);
                true
            }
            Err(held) => held == tp,
        }
    }

    /// Frees the slot of the calling thread (pointer `tp`) if it holds it.
    pub(crate) fn release(&self, tp: usize) {
        // Release: pairs with the Acquire of the next owner's `take` (see there). A thread that
        // reuses this TCB starts after this thread is gone (see the module docs).
        let _ = self.slot(tp).tp.compare_exchange(tp, 0, Ordering::Release, Ordering::Relaxed);
    }

    /// Frees every slot (a fork child: async-signal-safe, plain stores).
    pub(crate) fn clear(&self) {
        for s in &self.slots {
            // Relaxed: the child has one thread, this one.
            s.tp.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(not(loom))]
pub(crate) use shipped::state_of_this_thread;

/// `ThreadState::cache_entry`: the thread never held a slot.
pub(crate) const NEVER: usize = 0;
/// `ThreadState::cache_entry`: the thread's slot was released at its exit: take none again.
pub(crate) const RELEASED: usize = 1;
/// `ThreadState::cache_entry`: the thread has taken a slot (and set the key that releases it).
pub(crate) const TAKEN: usize = 2;

#[cfg(not(loom))]
mod shipped {
    use super::*;

    static TABLE: Table<TABLE_LEN> = Table::new();

    /// The pthread key whose destructor releases a thread's slot (its value: the thread
    /// pointer). `KEY_NONE` until the first take; `KEY_FAILED` when no key could be created
    /// (then no slot is ever taken: every emit takes the slow path).
    static KEY: AtomicUsize = AtomicUsize::new(KEY_NONE);
    const KEY_NONE: usize = usize::MAX;
    const KEY_FAILED: usize = usize::MAX - 1;

    /// The calling thread's pointer: `%fs:0` (x86-64), `tpidr_el0` (aarch64); `None` elsewhere.
    #[inline(always)]
    pub(crate) fn thread_pointer() -> Option<usize> {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            let tp: usize;
            // SAFETY: on x86-64 Linux `%fs` is the thread pointer and `%fs:0` holds the TCB's
            // own address (the x86-64 TLS ABI; glibc and musl both keep it): a readable,
            // aligned word for the thread's whole life. Reads memory only, no flags, no stack.
            unsafe {
                std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags, pure))
            };
            Some(tp)
        }
        #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
        {
            let tp: usize;
            // SAFETY: reading `tpidr_el0` (the thread pointer) is always permitted at EL0.
            unsafe {
                std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags, pure))
            };
            Some(tp)
        }
        #[cfg(not(any(
            all(target_arch = "x86_64", target_os = "linux"),
            all(target_arch = "aarch64", target_os = "linux")
        )))]
        {
            None
        }
    }

    /// The calling thread's [`ThreadState`]; `thread_local` gives its address through the
    /// thread-local (the slow path's way, and other targets').
    #[inline(always)]
    pub(crate) fn state_of_this_thread(thread_local: fn() -> &'static ThreadState) -> &'static ThreadState {
        match thread_pointer() {
            Some(tp) => match TABLE.lookup(tp) {
                // SAFETY: a slot whose thread pointer is ours holds this thread's state (see
                // `Table::lookup`): its `THREAD`, const-initialised and without a destructor,
                // valid for the thread's whole life; `ThreadState` is `!Sync`, so the
                // reference stays on this thread.
                Some(s) => unsafe { &*s },
                None => slow(tp, thread_local),
            },
            None => thread_local(),
        }
    }

    #[cold]
    #[inline(never)]
    fn slow(tp: usize, thread_local: fn() -> &'static ThreadState) -> &'static ThreadState {
        let t = thread_local();
        match t.cache_entry.get() {
            RELEASED => {}
            NEVER => {
                let Some(key) = key() else { return t };
                if TABLE.take(tp, t) {
                    // SAFETY: `key` is a key this library created and has not deleted (only its
                    // unloading deletes it, and then this code is gone too).
                    if unsafe { libc::pthread_setspecific(key, tp as *const libc::c_void) } == 0 {
                        t.cache_entry.set(TAKEN);
                    } else {
                        // No destructor would release it: give it back now.
                        TABLE.release(tp);
                        t.cache_entry.set(RELEASED);
                    }
                }
            }
            // Held by another thread, or emptied by a fork: the key is set already.
            _ => {
                TABLE.take(tp, t);
            }
        }
        t
    }

    /// The key, created at the first take (cold); `None` if it could not be.
    fn key() -> Option<libc::pthread_key_t> {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a valid out-pointer; the destructor is a plain function of this
            // library (see `delete_key_at_unload`).
            let ok = unsafe { libc::pthread_key_create(&mut key, Some(release_at_exit)) } == 0;
            // Relaxed: `Once` orders this store before every later `call_once` return.
            KEY.store(if ok { key as usize } else { KEY_FAILED }, Ordering::Relaxed);
            // SAFETY: a plain function pointer for the child (it only stores zeros); none for
            // the parent.
            unsafe { libc::pthread_atfork(None, None, Some(clear_in_child)) };
        });
        // Relaxed: see above.
        match KEY.load(Ordering::Relaxed) {
            KEY_NONE | KEY_FAILED => None,
            k => Some(k as libc::pthread_key_t),
        }
    }

    /// The key's destructor, on the exiting thread after its TLS destructors (`value`: its
    /// thread pointer): frees its slot and marks its state so that it takes none again.
    extern "C" fn release_at_exit(value: *mut libc::c_void) {
        TABLE.release(value as usize);
        // `THREAD` has no destructor: still there while the key destructors run.
        crate::correlation::thread_state_slow().cache_entry.set(RELEASED);
    }

    /// `pthread_atfork` child handler: see the module docs, *Fork*.
    extern "C" fn clear_in_child() {
        TABLE.clear();
    }

    /// Deletes the key when the library is unloaded (`dlclose` of a library that is not
    /// `NODELETE`): no thread's exit may call `release_at_exit` once it is unmapped. (In an
    /// executable this runs at `exit`, after which no thread's exit matters.)
    extern "C" fn delete_key_at_unload() {
        // Relaxed: a library is unloaded after every use of it (the loader's lock orders them).
        match KEY.load(Ordering::Relaxed) {
            KEY_NONE | KEY_FAILED => {}
            // SAFETY: the key this library created; nothing of this library runs after this.
            k => unsafe {
                libc::pthread_key_delete(k as libc::pthread_key_t);
            },
        }
    }

    #[used]
    #[unsafe(link_section = ".fini_array")]
    static DELETE_KEY_AT_UNLOAD: extern "C" fn() = delete_key_at_unload;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn state(n: usize) -> *const ThreadState {
        std::ptr::without_provenance(0x1000 * n)
    }

    /// Two thread pointers that share a slot of a `Table<N>`, and one that does not.
    fn pointers<const N: usize>() -> (usize, usize, usize) {
        let a = 0x7f00_0000_0640usize;
        let bits = N.trailing_zeros();
        let same = (1..).map(|k| a + k * 0x80_1000).find(|&p| hash(p, bits) == hash(a, bits)).expect("a collision");
        let other = (1..).map(|k| a + k * 0x80_1000).find(|&p| hash(p, bits) != hash(a, bits)).expect("another slot");
        (a, same, other)
    }

    #[test]
    fn only_the_owner_matches_its_slot() {
        let t = Table::<4>::new();
        let (a, b, c) = pointers::<4>();
        assert_eq!(t.lookup(a), None, "an empty table");
        assert!(t.take(a, state(1)));
        assert_eq!(t.lookup(a), Some(state(1)));
        assert!(!t.take(b, state(2)), "a slot held by a live thread is left to it");
        assert_eq!(t.lookup(b), None, "a thread sharing the slot takes the slow path");
        assert!(t.take(c, state(3)));
        assert_eq!(t.lookup(c), Some(state(3)));
        assert!(t.take(a, state(1)), "taking one's own slot again is a success");
        t.release(b);
        assert_eq!(t.lookup(a), Some(state(1)), "only the owner's release frees a slot");
        t.release(a);
        assert_eq!(t.lookup(a), None, "a thread reusing the dead owner's TCB finds nothing");
        assert!(t.take(b, state(2)));
        assert_eq!(t.lookup(b), Some(state(2)));
        assert_eq!(t.lookup(a), None);
        t.clear();
        assert_eq!((t.lookup(b), t.lookup(c)), (None, None), "a fork child's table is empty");
    }

    #[test]
    fn the_hash_spreads_thread_stacks() {
        // glibc's thread stacks (8 MiB + a guard page apart, the TCB at each one's top): 1024
        // of them in the shipped table, few sharing a slot.
        let mut used = std::collections::HashSet::new();
        for k in 0..1024usize {
            used.insert(hash(0x7f00_0000_0640 + k * 0x80_1000, TABLE_BITS));
        }
        assert!(used.len() > 1000, "{} slots for 1024 threads", used.len());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A thread takes its slot, uses it and releases it (its exit) while another thread whose
    /// pointer shares the slot tries to take it and looks itself up; then a third thread with
    /// the first one's pointer (a reused TCB) starts. No look-up ever returns another thread's
    /// state.
    #[test]
    fn loom_a_slot_hands_out_only_its_owners_state() {
        loom::model(|| {
            let t = Arc::new(Table::<2>::new());
            let bits = 1;
            let a = 0x7f00_0000_0640usize;
            let b = (1..).map(|k| a + k * 0x80_1000).find(|&p| hash(p, bits) == hash(a, bits)).expect("collision");
            let (sa, sb, sc) = (
                std::ptr::without_provenance::<ThreadState>(0x1000),
                std::ptr::without_provenance::<ThreadState>(0x2000),
                std::ptr::without_provenance::<ThreadState>(0x3000),
            );
            let t2 = t.clone();
            let first = loom::thread::spawn(move || {
                if t2.take(a, sa) {
                    assert_eq!(t2.lookup(a), Some(sa));
                    t2.release(a);
                }
                assert_eq!(t2.lookup(a), None);
            });
            let t3 = t.clone();
            let other = loom::thread::spawn(move || {
                let took = t3.take(b, sb);
                let got = t3.lookup(b);
                assert!(got.is_none() || got == Some(sb));
                assert!(!took || got == Some(sb));
            });
            first.join().expect("first");
            // The first thread is gone: a thread on its TCB.
            let reuse = loom::thread::spawn({
                let t = t.clone();
                move || {
                    assert_eq!(t.lookup(a), None, "the dead thread's state");
                    if t.take(a, sc) {
                        assert_eq!(t.lookup(a), Some(sc));
                    }
                }
            });
            reuse.join().expect("reuse");
            other.join().expect("other");
        });
    }
}
