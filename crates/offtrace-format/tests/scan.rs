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

/// Reading from the last chunk returns exactly the records of that chunk, ends cleanly against
/// the end marker, and so gives the `End` totals without decoding the rest.
#[test]
fn open_at_last_chunk_reads_only_the_tail() {
    use offtrace_format::{Record, TraceHeader, TraceReader, TraceWriter};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("t.offtrace");
    let mut w =
        TraceWriter::new(std::fs::File::create(&path).expect("create"), &TraceHeader::monotonic()).expect("writer");
    for chunk in 0..5u32 {
        for i in 0..10u32 {
            w.write(&Record::Info { key: format!("k{chunk}"), value: i.to_string() }).expect("write");
        }
        w.flush_chunk().expect("flush");
    }
    w.write(&Record::Drops { tid: 7, count: 3 }).expect("drops");
    w.write(&Record::End { records: 52, drops: 3 }).expect("end");
    w.finish().expect("finish");

    let scan = TraceReader::summary_scan(&path).expect("scan");
    assert!(scan.finished_cleanly);
    let (_, n) = scan.last_chunk.expect("a last chunk");
    let reader = TraceReader::open_at_last_chunk(&path, &scan).expect("open").expect("some");
    let tail: Vec<Record> = reader.collect::<Result<_, _>>().expect("the tail decodes and the end marker matches");
    assert_eq!(tail.len(), n as usize);
    assert_eq!(tail.last(), Some(&Record::End { records: 52, drops: 3 }));
    assert!(
        tail.iter().all(|r| !matches!(r, Record::Info { key, .. } if key != "k4")),
        "only the last chunk: {tail:?}"
    );
}
