//! The agent's cost per notification when Intel's XPTI dispatcher calls it.
//!
//! Loads `<venv>/lib/libxptifw.so.1` (venv from `OFFTRACE_SYCL_VENV`, default `<workspace>/.venv`;
//! skipped with a message when absent), forces tracing on, initialises the agent through its real
//! `xptiTraceInit` for `ur.call` and `sycl` (so the agent resolves the dispatcher with dlsym and
//! registers its trampolines), and registers an empty callback on two baseline streams.
//! Each benchmark calls `xptiNotifySubscribers` with the same arguments on the agent's stream and
//! on the baseline stream: the difference is the agent's cost. The trace goes to /dev/null
//! (the writer thread still encodes every record, on the other core).
//!
//! - `ur_call/{empty,agent}`: a `function_with_args_begin`+`end` pair of `urEnqueueUSMMemcpy`
//!   (real params struct, global event, stashed `queue_id`) — per pair.
//! - `sycl_task_begin/{empty,agent}`: a `task_begin` with an event carrying 6 metadata items.
//! - `ur_call_2threads/{empty,agent}`: the pair from 2 threads at once; time per pair per thread.
//! - `clock/now`: the trace clock.
//!
//! The measuring threads are pinned (CPU 0; CPUs 2 and 3 for the 2-thread case) so that waking
//! up after `flush_now` does not move them to a core with cold caches; the writer thread is not
//! pinned. `NOTIFY_BENCH_NO_PIN=1` turns pinning off.
#![allow(unsafe_code, missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use offtrace_xpti::abi::trace_type as tt;

mod common;
use common::{MemcpyCall, setup};

/// Notifications are timed in batches that fit the per-thread ring (the default 4096 records); between
/// batches, untimed, the writer drains everything (`flush_now`), so the numbers are the record
/// path without drops and without the writer competing for the core.
const BATCH: u64 = 1024;

fn batched(iters: u64, mut run: impl FnMut(u64) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        total += run(n);
        left -= n;
        offtrace_agent::recorder::flush_now();
    }
    total
}

/// Pins the calling thread to `cpu` (when the machine has it): a thread that blocks in
/// `flush_now` between batches must not come back on another core with cold caches.
fn pin(cpu: usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 || std::env::var_os("NOTIFY_BENCH_NO_PIN").is_some() {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % n, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn bench(c: &mut Criterion) {
    pin(0);
    let Some(x) = setup() else { return };
    let x = Arc::new(x);
    // SAFETY: a static NUL-terminated key (the dispatcher stores the pointer).
    unsafe { (x.stash)(c"queue_id".as_ptr(), 2) };

    let mut g = c.benchmark_group("ur_call");
    for (label, stream) in [("empty", x.empty_ur), ("agent", x.ur_stream)] {
        let mut call = MemcpyCall::new();
        let mut inst = 0u64;
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                batched(iters, |n| {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        inst += 1;
                        call.pair(&x, stream, black_box(inst));
                    }
                    t0.elapsed()
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("sycl_task_begin");
    for (label, stream) in [("empty", x.empty_sycl), ("agent", x.sycl_stream)] {
        let mut inst = 0u64;
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                batched(iters, |n| {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        inst += 1;
                        // SAFETY: a live event of the dispatcher and a static C string.
                        unsafe {
                            (x.notify)(
                                stream,
                                tt::TASK_BEGIN,
                                std::ptr::null_mut(),
                                x.task_event as *mut _,
                                black_box(inst),
                                c"command_group_node".as_ptr().cast(),
                            );
                        }
                    }
                    t0.elapsed()
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("ur_call_2threads");
    for (label, stream) in [("empty", x.empty_ur), ("agent", x.ur_stream)] {
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let barrier = Arc::new(Barrier::new(2));
                let hs: Vec<_> = (0..2)
                    .map(|t| {
                        let x = x.clone();
                        let barrier = barrier.clone();
                        std::thread::spawn(move || {
                            pin(2 + t);
                            // SAFETY: a static NUL-terminated key.
                            unsafe { (x.stash)(c"queue_id".as_ptr(), 3) };
                            let mut call = MemcpyCall::new();
                            // warm the thread's ring and caches outside the timed part
                            call.pair(&x, stream, 1);
                            let mut total = Duration::ZERO;
                            let mut left = iters;
                            while left > 0 {
                                let n = left.min(BATCH);
                                barrier.wait();
                                let t0 = Instant::now();
                                for i in 0..n {
                                    call.pair(&x, stream, black_box(i));
                                }
                                total += t0.elapsed();
                                left -= n;
                                barrier.wait();
                                offtrace_agent::recorder::flush_now();
                            }
                            total
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().expect("thread")).max().unwrap_or(Duration::ZERO)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("clock");
    let clock = offtrace_core::clock::Clock::detect();
    g.bench_function(format!("now_{:?}", clock.source()), |b| b.iter(|| black_box(clock.now())));
    let mono = offtrace_core::clock::Clock::monotonic();
    g.bench_function("now_Monotonic", |b| b.iter(|| black_box(mono.now())));
    g.finish();

    eprintln!("agent drops during the benchmark: {}", offtrace_agent::recorder::total_drops());
    offtrace_agent::finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(30);
    targets = bench
}
criterion_main!(benches);
