//! SQLite export: every table of [`Table`], filled in batched transactions, then indexed, then
//! the views of [`crate::tables::VIEWS`] (`docs/sqlite-schema.md`).

use std::path::Path;

use rusqlite::{Connection, types::ValueRef};

use crate::rows::{TableWriter, write_tables};
use crate::source::RecordSource;
use crate::tables::{Cell, Table, VIEWS};
use crate::{ExportError, ExportStats};

/// Rows per transaction: large enough to amortise the commit, small enough to bound the
/// journal.
const BATCH_ROWS: u64 = 200_000;

struct SqliteWriter<'p> {
    conn: Connection,
    path: &'p Path,
    in_batch: u64,
    inserts: Vec<String>,
}

impl SqliteWriter<'_> {
    fn err(&self, source: rusqlite::Error) -> ExportError {
        ExportError::Sqlite { path: self.path.to_owned(), source }
    }
}

impl TableWriter for SqliteWriter<'_> {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError> {
        if self.in_batch == 0 {
            self.conn.execute_batch("BEGIN").map_err(|e| self.err(e))?;
        }
        let sql = &self.inserts[Table::ALL.iter().position(|t| *t == table).unwrap_or(0)];
        let path = self.path;
        let mut stmt =
            self.conn.prepare_cached(sql).map_err(|e| ExportError::Sqlite { path: path.to_owned(), source: e })?;
        for (i, c) in cells.iter().enumerate() {
            let v = match c {
                Cell::Null => ValueRef::Null,
                Cell::Int(i) => ValueRef::Integer(*i),
                Cell::Real(r) => ValueRef::Real(*r),
                Cell::Text(t) => ValueRef::Text(t.as_bytes()),
            };
            stmt.raw_bind_parameter(i + 1, rusqlite::types::ToSqlOutput::Borrowed(v))
                .map_err(|e| ExportError::Sqlite { path: path.to_owned(), source: e })?;
        }
        stmt.raw_execute().map_err(|e| ExportError::Sqlite { path: path.to_owned(), source: e })?;
        drop(stmt);
        self.in_batch += 1;
        if self.in_batch >= BATCH_ROWS {
            self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
            self.in_batch = 0;
        }
        Ok(())
    }
}

pub(crate) fn export(source: &mut dyn RecordSource, path: &Path) -> Result<ExportStats, ExportError> {
    let err = |source| ExportError::Sqlite { path: path.to_owned(), source };
    let conn = Connection::open(path).map_err(err)?;
    conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;").map_err(err)?;
    conn.set_prepared_statement_cache_capacity(Table::ALL.len() + 4);
    let mut inserts = Vec::new();
    for t in Table::ALL {
        let cols: Vec<String> = t.columns().iter().map(|(c, ty)| format!("\"{c}\" {ty}")).collect();
        conn.execute_batch(&format!("CREATE TABLE {} ({});", t.name(), cols.join(", "))).map_err(err)?;
        let names: Vec<String> = t.columns().iter().map(|(c, _)| format!("\"{c}\"")).collect();
        let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
        inserts.push(format!("INSERT INTO {} ({}) VALUES ({})", t.name(), names.join(", "), marks.join(", ")));
    }
    let mut w = SqliteWriter { conn, path, in_batch: 0, inserts };
    let stats = write_tables(source, &mut w)?;
    if w.in_batch > 0 {
        w.conn.execute_batch("COMMIT").map_err(err)?;
    }
    for t in Table::ALL {
        for cols in t.indices() {
            let quoted: Vec<String> = cols.split(", ").map(|c| format!("\"{c}\"")).collect();
            let name = cols.replace(", ", "_");
            w.conn
                .execute_batch(&format!("CREATE INDEX {0}_{1} ON {0} ({2});", t.name(), name, quoted.join(", ")))
                .map_err(err)?;
        }
    }
    for (name, select) in VIEWS {
        w.conn.execute_batch(&format!("CREATE VIEW {name} AS {select};")).map_err(err)?;
    }
    w.conn.close().map_err(|(_, e)| err(e))?;
    Ok(stats)
}
