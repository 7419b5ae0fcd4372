//! Cost of the tracing services (numbers in `docs/overhead.md`, `## Tracing services`).
//!
//! One "op" is one traced call: `emit_enter` + `emit_exit` (two callbacks when a callback
//! service is on, one buffer record when a buffer service is on). The matrix:
//! - `baseline/noop_call`: a call to an opaque no-op function (what the user's callback costs);
//! - `disabled`: no context wants the kind (one relaxed load per emit);
//! - `callback_noop`: one started context with a no-op callback;
//! - `instant_callback`: `emit_instant` outside any call (a fresh correlation id each) with one
//!   started context and a no-op callback: the path every XPTI notification of the agent takes;
//! - `buffer_record`: one context with a lossless buffer, pair → one record (two timestamps);
//! - `buffer_activity`: `emit_activity` with explicit timestamps (the record path alone);
//! - `timestamp`: one `timestamp_ns()` (the TSC line: the contexts above calibrated it; plain
//!   `clock_gettime` with `OFFTRACE_CLOCK=monotonic` or without an invariant TSC);
//! - `threads/*`: the same op on 1 and 2 threads at once, wall time per op per thread, next to
//!   the no-op baseline loop on 1 and 2 threads (the machine's own 2-thread factor).

#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::ffi::c_void;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use offtrace_core::*;

unsafe extern "C" fn noop_cb(r: CallbackRecord, u: *mut UserData, d: *mut c_void) {
    black_box((r, u, d));
}

unsafe extern "C" fn noop_buffer(
    _c: ContextId,
    _b: BufferId,
    r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _x: u64,
) {
    black_box((r, n));
}

#[inline(never)]
fn noop_call(x: u64) -> u64 {
    black_box(x)
}

/// One traced call with a payload the backend already decoded (the agent fills it anyway).
#[inline(always)]
fn traced_call(p: &ApiCallPayload) {
    let t = emit_enter(Kind::UrApi, 97, Payload::UrApi(p));
    emit_exit(t, Payload::UrApi(p));
}

static PAYLOAD: ApiCallPayload = ApiCallPayload {
    function_id: 97,
    arg_count: 1,
    result: 0,
    has_result: 0,
    args: [0x1000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
};

fn with_callback_ctx<R>(f: impl FnOnce() -> R) -> R {
    with_callback_kind_ctx(Kind::UrApi, f)
}

fn with_callback_kind_ctx<R>(kind: Kind, f: impl FnOnce() -> R) -> R {
    let ctx = create_context().unwrap();
    // SAFETY: `noop_cb` is sound for any record.
    unsafe { configure_callback_tracing_service(ctx, kind, None, noop_cb, std::ptr::null_mut()).unwrap() };
    start_context(ctx).unwrap();
    let r = f();
    destroy_context(ctx).unwrap();
    r
}

fn with_buffer_ctx<R>(kind: Kind, f: impl FnOnce() -> R) -> R {
    let ctx = create_context().unwrap();
    let rec = 104; // the buffer sizes of the fixed 104-byte records, for side-by-side numbers
    // SAFETY: `noop_buffer` is sound for any delivery.
    let buf = unsafe {
        create_buffer(ctx, 4096 * rec, 2048 * rec, BufferPolicy::Lossless, noop_buffer, std::ptr::null_mut()).unwrap()
    };
    configure_buffer_tracing_service(ctx, kind, None, buf).unwrap();
    start_context(ctx).unwrap();
    let r = f();
    destroy_context(ctx).unwrap();
    r
}

/// Runs `op` `iters` times on each of `threads` threads at once; returns the wall time of the
/// slowest thread (so the per-iteration result is the per-thread cost of one op).
fn on_threads(threads: usize, iters: u64, op: fn(u64)) -> Duration {
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    op(0); // first use on this thread (registration) outside the timing
                    barrier.wait();
                    let t = Instant::now();
                    for i in 0..iters {
                        op(i);
                    }
                    t.elapsed()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn bench(c: &mut Criterion) {
    let args = &PAYLOAD;
    let mut g = c.benchmark_group("services");
    g.bench_function("baseline/noop_call", |b| b.iter(|| noop_call(black_box(1))));
    g.bench_function("disabled", |b| b.iter(|| traced_call(black_box(args))));
    with_callback_ctx(|| g.bench_function("callback_noop", |b| b.iter(|| traced_call(black_box(args)))));
    with_callback_kind_ctx(Kind::Xpti, || {
        let p = [0u64; 8]; // a backend's raw struct (opaque to core)
        g.bench_function("instant_callback", |b| {
            b.iter(|| {
                emit_instant(
                    Kind::Xpti,
                    black_box(3),
                    Phase::None,
                    Payload::Raw(RawPayload(black_box(&p).as_ptr().cast())),
                )
            })
        })
    });
    with_buffer_ctx(Kind::UrApi, || g.bench_function("buffer_record", |b| b.iter(|| traced_call(black_box(args)))));
    with_buffer_ctx(Kind::MemoryCopy, || {
        let p = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
        g.bench_function("buffer_activity", |b| {
            b.iter(|| emit_activity(Kind::MemoryCopy, 0, 7, 100, 200, Payload::MemoryCopy(black_box(&p))))
        })
    });
    g.bench_function("timestamp", |b| b.iter(timestamp_ns));
    g.finish();

    let mut t = c.benchmark_group("threads");
    fn noop(i: u64) {
        noop_call(black_box(i));
    }
    fn traced(i: u64) {
        black_box(i);
        traced_call(black_box(&PAYLOAD));
    }
    fn activity(i: u64) {
        let p = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: i, ..Default::default() };
        emit_activity(Kind::MemoryCopy, 0, i, 100, 200, Payload::MemoryCopy(black_box(&p)));
    }
    for n in [1usize, 2] {
        t.bench_function(format!("baseline_noop/{n}"), |b| b.iter_custom(|it| on_threads(n, it, noop)));
        with_callback_ctx(|| {
            t.bench_function(format!("callback_noop/{n}"), |b| b.iter_custom(|it| on_threads(n, it, traced)))
        });
        with_buffer_ctx(Kind::MemoryCopy, || {
            t.bench_function(format!("buffer_activity/{n}"), |b| b.iter_custom(|it| on_threads(n, it, activity)))
        });
    }
    t.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
