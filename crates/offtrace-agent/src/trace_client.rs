//! The recorder of `offtrace record` as a client of the tracing services.
//!
//! There is one path from the runtime to every consumer: the trampolines hand each XPTI
//! notification to the services (`services_bridge::on_notification`), as a raw `XPTI` record and
//! mapped to the typed kinds; the recorder subscribes like any tool. At the start of recording
//! it creates its own context with two callback services:
//!
//! - `XPTI` (every operation): each notification is encoded into the calling thread's ring
//!   (`recorder::record`), exactly as the runtime sent it, so the trace keeps every stream,
//!   trace point type, event, metadata and user data;
//! - `KERNEL_DISPATCH`: each dispatch is written as a `KernelDispatch` record with its kernel
//!   allocation properties (the kernel's arguments matched against the live allocation table
//!   at launch time), which `offtrace report` shows per kernel.
//!
//! Tools loaded with `--tool` get their own contexts next to it. The recorder's callbacks run
//! with the services' re-entrancy guard set: runtime calls a tool makes from inside its own
//! callback are not delivered to any context, the recorder's included.

#![allow(unsafe_code)] // `extern "C"` callbacks reading the payloads the services pass

use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use offtrace::XptiPayload;
use offtrace_core::{
    CallbackRecord, ContextId, KernelDispatchPayload, Kind, UserData, configure_callback_tracing_service,
    create_context, kernel_allocation_properties, start_context,
};
use offtrace_format::Record;
use offtrace_format::{KernelAllocation, KernelDispatch, MemoryType};

use crate::decode::{Raw, StreamKind};
use crate::recorder;

/// Creates and starts the recorder's context. Cold; called once when recording starts.
/// Returns the context, or the reason it could not be made (then nothing is recorded).
#[cold]
pub fn subscribe() -> Result<ContextId, offtrace_core::ServiceError> {
    let ctx = create_context()?;
    // SAFETY: both callbacks accept any record of their kind, from any thread, never unwind
    // (catch_unwind inside), and use no callback data.
    unsafe {
        configure_callback_tracing_service(ctx, Kind::Xpti, None, on_xpti, std::ptr::null_mut())?;
        configure_callback_tracing_service(ctx, Kind::KernelDispatch, None, on_kernel_dispatch, std::ptr::null_mut())?;
    }
    start_context(ctx)?;
    // The typed kinds come from the bridge: switch it on for KERNEL_DISPATCH.
    crate::services_bridge::set_active(true);
    Ok(ctx)
}

/// `XPTI` → the recorder's ring.
unsafe extern "C" fn on_xpti(record: CallbackRecord, _user: *mut UserData, _data: *mut c_void) {
    // SAFETY: an `XPTI` record's payload is an `XptiPayload` (or null), valid during the callback.
    let p = record.payload.cast::<XptiPayload>();
    if p.is_null() {
        return;
    }
    // SAFETY: `p` points at a live `XptiPayload` (see above). Its fields are read where they
    // were written (8-byte loads of 8-byte stores, no store-forwarding stall), not copied.
    let (class, stream_id, raw) = unsafe { ((*p).stream_class, (*p).stream_id, Raw::in_xpti_payload(p)) };
    let Some(kind) = StreamKind::from_class(class) else { return };
    let _ = catch_unwind(AssertUnwindSafe(|| recorder::record(kind, stream_id as u8, raw)));
}

/// `KERNEL_DISPATCH` → a `KernelDispatch` record with the allocation properties.
unsafe extern "C" fn on_kernel_dispatch(record: CallbackRecord, _user: *mut UserData, _data: *mut c_void) {
    // SAFETY: a `KERNEL_DISPATCH` record's payload is a `KernelDispatchPayload` (or null).
    let Some(p) = (unsafe { record.payload.cast::<KernelDispatchPayload>().as_ref() }) else { return };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the payload was delivered in this callback (its implicit list is live).
        unsafe { write_dispatch(&record, p) }
    }));
}

/// # Safety
/// `p` is the payload of the live callback that delivered `record`.
unsafe fn write_dispatch(record: &CallbackRecord, p: &KernelDispatchPayload) {
    if !recorder::is_recording() {
        return;
    }
    let Some(rec) = recorder::get() else { return };
    let ts = rec.clock.now();
    // SAFETY: forwarded.
    let props = unsafe { kernel_allocation_properties(p) };
    let name: &[u8] = if p.kernel_name.is_null() {
        b""
    } else {
        // SAFETY: the payload's name is NUL-terminated and valid during the callback.
        unsafe { CStr::from_ptr(p.kernel_name) }.to_bytes()
    };
    let kernel = rec.interner.string(name);
    let allocations = props
        .iter()
        .map(|a| KernelAllocation {
            base: a.base,
            size: a.size,
            arg_index: a.arg_index,
            memory_type: match a.memory_type {
                offtrace_core::MemoryType::Host => MemoryType::Host,
                offtrace_core::MemoryType::Device => MemoryType::Device,
                offtrace_core::MemoryType::Shared => MemoryType::Shared,
                offtrace_core::MemoryType::Unknown => MemoryType::Unknown,
            },
        })
        .collect();
    rec.interner.push(Record::KernelDispatch(KernelDispatch {
        tid: record.thread_id as u32,
        ts,
        correlation: record.correlation_id.internal,
        ur_instance: crate::services_bridge::current_ur_instance(),
        kernel,
        queue: p.queue,
        kernel_handle: p.kernel,
        work_dim: p.work_dim,
        global_size: p.global_size,
        local_size: p.local_size,
        allocations,
    }));
}
