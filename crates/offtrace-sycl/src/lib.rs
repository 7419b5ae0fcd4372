//! offtrace-sycl: the SYCL / Unified Runtime backend. It turns the XPTI notifications of Intel's
//! SYCL runtime (streams `sycl`, `sycl.experimental.*`, `ur.call`) into the tracing services'
//! typed records, deciding their relations in-process (`docs/record-model.md`): each UR call as
//! a `UR_API` call, each enqueue's device activity linked to that call with its queue, device and
//! (demangled) kernel name, allocations from the UR calls, device times from the program's
//! profiling queries; and, as an optional layer, every notification as sent (`raw_layer`).
//!
//! - [`streams`]: the subscribed streams and their trampolines (the XPTI callbacks).
//! - [`services_bridge`]: notification → services records.
//! - [`decode`], [`compact`], [`interner`], [`raw_layer`]: the raw layer (decode in the callback,
//!   compact ring entries, definitions, the recorder's `RawLayer`).
//! - [`dispatcher`]: the XPTI dispatcher's entry points, found with `dlsym`; [`safe_read`]:
//!   defensive reads of runtime memory.
//!
//! The agent (`offtrace-agent`, `libofftrace_agent.so`) hosts it: entry points, configuration,
//! tool loading, the recording.

pub mod compact;
pub mod decode;
pub mod devices;
pub mod dispatcher;
pub mod interner;
pub mod raw_layer;
pub mod safe_read;
pub mod services_bridge;
pub mod streams;
