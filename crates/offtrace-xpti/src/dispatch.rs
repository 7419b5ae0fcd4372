//! The 50 XPTI 2026.2 entry points, implemented with C signatures but **not exported** from this
//! rlib (the `offtrace-xptifw` cdylib exports them under their XPTI names, each wrapped in
//! `catch_unwind`; other cdylibs linking this crate must not re-export `xpti*`).
//!
//! Narrow integer and `bool` arguments are taken as `u32` and truncated here: callers built
//! against older headers pass 16-bit stream IDs, and the 2026.2 binary reads only the low byte
//! (`docs/reference/xpti-abi.md` §1, §14.4). Semantics follow `docs/reference/xpti-abi.md` §2; deliberate deviations are
//! listed in `docs/xpti-compatibility.md` and marked "Deviation" below.

use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

use crate::abi::*;
use crate::framework::{FRAMEWORK_REFS, fw, fw_if_built, fw_if_enabled};
use crate::instance::{self, Normalized, Spec, UNKNOWN_FILE, UNKNOWN_FUNCTION};
use crate::shim::{self, layout};
use crate::tls;

static EMPTY_OBJECT: [u8; 8] = [0; 8];

/// # Safety
/// `p` is null or a valid C string.
#[inline]
unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a CStr> {
    // SAFETY: caller contract.
    if p.is_null() { None } else { Some(unsafe { CStr::from_ptr(p) }) }
}

/// The header's inline `is_valid_payload`.
pub fn is_valid_payload(p: &Payload) -> bool {
    use payload_flags as pf;
    let has_name = p.flags & pf::NAME_AVAILABLE != 0 && !p.name.is_null();
    let has_file = p.flags & pf::SOURCE_FILE_AVAILABLE != 0 && !p.source_file.is_null();
    let has_line = p.flags & pf::LINE_INFO_AVAILABLE != 0 && p.line_no != INVALID_LINE;
    let has_code = p.flags & pf::CODE_POINTER_AVAILABLE != 0 && !p.code_ptr_va.is_null();
    (has_file && has_line) || has_name || has_code
}

// ------------------------------------------------------------------ 2.1 lifecycle

/// #1 `xptiFrameworkInitialize`.
pub fn framework_initialize() {
    FRAMEWORK_REFS.fetch_add(1, Ordering::AcqRel);
}

/// #2 `xptiFrameworkFinalize`. Deviation: the count is clamped at 0 and reaching 0 does not
/// tear the framework down (late calls from the UR loader keep working; subscribers stay
/// loaded until process exit).
pub fn framework_finalize() {
    let _ = FRAMEWORK_REFS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n > 0).then(|| n - 1));
}

/// #3 `xptiInitialize`.
///
/// # Safety
/// `stream` and `version` are null or valid C strings.
pub unsafe fn initialize(stream: *const c_char, major: u32, minor: u32, version: *const c_char) -> XptiResult {
    if stream.is_null() || version.is_null() {
        return XPTI_RESULT_INVALIDARG;
    }
    let f = fw();
    let subs = f.subscribers();
    f.announce_framework_stream(&subs);
    let mut level = detail_level::NONE;
    for s in &subs {
        // SAFETY: valid C strings (caller contract), alive during the call.
        level = level.max(unsafe { s.announce(major, minor, version, stream) });
    }
    // SAFETY: non-null, valid C string.
    let id = f.register_stream(unsafe { CStr::from_ptr(stream) });
    // Relaxed: a byte read by lock-free loads; no data hangs off it.
    f.detail[id as usize].store(level, Ordering::Relaxed);
    XPTI_RESULT_SUCCESS
}

/// #4 `xptiFinalize`.
///
/// # Safety
/// `stream` is null or a valid C string.
pub unsafe fn finalize(stream: *const c_char) {
    let f = fw();
    let subs = f.subscribers();
    f.finish_framework_stream(&subs);
    // SAFETY: caller contract.
    let Some(name) = (unsafe { cstr(stream) }) else { return };
    for s in &subs {
        // SAFETY: exported finish function, valid string.
        unsafe { (s.finish)(stream) };
    }
    if let Some(n) = f.streams.lookup(name.to_bytes()) {
        f.callbacks.disable_stream(n.id as u8);
    }
}

// ------------------------------------------------------------------ 2.5 TLS and IDs

/// #5 `xptiGetUniversalId`.
#[inline]
pub fn get_universal_id() -> u64 {
    tls::universal_id()
}

/// #6 `xptiSetUniversalId`.
#[inline]
pub fn set_universal_id(uid: u64) {
    tls::set_universal_id(uid);
}

/// #7 `xptiGetStashedTuple`.
///
/// # Safety
/// Non-null pointers are valid for writes.
pub unsafe fn get_stashed_tuple(key_out: *mut *mut c_char, value_out: *mut u64) -> XptiResult {
    if key_out.is_null() || value_out.is_null() {
        return XPTI_RESULT_INVALIDARG;
    }
    match tls::stashed() {
        None => XPTI_RESULT_NOTFOUND,
        Some((k, v)) => {
            // SAFETY: valid out pointers (caller contract).
            unsafe {
                *key_out = k.cast_mut();
                *value_out = v;
            }
            XPTI_RESULT_SUCCESS
        }
    }
}

/// #8 `xptiStashTuple`.
pub fn stash_tuple(key: *const c_char, value: u64) -> XptiResult {
    if key.is_null() {
        return XPTI_RESULT_FAIL;
    }
    tls::stash(key, value);
    XPTI_RESULT_SUCCESS
}

/// #9 `xptiUnstashTuple`. Deviation: pops the tuple (Intel's is a no-op); set
/// `OFFTRACE_XPTI_STICKY_STASH=1` for Intel's sticky behaviour.
pub fn unstash_tuple() {
    if fw_if_built().is_some_and(|f| f.sticky_stash) {
        return;
    }
    tls::unstash();
}

/// #10 `xptiGetUniqueId`.
#[inline]
pub fn get_unique_id() -> u64 {
    match fw_if_built() {
        // Relaxed: only uniqueness is needed.
        Some(f) => f.unique_id.fetch_add(1, Ordering::Relaxed),
        None => get_unique_id_cold(),
    }
}

// The first call of a process builds the framework. These cold halves are `extern "C"` (they
// cannot unwind) and tail-called, so the hot halves save no registers and need no landing pad.

#[cold]
#[inline(never)]
extern "C" fn get_unique_id_cold() -> u64 {
    // Relaxed: as in `get_unique_id`.
    fw().unique_id.fetch_add(1, Ordering::Relaxed)
}

#[cold]
#[inline(never)]
extern "C" fn lookup_string_cold(id: u32) -> *const c_char {
    fw().lookup_string(id)
}

/// `xptiTraceEnabled` when the enabled pointer is null: builds the framework on the first call
/// (loading subscribers may enable tracing), then answers.
#[inline(never)]
extern "C" fn trace_enabled_disabled() -> bool {
    fw();
    fw_if_enabled().is_some()
}

/// `xptiCheckTraceEnabled` when tracing is off or the framework not built yet (built here).
#[inline(never)]
extern "C" fn check_trace_enabled_disabled(stream: u8, trace_type: u16) -> bool {
    // Relaxed: see notify.
    let f = fw();
    f.trace_enabled.load(Ordering::Relaxed) && stream != 0 && f.callbacks.flag(stream, trace_type)
}

// ------------------------------------------------------------------ 2.3 strings, objects, metadata

/// #11 `xptiRegisterString`.
///
/// # Safety
/// `s` is null or a valid C string; `out` is null or valid for writes.
#[inline]
pub unsafe fn register_string(s: *const c_char, out: *mut *mut c_char) -> u32 {
    if s.is_null() || out.is_null() {
        return INVALID_STRING_ID;
    }
    // SAFETY: non-null, valid C string.
    match fw().register_string(unsafe { CStr::from_ptr(s) }) {
        Some((id, p)) => {
            // SAFETY: valid out pointer.
            unsafe { *out = p.cast_mut() };
            id
        }
        None => INVALID_STRING_ID,
    }
}

/// #12 `xptiLookupString`.
#[inline]
pub fn lookup_string(id: u32) -> *const c_char {
    match fw_if_built() {
        Some(f) => f.lookup_string(id),
        None => lookup_string_cold(id),
    }
}

/// #13 `xptiRegisterObject`.
///
/// # Safety
/// `bytes` is null or valid for `size` reads.
pub unsafe fn register_object(bytes: *const c_char, size: usize, type_: u8) -> i32 {
    if bytes.is_null() || size > (1 << 30) {
        return INVALID_OBJECT_ID;
    }
    // SAFETY: caller contract.
    let data = unsafe { std::slice::from_raw_parts(bytes.cast::<u8>(), size) };
    fw().objects.intern(data, type_).map_or(INVALID_OBJECT_ID, |(n, _)| n.id as i32)
}

/// #14 `xptiLookupObject`.
pub fn lookup_object(id: i32) -> ObjectData {
    match fw().objects.by_id(id as u32) {
        Some(n) => ObjectData { size: n.len, data: n.data.cast(), type_: n.tag },
        None => ObjectData { size: 0, data: EMPTY_OBJECT.as_ptr().cast(), type_: 0 },
    }
}

/// #27 `xptiAddMetadata`.
///
/// # Safety
/// `event` is null or a valid event whose map was built by libstdc++; `key` null or a C string.
#[inline]
pub unsafe fn add_metadata(event: *mut TraceEventData, key: *const c_char, value: i32) -> XptiResult {
    if event.is_null() || key.is_null() {
        return XPTI_RESULT_INVALIDARG;
    }
    // SAFETY: non-null C string.
    let Some((id, _)) = fw().register_string(unsafe { CStr::from_ptr(key) }) else { return XPTI_RESULT_FAIL };
    // SAFETY: the event's map (offset 56) is a libstdc++ unordered_map (caller contract).
    let existed = unsafe { shim::ot_map_insert_or_assign(query_metadata(event), id, value) };
    if existed != 0 { XPTI_RESULT_DUPLICATE } else { XPTI_RESULT_SUCCESS }
}

/// #28 `xptiQueryMetadata`. Deviation: NULL for a NULL event (Intel returns `(void*)0x38`).
#[inline]
pub fn query_metadata(event: *mut TraceEventData) -> *mut c_void {
    if event.is_null() {
        return ptr::null_mut();
    }
    event.wrapping_byte_add(56).cast()
}

// ------------------------------------------------------------------ 2.4 payloads, events, tracepoints

/// The interned copy of the payload's stack trace, if it has one.
///
/// # Safety
/// With its flag set, a non-null `p.stack_trace` is a valid C string.
unsafe fn stack_trace_of(p: &Payload) -> *const c_char {
    if p.flags & payload_flags::STACK_TRACE_AVAILABLE == 0 || p.stack_trace.is_null() {
        return ptr::null();
    }
    // SAFETY: flagged and non-null: a valid C string (the caller's contract).
    fw().register_string(unsafe { CStr::from_ptr(p.stack_trace) }).map_or(ptr::null(), |(_, s)| s)
}

/// Creates an instance. Returns (event, instance number, key). `INTERFACES`: see
/// [`instance::make`].
///
/// # Safety
/// String pointers of `n` are null or valid C strings.
#[inline]
unsafe fn make_instance<const INTERFACES: bool>(
    f: &'static crate::framework::Framework,
    n: &Normalized,
    spec: &Spec,
) -> Option<(*mut u8, u64, &'static instance::KeyEntry)> {
    let intern = |s: &CStr| f.register_string(s).unwrap_or((0, ptr::null()));
    // SAFETY: caller contract on the strings.
    unsafe { instance::make::<INTERFACES>(&f.slab, &f.keys, n, f.strict_hash, &intern, spec) }
}

/// #15 `xptiRegisterPayload`.
///
/// # Safety
/// `payload` is null or a valid payload whose flagged strings are valid C strings.
pub unsafe fn register_payload(payload: *mut Payload) -> u64 {
    if payload.is_null() {
        return INVALID_UID;
    }
    // SAFETY: non-null, valid (caller contract).
    let p = unsafe { &mut *payload };
    if !is_valid_payload(p) {
        return INVALID_UID;
    }
    let f = fw();
    if p.internal == 0 {
        p.flags &= !payload_flags::HASH_AVAILABLE;
    }
    let n = instance::normalize(p, f.strict_hash);
    let spec = Spec {
        event_type: event_type::ALGORITHM,
        activity_type: activity_type::ACTIVE as u16,
        // SAFETY: a valid payload (caller contract): its flagged strings are C strings.
        stack_trace: unsafe { stack_trace_of(p) },
        code_ptr: if f.strict_hash { p.code_ptr_va } else { ptr::null() },
    };
    // SAFETY: strings valid (caller contract).
    let Some((obj, _, key)) = (unsafe { make_instance::<false>(f, &n, &spec) }) else { return INVALID_UID };
    let uid = obj as u64;
    p.internal = uid;
    p.flags = n.flags | payload_flags::PAYLOAD_REGISTERED;
    p.uid.p1 = ((key.file_id() as u32 as u64) << 32) | u64::from(n.line);
    p.uid.p2 = u64::from(key.function_id() as u32);
    if f.strict_hash {
        p.name = key.name();
        p.source_file = key.file();
    }
    uid
}

/// #20 `xptiMakeEvent`.
///
/// # Safety
/// `payload` is null or valid; `instance_out` null or valid for writes.
#[inline]
pub unsafe fn make_event(
    _name: *const c_char,
    payload: *mut Payload,
    event_type: u16,
    activity: i32,
    instance_out: *mut u64,
) -> *mut TraceEventData {
    if payload.is_null() || instance_out.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: non-null, valid (caller contract).
    let p = unsafe { &*payload };
    if !is_valid_payload(p) {
        return ptr::null_mut();
    }
    let f = fw();
    let strict = f.strict_hash;
    let n = instance::normalize(p, strict);
    let spec = Spec {
        event_type,
        activity_type: activity as u16,
        // SAFETY: a valid payload (caller contract): its flagged strings are C strings.
        stack_trace: unsafe { stack_trace_of(p) },
        code_ptr: if strict { p.code_ptr_va } else { ptr::null() },
    };
    // SAFETY: strings valid (caller contract).
    match unsafe { make_instance::<false>(f, &n, &spec) } {
        Some((obj, inst, _)) => {
            // SAFETY: valid out pointer.
            unsafe { *instance_out = inst };
            instance::event_of(obj)
        }
        None => ptr::null_mut(),
    }
}

#[inline]
fn live(uid: u64) -> Option<*mut u8> {
    let f = fw_if_built()?;
    f.slab.is_live(uid as usize).then_some(uid as usize as *mut u8)
}

/// #21 `xptiFindEvent`.
#[inline]
pub fn find_event(uid: u64) -> *const TraceEventData {
    live(uid).map_or(ptr::null(), |o| instance::event_of(o).cast_const())
}

/// The live instance `ev`'s own payload (materialised in its side cell).
#[inline]
fn own_payload(ev: *mut u8) -> *const Payload {
    // SAFETY: `ev` was just found live; a concurrent delete is the caller's race (as in Intel's).
    unsafe { fw().slab.side(ev) }.wrapping_add(layout::PAYLOAD).cast_const().cast()
}

/// #22 `xptiQueryPayload`. An event of this dispatcher gets its own payload materialised
/// (`instance.rs`): `reserved.payload` points to it from then on.
///
/// # Safety
/// `event` is null or a valid event.
pub unsafe fn query_payload(event: *mut TraceEventData) -> *const Payload {
    if event.is_null() {
        return ptr::null();
    }
    // SAFETY: valid event (caller contract).
    let e = unsafe { &*event };
    let need = event_flags::UID_AVAILABLE | event_flags::PAYLOAD_AVAILABLE;
    if e.flags & need != need {
        return ptr::null();
    }
    match live(event as u64) {
        Some(ev) => own_payload(ev),
        None => e.reserved.payload,
    }
}

/// #23 `xptiQueryPayloadByUID`.
pub fn query_payload_by_uid(uid: u64) -> *const Payload {
    live(uid).map_or(ptr::null(), own_payload)
}

/// #49 `xptiReleaseEvent`.
///
/// # Safety
/// `event` is null or a readable event.
#[inline]
pub unsafe fn release_event(event: *mut TraceEventData) {
    if event.is_null() {
        return;
    }
    // SAFETY: readable event (caller contract).
    let uid = unsafe { (*event).unique_id };
    if let Some(o) = live(uid) {
        instance::delete(&fw().slab, o);
    }
}

/// The interface at `off` in the side cell of the live instance `ev` (materialised).
#[inline]
fn interface(ev: *mut u8, off: usize) -> *const c_void {
    // SAFETY: as in `own_payload`.
    unsafe { fw().slab.side(ev) }.wrapping_add(off).cast_const().cast()
}

/// #33 `xptiLookupPayload`.
pub fn lookup_payload(uid: u64) -> *const c_void {
    live(uid).map_or(ptr::null(), |ev| interface(ev, layout::PAYLOAD_IFACE))
}

/// #34 `xptiLookupEvent`.
pub fn lookup_event(uid: u64) -> *const c_void {
    live(uid).map_or(ptr::null(), |ev| interface(ev, layout::EVENT_IFACE))
}

/// #35 `xptiCreateTracepoint` (and the body of #40).
///
/// # Safety
/// `func`/`file` are null or valid C strings; `code_ptr` is never dereferenced.
#[inline]
pub unsafe fn create_tracepoint(
    func: *const c_char,
    file: *const c_char,
    line: u32,
    column: u32,
    code_ptr: *mut c_void,
) -> *mut c_void {
    use payload_flags as pf;
    // SAFETY: caller contract.
    let usable = |s: *const c_char| !s.is_null() && unsafe { *s } != 0;
    let name = if usable(func) { func } else { UNKNOWN_FUNCTION.as_ptr() };
    let file = if usable(file) { file } else { UNKNOWN_FILE.as_ptr() };
    // Intel's binary stores only the name/file (and code pointer) flags for these instances:
    // SYCL scope payloads read 0x28003 / 0x28007, never with the line/column bits.
    let mut flags = pf::NAME_AVAILABLE | pf::SOURCE_FILE_AVAILABLE;
    if !code_ptr.is_null() {
        flags |= pf::CODE_POINTER_AVAILABLE;
    }
    let n = Normalized { name, file, line, column, flags };
    let f = fw();
    let spec = Spec {
        event_type: event_type::ALGORITHM,
        activity_type: activity_type::ACTIVE as u16,
        stack_trace: ptr::null(),
        code_ptr: if f.strict_hash { code_ptr.cast_const() } else { ptr::null() },
    };
    // SAFETY: strings valid.
    match unsafe { make_instance::<true>(f, &n, &spec) } {
        // The side cell was written by the creation (`make::<true>`).
        Some((ev, _, _)) => f.slab.side_of(ev).wrapping_add(layout::TRACEPOINT_IFACE).cast(),
        None => ptr::null_mut(),
    }
}

/// #36 `xptiDeleteTracepoint`. Any pointer is checked (INVALIDARG unless it is a tracepoint of
/// this dispatcher).
///
/// # Safety
/// The instance is not owned by a live [`crate::api::Tracepoint`], which would go on reading it
/// (its payload, its metadata map) after the deletion.
#[inline]
pub unsafe fn delete_tracepoint(tp: *mut c_void) -> XptiResult {
    if tp.is_null() {
        return XPTI_RESULT_INVALIDARG;
    }
    let Some(f) = fw_if_built() else { return XPTI_RESULT_INVALIDARG };
    match f.slab.event_of_interface(tp as usize, layout::TRACEPOINT_IFACE) {
        // SAFETY: `event_of_interface` returns committed event cells only.
        Some(ev) if unsafe { instance::delete_cell(&f.slab, ev) } => XPTI_RESULT_SUCCESS,
        _ => XPTI_RESULT_INVALIDARG,
    }
}

/// #37 `xptiGetTracepointScopeData`.
#[inline]
pub fn get_tracepoint_scope_data() -> *const c_void {
    tls::scope().cast_const().cast()
}

/// #38 `xptiSetTracepointScopeData`. Deviation: objects that are not live tracepoints of this
/// dispatcher are refused with INVALIDARG (Intel calls `tp->uid64()` through the vtable).
#[inline]
pub fn set_tracepoint_scope_data(tp: *mut c_void) -> XptiResult {
    if tp.is_null() {
        return XPTI_RESULT_INVALIDARG;
    }
    let Some(f) = fw_if_built() else { return XPTI_RESULT_INVALIDARG };
    match f.slab.live_of_interface(tp as usize, layout::TRACEPOINT_IFACE) {
        Some(ev) => {
            tls::set_scope(tp.cast(), ev as u64);
            XPTI_RESULT_SUCCESS
        }
        None => XPTI_RESULT_INVALIDARG,
    }
}

/// #39 `xptiUnsetTracepointScopeData`.
#[inline]
pub fn unset_tracepoint_scope_data() {
    tls::set_scope(ptr::null_mut(), 0);
}

/// #40 `xptiRegisterTracepointScope`.
///
/// # Safety
/// As [`create_tracepoint`].
#[inline]
pub unsafe fn register_tracepoint_scope(
    func: *const c_char,
    file: *const c_char,
    line: u32,
    column: u32,
    code_ptr: *mut c_void,
) -> *const c_void {
    // SAFETY: same contract.
    unsafe { create_tracepoint(func, file, line, column, code_ptr) }.cast_const()
}

/// #18 `xptiRegisterUserDefinedTracePoint` / #19 `xptiRegisterUserDefinedEventType`.
///
/// # Safety
/// `tool` is null or a valid C string.
pub unsafe fn register_user_defined(tool: *const c_char, value: u8) -> u16 {
    // SAFETY: caller contract.
    let Some(t) = (unsafe { cstr(tool) }) else { return 0 };
    match fw().vendors.intern(t.to_bytes(), 0) {
        Some((n, _)) => ((n.id as u16) << 8) | 0x80 | u16::from(value),
        None => 0,
    }
}

// ------------------------------------------------------------------ streams, callbacks, notify

/// #16 `xptiRegisterStream`.
///
/// # Safety
/// `name` is null or a valid C string.
#[inline]
pub unsafe fn register_stream(name: *const c_char) -> u8 {
    // SAFETY: caller contract.
    match unsafe { cstr(name) } {
        None => 255,
        Some(n) => fw().register_stream(n),
    }
}

/// #17 `xptiUnregisterStream`.
///
/// # Safety
/// `name` is null or a valid C string.
pub unsafe fn unregister_stream(name: *const c_char) -> XptiResult {
    // SAFETY: caller contract.
    let Some(n) = (unsafe { cstr(name) }) else { return XPTI_RESULT_INVALIDARG };
    let f = fw();
    for s in f.subscribers() {
        // SAFETY: exported finish function, valid string.
        unsafe { (s.finish)(name) };
    }
    match f.streams.lookup(n.to_bytes()) {
        Some(node) if f.callbacks.ever_registered(node.id as u8) => {
            f.callbacks.disable_stream(node.id as u8);
            XPTI_RESULT_SUCCESS
        }
        _ => XPTI_RESULT_NOTFOUND,
    }
}

fn change_result(c: crate::callbacks::Change) -> XptiResult {
    use crate::callbacks::Change;
    match c {
        Change::Done => XPTI_RESULT_SUCCESS,
        Change::Duplicate => XPTI_RESULT_DUPLICATE,
        Change::Undeleted => XPTI_RESULT_UNDELETE,
        Change::NotFound => XPTI_RESULT_NOTFOUND,
        Change::Failed => XPTI_RESULT_FAIL,
    }
}

/// #24 `xptiRegisterCallback`.
pub fn register_callback(stream: u8, trace_type: u16, cb: Option<TracepointCallback>) -> XptiResult {
    let Some(cb) = cb else { return XPTI_RESULT_INVALIDARG };
    change_result(fw().callbacks.register(stream, trace_type, cb))
}

/// #25 `xptiUnregisterCallback`.
pub fn unregister_callback(stream: u8, trace_type: u16, cb: Option<TracepointCallback>) -> XptiResult {
    let Some(cb) = cb else { return XPTI_RESULT_INVALIDARG };
    change_result(fw().callbacks.unregister(stream, trace_type, cb))
}

/// Trace types for which notify accepts a null event when user data is given (the binary's
/// bitmask `0x1ff33000001` plus diagnostics; type 0 kept for compatibility).
#[inline]
pub fn null_event_allowed(trace_type: u16) -> bool {
    (trace_type < 64 && (0x1ff_3300_0001_u64 >> trace_type) & 1 != 0) || trace_type == trace_type::DIAGNOSTICS
}

/// #26 `xptiNotifySubscribers`.
///
/// # Safety
/// The pointers are forwarded to the subscribers' callbacks unchanged.
#[inline]
pub unsafe fn notify_subscribers(
    stream: u8,
    trace_type: u16,
    parent: *mut TraceEventData,
    event: *mut TraceEventData,
    instance: u64,
    user_data: *const c_void,
) -> XptiResult {
    // Tracing off, or the first call of the process (which may have to build the framework):
    // a tail call, so the hot path saves no registers.
    let Some(f) = fw_if_enabled() else {
        // SAFETY: same contract.
        return unsafe { notify_subscribers_disabled(stream, trace_type, parent, event, instance, user_data) };
    };
    if event.is_null() && (user_data.is_null() || !null_event_allowed(trace_type)) {
        return XPTI_RESULT_INVALIDARG;
    }
    if let Some(l) = f.callbacks.list(stream, trace_type) {
        // SAFETY: subscriber callbacks with the documented signature (caller contract).
        unsafe { l.call_all(trace_type, parent, event, instance, user_data) };
    }
    XPTI_RESULT_SUCCESS
}

/// [`notify_subscribers`] while tracing is not enabled: `FALSE`, after building the framework
/// on the first call of the process (subscribers loaded then may enable tracing).
/// `extern "C"`: cannot unwind, so the exported notify needs no landing pad.
///
/// # Safety
/// As [`notify_subscribers`].
#[inline(never)]
unsafe extern "C" fn notify_subscribers_disabled(
    stream: u8,
    trace_type: u16,
    parent: *mut TraceEventData,
    event: *mut TraceEventData,
    instance: u64,
    user_data: *const c_void,
) -> XptiResult {
    // Relaxed: see notify.
    if fw_if_built().is_some() || !fw().trace_enabled.load(Ordering::Relaxed) {
        return XPTI_RESULT_FALSE;
    }
    // SAFETY: same contract; tracing is now enabled, so this does not come back here.
    unsafe { notify_subscribers(stream, trace_type, parent, event, instance, user_data) }
}

/// #29 `xptiTraceEnabled`.
#[inline]
pub fn trace_enabled() -> bool {
    // Built and enabled; otherwise build it if needed (a tail call) and answer.
    fw_if_enabled().is_some() || trace_enabled_disabled()
}

/// #30 `xptiCheckTraceEnabled`.
#[inline]
pub fn check_trace_enabled(stream: u8, trace_type: u16) -> bool {
    let Some(f) = fw_if_enabled() else { return check_trace_enabled_disabled(stream, trace_type) };
    stream != 0 && f.callbacks.flag(stream, trace_type)
}

/// #31 `xptiReset`: deletes every instance.
///
/// # Safety
/// No [`crate::api::Tracepoint`] is alive (its instance would be deleted under it).
pub unsafe fn reset() {
    fw().reset();
}

/// #32 `xptiForceSetTraceEnabled`.
pub fn force_set_trace_enabled(on: bool) {
    fw().set_trace_enabled(on);
}

/// #41 `xptiGetDefaultStreamID`.
pub fn get_default_stream_id() -> u8 {
    fw_if_built().map_or(0, |f| f.default_stream.load(Ordering::Relaxed))
}

/// #42 `xptiSetDefaultStreamID`.
pub fn set_default_stream_id(stream: u8) -> XptiResult {
    if (stream as i8) < 0 {
        return XPTI_RESULT_INVALIDARG;
    }
    fw().default_stream.store(stream, Ordering::Relaxed);
    XPTI_RESULT_SUCCESS
}

/// #43 `xptiGetDefaultEventType`.
pub fn get_default_event_type() -> u16 {
    fw().default_event_type.load(Ordering::Relaxed)
}

/// #44 `xptiSetDefaultEventType`.
pub fn set_default_event_type(t: u16) -> XptiResult {
    if t == event_type::UNKNOWN_EVENT {
        return XPTI_RESULT_INVALIDARG;
    }
    fw().default_event_type.store(t, Ordering::Relaxed);
    XPTI_RESULT_SUCCESS
}

/// #45 `xptiGetDefaultTraceType`.
pub fn get_default_trace_type() -> u16 {
    fw().default_trace_type.load(Ordering::Relaxed)
}

/// #46 `xptiSetDefaultTraceType`.
pub fn set_default_trace_type(t: u16) -> XptiResult {
    if t == trace_type::UNKNOWN_TYPE {
        return XPTI_RESULT_INVALIDARG;
    }
    fw().default_trace_type.store(t, Ordering::Relaxed);
    XPTI_RESULT_SUCCESS
}

/// #47 `xptiEnableTracepointScopeNotification`.
pub fn enable_tracepoint_scope_notification(on: bool) {
    fw().scope_notify.store(on, Ordering::Relaxed);
}

/// #48 `xptiCheckTracepointScopeNotification`.
pub fn check_tracepoint_scope_notification() -> bool {
    fw_if_built().is_some_and(|f| f.scope_notify.load(Ordering::Relaxed))
}

/// #50 `xptiGetEffectiveStreamDetailLevel`.
pub fn get_effective_stream_detail_level(stream: u8) -> u8 {
    fw_if_built().map_or(detail_level::NORMAL, |f| f.detail[stream as usize].load(Ordering::Relaxed))
}
