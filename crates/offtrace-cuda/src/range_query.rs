//! Per-kernel values of CUPTI's range profiler in the CUDA trace (`offtrace record
//! --query-metrics cupti.range_profiler`, `OFFTRACE_QUERY_METRICS`): the SYCL agent brackets each
//! command with an event-based query (crates/offtrace-agent/src/metrics.rs); here the range
//! profiler itself does the bracketing. It runs in auto-range mode with kernel replay on the
//! program's first CUDA context, so every kernel launched on it is one range with its own values
//! (`offtrace_metrics::cupti::RangeProfiler`).
//!
//! - **Start**: at the first context (the resource callback) on a thread of this module (a CUPTI
//!   callback must not call into CUPTI's profiler), with that context made current there. The
//!   callback waits up to [`START_WAIT`] for it, so the program's first kernels are ranges too.
//! - **Launches**: while the profiler runs, each successful kernel launch (the driver launch
//!   callback's exit) appends the services' correlation id of the API call that launched it
//!   (the CUPTI correlation → services id map), in launch order: the order of the ranges.
//! - **Stop** (before CUDA tears down: an exit handler registered after CUDA's; or the
//!   injection's finish): synchronise the context, decode the ranges, pair range *i* with a
//!   launch ([`pair`]), and emit each metric as a `COUNTER` sample carrying the **kernel's
//!   correlation id**, counters `cupti.range_profiler.<metric>.per_command` — what the report's
//!   `command_metrics` section joins with the kernels' device activity.
//!
//! A profiler that cannot start (CUPTI refuses the range profiler beside this process's
//! activity tracing, another profiler holds the device, no CUPTI) is reported in one line on
//! stderr with CUPTI's reason; the program runs on traced without the values. Other groups named
//! in `OFFTRACE_QUERY_METRICS` are not hosted by the CUDA injection: said once, ignored.
//! **Off unless `OFFTRACE_RANGEQ_EXPERIMENTAL=1`** (then [`off_message`] is said instead): on
//! the H100 (CUDA 13.0, driver 580; docs/metrics-evidence/rangeq/) the start stalled inside
//! `cuptiRangeProfilerCounterDataImageInitialize` with 4096 ranges, and with 64 it started and
//! the program then died of SIGSEGV before the stop. Never hurting the program comes first; the
//! path stays for the investigation (which CUPTI call, which thread; beside activity tracing or
//! not).
//!
//! `OFFTRACE_RANGEQ_LOG=FILE` writes each range, the correlation it was emitted with and its
//! values there (CSV) at the stop, for the evidence runs.

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use offtrace_core::{CounterPayload, CounterValueType, Kind, Payload, Phase, counter_op, emit_activity, emit_instant};
use offtrace_metrics::cupti::{RANGE_METRICS, RangeProfiler, RangeValues};

/// The group this module hosts.
pub const GROUP: &str = "cupti.range_profiler";
/// Kernels one run of the profiler keeps (CUPTI drops ranges beyond; the counter data image
/// grows with it: a few KiB per range for 4 metrics).
pub const MAX_RANGES: usize = 4096;
/// How long the first context's callback waits for the profiler to start.
pub const START_WAIT: Duration = Duration::from_secs(2);

/// Whether `OFFTRACE_QUERY_METRICS` names the range profiler, and what else it names (groups
/// this injection does not host).
pub fn parse(spec: &str) -> (bool, Vec<String>) {
    let mut wanted = false;
    let mut other = Vec::new();
    for n in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if n.split_once('@').map_or(n, |(g, _)| g) == GROUP {
            wanted = true;
        } else {
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

/// Whether range `range` (CUPTI's range name: the kernel's name, mangled in auto-range mode)
/// may be the kernel launched as `launch` (demangled). Unknown names match.
pub fn same_kernel(range: &str, launch: &str) -> bool {
    let id = identifier(launch);
    range.is_empty() || id.is_empty() || range.contains(id)
}

/// Pairs the decoded ranges (their names) with the launches recorded (services' correlation
/// id, 0 when not found, and kernel name; in launch order). Returns, per range, the
/// correlation to emit it with (`None`: no launch for it).
///
/// Equal counts with every name agreeing pair one to one. Otherwise the difference lies at one
/// end: launches that raced the profiler's start are at the front, ranges CUPTI dropped past
/// `max` are at the back; so when the profiler kept fewer than `max` ranges the lists are walked
/// from their ends, else from their starts. Walking, a range pairs with the next launch when
/// the names agree, and is left without one when they do not (a kernel with no launch callback,
/// e.g. a CUDA graph's node).
pub fn pair(ranges: &[String], launches: &[(u64, String)], max: usize) -> Vec<Option<u64>> {
    let nz = |c: u64| (c != 0).then_some(c);
    let mut out = vec![None; ranges.len()];
    if ranges.len() == launches.len() && ranges.iter().zip(launches).all(|(r, l)| same_kernel(r, &l.1)) {
        for (o, l) in out.iter_mut().zip(launches) {
            *o = nz(l.0);
        }
        return out;
    }
    let walk =
        |order: &mut dyn Iterator<Item = usize>, next: &mut dyn FnMut() -> Option<usize>, out: &mut [Option<u64>]| {
            let mut j = next();
            for i in order {
                let Some(lj) = j else { break };
                if same_kernel(&ranges[i], &launches[lj].1) {
                    out[i] = nz(launches[lj].0);
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

struct Running {
    profiler: RangeProfiler,
    ctx: usize,
    /// The metric device (`offtrace_metrics` catalog id) the counters are defined on.
    device: u32,
    max: usize,
}

/// The plan waits for the first context.
static ARMED: AtomicBool = AtomicBool::new(false);
/// Launches are recorded (the profiler runs).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static LAUNCHES: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
static RUNNING: Mutex<Option<Running>> = Mutex::new(None);
static AT_EXIT: AtomicBool = AtomicBool::new(false);
/// A start is under way on the profiler's thread (what it is doing: [`STEP`]).
static STARTING: AtomicBool = AtomicBool::new(false);
static STEP: Mutex<&str> = Mutex::new("");

fn step(s: &'static str) {
    *lock(&STEP) = s;
    log(&format!("# {s}"));
}

/// Kernels one run keeps: `OFFTRACE_RANGEQ_MAX_RANGES`, else [`MAX_RANGES`].
fn max_ranges() -> usize {
    std::env::var("OFFTRACE_RANGEQ_MAX_RANGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_RANGES)
}

/// Appends `line` to `OFFTRACE_RANGEQ_LOG` (the evidence runs; nothing when unset).
fn log(line: &str) {
    use std::io::Write;
    if let Some(path) = std::env::var_os("OFFTRACE_RANGEQ_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads `OFFTRACE_QUERY_METRICS` (called once the recorder runs).
pub fn start_from_env(say: fn(&str)) {
    let Ok(spec) = std::env::var("OFFTRACE_QUERY_METRICS") else { return };
    let (wanted, other) = parse(&spec);
    if !other.is_empty() {
        say(&format!(
            "query metrics {}: only {GROUP} is measured per kernel in a CUDA program; those are not recorded",
            other.join(",")
        ));
    }
    let wanted = wanted && {
        let on = std::env::var("OFFTRACE_RANGEQ_EXPERIMENTAL").is_ok_and(|v| v == "1");
        if !on {
            say(&off_message());
        }
        on
    };
    ARMED.store(wanted, Ordering::Release);
    log(&format!("# {spec}: {}", if wanted { "armed for the first context" } else { "not armed" }));
}

/// Whether launches are being recorded (one load on the launch path).
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// A kernel launch succeeded; `correlation` is the services' id of its API call (0 unknown),
/// `name` the kernel's (demangled) name when known.
pub fn launched(correlation: u64, name: Option<&std::ffi::CStr>) {
    if active() {
        let name = name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        lock(&LAUNCHES).push((correlation, name));
    }
}

/// The driver's `cuCtxSetCurrent` / `cuCtxSynchronize` (libcuda is loaded: a context exists).
fn driver_fn(name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: RTLD_NOLOAD finds the loaded libcuda only; dlsym with a NUL-terminated name.
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if h.is_null() { std::ptr::null_mut() } else { libc::dlsym(h, name.as_ptr()) }
    }
}

fn set_current(ctx: *mut c_void) -> bool {
    let p = driver_fn(c"cuCtxSetCurrent");
    if p.is_null() {
        return false;
    }
    // SAFETY: `CUresult cuCtxSetCurrent(CUcontext)` (cuda.h); ctx is a live context.
    let f: unsafe extern "C" fn(*mut c_void) -> i32 = unsafe { std::mem::transmute(p) };
    // SAFETY: as above.
    unsafe { f(ctx) == 0 }
}

fn synchronize() {
    let p = driver_fn(c"cuCtxSynchronize");
    if !p.is_null() {
        // SAFETY: `CUresult cuCtxSynchronize(void)` (cuda.h), on the context made current.
        let f: unsafe extern "C" fn() -> i32 = unsafe { std::mem::transmute(p) };
        // SAFETY: as above.
        unsafe { f() };
    }
}

/// The message for a profiler that could not start.
pub fn start_failed_message(gpu: u32, e: &dyn std::fmt::Display, cupti: &str) -> String {
    let why = if cupti.is_empty() { String::new() } else { format!(" (CUPTI: {cupti})") };
    format!(
        "query metrics {GROUP}: the range profiler did not start on GPU {gpu}: {e}{why}; it cannot run beside another profiler of the device, and some CUPTI versions refuse it beside activity tracing; no per-kernel values recorded, the program is traced without them"
    )
}

/// Enables and starts the profiler on `ctx` (device ordinal `gpu`); on this thread.
fn start_on(ctx: *mut c_void, gpu: u32, say: fn(&str)) {
    if !ctx.is_null() && !set_current(ctx) {
        say(&format!("query metrics {GROUP}: cannot make the context current; no per-kernel values recorded"));
        return;
    }
    step("enabling the range profiler (cuptiProfilerInitialize, cuptiRangeProfilerEnable, configuration)");
    let names: Vec<String> = RANGE_METRICS.iter().map(|m| m.0.to_owned()).collect();
    let max = max_ranges();
    let started = RangeProfiler::new(ctx, gpu as usize, &names, max).and_then(|mut p| {
        step("starting the range profiler (counter data image, cuptiRangeProfilerSetConfig, cuptiRangeProfilerStart)");
        p.start().map(|()| p)
    });
    match started {
        Ok(profiler) => {
            step("range profiler started");
            let c = offtrace_metrics::Metrics::global().catalog();
            // The catalog's range-profiler group of this CUDA ordinal gives its metric device.
            let device = c
                .groups
                .iter()
                .find(|g| matches!(g.backend, offtrace_metrics::Backend::CuptiRange(i) if i == gpu as usize))
                .map_or(0, |g| g.info.device);
            log(&format!("# metric device {device}"));
            *lock(&RUNNING) = Some(Running { profiler, ctx: ctx as usize, device, max });
            ACTIVE.store(true, Ordering::Release);
            if !AT_EXIT.swap(true, Ordering::AcqRel) {
                // Stop before CUDA and CUPTI tear down (exit handlers run last-registered first;
                // theirs were registered before this point), as the PM sampler (metrics.rs).
                // SAFETY: registering a plain extern "C" function with libc's atexit.
                unsafe { libc::atexit(stop_at_exit) };
            }
        }
        Err(e) => {
            let m = start_failed_message(gpu, &e, &offtrace_metrics::cupti::last_error());
            log(&format!("# {m}"));
            say(&m);
        }
    }
}

extern "C" fn stop_at_exit() {
    let _ = std::panic::catch_unwind(stop);
}

/// The first CUDA context was created (resource callback): starts the profiler on a thread and
/// waits for it up to [`START_WAIT`]. Cheap when nothing is armed.
pub fn context_created(ctx: *mut c_void, gpu: u32, say: fn(&str)) {
    if !ARMED.swap(false, Ordering::AcqRel) {
        return;
    }
    log(&format!("# first context {ctx:?} on GPU {gpu}: starting"));
    let (tx, rx) = mpsc::channel();
    let ctx_addr = ctx as usize;
    STARTING.store(true, Ordering::Release);
    let spawned = std::thread::Builder::new().name("offtrace-rangeq".into()).spawn(move || {
        start_on(ctx_addr as *mut c_void, gpu, say);
        STARTING.store(false, Ordering::Release);
        let _ = tx.send(());
    });
    match spawned {
        Ok(_) => {
            // OFFTRACE_RANGEQ_WAIT_MS: how long to wait (0: not at all; diagnosing a start).
            let wait = std::env::var("OFFTRACE_RANGEQ_WAIT_MS")
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(START_WAIT, Duration::from_millis);
            let r = rx.recv_timeout(wait);
            log(&format!(
                "# the context callback waited {wait:?}: {}",
                if r.is_ok() { "started" } else { "still starting" }
            ));
        }
        Err(e) => {
            STARTING.store(false, Ordering::Release);
            say(&format!("query metrics {GROUP}: cannot start a thread: {e}; no per-kernel values recorded"))
        }
    }
}

/// The line said when `--query-metrics cupti.range_profiler` names the range profiler in a CUDA
/// program without `OFFTRACE_RANGEQ_EXPERIMENTAL=1` (see the module's doc).
pub fn off_message() -> String {
    format!(
        "query metrics {GROUP}: not run in a CUDA program: started from offtrace's CUDA backend beside its activity tracing, CUPTI's range profiler stalled or crashed the program on the H100 (CUDA 13.0, docs/metrics.md); no per-kernel values recorded, the program is traced without them"
    )
}

/// The line said when the program ends before the profiler's start returned.
pub fn not_started_message(step: &str) -> String {
    format!(
        "query metrics {GROUP}: the range profiler had not started when the program ended (still {step}); CUPTI did not start it beside this process's activity tracing in time; no per-kernel values recorded, the program was traced without them"
    )
}

/// Counter ids of per-kernel values: the agent's per-command tag (`0x4d51…`), group field
/// 0xffff (apart from the catalog's group indices the agent uses).
fn counter_id(metric: usize) -> u64 {
    0x4d51_0000_0000_0000 | (0xffff << 16) | metric as u64
}

/// Emits one kernel's values per `pairs`; returns how many kernels got values.
fn emit(ranges: &[RangeValues], pairs: &[Option<u64>], device: u32) -> usize {
    // Name the metric device (the sampler does the same; a repeat is harmless).
    offtrace_metrics::define_devices(offtrace_metrics::Metrics::global(), &[device]);
    let device = offtrace_metrics::device_handle(device);
    let cstr = |s: String| CString::new(s.replace('\0', "")).unwrap_or_default();
    let names: Vec<CString> = RANGE_METRICS.iter().map(|m| cstr(format!("{GROUP}.{}.per_command", m.0))).collect();
    let units: Vec<CString> = RANGE_METRICS.iter().map(|m| cstr(m.2.to_owned())).collect();
    for (mi, (name, unit)) in names.iter().zip(&units).enumerate() {
        let p = CounterPayload {
            counter: counter_id(mi),
            device,
            value: CounterValueType::F64 as u64,
            name: name.as_ptr(),
            unit: unit.as_ptr(),
            ts: 0,
        };
        emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
    }
    let now = offtrace_metrics::monotonic_ns();
    let mut n = 0;
    for (r, c) in ranges.iter().zip(pairs) {
        let Some(correlation) = *c else { continue };
        for (mi, v) in r.values.iter().enumerate().take(names.len()) {
            let p = CounterPayload {
                counter: counter_id(mi),
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

/// Stops the profiler, decodes every kernel's values and emits them (the recorder must still
/// run). Idempotent; errors go to stderr in one line.
pub fn stop() {
    ARMED.store(false, Ordering::Release);
    if STARTING.swap(false, Ordering::AcqRel) {
        // The profiler's thread is still inside CUPTI: leave it there, say so once.
        let m = not_started_message(&lock(&STEP));
        log(&format!("# {m}"));
        eprintln!("offtrace: {m}");
        return;
    }
    let Some(mut r) = lock(&RUNNING).take() else { return };
    ACTIVE.store(false, Ordering::Release);
    let launches = std::mem::take(&mut *lock(&LAUNCHES));
    // The ranges are complete once the kernels are: on the profiler's context.
    if set_current(r.ctx as *mut c_void) {
        synchronize();
    }
    match r.profiler.stop() {
        Ok(ranges) => {
            let names: Vec<String> = ranges.iter().map(|r| r.name.clone()).collect();
            let pairs = pair(&names, &launches, r.max);
            let n = emit(&ranges, &pairs, r.device);
            if std::env::var_os("OFFTRACE_RANGEQ_LOG").is_some() {
                // The evidence runs: each range, the correlation it went out with, its values.
                let mut text = format!(
                    "# {} ranges, {} launches recorded, {n} kernels with values\nrange,name,correlation,{}\n",
                    ranges.len(),
                    launches.len(),
                    RANGE_METRICS.map(|m| m.0).join(",")
                );
                for (i, (rv, c)) in ranges.iter().zip(&pairs).enumerate() {
                    let v: Vec<String> = rv.values.iter().map(f64::to_string).collect();
                    text.push_str(&format!("{i},{},{},{}\n", rv.name, c.unwrap_or(0), v.join(",")));
                }
                log(text.trim_end());
            }
            if ranges.len() >= r.max {
                eprintln!(
                    "offtrace: query metrics {GROUP}: the first {} kernels have values; later ones were not kept (OFFTRACE_RANGEQ_MAX_RANGES)",
                    r.max
                );
            }
        }
        Err(e) => {
            let m = format!(
                "query metrics {GROUP}: the range profiler's values could not be read: {e} (CUPTI: {}); no per-kernel values recorded",
                offtrace_metrics::cupti::last_error()
            );
            log(&format!("# {m}"));
            eprintln!("offtrace: {m}");
        }
    }
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
    }

    fn l(v: &[(u64, &str)]) -> Vec<(u64, String)> {
        v.iter().map(|&(c, n)| (c, n.to_owned())).collect()
    }

    fn r(v: &[&str]) -> Vec<String> {
        v.iter().map(|&n| n.to_owned()).collect()
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
    }

    #[test]
    fn equal_counts_pair_one_to_one() {
        assert_eq!(
            pair(&r(&["saxpy", "fma_loop", "saxpy"]), &l(&[(11, "saxpy"), (0, "fma_loop"), (13, "saxpy")]), 64),
            vec![Some(11), None, Some(13)]
        );
        assert_eq!(pair(&[], &[], 64), Vec::<Option<u64>>::new());
    }

    #[test]
    fn a_start_race_pairs_from_the_end() {
        // One launch recorded before its kernel was profiled: the ranges are the last two.
        assert_eq!(pair(&r(&["a", "a"]), &l(&[(10, "a"), (20, "a"), (30, "a")]), 64), vec![Some(20), Some(30)]);
        // One kernel profiled before launches were recorded: the first range has no launch.
        assert_eq!(pair(&r(&["a", "a", "a"]), &l(&[(20, "a"), (30, "a")]), 64), vec![None, Some(20), Some(30)]);
    }

    #[test]
    fn ranges_without_a_launch_are_stepped_over() {
        // A graph's kernel node (no launch callback) between two launches.
        let ranges = r(&["_Z5scalePfPKffi", "_Z10reduce_sumPfPKfi", "_Z3addPfPKfi"]);
        let launches = l(&[(7, SCALE), (9, "add(float*, float const*, int)")]);
        assert_eq!(pair(&ranges, &launches, 64), vec![Some(7), None, Some(9)]);
    }

    #[test]
    fn a_full_profiler_pairs_from_the_start() {
        // CUPTI kept the first 2 (max) of 4 kernels.
        assert_eq!(
            pair(&r(&["a", "b"]), &l(&[(10, "a"), (20, "b"), (30, "a"), (40, "b")]), 2),
            vec![Some(10), Some(20)]
        );
    }

    #[test]
    fn counter_ids_stay_apart_from_the_agents() {
        // The agent's per-command ids use the catalog's group index (< 0xffff groups).
        assert_eq!(counter_id(3) >> 48, 0x4d51);
        assert_eq!((counter_id(3) >> 16) & 0xffff, 0xffff);
        assert_ne!(counter_id(0), counter_id(1));
    }

    #[test]
    fn a_profiler_that_cannot_start_says_so_in_one_line() {
        use std::sync::atomic::AtomicUsize;
        static SAID: AtomicUsize = AtomicUsize::new(0);
        static LINE: Mutex<String> = Mutex::new(String::new());
        fn say(m: &str) {
            *lock(&LINE) = m.to_owned();
            SAID.fetch_add(1, Ordering::Relaxed);
        }
        // No context (and, on this machine, no CUPTI): RangeProfiler::new fails.
        start_on(std::ptr::null_mut(), 0, say);
        assert_eq!(SAID.load(Ordering::Relaxed), 1);
        let line = lock(&LINE).clone();
        assert!(
            line.starts_with("query metrics cupti.range_profiler: the range profiler did not start on GPU 0"),
            "{line}"
        );
        assert!(line.contains("no per-kernel values recorded"), "{line}");
        assert!(!line.contains('\n'));
        assert!(lock(&RUNNING).is_none());
        assert!(!active());
        // Nothing to stop, nothing emitted, no panic.
        stop();
    }

    #[test]
    fn a_start_still_under_way_at_the_end_is_said_in_one_line() {
        let m = not_started_message("starting the range profiler (counter data image)");
        assert!(m.starts_with("query metrics cupti.range_profiler: the range profiler had not started"), "{m}");
        assert!(m.contains("still starting the range profiler") && m.contains("no per-kernel values recorded"), "{m}");
        assert!(!m.contains('\n'));
    }

    #[test]
    fn off_by_default_in_one_line() {
        let m = off_message();
        assert!(m.starts_with("query metrics cupti.range_profiler: not run in a CUDA program"), "{m}");
        assert!(m.contains("no per-kernel values recorded") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn the_record_env_without_the_switch_says_so_and_arms_nothing() {
        static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn say(m: &str) {
            lock(&SAID).push(m.to_owned());
        }
        // SAFETY: nextest runs each test in a process of its own: no other thread reads these.
        unsafe {
            std::env::set_var("OFFTRACE_QUERY_METRICS", "cupti.range_profiler,cpu.sw");
            std::env::remove_var("OFFTRACE_RANGEQ_EXPERIMENTAL");
        }
        start_from_env(say);
        let said = lock(&SAID).clone();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("cpu.sw") && said[1] == off_message(), "{said:?}");
        assert!(!ARMED.load(Ordering::Acquire));
        // A context now starts nothing.
        context_created(std::ptr::null_mut(), 0, say);
        assert!(!active() && lock(&RUNNING).is_none() && !STARTING.load(Ordering::Acquire));
    }

    #[test]
    fn the_message_carries_cuptis_reason() {
        let m = start_failed_message(1, &"UNKNOWN", "cuptiRangeProfilerEnable: 17 CUPTI_ERROR_NOT_COMPATIBLE");
        assert!(m.contains("GPU 1: UNKNOWN (CUPTI: cuptiRangeProfilerEnable: 17 CUPTI_ERROR_NOT_COMPATIBLE)"), "{m}");
        assert!(m.contains("beside activity tracing"), "{m}");
    }
}
