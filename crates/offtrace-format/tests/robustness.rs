//! The reader on damaged input: truncation at every byte, bit flips, garbage with valid
//! framing. It must return the complete chunks, then an error; never panic, never loop.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use offtrace_format::*;
use proptest::prelude::*;

/// A small trace with several chunks, and the (end offset, record count) of each chunk.
fn small_trace() -> (Vec<Record>, Vec<u8>, Vec<(usize, usize)>) {
    let records = synthetic_sycl_trace(12, 3);
    let bytes = write_trace(&tsc_header(), &records, 1024, 25);
    let mut chunks = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while &bytes[at..at + 4] == b"OTCK" {
        let stored = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().unwrap()) as usize;
        at += CHUNK_HEADER_LEN + stored;
        chunks.push((at, count));
    }
    assert_eq!(&bytes[at..at + 4], b"OTEN");
    assert_eq!(at + CHUNK_HEADER_LEN, bytes.len());
    assert!(chunks.len() >= 4, "the test needs several chunks, got {}", chunks.len());
    (records, bytes, chunks)
}

#[test]
fn truncation_at_every_byte_returns_complete_chunks_then_truncated() {
    let (records, bytes, chunks) = small_trace();
    let expected = expected_after_read(&records);
    for cut in 0..bytes.len() {
        let (read, err, clean) = read_all(&bytes[..cut]);
        assert!(!clean, "cut at {cut}");
        let err = err.unwrap_or_else(|| panic!("cut at {cut}: no error"));
        let complete: Vec<&(usize, usize)> = chunks.iter().filter(|(end, _)| *end <= cut).collect();
        let n: usize = complete.iter().map(|(_, c)| c).sum();
        assert_eq!(read.len(), n, "cut at {cut}");
        assert_eq!(&read[..], &expected[..n], "cut at {cut}");
        match err {
            ReadError::Truncated { complete_chunks, offset, partial_bytes, .. } => {
                assert!(cut < FILE_HEADER_LEN || complete_chunks == complete.len() as u64, "cut at {cut}");
                assert_eq!(offset + partial_bytes, cut as u64, "cut at {cut}");
            }
            other => panic!("cut at {cut}: expected Truncated, got {other}"),
        }
    }
    let (read, err, clean) = read_all(&bytes);
    assert!(err.is_none() && clean);
    assert_eq!(read, expected);
}

#[test]
fn truncated_message_is_actionable() {
    let (_, bytes, chunks) = small_trace();
    let cut = chunks[1].0 + 30;
    let (_, err, _) = read_all(&bytes[..cut]);
    let msg = err.expect("error").to_string();
    assert!(msg.starts_with(&format!("trace truncated at byte {}, after 2 complete chunks", chunks[1].0)), "{msg}");
    assert!(msg.contains("program killed?"), "{msg}");
    assert!(msg.contains("30 more bytes follow"), "{msg}");
    println!("{msg}");
}

#[test]
fn every_single_bit_flip_is_detected() {
    let (_, bytes, _) = small_trace();
    for pos in 0..bytes.len() {
        for bit in [0u8, 3, 7] {
            let mut b = bytes.clone();
            b[pos] ^= 1 << bit;
            let (_, err, clean) = read_all(&b);
            assert!(err.is_some() && !clean, "flip of bit {bit} at byte {pos} went unnoticed");
        }
    }
}

#[test]
fn bad_magic_and_version_are_named() {
    let (_, bytes, _) = small_trace();
    let (_, err, _) = read_all(b"\x7fELF\x02\x01\x01\x00 not a trace at all, definitely not one......................");
    assert!(matches!(err, Some(ReadError::NotATrace { .. })), "{err:?}");
    let mut b = bytes.clone();
    b[8] = 9;
    let (_, err, _) = read_all(&b);
    let err = err.expect("error");
    assert!(matches!(err, ReadError::UnsupportedVersion { found: 9, .. }), "{err:?}");
    assert!(err.to_string().contains("reads versions [1]"), "{err}");
}

#[test]
fn trailing_data_and_crc_errors_carry_context() {
    let (_, bytes, chunks) = small_trace();
    let mut b = bytes.clone();
    b.extend_from_slice(b"junk");
    let (_, err, clean) = read_all(&b);
    assert!(!clean);
    assert!(matches!(err, Some(ReadError::TrailingData { len: 4, .. })), "{err:?}");
    let mut b = bytes.clone();
    b[chunks[1].0 + CHUNK_HEADER_LEN + 2] ^= 0xff; // payload of chunk 2
    let (read, err, _) = read_all(&b);
    let n: usize = chunks[..2].iter().map(|c| c.1).sum();
    assert_eq!(read.len(), n);
    match err {
        Some(ReadError::Checksum { chunk: 2, offset, .. }) => assert_eq!(offset as usize, chunks[1].0),
        other => panic!("expected a checksum error in chunk 2, got {other:?}"),
    }
}

/// Wraps `payload` in a valid file header and a raw (uncompressed) chunk with a correct crc, so
/// the record decoder itself sees arbitrary bytes.
fn framed(payload: &[u8], record_count: u32) -> Vec<u8> {
    let mut out = write_trace(&TraceHeader::monotonic(), &[], 1024, 0)[..FILE_HEADER_LEN].to_vec();
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h[..4].copy_from_slice(b"OTCK");
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[16..20].copy_from_slice(&record_count.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h[..20]);
    crc.update(payload);
    h[20..24].copy_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    out
}

#[test]
fn decoder_errors_name_the_record() {
    // A function_with_args notification claiming 17 arguments: tag, presence, tid, ts delta,
    // stream, trace_type, instance delta, function_id, name, argument count.
    let payload = [0x82, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x05, 0x01, 17];
    let (_, err, _) = read_all(&framed(&payload, 1));
    let err = err.expect("error");
    assert!(matches!(err, ReadError::Record { chunk: 0, record: 0, source: DecodeError::OutOfRange { .. }, .. }), "{err:?}");
    // Unknown tag.
    let (_, err, _) = read_all(&framed(&[0x0b], 1));
    assert!(matches!(err, Some(ReadError::Record { source: DecodeError::UnknownTag { tag: 0x0b }, .. })), "{err:?}");
    // A string longer than the chunk.
    let (_, err, _) = read_all(&framed(&[0x03, 0x01, 0xff, 0xff, 0x03, b'a'], 1));
    assert!(matches!(err, Some(ReadError::Record { source: DecodeError::LengthTooLarge { .. }, .. })), "{err:?}");
    // Bytes after the last counted record.
    let (read, err, _) = read_all(&framed(&[0x0a, 0x00, 0x00, 0x0a], 1));
    assert_eq!(read.len(), 1);
    assert!(matches!(err, Some(ReadError::CorruptChunk { .. })), "{err:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn garbage_records_in_valid_frames_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        count in 0u32..40,
    ) {
        let _ = read_all(&framed(&payload, count));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_all(&bytes);
        let mut with_header = framed(&[], 0)[..FILE_HEADER_LEN].to_vec();
        with_header.extend_from_slice(&bytes);
        let _ = read_all(&with_header);
    }

    #[test]
    fn random_multi_byte_damage_never_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let (_, bytes, _) = small_trace();
        let mut b = bytes.clone();
        for (i, v) in flips {
            let at = i.index(b.len());
            b[at] = v;
        }
        let _ = read_all(&b);
    }
}
