//! The streams the SYCL backend subscribes, and one trampoline per stream: the XPTI callback
//! that hands each notification to the tracing services (`services_bridge::on_notification`).

use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, Ordering};

use offtrace_xpti_abi::abi::{TraceEventData, TracepointCallback};

use crate::decode::{Raw, StreamKind};
use crate::services_bridge;

/// The streams the agent subscribes, each with its own trampoline (names as C strings: they
/// travel in `XptiPayload::stream`).
pub const STREAMS: [(&CStr, StreamKind); 7] = [
    (c"sycl", StreamKind::Sycl),
    (c"sycl.debug", StreamKind::Sycl),
    (c"sycl.experimental.buffer", StreamKind::Buffer),
    (c"sycl.experimental.image", StreamKind::Image),
    (c"sycl.experimental.mem_alloc", StreamKind::MemAlloc),
    (c"ur.call", StreamKind::UrCall),
    (c"ur.call.debug", StreamKind::UrCall),
];

/// Dispatcher stream id per [`STREAMS`] slot (set at `xptiTraceInit`).
pub static SLOT_STREAM: [AtomicU8; 7] = [const { AtomicU8::new(0) }; 7];

/// The trampoline for [`STREAMS`] slot `S`.
///
/// # Safety
/// Called by the XPTI dispatcher with the arguments of a notification on that stream.
#[allow(unsafe_code)]
unsafe extern "C" fn trampoline<const S: usize>(
    trace_type: u16,
    parent: *mut TraceEventData,
    event: *mut TraceEventData,
    instance: u64,
    user_data: *const c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // Relaxed: written once at init, before the callback was registered with the
        // dispatcher (whose registration lock publishes it).
        let stream = SLOT_STREAM[S].load(Ordering::Relaxed);
        let raw = Raw { trace_type, parent, event, instance, user_data };
        // One path: the notification goes to the tracing services (raw, as an `XPTI` record,
        // and mapped to the typed kinds); the recorder is one of their clients (`trace_client`).
        // SAFETY: the dispatcher calls this trampoline as the subscriber callback of stream
        // `S`: the arguments are the live notification's, valid during the call.
        unsafe { services_bridge::on_notification(STREAMS[S].1, stream, STREAMS[S].0, &raw) };
    }));
}

/// One trampoline per slot of [`STREAMS`].
pub const TRAMPOLINES: [TracepointCallback; 7] = [
    trampoline::<0>,
    trampoline::<1>,
    trampoline::<2>,
    trampoline::<3>,
    trampoline::<4>,
    trampoline::<5>,
    trampoline::<6>,
];
