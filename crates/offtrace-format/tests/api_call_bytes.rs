//! The bytes of `ApiCall` and `Activity` records are fixed by the format (`ApiCall` since version
//! 3, `Activity` since version 6), whichever way the writer is given them: an owned record through
//! `write` (or `write_api_call`), or a borrowed [`ApiCallRef`] / [`ActivityRef`] (the recorder's
//! path). The expected `ApiCall` bytes were written by the encoder before the borrowed paths
//! existed (commit f54a3c2), so a faster encoder cannot change the file; the version 3 activity
//! bytes are still read as the same activities.

use offtrace_format::{
    Activity, ActivityRef, ApiArgs, ApiCall, ApiCallRef, CopyDirection, KernelAllocation, MemoryType, Record, StrId,
    TaskGraphRecord, TraceHeader, TraceWriter, phase,
};

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

fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The expected file as written today: versions 4 to 6 changed no `ApiCall` byte, only the
/// header's version (and so its crc).
fn in_today_header(v3_hex: &str) -> String {
    let mut bytes: Vec<u8> =
        (0..v3_hex.len()).step_by(2).map(|i| u8::from_str_radix(&v3_hex[i..i + 2], 16).expect("hex")).collect();
    assert_eq!(bytes[8], 3, "the expected bytes are version 3's");
    bytes[8] = offtrace_format::FORMAT_VERSION.to_le_bytes()[0];
    let crc = crc32fast::hash(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    decompressed(&bytes)
}

/// The file header, then each chunk's magic, raw length, record count and records
/// (decompressed), in hex.
fn decompressed(file: &[u8]) -> String {
    let mut text = hex(&file[..64]);
    let mut at = 64;
    while at + 24 <= file.len() {
        let word = |i: usize| u32::from_le_bytes(file[at + i..at + i + 4].try_into().expect("4 bytes")) as usize;
        let (flags, stored, raw) = (file[at + 4], word(8), word(12));
        let payload = &file[at + 24..at + 24 + stored];
        let records = if flags & 1 != 0 {
            let mut out = vec![0; raw];
            assert_eq!(lz4_flex::block::decompress_into(payload, &mut out).expect("an LZ4 block"), raw);
            out
        } else {
            payload.to_vec()
        };
        text += &format!(" {} raw {raw} records {} {}", hex(&file[at..at + 4]), word(16), hex(&records));
        at += 24 + stored;
    }
    assert_eq!(at, file.len(), "whole chunks");
    text
}

#[test]
fn every_way_of_writing_an_api_call_gives_the_format_3_bytes() {
    // The whole file: the header (fixed for `monotonic()`) and one chunk.
    let expected = in_today_header(include_str!("fixtures/api_calls_v3.hex").trim());
    for how in 0..3 {
        assert_eq!(decompressed(&write(how)), expected, "way {how}");
    }
}

/// Activities that exercise every part of the encoding: a kernel with allocation properties, its
/// completion, a copy, a fill, a barrier, another thread, the same and another queue.
fn activities() -> Vec<Activity> {
    let kernel = Activity {
        kind: 2,
        op: 0,
        tid: 100,
        ts: 5_000,
        correlation: 11,
        queue: 0x50,
        device: 0xd1,
        name: StrId(3),
        kernel: 0x7000,
        work_dim: 1,
        global_size: [64, 1, 1],
        local_size: [0; 3],
        allocations: vec![
            KernelAllocation { base: 0x9000, size: 256, arg_index: 0, memory_type: MemoryType::Device },
            KernelAllocation { base: 0xa000, size: 4096, arg_index: -1, memory_type: MemoryType::Shared },
        ],
        ..Activity::default()
    };
    let complete = Activity {
        phase: phase::COMPLETE,
        ts: 9_000,
        device_start: 1_000_000_123,
        device_end: 1_000_004_000,
        allocations: Vec::new(),
        ..kernel.clone()
    };
    let copy = Activity {
        kind: 3,
        op: 1,
        tid: 100,
        ts: 9_500,
        correlation: 12,
        queue: 0x50,
        device: 0xd1,
        bytes: 1 << 20,
        direction: CopyDirection::HostToDevice,
        src_type: MemoryType::Host,
        dst_type: MemoryType::Device,
        ..Activity::default()
    };
    let fill = Activity {
        kind: 4,
        tid: 200,
        ts: 9_700,
        correlation: 13,
        queue: 0x60,
        device: 0xd1,
        bytes: 4096,
        device_start: 2_000_000_000,
        device_end: 2_000_000_100,
        phase: phase::COMPLETE,
        ..Activity::default()
    };
    let barrier = Activity {
        kind: 5,
        op: 3,
        tid: 100,
        ts: 9_900,
        correlation: 14,
        queue: 0x50,
        device: 0xd1,
        ..Activity::default()
    };
    vec![kernel, complete, copy, fill, barrier]
}

/// [`activities`], then the kernel launched again with the same allocations, and its completion
/// (what format 6 writes as flags: the same kernel, the same allocations).
fn activities_v6() -> Vec<Activity> {
    let mut all = activities();
    let launch = Activity { ts: 10_000, correlation: 15, ..all[0].clone() };
    let complete = Activity {
        ts: 10_400,
        device_start: 1_000_009_000,
        device_end: 1_000_009_800,
        phase: phase::COMPLETE,
        allocations: Vec::new(),
        ..launch.clone()
    };
    all.extend([launch, complete]);
    all
}

fn write_activities(borrowed: bool) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).expect("header");
    for a in activities_v6() {
        let r: ActivityRef<'_> = a.borrowed();
        assert_eq!(r.to_activity(), a);
        if borrowed {
            w.write_activity_ref(&r).expect("write");
        } else {
            w.write(&Record::Activity(a.clone())).expect("write");
        }
    }
    w.flush_chunk().expect("flush");
    w.get_ref().clone()
}

/// Writes `tests/fixtures/activities_v6.hex` once (run with `OFFTRACE_REGENERATE_FIXTURE=1` when
/// the file is empty); never rewrites it.
#[test]
#[ignore = "writes tests/fixtures/activities_v6.hex; only for creating it"]
fn regenerate_activities_v6() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/activities_v6.hex");
    if std::env::var_os("OFFTRACE_REGENERATE_FIXTURE").is_some() && std::fs::read(path).map_or(true, |b| b.is_empty()) {
        std::fs::write(path, hex(&write_activities(false)) + "\n").expect("write");
    }
}

#[test]
fn both_ways_of_writing_an_activity_give_the_format_6_bytes() {
    let expected = decompressed(&from_hex(include_str!("fixtures/activities_v6.hex").trim()));
    assert_eq!(decompressed(&write_activities(false)), expected, "owned");
    assert_eq!(decompressed(&write_activities(true)), expected, "borrowed");
}

/// The version 3 bytes of [`activities`] (written before version 6 changed how an activity
/// repeats its kernel, its allocations and its device start) read as those activities.
#[test]
fn the_format_3_activity_bytes_still_read_as_the_same_activities() {
    let v3 = from_hex(include_str!("fixtures/activities_v3.hex").trim());
    assert_eq!(v3[8], 3);
    let read: Vec<Record> = offtrace_format::TraceReader::new(&v3[..])
        .expect("header")
        // The bytes are one chunk without the end marker: the records, then `Truncated`.
        .map_while(Result::ok)
        .collect();
    assert_eq!(read, activities().into_iter().map(Record::Activity).collect::<Vec<_>>());
}

/// Format 6 writes the repeated launch and its completion with fewer bytes than format 3 did.
#[test]
fn a_repeated_kernel_costs_fewer_bytes_than_its_first_launch() {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).expect("header");
    let mut sizes = Vec::new();
    for a in activities_v6() {
        let before = w.open_chunk_bytes();
        w.write(&Record::Activity(a)).expect("write");
        sizes.push(w.open_chunk_bytes() - before);
    }
    // The second launch (index 5) against the first (0); the second completion (6): tag, two
    // flag bytes, kind, op, ts, correlation, name and the two device-time differences (the first
    // completion, 1, already repeats its launch's kernel and has an absolute device start).
    assert!(sizes[5] + 12 < sizes[0], "{sizes:?}");
    assert!(sizes[6] <= 14 && sizes[6] < sizes[1], "{sizes:?}");
}

/// The recorder's task-graph path (`write_task_graph`, no `Record`) writes the bytes of `write`.
#[test]
fn a_task_graph_record_has_the_same_bytes_by_either_path() {
    let records: Vec<TaskGraphRecord> = (0..40u64)
        .map(|i| TaskGraphRecord {
            op: (i % 4) as u32,
            phase: (i % 3) as u8,
            tid: 100 + (i % 3) as u32,
            ts: 1_000 + i * 37,
            correlation: i / 2,
            node: 0x7f00_0000_0000 + i * 64,
            source: i * 5,
            target: i * 7,
            name: StrId(i as u32 % 5),
            event: if i % 2 == 0 { 0 } else { 0x5555_0000 + i },
            queue: 0x50 + i % 2,
        })
        .collect();
    let write = |fast: bool| {
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).expect("header");
        for r in &records {
            if fast { w.write_task_graph(r) } else { w.write(&Record::TaskGraph(*r)) }.expect("write");
        }
        w.finish().expect("finish")
    };
    assert_eq!(hex(&write(true)), hex(&write(false)));
}
