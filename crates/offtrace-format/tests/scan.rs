//! `TraceReader::summary_scan` agrees with a full read, on clean and cut files.

mod common;
use common::*;
use offtrace_format::*;

#[test]
fn scan_agrees_with_a_full_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.offtrace");
    let records = synthetic_sycl_trace(200, 9);
    let bytes = write_trace(&tsc_header(), &records, 4096, 300);
    std::fs::write(&path, &bytes).expect("write");

    let scan = TraceReader::summary_scan(&path).expect("scan");
    let mut r = TraceReader::open(&path).expect("open");
    let n = r.by_ref().count() as u64;
    assert!(scan.finished_cleanly && r.finished_cleanly());
    assert!(scan.problem.is_none());
    assert_eq!(scan.records, n);
    assert_eq!(scan.chunks, r.complete_chunks());
    assert_eq!(scan.file_bytes, bytes.len() as u64);
    assert!(scan.raw_bytes > scan.stored_bytes);

    for cut in [FILE_HEADER_LEN, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).expect("write");
        let scan = TraceReader::summary_scan(&path).expect("scan");
        let mut r = TraceReader::open(&path).expect("open");
        let read = r.by_ref().filter(Result::is_ok).count() as u64;
        assert!(!scan.finished_cleanly);
        assert!(scan.problem.as_ref().is_some_and(ReadError::is_truncated), "{:?}", scan.problem);
        assert_eq!(scan.chunks, r.complete_chunks(), "cut at {cut}");
        assert_eq!(scan.records, read, "cut at {cut}");
    }
}
