//! Export errors.

use std::path::PathBuf;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    #[error(transparent)]
    Read(#[from] offtrace_format::ReadError),
    /// The output cannot be made where it was asked for; found before anything is read.
    #[error("cannot write {path}: {problem}")]
    Output { path: PathBuf, problem: String },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("SQLite error writing {path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error("CSV error writing {path}: {source}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("JSON error writing {path}: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
}
