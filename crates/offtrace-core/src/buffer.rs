//! The buffer tracing service: fixed-size records collected into a buffer and handed to the
//! tool's callback in batches.
//!
//! Shape: each producing thread has its own staging area per buffer holding up to `size` bytes
//! of records: a linear array the thread appends to (no lock, no read-modify-write, no cache
//! line shared with another thread; one `Release` store of its fill index per record). The
//! thread finds its area through a per-context cache in its thread state (no lookup). When it
//! has staged `watermark` bytes of records, *that thread* delivers them: it takes the buffer's
//! delivery lock (so callbacks never run concurrently for one buffer), hands the callback a
//! pointer into its own area (no copy), and rewinds the area. A flush (any thread, under the
//! same lock) consumes every area from its read index up to its published fill index; only
//! the producing thread rewinds its area, and only under the lock, so a consumer never reads a
//! record being written.
//!
//! Semantics:
//! - `size` bounds each producing thread's staging (`size / size_of::<BufferRecord>()`
//!   records per thread): memory grows with the number of producing threads;
//! - `watermark` is per thread: a thread delivers its staged records when it has `watermark`
//!   bytes' worth. Records of a thread that stays below it wait for a flush;
//! - [`BufferPolicy::Lossless`] never drops: at the watermark, or when its staging is full, the
//!   producing thread delivers synchronously, waiting for a delivery in progress on another
//!   thread. The application thread pays for the tool's callback;
//! - [`BufferPolicy::Discard`] never blocks: when another thread is delivering, the producer
//!   keeps staging; when its staging is full, the record is dropped and counted. The next
//!   callback gets the count (`drop_count`); [`buffer_dropped_total`] sums them;
//! - [`flush_buffer`] drains every thread's staging and delivers everything recorded before it
//!   was called (in chunks of at most `size` bytes) before it returns.

#![allow(unsafe_code)] // calls tools' `extern "C"` buffer callbacks

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::callback::{CorrelationId, OperationFilter, tagged_service};
use crate::context::{ContextId, MAX_CONTEXTS, validate, with_live_slot};
use crate::correlation::{THREAD, thread_state};
use crate::error::ServiceError;
use crate::kind::Kind;
use crate::payload::Payload;
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

/// `offtrace_buffer_tracing_record_t`: one fixed-size record (104 bytes).
///
/// `data` keeps six kind-specific values, the leading fields of the kind's payload: `UR_API`:
/// function id, result, args 0–3; `KERNEL_DISPATCH`: queue, kernel, global size x/y/z, work dim;
/// `MEMORY_COPY`: queue, dst, src, size; `MEMORY_FILL`: queue, dst, pattern, pattern size,
/// size; `MEMORY_ALLOC`: ptr, size, type, device; others: their payload's fields in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct BufferRecord {
    pub context_id: ContextId,
    pub kind: u32,
    pub operation: u32,
    pub correlation_id: CorrelationId,
    pub thread_id: u64,
    pub start_timestamp: u64,
    pub end_timestamp: u64,
    pub data: [u64; 6],
}

impl BufferRecord {
    #[allow(clippy::too_many_arguments, reason = "one argument per field of the C record it builds")]
    #[inline(always)]
    pub(crate) fn new(
        context_id: ContextId,
        kind: Kind,
        operation: u32,
        correlation_id: CorrelationId,
        thread_id: u64,
        start_timestamp: u64,
        end_timestamp: u64,
        data: [u64; 6],
    ) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x};
            const _: () = assert!(std::mem::size_of::<BufferRecord>() == 104);
            let k = (u64::from(kind as u32) | (u64::from(operation) << 32)) as i64;
            // Built in 16-byte chunks: the ring's copy of a record written field by field would
            // stall on store forwarding (see `callback::invoke`).
            // SAFETY: SSE2 is part of the x86-64 baseline.
            let chunks: [__m128i; 7] = unsafe {
                [
                    _mm_set_epi64x(k, context_id.handle as i64),
                    _mm_set_epi64x(correlation_id.external.value as i64, correlation_id.internal as i64),
                    _mm_set_epi64x(start_timestamp as i64, thread_id as i64),
                    _mm_set_epi64x(data[0] as i64, end_timestamp as i64),
                    _mm_set_epi64x(data[2] as i64, data[1] as i64),
                    _mm_set_epi64x(data[4] as i64, data[3] as i64),
                    _mm_set_epi64x(0, data[5] as i64),
                ]
            };
            // SAFETY: `chunks` holds 112 readable bytes laid out as `BufferRecord` (context 0,
            // kind 8, operation 12, correlation 16, thread 32, start 40, end 48, data 56; checked
            // by the layout test) plus 8 unused bytes; every bit pattern is valid for its fields.
            unsafe { std::mem::transmute_copy::<[__m128i; 7], BufferRecord>(&chunks) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self {
            context_id,
            kind: kind as u32,
            operation,
            correlation_id,
            thread_id,
            start_timestamp,
            end_timestamp,
            data,
        }
    }
}

impl BufferRecord {
    /// Writes the record to `dst` as [`BufferRecord::new`] builds it, with 16-byte stores
    /// straight into the staging area (no copy through the stack).
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `BufferRecord` (any alignment).
    #[allow(clippy::too_many_arguments, reason = "one argument per field of the C record it stores")]
    #[inline(always)]
    pub(crate) unsafe fn store(
        dst: *mut BufferRecord,
        context_id: ContextId,
        kind: Kind,
        operation: u32,
        correlation_id: CorrelationId,
        thread_id: u64,
        start_timestamp: u64,
        end_timestamp: u64,
        data: [u64; 6],
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
            let k = (u64::from(kind as u32) | (u64::from(operation) << 32)) as i64;
            let d = dst.cast::<__m128i>();
            // SAFETY:
            // - SSE2 is part of the x86-64 baseline;
            // - six unaligned 16-byte stores cover bytes 0..96 of `*dst` and the last 8 bytes are
            //   one u64 store: all inside the record (104 bytes, layout as in `new`).
            unsafe {
                _mm_storeu_si128(d, _mm_set_epi64x(k, context_id.handle as i64));
                _mm_storeu_si128(
                    d.add(1),
                    _mm_set_epi64x(correlation_id.external.value as i64, correlation_id.internal as i64),
                );
                _mm_storeu_si128(d.add(2), _mm_set_epi64x(start_timestamp as i64, thread_id as i64));
                _mm_storeu_si128(d.add(3), _mm_set_epi64x(data[0] as i64, end_timestamp as i64));
                _mm_storeu_si128(d.add(4), _mm_set_epi64x(data[2] as i64, data[1] as i64));
                _mm_storeu_si128(d.add(5), _mm_set_epi64x(data[4] as i64, data[3] as i64));
                dst.cast::<u64>().add(12).write_unaligned(data[5]);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: forwarded from the caller.
        unsafe {
            dst.write_unaligned(Self::new(
                context_id,
                kind,
                operation,
                correlation_id,
                thread_id,
                start_timestamp,
                end_timestamp,
                data,
            ))
        };
    }
}

/// The fields of a record known before its context is chosen (kind and operation, internal
/// correlation id, timestamps, data), as 16-byte values. Activity's fast path builds it first
/// and hands it to the full path when it gives up, so the arguments it comes from need not
/// survive the fast path (kept for that fallback, they took six callee-saved registers).
#[derive(Clone, Copy)]
pub(crate) struct RecordTemplate {
    /// Bytes 8..24 (kind, operation, internal id), 40..56 (start, end), 56..104 (data).
    #[cfg(target_arch = "x86_64")]
    chunks: [std::arch::x86_64::__m128i; 5],
    /// The record, context, external id and thread still 0.
    #[cfg(not(target_arch = "x86_64"))]
    record: BufferRecord,
}

impl RecordTemplate {
    #[inline(always)]
    pub(crate) fn new(kind: Kind, operation: u32, internal: u64, start: u64, end: u64, data: [u64; 6]) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::_mm_set_epi64x;
            let k = (u64::from(kind as u32) | (u64::from(operation) << 32)) as i64;
            // SAFETY: SSE2 is part of the x86-64 baseline.
            let chunks = unsafe {
                [
                    _mm_set_epi64x(internal as i64, k),
                    _mm_set_epi64x(end as i64, start as i64),
                    _mm_set_epi64x(data[1] as i64, data[0] as i64),
                    _mm_set_epi64x(data[3] as i64, data[2] as i64),
                    _mm_set_epi64x(data[5] as i64, data[4] as i64),
                ]
            };
            Self { chunks }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self {
            record: BufferRecord::new(
                ContextId::default(),
                kind,
                operation,
                CorrelationId { internal, external: crate::callback::UserData::default() },
                0,
                start,
                end,
                data,
            ),
        }
    }

    /// The fields back: (kind, operation, internal correlation id, start, end, data).
    #[inline(always)]
    pub(crate) fn fields(&self) -> (u32, u32, u64, u64, u64, [u64; 6]) {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: five 16-byte vectors are ten u64s; every bit pattern is valid.
            let w = unsafe { std::mem::transmute::<[std::arch::x86_64::__m128i; 5], [u64; 10]>(self.chunks) };
            (w[0] as u32, (w[0] >> 32) as u32, w[1], w[2], w[3], [w[4], w[5], w[6], w[7], w[8], w[9]])
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let r = &self.record;
            (r.kind, r.operation, r.correlation_id.internal, r.start_timestamp, r.end_timestamp, r.data)
        }
    }

    /// Writes the record to `dst` with its context, external correlation id and thread.
    ///
    /// # Safety
    /// `dst` must be valid for writes of one `BufferRecord` (any alignment).
    #[inline(always)]
    unsafe fn store(&self, dst: *mut BufferRecord, context_id: ContextId, external: u64, thread_id: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_storeu_si128};
            let b = dst.cast::<u8>();
            // SAFETY:
            // - SSE2 is part of the x86-64 baseline;
            // - the stores cover bytes 0..104 of `*dst`, each inside it (layout: context 0, kind
            //   8, operation 12, correlation 16 and 24, thread 32, start 40, end 48, data 56;
            //   checked by the layout test).
            unsafe {
                b.cast::<u64>().write_unaligned(context_id.handle);
                _mm_storeu_si128(b.add(8).cast::<__m128i>(), self.chunks[0]);
                b.add(24).cast::<u64>().write_unaligned(external);
                b.add(32).cast::<u64>().write_unaligned(thread_id);
                _mm_storeu_si128(b.add(40).cast::<__m128i>(), self.chunks[1]);
                _mm_storeu_si128(b.add(56).cast::<__m128i>(), self.chunks[2]);
                _mm_storeu_si128(b.add(72).cast::<__m128i>(), self.chunks[3]);
                _mm_storeu_si128(b.add(88).cast::<__m128i>(), self.chunks[4]);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut r = self.record;
            r.context_id = context_id;
            r.correlation_id.external.value = external;
            r.thread_id = thread_id;
            // SAFETY: forwarded from the caller.
            unsafe { dst.write_unaligned(r) };
        }
    }
}

/// Where a record's `data` comes from: a [`Payload`] (its kind checked against the record's,
/// its summary through a `match` on the variant), or the summary itself (activity's full path:
/// its callers took it from a payload of known type).
pub(crate) trait RecordData {
    fn data(&self, kind: Kind) -> [u64; 6];
}

impl RecordData for Payload<'_> {
    #[inline(always)]
    fn data(&self, kind: Kind) -> [u64; 6] {
        if self.kind() == Some(kind) { self.summary() } else { [0; 6] }
    }
}

impl RecordData for [u64; 6] {
    #[inline(always)]
    fn data(&self, _kind: Kind) -> [u64; 6] {
        *self
    }
}

/// `offtrace_buffer_policy_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BufferPolicy {
    /// Drop (and count) records when the buffer is full and a delivery is in progress.
    Discard = 1,
    /// Never drop: the producing thread delivers synchronously when the buffer is full.
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

/// `offtrace_buffer_tracing_cb_t`: `records[0..count]` is valid during the call only.
pub type BufferCallbackFn = unsafe extern "C" fn(
    context: ContextId,
    buffer: BufferId,
    records: *const BufferRecord,
    count: usize,
    data: *mut c_void,
    drop_count: u64,
);

/// Held by whoever consumes staging areas: a delivering producer (its own area) or a flush
/// (every area). So each area has one consumer at a time, and callbacks never overlap.
struct Delivery {
    /// Every producing thread's staging area (kept after the thread exits until it is empty).
    areas: Vec<Arc<Area>>,
}

/// One producing thread's staging for one buffer (see the module docs). Generic over the record
/// so the loom model below checks the same code with small values. Aligned to 128 bytes (two
/// lines, against adjacent-line prefetch): the producer stores `tail` per record, and another
/// thread's area must not share its line.
#[repr(align(128))]
struct Area<T = BufferRecord> {
    records: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Records `[0, tail)` are written. Stored by the producer (Release, after the record);
    /// loaded by consumers (Acquire).
    tail: AtomicUsize,
    /// Records `[0, head)` were delivered. Read and written under the delivery lock only
    /// (Relaxed: the lock orders them).
    head: AtomicUsize,
}

// SAFETY: a record is written only by the producing thread, at an index at or past `tail` that no
// consumer reads (consumers read `[head, tail)` as published by the Release store of `tail`);
// the producer rewinds `head` and `tail` only under the delivery lock, after every consumer
// that read the records released it. `T` is plain data (`Copy + Send`).
unsafe impl<T: Copy + Send> Sync for Area<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + Send> Send for Area<T> {}

impl<T: Copy + Send> Area<T> {
    fn new(capacity: usize) -> Self {
        Self {
            records: (0..capacity).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect(),
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
        }
    }

    /// Producer: the address of record `i`, to write it before [`Self::publish`] (see the
    /// `Sync` impl: no consumer reads it until then).
    ///
    /// # Safety
    /// `i` must be the producer's `tail` and below the capacity.
    #[inline(always)]
    unsafe fn slot(&self, i: usize) -> *mut T {
        // SAFETY: `i < capacity == records.len()` (the caller's contract). The pointer leaves
        // the closure: the std facade's `with_mut` is a plain `get` (LLVM outlines a closure
        // here, on the per-record path); the loom model writes through `with_mut` itself.
        unsafe { self.records.get_unchecked(i) }.with_mut(|p| p.cast::<T>())
    }

    /// Producer: the address of record 0 (see [`Self::slot`]; the std facade's cell is
    /// `repr(transparent)`, so record `i` is at `base().add(i)`).
    fn base(&self) -> *mut T {
        assert!(!self.records.is_empty(), "an area has room for at least one record");
        // SAFETY: index 0 is in bounds (checked above).
        unsafe { self.slot(0) }
    }

    /// Producer: records `[0, tail)` are written.
    #[inline(always)]
    fn publish(&self, tail: usize) {
        // Release: publishes the records to a consumer's Acquire in `take`.
        self.tail.store(tail, Ordering::Release);
    }

    /// Consumer, under the delivery lock: the published, undelivered records' index range;
    /// marks them delivered. They stay readable until the lock is released.
    fn take(&self) -> std::ops::Range<usize> {
        // Acquire: pairs with the producer's Release in `publish`: the records below `tail`
        // are written.
        let tail = self.tail.load(Ordering::Acquire);
        let head = self.head.load(Ordering::Relaxed);
        self.head.store(tail, Ordering::Relaxed);
        head.min(tail)..tail
    }

    /// Producer: record `i` (its tail) is written; publishes it. Whether the area reached
    /// `limit` (the watermark): the producer then delivers its own records.
    #[inline(always)]
    fn commit(&self, i: usize, limit: usize) -> bool {
        self.publish(i + 1);
        i + 1 >= limit
    }

    /// Producer, holding the delivery lock (`_held`): hands its published, undelivered records
    /// to `consume` (which may read them until it returns), then rewinds the area to empty.
    fn deliver_own<G>(&self, _held: &G, consume: impl FnOnce(&Self, std::ops::Range<usize>)) {
        let r = self.take();
        consume(self, r);
        // Every consumer has released the records (see `Area`).
        self.rewind();
    }

    /// Any thread (a flush), holding the delivery lock (`_held`): hands the published,
    /// undelivered records to `consume`.
    fn deliver<G>(&self, _held: &G, consume: impl FnOnce(&Self, std::ops::Range<usize>)) {
        let r = self.take();
        consume(self, r);
    }

    /// Producer, under the delivery lock, after a `take` by itself: back to empty.
    fn rewind(&self) {
        // Relaxed: consumers read these under the same lock.
        self.head.store(0, Ordering::Relaxed);
        self.tail.store(0, Ordering::Relaxed);
    }

    /// The records of `range` (from `take`) as a pointer to the first, for the callback: the
    /// std facade's cell is `repr(transparent)`, so the slice is the records back to back (under
    /// loom it is not; the loom model reads through `with` instead and never calls this).
    fn ptr(&self, range: &std::ops::Range<usize>) -> *const T {
        self.records[range.start.min(self.records.len())..].as_ptr().cast()
    }
}

pub(crate) struct Buffer {
    id: BufferId,
    context: ContextId,
    /// Records one thread may stage (`size / size_of::<BufferRecord>()`).
    capacity: usize,
    /// Staged records at which a thread delivers.
    watermark: usize,
    policy: BufferPolicy,
    callback: BufferCallbackFn,
    data: *mut c_void,
    delivery: Mutex<Delivery>,
    dropped: AtomicU64,
    dropped_total: AtomicU64,
    /// Records of threads in teardown (no staging of their own): staged here under the
    /// delivery lock and delivered at the watermark or a flush, like everybody's, instead of
    /// one record per callback.
    late: Mutex<Vec<BufferRecord>>,
    /// Set under the delivery lock by `destroy_buffer`: the callback is never called again.
    retired: std::sync::atomic::AtomicBool,
}

// SAFETY: `data` is the tool's opaque pointer; the tool promised at `create_buffer` that the
// callback may be called with it from any thread. Everything else is `Send + Sync`.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared state is behind a mutex and atomics.
unsafe impl Sync for Buffer {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning cannot leave the vectors inconsistent (pushes, drains and clears only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static BUFFERS: Mutex<Vec<Arc<Buffer>>> = Mutex::new(Vec::new());
static NEXT_BUFFER: AtomicU64 = AtomicU64::new(1);

/// The producing thread's end of an [`Area`]. Aligned like [`Area`]: written per record.
#[repr(align(128))]
pub(crate) struct Staging {
    /// The producer's copy of `area.tail` (exact: only this thread moves it). Also the count of
    /// records staged since this thread last delivered (both go back to 0 only in
    /// `deliver_own`; a flush may have consumed some meanwhile).
    tail: usize,
    /// The buffer's watermark (a copy: the record path compares `tail` with it alone, without
    /// loading the buffer; at most the capacity, so below it there is room).
    limit: usize,
    /// `area`'s first record (a copy: one dependent load less per record).
    records: *mut BufferRecord,
    area: Arc<Area>,
    buffer: Arc<Buffer>,
}

/// The thread's stagings (boxed: the per-context cache in the thread state points at them).
/// Dropping it (thread teardown) clears that cache; later records of the thread go out through
/// [`Buffer::write_direct`].
#[allow(clippy::vec_box)] // the boxes are the point: their addresses stay put when the vector grows
struct Stagings(RefCell<Vec<Box<Staging>>>);

impl Drop for Stagings {
    fn drop(&mut self) {
        let t = thread_state();
        for c in &t.staging_cache {
            c.set((ptr::null(), ptr::null_mut()));
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
    #[cold]
    #[inline(never)]
    fn register_thread(self: &Arc<Self>) -> Box<Staging> {
        let area = Arc::new(Area::new(self.capacity));
        lock(&self.delivery).areas.push(area.clone());
        let records = area.base();
        Box::new(Staging { tail: 0, limit: self.watermark, records, area, buffer: self.clone() })
    }

    /// Makes context slot `slot`'s cache entry hold this buffer and the calling thread's
    /// staging of it (found, or made and registered); `false` during thread teardown (no
    /// staging: the caller delivers the record on its own).
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

    /// Delivers the calling thread's staged records and rewinds its area. `blocking = false`
    /// gives up (returns `false`) when another delivery is in progress.
    #[cold]
    #[inline(never)]
    fn deliver_own(&self, st: &mut Staging, blocking: bool) -> bool {
        let _d = if blocking {
            lock(&self.delivery)
        } else {
            match self.delivery.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return false,
            }
        };
        st.area.deliver_own(&_d, |a, r| self.call(a.ptr(&r), r.len()));
        st.tail = 0;
        true
    }

    /// Stages one record on the calling thread (context slot `slot`'s cache).
    #[allow(clippy::too_many_arguments, reason = "one record's fields, as the emit path passes them (inlined)")]
    #[inline(always)]
    fn write<D: RecordData>(
        self: &Arc<Self>,
        slot: usize,
        context_id: ContextId,
        kind: Kind,
        operation: u32,
        correlation_id: CorrelationId,
        thread_id: u64,
        start: u64,
        end: u64,
        payload: &D,
    ) {
        // The calling thread's staging of this buffer, through the cache of context slot `slot`.
        let cache = &thread_state().staging_cache[slot & (MAX_CONTEXTS - 1)];
        if cache.get().0 != Arc::as_ptr(self) && !self.cache_staging(slot) {
            let r = BufferRecord::new(
                context_id,
                kind,
                operation,
                correlation_id,
                thread_id,
                start,
                end,
                payload.data(kind),
            );
            return self.write_direct(&r);
        }
        // SAFETY: the cache holds a pointer into this thread's `STAGING` (boxed, so stable)
        // until `Stagings::drop` clears it (and then this buffer is not in it); only this
        // thread uses it, and no other reference to the staging is live: the record path does
        // not re-enter (the buffer callback runs with the re-entrancy guard set) and
        // `cache_staging` borrows only the vector.
        let st = unsafe { &mut *cache.get().1 };
        // Below the watermark there is room (watermark <= capacity): one compare per record.
        let i = if st.tail < st.limit {
            st.tail
        } else {
            match self.past_watermark(st) {
                Some(i) => i,
                None => return,
            }
        };
        // SAFETY:
        // - `i` is the producer's tail, below the capacity (checked above or in
        //   `past_watermark`); `records` is the area's first record;
        // - the record is not yet published, so ours alone (see `Area`).
        unsafe {
            let dst = st.records.add(i);
            BufferRecord::store(
                dst,
                context_id,
                kind,
                operation,
                correlation_id,
                thread_id,
                start,
                end,
                payload.data(kind),
            );
        }
        st.tail = i + 1;
        if st.area.commit(i, st.limit) {
            self.deliver_own(st, self.policy == BufferPolicy::Lossless);
        }
    }

    /// The thread's staging is at or past the watermark: a discard-policy delivery gave way to
    /// another thread's. The index to write the record at, or `None`: the staging is full and
    /// the record is dropped (counted).
    #[cold]
    #[inline(never)]
    fn past_watermark(&self, st: &mut Staging) -> Option<usize> {
        (st.tail < self.capacity || self.make_room(st)).then_some(st.tail)
    }

    /// The thread's area is full. Lossless waits for the delivery lock and empties it; discard
    /// tries once and drops (and counts) the record if another thread is delivering.
    #[cold]
    #[inline(never)]
    fn make_room(&self, st: &mut Staging) -> bool {
        if self.deliver_own(st, self.policy == BufferPolicy::Lossless) {
            return true;
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_total.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The thread is being torn down (no staging): the record goes to the buffer's shared late
    /// staging, delivered at the watermark (or by a flush). A lossless buffer delivers it when
    /// the late staging is full; a discard one drops and counts it then if another thread is
    /// delivering.
    #[cold]
    fn write_direct(&self, record: &BufferRecord) {
        let mut late = lock(&self.late);
        if late.len() >= self.capacity {
            let d =
                if self.policy == BufferPolicy::Lossless { Some(lock(&self.delivery)) } else { self.try_delivery() };
            match d {
                Some(_d) => self.deliver_late(&mut late),
                None => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.dropped_total.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        late.push(*record);
        if late.len() >= self.watermark
            && let Some(_d) = self.try_delivery()
        {
            self.deliver_late(&mut late);
        }
    }

    fn try_delivery(&self) -> Option<MutexGuard<'_, Delivery>> {
        match self.delivery.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Delivers the late staging (the delivery lock and `late` are held).
    fn deliver_late(&self, late: &mut Vec<BufferRecord>) {
        if !late.is_empty() {
            self.call(late.as_ptr(), late.len());
            late.clear();
        }
    }

    /// Calls the callback with `records[0..n]` and the drops counted since the last call (a
    /// drop-count-only call when `n == 0`). The delivery lock is held.
    fn call(&self, records: *const BufferRecord, n: usize) {
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
        // `data` from any thread; `records[0..n]` is valid (and not written) during the call.
        unsafe { (self.callback)(self.context, self.id, records, n, self.data, dropped) };
        let _ = THREAD.try_with(|t| t.in_callback.set(was));
    }

    fn flush(&self) {
        // Lock order: `late`, then `delivery` (as in `write_direct`).
        let mut late = lock(&self.late);
        let mut d = lock(&self.delivery);
        for area in &d.areas {
            area.deliver(&d, |a, r| self.call(a.ptr(&r), r.len()));
        }
        self.deliver_late(&mut late);
        self.call(ptr::null(), 0); // drops counted with nothing left to deliver
        // Areas of exited threads (no producer holds them) are empty now: forget them.
        d.areas.retain(|a| Arc::strong_count(a) > 1);
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
        correlation_id: CorrelationId,
        thread_id: u64,
        start: u64,
        end: u64,
        payload: &D,
    ) {
        self.buffer.write(slot, context_id, kind, operation, correlation_id, thread_id, start, end, payload);
    }

    /// [`Self::write`]'s common case only: this thread's staging of the buffer is in the cache
    /// of context slot `slot`, and the record fits below the watermark (so no delivery follows
    /// it). `false`, having written nothing, otherwise. Makes no calls (see
    /// `callback::activity_fast`).
    #[inline(always)]
    pub(crate) fn try_write(
        &self,
        slot: usize,
        context_id: ContextId,
        external: u64,
        thread_id: u64,
        record: RecordTemplate,
    ) -> bool {
        let (b, st) = thread_state().staging_cache[slot & (MAX_CONTEXTS - 1)].get();
        if b != Arc::as_ptr(&self.buffer) {
            return false;
        }
        // SAFETY: as in `Buffer::write`.
        let st = unsafe { &mut *st };
        let i = st.tail;
        if i + 1 >= st.limit {
            return false;
        }
        // SAFETY:
        // - `i` is the producer's tail, below the watermark and so the capacity; `records` is
        //   the area's first record;
        // - the record is not yet published, so ours alone (see `Area`).
        unsafe { record.store(st.records.add(i), context_id, external, thread_id) };
        st.tail = i + 1;
        st.area.publish(i + 1);
        true
    }
}

fn find(id: BufferId) -> Result<Arc<Buffer>, ServiceError> {
    lock(&BUFFERS).iter().find(|b| b.id == id).cloned().ok_or(ServiceError::BufferNotFound)
}

/// The largest `size` [`create_buffer`] accepts (each producing thread stages up to `size`
/// bytes, so a larger buffer is a request the process cannot honour: `InvalidArgument`).
pub const MAX_BUFFER_BYTES: usize = 1 << 30;

/// Creates a buffer of `size` bytes (at most [`MAX_BUFFER_BYTES`]) in the context. `watermark` (bytes, ≤ `size`) is the fill
/// at which the callback is called; `callback(context, buffer, records, count, data,
/// drop_count)` runs on a producing thread or in `flush_buffer`.
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
    let rec = std::mem::size_of::<BufferRecord>();
    let capacity = size / rec;
    if capacity == 0 || watermark > size || size > MAX_BUFFER_BYTES {
        return Err(ServiceError::InvalidArgument);
    }
    let watermark = (watermark / rec).clamp(1, capacity);
    let id = BufferId { handle: NEXT_BUFFER.fetch_add(1, Ordering::Relaxed) };
    let buffer = Arc::new(Buffer {
        id,
        context: ctx,
        capacity,
        watermark,
        policy,
        callback,
        data,
        delivery: Mutex::new(Delivery { areas: Vec::new() }),
        dropped: AtomicU64::new(0),
        dropped_total: AtomicU64::new(0),
        late: Mutex::new(Vec::new()),
        retired: std::sync::atomic::AtomicBool::new(false),
    });
    lock(&BUFFERS).push(buffer);
    Ok(id)
}

/// Sends records of `kind` (operations in `operations`; `None`/empty = all) to `buffer`, which
/// must belong to the context. A second configuration of the kind fails.
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

/// Delivers every record written to the buffer before this call (all threads), then returns.
/// Returns `Busy` from inside a callback (the delivery lock may be held by this thread).
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
        let _late = lock(&b.late);
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

/// The buffer's capacity in records (per producing thread).
pub fn buffer_capacity(buffer: BufferId) -> Result<usize, ServiceError> {
    Ok(find(buffer)?.capacity)
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
    use loom::sync::{Arc, Mutex};
    use std::mem::MaybeUninit;

    /// One producer staging 3 records in an area of 2 with the watermark at 2 (so it delivers
    /// its own area once, under the lock, and rewinds it) while a flush delivers concurrently,
    /// through the shipped `commit`, `deliver_own` and `deliver` of `Buffer::write` and
    /// `Buffer::flush`: every record is read exactly once, with the value written. (The record
    /// itself is written through the cell here: the shipped path stores it through a raw
    /// pointer, which loom cannot follow.)
    #[test]
    fn loom_staging_area_delivers_each_record_once() {
        loom::model(|| {
            const LIMIT: usize = 2;
            let area = Arc::new(Area::<u64>::new(2));
            let lock = Arc::new(Mutex::new(Vec::<u64>::new()));
            // A delivery's callback: reads the records it was handed.
            fn read(seen: &mut Vec<u64>) -> impl FnOnce(&Area<u64>, std::ops::Range<usize>) + '_ {
                move |area, range| {
                    for i in range {
                        area.records[i].with(|p| {
                            // SAFETY: `i` is in `[head, tail)` as published (see `Area`).
                            seen.push(unsafe { (*p).assume_init() })
                        });
                    }
                }
            }
            let producer = {
                let (area, lock) = (area.clone(), lock.clone());
                loom::thread::spawn(move || {
                    let mut tail = 0;
                    for v in 1..=3u64 {
                        // SAFETY: writing a plain value to our own unpublished record.
                        area.records[tail].with_mut(|p| unsafe { p.write(MaybeUninit::new(v)) });
                        let full = area.commit(tail, LIMIT);
                        tail += 1;
                        if full {
                            let mut seen = lock.lock().expect("lock");
                            let mut got = Vec::new();
                            area.deliver_own(&seen, read(&mut got));
                            seen.extend(got);
                            tail = 0;
                        }
                    }
                })
            };
            {
                let mut seen = lock.lock().expect("lock");
                let mut got = Vec::new();
                area.deliver(&seen, read(&mut got));
                seen.extend(got);
            }
            producer.join().expect("producer");
            let mut seen = lock.lock().expect("lock");
            let mut got = Vec::new();
            area.deliver(&seen, read(&mut got));
            seen.extend(got);
            seen.sort_unstable();
            assert_eq!(*seen, vec![1, 2, 3]);
        });
    }
}
