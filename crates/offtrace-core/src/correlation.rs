//! Correlation ids and the per-thread state of the services.
//!
//! Internal ids are unique per process: a thread takes a block of [`ID_BLOCK`] ids from one
//! global counter (one `fetch_add` per block) and hands them out locally, so threads never
//! contend on a shared line per call. Ids grow within a thread, not across threads; 0 = none.
//! Blocks are aligned to [`ID_BLOCK`], so the thread keeps one cell (the next id) and knows its
//! block is used up when that id is a multiple of [`ID_BLOCK`] (no second cell for the end: one
//! load less per id, on the path of every instant outside a call).
//!
//! External ids are the tool's own: a per-thread, per-context stack
//! ([`push_external_correlation_id`] / [`pop_external_correlation_id`]). Every record of a
//! context carries the top of the recording thread's stack for that context (0 when empty).
//!
//! The current API call: `emit_enter` makes its correlation id the thread's *current* one until
//! the matching `emit_exit`, so records of other kinds emitted inside the call (a kernel dispatch
//! inside `urEnqueueKernelLaunch`) carry the id of the API call that caused them.

#![allow(unsafe_code)] // `thread_state` hands out a reference to a destructor-free thread-local

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::{ContextId, MAX_CONTEXTS};
use crate::error::ServiceError;

/// Ids a thread takes from the global counter at once (a power of two: blocks are aligned).
pub const ID_BLOCK: u64 = 4096;
const _: () = assert!(ID_BLOCK.is_power_of_two());

/// Next free block start, a multiple of [`ID_BLOCK`]. Starts at one block: id 0 means "none"
/// (and a thread's `next_id` of 0 means "no block yet").
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(ID_BLOCK);

/// The per-thread state the record path reads. `const`-initialised and without `Drop`, so an
/// access is a plain TLS offset (no lazy-init check, no destructor registration) and works on
/// runtime threads that outlive `main`.
pub(crate) struct ThreadState {
    pub(crate) tid: Cell<u64>,
    /// Set while this thread runs a buffer callback or a callback of an exit in teardown:
    /// nested emits deliver nothing. (Other callback deliveries are marked by the thread's busy
    /// word in its slot instead: see [`crate::inflight::ThreadSlot::busy_word`].)
    pub(crate) in_callback: Cell<bool>,
    /// The next id to hand out; a multiple of [`ID_BLOCK`] (0 included) = take a new block.
    next_id: Cell<u64>,
    pub(crate) current: Cell<u64>,
    /// Top of the external correlation stack per context slot: (context handle, value).
    external_top: [Cell<(u64, u64)>; MAX_CONTEXTS],
    /// This thread's in-flight slot, once registered (see [`crate::inflight`]); `None` again
    /// once the slot's owner was dropped (thread teardown).
    pub(crate) slot: Cell<Option<&'static crate::inflight::ThreadSlot>>,
    /// The slot this thread owned until its teardown: only exits of calls entered before it
    /// use it (its open pairs keep it from being reused until they close).
    pub(crate) dying_slot: Cell<Option<&'static crate::inflight::ThreadSlot>>,
    /// Set while this thread holds the process-wide late slot (see [`crate::inflight`]).
    /// How many times this thread holds the late slot (nested late calls and their instants).
    pub(crate) late_depth: Cell<u32>,
    /// This thread's buffer staging per context slot (see [`crate::buffer`]).
    pub(crate) staging_cache: crate::buffer::StagingCache,
    /// The direct path's open API calls (see [`crate::direct`]): frames in use (bit per frame)
    /// and the frames.
    pub(crate) direct_used: Cell<u64>,
    pub(crate) direct: [Cell<crate::direct::DirectFrame>; crate::direct::DIRECT_FRAMES],
    /// The last calls of this thread that reported device work at enqueue: (correlation id,
    /// bit per kind). A ring: a backend nested in another's call (the OpenCL layer inside a UR
    /// call) asks, once that call is over, whether the enclosing backend reported the command.
    /// Here rather than in a thread-local of its own: the instant that notes a report has the
    /// thread state already, and in a shared object each thread-local is a `__tls_get_addr` call.
    reported: Cell<[(u64, u32); 8]>,
    /// The entry of `reported` the next new call takes: the oldest's.
    reported_next: Cell<u8>,
    /// The call whose commands a backend nested in it (the OpenCL layer inside a UR call) last
    /// said it delivers the device times of, and those commands' kinds (bit per kind): the
    /// mirror of `reported`, asked by the enclosing backend at the end of that call.
    delivered_below: Cell<(u64, u32)>,
    /// This thread's standing in the thread-pointer cache (see [`crate::thread_cache`]):
    /// `NEVER` before its first slow path, then `TAKEN` (it holds a slot) or `RELEASED`.
    #[cfg_attr(loom, allow(dead_code))] // under loom the record paths read `THREAD` directly
    pub(crate) cache_entry: Cell<usize>,
    /// The allocation table's last answers on this thread (see [`crate::allocation::lookup`]).
    pub(crate) allocation_memo: crate::allocation::AllocationMemo,
    /// The direct sink's word for this thread (see [`crate::direct::DirectThreadWord`]).
    pub(crate) direct_sink_word: crate::direct::DirectThreadWord,
    /// A backend's word for this thread (see [`crate::direct::backend_thread_word`]).
    pub(crate) backend_word: crate::direct::DirectThreadWord,
}

thread_local! {
    pub(crate) static THREAD: ThreadState = const {
        ThreadState {
            tid: Cell::new(0),
            in_callback: Cell::new(false),
            next_id: Cell::new(0),
            current: Cell::new(0),
            external_top: [const { Cell::new((0, 0)) }; MAX_CONTEXTS],
            slot: Cell::new(None),
            dying_slot: Cell::new(None),
            late_depth: Cell::new(0),
            staging_cache: [const { Cell::new((std::ptr::null(), std::ptr::null_mut())) }; MAX_CONTEXTS],
            direct_used: Cell::new(0),
            direct: [const { Cell::new(crate::direct::DirectFrame::EMPTY) }; crate::direct::DIRECT_FRAMES],
            reported: Cell::new([(0, 0); 8]),
            reported_next: Cell::new(0),
            delivered_below: Cell::new((0, 0)),
            cache_entry: Cell::new(0),
            allocation_memo: crate::generation::Memo::new(0, None),
            direct_sink_word: crate::direct::DirectThreadWord::new(),
            backend_word: crate::direct::DirectThreadWord::new(),
        }
    };
    /// Entries below the top of each external stack; touched only by push/pop.
    static EXTERNAL_BELOW: RefCell<[Vec<u64>; MAX_CONTEXTS]> = const { RefCell::new([const { Vec::new() }; MAX_CONTEXTS]) };
}

/// The calling thread's state, as a plain reference, without `__tls_get_addr` in a shared
/// object (how applications load offtrace): the thread-pointer cache of
/// [`crate::thread_cache`] (a `%fs:0` load, a hash, a table slot: no call), its slow path
/// through the thread-local on a thread's first emit. Read it once per emit and pass it down;
/// per-thread state the record paths need belongs in [`ThreadState`], not in a thread-local of
/// its own.
#[inline(always)]
pub(crate) fn thread_state() -> &'static ThreadState {
    #[cfg(not(loom))]
    {
        crate::thread_cache::state_of_this_thread(thread_state_slow)
    }
    #[cfg(loom)]
    {
        thread_state_slow()
    }
}

/// The calling thread's state through the thread-local: one `%fs`-relative address in an
/// executable, one `__tls_get_addr` call in a shared object (rustc's general-dynamic TLS model,
/// 1-2 ns on the development VM, `docs/overhead.md` "Tool API").
#[inline]
pub(crate) fn thread_state_slow() -> &'static ThreadState {
    // SAFETY: `THREAD` is const-initialised and has no destructor, so its storage is valid for
    // the whole life of the calling thread; `ThreadState` is `!Sync`, so the reference cannot
    // leave this thread.
    THREAD.with(|t| unsafe { &*(t as *const ThreadState) })
}

impl ThreadState {
    /// A fresh internal correlation id.
    #[inline]
    pub(crate) fn next_correlation_id(&self) -> u64 {
        let id = self.next_id.get();
        if id & (ID_BLOCK - 1) != 0 {
            self.next_id.set(id + 1);
            return id;
        }
        self.refill()
    }

    #[cold]
    #[inline(never)]
    fn refill(&self) -> u64 {
        // Relaxed: only uniqueness matters, which the RMW gives on its own.
        let start = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
        // `start` is a non-zero multiple of the block size: hand it out, keep the rest.
        self.next_id.set(start + 1);
        start
    }

    /// The kernel thread id, cached.
    #[inline]
    pub(crate) fn thread_id(&self) -> u64 {
        let t = self.tid.get();
        if t != 0 {
            return t;
        }
        let t = gettid();
        self.tid.set(t);
        t
    }

    /// The kernel thread id of a thread that has (or had) an in-flight slot or holds the late
    /// slot: taking one caches the id (`inflight::register_current`, `take_late_slot`), so the
    /// record paths read it without the check of [`Self::thread_id`].
    #[inline(always)]
    pub(crate) fn cached_thread_id(&self) -> u64 {
        let t = self.tid.get();
        debug_assert!(t != 0, "the thread id is cached when a thread takes a slot");
        t
    }

    /// The top of this thread's external stack for `ctx` (0 when empty or pushed for an older
    /// context in the same slot).
    #[inline]
    pub(crate) fn external(&self, slot: usize, ctx: ContextId) -> u64 {
        // Relaxed: see `EXTERNAL_IN_USE`.
        if !EXTERNAL_IN_USE.load(Ordering::Relaxed) {
            return 0;
        }
        let (h, v) = self.external_top[slot].get();
        if h == ctx.handle { v } else { process_external(slot, ctx) }
    }
}

#[cold]
fn gettid() -> u64 {
    // SAFETY: `gettid` has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let t = unsafe { libc::gettid() };
    t as u64
}

/// The calling thread's kernel thread id (what records carry as `thread_id`).
pub fn current_thread_id() -> u64 {
    thread_state().thread_id()
}

/// A fresh internal correlation id (for backends that correlate work outside an API call).
pub fn next_correlation_id() -> u64 {
    thread_state().next_correlation_id()
}

/// Notes that device work of `kind` was reported at enqueue inside the call `correlation` of
/// this thread (`t`, the caller's thread state; by `emit_instant`, phase NONE).
pub(crate) fn note_reported(t: &ThreadState, correlation: u64, kind: crate::Kind) {
    let bit = 1u32 << (kind.index() & 31);
    // Entry by entry in place: a copy of the whole ring out and back (`get`/`set`) cost more
    // than the search. A new call takes the oldest's entry where it is (the entries are asked
    // in any order) rather than moving the other seven down: the OpenCL layer notes a new call
    // at every kernel launch.
    let r: &Cell<[(u64, u32)]> = &t.reported;
    let ring = r.as_slice_of_cells();
    if let Some(e) = ring.iter().find(|e| e.get().0 == correlation) {
        let (c, bits) = e.get();
        e.set((c, bits | bit));
    } else {
        let next = usize::from(t.reported_next.get()) % ring.len();
        ring[next].set((correlation, bit));
        t.reported_next.set(((next + 1) % ring.len()) as u8);
    }
}

/// Whether device work of `kind` was reported at enqueue (phase NONE) inside the call with
/// correlation id `correlation`, one of the calling thread's last 8 calls that reported any.
/// The OpenCL layer on the SYCL path delivers a UR command's device times only when the SYCL
/// backend reported that command (`docs/record-model.md`, one record per command).
pub fn reported_in_call(correlation: u64, kind: crate::Kind) -> bool {
    let bit = 1u32 << (kind.index() & 31);
    thread_state().reported.get().iter().any(|e| e.0 == correlation && e.1 & bit != 0)
}

/// Called on the reporting thread, after the record, each time device work is reported at
/// enqueue inside a call: (that call's correlation id, kind). See [`set_reported_hook`].
pub type ReportedHook = fn(u64, crate::Kind);

static REPORTED_HOOK: std::sync::OnceLock<ReportedHook> = std::sync::OnceLock::new();

/// Installs the hook told of each command reported at enqueue inside a call (once per
/// process; a second hook is refused). The OpenCL layer on the SYCL path uses it to deliver the
/// device times of a UR call's OpenCL commands once the SYCL backend reported that command,
/// without waiting for the calling thread's next OpenCL call (a runtime worker thread may make
/// none). Costs the enqueue path one load when no hook is set.
pub fn set_reported_hook(hook: ReportedHook) -> Result<(), ServiceError> {
    REPORTED_HOOK.set(hook).map_err(|_| ServiceError::InvalidArgument)
}

/// The installed reported hook, if any (one load).
#[inline]
pub(crate) fn reported_hook() -> Option<ReportedHook> {
    REPORTED_HOOK.get().copied()
}

/// Notes, on the calling thread, that a backend nested in the call with correlation id
/// `correlation` delivers the device times of that call's command of `kind` (the OpenCL layer on
/// the SYCL path, which converts the device clock into the trace's with a recorded calibration).
/// Only the thread's latest such call is kept: the enclosing backend asks at the end of its call,
/// after its nested enqueues. See [`times_delivered_below`].
pub fn note_times_below(correlation: u64, kind: crate::Kind) {
    let t = thread_state();
    let bit = 1u32 << (kind.index() & 31);
    let (c, bits) = t.delivered_below.get();
    t.delivered_below.set((correlation, if c == correlation { bits | bit } else { bit }));
}

/// Whether a backend nested in the calling thread's call `correlation` said it delivers the
/// device times of that call's command of `kind` ([`note_times_below`]); the enclosing backend
/// (the SYCL backend, which reads the same command's times raw from the program's own profiling
/// queries) then leaves them to it (`docs/record-model.md`, one record per command).
pub fn times_delivered_below(correlation: u64, kind: crate::Kind) -> bool {
    let bit = 1u32 << (kind.index() & 31);
    let (c, bits) = thread_state().delivered_below.get();
    c == correlation && bits & bit != 0
}

/// The correlation id of the API call the calling thread is inside (0 = none).
pub fn current_correlation_id() -> u64 {
    thread_state().current.get()
}

fn check_thread(thread_id: u64) -> Result<(), ServiceError> {
    if thread_id == 0 || thread_id == current_thread_id() {
        Ok(())
    } else {
        // The stacks are thread-local so the record path reads them without a lock; pushing
        // for another thread would need a shared, locked structure.
        Err(ServiceError::InvalidArgument)
    }
}

/// Set (for good) by the first push or process-wide set of an external id: until then every
/// record's external id is 0 without a look-up (most tools never use them). Relaxed: a thread
/// that pushed reads its own store; a process-wide set that happens-before an emit (through
/// whatever the tool synchronises with) makes the emit read `true`, as it makes it read the
/// value; an emit concurrent with the set may carry either, as before.
static EXTERNAL_IN_USE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Per context slot: the process-wide external id (the context's handle, the value), carried by
/// records of threads whose own stack for the context is empty.
static PROCESS_HANDLE: [AtomicU64; MAX_CONTEXTS] = [const { AtomicU64::new(0) }; MAX_CONTEXTS];
static PROCESS_VALUE: [AtomicU64; MAX_CONTEXTS] = [const { AtomicU64::new(0) }; MAX_CONTEXTS];

/// The process-wide external id of `ctx` (0 = none).
#[inline]
fn process_external(slot: usize, ctx: ContextId) -> u64 {
    // Acquire: pairs with the Release in `set_process_external_correlation_id`, so the value
    // read is at least the one stored with this handle.
    if PROCESS_HANDLE[slot].load(Ordering::Acquire) == ctx.handle {
        PROCESS_VALUE[slot].load(Ordering::Relaxed)
    } else {
        0
    }
}

/// Sets the context's process-wide external correlation id (0 clears it): every record of the
/// context emitted by a thread whose own external stack for the context is empty carries it,
/// whichever thread emits it (worker threads of the runtime or of the application). A thread's
/// own stack, when not empty, wins. This is how a tool labels the work of the whole process
/// (a phase, an iteration) without pushing on every thread, as rocprofiler-sdk's fallback to
/// the main thread's id does.
pub fn set_process_external_correlation_id(ctx: ContextId, value: u64) -> Result<(), ServiceError> {
    let slot = crate::context::validate(ctx)?;
    EXTERNAL_IN_USE.store(true, Ordering::Relaxed);
    PROCESS_VALUE[slot].store(value, Ordering::Relaxed);
    // Release: the value above is visible to whoever reads this handle.
    PROCESS_HANDLE[slot].store(if value == 0 { 0 } else { ctx.handle }, Ordering::Release);
    Ok(())
}

/// Entries below the top of the external stacks of threads whose thread-locals are destroyed
/// (a tool's finalize inside `exit()`, a destructor): keyed by (thread id, context slot).
/// Only those threads touch it, so the lock is never on a live thread's path.
static LATE_BELOW: std::sync::Mutex<Vec<(u64, usize, Vec<u64>)>> = std::sync::Mutex::new(Vec::new());

/// Runs `f` on the calling thread's stack below the top for `slot`: the thread-local one, or
/// after the thread's teardown the shared one (never a panic: `try_with`, `try_borrow_mut`).
fn with_below<R>(slot: usize, f: impl FnOnce(&mut Vec<u64>) -> R) -> Option<R> {
    let mut f = Some(f);
    let done = EXTERNAL_BELOW
        .try_with(|b| {
            let mut below = b.try_borrow_mut().ok()?;
            f.take().map(|f| f(&mut below[slot]))
        })
        .ok()
        .flatten();
    match (done, f) {
        (Some(r), _) => Some(r),
        (None, Some(f)) => Some(with_below_late(slot, f)),
        (None, None) => None,
    }
}

fn with_below_late<R>(slot: usize, f: impl FnOnce(&mut Vec<u64>) -> R) -> R {
    let tid = current_thread_id();
    let mut all = LATE_BELOW.lock().unwrap_or_else(|e| e.into_inner());
    let i = match all.iter().position(|e| e.0 == tid && e.1 == slot) {
        Some(i) => i,
        None => {
            all.push((tid, slot, Vec::new()));
            all.len() - 1
        }
    };
    f(&mut all[i].2)
}

/// A backend whose runtime keeps external correlation stacks of its own (CUPTI's, for the CUDA
/// backend): called on the pushing thread after each successful push (`Some(value)`) and pop
/// (`None`), so the runtime's stack mirrors the services' and the device records it produces
/// later, on other threads, carry the ids.
pub type ExternalCorrelationHook = fn(ctx: ContextId, value: Option<u64>);

static EXTERNAL_HOOK: std::sync::OnceLock<ExternalCorrelationHook> = std::sync::OnceLock::new();

/// Installs the [`ExternalCorrelationHook`] (one per process: false when one is installed).
pub fn set_external_correlation_hook(hook: ExternalCorrelationHook) -> bool {
    EXTERNAL_HOOK.set(hook).is_ok()
}

/// Pushes `value` on the calling thread's external correlation stack of `ctx`.
/// `thread_id` must be 0 or the calling thread's id. Works at any point of the thread's life,
/// its teardown included (the thread-local part of the stack is then replaced by a shared one).
pub fn push_external_correlation_id(ctx: ContextId, thread_id: u64, value: u64) -> Result<(), ServiceError> {
    let slot = crate::context::validate(ctx)?;
    check_thread(thread_id)?;
    EXTERNAL_IN_USE.store(true, Ordering::Relaxed);
    // `THREAD` is const-initialised and has no destructor: `with` cannot fail.
    THREAD.with(|t| {
        let (h, v) = t.external_top[slot].get();
        with_below(slot, |below| {
            if h == ctx.handle {
                below.push(v);
            } else {
                below.clear();
            }
        });
        t.external_top[slot].set((ctx.handle, value));
    });
    if let Some(hook) = EXTERNAL_HOOK.get() {
        hook(ctx, Some(value));
    }
    Ok(())
}

/// Pops the top of the calling thread's external correlation stack of `ctx` and returns it.
pub fn pop_external_correlation_id(ctx: ContextId, thread_id: u64) -> Result<u64, ServiceError> {
    let slot = crate::context::validate(ctx)?;
    check_thread(thread_id)?;
    THREAD
        .with(|t| {
            let (h, v) = t.external_top[slot].get();
            if h != ctx.handle {
                return Err(ServiceError::StackEmpty);
            }
            let below = with_below(slot, |below| below.pop()).flatten();
            t.external_top[slot].set(match below {
                Some(b) => (ctx.handle, b),
                None => (0, 0),
            });
            Ok(v)
        })
        .inspect(|_| {
            if let Some(hook) = EXTERNAL_HOOK.get() {
                hook(ctx, None);
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_hook_sees_each_push_and_pop() {
        use std::sync::Mutex;
        static SEEN: Mutex<Vec<(u64, Option<u64>)>> = Mutex::new(Vec::new());
        fn hook(ctx: ContextId, value: Option<u64>) {
            SEEN.lock().expect("lock").push((ctx.handle, value));
        }
        // The hook is process-wide and other tests push too: look at this context's calls only.
        assert!(set_external_correlation_hook(hook));
        assert!(!set_external_correlation_hook(hook), "one hook per process");
        let a = crate::create_context().expect("context");
        push_external_correlation_id(a, 0, 7).expect("push");
        push_external_correlation_id(a, 0, 8).expect("push");
        assert_eq!(pop_external_correlation_id(a, 0), Ok(8));
        assert_eq!(pop_external_correlation_id(a, 0), Ok(7));
        assert_eq!(pop_external_correlation_id(a, 0), Err(ServiceError::StackEmpty));
        let mine: Vec<_> = SEEN.lock().expect("lock").iter().filter(|e| e.0 == a.handle).map(|e| e.1).collect();
        assert_eq!(mine, [Some(7), Some(8), None, None], "a failed pop is not passed on");
        crate::destroy_context(a).expect("destroy");
    }

    #[test]
    fn ids_are_unique_across_threads() {
        let mut all: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> =
                (0..4).map(|_| s.spawn(|| (0..10_000).map(|_| next_correlation_id()).collect::<Vec<_>>())).collect();
            hs.into_iter().flat_map(|h| h.join().expect("thread")).collect()
        });
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(all[0] > 0);
    }

    #[test]
    fn ids_cross_block_boundaries() {
        // On a fresh thread: more than two blocks, each id once, growing, none 0.
        let ids = std::thread::spawn(|| (0..2 * ID_BLOCK + 3).map(|_| next_correlation_id()).collect::<Vec<_>>())
            .join()
            .expect("thread");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids[0] > 0 && ids[0] % ID_BLOCK == 0);
    }

    #[test]
    fn external_stack_is_lifo_per_context() {
        let a = crate::context::create_context().expect("ctx");
        let b = crate::context::create_context().expect("ctx");
        push_external_correlation_id(a, 0, 1).expect("push");
        push_external_correlation_id(a, current_thread_id(), 2).expect("push");
        push_external_correlation_id(b, 0, 9).expect("push");
        assert_eq!(push_external_correlation_id(a, current_thread_id() + 1, 3), Err(ServiceError::InvalidArgument));
        assert_eq!(pop_external_correlation_id(a, 0), Ok(2));
        assert_eq!(pop_external_correlation_id(a, 0), Ok(1));
        assert_eq!(pop_external_correlation_id(a, 0), Err(ServiceError::StackEmpty));
        assert_eq!(pop_external_correlation_id(b, 0), Ok(9));
        crate::context::destroy_context(a).expect("destroy");
        crate::context::destroy_context(b).expect("destroy");
        assert_eq!(pop_external_correlation_id(a, 0), Err(ServiceError::ContextInvalid));
    }
}
