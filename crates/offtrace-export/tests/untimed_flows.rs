//! Flows to commands that never get a device time. A command enqueued without device times is
//! drawn at its enqueue when its time never comes (an instant named `enqueued: ...` on its
//! queue's track), and the flow from its call ends there: every flow that starts ends, in
//! Chrome (`s` / `f` pairs) and Perfetto (flow ids on slices, terminating ids on the work),
//! however many commands with device times come between the call and the end of the trace.
//! (On main a flow's start was forgotten after 65,536 later flows, so the untimed command was
//! drawn without its end: the 1 M-record synthetic trace had 35,016 `s` without `f`.)

#![allow(clippy::unwrap_used)] // tests

mod common;

use std::collections::HashSet;

use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::Record;

const API: u32 = 9;
const LAUNCH: u32 = 1;
const QUEUE: u64 = 0x5000;
const DEVICE: u64 = 0xd1;
/// More than the exporter keeps of anything waiting (`PENDING_MAX`, 65,536).
const LATER: u64 = 70_000;

/// An untimed kernel first, then [`LATER`] kernels whose device times come after their calls
/// (as the OpenCL layer's completions do), a thousand timed within their calls among them, and
/// a second untimed kernel last.
fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.kind(API, "OPENCL_API");
    b.op(API, LAUNCH, "clEnqueueNDRangeKernel", &[("kernel", "cl_kernel", 8)]);
    b.queue_create(1, 10, QUEUE, DEVICE, true);
    let untimed = |b: &mut TypedBuilder<Vec<Record>>, t: u64, corr: u64| {
        b.kernel(1, t + 5, corr, QUEUE, DEVICE, "never_timed", None);
        b.api_call(API, LAUNCH, 1, t, t + 10, corr, &[0x7000], 0);
    };
    untimed(&mut b, 1_000, 1);
    for i in 0..LATER {
        let (corr, t) = (2 + i, 10_000 + 100 * i);
        if i % 70 == 0 {
            b.kernel(1, t + 5, corr, QUEUE, DEVICE, "timed_in_call", Some((t + 6, t + 8)));
            b.api_call(API, LAUNCH, 1, t, t + 10, corr, &[0x7000], 0);
        } else {
            b.kernel(1, t + 5, corr, QUEUE, DEVICE, "k", None);
            b.api_call(API, LAUNCH, 1, t, t + 10, corr, &[0x7000], 0);
            b.complete(kind::KERNEL_DISPATCH, 0, 1, t + 50, corr, QUEUE, t + 20, t + 40);
        }
    }
    untimed(&mut b, 10_000 + 100 * LATER, 2 + LATER);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn every_chrome_flow_to_an_untimed_command_ends() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("u.json");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let ids = |ph: &str| -> HashSet<u64> {
        events.iter().filter(|e| e["ph"] == ph).map(|e| e["id"].as_u64().unwrap()).collect()
    };
    let (starts, ends) = (ids("s"), ids("f"));
    assert_eq!(starts.len() as u64, LATER + 2, "a flow per command");
    let unended: Vec<&u64> = starts.difference(&ends).take(5).collect();
    let unstarted: Vec<&u64> = ends.difference(&starts).take(5).collect();
    assert_eq!(
        (unended, unstarted),
        (vec![], vec![]),
        "every start has its end (flows without an end, ends without a start)"
    );
    // The untimed commands: instants on their queue's track, where their flows end.
    let untimed: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.contains("never_timed"))).collect();
    assert_eq!(untimed.len(), 2, "{untimed:?}");
    for e in untimed {
        assert_eq!((e["ph"].as_str(), e["name"].as_str()), (Some("i"), Some("enqueued: never_timed")), "{e}");
        let corr = e["args"]["correlation"].as_u64().unwrap();
        let f = events.iter().find(|f| f["ph"] == "f" && f["id"].as_u64() == Some(corr)).unwrap();
        assert_eq!((&f["ts"], &f["tid"]), (&e["ts"], &e["tid"]), "the flow ends at the instant: {f} {e}");
    }
}

#[test]
fn every_perfetto_flow_to_an_untimed_command_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("u.pftrace");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    let all = || d.slices.iter().chain(&d.instants);
    let starts: HashSet<u64> = all().flat_map(|s| s.flows.iter().copied()).collect();
    let ends: HashSet<u64> = all().flat_map(|s| s.terminating.iter().copied()).collect();
    assert_eq!(starts.len() as u64, LATER + 2, "a flow per command");
    let unended: Vec<&u64> = starts.difference(&ends).take(5).collect();
    let unstarted: Vec<&u64> = ends.difference(&starts).take(5).collect();
    assert_eq!(
        (unended, unstarted),
        (vec![], vec![]),
        "every flow that starts ends (flows without an end, ends without a start)"
    );
    let untimed: Vec<_> = d.instants.iter().filter(|s| s.name == "enqueued: never_timed").collect();
    assert_eq!(untimed.len(), 2);
    assert!(untimed.iter().all(|s| s.terminating.len() == 1), "{untimed:?}");
}
