//! Tool loading: the rocprofiler-sdk model.
//!
//! A tool is a shared library exporting
//! `offtrace_tool_configure_result_t* offtrace_configure(uint32_t version, const char*
//! runtime_version, uint32_t priority, offtrace_client_id_t* client_id)`. It may name itself in
//! `client_id->name`, and returns its `initialize` / `finalize` functions and `tool_data` (or
//! NULL to decline). [`load_tools`] loads each library, calls `offtrace_configure`, then
//! `initialize(client_finalize, tool_data)`, where the tool creates and starts its own contexts
//! (each tool gets its own). [`finalize_tools`] calls every `finalize(tool_data)` once, in
//! reverse load order; a tool may finalize itself early through `client_finalize(client_id)`.
//!
//! The agent calls [`load_tools_from_env`] at startup (`OFFTRACE_TOOLS`, paths separated by
//! `,` or `:`; `offtrace record --tool LIB` sets it) and [`finalize_tools`] before it writes the end of
//! the trace. Before it opens a tool, the loader promotes the library that contains it (the
//! agent, or `libofftrace.so`) to `RTLD_GLOBAL`, so a tool's `offtrace_*` references bind to
//! the one copy of the services that the backends emit into, even when the tool is linked
//! against `libofftrace.so` itself and the agent was loaded with `RTLD_LOCAL`.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::Mutex;

use crate::{
    OFFTRACE_STATUS_ERROR_INTERNAL, OFFTRACE_STATUS_ERROR_TOOL_LOAD, OFFTRACE_STATUS_SUCCESS, offtrace_status_t,
};

/// `offtrace_client_id_t`: the tool's identity; the tool may set `name` in `offtrace_configure`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct offtrace_client_id_t {
    pub name: *const c_char,
    pub handle: u32,
}

pub type offtrace_client_finalize_t = unsafe extern "C" fn(client_id: offtrace_client_id_t);
pub type offtrace_tool_initialize_t =
    unsafe extern "C" fn(finalize: offtrace_client_finalize_t, tool_data: *mut c_void) -> c_int;
pub type offtrace_tool_finalize_t = unsafe extern "C" fn(tool_data: *mut c_void);

/// `offtrace_tool_configure_result_t`: what `offtrace_configure` returns (static storage in the
/// tool). `size` = `sizeof(offtrace_tool_configure_result_t)`, for future growth.
#[derive(Debug)]
#[repr(C)]
pub struct offtrace_tool_configure_result_t {
    pub size: usize,
    pub initialize: Option<offtrace_tool_initialize_t>,
    pub finalize: Option<offtrace_tool_finalize_t>,
    pub tool_data: *mut c_void,
}

pub type offtrace_configure_func_t = unsafe extern "C" fn(
    version: u32,
    runtime_version: *const c_char,
    priority: u32,
    client_id: *mut offtrace_client_id_t,
) -> *mut offtrace_tool_configure_result_t;

/// `major * 10000 + minor * 100 + patch`, passed to `offtrace_configure`.
pub const OFFTRACE_VERSION: u32 =
    crate::OFFTRACE_VERSION_MAJOR * 10000 + crate::OFFTRACE_VERSION_MINOR * 100 + crate::OFFTRACE_VERSION_PATCH;

/// Why a tool could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolError {
    /// `dlopen` failed: (path, `dlerror()`).
    Open(String, String),
    /// The library does not export `offtrace_configure`.
    NoConfigure(String),
    /// The configure result is smaller than this version's struct.
    BadResult(String),
    /// `initialize` returned nonzero: (path, value).
    Initialize(String, i32),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Open(p, e) => write!(f, "cannot load tool {p}: {e}"),
            ToolError::NoConfigure(p) => write!(f, "tool {p} does not export offtrace_configure"),
            ToolError::BadResult(p) => write!(f, "tool {p}: offtrace_configure returned a result of the wrong size"),
            ToolError::Initialize(p, v) => write!(f, "tool {p}: initialize returned {v}"),
        }
    }
}

impl std::error::Error for ToolError {}

struct LoadedTool {
    client: offtrace_client_id_t,
    path: String,
    finalize: Option<offtrace_tool_finalize_t>,
    tool_data: *mut c_void,
    finalized: bool,
}

// SAFETY: `tool_data` and `client.name` are the tool's, handed back only to the tool's own
// functions, which the tool contract allows from any thread.
unsafe impl Send for LoadedTool {}

static TOOLS: Mutex<Vec<LoadedTool>> = Mutex::new(Vec::new());

fn tools() -> std::sync::MutexGuard<'static, Vec<LoadedTool>> {
    TOOLS.lock().unwrap_or_else(|e| e.into_inner())
}

fn dlerror_text() -> String {
    // SAFETY: `dlerror` returns null or a NUL-terminated string valid until the next dl* call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        String::from("unknown error")
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Makes the library holding this code `RTLD_GLOBAL` (see the module docs).
fn promote_self_to_global() {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    let addr = promote_self_to_global as *const c_void;
    // SAFETY: `addr` is an address inside this library; `info` is writable.
    if unsafe { libc::dladdr(addr, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: `dli_fname` is a NUL-terminated path of a loaded object; RTLD_NOLOAD only
        // changes the flags of the already-loaded library (the reference it adds is kept for
        // the life of the process on purpose).
        unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL) };
    }
}

/// Deferred client finalizations (see [`client_finalize`]), joined by [`finalize_tools`].
static DEFERRED: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

/// The tool whose `initialize` runs now (0 = none): contexts created meanwhile are its own.
static INITIALIZING: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// (tool handle, context) for every context created during a tool's `initialize`.
static TOOL_CONTEXTS: Mutex<Vec<(u32, offtrace_core::ContextId)>> = Mutex::new(Vec::new());

/// Called by `offtrace_create_context`: remembers the context as the initializing tool's.
pub(crate) fn note_context(ctx: offtrace_core::ContextId) {
    let h = INITIALIZING.load(std::sync::atomic::Ordering::Acquire);
    if h != 0 {
        TOOL_CONTEXTS.lock().unwrap_or_else(|e| e.into_inner()).push((h, ctx));
    }
}

/// Stops and destroys every context the tool created in its `initialize` (its buffers go with
/// them, flushed), for a tool whose `initialize` failed.
fn destroy_tool_contexts(handle: u32) {
    let mine: Vec<offtrace_core::ContextId> = {
        let mut all = TOOL_CONTEXTS.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(h, _)| *h == handle);
        *all = rest;
        mine.into_iter().map(|(_, c)| c).collect()
    };
    for c in mine {
        // A context the tool destroyed itself is `ContextInvalid` here: nothing to do.
        let _ = offtrace_core::destroy_context(c);
    }
}

/// The `client_finalize` handed to a tool's `initialize`. Outside a callback it runs the
/// tool's finalize at once. Inside one (where `flush_buffer` and `destroy_context` would return
/// `BUSY` and the tool's records would be lost) it is deferred: a thread of the services runs
/// it as soon as the call returns (its `destroy_context` waits for the callback to end), and
/// `offtrace_finalize_tools` waits for that thread. Either way the finalize runs once.
unsafe extern "C" fn client_finalize(client: offtrace_client_id_t) {
    let _ = crate::quiet(|| {
        if !offtrace_core::in_callback() {
            return finalize_one(client.handle);
        }
        let h = client.handle;
        // No thread (inside `exit()`, out of resources): `finalize_tools` runs it.
        if let Ok(j) = std::thread::Builder::new().name("offtrace-final".into()).spawn(move || finalize_one(h)) {
            DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).push(j);
        }
    });
}

fn finalize_one(handle: u32) {
    let f = {
        let mut t = tools();
        let Some(tool) = t.iter_mut().find(|t| t.client.handle == handle && !t.finalized) else { return };
        tool.finalized = true;
        tool.finalize.map(|f| (f, tool.tool_data))
    };
    if let Some((f, data)) = f {
        // SAFETY: the tool's own finalize with its own data, once (guarded by `finalized`);
        // called without our lock held so it may call back into offtrace.
        unsafe { f(data) };
    }
}

/// Loads every tool in `spec` (paths separated by `,` or `:`), in order. Returns how many initialised
/// (a tool whose `offtrace_configure` returns NULL declines and is not counted). Stops at the
/// first error; tools loaded before it stay loaded.
pub fn load_tools(spec: &str) -> Result<usize, ToolError> {
    promote_self_to_global();
    let mut count = 0;
    for path in spec.split([',', ':']).map(str::trim).filter(|p| !p.is_empty()) {
        if load_one(path)? {
            count += 1;
        }
    }
    Ok(count)
}

/// [`load_tools`] with `OFFTRACE_TOOLS` (nothing when unset or empty).
pub fn load_tools_from_env() -> Result<usize, ToolError> {
    match std::env::var("OFFTRACE_TOOLS") {
        Ok(s) => load_tools(&s),
        Err(_) => Ok(0),
    }
}

fn load_one(path: &str) -> Result<bool, ToolError> {
    let cpath = CString::new(path).map_err(|_| ToolError::Open(path.into(), "path contains NUL".into()))?;
    // SAFETY: `cpath` is NUL-terminated; loading a library runs its constructors, which is what
    // the user asked for by naming it.
    let lib = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err(ToolError::Open(path.into(), dlerror_text()));
    }
    // SAFETY: `lib` is a live handle; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(lib, c"offtrace_configure".as_ptr()) };
    if sym.is_null() {
        return Err(ToolError::NoConfigure(path.into()));
    }
    // SAFETY: the tool contract: `offtrace_configure` has this signature.
    let configure: offtrace_configure_func_t = unsafe { std::mem::transmute(sym) };
    let handle = {
        let t = tools();
        t.len() as u32 + 1
    };
    let mut client = offtrace_client_id_t { name: std::ptr::null(), handle };
    // SAFETY: calling the tool's configure per the contract; `client` is writable.
    let result = unsafe { configure(OFFTRACE_VERSION, c"offtrace 0.2.0".as_ptr(), handle - 1, &mut client) };
    if result.is_null() {
        return Ok(false);
    }
    // SAFETY: non-null; the tool returns a pointer to its (static) result struct.
    let r = unsafe { &*result };
    if r.size < std::mem::size_of::<offtrace_tool_configure_result_t>() {
        return Err(ToolError::BadResult(path.into()));
    }
    let (init, fini, data) = (r.initialize, r.finalize, r.tool_data);
    tools().push(LoadedTool { client, path: path.into(), finalize: fini, tool_data: data, finalized: false });
    if let Some(init) = init {
        INITIALIZING.store(handle, std::sync::atomic::Ordering::Release);
        // SAFETY: the tool's initialize with its own data.
        let rc = unsafe { init(client_finalize, data) };
        INITIALIZING.store(0, std::sync::atomic::Ordering::Release);
        if rc != 0 {
            // A tool that fails to initialise runs nothing more: not finalised, and the
            // contexts it created (started or not) are stopped and destroyed with their
            // buffers, so none of its callbacks runs after this.
            if let Some(t) = tools().iter_mut().find(|t| t.client.handle == handle) {
                t.finalized = true;
            }
            destroy_tool_contexts(handle);
            return Err(ToolError::Initialize(path.into(), rc));
        }
    }
    Ok(true)
}

/// Finalises every loaded tool not yet finalised, in reverse load order.
/// Waits first for finalizations a tool asked for from inside a callback.
pub fn finalize_tools() {
    let deferred: Vec<_> = DEFERRED.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect();
    for j in deferred {
        let _ = j.join();
    }
    let handles: Vec<u32> = tools().iter().rev().map(|t| t.client.handle).collect();
    for h in handles {
        finalize_one(h);
    }
}

/// The loaded tools: (client handle, name the tool gave itself or its path).
pub fn loaded_tools() -> Vec<(u32, String)> {
    tools()
        .iter()
        .map(|t| {
            let name = if t.client.name.is_null() {
                t.path.clone()
            } else {
                // SAFETY: the tool set a NUL-terminated name with static storage.
                unsafe { CStr::from_ptr(t.client.name) }.to_string_lossy().into_owned()
            };
            (t.client.handle, name)
        })
        .collect()
}

/// Loads the tools in `paths` (`,`- or `:`-separated; NULL = the `OFFTRACE_TOOLS` environment variable)
/// and initialises them. `OFFTRACE_STATUS_ERROR_TOOL_LOAD` when one cannot be loaded or fails
/// to initialise (the reason goes to stderr).
///
/// # Safety
/// `paths` must be null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_load_tools(paths: *const c_char) -> offtrace_status_t {
    let r = crate::quiet(|| {
        if paths.is_null() {
            load_tools_from_env()
        } else {
            // SAFETY: NUL-terminated per the contract.
            load_tools(&unsafe { CStr::from_ptr(paths) }.to_string_lossy())
        }
    });
    match r {
        Ok(Ok(_)) => OFFTRACE_STATUS_SUCCESS,
        Ok(Err(e)) => {
            eprintln!("offtrace: {e}");
            OFFTRACE_STATUS_ERROR_TOOL_LOAD
        }
        Err(_) => OFFTRACE_STATUS_ERROR_INTERNAL,
    }
}

/// Calls every loaded tool's finalize once, in reverse load order.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_finalize_tools() -> offtrace_status_t {
    match crate::quiet(finalize_tools) {
        Ok(()) => OFFTRACE_STATUS_SUCCESS,
        Err(_) => OFFTRACE_STATUS_ERROR_INTERNAL,
    }
}
