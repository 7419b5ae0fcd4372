//! Finding and loading CUPTI at run time, and the CUPTI functions the backend calls.
//!
//! Nothing links CUPTI: the backend `dlopen`s it when the CUDA driver calls
//! `InitializeInjection`, so the crate builds and its tests run where there is no CUDA. Which
//! copy, in this order (the first that loads and whose version this build understands wins):
//!
//! 1. `OFFTRACE_CUPTI` (a file): what the user asked for, taken as is.
//! 2. The copy the program already has loaded (PyTorch links the `nvidia-cuda-cupti` wheel's
//!    `libcupti.so.13`): found in `/proc/self/maps`. Using the same copy matters: two CUPTIs in
//!    one process would each think they own the driver's callbacks.
//! 3. A `libcupti.so.*` beside the program's CUDA runtime (`libcudart.so.*` in
//!    `/proc/self/maps`): the wheel layout (`nvidia/cu13/lib`) and the toolkit's `lib64`.
//! 4. The toolkit: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda` (`lib64`,
//!    `extras/CUPTI/lib64`, `targets/x86_64-linux/lib`).
//! 5. The dynamic loader's search path (`libcupti.so.13`).
//!
//! None found, or only versions whose record layouts this build does not know: tracing of CUDA
//! is off and [`LoadError`] says where it looked; the program runs on untouched.

#![allow(unsafe_code)] // dlopen/dlsym and calls through the resolved function pointers

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};

use crate::generated::cupti_layout as l;

/// `CUptiResult`.
pub type CuptiResult = i32;
/// `CUpti_SubscriberHandle`.
pub type SubscriberHandle = *mut c_void;
/// `CUpti_CallbackFunc`.
pub type CallbackFunc = unsafe extern "C" fn(userdata: *mut c_void, domain: u32, cbid: u32, cbdata: *const c_void);
/// `CUpti_BuffersCallbackRequestFunc`.
pub type BufferRequestFunc = unsafe extern "C" fn(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`.
pub type BufferCompleteFunc =
    unsafe extern "C" fn(ctx: *mut c_void, stream_id: u32, buffer: *mut u8, size: usize, valid_size: usize);
/// `CUpti_TimestampCallbackFunc`.
pub type TimestampFunc = unsafe extern "C" fn() -> u64;

/// The oldest CUPTI whose activity record layouts (`CUpti_ActivityKernel10`, `Memcpy6`, ...)
/// this build reads: the generated layouts are CUPTI 13.0's, and CUPTI only appends fields.
pub const MIN_API_VERSION: u32 = 130000;

/// The CUPTI functions the backend uses. Required ones are plain function pointers; ones that
/// older CUPTIs lack are `Option`s.
#[derive(Debug, Clone, Copy)]
pub struct Cupti {
    pub path: &'static str,
    pub api_version: u32,
    pub get_result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    pub subscribe: unsafe extern "C" fn(*mut SubscriberHandle, CallbackFunc, *mut c_void) -> CuptiResult,
    pub subscribe_v2:
        Option<unsafe extern "C" fn(*mut SubscriberHandle, CallbackFunc, *mut c_void, *mut c_void) -> CuptiResult>,
    pub unsubscribe: unsafe extern "C" fn(SubscriberHandle) -> CuptiResult,
    pub enable_domain: unsafe extern "C" fn(u32, SubscriberHandle, u32) -> CuptiResult,
    pub enable_callback: unsafe extern "C" fn(u32, SubscriberHandle, u32, u32) -> CuptiResult,
    pub activity_register_callbacks: unsafe extern "C" fn(BufferRequestFunc, BufferCompleteFunc) -> CuptiResult,
    pub activity_register_timestamp_callback: Option<unsafe extern "C" fn(TimestampFunc) -> CuptiResult>,
    pub activity_enable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub activity_disable: unsafe extern "C" fn(u32) -> CuptiResult,
    /// `cuptiActivityEnableDriverApi(cbid, enable)` (CUPTI 12.6+): API activity records for
    /// chosen driver functions only (the launches made without the runtime).
    pub activity_enable_driver_api: Option<unsafe extern "C" fn(u32, u8) -> CuptiResult>,
    pub activity_get_next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    pub activity_get_num_dropped_records: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    pub activity_flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub activity_push_external_correlation_id: unsafe extern "C" fn(u32, u64) -> CuptiResult,
    pub activity_pop_external_correlation_id: unsafe extern "C" fn(u32, *mut u64) -> CuptiResult,
    pub activity_set_attribute: unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> CuptiResult,
    pub get_graph_node_id: Option<unsafe extern "C" fn(*mut c_void, *mut u64) -> CuptiResult>,
    pub get_graph_id: Option<unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult>,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    pub get_context_id: Option<unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult>,
    pub get_device_id: Option<unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult>,
    pub get_stream_id_ex: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, u8, *mut u32) -> CuptiResult>,
    pub finalize: Option<unsafe extern "C" fn() -> CuptiResult>,
    /// CUPTI's NVTX injection entry point (`InitializeInjectionNvtx2`), forwarded to by ours.
    pub nvtx_init: Option<unsafe extern "C" fn(*const c_void) -> i32>,
}

/// Why CUPTI could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate loaded: `tried` lists each path with the loader's message.
    NotFound { tried: Vec<(String, String)> },
    /// A CUPTI loaded but is older than this build's layouts.
    TooOld { path: String, api_version: u32 },
    /// A CUPTI loaded but lacks a required function.
    MissingSymbol { path: String, symbol: &'static str },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound { tried } => {
                write!(f, "CUPTI not found; CUDA tracing is off (set OFFTRACE_CUPTI=/path/to/libcupti.so.13). Tried:")?;
                for (p, why) in tried {
                    write!(f, "\n  {p}: {why}")?;
                }
                Ok(())
            }
            LoadError::TooOld { path, api_version } => write!(
                f,
                "{path} is CUPTI API version {api_version}; this build reads the record layouts of {MIN_API_VERSION} and later (CUDA 13): CUDA tracing is off"
            ),
            LoadError::MissingSymbol { path, symbol } => {
                write!(f, "{path} has no {symbol}: not a usable CUPTI; CUDA tracing is off")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// The candidate paths, in the order of the module docs. `maps` is the text of
/// `/proc/self/maps`; `env` reads an environment variable.
pub fn candidates(maps: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    if let Some(p) = env("OFFTRACE_CUPTI").filter(|p| !p.is_empty()) {
        push(PathBuf::from(p));
    }
    let mapped = |needle: &str| -> Vec<PathBuf> {
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| {
                p.starts_with('/') && Path::new(p).file_name().is_some_and(|n| n.to_string_lossy().starts_with(needle))
            })
            .map(PathBuf::from)
            .collect()
    };
    for p in mapped("libcupti.so") {
        push(p);
    }
    for rt in mapped("libcudart.so") {
        if let Some(dir) = rt.parent() {
            for v in ["libcupti.so.13", "libcupti.so"] {
                push(dir.join(v));
            }
        }
    }
    let mut homes: Vec<String> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|v| env(v)).filter(|v| !v.is_empty()).collect();
    homes.push("/usr/local/cuda".into());
    for h in homes {
        for sub in ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"] {
            push(Path::new(&h).join(sub).join("libcupti.so.13"));
        }
    }
    push(PathBuf::from("libcupti.so.13"));
    out
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by libc, read at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Loads the first usable candidate. Never unloads anything (a CUPTI that was loaded stays, as
/// the driver may already hold callbacks into it).
pub fn load() -> Result<Cupti, LoadError> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let env = |k: &str| std::env::var(k).ok();
    let mut tried = Vec::new();
    let mut last_err = None;
    for path in candidates(&maps, &env) {
        let bare = path.components().count() == 1;
        if !bare && !path.is_file() {
            tried.push((path.display().to_string(), "no such file".to_string()));
            continue;
        }
        let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else { continue };
        // SAFETY: c is NUL-terminated; RTLD_NOW|RTLD_GLOBAL: CUPTI's own NVTX injection looks
        // itself up by name, and the copy stays loaded for the process.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            tried.push((path.display().to_string(), dlerror_text()));
            continue;
        }
        let shown = resolved_path(h).unwrap_or_else(|| path.display().to_string());
        match bind(h, shown) {
            Ok(c) => return Ok(c),
            Err(e) => {
                tried.push((path.display().to_string(), e.to_string()));
                last_err = Some(e);
            }
        }
    }
    Err(match last_err {
        Some(e @ LoadError::TooOld { .. }) => e,
        _ => LoadError::NotFound { tried },
    })
}

/// The file a handle was loaded from (`dlinfo`-free: the address of one of its symbols).
fn resolved_path(h: *mut c_void) -> Option<String> {
    // SAFETY: h is a live handle; the symbol name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, c"cuptiGetVersion".as_ptr()) };
    if sym.is_null() {
        return None;
    }
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: sym is an address inside a loaded object; info is a valid out-parameter.
    if unsafe { libc::dladdr(sym, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned())
}

fn bind(h: *mut c_void, path: String) -> Result<Cupti, LoadError> {
    let leaked: &'static str = Box::leak(path.into_boxed_str());
    let sym = |name: &'static CStr| -> *mut c_void {
        // SAFETY: h is a live handle; name is NUL-terminated.
        unsafe { libc::dlsym(h, name.as_ptr()) }
    };
    macro_rules! req {
        ($name:literal) => {{
            let p = sym($name);
            if p.is_null() {
                return Err(LoadError::MissingSymbol { path: leaked.into(), symbol: $name.to_str().unwrap_or("?") });
            }
            // SAFETY: the symbol is CUPTI's function of that name, whose C signature is the
            // field's type (cupti_*.h of CUPTI 13).
            unsafe { fn_ptr(p) }
        }};
    }
    macro_rules! opt {
        ($name:literal) => {{
            let p = sym($name);
            // SAFETY: as in req!: the named CUPTI function has the field's signature.
            if p.is_null() { None } else { Some(unsafe { fn_ptr(p) }) }
        }};
    }
    let get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult = req!(c"cuptiGetVersion");
    let mut api_version = 0u32;
    // SAFETY: api_version is a valid out-parameter.
    unsafe { get_version(&mut api_version) };
    if api_version < MIN_API_VERSION {
        return Err(LoadError::TooOld { path: leaked.into(), api_version });
    }
    Ok(Cupti {
        path: leaked,
        api_version,
        get_result_string: req!(c"cuptiGetResultString"),
        subscribe: req!(c"cuptiSubscribe"),
        subscribe_v2: opt!(c"cuptiSubscribe_v2"),
        unsubscribe: req!(c"cuptiUnsubscribe"),
        enable_domain: req!(c"cuptiEnableDomain"),
        enable_callback: req!(c"cuptiEnableCallback"),
        activity_register_callbacks: req!(c"cuptiActivityRegisterCallbacks"),
        activity_register_timestamp_callback: opt!(c"cuptiActivityRegisterTimestampCallback"),
        activity_enable: req!(c"cuptiActivityEnable"),
        activity_disable: req!(c"cuptiActivityDisable"),
        activity_enable_driver_api: opt!(c"cuptiActivityEnableDriverApi"),
        activity_get_next_record: req!(c"cuptiActivityGetNextRecord"),
        activity_get_num_dropped_records: req!(c"cuptiActivityGetNumDroppedRecords"),
        activity_flush_all: req!(c"cuptiActivityFlushAll"),
        activity_push_external_correlation_id: req!(c"cuptiActivityPushExternalCorrelationId"),
        activity_pop_external_correlation_id: req!(c"cuptiActivityPopExternalCorrelationId"),
        activity_set_attribute: req!(c"cuptiActivitySetAttribute"),
        get_graph_node_id: opt!(c"cuptiGetGraphNodeId"),
        get_graph_id: opt!(c"cuptiGetGraphId"),
        get_timestamp: req!(c"cuptiGetTimestamp"),
        get_context_id: opt!(c"cuptiGetContextId"),
        get_device_id: opt!(c"cuptiGetDeviceId"),
        get_stream_id_ex: opt!(c"cuptiGetStreamIdEx"),
        finalize: opt!(c"cuptiFinalize"),
        nvtx_init: opt!(c"InitializeInjectionNvtx2"),
    })
}

/// A resolved symbol as the function pointer type `F`.
///
/// # Safety
/// `p` must be non-null and the address of a function whose C signature is `F`; `F` must be a
/// function pointer type (pointer-sized).
pub unsafe fn fn_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked); the caller guarantees the signature.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

impl Cupti {
    /// CUPTI's name of a result code.
    pub fn result_string(&self, r: CuptiResult) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: s is a valid out-parameter; CUPTI returns a static string or leaves it null.
        if unsafe { (self.get_result_string)(r, &mut s) } != 0 || s.is_null() {
            return format!("CUPTI error {r}");
        }
        // SAFETY: non-null static NUL-terminated string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

/// Whether `r` is `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`.
pub fn is_multiple_subscribers(r: CuptiResult) -> bool {
    i64::from(r) == l::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
7f0000000000-7f0000100000 r-xp 00000000 00:00 1 /opt/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13
7f0000200000-7f0000300000 r-xp 00000000 00:00 1 /opt/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13
7f0000400000-7f0000500000 rw-p 00000000 00:00 0 [heap]
";

    #[test]
    fn order_is_user_then_loaded_then_beside_runtime_then_toolkit() {
        let env = |k: &str| match k {
            "OFFTRACE_CUPTI" => Some("/my/libcupti.so.13".to_string()),
            "CUDA_HOME" => Some("/opt/cuda".to_string()),
            _ => None,
        };
        let c = candidates(MAPS, &env);
        let s: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(s[0], "/my/libcupti.so.13");
        assert_eq!(s[1], "/opt/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
        // The runtime's directory gives the same file again: listed once.
        assert_eq!(s[2], "/opt/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so");
        assert_eq!(s[3], "/opt/cuda/lib64/libcupti.so.13");
        assert!(s.contains(&"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13".to_string()));
        assert_eq!(s.last().map(String::as_str), Some("libcupti.so.13"));
    }

    #[test]
    fn without_cuda_nothing_loads_and_the_message_says_where_it_looked() {
        // This machine has no CUDA (or, where it has, OFFTRACE_CUPTI points nowhere valid).
        let c = candidates("", &|k| (k == "OFFTRACE_CUPTI").then(|| "/nonexistent/libcupti.so.13".to_string()));
        assert_eq!(c[0], PathBuf::from("/nonexistent/libcupti.so.13"));
        if std::path::Path::new("/usr/local/cuda").exists() {
            return;
        }
        match load() {
            Err(e @ LoadError::NotFound { .. }) => {
                let text = e.to_string();
                assert!(text.contains("CUPTI not found"), "{text}");
                assert!(text.contains("libcupti.so.13"), "{text}");
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }

    #[test]
    fn a_library_without_cupti_symbols_is_refused() {
        // libc loads but is no CUPTI.
        // SAFETY: loading libc again is harmless.
        let h = unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW) };
        assert!(!h.is_null());
        match bind(h, "libc.so.6".into()) {
            Err(LoadError::MissingSymbol { symbol, .. }) => assert_eq!(symbol, "cuptiGetVersion"),
            other => panic!("expected MissingSymbol, got {other:?}"),
        }
    }
}
