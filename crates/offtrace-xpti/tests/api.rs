//! The safe Rust API.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use offtrace_xpti::abi::TraceEventData;
use offtrace_xpti::api::{self, MetadataValue, Tracepoint, XptiError, trace_type};

static SEEN: AtomicU64 = AtomicU64::new(0);
static LAST_INSTANCE: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn on_task(
    _: u16,
    _: *mut TraceEventData,
    e: *mut TraceEventData,
    instance: u64,
    _: *const std::ffi::c_void,
) {
    if !e.is_null() {
        SEEN.fetch_add(1, Ordering::Relaxed);
        LAST_INSTANCE.store(instance, Ordering::Relaxed);
    }
}

#[test]
fn streams_tracepoints_metadata_and_callbacks() {
    api::force_trace_enabled(true);
    let s = api::register_stream("api.test");
    assert_eq!(api::register_stream("api.test"), s);
    assert!(s.0 >= 2);

    let tp = Tracepoint::new("api_fn", "api.rs", 10, 2);
    let tp2 = Tracepoint::new("api_fn", "api.rs", 10, 2);
    assert_eq!((tp.instance(), tp2.instance()), (1, 2));
    assert_ne!(tp.uid64(), tp2.uid64());
    assert_eq!(tp.function().to_str(), Ok("api_fn"));

    let v = api::register_object(&5u32.to_le_bytes(), MetadataValue::UnsignedInteger);
    assert_eq!(api::lookup_object(v), Some((&5u32.to_le_bytes()[..], 3)));
    tp.add_metadata("width", v).expect("new key");
    assert_eq!(tp.add_metadata("width", v), Err(XptiError::Duplicate));
    let md = tp.metadata();
    assert_eq!(md.len(), 1);
    assert_eq!(api::lookup_string(md[0].0).and_then(|c| c.to_str().ok()), Some("width"));
    let (id, text) = api::intern("width").expect("intern");
    assert_eq!((id, text.to_str()), (md[0].0, Ok("width")));

    let reg = api::register_callback(s, trace_type::TASK_BEGIN, on_task).expect("register");
    assert!(api::check_trace_enabled(s, trace_type::TASK_BEGIN));
    let corr = api::unique_id();
    api::notify(s, trace_type::TASK_BEGIN, None, Some(&tp), corr).expect("notify");
    assert_eq!(SEEN.load(Ordering::Relaxed), 1);
    assert_eq!(LAST_INSTANCE.load(Ordering::Relaxed), corr);
    assert_eq!(api::notify(s, trace_type::TASK_BEGIN, None, None, corr), Err(XptiError::InvalidArgument));
    drop(reg);
    assert!(!api::check_trace_enabled(s, trace_type::TASK_BEGIN));

    {
        let _g = tp.enter_scope();
        assert_eq!(api::universal_id(), tp.uid64());
    }
    assert_eq!(api::universal_id(), 0);
    assert_eq!(api::initialize_stream("api.test", 1, 0, "1.0"), Ok(()));
    assert_eq!(api::detail_level(s), 0, "no subscribers: NONE");
    assert_eq!(api::intern("a\0b"), Err(XptiError::NulByte));
}
