//! The XPTI dispatcher functions the agent calls, resolved with `dlsym` from the dispatcher that
//! loaded it (never linked: the runtime's proxy loads the dispatcher `RTLD_LOCAL`, so the agent
//! finds it by path with `RTLD_NOLOAD`, or by its SONAME `libxptifw.so.1`).

use std::ffi::{CStr, CString, c_char, c_void};

use offtrace_xpti_abi::abi::{ObjectData, Payload, TraceEventData, TracepointCallback, XptiResult};

pub type RegisterStreamFn = unsafe extern "C" fn(*const c_char) -> u8;
pub type RegisterCallbackFn = unsafe extern "C" fn(u8, u16, TracepointCallback) -> XptiResult;
pub type LookupStringFn = unsafe extern "C" fn(u32) -> *const c_char;
pub type LookupObjectFn = unsafe extern "C" fn(i32) -> ObjectData;
pub type QueryPayloadFn = unsafe extern "C" fn(*mut TraceEventData) -> *const Payload;
pub type GetStashedTupleFn = unsafe extern "C" fn(*mut *mut c_char, *mut u64) -> XptiResult;
pub type GetUniversalIdFn = unsafe extern "C" fn() -> u64;

/// The dispatcher's entry points. Required ones are plain fn pointers; the rest may be absent.
#[derive(Debug, Clone, Copy)]
pub struct Dispatcher {
    pub register_stream: RegisterStreamFn,
    pub register_callback: RegisterCallbackFn,
    pub lookup_string: LookupStringFn,
    pub lookup_object: LookupObjectFn,
    pub query_payload: Option<QueryPayloadFn>,
    pub get_stashed_tuple: Option<GetStashedTupleFn>,
    pub get_universal_id: Option<GetUniversalIdFn>,
}

/// Where the dispatcher was found, for the `dispatcher` Info record.
#[derive(Debug, Clone)]
pub struct Located {
    pub dispatcher: Dispatcher,
    pub path: String,
}

fn sym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: `handle` is a live handle from dlopen and `name` is NUL-terminated.
    #[allow(unsafe_code)]
    unsafe {
        libc::dlsym(handle, name.as_ptr())
    }
}

/// Finds the already-loaded dispatcher: `$XPTI_FRAMEWORK_DISPATCHER`, then `libxptifw.so.1`.
/// Cold; called once from the first `xptiTraceInit`.
#[cold]
pub fn locate() -> Result<Located, String> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("XPTI_FRAMEWORK_DISPATCHER").filter(|p| !p.is_empty()) {
        candidates.push(p.to_string_lossy().into_owned());
    }
    candidates.push("libxptifw.so.1".to_owned());
    for path in &candidates {
        let Ok(c) = CString::new(path.as_str()) else { continue };
        // SAFETY: `c` is NUL-terminated; RTLD_NOLOAD never loads (so no constructors run), it
        // only returns a handle to an object already mapped.
        #[allow(unsafe_code)]
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if h.is_null() {
            continue;
        }
        if let Some(d) = bind(h) {
            return Ok(Located { dispatcher: d, path: path.clone() });
        }
        return Err(format!("{path} lacks a required XPTI function"));
    }
    Err(format!("no loaded XPTI dispatcher among {candidates:?}"))
}

/// Resolves the entry points in a dlopen handle; `None` if a required one is missing.
pub fn bind(h: *mut c_void) -> Option<Dispatcher> {
    let rs = sym(h, c"xptiRegisterStream");
    let rc = sym(h, c"xptiRegisterCallback");
    let ls = sym(h, c"xptiLookupString");
    let lo = sym(h, c"xptiLookupObject");
    if rs.is_null() || rc.is_null() || ls.is_null() || lo.is_null() {
        return None;
    }
    let qp = sym(h, c"xptiQueryPayload");
    let gs = sym(h, c"xptiGetStashedTuple");
    let gu = sym(h, c"xptiGetUniversalId");
    // SAFETY (all transmutes below):
    // - each pointer is non-null and was returned by dlsym for the XPTI function of that name;
    // - the fn pointer types are the prototypes of xpti_trace_framework.h 2026.2 (docs/reference/xpti-abi.md §2),
    //   including `xptiLookupObject` returning the 24-byte `object_data_t` by value.
    #[allow(unsafe_code)]
    unsafe {
        Some(Dispatcher {
            register_stream: std::mem::transmute::<*mut c_void, RegisterStreamFn>(rs),
            register_callback: std::mem::transmute::<*mut c_void, RegisterCallbackFn>(rc),
            lookup_string: std::mem::transmute::<*mut c_void, LookupStringFn>(ls),
            lookup_object: std::mem::transmute::<*mut c_void, LookupObjectFn>(lo),
            query_payload: (!qp.is_null()).then(|| std::mem::transmute::<*mut c_void, QueryPayloadFn>(qp)),
            get_stashed_tuple: (!gs.is_null()).then(|| std::mem::transmute::<*mut c_void, GetStashedTupleFn>(gs)),
            get_universal_id: (!gu.is_null()).then(|| std::mem::transmute::<*mut c_void, GetUniversalIdFn>(gu)),
        })
    }
}
