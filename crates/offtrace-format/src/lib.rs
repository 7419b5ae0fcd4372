#![forbid(unsafe_code)]
//! offtrace-format: the trace file — record model, compact encoding, chunked crash-safe
//! writer, and a streaming reader that never panics.
//!
//! A trace is a 64-byte header followed by independent chunks (LZ4-compressed, crc32-checked)
//! of varint-encoded records, and an end marker. The byte layout is specified in
//! `docs/format.md`.
//!
//! ```
//! use offtrace_format::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Notification timestamps are raw TSC ticks here (2 GHz), calibrated at start.
//! let header = TraceHeader::tsc(2.0e9, 1_000, 5_000_000, 0);
//! let mut w = TraceWriter::new(Vec::new(), &header)?;
//! w.write(&Record::String { id: StrId(1), text: "urEnqueueKernelLaunch".into() })?;
//! let mut args = ArgBlock::default();
//! args.len = 2;
//! args.values[..2].copy_from_slice(&[0x5555_0000_1000, 1]);
//! w.write_notification(&Notification {
//!     ts: 3_000, // ticks
//!     tid: 42,
//!     stream: 1,
//!     trace_type: 0x0e,
//!     instance: 7,
//!     user_data: UserData::FunctionWithArgs {
//!         function_id: 3, name: StrId(1), result: None, args, outs: OutValues::default(),
//!     },
//!     ..Notification::default()
//! })?;
//! w.flush_chunk()?; // from here on, a crash keeps this chunk
//! let bytes = w.finish()?;
//!
//! let mut r = TraceReader::new(&bytes[..])?;
//! assert_eq!(r.header().clock, ClockSource::Tsc);
//! let records: Vec<Record> = r.by_ref().collect::<Result<_, _>>()?;
//! assert!(r.finished_cleanly());
//! // 2000 ticks after the calibration point at 2 GHz = 1000 ns after it.
//! match &records[1] {
//!     Record::Notification(n) => assert_eq!(n.ts, 5_001_000),
//!     other => panic!("unexpected {other:?}"),
//! }
//! assert!(matches!(records.last(), Some(Record::End { .. })));
//! # Ok(())
//! # }
//! ```
//!
//! Reading a file: [`TraceReader::open`]. A file whose recording was killed ends the iteration
//! with [`ReadError::Truncated`] after every record of its complete chunks.

mod chunks;
mod decode;
mod definition;
mod encode;
mod error;
mod header;
mod lz4;
mod reader;
mod record;
mod records;
mod scan;
mod tag;
mod thread_state;
mod timebase;
mod typed;
mod varint;
mod writer;

pub use chunks::ReadWarning;
pub use definition::{Definition, DefinitionKey, DefinitionTable};
pub use error::{DecodeError, ReadError, WriteError};
pub use header::{
    CHUNK_HEADER_LEN, FILE_HEADER_LEN, FORMAT_VERSION, MAGIC, MAX_CHUNK_BYTES, SUPPORTED_VERSIONS, TraceHeader,
};
pub use reader::TraceReader;
pub use record::*;
pub use records::{ApiCallBrief, Batch, ReadOptions, ReadOutcome, TraceRecords};
pub use scan::TraceScan;
pub use writer::{DEFAULT_CHUNK_BYTES, TraceWriter};
