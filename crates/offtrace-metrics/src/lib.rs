//! Metrics and telemetry in the Level Zero tools model, over what this machine really has.
//!
//! The model (`model`, `session`): devices have metric groups; a group has a domain (one active
//! group per domain and device) and sampling types; a **streamer** samples a time-based group on
//! a thread of its own and keeps raw reports; a **query** brackets a command of an event-based
//! group; **calculation** turns raw reports into typed values, separately from collection. The
//! sources (`perf`, `procfs`, `sysfs`, `nvml`) are probed by [`Catalog::discover`]: a source that
//! does not work here lists nothing. [`Sampler`] puts streamed values into the trace as `COUNTER`
//! records.
//!
//! ```no_run
//! use offtrace_metrics::{GroupHandle, Metrics, StreamerDesc};
//! let m = Metrics::global();
//! let g = GroupHandle(m.catalog().find("proc.process")[0]);
//! m.activate(0, &[g])?;
//! let s = m.streamer_open(0, g, StreamerDesc::default(), None)?;
//! std::thread::sleep(std::time::Duration::from_millis(50));
//! let raw = m.streamer_read_data(s, u32::MAX)?;
//! m.streamer_close(s)?;
//! for values in m.calculate(g, &raw)? {
//!     println!("{values:?}");
//! }
//! # Ok::<(), offtrace_metrics::MetricsError>(())
//! ```

pub mod catalog;
pub mod counters;
pub mod cupti;
pub mod error;
pub mod model;
pub mod nvml;
pub mod opencl;
pub mod perf;
pub mod procfs;
pub mod session;
pub mod sysfs;
pub mod sysman;

pub use catalog::{Backend, Catalog, Group};
pub use counters::{Sampler, SamplerStats, counter_id, define_devices, device_handle};
pub use error::MetricsError;
pub use model::{
    Calc, DeviceInfo, DeviceKind, GroupInfo, MetricInfo, MetricType, RawReport, SamplingTypes, TypedValue, ValueType,
    calculate,
};
pub use session::{
    GroupHandle, Metrics, QueryHandle, QueryPoolHandle, StreamerDesc, StreamerHandle, StreamerStats, monotonic_ns,
    thread_cpu_ns,
};
pub use sysman::Sysman;
