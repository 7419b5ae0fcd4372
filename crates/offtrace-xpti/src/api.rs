//! A safe Rust API over the same dispatcher state the C exports use, for Rust runtimes and
//! tools living in the same process (a Rust runtime emitting XPTI events, or a Rust subscriber
//! reading them). Everything here goes through the functions of [`crate::dispatch`], so events
//! made here are visible to C subscribers and the other way round.
//!
//! ```
//! use offtrace_xpti::api::{self, MetadataValue, Tracepoint};
//!
//! let stream = api::register_stream("my.runtime");
//! let kernel = Tracepoint::new("launch_kernel", "runtime.rs", 42, 7);
//! let size = api::register_object(&64u64.to_le_bytes(), MetadataValue::UnsignedInteger);
//! kernel.add_metadata("size", size).expect("metadata");
//! let corr = api::unique_id();
//! if api::check_trace_enabled(stream, api::trace_type::TASK_BEGIN) {
//!     api::notify(stream, api::trace_type::TASK_BEGIN, None, Some(&kernel), corr).expect("notify");
//! }
//! assert_eq!(kernel.metadata().len(), 1);
//! ```

use std::ffi::{CStr, CString, c_char};
use std::ptr::NonNull;

use crate::abi::{self, MetadataNode, TraceEventData};
pub use crate::abi::{TracepointCallback, trace_type};
use crate::dispatch as d;

/// Errors of the XPTI API, one per XPTI error result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XptiError {
    /// `XPTI_RESULT_INVALIDARG`: a null, empty or out-of-range argument.
    #[error("invalid argument")]
    InvalidArgument,
    /// `XPTI_RESULT_NOTFOUND`.
    #[error("not found")]
    NotFound,
    /// `XPTI_RESULT_DUPLICATE`: already in the requested state.
    #[error("duplicate")]
    Duplicate,
    /// `XPTI_RESULT_FALSE`: tracing is disabled.
    #[error("tracing is disabled")]
    Disabled,
    /// `XPTI_RESULT_FAIL` or any other code.
    #[error("XPTI call failed with result {0:#x}")]
    Failed(i32),
    /// A string argument contained a NUL byte.
    #[error("string contains a NUL byte")]
    NulByte,
}

fn check(r: abi::XptiResult) -> Result<(), XptiError> {
    match r {
        abi::XPTI_RESULT_SUCCESS | abi::XPTI_RESULT_UNDELETE => Ok(()),
        abi::XPTI_RESULT_FALSE => Err(XptiError::Disabled),
        abi::XPTI_RESULT_INVALIDARG => Err(XptiError::InvalidArgument),
        abi::XPTI_RESULT_NOTFOUND => Err(XptiError::NotFound),
        abi::XPTI_RESULT_DUPLICATE => Err(XptiError::Duplicate),
        other => Err(XptiError::Failed(other)),
    }
}

fn cstring(s: &str) -> Result<CString, XptiError> {
    CString::new(s).map_err(|_| XptiError::NulByte)
}

/// An 8-bit stream ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub u8);

/// A string-table ID (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StringId(pub u32);

/// An object-table ID (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectId(pub i32);

/// How a metadata value's bytes are to be read (`metadata_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MetadataValue {
    /// Opaque bytes.
    Binary = 0,
    /// A string (without NUL).
    String = 1,
    /// A little-endian signed integer.
    SignedInteger = 2,
    /// A little-endian unsigned integer.
    UnsignedInteger = 3,
    /// A float or double.
    Floating = 4,
    /// A boolean.
    Boolean = 5,
}

/// Whether tracing is on (`xptiTraceEnabled`).
pub fn trace_enabled() -> bool {
    d::trace_enabled()
}

/// Forces tracing on or off (`xptiForceSetTraceEnabled`), for tests and tools without subscribers.
pub fn force_trace_enabled(on: bool) {
    d::force_set_trace_enabled(on);
}

/// Registers (or finds) a stream. Names with a NUL byte map to stream 255, like a NULL name.
pub fn register_stream(name: &str) -> StreamId {
    match CString::new(name) {
        // SAFETY: a valid C string.
        Ok(c) => StreamId(unsafe { d::register_stream(c.as_ptr()) }),
        Err(_) => StreamId(255),
    }
}

/// Announces a stream to the subscribers (`xptiInitialize`).
pub fn initialize_stream(name: &str, major: u32, minor: u32, version: &str) -> Result<(), XptiError> {
    let (n, v) = (cstring(name)?, cstring(version)?);
    // SAFETY: valid C strings.
    check(unsafe { d::initialize(n.as_ptr(), major, minor, v.as_ptr()) })
}

/// Tells the subscribers a stream ends (`xptiFinalize`).
pub fn finalize_stream(name: &str) -> Result<(), XptiError> {
    let n = cstring(name)?;
    // SAFETY: a valid C string.
    unsafe { d::finalize(n.as_ptr()) };
    Ok(())
}

/// Whether a notification of this (stream, type) would reach a callback (`xptiCheckTraceEnabled`;
/// type 0 = any type of the stream).
#[inline]
pub fn check_trace_enabled(stream: StreamId, trace_type: u16) -> bool {
    d::check_trace_enabled(stream.0, trace_type)
}

/// The stream's effective detail level (`xptiGetEffectiveStreamDetailLevel`).
pub fn detail_level(stream: StreamId) -> u8 {
    d::get_effective_stream_detail_level(stream.0)
}

/// A fresh correlation ID (`xptiGetUniqueId`).
#[inline]
pub fn unique_id() -> u64 {
    d::get_unique_id()
}

/// Interns a string; the returned `CStr` lives for the whole process.
pub fn intern(s: &str) -> Result<(StringId, &'static CStr), XptiError> {
    let c = cstring(s)?;
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: valid C string and out pointer.
    let id = unsafe { d::register_string(c.as_ptr(), &mut out) };
    if id == abi::INVALID_STRING_ID || out.is_null() {
        return Err(XptiError::Failed(abi::XPTI_RESULT_FAIL));
    }
    // SAFETY: interned strings are NUL-terminated and never freed.
    Ok((StringId(id), unsafe { CStr::from_ptr(out) }))
}

/// The interned string with this ID.
pub fn lookup_string(id: StringId) -> Option<&'static CStr> {
    let p = d::lookup_string(id.0);
    // SAFETY: non-null results point to never-freed interned C strings.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// Registers a metadata value (de-duplicated by bytes: equal bytes keep the first type).
pub fn register_object(bytes: &[u8], kind: MetadataValue) -> ObjectId {
    // SAFETY: `bytes` is a valid slice.
    ObjectId(unsafe { d::register_object(bytes.as_ptr().cast(), bytes.len(), kind as u8) })
}

/// The bytes and type byte of a registered value.
pub fn lookup_object(id: ObjectId) -> Option<(&'static [u8], u8)> {
    let o = d::lookup_object(id.0);
    // SAFETY: object data lives in never-freed arenas; `size` bytes are readable.
    (o.size > 0).then(|| (unsafe { std::slice::from_raw_parts(o.data.cast::<u8>(), o.size) }, o.type_))
}

/// A registered callback; unregisters on drop unless [`forget`](Registration::forget)ten.
#[derive(Debug)]
#[must_use = "dropping the registration unregisters the callback"]
pub struct Registration {
    stream: StreamId,
    trace_type: u16,
    cb: TracepointCallback,
}

impl Registration {
    /// Keeps the callback registered for the rest of the process.
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = d::unregister_callback(self.stream.0, self.trace_type, Some(self.cb));
    }
}

/// Registers a callback for (stream, type).
pub fn register_callback(stream: StreamId, trace_type: u16, cb: TracepointCallback) -> Result<Registration, XptiError> {
    check(d::register_callback(stream.0, trace_type, Some(cb)))?;
    Ok(Registration { stream, trace_type, cb })
}

/// Notifies the subscribers of (stream, type) about `event` (with an optional parent).
pub fn notify(
    stream: StreamId,
    trace_type: u16,
    parent: Option<&Tracepoint>,
    event: Option<&Tracepoint>,
    instance: u64,
) -> Result<(), XptiError> {
    let p = parent.map_or(std::ptr::null_mut(), |t| t.event_ptr());
    let e = event.map_or(std::ptr::null_mut(), |t| t.event_ptr());
    // SAFETY: the events are live (borrowed tracepoints); no user data.
    check(unsafe { d::notify_subscribers(stream.0, trace_type, p, e, instance, std::ptr::null()) })
}

/// A tracepoint instance owned by Rust code: created with a new instance number, deleted on drop.
#[derive(Debug)]
pub struct Tracepoint {
    tp: NonNull<std::ffi::c_void>,
}

impl Tracepoint {
    /// Creates an instance (`xptiCreateTracepoint`). Names with NUL bytes or empty names become
    /// `"<unknown-function>"` / `"<unknown-file>"`.
    pub fn new(function: &str, file: &str, line: u32, column: u32) -> Tracepoint {
        let f = CString::new(function).unwrap_or_default();
        let s = CString::new(file).unwrap_or_default();
        // SAFETY: valid C strings; no code pointer.
        let p = unsafe { d::create_tracepoint(f.as_ptr(), s.as_ptr(), line, column, std::ptr::null_mut()) };
        Tracepoint { tp: NonNull::new(p).unwrap_or_else(|| std::process::abort()) }
    }

    fn event_ptr(&self) -> *mut TraceEventData {
        let f = crate::framework::fw();
        let ev = f.slab.event_of_interface(self.tp.as_ptr() as usize, crate::shim::layout::TRACEPOINT_IFACE);
        // A tracepoint's interface pointer always lies on a side cell of this slab.
        crate::instance::event_of(ev.unwrap_or_else(|| std::process::abort()))
    }

    fn event(&self) -> &TraceEventData {
        // SAFETY: the instance is live while `self` exists (deleted only in Drop).
        unsafe { &*self.event_ptr() }
    }

    /// The uid64 (address of the instance).
    pub fn uid64(&self) -> u64 {
        self.event().unique_id
    }

    /// The instance number of this key (1, 2, 3 …).
    pub fn instance(&self) -> u64 {
        self.event().instance_id
    }

    /// The function name stored in the payload.
    pub fn function(&self) -> &CStr {
        // SAFETY: the stored payload's name is a never-freed C string (never null here: bad names
        // were replaced by "<unknown-function>").
        unsafe { CStr::from_ptr((*self.event().reserved.payload).name) }
    }

    /// Adds (or overwrites) a metadata item. `Err(Duplicate)` means overwritten.
    pub fn add_metadata(&self, key: &str, value: ObjectId) -> Result<(), XptiError> {
        let k = cstring(key)?;
        // SAFETY: live event, valid C string.
        check(unsafe { d::add_metadata(self.event_ptr(), k.as_ptr(), value.0) })
    }

    /// The metadata items (key, value), in the map's iteration order.
    pub fn metadata(&self) -> Vec<(StringId, ObjectId)> {
        let mut out = Vec::new();
        let mut n: *const MetadataNode = self.event().reserved.metadata.before_begin_next;
        while !n.is_null() {
            // SAFETY: nodes of a live libstdc++ map, not mutated concurrently by this thread.
            let node = unsafe { &*n };
            out.push((StringId(node.key), ObjectId(node.value)));
            n = node.next;
        }
        out
    }

    /// Makes this the thread's scope tracepoint until the guard drops
    /// (`xptiSetTracepointScopeData` / `xptiUnsetTracepointScopeData`).
    pub fn enter_scope(&self) -> ScopeGuard<'_> {
        let _ = d::set_tracepoint_scope_data(self.tp.as_ptr());
        ScopeGuard { _tp: self }
    }
}

impl Drop for Tracepoint {
    fn drop(&mut self) {
        // SAFETY: the instance is ours (created in `new`), and `self` is going away.
        let _ = unsafe { d::delete_tracepoint(self.tp.as_ptr()) };
    }
}

/// RAII guard of [`Tracepoint::enter_scope`].
#[derive(Debug)]
#[must_use = "the scope ends when the guard drops"]
pub struct ScopeGuard<'a> {
    _tp: &'a Tracepoint,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        d::unset_tracepoint_scope_data();
    }
}

/// The thread's universal ID (the uid64 of the current scope, or what was set).
pub fn universal_id() -> u64 {
    d::get_universal_id()
}
