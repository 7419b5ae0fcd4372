#![forbid(unsafe_code)]
//! Exports of offtrace traces over typed records, all streaming in one pass (two for a damaged
//! trace whose definitions come again after the damage, `source.rs`; memory bounded by
//! definitions, tracks and work waiting for its call or completion, not by the trace's size):
//!
//! - [`ExportFormat::Perfetto`]: a `.pftrace` protobuf `Trace`, hand-encoded (no protoc), with
//!   its clock stated (CLOCK_MONOTONIC),
//! - [`ExportFormat::Chrome`]: Chrome trace-event JSON,
//! - [`ExportFormat::Sqlite`]: a table per record type joined by ids, with views for the usual
//!   questions (`docs/sqlite-schema.md`),
//! - [`ExportFormat::Csv`]: the same tables as CSV files in a directory.
//!
//! Timelines (Perfetto, Chrome): a track per thread and per device queue, no overlapping slices
//! on any track, flows from each API call to the device work it caused, counter tracks.
//!
//! An export writes to a temporary name beside the output and renames it into place when it is
//! complete: a failed export leaves no partial output behind.
//!
//! ```no_run
//! use offtrace_export::{export, ExportFormat, ExportOptions, FileSource};
//! # fn main() -> Result<(), offtrace_export::ExportError> {
//! let mut src = FileSource::open("run.offtrace")?;
//! let stats = export(&mut src, &ExportOptions::new(ExportFormat::Perfetto, "run.pftrace"))?;
//! println!("{} records", stats.records);
//! # Ok(()) }
//! ```

mod chrome;
mod csv_out;
mod defs;
mod dependencies;
mod error;
mod lanes;
mod perfetto;
mod proto;
mod rows;
mod source;
mod sqlite;
mod tables;
mod timeline;

use std::path::{Path, PathBuf};

pub use error::ExportError;
use offtrace_format::{Record, TraceHeader};
pub use source::{FileSource, MemorySource, ProgressFn, RecordSource};
pub use tables::{Cell, Table, VIEWS};

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

/// What an export read and wrote.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExportStats {
    /// Records read.
    pub records: u64,
    /// Perfetto packets, JSON events or table rows written.
    pub items: u64,
    /// Damage the reader stepped over (what was wrong, what was skipped).
    pub warnings: Vec<String>,
    /// Why the trace does not end cleanly (truncated, ...), if it does not.
    pub problem: Option<String>,
}

/// A temporary name beside `output` (hidden, with our pid).
fn partial_path(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

fn remove(path: &Path) {
    let _ = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
}

/// Moves the finished export into place.
fn commit(tmp: &Path, output: &Path, format: ExportFormat) -> Result<(), ExportError> {
    let werr = |path: &Path| {
        let path = path.to_owned();
        move |source| ExportError::Write { path, source }
    };
    if format != ExportFormat::Csv || !output.is_dir() {
        return std::fs::rename(tmp, output).map_err(werr(output));
    }
    // An existing directory: our files replace theirs, anything else in it stays.
    for name in csv_out::file_names() {
        std::fs::rename(tmp.join(&name), output.join(&name)).map_err(werr(&output.join(&name)))?;
    }
    std::fs::remove_dir(tmp).map_err(werr(tmp))
}

/// Whether the output can be made, checked before anything is read (a large trace takes minutes
/// to export; failing at the final rename, naming the temporary file, was the old way): its
/// folder exists, and it is a file (a folder for CSV) or not there yet.
fn check_output(output: &Path, format: ExportFormat) -> Result<(), ExportError> {
    let problem = |problem: String| Err(ExportError::Output { path: output.to_owned(), problem });
    let folder = output.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !folder.is_dir() {
        return problem(format!("the folder {} does not exist", folder.display()));
    }
    let csv = format == ExportFormat::Csv;
    if output.is_dir() && !csv {
        return problem("it is a folder".into());
    }
    if output.exists() && !output.is_dir() && csv {
        return problem("it is a file; CSV writes a folder of files (one per table)".into());
    }
    Ok(())
}

/// Exports `source` as `options` say.
pub fn export(source: &mut dyn RecordSource, options: &ExportOptions) -> Result<ExportStats, ExportError> {
    let output = &options.output;
    check_output(output, options.format)?;
    let tmp = partial_path(output);
    remove(&tmp);
    let run = |source: &mut dyn RecordSource| match options.format {
        ExportFormat::Perfetto => perfetto::export(source, &tmp),
        ExportFormat::Chrome => chrome::export(source, &tmp),
        ExportFormat::Sqlite => sqlite::export(source, &tmp),
        ExportFormat::Csv => csv_out::export(source, &tmp),
    };
    let mut result = run(source);
    // A damaged trace whose later records are defined only after them (`source.rs`): again,
    // with those definitions first.
    if result.is_ok() {
        match source.prepare_second_reading() {
            Ok(true) => {
                remove(&tmp);
                result = run(source);
            }
            Ok(false) => {}
            Err(e) => result = Err(e),
        }
    }
    match result.and_then(|stats| commit(&tmp, output, options.format).map(|()| stats)) {
        Ok(stats) => Ok(stats),
        Err(e) => {
            remove(&tmp);
            Err(e)
        }
    }
}

/// Exports records held in memory (tests), as a trace with a monotonic clock.
pub fn export_records(records: &[Record], options: &ExportOptions) -> Result<ExportStats, ExportError> {
    export(&mut MemorySource { records, header: TraceHeader::monotonic() }, options)
}
