//! offtrace-cuda: the CUDA backend, a CUPTI injection.
//!
//! The CUDA driver loads `libofftrace_cuda.so` when `CUDA_INJECTION64_PATH` names it and calls
//! its `InitializeInjection` at `cuInit`; `offtrace record` sets that up:
//!
//! ```sh
//! CUDA_INJECTION64_PATH=target/release/libofftrace_cuda.so \
//! NVTX_INJECTION64_PATH=target/release/libofftrace_cuda.so \
//! OFFTRACE_CUDA_DUMP=run.jsonl python train.py
//! ```
//!
//! The injection loads CUPTI at run time (`cupti.rs`: the copy the program uses, else the
//! toolkit's, else `OFFTRACE_CUPTI`), subscribes to the runtime, driver and resource callback
//! domains (`injection.rs`) and enables CUPTI's activity records, which it decodes
//! (`activity.rs`) on CUPTI's buffer thread. Everything goes to the tracing services
//! (`emit.rs`); API calls use the operation tables generated from the CUPTI headers
//! (`table.rs`, `generated/`). Device records are paired with the API call that caused them
//! through CUPTI's correlation id (`correlation_map.rs`).
//!
//! Nothing here links CUDA: the crate builds and its unit tests run without it. Tests that need
//! a GPU are `#[ignore = "needs CUDA"]`; `scripts/gpu-tests.sh` runs them on a CUDA machine.

#![allow(unsafe_code)] // an FFI crate: CUPTI calls, CUPTI structs read by offset, C entry points

pub mod activity;
pub mod correlation_map;
pub mod cubin;
pub mod cupti;
pub mod dump;
pub mod emit;
mod generated;
pub mod injection;
pub mod metrics;
pub mod range_query;
pub mod table;

pub use generated::cupti_layout;
pub use generated::driver_api;
pub use generated::runtime_api;

use std::ffi::c_void;
use std::panic::catch_unwind;

/// Called by the CUDA driver (at `cuInit`) when `CUDA_INJECTION64_PATH` names this library.
/// Returns 1 (success) even when tracing could not start: the program must run on.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    let _ = catch_unwind(injection::start);
    1
}

/// Called by NVTX when `NVTX_INJECTION64_PATH` names this library: hands NVTX to the CUPTI the
/// injection uses, so NVTX ranges and marks become CUPTI marker records. Returns 0 (NVTX then
/// stays a no-op) when CUPTI is not loaded.
///
/// # Safety
/// Called by NVTX with its export-table getter.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: *const c_void) -> i32 {
    catch_unwind(|| {
        injection::start();
        match injection::get().and_then(|i| i.cupti.nvtx_init) {
            // SAFETY: CUPTI's own NVTX entry point, given NVTX's argument unchanged.
            Some(f) => unsafe { f(get_export_table) },
            None => 0,
        }
    })
    .unwrap_or(0)
}

/// Flushes CUPTI's activity buffers into the services now (tools call it before reading
/// results; `offtrace_flush` of the C API reaches it).
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_cuda_flush() {
    let _ = catch_unwind(|| {
        if let Some(i) = injection::get() {
            i.flush();
        }
    });
}

/// For measuring what each part of the backend costs inside one process: switches CUPTI's
/// callbacks and activity kinds to measurement phase `phase` (0 none, 1 as started, 2 activity
/// only, 3 callbacks that return at once, 4 no driver callbacks, 5 no activity, 6 no runtime
/// callbacks; `injection::measure_phase`). Call between steps with the device idle. Returns 0,
/// or -1 when offtrace does not trace CUDA in this process or the phase is unknown.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_cuda_measure_phase(phase: u32) -> i32 {
    match catch_unwind(|| injection::measure_phase(phase)) {
        Ok(true) => 0,
        _ => -1,
    }
}
