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

use std::ffi::{CString, c_char, c_void};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use offtrace_xpti::abi::{FunctionWithArgs, Payload, TraceEventData, TracepointCallback, payload_flags, trace_type as tt};

type NotifyFn = unsafe extern "C" fn(u8, u16, *mut TraceEventData, *mut TraceEventData, u64, *const c_void) -> i32;
type MakeEventFn = unsafe extern "C" fn(*const c_char, *mut Payload, u16, i32, *mut u64) -> *mut TraceEventData;
type RegisterStreamFn = unsafe extern "C" fn(*const c_char) -> u8;
type RegisterCallbackFn = unsafe extern "C" fn(u8, u16, TracepointCallback) -> i32;
type AddMetadataFn = unsafe extern "C" fn(*mut TraceEventData, *const c_char, i32) -> i32;
type RegisterObjectFn = unsafe extern "C" fn(*const c_char, usize, u8) -> i32;
type StashFn = unsafe extern "C" fn(*const c_char, u64) -> i32;
type ForceFn = unsafe extern "C" fn(bool);

struct Xpti {
    notify: NotifyFn,
    ur_stream: u8,
    sycl_stream: u8,
    empty_ur: u8,
    empty_sycl: u8,
    ur_event: usize,
    task_event: usize,
    stash: StashFn,
}

unsafe extern "C" fn empty_cb(_: u16, _: *mut TraceEventData, _: *mut TraceEventData, _: u64, _: *const c_void) {}

fn venv() -> PathBuf {
    std::env::var_os("OFFTRACE_SYCL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"))
}

unsafe fn sym<T: Copy>(h: *mut c_void, name: &str) -> T {
    let c = CString::new(name).expect("name");
    // SAFETY: `h` is a live dlopen handle and `c` a NUL-terminated name.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    assert!(!p.is_null(), "{name} missing from the dispatcher");
    // SAFETY: the caller names the symbol's real function-pointer type `T` (pointer-sized).
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}

fn setup() -> Option<Xpti> {
    let lib = venv().join("lib/libxptifw.so.1");
    if !lib.exists() {
        eprintln!("notify bench skipped: no {} (set OFFTRACE_SYCL_VENV)", lib.display());
        return None;
    }
    // SAFETY: single-threaded at this point (criterion has not started anything).
    unsafe {
        std::env::set_var("XPTI_FRAMEWORK_DISPATCHER", &lib);
        std::env::set_var("OFFTRACE_OUTPUT", "/dev/null");
        std::env::set_var("OFFTRACE_BUFFER_RECORDS", "4096");
        std::env::remove_var("XPTI_SUBSCRIBERS");
    }
    let c = CString::new(lib.to_string_lossy().as_bytes()).expect("path");
    // SAFETY: `c` is a NUL-terminated path; loading Intel's dispatcher runs only its constructors.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {}", lib.display());
    // SAFETY: every symbol is resolved with its XPTI 2026.2 prototype (xpti-abi.md §2) and called
    // with valid arguments; the events and objects made here live for the whole bench.
    unsafe {
        let force: ForceFn = sym(h, "xptiForceSetTraceEnabled");
        let reg_stream: RegisterStreamFn = sym(h, "xptiRegisterStream");
        let reg_cb: RegisterCallbackFn = sym(h, "xptiRegisterCallback");
        let make_event: MakeEventFn = sym(h, "xptiMakeEvent");
        let add_md: AddMetadataFn = sym(h, "xptiAddMetadata");
        let reg_obj: RegisterObjectFn = sym(h, "xptiRegisterObject");
        force(true);
        // The agent's real init path: it finds the dispatcher (RTLD_NOLOAD), registers streams
        // and trampolines.
        offtrace_agent::xptiTraceInit(1, 0, c"1.0.0".as_ptr(), c"xpti.framework".as_ptr());
        offtrace_agent::xptiTraceInit(0, 12, c"0.12".as_ptr(), c"ur.call".as_ptr());
        offtrace_agent::xptiTraceInit(9, 0, c"sycl 9.0".as_ptr(), c"sycl".as_ptr());
        assert!(offtrace_agent::recorder::is_recording(), "agent did not start");
        let ur_stream = reg_stream(c"ur.call".as_ptr());
        let sycl_stream = reg_stream(c"sycl".as_ptr());
        let empty_ur = reg_stream(c"bench.empty.ur".as_ptr());
        let empty_sycl = reg_stream(c"bench.empty.sycl".as_ptr());
        for t in [tt::FUNCTION_WITH_ARGS_BEGIN, tt::FUNCTION_WITH_ARGS_END] {
            reg_cb(empty_ur, t, empty_cb);
        }
        reg_cb(empty_sycl, tt::TASK_BEGIN, empty_cb);
        let mk = |name: &'static std::ffi::CStr| {
            let mut p = Payload {
                name: name.as_ptr(),
                stack_trace: std::ptr::null(),
                source_file: c"<unknown-file>".as_ptr(),
                line_no: 0,
                column_no: 0,
                code_ptr_va: std::ptr::null(),
                internal: 0,
                flags: payload_flags::NAME_AVAILABLE
                    | payload_flags::SOURCE_FILE_AVAILABLE
                    | payload_flags::LINE_INFO_AVAILABLE
                    | payload_flags::COLUMN_INFO_AVAILABLE,
                uid: Default::default(),
            };
            let mut inst = 0u64;
            let e = make_event(name.as_ptr(), &mut p, 2, 1, &mut inst);
            assert!(!e.is_null());
            e
        };
        let ur_event = mk(c"Unified Runtime call");
        let task_event = mk(c"typeinfo name for dpnp::tensor::kernels::copy_kernel");
        let u = |v: u64| reg_obj((&v as *const u64).cast(), 8, 3);
        for (k, v) in [
            (c"sycl_device", u(0x5646_8276_91e0)),
            (c"sycl_device_name", reg_obj(c"AMD EPYC".as_ptr(), 8, 1)),
            (c"sycl_device_type", reg_obj(c"CPU".as_ptr(), 3, 1)),
            (c"queue_id", u(2)),
            (c"kernel_name", reg_obj(c"copy_kernel".as_ptr(), 11, 1)),
            (c"from_source", reg_obj(c"\x01".as_ptr(), 1, 5)),
        ] {
            add_md(task_event, k.as_ptr(), v);
        }
        Some(Xpti {
            notify: sym(h, "xptiNotifySubscribers"),
            ur_stream,
            sycl_stream,
            empty_ur,
            empty_sycl,
            ur_event: ur_event as usize,
            task_event: task_event as usize,
            stash: sym(h, "xptiStashTuple"),
        })
    }
}

/// Argument variables and the params struct of one `urEnqueueUSMMemcpy` call.
struct MemcpyCall {
    vars: [u64; 8],
    function_id: u32,
    out_event: u64,
    params: [*const c_void; 8],
    result: i32,
}

impl MemcpyCall {
    fn new() -> Box<Self> {
        let function_id = offtrace_xpti::ur::function_by_name("urEnqueueUSMMemcpy").map_or(33, |f| f.id);
        let mut c = Box::new(Self { vars: [0x5646_8300_0000, 1, 0x7f00_1000, 0x7f00_2000, 4096, 0, 0, 0], function_id, out_event: 0, params: [std::ptr::null(); 8], result: 0 });
        c.vars[7] = &c.out_event as *const u64 as u64;
        for i in 0..8 {
            c.params[i] = (&c.vars[i] as *const u64).cast();
        }
        c
    }

    /// One begin + end pair on `stream`.
    #[inline]
    fn pair(&mut self, x: &Xpti, stream: u8, instance: u64) {
        let begin = FunctionWithArgs {
            function_id: self.function_id,
            function_name: c"urEnqueueUSMMemcpy".as_ptr(),
            args_data: self.params.as_mut_ptr().cast(),
            ret_data: std::ptr::null_mut(),
            user_data: std::ptr::null_mut(),
        };
        let ev = x.ur_event as *mut TraceEventData;
        // SAFETY: a live event of the dispatcher, and a user data that lives across the call.
        unsafe {
            (x.notify)(stream, tt::FUNCTION_WITH_ARGS_BEGIN, std::ptr::null_mut(), ev, instance, (&begin as *const FunctionWithArgs).cast());
        }
        self.out_event = 0x5646_8400_0000 + instance;
        let end = FunctionWithArgs { ret_data: (&mut self.result as *mut i32).cast(), ..begin };
        // SAFETY: as for the begin; `ret_data` points to `self.result`.
        unsafe {
            (x.notify)(stream, tt::FUNCTION_WITH_ARGS_END, std::ptr::null_mut(), ev, instance, (&end as *const FunctionWithArgs).cast());
        }
    }
}

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
                            (x.notify)(stream, tt::TASK_BEGIN, std::ptr::null_mut(), x.task_event as *mut _, black_box(inst), c"command_group_node".as_ptr().cast());
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

    offtrace_agent::finish();
    if let Some(r) = offtrace_agent::recorder::get() {
        eprintln!("agent drops during the benchmark: {}", r.total_drops.load(std::sync::atomic::Ordering::Relaxed));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(30);
    targets = bench
}
criterion_main!(benches);
