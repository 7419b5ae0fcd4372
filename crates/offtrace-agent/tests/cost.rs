//! Fixed-count loops of the agent's notification path, for instruction counts under callgrind
//! (`docs/overhead.md`, `## Agent`). Ignored in normal runs.
//!
//! The setup is `benches/notify.rs`'s (shared: `benches/common/mod.rs`): Intel's dispatcher (`<venv>/lib/libxptifw.so.1`) with
//! tracing forced on, the agent through its real `xptiTraceInit` for `ur.call` and `sycl`, the
//! trace to /dev/null, and an empty callback on two baseline streams. `COST_OP` picks the loop:
//!
//! - `ur_pair` / `ur_pair_empty`: a `function_with_args_begin` + `_end` pair of
//!   `urEnqueueUSMMemcpy` on the agent's `ur.call` stream / on the baseline stream;
//! - `task_begin` / `task_begin_empty`: a `task_begin` on an event with 6 metadata items;
//! - `graph` / `graph_empty`: one command's task-graph notifications as the SYCL runtime sends
//!   them, `node_create`, `task_begin`, `signal`, `task_end`, on that event (four records: the
//!   node, the task's enter and exit, the signal).
//!
//! `COST_N` iterations run in batches of 1024 inside [`measured_batch`]; between batches,
//! outside it, `flush_now` lets the writer drain the ring (no drops). Count only what runs
//! inside the batches, on the calling thread (not the writer's work), at N and 2N, and divide
//! the difference by N (the thread's registration and first interning drop out):
//!
//! ```sh
//! COST_OP=ur_pair COST_N=20000 valgrind --tool=callgrind --toggle-collect='*measured_batch*' \
//!     target/release/deps/cost-* --ignored --exact instructions
//! ```
//!
//! The agent's cost is `ur_pair − ur_pair_empty` (per pair: two notifications) and
//! `task_begin − task_begin_empty`, `graph − graph_empty` (per command: four notifications).
//!
//! [`wall`] times the same pairs (`ur_pair` and `ur_pair_empty` batches alternately, medians of
//! `COST_ROUNDS` rounds of `COST_N` pairs; `COST_OP=graph`: the `graph` commands) with the
//! writer thread on another CPU than the measuring thread and no writer wake-up inside a timed
//! batch: a ring large enough that the batch never reaches the quarter-full mark that wakes the
//! writer, and every batch after a `flush_now` that has returned (the writer idle). What it prints is the record path's own
//! time on the calling thread:
//!
//! ```sh
//! COST_ROUNDS=41 COST_N=4096 target/release/deps/cost-* --ignored --exact wall --nocapture
//! ```

#![allow(unsafe_code, missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use offtrace_xpti::abi::{TraceEventData, trace_type as tt};

#[path = "../benches/common/mod.rs"]
mod common;
use common::{MemcpyCall, Xpti, setup, setup_with_ring};

/// Iterations per batch: 1024 pairs fit the 4096-record ring.
const BATCH: u64 = 1024;

/// One batch of `n` iterations of `op` from `*inst + 1` on: the only code counted
/// (`--toggle-collect='*measured_batch*'`).
#[inline(never)]
fn measured_batch(x: &Xpti, op: &str, call: &mut MemcpyCall, inst: &mut u64, n: u64) {
    match op {
        "ur_pair" | "ur_pair_empty" => {
            let stream = if op == "ur_pair" { x.ur_stream } else { x.empty_ur };
            for _ in 0..n {
                *inst += 1;
                call.pair(x, stream, black_box(*inst));
            }
        }
        "task_begin" | "task_begin_empty" => {
            let stream = if op == "task_begin" { x.sycl_stream } else { x.empty_sycl };
            for _ in 0..n {
                *inst += 1;
                // SAFETY: a live event of the dispatcher and a static C string.
                unsafe {
                    (x.notify)(
                        stream,
                        tt::TASK_BEGIN,
                        std::ptr::null_mut(),
                        x.task_event as *mut TraceEventData,
                        black_box(*inst),
                        c"command_group_node".as_ptr().cast(),
                    );
                }
            }
        }
        "graph" | "graph_empty" => {
            let stream = if op == "graph" { x.sycl_stream } else { x.empty_sycl };
            for _ in 0..n {
                *inst += 1;
                graph_command(x, stream, black_box(*inst));
            }
        }
        _ => panic!("unknown COST_OP {op:?}: ur_pair|ur_pair_empty|task_begin|task_begin_empty|graph|graph_empty"),
    }
}

/// One command's task-graph notifications, as the SYCL runtime sends them: `node_create`,
/// `task_begin`, `signal`, `task_end` of instance `i` on the 6-item event.
fn graph_command(x: &Xpti, stream: u8, i: u64) {
    let event = x.task_event as *mut TraceEventData;
    let signalled = (0x7f00_0000_0000 + i * 64) as *const std::ffi::c_void;
    // SAFETY: a live event of the dispatcher; user data as the runtime passes it (the node's
    // name for a node or task, the signalled `ur_event_handle_t` for a signal).
    unsafe {
        let name = c"command_group_node".as_ptr().cast();
        (x.notify)(stream, tt::NODE_CREATE, std::ptr::null_mut(), event, i, name);
        (x.notify)(stream, tt::TASK_BEGIN, std::ptr::null_mut(), event, i, name);
        (x.notify)(stream, tt::SIGNAL, std::ptr::null_mut(), event, i, signalled);
        (x.notify)(stream, tt::TASK_END, std::ptr::null_mut(), event, i, name);
    }
}

#[test]
#[ignore = "a measurement: run under callgrind"]
fn instructions() {
    let op = std::env::var("COST_OP").unwrap_or_else(|_| "ur_pair".into());
    let n: u64 = std::env::var("COST_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let x = setup().expect("the SYCL venv's dispatcher (set OFFTRACE_SYCL_VENV)");
    // The bench's stashed tuple (`queue_id`), so the begin reads one as the runtime's do.
    // SAFETY: a static C string key.
    unsafe { (x.stash)(c"queue_id".as_ptr(), 2) };
    let mut call = MemcpyCall::new();
    let mut inst = 0u64;
    if op.starts_with("graph") {
        // As in a SYCL program: UR calls arrive, so a task's end does not read its event's
        // metadata for a dispatch of its own (the UR launch reports it).
        inst += 1;
        call.pair(&x, x.ur_stream, inst);
    }
    let mut left = n;
    while left > 0 {
        // Four records per command: a quarter of the batch keeps the ring as full as the pairs do.
        let k = left.min(if op.starts_with("graph") { BATCH / 4 } else { BATCH });
        measured_batch(&x, &op, &mut call, &mut inst, k);
        left -= k;
        offtrace_agent::recorder::flush_now();
    }
    offtrace_agent::finish();
    let drops = offtrace_agent::recorder::total_drops();
    assert_eq!(drops, 0, "records dropped: the counts would not be the record path's");
}

/// Pins the calling thread to `cpu` (threads it creates later inherit the set).
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement: wall time per pair, writer on another CPU"]
fn wall() {
    let rounds: usize = std::env::var("COST_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(21);
    let n: u64 = std::env::var("COST_N").ok().and_then(|v| v.parse().ok()).unwrap_or(4096);
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    // The writer thread starts in `setup` and keeps the set it inherits: CPU 1; this thread then
    // moves to CPU 0.
    if cpus >= 2 {
        pin(1);
    }
    // 2^18 records of 16 words = 4 Mi words per ring: a batch (~12 words a pair) stays far below
    // the quarter (1 Mi words) at which a push wakes the writer, except once every ~20 batches.
    let x = setup_with_ring("262144").expect("the SYCL venv's dispatcher (set OFFTRACE_SYCL_VENV)");
    if cpus >= 2 {
        pin(0);
    }
    // SAFETY: a static C string key.
    unsafe { (x.stash)(c"queue_id".as_ptr(), 2) };
    let mut call = MemcpyCall::new();
    let mut inst = 0u64;
    // COST_OP=graph: SYCL commands' task-graph notifications instead of UR pairs (one UR pair
    // first, as `instructions` does).
    let graph = std::env::var("COST_OP").is_ok_and(|op| op == "graph");
    let (agent_stream, empty_stream) = if graph { (x.sycl_stream, x.empty_sycl) } else { (x.ur_stream, x.empty_ur) };
    if graph {
        inst += 1;
        call.pair(&x, x.ur_stream, inst);
    }
    let mut time = |stream: u8| {
        offtrace_agent::recorder::flush_now();
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            inst += 1;
            if graph {
                graph_command(&x, stream, black_box(inst));
            } else {
                call.pair(&x, stream, black_box(inst));
            }
        }
        t0.elapsed().as_nanos() as f64 / n as f64
    };
    // Warm-up: thread registration, first interning, caches.
    time(agent_stream);
    time(empty_stream);
    let (mut agent, mut empty, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which goes first: a load change between the two biases neither.
        let (a, e) = if r % 2 == 0 {
            let a = time(agent_stream);
            (a, time(empty_stream))
        } else {
            let e = time(empty_stream);
            (time(agent_stream), e)
        };
        agent.push(a);
        empty.push(e);
        diff.push(a - e);
    }
    let mut clock = Vec::new();
    for _ in 0..rounds {
        let t0 = std::time::Instant::now();
        let mut acc = 0u64;
        for _ in 0..n {
            acc = acc.wrapping_add(black_box(offtrace_core::timestamp_ns()));
        }
        black_box(acc);
        clock.push(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "wall ns per {} ({rounds} rounds of {n}, medians): agent {:.1}, empty {:.1}, \
         agent - empty {:.1} ({:.1} per notification); trace clock read {:.1}; load {}",
        if graph { "SYCL command (node, task begin, signal, task end)" } else { "urEnqueueUSMMemcpy pair" },
        median(&mut agent),
        median(&mut empty),
        median(&mut diff),
        median(&mut diff.clone()) / if graph { 4.0 } else { 2.0 },
        median(&mut clock),
        load.split_whitespace().next().unwrap_or("?"),
    );
    // Before `finish`: the count is the running recording's.
    assert_eq!(offtrace_agent::recorder::total_drops(), 0, "records dropped");
    offtrace_agent::finish();
}
