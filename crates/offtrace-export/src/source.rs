//! Where records come from: a trace file (read once per pass) or records in memory (tests).

use std::path::PathBuf;

use offtrace_format::{ReadError, Record, TraceReader};

use crate::ExportError;

/// Something that can be read from the start, once per export pass.
pub trait RecordSource {
    /// A fresh iterator over every record, from the beginning.
    fn records(&mut self) -> Result<Box<dyn Iterator<Item = Result<Record, ReadError>> + '_>, ExportError>;
}

/// A trace file.
#[derive(Debug, Clone)]
pub struct FileSource(pub PathBuf);

impl RecordSource for FileSource {
    fn records(&mut self) -> Result<Box<dyn Iterator<Item = Result<Record, ReadError>> + '_>, ExportError> {
        Ok(Box::new(TraceReader::open(&self.0)?))
    }
}

/// Records already in memory.
#[derive(Debug, Clone)]
pub struct MemorySource<'a>(pub &'a [Record]);

impl RecordSource for MemorySource<'_> {
    fn records(&mut self) -> Result<Box<dyn Iterator<Item = Result<Record, ReadError>> + '_>, ExportError> {
        Ok(Box::new(self.0.iter().cloned().map(Ok)))
    }
}

/// Progress reports: `(pass, records read in this pass)`, every few thousand records.
pub type ProgressFn<'a> = dyn FnMut(u32, u64) + 'a;

/// How a pass ended.
#[derive(Debug, Default, Clone)]
pub(crate) struct PassOutcome {
    pub records: u64,
    /// The reader's message when the trace stops before its end (recording cut off).
    pub truncated: Option<String>,
}

const PROGRESS_EVERY: u64 = 16 * 1024;

/// Reads every record of one pass; a truncated trace ends the pass quietly (what was read is
/// kept), any other read error fails it.
pub(crate) fn for_each_record(
    source: &mut dyn RecordSource,
    pass: u32,
    progress: &mut Option<&mut ProgressFn<'_>>,
    mut f: impl FnMut(&Record) -> Result<(), ExportError>,
) -> Result<PassOutcome, ExportError> {
    let mut out = PassOutcome::default();
    for item in source.records()? {
        match item {
            Ok(record) => {
                f(&record)?;
                out.records += 1;
                if out.records % PROGRESS_EVERY == 0
                    && let Some(p) = progress.as_mut()
                {
                    p(pass, out.records);
                }
            }
            Err(e) if e.is_truncated() => {
                out.truncated = Some(e.to_string());
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(p) = progress.as_mut() {
        p(pass, out.records);
    }
    Ok(out)
}
