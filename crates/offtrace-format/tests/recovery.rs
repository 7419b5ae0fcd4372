//! [`TraceRecords`] on damaged files: a damaged chunk is skipped with a warning and reading
//! resumes at the next valid chunk; threads or not, records come out in file order.

#![allow(clippy::unwrap_used)]

mod common;
use std::path::PathBuf;

use common::*;
use offtrace_format::*;

/// (start offset, end offset, record count) of each chunk.
type Chunks = Vec<(usize, usize, usize)>;

/// A trace with several chunks, and where its chunks are.
fn trace() -> (Vec<Record>, Vec<u8>, Chunks) {
    let records = synthetic_sycl_trace(40, 7);
    let bytes = write_trace(&tsc_header(), &records, 1024, 25);
    let mut chunks = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while &bytes[at..at + 4] == b"OTCK" {
        let stored = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().unwrap()) as usize;
        chunks.push((at, at + CHUNK_HEADER_LEN + stored, count));
        at += CHUNK_HEADER_LEN + stored;
    }
    assert!(chunks.len() >= 6, "the test needs several chunks, got {}", chunks.len());
    (records, bytes, chunks)
}

struct Read {
    records: Vec<Record>,
    warnings: Vec<String>,
    outcome: ReadOutcome,
}

fn read(bytes: &[u8], threads: usize) -> Read {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("t.offtrace");
    std::fs::write(&path, bytes).unwrap();
    let mut r = TraceRecords::open(&path, ReadOptions { decode_threads: threads, ..ReadOptions::default() }).unwrap();
    let mut records = Vec::new();
    let mut warnings = Vec::new();
    r.for_each(
        |rec| {
            records.push(rec.clone());
            Ok::<(), ()>(())
        },
        |w| warnings.push(w.to_string()),
    )
    .unwrap();
    Read { records, warnings, outcome: r.into_outcome() }
}

/// The expected records with the records of chunks `skip` (indices) left out.
fn without(expected: &[Record], chunks: &[(usize, usize, usize)], skip: &[usize]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    for (i, (_, _, n)) in chunks.iter().enumerate() {
        if !skip.contains(&i) {
            out.extend_from_slice(&expected[at..at + n]);
        }
        at += n;
    }
    out
}

#[test]
fn a_clean_trace_reads_the_same_with_and_without_threads() {
    let (records, bytes, _) = trace();
    let expected = expected_after_read(&records);
    for threads in [0, 1, 2, 3] {
        let r = read(&bytes, threads);
        assert_eq!(r.records, expected, "{threads} threads");
        assert!(r.warnings.is_empty());
        assert!(r.outcome.finished_cleanly(), "{threads} threads: {:?}", r.outcome);
    }
}

#[test]
fn a_flipped_payload_byte_skips_that_chunk_only() {
    let (records, mut bytes, chunks) = trace();
    let expected = expected_after_read(&records);
    let (start, end, _) = chunks[2];
    bytes[(start + end) / 2] ^= 0x40;
    for threads in [0, 2] {
        let r = read(&bytes, threads);
        assert_eq!(r.records, without(&expected, &chunks, &[2]), "{threads} threads");
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(r.warnings[0].contains("checksum mismatch"), "{}", r.warnings[0]);
        assert!(r.warnings[0].contains(&format!("resumed at byte {end}")), "{}", r.warnings[0]);
        assert!(r.outcome.end_marker && r.outcome.end_record);
        assert!(!r.outcome.finished_cleanly());
        assert!(r.outcome.problem.is_none(), "the end marker's counts are not held against a skip");
    }
}

#[test]
fn a_broken_chunk_header_and_garbage_between_chunks_are_stepped_over() {
    let (records, bytes, chunks) = trace();
    let expected = expected_after_read(&records);
    // Chunk 1's magic broken, and 37 bytes of garbage (with a fake magic in it) before chunk 4.
    let mut damaged = bytes.clone();
    damaged[chunks[1].0] = b'X';
    let garbage: Vec<u8> = b"OTCK".iter().copied().chain((0..33u8).map(|i| i.wrapping_mul(37))).collect();
    let at = chunks[4].0;
    damaged.splice(at..at, garbage);
    let r = read(&damaged, 2);
    assert_eq!(r.records, without(&expected, &chunks, &[1]));
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("expected a chunk header"), "{}", r.warnings[0]);
    assert!(r.warnings[1].contains("skipped 37 bytes"), "{}", r.warnings[1]);
}

#[test]
fn a_lying_length_is_skipped_not_taken_for_truncation() {
    let (records, mut bytes, chunks) = trace();
    let expected = expected_after_read(&records);
    // Chunk 3 claims far more bytes than the file has: its crc cannot be right; chunk 4 is.
    let at = chunks[3].0;
    bytes[at + 8..at + 12].copy_from_slice(&(10u32 << 20).to_le_bytes());
    bytes[at + 12..at + 16].copy_from_slice(&(10u32 << 20).to_le_bytes());
    let r = read(&bytes, 2);
    assert_eq!(r.records, without(&expected, &chunks, &[3]));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.outcome.end_marker);
}

#[test]
fn a_truncated_trace_reads_its_complete_chunks_then_says_truncated() {
    let (records, bytes, chunks) = trace();
    let expected = expected_after_read(&records);
    let (start, end, _) = chunks[5];
    for cut in [start, start + 10, (start + end) / 2, end - 1] {
        let r = read(&bytes[..cut], 2);
        assert_eq!(r.records, without(&expected[..], &chunks[..5], &[]), "cut at {cut}");
        assert!(r.warnings.is_empty(), "cut at {cut}: {:?}", r.warnings);
        assert!(!r.outcome.end_marker);
        let p = r.outcome.problem.as_ref().unwrap().to_string();
        assert!(p.contains("truncated"), "cut at {cut}: {p}");
    }
}

#[test]
fn a_damaged_last_chunk_with_nothing_after_it_is_a_warning_and_an_end_without_marker() {
    let (_, bytes, chunks) = trace();
    let last = chunks.len() - 1;
    let mut damaged = bytes[..chunks[last].1].to_vec();
    let (start, end, _) = chunks[last];
    damaged[(start + end) / 2] ^= 1;
    let r = read(&damaged, 2);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("no valid chunk or end marker follows"), "{}", r.warnings[0]);
    assert!(!r.outcome.end_marker);
}

#[test]
fn an_empty_file_is_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.offtrace");
    std::fs::write(&path, b"").unwrap();
    let e = TraceRecords::open(&path, ReadOptions::default()).unwrap_err();
    assert!(matches!(e, ReadError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("is empty"), "{e}");
}

#[test]
fn dropping_the_reader_midway_stops_its_threads() {
    let (_, bytes, _) = trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    std::fs::write(&path, &bytes).unwrap();
    for _ in 0..20 {
        let mut r = TraceRecords::open(&path, ReadOptions { decode_threads: 2, ..ReadOptions::default() }).unwrap();
        assert!(r.next_batch().is_some());
        drop(r);
    }
}

#[test]
fn chunks_larger_than_a_batch_come_out_whole_and_in_order() {
    let records = synthetic_sycl_trace(3000, 11);
    let bytes = write_trace(&tsc_header(), &records, 8 << 20, usize::MAX);
    let expected = expected_after_read(&records);
    assert!(expected.len() > 3 * 8192, "{} records", expected.len());
    for threads in [0, 1, 2] {
        let r = read(&bytes, threads);
        assert_eq!(r.records.len(), expected.len(), "{threads} threads");
        assert!(r.records == expected, "{threads} threads: records differ");
        assert!(r.outcome.finished_cleanly());
        assert!(r.outcome.chunks < 4, "{} chunks", r.outcome.chunks);
    }
}

/// Whether `part` is `whole` with some elements left out (order kept).
fn is_subsequence(part: &[Record], whole: &[Record]) -> bool {
    let mut it = whole.iter();
    part.iter().all(|p| it.any(|w| w == p))
}

#[test]
fn random_damage_never_panics_and_keeps_only_whole_chunks_in_order() {
    let (records, bytes, _) = trace();
    let expected = expected_after_read(&records);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for round in 0..200 {
        let mut b = bytes.clone();
        for _ in 0..1 + rnd(4) {
            match rnd(4) {
                0 => {
                    let at = FILE_HEADER_LEN + rnd(b.len() - FILE_HEADER_LEN);
                    b[at] ^= 1 << rnd(8);
                }
                1 => {
                    let at = FILE_HEADER_LEN + rnd(b.len() - FILE_HEADER_LEN);
                    let junk: Vec<u8> = (0..1 + rnd(300)).map(|_| rnd(256) as u8).collect();
                    b.splice(at..at, junk);
                }
                2 => {
                    let at = FILE_HEADER_LEN + rnd(b.len() - FILE_HEADER_LEN);
                    let end = (at + 1 + rnd(500)).min(b.len());
                    b.drain(at..end);
                }
                _ => {
                    let keep = FILE_HEADER_LEN + rnd(b.len() - FILE_HEADER_LEN);
                    b.truncate(keep);
                }
            }
        }
        let threads = round % 3;
        let r = read(&b, threads);
        assert!(is_subsequence(&r.records, &expected), "round {round}: records that were never written");
    }
}
