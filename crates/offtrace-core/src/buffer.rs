//! The buffer tracing service: fixed-size records collected into a buffer and handed to the
//! tool's callback in batches.
//!
//! Shape: each producing thread has its own single-producer ring per buffer (staging, from
//! [`crate::ring`]) holding up to `size` bytes of records. The record path is a ring push and a
//! counter check: no lock, no cache line shared with another thread. When a thread has staged
//! `watermark` bytes of records, *that thread* delivers them: it takes the buffer's delivery
//! lock (so callbacks never run concurrently for one buffer), copies its own ring into a
//! contiguous scratch array and calls the callback synchronously. Records never move through
//! a shared array, so producers on different cores do not trade cache lines.
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

/// Held by whoever consumes staging rings: a delivering producer (its own ring) or a flush
/// (every ring). So each ring has one consumer at a time, and callbacks never overlap.
struct Delivery {
    /// The consumer end of every thread's staging ring: (ring key, consumer).
    rings: Vec<(u64, Consumer<BufferRecord>)>,
    /// Reused contiguous copy handed to the callback.
    scratch: Vec<BufferRecord>,
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
    next_ring: AtomicU64,
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

struct Staging {
    buffer: Arc<Buffer>,
    key: u64,
    producer: Producer<BufferRecord>,
    /// Records pushed since this thread last delivered (an upper bound: a flush may have
    /// consumed some).
    pending: usize,
}

thread_local! {
    static STAGING: RefCell<Vec<Staging>> = const { RefCell::new(Vec::new()) };
}

impl Buffer {
    #[cold]
    #[inline(never)]
    fn register_thread(self: &Arc<Self>) -> Staging {
        let (producer, consumer) = ring(self.capacity);
        let key = self.next_ring.fetch_add(1, Ordering::Relaxed);
        lock(&self.delivery).rings.push((key, consumer));
        Staging { buffer: self.clone(), key, producer, pending: 0 }
    }

    /// Delivers the calling thread's staged records. `blocking = false` gives up (returns
    /// `false`) when another delivery is in progress.
    #[cold]
    #[inline(never)]
    fn deliver_own(&self, st: &mut Staging, blocking: bool) -> bool {
        let mut d = if blocking {
            lock(&self.delivery)
        } else {
            match self.delivery.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return false,
            }
        };
        st.pending = 0;
        let Delivery { rings, scratch } = &mut *d;
        if let Some((_, cons)) = rings.iter_mut().find(|(k, _)| *k == st.key) {
            cons.drain(|r| scratch.push(r));
        }
        self.call(scratch);
        true
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
                // Full. Lossless waits for the delivery lock and empties the ring; discard
                // tries once and drops the record if another thread is delivering.
                self.deliver_own(st, self.policy == BufferPolicy::Lossless);
                if !st.producer.push(*record) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    self.dropped_total.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            st.pending += 1;
            if st.pending >= self.watermark {
                self.deliver_own(st, self.policy == BufferPolicy::Lossless);
            }
        });
        if staged.is_err() {
            self.write_direct(record);
        }
    }

    /// The thread is being torn down (no staging): deliver the record on its own.
    #[cold]
    fn write_direct(&self, record: &BufferRecord) {
        let mut d = lock(&self.delivery);
        d.scratch.push(*record);
        let Delivery { scratch, .. } = &mut *d;
        self.call(scratch);
    }

    /// Calls the callback with `records` (in chunks of at most the capacity) and the drops
    /// counted since the last call, then clears `records`. The delivery lock is held.
    fn call(&self, records: &mut Vec<BufferRecord>) {
        // Relaxed: read under the delivery lock, which orders deliveries.
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if records.is_empty() && dropped == 0 {
            return;
        }
        let was = THREAD.try_with(|t| t.in_callback.replace(true)).unwrap_or(true);
        for (n, chunk) in records.chunks(self.capacity.max(1)).enumerate() {
            let d = if n == 0 { dropped } else { 0 };
            // SAFETY: the tool promised at `create_buffer` that `callback` is callable with its
            // `data` from any thread; `chunk` is valid for the duration of the call.
            unsafe { (self.callback)(self.context, self.id, chunk.as_ptr(), chunk.len(), self.data, d) };
        }
        if records.is_empty() {
            // SAFETY: as above; a drop-count-only delivery passes no records.
            unsafe { (self.callback)(self.context, self.id, ptr::null(), 0, self.data, dropped) };
        }
        let _ = THREAD.try_with(|t| t.in_callback.set(was));
        records.clear();
    }

    fn flush(&self) {
        let mut d = lock(&self.delivery);
        let Delivery { rings, scratch } = &mut *d;
        for (_, cons) in rings.iter_mut() {
            cons.drain(|r| scratch.push(r));
        }
        self.call(scratch);
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
        policy,
        callback,
        data,
        delivery: Mutex::new(Delivery { rings: Vec::new(), scratch: Vec::with_capacity(capacity) }),
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
