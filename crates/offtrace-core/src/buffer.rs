//! The buffer tracing service: fixed-size records collected into a buffer and handed to the
//! tool's callback in batches.
//!
//! Shape: each producing thread has its own single-producer ring per buffer (staging, from
//! [`crate::ring`]); it publishes to the buffer's shared array in batches of up to
//! [`STAGING_BATCH`] records (fewer when the watermark is smaller). So the record path is a ring
//! push and a counter check: no lock, no shared cache line; the buffer's mutex is taken once per
//! batch.
//!
//! Semantics:
//! - `size` bounds the shared array (`size / size_of::<BufferRecord>()` records);
//! - when a publish brings the array to `watermark` bytes' worth of records, the publishing
//!   thread delivers: it swaps the array out and calls the callback *synchronously, on that
//!   thread* (one delivery at a time per buffer; the callback never runs concurrently with
//!   itself). Records still in other threads' staging rings (at most `batch - 1` per thread) wait
//!   for their thread's next batch or a flush;
//! - [`BufferPolicy::Lossless`] never drops: when the array is full, the producing thread delivers
//!   synchronously (waiting for a delivery already in progress on another thread) before it
//!   continues. The application thread pays for the tool's callback: choose a watermark that
//!   delivers before the array fills;
//! - [`BufferPolicy::Discard`] never blocks: when the array is full and another thread is
//!   delivering, the record is dropped and counted; the next callback gets the count
//!   (`drop_count`), and [`buffer_dropped_total`] sums them;
//! - [`flush_buffer`] drains every thread's staging and delivers everything recorded before it
//!   was called, in chunks of at most the buffer's capacity, before it returns.

#![allow(unsafe_code)] // calls tools' `extern "C"` buffer callbacks

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::callback::{CorrelationId, OperationFilter};
use crate::context::{ContextId, KIND_MASK, BUFFER_SHIFT, validate, with_live_slot};
use crate::correlation::THREAD;
use crate::error::ServiceError;
use crate::kind::Kind;
use crate::payload::Payload;
use crate::ring::{Consumer, Producer, ring};

/// Largest number of records a thread stages before publishing them to the buffer.
pub const STAGING_BATCH: usize = 64;

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
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn new(
        context_id: ContextId,
        kind: Kind,
        operation: u32,
        correlation_id: CorrelationId,
        thread_id: u64,
        start_timestamp: u64,
        end_timestamp: u64,
        payload: &Payload<'_>,
    ) -> Self {
        let data = if payload.kind() == Some(kind) { payload.summary() } else { [0; 6] };
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

struct Shared {
    records: Vec<BufferRecord>,
    /// The consumer end of every thread's staging ring: (ring key, consumer).
    rings: Vec<(u64, Consumer<BufferRecord>)>,
}

pub(crate) struct Buffer {
    id: BufferId,
    context: ContextId,
    capacity: usize,
    watermark: usize,
    batch: usize,
    policy: BufferPolicy,
    callback: BufferCallbackFn,
    data: *mut c_void,
    shared: Mutex<Shared>,
    /// Held by the delivering thread; holds the array being delivered (swapped with `records`).
    delivery: Mutex<Vec<BufferRecord>>,
    dropped: AtomicU64,
    dropped_total: AtomicU64,
    next_ring: AtomicU64,
}

// SAFETY: `data` is the tool's opaque pointer; the tool promised at `create_buffer` that the
// callback may be called with it from any thread. Everything else is `Send + Sync`.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared state is behind mutexes and atomics.
unsafe impl Sync for Buffer {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning cannot leave the vectors inconsistent (pushes and swaps only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static BUFFERS: Mutex<Vec<Arc<Buffer>>> = Mutex::new(Vec::new());
static NEXT_BUFFER: AtomicU64 = AtomicU64::new(1);

struct Staging {
    buffer: Arc<Buffer>,
    key: u64,
    producer: Producer<BufferRecord>,
    pending: usize,
}

thread_local! {
    static STAGING: RefCell<Vec<Staging>> = const { RefCell::new(Vec::new()) };
}

impl Buffer {
    #[cold]
    #[inline(never)]
    fn register_thread(self: &Arc<Self>) -> Staging {
        let (producer, consumer) = ring(self.batch);
        let key = self.next_ring.fetch_add(1, Ordering::Relaxed);
        lock(&self.shared).rings.push((key, consumer));
        Staging { buffer: self.clone(), key, producer, pending: 0 }
    }

    /// Moves up to the array's free room from the ring `key` (whose producer is the calling
    /// thread, so its length is exact) into the array. Returns (records left in the ring,
    /// delivery wanted).
    fn publish_own(&self, key: u64) -> (usize, bool) {
        let mut s = lock(&self.shared);
        let Shared { records, rings } = &mut *s;
        let Some((_, cons)) = rings.iter_mut().find(|(k, _)| *k == key) else { return (0, false) };
        let len = cons.len();
        let head = cons.snapshot().wrapping_sub(len);
        let n = len.min(self.capacity.saturating_sub(records.len()));
        cons.drain_to(head.wrapping_add(n), |r| records.push(r));
        let left = len - n;
        (left, left > 0 || records.len() >= self.watermark)
    }

    /// Publishes the calling thread's staging; delivers at the watermark (see module docs).
    #[cold]
    #[inline(never)]
    fn publish(&self, st: &mut Staging) {
        st.pending = 0;
        loop {
            let (left, deliver) = self.publish_own(st.key);
            if deliver {
                let delivered = self.deliver(self.policy == BufferPolicy::Lossless);
                if left > 0 && !delivered {
                    return; // discard: the array is full and another thread is delivering
                }
            }
            if left == 0 {
                return;
            }
        }
    }

    #[inline]
    fn write(self: &Arc<Self>, record: &BufferRecord) {
        let staged = STAGING.try_with(|cell| {
            let mut v = cell.borrow_mut();
            let idx = match v.iter().position(|s| Arc::ptr_eq(&s.buffer, self)) {
                Some(i) => i,
                None => {
                    v.push(self.register_thread());
                    v.len() - 1
                }
            };
            let st = &mut v[idx];
            if !st.producer.push(*record) {
                self.publish(st);
                if !st.producer.push(*record) {
                    // Only the discard policy gets here (lossless publish always makes room).
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.dropped_total.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            st.pending += 1;
            if st.pending >= self.batch {
                self.publish(st);
            }
        });
        if staged.is_err() {
            self.write_direct(record);
        }
    }

    /// The thread is being torn down (no staging): write to the array under its lock.
    #[cold]
    fn write_direct(&self, record: &BufferRecord) {
        loop {
            let full = {
                let mut s = lock(&self.shared);
                if s.records.len() < self.capacity {
                    s.records.push(*record);
                    return;
                }
                true
            };
            if full && !self.deliver(self.policy == BufferPolicy::Lossless) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.dropped_total.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Swaps the array out and calls the callback. `blocking = false`: gives up (returns
    /// `false`) when another thread is delivering.
    fn deliver(&self, blocking: bool) -> bool {
        let mut spare = if blocking {
            lock(&self.delivery)
        } else {
            match self.delivery.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return false,
            }
        };
        {
            let mut s = lock(&self.shared);
            std::mem::swap(&mut s.records, &mut *spare);
            let room = self.capacity.saturating_sub(s.records.len());
            s.records.reserve_exact(room);
        }
        self.call(&mut spare);
        true
    }

    fn call(&self, spare: &mut Vec<BufferRecord>) {
        // Relaxed: the count is read under the delivery lock, which orders deliveries.
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if spare.is_empty() && dropped == 0 {
            return;
        }
        let was = THREAD.try_with(|t| t.in_callback.replace(true)).unwrap_or(true);
        for (n, chunk) in spare.chunks(self.capacity.max(1)).enumerate() {
            let d = if n == 0 { dropped } else { 0 };
            // SAFETY: the tool promised at `create_buffer` that `callback` is callable with its
            // `data` from any thread; `chunk` is valid for the duration of the call.
            unsafe { (self.callback)(self.context, self.id, chunk.as_ptr(), chunk.len(), self.data, d) };
        }
        if spare.is_empty() {
            // SAFETY: as above; a drop-count-only delivery passes no records.
            unsafe { (self.callback)(self.context, self.id, ptr::null(), 0, self.data, dropped) };
        }
        let _ = THREAD.try_with(|t| t.in_callback.set(was));
        spare.clear();
    }

    fn flush(&self) {
        let mut spare = lock(&self.delivery);
        {
            let mut s = lock(&self.shared);
            let Shared { records, rings } = &mut *s;
            for (_, cons) in rings.iter_mut() {
                cons.drain(|r| records.push(r));
            }
            std::mem::swap(records, &mut *spare);
            records.reserve_exact(self.capacity);
        }
        self.call(&mut spare);
    }
}

/// A buffer service: which operations of a kind go to which buffer.
pub(crate) struct BufferService {
    buffer: Arc<Buffer>,
    pub(crate) filter: OperationFilter,
}

impl BufferService {
    #[inline]
    pub(crate) fn write(&self, record: &BufferRecord) {
        self.buffer.write(record);
    }
}

fn find(id: BufferId) -> Result<Arc<Buffer>, ServiceError> {
    lock(&BUFFERS).iter().find(|b| b.id == id).cloned().ok_or(ServiceError::BufferNotFound)
}

/// Creates a buffer of `size` bytes in the context. `watermark` (bytes, ≤ `size`) is the fill
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
    if capacity == 0 || watermark > size {
        return Err(ServiceError::InvalidArgument);
    }
    let watermark = (watermark / rec).clamp(1, capacity);
    let id = BufferId { handle: NEXT_BUFFER.fetch_add(1, Ordering::Relaxed) };
    let buffer = Arc::new(Buffer {
        id,
        context: ctx,
        capacity,
        watermark,
        batch: watermark.min(STAGING_BATCH),
        policy,
        callback,
        data,
        shared: Mutex::new(Shared { records: Vec::with_capacity(capacity), rings: Vec::new() }),
        delivery: Mutex::new(Vec::with_capacity(capacity)),
        dropped: AtomicU64::new(0),
        dropped_total: AtomicU64::new(0),
        next_ring: AtomicU64::new(1),
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
    let svc = Box::into_raw(Box::new(BufferService { buffer, filter }));
    let result = with_live_slot(ctx, |i, slot, active| {
        // AcqRel on success: Release publishes the service to the record path's Acquire load.
        slot.buffers[kind.index()]
            .compare_exchange(ptr::null_mut(), svc, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| ServiceError::ServiceAlreadyConfigured)?;
        if active {
            KIND_MASK[kind.index()].fetch_or(1 << (i as u32 + BUFFER_SHIFT), Ordering::Release);
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
    if THREAD.with(|t| t.in_callback.get()) {
        return Err(ServiceError::Busy);
    }
    find(buffer)?.flush();
    Ok(())
}

/// Records dropped by a discard-policy buffer since it was created.
pub fn buffer_dropped_total(buffer: BufferId) -> Result<u64, ServiceError> {
    Ok(find(buffer)?.dropped_total.load(Ordering::Relaxed))
}

/// The buffer's capacity in records.
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
