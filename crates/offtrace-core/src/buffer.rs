//! The buffer tracing service: typed records ([`crate::buffer_record`]) staged per producing
//! thread and handed to the tool's callback in batches, on a thread of the services.
//!
//! Shape: each producing thread has its own staging ring per buffer: `size` bytes rounded up
//! to a power of two, as 8-byte words (a record takes its `size`, a multiple of 8, contiguously:
//! one that would wrap starts again at the ring's beginning), and beside it a ring of record
//! starts (one address per record). The thread appends without a lock, a read-modify-write
//! or a cache line shared with another thread: the record, its start, one `Release` store of its
//! record count, after one compare against a precomputed limit (room, watermark and the ring's
//! end in one bound). The thread finds its ring through a per-context cache in its thread state
//! (no lookup).
//!
//! Delivery: when a thread has staged `watermark` bytes since it last did, it marks its ring
//! (`Area::mark_ready`: a line only the delivery thread reads) and goes on; the *delivery
//! thread* (`offtrace-buffer`, started with the first buffer, one per process) polls the marks
//! and is woken only when it would not see one in time ([`crate::doorbell`]: asleep, or napping
//! while the ring would fill before the nap ends, or the ring full), so a producer makes no
//! system call while the delivery thread keeps up. Flushes, threads' exits, full rings and the
//! late staging queue the buffer as a job instead. The delivery thread takes the buffer's delivery lock (callbacks of one buffer
//! never overlap), calls the tool's callback with each ring's published records (one call per
//! run of the ring's array of record addresses, which is the callback's `records` array in
//! place: two runs when it wraps the array's end) and then with the late staging's, then
//! releases the rings' space (`Release` store of each ring's record head). The delivery thread
//! itself reads only each ring's `tail` (and, where it evicts, below, two record addresses and one
//! header per delivery: where the delivered records begin and end): a line the producer wrote moves
//! to another core only if the tool reads it. A tool that reads its records leaves a copy of each
//! line in the delivery thread's core, which the producer's store on its next lap must invalidate
//! there (with the tool reading each record's header, the producer's time per record was about
//! three times the no-op tool's, and up to twelve times); so after callbacks that took long enough
//! to have read the records, of a producer whose last watermark was on another CPU, the delivery
//! thread flushes their lines from every cache before the release (`Area::evict`), and the
//! producer's next lap finds them in memory, which its streaming stores fetch without waiting on
//! another core. A tool that reads nothing, or reads on the producer's CPU, leaves the lines in the
//! producer's cache, and they stay there. The application thread never runs the tool's buffer
//! callback.
//!
//! Semantics:
//! - `size` bounds each producing thread's staging (rounded up to a power of two, so at least
//!   the room asked for; at least one record header): memory grows with the number of producing threads; a record larger than
//!   the staging is dropped and counted;
//! - `watermark` is per thread (bytes). Its callback comes at most [`POLL_PERIOD`] after it
//!   was reached (later only behind deliveries queued before it, or while the delivery thread
//!   waits for a CPU). Records of a thread that stays below it wait for a flush, or for the
//!   thread's exit (its staging is then queued for delivery);
//! - [`BufferPolicy::Lossless`] never drops: when a thread's staging is full, the thread waits
//!   until the delivery thread has released space;
//! - [`BufferPolicy::Discard`] never blocks: a record that finds the staging full is dropped
//!   and counted; the next callback gets the count (`drop_count`), [`buffer_dropped_total`]
//!   sums them;
//! - [`flush_buffer`] has the delivery thread deliver everything recorded (on every thread)
//!   before the call and returns when it has been delivered.
//!
//! Where no delivery thread can run (it could not be started, or in the child of a `fork`, which
//! has no copy of it), deliveries fall back to the calling thread, as before the thread existed.

#![allow(unsafe_code)] // calls tools' `extern "C"` buffer callbacks, writes records into rings

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::buffer_record::{BufferRecordHeader, Layout, RecordData, RecordHead};
use crate::callback::{CorrelationId, OperationFilter, Phase, tagged_service};
use crate::context::{ContextId, MAX_CONTEXTS, validate, with_live_slot};
use crate::correlation::{THREAD, ThreadState, thread_state};
use crate::doorbell::{Doorbell, Sleep, Urgency, Woken};
use crate::error::ServiceError;
use crate::kind::Kind;
use crate::payload::Payload;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell, fence};

/// `offtrace_buffer_policy_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BufferPolicy {
    /// Drop (and count) records when the producing thread's staging is full.
    Discard = 1,
    /// Never drop: the producing thread waits for the delivery thread when its staging is full.
    Lossless = 2,
}

impl BufferPolicy {
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Discard),
            2 => Some(Self::Lossless),
            _ => None,
        }
    }
}

/// `offtrace_buffer_id_t`. 0 is never a valid handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct BufferId {
    pub handle: u64,
}

/// `offtrace_buffer_tracing_cb_t`: `records[0..count]` point at typed records (each starts with
/// its [`BufferRecordHeader`]), valid during the call only. Runs on the delivery thread.
pub type BufferCallbackFn = unsafe extern "C" fn(
    context: ContextId,
    buffer: BufferId,
    records: *const *const BufferRecordHeader,
    count: usize,
    data: *mut c_void,
    drop_count: u64,
);

/// Held by whoever consumes staging rings (the delivery thread, or a caller in the fallback),
/// so each ring has one consumer at a time and callbacks never overlap.
struct Delivery {
    /// Every producing thread's ring (kept after the thread exits until it is empty).
    areas: Vec<Arc<Area>>,
    /// The late staging's pointer array handed to the callback (kept: no allocation per
    /// delivery).
    records: Vec<*const BufferRecordHeader>,
    /// Where each ring's delivered records end (released after the callback).
    ends: Vec<usize>,
}

// SAFETY: the pointers are into rings this struct's owner consumes, used under its lock only.
unsafe impl Send for Delivery {}

/// One producing thread's staging ring for one buffer: the records' words and, per record, its
/// address. Word positions and record counts are monotonic (`& mask` is the index). `tail`, `head` and the rest each have a 128-byte block of their own (two lines,
/// against adjacent-line prefetch): the producer stores `tail` per record, and a line the
/// consumer reads while it collects (the rings' addresses) or writes (`head`) beside it would
/// move between the cores once per record while a delivery runs concurrently.
#[repr(align(128))]
struct Area {
    words: Box<[UnsafeCell<MaybeUninit<u64>>]>,
    /// `starts[r & start_mask]` is the address of record `r`: a run of them is the array the
    /// tool's callback gets, in place, so the delivery thread reads no line the producer writes
    /// (a line the consumer reads is one the producer must take back on its next lap). A record
    /// takes at least 8 words (its header), so at most `words.len() / 8` records are staged at
    /// once: the entry of a record being written never is one the consumer still reads.
    starts: Box<[UnsafeCell<MaybeUninit<*const BufferRecordHeader>>]>,
    /// Records `[.., tail)` are written. Stored by the producer (Release, after the record and
    /// its start); loaded by the consumer (Acquire).
    tail: CachePadded<AtomicUsize>,
    /// Records `[.., head)` were delivered; their words may be overwritten. Stored by the
    /// consumer (Release, after the callback returned); loaded by the producer (Acquire) when
    /// it needs room.
    head: CachePadded<AtomicUsize>,
    /// The producer's request: deliver records `[.., ready)` (its watermark, or a full ring).
    /// Stored by the producer once per watermark, read by the delivery thread at each poll: a
    /// read-mostly line, unlike `tail` (see [`crate::doorbell`]).
    ready: CachePadded<AtomicUsize>,
    /// The CPU the producer ran on at its last watermark (`u32::MAX`: not known). Stored by the
    /// producer once per watermark, read by the delivery thread per delivery: a tool reading
    /// on the producer's CPU shares no line with another core, so there is nothing to evict
    /// (see `Area::evict`).
    producer_cpu: CachePadded<AtomicU32>,
}

/// A value alone in its 128-byte block (see [`Area`]).
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

// SAFETY: words and starts are written only by the producing thread, at positions past the
// records the consumer may read (`[head, tail)` as published by the Release store of `tail`,
// given back by the Release store of `head` after reading); the consumer only reads.
unsafe impl Sync for Area {}
// SAFETY: as above.
unsafe impl Send for Area {}

impl Area {
    /// A ring of `capacity` words (a power of two, at least 8).
    fn new(capacity: usize) -> Self {
        debug_assert!(capacity.is_power_of_two() && capacity >= 8);
        fn cells<T>(n: usize) -> Box<[UnsafeCell<MaybeUninit<T>>]> {
            (0..n).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect()
        }
        Self {
            words: cells(capacity),
            starts: cells(capacity / 8),
            tail: CachePadded(AtomicUsize::new(0)),
            head: CachePadded(AtomicUsize::new(0)),
            ready: CachePadded(AtomicUsize::new(0)),
            producer_cpu: CachePadded(AtomicU32::new(u32::MAX)),
        }
    }

    /// Producer: the address of entry 0 of `cells` (the std facade's cell is
    /// `repr(transparent)`, so entry `i` is at `base().add(i)`).
    fn base<T>(cells: &[UnsafeCell<MaybeUninit<T>>]) -> *mut T {
        assert!(!cells.is_empty(), "a ring has room for at least one entry");
        cells[0].with_mut(|p| p.cast::<T>())
    }

    /// Producer: records `[.., tail)` are written.
    #[inline(always)]
    fn publish(&self, tail: usize) {
        // Release: publishes the records and their starts to the consumer's Acquire in `take`.
        self.tail.store(tail, Ordering::Release);
    }

    /// Producer: records `[.., tail)` are written (its own last `publish`).
    #[inline(always)]
    fn written(&self) -> usize {
        // Relaxed: only this thread stores `tail`.
        self.tail.load(Ordering::Relaxed)
    }

    /// Producer: the consumer's record head (records before it may be overwritten).
    fn head(&self) -> usize {
        // Acquire: pairs with `release`: the consumer has finished reading those records.
        self.head.load(Ordering::Acquire)
    }

    /// Producer: asks for the delivery of records `[.., records)` (published already).
    fn mark_ready(&self, records: usize) {
        // Release: with the consumer's Acquire in `marked`; the doorbell's SeqCst fence orders
        // it before the producer's read of the delivery thread's state.
        self.ready.store(records, Ordering::Release);
    }

    /// Consumer: the producer asked for a delivery that has not happened yet.
    fn marked(&self) -> bool {
        // Acquire: pairs with `mark_ready` (the records themselves are published by `tail`,
        // read in `take`). Relaxed for `head`: only the consumer stores it.
        self.ready.load(Ordering::Acquire) > self.head.load(Ordering::Relaxed)
    }

    /// Consumer, under the delivery lock: the published, undelivered records.
    fn take(&self) -> std::ops::Range<usize> {
        // Acquire: pairs with the producer's Release in `publish`: the records below are written.
        let tail = self.tail.load(Ordering::Acquire);
        // Relaxed: only the consumer (under the delivery lock) stores `head`.
        let head = self.head.load(Ordering::Relaxed);
        head..tail
    }

    /// Consumer: records up to `end` were read; the producer may reuse their words.
    fn release(&self, end: usize) {
        // Release: the reads of the delivered records happen before the producer's reuse.
        self.head.store(end, Ordering::Release);
    }

    /// Consumer: the entries of `starts` that hold the addresses of the records of `range`,
    /// as at most two runs of indices (the second when the range wraps the array's end). Reads
    /// nothing: the runs are handed to the callback in place.
    fn runs(&self, range: std::ops::Range<usize>) -> [std::ops::Range<usize>; 2] {
        let n = self.starts.len();
        let first = range.start & (n - 1);
        let len = range.len().min(n);
        let head = len.min(n - first);
        [first..first + head, 0..len - head]
    }

    /// Producer, at a watermark: notes the CPU it runs on.
    fn note_cpu(&self) {
        // Relaxed: a hint (a stale value costs an eviction too many or too few, never a value).
        self.producer_cpu.store(current_cpu(), Ordering::Relaxed);
    }

    /// Consumer: whether the producer ran on another CPU than `cpu` at its last watermark.
    fn elsewhere(&self, cpu: u32) -> bool {
        // Relaxed: a hint (see `note_cpu`).
        let p = self.producer_cpu.load(Ordering::Relaxed);
        p == u32::MAX || cpu == u32::MAX || p != cpu
    }

    /// Consumer, after the callback, before `release`: writes back and drops from every cache
    /// the lines of the records `[head, end)` and of their start entries, so that the
    /// producer's stores on its next lap find them in no other core's cache (see the module
    /// doc). A flush changes no value, so it is correct at any time; a line the producer is
    /// writing (the last record's, shared with the next) is only fetched back once more.
    /// Without it, a producer whose tool reads on another core waits for an invalidation per
    /// line it writes; a write prefetch (`prefetchw`) of the lines 256 bytes to 4 KB ahead
    /// did not help there (`docs/overhead.md`, *Tool API*).
    fn evict(&self, end: usize) {
        #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
        {
            let head = self.head.load(Ordering::Relaxed);
            if head >= end {
                return;
            }
            let sm = self.starts.len() - 1;
            let words = self.words.len();
            let base = self.words[0].with(|p| p.cast::<u8>());
            let ring_end = base.wrapping_add(words * 8);
            // SAFETY: entries of published, undelivered records (see `Area`).
            let (first, last) = unsafe { (*self.start_entry(head & sm), *self.start_entry((end - 1) & sm)) };
            // SAFETY: a published record.
            let last_end = last.cast::<u8>().wrapping_add(unsafe { (*last).size } as usize);
            let flush = |from: *const u8, to: *const u8| {
                let mut p = from;
                while p < to {
                    // SAFETY: SSE2 (the x86-64 baseline); `p` is in this ring (flushing a
                    // line changes no value).
                    unsafe { std::arch::x86_64::_mm_clflush(p) };
                    p = p.with_addr((p.addr() | 63) + 1);
                }
            };
            let first = first.cast::<u8>();
            if last.cast::<u8>() >= first {
                flush(first, last_end);
            } else {
                flush(first, ring_end);
                flush(base, last_end);
            }
            let s0 = self.starts[0].with(|p| p.cast::<u8>());
            let (a, b) = (head & sm, (end - 1) & sm);
            if b >= a {
                flush(s0.wrapping_add(a * 8), s0.wrapping_add(b * 8 + 8));
            } else {
                flush(s0.wrapping_add(a * 8), s0.wrapping_add((sm + 1) * 8));
                flush(s0, s0.wrapping_add(b * 8 + 8));
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri), not(loom))))]
        let _ = end;
    }

    /// Consumer: the address of `starts[i]` (no access).
    fn start_entry(&self, i: usize) -> *const *const BufferRecordHeader {
        self.starts[i].with(|p| p.cast::<*const BufferRecordHeader>())
    }
}

pub(crate) struct Buffer {
    id: BufferId,
    context: ContextId,
    /// Words one thread may stage (`size / 8`).
    capacity: usize,
    /// Staged words at which a thread queues its records for delivery.
    watermark: usize,
    policy: BufferPolicy,
    callback: BufferCallbackFn,
    data: *mut c_void,
    delivery: Mutex<Delivery>,
    dropped: AtomicU64,
    dropped_total: AtomicU64,
    /// Records of threads in teardown (no staging of their own), as words: delivered with
    /// everybody's, at the watermark or a flush, never one record per callback.
    late: Mutex<Vec<u64>>,
    /// Set under the delivery lock by `destroy_buffer`: the callback is never called again.
    retired: AtomicBool,
    /// The buffer is in the delivery thread's queue (or being taken off it): no second entry.
    queued: AtomicBool,
    /// Producers waiting for room wait here; the consumer notifies after releasing space when
    /// `space_waiters` says one may wait (a notify is a system call even with no waiter).
    space: Mutex<()>,
    space_freed: Condvar,
    space_waiters: AtomicUsize,
}

// SAFETY: `data` is the tool's opaque pointer; the tool promised at `create_buffer` that the
// callback may be called with it from any thread. Everything else is `Send + Sync`.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared state is behind mutexes and atomics.
unsafe impl Sync for Buffer {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning cannot leave the vectors inconsistent (pushes, drains and clears only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static BUFFERS: Mutex<Vec<Arc<Buffer>>> = Mutex::new(Vec::new());
static NEXT_BUFFER: AtomicU64 = AtomicU64::new(1);

/// Below this many picoseconds per record, a buffer callback did not read the records' lines
/// (see `Buffer::drain`).
const READ_PS_PER_RECORD: u128 = 250;

/// The longest the delivery thread naps while records flow: a ring's watermark is delivered
/// at most this long after it was reached (plus the delivery of what is ahead of it), unless
/// the producer rings because its ring would fill sooner (see [`crate::doorbell`]).
pub(crate) const POLL_PERIOD: Duration = Duration::from_millis(1);

/// Naps in a row that found no mark before the delivery thread sleeps without a timeout (then
/// the next watermark rings it). Watermarks further apart than this cost their producer one
/// wake each, and an idle process (or one whose records trickle) no wake-up of its own after
/// these naps (a timed wake-up costs 13-25 µs of CPU on a VM).
const QUIET_NAPS_BEFORE_SLEEP: u32 = 4;

/// After a producer rang because its ring would fill before the nap ends, the delivery thread
/// stays awake, polling the rings' marks, until this many polls in a row found none (about
/// 200 µs of its own running time: counted in polls, not in wall time, so that a delivery
/// thread descheduled on a loaded machine does not come back to a nap while records flow):
/// naps are too long for that rate (on a VM a timed wake-up costs 13-25 µs of CPU and comes
/// 20-50 µs late).
const HOT_POLLS: u32 = 100;

/// Between two polls of the marks while awake (yielding the CPU meanwhile): a poll reads one
/// read-mostly line per ring.
const HOT_POLL: Duration = Duration::from_micros(2);

/// The delivery thread's work: buffers to drain, in order; a flush waits for its ticket.
struct Work {
    jobs: VecDeque<(Arc<Buffer>, u64)>,
    next_ticket: u64,
    completed: u64,
}

struct Deliverer {
    work: Mutex<Work>,
    /// Jobs in `work` (read without its lock by the thread's check before it sleeps).
    pending: AtomicUsize,
    /// Rung with each job, and by producers whose marks the thread would not see in time.
    doorbell: Doorbell,
    done: Condvar,
    /// The process that started the thread (a `fork` child has no copy of it).
    pid: u32,
}

static DELIVERER: OnceLock<Option<&'static Deliverer>> = OnceLock::new();

thread_local! {
    /// Set on the delivery thread: a flush there delivers itself (never waits for itself).
    static ON_DELIVERY_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// The process's id as of its last `fork` (the child handler below stores the child's): what
/// [`deliverer_here`] compares with the delivery thread's process, without the `getpid` system
/// call (184 ns on the development VM) that [`deliverer`] makes, once per watermark.
static PROCESS_ID: AtomicU32 = AtomicU32::new(0);

/// `pthread_atfork` child handler: the child's own id (`getpid` is async-signal-safe).
extern "C" fn note_fork_child() {
    // SAFETY: `getpid` has no preconditions.
    let pid = unsafe { libc::getpid() };
    // Relaxed: read by this process's threads, of which the child has only the forking one.
    PROCESS_ID.store(pid as u32, Ordering::Relaxed);
}

/// Starts the delivery thread (once); `None` when it could not be started.
fn start_deliverer() -> Option<&'static Deliverer> {
    *DELIVERER.get_or_init(|| {
        // The handler before the id: a child forked in between stores its own.
        // SAFETY: a plain function pointer for the child; none for the parent.
        unsafe { libc::pthread_atfork(None, None, Some(note_fork_child)) };
        // Relaxed: published to the emitters with the delivery thread, by `DELIVERER`.
        PROCESS_ID.store(std::process::id(), Ordering::Relaxed);
        let d: &'static Deliverer = Box::leak(Box::new(Deliverer {
            work: Mutex::new(Work { jobs: VecDeque::new(), next_ticket: 1, completed: 0 }),
            pending: AtomicUsize::new(0),
            doorbell: Doorbell::new(),
            done: Condvar::new(),
            pid: std::process::id(),
        }));
        std::thread::Builder::new().name("offtrace-buffer".into()).spawn(move || deliver_forever(d)).ok().map(|_| d)
    })
}

impl Deliverer {
    /// Queues a job (the caller rings the doorbell after it).
    fn push(&self, buffer: Arc<Buffer>, ticket: u64) {
        lock(&self.work).jobs.push_back((buffer, ticket));
        // Relaxed: the doorbell's SeqCst fence, after this, orders it before the read of the
        // thread's state (as a ring's mark is).
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// The next job, if any.
    fn pop(&self) -> Option<(Arc<Buffer>, u64)> {
        let job = lock(&self.work).jobs.pop_front()?;
        // Relaxed: a count for `has_work`; the jobs themselves are under the lock.
        self.pending.fetch_sub(1, Ordering::Relaxed);
        Some(job)
    }

    /// Whether the delivery thread has anything to do (its check before it sleeps, after its
    /// state is published).
    fn has_work(&self) -> bool {
        // Relaxed: ordered by the doorbell's fence (see `push`).
        self.pending.load(Ordering::Relaxed) > 0 || any_marked()
    }
}

/// The delivery thread, if it runs in this process. Exact (a `getpid` system call): for the
/// callers that block on it (a flush, a producer waiting for room).
fn deliverer() -> Option<&'static Deliverer> {
    let d = (*DELIVERER.get()?)?;
    (d.pid == std::process::id() && !ON_DELIVERY_THREAD.try_with(Cell::get).unwrap_or(false)).then_some(d)
}

/// [`deliverer`] for the callers that only ask for a delivery (a watermark, a full ring before
/// its wait): the process id as of the last `fork`, no system call. Only a child made without
/// `fork` (a raw `clone` that goes on running this process's code) could see the parent's id
/// here; its records then wait for its next flush or full ring, which use [`deliverer`].
fn deliverer_here() -> Option<&'static Deliverer> {
    let d = (*DELIVERER.get()?)?;
    // Relaxed: see `PROCESS_ID`.
    (d.pid == PROCESS_ID.load(Ordering::Relaxed) && !ON_DELIVERY_THREAD.try_with(Cell::get).unwrap_or(false))
        .then_some(d)
}

/// The delivery thread: runs the queued jobs (flushes, threads' exits), delivers every buffer
/// with a marked ring, then polls again (awake, after an urgent ring), naps for
/// [`POLL_PERIOD`] (while watermarks come) or sleeps until rung (when its last naps found
/// none).
fn deliver_forever(d: &'static Deliverer) {
    let _ = ON_DELIVERY_THREAD.try_with(|f| f.set(true));
    let mut marked = Vec::new();
    let mut hot_polls = 0;
    let mut quiet_naps = 0;
    loop {
        // `pop` takes the work lock and gives it back: none is held while a job runs.
        while let Some((buffer, ticket)) = d.pop() {
            // Release: a producer that signals after this sees the flag clear and queues
            // again, and its records are published before its signal, so the drain below or
            // the next one delivers them.
            buffer.queued.store(false, Ordering::Release);
            buffer.drain(&mut lock(&buffer.delivery));
            if ticket != 0 {
                let mut w = lock(&d.work);
                w.completed = w.completed.max(ticket);
                d.done.notify_all();
            }
        }
        let found = deliver_marked(&mut marked);
        if found {
            quiet_naps = 0;
        }
        if hot_polls > 0 {
            hot_polls = if found { HOT_POLLS } else { hot_polls - 1 };
            // Yields, not spins: on a loaded machine the CPU goes to runnable threads (the
            // application's) meanwhile; on an idle one the yield returns at once.
            let next = Instant::now() + HOT_POLL;
            while Instant::now() < next {
                std::thread::yield_now();
            }
            continue;
        }
        let how = if quiet_naps >= QUIET_NAPS_BEFORE_SLEEP { Sleep::Deep } else { Sleep::Nap(POLL_PERIOD) };
        match d.doorbell.sleep(how, || d.has_work()) {
            Woken::Urgent => {
                hot_polls = HOT_POLLS;
                quiet_naps = 0;
            }
            Woken::Rung | Woken::Work => quiet_naps = 0,
            Woken::Timeout => quiet_naps += 1,
        }
    }
}

/// Delivers every buffer with a marked ring (`marked` is scratch: no allocation per poll);
/// `true` when there was one.
fn deliver_marked(marked: &mut Vec<Arc<Buffer>>) -> bool {
    marked.extend(lock(&BUFFERS).iter().filter(|b| b.marked()).cloned());
    let found = !marked.is_empty();
    for b in marked.drain(..) {
        b.drain(&mut lock(&b.delivery));
    }
    found
}

/// Whether a buffer has a marked ring (the delivery thread's check before it sleeps).
fn any_marked() -> bool {
    lock(&BUFFERS).iter().any(|b| b.marked())
}

/// The producing thread's end of an [`Area`]. Aligned like [`Area`]: written per record.
#[repr(align(128))]
pub(crate) struct Staging {
    /// The word position of the next record (only this thread moves it).
    tail: usize,
    /// The fast path writes a record of `w` words while `tail + w <= limit` (see
    /// `Buffer::set_limit`).
    limit: usize,
    /// The word position at which the thread asks for the delivery of its records.
    notify_at: usize,
    /// When it last asked (the rate since then says whether the delivery thread's nap is too
    /// long for the room left).
    last_mark: Instant,
    /// `area`'s first word and first start, and their index masks (copies: no dependent loads
    /// per record).
    base: *mut u64,
    starts: *mut *const BufferRecordHeader,
    mask: usize,
    start_mask: usize,
    area: Arc<Area>,
    buffer: Arc<Buffer>,
}

impl Staging {
    /// Writes the record (`w` words, room checked by the caller) and publishes it.
    ///
    /// # Safety
    /// `[tail, tail + w)` must be within the room the consumer left and not wrap the ring.
    #[inline(always)]
    unsafe fn put<D: RecordData>(&mut self, layout: &Layout, head: &RecordHead, payload: &D) {
        // SAFETY:
        // - the words and the start entry are in the ring (masked; the caller's contract for
        //   the record's length) and not yet published, so ours alone (see `Area`);
        // - the start entry is not one the consumer reads (see `Area::starts`).
        unsafe {
            let at = self.base.add(self.tail & self.mask);
            payload.store(layout, at, head);
            self.starts.add(self.records() & self.start_mask).write(at.cast());
        }
        self.tail += layout.words();
        self.area.publish(self.records() + 1);
    }

    /// [`Self::put`] with the staging's new position stored before the record's stores rather
    /// than after them (only this thread reads it): the activity path
    /// ([`BufferService::try_write`]), where that measured 0.6 ns faster per `MEMORY_COPY`
    /// record; the API call's exit measured 1 ns slower with it and keeps [`Self::put`].
    ///
    /// # Safety
    /// As [`Self::put`].
    #[inline(always)]
    unsafe fn put_early<D: RecordData>(&mut self, layout: &Layout, head: &RecordHead, payload: &D) {
        // SAFETY: masked: within the ring.
        let at = unsafe { self.base.add(self.tail & self.mask) };
        self.tail += layout.words();
        // SAFETY: as in `put`.
        unsafe {
            payload.store(layout, at, head);
            self.starts.add(self.records() & self.start_mask).write(at.cast());
        }
        self.area.publish(self.records() + 1);
    }

    /// Records written (published): the ring's `tail`, which only this thread stores (a load
    /// of its own store, where a copy here would be one more store per record).
    #[inline(always)]
    fn records(&self) -> usize {
        self.area.written()
    }

    /// The word position before which the consumer has released everything.
    fn head_words(&self) -> usize {
        let h = self.area.head();
        if h == self.records() {
            self.tail
        } else {
            // SAFETY: record `h` is staged (below `records`), so its start entry holds its
            // address; only this thread writes it.
            let at = unsafe { self.starts.add(h & self.start_mask).read() };
            let index = (at.addr() - self.base.addr()) / 8;
            // Its word position: the one with that index in the last `capacity` words before
            // `tail` (it is staged, so it starts there; `tail - capacity` when the ring is full).
            self.tail - (self.tail.wrapping_sub(index).wrapping_sub(1) & self.mask) - 1
        }
    }
}

/// The CPU the calling thread runs on (`u32::MAX` where unknown): `sched_getcpu`, a vDSO call.
fn current_cpu() -> u32 {
    // SAFETY: no preconditions; returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).unwrap_or(u32::MAX)
}

/// The thread's stagings (boxed: the per-context cache in the thread state points at them).
/// Dropping it (thread teardown) clears that cache and queues what the thread staged for
/// delivery; later records of the thread go out through [`Buffer::write_late`].
#[allow(clippy::vec_box)] // the boxes are the point: their addresses stay put when the vector grows
struct Stagings(RefCell<Vec<Box<Staging>>>);

impl Drop for Stagings {
    fn drop(&mut self) {
        let t = thread_state();
        for c in &t.staging_cache {
            c.set((ptr::null(), ptr::null_mut()));
        }
        for st in self.0.borrow().iter() {
            if st.area.head() < st.records() {
                st.buffer.signal(Urgency::Watermark);
            }
        }
    }
}

thread_local! {
    static STAGING: Stagings = const { Stagings(RefCell::new(Vec::new())) };
}

/// Per context slot: the last (buffer, this thread's staging of it) written, so the record path
/// skips the search. Lives in the thread state (see [`crate::correlation`]).
pub(crate) type StagingCache = [Cell<(*const Buffer, *mut Staging)>; MAX_CONTEXTS];
const _: () = assert!(MAX_CONTEXTS.is_power_of_two()); // slot indices are masked, not checked

impl Buffer {
    /// Whether one of the buffer's rings asks for a delivery (the delivery thread's poll).
    fn marked(&self) -> bool {
        lock(&self.delivery).areas.iter().any(|a| a.marked())
    }

    #[cold]
    #[inline(never)]
    fn register_thread(self: &Arc<Self>) -> Box<Staging> {
        let area = Arc::new(Area::new(self.capacity));
        lock(&self.delivery).areas.push(area.clone());
        let (base, starts) = (Area::base(&area.words), Area::base(&area.starts));
        let notify_at = self.watermark;
        Box::new(Staging {
            tail: 0,
            limit: (notify_at - 1).min(self.capacity),
            notify_at,
            last_mark: Instant::now(),
            base,
            starts,
            mask: self.capacity - 1,
            start_mask: self.capacity / 8 - 1,
            area,
            buffer: self.clone(),
        })
    }

    /// Makes context slot `slot`'s cache entry hold this buffer and the calling thread's
    /// staging of it (found, or made and registered); `false` during thread teardown (no
    /// staging: the caller stages the record in the late staging).
    #[cold]
    #[inline(never)]
    fn cache_staging(self: &Arc<Self>, slot: usize) -> bool {
        let Ok(st) = STAGING.try_with(|cell| {
            let mut v = cell.0.borrow_mut();
            let idx = match v.iter().position(|s| Arc::ptr_eq(&s.buffer, self)) {
                Some(i) => i,
                None => {
                    v.push(self.register_thread());
                    v.len() - 1
                }
            };
            &mut *v[idx] as *mut Staging
        }) else {
            return false;
        };
        thread_state().staging_cache[slot & (MAX_CONTEXTS - 1)].set((Arc::as_ptr(self), st));
        true
    }

    /// Stages one record on the calling thread (context slot `slot`'s cache).
    /// `t`: the calling thread's state (read once per emit by the caller).
    #[inline(always)]
    pub(crate) fn write<D: RecordData>(self: &Arc<Self>, t: &ThreadState, slot: usize, head: &RecordHead, payload: &D) {
        // The calling thread's staging of this buffer, through the cache of context slot `slot`.
        let cache = &t.staging_cache[slot & (MAX_CONTEXTS - 1)];
        if cache.get().0 != Arc::as_ptr(self) && !self.cache_staging(slot) {
            let head = *head; // a copy for the cold call (see below)
            return self.write_late(&head, payload);
        }
        // SAFETY: the cache holds a pointer into this thread's `STAGING` (boxed, so stable)
        // until `Stagings::drop` clears it (and then this buffer is not in it); only this
        // thread uses it, and no other reference to the staging is live: the record path does
        // not re-enter (the buffer callback runs with the re-entrancy guard set) and
        // `cache_staging` borrows only the vector.
        let st = unsafe { &mut *cache.get().1 };
        let layout = payload.layout(head.kind);
        if st.tail + layout.words() > st.limit {
            // Copies for the cold call: with the caller's header (or the layout) escaping to
            // it, the fast path stored them to memory first even when it wrote the record from
            // registers.
            let (head, layout) = (*head, layout);
            return self.write_slow(st, &layout, &head, payload);
        }
        // SAFETY: below the limit: within the room the consumer left, before the ring's end.
        unsafe { st.put(&layout, head, payload) };
    }

    /// [`Self::write`] with the header made by `head` where it is stored: after the staging
    /// and room checks, so that its fields (an API call's exit: four of them read from the
    /// call's frame) are loaded into the record's stores rather than loaded before the checks
    /// and kept on the stack across them. The cold paths make their own copy.
    #[inline(always)]
    pub(crate) fn write_made<D: RecordData>(
        self: &Arc<Self>,
        t: &ThreadState,
        slot: usize,
        kind: Kind,
        head: impl Fn() -> RecordHead,
        payload: &D,
    ) {
        let cache = &t.staging_cache[slot & (MAX_CONTEXTS - 1)];
        if cache.get().0 != Arc::as_ptr(self) && !self.cache_staging(slot) {
            return self.write_late(&head(), payload);
        }
        // SAFETY: as in `write`.
        let st = unsafe { &mut *cache.get().1 };
        let layout = payload.layout(kind);
        if st.tail + layout.words() > st.limit {
            let copy = layout; // for the cold call, as in `write`
            return self.write_slow(st, &copy, &head(), payload);
        }
        // SAFETY: below the limit, as in `write`.
        unsafe { st.put(&layout, &head(), payload) };
    }

    /// A record that does not fit below the staging's limit: makes room for it (or drops it),
    /// writes it, and when the thread's records reach the watermark with it, queues them for
    /// delivery.
    #[cold]
    #[inline(never)]
    fn write_slow<D: RecordData>(&self, st: &mut Staging, layout: &Layout, head: &RecordHead, payload: &D) {
        if !self.reserve(st, layout.words()) {
            return;
        }
        // SAFETY: `reserve` made room for the record at `tail`, contiguous.
        unsafe { st.put(layout, head, payload) };
        let head = st.head_words();
        if st.tail >= st.notify_at {
            let now = Instant::now();
            let urgency = self.urgency(st.tail - head, now.duration_since(st.last_mark));
            st.last_mark = now;
            st.notify_at = st.tail + self.watermark;
            st.area.note_cpu();
            Buffer::request_delivery(&st.buffer, st, urgency);
        }
        self.set_limit(st, head);
    }

    /// At a watermark, with `staged` words in the ring and `since` the time since the last
    /// watermark (about `watermark` words ago): urgent when the room left would fill before
    /// two poll periods at that rate (a napping delivery thread might come too late).
    fn urgency(&self, staged: usize, since: Duration) -> Urgency {
        let room = (self.capacity - staged.min(self.capacity)) as u128;
        let fills_in_ns = since.as_nanos() * room / self.watermark as u128;
        if fills_in_ns < 2 * POLL_PERIOD.as_nanos() { Urgency::Urgent } else { Urgency::Watermark }
    }

    /// Asks for the delivery of the thread's published records: marks its ring (the delivery
    /// thread polls the marks) and rings the delivery thread only when it would not see the
    /// mark in time (see [`crate::doorbell`]). Without a delivery thread, delivers here.
    #[cold]
    #[inline(never)]
    fn request_delivery(self: &Arc<Self>, st: &Staging, urgency: Urgency) {
        let Some(d) = deliverer_here() else {
            return self.signal(Urgency::Urgent);
        };
        st.area.mark_ready(st.records());
        d.doorbell.ring_if_needed(urgency);
    }

    /// The fast path's bound: a record ending at `limit` fits in the room the consumer left
    /// (`head + capacity`), before the ring's end, and below the watermark (a record that
    /// reaches it takes `write_slow`, which queues the records after writing it).
    fn set_limit(&self, st: &mut Staging, head: usize) {
        let ring_end = st.tail + (self.capacity - (st.tail & st.mask));
        st.limit = (st.notify_at - 1).min(head + self.capacity).min(ring_end);
    }

    /// Makes room for a record of `w` words at `st.tail`, contiguous: skips to the ring's start
    /// when it would wrap, and when the ring is full, lossless waits for the delivery thread,
    /// discard drops and counts the record (`false`).
    fn reserve(&self, st: &mut Staging, w: usize) -> bool {
        let cap = self.capacity;
        if w > cap {
            self.count_drop();
            return false;
        }
        loop {
            let contiguous = cap - (st.tail & st.mask);
            let head = st.head_words();
            if w > contiguous {
                // Skip to the ring's start (the rest stays unused this round: no record starts
                // there), once the skipped words are room too.
                if st.tail + contiguous <= head + cap {
                    st.tail += contiguous;
                    continue;
                }
            } else if st.tail + w <= head + cap {
                return true;
            }
            // Full: the delivery thread is needed now. A job rather than a mark: the job holds
            // the buffer, which is delivered (its records dropped and counted) even if it was
            // destroyed meanwhile (out of the list the marks are polled through).
            st.buffer.signal(Urgency::Urgent);
            if self.policy == BufferPolicy::Discard {
                self.count_drop();
                self.set_limit(st, head);
                return false;
            }
            let need_records = st.records();
            let area = st.area.clone();
            // Progress: the consumer released at least one more record (or all of them).
            let before = area.head();
            self.wait_for_space(|| {
                let h = area.head();
                h != before || h == need_records
            });
        }
    }

    fn count_drop(&self) {
        // Relaxed: counters, read under the delivery lock or as a total.
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Lossless and full: waits until `ready()` (the delivery thread released space). Without a
    /// delivery thread, delivers on this thread instead.
    #[cold]
    fn wait_for_space(&self, ready: impl Fn() -> bool) {
        let mut g = lock(&self.space);
        // Relaxed + SeqCst fence: pairs with the fence in `drain` between its release of the
        // rings and its read of the count: it sees this waiter (and notifies, under `space`,
        // which this thread holds until it waits), or `ready()` below sees the space.
        self.space_waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        while !ready() {
            if deliverer().is_none() {
                drop(g);
                self.drain(&mut lock(&self.delivery));
                g = lock(&self.space);
                continue;
            }
            // A timeout as well as the notification: the delivery thread may be queued behind
            // another buffer's delivery that a signal has not reached yet.
            g = self.space_freed.wait_timeout(g, Duration::from_millis(10)).unwrap_or_else(|e| e.into_inner()).0;
        }
        // Relaxed: a count of waiters, read after the fence in `drain`.
        self.space_waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Queues the buffer for the delivery thread (once until it is taken off the queue); without
    /// one, delivers on this thread if no other delivery is in progress.
    #[cold]
    #[inline(never)]
    fn signal(self: &Arc<Self>, urgency: Urgency) {
        let Some(d) = deliverer_here() else {
            if let Ok(mut g) = self.delivery.try_lock() {
                self.drain(&mut g);
            }
            return;
        };
        // AcqRel: pairs with the delivery thread's Release clearing it.
        if !self.queued.swap(true, Ordering::AcqRel) {
            d.push(self.clone(), 0);
        }
        d.doorbell.ring_if_needed(urgency);
    }

    /// The thread is being torn down (no staging): the record goes to the buffer's shared late
    /// staging, delivered with the rest at the watermark (or by a flush).
    #[cold]
    #[inline(never)]
    fn write_late<D: RecordData>(self: &Arc<Self>, head: &RecordHead, payload: &D) {
        let layout = payload.layout(head.kind);
        let w = layout.words();
        if w > self.capacity {
            return self.count_drop();
        }
        let mut late = lock(&self.late);
        while late.len() + w > self.capacity {
            drop(late);
            self.signal(Urgency::Urgent);
            if self.policy == BufferPolicy::Discard {
                return self.count_drop();
            }
            self.wait_for_space(|| lock(&self.late).len() + w <= self.capacity);
            late = lock(&self.late);
        }
        let at = late.len();
        late.resize(at + w, 0);
        // SAFETY: `late[at..at + w]` is ours (under the lock), 8-aligned and `w` words long.
        unsafe { payload.store(&layout, late.as_mut_ptr().add(at), head) };
        let full = late.len() >= self.watermark;
        drop(late);
        if full {
            self.signal(Urgency::Watermark);
        }
    }

    /// Delivers every published record of every ring (a callback per run of its addresses)
    /// and the late staging (one more), then releases their space (the delivery lock is held:
    /// `d`). With nothing to deliver, one call reports the drops counted since the last.
    fn drain(&self, d: &mut Delivery) {
        let Delivery { areas, records, ends } = d;
        records.clear();
        ends.clear();
        let mut called = false;
        let (since, mut delivered) = (Instant::now(), 0);
        for area in areas.iter() {
            let r = area.take();
            ends.push(r.end);
            for run in area.runs(r) {
                if !run.is_empty() {
                    // The entries of `run` hold the addresses of published records, not written
                    // again before `release` below (see `Area`).
                    self.call(area.start_entry(run.start), run.len());
                    called = true;
                    delivered += run.len();
                }
            }
        }
        // Whether the tool may have read the records: callbacks that took less than
        // `READ_PS_PER_RECORD` per record (a quarter of a nanosecond: about one cycle) read
        // none of them (a call that reads nothing costs the same for 1 or 2000 records; one
        // that reads each record's first word, streamed from another core, took 1-2 ns per
        // record), so the lines are in the producer's cache alone, and evicting them would only
        // send the producer's next lap to memory.
        let read = since.elapsed().as_nanos() * 1000 >= READ_PS_PER_RECORD * delivered as u128;
        let late = std::mem::take(&mut *lock(&self.late));
        let mut pos = 0;
        while pos < late.len() {
            let words = ((late[pos] & 0xffff_ffff) / 8) as usize;
            if words == 0 {
                break;
            }
            records.push(late[pos..].as_ptr().cast());
            pos += words;
        }
        if !records.is_empty() || !called {
            self.call(records.as_ptr(), records.len());
        }
        records.clear();
        // Only the delivery thread: a producer that delivers its own records (no delivery
        // thread) would evict its own lines and take them back from memory on its next lap.
        let evict = read && ON_DELIVERY_THREAD.try_with(Cell::get).unwrap_or(false);
        let cpu = if evict { current_cpu() } else { u32::MAX };
        for (area, end) in areas.iter().zip(ends.iter()) {
            if evict && area.elsewhere(cpu) {
                area.evict(*end);
            }
            area.release(*end);
        }
        // Rings of exited threads (no producer holds them) are empty now: forget them.
        areas.retain(|a| Arc::strong_count(a) > 1 || a.take().start < a.take().end);
        // SeqCst: orders the releases above before the read of the waiters (see
        // `wait_for_space`).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence.
        if self.space_waiters.load(Ordering::Relaxed) > 0 {
            drop(lock(&self.space));
            self.space_freed.notify_all();
        }
    }

    /// Calls the callback with `records[0..n]` and the drops counted since the last call (a
    /// drop-count-only call when `n == 0`). The delivery lock is held.
    fn call(&self, records: *const *const BufferRecordHeader, n: usize) {
        // Relaxed: read under the delivery lock, which orders deliveries.
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if n == 0 && dropped == 0 {
            return;
        }
        if self.retired.load(Ordering::Relaxed) {
            // Destroyed: records that were still staged are dropped (counted).
            self.dropped_total.fetch_add(n as u64, Ordering::Relaxed);
            return;
        }
        let was = THREAD.try_with(|t| t.in_callback.replace(true)).unwrap_or(true);
        let records = if n == 0 { ptr::null() } else { records };
        // SAFETY: the tool promised at `create_buffer` that `callback` is callable with its
        // `data` from any thread; `records[0..n]` and the records they point at are valid (and
        // not written) during the call.
        unsafe { (self.callback)(self.context, self.id, records, n, self.data, dropped) };
        let _ = THREAD.try_with(|t| t.in_callback.set(was));
    }

    /// Delivers everything staged before the call: through the delivery thread (waiting for
    /// it), or on this thread when there is none.
    fn flush(self: &Arc<Self>) {
        let Some(d) = deliverer() else {
            return self.drain(&mut lock(&self.delivery));
        };
        let ticket = {
            let mut w = lock(&d.work);
            w.next_ticket += 1;
            w.next_ticket - 1
        };
        d.push(self.clone(), ticket);
        d.doorbell.ring(false);
        let mut w = lock(&d.work);
        while w.completed < ticket {
            w = d.done.wait(w).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A buffer service: which operations of a kind go to which buffer.
pub(crate) struct BufferService {
    buffer: Arc<Buffer>,
    pub(crate) filter: OperationFilter,
}

impl BufferService {
    /// Stages a record of the context in slot `slot` (`context_id`) on the calling thread.
    #[allow(clippy::too_many_arguments, reason = "one record's fields, as the emit path passes them (inlined)")]
    #[inline(always)]
    pub(crate) fn write<D: RecordData>(
        &self,
        slot: usize,
        context_id: ContextId,
        kind: Kind,
        operation: u32,
        phase: Phase,
        correlation_id: CorrelationId,
        thread_id: u64,
        start: u64,
        end: u64,
        payload: &D,
        t: &ThreadState,
    ) {
        let head = RecordHead { kind, operation, phase, context_id, correlation_id, thread_id, start, end };
        payload.write_to(&self.buffer, t, slot, &head);
    }

    /// The record of a call at its exit: out of line, with the header's fields by reference, so
    /// that the exit path's callback delivery keeps its registers (inlined, the record's
    /// encoding made the exit path save more of them for every callback pair).
    #[inline(never)]
    pub(crate) fn write_exit(&self, t: &ThreadState, slot: usize, head: &RecordHead, payload: &Payload<'_>) {
        payload.write_to(&self.buffer, t, slot, head);
    }

    /// The record of an API call (the common pair) at its exit, inlined into the caller; `head`
    /// makes its header of kind `kind` (see [`Buffer::write_made`]).
    #[inline(always)]
    pub(crate) fn write_api_call(
        &self,
        t: &ThreadState,
        slot: usize,
        kind: Kind,
        head: impl Fn() -> RecordHead,
        payload: &crate::payload::ApiCallPayload,
    ) {
        self.buffer.write_made(t, slot, kind, head, payload);
    }

    /// [`Self::write`]'s common case only: this thread's staging of the buffer is in the cache
    /// of context slot `slot`, and the record fits below the limit (so nothing else follows
    /// it). `false`, having written nothing, otherwise. Makes no calls other than the
    /// payload's encoding (see `callback::activity_fast`).
    #[inline(always)]
    pub(crate) fn try_write<D: RecordData>(
        &self,
        t: &ThreadState,
        slot: usize,
        head: &RecordHead,
        payload: &D,
    ) -> bool {
        let (b, st) = t.staging_cache[slot & (MAX_CONTEXTS - 1)].get();
        if b != Arc::as_ptr(&self.buffer) {
            return false;
        }
        // SAFETY: as in `Buffer::write`.
        let st = unsafe { &mut *st };
        let layout = payload.layout(head.kind);
        if st.tail + layout.words() > st.limit {
            return false;
        }
        // SAFETY: below the limit, as in `Buffer::write`.
        unsafe { st.put_early(&layout, head, payload) };
        true
    }
}

fn find(id: BufferId) -> Result<Arc<Buffer>, ServiceError> {
    lock(&BUFFERS).iter().find(|b| b.id == id).cloned().ok_or(ServiceError::BufferNotFound)
}

/// The largest `size` [`create_buffer`] accepts (each producing thread stages up to `size`
/// bytes, so a larger buffer is a request the process cannot honour: `InvalidArgument`).
pub const MAX_BUFFER_BYTES: usize = 1 << 30;

/// Creates a buffer of `size` bytes (at least one record header, at most [`MAX_BUFFER_BYTES`];
/// with at least [`crate::MAX_RECORD_BYTES`] every record fits, larger ones are dropped and
/// counted) in the context. `watermark` (bytes, ≤ `size`) is the fill at which a thread's
/// records are queued for delivery; `callback(context, buffer, records, count, data,
/// drop_count)` runs on the services' delivery thread.
///
/// # Safety
///
/// `callback` must be safe to call with `data` from any thread until the context is destroyed,
/// and must not unwind.
pub unsafe fn create_buffer(
    ctx: ContextId,
    size: usize,
    watermark: usize,
    policy: BufferPolicy,
    callback: BufferCallbackFn,
    data: *mut c_void,
) -> Result<BufferId, ServiceError> {
    validate(ctx)?;
    if size < size_of::<BufferRecordHeader>() || watermark > size || size > MAX_BUFFER_BYTES {
        return Err(ServiceError::InvalidArgument);
    }
    // A power of two: the rings index by masking. Rounded up, so that a thread has at least the
    // room the tool asked for (rounded down, a 416 KB buffer was a 256 KB ring: a lossless
    // producer whose delivery thread had no CPU waited once per lap of the smaller ring). At
    // most twice `size`; `MAX_BUFFER_BYTES` is a power of two, so the cap still holds.
    let capacity = (size / 8).next_power_of_two();
    start_deliverer();
    let watermark = (watermark / 8).clamp(1, capacity);
    let id = BufferId { handle: NEXT_BUFFER.fetch_add(1, Ordering::Relaxed) };
    let buffer = Arc::new(Buffer {
        id,
        context: ctx,
        capacity,
        watermark,
        policy,
        callback,
        data,
        delivery: Mutex::new(Delivery { areas: Vec::new(), records: Vec::new(), ends: Vec::new() }),
        dropped: AtomicU64::new(0),
        dropped_total: AtomicU64::new(0),
        late: Mutex::new(Vec::new()),
        retired: AtomicBool::new(false),
        queued: AtomicBool::new(false),
        space: Mutex::new(()),
        space_freed: Condvar::new(),
        space_waiters: AtomicUsize::new(0),
    });
    lock(&BUFFERS).push(buffer);
    Ok(id)
}

pub fn configure_buffer_tracing_service(
    ctx: ContextId,
    kind: Kind,
    operations: Option<&[u32]>,
    buffer: BufferId,
) -> Result<(), ServiceError> {
    validate(ctx)?;
    let buffer = find(buffer)?;
    if buffer.context != ctx {
        return Err(ServiceError::BufferNotFound);
    }
    let filter = OperationFilter::new(kind, operations)?;
    let all = filter.all();
    let svc = Box::into_raw(Box::new(BufferService { buffer, filter }));
    let result = with_live_slot(ctx, |_, slot, active| {
        // A started context's configuration is locked (rocprofiler-sdk's rule): stop it first.
        if active {
            return Err(ServiceError::ContextActive);
        }
        if !crate::callback::install_service(&slot.buffers[kind.index()], tagged_service(svc, all)) {
            return Err(ServiceError::ServiceAlreadyConfigured);
        }
        Ok(())
    });
    if result.is_err() {
        // SAFETY: not installed; we still own the box.
        drop(unsafe { Box::from_raw(svc) });
    }
    result
}

/// Has the delivery thread deliver every record written to the buffer before this call (all
/// threads) and returns when it has. Returns `Busy` from inside a callback (a tool's callback
/// on this thread may hold what the delivery waits for; on the delivery thread, the delivery
/// lock).
pub fn flush_buffer(buffer: BufferId) -> Result<(), ServiceError> {
    if crate::inflight::delivering(thread_state()) {
        return Err(ServiceError::Busy);
    }
    find(buffer)?.flush();
    Ok(())
}

/// Delivers what the buffer holds (as [`flush_buffer`]), then destroys it: its callback is
/// never called again once this returns, and its id names nothing. `ContextActive` while its
/// context is started (stop it first); `Busy` inside a callback. Records that services of the
/// stopped context still send to it (exits of calls entered before the stop) are dropped and
/// counted. Destroying the context destroys its buffers too.
pub fn destroy_buffer(buffer: BufferId) -> Result<(), ServiceError> {
    if crate::inflight::delivering(thread_state()) {
        return Err(ServiceError::Busy);
    }
    let b = find(buffer)?;
    if crate::context::context_is_active(b.context).unwrap_or(false) {
        return Err(ServiceError::ContextActive);
    }
    b.flush();
    {
        let _d = lock(&b.delivery);
        b.retired.store(true, Ordering::Relaxed);
    }
    lock(&BUFFERS).retain(|x| !Arc::ptr_eq(x, &b));
    Ok(())
}

/// Records dropped by a discard-policy buffer since it was created.
pub fn buffer_dropped_total(buffer: BufferId) -> Result<u64, ServiceError> {
    Ok(find(buffer)?.dropped_total.load(Ordering::Relaxed))
}

/// The buffer's staging capacity in bytes (per producing thread).
pub fn buffer_capacity(buffer: BufferId) -> Result<usize, ServiceError> {
    Ok(find(buffer)?.capacity * 8)
}

/// Flushes and unregisters the buffers of a context being destroyed.
pub(crate) fn retire_context_buffers(ctx: ContextId) {
    let mine: Vec<Arc<Buffer>> = {
        let mut all = lock(&BUFFERS);
        let (mine, rest) = all.drain(..).partition(|b| b.context == ctx);
        *all = rest;
        mine
    };
    for b in mine {
        b.flush();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::Area;
    use loom::sync::Arc;
    use std::mem::MaybeUninit;

    /// One producer staging three one-header records (8 words) into a ring of 8 words, so it
    /// must wait for the consumer's `release` before it reuses the words and the start entry,
    /// while a consumer delivers until it has them all, through the shipped `publish`, `head`,
    /// `take`, `runs` and `release`: every record is read exactly once, with the value
    /// written, and never after it was overwritten. (Words and start entries are written and
    /// read through the cells here: the shipped path uses raw pointers, which loom cannot
    /// follow.)
    #[test]
    fn loom_staging_ring_delivers_each_record_once() {
        loom::model(|| {
            let area = Arc::new(Area::new(8));
            let producer = {
                let area = area.clone();
                loom::thread::spawn(move || {
                    for (record, v) in (1..=3u64).enumerate() {
                        while area.head() != record {
                            loom::thread::yield_now();
                        }
                        let start = record * 8;
                        // SAFETY: the record's words and start entry were released: ours.
                        area.words[start % 8].with_mut(|p| unsafe { p.write(MaybeUninit::new(v)) });
                        let at = area.words[start % 8].with(|p| p.cast::<super::BufferRecordHeader>());
                        area.starts[0].with_mut(|p| unsafe { p.write(MaybeUninit::new(at)) });
                        area.publish(record + 1);
                    }
                })
            };
            let mut seen = Vec::new();
            while seen.len() < 3 {
                let r = area.take();
                let mut out = Vec::new();
                for run in area.runs(r.clone()) {
                    for i in run {
                        // SAFETY: the start entry of a published record, not reused before
                        // `release`.
                        out.push(area.starts[i].with(|p| unsafe { (*p).assume_init() }));
                    }
                }
                assert_eq!(out.len(), r.len());
                for ptr in out {
                    // The record's first word, read through its cell (found by its address).
                    let i = area.words.iter().position(|c| c.with(|p| p.cast::<super::BufferRecordHeader>()) == ptr);
                    // SAFETY: a published record, not reused before `release`.
                    seen.push(area.words[i.expect("a word of the ring")].with(|p| unsafe { (*p).assume_init() }));
                }
                area.release(r.end);
                loom::thread::yield_now();
            }
            producer.join().expect("producer");
            assert_eq!(seen, vec![1, 2, 3]);
        });
    }

    /// The hand-over without a system call in the common case, through the shipped `publish`,
    /// `mark_ready`, `marked`, `take`, `release` and the doorbell: a producer stages two
    /// records, marking its ring after each (its watermark) and ringing only as the doorbell
    /// decides; the delivery thread delivers what is marked and otherwise sleeps without a
    /// timeout (the state in which every mark must reach it). A lost wakeup leaves it asleep
    /// with a marked ring, which loom reports as a deadlock; every record is delivered once.
    #[test]
    fn loom_a_marked_ring_reaches_the_sleeping_delivery_thread() {
        use crate::doorbell::{Doorbell, Sleep, Urgency};
        loom::model(|| {
            let area = Arc::new(Area::new(16));
            let bell = Arc::new(Doorbell::new());
            let producer = {
                let (area, bell) = (area.clone(), bell.clone());
                loom::thread::spawn(move || {
                    for records in 1..=2 {
                        area.publish(records);
                        area.mark_ready(records);
                        bell.ring_if_needed(Urgency::Watermark);
                    }
                })
            };
            let mut delivered = 0;
            while delivered < 2 {
                if area.marked() {
                    let r = area.take();
                    delivered += r.len();
                    area.release(r.end);
                } else {
                    bell.sleep(Sleep::Deep, || area.marked());
                }
            }
            producer.join().expect("producer");
            assert_eq!(delivered, 2);
        });
    }
}
