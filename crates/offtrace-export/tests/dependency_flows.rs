//! Task-graph edges as flows between commands (`src/dependencies.rs`): each edge between two
//! commands becomes a flow from the producer's device slice to the consumer's, in Perfetto (flow
//! ids on the slices, or on instants inside slices written before the edge was known) and
//! Chrome (`s` / `f` pairs named `dependency`, bound to the enclosing slices), whatever order
//! the enqueues, edges and completions reach the file in. Edges to nodes that are no command (a
//! user event, a stand-in for an outside event, a SYCL virtual node) draw nothing.

#![allow(clippy::unwrap_used)] // tests

mod common;

use std::collections::{BTreeSet, HashMap};

use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::{Record, phase};

const API: u32 = 9;
const ENQUEUE: u32 = 1;
const Q1: u64 = 0x5000;
const Q2: u64 = 0x5100;
const DEVICE: u64 = 0xd1;
/// An OpenCL command's node: its correlation with the top bit set.
const CL: u64 = 1 << 63;

type Pairs = BTreeSet<(String, String)>;

/// Every edge of the trace, and the (producer, consumer) pairs that are commands.
const EDGES: u64 = 10;
fn expected() -> Pairs {
    [("A", "B"), ("A", "C"), ("B", "C"), ("H", "G"), ("S1", "S2"), ("S3", "S4"), ("A", "J")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.thread(2, "completions");
    b.thread(3, "sycl");
    b.kind(API, "OPENCL_API");
    b.op(API, ENQUEUE, "clEnqueueNDRangeKernel", &[("kernel", "cl_kernel", 8)]);
    b.queue_create(1, 10, Q1, DEVICE, true);
    b.queue_create(1, 11, Q2, DEVICE, true);
    // An OpenCL enqueue: its launch record, its node and edges (wait list), then the call's.
    let enqueue = |b: &mut TypedBuilder<Vec<Record>>, t: u64, corr: u64, q: u64, name: &str, waits: &[u64]| {
        b.kernel(1, t + 5, corr, q, DEVICE, name, None);
        if !waits.is_empty() {
            b.node(1, t + 6, CL | corr, name, q);
            for &w in waits {
                b.edge(1, t + 7, w, CL | corr);
            }
        }
        b.api_call(API, ENQUEUE, 1, t, t + 10, corr, &[0x7000], 0);
    };
    let done = |b: &mut TypedBuilder<Vec<Record>>, ts: u64, corr: u64, q: u64, s: u64| {
        b.complete(kind::KERNEL_DISPATCH, 0, 2, ts, corr, q, s, s + 100);
    };
    enqueue(&mut b, 1_000, 1, Q1, "A", &[]);
    enqueue(&mut b, 1_100, 2, Q2, "B", &[CL | 1]);
    enqueue(&mut b, 1_200, 3, Q1, "C", &[CL | 1, CL | 2]);
    // A user event's node and a stand-in for an event made outside the layer: no command.
    b.node(1, 1_300, CL | 100, "user event", 0);
    enqueue(&mut b, 1_300, 4, Q1, "D", &[CL | 100]);
    b.node(1, 1_400, CL | 101, "event", Q2);
    enqueue(&mut b, 1_400, 5, Q2, "E", &[CL | 101]);
    // G waits on H, whose completion comes after G's: the consumer is drawn first.
    enqueue(&mut b, 1_500, 8, Q1, "H", &[]);
    enqueue(&mut b, 1_600, 7, Q2, "G", &[CL | 8]);
    done(&mut b, 3_000, 1, Q1, 2_000);
    done(&mut b, 3_010, 2, Q2, 2_200);
    done(&mut b, 3_020, 3, Q1, 2_400);
    done(&mut b, 3_030, 4, Q1, 2_600);
    done(&mut b, 3_040, 5, Q2, 2_800);
    done(&mut b, 3_050, 7, Q2, 3_100);
    done(&mut b, 3_060, 8, Q1, 2_900);
    // J completes within its call (its times on the launch record): drawn when the call comes,
    // after its edge.
    b.kernel(1, 4_005, 9, Q2, DEVICE, "J", Some((4_020, 4_030)));
    b.node(1, 4_006, CL | 9, "J", Q2);
    b.edge(1, 4_007, CL | 1, CL | 9);
    b.api_call(API, ENQUEUE, 1, 4_000, 4_040, 9, &[0x7000], 0);
    // SYCL: nodes and their edge first, then each node's task enqueues its command (the first
    // enqueue inside the task is the node's; the second is no node's); a virtual node's edge.
    b.node(3, 5_000, 500, "S1", Q1);
    b.node(3, 5_001, 501, "S2", Q2);
    b.edge(3, 5_002, 500, 501);
    b.virtual_node(3, 5_003, 502, 0xeeee);
    b.edge(3, 5_004, 502, 501);
    for (node, corr, q, names, t) in [(500u64, 20u64, Q1, ["S1", "S1b"], 5_100u64), (501, 22, Q2, ["S2", "S2b"], 5_200)]
    {
        b.task(3, t, node, phase::ENTER, names[0], q);
        b.kernel(3, t + 5, corr, q, DEVICE, names[0], Some((t + 1_000, t + 1_050)));
        b.kernel(3, t + 6, corr + 1, q, DEVICE, names[1], Some((t + 1_060, t + 1_070)));
        b.task(3, t + 10, node, phase::EXIT, names[0], q);
    }
    // An edge between two commands drawn already: anchors at both ends.
    for (node, corr, name, t) in [(600u64, 30u64, "S3", 7_000u64), (601, 31, "S4", 7_100)] {
        b.node(3, t, node, name, Q1);
        b.task(3, t + 1, node, phase::ENTER, name, Q1);
        b.kernel(3, t + 5, corr, Q1, DEVICE, name, Some((t + 20, t + 60)));
        b.task(3, t + 10, node, phase::EXIT, name, Q1);
    }
    b.edge(3, 7_200, 600, 601);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn the_trace_has_the_edges_the_tests_count() {
    let edges = trace().iter().filter(|r| matches!(r, Record::TaskGraph(t) if t.op == 1)).count() as u64;
    assert_eq!(edges, EDGES);
}

/// The (producer, consumer) pairs of a Perfetto file's dependency flows; asserts that every flow
/// starts once and ends once.
fn perfetto_pairs(d: &common::Decoded) -> Pairs {
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let enclosing = |s: &common::ViewSlice| -> common::ViewSlice {
        if d.slices.iter().any(|o| std::ptr::eq(o, s)) {
            return s.clone();
        }
        d.slices
            .iter()
            .find(|o| o.track == s.track && o.depth == 0 && o.start <= s.start && s.start < o.end)
            .unwrap_or_else(|| panic!("anchor outside a slice: {s:?}"))
            .clone()
    };
    let (mut from, mut to) = (HashMap::new(), HashMap::new());
    for s in d.slices.iter().chain(&d.instants) {
        let thread = d.tracks[&s.track].thread.is_some();
        for id in &s.flows {
            assert!(from.insert(*id, (enclosing(s), thread, s.name.clone())).is_none(), "flow {id} starts twice");
        }
        for id in &s.terminating {
            assert!(to.insert(*id, enclosing(s)).is_none(), "flow {id} ends twice");
        }
    }
    let mut ids: Vec<&u64> = from.keys().collect();
    ids.sort();
    let mut ends: Vec<&u64> = to.keys().collect();
    ends.sort();
    assert_eq!(ids, ends, "every flow that starts ends, and every end has a start");
    // A dependency flow starts on a queue's track (a launch flow on a thread's: an API call).
    let mut pairs = Pairs::new();
    for (id, (producer, on_thread, at)) in &from {
        if *on_thread {
            assert_ne!(at, "dependency");
            continue;
        }
        let consumer = &to[id];
        assert!(d.tracks[&consumer.track].thread.is_none(), "{consumer:?}");
        assert!(pairs.insert((producer.name.clone(), consumer.name.clone())), "two flows for one edge");
    }
    pairs
}

#[test]
fn perfetto_draws_a_flow_per_edge_between_commands() {
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("d.pftrace");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    assert_eq!(perfetto_pairs(&d), expected());
    // The launch flows stay: one per OpenCL command, from its call.
    let launches = d.slices.iter().filter(|s| s.category == "OPENCL_API").map(|s| s.flows.len()).sum::<usize>();
    assert_eq!(launches, 8);
    // A slice with several flows: C ends its launch flow and two dependency flows.
    let c = d.slices.iter().find(|s| s.name == "C").unwrap();
    assert_eq!(c.terminating.len(), 3, "{c:?}");
    let no_command = ["D", "E"];
    for s in d.slices.iter().filter(|s| no_command.contains(&s.name.as_str())) {
        assert_eq!(s.terminating.len(), 1, "only its launch flow: {s:?}");
    }
}

#[test]
fn chrome_draws_a_flow_per_edge_between_commands() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("d.json");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    // Chrome binds `s` and `f` (with `bp:"e"`) to the complete event enclosing them on their
    // thread.
    let enclosing = |e: &serde_json::Value| -> String {
        let ts = e["ts"].as_f64().unwrap();
        let x = events
            .iter()
            .find(|x| {
                x["ph"] == "X"
                    && x["pid"] == e["pid"]
                    && x["tid"] == e["tid"]
                    && x["ts"].as_f64().unwrap() <= ts
                    && ts < x["ts"].as_f64().unwrap() + x["dur"].as_f64().unwrap()
            })
            .unwrap_or_else(|| panic!("flow event outside a slice: {e}"));
        x["name"].as_str().unwrap().to_owned()
    };
    let flows = |ph: &str| -> HashMap<u64, String> {
        let mut m = HashMap::new();
        for e in events.iter().filter(|e| e["ph"] == ph && e["name"] == "dependency") {
            if ph == "f" {
                assert_eq!(e["bp"], "e", "{e}");
            }
            assert!(m.insert(e["id"].as_u64().unwrap(), enclosing(e)).is_none(), "{e}");
        }
        m
    };
    let (starts, ends) = (flows("s"), flows("f"));
    let mut ids: Vec<&u64> = starts.keys().collect();
    ids.sort();
    let mut end_ids: Vec<&u64> = ends.keys().collect();
    end_ids.sort();
    assert_eq!(ids, end_ids);
    let pairs: Pairs = starts.iter().map(|(id, p)| (p.clone(), ends[id].clone())).collect();
    assert_eq!(pairs, expected());
}
