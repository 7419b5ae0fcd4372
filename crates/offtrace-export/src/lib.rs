#![forbid(unsafe_code)]
//! Exports of offtrace traces, all streaming (memory bounded by what is open at one time plus
//! the task graph; two passes over the file):
//!
//! - [`ExportFormat::Perfetto`]: a `.pftrace` protobuf `Trace`, hand-encoded (no protoc),
//! - [`ExportFormat::Chrome`]: Chrome trace-event JSON,
//! - [`ExportFormat::Sqlite`]: one table per kind of thing (`docs/sqlite-schema.md`),
//! - [`ExportFormat::Csv`]: the same tables as CSV files in a directory.
//!
//! ```no_run
//! use offtrace_export::{export, ExportFormat, ExportOptions, FileSource};
//! # fn main() -> Result<(), offtrace_export::ExportError> {
//! let mut src = FileSource("run.offtrace".into());
//! let stats = export(&mut src, &ExportOptions::new(ExportFormat::Perfetto, "run.pftrace"), None)?;
//! println!("{} records", stats.records);
//! # Ok(()) }
//! ```

mod chrome;
mod csv_out;
mod error;
mod lanes;
mod perfetto;
mod proto;
mod rows;
mod source;
mod sqlite;
mod tables;
mod timeline;

use std::path::PathBuf;

pub use error::ExportError;
pub use source::{FileSource, MemorySource, ProgressFn, RecordSource};
pub use tables::{Cell, Table};

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Perfetto,
    Chrome,
    Sqlite,
    Csv,
}

/// What to export where.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// A file (a directory for CSV).
    pub output: PathBuf,
}

impl ExportOptions {
    pub fn new(format: ExportFormat, output: impl Into<PathBuf>) -> Self {
        Self { format, output: output.into() }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Default)]
pub struct ExportStats {
    /// Records read in the last pass.
    pub records: u64,
    /// Perfetto packets, JSON events or table rows written.
    pub items: u64,
    /// Set when the trace stops before its end: what was read was exported.
    pub truncated: Option<String>,
}

/// Exports `source` as `options` say. `progress` hears `(pass, records)` now and then.
pub fn export(
    source: &mut dyn RecordSource,
    options: &ExportOptions,
    progress: Option<&mut ProgressFn<'_>>,
) -> Result<ExportStats, ExportError> {
    match options.format {
        ExportFormat::Perfetto => perfetto::export(source, &options.output, progress),
        ExportFormat::Chrome => chrome::export(source, &options.output, progress),
        ExportFormat::Sqlite => sqlite::export(source, &options.output, progress),
        ExportFormat::Csv => csv_out::export(source, &options.output, progress),
    }
}

/// Exports one format, for callers holding records in memory.
pub fn export_records(
    records: &[offtrace_format::Record],
    options: &ExportOptions,
) -> Result<ExportStats, ExportError> {
    export(&mut MemorySource(records), options, None)
}
