//! The fixed little-endian framing of a trace file: the file header, chunk headers and the end
//! marker. Records live inside chunks (see `encode.rs`); this file is only about the frame.
//!
//! ```text
//! file      = file_header chunk* end_marker
//! file_header (64 bytes) = "OFFTRACE" version:u16 header_len:u16 clock:u8 [0;3]
//!                          ticks_per_second:f64 pid:u32 flags:u32 start_ticks:u64
//!                          start_monotonic_ns:u64 start_realtime_ns:u64 [0;4] crc32:u32
//! chunk     = chunk_header (24 bytes) payload[stored_len]
//! chunk_header = "OTCK" flags:u8 [0;3] stored_len:u32 raw_len:u32 record_count:u32 crc32:u32
//! end_marker (24 bytes) = "OTEN" chunk_count:u64 record_count:u64 crc32:u32
//! ```
//!
//! Every crc32 (IEEE, `crc32fast`) covers the bytes of its own structure before the crc field;
//! a chunk's crc also covers its payload. Parsing works on fixed-size byte arrays and cannot
//! panic.

use crate::record::ClockSource;

/// The first 8 bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"OFFTRACE";

/// The format version this build writes. Bumped on any layout change.
pub const FORMAT_VERSION: u16 = 6;

/// The format versions this build reads.
pub const SUPPORTED_VERSIONS: &[u16] = &[1, 2, 3, 4, 5, 6];

/// Size of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 64;
/// Size of a chunk header and of the end marker in bytes.
pub const CHUNK_HEADER_LEN: usize = 24;

/// Largest chunk (stored or uncompressed) this build writes or accepts: bounds the reader's memory.
pub const MAX_CHUNK_BYTES: usize = 64 << 20;

pub(crate) const CHUNK_MAGIC: [u8; 4] = *b"OTCK";
pub(crate) const END_MAGIC: [u8; 4] = *b"OTEN";

/// Chunk flag: the payload is an LZ4 block (otherwise it is stored as is).
pub(crate) const CHUNK_FLAG_LZ4: u8 = 0x01;

/// The facts at the start of a trace file.
///
/// `version` is informational when writing (the writer always writes [`FORMAT_VERSION`]) and is
/// the file's version when reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceHeader {
    pub version: u16,
    /// What the raw `ts` of notifications count.
    pub clock: ClockSource,
    /// Ticks per second of [`ClockSource::Tsc`] (ignored for [`ClockSource::Monotonic`]).
    pub ticks_per_second: f64,
    /// Process id of the recorded process (0 = unknown).
    pub pid: u32,
    /// An initial calibration point: raw ticks at start, and the CLOCK_MONOTONIC and
    /// CLOCK_REALTIME nanoseconds read at the same moment. The reader converts ticks with it
    /// until the first [`crate::Record::ClockSync`].
    pub start_ticks: u64,
    pub start_monotonic_ns: u64,
    pub start_realtime_ns: u64,
}

impl Default for TraceHeader {
    fn default() -> Self {
        Self::monotonic()
    }
}

impl TraceHeader {
    /// A header for a trace whose notification timestamps are CLOCK_MONOTONIC nanoseconds.
    pub fn monotonic() -> Self {
        Self {
            version: FORMAT_VERSION,
            clock: ClockSource::Monotonic,
            ticks_per_second: 1e9,
            pid: 0,
            start_ticks: 0,
            start_monotonic_ns: 0,
            start_realtime_ns: 0,
        }
    }

    /// A header for a trace whose notification timestamps are TSC ticks, with the calibration
    /// point read at start.
    pub fn tsc(ticks_per_second: f64, start_ticks: u64, start_monotonic_ns: u64, start_realtime_ns: u64) -> Self {
        Self {
            version: FORMAT_VERSION,
            clock: ClockSource::Tsc,
            ticks_per_second,
            pid: 0,
            start_ticks,
            start_monotonic_ns,
            start_realtime_ns,
        }
    }

    /// Why this header cannot describe a readable trace, if it cannot.
    pub(crate) fn invalid_reason(&self) -> Option<&'static str> {
        if self.clock == ClockSource::Tsc && !(self.ticks_per_second.is_finite() && self.ticks_per_second > 0.0) {
            return Some("TSC clock needs a finite, positive ticks_per_second");
        }
        None
    }
}

/// The on-disk file header, field by field. Only used to pin the layout in a test: the bytes
/// are written and parsed explicitly little-endian by [`encode_file_header`] and
/// [`decode_file_header`], whose offsets must match this struct's.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct RawFileHeader {
    pub magic: [u8; 8],
    pub version: u16,
    pub header_len: u16,
    pub clock: u8,
    pub reserved0: [u8; 3],
    pub ticks_per_second: f64,
    pub pid: u32,
    pub flags: u32,
    pub start_ticks: u64,
    pub start_monotonic_ns: u64,
    pub start_realtime_ns: u64,
    pub reserved1: u32,
    pub crc32: u32,
}

pub(crate) fn encode_file_header(h: &TraceHeader) -> [u8; FILE_HEADER_LEN] {
    let mut b = [0u8; FILE_HEADER_LEN];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[10..12].copy_from_slice(&(FILE_HEADER_LEN as u16).to_le_bytes());
    b[12] = h.clock as u8;
    b[16..24].copy_from_slice(&h.ticks_per_second.to_bits().to_le_bytes());
    b[24..28].copy_from_slice(&h.pid.to_le_bytes());
    b[32..40].copy_from_slice(&h.start_ticks.to_le_bytes());
    b[40..48].copy_from_slice(&h.start_monotonic_ns.to_le_bytes());
    b[48..56].copy_from_slice(&h.start_realtime_ns.to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Why a file header was rejected.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HeaderProblem {
    BadMagic([u8; 8]),
    UnsupportedVersion(u16),
    Invalid(&'static str),
    Checksum { stored: u32, computed: u32 },
}

pub(crate) fn decode_file_header(b: &[u8; FILE_HEADER_LEN]) -> Result<TraceHeader, HeaderProblem> {
    let magic = arr::<8>(b, 0);
    if magic != MAGIC {
        return Err(HeaderProblem::BadMagic(magic));
    }
    let version = u16::from_le_bytes(arr(b, 8));
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(HeaderProblem::UnsupportedVersion(version));
    }
    let stored = u32::from_le_bytes(arr(b, 60));
    let computed = crc32fast::hash(&b[..60]);
    if stored != computed {
        return Err(HeaderProblem::Checksum { stored, computed });
    }
    if usize::from(u16::from_le_bytes(arr(b, 10))) != FILE_HEADER_LEN {
        return Err(HeaderProblem::Invalid("header_len is not 64"));
    }
    let clock = match b[12] {
        0 => ClockSource::Monotonic,
        1 => ClockSource::Tsc,
        _ => return Err(HeaderProblem::Invalid("unknown clock source (expected 0 = monotonic or 1 = tsc)")),
    };
    let h = TraceHeader {
        version,
        clock,
        ticks_per_second: f64::from_bits(u64::from_le_bytes(arr(b, 16))),
        pid: u32::from_le_bytes(arr(b, 24)),
        start_ticks: u64::from_le_bytes(arr(b, 32)),
        start_monotonic_ns: u64::from_le_bytes(arr(b, 40)),
        start_realtime_ns: u64::from_le_bytes(arr(b, 48)),
    };
    if let Some(reason) = h.invalid_reason() {
        return Err(HeaderProblem::Invalid(reason));
    }
    Ok(h)
}

/// The header of one chunk as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub flags: u8,
    pub stored_len: u32,
    pub raw_len: u32,
    pub record_count: u32,
    pub crc32: u32,
}

impl ChunkHeader {
    /// The crc of the header fields before the crc, continued over `payload`.
    pub fn compute_crc(self, payload: &[u8]) -> u32 {
        let b = self.to_bytes_without_crc();
        let mut h = crc32fast::Hasher::new();
        h.update(&b[..20]);
        h.update(payload);
        h.finalize()
    }

    fn to_bytes_without_crc(self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC);
        b[4] = self.flags;
        b[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.record_count.to_le_bytes());
        b
    }

    pub fn to_bytes(self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = self.to_bytes_without_crc();
        b[20..24].copy_from_slice(&self.crc32.to_le_bytes());
        b
    }

    /// Parses the fields after the magic (which the caller has already matched).
    pub fn from_bytes(b: &[u8; CHUNK_HEADER_LEN]) -> Self {
        Self {
            flags: b[4],
            stored_len: u32::from_le_bytes(arr(b, 8)),
            raw_len: u32::from_le_bytes(arr(b, 12)),
            record_count: u32::from_le_bytes(arr(b, 16)),
            crc32: u32::from_le_bytes(arr(b, 20)),
        }
    }
}

/// The end marker: written once by `TraceWriter::finish`, after the last chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndMarker {
    pub chunk_count: u64,
    pub record_count: u64,
}

impl EndMarker {
    pub fn to_bytes(self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&END_MAGIC);
        b[4..12].copy_from_slice(&self.chunk_count.to_le_bytes());
        b[12..20].copy_from_slice(&self.record_count.to_le_bytes());
        let crc = crc32fast::hash(&b[..20]);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses an end marker; `Err((stored, computed))` on a crc mismatch.
    pub fn from_bytes(b: &[u8; CHUNK_HEADER_LEN]) -> Result<Self, (u32, u32)> {
        let stored = u32::from_le_bytes(arr(b, 20));
        let computed = crc32fast::hash(&b[..20]);
        if stored != computed {
            return Err((stored, computed));
        }
        Ok(Self { chunk_count: u64::from_le_bytes(arr(b, 4)), record_count: u64::from_le_bytes(arr(b, 12)) })
    }
}

/// `N` bytes of `b` from `at`; zero-filled where `b` is too short (callers pass fixed-size
/// arrays, so that never happens, but this cannot panic either way).
fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = b.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn raw_file_header_layout() {
        assert_eq!(size_of::<RawFileHeader>(), FILE_HEADER_LEN);
        assert_eq!(offset_of!(RawFileHeader, magic), 0);
        assert_eq!(offset_of!(RawFileHeader, version), 8);
        assert_eq!(offset_of!(RawFileHeader, header_len), 10);
        assert_eq!(offset_of!(RawFileHeader, clock), 12);
        assert_eq!(offset_of!(RawFileHeader, ticks_per_second), 16);
        assert_eq!(offset_of!(RawFileHeader, pid), 24);
        assert_eq!(offset_of!(RawFileHeader, flags), 28);
        assert_eq!(offset_of!(RawFileHeader, start_ticks), 32);
        assert_eq!(offset_of!(RawFileHeader, start_monotonic_ns), 40);
        assert_eq!(offset_of!(RawFileHeader, start_realtime_ns), 48);
        assert_eq!(offset_of!(RawFileHeader, reserved1), 56);
        assert_eq!(offset_of!(RawFileHeader, crc32), 60);
    }

    #[test]
    fn file_header_bytes_are_pinned() {
        let h = TraceHeader {
            version: FORMAT_VERSION,
            clock: ClockSource::Tsc,
            ticks_per_second: 2.0e9,
            pid: 0x0102_0304,
            start_ticks: 0x1112_1314_1516_1718,
            start_monotonic_ns: 0x2122_2324_2526_2728,
            start_realtime_ns: 0x3132_3334_3536_3738,
        };
        let b = encode_file_header(&h);
        let expected_prefix: [u8; 60] = [
            b'O', b'F', b'F', b'T', b'R', b'A', b'C', b'E', // magic
            6, 0, // version
            64, 0, // header_len
            1, 0, 0, 0, // clock = tsc, reserved
            0, 0, 0, 0, 0x65, 0xcd, 0xdd, 0x41, // 2e9 as f64 LE
            4, 3, 2, 1, // pid
            0, 0, 0, 0, // flags
            0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // start_ticks
            0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, // start_monotonic_ns
            0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, // start_realtime_ns
            0, 0, 0, 0, // reserved
        ];
        assert_eq!(&b[..60], &expected_prefix[..]);
        assert_eq!(decode_file_header(&b), Ok(h));
    }

    #[test]
    fn chunk_header_and_end_marker_layout() {
        let c = ChunkHeader { flags: 1, stored_len: 0x0a0b0c0d, raw_len: 2, record_count: 3, crc32: 0xdeadbeef };
        let b = c.to_bytes();
        assert_eq!(b.len(), CHUNK_HEADER_LEN);
        assert_eq!(&b[..12], &[b'O', b'T', b'C', b'K', 1, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a]);
        assert_eq!(ChunkHeader::from_bytes(&b), c);
        let e = EndMarker { chunk_count: 7, record_count: 9 };
        let b = e.to_bytes();
        assert_eq!(&b[..6], &[b'O', b'T', b'E', b'N', 7, 0]);
        assert_eq!(EndMarker::from_bytes(&b), Ok(e));
    }

    #[test]
    fn header_rejections() {
        let mut b = encode_file_header(&TraceHeader::monotonic());
        b[8] = 7;
        assert_eq!(decode_file_header(&b), Err(HeaderProblem::UnsupportedVersion(7)));
        b[0] = b'X';
        assert!(matches!(decode_file_header(&b), Err(HeaderProblem::BadMagic(_))));
        let bad_tsc = TraceHeader::tsc(f64::NAN, 0, 0, 0);
        let b = encode_file_header(&bad_tsc);
        assert!(matches!(decode_file_header(&b), Err(HeaderProblem::Invalid(_))));
    }
}
