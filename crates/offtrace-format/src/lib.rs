#![forbid(unsafe_code)]
//! offtrace-format: the trace file.

mod record;
pub use record::*;
