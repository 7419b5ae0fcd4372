//! One device activity per command and runtime level (`docs/record-model.md`), the same in the
//! report and in every export: an enqueue record (phase NONE) and its completion (COMPLETE,
//! same kind and correlation) are one command whichever reaches the file first (two backends'
//! records come from different threads' buffers); a second completion of a command (the SYCL
//! backend's, from the program's own profiling query, beside the OpenCL layer's) is not counted;
//! a completion without an enqueue record (CUPTI style) is work of its own, and one correlation
//! may have several (a CUDA graph launch's kernels).

#![allow(clippy::unwrap_used)] // tests

mod common;

use offtrace_analysis::Analyzer;
use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::{CopyDirection, Record};

const Q: u64 = 0x5000;
const D: u64 = 0xd1;

fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.thread(2, "callbacks");
    b.kind(kind::UR_API, "UR_API");
    b.op(kind::UR_API, 1, "urEnqueueSomething", &[("hQueue", "ur_queue_handle_t", 3)]);
    b.queue_create(1, 10, Q, D, true);
    // 1: kernel enqueued, completed twice (the OpenCL layer's, then the program's query).
    b.kernel(1, 100, 1, Q, D, "k_twice", None);
    b.complete(kind::KERNEL_DISPATCH, 0, 2, 300, 1, Q, 1_000, 1_100);
    b.complete(kind::KERNEL_DISPATCH, 0, 1, 400, 1, Q, 1_000, 1_100);
    // 2: a barrier whose completion reaches the file before its enqueue record.
    b.complete(kind::SYNC, 1, 2, 500, 2, Q, 1_200, 1_210);
    b.barrier(1, 450, 2, Q, D);
    // 3: a copy completed on another thread, that thread's buffer written first.
    b.complete(kind::MEMORY_COPY, 0, 2, 700, 3, Q, 1_300, 1_500);
    b.copy(1, 600, 3, Q, D, 4096, CopyDirection::HostToDevice, None);
    // 4: the plain order: enqueue, then completion.
    b.kernel(1, 800, 4, Q, D, "k_plain", None);
    b.complete(kind::KERNEL_DISPATCH, 0, 2, 900, 4, Q, 1_600, 1_700);
    // 5: only a completion (a backend that learns everything at completion).
    b.kernel(2, 1_000, 5, Q, D, "k_only_complete", Some((1_800, 1_900)));
    if let Some(Record::Activity(a)) = b.out.last_mut() {
        a.phase = offtrace_format::phase::COMPLETE;
    }
    for (c, s) in [(1u64, 90u64), (2, 440), (3, 590), (4, 790), (5, 990)] {
        b.api_call(kind::UR_API, 1, 1, s, s + 20, c, &[Q], 0);
    }
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn the_report_counts_each_command_once_with_its_device_time() {
    let mut a = Analyzer::new();
    for r in &trace() {
        a.push(r);
    }
    let rep = a.finish(true, Vec::new(), None);
    let find = |name: &str| rep.device_activity.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name}"));
    for (name, ns) in [("k_twice", 100), ("k_plain", 100), ("k_only_complete", 100), ("barrier", 10)] {
        let d = find(name);
        assert_eq!((d.count, d.device_count, d.device_total_ns), (1, 1, Some(ns)), "{name}: {d:?}");
    }
    let copies: u64 = rep.device_activity.iter().filter(|d| d.kind == "MEMORY_COPY").map(|d| d.count).sum();
    assert_eq!(copies, 1);
    let c = rep.device_activity.iter().find(|d| d.kind == "MEMORY_COPY").unwrap();
    assert_eq!((c.device_count, c.device_total_ns, c.bytes), (1, Some(200), 4096));
    assert_eq!(rep.device_activity.iter().map(|d| d.count).sum::<u64>(), 5);
}

#[test]
fn every_export_has_one_row_or_slice_per_command() {
    let records = trace();
    let dir = tempfile::tempdir().unwrap();

    let db = dir.path().join("t.sqlite");
    export_records(&records, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT COUNT(*) FROM device_activity"), 5);
    assert_eq!(one("SELECT COUNT(*) FROM device_activity WHERE device_ns IS NULL"), 0);
    assert_eq!(one("SELECT COUNT(DISTINCT correlation) FROM device_activity"), 5);
    assert_eq!(one("SELECT bytes FROM device_activity WHERE correlation = 3"), 4096);

    let json = dir.path().join("t.json");
    export_records(&records, &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let device: Vec<&serde_json::Value> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["cat"].as_str().is_some_and(|c| !c.ends_with("_API")) && matches!(e["ph"].as_str(), Some("X" | "i"))
        })
        .collect();
    let names: Vec<&str> = device.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(device.len(), 5, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with("enqueued: ")), "{names:?}");

    let pf = dir.path().join("t.pftrace");
    export_records(&records, &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    let device: Vec<&str> = d
        .slices
        .iter()
        .chain(d.instants.iter())
        .filter(|s| !s.category.ends_with("_API"))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(device.len(), 5, "{device:?}");
    assert!(device.iter().all(|n| !n.starts_with("enqueued: ")), "{device:?}");
}

/// The calls' records come after their commands' completions here (a blocking call; a runtime
/// thread whose buffer reached the file first): every flow a call starts still ends at its
/// command, in Perfetto and in Chrome JSON. (Commands 1-4 have an enqueue record inside the
/// call; 5 only a completion, from another thread, before any sign of its call: it gets its
/// flow from the call too, as every command of a CUDA graph launch does.)
#[test]
fn every_flow_from_a_call_ends_at_its_command_whatever_reached_the_file_first() {
    let records = trace();
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("t.pftrace");
    export_records(&records, &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    // A flow starts at its call's slice, or at an instant inside it (the 5th: drawn after the
    // call's slice was written).
    for i in d.instants.iter().filter(|i| !i.flows.is_empty()) {
        assert!(
            d.slices.iter().any(|s| s.track == i.track && s.start <= i.start && i.start < s.end),
            "flow anchor outside a slice: {i:?}"
        );
    }
    let begun: Vec<u64> = d.slices.iter().chain(d.instants.iter()).flat_map(|s| s.flows.iter().copied()).collect();
    let ended: Vec<u64> =
        d.slices.iter().chain(d.instants.iter()).flat_map(|s| s.terminating.iter().copied()).collect();
    assert_eq!(begun.len(), 5, "a flow from each call that caused a command: {begun:?}");
    let mut sorted = ended.clone();
    sorted.sort_unstable();
    let mut b = begun.clone();
    b.sort_unstable();
    assert_eq!(sorted, b, "each flow ends at its command");

    let json = dir.path().join("t.json");
    export_records(&records, &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ids = |ph: &str| -> Vec<u64> {
        let mut v: Vec<u64> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .filter_map(|e| e["id"].as_u64().or_else(|| e["id"].as_str().and_then(|s| s.parse().ok())))
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(ids("s").len(), 5);
    assert_eq!(ids("s"), ids("f"), "every Chrome flow start has its end");
}

/// A thread defined by two layers (the SYCL backend and the OpenCL layer both saw it) is one
/// row of `threads`, named by the first non-empty name; joins through it do not duplicate calls.
#[test]
fn a_thread_defined_twice_is_one_row() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "");
    b.thread(1, "main");
    b.thread(1, "other");
    b.kind(kind::UR_API, "UR_API");
    b.op(kind::UR_API, 1, "urEnqueueSomething", &[("hQueue", "ur_queue_handle_t", 3)]);
    b.api_call(kind::UR_API, 1, 1, 10, 20, 1, &[Q], 0);
    b.api_call(kind::UR_API, 1, 1, 30, 40, 2, &[Q], 0);
    b.out.push(Record::End { records: 0, drops: 0 });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT COUNT(*) FROM threads"), 1);
    let name: String = db.query_row("SELECT name FROM threads WHERE tid = 1", [], |r| r.get(0)).unwrap();
    assert_eq!(name, "main");
    assert_eq!(one("SELECT COUNT(*) FROM api_calls_named"), 2);
}

/// A completion from a lower runtime level (the OpenCL layer under SYCL) names its own queue
/// handle: its device time is the busy time of the queue the command was enqueued on, and the
/// lower level's handle does not become a queue of its own.
#[test]
fn a_completion_naming_another_queue_counts_for_the_enqueue_records_queue() {
    const LOWER: u64 = 0x7000;
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.kind(kind::UR_API, "UR_API");
    b.op(kind::UR_API, 1, "urEnqueueSomething", &[("hQueue", "ur_queue_handle_t", 3)]);
    b.queue_create(1, 10, Q, D, true);
    b.kernel(1, 100, 1, Q, D, "k", None);
    b.api_call(kind::UR_API, 1, 1, 90, 110, 1, &[Q], 0);
    b.complete(kind::KERNEL_DISPATCH, 0, 1, 300, 1, LOWER, 1_000, 1_250);
    b.out.push(Record::End { records: 0, drops: 0 });
    let mut a = Analyzer::new();
    for r in &b.out {
        a.push(r);
    }
    let rep = a.finish(true, Vec::new(), None);
    let q = rep.queues.iter().find(|q| q.queue == Q).unwrap();
    assert_eq!(q.device_busy_ns, 250);
    assert!(rep.queues.iter().all(|q| q.queue != LOWER), "{:?}", rep.queues);
}

/// A CUDA graph launch: every kernel of the graph completes with the correlation of the one
/// `cudaGraphLaunch` call and none has an enqueue record. Each is a command of its own in the
/// report and in every export (the report counted one per launch and kind before).
#[test]
fn the_kernels_of_one_graph_launch_are_each_a_command() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.thread(2, "cupti");
    b.kind(kind::UR_API, "CUDA_RUNTIME_API");
    b.op(kind::UR_API, 1, "cudaGraphLaunch", &[("stream", "cudaStream_t", 3)]);
    b.queue_create(1, 10, Q, D, true);
    // Launch 6: three kernels (the first node's kernel twice: two nodes of one kernel).
    // Launch 7: two kernels; launch 8: one.
    let runs: [(u64, &str, u64); 6] = [
        (6, "g_a", 1_000),
        (6, "g_b", 1_100),
        (6, "g_a", 1_200),
        (7, "g_a", 2_000),
        (7, "g_b", 2_100),
        (8, "g_b", 3_000),
    ];
    for (corr, name, start) in runs {
        b.kernel(2, start + 5_000, corr, Q, D, name, Some((start, start + 50)));
        if let Some(Record::Activity(a)) = b.out.last_mut() {
            a.phase = offtrace_format::phase::COMPLETE;
        }
    }
    for (c, s) in [(6u64, 900u64), (7, 1_900), (8, 2_900)] {
        b.api_call(kind::UR_API, 1, 1, s, s + 20, c, &[Q], 0);
    }
    b.out.push(Record::End { records: 0, drops: 0 });

    let mut a = Analyzer::new();
    for r in &b.out {
        a.push(r);
    }
    let rep = a.finish(true, Vec::new(), None);
    let find = |name: &str| rep.device_activity.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!((find("g_a").count, find("g_a").device_count, find("g_a").device_total_ns), (3, 3, Some(150)));
    assert_eq!((find("g_b").count, find("g_b").device_count, find("g_b").device_total_ns), (3, 3, Some(150)));
    let q = rep.queues.iter().find(|q| q.queue == Q).unwrap();
    assert_eq!(q.device_busy_ns, 300);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT COUNT(*) FROM device_activity"), 6);
    assert_eq!(one("SELECT COUNT(*) FROM device_activity WHERE correlation = 6"), 3);
    assert_eq!(one("SELECT COUNT(*) FROM device_activity WHERE correlation = 7"), 2);
    assert_eq!(one("SELECT COUNT(*) FROM device_activity WHERE device_ns = 50"), 6);

    let pf = dir.path().join("t.pftrace");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    let device: Vec<&str> =
        d.slices.iter().filter(|s| !s.category.ends_with("_API")).map(|s| s.name.as_str()).collect();
    assert_eq!(device.len(), 6, "{device:?}");

    let json = dir.path().join("t.json");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let slices = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"].as_str().is_some_and(|c| !c.ends_with("_API")))
        .count();
    assert_eq!(slices, 6);
}
