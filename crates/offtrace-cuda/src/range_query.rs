//! Per-kernel values of CUPTI's range profiler in the CUDA trace (`offtrace record
//! --query-metrics cupti.range_profiler`, `OFFTRACE_QUERY_METRICS`): the SYCL agent brackets each
//! command with an event-based query (crates/offtrace-agent/src/metrics.rs); here the range
//! profiler itself does the bracketing. It runs in auto-range mode with kernel replay on each
//! CUDA context that launches a kernel, so every kernel launched on it is one range with its own
//! values (`offtrace_metrics::cupti::RangeProfiler`).
//!
//! Everything happens on the application's own threads, inside the driver API callbacks of its
//! launches, as NVIDIA's CUPTI samples profile from callbacks (`profiling_injection`,
//! `callback_profiling`): no thread of this module is waited for (the earlier design, a thread of
//! its own started from the context callback while that callback waited, stalled inside CUPTI or
//! crashed the program on the H100: docs/metrics-evidence/rangeq/). One caveat, not tried: a
//! launch that ends a batch holds this module's lock across CUDA and CUPTI calls, which other
//! threads launching on the same context then wait for.
//!
//! - **Start**: at the API enter of the first kernel launch in a context ([`launch_enter`]),
//!   with that context current: enable, configure and start the profiler for it. The kernel
//!   being launched is its first range.
//! - **Launches**: each successful launch (the callback's exit, [`launched`]) appends the
//!   services' correlation id of the API call that launched it and the kernel's name to its
//!   context's list, in launch order: the order of the ranges.
//! - **Batches**: when a context's launches reach [`MAX_RANGES`] − [`MARGIN`] (room left for
//!   kernels without a launch callback), at that launch's exit: synchronise, stop, decode,
//!   emit, re-initialise the counter data and start again; a long program is not limited to one
//!   image of ranges. CUPTI 13 numbers auto ranges rather than naming them, so ranges are
//!   paired with launches by count, and work that may be ranges without a launch callback (a
//!   graph launch's kernel nodes, memsets and copies) never shares a batch with launches
//!   ([`other_work`]).
//! - **End** (context destroy, [`context_destroying`]; an exit handler registered at the first
//!   start, so it runs before CUDA's and CUPTI's; the injection's finish): make the context
//!   current, synchronise, stop, decode, emit, disable.
//!
//! Emitting pairs range *i* of a batch with a launch ([`pair`]) and writes each metric as a
//! `COUNTER` sample carrying the **kernel's correlation id**, counters
//! `cupti.range_profiler.<metric>.per_command` — what the report's `command_metrics` section
//! joins with the kernels' launch records.
//!
//! The profiler must be CUPTI's copy the backend traces with: [`start_from_env`] makes
//! `offtrace-metrics` load the backend's file, and the start checks that both call one loaded
//! object (else it says so and does not start). A profiler that cannot start is reported in one
//! line with CUPTI's reason; the program runs on traced without the values. Other groups named
//! in `OFFTRACE_QUERY_METRICS` are not hosted by the CUDA injection: said once, ignored.
//!
//! **No device activity beside it**: with the range profiler running, CUPTI's own activity
//! thread crashed a CUDA runtime program on the H100 (CUDA 13.0, driver 580: SIGSEGV inside
//! libcupti at exit with kernel, copy and memset activity on; glibc's "free(): invalid pointer"
//! mid-run with copies and memsets only; clean with no activity kind; and CUPTI delivered no
//! kernel records under kernel replay anyway). So while it is asked for, the backend enables no
//! activity kind and says so once ([`NO_ACTIVITY_MESSAGE`]): the trace has the API calls and
//! each launch (`KERNEL_DISPATCH` at launch, with the kernel's values), no device times.
//!
//! Kernel replay serialises the program's kernels and runs each as many times as the metrics
//! need passes (the values are per kernel, in isolation, as `ncu` measures them): the program
//! runs slower under `--query-metrics cupti.range_profiler`, its results unchanged.
//!
//! `OFFTRACE_RANGEQ_LOG=FILE` writes each step, each range, the launch and correlation it was
//! emitted with and its values there (CSV), for the evidence runs; `OFFTRACE_RANGEQ_MAX_RANGES`
//! sets the ranges per batch; `OFFTRACE_RANGEQ_BACKTRACE=1` writes a stack to stderr on a fatal
//! signal (the GPU machine has no debugger; how the crashes above were placed in libcupti).

use std::ffi::{CString, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use offtrace_core::{CounterPayload, CounterValueType, Kind, Payload, Phase, counter_op, emit_activity, emit_instant};
use offtrace_metrics::cupti::{RANGE_METRICS, RangeProfiler, RangeValues};

/// The group this module hosts.
pub const GROUP: &str = "cupti.range_profiler";
/// Ranges one batch of the profiler keeps (CUPTI drops kernels beyond; the counter data image
/// grows with it). Ran on the H100 (docs/metrics.md), as did 64.
pub const MAX_RANGES: usize = 256;
/// A batch is decoded when its launches reach `max − MARGIN`: room for ranges that no launch
/// callback or other work ([`other_work`]) accounts for.
pub const MARGIN: usize = 32;

/// Whether `OFFTRACE_QUERY_METRICS` names the range profiler, and what else it names (groups
/// this injection does not host).
pub fn parse(spec: &str) -> (bool, Vec<String>) {
    let mut wanted = false;
    let mut other = Vec::new();
    for n in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if n.split_once('@').map_or(n, |(g, _)| g) == GROUP {
            wanted = true;
        } else if !offtrace_metrics::opencl::is_layer_group(n) {
            // (The OpenCL layer's group is the layer's to collect.)
            other.push(n.to_owned());
        }
    }
    (wanted, other)
}

/// The identifier of a demangled kernel name: `void ns::scale<float>(float*, int)` → `scale`.
pub fn identifier(demangled: &str) -> &str {
    let head = demangled.split('(').next().unwrap_or(demangled);
    let head = head.split('<').next().unwrap_or(head);
    let head = head.rsplit("::").next().unwrap_or(head);
    head.rsplit(' ').next().unwrap_or(head).trim()
}

/// Whether range `range` (CUPTI's range name) may be the kernel launched as `launch`
/// (demangled). Unknown names match, and so do numbers: CUPTI 13 names auto ranges by their
/// index (docs/metrics.md), older ones by the kernel's mangled name.
pub fn same_kernel(range: &str, launch: &str) -> bool {
    let id = identifier(launch);
    range.is_empty() || id.is_empty() || range.bytes().all(|b| b.is_ascii_digit()) || range.contains(id)
}

/// Pairs the decoded ranges (their names) with the launches recorded (services' correlation
/// id, 0 when not found, and kernel name; in launch order). Returns, per range, the index of
/// its launch (`None`: no launch for it).
///
/// Equal counts with every name agreeing pair one to one. Otherwise the difference lies at one
/// end: launches that raced the profiler's start are at the front, ranges CUPTI dropped past
/// `max` are at the back; so when the profiler kept fewer than `max` ranges the lists are walked
/// from their ends, else from their starts. Walking, a range pairs with the next launch when
/// the names agree, and is left without one when they do not (a kernel with no launch callback,
/// e.g. a CUDA graph's node).
pub fn pair(ranges: &[String], launches: &[(u64, String)], max: usize) -> Vec<Option<usize>> {
    let mut out = vec![None; ranges.len()];
    if ranges.len() == launches.len() && ranges.iter().zip(launches).all(|(r, l)| same_kernel(r, &l.1)) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = Some(i);
        }
        return out;
    }
    let walk =
        |order: &mut dyn Iterator<Item = usize>, next: &mut dyn FnMut() -> Option<usize>, out: &mut [Option<usize>]| {
            let mut j = next();
            for i in order {
                let Some(lj) = j else { break };
                if same_kernel(&ranges[i], &launches[lj].1) {
                    out[i] = Some(lj);
                    j = next();
                }
            }
        };
    if ranges.len() >= max {
        let mut it = 0..launches.len();
        walk(&mut (0..ranges.len()), &mut || it.next(), &mut out);
    } else {
        let mut it = (0..launches.len()).rev();
        walk(&mut (0..ranges.len()).rev(), &mut || it.next(), &mut out);
    }
    out
}

/// The profiler of one context and the launches of its current batch.
struct Profiled {
    ctx: usize,
    gpu: u32,
    /// The metric device (`offtrace_metrics` catalog id) the counters are defined on.
    device: u32,
    profiler: RangeProfiler,
    max: usize,
    launches: Vec<(u64, String)>,
    batches: usize,
    /// The current batch holds other work's ranges ([`other_work`]).
    other: bool,
}

/// `OFFTRACE_QUERY_METRICS` names the range profiler: launches start it in their context.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Some context's profiler runs: launches are recorded.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PROFILED: Mutex<Vec<Profiled>> = Mutex::new(Vec::new());
/// Contexts a launch has started (or tried to start) the profiler in.
static SEEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Contexts whose start failed, or whose profiler failed later.
static REFUSED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static AT_EXIT: AtomicBool = AtomicBool::new(false);
/// Metric devices whose counters are defined in the trace.
static DEFINED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// The file and load address of the CUPTI the backend traces with.
static BACKEND_CUPTI: Mutex<Option<(String, usize)>> = Mutex::new(None);
/// How the injection says things (its one-line stderr messages).
static SAY: Mutex<Option<fn(&str)>> = Mutex::new(None);

/// Kernels one batch keeps: `OFFTRACE_RANGEQ_MAX_RANGES` (at least `2 × MARGIN`), else
/// [`MAX_RANGES`].
fn max_ranges() -> usize {
    std::env::var("OFFTRACE_RANGEQ_MAX_RANGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(|n: usize| n.max(2 * MARGIN))
        .unwrap_or(MAX_RANGES)
}

/// `OFFTRACE_RANGEQ_LOG` (read once).
fn log_path() -> Option<&'static std::ffi::OsString> {
    static PATH: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| std::env::var_os("OFFTRACE_RANGEQ_LOG")).as_ref()
}

/// Appends `line` to `OFFTRACE_RANGEQ_LOG` (the evidence runs; nothing when unset).
fn log(line: &str) {
    use std::io::Write;
    if let Some(path) = log_path()
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn say(m: &str) {
    log(&format!("# {m}"));
    match *lock(&SAY) {
        Some(f) => f(m),
        None => eprintln!("offtrace: {m}"),
    }
}

/// Reads `OFFTRACE_QUERY_METRICS` (called once the recorder runs). `cupti` is the file and load
/// address of the CUPTI the backend loaded (`offtrace_metrics::cupti::object_of` of one of its
/// functions): `offtrace-metrics` is pointed at the same file.
pub fn start_from_env(say_fn: fn(&str), cupti: Option<(String, usize)>) {
    *lock(&SAY) = Some(say_fn);
    let Ok(spec) = std::env::var("OFFTRACE_QUERY_METRICS") else { return };
    let (wanted, other) = parse(&spec);
    if !other.is_empty() {
        say(&format!(
            "query metrics {}: only {GROUP} is measured per kernel in a CUDA program; those are not recorded",
            other.join(",")
        ));
    }
    if let Some((path, _)) = &cupti {
        offtrace_metrics::cupti::prefer_library(path);
    }
    *lock(&BACKEND_CUPTI) = cupti;
    if wanted && std::env::var("OFFTRACE_RANGEQ_BACKTRACE").is_ok_and(|v| v == "1") {
        install_crash_backtrace();
    }
    ARMED.store(wanted, Ordering::Release);
    log(&format!("# {spec}: {}", if wanted { "armed: starts at each context's first launch" } else { "not armed" }));
}

unsafe extern "C" {
    fn backtrace(buffer: *mut *mut c_void, size: libc::c_int) -> libc::c_int;
    fn backtrace_symbols_fd(buffer: *const *mut c_void, size: libc::c_int, fd: libc::c_int);
}

/// `OFFTRACE_RANGEQ_BACKTRACE=1` (diagnosing a crash on the GPU machine, which has no
/// debugger): a fatal signal writes the thread's stack to stderr (glibc's `backtrace`), then
/// takes its default action.
fn install_crash_backtrace() {
    extern "C" fn on_fatal(sig: libc::c_int) {
        let mut frames = [std::ptr::null_mut::<c_void>(); 64];
        // SAFETY: glibc's backtrace into a local array of its size; backtrace_symbols_fd
        // writes to stderr without allocating; then the default action of the signal.
        unsafe {
            let n = backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
            let msg = b"offtrace: fatal signal, stack:\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            backtrace_symbols_fd(frames.as_ptr(), n, 2);
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    let mut warm = [std::ptr::null_mut::<c_void>(); 1];
    // SAFETY: a first call outside any signal loads what backtrace needs (libgcc_s).
    unsafe { backtrace(warm.as_mut_ptr(), 1) };
    for sig in [libc::SIGSEGV, libc::SIGABRT, libc::SIGBUS] {
        // SAFETY: installing a handler that only makes async-signal-safe calls (above).
        unsafe { libc::signal(sig, on_fatal as *const () as libc::sighandler_t) };
    }
}

/// Whether launches start the profiler in their context (one load on the API enter path).
#[inline]
pub fn armed() -> bool {
    ARMED.load(Ordering::Relaxed)
}

/// Whether launches are being recorded (one load on the launch path).
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// A kernel launch is about to be made on `ctx` (the API enter callback; `ctx` is current on
/// this thread; device ordinal `gpu`): starts the profiler there if this is the context's first.
#[cold]
#[inline(never)]
pub fn launch_enter(ctx: *mut c_void, gpu: u32) {
    if ctx.is_null() || !armed() {
        return;
    }
    if OTHER_PENDING.load(Ordering::Relaxed) {
        end_other_batches(ctx);
    }
    {
        // Held briefly, never across a CUDA or CUPTI call: another thread decoding a batch under
        // PROFILED does not hold up this launch.
        let mut seen = lock(&SEEN);
        if seen.contains(&(ctx as usize)) {
            return;
        }
        seen.push(ctx as usize);
    }
    match start_on(ctx, gpu) {
        Some(p) => {
            lock(&PROFILED).push(p);
            ACTIVE.store(true, Ordering::Release);
            if !AT_EXIT.swap(true, Ordering::AcqRel) {
                // Stop before CUDA and CUPTI tear down: exit handlers run last-registered first,
                // and theirs were registered before this point (as the PM sampler, metrics.rs).
                // SAFETY: registering a plain extern "C" function with libc's atexit.
                unsafe { libc::atexit(stop_at_exit) };
            }
        }
        None => lock(&REFUSED).push(ctx as usize),
    }
}

/// Said once when the range profiler is asked for: the backend then enables no CUPTI activity
/// kind (see the module's doc).
pub const NO_ACTIVITY_MESSAGE: &str = "query metrics cupti.range_profiler: CUDA device activity (kernel, copy and memset times) is not recorded while the range profiler runs (CUPTI's activity tracing beside it crashed programs on the H100, CUDA 13.0); API calls and kernel launches are, with each kernel's values";

/// The message for two CUPTI copies in the process.
pub fn two_cuptis_message(backend: &str, metrics: &str) -> String {
    format!(
        "query metrics {GROUP}: the range profiler would load another CUPTI ({metrics}) than the one tracing this program ({backend}); two CUPTIs in one process each take the driver's callbacks: not started, no per-kernel values recorded, the program is traced without them"
    )
}

/// Enables and starts the profiler on `ctx` (current on this thread).
fn start_on(ctx: *mut c_void, gpu: u32) -> Option<Profiled> {
    log(&format!("# context {ctx:?} on GPU {gpu}: first launch, starting on thread {:?}", std::thread::current().id()));
    if !offtrace_metrics::cupti::available() {
        say(&start_failed_message(gpu, &"no CUPTI with the range profiler", &offtrace_metrics::cupti::last_error()));
        return None;
    }
    let ours = offtrace_metrics::cupti::loaded_library();
    let backend = lock(&BACKEND_CUPTI).clone();
    log(&format!("# CUPTI: backend {backend:?}, range profiler {ours:?}"));
    if let (Some(b), Some(o)) = (&backend, &ours)
        && b.1 != o.1
    {
        say(&two_cuptis_message(&b.0, &o.0));
        return None;
    }
    let names: Vec<String> = RANGE_METRICS.iter().map(|m| m.0.to_owned()).collect();
    let max = max_ranges();
    let started = RangeProfiler::new(ctx, gpu as usize, &names, max).and_then(|mut p| p.start().map(|()| p));
    match started {
        Ok(profiler) => {
            let c = offtrace_metrics::Metrics::global().catalog();
            // The catalog's range-profiler group of this CUDA ordinal gives its metric device.
            let device = c
                .groups
                .iter()
                .find(|g| matches!(g.backend, offtrace_metrics::Backend::CuptiRange(i) if i == gpu as usize))
                .map_or(0, |g| g.info.device);
            log(&format!("# started: {} passes, {max} ranges per batch, metric device {device}", profiler.passes()));
            Some(Profiled {
                ctx: ctx as usize,
                gpu,
                device,
                profiler,
                max,
                launches: Vec::new(),
                batches: 0,
                other: false,
            })
        }
        Err(e) => {
            say(&start_failed_message(gpu, &e, &offtrace_metrics::cupti::last_error()));
            None
        }
    }
}

/// A kernel launch on `ctx` succeeded (the API exit callback, `ctx` current on this thread);
/// `correlation` is the services' id of its API call (0 unknown), `name` the kernel's
/// (demangled) name when known. Decodes the batch when it is full.
pub fn launched(ctx: *mut c_void, correlation: u64, name: Option<&std::ffi::CStr>) {
    if !active() {
        return;
    }
    let ctx = if ctx.is_null() { offtrace_metrics::cupti::current_context() } else { ctx };
    let mut profiled = lock(&PROFILED);
    let Some(i) = profiled.iter().position(|p| p.ctx == ctx as usize) else { return };
    let p = &mut profiled[i];
    p.launches.push((correlation, name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()));
    if p.launches.len() + MARGIN >= p.max {
        cycle(&mut profiled, i);
    }
}

/// Whether the API function `name` may run device work other than a launched kernel: a CUDA
/// graph launch (its kernel nodes), a memset or a copy (CUPTI may run them as kernels of its
/// own). Such work can be ranges with no launch callback.
pub fn is_other_work(name: &str) -> bool {
    let graph = name.starts_with("cuGraph") || name.starts_with("cudaGraph");
    if graph {
        return name.starts_with("cuGraphLaunch") || name.starts_with("cudaGraphLaunch");
    }
    name.contains("Memset") || name.contains("Memcpy")
}

/// Other work ([`is_other_work`]) set going on some context since the last batch: the next
/// launch ends the batch first.
static OTHER_PENDING: AtomicBool = AtomicBool::new(false);

/// An API call running other work on `ctx` is about to be made (`enter`) or returned (API
/// callbacks, `ctx` current). Ranges are paired with launches by count (CUPTI 13 numbers auto
/// ranges rather than naming them), so other work never shares a batch with launches: at the
/// enter, a batch holding launches is decoded; after the exit, the next launch decodes the
/// other work's ranges first (emitted with no values: no launch is theirs; a graph's kernels
/// share the graph launch's correlation).
pub fn other_work(ctx: *mut c_void, enter: bool) {
    if !active() {
        return;
    }
    let ctx = if ctx.is_null() { offtrace_metrics::cupti::current_context() } else { ctx };
    let mut profiled = lock(&PROFILED);
    let Some(i) = profiled.iter().position(|p| p.ctx == ctx as usize) else { return };
    if enter {
        if !profiled[i].launches.is_empty() {
            cycle(&mut profiled, i);
        }
    } else {
        profiled[i].other = true;
        // Relaxed: a hint for this and other threads' next launches; PROFILED holds the truth.
        OTHER_PENDING.store(true, Ordering::Relaxed);
    }
}

/// At a launch's enter: decodes the batches that hold other work's ranges.
#[cold]
#[inline(never)]
fn end_other_batches(ctx: *mut c_void) {
    let mut profiled = lock(&PROFILED);
    if let Some(i) = profiled.iter().position(|p| p.ctx == ctx as usize && p.other) {
        profiled[i].other = false;
        cycle(&mut profiled, i);
    }
    if !profiled.iter().any(|p| p.other) {
        OTHER_PENDING.store(false, Ordering::Relaxed);
    }
}

/// Decodes batch of `profiled[i]` (its context current on this thread) and starts the next;
/// a profiler that fails is dropped (its context's later kernels get no values, said once).
fn cycle(profiled: &mut Vec<Profiled>, i: usize) {
    let p = &mut profiled[i];
    synchronize();
    let ok = decode_batch(p)
        && {
            match p.profiler.start() {
                Ok(()) => true,
                Err(e) => {
                    say(&format!(
                        "query metrics {GROUP}: the range profiler did not restart after {} batches: {e} (CUPTI: {}); later kernels have no values",
                        p.batches,
                        offtrace_metrics::cupti::last_error()
                    ));
                    false
                }
            }
        };
    if !ok {
        let p = profiled.remove(i);
        lock(&REFUSED).push(p.ctx);
        drop(p);
        ACTIVE.store(!profiled.is_empty(), Ordering::Release);
    }
}

/// `ctx` is about to be destroyed (the resource callback): its last batch is decoded and its
/// profiler disabled while it still exists.
pub fn context_destroying(ctx: *mut c_void) {
    if !active() {
        return;
    }
    let mut profiled = lock(&PROFILED);
    let Some(i) = profiled.iter().position(|p| p.ctx == ctx as usize) else { return };
    // A later context at the same address is a new one: its first launch starts again.
    lock(&SEEN).retain(|&c| c != ctx as usize);
    let p = profiled.remove(i);
    ACTIVE.store(!profiled.is_empty(), Ordering::Release);
    drop(profiled);
    finish(p, "context destroyed");
}

/// Stops every profiler, decodes their last batches and emits them (the recorder must still
/// run). Idempotent.
pub fn stop() {
    stop_from("the backend's finish");
}

fn stop_from(from: &str) {
    ARMED.store(false, Ordering::Release);
    ACTIVE.store(false, Ordering::Release);
    let all = std::mem::take(&mut *lock(&PROFILED));
    for p in all {
        finish(p, from);
    }
}

extern "C" fn stop_at_exit() {
    let _ = std::panic::catch_unwind(|| stop_from("exit handler"));
}

/// Decodes `p`'s last batch with its context current, then disables its profiler.
fn finish(mut p: Profiled, from: &str) {
    log(&format!("# {from}: the last batch of context {:#x}", p.ctx));
    let pushed = push_current(p.ctx as *mut c_void);
    synchronize();
    decode_batch(&mut p);
    log(&format!("# context {:#x} (GPU {}): {} batches, profiler disabled", p.ctx, p.gpu, p.batches));
    drop(p);
    if pushed {
        pop_current();
    }
}

/// Stops `p`'s profiler, decodes its ranges, pairs them with the batch's launches and emits
/// the values; the launches are cleared. Returns whether the profiler stopped cleanly.
fn decode_batch(p: &mut Profiled) -> bool {
    let launches = std::mem::take(&mut p.launches);
    p.batches += 1;
    match p.profiler.stop() {
        Ok(ranges) => {
            let names: Vec<String> = ranges.iter().map(|r| r.name.clone()).collect();
            let paired = pair(&names, &launches, p.max);
            let pairs: Vec<Option<u64>> = paired.iter().map(|j| j.map(|j| launches[j].0).filter(|&c| c != 0)).collect();
            let n = emit(&ranges, &pairs, p.device);
            if log_path().is_some() {
                // The evidence runs: each range, the correlation it went out with, its values.
                let mut text = format!(
                    "# batch {}: {} ranges, {} launches recorded, {n} kernels with values\nbatch,range,name,kernel,correlation,{}\n",
                    p.batches,
                    ranges.len(),
                    launches.len(),
                    RANGE_METRICS.map(|m| m.0).join(",")
                );
                for (i, ((rv, c), j)) in ranges.iter().zip(&pairs).zip(&paired).enumerate() {
                    let v: Vec<String> = rv.values.iter().map(f64::to_string).collect();
                    let kernel = j.map_or("", |j| launches[j].1.as_str()).replace(',', ";");
                    text.push_str(&format!(
                        "{},{i},{},{kernel},{},{}\n",
                        p.batches,
                        rv.name,
                        c.unwrap_or(0),
                        v.join(",")
                    ));
                }
                log(text.trim_end());
            }
            if ranges.len() >= p.max {
                say(&format!(
                    "query metrics {GROUP}: a batch of {} ranges was full (kernels launched without a launch callback, e.g. graph nodes); kernels past it have no values (OFFTRACE_RANGEQ_MAX_RANGES)",
                    p.max
                ));
            }
            true
        }
        Err(e) => {
            say(&format!(
                "query metrics {GROUP}: the range profiler's values could not be read: {e} (CUPTI: {}); no per-kernel values for {} launches",
                offtrace_metrics::cupti::last_error(),
                launches.len()
            ));
            false
        }
    }
}

/// A driver function of the loaded libcuda (a context exists, so it is loaded).
fn driver_fn(name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: RTLD_NOLOAD finds the loaded libcuda only; dlsym with a NUL-terminated name.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if h.is_null() { std::ptr::null_mut() } else { libc::dlsym(h, name.as_ptr()) }
    }
}

/// Makes `ctx` current on this thread on top of what was (`cuCtxPushCurrent`); false when not
/// done.
fn push_current(ctx: *mut c_void) -> bool {
    let p = driver_fn(c"cuCtxPushCurrent_v2");
    if p.is_null() || ctx.is_null() {
        return false;
    }
    // SAFETY: `CUresult cuCtxPushCurrent(CUcontext)` (cuda.h); ctx is a live context.
    let f: unsafe extern "C" fn(*mut c_void) -> i32 = unsafe { std::mem::transmute(p) };
    // SAFETY: as above.
    unsafe { f(ctx) == 0 }
}

/// Undoes [`push_current`]: the thread's previous context is current again.
fn pop_current() {
    let p = driver_fn(c"cuCtxPopCurrent_v2");
    if !p.is_null() {
        // SAFETY: `CUresult cuCtxPopCurrent(CUcontext*)` (cuda.h); the out-pointer is valid.
        let f: unsafe extern "C" fn(*mut *mut c_void) -> i32 = unsafe { std::mem::transmute(p) };
        let mut old = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { f(&mut old) };
    }
}

/// `cuCtxSynchronize` on the current context: the ranges are complete once the kernels are.
fn synchronize() {
    let p = driver_fn(c"cuCtxSynchronize");
    if !p.is_null() {
        // SAFETY: `CUresult cuCtxSynchronize(void)` (cuda.h).
        let f: unsafe extern "C" fn() -> i32 = unsafe { std::mem::transmute(p) };
        // SAFETY: as above.
        unsafe { f() };
    }
}

/// The message for a profiler that could not start.
pub fn start_failed_message(gpu: u32, e: &dyn std::fmt::Display, cupti: &str) -> String {
    let why = if cupti.is_empty() { String::new() } else { format!(" (CUPTI: {cupti})") };
    format!(
        "query metrics {GROUP}: the range profiler did not start on GPU {gpu}: {e}{why}; it cannot run beside another profiler of the device; no per-kernel values recorded, the program is traced without them"
    )
}

/// Counter ids of per-kernel values: the agent's per-command tag (`0x4d51…`), the metric device,
/// group field 0xffff (apart from the catalog's group indices the agent uses), the metric.
fn counter_id(metric_device: u32, metric: usize) -> u64 {
    0x4d51_0000_0000_0000 | (u64::from(metric_device & 0xffff) << 32) | (0xffff << 16) | metric as u64
}

/// Emits one kernel's values per `pairs`; returns how many kernels got values.
fn emit(ranges: &[RangeValues], pairs: &[Option<u64>], metric_device: u32) -> usize {
    let device = offtrace_metrics::device_handle(metric_device);
    let cstr = |s: String| CString::new(s.replace('\0', "")).unwrap_or_default();
    let first = {
        let mut defined = lock(&DEFINED);
        let first = !defined.contains(&metric_device);
        if first {
            defined.push(metric_device);
        }
        first
    };
    if first {
        // Name the metric device (the sampler does the same; a repeat is harmless).
        offtrace_metrics::define_devices(offtrace_metrics::Metrics::global(), &[metric_device]);
        for (mi, m) in RANGE_METRICS.iter().enumerate() {
            let (name, unit) = (cstr(format!("{GROUP}.{}.per_command", m.0)), cstr(m.2.to_owned()));
            let p = CounterPayload {
                counter: counter_id(metric_device, mi),
                device,
                value: CounterValueType::F64 as u64,
                name: name.as_ptr(),
                unit: unit.as_ptr(),
                ts: 0,
            };
            emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
        }
    }
    let now = offtrace_metrics::monotonic_ns();
    let mut n = 0;
    for (r, c) in ranges.iter().zip(pairs) {
        let Some(correlation) = *c else { continue };
        for (mi, v) in r.values.iter().enumerate().take(RANGE_METRICS.len()) {
            let p = CounterPayload {
                counter: counter_id(metric_device, mi),
                device,
                value: v.to_bits(),
                name: std::ptr::null(),
                unit: std::ptr::null(),
                ts: 0,
            };
            emit_activity(Kind::Counter, counter_op::SAMPLE, correlation, now, now, Payload::Counter(&p));
        }
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_finds_the_range_profiler_and_the_rest() {
        assert_eq!(parse("cupti.range_profiler"), (true, vec![]));
        assert_eq!(parse(" cupti.range_profiler@1 , cpu.sw"), (true, vec!["cpu.sw".to_owned()]));
        assert_eq!(parse("cpu.sw"), (false, vec!["cpu.sw".to_owned()]));
        assert_eq!(parse(""), (false, vec![]));
        assert_eq!(parse("cupti.pm_sampling"), (false, vec!["cupti.pm_sampling".to_owned()]));
        assert_eq!(parse("codeplay,cupti.range_profiler"), (true, vec![]));
    }

    fn l(v: &[(u64, &str)]) -> Vec<(u64, String)> {
        v.iter().map(|&(c, n)| (c, n.to_owned())).collect()
    }

    fn r(v: &[&str]) -> Vec<String> {
        v.iter().map(|&n| n.to_owned()).collect()
    }

    /// `pair`'s launch indices as the correlations emitted (0: none).
    fn pair_c(ranges: &[String], launches: &[(u64, String)], max: usize) -> Vec<Option<u64>> {
        pair(ranges, launches, max).iter().map(|j| j.map(|j| launches[j].0).filter(|&c| c != 0)).collect()
    }

    const SCALE: &str = "scale(float*, float const*, float, int)";
    const ADD: &str = "void ns::add<float>(float*, float const*, int)";

    #[test]
    fn identifiers_of_demangled_names() {
        assert_eq!(identifier(SCALE), "scale");
        assert_eq!(identifier(ADD), "add");
        assert_eq!(identifier("saxpy"), "saxpy");
        assert!(same_kernel("_Z5scalePfPKffi", SCALE));
        assert!(!same_kernel("_Z5scalePfPKffi", ADD));
        assert!(same_kernel("", ADD) && same_kernel("saxpy", ""));
        // CUPTI 13 numbers auto ranges: a number may be any kernel.
        assert!(same_kernel("17", ADD) && !same_kernel("17x", ADD));
        assert!(is_other_work("cudaGraphLaunch_ptsz") && is_other_work("cuGraphLaunch"));
        assert!(is_other_work("cudaMemsetAsync") && is_other_work("cuMemcpyHtoD_v2") && is_other_work("cudaMemcpy2D"));
        assert!(!is_other_work("cuLaunchKernel") && !is_other_work("cudaGraphInstantiate"));
        assert!(!is_other_work("cudaGraphAddMemsetNode") && !is_other_work("cuGraphAddMemcpyNode"));
    }

    #[test]
    fn equal_counts_pair_one_to_one() {
        assert_eq!(
            pair_c(&r(&["saxpy", "fma_loop", "saxpy"]), &l(&[(11, "saxpy"), (0, "fma_loop"), (13, "saxpy")]), 64),
            vec![Some(11), None, Some(13)]
        );
        assert_eq!(pair_c(&[], &[], 64), Vec::<Option<u64>>::new());
    }

    #[test]
    fn a_start_race_pairs_from_the_end() {
        // One launch recorded before its kernel was profiled: the ranges are the last two.
        assert_eq!(pair_c(&r(&["a", "a"]), &l(&[(10, "a"), (20, "a"), (30, "a")]), 64), vec![Some(20), Some(30)]);
        // One kernel profiled before launches were recorded: the first range has no launch.
        assert_eq!(pair_c(&r(&["a", "a", "a"]), &l(&[(20, "a"), (30, "a")]), 64), vec![None, Some(20), Some(30)]);
    }

    #[test]
    fn ranges_without_a_launch_are_stepped_over() {
        // A graph's kernel node (no launch callback) between two launches.
        let ranges = r(&["_Z5scalePfPKffi", "_Z10reduce_sumPfPKfi", "_Z3addPfPKfi"]);
        let launches = l(&[(7, SCALE), (9, "add(float*, float const*, int)")]);
        assert_eq!(pair_c(&ranges, &launches, 64), vec![Some(7), None, Some(9)]);
    }

    #[test]
    fn a_full_profiler_pairs_from_the_start() {
        // CUPTI kept the first 2 (max) of 4 kernels.
        assert_eq!(
            pair_c(&r(&["a", "b"]), &l(&[(10, "a"), (20, "b"), (30, "a"), (40, "b")]), 2),
            vec![Some(10), Some(20)]
        );
    }

    #[test]
    fn counter_ids_stay_apart_from_the_agents() {
        // The agent's per-command ids use the catalog's group index (< 0xffff groups).
        assert_eq!(counter_id(1, 3) >> 48, 0x4d51);
        assert_eq!((counter_id(1, 3) >> 16) & 0xffff, 0xffff);
        assert_ne!(counter_id(1, 0), counter_id(1, 1));
        assert_ne!(counter_id(1, 0), counter_id(2, 0));
    }

    /// The start from the environment is once per process: each test of it runs in a process
    /// of its own, with the environment it reads.
    #[test]
    fn a_profiler_that_cannot_start_says_so_in_one_line_and_is_not_retried() {
        offtrace_testing::in_own_process(
            "range_query::tests::a_profiler_that_cannot_start_says_so_in_one_line_and_is_not_retried",
            &[("OFFTRACE_QUERY_METRICS", "cupti.range_profiler")],
            a_profiler_that_cannot_start_says_so_in_one_line_and_is_not_retried_alone,
        );
    }

    fn a_profiler_that_cannot_start_says_so_in_one_line_and_is_not_retried_alone() {
        if offtrace_metrics::cupti::available() {
            return; // a GPU machine: a made-up context is not given to a real CUPTI
        }
        static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn say(m: &str) {
            lock(&SAID).push(m.to_owned());
        }
        start_from_env(say, None);
        assert!(armed() && !active());
        // No CUPTI here: the start fails.
        let ctx = 0x1000 as *mut c_void;
        launch_enter(ctx, 0);
        launch_enter(ctx, 0);
        let said = lock(&SAID).clone();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("query metrics cupti.range_profiler: the range profiler did not start on GPU 0"),
            "{said:?}"
        );
        assert!(said[0].contains("no per-kernel values recorded") && !said[0].contains('\n'), "{said:?}");
        assert!(!active() && lock(&PROFILED).is_empty() && lock(&REFUSED).contains(&0x1000));
        // Launches record nothing, a destroy and the stop find nothing: no panic, nothing said.
        launched(ctx, 7, None);
        context_destroying(ctx);
        stop();
        assert!(!armed() && lock(&SAID).len() == 1);
    }

    #[test]
    fn other_groups_are_said_once_and_nothing_is_armed_without_the_range_profiler() {
        offtrace_testing::in_own_process(
            "range_query::tests::other_groups_are_said_once_and_nothing_is_armed_without_the_range_profiler",
            &[("OFFTRACE_QUERY_METRICS", "cpu.sw")],
            other_groups_are_said_once_and_nothing_is_armed_without_the_range_profiler_alone,
        );
    }

    fn other_groups_are_said_once_and_nothing_is_armed_without_the_range_profiler_alone() {
        static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn say(m: &str) {
            lock(&SAID).push(m.to_owned());
        }
        start_from_env(say, None);
        let said = lock(&SAID).clone();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("cpu.sw") && said[0].contains("only cupti.range_profiler"), "{said:?}");
        assert!(!armed());
        launch_enter(0x2000 as *mut c_void, 0);
        assert!(!active() && lock(&REFUSED).is_empty());
    }

    #[test]
    fn the_missing_device_activity_is_said_in_one_line() {
        let m = NO_ACTIVITY_MESSAGE;
        assert!(m.starts_with("query metrics cupti.range_profiler: ") && !m.contains('\n'), "{m}");
        assert!(m.contains("not recorded") && m.contains("values"), "{m}");
    }

    #[test]
    fn two_cuptis_are_refused_in_one_line() {
        let m = two_cuptis_message("/usr/local/cuda/lib64/libcupti.so.13", "/opt/x/libcupti.so.13");
        assert!(m.contains("/opt/x/libcupti.so.13") && m.contains("not started") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn the_message_carries_cuptis_reason() {
        let m = start_failed_message(1, &"UNKNOWN", "cuptiRangeProfilerEnable: 17 CUPTI_ERROR_NOT_COMPATIBLE");
        assert!(m.contains("GPU 1: UNKNOWN (CUPTI: cuptiRangeProfilerEnable: 17 CUPTI_ERROR_NOT_COMPATIBLE)"), "{m}");
    }
}
