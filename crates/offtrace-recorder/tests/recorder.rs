//! The recorder end to end: services → rings → writer → file → reader.
//!
//! The recording and the services are process-global, so every test takes `SERIAL` first.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use offtrace_core::*;
use offtrace_format::{Activity, ApiCall, Record, StrId, TraceReader, phase};
use offtrace_recorder::{Config, finish, start_file, subscribe};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(path: &Path) -> Vec<Record> {
    let mut r = TraceReader::open(path).unwrap();
    let records: Vec<Record> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert!(r.finished_cleanly());
    records
}

fn strings(records: &[Record]) -> HashMap<StrId, String> {
    records
        .iter()
        .filter_map(|r| if let Record::String { id, text } = r { Some((*id, text.clone())) } else { None })
        .collect()
}

fn calls(records: &[Record]) -> Vec<&ApiCall> {
    records.iter().filter_map(|r| if let Record::ApiCall(c) = r { Some(c) } else { None }).collect()
}

fn activities(records: &[Record]) -> Vec<&Activity> {
    records.iter().filter_map(|r| if let Record::Activity(a) = r { Some(a) } else { None }).collect()
}

/// One UR call with a kernel dispatch inside it; returns the call's correlation id.
fn launch(queue: u64, i: u64) -> u64 {
    let mut p = ApiCallPayload::new(19, &[queue, 0x3000, 1, i]);
    let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(&p));
    let kd = KernelDispatchPayload {
        queue,
        device: 0x40,
        kernel_name: c"vector_add<float>(float*, float const*)".as_ptr(),
        work_dim: 1,
        global_size: [1024, 1, 1],
        ..Default::default()
    };
    emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
    let corr = t.correlation_id();
    p.result = 0;
    p.has_result = 1;
    emit_exit(t, Payload::UrApi(&p));
    corr
}

/// N threads × M calls: every call and dispatch is in the trace exactly once, in per-thread
/// order, each dispatch with its call's correlation id and its queue; the operation and kind are
/// defined before their first use.
#[test]
fn threads_calls_and_dispatches_arrive_once_in_order_and_linked() {
    let _g = serial();
    const THREADS: u64 = 4;
    const CALLS: u64 = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for i in 0..CALLS {
                    launch(0x1000 + t, i);
                }
            });
        }
    });
    destroy_context(ctx).unwrap();
    let stats = finish().unwrap();
    assert_eq!(stats.drops, 0);
    let records = read(&path);
    let strings = strings(&records);
    let calls = calls(&records);
    let acts = activities(&records);
    assert_eq!(calls.len() as u64, THREADS * CALLS);
    assert_eq!(acts.len() as u64, THREADS * CALLS);
    let by_corr: HashMap<u64, &ApiCall> = calls.iter().map(|c| (c.correlation, *c)).collect();
    assert_eq!(by_corr.len(), calls.len(), "correlation ids are unique");
    let mut last: HashMap<u32, (u64, u64)> = HashMap::new();
    for c in &calls {
        let (corr, i) = last.entry(c.tid).or_insert((0, u64::MAX));
        assert!(c.correlation > *corr, "per-thread order");
        assert_eq!(c.args.as_slice()[3], i.wrapping_add(1), "every call once, in order");
        (*corr, *i) = (c.correlation, c.args.as_slice()[3]);
        assert!(c.start <= c.end);
        assert_eq!(c.result, Some(0));
    }
    for a in &acts {
        let call = by_corr[&a.correlation];
        assert_eq!(a.tid, call.tid);
        assert_eq!(a.queue, call.args.as_slice()[0], "the dispatch's queue is its call's");
        assert!(call.start <= a.ts && a.ts <= call.end, "the dispatch lies inside its call");
        assert_eq!(strings[&a.name], "vector_add<float>(float*, float const*)");
    }
    // Defined once (and again in the last chunk's repeat of every definition), with one id.
    let ids: std::collections::HashSet<StrId> = records
        .iter()
        .filter_map(|r| match r {
            Record::String { id, text } if text == "vector_add<float>(float*, float const*)" => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 1, "a string every thread repeats has one id");
    // Definitions come before their first use.
    let first = |f: &dyn Fn(&Record) -> bool| records.iter().position(f).unwrap();
    let kind_def = first(&|r| matches!(r, Record::KindDef { kind: 1, .. }));
    let op_def = first(&|r| matches!(r, Record::OperationDef(d) if d.kind == 1 && d.op == 19));
    let first_call = first(&|r| matches!(r, Record::ApiCall(_)));
    assert!(kind_def < first_call && op_def < first_call);
    assert!(records.iter().any(|r| matches!(r, Record::Thread { .. })));
}

/// A tiny ring in lossless mode: nothing is dropped.
#[test]
fn lossless_never_drops() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let config = Config::default().with_ring_words(256).with_lossless(true).with_flush_interval(Duration::from_secs(5));
    start_file(config, &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    std::thread::scope(|s| {
        for t in 0..3 {
            s.spawn(move || {
                for i in 0..20_000 {
                    launch(t, i);
                }
            });
        }
    });
    destroy_context(ctx).unwrap();
    let stats = finish().unwrap();
    assert_eq!(stats.drops, 0);
    let records = read(&path);
    assert_eq!(calls(&records).len(), 60_000);
    assert!(!records.iter().any(|r| matches!(r, Record::Drops { .. })));
}

/// Entries of every length through a tiny ring: most laps end inside an entry, which the writer
/// reads in two parts (the ring's end and its start); and through a ring larger than the
/// writer's drain batch, so that a batch ends inside the first part of a wrapped drain. Each
/// call arrives once, in order, whole.
#[test]
fn entries_that_wrap_around_the_ring_end_arrive_whole() {
    for ring_words in [256, 1 << 15] {
        wrap_around(ring_words);
    }
}

fn wrap_around(ring_words: usize) {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let config =
        Config::default().with_ring_words(ring_words).with_lossless(true).with_flush_interval(Duration::from_secs(5));
    start_file(config, &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    const N: u64 = 40_000;
    for i in 0..N {
        let args: Vec<u64> = (0..1 + i % 7).map(|a| i * 8 + a).collect();
        let p = ApiCallPayload::new(19, &args);
        let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(&p));
        emit_exit(t, Payload::UrApi(&p));
    }
    destroy_context(ctx).unwrap();
    assert_eq!(finish().unwrap().drops, 0);
    let records = read(&path);
    let calls = calls(&records);
    assert_eq!(calls.len() as u64, N);
    for (i, c) in (0..N).zip(&calls) {
        let want: Vec<u64> = (0..1 + i % 7).map(|a| i * 8 + a).collect();
        assert_eq!(c.args.as_slice(), &want[..], "call {i}");
    }
}

/// The flush timer closes a chunk only once it holds `min_timed_chunk_bytes`, or once the
/// longest delay passed: a few records wait (and are in the trace at the end); 100 KB of them
/// are on disk at the next tick.
#[test]
fn the_timer_closes_small_chunks_only_after_the_longest_delay() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let header = offtrace_format::FILE_HEADER_LEN as u64;
    let config = Config::default()
        .with_flush_interval(Duration::from_millis(10))
        .with_timed_chunks(64 << 10, Duration::from_secs(20));
    start_file(config, &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let call = |i: u64| {
        let p = ApiCallPayload::new(19, &[i, i * 3, 0x5555_0000_0000 | (i * 7919 % 65_536)]);
        let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(&p));
        emit_exit(t, Payload::UrApi(&p));
    };
    for i in 0..10 {
        call(i);
    }
    std::thread::sleep(Duration::from_millis(300)); // 30 ticks
    assert_eq!(std::fs::metadata(&path).unwrap().len(), header, "a chunk of 10 records waits");
    for i in 10..8_000 {
        call(i);
    }
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&path).unwrap().len() == header {
        assert!(t0.elapsed() < Duration::from_secs(15), "a chunk of 8,000 records is closed at a tick");
        std::thread::sleep(Duration::from_millis(10)); // poll interval: the condition decides
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    assert_eq!(calls(&read(&path)).len(), 8_000);
}

/// A launch's allocation properties, as many as its arguments point into and its implicit
/// allocations: 3 (the small entry), and 30 (the largest), each with its argument index.
#[test]
fn launches_keep_every_allocation_their_arguments_point_into() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let base = |i: u64| 0x7a00_0000_0000 + i * 0x10_0000;
    for i in 0..30 {
        record_alloc(base(i), 0x1000, MemoryType::Device);
    }
    for args in [3usize, 30] {
        let mut kd = KernelDispatchPayload { queue: 0x50, device: 0x40, work_dim: 1, ..Default::default() };
        kd.kernel_arg_count = args as u32;
        for (a, v) in kd.kernel_args[..args].iter_mut().enumerate() {
            *v = base(a as u64) + 8;
        }
        emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
    }
    for i in 0..30 {
        record_free(base(i));
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let records = read(&path);
    let launches = activities(&records);
    let counts: Vec<usize> = launches.iter().map(|a| a.allocations.len()).collect();
    assert_eq!(counts, [3, 30]);
    for (i, a) in launches[1].allocations.iter().enumerate() {
        assert_eq!((a.base, a.arg_index), (base(i as u64), i as i32));
    }
}

/// A tiny ring in the default mode: what does not fit is dropped and counted in the trace;
/// records written + drops = records emitted (no silent loss).
#[test]
fn default_mode_counts_every_drop() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let config = Config::default().with_ring_words(256).with_flush_interval(Duration::from_secs(5));
    start_file(config, &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..20_000 {
                    launch(t, i);
                }
            });
        }
    });
    destroy_context(ctx).unwrap();
    let stats = finish().unwrap();
    let records = read(&path);
    let drops: u64 = records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum();
    assert_eq!(drops, stats.drops);
    let written = (calls(&records).len() + activities(&records).len()) as u64;
    assert_eq!(written + drops, 4 * 20_000 * 2);
    assert!(matches!(records.last(), Some(Record::End { drops: d, .. }) if *d == drops));
}

/// Device times arriving later, on another thread, complete the launch: same kind and
/// correlation, phase COMPLETE, the device times; every other kind reaches the trace too.
#[test]
fn completions_and_every_kind_reach_the_trace() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let corr = launch(0x30, 1);
    std::thread::spawn(move || {
        let kd = KernelDispatchPayload { queue: 0x30, device_start: 1_000, device_end: 5_000, ..Default::default() };
        emit_activity(Kind::KernelDispatch, kernel_dispatch::LAUNCH, corr, 1_000, 5_000, Payload::KernelDispatch(&kd));
    })
    .join()
    .unwrap();
    let copy = MemoryCopyPayload {
        queue: 0x30,
        size: 4096,
        direction: CopyDirection::DeviceToHost,
        src_type: MemoryType::Device,
        dst_type: MemoryType::Host,
        ..Default::default()
    };
    emit_instant(Kind::MemoryCopy, memory_copy::USM_MEMCPY, Phase::None, Payload::MemoryCopy(&copy));
    let fill = MemoryFillPayload { queue: 0x30, size: 64, ..Default::default() };
    emit_instant(Kind::MemoryFill, memory_fill::USM_FILL, Phase::None, Payload::MemoryFill(&fill));
    let barrier = SyncPayload { object: 0x30, queue: 0x30, ..Default::default() };
    emit_instant(Kind::Sync, sync_op::BARRIER, Phase::None, Payload::Sync(&barrier));
    let wait = SyncPayload { object: 0x77, event_count: 1, ..Default::default() };
    let t = emit_enter(Kind::Sync, sync_op::WAIT, Payload::Sync(&wait));
    emit_exit(t, Payload::Sync(&wait));
    let q = QueuePayload { queue: 0x30, device: 0x40, context: 0x50, flags: 1 };
    emit_instant(Kind::Queue, queue_op::CREATE, Phase::None, Payload::Queue(&q));
    let d = DevicePayload { handle: 0x40, parent: 0x50, name: c"cpu".as_ptr(), device_type: DeviceType::Cpu };
    emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&d));
    emit_memory_alloc(&MemoryAllocPayload { ptr: 0x9000, size: 256, memory_type: MemoryType::Device, device: 0x40 });
    emit_memory_free(0x9000);
    let co = CodeObjectPayload { handle: 0x3000, program: 0x2000, name: c"square".as_ptr(), binary_size: 10 };
    emit_instant(Kind::CodeObject, code_object::KERNEL, Phase::Load, Payload::CodeObject(&co));
    let g = TaskGraphPayload { node: 11, name: c"cg".as_ptr(), queue: 0x30, ..Default::default() };
    emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&g));
    marker_mark(c"hello");
    let c = CounterPayload { counter: 1, name: c"power".as_ptr(), unit: c"W".as_ptr(), value: 2, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&c));
    let s = CounterPayload { counter: 1, value: 42.5f64.to_bits(), ..Default::default() };
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&s));
    // A value per command: emitted as the command's activity, with its correlation id.
    let per_command = CounterPayload { counter: 1, value: 7.0f64.to_bits(), ..Default::default() };
    emit_activity(Kind::Counter, counter_op::SAMPLE, corr, 6_000, 7_000, Payload::Counter(&per_command));
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let records = read(&path);
    let strings = strings(&records);
    let acts = activities(&records);
    let launch = acts.iter().find(|a| a.kind == Kind::KernelDispatch as u32 && a.phase == phase::NONE).unwrap();
    let done = acts.iter().find(|a| a.kind == Kind::KernelDispatch as u32 && a.phase == phase::COMPLETE).unwrap();
    assert_eq!((launch.correlation, done.correlation), (corr, corr));
    assert_eq!((done.device_start, done.device_end), (1_000, 5_000));
    let copy = acts.iter().find(|a| a.kind == Kind::MemoryCopy as u32).unwrap();
    assert_eq!((copy.bytes, copy.direction), (4096, offtrace_format::CopyDirection::DeviceToHost));
    assert_eq!(copy.src_type, offtrace_format::MemoryType::Device);
    assert!(acts.iter().any(|a| a.kind == Kind::MemoryFill as u32 && a.bytes == 64));
    assert!(acts.iter().any(|a| a.kind == Kind::Sync as u32 && a.queue == 0x30));
    let has = |f: &dyn Fn(&Record) -> bool| records.iter().any(f);
    assert!(has(&|r| matches!(r, Record::Sync(s) if s.object == 0x77 && s.phase == phase::EXIT)));
    assert!(has(&|r| matches!(r, Record::Queue(q) if q.queue == 0x30 && q.device == 0x40 && q.flags == 1)));
    assert!(has(&|r| matches!(r, Record::Device(d) if strings.get(&d.name).map(String::as_str) == Some("cpu"))));
    assert!(has(&|r| matches!(r, Record::Memory(m) if m.op == 0 && m.size == 256)));
    assert!(has(&|r| matches!(r, Record::Memory(m) if m.op == 1 && m.ptr == 0x9000)));
    assert!(has(&|r| matches!(r, Record::CodeObject(c) if c.phase == phase::LOAD && strings[&c.name] == "square")));
    assert!(has(&|r| matches!(r, Record::TaskGraph(g) if g.node == 11 && g.queue == 0x30)));
    assert!(has(&|r| matches!(r, Record::Marker(m) if strings[&m.message] == "hello")));
    assert!(has(&|r| matches!(r, Record::CounterDef(c) if c.value_type == 2 && strings[&c.unit] == "W")));
    // A time series' sample (an instant) names no command; a value per command names its own.
    assert!(has(&|r| matches!(r, Record::CounterSample(c) if f64::from_bits(c.value) == 42.5 && c.correlation == 0)));
    assert!(has(&|r| matches!(r, Record::CounterSample(c) if f64::from_bits(c.value) == 7.0 && c.correlation == corr)));
    for kind in [Kind::Queue, Kind::Device, Kind::MemoryAlloc, Kind::Counter, Kind::Marker] {
        assert!(has(&|r| matches!(r, Record::KindDef { kind: k, .. } if *k == kind as u32)), "{kind:?} defined");
    }
}

#[test]
fn a_second_recording_needs_the_first_finished() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    start_file(Config::default(), &dir.path().join("a"), &[]).unwrap();
    assert!(start_file(Config::default(), &dir.path().join("b"), &[]).is_err());
    finish().unwrap();
    assert!(finish().is_err());
    start_file(Config::default(), &dir.path().join("c"), &[]).unwrap();
    finish().unwrap();
}

/// The file header states when the recording started on both clocks (Perfetto's clock snapshot
/// is made of them): the monotonic start lies between the clock read before and after, and the
/// wall-clock start is today's, not 0.
#[test]
fn the_header_has_the_start_on_both_clocks() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let (before, wall_before) = (clock::monotonic_ns(), clock::realtime_ns());
    start_file(Config::default(), &path, &[]).unwrap();
    let (after, wall_after) = (clock::monotonic_ns(), clock::realtime_ns());
    finish().unwrap();
    let r = TraceReader::open(&path).unwrap();
    let h = r.header();
    assert!((before..=after).contains(&h.start_monotonic_ns), "{h:?}");
    assert_eq!(h.start_ticks, h.start_monotonic_ns, "one tick = 1 ns from CLOCK_MONOTONIC");
    assert!((wall_before..=wall_after).contains(&h.start_realtime_ns), "{h:?}");
    assert_eq!(h.pid, std::process::id());
}

/// A counter sample with its own time (a GPU sample decoded a period after it ended) is written
/// at that time, even before the thread's previous record; a sample without one at the emit's.
#[test]
fn counter_sample_at_its_own_time() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let def =
        CounterPayload { counter: 5, name: c"util".as_ptr(), unit: c"%".as_ptr(), value: 2, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&def));
    let now = CounterPayload { counter: 5, value: 1.0f64.to_bits(), ..Default::default() };
    let before = timestamp_ns();
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&now));
    let after = timestamp_ns();
    // 3 ms before the previous sample, then one after it: both deltas from the thread's last ts.
    let early = CounterPayload { counter: 5, value: 2.0f64.to_bits(), ts: before - 3_000_000, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&early));
    let later = CounterPayload { counter: 5, value: 3.0f64.to_bits(), ts: after + 1_000, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&later));
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let samples: Vec<(u64, f64)> = read(&path)
        .iter()
        .filter_map(|r| if let Record::CounterSample(c) = r { Some((c.ts, f64::from_bits(c.value))) } else { None })
        .collect();
    assert_eq!(samples.len(), 3, "{samples:?}");
    assert!((before..=after).contains(&samples[0].0) && samples[0].1 == 1.0, "{samples:?}");
    assert_eq!(samples[1], (before - 3_000_000, 2.0));
    assert_eq!(samples[2], (after + 1_000, 3.0));
}

/// Names cycling through more strings than the per-thread cache of recent ones holds, from a
/// reused buffer (as the SYCL backend's node names are): every record names its own string.
#[test]
fn names_from_a_reused_buffer_resolve_to_their_own_strings() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let names = ["a", "bb", "cc", "square", "scale_add", "usm_memcpy", "a_longer_kernel_name<int>"];
    let mut buf = [0u8; 64];
    let mut expected = Vec::new();
    for i in 0..200 {
        let n = names[(i * 5 + i / 7) % names.len()];
        buf.fill(0);
        buf[..n.len()].copy_from_slice(n.as_bytes());
        let kd = KernelDispatchPayload { queue: 0x30, kernel_name: buf.as_ptr().cast(), ..Default::default() };
        emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
        expected.push(n);
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let records = read(&path);
    let strings = strings(&records);
    let got: Vec<&str> = activities(&records).iter().map(|a| strings[&a.name].as_str()).collect();
    assert_eq!(got, expected);
}

/// The chunk flags of a finished trace file (1: LZ4, 0: stored raw), with each chunk's encoded
/// bytes and records.
fn chunk_flags(path: &Path) -> Vec<(u8, usize, usize)> {
    let bytes = std::fs::read(path).unwrap();
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let (mut at, mut chunks) = (offtrace_format::FILE_HEADER_LEN, Vec::new());
    while at + offtrace_format::CHUNK_HEADER_LEN <= bytes.len() && &bytes[at..at + 4] == b"OTCK" {
        chunks.push((bytes[at + 4], word(at + 12), word(at + 16)));
        at += offtrace_format::CHUNK_HEADER_LEN + word(at + 8);
    }
    chunks
}

/// A loop of small records (a call and its launch, ~10 encoded bytes each) is stored without
/// LZ4 by default, and compressed when the bound is 0; both files hold the same records.
#[test]
fn chunks_of_small_records_are_stored_raw_by_default() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut read_back = Vec::new();
    for (name, config) in [("raw", Config::default()), ("lz4", Config::default().with_raw_chunks_up_to(0))] {
        let path = dir.path().join(name);
        start_file(config, &path, &[]).unwrap();
        let ctx = subscribe(false).unwrap();
        for i in 0..3_000 {
            launch(0x1000, i);
        }
        destroy_context(ctx).unwrap();
        finish().unwrap();
        let chunks = chunk_flags(&path);
        // The chunk that holds the loop: the largest.
        let &(flags, bytes, records) = chunks.iter().max_by_key(|c| c.2).unwrap();
        assert!(records >= 1_000 && bytes <= offtrace_recorder::RAW_CHUNK_BYTES_PER_RECORD * records, "{chunks:?}");
        assert_eq!(flags, if name == "raw" { 0 } else { 1 }, "{name}: {chunks:?}");
        let records = read(&path);
        read_back.push((calls(&records).len(), activities(&records).len()));
    }
    assert_eq!(read_back, [(3_000, 3_000), (3_000, 3_000)]);
}

/// The recorder copies a queue payload's flags into the trace unchanged: core's bits and the
/// format's must be the same (the two crates define them apart, the format without core).
#[test]
fn queue_flags_are_the_same_bits_in_core_and_in_the_format() {
    use offtrace_core::queue_flags as c;
    use offtrace_format::queue_flags as f;
    assert_eq!(
        [c::IN_ORDER, c::PROFILING, c::PRIORITY_HIGH, c::PRIORITY_LOW, c::ON_DEVICE, c::PERFORMANCE_COUNTERS],
        [f::IN_ORDER, f::PROFILING, f::PRIORITY_HIGH, f::PRIORITY_LOW, f::ON_DEVICE, f::PERFORMANCE_COUNTERS]
    );
}

/// Every operation is defined once, before its first record, whatever its number (those the
/// writer keeps a bit for and those past them) and however the entries alternate between them.
#[test]
fn each_operation_is_defined_once_before_its_first_record() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(false).unwrap();
    let ops = [3, 1023, 1024, 70_000, 3, 1023];
    for round in 0..3 {
        for &op in &ops {
            let p = ApiCallPayload::new(op, &[round]);
            let t = emit_enter(Kind::OpenclApi, op, Payload::OpenclApi(&p));
            emit_exit(t, Payload::OpenclApi(&p));
        }
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let records = read(&path);
    // The definitions before the last chunk's repeat of them all (it follows the last record).
    let last_call = records.iter().rposition(|r| matches!(r, Record::ApiCall(_))).unwrap();
    for op in [3, 1023, 1024, 70_000] {
        let defs: Vec<usize> = records[..last_call]
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Record::OperationDef(d) if d.kind == Kind::OpenclApi as u32 && d.op == op))
            .map(|(i, _)| i)
            .collect();
        let first_call = records.iter().position(|r| matches!(r, Record::ApiCall(c) if c.op == op)).unwrap();
        assert_eq!(defs.len(), 1, "op {op}: {defs:?}");
        assert!(defs[0] < first_call, "op {op} defined before its first call");
    }
    assert_eq!(calls(&records).len(), 3 * ops.len());
}
