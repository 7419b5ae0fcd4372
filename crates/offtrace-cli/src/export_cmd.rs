//! `offtrace export`: a trace to Perfetto, Chrome JSON, SQLite or CSV, with a progress bar on a
//! terminal for large traces.

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
    // Fail on a non-trace before creating any output.
    offtrace_format::TraceReader::open(&cfg.file).with_context(|| format!("cannot read {}", cfg.file.display()))?;
    let bar = (std::io::stderr().is_terminal() && size >= PROGRESS_MIN_BYTES).then(|| {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b
    });
    let passes = if matches!(cfg.format, ExportFormat::Perfetto | ExportFormat::Chrome) { 2 } else { 1 };
    let mut total_records = 0u64;
    let mut on_progress = |pass: u32, records: u64| {
        if pass == 1 {
            total_records = total_records.max(records);
        }
        if let Some(b) = &bar {
            if pass == 2 && b.length().is_none() && total_records > 0 {
                b.set_style(
                    ProgressStyle::with_template("{bar:40} {pos}/{len} records (pass 2/2) {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                b.set_length(total_records);
            }
            if b.length().is_some() {
                b.set_position(records);
            } else {
                b.set_message(format!("pass {pass}/{passes}: {} records", format::count(records)));
                b.tick();
            }
        }
    };
    let mut source = FileSource(cfg.file.clone());
    let result =
        offtrace_export::export(&mut source, &ExportOptions::new(cfg.format, &cfg.output), Some(&mut on_progress));
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let stats = result.with_context(|| format!("exporting {} to {}", cfg.file.display(), cfg.output.display()))?;
    if let Some(t) = &stats.truncated {
        eprintln!("offtrace: warning: trace truncated, exported what was read: {t}");
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
