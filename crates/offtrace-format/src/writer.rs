//! [`TraceWriter`]: records in, a chunked, compressed, checksummed, crash-safe file out.
//!
//! Records are encoded into an in-memory chunk. A chunk is closed by [`TraceWriter::flush_chunk`]
//! (the agent calls it every ~100 ms), automatically when it reaches the chunk size (256 KiB by
//! default), and by [`TraceWriter::finish`]. Closing compresses the chunk with LZ4 (kept raw if
//! that does not shrink it, or if its records are already as small as
//! [`TraceWriter::store_raw_up_to`] asks; `lz4.rs`), checksums it, writes it whole and flushes the
//! underlying writer.
//!
//! Crash safety: once `flush_chunk` has returned `Ok`, the chunk has been handed to the OS
//! (`Write::flush`), so a SIGKILL of the process leaves a file that reads up to and including
//! that chunk. It is not `fsync`ed: a power loss may lose it.
//!
//! Cost: encoding a record appends to a buffer that keeps its capacity, so after warm-up (first
//! chunk, first record of each thread) `write`/`write_notification` do not allocate; nor does
//! closing a chunk (the compressor's hash table and output buffer are kept).

use std::io::Write;

use crate::encode::Encoder;
use crate::error::WriteError;
use crate::header::{
    CHUNK_FLAG_LZ4, CHUNK_HEADER_LEN, ChunkHeader, EndMarker, FILE_HEADER_LEN, MAX_CHUNK_BYTES, TraceHeader,
    encode_file_header,
};
use crate::record::{Notification, Record};

/// Default uncompressed size at which a chunk is closed automatically.
pub const DEFAULT_CHUNK_BYTES: usize = 256 << 10;

/// Writes a trace. See the crate documentation for an example.
///
/// Dropping a writer without [`TraceWriter::finish`] loses the open chunk and leaves no end
/// marker: the file then reads as truncated after the last closed chunk.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    encoder: Encoder,
    /// Encoded records of the open chunk.
    chunk: Vec<u8>,
    chunk_records: u32,
    /// Scratch for the compressed chunk.
    compressed: Vec<u8>,
    lz4: crate::lz4::Lz4Compressor,
    chunk_limit: usize,
    /// Encoded bytes per record up to which a chunk is stored without compression (0: always
    /// compressed).
    raw_up_to: usize,
    chunks_written: u64,
    records_written: u64,
    drops_seen: u64,
    bytes_written: u64,
    raw_chunk_bytes: u64,
    end_written: bool,
    poisoned: Option<String>,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the file header (and flushes it) and returns a writer with the default chunk size.
    pub fn new(out: W, header: &TraceHeader) -> Result<Self, WriteError> {
        Self::with_chunk_size(out, header, DEFAULT_CHUNK_BYTES)
    }

    /// Like [`TraceWriter::new`], closing chunks automatically at `chunk_bytes` uncompressed
    /// bytes (clamped to 1 KiB..=32 MiB).
    pub fn with_chunk_size(mut out: W, header: &TraceHeader, chunk_bytes: usize) -> Result<Self, WriteError> {
        if let Some(reason) = header.invalid_reason() {
            return Err(WriteError::InvalidHeader { reason });
        }
        let bytes = encode_file_header(header);
        out.write_all(&bytes).and_then(|()| out.flush()).map_err(|source| WriteError::Header { source })?;
        let chunk_limit = chunk_bytes.clamp(1 << 10, MAX_CHUNK_BYTES / 2);
        Ok(Self {
            out,
            encoder: Encoder::default(),
            chunk: Vec::with_capacity(chunk_limit + 4096),
            chunk_records: 0,
            compressed: Vec::new(),
            lz4: Default::default(),
            chunk_limit,
            raw_up_to: 0,
            chunks_written: 0,
            records_written: 0,
            drops_seen: 0,
            bytes_written: FILE_HEADER_LEN as u64,
            raw_chunk_bytes: 0,
            end_written: false,
            poisoned: None,
        })
    }

    /// Stores chunks whose records average at most `bytes_per_record` encoded bytes without LZ4
    /// (0, the default: every chunk that LZ4 shrinks is compressed). Compression costs the
    /// writer about as much per byte as encoding: for records already this small on disk, a
    /// recorder may rather keep the instructions (`docs/overhead.md`, *The writer's cost per
    /// record*). Readers see no difference (a raw chunk is part of every version's format).
    pub fn store_raw_up_to(&mut self, bytes_per_record: usize) {
        self.raw_up_to = bytes_per_record;
    }

    /// Appends one record. Notification `ts` values are raw ticks of the header's clock.
    pub fn write(&mut self, record: &Record) -> Result<(), WriteError> {
        self.check_poisoned()?;
        let before = self.chunk.len();
        self.encoder.encode(record, &mut self.chunk);
        match record {
            Record::Drops { count, .. } => self.drops_seen = self.drops_seen.saturating_add(*count),
            Record::End { .. } => self.end_written = true,
            _ => {}
        }
        self.after_record(before)
    }

    /// Appends one notification (`ts` in raw ticks): the hot path, no allocation after warm-up.
    pub fn write_notification(&mut self, n: &Notification) -> Result<(), WriteError> {
        self.check_poisoned()?;
        let before = self.chunk.len();
        self.encoder.encode_notification(n, &mut self.chunk);
        self.after_record(before)
    }

    /// Appends one API call (`start`/`end` in raw ticks): [`Self::write`] without wrapping it in
    /// a [`Record`] (the recorder's most frequent record; no allocation after warm-up).
    pub fn write_api_call(&mut self, a: &crate::ApiCall) -> Result<(), WriteError> {
        self.write_api_call_ref(&a.borrowed())
    }

    /// [`Self::write_api_call`] with the arguments borrowed (the recorder's ring entry): the
    /// same bytes, without building an [`crate::ApiCall`] (and its argument array) first.
    #[inline]
    pub fn write_api_call_ref(&mut self, a: &crate::ApiCallRef<'_>) -> Result<(), WriteError> {
        self.check_poisoned()?;
        let before = self.chunk.len();
        self.encoder.encode_api_call(a, &mut self.chunk);
        self.after_record(before)
    }

    /// Appends one device activity (`ts` in raw ticks), its allocation properties borrowed: the
    /// bytes of [`Self::write`] with a [`Record::Activity`], without building one.
    #[inline]
    pub fn write_activity_ref(&mut self, a: &crate::ActivityRef<'_>) -> Result<(), WriteError> {
        self.check_poisoned()?;
        let before = self.chunk.len();
        self.encoder.encode_activity(a, &mut self.chunk);
        self.after_record(before)
    }

    /// Appends one task-graph record (`ts` in raw ticks): the bytes of [`Self::write`] with a
    /// [`Record::TaskGraph`], without building one (the recorder's most frequent record after
    /// API calls in SYCL programs).
    #[inline]
    pub fn write_task_graph(&mut self, r: &crate::TaskGraphRecord) -> Result<(), WriteError> {
        self.check_poisoned()?;
        let before = self.chunk.len();
        self.encoder.encode_task_graph(r, &mut self.chunk);
        self.after_record(before)
    }

    #[inline]
    fn after_record(&mut self, before: usize) -> Result<(), WriteError> {
        if self.chunk.len() > MAX_CHUNK_BYTES {
            // Cannot happen for notifications; a huge Info/String/Object can get here. The
            // encoder's thread state may now be ahead of the file: close the chunk so the next
            // chunk starts from a reset state.
            let size = self.chunk.len() - before;
            self.chunk.truncate(before);
            self.flush_chunk()?;
            self.encoder.reset();
            return Err(WriteError::RecordTooLarge { size, max: MAX_CHUNK_BYTES });
        }
        self.chunk_records += 1;
        self.records_written += 1;
        if self.chunk.len() >= self.chunk_limit {
            self.close_chunk()?;
        }
        Ok(())
    }

    /// Closes the open chunk (if it holds records) and flushes the underlying writer. When this
    /// returns `Ok`, a SIGKILL leaves a file readable up to and including this chunk.
    pub fn flush_chunk(&mut self) -> Result<(), WriteError> {
        self.check_poisoned()?;
        self.close_chunk()?;
        let offset = self.bytes_written;
        let chunk = self.chunks_written;
        self.out.flush().map_err(|source| self.poison(WriteError::Chunk { chunk, offset, source }))
    }

    #[cold]
    #[inline(never)]
    fn close_chunk(&mut self) -> Result<(), WriteError> {
        if self.chunk_records == 0 {
            return Ok(());
        }
        let chunk = self.chunks_written;
        let offset = self.bytes_written;
        let small = self.chunk.len() <= self.raw_up_to.saturating_mul(self.chunk_records as usize);
        let compressed_len = if small { usize::MAX } else { self.lz4.compress(&self.chunk, &mut self.compressed) };
        let (flags, payload) = if compressed_len < self.chunk.len() {
            (CHUNK_FLAG_LZ4, self.compressed.get(..compressed_len).unwrap_or(&self.chunk))
        } else {
            (0, &self.chunk[..])
        };
        let mut header = ChunkHeader {
            flags,
            stored_len: payload.len() as u32,
            raw_len: self.chunk.len() as u32,
            record_count: self.chunk_records,
            crc32: 0,
        };
        header.crc32 = header.compute_crc(payload);
        let result = self.out.write_all(&header.to_bytes()).and_then(|()| self.out.write_all(payload));
        let written = (CHUNK_HEADER_LEN + payload.len()) as u64;
        result.map_err(|source| self.poison(WriteError::Chunk { chunk, offset, source }))?;
        self.bytes_written += written;
        self.raw_chunk_bytes += self.chunk.len() as u64;
        self.chunks_written += 1;
        self.chunk.clear();
        self.chunk_records = 0;
        self.encoder.reset();
        Ok(())
    }

    /// Writes an [`Record::End`] (unless one was written), closes the last chunk, writes the
    /// end marker, flushes, and returns the underlying writer.
    ///
    /// The automatic `End` counts the records written through this writer and the `Drops`
    /// records' counts.
    pub fn finish(mut self) -> Result<W, WriteError> {
        self.check_poisoned()?;
        if !self.end_written {
            let end = Record::End { records: self.records_written, drops: self.drops_seen };
            self.write(&end)?;
        }
        self.close_chunk()?;
        let offset = self.bytes_written;
        let marker = EndMarker { chunk_count: self.chunks_written, record_count: self.records_written };
        self.out
            .write_all(&marker.to_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|source| WriteError::EndMarker { offset, source })?;
        Ok(self.out)
    }

    /// Records written so far (including the open chunk's).
    pub fn records_written(&self) -> u64 {
        self.records_written
    }

    /// Complete chunks written so far.
    pub fn chunks_written(&self) -> u64 {
        self.chunks_written
    }

    /// File bytes written so far (header and complete chunks).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Uncompressed (encoded, before LZ4) bytes of the complete chunks written so far: with
    /// [`TraceWriter::bytes_written`] this gives the compression ratio.
    pub fn raw_chunk_bytes(&self) -> u64 {
        self.raw_chunk_bytes
    }

    /// Uncompressed bytes in the open chunk.
    pub fn open_chunk_bytes(&self) -> usize {
        self.chunk.len()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    fn check_poisoned(&self) -> Result<(), WriteError> {
        match &self.poisoned {
            Some(first) => Err(WriteError::Poisoned { first: first.clone() }),
            None => Ok(()),
        }
    }

    #[cold]
    fn poison(&mut self, e: WriteError) -> WriteError {
        if self.poisoned.is_none() {
            self.poisoned = Some(e.to_string());
        }
        e
    }
}
