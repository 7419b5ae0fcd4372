//! Fixed-count loops of the agent's notification path, for instruction counts under callgrind
//! (`docs/overhead.md`, `## Agent`). Ignored in normal runs.
//!
//! The setup is `benches/notify.rs`'s (shared: `benches/common/mod.rs`): Intel's dispatcher (`<venv>/lib/libxptifw.so.1`) with
//! tracing forced on, the agent through its real `xptiTraceInit` for `ur.call` and `sycl`, the
//! trace to /dev/null, and an empty callback on two baseline streams. `COST_OP` picks the loop:
//!
//! - `ur_pair` / `ur_pair_empty`: a `function_with_args_begin` + `_end` pair of
//!   `urEnqueueUSMMemcpy` on the agent's `ur.call` stream / on the baseline stream;
//! - `task_begin` / `task_begin_empty`: a `task_begin` on an event with 6 metadata items.
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
//! `task_begin − task_begin_empty`.

#![allow(unsafe_code, missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use offtrace_xpti::abi::{TraceEventData, trace_type as tt};

#[path = "../benches/common/mod.rs"]
mod common;
use common::{MemcpyCall, Xpti, setup};

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
        _ => panic!("unknown COST_OP {op:?}: ur_pair|ur_pair_empty|task_begin|task_begin_empty"),
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
    let mut left = n;
    while left > 0 {
        let k = left.min(BATCH);
        measured_batch(&x, &op, &mut call, &mut inst, k);
        left -= k;
        offtrace_agent::recorder::flush_now();
    }
    offtrace_agent::finish();
    let drops = offtrace_agent::recorder::total_drops();
    assert_eq!(drops, 0, "records dropped: the counts would not be the record path's");
}
