//! CSV export: one file per table (`<table>.csv`, with a header row) in an output directory.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::rows::{TableWriter, write_tables};
use crate::source::RecordSource;
use crate::tables::{Cell, Table};
use crate::{ExportError, ExportStats};

struct CsvWriter {
    files: Vec<(PathBuf, csv::Writer<BufWriter<File>>)>,
    field: String,
    /// Per table, the largest `id` written so far. A row's id is NULL when SQLite assigns it (an
    /// `INTEGER PRIMARY KEY` takes the largest id so far + 1); the CSV gives the same number, so
    /// that other rows can name it (`queue_wait.activity` is a `device_activity.id`).
    last_id: Vec<i64>,
}

/// Whether the table's first column is an id SQLite assigns when the row gives none.
fn assigns_ids(table: Table) -> bool {
    table.columns().first() == Some(&("id", "INTEGER PRIMARY KEY"))
}

impl TableWriter for CsvWriter {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError> {
        use std::fmt::Write as _;
        let i = Table::ALL.iter().position(|t| *t == table).unwrap_or(0);
        let (path, w) = &mut self.files[i];
        for (n, c) in cells.iter().enumerate() {
            self.field.clear();
            let _ = match c {
                Cell::Null if n == 0 && assigns_ids(table) => {
                    self.last_id[i] += 1;
                    write!(self.field, "{}", self.last_id[i])
                }
                Cell::Int(v) if n == 0 && assigns_ids(table) => {
                    self.last_id[i] = self.last_id[i].max(*v);
                    write!(self.field, "{v}")
                }
                Cell::Null => Ok(()),
                Cell::Int(v) => write!(self.field, "{v}"),
                Cell::Real(v) => write!(self.field, "{v}"),
                Cell::Text(t) => self.field.write_str(t),
            };
            w.write_field(&self.field).map_err(|source| ExportError::Csv { path: path.clone(), source })?;
        }
        w.write_record(None::<&[u8]>).map_err(|source| ExportError::Csv { path: path.clone(), source })
    }
}

/// The files the export writes into `dir`.
pub(crate) fn file_names() -> impl Iterator<Item = String> {
    Table::ALL.iter().map(|t| format!("{}.csv", t.name()))
}

pub(crate) fn export(source: &mut dyn RecordSource, dir: &Path) -> Result<ExportStats, ExportError> {
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Write { path: dir.to_owned(), source })?;
    let mut files = Vec::new();
    for t in Table::ALL {
        let path = dir.join(format!("{}.csv", t.name()));
        let f = File::create(&path).map_err(|source| ExportError::Write { path: path.clone(), source })?;
        let mut w = csv::Writer::from_writer(BufWriter::with_capacity(256 << 10, f));
        w.write_record(t.columns().iter().map(|(c, _)| *c))
            .map_err(|source| ExportError::Csv { path: path.clone(), source })?;
        files.push((path, w));
    }
    let mut w = CsvWriter { last_id: vec![0; files.len()], files, field: String::new() };
    let stats = write_tables(source, &mut w)?;
    for (path, mut f) in w.files {
        f.flush().map_err(|source| ExportError::Write { path, source })?;
    }
    Ok(stats)
}
