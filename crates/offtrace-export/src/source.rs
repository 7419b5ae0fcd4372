//! Where records come from: a trace file (read once, chunks decoded on every core, damage
//! stepped over) or records in memory (tests).
//!
//! A damaged trace is read twice when that names more: the exports name records as they stream
//! past, and the definitions of the records after the damage may be in the file only after
//! them (the recorder repeats its definitions, and the first copy was in the damaged part). The
//! second reading gives those definitions first. An undamaged trace is read once.

use std::path::PathBuf;

use offtrace_format::{ReadOptions, Record, TraceHeader, TraceRecords};

use crate::{ExportError, ExportStats};

/// Progress reports: records read so far, every few thousand records.
pub type ProgressFn<'a> = dyn FnMut(u64) + 'a;

/// Something an export reads once, in file order.
pub trait RecordSource {
    /// The file header (the clock's start points).
    fn header(&self) -> TraceHeader;
    /// Calls `f` for every record; returns what the reading met (records, warnings, truncation).
    fn read(&mut self, f: &mut dyn FnMut(&Record) -> Result<(), ExportError>) -> Result<ExportStats, ExportError>;
    /// After a [`Self::read`]: whether a second reading would name records the first could not
    /// (definitions met only after damage), and if so prepares it (the next `read` gives those
    /// definitions first, then every record again). `false` by default.
    fn prepare_second_reading(&mut self) -> Result<bool, ExportError> {
        Ok(false)
    }
}

/// A trace file.
pub struct FileSource<'p> {
    path: PathBuf,
    trace: TraceRecords,
    progress: Option<&'p mut ProgressFn<'p>>,
    /// Definitions the last reading met only after damage.
    late: Vec<Record>,
    /// Definitions to give before the file's records (a second reading).
    first: Vec<Record>,
}

impl std::fmt::Debug for FileSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource").field("trace", &self.trace).finish()
    }
}

impl<'p> FileSource<'p> {
    /// Opens the trace (fails on a file that is no trace, before any output is made).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, ExportError> {
        let path = path.into();
        let trace = TraceRecords::open(&path, ReadOptions::default())?;
        Ok(Self { path, trace, progress: None, late: Vec::new(), first: Vec::new() })
    }

    pub fn with_progress(mut self, progress: &'p mut ProgressFn<'p>) -> Self {
        self.progress = Some(progress);
        self
    }
}

const PROGRESS_EVERY: u64 = 1 << 20;

impl RecordSource for FileSource<'_> {
    fn header(&self) -> TraceHeader {
        *self.trace.header()
    }

    fn read(&mut self, f: &mut dyn FnMut(&Record) -> Result<(), ExportError>) -> Result<ExportStats, ExportError> {
        let mut stats = ExportStats::default();
        let mut next_progress = PROGRESS_EVERY;
        self.trace.seed_definitions(&self.first);
        for r in &std::mem::take(&mut self.first) {
            f(r)?;
        }
        while let Some(batch) = self.trace.next_batch() {
            match batch {
                offtrace_format::Batch::Records(records) => {
                    for r in &records {
                        f(r)?;
                    }
                    stats.records += records.len() as u64;
                    self.trace.recycle(records);
                    if stats.records >= next_progress {
                        next_progress += PROGRESS_EVERY;
                        if let Some(p) = self.progress.as_mut() {
                            p(stats.records);
                        }
                    }
                }
                offtrace_format::Batch::Warning(w) => stats.warnings.push(w.to_string()),
            }
        }
        if let Some(p) = self.progress.as_mut() {
            p(stats.records);
        }
        stats.problem = self.trace.outcome().problem.as_ref().map(ToString::to_string);
        self.late = self.trace.late_definitions().to_vec();
        Ok(stats)
    }

    fn prepare_second_reading(&mut self) -> Result<bool, ExportError> {
        if self.late.is_empty() {
            return Ok(false);
        }
        self.trace = TraceRecords::open(&self.path, ReadOptions::default())?;
        self.first = std::mem::take(&mut self.late);
        Ok(true)
    }
}

/// Records already in memory.
#[derive(Debug, Clone)]
pub struct MemorySource<'a> {
    pub records: &'a [Record],
    pub header: TraceHeader,
}

impl RecordSource for MemorySource<'_> {
    fn header(&self) -> TraceHeader {
        self.header
    }

    fn read(&mut self, f: &mut dyn FnMut(&Record) -> Result<(), ExportError>) -> Result<ExportStats, ExportError> {
        for r in self.records {
            f(r)?;
        }
        Ok(ExportStats { records: self.records.len() as u64, ..ExportStats::default() })
    }
}

/// Reads every record of `source` into `f`.
pub(crate) fn read_records(
    source: &mut dyn RecordSource,
    mut f: impl FnMut(&Record) -> Result<(), ExportError>,
) -> Result<ExportStats, ExportError> {
    source.read(&mut f)
}
