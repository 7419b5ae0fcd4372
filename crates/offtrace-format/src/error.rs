//! The errors of writing and reading a trace, with the context needed to act on them.

use std::io;
use std::path::PathBuf;

/// A malformed record inside a chunk whose checksum was valid (a writer bug or a crafted file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the chunk ends inside {what}")]
    UnexpectedEnd { what: &'static str },
    #[error("{what}: varint longer than 64 bits")]
    VarintOverflow { what: &'static str },
    #[error("{what}: value {found} out of range (max {max})")]
    OutOfRange { what: &'static str, found: u64, max: u64 },
    #[error("unknown record tag {tag:#04x}")]
    UnknownTag { tag: u8 },
    #[error("record tag {tag:#04x} does not exist in format version {version} (added in version {since})")]
    TagNotInVersion { tag: u8, version: u16, since: u16 },
    #[error("{what}: not valid UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("{what}: length {len} exceeds the {remaining} bytes left in the chunk")]
    LengthTooLarge { what: &'static str, len: u64, remaining: usize },
    #[error("invalid {what}: {found:#x}")]
    Invalid { what: &'static str, found: u64 },
}

/// Why a trace could not be read (further).
///
/// Offsets are byte offsets in the file; `chunk` fields are 0-based indices (`chunk: 2` is the
/// third chunk), `complete_chunks` is a count. After any error the reader's iterator ends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("cannot open trace {path}: {source}")]
    Open { path: PathBuf, source: io::Error },

    #[error("I/O error reading the trace at byte {offset}: {source}")]
    Io { offset: u64, source: io::Error },

    #[error("{path} is empty (0 bytes): the recording wrote nothing (it failed to start, or the disk was full)")]
    Empty { path: PathBuf },

    #[error("not an offtrace trace: the file starts with {found:02x?}, expected the magic \"OFFTRACE\"")]
    NotATrace { found: Vec<u8> },

    #[error("unsupported trace format version {found}: this build of offtrace reads versions {supported:?}")]
    UnsupportedVersion { found: u16, supported: &'static [u16] },

    #[error("invalid trace file header: {reason}")]
    InvalidHeader { reason: String },

    /// The file ends before the end marker: the recording did not finish (the program was
    /// probably killed). Every record of the `complete_chunks` chunks before `offset` was
    /// returned before this error.
    #[error(
        "trace truncated at byte {offset}, after {complete_chunks} complete chunks: the recording did not \
         finish (program killed?); the records of those {complete_chunks} chunks were read{}",
        truncation_detail(.partial_bytes, .expected)
    )]
    Truncated { complete_chunks: u64, offset: u64, partial_bytes: u64, expected: String },

    #[error(
        "corrupt trace: chunk {chunk} at byte {offset}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
    )]
    Checksum { chunk: u64, offset: u64, stored: u32, computed: u32 },

    #[error("corrupt trace: chunk {chunk} at byte {offset}: {problem}")]
    CorruptChunk { chunk: u64, offset: u64, problem: String },

    #[error(
        "corrupt trace: chunk {chunk} at byte {offset}, record {record} (byte {position} of the decompressed chunk): {source}"
    )]
    Record { chunk: u64, offset: u64, record: u32, position: usize, source: DecodeError },

    /// A definition that contradicts an earlier one of the same id (a repeat must say the same).
    #[error("corrupt trace: chunk {chunk}: {key} is defined again with another value")]
    ConflictingDefinition { chunk: u64, key: crate::DefinitionKey },

    #[error("corrupt trace: {len} unexpected bytes after the end marker at byte {offset}")]
    TrailingData { offset: u64, len: u64 },

    #[error("unclean trace: the end marker at byte {offset} is not preceded by an End record")]
    MissingEndRecord { offset: u64 },
}

fn truncation_detail(partial_bytes: &u64, expected: &str) -> String {
    if *partial_bytes > 0 {
        format!(" ({partial_bytes} more bytes follow, expected {expected})")
    } else {
        String::new()
    }
}

impl ReadError {
    /// The file stops before its end marker (the recording was cut off).
    pub fn is_truncated(&self) -> bool {
        matches!(self, Self::Truncated { .. })
    }

    /// The file's bytes are damaged or inconsistent.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            Self::Checksum { .. }
                | Self::CorruptChunk { .. }
                | Self::Record { .. }
                | Self::ConflictingDefinition { .. }
                | Self::TrailingData { .. }
                | Self::MissingEndRecord { .. }
                | Self::InvalidHeader { .. }
        )
    }
}

/// Why a trace could not be written. After an I/O error the writer is poisoned: every later
/// call returns [`WriteError::Poisoned`] (a partially written chunk cannot be taken back).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error("invalid trace header: {reason}")]
    InvalidHeader { reason: &'static str },

    #[error("writing the trace file header: {source}")]
    Header { source: io::Error },

    #[error("writing chunk {chunk} at byte {offset}: {source}")]
    Chunk { chunk: u64, offset: u64, source: io::Error },

    #[error("writing the end marker at byte {offset}: {source}")]
    EndMarker { offset: u64, source: io::Error },

    #[error("compressing chunk {chunk}: {reason}")]
    Compress { chunk: u64, reason: String },

    #[error("a record of {size} encoded bytes does not fit in a chunk (max {max} bytes)")]
    RecordTooLarge { size: usize, max: usize },

    #[error("the trace writer failed earlier and writes nothing more (first error: {first})")]
    Poisoned { first: String },
}
