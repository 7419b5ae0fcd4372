//! Arbitrary bytes as the payload of a chunk with valid framing (header, crc): reaches the
//! record decoder, which `read_trace` mostly cannot get past the crc32 to exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offtrace_format::{CHUNK_HEADER_LEN, TraceHeader, TraceReader, TraceWriter};

fuzz_target!(|data: &[u8]| {
    let (count, payload) = match data.split_first() {
        Some((c, rest)) => (u32::from(*c), rest),
        None => return,
    };
    let Ok(w) = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()) else { return };
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
    if let Ok(reader) = TraceReader::new(&file[..]) {
        for item in reader.take(1 << 20) {
            if item.is_err() {
                break;
            }
        }
    }
});
