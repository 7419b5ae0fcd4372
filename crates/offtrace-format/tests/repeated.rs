//! [`TraceRecords`] and repeated definitions (format version 5): a repeat is taken once, a
//! conflict is a warning, and the definitions first met after damage are handed to a reader
//! that names records as they stream past.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use offtrace_format::*;

fn string(id: u32, text: &str) -> Record {
    Record::String { id: StrId(id), text: text.into() }
}

fn call(i: u64) -> Record {
    Record::ApiCall(ApiCall {
        kind: 1,
        op: 7,
        tid: 10,
        start: START_TICKS + 100 * i,
        end: START_TICKS + 100 * i + 50,
        correlation: i + 1,
        external: 0,
        args: ApiArgs::from_slice(&[i, 0x5000]),
        result: Some(0),
    })
}

fn definitions() -> Vec<Record> {
    vec![
        string(1, "UR_API"),
        string(2, "urEnqueueKernelLaunch"),
        Record::KindDef { kind: 1, name: StrId(1) },
        Record::OperationDef(OperationDef { kind: 1, op: 7, name: StrId(2), args: vec![] }),
        Record::Thread { tid: 10, name: StrId(0) },
    ]
}

/// Definitions, calls in several chunks, then the definitions again between calls (as a
/// recorder repeats them), then `End`.
fn records() -> Vec<Record> {
    let mut r = definitions();
    r.extend((0..40).map(call));
    for (i, d) in definitions().into_iter().enumerate() {
        r.push(d);
        r.push(call(100 + i as u64));
    }
    r
}

struct Read {
    records: Vec<Record>,
    warnings: Vec<String>,
    late: Vec<Record>,
    outcome: ReadOutcome,
}

fn read(bytes: &[u8], options: ReadOptions) -> Read {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    std::fs::write(&path, bytes).unwrap();
    let mut r = TraceRecords::open(&path, options).unwrap();
    let (mut records, mut warnings) = (Vec::new(), Vec::new());
    r.for_each(
        |rec| {
            records.push(rec.clone());
            Ok::<(), ()>(())
        },
        |w| warnings.push(w.to_string()),
    )
    .unwrap();
    let late = r.late_definitions().to_vec();
    Read { records, warnings, late, outcome: r.into_outcome() }
}

fn options(threads: usize, apart: bool) -> ReadOptions {
    ReadOptions { decode_threads: threads, api_args: !apart, api_calls_apart: apart }
}

fn without_args(r: &Record) -> Record {
    match r {
        Record::ApiCall(a) => Record::ApiCall(ApiCall { args: ApiArgs::default(), ..*a }),
        other => other.clone(),
    }
}

#[test]
fn repeats_are_taken_once_and_calls_kept_apart_keep_their_places() {
    let records = records();
    let bytes = write_trace(&tsc_header(), &records, 1 << 20, 16);
    let mut expected = expected_after_read(&records);
    let first = definitions().len();
    // The repeats go; each call stays where it was among the other records.
    let mut i = 0;
    expected.retain(|r| {
        i += 1;
        i <= first || DefinitionKey::of(r).is_none()
    });
    for threads in [0, 2] {
        for apart in [false, true] {
            let r = read(&bytes, options(threads, apart));
            let want: Vec<Record> = if apart { expected.iter().map(without_args).collect() } else { expected.clone() };
            assert_eq!(r.records, want, "{threads} threads, apart {apart}");
            assert!(r.warnings.is_empty(), "{:?}", r.warnings);
            assert_eq!(r.outcome.repeated_definitions, first as u64);
            assert!(r.outcome.finished_cleanly());
            assert!(r.late.is_empty(), "no damage, nothing late");
        }
    }
}

#[test]
fn a_conflicting_definition_is_a_warning_and_the_first_one_stays() {
    let mut records = definitions();
    records.push(call(0));
    records.push(string(2, "urEnqueueUSMFill"));
    records.push(call(1));
    let bytes = write_trace(&tsc_header(), &records, 1 << 20, 0);
    let r = read(&bytes, options(0, false));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("chunk 0: string 2 is defined again with another value; kept the first definition"),
        "{}",
        r.warnings[0]
    );
    assert!(!r.records.iter().any(|x| matches!(x, Record::String { text, .. } if text == "urEnqueueUSMFill")));
    assert_eq!(r.records.iter().filter(|x| matches!(x, Record::ApiCall(_))).count(), 2);
    assert!(!r.outcome.finished_cleanly());
}

#[test]
fn definitions_first_met_after_damage_are_handed_over_in_file_order() {
    let records = records();
    let mut bytes = write_trace(&tsc_header(), &records, 1 << 20, 16);
    // Damage the first chunk (the one with the definitions): its crc no longer matches.
    bytes[FILE_HEADER_LEN + CHUNK_HEADER_LEN + 3] ^= 0xff;
    for threads in [0, 2] {
        let r = read(&bytes, options(threads, true));
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        // Every definition came again after the damage: in file order, and returned once.
        assert_eq!(r.late, definitions(), "{threads} threads");
        let defs: Vec<&Record> = r.records.iter().filter(|x| DefinitionKey::of(x).is_some()).collect();
        assert_eq!(defs.len(), definitions().len());
        assert_eq!(r.outcome.repeated_definitions, 0);
    }
}

/// A second reading seeded with the late definitions takes the file's copies as repeats.
#[test]
fn a_reading_seeded_with_the_late_definitions_takes_the_files_copies_as_repeats() {
    let records = records();
    let mut bytes = write_trace(&tsc_header(), &records, 1 << 20, 16);
    bytes[FILE_HEADER_LEN + CHUNK_HEADER_LEN + 3] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    std::fs::write(&path, &bytes).unwrap();
    let mut r = TraceRecords::open(&path, options(0, false)).unwrap();
    r.seed_definitions(&definitions());
    let mut n = 0;
    r.for_each(
        |rec| {
            assert!(DefinitionKey::of(rec).is_none(), "{rec:?} was given before");
            n += 1;
            Ok::<(), ()>(())
        },
        |_| {},
    )
    .unwrap();
    assert!(n > 0);
    assert!(r.late_definitions().is_empty());
    assert_eq!(r.outcome().repeated_definitions, definitions().len() as u64);
}

/// A byte flipped anywhere before the last chunk (the repeat and `End`): reading never fails
/// outright, and every API call read has its kind and operation defined somewhere in what was
/// read.
#[test]
fn one_flipped_byte_before_the_repeat_leaves_every_call_read_named() {
    let records = records();
    let bytes = write_trace(&tsc_header(), &records, 1 << 20, 8);
    let mut at = FILE_HEADER_LEN;
    let mut last_chunk = at;
    while &bytes[at..at + 4] == b"OTCK" {
        last_chunk = at;
        at += CHUNK_HEADER_LEN + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    for i in FILE_HEADER_LEN..last_chunk {
        let mut b = bytes.clone();
        b[i] ^= 0x55;
        std::fs::write(&path, &b).unwrap();
        let mut r = TraceRecords::open(&path, options(0, false)).unwrap();
        let (mut kinds, mut ops, mut strings, mut calls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        r.for_each(
            |rec| {
                match rec {
                    Record::KindDef { kind, .. } => kinds.push(*kind),
                    Record::OperationDef(d) => ops.push((d.kind, d.op)),
                    Record::String { id, .. } => strings.push(*id),
                    Record::ApiCall(c) => calls.push((c.kind, c.op)),
                    _ => {}
                }
                Ok::<(), ()>(())
            },
            |_| {},
        )
        .unwrap();
        assert!(!calls.is_empty(), "byte {i}: the other chunks' calls are read");
        for (kind, op) in calls {
            assert!(kinds.contains(&kind) && ops.contains(&(kind, op)), "byte {i}: call {kind}/{op} unnamed");
        }
        assert!(strings.contains(&StrId(1)) && strings.contains(&StrId(2)), "byte {i}");
    }
}
