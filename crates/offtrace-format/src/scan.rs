//! [`TraceScan`]: a cheap look at a trace file's framing, for `offtrace info`-style summaries.
//!
//! The scan reads the file header and every chunk header, seeking over the payloads: it does
//! not decompress, checksum or decode anything, so it costs one small read per chunk. It
//! reports what the headers claim; [`crate::TraceReader`] is what verifies them.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::Path;

use crate::error::ReadError;
use crate::header::{CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkHeader, END_MAGIC, EndMarker, MAX_CHUNK_BYTES, TraceHeader};
use crate::reader::{TraceReader, read_full};

/// What the framing of a trace file says, without decoding it.
#[derive(Debug)]
#[non_exhaustive]
pub struct TraceScan {
    pub header: TraceHeader,
    pub file_bytes: u64,
    /// Complete chunks (header and the whole payload present).
    pub chunks: u64,
    /// Sum of the complete chunks' record counts.
    pub records: u64,
    /// Payload bytes of the complete chunks as stored, and after decompression.
    pub stored_bytes: u64,
    pub raw_bytes: u64,
    /// The end marker is present, its counts match, and nothing follows it.
    pub finished_cleanly: bool,
    /// Why the scan stopped early (`Truncated`, `CorruptChunk`, `TrailingData`), if it did.
    pub problem: Option<ReadError>,
    /// File offset and record count of the last complete chunk (where a cleanly finished
    /// trace keeps its `End` record): see [`TraceReader::open_at_last_chunk`].
    pub last_chunk: Option<(u64, u32)>,
}

impl TraceReader<BufReader<File>> {
    /// Scans a trace file's framing (see [`TraceScan`]). Fails only if the file cannot be
    /// opened or its header is not a readable trace header; damage later in the file is
    /// reported in [`TraceScan::problem`].
    pub fn summary_scan(path: impl AsRef<Path>) -> Result<TraceScan, ReadError> {
        let path = path.as_ref();
        let open_err = |source| ReadError::Open { path: path.to_owned(), source };
        let file = File::open(path).map_err(open_err)?;
        let file_bytes = file.metadata().map_err(open_err)?.len();
        let reader = TraceReader::new(BufReader::new(file))?;
        let header = *reader.header();
        let mut src = reader.into_inner();
        let mut scan = TraceScan {
            header,
            file_bytes,
            chunks: 0,
            records: 0,
            stored_bytes: 0,
            raw_bytes: 0,
            finished_cleanly: false,
            problem: None,
            last_chunk: None,
        };
        let mut offset = crate::header::FILE_HEADER_LEN as u64;
        loop {
            let chunk = scan.chunks;
            let mut hb = [0u8; CHUNK_HEADER_LEN];
            let n = read_full(&mut src, &mut hb).map_err(|source| ReadError::Io { offset, source })?;
            let truncated = |partial_bytes: u64, expected: String| ReadError::Truncated {
                complete_chunks: chunk,
                offset,
                partial_bytes,
                expected,
            };
            if n < CHUNK_HEADER_LEN {
                scan.problem = Some(truncated(n as u64, "a chunk header or the end marker".to_owned()));
                return Ok(scan);
            }
            let magic = [hb[0], hb[1], hb[2], hb[3]];
            if magic == END_MAGIC {
                let end = offset + CHUNK_HEADER_LEN as u64;
                scan.problem = match EndMarker::from_bytes(&hb) {
                    Err(_) => {
                        Some(ReadError::CorruptChunk { chunk, offset, problem: "end marker checksum mismatch".into() })
                    }
                    Ok(m) if m.chunk_count != scan.chunks || m.record_count != scan.records => {
                        Some(ReadError::CorruptChunk {
                            chunk,
                            offset,
                            problem: "end marker counts do not match the chunks".into(),
                        })
                    }
                    Ok(_) if file_bytes > end => Some(ReadError::TrailingData { offset: end, len: file_bytes - end }),
                    Ok(_) => None,
                };
                scan.finished_cleanly = scan.problem.is_none();
                return Ok(scan);
            }
            let h = ChunkHeader::from_bytes(&hb);
            if magic != CHUNK_MAGIC || h.stored_len as usize > MAX_CHUNK_BYTES || h.raw_len as usize > MAX_CHUNK_BYTES {
                scan.problem = Some(ReadError::CorruptChunk { chunk, offset, problem: "invalid chunk header".into() });
                return Ok(scan);
            }
            let payload_end = offset + (CHUNK_HEADER_LEN as u64) + u64::from(h.stored_len);
            if payload_end > file_bytes {
                let have = file_bytes.saturating_sub(offset);
                scan.problem = Some(truncated(have, format!("{} payload bytes of chunk {chunk}", h.stored_len)));
                return Ok(scan);
            }
            src.seek(SeekFrom::Start(payload_end)).map_err(|source| ReadError::Io { offset, source })?;
            scan.last_chunk = Some((offset, h.record_count));
            offset = payload_end;
            scan.chunks += 1;
            scan.records += u64::from(h.record_count);
            scan.stored_bytes += u64::from(h.stored_len);
            scan.raw_bytes += u64::from(h.raw_len);
        }
    }
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace and positions the reader at the last complete chunk that `scan` (a
    /// [`TraceReader::summary_scan`] of the same file) found, so that reading the tail of a large
    /// trace — its `End` record with the agent's totals — does not decode every chunk.
    ///
    /// Chunks decode on their own (every delta state resets at a chunk start), so the records
    /// read are exact, except that notification timestamps are converted with the header's start
    /// calibration only (the `ClockSync` records of earlier chunks are skipped). The end marker
    /// is checked against the scan's counts as usual. `None` when the scan found no chunk.
    pub fn open_at_last_chunk(path: impl AsRef<Path>, scan: &TraceScan) -> Result<Option<Self>, ReadError> {
        let Some((chunk_offset, chunk_records)) = scan.last_chunk else { return Ok(None) };
        let mut reader = TraceReader::open(path.as_ref())?;
        reader
            .src
            .seek(SeekFrom::Start(chunk_offset))
            .map_err(|source| ReadError::Io { offset: chunk_offset, source })?;
        reader.offset = chunk_offset;
        reader.chunk_offset = chunk_offset;
        reader.complete_chunks = scan.chunks.saturating_sub(1);
        reader.records_read = scan.records.saturating_sub(u64::from(chunk_records));
        Ok(Some(reader))
    }
}
