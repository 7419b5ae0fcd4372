//! In-flight tracking: which threads are inside a context's callbacks, and which hold open
//! enter/exit pairs — without a shared counter on the record path.
//!
//! Each thread that delivers anything owns a [`ThreadSlot`] (registered once, reused after the
//! thread exits). Only the owner writes it: `busy` has bit `i` set while the thread is between
//! the gate check of context slot `i` and the return of its callback (or buffer write); `open[i]`
//! counts its pairs of context `i` whose enter was delivered and whose exit was not yet. So the
//! record path does plain loads and stores on its own cache line: no read-modify-write, no line
//! shared with other threads, no contention.
//!
//! Stopping is the other side of a Dekker handshake. The emitter stores its `busy` bit, then
//! reads the context's `active` flag; the stopper clears `active`, then reads every thread's
//! `busy`. Both sides need a full fence between their store and their load. The emitter's is
//! a compiler fence when the process is registered for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! and the stopper's is that system call (an IPI that runs a full barrier on every running thread
//! of the process: the asymmetric fence of liburcu and folly); otherwise both use
//! `fence(SeqCst)`. Either way: after `stop` has seen every `busy` bit clear, no thread can still
//! deliver an enter to the context, and every callback that started has returned.
//!
//! Thread teardown. A thread's slot is owned by a thread-local with a destructor; runtimes keep
//! emitting after it ran (glibc destroys the main thread's thread-locals at the start of
//! `exit()`, before the static destructors that tear the SYCL runtime down). From then on:
//! - instants, activity and enters go through one process-wide *late* slot, taken with a
//!   try-lock; when another thread holds it the emit is not delivered and counted
//!   ([`late_lost`]). A delivered enter keeps the slot held by its thread until its exit (its
//!   frame and pairs live there; nested calls and instants re-enter it), so the thread's pairs
//!   stay whole; the late slot is never reused, and destroy waits for its pairs like a live
//!   thread's;
//! - exits of calls entered before the teardown use the dying slot, which is not reusable while
//!   those pairs are open; an exit touches the slot's frames only before it closes its pairs, so
//!   a thread that reuses the slot afterwards never races it. Destroy does not wait for such
//!   pairs (the thread may never exit the call); the exit is gated by the context's `exits` flag
//!   with the same handshake as `active`, so it is delivered unless destroy has begun.

#![allow(unsafe_code)] // membarrier(2)

use std::cell::{Cell, UnsafeCell};
use std::sync::Mutex;
// Process-wide state (the slot registry, membarrier's registration, the late slot) stays on
// `std` atomics in statics; the handshake's state (a slot's words, its fences) goes through the
// `sync` facade, so the loom models below check this code.
use std::sync::atomic::{AtomicPtr, AtomicU8, compiler_fence};

use crate::sync::{self, AtomicBool, AtomicU32, AtomicU64, GateFlag, Ordering, fence};

use crate::callback::UserData;
use crate::context::MAX_CONTEXTS;
use crate::correlation::ThreadState;

/// One thread's in-flight state (see the module docs). Leaked: slots live for the process and
/// are reused by later threads.
pub(crate) struct ThreadSlot {
    busy: AtomicU32,
    open: [AtomicU32; MAX_CONTEXTS],
    alive: AtomicBool,
    /// Bit `f` set = frame `f` holds an open call. Owner-only (Relaxed, no RMW needed).
    used_frames: AtomicU64,
    /// Per-call state kept between enter and exit, so the token stays 16 bytes (registers).
    frames: [UnsafeCell<Frame>; MAX_FRAMES],
}

/// How many traced calls one thread may have open at once (nesting depth); deeper calls are
/// not delivered (the enter returns an empty token, so pairing holds).
pub const MAX_FRAMES: usize = 64;

/// What a call keeps from its enter to its exit.
#[derive(Clone, Copy)]
pub(crate) struct Frame {
    pub(crate) user: [UserData; MAX_CONTEXTS],
    /// The handle of each context the enter was delivered to: its exit goes to that context
    /// only while the slot still hosts it (a destroyed context's abandoned pairs get nothing).
    pub(crate) handle: [u64; MAX_CONTEXTS],
    /// The external correlation id each context's enter record carried (read before the enter
    /// callback ran): the exit record and the buffer record of the call carry the same one.
    pub(crate) external: [u64; MAX_CONTEXTS],
    /// The thread's current correlation id before this call.
    pub(crate) previous: u64,
    /// Enter timestamp (buffer services only).
    pub(crate) start: u64,
}

// SAFETY: `frames` is read and written only by the owning thread (the one whose `OWNER` holds
// the slot); other threads read only the atomics.
unsafe impl Sync for ThreadSlot {}

static THREADS: Mutex<Vec<&'static ThreadSlot>> = Mutex::new(Vec::new());

/// Whether emitters may use a compiler fence (the stopper issues membarrier). Starts `false`
/// (full fences on both sides); set once registration succeeded. A stale `false` read by an
/// emitter only costs it a real fence.
static ASYMMETRIC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static REGISTERED: std::sync::Once = std::sync::Once::new();

const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(cmd: libc::c_long) -> libc::c_long {
    // SAFETY: membarrier takes (cmd, flags, cpu_id) integers and touches no user memory.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) }
}

/// Registration state: not started, running on its background thread, finished (either way).
const REG_IDLE: u8 = 0;
const REG_RUNNING: u8 = 1;
const REG_DONE: u8 = 2;
static REG_STATE: AtomicU8 = AtomicU8::new(REG_IDLE);

/// Registers the process for expedited membarrier, once (cold: at the first context), on a
/// background thread: the registration waits for an RCU grace period in the kernel (9 ms
/// measured on the development VM), which must not stall the application thread that created
/// the first context (the runtime's, during its initialisation). Until it finishes, emitters use
/// full fences (`ASYMMETRIC` is still false) and stoppers wait for it (see [`heavy_fence`]).
pub(crate) fn init() {
    REGISTERED.call_once(|| {
        if std::env::var_os("OFFTRACE_NO_MEMBARRIER").is_some() {
            REG_STATE.store(REG_DONE, Ordering::Release);
            return;
        }
        REG_STATE.store(REG_RUNNING, Ordering::Release);
        let spawned = std::thread::Builder::new().name("offtrace-membar".into()).spawn(register_membarrier);
        if spawned.is_err() {
            register_membarrier();
        }
    });
}

fn register_membarrier() {
    let supported = membarrier(MEMBARRIER_CMD_QUERY);
    let want = MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    if supported >= 0 && supported & want == want && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 {
        // Release: nothing to publish beyond the flag; emitters read it Relaxed (see above).
        ASYMMETRIC.store(true, Ordering::Release);
    }
    // Release: the flag's final value happens-before a stopper's Acquire of DONE.
    REG_STATE.store(REG_DONE, Ordering::Release);
}

/// Whether the asymmetric (membarrier) fences are in use.
pub fn asymmetric_fences() -> bool {
    ASYMMETRIC.load(Ordering::Relaxed)
}

/// The emitter's fence between its `busy` store and its `active` load.
#[inline(always)]
fn light_fence() {
    if ASYMMETRIC.load(Ordering::Relaxed) {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The stopper's fence between its `active` store and its `busy` loads.
pub(crate) fn heavy_fence() {
    // While the registration runs, an emitter may already read `ASYMMETRIC` true (and use a
    // compiler fence) while this thread would still read false: wait for its final value. Once,
    // a few milliseconds at most, and never on a record path.
    // Acquire: pairs with `register_membarrier`'s Release of DONE.
    while REG_STATE.load(Ordering::Acquire) == REG_RUNNING {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    if ASYMMETRIC.load(Ordering::Acquire) {
        if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
            return;
        }
        // Cannot fail once registered; if it did, emitters may be using compiler fences only,
        // and nothing here could order them: never disable the fast path silently.
        std::process::abort();
    }
    fence(Ordering::SeqCst);
}

struct SlotOwner(Cell<Option<&'static ThreadSlot>>);

impl Drop for SlotOwner {
    fn drop(&mut self) {
        if let Some(s) = self.0.get() {
            // Later emits of this thread must not use the slot (another thread may reuse it once
            // its pairs are closed): only exits of already open calls reach it, via `dying_slot`.
            let t = crate::correlation::thread_state();
            t.slot.set(None);
            t.dying_slot.set(Some(s));
            // Release: the slot's last writes happen-before a reuser's Acquire.
            s.alive.store(false, Ordering::Release);
        }
    }
}

/// The late slot (see the module docs): registered in `THREADS` (so `quiesce` waits for its
/// callbacks), always `alive` (never reused), used by one thread at a time under `LATE_LOCK`.
static LATE: AtomicPtr<ThreadSlot> = AtomicPtr::new(std::ptr::null_mut());
static LATE_LOCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static LATE_LOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Instants and activity records of threads in teardown that were not delivered because another
/// such thread held the late slot at that moment (since the process started).
pub fn late_lost() -> u64 {
    LATE_LOST.load(Ordering::Relaxed)
}

/// Takes the late slot for the calling thread (in teardown); `None` (counted in [`late_lost`])
/// when another thread holds it. Release it with [`release_late_slot`].
#[cold]
#[inline(never)]
pub(crate) fn take_late_slot(t: &ThreadState) -> Option<&'static ThreadSlot> {
    t.thread_id(); // cached for the record paths (`ThreadState::cached_thread_id`)
    let depth = t.late_depth.get();
    if depth > 0 {
        // Already ours (an open late call, or a callback of one): re-entrant.
        t.late_depth.set(depth + 1);
        // SAFETY: set before the first holder got it; leaked, lives for the process.
        return Some(unsafe { &*LATE.load(Ordering::Acquire) });
    }
    // Acquire: the previous holder's slot writes (busy bits) happen-before ours.
    if LATE_LOCK.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        LATE_LOST.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let mut p = LATE.load(Ordering::Acquire);
    if p.is_null() {
        let mut all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let s = new_slot();
        s.alive.store(true, Ordering::Relaxed);
        all.push(s);
        p = (s as *const ThreadSlot).cast_mut();
        // Release: publishes the initialised slot to later holders' Acquire (they also hold
        // LATE_LOCK, which orders it already).
        LATE.store(p, Ordering::Release);
    }
    t.late_depth.set(1);
    // SAFETY: `p` came from `new_slot` (leaked, lives for the process).
    Some(unsafe { &*p })
}

/// Gives the late slot back.
#[cold]
pub(crate) fn release_late_slot(t: &ThreadState) {
    let depth = t.late_depth.get().saturating_sub(1);
    t.late_depth.set(depth);
    if depth == 0 {
        // Release: our slot writes happen-before the next holder's Acquire.
        LATE_LOCK.store(false, Ordering::Release);
    }
}

fn new_slot() -> &'static ThreadSlot {
    Box::leak(Box::new(ThreadSlot::new()))
}

thread_local! {
    static OWNER: SlotOwner = const { SlotOwner(Cell::new(None)) };
}

/// This thread's slot, registering it on first use. `None` during thread teardown.
#[inline(always)]
pub(crate) fn thread_slot(t: &ThreadState) -> Option<&'static ThreadSlot> {
    match t.slot.get() {
        Some(s) => Some(s),
        None => register_current(t),
    }
}

#[cold]
#[inline(never)]
fn register_current(t: &ThreadState) -> Option<&'static ThreadSlot> {
    let s = OWNER
        .try_with(|o| match o.0.get() {
            Some(s) => s,
            None => register(o),
        })
        .ok()?;
    t.thread_id(); // cached for the record paths (`ThreadState::cached_thread_id`)
    t.slot.set(Some(s));
    Some(s)
}

#[cold]
#[inline(never)]
fn register(o: &SlotOwner) -> &'static ThreadSlot {
    let mut all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    // Acquire: pairs with the dead owner's Release in `SlotOwner::drop`.
    let reusable = all.iter().copied().find(|s| {
        !s.alive.load(Ordering::Acquire)
            && s.busy.load(Ordering::Acquire) == 0
            && s.open.iter().all(|n| n.load(Ordering::Acquire) == 0)
    });
    if let Some(s) = reusable {
        // No open pair: every frame the dead owner took was freed before its last pair closed,
        // except frames of enters it never finished (thread killed mid-enter): free them.
        s.used_frames.store(0, Ordering::Relaxed);
    }
    let slot = match reusable {
        Some(s) => s,
        None => {
            let s = new_slot();
            all.push(s);
            s
        }
    };
    slot.alive.store(true, Ordering::Relaxed);
    o.0.set(Some(slot));
    slot
}

impl ThreadSlot {
    pub(crate) fn new() -> Self {
        ThreadSlot {
            busy: AtomicU32::new(0),
            open: std::array::from_fn(|_| AtomicU32::new(0)),
            alive: AtomicBool::new(false),
            used_frames: AtomicU64::new(0),
            frames: [const {
                UnsafeCell::new(Frame {
                    user: [UserData { value: 0 }; MAX_CONTEXTS],
                    handle: [0; MAX_CONTEXTS],
                    external: [0; MAX_CONTEXTS],
                    previous: 0,
                    start: 0,
                })
            }; MAX_FRAMES],
        }
    }

    /// This thread's busy word (owner only; Relaxed: only the owner writes it). Non-zero while
    /// the thread delivers through this slot: emits use it as the re-entrancy guard of callback
    /// deliveries (no flag written around each callback). Busy sections nest balanced (each
    /// [`Self::leave`] restores the word its enter found), so the value read once before a
    /// sequence of sections is the `before` of each of them: no load per section.
    #[inline(always)]
    pub(crate) fn busy_word(&self) -> u32 {
        self.busy.load(Ordering::Relaxed)
    }

    /// Marks this thread busy in context slot `i` (the word was `before`) and checks `active`.
    /// `true`: the caller may deliver and must call [`Self::leave`]`(before)`; `false`: not
    /// active, nothing to undo.
    #[inline(always)]
    pub(crate) fn enter_if_active(&self, before: u32, i: usize, active: &impl GateFlag) -> bool {
        self.busy.store(before | (1 << i), Ordering::Relaxed);
        light_fence();
        // Relaxed: ordered against the stopper's store by the fence pair (module docs).
        if active.load_relaxed() {
            return true;
        }
        self.busy.store(before, Ordering::Release);
        false
    }

    /// Ends a busy section, restoring the word its enter found. Release: the callback's effects
    /// happen-before the stopper's Acquire.
    #[inline(always)]
    pub(crate) fn leave(&self, before: u32) {
        self.busy.store(before, Ordering::Release);
    }

    /// Takes a free frame (owner thread only).
    #[inline(always)]
    pub(crate) fn alloc_frame(&self) -> Option<u8> {
        let used = self.used_frames.load(Ordering::Relaxed);
        if used == u64::MAX {
            return None;
        }
        let f = (!used).trailing_zeros();
        self.used_frames.store(used | (1 << f), Ordering::Relaxed);
        Some(f as u8)
    }

    /// Returns a frame (owner thread only).
    #[inline(always)]
    pub(crate) fn free_frame(&self, f: u8) {
        let used = self.used_frames.load(Ordering::Relaxed);
        self.used_frames.store(used & !(1u64 << (f as u32 % 64)), Ordering::Relaxed);
    }

    /// The frame `f`.
    ///
    /// # Safety
    /// Only the owning thread may call this, and it must not hold another reference to the
    /// same frame.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn frame(&self, f: u8) -> &mut Frame {
        // SAFETY: owner-only access (the caller's contract), so no other reference exists.
        unsafe { &mut *self.frames[usize::from(f) % MAX_FRAMES].get() }
    }

    #[inline(always)]
    pub(crate) fn open_pair(&self, i: usize) {
        let n = self.open[i].load(Ordering::Relaxed);
        self.open[i].store(n + 1, Ordering::Relaxed);
    }

    /// Release: the exit's use of the context happens-before destroy's Acquire of 0.
    #[inline(always)]
    pub(crate) fn close_pair(&self, i: usize) {
        let n = self.open[i].load(Ordering::Relaxed);
        self.open[i].store(n.saturating_sub(1), Ordering::Release);
    }
}

/// After `active` was cleared: waits until no thread is busy in context slot `i` (the calling
/// thread's own busy bit excepted: a callback may stop its own context), and, with
/// `pairs_until`, until no other live thread holds an open pair of it or the deadline passes
/// (the calling thread's own pairs are never waited for). Returns how many threads still held
/// open pairs at the deadline (abandoned: see `context::destroy_context`).
pub(crate) fn quiesce(i: usize, pairs_until: Option<std::time::Instant>) -> u32 {
    heavy_fence();
    let me = OWNER.try_with(|o| o.0.get()).ok().flatten().map(|s| s as *const ThreadSlot);
    // A callback run through the late slot may stop its own context too.
    let late = if crate::correlation::thread_state().late_depth.get() > 0 {
        Some(LATE.load(Ordering::Relaxed).cast_const())
    } else {
        None
    };
    let slots: Vec<&'static ThreadSlot> = THREADS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut abandoned = 0;
    for s in slots {
        let p = s as *const ThreadSlot;
        let own = me == Some(p) || late == Some(p);
        if s.wait_idle_until(i, own, pairs_until.is_some(), pairs_until) {
            abandoned += 1;
        }
    }
    abandoned
}

impl ThreadSlot {
    /// The stopper's wait on one slot, after its `active` store and [`heavy_fence`]: until the
    /// slot's thread is not busy in context slot `i` (unless `own`: the caller's own slot) and,
    /// with `open_pairs`, holds no open pair of it while alive (never for `own`).
    #[cfg(all(test, loom))]
    pub(crate) fn wait_idle(&self, i: usize, own: bool, open_pairs: bool) {
        self.wait_idle_until(i, own, open_pairs, None);
    }

    /// [`Self::wait_idle`], waiting for open pairs only until `deadline` (when given); `true`
    /// when pairs were still open then (abandoned; busy sections are still waited for).
    pub(crate) fn wait_idle_until(
        &self,
        i: usize,
        own: bool,
        open_pairs: bool,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        let mut spins = 0u32;
        let mut open_pairs = open_pairs && !own;
        let mut abandoned = false;
        loop {
            // Acquire: pairs with `leave` / `close_pair`.
            let busy = !own && self.busy.load(Ordering::Acquire) & (1 << i) != 0;
            let mut open =
                open_pairs && self.alive.load(Ordering::Acquire) && self.open[i].load(Ordering::Acquire) != 0;
            if open && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                abandoned = true;
                open_pairs = false;
                open = false;
            }
            if !busy && !open {
                return abandoned;
            }
            sync::spin_wait(&mut spins);
        }
    }
}

/// Whether the calling thread is inside a delivery: a buffer callback or a callback of an
/// exit in teardown (`in_callback`), or a callback or buffer write through its own slot or the
/// late slot (a busy bit).
pub(crate) fn delivering(t: &ThreadState) -> bool {
    let own = t.slot.get().is_some_and(|s| s.busy_word() != 0);
    // The late slot counts only while this thread holds it (`late_depth`); its busy word is
    // then this thread's.
    let late = t.late_depth.get() > 0 && {
        // SAFETY: set before the first holder got it (we hold it); leaked, lives for the process.
        let l = unsafe { &*LATE.load(Ordering::Acquire) };
        l.busy_word() != 0
    };
    t.in_callback.get() || own || late
}

/// The stop/destroy handshake on its fence path (`fence(SeqCst)` on both sides: no process is
/// registered for membarrier under loom), through the shipped `enter_if_active` / `leave` /
/// `open_pair` / `close_pair` of the emitter and `heavy_fence` / `wait_idle` of the stopper. The
/// context's state is a loom cell: an emitter's callback reads it, the stopper writes it once it
/// returns, so loom reports any interleaving where the two are not ordered.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as LoomUnsafeCell;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;

    const LIVE: u32 = 1;
    const DEAD: u32 = 2;

    struct Context {
        active: AtomicBool,
        state: LoomUnsafeCell<u32>,
    }

    fn callback(ctx: &Context) {
        // SAFETY: a read; loom checks it against the stopper's write.
        let s = ctx.state.with(|p| unsafe { *p });
        assert_eq!(s, LIVE, "a callback ran on a stopped context");
    }

    /// Two emitters deliver through their slots while the context is stopped: after `stop`
    /// (clear `active`, fence, wait for every busy bit), no callback is running or can start.
    #[test]
    fn loom_stop_waits_for_every_callback_and_no_callback_starts_after_it() {
        loom::model(|| {
            let ctx = Arc::new(Context { active: AtomicBool::new(true), state: LoomUnsafeCell::new(LIVE) });
            let slots: Vec<Arc<ThreadSlot>> = (0..2).map(|_| Arc::new(ThreadSlot::new())).collect();
            let emitters: Vec<_> = slots
                .iter()
                .map(|slot| {
                    let (ctx, slot) = (ctx.clone(), slot.clone());
                    loom::thread::spawn(move || {
                        if slot.enter_if_active(0, 0, &ctx.active) {
                            callback(&ctx);
                            slot.leave(0);
                        }
                    })
                })
                .collect();
            ctx.active.store(false, Ordering::SeqCst);
            heavy_fence();
            for s in &slots {
                s.wait_idle(0, false, false);
            }
            // SAFETY: the write loom checks against every callback's read.
            ctx.state.with_mut(|p| unsafe { *p = DEAD });
            for e in emitters {
                e.join().expect("emitter");
            }
        });
    }

    /// An enter/exit pair across a destroy that waits for the open pair: the exit passes the
    /// `exits` gate, which destroy closes only after the pair closed, so the exit's callback
    /// is delivered and still sees the context alive.
    #[test]
    fn loom_destroy_waits_for_open_pairs() {
        loom::model(|| {
            let ctx = Arc::new(Context { active: AtomicBool::new(true), state: LoomUnsafeCell::new(LIVE) });
            let exits = Arc::new(AtomicBool::new(true));
            let slot = Arc::new(ThreadSlot::new());
            slot.alive.store(true, Ordering::Relaxed);
            let emitter = {
                let (ctx, exits, slot) = (ctx.clone(), exits.clone(), slot.clone());
                loom::thread::spawn(move || {
                    if slot.enter_if_active(0, 0, &ctx.active) {
                        callback(&ctx);
                        slot.open_pair(0);
                        slot.leave(0);
                        // The exit: through the exit gate, then the pair closes.
                        assert!(slot.enter_if_active(0, 0, &*exits), "destroy closed the gate before the pair closed");
                        callback(&ctx);
                        slot.leave(0);
                        slot.close_pair(0);
                    }
                })
            };
            ctx.active.store(false, Ordering::SeqCst);
            heavy_fence();
            slot.wait_idle(0, false, true);
            exits.store(false, Ordering::SeqCst);
            heavy_fence();
            slot.wait_idle(0, false, false);
            // SAFETY: as above.
            ctx.state.with_mut(|p| unsafe { *p = DEAD });
            emitter.join().expect("emitter");
        });
    }

    /// A destroy that abandons the open pair (its bounded wait ran out; modelled as no wait):
    /// the exit either passed the gate before destroy closed it (and destroy waits for its
    /// callback) or is delivered to no one; never a callback on a destroyed context.
    #[test]
    fn loom_destroy_abandoning_an_open_pair_never_delivers_after_it() {
        loom::model(|| {
            let ctx = Arc::new(Context { active: AtomicBool::new(true), state: LoomUnsafeCell::new(LIVE) });
            let exits = Arc::new(AtomicBool::new(true));
            let slot = Arc::new(ThreadSlot::new());
            slot.alive.store(true, Ordering::Relaxed);
            let emitter = {
                let (ctx, exits, slot) = (ctx.clone(), exits.clone(), slot.clone());
                loom::thread::spawn(move || {
                    if slot.enter_if_active(0, 0, &ctx.active) {
                        callback(&ctx);
                        slot.open_pair(0);
                        slot.leave(0);
                        if slot.enter_if_active(0, 0, &*exits) {
                            callback(&ctx);
                            slot.leave(0);
                        }
                        slot.close_pair(0);
                    }
                })
            };
            ctx.active.store(false, Ordering::SeqCst);
            heavy_fence();
            slot.wait_idle(0, false, false);
            exits.store(false, Ordering::SeqCst);
            heavy_fence();
            slot.wait_idle(0, false, false);
            // SAFETY: as above.
            ctx.state.with_mut(|p| unsafe { *p = DEAD });
            emitter.join().expect("emitter");
        });
    }
}
