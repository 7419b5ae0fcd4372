//! The checked-in trace of every format version is read forever.
//!
//! `tests/fixtures/v<N>.offtrace` was written by `regenerate_fixture` when version N was
//! current (run it with `OFFTRACE_REGENERATE_FIXTURE=1 cargo test -p offtrace-format --test
//! fixture -- --ignored` only when creating a new version's fixture; it writes the current
//! version's file and never rewrites an old one).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use offtrace_format::*;

const V1_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v1.offtrace");
const V2_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v2.offtrace");

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
        n(
            t + 1,
            UserData::OffloadBuffer {
                user_object: 0x10,
                host_object: 0x20,
                element_type: StrId(5),
                element_size: 4,
                dim: 2,
                range: [16, 32, 1],
            },
        ),
        n(t + 2, UserData::Association { user_object: 0x10, mem_object: 0x30 }),
        n(t + 3, UserData::Accessor { buffer: 0x10, accessor: 0x40, target: 2014, mode: 1024 }),
        n(t + 4, UserData::Pointer(0x7ffd_0000_0010)),
        n(t + 5, UserData::None),
        Record::Object { id: ObjectId(50), value_type: ValueType::Floating, bytes: 1.5f64.to_le_bytes().to_vec() },
        Record::Object { id: ObjectId(51), value_type: ValueType::Boolean, bytes: vec![1] },
        Record::Object { id: ObjectId(52), value_type: ValueType::Binary, bytes: vec![0, 255, 7] },
        Record::Object {
            id: ObjectId(53),
            value_type: ValueType::SignedInteger,
            bytes: (-5i64).to_le_bytes().to_vec(),
        },
        Record::Info { key: "unicode".into(), value: "µs → ✓".into() },
        Record::Drops { tid: 77, count: 3 },
    ]);
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops: 3 });
    records
}

/// What today's writer makes of the v1 fixture's records (a version 2 file: only the header's
/// version and crc differ from the v1 fixture, since version 2 only added a tag).
fn v1_records_written_now() -> Vec<u8> {
    write_trace(&tsc_header(), &v1_fixture_records(), 1024, 50)
}

/// The records of the v2 fixture: the v1 fixture's records, then kernel dispatches covering
/// every memory type, implicit and explicit allocations, none at all, and extreme values,
/// including one inside a ur.call of the synthetic workload's thread.
fn v2_fixture_records() -> Vec<Record> {
    let mut records = v1_fixture_records();
    let end = records.pop().expect("the v1 records end with End");
    let t = START_TICKS + 20_000_000;
    let alloc = |base, size, arg_index, memory_type| KernelAllocation { base, size, arg_index, memory_type };
    records.extend([
        Record::String { id: StrId(60), text: "_ZTS10vector_add".into() },
        Record::KernelDispatch(KernelDispatch {
            tid: 4242,
            ts: t,
            correlation: 17,
            ur_instance: 321,
            kernel: StrId(60),
            queue: 0x5555_0000_2000,
            kernel_handle: 0x5555_0000_3000,
            work_dim: 1,
            global_size: [1 << 20, 1, 1],
            local_size: [256, 1, 1],
            allocations: vec![
                alloc(0xff00_0000_0000_0000, 4 << 20, 0, MemoryType::Device),
                alloc(0xff00_0000_0040_0000, 4 << 20, 1, MemoryType::Shared),
                alloc(0x7f12_3456_0000, 4096, 2, MemoryType::Host),
                alloc(0xff00_0000_1000_0000, 65536, -1, MemoryType::Device),
                alloc(0x1000, 1, 3, MemoryType::Unknown),
            ],
        }),
        Record::KernelDispatch(KernelDispatch {
            tid: 4251,
            ts: t + 1,
            kernel: StrId(60),
            work_dim: 3,
            global_size: [u64::MAX, 2, 3],
            local_size: [0, 0, 0],
            ..KernelDispatch::default()
        }),
        Record::KernelDispatch(KernelDispatch {
            tid: u32::MAX,
            ts: u64::MAX,
            correlation: u64::MAX,
            ur_instance: u64::MAX,
            kernel: StrId(u32::MAX),
            queue: u64::MAX,
            kernel_handle: u64::MAX,
            work_dim: u32::MAX,
            global_size: [u64::MAX; 3],
            local_size: [u64::MAX; 3],
            allocations: vec![
                alloc(u64::MAX, u64::MAX, i32::MIN, MemoryType::Shared),
                alloc(0, 0, i32::MAX, MemoryType::Host),
            ],
        }),
    ]);
    let Record::End { drops, .. } = end else { unreachable!("checked above") };
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops });
    records
}

fn v2_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v2_fixture_records(), 1024, 50)
}

#[test]
fn v1_fixture_reads_forever() {
    let mut r = TraceReader::open(V1_FIXTURE).expect("the v1 fixture opens");
    assert_eq!(r.header().version, 1);
    assert_eq!(*r.header(), TraceHeader { version: 1, ..tsc_header() });
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

#[test]
fn v2_fixture_reads_forever() {
    let mut r = TraceReader::open(V2_FIXTURE).expect("the v2 fixture opens");
    assert_eq!(r.header().version, 2);
    assert_eq!(*r.header(), tsc_header());
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v2 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v2_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
    assert_eq!(read.iter().filter(|r| matches!(r, Record::KernelDispatch(_))).count(), 3);
}

/// Today's writer still produces the v2 layout. If this fails on purpose, bump
/// `FORMAT_VERSION`, keep `v2.offtrace` and its reader path, and add a v3 fixture.
/// (Compared after decompression, so a different LZ4 compressor version does not matter.)
#[test]
fn writer_still_writes_v2() {
    let fixture = std::fs::read(V2_FIXTURE).expect("fixture");
    assert_eq!(framing(&v2_fixture_bytes()), framing(&fixture));
}

/// Version 2 only added a tag: the records of the v1 fixture still encode byte for byte as in
/// version 1, and only the header's version (and crc) differ.
#[test]
fn v1_records_still_encode_as_in_v1() {
    let fixture = std::fs::read(V1_FIXTURE).expect("fixture");
    let (now_header, now_chunks, now_end) = framing(&v1_records_written_now());
    let (v1_header, v1_chunks, v1_end) = framing(&fixture);
    assert_eq!(now_chunks, v1_chunks);
    assert_eq!(now_end, v1_end);
    assert_eq!(&now_header[..8], &v1_header[..8]);
    assert_eq!((now_header[8], v1_header[8]), (2, 1));
    assert_eq!(&now_header[9..60], &v1_header[9..60]);
}

#[test]
#[ignore = "writes tests/fixtures/v<FORMAT_VERSION>.offtrace; only for creating a new version's fixture"]
fn regenerate_fixture() {
    if std::env::var_os("OFFTRACE_REGENERATE_FIXTURE").is_some() {
        assert_eq!(FORMAT_VERSION, 2, "add v{FORMAT_VERSION}_fixture_records first; never rewrite an old fixture");
        if std::path::Path::new(V2_FIXTURE).exists() {
            return;
        }
        std::fs::write(V2_FIXTURE, v2_fixture_bytes()).expect("write fixture");
    }
}
