//! Subscriber loading (`XPTI_SUBSCRIBERS`) and the subscriber protocol (`docs/reference/xpti-abi.md` §9.2).
//!
//! Each listed path is `dlopen`ed (`RTLD_LAZY`) once; it must export `xptiTraceInit` and
//! `xptiTraceFinish`, and may export `xptiQuerySubscriberStreamDetailLevel`. Subscribers are
//! kept in the order of their `dlopen` handle, as Intel's `std::map` keyed by handle does. Calls
//! into subscribers are made with no lock held: they re-enter the dispatcher.

use std::ffi::{CStr, CString, c_char, c_void};

/// `void xptiTraceInit(unsigned major, unsigned minor, const char *version, const char *stream)`.
pub type TraceInitFn = unsafe extern "C" fn(u32, u32, *const c_char, *const c_char);
/// `void xptiTraceFinish(const char *stream)`.
pub type TraceFinishFn = unsafe extern "C" fn(*const c_char);
/// `bool xptiQuerySubscriberStreamDetailLevel(const char *stream, uint8_t *level)`.
pub type QueryDetailFn = unsafe extern "C" fn(*const c_char, *mut u8) -> bool;

/// One loaded subscriber library.
#[derive(Debug, Clone, Copy)]
pub struct Subscriber {
    /// The `dlopen` handle.
    pub handle: usize,
    /// `xptiTraceInit`.
    pub init: TraceInitFn,
    /// `xptiTraceFinish`.
    pub finish: TraceFinishFn,
    /// `xptiQuerySubscriberStreamDetailLevel`, when exported.
    pub query: Option<QueryDetailFn>,
}

impl Subscriber {
    /// Calls `xptiTraceInit` then, if exported, the detail-level query (pre-set to NORMAL; the
    /// boolean result is ignored as in Intel's dispatcher). Returns the level this subscriber wants.
    ///
    /// # Safety
    /// The strings must be valid C strings for the duration of the call.
    pub unsafe fn announce(&self, major: u32, minor: u32, version: *const c_char, stream: *const c_char) -> u8 {
        // SAFETY: the subscriber's exported init function, called with valid strings.
        unsafe { (self.init)(major, minor, version, stream) };
        let mut level = crate::abi::detail_level::NORMAL;
        if let Some(q) = self.query {
            // SAFETY: exported query function; `level` is a valid out pointer.
            unsafe { q(stream, &mut level) };
        }
        level
    }
}

/// Parses `XPTI_TRACE_ENABLE`: unset or empty → true; `1`/`true` → true; anything else → false.
pub fn trace_enable_allows(value: Option<&str>) -> bool {
    match value {
        None | Some("") => true,
        Some(v) => v == "1" || v == "true",
    }
}

/// Loads every subscriber listed in `list` (comma-separated, not trimmed, duplicates once).
/// Failures are reported on stderr (Intel prints them on stdout) and skipped.
pub fn load_all(list: &str) -> Vec<Subscriber> {
    let mut seen: Vec<&str> = Vec::new();
    let mut subs = Vec::new();
    for path in list.split(',') {
        if path.is_empty() || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        match load_one(path) {
            Ok(s) => {
                if !subs.iter().any(|o: &Subscriber| o.handle == s.handle) {
                    subs.push(s);
                }
            }
            Err(msg) => {
                eprintln!("[{path}]: {msg}");
                eprintln!("Failed to load {path} successfully");
            }
        }
    }
    subs.sort_by_key(|s| s.handle);
    subs
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns null or a valid C string owned by libc.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_owned()
    } else {
        // SAFETY: non-null dlerror result is a valid C string.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load_one(path: &str) -> Result<Subscriber, String> {
    let c = CString::new(path).map_err(|_| "path contains a NUL byte".to_owned())?;
    // SAFETY: `c` is a valid C string; dlopen runs the library's constructors.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY) };
    if h.is_null() {
        return Err(dlerror_text());
    }
    let sym = |name: &CStr| -> *mut c_void {
        // SAFETY: `h` is a live handle, `name` a valid C string.
        unsafe { libc::dlsym(h, name.as_ptr()) }
    };
    let init = sym(c"xptiTraceInit");
    let finish = sym(c"xptiTraceFinish");
    if init.is_null() || finish.is_null() {
        // SAFETY: `h` came from dlopen above and is not used afterwards.
        unsafe { libc::dlclose(h) };
        return Err("missing xptiTraceInit or xptiTraceFinish".to_owned());
    }
    let query = sym(c"xptiQuerySubscriberStreamDetailLevel");
    // SAFETY:
    // - the symbols are the subscriber's exported functions with the documented C signatures.
    unsafe {
        Ok(Subscriber {
            handle: h as usize,
            init: std::mem::transmute::<*mut c_void, TraceInitFn>(init),
            finish: std::mem::transmute::<*mut c_void, TraceFinishFn>(finish),
            query: (!query.is_null()).then(|| std::mem::transmute::<*mut c_void, QueryDetailFn>(query)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_enable_parsing() {
        assert!(trace_enable_allows(None));
        assert!(trace_enable_allows(Some("")));
        assert!(trace_enable_allows(Some("1")));
        assert!(trace_enable_allows(Some("true")));
        assert!(!trace_enable_allows(Some("0")));
        assert!(!trace_enable_allows(Some("false")));
        assert!(!trace_enable_allows(Some("yes")));
        assert!(!trace_enable_allows(Some("TRUE")));
    }

    #[test]
    fn bad_paths_are_skipped() {
        assert!(load_all("/nonexistent/a.so,,/nonexistent/a.so").is_empty());
    }
}
