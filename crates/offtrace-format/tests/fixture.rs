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
const V3_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v3.offtrace");
const V4_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v4.offtrace");
const V5_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v5.offtrace");
const V6_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v6.offtrace");

/// The records of the v1 fixture: the synthetic SYCL workload plus every other variant and
/// user-data kind, ending with an explicit End.
fn v1_fixture_records() -> Vec<Record> {
    let mut records = synthetic_sycl_trace(40, 2024);
    let n = |ts: u64, user_data| {
        Record::from(Notification {
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
        Record::from(KernelDispatch {
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
        Record::from(KernelDispatch {
            tid: 4251,
            ts: t + 1,
            kernel: StrId(60),
            work_dim: 3,
            global_size: [u64::MAX, 2, 3],
            local_size: [0, 0, 0],
            ..KernelDispatch::default()
        }),
        Record::from(KernelDispatch {
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
    assert_eq!(*r.header(), TraceHeader { version: 2, ..tsc_header() });
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v2 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v2_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
    assert_eq!(read.iter().filter(|r| matches!(r, Record::KernelDispatch(_))).count(), 3);
}

/// Version 3 only added tags: the records of the v2 fixture still encode byte for byte as in
/// version 2; only the header's version (and crc) differ.
#[test]
fn v2_records_still_encode_as_in_v2() {
    let fixture = std::fs::read(V2_FIXTURE).expect("fixture");
    let (now_header, now_chunks, now_end) = framing(&v2_fixture_bytes());
    let (v2_header, v2_chunks, v2_end) = framing(&fixture);
    assert_eq!(now_chunks, v2_chunks);
    assert_eq!(now_end, v2_end);
    assert_eq!((now_header[8], v2_header[8]), (FORMAT_VERSION as u8, 2));
    assert_eq!(&now_header[9..60], &v2_header[9..60]);
}

/// The records of the v3 fixture: the v2 fixture's records (the raw layer), then typed records
/// of every kind: definitions of kinds (one made up), operations, devices, queues, counters;
/// API calls of the four API kinds (same arguments, argument deltas, results, external ids);
/// device activity at launch and at completion (kernels with allocations, copies with
/// directions, fills, barriers); memory, code objects, task graph, waits, markers, counter
/// samples and a generic record of a made-up kind; extreme values.
fn v3_fixture_records() -> Vec<Record> {
    let mut records = v2_fixture_records();
    let end = records.pop().expect("the v2 records end with End");
    let t = START_TICKS + 30_000_000;
    let api = |kind, op, tid, start: u64, correlation, args: &[u64], result| {
        Record::ApiCall(ApiCall {
            kind,
            op,
            tid,
            start,
            end: start + 700,
            correlation,
            external: 0,
            args: ApiArgs::from_slice(args),
            result,
        })
    };
    let kernel = Activity {
        kind: 3,
        op: 0,
        phase: phase::NONE,
        tid: 4242,
        ts: t + 450,
        correlation: 1001,
        queue: 0x5555_0000_2000,
        device: 0x5555_0000_0100,
        name: StrId(71),
        kernel: 0x5555_0000_3000,
        work_dim: 1,
        global_size: [1024, 1, 1],
        local_size: [64, 1, 1],
        allocations: vec![KernelAllocation {
            base: 0xff00_0000_0000_0000,
            size: 4096,
            arg_index: 0,
            memory_type: MemoryType::Device,
        }],
        ..Activity::default()
    };
    let copy = Activity {
        kind: 4,
        op: 0,
        tid: 4242,
        ts: t + 1450,
        correlation: 1002,
        queue: 0x5555_0000_2000,
        device: 0x5555_0000_0100,
        bytes: 4096,
        direction: CopyDirection::DeviceToHost,
        src_type: MemoryType::Device,
        dst_type: MemoryType::Host,
        ..Activity::default()
    };
    records.extend([
        Record::String { id: StrId(70), text: "UR_API".into() },
        Record::String { id: StrId(71), text: "vector_add<float>(float*, float const*)".into() },
        Record::String { id: StrId(72), text: "urEnqueueKernelLaunch".into() },
        Record::String { id: StrId(73), text: "hQueue".into() },
        Record::String { id: StrId(74), text: "ur_queue_handle_t".into() },
        Record::String { id: StrId(75), text: "MADE_UP_API".into() },
        Record::String { id: StrId(76), text: "Intel(R) Xeon(R) CPU".into() },
        Record::String { id: StrId(77), text: "power".into() },
        Record::String { id: StrId(78), text: "W".into() },
        Record::KindDef { kind: 1, name: StrId(70) },
        Record::KindDef { kind: 99, name: StrId(75) },
        Record::OperationDef(OperationDef {
            kind: 1,
            op: 19,
            name: StrId(72),
            args: vec![ArgDef { name: StrId(73), type_name: StrId(74), size: 8, format: 3 }],
        }),
        Record::OperationDef(OperationDef { kind: 99, op: 0, name: StrId(75), args: vec![] }),
        Record::Device(DeviceRecord {
            op: 0,
            handle: 0x5555_0000_0100,
            parent: 0x5555_0000_0200,
            name: StrId(76),
            device_type: 1,
        }),
        Record::Device(DeviceRecord {
            op: 1,
            handle: 0x5555_0000_0200,
            parent: 0x5555_0000_0100,
            name: StrId(0),
            device_type: 0,
        }),
        Record::Queue(QueueRecord {
            op: 0,
            tid: 4242,
            ts: t,
            correlation: 1000,
            queue: 0x5555_0000_2000,
            device: 0x5555_0000_0100,
            context: 0x5555_0000_0200,
            flags: 1,
        }),
        Record::Activity(kernel.clone()),
        api(
            1,
            19,
            4242,
            t + 400,
            1001,
            &[0x5555_0000_2000, 0x5555_0000_3000, 1, 0, 0x7ffd_0000_1000, 0, 0, 0, 0x7ffd_0000_1040],
            Some(0),
        ),
        Record::Activity(copy.clone()),
        api(
            1,
            19,
            4242,
            t + 1400,
            1003,
            &[0x5555_0000_2000, 0x5555_0000_3000, 1, 0, 0x7ffd_0000_1000, 0, 0, 0, 0x7ffd_0000_1040],
            Some(0),
        ),
        api(
            1,
            19,
            4242,
            t + 2400,
            1004,
            &[0x5555_0000_2000, 0x5555_0000_3008, 1, 0, 0x7ffd_0000_1000, 0, 0, 0, 0x7ffd_0000_1080],
            Some(-5),
        ),
        api(12, 5, 4243, t + 2500, 2001, &[0x1, 0x2, 3], Some(-36)),
        api(13, 22, 4243, t + 2600, 2002, &[], None),
        api(14, 307, 4243, t + 2700, 2003, &[u64::MAX; MAX_API_ARGS], Some(i64::MIN)),
        Record::ApiCall(ApiCall {
            kind: 1,
            op: 19,
            tid: 4242,
            start: t + 3000,
            end: t + 3000,
            correlation: 1005,
            external: 77,
            ..ApiCall::default()
        }),
        Record::Activity(Activity {
            phase: phase::COMPLETE,
            ts: t + 5000,
            device_start: 5_000_100_000,
            device_end: 5_000_200_000,
            ..kernel
        }),
        Record::Activity(Activity {
            phase: phase::COMPLETE,
            ts: t + 5001,
            device_start: 5_000_300_000,
            device_end: 5_000_300_500,
            ..copy
        }),
        Record::Activity(Activity {
            kind: 5,
            op: 0,
            tid: 4243,
            ts: t + 5100,
            correlation: 2004,
            queue: 0x6000,
            bytes: 256,
            ..Activity::default()
        }),
        Record::Activity(Activity {
            kind: 8,
            op: 1,
            tid: 4243,
            ts: t + 5200,
            correlation: 2005,
            queue: 0x6000,
            ..Activity::default()
        }),
        Record::Memory(MemoryRecord {
            op: 0,
            tid: 4242,
            ts: t + 6000,
            correlation: 1006,
            ptr: 0xff00_0000_0000_0000,
            size: 4096,
            memory_type: MemoryType::Device,
            device: 0x5555_0000_0100,
        }),
        Record::Memory(MemoryRecord {
            op: 1,
            tid: 4242,
            ts: t + 6100,
            correlation: 1007,
            ptr: 0xff00_0000_0000_0000,
            ..MemoryRecord::default()
        }),
        Record::CodeObject(CodeObjectRecord {
            op: 2,
            phase: phase::LOAD,
            tid: 4242,
            ts: t + 6200,
            correlation: 1008,
            handle: 0x5555_0000_3000,
            program: 0x5555_0000_4000,
            name: StrId(71),
            size: 0,
        }),
        Record::CodeObject(CodeObjectRecord {
            op: 2,
            phase: phase::UNLOAD,
            tid: 4242,
            ts: t + 6300,
            correlation: 1009,
            handle: 0x5555_0000_3000,
            ..CodeObjectRecord::default()
        }),
        Record::TaskGraph(TaskGraphRecord {
            op: 0,
            phase: phase::NONE,
            tid: 4242,
            ts: t + 6400,
            correlation: 1010,
            node: 11,
            name: StrId(71),
            queue: 0x5555_0000_2000,
            ..TaskGraphRecord::default()
        }),
        Record::TaskGraph(TaskGraphRecord {
            op: 1,
            phase: phase::NONE,
            tid: 4242,
            ts: t + 6401,
            correlation: 1010,
            source: 11,
            target: 12,
            ..TaskGraphRecord::default()
        }),
        Record::TaskGraph(TaskGraphRecord {
            op: 3,
            phase: phase::NONE,
            tid: 4242,
            ts: t + 6402,
            correlation: 1010,
            node: 11,
            event: 0x5555_0000_5000,
            queue: 0x5555_0000_2000,
            ..TaskGraphRecord::default()
        }),
        Record::Sync(SyncRecord {
            op: 0,
            phase: phase::ENTER,
            tid: 4242,
            ts: t + 6500,
            correlation: 1011,
            object: 11,
            event_count: 1,
        }),
        Record::Sync(SyncRecord {
            op: 0,
            phase: phase::EXIT,
            tid: 4242,
            ts: t + 6600,
            correlation: 1011,
            object: 11,
            event_count: 1,
        }),
        Record::Marker(MarkerRecord {
            op: 1,
            phase: phase::ENTER,
            tid: 4242,
            ts: t + 6700,
            correlation: 1012,
            message: StrId(77),
            range_id: 1,
        }),
        Record::Marker(MarkerRecord {
            op: 1,
            phase: phase::EXIT,
            tid: 4242,
            ts: t + 6800,
            correlation: 1012,
            message: StrId(77),
            range_id: 1,
        }),
        Record::CounterDef(CounterDef {
            counter: 1,
            device: 0x5555_0000_0100,
            name: StrId(77),
            unit: StrId(78),
            value_type: 2,
        }),
        Record::CounterSample(CounterSample {
            counter: 1,
            tid: 4244,
            ts: t + 7000,
            value: 42.5f64.to_bits(),
            correlation: 0,
        }),
        Record::Generic(GenericRecord {
            kind: 99,
            op: 0,
            phase: phase::NONE,
            tid: 4244,
            ts: t + 7100,
            correlation: 3001,
            values: ApiArgs::from_slice(&[1, 2, u64::MAX]),
        }),
        Record::Activity(Activity {
            kind: u32::MAX,
            op: u32::MAX,
            phase: phase::COMPLETE,
            tid: u32::MAX,
            ts: u64::MAX,
            correlation: u64::MAX,
            queue: u64::MAX,
            device: u64::MAX,
            name: StrId(u32::MAX),
            kernel: u64::MAX,
            work_dim: u32::MAX,
            global_size: [u64::MAX; 3],
            local_size: [u64::MAX; 3],
            bytes: u64::MAX,
            direction: CopyDirection::HostToHost,
            src_type: MemoryType::Shared,
            dst_type: MemoryType::Shared,
            device_start: u64::MAX,
            device_end: 0,
            allocations: vec![],
        }),
    ]);
    let Record::End { drops, .. } = end else { unreachable!("checked above") };
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops });
    records
}

fn v3_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v3_fixture_records(), 1024, 50)
}

#[test]
fn v3_fixture_reads_forever() {
    let mut r = TraceReader::open(V3_FIXTURE).expect("the v3 fixture opens");
    assert_eq!(r.header().version, 3);
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v3 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v3_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
    assert_eq!(read.iter().filter(|r| matches!(r, Record::ApiCall(_))).count(), 7);
    assert_eq!(read.iter().filter(|r| matches!(r, Record::Activity(_))).count(), 7);
}

/// Version 4 only added a flag to `CounterSample` and version 5 changed no record's bytes;
/// version 6 writes an activity's repeated kernel, allocations and device start as flags and
/// differences: the v3 fixture's records written now read back as the fixture's, and each chunk
/// is byte for byte version 3's or smaller.
#[test]
fn v3_records_written_now_read_as_in_v3() {
    written_now_reads_as_the_fixture(V3_FIXTURE, &v3_fixture_bytes(), 3);
}

/// The fixture `path` (version `version`) against its records written by today's writer (`now`).
fn written_now_reads_as_the_fixture(path: &str, now: &[u8], version: u8) {
    let fixture = std::fs::read(path).expect("fixture");
    let (now_header, now_chunks, now_end) = framing(now);
    let (old_header, old_chunks, old_end) = framing(&fixture);
    assert_eq!((now_header[8], old_header[8]), (FORMAT_VERSION as u8, version));
    assert_eq!(&now_header[9..60], &old_header[9..60]);
    assert_eq!(now_end, old_end, "as many chunks and records");
    assert_eq!(now_chunks.len(), old_chunks.len());
    let mut activity_chunks = 0;
    for (now, old) in now_chunks.iter().zip(&old_chunks) {
        if now != old {
            assert!(now.len() < old.len(), "a chunk that changed is smaller");
            activity_chunks += 1;
        }
    }
    assert!(activity_chunks > 0, "the fixture has activities");
    let (read_now, err, _) = read_all(now);
    assert!(err.is_none(), "{err:?}");
    let (read_old, err, _) = read_all(&fixture);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(read_now, read_old);
}

/// The records of the v4 fixture: the v3 fixture's records, then values per command (counter
/// samples with the correlation id of their command, on two threads, a correlation going down
/// as well as up, the largest id) between samples of a time series (no correlation).
fn v4_fixture_records() -> Vec<Record> {
    let mut records = v3_fixture_records();
    let end = records.pop().expect("the v3 records end with End");
    let t = START_TICKS + 40_000_000;
    let sample = |counter, tid, ts, value: u64, correlation| {
        Record::CounterSample(CounterSample { counter, tid, ts, value, correlation })
    };
    records.extend([
        Record::CounterDef(CounterDef { counter: 2, device: 0, name: StrId(77), unit: StrId(78), value_type: 0 }),
        sample(2, 4244, t, 1_000_000, 3001),
        sample(1, 4244, t + 10, 7.25f64.to_bits(), 0),
        sample(2, 4245, t + 20, 0, 2999),
        sample(2, 4244, t + 30, u64::MAX, 3002),
        sample(2, 4245, t + 40, 5, 17),
        sample(2, 4245, t + 50, 6, u64::MAX),
        sample(1, 4245, t + 60, 8.5f64.to_bits(), 0),
    ]);
    let Record::End { drops, .. } = end else { unreachable!("checked above") };
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops });
    records
}

fn v4_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v4_fixture_records(), 1024, 50)
}

#[test]
fn v4_fixture_reads_forever() {
    let mut r = TraceReader::open(V4_FIXTURE).expect("the v4 fixture opens");
    assert_eq!(r.header().version, 4);
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v4 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v4_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
    let correlations: Vec<u64> = read
        .iter()
        .filter_map(|r| match r {
            Record::CounterSample(s) => Some(s.correlation),
            _ => None,
        })
        .collect();
    assert_eq!(correlations, [0, 3001, 0, 2999, 3002, 17, u64::MAX, 0]);
}

/// Version 5 changed no bytes of any record; version 6 those of activities (see
/// [`v3_records_written_now_read_as_in_v3`]).
#[test]
fn v4_records_written_now_read_as_in_v4() {
    written_now_reads_as_the_fixture(V4_FIXTURE, &v4_fixture_bytes(), 4);
}

/// The records of the v5 fixture: the v4 fixture's records, then every definition among them
/// again (as the recorder repeats them at the end of a recording), then `End`.
fn v5_fixture_records() -> Vec<Record> {
    let mut records = v4_fixture_records();
    let Some(Record::End { drops, .. }) = records.pop() else { unreachable!("the v4 records end with End") };
    let repeat: Vec<Record> = records.iter().filter(|r| DefinitionKey::of(r).is_some()).cloned().collect();
    assert!(repeat.len() > 20, "the fixture defines strings, kinds, operations, threads, devices, counters");
    records.extend(repeat);
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops });
    records
}

fn v5_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v5_fixture_records(), 1024, 50)
}

#[test]
fn v5_fixture_reads_forever() {
    let mut r = TraceReader::open(V5_FIXTURE).expect("the v5 fixture opens");
    assert_eq!(r.header().version, 5);
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v5 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v5_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected, "the strict reader returns the records as the file has them, repeats too");
}

/// The tool's reader takes the v5 fixture's repeated definitions as nothing new: it returns
/// the v4 fixture's records, and counts the repeats.
#[test]
fn the_tools_reader_takes_each_repeated_definition_once() {
    let mut trace = TraceRecords::open(V5_FIXTURE, ReadOptions { decode_threads: 0, ..ReadOptions::default() })
        .expect("the v5 fixture opens");
    let mut read = Vec::new();
    trace
        .for_each(
            |r| {
                read.push(r.clone());
                Ok::<_, ()>(())
            },
            |w| panic!("no warning expected: {w}"),
        )
        .unwrap();
    let repeats = v5_fixture_records().len() - v4_fixture_records().len();
    let mut expected = expected_after_read(&v4_fixture_records());
    expected.truncate(expected.len() - 2); // the End appended, and the v4 records' own (other counts)
    let end = read.pop();
    assert!(matches!(end, Some(Record::End { .. })), "{end:?}");
    assert_eq!(read, expected);
    assert!(trace.outcome().finished_cleanly());
    assert_eq!(trace.outcome().repeated_definitions, repeats as u64);
}

/// The v5 fixture's records written now read as the fixture's (version 6 changed activities).
#[test]
fn v5_records_written_now_read_as_in_v5() {
    written_now_reads_as_the_fixture(V5_FIXTURE, &v5_fixture_bytes(), 5);
}

/// The records of the v6 fixture: the v5 fixture's records, then kernels launched again and
/// again from two threads (the same kernel and allocations, another kernel between, another
/// geometry, the same allocations after a kernel without any) and completed on a third, over
/// several chunks (each starts without the previous kernel, allocations and device end), then
/// `End`.
fn v6_fixture_records() -> Vec<Record> {
    let mut records = v5_fixture_records();
    let Some(Record::End { drops, .. }) = records.pop() else { unreachable!("the v5 records end with End") };
    let t = START_TICKS + 50_000_000;
    let allocations = vec![
        KernelAllocation { base: 0x7f3a_0000_1000, size: 256, arg_index: 0, memory_type: MemoryType::Device },
        KernelAllocation { base: 0x7f3a_0000_9000, size: 4096, arg_index: 2, memory_type: MemoryType::Shared },
    ];
    let mut device_end = 1_700_000_000_000_000u64;
    for i in 0..120u64 {
        let tid = 5000 + (i % 2) as u32;
        let kernel = if i % 7 == 3 { 0x5555_0000_2000 } else { 0x5555_0000_1000 };
        let global = if i % 11 == 5 { [128, 2, 1] } else { [64, 1, 1] };
        let launch = Activity {
            kind: 2,
            op: 0,
            tid,
            ts: t + i * 1_000,
            correlation: 9_000 + i,
            queue: 0x6000,
            device: 0xd1,
            name: StrId(3),
            kernel,
            work_dim: if global[1] == 1 { 1 } else { 2 },
            global_size: global,
            local_size: [0; 3],
            allocations: if i % 13 == 6 { Vec::new() } else { allocations.clone() },
            ..Activity::default()
        };
        // Device times out of order now and then (an out-of-order queue).
        let start = if i % 9 == 4 { device_end - 5_000 } else { device_end + 700 };
        device_end = start + 3_000 + i;
        let complete = Activity {
            tid: 5002,
            ts: t + i * 1_000 + 600,
            phase: phase::COMPLETE,
            device_start: start,
            device_end,
            allocations: Vec::new(),
            ..launch.clone()
        };
        records.extend([Record::Activity(launch), Record::Activity(complete)]);
    }
    let count = records.len() as u64;
    records.push(Record::End { records: count, drops });
    records
}

fn v6_fixture_bytes() -> Vec<u8> {
    write_trace(&tsc_header(), &v6_fixture_records(), 1024, 50)
}

#[test]
fn v6_fixture_reads_forever() {
    let mut r = TraceReader::open(V6_FIXTURE).expect("the v6 fixture opens");
    assert_eq!(r.header().version, 6);
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("the v6 fixture reads");
    assert!(r.finished_cleanly());
    let mut expected = expected_after_read(&v6_fixture_records());
    expected.pop(); // the fixture has its own End
    assert_eq!(read, expected);
}

/// Today's writer still produces the v6 layout. If this fails on purpose, bump
/// `FORMAT_VERSION`, keep `v6.offtrace` and its reader path, and add a v7 fixture.
/// (Compared after decompression, so a different LZ4 compressor version does not matter.)
#[test]
fn writer_still_writes_v6() {
    let fixture = std::fs::read(V6_FIXTURE).expect("fixture");
    assert_eq!(framing(&v6_fixture_bytes()), framing(&fixture));
}

/// A reader of version 5 refuses the activity flags of version 6: a v5 file holding a v6
/// activity is an error, not a misread.
#[test]
fn repeated_kernel_flags_are_not_in_v5() {
    let mut bytes = v6_fixture_bytes();
    bytes[8] = 5;
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    let r = TraceReader::new(&bytes[..]).expect("header");
    let err = r.into_iter().find_map(Result::err).expect("a v6 activity in a v5 file fails");
    assert!(err.to_string().contains("flags"), "{err}");
}

/// A reader of version 3 refuses a sample's correlation flag: a v3 file holding a v4 sample is
/// an error, not a misread.
#[test]
fn sample_correlation_is_not_in_v3() {
    let mut bytes = v4_fixture_bytes();
    bytes[8] = 3;
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    let r = TraceReader::new(&bytes[..]).expect("header");
    let err = r.into_iter().find_map(Result::err).expect("a v4 sample in a v3 file fails");
    assert!(err.to_string().contains("flags"), "{err}");
}

/// A reader of version 2 refuses typed records: a v2 file holding a v3 tag is an error, not a
/// misread.
#[test]
fn typed_tags_are_not_in_v2() {
    let mut bytes = v3_fixture_bytes();
    bytes[8] = 2;
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    let r = TraceReader::new(&bytes[..]).expect("header");
    let err = r.into_iter().find_map(Result::err).expect("a v3 tag in a v2 file fails");
    assert!(err.to_string().contains("version"), "{err}");
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
    assert_eq!((now_header[8], v1_header[8]), (FORMAT_VERSION as u8, 1));
    assert_eq!(&now_header[9..60], &v1_header[9..60]);
}

#[test]
#[ignore = "writes tests/fixtures/v<FORMAT_VERSION>.offtrace; only for creating a new version's fixture"]
fn regenerate_fixture() {
    if std::env::var_os("OFFTRACE_REGENERATE_FIXTURE").is_some() {
        assert_eq!(FORMAT_VERSION, 6, "add v{FORMAT_VERSION}_fixture_records first; never rewrite an old fixture");
        if std::path::Path::new(V6_FIXTURE).exists() {
            return;
        }
        std::fs::write(V6_FIXTURE, v6_fixture_bytes()).expect("write fixture");
    }
}
