//! The layer as the recorder's host, for programs that use OpenCL alone (no SYCL runtime, so no
//! agent): with `OFFTRACE_OUTPUT` set (`offtrace record` sets it), the layer's initialisation
//! starts `offtrace-recorder` writing the typed records of the services into that file, and
//! its finish (`clDeinitLayer`, or at exit under ocl-icd) ends the trace.
//!
//! One process, one writer: the layer does not start a recorder when one already runs in its
//! copy of the services (inside the agent on the SYCL path), nor as a separate library beside
//! the agent (`layer.rs` decides). A process that finds the trace file already there (a child
//! that inherited `OFFTRACE_OUTPUT`, or a program run after another) writes `<path>.<pid>`
//! instead (`offtrace_recorder::claim_output`); `%p` in the path becomes the pid.

use std::sync::Mutex;

use offtrace_core::ContextId;

static RECORDING: Mutex<Option<ContextId>> = Mutex::new(None);

/// Whether offtrace's SYCL agent is mapped into this process (read once).
pub(crate) fn agent_loaded() -> bool {
    static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOADED.get_or_init(|| std::fs::read_to_string("/proc/self/maps").is_ok_and(|m| m.contains("libofftrace_agent.so")))
}

/// Whether this code runs inside offtrace's SYCL agent (which links this crate), found from the
/// file that holds this function (read once).
pub(crate) fn inside_agent() -> bool {
    static INSIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSIDE.get_or_init(|| {
        // SAFETY: `Dl_info` is plain pointers and an int, for which all-zero bytes are valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the address; `info` is a valid out struct.
        let found = unsafe { libc::dladdr(inside_agent as *const libc::c_void, &mut info) } != 0;
        // SAFETY: dli_fname is null or a NUL-terminated path owned by the loader.
        found
            && !info.dli_fname.is_null()
            && unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_bytes().ends_with(b"libofftrace_agent.so")
    })
}

/// Starts recording when `OFFTRACE_OUTPUT` asks for it (see the module docs). Cold, once.
pub(crate) fn start_if_requested() {
    let Some(output) = std::env::var_os("OFFTRACE_OUTPUT").filter(|v| !v.is_empty()) else { return };
    if offtrace_recorder::is_recording() {
        return;
    }
    let command = std::fs::read("/proc/self/cmdline")
        .map(|c| {
            c.split(|&b| b == 0).filter(|a| !a.is_empty()).map(String::from_utf8_lossy).collect::<Vec<_>>().join(" ")
        })
        .unwrap_or_default();
    let pid = std::process::id().to_string();
    let mut info = vec![("backend", "opencl"), ("command", command.as_str()), ("pid", pid.as_str())];
    if crate::preload::preload_active() {
        // Said in the trace: the layer was preloaded in front of a loader (`preload.rs`).
        info.push(("opencl_interpose", "preload"));
    }
    let lossless = std::env::var("OFFTRACE_LOSSLESS").is_ok_and(|v| v.trim() == "1");
    let config = offtrace_recorder::Config::default()
        .with_lossless(lossless)
        .with_crash_flush(offtrace_recorder::crash_flush_wanted());
    // The first traced process writes the path, every later one `<path>.<pid>`
    // (`offtrace_recorder::claim_output`).
    if offtrace_recorder::start_claimed(config, std::path::Path::new(&output), &info).is_err() {
        return;
    }
    match offtrace_recorder::subscribe(false) {
        Ok(ctx) => {
            *RECORDING.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
            crate::sampling::start_from_env();
        }
        Err(_) => {
            let _ = offtrace_recorder::finish();
        }
    }
}

/// Ends the trace this layer started, if any.
pub(crate) fn finish() {
    let Some(ctx) = RECORDING.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    // The samplers' last samples go in before the recorder stops.
    crate::sampling::stop();
    let _ = offtrace_core::destroy_context(ctx);
    let _ = offtrace_recorder::finish();
}
