//! Flows to every command of a CUDA graph launch. Each kernel, copy and memset a
//! `cudaGraphLaunch` ran carries the launch's correlation id and has no launch-time record
//! (CUPTI reports them only at completion, from its buffer thread, long after the call:
//! `docs/record-model.md`). Perfetto and Chrome draw one flow from the launch's slice to each
//! of them, every flow with an id of its own; a command enqueued the usual way keeps its flow.

#![allow(clippy::unwrap_used)] // tests

mod common;

use std::collections::{HashMap, HashSet};

use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::{Record, phase};

const CUDA_RUNTIME_API: u32 = 13;
const GRAPH_LAUNCH: u32 = 1;
const SYNCHRONIZE: u32 = 2;
const LAUNCH_KERNEL: u32 = 3;
const STREAM: u64 = 0x5000;
const GPU: u64 = 0xd1;

/// Two replays of one graph (three kernels, a memset, a copy), a stream synchronisation between
/// them, and one kernel launched directly (launch record inside its call, completion later).
fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.thread(2, "cupti buffers");
    b.kind(CUDA_RUNTIME_API, "CUDA_RUNTIME_API");
    b.op(CUDA_RUNTIME_API, GRAPH_LAUNCH, "cudaGraphLaunch", &[("graphExec", "cudaGraphExec_t", 8)]);
    b.op(CUDA_RUNTIME_API, SYNCHRONIZE, "cudaStreamSynchronize", &[("stream", "cudaStream_t", 8)]);
    b.op(CUDA_RUNTIME_API, LAUNCH_KERNEL, "cudaLaunchKernel", &[("func", "const void*", 8)]);
    b.queue_create(1, 10, STREAM, GPU, true);
    b.op(kind::MEMORY_FILL, 0, "memset", &[]);
    b.op(kind::MEMORY_COPY, 0, "memcpy_dtod", &[]);
    // The calls' records, from the program's thread.
    b.api_call(CUDA_RUNTIME_API, GRAPH_LAUNCH, 1, 1_000, 1_050, 10, &[0x9000], 0);
    b.api_call(CUDA_RUNTIME_API, SYNCHRONIZE, 1, 1_060, 2_000, 11, &[STREAM], 0);
    b.api_call(CUDA_RUNTIME_API, GRAPH_LAUNCH, 1, 2_100, 2_150, 12, &[0x9000], 0);
    b.kernel(1, 2_210, 13, STREAM, GPU, "direct", None);
    b.api_call(CUDA_RUNTIME_API, LAUNCH_KERNEL, 1, 2_200, 2_220, 13, &[0x7000], 0);
    b.api_call(CUDA_RUNTIME_API, SYNCHRONIZE, 1, 2_230, 4_000, 14, &[STREAM], 0);
    // CUPTI's buffer, later: every command of both replays, the first kernel of each starting
    // before its launch call returned.
    for (corr, t0) in [(10u64, 1_030u64), (12, 2_140)] {
        for (i, name) in ["k_scale", "k_add", "k_reduce"].into_iter().enumerate() {
            let s = t0 + 100 * i as u64;
            b.kernel(2, 3_000 + s, corr, STREAM, GPU, name, Some((s, s + 80)));
            if let Some(Record::Activity(a)) = b.out.last_mut() {
                a.phase = phase::COMPLETE;
            }
        }
        b.complete(kind::MEMORY_FILL, 0, 2, 3_500 + t0, corr, STREAM, t0 + 300, t0 + 320);
        b.complete(kind::MEMORY_COPY, 0, 2, 3_600 + t0, corr, STREAM, t0 + 330, t0 + 390);
    }
    b.complete(kind::KERNEL_DISPATCH, 0, 2, 5_000, 13, STREAM, 2_400, 2_450);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn perfetto_draws_a_flow_from_a_graph_launch_to_each_of_its_commands() {
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("g.pftrace");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let all: Vec<&common::ViewSlice> = d.slices.iter().chain(&d.instants).collect();
    // A flow starts at a slice, or at an instant inside one on its track (a late flow's anchor:
    // the slice was written before its commands were known). Both count as the slice's, as in
    // a viewer, which nests the instant under the slice.
    let enclosing = |s: &common::ViewSlice| -> Option<&common::ViewSlice> {
        d.slices.iter().find(|o| o.track == s.track && o.depth == 0 && o.start <= s.start && s.start < o.end)
    };
    // Flow id → the slice it starts at; no id starts twice.
    let mut source: HashMap<u64, &common::ViewSlice> = HashMap::new();
    let anchors =
        d.instants.iter().map(|i| (i, enclosing(i).unwrap_or_else(|| panic!("anchor outside a slice: {i:?}"))));
    for (s, at) in d.slices.iter().map(|s| (s, s)).chain(anchors.filter(|(i, _)| !i.flows.is_empty())) {
        for id in &s.flows {
            assert!(source.insert(*id, at).is_none(), "flow {id} starts twice");
        }
    }
    let launches: Vec<&common::ViewSlice> = d.slices.iter().filter(|s| s.name == "cudaGraphLaunch").collect();
    assert_eq!(launches.len(), 2);
    for l in &launches {
        let flows = source.values().filter(|at| std::ptr::eq(**at, *l)).count();
        assert_eq!(flows, 5, "one flow per command of the replay: {l:?}");
    }
    assert!(source.values().all(|at| at.name != "cudaStreamSynchronize"));
    let device: Vec<&&common::ViewSlice> = all.iter().filter(|s| !s.category.ends_with("_API")).collect();
    assert_eq!(device.len(), 11, "{device:?}");
    let mut ended = HashSet::new();
    for s in &device {
        assert_eq!(s.terminating.len(), 1, "one flow ends at {s:?}");
        let id = s.terminating[0];
        assert!(ended.insert(id), "flow {id} ends twice");
        let from = source.get(&id).unwrap_or_else(|| panic!("flow {id} to {} has no start", s.name));
        if s.name == "direct" {
            assert_eq!((from.name.as_str(), from.start), ("cudaLaunchKernel", 2_200));
        } else {
            // The replay whose interval holds the command's start: the first (launch at 1,000)
            // runs its commands from 1,030, the second (2,100) from 2,140.
            let want = if s.start < 2_100 { 1_000 } else { 2_100 };
            assert_eq!((from.name.as_str(), from.start), ("cudaGraphLaunch", want), "{s:?}");
        }
    }
    assert_eq!(ended.len(), source.len(), "every flow that starts ends");
}

#[test]
fn chrome_pairs_a_flow_start_at_the_graph_launch_with_each_command() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("g.json");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let id = |e: &serde_json::Value| e["id"].as_u64().or_else(|| e["id"].as_str().and_then(|s| s.parse().ok()));
    let starts: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "s").collect();
    let finishes: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "f").collect();
    assert_eq!(starts.len(), 11, "one flow per command");
    let start_ids: HashSet<u64> = starts.iter().filter_map(|e| id(e)).collect();
    let finish_ids: HashSet<u64> = finishes.iter().filter_map(|e| id(e)).collect();
    assert_eq!(start_ids.len(), 11, "unique ids");
    // JavaScript reads JSON numbers as doubles: ids from 2^53 up would merge in Chrome's viewer.
    assert!(start_ids.iter().all(|&i| i < 1 << 53), "ids a double keeps apart: {start_ids:?}");
    assert_eq!(start_ids, finish_ids, "every start has its end");
    // Ten flows start at the two launches: Chrome binds a start to the slice enclosing it on its
    // thread (the call's slice for a start at the call, or at an anchor inside it).
    let ts = |e: &serde_json::Value| (e["ts"].as_f64().unwrap() * 1000.0).round() as u64;
    let enclosing = |e: &serde_json::Value| {
        events.iter().find(|x| {
            x["ph"] == "X"
                && x["pid"] == e["pid"]
                && x["tid"] == e["tid"]
                && ts(x) <= ts(e)
                && ts(e) < ts(x) + (x["dur"].as_f64().unwrap() * 1000.0).round() as u64
        })
    };
    let bound: Vec<(&str, u64)> = starts
        .iter()
        .map(|e| {
            let x = enclosing(e).unwrap_or_else(|| panic!("flow start outside any slice: {e}"));
            (x["name"].as_str().unwrap(), ts(x))
        })
        .collect();
    let at_launch = bound.iter().filter(|(n, t)| *n == "cudaGraphLaunch" && [1_000, 2_100].contains(t)).count();
    assert_eq!(at_launch, 10, "{bound:?}");
    assert_eq!(bound.iter().filter(|b| **b == ("cudaLaunchKernel", 2_200)).count(), 1, "{bound:?}");
}
