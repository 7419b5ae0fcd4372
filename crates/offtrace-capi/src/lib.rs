//! The C API of offtrace's tracing services (`include/offtrace/offtrace.h`).
//!
//! Shape and names follow rocprofiler-sdk with the `offtrace_` prefix: contexts, callback and
//! buffer tracing services, kind/operation queries and iteration, argument iteration, external
//! correlation ids, timestamps, kernel allocation properties, the marker API, and tool loading
//! ([`tools`]). Every exported function null-checks its pointers, runs its body under
//! `catch_unwind` (a panic becomes `OFFTRACE_STATUS_ERROR_INTERNAL`; nothing unwinds into C), and
//! returns an `offtrace_status_t`.
//!
//! Strings handed to C (kind, operation and argument names) live in a process-lifetime arena:
//! they stay valid until the process exits.
//!
//! The prototype section of the header is generated from the `extern "C"` declarations of this
//! crate by `tests/header.rs` (run with `OFFTRACE_BLESS=1` to rewrite it); CI fails when the
//! checked-in header is stale. The type section is hand-written and verified by a C program
//! that prints every struct's size and field offsets (`tests/c_api.rs`).
//!
//! ```c
//! offtrace_context_id_t ctx;
//! offtrace_create_context(&ctx);
//! offtrace_configure_callback_tracing_service(ctx, OFFTRACE_TRACING_KIND_UR_API, NULL, 0, on_call, NULL);
//! offtrace_start_context(ctx);
//! ```

#![allow(unsafe_code)] // the C ABI: raw pointers from C callers, `extern "C"` callbacks
#![allow(non_camel_case_types)] // C type names, so the header generator maps them one to one

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use offtrace_core::{
    AllocationProperties, BufferCallbackFn, BufferId, BufferPolicy, BufferRecordHeader, CallbackFn, CallbackRecord,
    ContextId, Kind, ServiceError, UserData,
};

pub mod metrics;
pub mod sysman;
pub mod testing;
pub mod tools;
mod xpti_payload;
pub use xpti_payload::XptiPayload;

pub type offtrace_status_t = i32;
pub type offtrace_tracing_kind_t = u32;
pub type offtrace_tracing_operation_t = u32;
pub type offtrace_buffer_policy_t = u32;
pub type offtrace_timestamp_t = u64;
pub type offtrace_thread_id_t = u64;
pub type offtrace_context_id_t = ContextId;
pub type offtrace_buffer_id_t = BufferId;
pub type offtrace_user_data_t = UserData;
pub type offtrace_callback_tracing_record_t = CallbackRecord;
pub type offtrace_buffer_tracing_record_t = BufferRecordHeader;
pub type offtrace_kernel_allocation_properties_t = AllocationProperties;
pub type offtrace_callback_tracing_cb_t = CallbackFn;
pub type offtrace_buffer_tracing_cb_t = BufferCallbackFn;
/// `int (*)(offtrace_tracing_kind_t kind, void* data)`; nonzero stops the iteration.
pub type offtrace_tracing_kind_cb_t = unsafe extern "C" fn(kind: offtrace_tracing_kind_t, data: *mut c_void) -> c_int;
/// `int (*)(kind, operation, data)`; nonzero stops the iteration.
pub type offtrace_tracing_kind_operation_cb_t = unsafe extern "C" fn(
    kind: offtrace_tracing_kind_t,
    operation: offtrace_tracing_operation_t,
    data: *mut c_void,
) -> c_int;
/// rocprofiler's argument callback; nonzero stops the iteration.
pub type offtrace_callback_tracing_operation_args_cb_t = unsafe extern "C" fn(
    kind: offtrace_tracing_kind_t,
    operation: offtrace_tracing_operation_t,
    arg_number: u32,
    arg_value_addr: *const c_void,
    arg_indirection_count: i32,
    arg_type: *const c_char,
    arg_name: *const c_char,
    arg_value_str: *const c_char,
    arg_dereference_count: i32,
    data: *mut c_void,
) -> c_int;

pub const OFFTRACE_STATUS_SUCCESS: offtrace_status_t = 0;
/// A tool library could not be loaded or configured (see [`tools`]).
pub const OFFTRACE_STATUS_ERROR_TOOL_LOAD: offtrace_status_t = 13;
/// A panic was caught inside offtrace (a bug): the call did nothing reliable.
pub const OFFTRACE_STATUS_ERROR_INTERNAL: offtrace_status_t = 14;

pub const OFFTRACE_VERSION_MAJOR: u32 = 0;
pub const OFFTRACE_VERSION_MINOR: u32 = 2;
pub const OFFTRACE_VERSION_PATCH: u32 = 0;

thread_local! {
    /// How deep the calling thread is in [`guard`]s. Const-initialised without a destructor,
    /// so it is readable at any point of the thread's life (teardown included).
    static IN_GUARD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Makes panics inside [`guard`] silent: the default hook would print the message (and a
/// backtrace under `RUST_BACKTRACE`) on the application's stderr. Panics elsewhere still go
/// to the previous hook.
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_GUARD.with(|g| g.get()) == 0 {
                previous(info);
            }
        }));
    });
}

/// Runs `f` with panics caught and silent (see [`install_quiet_hook`]).
pub(crate) fn quiet<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    // Not from a panicking thread: `set_hook` itself would panic there.
    if !std::thread::panicking() {
        install_quiet_hook();
    }
    IN_GUARD.with(|g| g.set(g.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    IN_GUARD.with(|g| g.set(g.get().saturating_sub(1)));
    r
}

/// Runs an exported function's body: maps errors to codes and panics to `ERROR_INTERNAL`
/// (nothing printed: [`quiet`]).
fn guard(f: impl FnOnce() -> Result<(), ServiceError>) -> offtrace_status_t {
    match quiet(f) {
        Ok(Ok(())) => OFFTRACE_STATUS_SUCCESS,
        Ok(Err(e)) => e.code(),
        Err(_) => OFFTRACE_STATUS_ERROR_INTERNAL,
    }
}

fn nonnull<T>(p: *const T) -> Result<(), ServiceError> {
    if p.is_null() { Err(ServiceError::InvalidArgument) } else { Ok(()) }
}

fn kind_of(v: offtrace_tracing_kind_t) -> Result<Kind, ServiceError> {
    Kind::from_u32(v).ok_or(ServiceError::KindNotFound)
}

/// A NUL-terminated copy of a `'static` string, kept for the life of the process.
pub(crate) fn arena_cstr(s: &'static str) -> &'static CStr {
    static ARENA: Mutex<Option<HashMap<(usize, usize), &'static CStr>>> = Mutex::new(None);
    let mut a = ARENA.lock().unwrap_or_else(|e| e.into_inner());
    a.get_or_insert_with(HashMap::new).entry((s.as_ptr() as usize, s.len())).or_insert_with(|| {
        let c = CString::new(s.replace('\0', "")).unwrap_or_default();
        Box::leak(c.into_boxed_c_str())
    })
}

/// # Safety
/// `ops` must be null or point at `count` readable operation ids.
unsafe fn ops_slice<'a>(
    ops: *const offtrace_tracing_operation_t,
    count: usize,
) -> Result<Option<&'a [u32]>, ServiceError> {
    if count == 0 {
        return Ok(None);
    }
    nonnull(ops)?;
    // SAFETY: non-null (checked) and the caller guarantees `count` readable entries.
    Ok(Some(unsafe { std::slice::from_raw_parts(ops, count) }))
}

/// The library's version.
///
/// # Safety
/// Each pointer must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_get_version(major: *mut u32, minor: *mut u32, patch: *mut u32) -> offtrace_status_t {
    guard(|| {
        // SAFETY: each pointer is null (skipped) or writable per the contract.
        unsafe {
            if !major.is_null() {
                *major = OFFTRACE_VERSION_MAJOR;
            }
            if !minor.is_null() {
                *minor = OFFTRACE_VERSION_MINOR;
            }
            if !patch.is_null() {
                *patch = OFFTRACE_VERSION_PATCH;
            }
        }
        Ok(())
    })
}

/// A static description of a status code ("unknown status" for values it does not know).
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_get_status_string(status: offtrace_status_t) -> *const c_char {
    let s: &'static CStr = match status {
        0 => c"OFFTRACE_STATUS_SUCCESS: success",
        1 => c"OFFTRACE_STATUS_ERROR: unspecified error",
        2 => c"OFFTRACE_STATUS_ERROR_CONTEXT_INVALID: the context id does not name a live context",
        3 => c"OFFTRACE_STATUS_ERROR_KIND_NOT_FOUND: not a known tracing kind",
        4 => c"OFFTRACE_STATUS_ERROR_OPERATION_NOT_FOUND: not an operation of the kind",
        5 => c"OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED: a service of this kind is already configured in this context",
        6 => c"OFFTRACE_STATUS_ERROR_BUFFER_NOT_FOUND: the buffer id does not name a live buffer of this context",
        7 => c"OFFTRACE_STATUS_ERROR_INVALID_ARGUMENT: an argument is null or out of range",
        8 => c"OFFTRACE_STATUS_ERROR_OUT_OF_RESOURCES: all context slots are in use",
        9 => c"OFFTRACE_STATUS_ERROR_CONTEXT_ACTIVE: the context is started",
        10 => c"OFFTRACE_STATUS_ERROR_BUSY: not allowed from inside a callback",
        11 => c"OFFTRACE_STATUS_ERROR_NOT_AVAILABLE: no operation table or argument descriptors for this kind",
        12 => c"OFFTRACE_STATUS_ERROR_STACK_EMPTY: the external correlation id stack is empty",
        13 => c"OFFTRACE_STATUS_ERROR_TOOL_LOAD: a tool library could not be loaded or configured",
        14 => c"OFFTRACE_STATUS_ERROR_INTERNAL: a bug in offtrace (panic caught)",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// Creates a stopped context with no services (at most 8 exist at once).
///
/// # Safety
/// `context_id` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_create_context(context_id: *mut offtrace_context_id_t) -> offtrace_status_t {
    guard(|| {
        nonnull(context_id)?;
        let c = offtrace_core::create_context()?;
        tools::note_context(c);
        // SAFETY: non-null (checked) and writable per the contract.
        unsafe { *context_id = c };
        Ok(())
    })
}

/// Starts delivering records for the context's services. Idempotent.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_start_context(context_id: offtrace_context_id_t) -> offtrace_status_t {
    guard(|| offtrace_core::start_context(context_id))
}

/// Stops the context: when it returns, no enter is delivered any more and no callback of the
/// context runs (except the caller's own); exits of enters already delivered still arrive.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_stop_context(context_id: offtrace_context_id_t) -> offtrace_status_t {
    guard(|| offtrace_core::stop_context(context_id))
}

/// Stops the context, waits for its callbacks in flight and its open enter/exit pairs, flushes
/// and releases its buffers, and frees it. `OFFTRACE_STATUS_ERROR_BUSY` inside a callback.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_destroy_context(context_id: offtrace_context_id_t) -> offtrace_status_t {
    guard(|| offtrace_core::destroy_context(context_id))
}

/// Writes 1 to `status` when the context is started, else 0.
///
/// # Safety
/// `status` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_context_is_active(
    context_id: offtrace_context_id_t,
    status: *mut c_int,
) -> offtrace_status_t {
    guard(|| {
        nonnull(status)?;
        let a = offtrace_core::context_is_active(context_id)?;
        // SAFETY: non-null (checked), writable per the contract.
        unsafe { *status = c_int::from(a) };
        Ok(())
    })
}

/// Calls `callback(record, user_data, callback_args)` on the emitting thread for the kind's
/// operations in `operations[0..operations_count]` (NULL/0 = all). A second configuration of the
/// same kind in the context fails with `OFFTRACE_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED`.
///
/// # Safety
/// `operations` must be null or hold `operations_count` ids; `callback` must be callable from
/// any thread with `callback_args` until the context is destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_configure_callback_tracing_service(
    context_id: offtrace_context_id_t,
    kind: offtrace_tracing_kind_t,
    operations: *const offtrace_tracing_operation_t,
    operations_count: usize,
    callback: Option<offtrace_callback_tracing_cb_t>,
    callback_args: *mut c_void,
) -> offtrace_status_t {
    guard(|| {
        let callback = callback.ok_or(ServiceError::InvalidArgument)?;
        let kind = kind_of(kind)?;
        // SAFETY: forwarded from the contract.
        let ops = unsafe { ops_slice(operations, operations_count)? };
        // SAFETY: forwarded from the contract (callable from any thread until destroy).
        unsafe { offtrace_core::configure_callback_tracing_service(context_id, kind, ops, callback, callback_args) }
    })
}

/// Creates a buffer in the context. Each producing thread stages up to `size` bytes of typed
/// records, rounded up to a power of two (`size` at least 64, at most 1 GiB; the staging is at
/// most twice `size`; with `OFFTRACE_BUFFER_RECORD_MAX_SIZE` or more
/// every record fits, a larger record is dropped and counted) and, when its records reach
/// `watermark` bytes, hands them to offtrace's delivery thread (`offtrace-buffer`) and goes
/// on: `callback(context, buffer, records, count, data, drop_count)` runs on that thread, never
/// concurrently with another delivery of the buffer, never on an application thread. The
/// callback for a watermark comes at most 1 ms (the delivery thread's poll period) after it was
/// reached, later only behind deliveries queued before it or while that thread waits for a CPU.
/// `offtrace_flush_buffer` delivers every thread's staged records. `policy`:
/// `OFFTRACE_BUFFER_POLICY_LOSSLESS` (never drops; a producing thread whose staging is full
/// waits until the delivery thread has made room) or `OFFTRACE_BUFFER_POLICY_DISCARD` (never
/// blocks; drops and counts a record that finds the staging full).
///
/// # Safety
/// `buffer_id` must be null or writable; `callback` must be callable from any thread with `data`
/// until the context is destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_create_buffer(
    context_id: offtrace_context_id_t,
    size: usize,
    watermark: usize,
    policy: offtrace_buffer_policy_t,
    callback: Option<offtrace_buffer_tracing_cb_t>,
    data: *mut c_void,
    buffer_id: *mut offtrace_buffer_id_t,
) -> offtrace_status_t {
    guard(|| {
        nonnull(buffer_id)?;
        let callback = callback.ok_or(ServiceError::InvalidArgument)?;
        let policy = BufferPolicy::from_u32(policy).ok_or(ServiceError::InvalidArgument)?;
        // SAFETY: forwarded from the contract.
        let id = unsafe { offtrace_core::create_buffer(context_id, size, watermark, policy, callback, data)? };
        // SAFETY: non-null (checked), writable per the contract.
        unsafe { *buffer_id = id };
        Ok(())
    })
}

/// Sends records of the kind (operations as for callback tracing) to `buffer_id`, a buffer of
/// the same context. A second configuration of the kind fails.
///
/// # Safety
/// `operations` must be null or hold `operations_count` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_configure_buffer_tracing_service(
    context_id: offtrace_context_id_t,
    kind: offtrace_tracing_kind_t,
    operations: *const offtrace_tracing_operation_t,
    operations_count: usize,
    buffer_id: offtrace_buffer_id_t,
) -> offtrace_status_t {
    guard(|| {
        let kind = kind_of(kind)?;
        // SAFETY: forwarded from the contract.
        let ops = unsafe { ops_slice(operations, operations_count)? };
        offtrace_core::configure_buffer_tracing_service(context_id, kind, ops, buffer_id)
    })
}

/// Has the delivery thread deliver every record written to the buffer before the call (all
/// threads, and records of threads in teardown), and returns when the callback has returned
/// for them; an empty buffer calls nothing (except to report drops counted since the last
/// delivery). `OFFTRACE_STATUS_ERROR_BUSY` inside a callback.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_flush_buffer(buffer_id: offtrace_buffer_id_t) -> offtrace_status_t {
    guard(|| offtrace_core::flush_buffer(buffer_id))
}

/// Delivers what the buffer holds, then destroys it: its callback is never called again once
/// this returns and the id names nothing. `OFFTRACE_STATUS_ERROR_CONTEXT_ACTIVE` while its
/// context is started (stop it first); `OFFTRACE_STATUS_ERROR_BUSY` inside a callback. Records
/// its services still send (exits of calls entered before the stop) are dropped and counted.
/// `offtrace_destroy_context` destroys the context's buffers too.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_destroy_buffer(buffer_id: offtrace_buffer_id_t) -> offtrace_status_t {
    guard(|| offtrace_core::destroy_buffer(buffer_id))
}

/// Total records a discard-policy buffer dropped since it was created.
///
/// # Safety
/// `count` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_buffer_get_dropped_count(
    buffer_id: offtrace_buffer_id_t,
    count: *mut u64,
) -> offtrace_status_t {
    guard(|| {
        nonnull(count)?;
        let n = offtrace_core::buffer_dropped_total(buffer_id)?;
        // SAFETY: non-null (checked), writable per the contract.
        unsafe { *count = n };
        Ok(())
    })
}

/// # Safety
/// `name` and `name_len` must each be null or writable.
unsafe fn write_name(s: &'static str, name: *mut *const c_char, name_len: *mut u64) -> Result<(), ServiceError> {
    if name.is_null() && name_len.is_null() {
        return Err(ServiceError::InvalidArgument);
    }
    let c = arena_cstr(s);
    // SAFETY: each pointer is null (skipped) or writable per the contract.
    unsafe {
        if !name.is_null() {
            *name = c.as_ptr();
        }
        if !name_len.is_null() {
            *name_len = c.to_bytes().len() as u64;
        }
    }
    Ok(())
}

/// The kind's name (`"UR_API"`, ...), valid for the life of the process, and its length.
///
/// # Safety
/// `name` and `name_len` must each be null or writable (not both null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_query_callback_tracing_kind_name(
    kind: offtrace_tracing_kind_t,
    name: *mut *const c_char,
    name_len: *mut u64,
) -> offtrace_status_t {
    // SAFETY: forwarded from the contract.
    guard(|| unsafe { write_name(kind_of(kind)?.name(), name, name_len) })
}

/// The operation's name (for `UR_API`: the UR function, `"urEnqueueKernelLaunch"`).
///
/// # Safety
/// `name` and `name_len` must each be null or writable (not both null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_query_callback_tracing_kind_operation_name(
    kind: offtrace_tracing_kind_t,
    operation: offtrace_tracing_operation_t,
    name: *mut *const c_char,
    name_len: *mut u64,
) -> offtrace_status_t {
    guard(|| {
        let k = kind_of(kind)?;
        let op = k.operation(operation).ok_or(ServiceError::OperationNotFound)?;
        // SAFETY: forwarded from the contract.
        unsafe { write_name(op.name, name, name_len) }
    })
}

/// Calls `callback(kind, data)` for every tracing kind until it returns nonzero.
///
/// # Safety
/// `callback` must be callable with `data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_iterate_callback_tracing_kinds(
    callback: Option<offtrace_tracing_kind_cb_t>,
    data: *mut c_void,
) -> offtrace_status_t {
    guard(|| {
        let cb = callback.ok_or(ServiceError::InvalidArgument)?;
        for k in Kind::ALL {
            // SAFETY: callable with `data` per the contract.
            if unsafe { cb(k as u32, data) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

/// Calls `callback(kind, operation, data)` for every operation of the kind until nonzero.
///
/// # Safety
/// `callback` must be callable with `data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_iterate_callback_tracing_kind_operations(
    kind: offtrace_tracing_kind_t,
    callback: Option<offtrace_tracing_kind_operation_cb_t>,
    data: *mut c_void,
) -> offtrace_status_t {
    guard(|| {
        let cb = callback.ok_or(ServiceError::InvalidArgument)?;
        let k = kind_of(kind)?;
        for op in k.operations() {
            // SAFETY: callable with `data` per the contract.
            if unsafe { cb(kind, op.id, data) } != 0 {
                break;
            }
        }
        Ok(())
    })
}

/// Calls `callback` for each argument of the record, in order, until it returns nonzero:
/// index, address of the raw value, indirection count, C type, name, value as text (a
/// `const char*` argument is printed as a quoted string when `max_dereference_count > 0`).
/// Call it inside the callback that received the record (the payload is valid only then).
///
/// # Safety
/// `record.payload` must be the payload delivered with the record, still valid; `callback` must
/// be callable with `user_data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_iterate_callback_tracing_kind_operation_args(
    record: offtrace_callback_tracing_record_t,
    callback: Option<offtrace_callback_tracing_operation_args_cb_t>,
    max_dereference_count: i32,
    user_data: *mut c_void,
) -> offtrace_status_t {
    guard(|| {
        let cb = callback.ok_or(ServiceError::InvalidArgument)?;
        let mut value = Vec::<u8>::with_capacity(64);
        // SAFETY: forwarded from the contract.
        unsafe {
            offtrace_core::iterate_operation_args(&record, max_dereference_count, |a| {
                value.clear();
                value.extend(a.value.bytes().filter(|&b| b != 0));
                value.push(0);
                let v = CStr::from_bytes_with_nul(&value).unwrap_or(c"");
                // SAFETY: callable per the contract; every string is NUL-terminated and valid
                // during the call (names in the arena, the value in `value`).
                let stop = cb(
                    record.kind,
                    record.operation,
                    a.index,
                    a.address,
                    a.indirection_count,
                    arena_cstr(a.type_name).as_ptr(),
                    arena_cstr(a.name).as_ptr(),
                    v.as_ptr(),
                    max_dereference_count.min(a.indirection_count).max(0),
                    user_data,
                );
                stop == 0
            })
        }
    })
}

/// Pushes an external correlation id on the calling thread's stack for the context; records of
/// the context from this thread carry the top of the stack. `thread_id` must be 0 or the
/// calling thread's id (stacks are per thread).
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_push_external_correlation_id(
    context_id: offtrace_context_id_t,
    thread_id: offtrace_thread_id_t,
    external_correlation_id: offtrace_user_data_t,
) -> offtrace_status_t {
    guard(|| offtrace_core::push_external_correlation_id(context_id, thread_id, external_correlation_id.value))
}

/// Sets the context's process-wide external correlation id (0 clears it). Records of the
/// context from any thread whose own stack for the context is empty carry it (worker threads
/// of the runtime included); a thread's own pushed id wins. Call it from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_set_process_external_correlation_id(
    context_id: offtrace_context_id_t,
    external_correlation_id: offtrace_user_data_t,
) -> offtrace_status_t {
    guard(|| offtrace_core::set_process_external_correlation_id(context_id, external_correlation_id.value))
}

/// Pops the top external correlation id of the calling thread's stack for the context into
/// `external_correlation_id` (may be null). `OFFTRACE_STATUS_ERROR_STACK_EMPTY` when empty.
///
/// # Safety
/// `external_correlation_id` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_pop_external_correlation_id(
    context_id: offtrace_context_id_t,
    thread_id: offtrace_thread_id_t,
    external_correlation_id: *mut offtrace_user_data_t,
) -> offtrace_status_t {
    guard(|| {
        let v = offtrace_core::pop_external_correlation_id(context_id, thread_id)?;
        if !external_correlation_id.is_null() {
            // SAFETY: non-null, writable per the contract.
            unsafe { (*external_correlation_id).value = v };
        }
        Ok(())
    })
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock of every record).
///
/// # Safety
/// `ts` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_get_timestamp(ts: *mut offtrace_timestamp_t) -> offtrace_status_t {
    guard(|| {
        nonnull(ts)?;
        // SAFETY: non-null (checked), writable per the contract.
        unsafe { *ts = offtrace_core::timestamp_ns() };
        Ok(())
    })
}

/// The calling thread's kernel thread id (what records carry as `thread_id`).
///
/// # Safety
/// `thread_id` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_get_thread_id(thread_id: *mut offtrace_thread_id_t) -> offtrace_status_t {
    guard(|| {
        nonnull(thread_id)?;
        // SAFETY: non-null (checked), writable per the contract.
        unsafe { *thread_id = offtrace_core::current_thread_id() };
        Ok(())
    })
}

/// The allocations a `KERNEL_DISPATCH` record's kernel uses, two-step: with `properties` NULL,
/// writes the number to `*count`; else fills up to `*count` entries and writes how many it
/// filled. Each entry: base, size, argument index (-1 = implicit), memory type.
///
/// # Safety
/// `record` must be a `KERNEL_DISPATCH` record delivered to a callback, used during it; `count`
/// writable; `properties` null or writable for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_kernel_get_allocation_properties(
    record: *const offtrace_callback_tracing_record_t,
    count: *mut u32,
    properties: *mut offtrace_kernel_allocation_properties_t,
) -> offtrace_status_t {
    guard(|| {
        nonnull(record)?;
        nonnull(count)?;
        // SAFETY: non-null (checked), readable per the contract.
        let r = unsafe { &*record };
        if r.kind != Kind::KernelDispatch as u32 {
            return Err(ServiceError::KindNotFound);
        }
        nonnull(r.payload)?;
        // SAFETY: a KERNEL_DISPATCH record's payload is a `KernelDispatchPayload`, live during
        // the callback (contract); the same for its implicit-allocation array.
        let all = unsafe { offtrace_core::kernel_allocation_properties(&*r.payload.cast()) };
        // SAFETY: `count` is non-null and writable; `properties`, when non-null, is writable
        // for `*count` entries (contract).
        unsafe {
            if properties.is_null() {
                *count = all.len() as u32;
            } else {
                let n = (*count as usize).min(all.len());
                std::ptr::copy_nonoverlapping(all.as_ptr(), properties, n);
                *count = n as u32;
            }
        }
        Ok(())
    })
}

/// The allocations a typed `KERNEL_DISPATCH` buffer record's kernel uses, two-step as
/// `offtrace_kernel_get_allocation_properties`: its inline argument values matched against the
/// live allocation table *as it is at this call* (in a buffer callback, later than the dispatch:
/// an allocation freed since is not found). No implicit allocations (a buffer record does not
/// carry them).
///
/// # Safety
/// `record` must be a record delivered to a buffer callback, used during it; `count` writable;
/// `properties` null or writable for `*count` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_buffer_kernel_get_allocation_properties(
    record: *const offtrace_buffer_tracing_record_t,
    count: *mut u32,
    properties: *mut offtrace_kernel_allocation_properties_t,
) -> offtrace_status_t {
    guard(|| {
        nonnull(record)?;
        nonnull(count)?;
        // SAFETY: non-null (checked), a delivered record (contract).
        let h = unsafe { &*record };
        if h.kind != Kind::KernelDispatch as u32 {
            return Err(ServiceError::KindNotFound);
        }
        if (h.size as usize) < std::mem::size_of::<offtrace_core::KernelDispatchRecord>() {
            return Err(ServiceError::InvalidArgument);
        }
        // SAFETY: a KERNEL_DISPATCH record at least as large as the struct (checked); its
        // `kernel_arg_count` arguments are inline at `args_offset`, inside its `size` bytes.
        let all = unsafe {
            let r = &*record.cast::<offtrace_core::KernelDispatchRecord>();
            let n = (r.kernel_arg_count as usize).min(offtrace_core::MAX_KERNEL_ARGS);
            if r.args_offset as usize + 8 * n > h.size as usize {
                return Err(ServiceError::InvalidArgument);
            }
            let args = record.cast::<u8>().add(r.args_offset as usize).cast::<u64>();
            let mut p = offtrace_core::KernelDispatchPayload { kernel_arg_count: n as u32, ..Default::default() };
            for (i, a) in p.kernel_args[..n].iter_mut().enumerate() {
                *a = args.add(i).read_unaligned();
            }
            offtrace_core::kernel_allocation_properties(&p)
        };
        // SAFETY: `count` is non-null and writable; `properties`, when non-null, is writable
        // for `*count` entries (contract).
        unsafe {
            if properties.is_null() {
                *count = all.len() as u32;
            } else {
                let n = (*count as usize).min(all.len());
                std::ptr::copy_nonoverlapping(all.as_ptr(), properties, n);
                *count = n as u32;
            }
        }
        Ok(())
    })
}

/// A one-shot `MARKER` record with the message.
///
/// # Safety
/// `message` must be null or a NUL-terminated string (read during the call).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_marker_mark(message: *const c_char) {
    let _ = quiet(|| {
        // SAFETY: non-null and NUL-terminated per the contract.
        let m = if message.is_null() { c"" } else { unsafe { CStr::from_ptr(message) } };
        offtrace_core::marker_mark(m);
    });
}

/// Opens a nested range on the calling thread; returns the depth before the push (0-based),
/// or -1 on error.
///
/// # Safety
/// `message` must be null or a NUL-terminated string (read during the call).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_marker_range_push(message: *const c_char) -> i32 {
    quiet(|| {
        // SAFETY: non-null and NUL-terminated per the contract.
        let m = if message.is_null() { c"" } else { unsafe { CStr::from_ptr(message) } };
        offtrace_core::marker_range_push(m)
    })
    .unwrap_or(-1)
}

/// Closes the innermost range of the calling thread; returns its depth, or -1 when none is open.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_marker_range_pop() -> i32 {
    quiet(offtrace_core::marker_range_pop).unwrap_or(-1)
}
