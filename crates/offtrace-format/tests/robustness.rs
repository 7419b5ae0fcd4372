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
    assert!(err.to_string().contains("reads versions [1, 2, 3, 4, 5, 6]"), "{err}");
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
    assert!(
        matches!(err, ReadError::Record { chunk: 0, record: 0, source: DecodeError::OutOfRange { .. }, .. }),
        "{err:?}"
    );
    // Unknown tag.
    let (_, err, _) = read_all(&framed(&[0x1a], 1));
    assert!(matches!(err, Some(ReadError::Record { source: DecodeError::UnknownTag { tag: 0x1a }, .. })), "{err:?}");
    // A string longer than the chunk.
    let (_, err, _) = read_all(&framed(&[0x03, 0x01, 0xff, 0xff, 0x03, b'a'], 1));
    assert!(matches!(err, Some(ReadError::Record { source: DecodeError::LengthTooLarge { .. }, .. })), "{err:?}");
    // Bytes after the last counted record.
    let (read, err, _) = read_all(&framed(&[0x0a, 0x00, 0x00, 0x0a], 1));
    assert_eq!(read.len(), 1);
    assert!(matches!(err, Some(ReadError::CorruptChunk { .. })), "{err:?}");
}

/// [`framed`] with the file header patched to format version 1 (crc recomputed).
fn framed_v1(payload: &[u8], record_count: u32) -> Vec<u8> {
    let mut b = framed(payload, record_count);
    b[8..10].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A KernelDispatch record with one allocation, as bytes: every field one byte, then the
/// allocation (base, size, arg_index zigzag, memory_type). Returns the bytes and the index of
/// the allocation count byte.
fn kernel_dispatch_bytes() -> (Vec<u8>, usize) {
    // tag tid ts corr inst kernel queue handle work_dim g0 g1 g2 l0 l1 l2 | count | alloc
    let mut b = vec![0x0b, 7, 100, 3, 4, 1, 9, 8, 1, 64, 1, 1, 16, 1, 1];
    let count_at = b.len();
    b.extend_from_slice(&[1, 0x40, 0x20, 0x00, 2]);
    (b, count_at)
}

#[test]
fn kernel_dispatch_decodes_and_rejects_corruption() {
    let (b, count_at) = kernel_dispatch_bytes();
    let (read, err, _) = read_all(&framed(&b, 1));
    assert!(matches!(err, Some(ReadError::Truncated { .. })), "{err:?}");
    match read.as_slice() {
        [Record::KernelDispatch(d)] => {
            assert_eq!((d.tid, d.ts, d.correlation, d.ur_instance, d.kernel), (7, 100, 3, 4, StrId(1)));
            assert_eq!((d.global_size, d.local_size), ([64, 1, 1], [16, 1, 1]));
            assert_eq!(
                d.allocations,
                [KernelAllocation { base: 0x40, size: 0x20, arg_index: 0, memory_type: MemoryType::Device }]
            );
        }
        other => panic!("{other:?}"),
    }
    let decode_error = |bytes: &[u8]| match read_all(&framed(bytes, 1)).1 {
        Some(ReadError::Record { source, .. }) => source,
        other => panic!("expected a record error, got {other:?}"),
    };
    // Allocation count: just at the bound the bytes left allow (one allocation, 4 bytes) but a
    // second claimed; far above it; a count whose reservation would be huge.
    for count in [2u8, 5, 0x7f] {
        let mut c = b.clone();
        c[count_at] = count;
        assert!(matches!(decode_error(&c), DecodeError::LengthTooLarge { .. } | DecodeError::UnexpectedEnd { .. }));
    }
    let mut c = b[..count_at].to_vec();
    c.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(matches!(decode_error(&c), DecodeError::LengthTooLarge { .. }), "{:?}", decode_error(&c));
    // Memory type 4 is not defined.
    let mut c = b.clone();
    *c.last_mut().unwrap() = 4;
    assert!(matches!(decode_error(&c), DecodeError::Invalid { found: 4, .. }));
    // arg_index outside i32 (zigzag of 2^31).
    let mut c = b[..count_at + 3].to_vec();
    c.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10, 2]);
    assert!(matches!(decode_error(&c), DecodeError::Invalid { .. }));
    // Every strict prefix is an error, never a panic.
    for cut in 1..b.len() {
        let _ = decode_error(&b[..cut]);
    }
    // The tag does not exist in version 1 files.
    match read_all(&framed_v1(&b, 1)).1 {
        Some(ReadError::Record {
            source: DecodeError::TagNotInVersion { tag: 0x0b, version: 1, since: 2 }, ..
        }) => {}
        other => panic!("{other:?}"),
    }
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
    fn garbage_after_a_kernel_dispatch_prefix_never_panics(
        cut in 1usize..15,
        tail in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let (mut b, _) = kernel_dispatch_bytes();
        b.truncate(cut);
        b.extend_from_slice(&tail);
        let _ = read_all(&framed(&b, 1));
        let _ = read_all(&framed_v1(&b, 1));
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
