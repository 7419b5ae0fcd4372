//! The GPU check of the CUPTI groups (run on the accelerator machine; `scripts/metrics/cupti_run.sh`):
//! two hand-written PTX kernels (a memory-bound `saxpy` over 64 Mi floats and a compute-bound
//! `fma_loop`) launched through the driver API (`dlopen("libcuda.so.1")`), measured
//!
//! - `range`: per kernel through the model's event-based queries on `cupti.range_profiler`
//!   (query begin, launch, synchronise, query end, calculate): one line per launch;
//! - `plain`: the same launches with no profiling, for `ncu --metrics` to measure;
//! - `pm`: `cupti.pm_sampling` through a streamer at `PERIOD_US` (default 1000) while phases of
//!   idle / fma_loop / idle / saxpy / idle run, printing every report and the phase boundaries
//!   (CLOCK_MONOTONIC, the streamer's clock), so the curve can be checked against the kernels.
//!
//! - `pmtrace FILE`: the same phases recorded into a trace (offtrace-recorder) by the agent's
//!   `Sampler` (the path of `record --metrics`): PM samples as `COUNTER` records, each phase as a
//!   marker range; then the trace is read back and each phase's mean printed from the trace.
//!
//! `cargo build --release -p offtrace-metrics --example cupti_kernels`

#![allow(unsafe_code)] // the CUDA driver API through dlopen

use std::ffi::{CStr, CString, c_void};
use std::time::{Duration, Instant};

use offtrace_metrics::{GroupHandle, Metrics, StreamerDesc, monotonic_ns};

const PTX: &CStr = c".version 8.0
.target sm_80
.address_size 64

.visible .entry saxpy(.param .u64 px, .param .u64 py, .param .f32 a, .param .u32 n)
{
  .reg .pred p;
  .reg .b32 r<6>;
  .reg .b64 rd<8>;
  .reg .f32 f<4>;
  ld.param.u64 rd1, [px];
  ld.param.u64 rd2, [py];
  ld.param.f32 f1, [a];
  ld.param.u32 r1, [n];
  mov.u32 r2, %ctaid.x;
  mov.u32 r3, %ntid.x;
  mov.u32 r4, %tid.x;
  mad.lo.u32 r5, r2, r3, r4;
  setp.ge.u32 p, r5, r1;
  @p bra DONE;
  cvta.to.global.u64 rd3, rd1;
  cvta.to.global.u64 rd4, rd2;
  mul.wide.u32 rd5, r5, 4;
  add.u64 rd6, rd3, rd5;
  add.u64 rd7, rd4, rd5;
  ld.global.f32 f2, [rd6];
  ld.global.f32 f3, [rd7];
  fma.rn.f32 f3, f1, f2, f3;
  st.global.f32 [rd7], f3;
DONE:
  ret;
}

.visible .entry fma_loop(.param .u64 py, .param .u32 iters)
{
  .reg .pred p;
  .reg .b32 r<6>;
  .reg .b64 rd<4>;
  .reg .f32 f<6>;
  ld.param.u64 rd1, [py];
  ld.param.u32 r1, [iters];
  mov.u32 r2, %ctaid.x;
  mov.u32 r3, %ntid.x;
  mov.u32 r4, %tid.x;
  mad.lo.u32 r5, r2, r3, r4;
  cvt.rn.f32.u32 f1, r5;
  mov.f32 f2, 0f3F800000;
  mov.f32 f3, 0f3F000000;
  mov.f32 f4, 0f00000000;
  mov.u32 r0, 0;
LOOP:
  fma.rn.f32 f4, f1, f3, f4;
  fma.rn.f32 f1, f4, f3, f2;
  add.u32 r0, r0, 1;
  setp.lt.u32 p, r0, r1;
  @p bra LOOP;
  cvta.to.global.u64 rd2, rd1;
  mul.wide.u32 rd3, r5, 4;
  add.u64 rd2, rd2, rd3;
  st.global.f32 [rd2], f4;
  ret;
}
";

type CuResult = i32;

struct Cuda {
    launch: unsafe extern "C" fn(
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    sync: unsafe extern "C" fn() -> CuResult,
    saxpy: *mut c_void,
    fma: *mut c_void,
    x: u64,
    y: u64,
    n: u32,
}

fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> T {
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    assert!(!p.is_null(), "libcuda has no {name:?}");
    // SAFETY: `T` is the documented prototype of the driver function `name` (cuda.h).
    unsafe { std::mem::transmute_copy(&p) }
}

fn check(r: CuResult, what: &str) {
    assert_eq!(r, 0, "{what} failed: CUresult {r}");
}

impl Cuda {
    fn new() -> Self {
        // SAFETY: dlopen of the driver library; RTLD_GLOBAL so CUPTI finds the same one.
        let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        assert!(!lib.is_null(), "no libcuda.so.1");
        let init: unsafe extern "C" fn(u32) -> CuResult = sym(lib, c"cuInit");
        let device_get: unsafe extern "C" fn(*mut i32, i32) -> CuResult = sym(lib, c"cuDeviceGet");
        let retain: unsafe extern "C" fn(*mut *mut c_void, i32) -> CuResult = sym(lib, c"cuDevicePrimaryCtxRetain");
        let set_current: unsafe extern "C" fn(*mut c_void) -> CuResult = sym(lib, c"cuCtxSetCurrent");
        let load: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult = sym(lib, c"cuModuleLoadData");
        let get_fn: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const i8) -> CuResult =
            sym(lib, c"cuModuleGetFunction");
        let alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult = sym(lib, c"cuMemAlloc_v2");
        let memset: unsafe extern "C" fn(u64, u32, usize) -> CuResult = sym(lib, c"cuMemsetD32_v2");
        let n: u32 = 1 << 26;
        let (mut dev, mut ctx, mut module) = (0i32, std::ptr::null_mut(), std::ptr::null_mut());
        let (mut saxpy, mut fma, mut x, mut y) = (std::ptr::null_mut(), std::ptr::null_mut(), 0u64, 0u64);
        // SAFETY: the driver API on live out-pointers, in the documented order.
        unsafe {
            check(init(0), "cuInit");
            check(device_get(&mut dev, 0), "cuDeviceGet");
            check(retain(&mut ctx, dev), "cuDevicePrimaryCtxRetain");
            check(set_current(ctx), "cuCtxSetCurrent");
            check(load(&mut module, PTX.as_ptr().cast()), "cuModuleLoadData");
            check(get_fn(&mut saxpy, module, c"saxpy".as_ptr()), "saxpy");
            check(get_fn(&mut fma, module, c"fma_loop".as_ptr()), "fma_loop");
            check(alloc(&mut x, n as usize * 4), "alloc x");
            check(alloc(&mut y, n as usize * 4), "alloc y");
            check(memset(x, 0x3f80_0000, n as usize), "memset x");
            check(memset(y, 0x4000_0000, n as usize), "memset y");
        }
        Self { launch: sym(lib, c"cuLaunchKernel"), sync: sym(lib, c"cuCtxSynchronize"), saxpy, fma, x, y, n }
    }

    fn saxpy(&self) {
        let (mut x, mut y, mut a, mut n) = (self.x, self.y, 2.0f32, self.n);
        let mut args: [*mut c_void; 4] =
            [(&raw mut x).cast(), (&raw mut y).cast(), (&raw mut a).cast(), (&raw mut n).cast()];
        // SAFETY: a loaded kernel with its four parameters, on the current context.
        let r = unsafe {
            (self.launch)(
                self.saxpy,
                self.n / 256,
                1,
                1,
                256,
                1,
                1,
                0,
                std::ptr::null_mut(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(r, "launch saxpy");
    }

    fn fma(&self, iters: u32) {
        let (mut y, mut it) = (self.y, iters);
        let mut args: [*mut c_void; 2] = [(&raw mut y).cast(), (&raw mut it).cast()];
        // 132 SMs x 8 blocks of 256 threads (H100 SXM); writes the first 270k floats of y.
        // SAFETY: as above.
        let r = unsafe {
            (self.launch)(
                self.fma,
                132 * 8,
                1,
                1,
                256,
                1,
                1,
                0,
                std::ptr::null_mut(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(r, "launch fma_loop");
    }

    fn sync(&self) {
        // SAFETY: no arguments; the current context.
        check(unsafe { (self.sync)() }, "cuCtxSynchronize");
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "range".into());
    let reps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let cuda = Cuda::new();
    // Warm-up (module load, first-launch costs) outside any measurement.
    cuda.saxpy();
    cuda.fma(100);
    cuda.sync();
    match mode.as_str() {
        "plain" => {
            for _ in 0..reps {
                cuda.saxpy();
                cuda.sync();
                cuda.fma(20_000);
                cuda.sync();
            }
        }
        "range" => range(&cuda, reps),
        "pm" => pm(&cuda),
        "pmtrace" => pm_trace(&cuda, &std::env::args().nth(2).unwrap_or_else(|| "pm.offtrace".into())),
        "pmprobe" => {
            // Which metric names PM sampling accepts on this chip (one at a time), so a failing
            // `pm` run says which of `cupti::PM_METRICS` to replace.
            for name in [
                "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
                "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
                "gr__cycles_active.avg",
                "gr__cycles_elapsed.max",
                "sm__cycles_active.avg",
                "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
                "sm__warps_active.avg.pct_of_peak_sustained_active",
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
            ] {
                match offtrace_metrics::cupti::PmSampler::new(0, &[name.to_owned()], 1_000_000, 16) {
                    Ok(_) => println!("pmprobe,{name},ok"),
                    Err(e) => println!("pmprobe,{name},{e},{}", offtrace_metrics::cupti::last_error()),
                }
            }
        }
        m => panic!("unknown mode {m}"),
    }
}

fn range(cuda: &Cuda, reps: usize) {
    let m = Metrics::global();
    let found = m.catalog().find("cupti.range_profiler@1");
    let Some(&gi) = found.first() else {
        eprintln!("no cupti.range_profiler on device 1: {}", offtrace_metrics::cupti::last_error());
        std::process::exit(2);
    };
    let g = GroupHandle(gi);
    let names: Vec<String> = m.group_info(g).expect("group").metrics.iter().map(|x| x.name.clone()).collect();
    m.activate(1, &[g]).expect("activate");
    let pool = match m.query_pool_create(1, g, 4) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("query pool: {e}: {}", offtrace_metrics::cupti::last_error());
            std::process::exit(3);
        }
    };
    let q = m.query_create(pool, 0).expect("query");
    println!("kernel,launch,range,{}", names.join(","));
    for rep in 0..reps {
        for kernel in ["saxpy", "fma_loop"] {
            m.query_reset(q).expect("reset");
            if let Err(e) = m.query_begin(q) {
                eprintln!("begin: {e}: {}", offtrace_metrics::cupti::last_error());
                std::process::exit(4);
            }
            if kernel == "saxpy" {
                cuda.saxpy()
            } else {
                cuda.fma(20_000)
            }
            cuda.sync();
            if let Err(e) = m.query_end(q) {
                eprintln!("end: {e}: {}", offtrace_metrics::cupti::last_error());
                std::process::exit(5);
            }
            let raw = m.query_get_data(q).expect("data");
            let kernels = m.query_range_names(q).expect("names");
            // CUPTI names auto ranges by a running number, not the kernel: the launch says which.
            for (name, values) in kernels.iter().zip(m.calculate(g, &raw).expect("calculate")) {
                let v: Vec<String> = values.iter().map(|v| format!("{}", v.as_f64())).collect();
                println!("{kernel},{rep},{name},{}", v.join(","));
            }
        }
    }
    m.query_destroy(q).expect("destroy");
    m.query_pool_destroy(pool).expect("pool");
}

fn pm(cuda: &Cuda) {
    let period_us: u64 = std::env::var("PERIOD_US").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let m = Metrics::global();
    let Some(&gi) = m.catalog().find("cupti.pm_sampling@1").first() else {
        eprintln!("no cupti.pm_sampling on device 1");
        std::process::exit(2);
    };
    let g = GroupHandle(gi);
    let names: Vec<String> = m.group_info(g).expect("group").metrics.iter().map(|x| x.name.clone()).collect();
    m.activate(1, &[g]).expect("activate");
    let desc = StreamerDesc { sampling_period: Duration::from_micros(period_us), ..StreamerDesc::default() };
    eprintln!("pm: opening the streamer");
    let s = match m.streamer_open(1, g, desc, None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("streamer: {e}: {}", offtrace_metrics::cupti::last_error());
            std::process::exit(3);
        }
    };
    eprintln!("pm: streamer open");
    let phase = |name: &str, ms: u64, work: &dyn Fn()| {
        let t0 = monotonic_ns();
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            work();
        }
        cuda.sync();
        println!("phase,{name},{t0},{}", monotonic_ns());
        eprintln!("pm: phase {name} done");
    };
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
    phase("fma_loop", 300, &|| {
        cuda.fma(20_000);
        cuda.sync();
    });
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
    phase("saxpy", 300, &|| {
        cuda.saxpy();
        cuda.sync();
    });
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
    std::thread::sleep(Duration::from_millis(20));
    let raw = m.streamer_read_data(s, u32::MAX).expect("read");
    eprintln!("pm: read {} bytes; closing", raw.len());
    let stats = m.streamer_close(s).expect("close");
    eprintln!("pm: closed");
    let reports = offtrace_metrics::RawReport::decode_all(&raw, names.len()).expect("reports");
    println!("report,ts_ns,{}", names.join(","));
    for (r, v) in reports.iter().zip(m.calculate(g, &raw).expect("calculate")) {
        let v: Vec<String> = v.iter().map(|x| format!("{:.2}", x.as_f64())).collect();
        println!("report,{},{}", r.ts_ns, v.join(","));
    }
    eprintln!(
        "pm: {} reports, sampling thread {} us per report",
        stats.reports,
        stats.sampling_cpu_ns / stats.reports.max(1) / 1000
    );
}

fn run_phases(cuda: &Cuda, mut phase_hook: impl FnMut(&str, bool)) {
    let mut phase = |name: &str, ms: u64, work: &dyn Fn()| {
        phase_hook(name, true);
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            work();
        }
        cuda.sync();
        phase_hook(name, false);
    };
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
    phase("fma_loop", 300, &|| {
        cuda.fma(20_000);
        cuda.sync();
    });
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
    phase("saxpy", 300, &|| {
        cuda.saxpy();
        cuda.sync();
    });
    phase("idle", 100, &|| std::thread::sleep(Duration::from_millis(1)));
}

fn pm_trace(cuda: &Cuda, path: &str) {
    use offtrace_format::{Record, TraceReader};
    let period_us: u64 = std::env::var("PERIOD_US").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
    offtrace_recorder::start_file(
        offtrace_recorder::Config::default(),
        std::path::Path::new(path),
        &[("command", "cupti_kernels pmtrace")],
    )
    .expect("start the recording");
    let ctx = offtrace_recorder::subscribe(false).expect("subscribe");
    let m = Metrics::global();
    let sampler = match offtrace_metrics::Sampler::start(m, &["cupti.pm_sampling@1"], Duration::from_micros(period_us))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sampler: {e}: {}", offtrace_metrics::cupti::last_error());
            std::process::exit(3);
        }
    };
    let names: Vec<CString> = ["idle", "fma_loop", "saxpy"].iter().map(|n| CString::new(*n).expect("name")).collect();
    let mut host_phases: Vec<(String, u64, u64)> = Vec::new();
    run_phases(cuda, |name, begin| {
        let now = monotonic_ns();
        if begin {
            host_phases.push((name.to_owned(), now, 0));
        } else if let Some(p) = host_phases.last_mut() {
            p.2 = now;
        }
        if begin {
            let c = names.iter().find(|c| c.to_bytes() == name.as_bytes()).expect("phase");
            offtrace_core::marker_range_push(c);
        } else {
            offtrace_core::marker_range_pop();
        }
    });
    let stats = sampler.stop();
    offtrace_core::destroy_context(ctx).expect("context");
    let fin = offtrace_recorder::finish().expect("finish");
    eprintln!(
        "pmtrace: {} drops; sampler {:?}",
        fin.drops,
        stats
            .iter()
            .map(|s| (s.group.clone(), s.stats.reports, s.stats.sampling_cpu_ns / s.stats.reports.max(1) / 1000))
            .collect::<Vec<_>>()
    );
    // Read the trace back: counter definitions and samples, marker ranges.
    let mut strings = std::collections::HashMap::new();
    let mut defs = Vec::new();
    let mut samples: std::collections::HashMap<u64, Vec<(u64, f64)>> = Default::default();
    let mut ranges: Vec<(u64, u64, u64)> = Vec::new(); // (message id, begin, end)
    let mut open: Vec<(u64, u64)> = Vec::new();
    for r in TraceReader::open(path).expect("open the trace") {
        match r.expect("record") {
            Record::String { id, text } => {
                strings.insert(u64::from(id.0), text);
            }
            Record::CounterDef(d) => defs.push(d),
            Record::CounterSample(s) => samples.entry(s.counter).or_default().push((s.ts, f64::from_bits(s.value))),
            Record::Marker(mk) if mk.phase == offtrace_format::phase::ENTER => {
                open.push((u64::from(mk.message.0), mk.ts))
            }
            Record::Marker(mk) if mk.phase == offtrace_format::phase::EXIT => {
                if let Some((msg, t0)) = open.pop() {
                    ranges.push((msg, t0, mk.ts));
                }
            }
            _ => {}
        }
    }
    println!(
        "trace,{path},{} counters,{} marker ranges,{} unmatched marker begins",
        defs.len(),
        ranges.len(),
        open.len()
    );
    for d in &defs {
        let name = strings.get(&u64::from(d.name.0)).cloned().unwrap_or_default();
        let s = samples.get(&d.counter).map(Vec::as_slice).unwrap_or(&[]);
        print!("trace_counter,{name},{} samples", s.len());
        // By the host's phase times (CLOCK_MONOTONIC, the trace's clock after reading), then by
        // the trace's marker ranges.
        for (name, t0, t1) in &host_phases {
            let from = t0 + (t1 - t0) / 15;
            let inside: Vec<f64> = s.iter().filter(|(ts, _)| *ts >= from && ts <= t1).map(|(_, v)| *v).collect();
            let mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
            print!(",host:{name}={mean:.2} ({} samples)", inside.len());
        }
        for (msg, t0, t1) in &ranges {
            // The phase minus its first fifteenth (20 ms of 300; whatever the trace's time unit).
            let from = t0 + (t1 - t0) / 15;
            let inside: Vec<f64> = s.iter().filter(|(ts, _)| *ts >= from && ts <= t1).map(|(_, v)| *v).collect();
            let mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
            print!(",{}={mean:.2} ({} samples)", strings.get(msg).map_or("?", String::as_str), inside.len());
        }
        println!();
    }
}
