//! Unit tests of every summary section on synthetic record streams.

use crate::testing::{self, Md, TraceBuilder};
use crate::*;
use offtrace_format::{Record, UserData};

fn summarize(records: &[Record]) -> Summary {
    let mut b = SummaryBuilder::new();
    for r in records {
        b.push(r);
    }
    b.finish()
}

#[derive(Default)]
struct Collect {
    calls: usize,
    commands: Vec<(String, Option<u64>)>,
    devices: Vec<(String, u64)>,
    edges: Vec<(Option<u32>, Option<u32>)>,
    mem: Vec<(bool, u64, String)>,
    ops: usize,
    queues: usize,
    enqueue_links: Vec<Option<u64>>,
}

impl ModelSink for Collect {
    fn ur_call(&mut self, c: &UrCallEvent<'_>) {
        self.calls += 1;
        if c.name.starts_with("urEnqueue") {
            self.enqueue_links.push(c.command_instance);
        }
    }
    fn command(&mut self, c: &CommandEvent<'_>) {
        self.commands.push((c.name.to_owned(), c.queue_id));
    }
    fn edge(&mut self, e: &EdgeEvent<'_>) {
        self.edges.push((e.source, e.target));
    }
    fn memory(&mut self, m: &MemoryEvent<'_>) {
        self.mem.push((m.release, m.bytes, m.kind.to_owned()));
    }
    fn mem_op(&mut self, _: &MemOpEvent<'_>) {
        self.ops += 1;
    }
    fn queue(&mut self, _: &QueueEvent<'_>) {
        self.queues += 1;
    }
    fn device(&mut self, d: &DeviceEvent<'_>) {
        self.devices.push((d.name.to_owned(), d.end_ns - d.start_ns));
    }
}

#[test]
fn ur_calls_by_function() {
    let s = summarize(&testing::w4_like());
    let launch = s.ur_calls.iter().find(|c| c.name == "urEnqueueKernelLaunch").expect("launch");
    assert_eq!(launch.calls, 2);
    assert_eq!(launch.total_ns, 800);
    assert_eq!(launch.min_ns, 300);
    assert_eq!(launch.max_ns, 500);
    assert_eq!(launch.mean_ns, 400);
    assert!(launch.wall_share > 0.0 && launch.wall_share < 1.0);
    // sorted by total time
    assert_eq!(s.ur_calls[0].name, "urEnqueueUSMMemcpy");
    assert_eq!(s.ur_calls.iter().map(|c| c.calls).sum::<u64>(), 6);
}

#[test]
fn ur_pairs_by_thread_and_instance() {
    let mut b = TraceBuilder::new();
    b.stream(8, "ur.call");
    // same instance on two threads, interleaved
    b.ur_call(100, 10, 1, 5, 1, "urA", &[], &[]);
    let recs_a = b.records.len();
    b.ur_call(105, 20, 2, 5, 1, "urA", &[], &[]);
    // interleave: move thread 1's end after thread 2's begin
    let end1 = b.records.remove(recs_a - 1);
    let at = b.records.len() - 1;
    b.records.insert(at, end1);
    let s = summarize(&b.records);
    assert_eq!(s.ur_calls[0].calls, 2);
    assert_eq!(s.ur_calls[0].total_ns, 30);
}

#[test]
fn unmatched_end_is_counted_not_fatal() {
    let mut b = TraceBuilder::new();
    b.stream(8, "ur.call");
    b.ur_call(100, 10, 1, 5, 1, "urA", &[], &[]);
    b.records.retain(|r| !matches!(r, Record::Notification(n) if n.trace_type == 28));
    let s = summarize(&b.records);
    assert_eq!(s.trace.unmatched_ends, 1);
    assert!(s.ur_calls.is_empty());
}

#[test]
fn commands_with_host_and_device_time() {
    let mut sink = Collect::default();
    let mut b = SummaryBuilder::new();
    for r in &testing::w4_like() {
        b.push_with(r, &mut sink);
    }
    let s = b.finish();
    let axpy = s.commands.iter().find(|c| c.name == "axpy").expect("axpy");
    assert_eq!(axpy.count, 2);
    assert_eq!(axpy.host_total_ns, 1_000 + 1_000);
    assert_eq!(axpy.kind, "command_group_node");
    assert_eq!(axpy.device_count, 1);
    assert_eq!(axpy.device_total_ns, Some(2_000));
    assert_eq!(axpy.queues, vec![1, 2]);
    let memcpy = s.commands.iter().find(|c| c.name == "memcpy").expect("memcpy");
    assert_eq!(memcpy.device_total_ns, None, "no signal: device time n/a");
    assert_eq!(sink.devices, vec![("axpy".to_owned(), 2_000)]);
    assert_eq!(sink.commands.len(), 3);
    // each urEnqueue call knows the command that was open around it
    assert_eq!(sink.enqueue_links, vec![Some(30), Some(40), Some(51)]);
}

#[test]
fn memory_section() {
    let mut sink = Collect::default();
    let mut b = SummaryBuilder::new();
    for r in &testing::w4_like() {
        b.push_with(r, &mut sink);
    }
    let s = b.finish();
    let m = &s.memory;
    let dev = m.allocations.iter().find(|a| a.kind == "device").expect("device kind from urUSMDeviceAlloc");
    assert_eq!((dev.count, dev.bytes, dev.device.as_str()), (1, 65536, "CPU X"));
    let host = m.allocations.iter().find(|a| a.kind == "host").expect("host");
    assert_eq!(host.bytes, 4096);
    assert_eq!(m.peak_live_bytes, 65536 + 4096);
    assert_eq!(m.live_bytes_at_end, 4096);
    assert_eq!(m.releases, 1);
    assert_eq!(m.buffers.constructed, 1);
    assert_eq!(m.buffers.bytes, 1024);
    let sycl_memcpy = m.ops.iter().find(|o| o.source == "sycl" && o.op == "memcpy").expect("sycl memcpy");
    assert_eq!((sycl_memcpy.count, sycl_memcpy.bytes, sycl_memcpy.host_ns), (1, 65536, 1_500));
    let ur_memcpy = m.ops.iter().find(|o| o.op == "urEnqueueUSMMemcpy").expect("ur memcpy");
    assert_eq!(ur_memcpy.bytes, 65536);
    assert!((ur_memcpy.rate_gb_s.unwrap_or(0.0) - 65.536).abs() < 1e-9);
    assert_eq!(sink.mem.len(), 3);
    assert_eq!(sink.mem[2], (true, 65536, "usm".to_owned()));
    assert_eq!(sink.ops, 2);
}

#[test]
fn usm_shared_and_unknown_kinds() {
    let mut b = TraceBuilder::new();
    b.stream(6, "sycl.experimental.mem_alloc");
    b.stream(8, "ur.call");
    let ud = UserData::Str(b.str("usm::alignedAlloc"));
    let e = b.event(
        1,
        "alignedAlloc",
        &[("memory_size", Md::U(10)), ("memory_ptr", Md::U(0x10)), ("sycl_device_name", Md::S("D"))],
    );
    b.notify(1, 1, 6, 32, 1, Some(e), ud);
    b.ur_call(2, 1, 1, 2, 19, "urUSMSharedAlloc", &[0, 0, 0, 0, 10], &[]);
    b.notify(4, 1, 6, 33, 1, Some(e), ud);
    let e2 = b.event(
        2,
        "alignedAlloc",
        &[("memory_size", Md::U(5)), ("memory_ptr", Md::U(0x20)), ("sycl_device_name", Md::S("D"))],
    );
    b.notify(5, 1, 6, 32, 3, Some(e2), ud);
    b.notify(6, 1, 6, 33, 3, Some(e2), ud);
    // buffer memory through mem_alloc_data_t
    let ma = UserData::MemAlloc { mem_object: 9, alloc_pointer: 0x30, alloc_size: 100, guard_zone: 0 };
    b.notify(7, 1, 6, 32, 4, None, ma);
    b.notify(8, 1, 6, 33, 4, None, ma);
    let s = summarize(&b.records);
    let kinds: Vec<(&str, u64)> = s.memory.allocations.iter().map(|a| (a.kind.as_str(), a.bytes)).collect();
    assert!(kinds.contains(&("shared", 10)));
    assert!(kinds.contains(&("usm", 5)));
    assert!(kinds.contains(&("buffer", 100)));
    assert_eq!(s.memory.peak_live_bytes, 115);
}

#[test]
fn queues_section() {
    let s = summarize(&testing::w4_like());
    assert_eq!(s.queues.len(), 2);
    let q1 = &s.queues[0];
    assert_eq!((q1.queue_id, q1.is_inorder, q1.device.as_str(), q1.commands), (1, Some(true), "CPU X", 2));
    assert!(q1.created_ns.is_some() && q1.destroyed_ns.is_some());
    let q2 = &s.queues[1];
    assert_eq!((q2.is_inorder, q2.commands, q2.device_ns), (Some(false), 1, 2_000));
}

#[test]
fn task_graph_section() {
    let mut sink = Collect::default();
    let mut b = SummaryBuilder::new();
    for r in &testing::w4_like() {
        b.push_with(r, &mut sink);
    }
    let s = b.finish();
    assert_eq!(s.graph.nodes, 3);
    assert_eq!(s.graph.edges, 2);
    assert_eq!(s.graph.unresolved_edges, 0);
    assert_eq!(s.graph.longest_chain_len, 3);
    assert_eq!(s.graph.longest_chain, vec!["axpy", "axpy", "memcpy"]);
    assert_eq!(s.graph.longest_chain_host_ns, 1_000 + 1_000 + 1_500);
    assert_eq!(sink.edges, vec![(Some(0), Some(1)), (Some(1), Some(2))]);
}

#[test]
fn edge_uids_map_to_nodes_at_creation_time() {
    let mut b = TraceBuilder::new();
    b.stream(2, "sycl");
    let n1 = b.event(0x1, "a", &[]);
    b.notify(1, 1, 2, 4, 1, Some(n1), UserData::None);
    let n2 = b.event(0x2, "b", &[]);
    b.notify(2, 1, 2, 4, 2, Some(n2), UserData::None);
    let mut e = b.event(0x9, "Event[1]", &[]);
    (e.source_id, e.target_id) = (0x1, 0x2);
    b.notify(3, 1, 2, 6, 3, Some(e), UserData::None);
    // uid 0x1 reused for a new node: later edges point at the new one
    let n3 = b.event(0x1, "c", &[]);
    b.notify(4, 1, 2, 4, 4, Some(n3), UserData::None);
    let mut e2 = b.event(0x9, "Event[2]", &[]);
    (e2.source_id, e2.target_id) = (0x2, 0x1);
    b.notify(5, 1, 2, 6, 5, Some(e2), UserData::None);
    let mut e3 = b.event(0x9, "Event[3]", &[]);
    (e3.source_id, e3.target_id) = (0x77, 0x1);
    b.notify(6, 1, 2, 6, 6, Some(e3), UserData::None);
    let s = summarize(&b.records);
    assert_eq!(s.graph.longest_chain, vec!["a", "b", "c"]);
    assert_eq!(s.graph.unresolved_edges, 1);
}

#[test]
fn threads_drops_and_trace_facts() {
    let recs = testing::w4_like();
    let s = summarize(&recs);
    assert_eq!(s.threads[0].tid, 100);
    assert_eq!(s.threads[0].name, "python");
    let w = s.threads.iter().find(|t| t.tid == 101).expect("worker");
    assert_eq!((w.notifications, w.drops, w.name.as_str()), (2, 3, "worker"));
    assert_eq!(s.drops.total, 3);
    assert!(s.trace.complete);
    assert_eq!(s.trace.end_drops, Some(3));
    assert_eq!(s.trace.records, recs.len() as u64);
    assert_eq!(s.trace.info.get("pid").map(String::as_str), Some("4242"));
    assert_eq!(s.trace.first_ts_ns, Some(1_000));
    assert_eq!(s.trace.wall_ns, 14_002 - 1_000);
    assert_eq!(s.trace.unclosed_begins, 0);
}

#[test]
fn notification_counts_by_stream_and_type() {
    let s = summarize(&testing::w4_like());
    let sycl = &s.notifications["sycl"];
    assert_eq!(sycl["node_create"], 3);
    assert_eq!(sycl["task_begin"], 3);
    assert_eq!(sycl["queue_create"], 2);
    assert_eq!(sycl["type_99"], 1);
    assert_eq!(s.notifications["ur.call"]["function_with_args_begin"], 6);
    assert_eq!(s.notifications["sycl.experimental.mem_alloc"]["mem_alloc_begin"], 2);
    assert_eq!(s.notifications["sycl.experimental.buffer"]["offload_alloc_memory_object_construct"], 1);
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["notifications"]["ur.call"]["function_with_args_end"], 6);
}

#[test]
fn debug_streams_read_as_their_twins() {
    let mut b = TraceBuilder::new();
    b.stream(3, "sycl.debug");
    let n1 = b.event(0x1, "k", &[("kernel_name", Md::S("k"))]);
    b.notify(1, 1, 3, 10, 1, Some(n1), UserData::None);
    b.notify(5, 1, 3, 11, 1, Some(n1), UserData::None);
    let s = summarize(&b.records);
    assert_eq!(s.commands[0].name, "k");
    assert_eq!(s.notifications["sycl.debug"]["task_begin"], 1);
}

#[test]
fn truncated_trace_reports_what_was_read() {
    let mut recs = testing::w4_like();
    recs.truncate(recs.len() / 2);
    let s = summarize(&recs);
    assert!(!s.trace.complete);
    assert!(s.trace.notifications > 0);
}

#[test]
fn kernel_dispatches_link_to_their_commands() {
    let s = summarize(&testing::w4_like_with_dispatches());
    let k = &s.kernel_allocations;
    assert_eq!(k.dispatches.len(), 3);
    assert_eq!(k.linked, 2);
    let links: Vec<(Option<u64>, &str, Option<&str>)> =
        k.dispatches.iter().map(|d| (d.command_instance, d.link.as_str(), d.command_name.as_deref())).collect();
    assert_eq!(links, [(Some(30), "ur_call", Some("axpy")), (Some(40), "task", Some("axpy")), (None, "none", None)]);
    let a = &k.dispatches[0];
    assert_eq!((a.tid, a.ts_ns, a.ur_instance, a.kernel.as_str()), (100, 5_300, 31, "axpy"));
    assert_eq!(a.allocations.len(), 3);
    assert_eq!(
        a.allocations[2],
        KernelAllocationInfo { base: 0x30000, size: 65536, arg_index: -1, memory_type: "SHARED".into() }
    );
    // The rest of the summary is unchanged by the new records.
    let plain = summarize(&testing::w4_like());
    assert_eq!(serde_json::to_value(&plain.commands).unwrap(), serde_json::to_value(&s.commands).unwrap());
    assert!(plain.kernel_allocations.dispatches.is_empty() && plain.kernel_allocations.kernels.is_empty());
}

#[test]
fn kernel_allocations_aggregate_per_kernel() {
    let s = summarize(&testing::w4_like_with_dispatches());
    let k = &s.kernel_allocations.kernels;
    assert_eq!(k.iter().map(|k| (k.kernel.as_str(), k.dispatches)).collect::<Vec<_>>(), [("axpy", 2), ("scale", 1)]);
    let axpy = &k[0];
    assert_eq!((axpy.linked, axpy.distinct_sets, axpy.without_allocations, axpy.first_dispatch), (2, 2, 0, 0));
    assert_eq!(axpy.max_dispatch_bytes, 65536 + 4096 + 65536);
    let uses: Vec<(i32, u64, &str, u64, u64, u64)> = axpy
        .allocations
        .iter()
        .map(|u| (u.arg_index, u.size, u.memory_type.as_str(), u.dispatches, u.first_base, u.distinct_bases))
        .collect();
    assert_eq!(
        uses,
        [(0, 65536, "DEVICE", 2, 0x1000, 1), (1, 4096, "HOST", 2, 0x2000, 2), (-1, 65536, "SHARED", 1, 0x30000, 1)]
    );
    let scale = &k[1];
    assert_eq!((scale.dispatches, scale.linked, scale.without_allocations, scale.distinct_sets), (1, 0, 1, 1));
    assert!(scale.allocations.is_empty());
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["kernel_allocations"]["dispatches"][1]["allocations"][1]["base"], 0x2800);
}

/// Every way a dispatch record can sit relative to its command in the file.
#[test]
fn kernel_dispatch_link_routes() {
    use offtrace_format::MemoryType::Device;
    let alloc = [(0x1000, 256, 0, Device)];
    let mut b = TraceBuilder::new();
    b.stream(testing::SYCL, "sycl");
    b.stream(testing::UR_CALL, "ur.call");
    let k = b.event(0xA, "k", &[("kernel_name", Md::S("k"))]);
    let outer = b.event(0xB, "outer", &[("kernel_name", Md::S("outer"))]);
    // 1. Before its command's notifications in the file (as the agent writes them: with the
    //    definitions, ahead of the thread's notification chunk): without ur_instance, linked at
    //    task_end by time; with it, at the end of that call.
    b.kernel_dispatch(1_050, 1, 0, "k", &alloc);
    b.kernel_dispatch(1_180, 1, 56, "k", &alloc);
    b.notify(1_000, 1, testing::SYCL, 10, 7, Some(k), UserData::None);
    b.ur_call(1_170, 5, 1, 56, 200, "urEnqueueKernelLaunch", &[], &[]);
    // 2. Inside the open launch call: linked through ur_instance.
    let ur_begin = b.records.len();
    b.ur_call(1_100, 100, 1, 55, 200, "urEnqueueKernelLaunch", &[], &[]);
    let end = b.records.pop().unwrap();
    b.kernel_dispatch(1_150, 1, 55, "k", &alloc);
    b.records.push(end);
    assert!(b.records.len() > ur_begin);
    b.notify(1_500, 1, testing::SYCL, 11, 7, Some(k), UserData::None);
    // 3. Nested commands: the innermost open one whose begin is not after the dispatch.
    b.notify(2_000, 1, testing::SYCL, 10, 8, Some(outer), UserData::None);
    b.notify(2_100, 1, testing::SYCL, 10, 9, Some(k), UserData::None);
    b.kernel_dispatch(2_150, 1, 0, "k", &alloc);
    b.kernel_dispatch(2_050, 1, 0, "k", &alloc); // before the inner begin: the outer command
    b.notify(2_200, 1, testing::SYCL, 11, 9, Some(k), UserData::None);
    b.notify(2_300, 1, testing::SYCL, 11, 8, Some(outer), UserData::None);
    // 4. After task_end, with a ur_instance that matches no call: by time, via closed commands.
    b.kernel_dispatch(2_120, 1, 999, "k", &alloc);
    // 5. Another thread, no command: unlinked; the same ts on thread 1 after everything: none.
    b.kernel_dispatch(1_150, 2, 0, "k", &alloc);
    b.kernel_dispatch(9_000, 1, 0, "", &alloc);
    let s = summarize(&b.records);
    let got: Vec<(Option<u64>, &str)> =
        s.kernel_allocations.dispatches.iter().map(|d| (d.command_instance, d.link.as_str())).collect();
    assert_eq!(
        got,
        [
            (Some(7), "task"),
            (Some(7), "ur_call"),
            (Some(7), "ur_call"),
            (Some(9), "task"),
            (Some(8), "task"),
            (Some(9), "task"),
            (None, "none"),
            (None, "none"),
        ]
    );
    // A dispatch without a kernel name is counted under "<unnamed>".
    assert!(s.kernel_allocations.kernels.iter().any(|k| k.kernel == "<unnamed>" && k.dispatches == 1));
    assert_eq!(s.kernel_allocations.kernels[0].distinct_sets, 1);
    assert_eq!(s.kernel_allocations.kernels[0].allocations[0].distinct_bases, 1);
}
