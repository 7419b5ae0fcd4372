//! libxptifw.so: offtrace's ABI-compatible XPTI 2026.2 dispatcher — the 50 exported C functions.
//!
//! Every export null-checks its pointers (in `offtrace_xpti::dispatch`), runs its body inside
//! `catch_unwind` and maps a panic to the function's error value, so nothing unwinds into C.
//! On the hot exports (notify, the enabled checks, `xptiGetUniqueId`, `xptiLookupString`,
//! `xptiQueryMetadata`) the wrapper costs nothing: their bodies only inline code that cannot
//! panic and call `extern "C"` functions (callbacks, cold halves), which cannot unwind, so the
//! compiler emits no landing pad and no frame for it (check with `objdump -d`).
//! Narrow integer and `bool` parameters are received as `u32` and truncated: see
//! `offtrace_xpti::dispatch`. The implementation lives in the `offtrace-xpti` rlib; this crate
//! only names the symbols (so that other cdylibs linking the rlib do not export `xpti*`).
//!
//! Build: `cargo build -p offtrace-xptifw --release` gives `target/release/libxptifw.so` with
//! SONAME `libxptifw.so.1`; runtimes and subscribers need a `libxptifw.so.1` link next to it.
//!
//! Tests (`cargo test -p offtrace-xptifw`; they find the cdylib next to the test binary and build
//! it with cargo if it is missing; C/C++ sources in `tests/c/`, built with the system gcc/g++):
//! - `exports::dlopen_resolves_all_50_names`, `exports::soname_and_nodelete`,
//!   `exports::only_xpti_names_are_exported`;
//! - `c_programs::cpp_conformance_suite_covers_every_export` (`conformance.cpp`: all 50 exports,
//!   the four interfaces through their vtables, the metadata map read and grown inline with
//!   libstdc++ and walked the C way), `strict_hash_mode_uses_string_ids`;
//! - `c_programs::fuzz_every_export_with_null_and_garbage` (`fuzz.c`);
//! - `c_programs::concurrent_new_string_registration_100_runs` (`mt_regstr.c`, 100 processes);
//! - `c_programs::stress_register_notify_unregister` (`stress.c`: notifiers vs. register /
//!   unregister past the inline list capacity vs. tracepoint create/delete + metadata + strings);
//! - `c_programs::subscriber_loading_and_protocol` (`subscriber.c` + `sub_driver.c`: load order,
//!   duplicate and bad paths, re-entrant registration from `xptiTraceInit`, detail-level query,
//!   finish once, `XPTI_TRACE_ENABLE=0`);
//! - `c_programs::shared_reference_behaviour_check` (the shared `behaviour_check.c`).
//! - `real_runtime::intel_collector_prints_the_same_lines` (needs the SYCL 2026.2 venv of
//!   `scripts/setup-sycl.sh`; W4 under Intel's `libsycl_ur_trace_collector.so` with both
//!   dispatchers).
#![allow(unsafe_code)]
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use offtrace_xpti::abi::*;
use offtrace_xpti::dispatch as d;

#[inline(always)]
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

#[inline(always)]
fn u8_of(v: u32) -> u8 {
    v as u8
}
#[inline(always)]
fn u16_of(v: u32) -> u16 {
    v as u16
}
#[inline(always)]
fn bool_of(v: u32) -> bool {
    v as u8 != 0
}

macro_rules! export {
    ($(#[$m:meta])* fn $name:ident($($a:ident : $t:ty),*) -> $r:ty = $err:expr, $body:expr) => {
        $(#[$m])*
        ///
        /// # Safety
        /// Pointer arguments are null or valid as the XPTI 2026.2 header describes.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            guard($err, || $body)
        }
    };
}

// SAFETY (for every `unsafe { d::… }` below):
// - the caller upholds the XPTI header's contract on pointer arguments; `dispatch` checks them
//   for null before use;
// - no `offtrace_xpti::api::Tracepoint` lives in this library (C callers own their instances),
//   so `xptiReset` and `xptiDeleteTracepoint` delete nothing a Rust owner still reads.

export!(/// #1
fn xptiFrameworkInitialize() -> () = (), d::framework_initialize());
export!(/// #2
fn xptiFrameworkFinalize() -> () = (), d::framework_finalize());
export!(/// #3
fn xptiInitialize(stream: *const c_char, maj: u32, min: u32, version: *const c_char) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::initialize(stream, maj, min, version) });
export!(/// #4
fn xptiFinalize(stream: *const c_char) -> () = (),
    // SAFETY: see the note above the exports.
    unsafe { d::finalize(stream) });
export!(/// #5
fn xptiGetUniversalId() -> u64 = 0, d::get_universal_id());
export!(/// #6
fn xptiSetUniversalId(uid: u64) -> () = (), d::set_universal_id(uid));
export!(/// #7
fn xptiGetStashedTuple(key: *mut *mut c_char, value: *mut u64) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::get_stashed_tuple(key, value) });
export!(/// #8
fn xptiStashTuple(key: *const c_char, value: u64) -> XptiResult = XPTI_RESULT_FAIL, d::stash_tuple(key, value));
export!(/// #9
fn xptiUnstashTuple() -> () = (), d::unstash_tuple());
export!(/// #10
fn xptiGetUniqueId() -> u64 = 0, d::get_unique_id());
export!(/// #11
fn xptiRegisterString(s: *const c_char, out: *mut *mut c_char) -> u32 = INVALID_STRING_ID,
    // SAFETY: see the note above the exports.
    unsafe { d::register_string(s, out) });
export!(/// #12
fn xptiLookupString(id: u32) -> *const c_char = std::ptr::null(), d::lookup_string(id));
export!(/// #13
fn xptiRegisterObject(bytes: *const c_char, size: usize, type_: u32) -> i32 = INVALID_OBJECT_ID,
    // SAFETY: see the note above the exports.
    unsafe { d::register_object(bytes, size, u8_of(type_)) });
export!(/// #14 (returned through a hidden pointer, like the C++ original)
fn xptiLookupObject(id: i32) -> ObjectData = ObjectData { size: 0, data: std::ptr::null(), type_: 0 }, d::lookup_object(id));
export!(/// #15
fn xptiRegisterPayload(payload: *mut Payload) -> u64 = INVALID_UID,
    // SAFETY: see the note above the exports.
    unsafe { d::register_payload(payload) });
export!(/// #16
fn xptiRegisterStream(name: *const c_char) -> u8 = 255,
    // SAFETY: see the note above the exports.
    unsafe { d::register_stream(name) });
export!(/// #17
fn xptiUnregisterStream(name: *const c_char) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::unregister_stream(name) });
export!(/// #18
fn xptiRegisterUserDefinedTracePoint(tool: *const c_char, tp: u32) -> u16 = 0,
    // SAFETY: see the note above the exports.
    unsafe { d::register_user_defined(tool, u8_of(tp)) });
export!(/// #19
fn xptiRegisterUserDefinedEventType(tool: *const c_char, ev: u32) -> u16 = 0,
    // SAFETY: see the note above the exports.
    unsafe { d::register_user_defined(tool, u8_of(ev)) });
export!(/// #20
fn xptiMakeEvent(name: *const c_char, payload: *mut Payload, event_type: u32, activity: i32, instance: *mut u64) -> *mut TraceEventData = std::ptr::null_mut(),
    // SAFETY: see the note above the exports.
    unsafe { d::make_event(name, payload, u16_of(event_type), activity, instance) });
export!(/// #21
fn xptiFindEvent(uid: u64) -> *const TraceEventData = std::ptr::null(), d::find_event(uid));
export!(/// #22
fn xptiQueryPayload(event: *mut TraceEventData) -> *const Payload = std::ptr::null(),
    // SAFETY: see the note above the exports.
    unsafe { d::query_payload(event) });
export!(/// #23
fn xptiQueryPayloadByUID(uid: u64) -> *const Payload = std::ptr::null(), d::query_payload_by_uid(uid));
export!(/// #24
fn xptiRegisterCallback(stream: u32, trace_type: u32, cb: Option<TracepointCallback>) -> XptiResult = XPTI_RESULT_FAIL,
    d::register_callback(u8_of(stream), u16_of(trace_type), cb));
export!(/// #25
fn xptiUnregisterCallback(stream: u32, trace_type: u32, cb: Option<TracepointCallback>) -> XptiResult = XPTI_RESULT_FAIL,
    d::unregister_callback(u8_of(stream), u16_of(trace_type), cb));
export!(/// #26
fn xptiNotifySubscribers(stream: u32, trace_type: u32, parent: *mut TraceEventData, event: *mut TraceEventData, instance: u64, user_data: *const c_void) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::notify_subscribers(u8_of(stream), u16_of(trace_type), parent, event, instance, user_data) });
export!(/// #27
fn xptiAddMetadata(event: *mut TraceEventData, key: *const c_char, value: i32) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::add_metadata(event, key, value) });
export!(/// #28
fn xptiQueryMetadata(event: *mut TraceEventData) -> *mut c_void = std::ptr::null_mut(), d::query_metadata(event));
export!(/// #29
fn xptiTraceEnabled() -> bool = false, d::trace_enabled());
export!(/// #30
fn xptiCheckTraceEnabled(stream: u32, trace_type: u32) -> bool = false, d::check_trace_enabled(u8_of(stream), u16_of(trace_type)));
export!(/// #31
fn xptiReset() -> () = (),
    // SAFETY: see the note above the exports.
    unsafe { d::reset() });
export!(/// #32
fn xptiForceSetTraceEnabled(on: u32) -> () = (), d::force_set_trace_enabled(bool_of(on)));
export!(/// #33
fn xptiLookupPayload(uid: u64) -> *const c_void = std::ptr::null(), d::lookup_payload(uid));
export!(/// #34
fn xptiLookupEvent(uid: u64) -> *const c_void = std::ptr::null(), d::lookup_event(uid));
export!(/// #35
fn xptiCreateTracepoint(func: *const c_char, file: *const c_char, line: u32, column: u32, code_ptr: *mut c_void) -> *mut c_void = std::ptr::null_mut(),
    // SAFETY: see the note above the exports; `code_ptr` is never dereferenced.
    unsafe { d::create_tracepoint(func, file, line, column, code_ptr) });
export!(/// #36
fn xptiDeleteTracepoint(tp: *mut c_void) -> XptiResult = XPTI_RESULT_FAIL,
    // SAFETY: see the note above the exports.
    unsafe { d::delete_tracepoint(tp) });
export!(/// #37
fn xptiGetTracepointScopeData() -> *const c_void = std::ptr::null(), d::get_tracepoint_scope_data());
export!(/// #38
fn xptiSetTracepointScopeData(tp: *mut c_void) -> XptiResult = XPTI_RESULT_FAIL, d::set_tracepoint_scope_data(tp));
export!(/// #39
fn xptiUnsetTracepointScopeData() -> () = (), d::unset_tracepoint_scope_data());
export!(/// #40
fn xptiRegisterTracepointScope(func: *const c_char, file: *const c_char, line: u32, column: u32, code_ptr: *mut c_void) -> *const c_void = std::ptr::null(),
    // SAFETY: see the note above the exports; `code_ptr` is never dereferenced.
    unsafe { d::register_tracepoint_scope(func, file, line, column, code_ptr) });
export!(/// #41
fn xptiGetDefaultStreamID() -> u8 = 0, d::get_default_stream_id());
export!(/// #42
fn xptiSetDefaultStreamID(stream: u32) -> XptiResult = XPTI_RESULT_FAIL, d::set_default_stream_id(u8_of(stream)));
export!(/// #43
fn xptiGetDefaultEventType() -> u16 = event_type::ALGORITHM, d::get_default_event_type());
export!(/// #44
fn xptiSetDefaultEventType(t: u32) -> XptiResult = XPTI_RESULT_FAIL, d::set_default_event_type(u16_of(t)));
export!(/// #45
fn xptiGetDefaultTraceType() -> u16 = trace_type::FUNCTION_BEGIN, d::get_default_trace_type());
export!(/// #46
fn xptiSetDefaultTraceType(t: u32) -> XptiResult = XPTI_RESULT_FAIL, d::set_default_trace_type(u16_of(t)));
export!(/// #47
fn xptiEnableTracepointScopeNotification(on: u32) -> () = (), d::enable_tracepoint_scope_notification(bool_of(on)));
export!(/// #48
fn xptiCheckTracepointScopeNotification() -> bool = false, d::check_tracepoint_scope_notification());
export!(/// #49
fn xptiReleaseEvent(event: *mut TraceEventData) -> () = (),
    // SAFETY: see the note above the exports.
    unsafe { d::release_event(event) });
export!(/// #50
fn xptiGetEffectiveStreamDetailLevel(stream: u32) -> u8 = detail_level::NORMAL, d::get_effective_stream_detail_level(u8_of(stream)));
