//! The fuzz targets' bodies, shared by the libFuzzer binaries (`fuzz_targets/`, feature
//! `libfuzzer`, built by `cargo fuzz`) and by the bounded stable-Rust run in `tests/smoke.rs`
//! (seed corpus plus mutated inputs; `scripts/test-tier1.sh` runs it), so both exercise the
//! same code.

use offtrace_format::{CHUNK_HEADER_LEN, TraceHeader, TraceReader, TraceWriter};

/// Arbitrary bytes as a whole trace file: the reader must return records or errors, never
/// panic, never allocate without bound.
pub fn read_trace(data: &[u8]) {
    if let Ok(reader) = TraceReader::new(data) {
        // The iterator ends after the first error; bound it anyway so a bug shows as a
        // failure rather than a hang.
        for item in reader.take(1 << 20) {
            if item.is_err() {
                break;
            }
        }
    }
}

/// Arbitrary bytes as the payload of a chunk with valid framing (header, crc): reaches the
/// record decoder, which `read_trace` mostly cannot get past the crc32 to exercise. The first
/// byte is the chunk's record count.
pub fn decode_chunk(data: &[u8]) {
    let Some(file) = framed_chunk(data) else { return };
    read_trace(&file);
}

/// A trace file of a valid header and one chunk whose payload is `data[1..]` with record
/// count `data[0]`, framed with a correct length and crc32. `None` for empty input.
pub fn framed_chunk(data: &[u8]) -> Option<Vec<u8>> {
    let (count, payload) = match data.split_first() {
        Some((c, rest)) => (u32::from(*c), rest),
        None => return None,
    };
    let w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).ok()?;
    let mut file = w.get_ref().clone();
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h[..4].copy_from_slice(b"OTCK");
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[16..20].copy_from_slice(&count.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h[..20]);
    crc.update(payload);
    h[20..24].copy_from_slice(&crc.finalize().to_le_bytes());
    file.extend_from_slice(&h);
    file.extend_from_slice(payload);
    Some(file)
}
