//! CSV export: one file per table (`<table>.csv`, with a header row) in an output directory.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::rows::{TableWriter, write_tables};
use crate::source::{ProgressFn, RecordSource};
use crate::tables::{Cell, Table};
use crate::{ExportError, ExportStats};

struct CsvWriter {
    files: Vec<(PathBuf, csv::Writer<BufWriter<File>>)>,
}

impl TableWriter for CsvWriter {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError> {
        let i = Table::ALL.iter().position(|t| *t == table).unwrap_or(0);
        let (path, w) = &mut self.files[i];
        let fields = cells.iter().map(|c| match c {
            Cell::Null => String::new(),
            Cell::Int(v) => v.to_string(),
            Cell::Real(v) => v.to_string(),
            Cell::Text(t) => t.to_string(),
        });
        w.write_record(fields).map_err(|source| ExportError::Csv { path: path.clone(), source })
    }
}

pub(crate) fn export(
    source: &mut dyn RecordSource,
    dir: &Path,
    progress: Option<&mut ProgressFn<'_>>,
) -> Result<ExportStats, ExportError> {
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Write { path: dir.to_owned(), source })?;
    let mut files = Vec::new();
    for t in Table::ALL {
        let path = dir.join(format!("{}.csv", t.name()));
        let f = File::create(&path).map_err(|source| ExportError::Write { path: path.clone(), source })?;
        let mut w = csv::Writer::from_writer(BufWriter::new(f));
        w.write_record(t.columns().iter().map(|(c, _)| *c))
            .map_err(|source| ExportError::Csv { path: path.clone(), source })?;
        files.push((path, w));
    }
    let mut w = CsvWriter { files };
    let (stats, _) = write_tables(source, &mut w, progress)?;
    for (path, mut f) in w.files {
        f.flush().map_err(|source| ExportError::Write { path, source })?;
    }
    Ok(stats)
}
