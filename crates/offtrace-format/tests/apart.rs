//! The report's way of reading ([`ReadOptions::api_args`] off, [`ReadOptions::api_calls_apart`]
//! on) gives the same records in the same order as the plain reader, with or without decode
//! threads, on a TSC-clock trace whose calibration points change the conversion mid-chunk.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use offtrace_format::*;

/// API calls (with arguments, results, deltas), device work between them, calibration points.
fn records() -> Vec<Record> {
    let mut out = vec![Record::KindDef { kind: 1, name: StrId(0) }];
    let mut ticks = START_TICKS;
    for i in 0..6000u64 {
        let tid = 100 + (i % 3) as u32;
        ticks += 1_000 + i % 7;
        if i % 500 == 499 {
            out.push(Record::ClockSync {
                ticks,
                monotonic_ns: convert(ticks, START_TICKS, START_MONOTONIC_NS) + i,
                realtime_ns: 1,
            });
        }
        if i % 4 == 0 {
            out.push(Record::Activity(Activity {
                kind: 4,
                tid,
                ts: ticks,
                correlation: i,
                queue: 0x5000,
                device: 7,
                ..Activity::default()
            }));
        }
        let args = [0x5000 + i % 5, i * 8, 3];
        out.push(Record::ApiCall(ApiCall {
            kind: 1,
            op: (i % 4) as u32,
            tid,
            start: ticks,
            end: ticks + 300,
            correlation: i,
            external: if i % 9 == 0 { 77 } else { 0 },
            args: ApiArgs::from_slice(&args[..1 + (i % 3) as usize]),
            result: (i % 5 == 0).then_some(-(i as i64 % 3)),
        }));
    }
    out.push(Record::End { records: 0, drops: 0 });
    out
}

/// What the report reads of a record: an API call without its arguments.
#[derive(Debug, PartialEq)]
enum Seen {
    Call(u32, u32, u32, u64, u64, u64, u64, Option<i64>),
    Other(Box<Record>),
}

fn read(path: &std::path::Path, options: ReadOptions) -> Vec<Seen> {
    let mut t = TraceRecords::open(path, options).unwrap();
    let mut out = Vec::new();
    let call = |a: &ApiCallBrief| Seen::Call(a.kind, a.op, a.tid, a.start, a.end, a.correlation, a.external, a.result);
    while let Some(b) = t.next_batch() {
        let Batch::Records(records) = b else { panic!("damage in a sound trace") };
        let mut calls = t.api_calls().iter().peekable();
        for (i, r) in records.iter().enumerate() {
            while let Some(c) = calls.next_if(|c| c.at as usize <= i) {
                out.push(call(c));
            }
            out.push(match r {
                Record::ApiCall(a) => {
                    assert!(options.api_args || a.args.as_slice().is_empty(), "{a:?}");
                    Seen::Call(a.kind, a.op, a.tid, a.start, a.end, a.correlation, a.external, a.result)
                }
                other => Seen::Other(Box::new(other.clone())),
            });
        }
        out.extend(calls.map(call));
    }
    assert!(t.outcome().finished_cleanly());
    out
}

#[test]
fn api_calls_apart_come_back_in_file_order_with_their_times_converted() {
    let records = records();
    let bytes = write_trace(&tsc_header(), &records, 2048, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    std::fs::write(&path, &bytes).unwrap();
    let plain = read(&path, ReadOptions { decode_threads: 0, ..ReadOptions::default() });
    assert_eq!(plain.len(), records.len());
    assert!(plain.iter().filter(|s| matches!(s, Seen::Call(..))).count() == 6000);
    for threads in [0, 2] {
        for (api_args, api_calls_apart) in [(false, false), (false, true), (true, true)] {
            let options = ReadOptions { decode_threads: threads, api_args, api_calls_apart };
            assert!(read(&path, options) == plain, "{options:?}");
        }
    }
    // `for_each` hands the calls kept apart back as records, in their places.
    let options = ReadOptions { decode_threads: 2, api_args: false, api_calls_apart: true };
    let mut t = TraceRecords::open(&path, options).unwrap();
    let mut each = Vec::new();
    t.for_each(
        |r| {
            each.push(match r {
                Record::ApiCall(a) => {
                    Seen::Call(a.kind, a.op, a.tid, a.start, a.end, a.correlation, a.external, a.result)
                }
                other => Seen::Other(Box::new(other.clone())),
            });
            Ok::<(), ()>(())
        },
        |w| panic!("{w}"),
    )
    .unwrap();
    assert!(each == plain);
}
