//! Bytes per record on a synthetic SYCL/UR-like workload (real traces come later).
//! Run `cargo test -p offtrace-format --test size -- --nocapture` to see the numbers.

mod common;
use common::*;
use offtrace_format::*;

#[test]
fn bytes_per_record_on_a_synthetic_sycl_trace() {
    let records = synthetic_sycl_trace(20_000, 7);
    let notifications = records.iter().filter(|r| matches!(r, Record::Notification(_))).count();
    let fwa = records
        .iter()
        .filter(|r| matches!(r, Record::Notification(n) if matches!(n.user_data, UserData::FunctionWithArgs { .. })))
        .count();
    let mut w = TraceWriter::new(Vec::new(), &tsc_header()).expect("header");
    for (i, r) in records.iter().enumerate() {
        w.write(r).expect("write");
        // The agent flushes every ~100 ms; a busy thread writes ~2-5k records in that time.
        if i % 3000 == 2999 {
            w.flush_chunk().expect("flush");
        }
    }
    w.flush_chunk().expect("flush");
    let raw = w.raw_chunk_bytes();
    let file = w.bytes_written();
    let chunks = w.chunks_written();
    let bytes = w.finish().expect("finish");
    let n = records.len() as f64;
    println!(
        "{} records ({} notifications, {} ur.call function_with_args), {} chunks",
        records.len(),
        notifications,
        fwa,
        chunks
    );
    println!("encoded (before LZ4): {:.2} bytes/record", raw as f64 / n);
    println!("on disk (LZ4 + framing): {:.2} bytes/record, {} bytes total", file as f64 / n, bytes.len());
    println!("LZ4 ratio: {:.2}x", raw as f64 / (file as f64));
    assert!((bytes.len() as f64) / n <= 32.0, "goal: at most 32 bytes per record on disk");
    let (read, err, clean) = read_all(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert!(clean);
    assert_eq!(read, expected_after_read(&records));
}
