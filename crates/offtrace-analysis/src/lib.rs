#![forbid(unsafe_code)]
//! Analysis of offtrace traces over typed records: a streaming [`Analyzer`] that turns a trace's
//! records into a [`Report`] (API calls per kind and operation, device activity per kind and
//! name, memory, queues, task graph, threads, counters, markers, drops, and the raw layer's
//! notification counts when recorded). Kinds and operations are named by the definitions the
//! trace carries, so a kind this crate has never heard of is reported like any other.
//!
//! ```
//! use offtrace_analysis::Analyzer;
//! use offtrace_format::Record;
//! let mut a = Analyzer::new();
//! a.push(&Record::End { records: 1, drops: 0 });
//! let report = a.finish(true, Vec::new(), None);
//! assert!(report.trace.complete);
//! ```
//!
//! A file: [`analyze_file`] reads it with the parallel, damage-tolerant reader.

mod analyzer;
pub mod busy_time;
pub mod early;
pub mod live_memory;
pub mod names;
pub mod naming;
mod report;
#[doc(hidden)]
pub mod testing;

use std::path::Path;

pub use analyzer::{AWAITING_CALL_MAX, Analyzer, GRAPH_NODES_MAX, PENDING_MAX};
use offtrace_format::{Batch, ReadError, ReadOptions, ReadWarning, TraceRecords};
pub use report::*;

/// Reads a trace file (chunks decoded on every core) into its report. Damage is stepped over:
/// `on_warning` hears each stretch skipped, and the report lists them. Errors only when the
/// file cannot be read as a trace at all (missing, empty, not a trace).
pub fn analyze_file(path: impl AsRef<Path>, mut on_warning: impl FnMut(&ReadWarning)) -> Result<Report, ReadError> {
    // The report never looks at argument values, and needs of an API call (most records) only
    // its times and ids: the reader keeps the calls apart, 64 bytes each instead of a 264-byte
    // record.
    let options = ReadOptions { api_args: false, api_calls_apart: true, ..ReadOptions::default() };
    let mut trace = TraceRecords::open(path, options)?;
    let mut analyzer = Analyzer::new();
    analyzer.set_format_version(trace.header().version);
    let mut warnings = Vec::new();
    while let Some(batch) = trace.next_batch() {
        match batch {
            Batch::Records(records) => {
                // Back in file order: each call where it was among the records.
                let mut calls = trace.api_calls().iter().peekable();
                for (i, r) in records.iter().enumerate() {
                    while let Some(c) = calls.next_if(|c| c.at as usize <= i) {
                        analyzer.push_api_call(c);
                    }
                    analyzer.push(r);
                }
                for c in calls {
                    analyzer.push_api_call(c);
                }
                trace.recycle(records);
            }
            Batch::Warning(w) => {
                on_warning(&w);
                warnings.push(w.to_string());
            }
        }
    }
    let outcome = trace.into_outcome();
    let complete = outcome.finished_cleanly();
    Ok(analyzer.finish(complete, warnings, outcome.problem.map(|p| p.to_string())))
}
