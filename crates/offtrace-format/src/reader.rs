//! [`TraceReader`]: a streaming reader that never panics and holds at most one chunk in memory.
//!
//! Records come out in file order as `Result<Record, ReadError>`. Notification timestamps are
//! converted from raw ticks to CLOCK_MONOTONIC nanoseconds with the latest calibration point
//! (the header's start point, then each [`Record::ClockSync`] in file order):
//! `ns = sync.monotonic_ns + (ticks - sync.ticks) * 1e9 / ticks_per_second` for the TSC, the
//! identity for [`crate::ClockSource::Monotonic`].
//!
//! A chunk is verified (length bounds, crc32, decompression) before any of its records is
//! returned. How the iteration ends tells how the recording ended:
//!
//! - `None` after the end marker: [`TraceReader::finished_cleanly`] is `true`;
//! - `Some(Err(ReadError::Truncated { .. }))` then `None`: the file stops before the end marker
//!   (the program was probably killed); every record of the complete chunks came first;
//! - `Some(Err(..))` then `None` for a corrupt or foreign file, with the chunk and file offset.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use crate::decode::{Cursor, Decoder};
use crate::error::ReadError;
use crate::header::{
    CHUNK_FLAG_LZ4, CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkHeader, END_MAGIC, EndMarker, FILE_HEADER_LEN, HeaderProblem,
    MAX_CHUNK_BYTES, SUPPORTED_VERSIONS, TraceHeader, decode_file_header,
};
use crate::record::Record;
use crate::timebase::Timebase;

/// LZ4 cannot expand a block by more than this factor: bounds the decompression buffer by the
/// bytes actually read.
const MAX_LZ4_RATIO: u64 = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    Clean,
    Failed,
}

/// Reads a trace, one record at a time.
///
/// ```no_run
/// use offtrace_format::{ReadError, Record, TraceReader};
///
/// let mut reader = TraceReader::open("w4.offtrace")?;
/// for item in reader.by_ref() {
///     match item {
///         Ok(Record::Notification(n)) => println!("{} ns on thread {}", n.ts, n.tid),
///         Ok(_) => {}
///         // Killed recording: every complete chunk was returned before this.
///         Err(e @ ReadError::Truncated { .. }) => eprintln!("warning: {e}"),
///         Err(e) => return Err(e.into()),
///     }
/// }
/// if !reader.finished_cleanly() {
///     eprintln!("warning: the recording did not finish");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct TraceReader<R: Read> {
    pub(crate) src: R,
    header: TraceHeader,
    state: State,
    /// File offset of the next unread byte.
    pub(crate) offset: u64,
    /// File offset of the current chunk's header.
    pub(crate) chunk_offset: u64,
    pub(crate) complete_chunks: u64,
    stored: Vec<u8>,
    raw: Vec<u8>,
    pos: usize,
    records_left: u32,
    record_in_chunk: u32,
    pub(crate) records_read: u64,
    decoder: Decoder,
    timebase: Timebase,
    saw_end_record: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens a trace file and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| ReadError::Open { path: path.to_owned(), source })?;
        Self::new(BufReader::with_capacity(256 << 10, file))
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads the file header from `src`.
    pub fn new(mut src: R) -> Result<Self, ReadError> {
        let mut b = [0u8; FILE_HEADER_LEN];
        let n = read_full(&mut src, &mut b).map_err(|source| ReadError::Io { offset: 0, source })?;
        let magic_len = n.min(8);
        if b[..magic_len] != crate::header::MAGIC[..magic_len] {
            return Err(ReadError::NotATrace { found: b[..magic_len].to_vec() });
        }
        if n >= 10 {
            let version = u16::from_le_bytes([b[8], b[9]]);
            if !SUPPORTED_VERSIONS.contains(&version) {
                return Err(ReadError::UnsupportedVersion { found: version, supported: SUPPORTED_VERSIONS });
            }
        }
        if n < FILE_HEADER_LEN {
            return Err(ReadError::Truncated {
                complete_chunks: 0,
                offset: 0,
                partial_bytes: n as u64,
                expected: format!("a {FILE_HEADER_LEN}-byte file header"),
            });
        }
        let header = decode_file_header(&b).map_err(|p| match p {
            HeaderProblem::BadMagic(m) => ReadError::NotATrace { found: m.to_vec() },
            HeaderProblem::UnsupportedVersion(v) => {
                ReadError::UnsupportedVersion { found: v, supported: SUPPORTED_VERSIONS }
            }
            HeaderProblem::Invalid(reason) => ReadError::InvalidHeader { reason: reason.to_owned() },
            HeaderProblem::Checksum { stored, computed } => ReadError::InvalidHeader {
                reason: format!("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"),
            },
        })?;
        Ok(Self {
            src,
            header,
            state: State::Reading,
            offset: FILE_HEADER_LEN as u64,
            chunk_offset: FILE_HEADER_LEN as u64,
            complete_chunks: 0,
            stored: Vec::new(),
            raw: Vec::new(),
            pos: 0,
            records_left: 0,
            record_in_chunk: 0,
            records_read: 0,
            decoder: Decoder::for_version(header.version),
            timebase: Timebase::new(&header),
            saw_end_record: false,
        })
    }

    /// The file header.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// `true` once the end marker, preceded by an End record, has been read and nothing follows.
    pub fn finished_cleanly(&self) -> bool {
        self.state == State::Clean
    }

    /// Chunks read and verified so far.
    pub fn complete_chunks(&self) -> u64 {
        self.complete_chunks
    }

    /// Records returned so far.
    pub fn records_read(&self) -> u64 {
        self.records_read
    }

    /// File offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying reader, positioned after what has been read.
    pub fn into_inner(self) -> R {
        self.src
    }

    /// Whether an End record has been read.
    pub fn saw_end_record(&self) -> bool {
        self.saw_end_record
    }

    /// Converts raw ticks of this trace's clock to CLOCK_MONOTONIC nanoseconds with the current
    /// calibration point (saturating at 0 and `u64::MAX`).
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.timebase.ticks_to_ns(ticks)
    }

    fn fail(&mut self, e: ReadError) -> Option<Result<Record, ReadError>> {
        self.state = State::Failed;
        Some(Err(e))
    }

    fn next_record(&mut self) -> Option<Result<Record, ReadError>> {
        loop {
            if self.state != State::Reading {
                return None;
            }
            if self.records_left > 0 {
                return Some(self.decode_one());
            }
            if self.pos < self.raw.len() {
                let problem = format!("{} bytes follow the chunk's last record", self.raw.len() - self.pos);
                return self.fail(ReadError::CorruptChunk {
                    chunk: self.complete_chunks.saturating_sub(1),
                    offset: self.chunk_offset,
                    problem,
                });
            }
            match self.load_chunk() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return self.fail(e),
            }
        }
    }

    fn decode_one(&mut self) -> Result<Record, ReadError> {
        let mut c = Cursor::new(self.raw.get(self.pos..).unwrap_or(&[]));
        match self.decoder.decode(&mut c) {
            Ok(mut record) => {
                self.pos += c.pos();
                self.records_left -= 1;
                self.record_in_chunk += 1;
                self.records_read += 1;
                self.timebase.convert(&mut record);
                if matches!(record, Record::End { .. }) {
                    self.saw_end_record = true;
                }
                Ok(record)
            }
            Err(source) => {
                self.state = State::Failed;
                Err(ReadError::Record {
                    chunk: self.complete_chunks.saturating_sub(1),
                    offset: self.chunk_offset,
                    record: self.record_in_chunk,
                    position: self.pos + c.pos(),
                    source,
                })
            }
        }
    }

    /// Reads and verifies the next chunk. `Ok(false)` at a clean end.
    fn load_chunk(&mut self) -> Result<bool, ReadError> {
        let chunk = self.complete_chunks;
        self.chunk_offset = self.offset;
        let offset = self.offset;
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        let n = read_full(&mut self.src, &mut hb).map_err(|source| ReadError::Io { offset, source })?;
        self.offset += n as u64;
        if n < CHUNK_HEADER_LEN {
            return Err(ReadError::Truncated {
                complete_chunks: chunk,
                offset,
                partial_bytes: n as u64,
                expected: if n == 0 {
                    "a chunk header or the end marker".to_owned()
                } else {
                    format!("a {CHUNK_HEADER_LEN}-byte chunk header")
                },
            });
        }
        let corrupt = |problem: String| ReadError::CorruptChunk { chunk, offset, problem };
        let magic = [hb[0], hb[1], hb[2], hb[3]];
        if magic == END_MAGIC {
            return self.read_end_marker(&hb, offset).map(|()| false);
        }
        if magic != CHUNK_MAGIC {
            return Err(corrupt(format!(
                "expected a chunk header (\"OTCK\") or the end marker (\"OTEN\"), found {magic:02x?}"
            )));
        }
        let h = ChunkHeader::from_bytes(&hb);
        if h.flags & !CHUNK_FLAG_LZ4 != 0 || hb[5..8] != [0, 0, 0] {
            return Err(corrupt(format!("unknown chunk flags {:#04x} or non-zero reserved bytes", h.flags)));
        }
        let (stored_len, raw_len) = (u64::from(h.stored_len), u64::from(h.raw_len));
        if stored_len > MAX_CHUNK_BYTES as u64 || raw_len > MAX_CHUNK_BYTES as u64 {
            return Err(corrupt(format!(
                "chunk of {stored_len} stored / {raw_len} uncompressed bytes exceeds the {MAX_CHUNK_BYTES}-byte limit"
            )));
        }
        let compressed = h.flags & CHUNK_FLAG_LZ4 != 0;
        if (!compressed && raw_len != stored_len) || (compressed && raw_len > stored_len * MAX_LZ4_RATIO) {
            return Err(corrupt(format!("impossible sizes: {stored_len} stored bytes, {raw_len} uncompressed")));
        }
        if u64::from(h.record_count) > raw_len {
            return Err(corrupt(format!("{} records cannot fit in {raw_len} bytes", h.record_count)));
        }
        self.stored.clear();
        // `take` + `read_to_end` grows the buffer with the data actually present, so a lying
        // length in a short file allocates no more than the file holds.
        let got = (&mut self.src)
            .take(stored_len)
            .read_to_end(&mut self.stored)
            .map_err(|source| ReadError::Io { offset: self.offset, source })?;
        self.offset += got as u64;
        if (got as u64) < stored_len {
            return Err(ReadError::Truncated {
                complete_chunks: chunk,
                offset,
                partial_bytes: (CHUNK_HEADER_LEN + got) as u64,
                expected: format!("{stored_len} payload bytes of chunk {chunk}"),
            });
        }
        let computed = h.compute_crc(&self.stored);
        if computed != h.crc32 {
            return Err(ReadError::Checksum { chunk, offset, stored: h.crc32, computed });
        }
        if compressed {
            self.raw.clear();
            self.raw.resize(raw_len as usize, 0);
            match lz4_flex::block::decompress_into(&self.stored, &mut self.raw) {
                Ok(n) if n as u64 == raw_len => {}
                Ok(n) => return Err(corrupt(format!("decompressed to {n} bytes, header says {raw_len}"))),
                Err(e) => return Err(corrupt(format!("LZ4 decompression failed: {e}"))),
            }
        } else {
            std::mem::swap(&mut self.stored, &mut self.raw);
        }
        self.pos = 0;
        self.records_left = h.record_count;
        self.record_in_chunk = 0;
        self.decoder.reset();
        self.complete_chunks += 1;
        Ok(true)
    }

    fn read_end_marker(&mut self, hb: &[u8; CHUNK_HEADER_LEN], offset: u64) -> Result<(), ReadError> {
        let chunk = self.complete_chunks;
        let m = EndMarker::from_bytes(hb).map_err(|(stored, computed)| ReadError::CorruptChunk {
            chunk,
            offset,
            problem: format!("end marker checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"),
        })?;
        if m.chunk_count != self.complete_chunks || m.record_count != self.records_read {
            return Err(ReadError::CorruptChunk {
                chunk,
                offset,
                problem: format!(
                    "end marker counts {} chunks / {} records, the file holds {} / {}",
                    m.chunk_count, m.record_count, self.complete_chunks, self.records_read
                ),
            });
        }
        let trailing = io::copy(&mut (&mut self.src).take(u64::MAX), &mut io::sink())
            .map_err(|source| ReadError::Io { offset: self.offset, source })?;
        if trailing > 0 {
            return Err(ReadError::TrailingData { offset: self.offset, len: trailing });
        }
        if !self.saw_end_record {
            return Err(ReadError::MissingEndRecord { offset });
        }
        self.state = State::Clean;
        Ok(())
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl<R: Read> std::iter::FusedIterator for TraceReader<R> {}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
