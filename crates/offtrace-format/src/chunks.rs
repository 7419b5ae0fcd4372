//! [`ChunkScanner`]: the framing layer of a trace, with recovery. It reads chunk after chunk,
//! verifies each one's header and crc32, and when it meets bytes that are no valid chunk (a
//! flipped bit, a torn write, garbage) it skips them: it scans forward for the next chunk magic
//! whose chunk verifies (header sane, crc32 right) or the next end marker, and goes on from
//! there. What was skipped comes out as a [`ReadWarning`] in file order, between the chunks.
//!
//! Cost: one read per chunk in the normal case; a resync reads the damaged stretch once more in
//! 1 MiB windows and checks each magic found in it (a false magic costs one header read, and a
//! payload read only if the header is plausible). Memory: one chunk (≤ 64 MiB) plus one window.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};

use crate::error::ReadError;
use crate::header::{
    CHUNK_FLAG_LZ4, CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkHeader, END_MAGIC, EndMarker, MAX_CHUNK_BYTES,
};
use crate::reader::read_full;

/// LZ4 cannot expand a block by more than this factor.
const MAX_LZ4_RATIO: u64 = 255;
/// Bytes read at a time while looking for the next valid chunk.
const RESYNC_WINDOW: usize = 1 << 20;

/// Damage the reader stepped over: what was wrong, and what was skipped because of it. Reading
/// went on after it.
#[derive(Debug)]
pub struct ReadWarning {
    pub error: ReadError,
    /// What happened to the data: "skipped 4096 bytes; reading resumed at byte 81920".
    pub action: String,
}

impl fmt::Display for ReadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.error, self.action)
    }
}

/// One verified chunk, still compressed.
#[derive(Debug)]
pub(crate) struct FramedChunk {
    /// 0-based index among the valid chunks.
    pub index: u64,
    pub offset: u64,
    pub header: ChunkHeader,
    pub stored: Vec<u8>,
}

/// How the framing ended.
#[derive(Debug, Default)]
pub(crate) struct FramingEnd {
    /// The end marker was read (its crc valid).
    pub end_marker: bool,
    /// Why the file did not end cleanly: truncated, bytes after the end marker, counts that do
    /// not match (only reported when nothing was skipped, since skipping changes the counts).
    pub problem: Option<ReadError>,
}

#[derive(Debug)]
pub(crate) enum Framing {
    Chunk(FramedChunk),
    Skipped(ReadWarning),
    End(FramingEnd),
}

/// Why a chunk header cannot be a writer's, if it cannot.
pub(crate) fn header_problem(h: &ChunkHeader, hb: &[u8; CHUNK_HEADER_LEN]) -> Option<String> {
    if h.flags & !CHUNK_FLAG_LZ4 != 0 || hb[5..8] != [0, 0, 0] {
        return Some(format!("unknown chunk flags {:#04x} or non-zero reserved bytes", h.flags));
    }
    let (stored_len, raw_len) = (u64::from(h.stored_len), u64::from(h.raw_len));
    if stored_len > MAX_CHUNK_BYTES as u64 || raw_len > MAX_CHUNK_BYTES as u64 {
        return Some(format!(
            "chunk of {stored_len} stored / {raw_len} uncompressed bytes exceeds the {MAX_CHUNK_BYTES}-byte limit"
        ));
    }
    let compressed = h.flags & CHUNK_FLAG_LZ4 != 0;
    if (!compressed && raw_len != stored_len) || (compressed && raw_len > stored_len * MAX_LZ4_RATIO) {
        return Some(format!("impossible sizes: {stored_len} stored bytes, {raw_len} uncompressed"));
    }
    if u64::from(h.record_count) > raw_len {
        return Some(format!("{} records cannot fit in {raw_len} bytes", h.record_count));
    }
    None
}

/// Reads the chunks of a trace file after its header, stepping over damage.
#[derive(Debug)]
pub(crate) struct ChunkScanner {
    src: BufReader<File>,
    file_len: u64,
    offset: u64,
    chunks: u64,
    records: u64,
    skipped_any: bool,
    state: ScanState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScanState {
    Reading,
    /// A resync found nothing valid: the next item is the end (without an end marker).
    EndNext,
    Finished,
}

impl ChunkScanner {
    /// `src` is positioned at `offset` (just after the file header).
    pub fn new(src: BufReader<File>, file_len: u64, offset: u64) -> Self {
        Self { src, file_len, offset, chunks: 0, records: 0, skipped_any: false, state: ScanState::Reading }
    }

    fn io(offset: u64) -> impl FnOnce(std::io::Error) -> ReadError {
        move |source| ReadError::Io { offset, source }
    }

    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        self.src.seek(SeekFrom::Start(at)).map_err(Self::io(at))?;
        read_full(&mut self.src, buf).map_err(Self::io(at))
    }

    /// Reads and verifies a chunk whose header is `hb` at `at`: the payload if the header is
    /// plausible, the payload is inside the file and the crc matches.
    fn verified_payload(
        &mut self,
        at: u64,
        hb: &[u8; CHUNK_HEADER_LEN],
    ) -> Result<Result<(ChunkHeader, Vec<u8>), String>, ReadError> {
        let h = ChunkHeader::from_bytes(hb);
        if let Some(p) = header_problem(&h, hb) {
            return Ok(Err(p));
        }
        let payload_at = at + CHUNK_HEADER_LEN as u64;
        if payload_at + u64::from(h.stored_len) > self.file_len {
            return Ok(Err(format!(
                "the chunk claims {} payload bytes, the file has {} left",
                h.stored_len,
                self.file_len.saturating_sub(payload_at)
            )));
        }
        let mut stored = vec![0u8; h.stored_len as usize];
        let n = self.read_at(payload_at, &mut stored)?;
        if n < stored.len() {
            return Ok(Err(format!("only {n} of {} payload bytes could be read", h.stored_len)));
        }
        let computed = h.compute_crc(&stored);
        if computed != h.crc32 {
            return Ok(Err(format!("checksum mismatch (stored {:#010x}, computed {computed:#010x})", h.crc32)));
        }
        Ok(Ok((h, stored)))
    }

    /// Whether a valid chunk or end marker starts at `at`.
    fn valid_at(&mut self, at: u64) -> Result<bool, ReadError> {
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        if self.read_at(at, &mut hb)? < CHUNK_HEADER_LEN {
            return Ok(false);
        }
        match [hb[0], hb[1], hb[2], hb[3]] {
            END_MAGIC => Ok(EndMarker::from_bytes(&hb).is_ok()),
            CHUNK_MAGIC => Ok(self.verified_payload(at, &hb)?.is_ok()),
            _ => Ok(false),
        }
    }

    /// The offset of the first valid chunk or end marker at or after `from`.
    fn find_valid(&mut self, from: u64) -> Result<Option<u64>, ReadError> {
        let mut window = vec![0u8; RESYNC_WINDOW];
        let mut base = from;
        while base + 4 <= self.file_len {
            let n = self.read_at(base, &mut window)?;
            if n < 4 {
                break;
            }
            let w = &window[..n];
            let mut i = 0;
            while i + 4 <= n {
                let at = &w[i..i + 4];
                if (at == CHUNK_MAGIC || at == END_MAGIC) && self.valid_at(base + i as u64)? {
                    return Ok(Some(base + i as u64));
                }
                i += 1;
            }
            // Overlap by 3 bytes so a magic across the window's end is seen.
            base += (n - 3) as u64;
        }
        Ok(None)
    }

    /// Skips the damage at the current offset: resumes at the next valid chunk or end marker.
    fn skip(&mut self, error: ReadError) -> Result<Framing, ReadError> {
        let from = self.offset;
        self.skipped_any = true;
        let action = match self.find_valid(from + 1)? {
            Some(next) => {
                self.offset = next;
                format!("skipped {} bytes; reading resumed at byte {next}", next - from)
            }
            None => {
                self.offset = self.file_len;
                self.state = ScanState::EndNext;
                format!("skipped the last {} bytes: no valid chunk or end marker follows", self.file_len - from)
            }
        };
        Ok(Framing::Skipped(ReadWarning { error, action }))
    }

    fn step(&mut self) -> Result<Framing, ReadError> {
        let offset = self.offset;
        let chunk = self.chunks;
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        let n = self.read_at(offset, &mut hb)?;
        if n < CHUNK_HEADER_LEN {
            self.state = ScanState::Finished;
            return Ok(Framing::End(FramingEnd {
                end_marker: false,
                problem: Some(ReadError::Truncated {
                    complete_chunks: chunk,
                    offset,
                    partial_bytes: n as u64,
                    expected: if n == 0 {
                        "a chunk header or the end marker".to_owned()
                    } else {
                        format!("a {CHUNK_HEADER_LEN}-byte chunk header")
                    },
                }),
            }));
        }
        let corrupt = |problem: String| ReadError::CorruptChunk { chunk, offset, problem };
        match [hb[0], hb[1], hb[2], hb[3]] {
            END_MAGIC => match EndMarker::from_bytes(&hb) {
                Ok(m) => {
                    self.state = ScanState::Finished;
                    let end = offset + CHUNK_HEADER_LEN as u64;
                    let problem = if end < self.file_len {
                        Some(ReadError::TrailingData { offset: end, len: self.file_len - end })
                    } else if !self.skipped_any && (m.chunk_count != self.chunks || m.record_count != self.records) {
                        Some(corrupt(format!(
                            "end marker counts {} chunks / {} records, the file holds {} / {}",
                            m.chunk_count, m.record_count, self.chunks, self.records
                        )))
                    } else {
                        None
                    };
                    Ok(Framing::End(FramingEnd { end_marker: true, problem }))
                }
                Err((stored, computed)) => self.skip(corrupt(format!(
                    "end marker checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                ))),
            },
            CHUNK_MAGIC => match self.verified_payload(offset, &hb)? {
                Ok((header, stored)) => {
                    self.offset = offset + CHUNK_HEADER_LEN as u64 + stored.len() as u64;
                    self.chunks += 1;
                    self.records += u64::from(header.record_count);
                    Ok(Framing::Chunk(FramedChunk { index: chunk, offset, header, stored }))
                }
                Err(problem) => {
                    let h = ChunkHeader::from_bytes(&hb);
                    let past_end = offset + CHUNK_HEADER_LEN as u64 + u64::from(h.stored_len) > self.file_len;
                    if past_end && header_problem(&h, &hb).is_none() && self.find_valid(offset + 1)?.is_none() {
                        // A plausible header whose payload the file does not hold, and nothing
                        // valid after it: the recording stopped inside this chunk.
                        self.state = ScanState::Finished;
                        return Ok(Framing::End(FramingEnd {
                            end_marker: false,
                            problem: Some(ReadError::Truncated {
                                complete_chunks: chunk,
                                offset,
                                partial_bytes: self.file_len - offset,
                                expected: format!("{} payload bytes of chunk {chunk}", h.stored_len),
                            }),
                        }));
                    }
                    self.skip(corrupt(problem))
                }
            },
            magic => self.skip(corrupt(format!(
                "expected a chunk header (\"OTCK\") or the end marker (\"OTEN\"), found {magic:02x?}"
            ))),
        }
    }
}

impl Iterator for ChunkScanner {
    type Item = Framing;

    fn next(&mut self) -> Option<Framing> {
        match self.state {
            ScanState::Finished => None,
            ScanState::EndNext => {
                self.state = ScanState::Finished;
                Some(Framing::End(FramingEnd::default()))
            }
            ScanState::Reading => Some(self.step().unwrap_or_else(|e| {
                self.state = ScanState::Finished;
                Framing::End(FramingEnd { end_marker: false, problem: Some(e) })
            })),
        }
    }
}
