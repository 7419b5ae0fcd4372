//! The analyzer on synthetic typed traces: every section adds up to what was emitted.

#![allow(clippy::unwrap_used)]

use offtrace_analysis::testing::{TypedBuilder, kind, sycl_like, ur};
use offtrace_analysis::{Analyzer, Report, SubAllocationStats};
use offtrace_format::*;

fn analyze(records: &[Record]) -> Report {
    let mut a = Analyzer::new();
    for r in records {
        a.push(r);
    }
    a.finish(true, Vec::new(), None)
}

fn sycl(threads: u32, records: u64) -> (Vec<Record>, u64) {
    let mut b = TypedBuilder::new(Vec::new());
    let submits = sycl_like(&mut b, threads, records, |v: &Vec<Record>| v.len() as u64);
    (b.out, submits)
}

#[test]
fn api_calls_and_device_activity_add_up_to_what_was_emitted() {
    let (records, submits) = sycl(3, 20_000);
    let r = analyze(&records);
    let launches = r.api_calls.iter().find(|c| c.operation == "urEnqueueKernelLaunch").unwrap();
    assert_eq!(launches.kind, "UR_API");
    assert_eq!(launches.calls, submits);
    assert_eq!(launches.device_activities, submits);
    assert_eq!(launches.mean_ns, 890);
    let emitted_calls = records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count() as u64;
    assert_eq!(r.api_calls.iter().map(|c| c.calls).sum::<u64>(), emitted_calls);
    let kernels: Vec<_> = r.device_activity.iter().filter(|d| d.kind == "KERNEL_DISPATCH").collect();
    assert_eq!(kernels.len(), 4);
    assert_eq!(kernels.iter().map(|k| k.count).sum::<u64>(), submits, "a completion is not counted twice");
    let timed: u64 = kernels.iter().map(|k| k.device_count).sum();
    let per_thread = submits.div_ceil(3);
    assert!(timed >= submits / 2 && timed <= per_thread * 3, "{timed} of {submits}");
    for k in &kernels {
        assert_eq!(k.host_enqueue_count, k.count, "{}: every dispatch found its launching call", k.name);
        assert_eq!(k.host_enqueue_mean_ns, 890);
        assert_eq!(k.queues.len(), 3);
    }
    assert!(kernels.iter().any(|k| k.name.starts_with("main::{lambda(sycl::handler&)#1}")));
    // Copies: by direction, bandwidth from device time (1 MiB in 100 µs).
    let copies = &r.memory.copies;
    assert_eq!(copies.len(), 2, "{copies:?}");
    for c in copies {
        assert_eq!(c.device_count, c.count);
        let bw = c.bandwidth_gb_s.unwrap();
        assert!((bw - 10.48576).abs() < 1e-6, "{bw}");
    }
    let fills = r.device_activity.iter().find(|d| d.kind == "MEMORY_FILL").unwrap();
    assert_eq!(fills.name, "usm_fill");
    assert_eq!(r.memory.fills.count, fills.count);
    let barriers = r.device_activity.iter().find(|d| d.kind == "SYNC").unwrap();
    assert_eq!(barriers.name, "barrier");
}

#[test]
fn every_device_activity_has_its_queue_and_queues_list_their_commands() {
    let (records, submits) = sycl(2, 10_000);
    let r = analyze(&records);
    assert_eq!(r.queues.len(), 2);
    let activities =
        records.iter().filter(|r| matches!(r, Record::Activity(a) if a.phase == phase::NONE)).count() as u64;
    assert_eq!(r.queues.iter().map(|q| q.total_commands).sum::<u64>(), activities);
    for q in &r.queues {
        assert_eq!(q.in_order, Some(true));
        assert!(q.created_ns.is_some() && q.destroyed_ns.is_some());
        assert!(q.commands["KERNEL_DISPATCH"] >= submits / 2);
        assert!(q.device_busy_ns > 0);
        assert!(!q.device.is_empty() && !q.device.starts_with("0x"), "{}", q.device);
    }
}

#[test]
fn memory_threads_graph_counters() {
    let (records, submits) = sycl(2, 30_000);
    let r = analyze(&records);
    let allocs: u64 = r.memory.allocations.iter().map(|a| a.count).sum();
    assert!(allocs > 0);
    assert_eq!(r.memory.frees, allocs);
    assert_eq!(r.memory.peak_live_bytes, 1 << 20);
    assert_eq!(r.memory.live_bytes_at_end, 0);
    assert!(r.memory.allocations.iter().all(|a| a.memory_type == "DEVICE"));
    assert_eq!(r.threads.len(), 2);
    assert_eq!(
        r.threads.iter().map(|t| t.device_activities).sum::<u64>(),
        r.device_activity.iter().map(|d| d.count).sum::<u64>()
    );
    assert_eq!(r.task_graph.nodes, submits);
    assert_eq!(r.task_graph.edges, submits - 2);
    assert_eq!(r.task_graph.longest_chain_len, submits.div_ceil(2));
    assert_eq!(r.task_graph.longest_chain.len() as u64, r.task_graph.longest_chain_len);
    assert_eq!(r.counters.len(), 1);
    assert_eq!(r.counters[0].unit, "W");
    assert!(r.counters[0].samples > 0);
}

#[test]
fn a_made_up_kind_is_named_by_its_definitions() {
    let mut b = TypedBuilder::new(Vec::new());
    b.kind(77, "FOO_API");
    b.op(77, 3, "fooLaunch", &[("stream", "foo_stream_t", 3)]);
    b.op(kind::UR_API, ur::QUEUE_FINISH, "urQueueFinish", &[]);
    for i in 0..10 {
        b.api_call(77, 3, 1, 100 * i, 100 * i + 40, i + 1, &[0x10], if i == 9 { -1 } else { 0 });
    }
    let r = analyze(&b.out);
    assert_eq!(r.api_calls.len(), 1);
    let c = &r.api_calls[0];
    assert_eq!(
        (c.kind.as_str(), c.operation.as_str(), c.calls, c.total_ns, c.errors),
        ("FOO_API", "fooLaunch", 10, 400, 1)
    );
}

#[test]
fn a_chain_counts_real_commands_only() {
    let mut b = TypedBuilder::new(Vec::new());
    b.node(1, 1, 10, "a", 0x5000);
    b.node(1, 2, 11, "virtual", 0);
    b.node(1, 3, 12, "b", 0x5000);
    b.node(1, 4, 13, "c", 0x5000);
    b.edge(1, 5, 10, 11);
    b.edge(1, 5, 11, 12);
    b.edge(1, 5, 12, 13);
    b.edge(1, 5, 99, 13);
    // A node created without a queue whose command then runs as a task is real too.
    b.node(1, 6, 14, "d", 0);
    b.out.push(Record::TaskGraph(TaskGraphRecord {
        op: 2,
        phase: phase::ENTER,
        tid: 1,
        ts: 7,
        node: 14,
        ..Default::default()
    }));
    b.edge(1, 8, 13, 14);
    // d signals event 0xe; a virtual node standing for that event leads to e.
    b.signal(1, 9, 14, 0xe);
    b.virtual_node(1, 10, 15, 0xe);
    b.node(1, 11, 16, "e", 0x5000);
    b.edge(1, 12, 15, 16);
    let r = analyze(&b.out);
    assert_eq!(r.task_graph.longest_chain_len, 5);
    assert_eq!(r.task_graph.longest_chain, vec!["a", "b", "c", "d", "e"]);
    assert_eq!(r.task_graph.unresolved_edges, 1);
}

/// The runtime reuses a released event's address on any thread, and the threads' records reach
/// the file in blocks: a node standing for an event continues the command that signalled it last
/// before the node was made, even when an older signal of the same address comes later in the
/// file (a loaded CI run's chain held a `usm_memcpy` of another thread this way).
#[test]
fn a_chain_follows_the_latest_signal_in_time_not_in_the_file() {
    let mut b = TypedBuilder::new(Vec::new());
    // Thread 1's first block: a → b, b signals 0xe.
    b.node(1, 100, 10, "a", 0x5000);
    b.node(1, 110, 11, "b", 0x5000);
    b.edge(1, 111, 10, 11);
    b.signal(1, 120, 11, 0xe);
    // Thread 2's block, earlier in time: x signalled the same address before it was released.
    b.node(2, 50, 20, "x", 0x6000);
    b.signal(2, 60, 20, 0xe);
    // Thread 1's next block: a node for event 0xe, then c depending on it.
    b.virtual_node(1, 130, 12, 0xe);
    b.node(1, 140, 13, "c", 0x5000);
    b.edge(1, 141, 12, 13);
    let r = analyze(&b.out);
    assert_eq!(r.task_graph.longest_chain, vec!["a", "b", "c"]);
    assert_eq!(r.task_graph.longest_chain_len, 3);
}

/// The SYCL backend names a node when it is created with its kernel's name cut to 256 bytes
/// (dpnp's names run longer), and the node's task with the whole name: the chain shows the
/// whole name, and a node whose task says nothing more keeps its own.
#[test]
fn a_chain_names_its_commands_by_their_tasks_whole_names() {
    let whole = format!("dpnp::tensor::kernels::reduction_over_group_temps_krn<{}>", "float, ".repeat(60));
    let cut: String = whole.chars().take(237).collect();
    let mut b = TypedBuilder::new(Vec::new());
    b.node(1, 1, 10, "host task", 0x5000);
    b.node(1, 2, 11, &cut, 0x5000);
    b.edge(1, 3, 10, 11);
    b.node(1, 4, 12, "host task", 0x5000);
    b.edge(1, 5, 11, 12);
    for (node, name) in [(10, "host task"), (11, whole.as_str()), (12, "")] {
        let name = if name.is_empty() { StrId(0) } else { b.str(name) };
        b.out.push(Record::TaskGraph(TaskGraphRecord {
            op: 2,
            phase: phase::ENTER,
            tid: 1,
            ts: 10 + node,
            node,
            name,
            queue: 0x5000,
            ..Default::default()
        }));
    }
    let r = analyze(&b.out);
    assert_eq!(r.task_graph.longest_chain_len, 3);
    assert_eq!(r.task_graph.longest_chain, ["host task", whole.as_str(), "host task"]);
}

/// A SYCL node recorded before its command was enqueued (dpnp's next node came first on the
/// thread) has no queue and the runtime's name for it (`copy usm`); its task's exit names the
/// command as its device activity does (`usm_memcpy`), with its queue: the chain shows that
/// name. A node that had its queue keeps its own name whatever its exit says.
#[test]
fn a_chain_names_a_node_recorded_without_its_queue_by_its_tasks_exit() {
    let mut b = TypedBuilder::new(Vec::new());
    b.node(1, 1, 10, "a", 0x5000);
    b.node(1, 2, 11, "copy usm", 0);
    b.edge(1, 3, 10, 11);
    for (node, ts, name) in [(10, 4, "a_exit"), (11, 6, "usm_memcpy")] {
        for (phase, ts, name) in [(phase::ENTER, ts, "x"), (phase::EXIT, ts + 1, name)] {
            let name = b.str(name);
            b.out.push(Record::TaskGraph(TaskGraphRecord {
                op: 2,
                phase,
                tid: 1,
                ts,
                node,
                name,
                queue: if phase == phase::EXIT { 0x5000 } else { 0 },
                ..Default::default()
            }));
        }
    }
    let r = analyze(&b.out);
    assert_eq!(r.task_graph.longest_chain, ["a", "usm_memcpy"]);
}

/// A CUDA graph as the CUDA backend writes it in the order CUPTI reports it (run F of the CUDA
/// C workload): nodes and edges while the graph is built, none on a queue, a node first seen as
/// an edge's end created before the edge; the instantiated graph's nodes (reported twice,
/// written once) and edges; an internal copy's edges. Only when the graph runs do the device
/// activities name their nodes (a task record per activity, phase COMPLETE), five launches of
/// memset -> kernel -> kernel -> memcpy: the chain spans those commands.
#[test]
fn a_cuda_graph_chain_spans_the_commands_its_launches_ran() {
    let (g1, g2, g3) = (1u64 << 32, 2u64 << 32, 3u64 << 32);
    let names = ["memset", "kernel", "kernel", "memcpy"];
    let mut b = TypedBuilder::new(Vec::new());
    for g in [g1, g3] {
        b.node(1, 1, g, names[0], 0);
        for i in 1..4 {
            b.node(1, 2, g + i, names[i as usize], 0);
            b.edge(1, 2, g + i - 1, g + i);
        }
    }
    for i in 0..4 {
        b.node(1, 4, g2 + i, names[i as usize], 0);
    }
    for i in 1..4 {
        b.edge(1, 5, g2 + i - 1, g2 + i);
    }
    let before = analyze(&b.out);
    assert_eq!(before.task_graph.longest_chain_len, 0, "no node has run yet");
    // A kernel's task names the kernel; a copy's or fill's none (the node's type names it).
    let kernels = [StrId(0), b.str("scale"), b.str("add"), StrId(0)];
    let mut ts = 100;
    for launch in 0..5u64 {
        for i in 0..4 {
            b.out.push(Record::TaskGraph(TaskGraphRecord {
                name: kernels[i as usize],
                op: 2,
                phase: phase::COMPLETE,
                tid: 2,
                ts,
                correlation: 40 + launch,
                node: g2 + i,
                source: 2,
                queue: 0x10000000f,
                ..Default::default()
            }));
            ts += 10;
        }
    }
    let r = analyze(&b.out);
    assert_eq!(r.task_graph.longest_chain_len, 4);
    assert_eq!(r.task_graph.longest_chain, ["memset", "scale", "add", "memcpy"]);
    assert_eq!(r.task_graph.unresolved_edges, 0);
    assert_eq!((r.task_graph.nodes, r.task_graph.edges), (12, 9));
}

/// A queue created at the address of a destroyed one (the runtime reuses the memory) is a queue
/// of its own: each queue the program created is one row, with its own lifetime and commands.
#[test]
fn a_reused_queue_handle_is_a_new_queue() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.queue_create(1, 10, 0x500, 0xd1, false);
    b.queue_destroy(1, 20, 0x500);
    b.queue_create(1, 30, 0x500, 0xd1, true);
    b.kernel(1, 40, 1, 0x500, 0xd1, "k", Some((50, 60)));
    b.queue_create(1, 45, 0x600, 0xd1, true);
    b.queue_destroy(1, 70, 0x500);
    let r = analyze(&b.out);
    let rows: Vec<_> = r.queues.iter().map(|q| (q.queue, q.created_ns, q.destroyed_ns, q.total_commands)).collect();
    assert_eq!(rows, [(0x500, Some(10), Some(20), 0), (0x500, Some(30), Some(70), 1), (0x600, Some(45), None, 0)]);
    assert_eq!(r.queues[1].in_order, Some(true));
}

/// The report of a file (the parallel reader that skips argument values) is exactly the report
/// of the same records read one by one with every value (`TraceReader`, an independent decoding
/// path), on every format fixture and on a multi-chunk typed trace.
#[test]
fn the_report_of_a_file_equals_the_report_of_its_records_read_one_by_one() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../offtrace-format/tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth.offtrace");
    {
        let mut b = TypedBuilder::new(Vec::new());
        sycl_like(&mut b, 3, 60_000, |v: &Vec<Record>| v.len() as u64);
        let header = TraceHeader { pid: 4242, ..TraceHeader::monotonic() };
        // Small chunks: the parallel reader hands chunks to both decode threads.
        let mut w = TraceWriter::with_chunk_size(std::fs::File::create(&synth).unwrap(), &header, 16 << 10).unwrap();
        for r in &b.out {
            w.write(r).unwrap();
        }
        w.write(&Record::End { records: b.out.len() as u64 + 1, drops: 0 }).unwrap();
        w.finish().unwrap();
    }
    for path in ["v1", "v2", "v3", "v4"].map(|v| fixtures.join(format!("{v}.offtrace"))).into_iter().chain([synth]) {
        let whole = offtrace_analysis::analyze_file(&path, |w| panic!("{w}")).unwrap();
        let mut reader = TraceReader::open(&path).unwrap();
        let mut a = Analyzer::new();
        a.set_format_version(reader.header().version);
        for r in reader.by_ref() {
            a.push(&r.unwrap());
        }
        let one_by_one = a.finish(reader.finished_cleanly(), Vec::new(), None);
        assert!(whole.trace.records > 0);
        assert_eq!(
            serde_json::to_string_pretty(&whole).unwrap(),
            serde_json::to_string_pretty(&one_by_one).unwrap(),
            "{}",
            path.display()
        );
    }
}

/// Values per command (event-based queries) reach the per-kernel view through the file: joined
/// with their command by correlation whichever comes first (value, launch or completion),
/// a command's value counted once per kernel name, values without a command kept apart, and
/// samples of a time series left out.
#[test]
fn values_per_command_are_joined_with_their_kernels_through_the_file() {
    let mut b = TypedBuilder::new(Vec::new());
    b.device(0xd0, "cpu");
    b.counter_def(100, 0xd0, "cpu.sw.task_clock.per_command", "ns");
    b.counter_def(101, 0xd0, "cpu.sw.page_faults.per_command", "");
    b.counter_def(102, 0xd0, "cpu.sw.task_clock", "ns");
    // vadd: commands 1, 2, 3. Command 2's value comes before its launch; command 3 completes
    // before its launch is in the file (another thread's buffer).
    b.kernel(10, 1_000, 1, 0x9, 0xd0, "vadd", None);
    b.complete(kind::KERNEL_DISPATCH, 0, 11, 1_500, 1, 0x9, 10_000, 11_000);
    b.command_sample(100, 11, 1_600, 1_000.0, 1);
    b.command_sample(101, 11, 1_600, 2.0, 1);
    b.command_sample(100, 11, 1_700, 3_000.0, 2);
    b.command_sample(101, 11, 1_700, 0.0, 2);
    b.kernel(10, 1_800, 2, 0x9, 0xd0, "vadd", Some((12_000, 15_000)));
    b.complete(kind::KERNEL_DISPATCH, 0, 11, 2_000, 3, 0x9, 16_000, 18_000);
    b.command_sample(100, 11, 2_100, 2_000.0, 3);
    b.command_sample(101, 11, 2_100, 1.0, 3);
    b.kernel(10, 2_200, 3, 0x9, 0xd0, "vadd", None);
    // scale: commands 7 and 8; a time-series sample between them.
    b.kernel(10, 3_000, 7, 0x9, 0xd0, "scale", Some((20_000, 20_500)));
    b.command_sample(100, 11, 3_100, 500.0, 7);
    b.counter_sample(102, 12, 3_150, 123_456.0);
    b.kernel(10, 3_200, 8, 0x9, 0xd0, "scale", Some((21_000, 21_700)));
    b.command_sample(100, 11, 3_300, 700.0, 8);
    // A value whose command left no device activity in the trace.
    b.command_sample(100, 11, 3_400, 50.0, 999);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("percmd.offtrace");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap(), &TraceHeader::monotonic()).unwrap();
    for r in &b.out {
        w.write(r).unwrap();
    }
    w.write(&Record::End { records: b.out.len() as u64 + 1, drops: 0 }).unwrap();
    w.finish().unwrap();
    let r = offtrace_analysis::analyze_file(&path, |w| panic!("{w}")).unwrap();
    assert_eq!(r.trace.format_version, FORMAT_VERSION);

    let row = |name: &str, metric: &str| {
        r.command_metrics
            .iter()
            .find(|m| m.name == name && m.metric == metric)
            .unwrap_or_else(|| panic!("{name} {metric}: {:#?}", r.command_metrics))
    };
    let vadd = row("vadd", "cpu.sw.task_clock.per_command");
    assert_eq!((vadd.kind.as_str(), vadd.unit.as_str(), vadd.device.as_str()), ("KERNEL_DISPATCH", "ns", "cpu"));
    assert_eq!((vadd.commands, vadd.total, vadd.mean, vadd.min, vadd.max), (3, 6_000.0, 2_000.0, 1_000.0, 3_000.0));
    let faults = row("vadd", "cpu.sw.page_faults.per_command");
    assert_eq!((faults.commands, faults.total, faults.min, faults.max), (3, 3.0, 0.0, 2.0));
    let scale = row("scale", "cpu.sw.task_clock.per_command");
    assert_eq!((scale.commands, scale.total, scale.mean), (2, 1_200.0, 600.0));
    let orphan = row("", "cpu.sw.task_clock.per_command");
    assert_eq!((orphan.kind.as_str(), orphan.commands, orphan.total), ("", 1, 50.0));
    assert_eq!(r.command_metrics.len(), 4, "the time series is no command's: {:#?}", r.command_metrics);
    // Most device time first (vadd: 1 + 3 + 2 µs), the commands without activity last.
    let order: Vec<&str> = r.command_metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(order, ["vadd", "vadd", "scale", ""]);
    let vadd_activity = r.device_activity.iter().find(|d| d.name == "vadd").unwrap();
    assert_eq!(vadd_activity.count, 3, "a value does not add a command");
    // The counters section still has every sample.
    let all = r.counters.iter().find(|c| c.name == "cpu.sw.task_clock.per_command").unwrap();
    assert_eq!(all.samples, 6);
}

/// A SYCL buffer read into USM device memory: the UR level enqueues a device-to-device copy, the
/// OpenCL layer under it completes a `clEnqueueReadBuffer` (a read to the host, on its own queue
/// handle). The copies table keeps the enqueue record's direction and bytes: the device time
/// goes to DEVICE_TO_DEVICE, not to DEVICE_TO_HOST ("5 of 3" copies timed there, on dpnp's
/// sort), and a completion whose record holds no bytes still times its copy.
#[test]
fn a_completion_times_the_copy_in_the_direction_its_enqueue_record_gave() {
    let mut b = TypedBuilder::new(Vec::new());
    b.kind(kind::MEMORY_COPY, "MEMORY_COPY");
    b.copy(1, 10, 7, 0x5000, 0xd1, 4096, CopyDirection::DeviceToDevice, None);
    b.copy(1, 20, 8, 0x5000, 0xd1, 64, CopyDirection::DeviceToHost, Some((300, 400)));
    b.copy(1, 30, 9, 0x5000, 0xd1, 128, CopyDirection::HostToDevice, None);
    for (correlation, direction, bytes, start) in
        [(7u64, CopyDirection::DeviceToHost, 4096u64, 100u64), (9, CopyDirection::Unknown, 0, 500)]
    {
        b.out.push(Record::Activity(Activity {
            kind: kind::MEMORY_COPY,
            phase: phase::COMPLETE,
            tid: 2,
            ts: start + 1_000,
            correlation,
            queue: 0x9000,
            bytes,
            direction,
            device_start: start,
            device_end: start + 50,
            ..Default::default()
        }));
    }
    let r = analyze(&b.out);
    let dir = |d: &str| r.memory.copies.iter().find(|c| c.direction == d).unwrap_or_else(|| panic!("{d}: {r:?}"));
    let d2d = dir("DEVICE_TO_DEVICE");
    assert_eq!((d2d.count, d2d.bytes, d2d.device_count, d2d.device_bytes, d2d.device_ns), (1, 4096, 1, 4096, 50));
    let d2h = dir("DEVICE_TO_HOST");
    assert_eq!((d2h.count, d2h.device_count, d2h.device_bytes, d2h.device_ns), (1, 1, 64, 100));
    let h2d = dir("HOST_TO_DEVICE");
    assert_eq!((h2d.count, h2d.device_count, h2d.device_bytes, h2d.device_ns), (1, 1, 128, 50));
    assert_eq!(r.queues.iter().map(|q| q.queue).collect::<Vec<_>>(), [0x5000], "no queue of the lower level");
}

/// A UR call makes OpenCL calls inside it (their records come first: each is written at its
/// exit): the thread's API time counts the nested time once, so it never exceeds the time the
/// thread spent (the main thread of `threads_queues.py` had 725.90 ms of API time in a 719.92 ms
/// trace). Every call is still counted, and each operation keeps its own total.
#[test]
fn a_threads_api_time_counts_nested_calls_once() {
    /// `OPENCL_API`, as the services number it.
    const OPENCL_API: u32 = 12;
    let mut b = TypedBuilder::new(Vec::new());
    b.kind(kind::UR_API, "UR_API");
    b.kind(OPENCL_API, "OPENCL_API");
    b.op(kind::UR_API, 1, "urContextCreate", &[]);
    b.op(OPENCL_API, 1, "clCreateContext", &[]);
    b.op(OPENCL_API, 2, "clGetDeviceInfo", &[]);
    // urContextCreate [100, 200] holding clGetDeviceInfo [110, 120] and clCreateContext
    // [130, 190], which holds clGetDeviceInfo [140, 150]; then a call of its own, [300, 310].
    b.api_call(OPENCL_API, 2, 1, 110, 120, 2, &[], 0);
    b.api_call(OPENCL_API, 2, 1, 140, 150, 4, &[], 0);
    b.api_call(OPENCL_API, 1, 1, 130, 190, 3, &[], 0);
    b.api_call(kind::UR_API, 1, 1, 100, 200, 1, &[], 0);
    b.api_call(OPENCL_API, 2, 1, 300, 310, 5, &[], 0);
    // Another thread's calls are its own.
    b.api_call(OPENCL_API, 2, 2, 105, 195, 6, &[], 0);
    let r = analyze(&b.out);
    let t = |tid: u32| r.threads.iter().find(|t| t.tid == tid).unwrap_or_else(|| panic!("{tid}"));
    assert_eq!((t(1).api_calls, t(1).api_total_ns), (5, 110));
    assert_eq!((t(2).api_calls, t(2).api_total_ns), (1, 90));
    let op = |name: &str| r.api_calls.iter().find(|c| c.operation == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!((op("clGetDeviceInfo").calls, op("clGetDeviceInfo").total_ns), (4, 120));
    assert_eq!(op("clCreateContext").total_ns, 60);
    assert_eq!(op("urContextCreate").total_ns, 100);
}

/// Each thread's records reach the file as a block (its buffer): the four workers of
/// `threads_queues.py` each allocate 64 KiB before any frees, but thread 1's frees come before
/// thread 2's allocations in the file. The peak is what was live at once (256 KiB, not 64 KiB).
#[test]
fn the_peak_of_live_memory_is_taken_in_time_order_not_file_order() {
    let mut b = TypedBuilder::new(Vec::new());
    b.kind(kind::MEMORY_ALLOC, "MEMORY_ALLOC");
    for t in 0..4u64 {
        let tid = 10 + t as u32;
        b.alloc(tid, 100 + t, 0, 0x1000 * (t + 1), 65536, MemoryType::Device, 0xd1);
        b.free(tid, 1_000 + t, 0, 0x1000 * (t + 1));
    }
    let r = analyze(&b.out);
    assert_eq!(r.memory.peak_live_bytes, 4 * 65536);
    assert_eq!(r.memory.peak_live_ns, Some(103));
    assert_eq!((r.memory.live_bytes_at_end, r.memory.frees, r.memory.unmatched_frees), (0, 4, 0));
}

/// SYCL host tasks (nodes named `host task`) are counted apart: their `task` records are their
/// submission on the submitting thread, not their execution (`docs/record-model.md`).
#[test]
fn host_tasks_are_counted_apart() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.node(1, 100, 1, "host task", 0x500);
    b.node(1, 110, 2, "fill usm", 0x500);
    b.node(1, 120, 3, "host task", 0x500);
    let r = analyze(&b.out);
    assert_eq!((r.task_graph.nodes, r.task_graph.host_tasks), (3, 2));
}

/// An OpenCL sub-buffer is a part of its parent with a handle of its own: its bytes are its
/// parent's, so live memory holds the parent's 64 KiB, not 96 KiB (on main each sub-buffer was
/// an allocation of its own); its free matches it and takes nothing away.
#[test]
fn sub_buffers_add_nothing_to_live_memory() {
    let mut b = TypedBuilder::new(Vec::new());
    b.kind(kind::MEMORY_ALLOC, "MEMORY_ALLOC");
    b.alloc(1, 100, 1, 0xa000, 65536, MemoryType::Device, 0xd1);
    b.sub_alloc(1, 110, 2, 0xb000, 16384);
    b.sub_alloc(1, 120, 3, 0xc000, 16384);
    b.free(1, 200, 4, 0xb000);
    b.free(1, 210, 5, 0xc000);
    b.alloc(1, 220, 6, 0xd000, 4096, MemoryType::Device, 0xd1);
    b.free(1, 300, 7, 0xa000);
    let r = analyze(&b.out);
    let m = &r.memory;
    assert_eq!((m.peak_live_bytes, m.peak_live_ns), (65536 + 4096, Some(220)));
    assert_eq!((m.live_bytes_at_end, m.frees, m.unmatched_frees), (4096, 3, 0));
    assert_eq!(m.sub_allocations, SubAllocationStats { count: 2, bytes: 32768 });
    let a: Vec<(u64, u64)> = m.allocations.iter().map(|a| (a.count, a.bytes)).collect();
    assert_eq!(a, [(2, 65536 + 4096)], "sub-buffers are not allocations of their own");
}

/// An out-of-order queue whose commands overlap on the device: `device_busy_ns` is the time
/// at least one of them ran (the union of their intervals), not the sum of their device times
/// (kept in `device_time_sum_ns`); completions in any order. (On main the busy time was the sum:
/// 3 kernels of 100 ns running together read 300 ns.)
#[test]
fn out_of_order_busy_time_is_the_union_of_the_commands_intervals() {
    const Q: u64 = 0x500;
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.queue_create(1, 10, Q, 0xd1, false);
    // 1-3 overlap (1,000-1,150), 4 runs alone later (2,000-2,100); 3 completes last.
    for (c, times) in [(1u64, (1_000u64, 1_100u64)), (2, (1_050, 1_150)), (4, (2_000, 2_100)), (3, (1_020, 1_120))] {
        b.kernel(1, 100 + c, c, Q, 0xd1, "k", Some(times));
    }
    let r = analyze(&b.out);
    let q = r.queues.iter().find(|q| q.queue == Q).unwrap();
    assert_eq!(q.total_commands, 4);
    assert_eq!(q.device_busy_ns, 150 + 100, "{q:?}");
    assert_eq!(q.device_time_sum_ns, 400, "{q:?}");
}

/// An OpenCL program's write, map for reading and unmap of one 4 MiB buffer on a CPU device (as
/// `pyopencl` recorded it on Intel's runtime): the map and unmap carry the buffer's bytes and take
/// nanoseconds (nothing is copied). Counted as copies, they doubled each direction's bandwidth
/// (48 MiB "host to device" over the writes' time); they are reported as maps, apart.
#[test]
fn maps_and_unmaps_are_not_copies_in_the_bandwidth() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.device(0xd, "cpu");
    b.queue_create(1, 10, 0x9, 0xd, true);
    const MIB4: u64 = 4 << 20;
    let commands = [
        (2, "buffer_write", CopyDirection::HostToDevice, 1_000, 2_000_000), // 2 ms: 2.1 GB/s
        (4, "map", CopyDirection::DeviceToHost, 3_000_000, 300),
        (5, "unmap", CopyDirection::HostToDevice, 4_000_000, 600),
    ];
    for (i, &(op, name, direction, start, ns)) in commands.iter().enumerate() {
        b.named_copy(op, name, 1, start - 500, 100 + i as u64, 0x9, 0xd, MIB4, direction, Some((start, start + ns)));
    }
    let r = analyze(&b.out);
    let m = &r.memory;
    assert_eq!(m.copies.len(), 1, "{:?}", m.copies);
    let h2d = &m.copies[0];
    assert_eq!((h2d.direction.as_str(), h2d.count, h2d.bytes, h2d.device_ns), ("HOST_TO_DEVICE", 1, MIB4, 2_000_000));
    assert!((h2d.bandwidth_gb_s.unwrap() - MIB4 as f64 / 2e6).abs() < 1e-9);
    assert_eq!((m.maps.count, m.maps.bytes, m.maps.device_count, m.maps.device_ns), (2, 2 * MIB4, 2, 900));
    // The device activity table still lists them, by name.
    assert!(r.device_activity.iter().any(|d| d.name == "map" && d.bytes == MIB4));
}

#[test]
fn code_objects_are_counted_per_operation_and_name_with_unloads_under_their_loads_names() {
    use offtrace_analysis::{CodeObjectNameStats, CodeObjectStats};
    let (program, build, kernel) = (0, 1, 2);
    let mut b = TypedBuilder::new(Vec::new());
    // Programs: a SYCL one (no name), a CUDA module, one name loaded twice, one without a size.
    b.code_load(1, 10, program, 0x10, 0x10, "", 4096);
    b.code_load(1, 11, program, 0x11, 0x11, "vecAdd(float*)", 1000);
    b.code_load(1, 12, program, 0x12, 0x12, "triton_a (+2 kernels)", 5000);
    b.code_load(2, 13, program, 0x13, 0x13, "triton_a (+2 kernels)", 3000);
    b.code_load(2, 14, program, 0x14, 0x14, "small", 0);
    b.code_unload(1, 20, program, 0x11, "");
    b.code_unload(1, 21, program, 0x10, "");
    b.code_unload(1, 22, program, 0x99, "");
    // The handle's next program: a load of its own, its unload matched to it.
    b.code_load(1, 23, program, 0x11, 0x11, "small", 0);
    b.code_unload(1, 24, program, 0x11, "");
    // Builds, named by their options; one without options.
    b.code_load(1, 30, build, 0x10, 0x10, "-O2", 0);
    b.code_load(1, 31, build, 0x12, 0x12, "-O2", 0);
    b.code_load(1, 32, build, 0x13, 0x13, "", 0);
    // Kernels: one name created twice, both released; an unload without a load that names itself.
    b.code_load(1, 40, kernel, 0x100, 0x10, "scale_add", 0);
    b.code_load(2, 41, kernel, 0x101, 0x10, "scale_add", 0);
    b.code_load(1, 42, kernel, 0x102, 0x10, "square", 0);
    b.code_unload(1, 50, kernel, 0x100, "");
    b.code_unload(2, 51, kernel, 0x101, "");
    b.code_unload(1, 52, kernel, 0x999, "ghost");
    let r = analyze(&b.out);
    let name = |name: &str, loads, unloads, bytes: Option<u64>, max_bytes: Option<u64>| CodeObjectNameStats {
        name: name.into(),
        loads,
        unloads,
        bytes,
        max_bytes,
    };
    assert_eq!(
        r.code_objects,
        vec![
            CodeObjectStats {
                operation: "program".into(),
                loads: 6,
                unloads: 4,
                unmatched_unloads: 1,
                loaded_at_end: 3,
                sized_loads: 4,
                bytes: Some(13_096),
                max_bytes: Some(5000),
                unnamed_loads: 1,
                names: vec![
                    name("triton_a (+2 kernels)", 2, 0, Some(8000), Some(5000)),
                    name("vecAdd(float*)", 1, 1, Some(1000), Some(1000)),
                    name("small", 2, 1, None, None),
                ],
            },
            CodeObjectStats {
                operation: "program_build".into(),
                loads: 3,
                loaded_at_end: 3,
                unnamed_loads: 1,
                names: vec![name("-O2", 2, 0, None, None)],
                ..Default::default()
            },
            CodeObjectStats {
                operation: "kernel".into(),
                loads: 3,
                unloads: 3,
                unmatched_unloads: 1,
                loaded_at_end: 1,
                names: vec![
                    name("scale_add", 2, 2, None, None),
                    name("square", 1, 0, None, None),
                    name("ghost", 0, 1, None, None)
                ],
                ..Default::default()
            },
        ]
    );
    assert_eq!(r.trace.first_ns, Some(10));
    assert_eq!(r.trace.last_ns, Some(52));
}

#[test]
fn code_object_memory_is_bounded_by_names_and_a_forgotten_load_leaves_its_unload_unmatched() {
    let loads = offtrace_analysis::PENDING_MAX as u64 + 10;
    let mut b = TypedBuilder::new(Vec::new());
    for h in 0..loads {
        b.code_load(1, 100 + h, 2, 0x1000 + h, 0x10, if h % 2 == 0 { "even" } else { "odd" }, 0);
    }
    // The first load was forgotten (past `PENDING_MAX` later loads); the last is remembered.
    b.code_unload(1, 1 << 40, 2, 0x1000, "");
    b.code_unload(1, (1 << 40) + 1, 2, 0x1000 + loads - 1, "");
    let r = analyze(&b.out);
    let k = &r.code_objects[0];
    assert_eq!((k.loads, k.unloads, k.unmatched_unloads, k.loaded_at_end), (loads, 2, 1, loads - 1));
    let names: Vec<(&str, u64, u64)> = k.names.iter().map(|n| (n.name.as_str(), n.loads, n.unloads)).collect();
    assert_eq!(names, [("even", loads / 2, 0), ("odd", loads / 2, 1)], "the unmatched unload names nothing");
    assert_eq!(k.unnamed_loads, 0);
}

#[test]
fn a_report_written_before_code_objects_existed_is_still_read() {
    let mut v = serde_json::to_value(Report::default()).unwrap();
    assert!(v.as_object_mut().unwrap().remove("code_objects").is_some());
    let r: Report = serde_json::from_value(v).unwrap();
    assert!(r.code_objects.is_empty());
}

#[test]
fn an_unload_written_before_its_load_is_matched_to_it_by_time() {
    let mut b = TypedBuilder::new(Vec::new());
    // Thread 2 released what thread 1 created; thread 2's block reached the file first.
    b.code_unload(2, 200, 2, 0x100, "");
    b.code_unload(2, 90, 2, 0x200, "");
    b.code_load(1, 100, 2, 0x100, 0x10, "scale_add", 0);
    // Loaded after that unload: not what it released.
    b.code_load(1, 100, 2, 0x200, 0x10, "square", 0);
    let r = analyze(&b.out);
    let k = &r.code_objects[0];
    assert_eq!((k.loads, k.unloads, k.unmatched_unloads, k.loaded_at_end), (2, 2, 1, 1), "{k:?}");
    let names: Vec<(&str, u64, u64)> = k.names.iter().map(|n| (n.name.as_str(), n.loads, n.unloads)).collect();
    assert_eq!(names, [("scale_add", 1, 1), ("square", 1, 0)]);
}
