//! The recorder as a tracing-services client: one context with a callback service for every
//! kind, whose callback turns the record into a ring entry (`entry.rs`).
//!
//! API calls become one entry at their exit (the enter's timestamp travels in the call's user
//! data), so a call costs one ring entry and one trace record. Strings in payloads (kernel and
//! code object names, markers, devices, counters) are interned here, on the emitting thread,
//! while the payload is valid. Kernel dispatches get their allocation properties here too,
//! matched against the live allocation table at launch. Each entry is written once, in place
//! among the ring's slots where they are free in one piece (`Local::push_with`, `recorder.rs`).

#![allow(unsafe_code)] // reads payloads through the callback record's pointer

use std::ffi::{CStr, c_char, c_void};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use offtrace_core::{
    ApiCallPayload, CallbackRecord, CodeObjectPayload, ContextId, CounterPayload, DevicePayload, DirectCall,
    DirectRecord, DirectSink, DirectThreadWord, KernelDispatchPayload, Kind, MarkerPayload, MemoryAllocPayload,
    MemoryCopyPayload, MemoryFillPayload, Payload, Phase, QueuePayload, ServiceError, SyncPayload, TaskGraphPayload,
    UserData, configure_callback_tracing_service, create_context, for_each_kernel_allocation, set_direct_sink,
    start_context, timestamp_ns,
};

use offtrace_format::StrId;

use crate::entry::{HEAD_WORDS, MAX_ALLOCATIONS, MAX_ENTRY_WORDS, TAG_RAW, api_body, api_body_len, header};

/// Words of the longest API call entry: the head, start, result, external, and the arguments.
const API_WORDS: usize = HEAD_WORDS + 3 + offtrace_core::MAX_ARGS;
use crate::recorder::{Inner, Local, with_local, with_local_at};

/// Subscribes the recorder to the services: a started context with a callback service for every
/// kind (the raw `XPTI` kind too when `raw` is set: the backend installs its [`crate::RawLayer`]
/// with [`crate::set_raw_layer`]). Records reach the trace while a recording runs.
pub fn subscribe(raw: bool) -> Result<ContextId, ServiceError> {
    subscribe_with(raw, true)
}

/// [`subscribe`], choosing whether the recorder also takes the services' direct path
/// (`offtrace_core::set_direct_sink`: while it is the only consumer of a kind, that kind's
/// records reach it as plain Rust calls instead of callback deliveries). The records are the
/// same either way; `direct = false` is for comparing the two paths.
pub fn subscribe_with(raw: bool, direct: bool) -> Result<ContextId, ServiceError> {
    let ctx = create_context()?;
    for kind in Kind::ALL {
        if kind == Kind::Xpti && !raw {
            continue;
        }
        // SAFETY: `on_record` accepts any record of any kind from any thread, never unwinds
        // (catch_unwind inside) and uses no callback data.
        unsafe { configure_callback_tracing_service(ctx, kind, None, on_record, std::ptr::null_mut())? };
    }
    start_context(ctx)?;
    if direct {
        set_direct_sink(ctx, &DIRECT_SINK)?;
    }
    Ok(ctx)
}

/// The recorder's entry points on the direct path: the same entries as [`on_record`] builds.
static DIRECT_SINK: DirectSink = DirectSink { api_call: direct_api_call, record: direct_record };

fn direct_api_call(call: &DirectCall, p: &ApiCallPayload, thread: &DirectThreadWord) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_local_at(thread, |inner, local| {
            let (start, end) = (call.start, call.end);
            api_call(inner, local, call.kind, call.operation, call.correlation, call.external, start, end, p)
        });
    }));
}

fn direct_record(record: &DirectRecord, payload: &Payload<'_>, thread: &DirectThreadWord) {
    let ptr = payload.as_ptr();
    if ptr.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        with_local_at(thread, |inner, local| {
            let head = Head {
                op: record.operation,
                phase: record.phase as u32,
                correlation: record.correlation,
                interned: record.interned,
            };
            // SAFETY: the services pass `kind`'s own payload (checked by `direct::instant`),
            // valid during the call.
            unsafe { typed(inner, local, record.kind, &head, record.ts, ptr) }
        });
    }));
}

/// The callback of every kind.
///
/// # Safety
///
/// As the services guarantee: `record.payload` is null or points at the payload struct of
/// `record.kind`, valid during the call; `user` is the call's user data slot.
unsafe extern "C" fn on_record(record: CallbackRecord, user: *mut UserData, _data: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { record_one(&record, user) }
    }));
}

/// A NUL-terminated string of a payload, as bytes (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string valid during the call.
unsafe fn c_bytes<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        b""
    } else {
        // SAFETY: forwarded.
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// # Safety
/// As for [`on_record`].
unsafe fn record_one(record: &CallbackRecord, user: *mut UserData) {
    let Some(kind) = Kind::from_u32(record.kind) else { return };
    let phase = record.phase;
    if kind.is_api() {
        if phase == Phase::Enter as u32 {
            if !user.is_null() {
                // SAFETY: `user` is this call's slot, exclusively ours during the callback.
                unsafe { (*user).value = timestamp_ns() };
            }
            return;
        }
        // SAFETY: as above.
        let start = if user.is_null() { 0 } else { unsafe { (*user).value } };
        // SAFETY: an API kind's payload is an `ApiCallPayload` (or null).
        let Some(p) = (unsafe { record.payload.cast::<ApiCallPayload>().as_ref() }) else { return };
        let (op, correlation, external) =
            (record.operation, record.correlation_id.internal, record.correlation_id.external.value);
        with_local(|inner, local| api_call(inner, local, kind, op, correlation, external, start, timestamp_ns(), p));
        return;
    }
    let payload = record.payload;
    if payload.is_null() {
        return;
    }
    let (op, correlation) = (record.operation, record.correlation_id.internal);
    let head = Head { op, phase, correlation, interned: false };
    with_local(|inner, local| {
        // SAFETY: forwarded: `payload` points at `kind`'s payload struct.
        unsafe { typed(inner, local, kind, &head, timestamp_ns(), payload) }
    });
}

fn head(words: &mut [MaybeUninit<u64>], correlation: u64, ts: u64) {
    words[1].write(ts);
    words[2].write(correlation);
}

/// An API call's one entry, at its exit (`start`, `end`: the enter's and the exit's times).
#[allow(clippy::too_many_arguments, reason = "one record's fields, from either path")]
#[inline]
fn api_call(
    inner: &Inner,
    local: &mut Local,
    kind: Kind,
    op: u32,
    correlation: u64,
    external: u64,
    start: u64,
    end: u64,
    p: &ApiCallPayload,
) {
    let result = (p.has_result != 0).then_some(p.result);
    let n = (p.arg_count as usize).min(p.args.len());
    // Written in place in the ring (room for exactly this entry): no array to zero and copy.
    let len = HEAD_WORDS + api_body_len(start, end, external, n);
    local.push_with::<API_WORDS>(inner, len, |w| {
        head(w, correlation, end);
        let (flags, body) = api_body(&mut w[HEAD_WORDS..], start, end, result, external, &p.args[..n]);
        let len = HEAD_WORDS + body;
        w[0].write(header(len, kind as u8, flags, op));
        len
    });
}

/// The entry of a record other than an API call, at `ts`.
///
/// # Safety
/// `payload` points at `kind`'s payload struct, valid during the call.
unsafe fn typed(inner: &Inner, local: &mut Local, kind: Kind, record: &Head, ts: u64, payload: *const c_void) {
    let phase = record.phase;
    // The room an entry reserves in the ring (and its stack array at the wrap): kernel launches
    // need the large one (allocation properties), raw entries their own; everything else fits
    // a small one, kernel completions included (they carry no allocation properties). A small
    // room is free in one piece at more positions of a lap and more often when the ring fills
    // (otherwise the entry takes the stack array's slower path).
    if kind == Kind::KernelDispatch && phase != Phase::Complete as u32 {
        // The allocation properties are at most one per argument and one per implicit
        // allocation: most launches (CUDA's included) fit a 40-word entry, not the 128 of the
        // largest.
        // SAFETY: `payload` is a `KernelDispatchPayload` for this kind (the caller's contract).
        let p = unsafe { &*payload.cast::<KernelDispatchPayload>() };
        let most = (p.kernel_arg_count as usize).min(offtrace_core::MAX_KERNEL_ARGS)
            + if p.implicit_allocations.is_null() { 0 } else { p.implicit_allocation_count as usize };
        if KERNEL_COMPLETE_WORDS + 3 * most <= LAUNCH_WORDS {
            // SAFETY: forwarded.
            unsafe { typed_in::<LAUNCH_WORDS>(inner, local, kind, record, ts, payload) }
        } else {
            // SAFETY: forwarded.
            unsafe { typed_in::<MAX_ENTRY_WORDS>(inner, local, kind, record, ts, payload) }
        }
    } else if kind == Kind::KernelDispatch {
        // SAFETY: forwarded.
        unsafe { typed_in::<KERNEL_COMPLETE_WORDS>(inner, local, kind, record, ts, payload) }
    } else if kind == Kind::Xpti {
        // SAFETY: forwarded.
        unsafe { typed_raw(inner, local, record, ts, payload) }
    } else {
        // SAFETY: forwarded.
        unsafe { typed_in::<SMALL_WORDS>(inner, local, kind, record, ts, payload) }
    }
}

/// Words of a kernel completion's entry: the head and the fixed part (no allocation properties).
const KERNEL_COMPLETE_WORDS: usize = HEAD_WORDS + crate::entry::KERNEL_FIXED;
/// A launch with up to 8 allocation properties.
const LAUNCH_WORDS: usize = KERNEL_COMPLETE_WORDS + 3 * 8;
/// Words of a raw entry.
const RAW_WORDS: usize = HEAD_WORDS + crate::recorder::RAW_BODY_WORDS;
/// Words of the entries of the kinds other than kernel dispatches and raw records.
const SMALL_WORDS: usize = HEAD_WORDS + 8;

/// A raw entry: the backend's [`crate::RawLayer`] encodes the payload into a body of its own.
///
/// # Safety
/// As [`typed`].
unsafe fn typed_raw(inner: &Inner, local: &mut Local, record: &Head, ts: u64, payload: *const c_void) {
    let Some(layer) = inner.raw.get() else { return };
    let mut w = [0u64; RAW_WORDS];
    // SAFETY: forwarded: the services pass the raw kind's payload, valid during the call.
    let body = match unsafe { layer.encode(record.op, payload, &mut w[HEAD_WORDS..]) } {
        Some(n) if n <= RAW_WORDS - HEAD_WORDS => n,
        _ => return,
    };
    w[1] = ts;
    w[2] = record.correlation;
    let len = HEAD_WORDS + body;
    w[0] = header(len, TAG_RAW, record.phase as u8, record.op);
    local.push(inner, &w[..len]);
}

/// The entry of a typed record in at most `N` words, written in place ([`Local::push_with`]).
///
/// # Safety
/// As [`typed`].
#[inline(always)]
unsafe fn typed_in<const N: usize>(
    inner: &Inner,
    local: &mut Local,
    kind: Kind,
    record: &Head,
    ts: u64,
    payload: *const c_void,
) {
    // The strings first: interning uses `local`, whose ring holds the entry's room below.
    // SAFETY (every arm): the services pass `kind`'s own payload struct; its strings are valid
    // during the callback.
    let (s1, s2) = unsafe {
        match kind {
            Kind::KernelDispatch => {
                let name = (*payload.cast::<KernelDispatchPayload>()).kernel_name;
                // A name the backend interned for the process's lifetime: known by its address
                // (no `strlen`, no comparison of its bytes).
                let id = if record.interned {
                    local.interned_string(inner, name)
                } else {
                    local.string(inner, c_bytes(name))
                };
                (id, StrId(0))
            }
            Kind::Device => (local.string(inner, c_bytes((*payload.cast::<DevicePayload>()).name)), StrId(0)),
            Kind::CodeObject => (local.string(inner, c_bytes((*payload.cast::<CodeObjectPayload>()).name)), StrId(0)),
            Kind::TaskGraph => (local.string(inner, c_bytes((*payload.cast::<TaskGraphPayload>()).name)), StrId(0)),
            Kind::Marker => (local.string(inner, c_bytes((*payload.cast::<MarkerPayload>()).message)), StrId(0)),
            Kind::Counter => {
                let p = &*payload.cast::<CounterPayload>();
                (local.string(inner, c_bytes(p.name)), local.string(inner, c_bytes(p.unit)))
            }
            Kind::Xpti | Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi => return,
            _ => (StrId(0), StrId(0)),
        }
    };
    let (s1, s2) = (u64::from(s1.0), u64::from(s2.0));
    local.push_with::<N>(inner, N, |w| {
        head(w, record.correlation, ts);
        let mut own_ts = 0;
        let b = &mut w[HEAD_WORDS..];
        // SAFETY (every arm): as above.
        let body = unsafe {
            match kind {
                Kind::KernelDispatch => {
                    let p = &*payload.cast::<KernelDispatchPayload>();
                    let fixed = [
                        p.queue,
                        p.device,
                        s1,
                        p.kernel,
                        u64::from(p.work_dim),
                        p.global_size[0],
                        p.global_size[1],
                        p.global_size[2],
                        p.local_size[0],
                        p.local_size[1],
                        p.local_size[2],
                        p.device_start,
                        p.device_end,
                    ];
                    let mut n = put(b, &fixed);
                    // Allocation properties at launch only: a completion repeats the launch's.
                    if record.phase != Phase::Complete as u32 {
                        // Each written straight into the entry, as many as fit both the entry
                        // and `MAX_ALLOCATIONS`; the rest are cut.
                        let end = (n + 3 * MAX_ALLOCATIONS).min(b.len());
                        for_each_kernel_allocation(p, |a| {
                            if n + 3 <= end {
                                b[n].write(a.base);
                                b[n + 1].write(a.size);
                                b[n + 2].write(u64::from(a.arg_index as u32) | ((a.memory_type as u64) << 32));
                                n += 3;
                            }
                        });
                    }
                    n
                }
                Kind::MemoryCopy => {
                    let p = &*payload.cast::<MemoryCopyPayload>();
                    let d = p.direction as u64 | ((p.src_type as u64) << 8) | ((p.dst_type as u64) << 16);
                    put(b, &[p.queue, p.device, p.size, d, p.device_start, p.device_end])
                }
                Kind::MemoryFill => {
                    let p = &*payload.cast::<MemoryFillPayload>();
                    put(b, &[p.queue, p.device, p.size, p.device_start, p.device_end])
                }
                Kind::Sync => {
                    let p = &*payload.cast::<SyncPayload>();
                    put(b, &[p.object, u64::from(p.event_count), p.queue, p.device, p.device_start, p.device_end])
                }
                Kind::Queue => {
                    let p = &*payload.cast::<QueuePayload>();
                    put(b, &[p.queue, p.device, p.context, p.flags])
                }
                Kind::Device => {
                    let p = &*payload.cast::<DevicePayload>();
                    put(b, &[p.handle, p.parent, s1, p.device_type as u64])
                }
                Kind::MemoryAlloc => {
                    let p = &*payload.cast::<MemoryAllocPayload>();
                    put(b, &[p.ptr, p.size, p.memory_type as u64, p.device])
                }
                Kind::CodeObject => {
                    let p = &*payload.cast::<CodeObjectPayload>();
                    put(b, &[p.handle, p.program, s1, p.binary_size])
                }
                Kind::TaskGraph => {
                    let p = &*payload.cast::<TaskGraphPayload>();
                    put(b, &[p.node, p.source, p.target, s1, p.event, p.queue])
                }
                Kind::Marker => {
                    let p = &*payload.cast::<MarkerPayload>();
                    put(b, &[s1, p.range_id])
                }
                Kind::Counter => {
                    let p = &*payload.cast::<CounterPayload>();
                    // A sample at its own time (trace clock), e.g. a GPU sample's end: the
                    // entry's ts; the format's ts delta is signed, so it may precede the
                    // thread's last one.
                    if record.op == offtrace_core::counter_op::SAMPLE {
                        own_ts = p.ts;
                    }
                    put(b, &[p.counter, p.device, p.value, s1, s2])
                }
                // Returned above.
                Kind::Xpti | Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi => 0,
            }
        };
        if own_ts != 0 {
            w[1].write(own_ts);
        }
        let len = HEAD_WORDS + body;
        w[0].write(header(len, kind as u8, record.phase as u8, record.op));
        len
    });
}

/// The fields of a record's head that [`typed`] writes, whichever path delivered it.
struct Head {
    op: u32,
    phase: u32,
    correlation: u64,
    /// The payload's strings are interned for the process's lifetime (`DirectRecord::interned`).
    interned: bool,
}

fn put(b: &mut [MaybeUninit<u64>], v: &[u64]) -> usize {
    b[..v.len()].write_copy_of_slice(v);
    v.len()
}
