//! The ICD loader layer's entry points (`cl_loader_layers`): `clGetLayerInfo`, `clInitLayer`,
//! `clInitLayerWithProperties`, `clDeinitLayer`.
//!
//! The loader (the Khronos loader, or ocl-icd >= 2.3.0) opens each library named in
//! `OPENCL_LAYERS`, checks `clGetLayerInfo(CL_LAYER_API_VERSION) == 100`, and initialises it
//! with the dispatch table of what is below it; the layer answers with its own table, whose
//! entries call down through that one. All four symbols are exported: the Khronos loader since
//! v2026.05.29 calls `clInitLayerWithProperties` (then `clDeinitLayer` at unload) and refuses a
//! layer without it; ocl-icd 2.3.1 calls `clInitLayer` and never `clDeinitLayer`, so on that
//! path the layer reports its unfinished commands from an `atexit` handler instead.
//!
//! Initialisation of the backend (once per process, at the first init): the `OPENCL_API`
//! operation table is registered with the services, the perf counters are opened, the recorder
//! is started when `OFFTRACE_OUTPUT` asks for a trace (`recording.rs`), and the tools named in
//! `OFFTRACE_TOOLS` are loaded.

use std::ffi::c_void;
use std::ptr;
use std::sync::Once;
use std::sync::atomic::Ordering;

use crate::api::{self, DISPATCH_SLOTS, IcdDispatch};
use crate::call::{CL_INVALID_VALUE, CL_SUCCESS, OPENCL_API};

const CL_LAYER_API_VERSION: u32 = 0x4240;
const CL_LAYER_NAME: u32 = 0x4241;
const CL_LAYER_API_VERSION_100: u32 = 100;
const LAYER_NAME: &[u8] = b"offtrace OpenCL layer\0";

static BACKEND: Once = Once::new();

/// Registers the operation table, opens the perf counters, loads tools (once).
pub fn init_backend() {
    BACKEND.call_once(|| {
        let _ = offtrace_core::register_kind_operations(OPENCL_API, api::OPERATIONS);
        crate::perf::init();
        if offtrace_core::set_reported_hook(crate::enqueue::on_reported).is_ok() {
            // Relaxed: read at the end of the run, after every enqueue.
            crate::enqueue::REPORTED_HOOKED.store(true, Ordering::Relaxed);
        }
        // Who hosts the recorder and the tools: on the SYCL path offtrace's agent (which links
        // this crate: the layer then runs inside it) has started them at the runtime's XPTI
        // initialisation, before OpenCL was initialised; this layer only emits. Otherwise (a
        // program that uses OpenCL alone, with this library or the agent as its layer) the
        // layer starts them. A separate copy of the layer beside the agent starts nothing (its
        // services are not the agent's).
        let beside_agent = !crate::recording::inside_agent() && crate::recording::agent_loaded();
        if !beside_agent && !offtrace_recorder::is_recording() {
            crate::recording::start_if_requested();
            if offtrace::tools::load_tools_from_env().is_ok_and(|n| n > 0) {
                TOOLS_LOADED.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    });
}

/// Reports what never completed and lets tools flush (once; from `clDeinitLayer` or at exit).
pub fn finish() {
    crate::enqueue::finish();
    // Acquire: pairs with the Release store of the init that loaded them.
    if TOOLS_LOADED.swap(false, std::sync::atomic::Ordering::AcqRel) {
        offtrace::tools::finalize_tools();
    }
    crate::recording::finish();
}

/// Whether this layer loaded the tools (and so finalises them).
static TOOLS_LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn finish_at_exit() {
    let _ = std::panic::catch_unwind(finish);
}

/// # Safety
///
/// `value` is null or writable for `size` bytes; `size_ret` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetLayerInfo(param: u32, size: usize, value: *mut c_void, size_ret: *mut usize) -> i32 {
    let version = CL_LAYER_API_VERSION_100.to_ne_bytes();
    let bytes: &[u8] = match param {
        CL_LAYER_API_VERSION => &version,
        CL_LAYER_NAME => LAYER_NAME,
        _ => return CL_INVALID_VALUE,
    };
    if !value.is_null() {
        if size < bytes.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: writable for size >= len bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), bytes.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: the loader's size_t*.
        unsafe { *size_ret = bytes.len() };
    }
    CL_SUCCESS
}

unsafe fn init(
    num_entries: u32,
    target: *const IcdDispatch,
    num_entries_ret: *mut u32,
    layer_dispatch_ret: *mut *const IcdDispatch,
) -> i32 {
    if target.is_null() || num_entries_ret.is_null() || layer_dispatch_ret.is_null() {
        return CL_INVALID_VALUE;
    }
    // The target table may be shorter (an older loader) or longer (a newer one) than ours:
    // copy what both have, leave the rest null (a null slot is never called: its wrapper
    // answers CL_INVALID_OPERATION).
    let n = (num_entries as usize).min(DISPATCH_SLOTS);
    let mut slots = [ptr::null_mut::<c_void>(); DISPATCH_SLOTS];
    // SAFETY: the loader's table has num_entries pointer-sized slots.
    unsafe { ptr::copy_nonoverlapping(target.cast::<*mut c_void>(), slots.as_mut_ptr(), n) };
    // SAFETY: IcdDispatch is DISPATCH_SLOTS pointer-sized fields (Option<fn> and *mut c_void
    // are pointer-sized with null = None), checked by a test.
    let next: IcdDispatch = unsafe { std::mem::transmute(slots) };
    if !crate::preload::layer_may_init() {
        // Preload mode owns the layer: pass this loader through (its own table back), so that
        // no call is recorded twice (`preload.rs`).
        // SAFETY: the loader's out pointers, checked non-null above.
        unsafe {
            *layer_dispatch_ret = target;
            *num_entries_ret = num_entries;
        }
        return CL_SUCCESS;
    }
    let table = install(Box::leak(Box::new(next)));
    // SAFETY: the loader's out pointers, checked non-null above.
    unsafe {
        *layer_dispatch_ret = table;
        *num_entries_ret = n as u32;
    }
    CL_SUCCESS
}

/// Makes `next` the table below the layer (unless an earlier initialisation set one), starts
/// the backend, and returns the layer's table.
fn install(next: &'static IcdDispatch) -> &'static IcdDispatch {
    // One table per process: a second init (a second loader in the process, e.g. pyopencl's
    // bundled one beside the system one, or preload mode beside a layer-capable loader) keeps
    // the first target.
    let _ = api::NEXT.compare_exchange(
        ptr::null_mut(),
        ptr::from_ref(next).cast_mut(),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    init_backend();
    Box::leak(Box::new(api::layer_dispatch()))
}

/// Preload mode's initialisation (`preload.rs`): the layer over `loader`, the program's loader's
/// own functions, with the trace ended at exit as under ocl-icd. None if it panicked.
pub(crate) fn init_preload(loader: &'static IcdDispatch) -> Option<&'static IcdDispatch> {
    std::panic::catch_unwind(|| {
        let table = install(loader);
        finish_at_exit_once();
        table
    })
    .ok()
}

/// Registers [`finish`] with `atexit` (once per process, whichever mode asks first).
fn finish_at_exit_once() {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registering a function that never unwinds.
        unsafe { libc::atexit(finish_at_exit) };
    });
}

/// # Safety
///
/// The loader's arguments: `target` holds `num_entries` slots; the out pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clInitLayer(
    num_entries: u32,
    target: *const IcdDispatch,
    num_entries_ret: *mut u32,
    layer_dispatch_ret: *mut *const IcdDispatch,
) -> i32 {
    std::panic::catch_unwind(|| {
        // SAFETY: forwarded.
        let r = unsafe { init(num_entries, target, num_entries_ret, layer_dispatch_ret) };
        if r == CL_SUCCESS {
            // This loader will not call clDeinitLayer (ocl-icd): report at exit instead.
            finish_at_exit_once();
        }
        r
    })
    .unwrap_or(CL_INVALID_VALUE)
}

/// # Safety
///
/// As [`clInitLayer`]; `properties` is ignored (none are defined).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clInitLayerWithProperties(
    num_entries: u32,
    target: *const IcdDispatch,
    num_entries_ret: *mut u32,
    layer_dispatch_ret: *mut *const IcdDispatch,
    _properties: *const c_void,
) -> i32 {
    // SAFETY: forwarded.
    std::panic::catch_unwind(|| unsafe { init(num_entries, target, num_entries_ret, layer_dispatch_ret) })
        .unwrap_or(CL_INVALID_VALUE)
}

/// Called by the Khronos loader when it unloads its layers (process exit).
#[unsafe(no_mangle)]
pub extern "C" fn clDeinitLayer() -> i32 {
    let _ = std::panic::catch_unwind(finish);
    CL_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_table_is_one_pointer_per_slot() {
        assert_eq!(size_of::<IcdDispatch>(), DISPATCH_SLOTS * size_of::<*const c_void>());
        assert_eq!(size_of::<Option<api::sig::clGetPlatformIDs_fn>>(), size_of::<*const c_void>());
    }

    #[test]
    fn layer_info_answers_version_100_and_checks_sizes() {
        let mut v = 0u32;
        let mut n = 0usize;
        // SAFETY (all): buffers on the stack of the sizes passed.
        unsafe {
            assert_eq!(clGetLayerInfo(CL_LAYER_API_VERSION, 4, (&raw mut v).cast(), &mut n), CL_SUCCESS);
            assert_eq!((v, n), (100, 4));
            assert_eq!(clGetLayerInfo(CL_LAYER_API_VERSION, 2, (&raw mut v).cast(), ptr::null_mut()), CL_INVALID_VALUE);
            assert_eq!(clGetLayerInfo(CL_LAYER_NAME, 0, ptr::null_mut(), &mut n), CL_SUCCESS);
            assert_eq!(n, LAYER_NAME.len());
            assert_eq!(clGetLayerInfo(0x1234, 0, ptr::null_mut(), &mut n), CL_INVALID_VALUE);
        }
    }
}
