//! The direct path: records handed straight to one in-process consumer (the recorder) when it is
//! the only one that wants them.
//!
//! The services deliver a record to each started context as a [`crate::CallbackRecord`] passed
//! by value through the C ABI, with the per-context bookkeeping that guarantees tools their
//! pairing and quiescence (busy marks, frames, open pairs, user data). A consumer that is Rust
//! code in the same process, owns its own gate and needs no user data (the recorder: its ring
//! push is gated by its own recording) can register a [`DirectSink`] for its context. Then,
//! for every kind whose only started service is that context's callback service (the kind's
//! mask equals the context's bit: one extra relaxed load on the enabled path), the emit functions
//! call the sink directly with plain Rust arguments:
//!
//! - an API call's enter stores only its start time, the previous current correlation id and the
//!   external id in the thread's state (a 64-entry stack of [`DirectFrame`]s), builds no payload
//!   ([`crate::emit_enter_with`] skips the builder) and calls nothing;
//! - its exit calls [`DirectSink::api_call`] once, with the start time and the exit's payload;
//! - an instant calls [`DirectSink::record`], and so do the enter and the exit of a call of
//!   another kind (waits, tasks, ranges: the recorder writes an entry for each);
//! - a completion ([`crate::emit_activity`]: phase COMPLETE, the correlation id given) calls
//!   [`DirectSink::record`] too. A backend that completes its commands in batches on a thread
//!   of its own (the OpenCL layer's harvest) pays one sink call per command instead of the
//!   services' slot, busy mark and callback record.
//!
//! What the sink sees equals what its context's callback would have seen (kind, operation,
//! phase, correlation ids, payload; the recorder builds the same ring entries from either, test
//! `direct_and_services_paths_write_the_same_records` in `offtrace-recorder`). Everything the
//! services do for the other kinds and contexts is unchanged: as soon as a tool starts a service
//! for a kind, that kind's emits take the services' path again (a call entered on one path exits
//! on it). Not direct: any emit on a thread inside a callback or buffer delivery (the services'
//! rules of re-entrancy apply there), and a completion's buffer-service part (a kind with a
//! started buffer service has more than the sink's bit in its mask).
//!
//! Cost: the test is one more relaxed load (the sink's bit) compared with the kind's mask. An API
//! enter is a thread-local frame and one clock reading; its exit and each instant one call of the
//! sink; no atomic read-modify-write, no lock, nothing shared between threads is written
//! (`docs/overhead.md`, *Agent: cost per notification*).
//!
//! Concurrency: the sink is installed once per recording (`set_direct_sink`: sink and handle,
//! then the bit with Release) and read on the record path after an Acquire load of the bit;
//! frames are the emitting thread's own.
//!
//! Lifetime: the sink is `'static`; destroying the context forgets it, and an exit whose enter
//! was direct reaches the sink only while the same context still has it (else it is dropped, as
//! the services abandon a pair whose context was destroyed). The sink's own gate (the recorder's
//! recording) decides whether a record is kept.

#![allow(unsafe_code)] // the sink is a `&'static` kept in an `AtomicPtr`

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::callback::{CallToken, Phase};
use crate::context::{ContextId, MAX_CONTEXTS, validate};
use crate::correlation::ThreadState;
use crate::error::ServiceError;
use crate::kind::Kind;
use crate::payload::{ApiCallPayload, Payload};
use crate::timestamp::timestamp_ns;

/// An API call, as the direct sink receives it at its exit.
#[derive(Debug, Clone, Copy)]
pub struct DirectCall {
    pub kind: Kind,
    pub operation: u32,
    /// Trace clock at the enter.
    pub start: u64,
    /// Trace clock at the exit.
    pub end: u64,
    pub correlation: u64,
    /// The external correlation id of the sink's context at the enter (0 = none).
    pub external: u64,
}

/// A record other than an API call's exit (an instant), as the direct sink receives it.
#[derive(Debug, Clone, Copy)]
pub struct DirectRecord {
    pub kind: Kind,
    pub operation: u32,
    pub phase: Phase,
    pub correlation: u64,
    /// Trace clock at the emit (or the time the backend gave: [`crate::emit_instant_at`]).
    pub ts: u64,
    /// The payload's strings live as long as the process and never change (the backend
    /// interned them: [`crate::emit_instant_interned`], [`crate::emit_activity_interned`]), so
    /// the sink may know them by their address, without reading them.
    pub interned: bool,
}

/// An in-process consumer's entry points (see the module docs). Plain Rust functions: called on
/// the emitting thread, they must not call back into the services' emit functions and must not
/// unwind out (catch panics inside).
#[derive(Debug)]
pub struct DirectSink {
    /// An API call ended: `payload` is its exit payload (results filled in); `thread`: the
    /// emitting thread's word for the sink.
    pub api_call: fn(call: &DirectCall, payload: &ApiCallPayload, thread: &DirectThreadWord),
    /// A one-shot record; `payload` is of `record.kind`; `thread`: as for `api_call`.
    pub record: fn(record: &DirectRecord, payload: &Payload<'_>, thread: &DirectThreadWord),
}

/// A word of the emitting thread's state that the services pass to the sink with each record
/// (0 on a new thread), so that the sink reaches its own per-thread state without a
/// thread-local access: in a shared object each is a `__tls_get_addr` call, and the services
/// have the thread's state at hand already (`docs/overhead.md`, *Agent*). The recorder keeps
/// the address of its thread-local ring there. Not `Sync`: it never leaves its thread.
#[derive(Debug, Default)]
pub struct DirectThreadWord(Cell<usize>);

impl DirectThreadWord {
    pub(crate) const fn new() -> Self {
        Self(Cell::new(0))
    }

    /// The value the sink stored on this thread (0: none yet, or cleared).
    #[inline(always)]
    pub fn get(&self) -> usize {
        self.0.get()
    }

    /// Stores `value` for this thread.
    #[inline]
    pub fn set(&self, value: usize) {
        self.0.set(value);
    }
}

/// The calling thread's word for a backend's own per-thread state (0 on a new thread), reached
/// through the thread-pointer cache ([`crate::thread_cache`]): in a shared object, where each
/// thread-local access is a `__tls_get_addr` call, a backend keeps the address of its one
/// thread-local struct here, looks the word up once per notification and passes its state down
/// (`docs/overhead.md`, *Agent*). One word, one user: the SYCL/UR bridge (another backend that
/// wants one needs a word of its own here). The word never leaves its thread (`!Sync`).
#[inline(always)]
pub fn backend_thread_word() -> &'static DirectThreadWord {
    &crate::correlation::thread_state().backend_word
}

/// Clears the calling thread's [`DirectThreadWord`]: for a sink whose per-thread state is
/// dropped (the recorder's ring at the thread's teardown) while the thread may still emit.
pub fn clear_direct_thread_word() {
    crate::correlation::thread_state().direct_sink_word.set(0);
}

/// The direct frames a thread keeps (open direct calls); a deeper call is not delivered, as on
/// the services' path ([`crate::inflight::MAX_FRAMES`]).
pub(crate) const DIRECT_FRAMES: usize = 64;
/// `CallToken::frame` flag of a call entered on the direct path (frame indices are below 64;
/// `0x80` is the services' late-slot flag).
pub(crate) const DIRECT_FRAME: u8 = 0x40;

/// What the direct enter keeps for its exit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DirectFrame {
    start: u64,
    previous: u64,
    external: u64,
    /// The sink's context at the enter: the exit is delivered only to the same one.
    handle: u64,
}

impl DirectFrame {
    pub(crate) const EMPTY: DirectFrame = DirectFrame { start: 0, previous: 0, external: 0, handle: 0 };
}

/// The mask value (a kind's `KIND_MASK` word) at which the direct path applies: the sink's
/// context's callback bit alone; 0 = no sink.
static BIT: AtomicU32 = AtomicU32::new(0);
/// The sink's context handle (0 = none).
static HANDLE: AtomicU64 = AtomicU64::new(0);
static SINK: AtomicPtr<DirectSink> = AtomicPtr::new(std::ptr::null_mut());

/// Registers `sink` as the direct consumer of the context `ctx` (replacing any other): kinds
/// whose only started service is `ctx`'s callback service go to it directly. `ctx`'s callback
/// services stay configured: they receive every record of those kinds while another context
/// wants them too.
pub fn set_direct_sink(ctx: ContextId, sink: &'static DirectSink) -> Result<(), ServiceError> {
    let i = validate(ctx)?;
    // Relaxed: published by the Release store of `BIT` below.
    SINK.store(sink as *const DirectSink as *mut DirectSink, Ordering::Relaxed);
    HANDLE.store(ctx.handle, Ordering::Relaxed);
    // Release: the sink and handle above are visible to an emitter that loads this bit (Acquire).
    BIT.store(1 << i, Ordering::Release);
    Ok(())
}

/// Forgets the sink of context slot `i` (its context is being destroyed).
pub(crate) fn forget(i: usize) {
    if BIT.load(Ordering::Relaxed) == 1 << i {
        BIT.store(0, Ordering::Relaxed);
        // SeqCst: the exits that compare handles see 0 after this (or see the context's own
        // handle and deliver to a sink that is still valid: sinks are 'static).
        HANDLE.store(0, Ordering::SeqCst);
    }
}

/// Whether the direct path applies to a kind whose mask is `mask` (non-zero).
#[inline(always)]
pub(crate) fn applies(mask: u32) -> bool {
    // Acquire: pairs with `set_direct_sink`'s Release (the sink is visible once the bit is).
    mask == BIT.load(Ordering::Acquire)
}

/// Whether records of `kind` go to the direct sink now (its context's callback service is the
/// kind's only started service). For tests and benchmarks: the emit functions decide per call.
pub fn direct_path_applies(kind: Kind) -> bool {
    let mask = crate::context::KIND_MASK[kind.index()].load(Ordering::Relaxed);
    mask != 0 && applies(mask)
}

#[inline(always)]
fn sink() -> Option<&'static DirectSink> {
    // SAFETY: non-null values of `SINK` come only from a `&'static DirectSink` in
    // `set_direct_sink`, so they are valid and immutable for the rest of the process.
    unsafe { SINK.load(Ordering::Relaxed).as_ref() }
}

/// Whether the thread may take the direct path: not inside a callback or buffer delivery of
/// the services, nor holding the late slot (there, the services' rules decide what is
/// delivered: the slow path runs instead).
#[inline(always)]
fn quiet(t: &ThreadState) -> bool {
    !t.in_callback.get() && t.late_depth.get() == 0 && t.slot.get().is_none_or(|s| s.busy_word() == 0)
}

/// The direct enter of a call of `kind` (see the module docs); `None`: take the services' path.
/// `payload` is the enter's: needed for the other kinds (the sink records their enter), not
/// read for API kinds (their one record is made at the exit).
#[inline(always)]
pub(crate) fn enter(kind: Kind, op: u32, payload: Option<&Payload<'_>>) -> Option<CallToken> {
    let t = crate::correlation::thread_state();
    if !quiet(t) {
        return None;
    }
    let used = t.direct_used.get();
    if used == u64::MAX {
        // As the services with their frames used up: the call is not delivered.
        return Some(CallToken::NONE);
    }
    let f = (!used).trailing_zeros() as usize;
    t.direct_used.set(used | (1 << f));
    let correlation = t.next_correlation_id();
    let handle = HANDLE.load(Ordering::Relaxed);
    // The handle names its slot in its low byte (1-based); `external` checks the handle itself.
    let slot = ((handle & 0xff) as usize).wrapping_sub(1) % MAX_CONTEXTS;
    let external = t.external(slot, ContextId { handle });
    let start = timestamp_ns();
    if !kind.is_api()
        && let Some(payload) = payload
        && payload.kind() == Some(kind)
        && let Some(sink) = sink()
    {
        // As the services: the enter is delivered before the call becomes the current one.
        let record = DirectRecord { kind, operation: op, phase: Phase::Enter, correlation, ts: start, interned: false };
        (sink.record)(&record, payload, &t.direct_sink_word);
    }
    let previous = t.current.replace(correlation);
    t.direct[f].set(DirectFrame { start, previous, external, handle });
    Some(CallToken::direct(kind, op, correlation, f as u8 | DIRECT_FRAME))
}

/// The direct exit of a call whose enter was direct (`frame` has [`DIRECT_FRAME`]), at `end`
/// (0: now).
#[inline(never)]
pub(crate) fn exit(kind: u8, op: u32, correlation: u64, frame: u8, end: u64, payload: Payload<'_>) {
    let t = crate::correlation::thread_state();
    let f = usize::from(frame & !DIRECT_FRAME) % DIRECT_FRAMES;
    let d = t.direct[f].get();
    t.direct_used.set(t.direct_used.get() & !(1 << f));
    t.current.set(d.previous);
    // Relaxed: a stale handle delivers to a sink that is still valid ('static), whose own gate
    // decides; only a destroyed context's exits are meant to be dropped.
    if d.handle == 0 || HANDLE.load(Ordering::Relaxed) != d.handle {
        return;
    }
    let Some(kind) = Kind::from_u32(u32::from(kind)) else { return };
    // A payload of another kind reaches a callback as null, and the recorder records nothing.
    if payload.kind() != Some(kind) {
        return;
    }
    let Some(sink) = sink() else { return };
    let end = if end == 0 { timestamp_ns() } else { end };
    match payload.as_api_call() {
        Some(p) => {
            let call = DirectCall { kind, operation: op, start: d.start, end, correlation, external: d.external };
            (sink.api_call)(&call, p, &t.direct_sink_word);
        }
        None => {
            let record =
                DirectRecord { kind, operation: op, phase: Phase::Exit, correlation, ts: end, interned: false };
            (sink.record)(&record, &payload, &t.direct_sink_word)
        }
    }
}

/// The direct delivery of an instant at `ts` (0: now); `false`: take the services' path.
/// `interned`: as [`DirectRecord::interned`].
#[inline(never)]
pub(crate) fn instant(kind: Kind, op: u32, phase: Phase, ts: u64, payload: &Payload<'_>, interned: bool) -> bool {
    let t = crate::correlation::thread_state();
    if !quiet(t) {
        return false;
    }
    let current = t.current.get();
    let reported = phase == Phase::None
        && current != 0
        && matches!(kind, Kind::KernelDispatch | Kind::MemoryCopy | Kind::MemoryFill | Kind::Sync);
    if reported {
        crate::correlation::note_reported(t, current, kind);
    }
    let correlation = if current == 0 { t.next_correlation_id() } else { current };
    // As in the services: a payload of another kind reaches a callback as null, and the
    // recorder records nothing for a null payload.
    if payload.kind() == Some(kind)
        && let Some(sink) = sink()
    {
        let ts = if ts == 0 { timestamp_ns() } else { ts };
        let record = DirectRecord { kind, operation: op, phase, correlation, ts, interned };
        (sink.record)(&record, payload, &t.direct_sink_word);
    }
    // As the services' `instant_reported`: the record, then the reported hook (the OpenCL layer
    // delivers the command's device time once its backend reported it; without the call, a
    // command enqueued by a thread that makes no later OpenCL call got none).
    if reported && let Some(hook) = crate::correlation::reported_hook() {
        hook(current, kind);
    }
    true
}

/// The direct delivery of a completion ([`crate::emit_activity`]'s callback part) of the
/// command with correlation id `correlation`, at the time of the call (as the services' callback
/// sees it); `false`: take the services' path.
/// `interned`: as [`DirectRecord::interned`].
#[inline(never)]
pub(crate) fn activity(kind: Kind, op: u32, correlation: u64, payload: &Payload<'_>, interned: bool) -> bool {
    let t = crate::correlation::thread_state();
    if !quiet(t) {
        return false;
    }
    // As in the services: a payload of another kind reaches a callback as null, and the
    // recorder records nothing for a null payload.
    if payload.kind() == Some(kind)
        && let Some(sink) = sink()
    {
        let ts = timestamp_ns();
        let record = DirectRecord { kind, operation: op, phase: Phase::Complete, correlation, ts, interned };
        (sink.record)(&record, payload, &t.direct_sink_word);
    }
    true
}
