//! Contexts: a client's set of configured services, started and stopped as a unit.
//!
//! Contexts live in [`MAX_CONTEXTS`] static slots. A [`ContextId`] names a slot and the slot's
//! generation, so an id outlives nothing: after `destroy_context` every call with it returns
//! `ContextInvalid`, even when the slot hosts a new context.
//!
//! The record path never takes a lock. It reads, per kind, one word of [`KIND_MASK`] (bit `i` =
//! slot `i` has a started callback service for the kind; bit `16 + i` = a started buffer
//! service). The control plane (create, configure, start, stop, destroy) takes the slot's mutex.
//!
//! Pairing and quiescence (the Level Zero tracer's guarantees), with the per-thread in-flight
//! state of [`crate::inflight`] (no shared counter on the record path):
//! - a delivery first marks the thread busy in the context, then checks `active`; `stop` clears
//!   `active`, then waits until no thread is busy in it. So after `stop` returns no new enter is
//!   delivered, and no callback of the context is running (other than the caller's own, when a
//!   callback stops its own context);
//! - a delivered enter opens a pair on the thread and records the slot in the call's token; the
//!   exit is delivered to every slot in the token, started or not, and then closes the pair. An
//!   enter not delivered (context stopped, or started only after it) has no exit, even if the
//!   context is started before the exit;
//! - `destroy` stops, then waits until no thread is busy in the context and no other live
//!   thread holds an open pair, for at most [`DESTROY_PAIR_WAIT`]; then it closes the `exits`
//!   gate (the same handshake as `active`, passed by every exit delivery) and waits for the
//!   callbacks in progress, so no callback of the context runs after it returns. Pairs still
//!   open then (another thread blocked in a call or holding a marker range, the calling
//!   thread's own, a thread in teardown that may never emit its exit) are abandoned: their
//!   exits reach no one ([`abandoned_pairs`]). It returns `Busy` only inside a callback.

#![allow(unsafe_code)] // services are owned through raw pointers in `AtomicPtr`s (see SAFETY notes)

use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::buffer::BufferService;
use crate::callback::{CallbackService, retire_service};
use crate::error::ServiceError;
use crate::kind::{KIND_COUNT, Kind};

/// How many contexts may exist at once (all tools together).
pub const MAX_CONTEXTS: usize = 8;
/// Bit offset of the buffer-service bits in a [`KIND_MASK`] word.
pub(crate) const BUFFER_SHIFT: u32 = 16;

/// A context's identity (`offtrace_context_id_t`). 0 is never a valid handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct ContextId {
    pub handle: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Stopped,
    Active,
    Destroying,
}

struct Control {
    state: State,
    generation: u64,
}

pub(crate) struct Slot {
    control: Mutex<Control>,
    /// The live handle of this slot (0 = free). Release on create, Acquire in `validate`.
    pub(crate) handle: AtomicU64,
    pub(crate) active: AtomicBool,
    /// The gate every exit delivery passes (the handshake of `active`): cleared (SeqCst) by
    /// destroy after its bounded wait for open pairs, so abandoned pairs' exits reach no one.
    pub(crate) exits: AtomicBool,
    /// Owned `Box<CallbackService>` per kind (null = not configured), tagged in its low bits:
    /// whether the service wants every operation or has a list (`callback::tagged_service`).
    pub(crate) callbacks: [AtomicPtr<CallbackService>; KIND_COUNT],
    /// Owned `Box<BufferService>` per kind, tagged the same way.
    pub(crate) buffers: [AtomicPtr<BufferService>; KIND_COUNT],
}

impl Slot {
    const fn new() -> Self {
        Self {
            control: Mutex::new(Control { state: State::Free, generation: 0 }),
            handle: AtomicU64::new(0),
            active: AtomicBool::new(false),
            exits: AtomicBool::new(false),
            callbacks: [const { AtomicPtr::new(ptr::null_mut()) }; KIND_COUNT],
            buffers: [const { AtomicPtr::new(ptr::null_mut()) }; KIND_COUNT],
        }
    }

    /// The slot's context id as records carry it. Relaxed: only read while the caller is busy
    /// in the context or holds an open pair of it, which keeps the handle from changing.
    #[inline]
    pub(crate) fn id(&self) -> ContextId {
        ContextId { handle: self.handle.load(Ordering::Relaxed) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Control> {
        // A panic while holding the lock leaves `Control` consistent (plain field stores).
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) static SLOTS: [Slot; MAX_CONTEXTS] = [const { Slot::new() }; MAX_CONTEXTS];

/// Per kind: which slots have a started callback service (low bits) or buffer service
/// (bits from [`BUFFER_SHIFT`]). The record path's only gate: one relaxed load.
pub(crate) static KIND_MASK: [AtomicU32; KIND_COUNT] = [const { AtomicU32::new(0) }; KIND_COUNT];

fn slot_of(handle: u64) -> Option<usize> {
    let i = (handle & 0xff) as usize;
    (1..=MAX_CONTEXTS).contains(&i).then(|| i - 1)
}

/// The slot index of a live context.
pub(crate) fn validate(ctx: ContextId) -> Result<usize, ServiceError> {
    let i = slot_of(ctx.handle).ok_or(ServiceError::ContextInvalid)?;
    // Acquire: pairs with the Release in `create_context`.
    if SLOTS[i].handle.load(Ordering::Acquire) == ctx.handle { Ok(i) } else { Err(ServiceError::ContextInvalid) }
}

/// Creates a stopped context with no services.
pub fn create_context() -> Result<ContextId, ServiceError> {
    crate::inflight::init();
    crate::timestamp::init();
    for (i, slot) in SLOTS.iter().enumerate() {
        let mut c = slot.lock();
        if c.state == State::Free {
            c.generation += 1;
            c.state = State::Stopped;
            let handle = (c.generation << 8) | (i as u64 + 1);
            // Relaxed: published by the handle's Release below; no pair can exist before a start.
            slot.exits.store(true, Ordering::Relaxed);
            // Release: the slot's reset state is visible to whoever validates the new handle.
            slot.handle.store(handle, Ordering::Release);
            return Ok(ContextId { handle });
        }
    }
    Err(ServiceError::OutOfResources)
}

/// Locks a live context's slot for a control-plane change.
pub(crate) fn with_live_slot<R>(
    ctx: ContextId,
    f: impl FnOnce(usize, &Slot, bool) -> Result<R, ServiceError>,
) -> Result<R, ServiceError> {
    let i = validate(ctx)?;
    let slot = &SLOTS[i];
    let c = slot.lock();
    if slot.handle.load(Ordering::Relaxed) != ctx.handle || matches!(c.state, State::Free | State::Destroying) {
        return Err(ServiceError::ContextInvalid);
    }
    f(i, slot, c.state == State::Active)
}

/// Sets slot `i`'s bits in the masks of every configured kind. Release: publishes nothing by
/// itself (services are published by their `AtomicPtr`), but keeps the mask after them.
pub(crate) fn set_mask_bits(i: usize, slot: &Slot) {
    for (k, mask) in KIND_MASK.iter().enumerate() {
        if !slot.callbacks[k].load(Ordering::Relaxed).is_null() {
            mask.fetch_or(1 << i, Ordering::Release);
        }
        if !slot.buffers[k].load(Ordering::Relaxed).is_null() {
            mask.fetch_or(1 << (i as u32 + BUFFER_SHIFT), Ordering::Release);
        }
    }
}

fn clear_mask_bits(i: usize) {
    for m in &KIND_MASK {
        // Relaxed: the mask is a hint; `active` (SeqCst) is what the record path trusts.
        m.fetch_and(!((1 << i) | (1 << (i as u32 + BUFFER_SHIFT))), Ordering::Relaxed);
    }
}

/// Starts delivering records for every configured service of the context. Idempotent.
pub fn start_context(ctx: ContextId) -> Result<(), ServiceError> {
    let i = validate(ctx)?;
    let slot = &SLOTS[i];
    let mut c = slot.lock();
    if slot.handle.load(Ordering::Relaxed) != ctx.handle || matches!(c.state, State::Free | State::Destroying) {
        return Err(ServiceError::ContextInvalid);
    }
    if c.state == State::Active {
        return Ok(());
    }
    c.state = State::Active;
    // SeqCst: one side of the handshake of `inflight` (the stopper's store of `false`).
    slot.active.store(true, Ordering::SeqCst);
    set_mask_bits(i, slot);
    Ok(())
}

/// Stops the context: no enter is delivered after this returns, and no callback of the context
/// is running (except the caller's own). Exits of enters already delivered still arrive.
pub fn stop_context(ctx: ContextId) -> Result<(), ServiceError> {
    let i = validate(ctx)?;
    let slot = &SLOTS[i];
    {
        let mut c = slot.lock();
        if slot.handle.load(Ordering::Relaxed) != ctx.handle || matches!(c.state, State::Free | State::Destroying) {
            return Err(ServiceError::ContextInvalid);
        }
        if c.state == State::Active {
            c.state = State::Stopped;
            slot.active.store(false, Ordering::SeqCst);
            clear_mask_bits(i);
        }
    }
    // Waiting outside the lock: a callback of this context may itself call start/stop.
    crate::inflight::quiesce(i, None);
    Ok(())
}

/// Whether the calling thread is inside a callback or buffer delivery of the services (where
/// `destroy_context` and `flush_buffer` return `Busy`).
pub fn in_callback() -> bool {
    crate::inflight::delivering(crate::correlation::thread_state())
}

/// Whether the context is started.
pub fn context_is_active(ctx: ContextId) -> Result<bool, ServiceError> {
    let i = validate(ctx)?;
    Ok(SLOTS[i].active.load(Ordering::Acquire))
}

/// How long [`destroy_context`] waits for other threads' open enter/exit pairs of the context.
pub const DESTROY_PAIR_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Pairs that [`destroy_context`] abandoned since the process started (see there).
pub fn abandoned_pairs() -> u64 {
    ABANDONED.load(Ordering::Relaxed)
}

static ABANDONED: AtomicU64 = AtomicU64::new(0);

/// Stops the context, waits until no callback of it runs, flushes its buffers, and frees the
/// slot. Returns `Busy` inside any callback. Never waits without bound on the application:
/// open enter/exit pairs (an enter delivered, its exit not yet) of other threads are waited for
/// at most [`DESTROY_PAIR_WAIT`], those of the calling thread not at all (a marker range it
/// still holds, a traced call it is inside); then they are *abandoned*: their exits are
/// delivered to no one (neither callback nor buffer record; the tool has seen the enter only),
/// and each thread that still held some is counted in [`abandoned_pairs`]. It waits for
/// callbacks that are running (they are the tool's own code, and return).
pub fn destroy_context(ctx: ContextId) -> Result<(), ServiceError> {
    if crate::inflight::delivering(crate::correlation::thread_state()) {
        return Err(ServiceError::Busy);
    }
    let i = validate(ctx)?;
    let slot = &SLOTS[i];
    {
        let mut c = slot.lock();
        if slot.handle.load(Ordering::Relaxed) != ctx.handle || matches!(c.state, State::Free | State::Destroying) {
            return Err(ServiceError::ContextInvalid);
        }
        c.state = State::Destroying;
        crate::direct::forget(i);
        slot.active.store(false, Ordering::SeqCst);
        clear_mask_bits(i);
    }
    // Exits still arrive while destroy waits for the pairs (bounded), then the gate closes:
    // every exit delivery passes `exits` with the handshake of `active`, so once the second
    // quiesce returns no exit of the context is being delivered or will be.
    let n = crate::inflight::quiesce(i, Some(std::time::Instant::now() + DESTROY_PAIR_WAIT));
    ABANDONED.fetch_add(u64::from(n), Ordering::Relaxed);
    // SeqCst: the stopper's side of the handshake of the exit gate.
    slot.exits.store(false, Ordering::SeqCst);
    crate::inflight::quiesce(i, None);
    crate::buffer::retire_context_buffers(ctx);
    let mut c = slot.lock();
    for k in 0..KIND_COUNT {
        let cb = retire_service(&slot.callbacks[k]);
        if !cb.is_null() {
            // SAFETY:
            // - `cb` came from `Box::into_raw` in `configure_callback_tracing_service`;
            // - the swap removed the only owner; no emitter can still hold it: `active` and
            //   `exits` are false, the second `quiesce` saw no thread busy in the context after
            //   that, and an emitter that marks itself busy later sees both false (enters and
            //   instants check `active`, exits `exits`) and does not load it.
            drop(unsafe { Box::from_raw(cb) });
        }
        let bs = retire_service(&slot.buffers[k]);
        if !bs.is_null() {
            // SAFETY: as above, for `configure_buffer_tracing_service`'s box.
            drop(unsafe { Box::from_raw(bs) });
        }
    }
    slot.handle.store(0, Ordering::Release);
    c.state = State::Free;
    Ok(())
}

/// Which kinds the context has a callback (`.0`) or buffer (`.1`) service for.
pub fn configured_kinds(ctx: ContextId) -> Result<Vec<(Kind, bool, bool)>, ServiceError> {
    let i = validate(ctx)?;
    let slot = &SLOTS[i];
    Ok(Kind::ALL
        .iter()
        .map(|&k| {
            (
                k,
                !slot.callbacks[k.index()].load(Ordering::Acquire).is_null(),
                !slot.buffers[k.index()].load(Ordering::Acquire).is_null(),
            )
        })
        .collect())
}
