//! The bytes of `ApiCall` records are fixed by the format (version 3), whichever way the writer
//! is given them: an owned [`ApiCall`] through `write`, `write_api_call`, or a borrowed
//! [`ApiCallRef`] (the recorder's path). The expected bytes were written by the encoder before
//! the borrowed path existed (commit f54a3c2), so a faster encoder cannot change the file.

use offtrace_format::{ApiArgs, ApiCall, ApiCallRef, Record, TraceHeader, TraceWriter};

/// Calls that exercise every branch of the encoding: thread switches, result and external
/// present or not, the same arguments, argument differences, another argument count, a new
/// operation, and more arguments than a record keeps.
/// kind, op, tid, start, end, correlation, external, arguments, result.
type Call = (u32, u32, u32, u64, u64, u64, u64, Vec<u64>, Option<i64>);

fn calls() -> Vec<Call> {
    let many: Vec<u64> = (0..30).map(|i| i * 1000 + 7).collect();
    vec![
        (1, 19, 100, 1_000, 1_250, 1, 0, vec![0x5555_0000_2000, 0x5555_0000_3000, 1, 0x7ffd_0000_1000], Some(0)),
        (1, 19, 100, 1_300, 1_420, 2, 0, vec![0x5555_0000_2000, 0x5555_0000_3000, 1, 0x7ffd_0000_1040], Some(0)),
        (1, 19, 100, 1_500, 1_600, 3, 0, vec![0x5555_0000_2000, 0x5555_0000_3000, 1, 0x7ffd_0000_1040], Some(0)),
        (1, 19, 200, 1_510, 1_700, 9, 77, vec![0x10, 0x20], None),
        (1, 19, 100, 1_800, 1_900, 4, 0, vec![0x5555_0000_2000, 0x5555_0000_3000], Some(-5)),
        (1, 19, 100, 2_000, 2_100, 5, 0, vec![0x5555_0000_1000, 0x5555_0000_3008], Some(-5)),
        (1, 7, 100, 2_200, 2_300, 6, u64::MAX, many.clone(), Some(i64::from(i32::MIN))),
        (2, 3, 100, 2_400, 2_300, 7, 0, vec![], None),
        (1, 7, 100, 2_500, 2_600, 8, 0, many, Some(1)),
    ]
}

fn write(how: u8) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).expect("header");
    for (kind, op, tid, start, end, correlation, external, args, result) in calls() {
        let borrowed = ApiCallRef { kind, op, tid, start, end, correlation, external, args: &args, result };
        let owned =
            ApiCall { kind, op, tid, start, end, correlation, external, args: ApiArgs::from_slice(&args), result };
        assert_eq!(borrowed.to_api_call(), owned);
        match how {
            0 => w.write(&Record::ApiCall(owned)).expect("write"),
            1 => w.write_api_call(&owned).expect("write"),
            _ => w.write_api_call_ref(&borrowed).expect("write"),
        }
    }
    w.flush_chunk().expect("flush");
    w.get_ref().clone()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_way_of_writing_an_api_call_gives_the_format_3_bytes() {
    // The whole file: the header (fixed for `monotonic()`) and one chunk.
    let expected = include_str!("fixtures/api_calls_v3.hex").trim();
    for how in 0..3 {
        assert_eq!(hex(&write(how)), expected, "way {how}");
    }
}
