//! The callback tracing service, and the emit path every backend calls.
//!
//! A backend wraps each traced call in [`emit_enter`] / [`emit_exit`] and reports one-shot events
//! (code object load/unload, allocations, graph signals) with [`emit_instant`], and device
//! activity whose timestamps arrive later with [`emit_activity`]. Each emit delivers to the
//! callback services (a tool's function, on the emitting thread) and the buffer services
//! (a record in a buffer) of every started context that configured the kind and operation.
//!
//! Cost: disabled (no started service for the kind) = one relaxed load and a predictable branch,
//! no thread-local, no allocation, no lock. Enabled = a few thread-local cells and, per
//! delivery, plain stores to the thread's own in-flight slot (no atomic read-modify-write, no
//! cache line shared between threads: see [`crate::inflight`]), then the call.
//! Numbers in `docs/overhead.md` (`## Tracing services`).
//!
//! ```
//! use offtrace_core::*;
//! use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
//!
//! // A tool: one context, a callback service for SYNC waits.
//! let waits = Arc::new(AtomicU64::new(0));
//! let ctx = create_context()?;
//! let w = waits.clone();
//! configure_callback_tracing_closure(ctx, Kind::Sync, None, move |record, user| {
//!     if record.phase == Phase::Enter as u32 {
//!         user.value = timestamp_ns(); // travels to the exit
//!     } else {
//!         w.fetch_add(1, Ordering::Relaxed);
//!     }
//! })?;
//! start_context(ctx)?;
//!
//! // A backend: wrap the traced call.
//! let payload = SyncPayload { object: 0x1234, event_count: 1, ..Default::default() };
//! let token = emit_enter(Kind::Sync, sync_op::WAIT, Payload::Sync(&payload));
//! /* ... the runtime waits ... */
//! emit_exit(token, Payload::Sync(&payload));
//!
//! destroy_context(ctx)?;
//! assert_eq!(waits.load(Ordering::Relaxed), 1);
//! # Ok::<(), ServiceError>(())
//! ```
//!
//! Re-entrancy: while a thread runs a callback, emits on that thread deliver nothing (a tool
//! that calls the runtime from its callback does not trace itself), and the returned token is
//! empty so the exit is skipped too.

#![allow(unsafe_code)] // calls tools' `extern "C"` callbacks; services live behind raw pointers

use std::ffi::c_void;
use std::num::NonZeroU32;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::buffer::BufferService;
use crate::buffer_record::{RecordData, RecordHead};
use crate::context::{BUFFER_SHIFT, ContextId, KIND_MASK, MAX_CONTEXTS, SLOTS, with_live_slot};
use crate::correlation::{ThreadState, thread_state};
use crate::direct;
use crate::error::ServiceError;
use crate::inflight::{Frame, ThreadSlot, release_late_slot, take_late_slot, thread_slot};
use crate::kind::Kind;
use crate::payload::{ApiCallPayload, Payload};
use crate::timestamp::timestamp_ns;

/// Per-call storage a tool keeps from enter to exit (`offtrace_user_data_t`, a union of
/// `uint64_t value` and `void* ptr` in C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct UserData {
    pub value: u64,
}

/// `offtrace_correlation_id_t`: the internal id and the tool's external id (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CorrelationId {
    pub internal: u64,
    pub external: UserData,
}

/// `offtrace_callback_phase_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Phase {
    /// A one-shot event (no pair).
    None = 0,
    Enter = 1,
    Exit = 2,
    Load = 3,
    Unload = 4,
    /// Device activity whose device times are known ([`emit_activity`]): the payload's
    /// `device_start`/`device_end` hold them, the correlation id is the causing API call's.
    Complete = 5,
}

/// `offtrace_callback_tracing_record_t`: passed by value to callbacks; `payload` is valid only
/// during the callback.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CallbackRecord {
    pub context_id: ContextId,
    pub thread_id: u64,
    pub correlation_id: CorrelationId,
    pub kind: u32,
    pub operation: u32,
    pub phase: u32,
    pub payload: *const c_void,
}

/// `offtrace_callback_tracing_cb_t`.
pub type CallbackFn =
    unsafe extern "C" fn(record: CallbackRecord, user_data: *mut UserData, callback_data: *mut c_void);

/// Which operations of a kind a service wants.
#[derive(Debug)]
pub(crate) struct OperationFilter {
    all: bool,
    bits: Box<[u64]>,
}

impl OperationFilter {
    pub(crate) fn new(kind: Kind, ops: Option<&[u32]>) -> Result<Self, ServiceError> {
        let Some(ops) = ops.filter(|o| !o.is_empty()) else {
            return Ok(Self { all: true, bits: Box::new([]) });
        };
        // A kind whose operation table is not registered yet accepts any id.
        if !kind.operations().is_empty() && ops.iter().any(|&op| kind.operation(op).is_none()) {
            return Err(ServiceError::OperationNotFound);
        }
        let max = ops.iter().copied().max().unwrap_or(0) as usize;
        let mut bits = vec![0u64; max / 64 + 1];
        for &op in ops {
            bits[op as usize / 64] |= 1 << (op % 64);
        }
        Ok(Self { all: false, bits: bits.into_boxed_slice() })
    }

    #[inline]
    pub(crate) fn contains(&self, op: u32) -> bool {
        self.all || self.bits.get(op as usize / 64).is_some_and(|w| (w >> (op % 64)) & 1 != 0)
    }

    /// [`Self::contains`] for a filter with a list, out of line: inline, the compiler hoists
    /// the list's word index and bit out of the delivery loops into every record's prologue
    /// (two shifts and two stack slots), though the common filter passes everything.
    #[cold]
    #[inline(never)]
    fn contains_listed(&self, op: u32) -> bool {
        self.contains(op)
    }

    /// Whether every operation passes (the common case: tools rarely list operations).
    pub(crate) fn all(&self) -> bool {
        self.all
    }
}

/// The low bits of a service pointer as the context slot stores it, one of two tags (services
/// are boxed with an alignment of at least 8, so the bits are free): `ALL_OPS` when the
/// service's filter passes every operation, `LISTED` when it has an operation list. So the
/// record path decides without loading the service (a dependent load of the filter's flag on
/// every record otherwise): one bit test says "a service that wants every operation" (`ALL_OPS`;
/// null has neither bit), another says "some service here has a list" for the two services of an
/// enter at once (`(callback | buffer) & LISTED`: one `or` and one test, where a single tag had
/// to tell null from an untagged pointer for each).
const ALL_OPS: usize = 1;
const LISTED: usize = 2;
const TAGS: usize = ALL_OPS | LISTED;

/// The pointer to store in a context slot's service table for `svc` (`all`: its filter passes
/// every operation).
pub(crate) fn tagged_service<S>(svc: *mut S, all: bool) -> *mut S {
    const { assert!(std::mem::align_of::<S>() > TAGS) };
    svc.map_addr(|a| a | if all { ALL_OPS } else { LISTED })
}

/// A service pointer as loaded from a slot's table: the service itself (null if none) and
/// whether it wants every operation.
#[inline(always)]
pub(crate) fn untag_service<S>(p: *mut S) -> (*mut S, bool) {
    (p.map_addr(|a| a & !TAGS), p.addr() & ALL_OPS != 0)
}

/// A context's service table entry (one per kind, callback or buffer): registration installs a
/// service, the record path reads it, destroy retires it. Generic over the entry so that the
/// loom model at the end of this file runs these functions on a loom atomic (the shipped entries
/// are `std` atomics in the static context slots, which loom cannot build).
pub(crate) trait ServiceEntry<S> {
    fn load(&self, order: Ordering) -> *mut S;
    fn compare_exchange(
        &self,
        current: *mut S,
        new: *mut S,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut S, *mut S>;
    fn swap(&self, new: *mut S, order: Ordering) -> *mut S;
}

impl<S> ServiceEntry<S> for AtomicPtr<S> {
    #[inline(always)]
    fn load(&self, order: Ordering) -> *mut S {
        AtomicPtr::load(self, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        current: *mut S,
        new: *mut S,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut S, *mut S> {
        AtomicPtr::compare_exchange(self, current, new, success, failure)
    }
    #[inline(always)]
    fn swap(&self, new: *mut S, order: Ordering) -> *mut S {
        AtomicPtr::swap(self, new, order)
    }
}

#[cfg(loom)]
impl<S> ServiceEntry<S> for loom::sync::atomic::AtomicPtr<S> {
    fn load(&self, order: Ordering) -> *mut S {
        loom::sync::atomic::AtomicPtr::load(self, order)
    }
    fn compare_exchange(
        &self,
        current: *mut S,
        new: *mut S,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut S, *mut S> {
        loom::sync::atomic::AtomicPtr::compare_exchange(self, current, new, success, failure)
    }
    fn swap(&self, new: *mut S, order: Ordering) -> *mut S {
        loom::sync::atomic::AtomicPtr::swap(self, new, order)
    }
}

/// Registration: installs `tagged` (from [`tagged_service`]) in an empty entry; `false` when the
/// entry holds a service already. AcqRel on success: Release publishes the service to the record
/// path's Acquire in [`acquire_service`].
pub(crate) fn install_service<S>(entry: &impl ServiceEntry<S>, tagged: *mut S) -> bool {
    entry.compare_exchange(ptr::null_mut(), tagged, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// Destroy: empties the entry and returns its service (untagged; null if none), which the
/// caller now owns. Only after `active` was cleared and the context quiesced: then no emitter
/// holds the service, and a later one sees `active == false` and does not load it.
pub(crate) fn retire_service<S>(entry: &impl ServiceEntry<S>) -> *mut S {
    untag_service(entry.swap(ptr::null_mut(), Ordering::AcqRel)).0
}

/// The record path: marks the thread busy in context slot `i` if `active` (the thread's busy
/// word was `busy`), then reads the entry. The service and whether it wants every operation
/// (the caller must `leave(busy)` after using it), or `None` (nothing held).
#[inline(always)]
pub(crate) fn acquire_service<S>(
    me: &ThreadSlot,
    busy: u32,
    i: usize,
    active: &impl crate::sync::GateFlag,
    entry: &impl ServiceEntry<S>,
) -> Option<(*mut S, bool)> {
    if !me.enter_if_active(busy, i, active) {
        return None;
    }
    // Acquire: pairs with the Release that installed the service.
    let (p, all) = untag_service(entry.load(Ordering::Acquire));
    if p.is_null() {
        me.leave(busy);
        return None;
    }
    Some((p, all))
}

/// Whether service `svc` (untagged, live) wants operation `op`; `all` from [`untag_service`].
#[inline(always)]
fn wants(all: bool, filter: &OperationFilter, op: u32) -> bool {
    all || filter.contains_listed(op)
}

pub(crate) struct CallbackService {
    callback: CallbackFn,
    data: *mut c_void,
    filter: OperationFilter,
    /// Frees `data` at destroy (closures configured from Rust); `None` for C tools.
    drop_data: Option<unsafe fn(*mut c_void)>,
}

impl Drop for CallbackService {
    fn drop(&mut self) {
        if let Some(d) = self.drop_data {
            // SAFETY: `drop_data` was paired with `data` by `configure_callback_tracing_closure`
            // and runs once, when the service is freed after the context's last callback.
            unsafe { d(self.data) }
        }
    }
}

/// Configures the context's callback service for `kind`: `callback(record, user_data,
/// callback_data)` runs on the emitting thread for each operation in `operations` (`None` or
/// empty = all). A second configuration of the same kind fails with `ServiceAlreadyConfigured`.
///
/// # Safety
///
/// `callback` must be safe to call with any record of `kind` and `callback_data`, from any
/// thread, concurrently, until `destroy_context` returns; it must not unwind.
pub unsafe fn configure_callback_tracing_service(
    ctx: ContextId,
    kind: Kind,
    operations: Option<&[u32]>,
    callback: CallbackFn,
    callback_data: *mut c_void,
) -> Result<(), ServiceError> {
    // SAFETY: forwarded from this function's contract.
    unsafe { configure(ctx, kind, operations, callback, callback_data, None) }
}

unsafe fn configure(
    ctx: ContextId,
    kind: Kind,
    operations: Option<&[u32]>,
    callback: CallbackFn,
    data: *mut c_void,
    drop_data: Option<unsafe fn(*mut c_void)>,
) -> Result<(), ServiceError> {
    let filter = match OperationFilter::new(kind, operations) {
        Ok(f) => f,
        Err(e) => {
            if let Some(d) = drop_data {
                // SAFETY: the service was never created; `data` is still ours to free.
                unsafe { d(data) }
            }
            return Err(e);
        }
    };
    let all = filter.all();
    let svc = Box::into_raw(Box::new(CallbackService { callback, data, filter, drop_data }));
    let tagged = tagged_service(svc, all);
    let result = with_live_slot(ctx, |_, slot, active| {
        // A started context's configuration is locked (rocprofiler-sdk's rule): stop it first.
        if active {
            return Err(ServiceError::ContextActive);
        }
        if !install_service(&slot.callbacks[kind.index()], tagged) {
            return Err(ServiceError::ServiceAlreadyConfigured);
        }
        Ok(())
    });
    if result.is_err() {
        // SAFETY: the box was not installed; we still own it.
        drop(unsafe { Box::from_raw(svc) });
    }
    result
}

/// Like [`configure_callback_tracing_service`], with a Rust closure. The closure is dropped
/// when the context is destroyed. A panic inside it is caught and ignored.
pub fn configure_callback_tracing_closure<F>(
    ctx: ContextId,
    kind: Kind,
    operations: Option<&[u32]>,
    f: F,
) -> Result<(), ServiceError>
where
    F: Fn(&CallbackRecord, &mut UserData) + Send + Sync + 'static,
{
    unsafe extern "C" fn trampoline<F: Fn(&CallbackRecord, &mut UserData)>(
        record: CallbackRecord,
        user: *mut UserData,
        data: *mut c_void,
    ) {
        // SAFETY:
        // - `data` is the `Box<F>` leaked below, alive until the service is dropped;
        // - `user` points at the token's slot for this context, exclusively ours during the call.
        let (f, user) = unsafe { (&*data.cast::<F>(), &mut *user) };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&record, user)));
    }
    unsafe fn drop_box<F>(data: *mut c_void) {
        // SAFETY: `data` came from `Box::into_raw(Box<F>)` below and is freed once.
        drop(unsafe { Box::from_raw(data.cast::<F>()) });
    }
    let data = Box::into_raw(Box::new(f)).cast::<c_void>();
    // SAFETY: the trampoline is sound for any record; it never unwinds (catch_unwind).
    unsafe { configure(ctx, kind, operations, trampoline::<F>, data, Some(drop_box::<F>)) }
}

/// What [`emit_enter`] hands back: which contexts saw the enter, the call's frame (per-call
/// user data, previous correlation id, start time, kept in the thread's in-flight slot) and the
/// correlation id. Two words, so it travels in two registers (returned by the enter, passed to
/// the exit: a struct of more fields went through memory both ways) and the disabled path
/// builds it for free. Pass it to [`emit_exit`] exactly once, on the same thread. Not `Clone`.
#[derive(Debug)]
#[must_use = "every delivered enter needs its exit: pass the token to emit_exit"]
pub struct CallToken {
    /// Bits 0-7: the contexts whose callback saw the enter; 8-15: the contexts with a buffer
    /// record to write at the exit; 16-23: the frame; 24-31: the kind; 32-63: the operation.
    bits: u64,
    correlation: u64,
}

impl CallToken {
    /// The token of a call no context saw.
    pub const NONE: CallToken = CallToken { bits: 0, correlation: 0 };

    #[inline(always)]
    fn new(delivered: u8, buffered: u8, frame: u8, kind: Kind, operation: u32, correlation: u64) -> Self {
        let bits = u64::from(delivered)
            | u64::from(buffered) << 8
            | u64::from(frame) << 16
            | (kind as u64) << 24
            | u64::from(operation) << 32;
        CallToken { bits, correlation }
    }

    /// Contexts whose callback saw the enter (bit per slot).
    #[inline(always)]
    fn delivered(&self) -> u8 {
        self.bits as u8
    }

    /// Contexts that get a buffer record at the exit.
    #[inline(always)]
    fn buffered(&self) -> u8 {
        (self.bits >> 8) as u8
    }

    /// Contexts with an open pair of this call: `delivered | buffered`.
    #[inline(always)]
    fn pairs(&self) -> u32 {
        (self.delivered() | self.buffered()).into()
    }

    #[inline(always)]
    fn frame(&self) -> u8 {
        (self.bits >> 16) as u8
    }

    #[inline(always)]
    fn kind(&self) -> u8 {
        (self.bits >> 24) as u8
    }

    #[inline(always)]
    fn operation(&self) -> u32 {
        (self.bits >> 32) as u32
    }

    /// Whether any context saw the enter (and so will see the exit).
    #[inline]
    pub fn is_delivered(&self) -> bool {
        self.bits & 0xffff != 0
    }

    /// The call's internal correlation id (0 when no context saw it).
    pub fn correlation_id(&self) -> u64 {
        self.correlation
    }

    /// The token of a call entered on the direct path (`frame` carries
    /// [`crate::direct::DIRECT_FRAME`]); `delivered` only makes it count as delivered.
    #[inline(always)]
    pub(crate) fn direct(kind: Kind, operation: u32, correlation: u64, frame: u8) -> CallToken {
        CallToken::new(1, 0, frame, kind, operation, correlation)
    }
}

/// Whether any context wants `kind` now. One relaxed load: use it to skip building a payload.
#[inline(always)]
pub fn kind_enabled(kind: Kind) -> bool {
    // Relaxed: a hint only; delivery re-checks each context's `active` with SeqCst.
    KIND_MASK[kind.index()].load(Ordering::Relaxed) != 0
}

/// Reports the start of operation `op` of `kind` on this thread. Disabled path: one relaxed load.
#[inline(always)]
pub fn emit_enter(kind: Kind, op: u32, payload: Payload<'_>) -> CallToken {
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    if mask == 0 {
        return CallToken::NONE;
    }
    if direct::applies(mask)
        && let Some(token) = direct::enter(kind, op, Some(&payload))
    {
        return token;
    }
    if mask & 0xff == 0 {
        // Buffer services only: their own path (no callback to prepare for).
        return enter_record_slow(kind, op, mask);
    }
    // The pointer callbacks get, here: where the call site names the variant and the kind, it
    // folds to the payload's address (inside, it took a table and a jump table per record).
    let ptr = payload_ptr(kind, &payload);
    if mask >> BUFFER_SHIFT == 0 {
        // Callback services only: their own path (no buffer record to prepare for).
        return enter_callback_slow(kind, op, ptr, mask);
    }
    enter_slow(kind, op, ptr, mask)
}

/// [`emit_enter`] with a payload that costs something to build (arguments read from the
/// runtime's memory): `build` runs only when a context's callback will see the enter, not when
/// the call is taken by the direct path (whose consumer reads only the exit's payload,
/// [`crate::direct`]), wanted by buffer services only (their record is made at the exit) or by
/// nobody.
#[inline(always)]
pub fn emit_enter_with<T, F>(kind: Kind, op: u32, build: impl FnOnce() -> T, payload: F) -> CallToken
where
    F: for<'a> FnOnce(&'a T) -> Payload<'a>,
{
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    if mask == 0 {
        return CallToken::NONE;
    }
    if kind.is_api() {
        if direct::applies(mask)
            && let Some(token) = direct::enter(kind, op, None)
        {
            return token;
        }
        if mask & 0xff == 0 {
            return enter_record_slow(kind, op, mask);
        }
        let value = build();
        let payload = payload(&value);
        let ptr = payload_ptr(kind, &payload);
        if mask >> BUFFER_SHIFT == 0 {
            return enter_callback_slow(kind, op, ptr, mask);
        }
        return enter_slow(kind, op, ptr, mask);
    }
    let value = build();
    emit_enter(kind, op, payload(&value))
}

/// Reports the end of the call `token` came from, with the exit payload (results filled in).
#[inline(always)]
pub fn emit_exit(token: CallToken, payload: Payload<'_>) {
    emit_exit_at(token, 0, payload);
}

/// [`emit_exit`] at a time the backend already read (`ts`, [`crate::timestamp_ns`]; 0 = now),
/// so that the records it emitted at the end of the call ([`emit_instant_at`]) and the call's
/// end share one clock reading. Only the direct path ([`crate::direct`]) uses `ts`: callbacks
/// carry no time, and buffer records take their own.
#[inline(always)]
pub fn emit_exit_at(token: CallToken, ts: u64, payload: Payload<'_>) {
    // Frame indices are below 64 and the late flag is 0x80: only a direct token has 0x40.
    if token.frame() & direct::DIRECT_FRAME != 0 {
        direct::exit(token.kind(), token.operation(), token.correlation, token.frame(), ts, payload);
    } else if token.delivered() == 0 {
        // No callback saw the enter: a buffer record or nothing. Straight to the record's path
        // (one function less on the way, and no payload pointer to compute).
        if token.buffered() != 0 {
            match payload.as_api_call() {
                // An API call's own payload (the common pair): resolved here, where the call
                // site names the variant and the test folds to one compare of the token's kind.
                Some(p) if payload.kind().is_some_and(|k| k as u8 == token.kind()) => exit_api_record_slow(token, p),
                _ => exit_record_slow(token, payload),
            }
        }
    } else {
        // The callbacks' pointer here, as in `emit_enter` (the payload's kind folds; the
        // token's is one compare).
        let ptr = if payload.kind().is_some_and(|k| k as u8 == token.kind()) { payload.as_ptr() } else { ptr::null() };
        if token.buffered() == 0 {
            // Callbacks only: the exit needs the payload's pointer alone (not the payload
            // kept across the callback for a record).
            exit_callback_slow(token, ptr);
        } else {
            exit_slow(token, ptr, payload);
        }
    }
}

/// Reports a one-shot event (`phase` = `None`, `Load` or `Unload`). Its correlation id is the
/// enclosing API call's, or a fresh one outside any call.
#[inline(always)]
pub fn emit_instant(kind: Kind, op: u32, phase: Phase, payload: Payload<'_>) {
    emit_instant_at(kind, op, phase, 0, payload);
}

/// [`emit_instant`] at a time the backend already read (`ts`; 0 = now): used, like
/// [`emit_exit_at`], only by the direct path.
#[inline(always)]
pub fn emit_instant_at(kind: Kind, op: u32, phase: Phase, ts: u64, payload: Payload<'_>) {
    instant_at(kind, op, phase, ts, payload, false);
}

/// [`emit_instant`] of a payload whose strings (a kernel's name) the backend interned for the
/// process's lifetime: never freed, never changed. The records are the same; an in-process
/// consumer on the direct path may know such a string by its address instead of reading it
/// (`DirectRecord::interned`).
#[inline(always)]
pub fn emit_instant_interned(kind: Kind, op: u32, phase: Phase, payload: Payload<'_>) {
    instant_at(kind, op, phase, 0, payload, true);
}

#[inline(always)]
fn instant_at(kind: Kind, op: u32, phase: Phase, ts: u64, payload: Payload<'_>, interned: bool) {
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    if mask != 0 && !(direct::applies(mask) && direct::instant(kind, op, phase, ts, &payload, interned)) {
        instant_slow(kind, op, phase, payload_ptr(kind, &payload), payload);
    }
}

/// [`emit_instant`] with a payload that costs something to build (a struct filled from the
/// backend's registers): `build` runs only when some context wants `kind`, and the kind's mask
/// is loaded once for that test and the delivery (a separate [`kind_enabled`] test first loads
/// it twice). `payload` wraps the built value, e.g. `Payload::Queue`.
#[inline(always)]
pub fn emit_instant_with<T, F>(kind: Kind, op: u32, phase: Phase, build: impl FnOnce() -> T, payload: F)
where
    F: for<'a> FnOnce(&'a T) -> Payload<'a>,
{
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    if mask != 0 {
        let value = build();
        let payload = payload(&value);
        if !(direct::applies(mask) && direct::instant(kind, op, phase, 0, &payload, false)) {
            instant_slow(kind, op, phase, payload_ptr(kind, &payload), payload);
        }
    }
}

/// Reports device activity whose device times are known: kernel, copy, fill and barrier
/// completions, usually after the API call that caused it returned, possibly on another thread.
/// `correlation` is that call's id ([`CallToken::correlation_id`], or the record's id in the
/// callback that saw the launch); `start`/`end` are the device times in the trace clock
/// (CLOCK_MONOTONIC ns), which the payload's `device_start`/`device_end` must hold too.
///
/// Callback services receive it with phase [`Phase::Complete`] and the given correlation id;
/// buffer services get a record whose start/end are the device times.
#[inline(always)]
pub fn emit_activity(kind: Kind, op: u32, correlation: u64, start: u64, end: u64, payload: Payload<'_>) {
    activity(kind, op, correlation, start, end, payload, false);
}

/// [`emit_activity`] of a payload whose strings the backend interned for the process's
/// lifetime (as [`emit_instant_interned`]).
#[inline(always)]
pub fn emit_activity_interned(kind: Kind, op: u32, correlation: u64, start: u64, end: u64, payload: Payload<'_>) {
    activity(kind, op, correlation, start, end, payload, true);
}

#[inline(always)]
fn activity(kind: Kind, op: u32, correlation: u64, start: u64, end: u64, payload: Payload<'_>, interned: bool) {
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    if mask & 0xff != 0 && !(direct::applies(mask) && direct::activity(kind, op, correlation, &payload, interned)) {
        complete_slow(kind, op, correlation, &payload, mask);
    }
    if let Some(mask) = NonZeroU32::new(mask >> BUFFER_SHIFT) {
        activity_typed(kind, op, correlation, start, end, payload, mask);
    }
}

/// The callback deliveries of [`emit_activity`].
#[cold]
#[inline(never)]
fn complete_slow(kind: Kind, op: u32, correlation: u64, payload: &Payload<'_>, mask: u32) {
    let t = thread_state();
    if t.in_callback.get() {
        return;
    }
    match thread_slot(t) {
        Some(me) => complete_body(t, me, kind, op, correlation, payload, mask),
        None => {
            if let Some(late) = take_late_slot(t) {
                complete_body(t, late, kind, op, correlation, payload, mask);
                release_late_slot(t);
            }
        }
    }
}

fn complete_body(
    t: &ThreadState,
    me: &ThreadSlot,
    kind: Kind,
    op: u32,
    correlation: u64,
    payload: &Payload<'_>,
    mask: u32,
) {
    // Inside a callback delivery: deliver nothing (see `enter_body`).
    let busy = me.busy_word();
    if busy != 0 {
        return;
    }
    let ptr = payload_ptr(kind, payload);
    let thread_id = t.cached_thread_id();
    for i in bits(mask & 0xff) {
        let Some((svc, all)) = acquire(me, busy, i, &SLOTS[i].callbacks, kind) else { continue };
        // SAFETY: busy in the context, so the service outlives this use.
        let svc = unsafe { &*svc };
        if wants(all, &svc.filter, op) {
            let id = SLOTS[i].id();
            let record = CallbackRecord {
                context_id: id,
                thread_id,
                correlation_id: CorrelationId {
                    internal: correlation,
                    external: UserData { value: t.external(i, id) },
                },
                kind: kind as u32,
                operation: op,
                phase: Phase::Complete as u32,
                payload: ptr,
            };
            let mut user = UserData::default();
            call(svc, &record, &mut user);
        }
        me.leave(busy);
    }
}

#[inline(always)]
fn payload_ptr(kind: Kind, payload: &Payload<'_>) -> *const c_void {
    // A payload of the wrong kind would be misread by argument iteration: pass none instead.
    if payload.kind() == Some(kind) { payload.as_ptr() } else { ptr::null() }
}

/// Runs a tool callback. The re-entrancy guard is the thread's busy bit for the context, set
/// around it by the caller (emits check the busy word first): no flag written per callback.
#[inline(always)]
fn call(svc: &CallbackService, record: &CallbackRecord, user: &mut UserData) {
    // SAFETY: the tool promised at configuration that `callback` is callable with any record of
    // the kind and its `data`; `user` is a valid, exclusive slot of the token.
    unsafe {
        invoke(
            svc.callback,
            svc.data,
            user,
            record.context_id,
            record.thread_id,
            record.correlation_id.internal,
            record.correlation_id.external.value,
            record.kind,
            record.operation,
            record.phase,
            record.payload,
        )
    };
}

/// Calls `callback` with the record passed by value (the C ABI copies it to the stack).
///
/// Why the odd construction: a record written field by field (8- and 4-byte stores) and then
/// copied to the argument area with 16-byte loads stalls on store-to-load forwarding, three
/// times per callback; that was most of the enabled path's cost. Writing it as 16-byte chunks
/// lets the copy's loads forward from single stores.
///
/// # Safety
/// As for calling `callback` with `data`.
#[allow(clippy::too_many_arguments, reason = "the C callback signature, forwarded argument by argument")]
#[inline(always)]
unsafe fn invoke(
    callback: CallbackFn,
    data: *mut c_void,
    user: *mut UserData,
    context_id: ContextId,
    thread_id: u64,
    internal: u64,
    external: u64,
    kind: u32,
    operation: u32,
    phase: u32,
    payload: *const c_void,
) {
    #[cfg(target_arch = "x86_64")]
    let record: CallbackRecord = {
        use std::arch::x86_64::{__m128i, _mm_set_epi64x};
        const _: () = assert!(std::mem::size_of::<CallbackRecord>() == 56);
        // SAFETY: SSE2 is part of the x86-64 baseline, so the intrinsic's target feature is
        // always present.
        let chunks: [__m128i; 4] = unsafe {
            [
                _mm_set_epi64x(thread_id as i64, context_id.handle as i64),
                _mm_set_epi64x(external as i64, internal as i64),
                _mm_set_epi64x(i64::from(phase), (u64::from(kind) | (u64::from(operation) << 32)) as i64),
                _mm_set_epi64x(0, payload as i64),
            ]
        };
        // SAFETY: `chunks` is 64 readable bytes laid out as `CallbackRecord` (checked by the
        // layout test: context 0, thread 8, correlation 16, kind 32, operation 36, phase 40,
        // payload 48) followed by 8 unused bytes; every bit pattern is valid for its fields.
        unsafe { std::mem::transmute_copy::<[__m128i; 4], CallbackRecord>(&chunks) }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let record = CallbackRecord {
        context_id,
        thread_id,
        correlation_id: CorrelationId { internal, external: UserData { value: external } },
        kind,
        operation,
        phase,
        payload,
    };
    // SAFETY: forwarded from the caller.
    unsafe { callback(record, user, data) }
}

/// Marks the thread busy in slot `i` if the context is started and has a service for `kind`
/// (`busy`: the thread's busy word before). Returns the service and whether it wants every
/// operation (the caller must `leave(busy)` after using it), or `None` (nothing held).
#[inline(always)]
fn acquire<S>(me: &ThreadSlot, busy: u32, i: usize, services: &[AtomicPtr<S>], kind: Kind) -> Option<(*mut S, bool)> {
    acquire_service(me, busy, i, &SLOTS[i].active, &services[kind.index()])
}

/// Whether the non-zero `x` has one bit set: `x & (x - 1) == 0`, two instructions and a branch
/// (`is_power_of_two` also rules out 0, which every caller has ruled out already: the kind's
/// mask as the emit tested it, not loaded again, and a delivered token's pairs).
#[inline(always)]
fn one_bit(x: u32) -> bool {
    debug_assert!(x != 0);
    x & x.wrapping_sub(1) == 0
}

/// The set bits of `mask`, lowest first, as indices (a plain loop: the body stays inline).
#[inline(always)]
fn bits(mask: u32) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(i)
    })
}

/// Frame index flag of a call entered through the late slot (a thread in teardown): the slot
/// stays held by the thread until the call's exit.
const LATE_FRAME: u8 = 0x80;

#[inline(never)]
fn enter_slow(kind: Kind, op: u32, ptr: *const c_void, mask: u32) -> CallToken {
    let t = thread_state();
    let contexts = (mask | (mask >> BUFFER_SHIFT)) & 0xff;
    if let Some(me) = t.slot.get()
        && one_bit(contexts)
        && let Some(token) = enter_one::<true, true>(t, me, kind, op, ptr, mask, contexts)
    {
        return token;
    }
    enter_any(kind, op, ptr, mask)
}

/// [`enter_slow`] for a kind only buffer services want (`mask` has no callback bits): the
/// one-context path without a callback's preparations, in a function of its own.
#[inline(never)]
fn enter_record_slow(kind: Kind, op: u32, mask: u32) -> CallToken {
    let t = thread_state();
    let contexts = (mask >> BUFFER_SHIFT) & 0xff;
    if let Some(me) = t.slot.get()
        && one_bit(contexts)
        && let Some(token) = enter_one::<false, true>(t, me, kind, op, ptr::null(), mask, contexts)
    {
        return token;
    }
    enter_any(kind, op, ptr::null(), mask)
}

/// [`enter_slow`] for a kind only callback services want (`mask` has no buffer bits): the
/// one-context path without a buffer record's preparations, in a function of its own.
#[inline(never)]
fn enter_callback_slow(kind: Kind, op: u32, ptr: *const c_void, mask: u32) -> CallToken {
    let t = thread_state();
    let contexts = mask & 0xff;
    if let Some(me) = t.slot.get()
        && one_bit(contexts)
        && let Some(token) = enter_one::<true, false>(t, me, kind, op, ptr, mask, contexts)
    {
        return token;
    }
    enter_any(kind, op, ptr, mask)
}

/// [`enter_slow`], every case (several contexts, operation lists, a thread not registered yet
/// or in teardown).
#[inline(never)]
fn enter_any(kind: Kind, op: u32, ptr: *const c_void, mask: u32) -> CallToken {
    let t = thread_state();
    match thread_slot(t) {
        Some(me) => enter_body(t, me, kind, op, ptr, mask),
        None => enter_late(t, kind, op, ptr, mask),
    }
}

/// The common case of an enter: a registered thread, one context (`contexts`, one bit) whose
/// services for the kind want every operation. What [`enter_body`] does for that context, with
/// nothing kept for a next context (the loop's state was most of the enter's spills) and the
/// services' tags tested before anything is written. `None`, having changed nothing, when a
/// service has an operation list: the caller takes the full path from the start.
///
/// `CALLBACK`: whether `mask` may have callback bits (`false`: none, by the caller's test);
/// `BUFFER`: whether it may have buffer bits (`false`: none, by the caller's test).
#[inline(always)]
fn enter_one<const CALLBACK: bool, const BUFFER: bool>(
    t: &ThreadState,
    me: &ThreadSlot,
    kind: Kind,
    op: u32,
    ptr: *const c_void,
    mask: u32,
    contexts: u32,
) -> Option<CallToken> {
    // Inside a buffer callback or a callback delivery: nested emits deliver nothing.
    let busy = me.busy_word();
    if t.in_callback.get() || busy != 0 {
        return Some(CallToken::NONE);
    }
    // Non-zero: one `tzcnt`; masked: no bounds check.
    let i = contexts.trailing_zeros() as usize & (MAX_CONTEXTS - 1);
    let slot = &SLOTS[i];
    if !me.enter_if_active(busy, i, &slot.active) {
        return Some(CallToken::NONE);
    }
    // Acquire: pairs with the Release that installed each service.
    let cb = if CALLBACK && mask & (1 << i) != 0 {
        slot.callbacks[kind.index()].load(Ordering::Acquire)
    } else {
        ptr::null_mut()
    };
    let bs = if BUFFER && mask & (1 << (i as u32 + BUFFER_SHIFT)) != 0 {
        slot.buffers[kind.index()].load(Ordering::Acquire)
    } else {
        ptr::null_mut()
    };
    // A service with an operation list: the full path.
    if (cb.addr() | bs.addr()) & LISTED != 0 {
        me.leave(busy);
        return None;
    }
    let buffered = u8::from(!bs.is_null()) << i;
    // No service (a mask read before a stop), or no free frame: not delivered.
    let Some(f) = (if cb.is_null() && buffered == 0 { None } else { me.alloc_frame() }) else {
        me.leave(busy);
        return Some(CallToken::NONE);
    };
    // SAFETY: this thread owns `me`; no other reference to frame `f` exists (just taken).
    let frame = unsafe { me.frame(f) };
    me.open_pair(i);
    let id = slot.id();
    // Read before the enter callback runs (see `enter_body`).
    let external = t.external(i, id);
    frame.handle[i] = id.handle;
    frame.external[i] = external;
    let correlation = t.next_correlation_id();
    let delivered = u8::from(!cb.is_null()) << i;
    // Built before the callback: fewer values to keep across it.
    let token = CallToken::new(delivered, buffered, f, kind, op, correlation);
    if !cb.is_null() {
        // SAFETY: tagged, so non-null; the thread is busy in the context, so the service
        // outlives this use (destroy frees it only after no thread is busy in the context).
        let svc = unsafe { &*cb.wrapping_byte_sub(ALL_OPS) };
        frame.user[i] = UserData::default();
        // SAFETY: as in `call`: the tool's callback with its data; `user` is the frame's slot.
        unsafe {
            invoke(
                svc.callback,
                svc.data,
                &mut frame.user[i],
                id,
                t.cached_thread_id(),
                correlation,
                external,
                kind as u32,
                op,
                Phase::Enter as u32,
                ptr,
            )
        };
    }
    me.leave(busy);
    // Read by the exit only for a buffer record: no store without one.
    if buffered != 0 {
        frame.start = timestamp_ns();
    }
    frame.previous = t.current.replace(correlation);
    Some(token)
}

/// The enter of a call on a thread in teardown: through the late slot, which the thread then
/// holds until the call's exit (its frames and pairs live there; other teardown threads' emits
/// are not delivered meanwhile and are counted in `late_lost`).
#[cold]
#[inline(never)]
fn enter_late(t: &ThreadState, kind: Kind, op: u32, ptr: *const c_void, mask: u32) -> CallToken {
    let Some(late) = take_late_slot(t) else { return CallToken::NONE };
    let token = enter_body(t, late, kind, op, ptr, mask);
    if !token.is_delivered() {
        release_late_slot(t);
        return CallToken::NONE;
    }
    CallToken { bits: token.bits | u64::from(LATE_FRAME) << 16, ..token }
}

#[inline(always)]
fn enter_body(t: &ThreadState, me: &ThreadSlot, kind: Kind, op: u32, ptr: *const c_void, mask: u32) -> CallToken {
    {
        // Inside a buffer callback (`in_callback`) or a callback delivery (a busy bit): nested
        // emits deliver nothing. Zero from here on: the sections below are balanced.
        let busy = me.busy_word();
        if t.in_callback.get() || busy != 0 {
            return CallToken::NONE;
        }
        let Some(f) = me.alloc_frame() else { return CallToken::NONE };
        // SAFETY: this thread owns `me`; no other reference to frame `f` exists (just taken).
        let frame = unsafe { me.frame(f) };
        // Locals, not the token: the token is returned through memory, and updating it there
        // (a byte store to `delivered`, then a 16-byte load of the token for the record) stalls
        // on store forwarding on every enter.
        let (mut delivered, mut buffered, mut correlation) = (0u8, 0u8, 0u64);
        let thread_id = t.cached_thread_id();
        // One gate per context for its callback and its buffer service: a call enters a
        // context whole (enter callback and, at the exit, its buffer record) or not at all,
        // even when the context is stopped meanwhile.
        for i in bits((mask | (mask >> BUFFER_SHIFT)) & 0xff) {
            let slot = &SLOTS[i];
            if !me.enter_if_active(busy, i, &slot.active) {
                continue;
            }
            // Acquire: pairs with the Release that installed each service.
            let (cb, cb_all) = if mask & (1 << i) != 0 {
                untag_service(slot.callbacks[kind.index()].load(Ordering::Acquire))
            } else {
                (ptr::null_mut(), false)
            };
            let (bs, bs_all) = if mask & (1 << (i as u32 + BUFFER_SHIFT)) != 0 {
                untag_service(slot.buffers[kind.index()].load(Ordering::Acquire))
            } else {
                (ptr::null_mut(), false)
            };
            // SAFETY: the thread is busy in the context, so its services outlive this use
            // (destroy frees them only after no thread is busy in the context).
            let cb = (!cb.is_null()).then(|| unsafe { &*cb }).filter(|s| wants(cb_all, &s.filter, op));
            // SAFETY: as above.
            let wants_buffer = !bs.is_null() && wants(bs_all, &unsafe { &*bs }.filter, op);
            if cb.is_none() && !wants_buffer {
                me.leave(busy);
                continue;
            }
            // One pair per context, whether it has a callback, a buffer service or both.
            me.open_pair(i);
            let id = slot.id();
            // Read before the enter callback runs: a push from inside it applies to the
            // records that follow the call, not to this call's exit or buffer record.
            let external = t.external(i, id);
            frame.handle[i] = id.handle;
            frame.external[i] = external;
            if wants_buffer {
                buffered |= 1 << i;
            }
            if let Some(svc) = cb {
                if correlation == 0 {
                    correlation = t.next_correlation_id();
                }
                delivered |= 1 << i;
                let record = CallbackRecord {
                    context_id: id,
                    thread_id,
                    correlation_id: CorrelationId { internal: correlation, external: UserData { value: external } },
                    kind: kind as u32,
                    operation: op,
                    phase: Phase::Enter as u32,
                    payload: ptr,
                };
                frame.user[i] = UserData::default();
                call(svc, &record, &mut frame.user[i]);
            }
            me.leave(busy);
        }
        if delivered | buffered == 0 {
            me.free_frame(f);
            return CallToken::NONE;
        }
        if correlation == 0 {
            correlation = t.next_correlation_id();
        }
        frame.start = if buffered != 0 { timestamp_ns() } else { 0 };
        frame.previous = t.current.replace(correlation);
        CallToken::new(delivered, buffered, f, kind, op, correlation)
    }
}

#[inline(never)]
fn exit_slow(token: CallToken, ptr: *const c_void, payload: Payload<'_>) {
    let t = thread_state();
    if token.frame() & LATE_FRAME != 0 {
        return exit_late(t, token, ptr, payload);
    }
    // The pairs were opened on this thread, so it has a slot, or had one until its teardown.
    match t.slot.get() {
        Some(me) if one_bit(token.pairs()) => exit_one::<true, true>(t, me, token, ptr, payload, None),
        Some(me) => exit_body(t, me, token, ptr, payload),
        None => exit_dying(t, token, ptr, payload),
    }
}

/// The exit of a call only callbacks saw (no buffer record): for one context, [`exit_one`]
/// without the record's part (no payload, no end time kept across the callback); otherwise
/// [`exit_slow`]'s cases.
#[inline(never)]
fn exit_callback_slow(token: CallToken, ptr: *const c_void) {
    let t = thread_state();
    match t.slot.get() {
        Some(me) if token.frame() & LATE_FRAME == 0 && one_bit(token.pairs()) => {
            exit_one::<true, false>(t, me, token, ptr, Payload::None, None)
        }
        _ => exit_slow(token, ptr, Payload::None),
    }
}

/// The exit of a call entered through the late slot: the thread holds it since the enter.
#[cold]
#[inline(never)]
fn exit_late(t: &ThreadState, token: CallToken, ptr: *const c_void, payload: Payload<'_>) {
    // Re-entrant: the thread holds the slot already (depth >= 1), so this cannot fail.
    let Some(late) = take_late_slot(t) else { return };
    // The late slot is always alive (never reused): destroy waits for its open pairs like a
    // live thread's (bounded), and the exit passes the gate like every exit.
    let token = CallToken { bits: token.bits & !(u64::from(LATE_FRAME) << 16), ..token };
    exit_body(t, late, token, ptr, payload);
    release_late_slot(t); // this exit's take
    release_late_slot(t); // the enter's
}

/// The exit of a call entered before the thread's teardown (see [`crate::inflight`]).
#[cold]
#[inline(never)]
fn exit_dying(t: &ThreadState, token: CallToken, ptr: *const c_void, payload: Payload<'_>) {
    if let Some(me) = t.dying_slot.get() {
        // The guard by flag here: `destroy_context` and `flush_buffer` from these callbacks
        // must see it, and they do not look at a dying slot's busy word (it may be reused).
        let was = t.in_callback.replace(true);
        exit_body(t, me, token, ptr, payload);
        t.in_callback.set(was);
    }
}

/// Delivers an exit from slot `me`. Each delivery passes the context's `exits` gate (the
/// handshake of `active`) and checks that the slot still hosts the context the enter went to:
/// `destroy_context` waits for open pairs only for a bounded time, then closes the gate, so an
/// abandoned pair's exit (or one of a thread in teardown) reaches no one. Frames are touched
/// only before the pairs close: the last close may make `me` reusable by another thread.
#[inline(never)]
fn exit_body(t: &ThreadState, me: &ThreadSlot, token: CallToken, ptr: *const c_void, payload: Payload<'_>) {
    let pairs = token.pairs();
    let Some(kind) = Kind::from_u32(u32::from(token.kind())) else { return };
    // SAFETY: this thread owns `me` (or owned it and still holds open pairs in it, which keeps
    // it from being reused), and frame `token.frame()` was taken by this call's enter (tokens
    // are not `Clone`, so no other exit uses it).
    let frame = unsafe { me.frame(token.frame()) };
    t.current.set(frame.previous);
    let thread_id = t.cached_thread_id();
    // Not necessarily 0: nothing stops a backend from ending an outer call inside a callback.
    let busy = me.busy_word();
    let end = if token.buffered() != 0 { timestamp_ns() } else { 0 };
    // One gate per context for both the exit callback and the buffer record: a call's exit
    // reaches a context whole (callback and record) or not at all (abandoned by destroy).
    for i in bits(pairs) {
        let slot = &SLOTS[i];
        if !me.enter_if_active(busy, i, &slot.exits) {
            continue;
        }
        // Acquire: pairs with `create_context`'s Release of a new handle.
        if slot.handle.load(Ordering::Acquire) != frame.handle[i] {
            me.leave(busy);
            continue;
        }
        let id = slot.id();
        let correlation_id =
            CorrelationId { internal: token.correlation, external: UserData { value: frame.external[i] } };
        if token.delivered() & (1 << i) != 0 {
            let (svc, _) = untag_service(slot.callbacks[kind.index()].load(Ordering::Acquire));
            if !svc.is_null() {
                // SAFETY: we are busy in the context and passed its `exits` gate while it was
                // the context of the enter (handle checked), so destroy has not freed its
                // services and will not before we leave; non-null (checked).
                let svc = unsafe { &*svc };
                let record = CallbackRecord {
                    context_id: id,
                    thread_id,
                    correlation_id,
                    kind: kind as u32,
                    operation: token.operation(),
                    phase: Phase::Exit as u32,
                    payload: ptr,
                };
                call(svc, &record, &mut frame.user[i]);
            }
        }
        if token.buffered() & (1 << i) != 0 {
            let (svc, _) = untag_service(slot.buffers[kind.index()].load(Ordering::Acquire));
            if !svc.is_null() {
                // SAFETY: as for the callback service above.
                let svc = unsafe { &*svc };
                let head = RecordHead {
                    kind,
                    operation: token.operation(),
                    phase: Phase::None,
                    context_id: id,
                    correlation_id,
                    thread_id,
                    start: frame.start,
                    end,
                };
                svc.write_exit(t, i, &head, &payload);
            }
        }
        me.leave(busy);
    }
    me.free_frame(token.frame());
    for i in bits(pairs) {
        me.close_pair(i);
    }
}

/// [`exit_body`] for a call one context saw (`token.pairs()` has one bit), the common case:
/// the same steps without a loop, so nothing is kept for a next context.
///
/// `CALLBACK`: whether a callback saw the enter (with `false`, the record is written inline);
/// `RECORD`: whether the token may have a buffer record (`false`: the caller saw none).
#[inline(always)]
fn exit_one<const CALLBACK: bool, const RECORD: bool>(
    t: &ThreadState,
    me: &ThreadSlot,
    token: CallToken,
    ptr: *const c_void,
    payload: Payload<'_>,
    api: Option<&ApiCallPayload>,
) {
    let Some(kind) = Kind::from_u32(u32::from(token.kind())) else { return };
    // SAFETY: as in `exit_body`.
    let frame = unsafe { me.frame(token.frame()) };
    t.current.set(frame.previous);
    // One bit: one `tzcnt`; masked: no bounds check.
    let i = token.pairs().trailing_zeros() as usize & (MAX_CONTEXTS - 1);
    // Before the exit callback, as in `exit_body`: the record's time leaves the tool's out.
    let end = if RECORD && token.buffered() != 0 { timestamp_ns() } else { 0 };
    // Not necessarily 0 (see `exit_body`). Read after the clock (the same value: only this
    // thread writes it, in balanced sections), so that it is not kept across the clock read.
    let busy = me.busy_word();
    let slot = &SLOTS[i];
    if me.enter_if_active(busy, i, &slot.exits) {
        let handle = frame.handle[i];
        // Acquire: pairs with `create_context`'s Release of a new handle.
        if slot.handle.load(Ordering::Acquire) == handle {
            let id = ContextId { handle };
            let correlation_id =
                CorrelationId { internal: token.correlation, external: UserData { value: frame.external[i] } };
            if CALLBACK && token.delivered() != 0 {
                let (svc, _) = untag_service(slot.callbacks[kind.index()].load(Ordering::Acquire));
                if !svc.is_null() {
                    // SAFETY: as in `exit_body`.
                    let svc = unsafe { &*svc };
                    // SAFETY: as in `call`.
                    unsafe {
                        invoke(
                            svc.callback,
                            svc.data,
                            &mut frame.user[i],
                            id,
                            t.cached_thread_id(),
                            correlation_id.internal,
                            correlation_id.external.value,
                            kind as u32,
                            token.operation(),
                            Phase::Exit as u32,
                            ptr,
                        )
                    };
                }
            }
            if RECORD && !CALLBACK {
                write_exit_record(t, CallToken { ..token }, frame, end, payload, api);
            } else if RECORD && token.buffered() != 0 {
                exit_record(CallToken { ..token }, frame, end, payload);
            }
        }
        me.leave(busy);
    }
    me.free_frame(token.frame());
    me.close_pair(i);
}

/// The buffer record of a call at its exit, one context (see [`exit_one`]): out of line, with
/// what the frame holds read again here, so that the exit's callback delivery keeps its
/// registers. The caller is busy in context slot `i` and checked its handle.
#[inline(never)]
fn exit_record(token: CallToken, frame: &Frame, end: u64, payload: Payload<'_>) {
    // Read here rather than passed: this function keeps its arguments to what the callback
    // delivery leaves in registers (and the thread-pointer cache's look-up is a few loads).
    write_exit_record(thread_state(), token, frame, end, payload, None);
}

/// The exit of a call only buffer services saw: for one context, [`exit_one`] with the record
/// written inline; otherwise [`exit_slow`]'s cases.
#[inline(never)]
fn exit_record_slow(token: CallToken, payload: Payload<'_>) {
    let t = thread_state();
    match t.slot.get() {
        Some(me) if token.frame() & LATE_FRAME == 0 && one_bit(token.pairs()) => {
            exit_one::<false, true>(t, me, token, ptr::null(), payload, None)
        }
        _ => exit_slow(token, ptr::null(), payload),
    }
}

/// [`exit_record_slow`] for an API call whose exit payload `p` is of the token's kind (checked
/// by the caller): the record written without the payload's variant tested again.
#[inline(never)]
fn exit_api_record_slow(token: CallToken, p: &ApiCallPayload) {
    let t = thread_state();
    match t.slot.get() {
        Some(me) if token.frame() & LATE_FRAME == 0 && one_bit(token.pairs()) => {
            exit_one::<false, true>(t, me, token, ptr::null(), Payload::None, Some(p))
        }
        _ => {
            let payload = api_payload(token.kind(), p);
            exit_slow(token, ptr::null(), payload)
        }
    }
}

/// The payload of an API call of the kind `kind` (a token's: one of the API kinds).
#[cold]
fn api_payload(kind: u8, p: &ApiCallPayload) -> Payload<'_> {
    match Kind::from_u32(u32::from(kind)) {
        Some(Kind::OpenclApi) => Payload::OpenclApi(p),
        Some(Kind::CudaRuntimeApi) => Payload::CudaRuntimeApi(p),
        Some(Kind::CudaDriverApi) => Payload::CudaDriverApi(p),
        _ => Payload::UrApi(p),
    }
}

/// What [`exit_record`] does. `api`: the call's API payload when the caller resolved it
/// (`payload` is not read then).
#[inline(always)]
fn write_exit_record(
    t: &ThreadState,
    token: CallToken,
    frame: &Frame,
    end: u64,
    payload: Payload<'_>,
    api: Option<&ApiCallPayload>,
) {
    let Some(kind) = Kind::from_u32(u32::from(token.kind())) else { return };
    let i = token.pairs().trailing_zeros() as usize & (MAX_CONTEXTS - 1);
    let slot = &SLOTS[i];
    let (svc, _) = untag_service(slot.buffers[kind.index()].load(Ordering::Acquire));
    if !svc.is_null() {
        // SAFETY: as in `exit_body`.
        let svc = unsafe { &*svc };
        match api.or_else(|| payload.as_api_call().filter(|_| payload.kind() == Some(kind))) {
            // An API call (the common pair): its record inlined here, the header's fields going
            // from registers into the record, with no header built in memory and read back.
            Some(p) => svc.write_api_call(t, i, kind, || exit_head(t, kind, &token, frame, i, end), p),
            _ => svc.write_exit(t, i, &exit_head(t, kind, &token, frame, i, end), &payload),
        }
    }
}

/// The header of a call's record at its exit (context slot `i`). Built in each branch of
/// [`write_exit_record`]: one header for both had its stores, for the out-of-line call, before
/// the branch; a closure for both was not inlined.
#[inline(always)]
fn exit_head(t: &ThreadState, kind: Kind, token: &CallToken, frame: &Frame, i: usize, end: u64) -> RecordHead {
    let i = i & (MAX_CONTEXTS - 1);
    RecordHead {
        kind,
        operation: token.operation(),
        phase: Phase::None,
        context_id: ContextId { handle: frame.handle[i] },
        correlation_id: CorrelationId { internal: token.correlation, external: UserData { value: frame.external[i] } },
        thread_id: t.cached_thread_id(),
        start: frame.start,
        end,
    }
}

/// `ptr`: the callbacks' pointer to the payload, computed where the call site names the variant
/// (see `emit_enter`). The kind's mask is loaded again here: with it, the arguments no longer
/// fit the six argument registers.
#[inline(never)]
fn instant_slow(kind: Kind, op: u32, phase: Phase, ptr: *const c_void, payload: Payload<'_>) {
    // Relaxed: as in `emit_instant` (a mask of 0 now delivers nothing).
    let mask = KIND_MASK[kind.index()].load(Ordering::Relaxed);
    // One thread-local look-up for the enclosing call and the delivery.
    let t = thread_state();
    if phase == Phase::None && matches!(kind, Kind::KernelDispatch | Kind::MemoryCopy | Kind::MemoryFill | Kind::Sync) {
        let c = t.current.get();
        if c != 0 {
            crate::correlation::note_reported(t, c, kind);
            if let Some(hook) = crate::correlation::reported_hook() {
                return instant_reported(t.in_callback.get(), c, kind, op, phase, ptr, payload, mask, hook);
            }
        }
    }
    if t.in_callback.get() {
        return;
    }
    if let Some(me) = t.slot.get()
        && mask & !0xff == 0
        && mask.is_power_of_two()
    // reloaded: may be 0 now (not `one_bit`)
    {
        return instant_one(t, me, kind, op, phase, ptr, mask);
    }
    instant_any(kind, op, phase, ptr, payload, mask);
}

/// [`instant_slow`] for a command reported at enqueue inside the call `correlation` while a
/// reported hook is installed (the OpenCL layer on the SYCL path): the record, then the hook,
/// so that what the hook delivers for the command follows its enqueue record.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn instant_reported(
    in_callback: bool,
    correlation: u64,
    kind: Kind,
    op: u32,
    phase: Phase,
    ptr: *const c_void,
    payload: Payload<'_>,
    mask: u32,
    hook: crate::correlation::ReportedHook,
) {
    if !in_callback {
        instant_any(kind, op, phase, ptr, payload, mask);
    }
    hook(correlation, kind);
}

/// [`instant_slow`], every other case (out of line: its state was spilled on the common path).
#[inline(never)]
fn instant_any(kind: Kind, op: u32, phase: Phase, ptr: *const c_void, payload: Payload<'_>, mask: u32) {
    let t = thread_state();
    match thread_slot(t) {
        Some(me) => instant_body(t, me, kind, op, phase, ptr, &payload, mask),
        None => instant_late(t, kind, op, phase, ptr, &payload, mask),
    }
}

/// The common case of an instant: one context with a callback service for the kind and no
/// buffer service. What [`instant_body`] does for it, without the loop's state.
#[inline(always)]
fn instant_one(t: &ThreadState, me: &ThreadSlot, kind: Kind, op: u32, phase: Phase, ptr: *const c_void, mask: u32) {
    // Inside a callback delivery: deliver nothing (see `enter_body`).
    let busy = me.busy_word();
    if busy != 0 {
        return;
    }
    let correlation = match t.current.get() {
        0 => t.next_correlation_id(),
        c => c,
    };
    // One bit: one `tzcnt`; masked: no bounds check.
    let i = mask.trailing_zeros() as usize & (MAX_CONTEXTS - 1);
    let slot = &SLOTS[i];
    if !me.enter_if_active(busy, i, &slot.active) {
        return;
    }
    // Acquire: pairs with the Release that installed the service.
    let p = slot.callbacks[kind.index()].load(Ordering::Acquire);
    let (svc, all) = untag_service(p);
    // SAFETY: busy in the context, so a non-null service outlives this use.
    if !svc.is_null() && wants(all, &unsafe { &*svc }.filter, op) {
        // SAFETY: as above.
        let svc = unsafe { &*svc };
        let id = slot.id();
        let mut user = UserData::default();
        // SAFETY: as in `call`.
        unsafe {
            invoke(
                svc.callback,
                svc.data,
                &mut user,
                id,
                t.cached_thread_id(),
                correlation,
                t.external(i, id),
                kind as u32,
                op,
                phase as u32,
                ptr,
            )
        };
    }
    me.leave(busy);
}

/// An instant from a thread in teardown: through the late slot (see [`crate::inflight`]).
#[cold]
#[inline(never)]
fn instant_late(
    t: &ThreadState,
    kind: Kind,
    op: u32,
    phase: Phase,
    ptr: *const c_void,
    payload: &Payload<'_>,
    mask: u32,
) {
    if let Some(late) = take_late_slot(t) {
        instant_body(t, late, kind, op, phase, ptr, payload, mask);
        release_late_slot(t);
    }
}

#[allow(clippy::too_many_arguments, reason = "the instant's arguments and the delivery state")]
#[inline(always)]
fn instant_body(
    t: &ThreadState,
    me: &ThreadSlot,
    kind: Kind,
    op: u32,
    phase: Phase,
    ptr: *const c_void,
    payload: &Payload<'_>,
    mask: u32,
) {
    {
        // Inside a callback delivery: deliver nothing (see `enter_body`).
        let busy = me.busy_word();
        if busy != 0 {
            return;
        }
        let correlation = match t.current.get() {
            0 => t.next_correlation_id(),
            c => c,
        };
        let thread_id = t.cached_thread_id();
        for i in bits(mask & 0xff) {
            let Some((svc, all)) = acquire(me, busy, i, &SLOTS[i].callbacks, kind) else { continue };
            // SAFETY: busy in the context.
            let svc = unsafe { &*svc };
            if wants(all, &svc.filter, op) {
                let id = SLOTS[i].id();
                let record = CallbackRecord {
                    context_id: id,
                    thread_id,
                    correlation_id: CorrelationId {
                        internal: correlation,
                        external: UserData { value: t.external(i, id) },
                    },
                    kind: kind as u32,
                    operation: op,
                    phase: phase as u32,
                    payload: ptr,
                };
                let mut user = UserData::default();
                call(svc, &record, &mut user);
            }
            me.leave(busy);
        }
        let bm = (mask >> BUFFER_SHIFT) & 0xff;
        if bm != 0 {
            let mut now = timestamp_ns();
            // A counter sample may carry its own time (a GPU sample decoded later).
            if let Payload::Counter(c) = payload {
                now = c.sample_ts(now);
            }
            write_buffers(me, busy, t, kind, op, phase, correlation, now, now, payload, bm);
        }
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state; inlined into every emit, which takes them one by one"
)]
#[inline(always)]
fn write_buffers<D: RecordData>(
    me: &ThreadSlot,
    busy: u32,
    t: &ThreadState,
    kind: Kind,
    op: u32,
    phase: Phase,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
    bm: u32,
) {
    let thread_id = t.cached_thread_id();
    for i in bits(bm) {
        let Some((svc, all)) = acquire(me, busy, i, &SLOTS[i].buffers, kind) else { continue };
        // SAFETY: busy in the context.
        let svc = unsafe { &*svc };
        if wants(all, &svc.filter, op) {
            stage(svc, t, thread_id, i, kind, op, phase, correlation, start, end, payload);
        }
        me.leave(busy);
    }
}

/// [`write_buffers`] for one context, slot `i` (activity: the common case). The service's tag
/// first, each branch with its own pointer: merged (as in `acquire`), LLVM untags both with
/// arithmetic (`p - (p & 1)`); here the common case reads the service at constant offsets.
/// (Not for the loop of `write_buffers`: inlined into `instant_slow`, it cost the callback
/// path of an instant two instructions of register shuffling.)
#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state; inlined into every emit, which takes them one by one"
)]
#[inline(always)]
fn write_buffer<D: RecordData>(
    me: &ThreadSlot,
    busy: u32,
    t: &ThreadState,
    i: usize,
    kind: Kind,
    op: u32,
    phase: Phase,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
) {
    let slot = &SLOTS[i];
    if !me.enter_if_active(busy, i, &slot.active) {
        return;
    }
    // Acquire: pairs with the Release that installed the service.
    let p = slot.buffers[kind.index()].load(Ordering::Acquire);
    let thread_id = t.cached_thread_id();
    if p.addr() & ALL_OPS != 0 {
        // SAFETY: tagged, so non-null; busy in the context, so the service outlives this use
        // (destroy frees it only after no thread is busy in the context).
        let svc = unsafe { &*p.wrapping_byte_sub(ALL_OPS) };
        stage(svc, t, thread_id, i, kind, op, phase, correlation, start, end, payload);
    } else if wants_listed(p, op) {
        // SAFETY: non-null (checked by `wants_listed`); alive as above.
        stage(
            unsafe { &*p.wrapping_byte_sub(LISTED) },
            t,
            thread_id,
            i,
            kind,
            op,
            phase,
            correlation,
            start,
            end,
            payload,
        );
    }
    me.leave(busy);
}

/// Whether the service pointer `p` as loaded (one with an operation list, tagged `LISTED`, or
/// null) wants operation `op`. Out of line: the common service wants every operation.
#[cold]
#[inline(never)]
fn wants_listed(p: *mut BufferService, op: u32) -> bool {
    let (p, _) = untag_service(p);
    // SAFETY: the caller is busy in the context, so a non-null service is alive.
    !p.is_null() && unsafe { &*p }.filter.contains(op)
}

/// Stages the record in `svc`'s buffer (context slot `i`, the caller busy in it).
#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state; inlined into every emit, which takes them one by one"
)]
#[inline(always)]
fn stage<D: RecordData>(
    svc: &BufferService,
    t: &ThreadState,
    thread_id: u64,
    i: usize,
    kind: Kind,
    op: u32,
    phase: Phase,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
) {
    let id = SLOTS[i].id();
    svc.write(
        i,
        id,
        kind,
        op,
        phase,
        CorrelationId { internal: correlation, external: UserData { value: t.external(i, id) } },
        thread_id,
        start,
        end,
        payload,
        t,
    );
}

/// One activity path per payload struct, and [`emit_activity`]'s choice among them: call sites
/// name the variant and the kind, so the `match` folds to one call, and that path's fast case
/// ([`activity_fast`]) encodes the typed record straight from the struct with the kind a
/// constant (no kind check, no `match` on the variant); every other case goes to the one
/// [`activity_slow`] with the payload. Plain functions, not one generic: a generic would be
/// instantiated in the caller's crate, and the statics it uses (slots, masks) would then be
/// reached through the GOT from this crate's own record paths too.
macro_rules! activity_paths {
    ($($variant:ident($payload:ty) if $kind:ident => $path:ident;)*) => {
        #[inline(always)]
        fn activity_typed(kind: Kind, op: u32, correlation: u64, start: u64, end: u64, payload: Payload<'_>, bm: NonZeroU32) {
            match payload {
                $(Payload::$variant(p) if kind == Kind::$kind => {
                    $path(&ActivityArgs { op, correlation, times: DeviceTimes::new(start, end), payload: p, bm })
                })*
                // No payload, or one of another kind: the record is its header.
                _ => activity_slow(kind, op, correlation, start, end, &Payload::None, bm),
            }
        }

        $(
            #[inline(never)]
            fn $path(a: &ActivityArgs<'_, $payload>) {
                if !activity_fast(Kind::$kind, a) {
                    activity_slow(Kind::$kind, a.op, a.correlation, a.times.start(), a.times.end(), &Payload::$variant(a.payload), a.bm);
                }
            }
        )*
    };
}

/// An activity record's arguments, passed by one pointer: the fast path reads them from memory
/// and the slow path after it needs only that pointer kept (six arguments in registers had to
/// survive the fast path in callee-saved registers: six pushes and pops per record).
struct ActivityArgs<'a, P> {
    op: u32,
    correlation: u64,
    times: DeviceTimes,
    payload: &'a P,
    bm: NonZeroU32,
}

/// An activity's device start and end, stored by the caller as one 16-byte value: the fast
/// path reads them with one 16-byte load (the header's last 16 bytes), and a load that spans
/// two 8-byte stores is not forwarded from the store buffer (it waits until both stores have
/// reached the cache, and every older store with them).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct DeviceTimes(std::arch::x86_64::__m128i);

#[cfg(target_arch = "x86_64")]
impl DeviceTimes {
    #[inline(always)]
    fn new(start: u64, end: u64) -> Self {
        // SAFETY: SSE2 is part of the x86-64 baseline.
        DeviceTimes(unsafe { std::arch::x86_64::_mm_set_epi64x(end as i64, start as i64) })
    }
    #[inline(always)]
    fn pair(self) -> [u64; 2] {
        // SAFETY: `__m128i` and `[u64; 2]` have the same size, every bit pattern valid in both.
        unsafe { std::mem::transmute::<std::arch::x86_64::__m128i, [u64; 2]>(self.0) }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[derive(Clone, Copy)]
struct DeviceTimes([u64; 2]);

#[cfg(not(target_arch = "x86_64"))]
impl DeviceTimes {
    #[inline(always)]
    fn new(start: u64, end: u64) -> Self {
        DeviceTimes([start, end])
    }
    #[inline(always)]
    fn pair(self) -> [u64; 2] {
        self.0
    }
}

impl DeviceTimes {
    #[inline(always)]
    fn start(self) -> u64 {
        self.pair()[0]
    }
    #[inline(always)]
    fn end(self) -> u64 {
        self.pair()[1]
    }
}

activity_paths! {
    UrApi(crate::payload::ApiCallPayload) if UrApi => activity_api_call;
    Queue(crate::payload::QueuePayload) if Queue => activity_queue;
    KernelDispatch(crate::payload::KernelDispatchPayload) if KernelDispatch => activity_kernel_dispatch;
    MemoryCopy(crate::payload::MemoryCopyPayload) if MemoryCopy => activity_memory_copy;
    MemoryFill(crate::payload::MemoryFillPayload) if MemoryFill => activity_memory_fill;
    MemoryAlloc(crate::payload::MemoryAllocPayload) if MemoryAlloc => activity_memory_alloc;
    TaskGraph(crate::payload::TaskGraphPayload) if TaskGraph => activity_task_graph;
    Sync(crate::payload::SyncPayload) if Sync => activity_sync;
    CodeObject(crate::payload::CodeObjectPayload) if CodeObject => activity_code_object;
    Marker(crate::payload::MarkerPayload) if Marker => activity_marker;
    Device(crate::payload::DevicePayload) if Device => activity_device;
    Counter(crate::payload::CounterPayload) if Counter => activity_counter;
}

/// The common case of an activity record: a registered thread outside any delivery, one
/// context, a service that wants every operation, this thread's staging of its buffer in the
/// cache with room for the record below its limit. `false`, having done nothing (a busy section
/// entered is left again), when any of that does not hold: the caller then takes the full path
/// from the start. No calls besides the record's encoding: with the cold cases (registration,
/// the staging search, a delivery, another context's loop) as calls in the same function, its
/// prologue saves registers and spills arguments that the common case never needs.
#[inline(always)]
fn activity_fast<P: RecordData>(kind: Kind, a: &ActivityArgs<'_, P>) -> bool {
    let t = thread_state();
    if t.in_callback.get() {
        return true; // inside a buffer callback: deliver nothing
    }
    let Some(me) = t.slot.get() else { return false };
    // Inside a callback delivery: deliver nothing (see `enter_body`).
    let busy = me.busy_word();
    if busy != 0 {
        return true;
    }
    let bm = a.bm;
    if !bm.is_power_of_two() {
        return false;
    }
    // Non-zero: one `tzcnt`; masked: no bounds check (`bm` < 1 << 8).
    let i = bm.trailing_zeros() as usize & (MAX_CONTEXTS - 1);
    let slot = &SLOTS[i];
    if !me.enter_if_active(busy, i, &slot.active) {
        return true;
    }
    // Acquire: pairs with the Release that installed the service.
    let p = slot.buffers[kind.index()].load(Ordering::Acquire);
    // A tagged service wants every operation (and is non-null); anything else: the full path.
    let done = p.addr() & ALL_OPS != 0 && {
        // SAFETY: tagged, so non-null; busy in the context, so the service outlives this use
        // (destroy frees it only after no thread is busy in the context).
        let svc = unsafe { &*p.wrapping_byte_sub(ALL_OPS) };
        let id = slot.id();
        let head = RecordHead {
            kind,
            operation: a.op,
            phase: Phase::Complete,
            context_id: id,
            correlation_id: CorrelationId { internal: a.correlation, external: UserData { value: t.external(i, id) } },
            thread_id: t.cached_thread_id(),
            start: a.times.start(),
            end: a.times.end(),
        };
        svc.try_write(t, i, &head, a.payload)
    };
    me.leave(busy);
    done
}

/// The activity path, every case. One function for all payload types: only the fast path is
/// per type.
#[inline(never)]
fn activity_slow(kind: Kind, op: u32, correlation: u64, start: u64, end: u64, data: &Payload<'_>, bm: NonZeroU32) {
    let t = thread_state();
    if t.in_callback.get() {
        return;
    }
    match thread_slot(t) {
        // `bm` has only the buffer bits of the slots (`KIND_MASK >> BUFFER_SHIFT`, < 1 << 8).
        Some(me) => activity_body(me, t, kind, op, correlation, start, end, data, bm),
        None => activity_late(t, kind, op, correlation, start, end, data, bm),
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state; inlined into every emit, which takes them one by one"
)]
#[inline(always)]
fn activity_body<D: RecordData>(
    me: &ThreadSlot,
    t: &ThreadState,
    kind: Kind,
    op: u32,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
    bm: NonZeroU32,
) {
    // Inside a callback delivery: deliver nothing (see `enter_body`).
    let busy = me.busy_word();
    if busy != 0 {
        return;
    }
    if bm.is_power_of_two() {
        // One context (the common case): no loop, so nothing is kept for a next iteration.
        // Non-zero: one `tzcnt`; masked: no bounds check.
        let i = bm.trailing_zeros() as usize & (MAX_CONTEXTS - 1);
        write_buffer(me, busy, t, i, kind, op, Phase::Complete, correlation, start, end, payload);
    } else {
        activity_contexts(me, busy, t, kind, op, correlation, start, end, payload, bm.get() & 0xff);
    }
}

/// [`activity_body`] for several contexts: out of line, so the one-context path keeps its
/// registers.
#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state, kept in registers across this out-of-line call"
)]
#[inline(never)]
fn activity_contexts<D: RecordData>(
    me: &ThreadSlot,
    busy: u32,
    t: &ThreadState,
    kind: Kind,
    op: u32,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
    bm: u32,
) {
    write_buffers(me, busy, t, kind, op, Phase::Complete, correlation, start, end, payload, bm);
}

/// Activity from a thread in teardown: through the late slot (see [`crate::inflight`]).
#[allow(
    clippy::too_many_arguments,
    reason = "one record's fields plus the delivery state, as the activity path passes them"
)]
#[cold]
#[inline(never)]
fn activity_late<D: RecordData>(
    t: &ThreadState,
    kind: Kind,
    op: u32,
    correlation: u64,
    start: u64,
    end: u64,
    payload: &D,
    bm: NonZeroU32,
) {
    if let Some(late) = take_late_slot(t) {
        activity_body(late, t, kind, op, correlation, start, end, payload, bm);
        release_late_slot(t);
    }
}

/// A context's service table under loom: registration ([`install_service`]) racing the record
/// path ([`acquire_service`], which runs the in-flight handshake) racing destroy (clear
/// `active`, [`crate::inflight::heavy_fence`], `wait_idle`, [`retire_service`], free). The
/// service's contents are a loom cell written when it is built and when it is freed: a record
/// path that reads a service not yet published to it, or one already freed, fails the model.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as LoomUnsafeCell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool as LoomAtomicBool, AtomicPtr as LoomAtomicPtr};

    struct Service {
        value: LoomUnsafeCell<u32>,
    }

    struct Context {
        active: LoomAtomicBool,
        entry: LoomAtomicPtr<Service>,
    }

    /// The record path of one emit: the value of the service it delivered to, if any.
    fn emit(slot: &ThreadSlot, ctx: &Context) -> Option<u32> {
        let (svc, _all) = acquire_service(slot, 0, 0, &ctx.active, &ctx.entry)?;
        // SAFETY: a published service, live while we are busy in the context; loom checks the
        // read against its construction and its destruction.
        let v = unsafe { &*svc }.value.with(|p| unsafe { *p });
        slot.leave(0);
        Some(v)
    }

    /// `destroy_context`: the service, if one was installed, is freed after the context is
    /// quiet; what it held.
    fn destroy(ctx: &Context, slots: &[&ThreadSlot]) -> Option<u32> {
        ctx.active.store(false, Ordering::SeqCst);
        crate::inflight::heavy_fence();
        for s in slots {
            s.wait_idle(0, false, true);
        }
        let svc = retire_service(&ctx.entry);
        if svc.is_null() {
            return None;
        }
        // SAFETY: retired: ours alone (what destroy_context relies on).
        let svc = unsafe { Box::from_raw(svc) };
        // The free, as a write loom checks against every emit's read.
        svc.value.with_mut(|p| unsafe { std::mem::replace(&mut *p, 0) }).into()
    }

    #[test]
    fn loom_register_emit_destroy_never_reads_an_unpublished_or_freed_service() {
        loom::model(|| {
            let ctx =
                Arc::new(Context { active: LoomAtomicBool::new(true), entry: LoomAtomicPtr::new(ptr::null_mut()) });
            let slot = Arc::new(ThreadSlot::new());
            let register = {
                let ctx = ctx.clone();
                loom::thread::spawn(move || {
                    let svc = Box::into_raw(Box::new(Service { value: LoomUnsafeCell::new(42) }));
                    assert!(install_service(&ctx.entry, tagged_service(svc, true)));
                })
            };
            let emitter = {
                let (ctx, slot) = (ctx.clone(), slot.clone());
                loom::thread::spawn(move || emit(&slot, &ctx))
            };
            let delivered = emitter.join().expect("emitter");
            register.join().expect("register");
            assert!(matches!(delivered, None | Some(42)), "{delivered:?}");
            assert_eq!(destroy(&ctx, &[&slot]), Some(42));
        });
    }

    #[test]
    fn loom_destroy_racing_emits_frees_the_service_after_the_last_one() {
        loom::model(|| {
            let ctx =
                Arc::new(Context { active: LoomAtomicBool::new(true), entry: LoomAtomicPtr::new(ptr::null_mut()) });
            let svc = Box::into_raw(Box::new(Service { value: LoomUnsafeCell::new(42) }));
            assert!(install_service(&ctx.entry, tagged_service(svc, false)));
            let slot = Arc::new(ThreadSlot::new());
            let emitter = {
                let (ctx, slot) = (ctx.clone(), slot.clone());
                loom::thread::spawn(move || emit(&slot, &ctx))
            };
            assert_eq!(destroy(&ctx, &[&slot]), Some(42));
            let delivered = emitter.join().expect("emitter");
            assert!(matches!(delivered, None | Some(42)), "{delivered:?}");
        });
    }
}
