//! The SYCL backend's raw-layer payload, as C tools see it: `offtrace_callback_tracing_xpti_data_t`.
//!
//! Core's contract carries no runtime pointers: a raw-layer (`XPTI`) record's payload is opaque
//! to it (`Payload::Raw`). This is the struct the SYCL backend points it at, declared here beside
//! the C header that names it, so the backend and the header's layout test share one definition.

use std::ffi::c_char;

/// `XPTI`: one raw notification, as the dispatcher passed it to the subscriber callback. The
/// pointers are the runtime's, valid during the callback only.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct XptiPayload {
    /// The stream's name (NUL-terminated), or null when the backend does not know it.
    pub stream: *const c_char,
    /// The dispatcher's stream id (8-bit).
    pub stream_id: u64,
    /// `xpti::trace_event_data_t*` of the parent, may be null.
    pub parent: u64,
    /// `xpti::trace_event_data_t*` of the event, may be null.
    pub event: u64,
    /// The notification's instance number (begin and end of one call share it).
    pub instance: u64,
    /// The type-specific user data (`function_with_args_t*`, `mem_alloc_data_t*`, ...), may be null.
    pub user_data: u64,
    /// The trace point type (= the record's operation).
    pub trace_type: u32,
    /// Backend-private classification of the stream (the SYCL backend's stream kind), 0 = none.
    pub stream_class: u32,
}

impl Default for XptiPayload {
    fn default() -> Self {
        Self {
            stream: std::ptr::null(),
            stream_id: 0,
            parent: 0,
            event: 0,
            instance: 0,
            user_data: 0,
            trace_type: 0,
            stream_class: 0,
        }
    }
}
