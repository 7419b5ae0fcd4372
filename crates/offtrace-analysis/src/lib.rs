#![forbid(unsafe_code)]
//! Analysis of offtrace traces: a streaming model builder over [`offtrace_format::Record`]s that
//! produces a [`Summary`] (UR calls, SYCL commands, memory, queues, task graph, threads, drops,
//! notification counts, kernel dispatches with their allocation properties linked to their SYCL
//! commands) and tells a [`ModelSink`] about every call, command, node, edge,
//! allocation, copy and device execution as soon as it is complete.
//!
//! ```
//! use offtrace_analysis::SummaryBuilder;
//! use offtrace_format::Record;
//! let records: Vec<Record> = vec![Record::End { records: 0, drops: 0 }];
//! let mut builder = SummaryBuilder::new();
//! for r in &records {
//!     builder.push(r);
//! }
//! let summary = builder.finish();
//! assert!(summary.trace.complete);
//! ```

mod builder;
mod defs;
mod graph;
mod kernels;
pub mod names;
pub mod naming;
mod sink;
mod summary;
#[doc(hidden)]
pub mod testing;

pub use builder::SummaryBuilder;
pub use defs::{Definitions, PayloadDef, Value, decode_value};
pub use graph::{Chain, TaskGraph};
pub use sink::*;
pub use summary::*;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
