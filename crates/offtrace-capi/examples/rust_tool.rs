//! rust_tool: an offtrace tool written in Rust. Built as a cdylib
//! (`cargo build -p offtrace-capi --example rust_tool` → `target/debug/examples/librust_tool.so`)
//! and loaded like any tool (`OFFTRACE_TOOLS=…/librust_tool.so`).
//!
//! It counts UR calls per function and their total time, and prints a table at finalize.
//!
//! A tool must use the services of the process it is loaded into, not a copy of its own: it
//! takes the record types from `offtrace-core` (plain `#[repr(C)]` data) and finds the C API
//! functions at load time with `dlsym(RTLD_DEFAULT, …)`, so it works whichever library hosts
//! the services (the agent or `libofftrace.so`).

#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;

use offtrace_core::{CallbackRecord, ContextId, Kind, Phase, UserData};

type Status = i32;
type CallbackFn = unsafe extern "C" fn(CallbackRecord, *mut UserData, *mut c_void);

#[repr(C)]
pub struct ClientId {
    name: *const c_char,
    handle: u32,
}

#[repr(C)]
pub struct ConfigureResult {
    size: usize,
    initialize: unsafe extern "C" fn(unsafe extern "C" fn(ClientId), *mut c_void) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void),
    tool_data: *mut c_void,
}

// SAFETY: the result is immutable and its `tool_data` is null.
unsafe impl Sync for ConfigureResult {}

/// Looks up an offtrace C function in the process.
///
/// # Safety
/// `T` must be the function's exact type.
unsafe fn api<T: Copy>(name: &CStr) -> Option<T> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: a non-null symbol of the documented type `T` (the caller's contract).
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

struct Stats {
    ctx: ContextId,
    per_function: BTreeMap<u32, (u64, u64)>, // operation → (calls, total ns)
}

static STATS: Mutex<Stats> = Mutex::new(Stats { ctx: ContextId { handle: 0 }, per_function: BTreeMap::new() });

fn now() -> u64 {
    offtrace_core::timestamp_ns()
}

unsafe extern "C" fn on_call(record: CallbackRecord, user: *mut UserData, _data: *mut c_void) {
    // SAFETY: offtrace passes a valid, exclusive user-data slot for this call.
    let user = unsafe { &mut *user };
    if record.phase == Phase::Enter as u32 {
        user.value = now();
    } else if let Ok(mut s) = STATS.lock() {
        let e = s.per_function.entry(record.operation).or_insert((0, 0));
        e.0 += 1;
        e.1 += now().saturating_sub(user.value);
    }
}

unsafe extern "C" fn initialize(_fini: unsafe extern "C" fn(ClientId), _data: *mut c_void) -> c_int {
    // SAFETY: each type is the C prototype of the named function in offtrace.h.
    unsafe {
        let (Some(create), Some(configure), Some(start)) = (
            api::<unsafe extern "C" fn(*mut ContextId) -> Status>(c"offtrace_create_context"),
            api::<unsafe extern "C" fn(ContextId, u32, *const u32, usize, CallbackFn, *mut c_void) -> Status>(
                c"offtrace_configure_callback_tracing_service",
            ),
            api::<unsafe extern "C" fn(ContextId) -> Status>(c"offtrace_start_context"),
        ) else {
            return 1;
        };
        let mut ctx = ContextId::default();
        if create(&mut ctx) != 0
            || configure(ctx, Kind::UrApi as u32, std::ptr::null(), 0, on_call, std::ptr::null_mut()) != 0
            || start(ctx) != 0
        {
            return 1;
        }
        if let Ok(mut s) = STATS.lock() {
            s.ctx = ctx;
        }
    }
    0
}

unsafe extern "C" fn finalize(_data: *mut c_void) {
    let ctx = STATS.lock().map(|s| s.ctx).unwrap_or_default();
    // SAFETY: the C prototypes of offtrace.h. Destroy first: it waits for callbacks in flight.
    unsafe {
        if let Some(destroy) = api::<unsafe extern "C" fn(ContextId) -> Status>(c"offtrace_destroy_context") {
            destroy(ctx);
        }
    }
    let name_of = |op: u32| -> String {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: the C prototype of offtrace_query_callback_tracing_kind_operation_name.
        unsafe {
            if let Some(q) = api::<unsafe extern "C" fn(u32, u32, *mut *const c_char, *mut u64) -> Status>(
                c"offtrace_query_callback_tracing_kind_operation_name",
            ) && q(Kind::UrApi as u32, op, &mut name, std::ptr::null_mut()) == 0
                && !name.is_null()
            {
                return CStr::from_ptr(name).to_string_lossy().into_owned();
            }
        }
        format!("ur#{op}")
    };
    if let Ok(s) = STATS.lock() {
        println!("rust_tool: {:<24} {:>8} {:>12}", "function", "calls", "total ns");
        for (&op, &(calls, ns)) in &s.per_function {
            println!("rust_tool: {:<24} {:>8} {:>12}", name_of(op), calls, ns);
        }
    }
}

static RESULT: ConfigureResult = ConfigureResult {
    size: std::mem::size_of::<ConfigureResult>(),
    initialize,
    finalize,
    tool_data: std::ptr::null_mut(),
};

/// The tool's entry point, found by the loader.
///
/// # Safety
/// Called by offtrace's tool loader with a valid `client_id`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_configure(
    _version: u32,
    _runtime_version: *const c_char,
    _priority: u32,
    client_id: *mut ClientId,
) -> *const ConfigureResult {
    if !client_id.is_null() {
        // SAFETY: non-null, provided writable by the loader.
        unsafe { (*client_id).name = c"rust_tool".as_ptr() };
    }
    &RESULT
}
