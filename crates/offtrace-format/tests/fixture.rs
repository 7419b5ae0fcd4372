//! The checked-in trace of every format version is read forever.
//!
//! `tests/fixtures/v1.offtrace` was written by `regenerate_v1_fixture` (run it with
//! `OFFTRACE_REGENERATE_FIXTURE=1 cargo test -p offtrace-format --test fixture -- --ignored`
//! only when creating a new version's fixture; never rewrite an old one).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use offtrace_format::*;

const V1_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v1.offtrace");

/// The records of the v1 fixture: the synthetic SYCL workload plus every other variant and
/// user-data kind, ending with an explicit End.
fn v1_fixture_records() -> Vec<Record> {
    let mut records = synthetic_sycl_trace(40, 2024);
    let n = |ts: u64, user_data| {
        Record::Notification(Notification {
            ts,
            tid: 77,
            stream: 3,
            trace_type: 0x15,
            instance: 5,
            parent: Some(EventInfo { uid: 1, source_id: 2, target_id: 3, ..EventInfo::default() }),
            event: Some(EventInfo { uid: u64::MAX, instance_id: 9, event_type: u16::MAX, ..EventInfo::default() }),
            user_data,
            stash: Some((StrId(4), 0xdead_beef)),
            universal_id: 99,
        })
    };
    let t = START_TICKS + 10_000_000;
    records.extend([
        n(t, UserData::MemAlloc { mem_object: 1, alloc_pointer: 0x7f00_0000_1000, alloc_size: 4096, guard_zone: 0 }),
        n(t + 1, UserData::OffloadBuffer {
            user_object: 0x10,
            host_object: 0x20,
            element_type: StrId(5),
            element_size: 4,
            dim: 2,
            range: [16, 32, 1],
        }),
        n(t + 2, UserData::Association { user_object: 0x10, mem_object: 0x30 }),
        n(t + 3, UserData::Accessor { buffer: 0x10, accessor: 0x40, target: 2014, mode: 1024 }),
        n(t + 4, UserData::Pointer(0x7ffd_0000_0010)),
        n(t + 5, UserData::None),
        Record::Object { id: ObjectId(50), value_type: ValueType::Floating, bytes: 1.5f64.to_le_bytes().to_vec() },
        Record::Object { id: ObjectId(51), value_type: ValueType::Boolean, bytes: vec![1] },
        Record::Object { id: ObjectId(52), value_type: ValueType::Binary, bytes: vec![0, 255, 7] },
        Record::Object { id: ObjectId(53), value_type: ValueType::SignedInteger, bytes: (-5i64).to_le_bytes().to_vec() },
        Record::Info { key: "unicode".into(), value: "µs → ✓".into() },
        Record::Drops { tid: 77, count: 3 },
    ]);
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops: 3 });
    records
}

fn v1_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v1_fixture_records(), 1024, 50)
}

#[test]
fn v1_fixture_reads_forever() {
    let mut r = TraceReader::open(V1_FIXTURE).expect("the v1 fixture opens");
    assert_eq!(r.header().version, 1);
    assert_eq!(*r.header(), tsc_header());
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v1 fixture reads");
    assert!(r.finished_cleanly());
    assert!(r.complete_chunks() > 3);
    let mut expected = expected_after_read(&v1_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
}

/// Splits a trace into its header and its chunks' decompressed payloads (an independent
/// parser of the framing, for the test below).
fn framing(bytes: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>, Vec<u8>) {
    let mut at = FILE_HEADER_LEN;
    let mut chunks = Vec::new();
    while &bytes[at..at + 4] == b"OTCK" {
        let u32_at = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap()) as usize;
        let (flags, stored, raw) = (bytes[at + 4], u32_at(8), u32_at(12));
        let payload = &bytes[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + stored];
        chunks.push(if flags & 1 != 0 {
            lz4_flex::block::decompress(payload, raw).expect("lz4")
        } else {
            payload.to_vec()
        });
        at += CHUNK_HEADER_LEN + stored;
    }
    (bytes[..FILE_HEADER_LEN].to_vec(), chunks, bytes[at..].to_vec())
}

/// Today's writer still produces the v1 layout. If this fails on purpose, bump
/// `FORMAT_VERSION`, keep `v1.offtrace` and its reader path, and add a v2 fixture.
/// (Compared after decompression, so a different LZ4 compressor version does not matter.)
#[test]
fn writer_still_writes_v1() {
    let fixture = std::fs::read(V1_FIXTURE).expect("fixture");
    assert_eq!(framing(&v1_fixture_bytes()), framing(&fixture));
}

#[test]
#[ignore = "writes tests/fixtures/v1.offtrace; only for creating a new version's fixture"]
fn regenerate_v1_fixture() {
    if std::env::var_os("OFFTRACE_REGENERATE_FIXTURE").is_some() {
        std::fs::write(V1_FIXTURE, v1_fixture_bytes()).expect("write fixture");
    }
}
