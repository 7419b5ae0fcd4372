//! The recording: its configuration, the per-thread rings and the record path.
//!
//! Record path (an application thread, inside a services callback): one Acquire load of the
//! current recording (null = not recording), the thread's `Local` from a thread-local (`try_with`:
//! threads in teardown record nothing and count it in [`late_lost`]), the entry built on the stack
//! and pushed into the thread's own single-producer ring with one Release store (wait-free), and,
//! when the ring passed a quarter full since the writer last woke, one wake-up of the writer
//! (`wakeup.rs`).
//! The first record of a thread registers its ring (`#[cold]`: allocation, a mutex, a `Thread`
//! definition).
//!
//! A full ring: in the default mode the entry is dropped and counted (the writer puts the counts
//! in the trace as `Drops` records); in lossless mode ([`Config::lossless`]) the thread wakes the
//! writer and yields until the entry fits: it never drops, and it blocks the application thread
//! for as long as the writer needs to make room (the writer never calls into the runtime, so this
//! cannot deadlock on the runtime's locks). A recording that is finishing drops instead of waiting.
//!
//! Finishing counts every record that passed the gate: a thread marks its ring `busy` (a plain
//! store to its own ring) before it looks at the gate a second time and clears the mark after the
//! push; `finish` closes the gate, and the writer makes every thread's marks visible with one
//! `membarrier` (an asymmetric fence: the record path itself pays no fence instruction) and waits
//! until no ring is busy before its last drain. A record that meets the closed gate at the second
//! look is counted as dropped; one whose thread is registering as the recording finishes, too
//! (`quiesce.rs`).

#![allow(unsafe_code)] // the current recording is a leaked `Inner` behind an `AtomicPtr`

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use offtrace_core::DirectThreadWord;
use offtrace_core::ring::{self, Consumer, Producer};
use offtrace_format::{Record, StrId};

use crate::definitions::Definitions;

/// How a recording behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Words (8 bytes) per thread ring; rounded up to a power of two. Default 1 Mi words (8 MiB).
    pub ring_words: usize,
    /// Never drop: a thread whose ring is full waits for the writer (see the module docs).
    pub lossless: bool,
    /// How often the writer wakes without being asked. It then closes the open chunk if the
    /// chunk holds at least [`Config::min_timed_chunk_bytes`], or if [`Config::max_flush_delay`]
    /// passed since the last chunk was closed (what a crash can lose: see `writer.rs`).
    pub flush_interval: Duration,
    /// Uncompressed bytes per chunk.
    pub chunk_bytes: usize,
    /// The least encoded bytes for which the flush interval's timer closes a chunk.
    pub min_timed_chunk_bytes: usize,
    /// The longest a record waits for its chunk to be closed (at a flush interval's tick).
    pub max_flush_delay: Duration,
    /// On a fatal signal, flush the rings into the file before the process dies (`crash.rs`).
    pub crash_flush: bool,
    /// Chunks whose records average at most this many encoded bytes are written without LZ4
    /// (`TraceWriter::store_raw_up_to`; 0: always compressed). Default
    /// [`RAW_CHUNK_BYTES_PER_RECORD`].
    pub raw_chunk_bytes_per_record: usize,
}

/// Encoded bytes per record up to which the recorder stores a chunk without LZ4: such a chunk
/// holds at most 16 bytes a record on disk, half issue 11's bound of 32, and LZ4 would cost the
/// writer about 17 instructions per byte, as much as encoding them (a small OpenCL kernel's
/// three records: about 32 bytes, 540 instructions of LZ4). Chunks of larger records (SYCL
/// programs' typical 20-25 bytes) are compressed as before.
pub const RAW_CHUNK_BYTES_PER_RECORD: usize = 16;

impl Default for Config {
    fn default() -> Self {
        Self {
            ring_words: 1 << 20,
            lossless: false,
            flush_interval: Duration::from_millis(100),
            chunk_bytes: offtrace_format::DEFAULT_CHUNK_BYTES,
            min_timed_chunk_bytes: 64 << 10,
            max_flush_delay: Duration::from_millis(250),
            crash_flush: false,
            raw_chunk_bytes_per_record: RAW_CHUNK_BYTES_PER_RECORD,
        }
    }
}

impl Config {
    /// Chunks whose records average at most `bytes` encoded bytes are stored without LZ4 (0:
    /// always compressed).
    pub fn with_raw_chunks_up_to(mut self, bytes: usize) -> Self {
        self.raw_chunk_bytes_per_record = bytes;
        self
    }

    /// The default configuration with `ring_words` per thread.
    pub fn with_ring_words(mut self, ring_words: usize) -> Self {
        self.ring_words = ring_words.max(crate::entry::MAX_ENTRY_WORDS * 2);
        self
    }

    /// The configuration in lossless mode (`true`) or dropping mode.
    pub fn with_lossless(mut self, lossless: bool) -> Self {
        self.lossless = lossless;
        self
    }

    /// The configuration with another flush interval.
    pub fn with_flush_interval(mut self, d: Duration) -> Self {
        self.flush_interval = d;
        self
    }

    /// The configuration that installs the fatal-signal handler when the recording starts (once
    /// per process; `crash.rs`), or not. The agents pass [`crate::crash_flush_wanted`].
    pub fn with_crash_flush(mut self, on: bool) -> Self {
        self.crash_flush = on;
        self
    }

    /// The configuration whose timer closes chunks of at least `bytes`, or older than `delay`
    /// (`0` and the flush interval: every chunk at every tick).
    pub fn with_timed_chunks(mut self, bytes: usize, delay: Duration) -> Self {
        self.min_timed_chunk_bytes = bytes;
        self.max_flush_delay = delay;
        self
    }
}

/// A backend's optional raw layer (SYCL: every XPTI notification as the runtime sent it):
/// encoded on the application thread into an entry body, decoded on the writer thread into
/// records (the raw layer's own definitions go through [`crate::definitions`]).
/// Room for a raw entry's body (the `out` of [`RawLayer::encode`]).
pub const RAW_BODY_WORDS: usize = 64;

pub trait RawLayer: Send + Sync + 'static {
    /// Writes the body of the raw record `op` with `payload` (the `XPTI` kind's payload as the
    /// services delivered it) into `out` ([`RAW_BODY_WORDS`] words); returns the number of
    /// words, or `None` to skip it.
    ///
    /// # Safety
    ///
    /// `payload` is the payload of the callback being delivered (the backend's raw struct, or
    /// null), valid for the duration of the call.
    unsafe fn encode(&self, op: u32, payload: *const std::ffi::c_void, out: &mut [u64]) -> Option<usize>;

    /// Turns one entry body back into records (writer thread), `ts` in CLOCK_MONOTONIC ns.
    fn decode(&self, tid: u32, ts: u64, op: u32, body: &[u64], out: &mut dyn FnMut(Record));
}

/// The writer's view of one thread's ring.
pub(crate) struct RingShared {
    pub tid: u32,
    pub consumer: Mutex<Consumer<u64>>,
    /// Entries this thread dropped (written by the thread only, read by the writer).
    pub dropped: AtomicU64,
    /// The thread exited: the writer drains the ring and forgets it.
    pub orphaned: AtomicBool,
    /// The thread is between its second look at the gate and the end of its push (see the
    /// module docs): the writer's last drain waits for it.
    pub busy: AtomicBool,
}

pub(crate) struct Inner {
    pub config: Config,
    pub defs: Definitions,
    pub rings: Mutex<Vec<Arc<RingShared>>>,
    /// What the writer sleeps on between cycles (async-signal-safe to wake: `crash.rs`).
    pub wakeup: crate::wakeup::Wakeup,
    /// A fatal signal's request for a last flush, and the writer's answer (`crash.rs`).
    pub crash: crate::crash::CrashState,
    /// A producer asked the writer to wake since its last cycle (one wake-up per cycle at most).
    pub wake_pending: AtomicBool,
    /// `finish` was called: lossless threads stop waiting, threads stop registering.
    pub stopping: AtomicBool,
    /// Threads registering a ring now (the writer's last drain waits for them).
    pub registering: std::sync::atomic::AtomicUsize,
    /// Records refused because the recording finished while their thread was registering: the
    /// writer reports them as drops of thread 0.
    pub refused: AtomicU64,
    pub raw: std::sync::OnceLock<Box<dyn RawLayer>>,
    /// Flush requests made and served: `(requested, served)`, with the condvar `flush` waits on.
    pub flushes: (Mutex<(u64, u64)>, std::sync::Condvar),
}

/// The current recording (a leaked `Inner`; null when none). Recordings are rare (one per
/// process, a few in tests), so each leaks its small `Inner` instead of reference counting it
/// on the record path.
static CURRENT: AtomicPtr<Inner> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises `start` and `finish`.
pub(crate) static LIFECYCLE: Mutex<()> = Mutex::new(());
/// Records not recorded because the thread's thread-locals were already destroyed.
static LATE_LOST: AtomicU64 = AtomicU64::new(0);

/// The current recording, if any.
#[inline(always)]
pub(crate) fn current() -> Option<&'static Inner> {
    // Acquire: pairs with the Release in `install`, publishing the `Inner`'s construction.
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: non-null values of `CURRENT` come from `Box::leak` in `install` and are never
    // freed, so they are valid for `'static`.
    unsafe { p.as_ref() }
}

pub(crate) fn install(inner: Box<Inner>) -> &'static Inner {
    let inner: &'static Inner = Box::leak(inner);
    // Release: publishes the `Inner` to the record path's Acquire in `current`.
    CURRENT.store(inner as *const Inner as *mut Inner, Ordering::Release);
    inner
}

pub(crate) fn uninstall() {
    // SeqCst: before `stopping` in the order the writer's quiescence relies on (`quiesce.rs`).
    CURRENT.store(std::ptr::null_mut(), Ordering::SeqCst);
}

/// In a forked child (`pthread_atfork`): the child has no writer thread, so it records nothing
/// (the parent's trace is not touched).
pub fn stop_in_child() {
    uninstall();
}

/// Entries dropped so far by the current recording's threads (full rings, default mode).
pub fn total_drops() -> u64 {
    current().map_or(0, |i| {
        i.rings.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|r| r.dropped.load(Ordering::Relaxed)).sum()
    })
}

/// Asks the writer to drain every ring and close a chunk, and waits for it at most `timeout`
/// (a trace killed after this returns keeps what was recorded before the call). On the writer
/// thread itself (a sink, a tool called there) it returns at once: the writer cannot serve a
/// request while it waits for it.
pub fn flush(timeout: Duration) {
    let Some(inner) = current() else { return };
    if inner.crash.on_writer_thread() {
        return;
    }
    let (m, cv) = &inner.flushes;
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    g.0 += 1;
    let want = g.0;
    inner.wakeup.wake();
    let _ = cv.wait_timeout_while(g, timeout, |f| f.1 < want);
}

/// Whether a recording is running.
pub fn is_recording() -> bool {
    current().is_some()
}

/// Records lost because their thread was in teardown (its thread-locals destroyed).
pub fn late_lost() -> u64 {
    LATE_LOST.load(Ordering::Relaxed)
}

/// The thread's recording state: its ring and its string cache.
pub(crate) struct Local {
    /// The recording this ring belongs to (its address; compared only).
    inner: usize,
    producer: Producer<u64>,
    shared: Arc<RingShared>,
    strings: HashMap<crate::definitions::StrKey, StrId, foldhash::fast::FixedState>,
    /// The strings looked up last, compared before the map (a thread names the same few kernels
    /// and commands over and over): each points at a key of `strings`, whose heap bytes stay put
    /// while the map grows or rehashes (the `Box` moves, not what it owns; keys are never
    /// removed). Addresses, not pointers: the `Local` of the late ring moves between threads.
    recent: [(usize, usize, StrId); RECENT],
    next_recent: usize,
    /// Strings the backend interned for the process's lifetime, by their address (see
    /// [`Local::interned_string`]), and the slot the next one takes. Per recording, as the ids.
    interned: [(usize, StrId); RECENT],
    next_interned: usize,
    /// Words pushed, and the count at which to wake the writer next (every quarter ring).
    pushed: usize,
    next_wake: usize,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread's `LOCAL` no longer holds this `Local`: forget its address (see
        // `with_local_at`). (The late ring's `Local` moves between threads: clearing another
        // thread's word only sends its next record through the thread-local.)
        offtrace_core::clear_direct_thread_word();
        // Release: the entries pushed before are visible to the writer that sees the flag.
        self.shared.orphaned.store(true, Ordering::Release);
    }
}

/// Strings kept in [`Local::recent`].
const RECENT: usize = 8;

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn thread_name(tid: u32) -> Vec<u8> {
    std::fs::read(format!("/proc/self/task/{tid}/comm"))
        .map(|mut v| {
            while v.last() == Some(&b'\n') {
                v.pop();
            }
            v
        })
        .unwrap_or_default()
}

#[cold]
#[inline(never)]
fn register(inner: &'static Inner) -> Local {
    let (producer, consumer) = ring::ring::<u64>(inner.config.ring_words);
    let tid = gettid();
    let shared = Arc::new(RingShared {
        tid,
        consumer: Mutex::new(consumer),
        dropped: AtomicU64::new(0),
        orphaned: AtomicBool::new(false),
        busy: AtomicBool::new(false),
    });
    let name = inner.defs.string(&thread_name(tid));
    inner.defs.push(Record::Thread { tid, name });
    inner.rings.lock().unwrap_or_else(|e| e.into_inner()).push(shared.clone());
    let quarter = producer.capacity() / 4;
    Local {
        inner: inner as *const Inner as usize,
        producer,
        shared,
        strings: HashMap::default(),
        recent: [(0, 0, StrId(0)); RECENT],
        next_recent: 0,
        interned: [(0, StrId(0)); RECENT],
        next_interned: 0,
        pushed: 0,
        next_wake: quarter,
    }
}

/// Runs `f` with the calling thread's ring of the current recording; `false` when nothing is
/// recording or the thread cannot record (teardown, or re-entered).
#[inline]
pub(crate) fn with_local(f: impl FnOnce(&'static Inner, &mut Local)) -> bool {
    let Some(inner) = current() else { return false };
    let mut f = Some(f);
    let done = LOCAL.try_with(|cell| record_in(cell, inner, &mut f));
    match (done, f) {
        (Ok(done), _) => done,
        (Err(_), Some(f)) => with_late(inner, f),
        (Err(_), None) => false,
    }
}

/// [`with_local`] for the direct path, whose services pass the emitting thread's word
/// (`thread`): it holds the address of this thread's `LOCAL` while that holds a `Local`, so
/// the record reaches the ring without the thread-local access, a `__tls_get_addr` call in the
/// agent (a shared object; `docs/overhead.md`, *Agent*).
#[inline]
pub(crate) fn with_local_at(thread: &DirectThreadWord, f: impl FnOnce(&'static Inner, &mut Local)) -> bool {
    let Some(inner) = current() else { return false };
    let mut f = Some(f);
    let cached = thread.get();
    if cached != 0 {
        // SAFETY: a non-zero word is this thread's `LOCAL` (stored below, on this thread, only
        // while it holds a `Local`; the services pass each thread its own word): its slot goes
        // from `Some` to `None` only by dropping that `Local` (nothing takes it out), and
        // `Local::drop` clears the word, so the thread-local's value is alive here; the
        // reference stays on this thread.
        let cell = unsafe { &*(cached as *const RefCell<Option<Local>>) };
        return record_in(cell, inner, &mut f);
    }
    let done = LOCAL.try_with(|cell| {
        let done = record_in(cell, inner, &mut f);
        if cell.try_borrow().is_ok_and(|slot| slot.is_some()) {
            thread.set(cell as *const RefCell<Option<Local>> as usize);
        }
        done
    });
    match (done, f) {
        (Ok(done), _) => done,
        (Err(_), Some(f)) => with_late(inner, f),
        (Err(_), None) => false,
    }
}

/// [`with_local`] on the thread's slot `cell`.
#[inline(always)]
fn record_in(
    cell: &RefCell<Option<Local>>,
    inner: &'static Inner,
    f: &mut Option<impl FnOnce(&'static Inner, &mut Local)>,
) -> bool {
    let Ok(mut slot) = cell.try_borrow_mut() else { return false };
    match (slot.as_mut(), f.take()) {
        (Some(local), Some(f)) if local.inner == inner as *const Inner as usize => local.record(inner, f),
        (_, Some(f)) => register_and_record(inner, &mut slot, f),
        (_, None) => false,
    }
}

/// The first record of a thread in this recording: registers its ring, unless the recording is
/// finishing (then the record is counted in `refused`).
#[cold]
#[inline(never)]
fn register_and_record(
    inner: &'static Inner,
    slot: &mut Option<Local>,
    f: impl FnOnce(&'static Inner, &mut Local),
) -> bool {
    // SeqCst (with the load of `stopping` below, `finish`'s store of it and the writer's load of
    // `registering`): either this thread sees `stopping`, or the writer sees it registering and
    // waits for it before the last drain.
    inner.registering.fetch_add(1, Ordering::SeqCst);
    let recorded = if inner.stopping.load(Ordering::SeqCst) {
        inner.refused.fetch_add(1, Ordering::Relaxed);
        false
    } else {
        let local = slot.insert(register(inner));
        f(inner, local);
        true
    };
    // Release: the push (or the `refused` count) is visible to the writer that sees 0.
    inner.registering.fetch_sub(1, Ordering::Release);
    recorded
}

/// Threads whose thread-locals are destroyed (the main thread inside `exit`, while the runtime
/// tears down and still makes calls) share one ring, taken with `try_lock` (never blocking an
/// exiting thread; contention is a loss counted in [`late_lost`]). Its records carry the tid of
/// the thread that first used it.
#[cold]
#[inline(never)]
fn with_late(inner: &'static Inner, f: impl FnOnce(&'static Inner, &mut Local)) -> bool {
    static LATE: Mutex<Option<Local>> = Mutex::new(None);
    let Ok(mut slot) = LATE.try_lock() else {
        LATE_LOST.fetch_add(1, Ordering::Relaxed);
        return false;
    };
    match slot.as_mut() {
        Some(local) if local.inner == inner as *const Inner as usize => local.record(inner, f),
        _ => register_and_record(inner, &mut slot, f),
    }
}

impl Local {
    /// Runs `f` (which pushes at most one entry) inside the ring's busy mark, after a second look
    /// at the gate: a record that meets a recording being finished is counted as dropped.
    #[inline(always)]
    fn record(&mut self, inner: &'static Inner, f: impl FnOnce(&'static Inner, &mut Local)) -> bool {
        // Relaxed store, then a fence for the compiler only: the writer's `membarrier` orders the
        // store before the load of `CURRENT` below on this thread's CPU (`quiesce.rs`).
        self.shared.busy.store(true, Ordering::Relaxed);
        crate::quiesce::enter_fence();
        let recorded = if std::ptr::eq(CURRENT.load(Ordering::Relaxed), inner) {
            f(inner, self);
            true
        } else {
            self.count_drop();
            false
        };
        // Release: the push and any drop count happen before the writer sees the ring idle.
        self.shared.busy.store(false, Ordering::Release);
        recorded
    }

    #[inline]
    fn count_drop(&self) {
        // Relaxed: a counter the writer reads now and then; only this thread writes it.
        let d = self.shared.dropped.load(Ordering::Relaxed);
        self.shared.dropped.store(d + 1, Ordering::Relaxed);
    }

    /// The id of `bytes` in this recording's string table (per-thread cache in front).
    #[inline]
    pub(crate) fn string(&mut self, inner: &Inner, bytes: &[u8]) -> StrId {
        if bytes.is_empty() {
            return StrId(0);
        }
        for &(p, len, id) in &self.recent {
            // SAFETY: a non-zero `p` is the address of `len` bytes of a key of `self.strings`
            // (see `recent`), alive as long as `self`.
            if len == bytes.len() && p != 0 && unsafe { std::slice::from_raw_parts(p as *const u8, len) } == bytes {
                return id;
            }
        }
        match self.strings.get_key_value(bytes) {
            // Seen before: a string that repeats. A string seen once (a virtual node's name
            // holds an address) does not take the place of one that repeats.
            Some((k, &id)) => {
                self.recent[self.next_recent] = (k.0.as_ptr() as usize, bytes.len(), id);
                self.next_recent = (self.next_recent + 1) % RECENT;
                id
            }
            // Cached when it comes back, not at its first use: the names that hold an address
            // (SYCL's virtual nodes and their edges, hundreds a run, each seen once) would each
            // cost an allocation and an insert here, and grow the map every other look-up probes.
            // A string that repeats pays one more trip to the shared table, once.
            None => {
                let (id, first_use) = inner.defs.intern(bytes);
                if !first_use {
                    self.strings.insert(crate::definitions::StrKey(bytes.into()), id);
                }
                id
            }
        }
    }

    /// [`Self::string`] of a NUL-terminated string (null: none) that lives as long as the process
    /// and never changes (the OpenCL layer's kernel names: `DirectRecord::interned`): its
    /// address names it, so a string seen before costs a few compares of addresses instead of
    /// its `strlen` and the comparison of its bytes. The ids are this recording's (each
    /// recording has its own `Local`, so a new string table starts with an empty cache).
    ///
    /// # Safety
    /// `p` is null or a NUL-terminated string that is never freed or changed.
    #[inline]
    pub(crate) unsafe fn interned_string(&mut self, inner: &Inner, p: *const std::ffi::c_char) -> StrId {
        let key = p as usize;
        if key == 0 {
            return StrId(0);
        }
        for &(k, id) in &self.interned {
            if k == key {
                return id;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.interned_miss(inner, p) }
    }

    /// # Safety
    /// As [`Self::interned_string`], `p` not null.
    #[cold]
    #[inline(never)]
    unsafe fn interned_miss(&mut self, inner: &Inner, p: *const std::ffi::c_char) -> StrId {
        // SAFETY: the caller's contract: a NUL-terminated string that lives as long as the
        // process.
        let id = self.string(inner, unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes());
        self.interned[self.next_interned] = (p as usize, id);
        self.next_interned = (self.next_interned + 1) % RECENT;
        id
    }

    /// Pushes one entry (see `entry.rs`); drops and counts it, or in lossless mode waits, when
    /// the ring is full.
    #[inline]
    pub(crate) fn push(&mut self, inner: &Inner, words: &[u64]) {
        loop {
            if self.push_words(words) {
                self.note_pushed(inner, words.len());
                return;
            }
            if !inner.config.lossless || inner.stopping.load(Ordering::Relaxed) {
                self.count_drop();
                wake_writer(inner);
                return;
            }
            full_wait(inner);
        }
    }
}

impl Local {
    /// Pushes one entry of at most `max` words (≤ `N`) that `fill` writes: `fill` gets room for
    /// `max` words, writes the first `n` of them (every one) and returns `n`. The room is the
    /// ring's own slots when `max` of them are free in one piece (all but one position a lap):
    /// the entry is written once, in place, with no array to zero on the stack and nothing to
    /// copy (the path of every record on the emitting thread). Otherwise a stack array of `N`,
    /// left uninitialized, pushed as [`Self::push`] does (the wrap, a full ring: waits or drops
    /// as there), so either way the ring receives the same words.
    #[inline(always)]
    pub(crate) fn push_with<const N: usize>(
        &mut self,
        inner: &Inner,
        max: usize,
        fill: impl FnOnce(&mut [MaybeUninit<u64>]) -> usize,
    ) {
        let max = max.min(N);
        let mut stack = [MaybeUninit::<u64>::uninit(); N];
        let mut reservation = self.producer.reserve(max);
        let (room, in_ring) = match reservation.as_mut().and_then(|r| r.contiguous()) {
            Some(slots) => (slots, true),
            None => (&mut stack[..max], false),
        };
        let n = fill(room).min(max);
        match reservation {
            Some(r) if in_ring => {
                r.commit(n);
                self.note_pushed(inner, n);
            }
            _ => {
                // SAFETY: `fill` wrote the first `n` words of `stack` (its contract above).
                let words = unsafe { stack[..n].assume_init_ref() };
                self.push(inner, words);
            }
        }
    }

    /// `n` words were pushed: wakes the writer each quarter of the ring.
    #[inline(always)]
    fn note_pushed(&mut self, inner: &Inner, n: usize) {
        self.pushed = self.pushed.wrapping_add(n);
        if self.pushed >= self.next_wake {
            self.next_wake = self.pushed.wrapping_add(self.producer.capacity() / 4);
            wake_writer(inner);
        }
    }

    /// One entry into the ring, published with one Release store; `false` when it does not fit.
    /// Written word by word into the reserved slots: an entry is 5-20 words, for which
    /// `push_slice`'s two `memcpy` calls (the second one empty but for one entry per lap) cost
    /// more than the copy.
    #[inline(always)]
    fn push_words(&mut self, words: &[u64]) -> bool {
        let Some(mut r) = self.producer.reserve(words.len()) else { return false };
        match r.contiguous() {
            Some(slots) => {
                for (slot, &w) in slots.iter_mut().zip(words) {
                    slot.write(w);
                }
            }
            None => {
                for (i, &w) in words.iter().enumerate() {
                    r.set(i, w);
                }
            }
        }
        r.commit(words.len());
        true
    }
}

#[cold]
#[inline(never)]
fn full_wait(inner: &Inner) {
    wake_writer(inner);
    std::thread::yield_now();
}

#[inline]
fn wake_writer(inner: &Inner) {
    // Relaxed: a hint; the writer clears it at the start of a cycle, and a lost wake-up only
    // delays the drain to the next tick.
    if !inner.wake_pending.swap(true, Ordering::Relaxed) {
        inner.wakeup.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flush requests made so far (`None` without a recording).
    fn requested() -> Option<u64> {
        current().map(|i| i.flushes.0.lock().unwrap_or_else(|e| e.into_inner()).0)
    }

    /// The flush requests made before and after the sink's own `flush`.
    type Requests = (Option<u64>, Option<u64>);

    /// A sink that, at its first chunk close (on the writer thread, while the recording runs),
    /// calls [`flush`] and notes the requests made before and after that call.
    struct FlushingSink(Arc<Mutex<Option<Requests>>>);

    impl crate::TraceSink for FlushingSink {
        fn write(&mut self, _: &offtrace_format::Record) -> Result<(), String> {
            Ok(())
        }
        fn flush_chunk(&mut self) -> Result<(), String> {
            let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if seen.is_none() {
                let before = requested();
                flush(Duration::from_millis(200));
                *seen = Some((before, requested()));
            }
            Ok(())
        }
        fn finish(self: Box<Self>) -> Result<(), String> {
            Ok(())
        }
    }

    /// On the writer thread `flush` asks nothing and returns: a request there would wait its
    /// whole timeout for the thread that waits (and be served late, by the next cycle). Another
    /// thread's flush is served.
    #[test]
    fn a_flush_on_the_writer_thread_asks_nothing_and_another_threads_is_served() {
        let seen = Arc::new(Mutex::new(None));
        crate::writer::start(Config::default(), Box::new(FlushingSink(seen.clone()))).expect("start");
        // Served by a cycle that closes a chunk: the sink's first close comes before or with it.
        flush(Duration::from_secs(60));
        let served = current().map(|i| *i.flushes.0.lock().unwrap_or_else(|e| e.into_inner()));
        crate::writer::finish().expect("finish");
        assert_eq!(served, Some((1, 1)), "this thread's flush was asked and served");
        let (before, after) = seen.lock().unwrap_or_else(|e| e.into_inner()).expect("the sink closed a chunk");
        assert!(before.is_some(), "the chunk was closed while the recording ran");
        assert_eq!(before, after, "the writer thread's flush made no request");
    }
}
