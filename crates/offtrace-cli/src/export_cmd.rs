//! `offtrace export`: a trace to Perfetto, Chrome JSON, SQLite or CSV, with a progress line on a
//! terminal for large traces. Damage in the trace is stepped over with a warning; a failed
//! export leaves no partial output.

use std::io::IsTerminal;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use offtrace_export::{ExportFormat, ExportOptions, FileSource};

use crate::cli::ExportConfig;
use crate::format;

/// Traces above this size get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 8 << 20;

pub fn run(cfg: &ExportConfig) -> anyhow::Result<u8> {
    let size = std::fs::metadata(&cfg.file).with_context(|| format!("cannot read {}", cfg.file.display()))?.len();
    let bar = (std::io::stderr().is_terminal() && size >= PROGRESS_MIN_BYTES).then(|| {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b
    });
    let mut on_progress = |records: u64| {
        if let Some(b) = &bar {
            b.set_message(format!("{} records", format::count(records)));
            b.tick();
        }
    };
    // The export replaces its output when complete: over the trace itself, the trace is gone.
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(&cfg.file), std::fs::canonicalize(&cfg.output))
        && a == b
    {
        anyhow::bail!("cannot write {}: it is the trace being exported: choose another -o", cfg.output.display());
    }
    // Fails on a file that is no trace (or is empty) before any output is made.
    let source = FileSource::open(&cfg.file).with_context(|| format!("cannot read {}", cfg.file.display()))?;
    let mut source = source.with_progress(&mut on_progress);
    let result = offtrace_export::export(&mut source, &ExportOptions::new(cfg.format, &cfg.output));
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let stats = match result {
        // Found before reading: the trace is fine, the place is not.
        Err(e @ offtrace_export::ExportError::Output { .. }) => anyhow::bail!("{e}: choose another -o"),
        r => r.with_context(|| format!("exporting {} to {}", cfg.file.display(), cfg.output.display()))?,
    };
    for w in &stats.warnings {
        eprintln!("offtrace: warning: {w}");
    }
    if let Some(p) = &stats.problem {
        eprintln!("offtrace: warning: {p}; exported what was read");
    }
    let what = match cfg.format {
        ExportFormat::Perfetto => "packets",
        ExportFormat::Chrome => "events",
        ExportFormat::Sqlite | ExportFormat::Csv => "rows",
    };
    eprintln!(
        "offtrace: exported {} records as {} {what} to {}",
        format::count(stats.records),
        format::count(stats.items),
        cfg.output.display()
    );
    Ok(0)
}
