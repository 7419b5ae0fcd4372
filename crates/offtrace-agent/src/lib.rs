//! The offtrace agent: an XPTI subscriber that records Intel's SYCL runtime into a trace file.
//!
//! Loaded by the XPTI dispatcher from `XPTI_SUBSCRIBERS=<path>/libofftrace_agent.so`:
//!
//! ```sh
//! LD_LIBRARY_PATH=$VENV/lib OCL_ICD_FILENAMES=$VENV/lib/libintelocl.so \
//! XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER=$VENV/lib/libxptifw.so.1 \
//! XPTI_SUBSCRIBERS=target/release/libofftrace_agent.so UR_ENABLE_LAYERS=UR_LAYER_TRACING \
//! OFFTRACE_OUTPUT=w4.offtrace python w4_usm_multiqueue.py
//! ```
//!
//! Exports exactly the subscriber entry points: `xptiTraceInit`, `xptiTraceFinish`,
//! `xptiQuerySubscriberStreamDetailLevel`. The dispatcher functions it calls are resolved with
//! `dlsym` from the dispatcher already loaded (`dispatcher.rs`). On the first `xptiTraceInit` it
//! reads its configuration (`config.rs`), opens the trace and starts the writer thread
//! (`recorder.rs`); for each stream it wants it registers one trampoline per stream (the
//! callback carries no stream id) for every named trace point type. Each notification is
//! decoded (`decode.rs`) and written in its compact form (`compact.rs`) in place into the
//! calling thread's ring; definitions are interned process-wide (`interner.rs`). The last
//! `xptiTraceFinish` (else the agent's ELF destructor at exit) writes the end of the trace.
//! Environment knobs: `config.rs`. Reading a trace: `cargo run -p offtrace-agent --example
//! otdump -- FILE`. Tracing-services tools (`OFFTRACE_TOOLS`) are loaded at the first
//! `xptiTraceInit` and fed by `services_bridge.rs` from the same notifications.
//!
//! Cost per notification: see `docs/overhead.md` (## Agent).

pub mod config;
pub mod metrics;
pub mod recorder;

// The OpenCL backend's layer entry points (`clGetLayerInfo`, `clInitLayer[WithProperties]`,
// `clDeinitLayer`) are exported by the agent too: with `OPENCL_LAYERS=<agent>` (what `offtrace
// record` sets when the agent has them) the ICD loader runs the OpenCL layer in this library, in
// the same copy of the services as the SYCL backend, so OpenCL commands carry the UR call's
// correlation and land in the agent's trace.
use offtrace_opencl as _;

// The SYCL/UR backend lives in `offtrace-sycl`; its modules keep their paths here.
pub use offtrace_sycl::streams::{SLOT_STREAM, STREAMS, TRAMPOLINES};
pub use offtrace_sycl::{compact, decode, dispatcher, interner, raw_layer, safe_read, services_bridge};

use std::ffi::{CStr, c_char};
use std::panic::catch_unwind;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use offtrace_format::Record;
use offtrace_xpti::abi::trace_type;

use crate::config::Config;

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::from_env)
}

/// Streams initialised and finished, to find the last `xptiTraceFinish`.
static LIFECYCLE: Mutex<(Vec<String>, Vec<String>)> = Mutex::new((Vec::new(), Vec::new()));

#[cold]
fn ensure_started() -> Option<&'static recorder::Recorder> {
    static STARTED: OnceLock<bool> = OnceLock::new();
    let ok = *STARTED.get_or_init(|| {
        let located = match dispatcher::locate() {
            Ok(l) => l,
            Err(e) => {
                eprintln!("offtrace: {e}; tracing off");
                return false;
            }
        };
        let Some(_) = recorder::start(located.dispatcher, &located.path, config().clone()) else {
            return false;
        };
        // SAFETY: registering a plain extern "C" fn with no captured state.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(at_exit);
        }
        true
    });
    if ok { recorder::get() } else { None }
}

/// The fallback end of the trace: the agent's ELF destructor. The dispatcher finalises the
/// runtime's streams from the runtime's own destructors, which glibc runs before ours (the agent
/// was loaded after the runtime), so when this runs every `xptiTraceFinish` that will ever come
/// has come; if none did (a runtime that never finalises), this writes the end of the trace.
/// The writer thread is still alive here: other threads run until the process's `_exit`.
#[used]
#[allow(unsafe_code)]
#[unsafe(link_section = ".fini_array")]
static FINISH_AT_UNLOAD: extern "C" fn() = at_unload;

extern "C" fn at_unload() {
    let _ = catch_unwind(services_bridge::finish);
    let _ = catch_unwind(recorder::finish);
}

extern "C" fn at_exit() {
    // The runtime finalises its streams from its own destructors, which run after this
    // handler: drain and close a chunk now (in case finish never comes), keep recording.
    let _ = catch_unwind(recorder::flush_now);
}

fn wanted(name: &str, cfg: &Config) -> Option<usize> {
    let slot = STREAMS.iter().position(|(n, _)| n.to_bytes() == name.as_bytes())?;
    match name {
        "sycl.debug" | "ur.call.debug" if !cfg.debug_streams => None,
        "ur.call" if !cfg.ur_calls => None,
        _ => Some(slot),
    }
}

/// Called by the dispatcher for every stream the runtime initialises.
///
/// # Safety
/// `version` and `stream` are null or NUL-terminated strings valid for the call.
#[unsafe(no_mangle)]
#[allow(unsafe_code)]
pub unsafe extern "C" fn xptiTraceInit(major: u32, minor: u32, version: *const c_char, stream: *const c_char) {
    let _ = catch_unwind(|| {
        if stream.is_null() {
            return;
        }
        // SAFETY: non-null, NUL-terminated per the XPTI subscriber contract.
        let name = unsafe { CStr::from_ptr(stream) }.to_string_lossy().into_owned();
        let version = if version.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(version) }.to_string_lossy().into_owned()
        };
        let Some(rec) = ensure_started() else { return };
        services_bridge::init(rec.dispatcher);
        if name != "xpti.framework" && name != "ur.call.debug" {
            LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner()).0.push(name.clone());
        }
        let Some(slot) = wanted(&name, &rec.config) else { return };
        let Ok(cname) = std::ffi::CString::new(name.as_str()) else { return };
        let d = &rec.dispatcher;
        // SAFETY: dispatcher functions resolved by dlsym with their XPTI prototypes; `cname`
        // outlives the call.
        let id = unsafe { (d.register_stream)(cname.as_ptr()) };
        if id == 0 || id == 255 {
            return;
        }
        SLOT_STREAM[slot].store(id, Ordering::Relaxed);
        let name_id = rec.interner.string(name.as_bytes());
        let version_id = rec.interner.string(version.as_bytes());
        rec.interner.push(Record::Stream { id, name: name_id, major, minor, version: version_id });
        for &(tt, _) in trace_type::NAMED {
            // SAFETY: as above; the trampoline is a 'static extern "C" fn.
            unsafe { (d.register_callback)(id, tt, TRAMPOLINES[slot]) };
        }
    });
}

/// Called by the dispatcher when a stream is finalised; the last one ends the trace.
///
/// # Safety
/// `stream` is null or a NUL-terminated string valid for the call.
#[unsafe(no_mangle)]
#[allow(unsafe_code)]
pub unsafe extern "C" fn xptiTraceFinish(stream: *const c_char) {
    let _ = catch_unwind(|| {
        if stream.is_null() {
            return;
        }
        // SAFETY: non-null, NUL-terminated per the XPTI subscriber contract.
        let name = unsafe { CStr::from_ptr(stream) }.to_string_lossy().into_owned();
        let last = {
            let mut lc = LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner());
            if !lc.1.contains(&name) {
                lc.1.push(name.clone());
            }
            name == "sycl" || (!lc.0.is_empty() && lc.0.iter().all(|s| lc.1.contains(s)))
        };
        if last {
            services_bridge::finish();
            recorder::finish();
        }
    });
}

/// The detail level the agent wants (`OFFTRACE_DETAIL`), for every stream.
///
/// # Safety
/// `level` is null or writable.
#[unsafe(no_mangle)]
#[allow(unsafe_code)]
pub unsafe extern "C" fn xptiQuerySubscriberStreamDetailLevel(_stream: *const c_char, level: *mut u8) -> bool {
    catch_unwind(|| {
        if level.is_null() {
            return false;
        }
        // SAFETY: non-null and writable per the contract.
        unsafe { *level = config().detail };
        true
    })
    .unwrap_or(false)
}

/// Ends the trace now (for embedders and tests); the same as the last `xptiTraceFinish`.
pub fn finish() {
    recorder::finish();
}
