//! The built `libxptifw.so` resolves every one of the 50 XPTI 2026.2 names (the SYCL runtime's
//! proxy silently disables all tracing if one of its 49 is missing) and carries the SONAME
//! `libxptifw.so.1` that subscribers link against.
#![allow(unsafe_code)]

mod common;

use std::ffi::CString;

const NAMES: [&str; 50] = [
    "xptiFrameworkInitialize",
    "xptiFrameworkFinalize",
    "xptiInitialize",
    "xptiFinalize",
    "xptiGetUniversalId",
    "xptiSetUniversalId",
    "xptiGetStashedTuple",
    "xptiStashTuple",
    "xptiUnstashTuple",
    "xptiGetUniqueId",
    "xptiRegisterString",
    "xptiLookupString",
    "xptiRegisterObject",
    "xptiLookupObject",
    "xptiRegisterPayload",
    "xptiRegisterStream",
    "xptiUnregisterStream",
    "xptiRegisterUserDefinedTracePoint",
    "xptiRegisterUserDefinedEventType",
    "xptiMakeEvent",
    "xptiFindEvent",
    "xptiQueryPayload",
    "xptiQueryPayloadByUID",
    "xptiRegisterCallback",
    "xptiUnregisterCallback",
    "xptiNotifySubscribers",
    "xptiAddMetadata",
    "xptiQueryMetadata",
    "xptiTraceEnabled",
    "xptiCheckTraceEnabled",
    "xptiReset",
    "xptiForceSetTraceEnabled",
    "xptiLookupPayload",
    "xptiLookupEvent",
    "xptiCreateTracepoint",
    "xptiDeleteTracepoint",
    "xptiGetTracepointScopeData",
    "xptiSetTracepointScopeData",
    "xptiUnsetTracepointScopeData",
    "xptiRegisterTracepointScope",
    "xptiGetDefaultStreamID",
    "xptiSetDefaultStreamID",
    "xptiGetDefaultEventType",
    "xptiSetDefaultEventType",
    "xptiGetDefaultTraceType",
    "xptiSetDefaultTraceType",
    "xptiEnableTracepointScopeNotification",
    "xptiCheckTracepointScopeNotification",
    "xptiReleaseEvent",
    "xptiGetEffectiveStreamDetailLevel",
];

#[test]
fn dlopen_resolves_all_50_names() {
    let path = CString::new(common::lib_dir().join("libxptifw.so.1").to_string_lossy().into_owned()).expect("path");
    // SAFETY: a valid C string; loading runs no constructor that needs the environment.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen failed");
    let missing: Vec<&str> = NAMES
        .iter()
        .copied()
        .filter(|n| {
            let c = CString::new(*n).expect("name");
            // SAFETY: live handle, valid C string.
            unsafe { libc::dlsym(h, c.as_ptr()) }.is_null()
        })
        .collect();
    assert!(missing.is_empty(), "missing exports: {missing:?}");
    let unique: std::collections::HashSet<_> = NAMES.iter().collect();
    assert_eq!(unique.len(), 50);
}

#[test]
fn soname_and_nodelete() {
    let Ok(o) = std::process::Command::new("readelf").arg("-d").arg(common::lib_dir().join("libxptifw.so")).output()
    else {
        eprintln!("readelf not available; skipped");
        return;
    };
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Library soname: [libxptifw.so.1]"), "{text}");
    assert!(text.contains("NODELETE"), "{text}");
}

#[test]
fn only_xpti_names_are_exported() {
    let Ok(o) = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(common::lib_dir().join("libxptifw.so"))
        .output()
    else {
        eprintln!("nm not available; skipped");
        return;
    };
    let text = String::from_utf8_lossy(&o.stdout);
    let funcs: Vec<&str> =
        text.lines().filter(|l| l.contains(" T ")).filter_map(|l| l.split_whitespace().last()).collect();
    assert_eq!(funcs.len(), 50, "{funcs:?}");
    assert!(funcs.iter().all(|f| f.starts_with("xpti")), "{funcs:?}");
}
