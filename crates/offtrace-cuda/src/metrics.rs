//! Metrics and telemetry sampled into the CUDA trace (`offtrace record --metrics`): the groups
//! named in `OFFTRACE_METRICS` (comma-separated, `name` or `name@device`; set by the CLI's
//! `metrics_cmd::record_env`) are sampled every `OFFTRACE_SAMPLE_PERIOD_NS` (default 10 ms) by
//! `offtrace-metrics`' [`Sampler`] on a thread of its own, as `COUNTER` records through the
//! tracing services, which the injection's recorder is subscribed to — the same sampler the
//! SYCL agent hosts (crates/offtrace-agent/src/metrics.rs), so a CUDA program's counters land
//! in the trace that holds its kernels' device activity.
//!
//! When: groups that need no CUDA context (CPU, NVML) start with the injection, once the
//! recorder runs. CUPTI's profiling groups (`cupti.*`) are started after the program's first
//! CUDA context exists (the resource callback), on a thread of this module: the injection
//! itself is loaded from inside `cuInit` and a CUPTI callback must not call back into CUPTI's
//! profiler. A set that names any `cupti.*` group starts whole at that point (one `Sampler`
//! activates a device's groups together). Stopped — each group takes a final sample — before
//! the recorder finishes (`Injection::finish`).
//!
//! A group that cannot start (e.g. CUPTI refuses PM sampling beside this process's activity
//! tracing, or another profiler holds the device) is reported on stderr with CUPTI's reason and
//! the program runs on traced, without those counters.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use offtrace_metrics::{Metrics, Sampler};

/// What `OFFTRACE_METRICS` / `OFFTRACE_SAMPLE_PERIOD_NS` ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub groups: Vec<String>,
    pub period: Duration,
    /// Whether to wait for the first CUDA context (a `cupti.*` group is named).
    pub at_context: bool,
}

/// The default sampling period (the agent's too).
pub const DEFAULT_PERIOD: Duration = offtrace_metrics::counters::DEFAULT_PERIOD;

/// Parses the environment's values; `None` when no group is named.
pub fn plan(metrics: Option<&str>, period_ns: Option<&str>) -> Option<Plan> {
    let (groups, period) = offtrace_metrics::counters::requested(metrics, period_ns)?;
    let at_context = groups.iter().any(|g| g.starts_with("cupti."));
    Some(Plan { groups, period, at_context })
}

static SAMPLER: Mutex<Option<Sampler>> = Mutex::new(None);
/// The plan waiting for the first CUDA context.
static DEFERRED: Mutex<Option<Plan>> = Mutex::new(None);
/// The thread starting a deferred plan (joined by [`stop`]).
static STARTER: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
static STOPPED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn start_now(p: &Plan, say: fn(&str)) {
    let names: Vec<&str> = p.groups.iter().map(String::as_str).collect();
    match Sampler::start(Metrics::global(), &names, p.period) {
        Ok(s) => {
            if STOPPED.load(Ordering::Acquire) {
                // The trace finished while this started: nothing to record into.
                let _ = s.stop();
            } else {
                *lock(&SAMPLER) = Some(s);
                if p.at_context && !AT_EXIT.swap(true, Ordering::AcqRel) {
                    // Stop before CUDA and CUPTI tear down: exit handlers run last-registered
                    // first, and CUPTI's (and the CUDA runtime's) were registered before this
                    // point. Stopping after them (the injection's own handler, registered at
                    // cuInit) let the sampler thread decode into PM sampling state CUPTI had
                    // freed: "double free or corruption" at exit on the H100 (first device run).
                    // SAFETY: registering a plain extern "C" function with libc's atexit.
                    unsafe { libc::atexit(stop_at_exit) };
                }
            }
        }
        Err(e) => {
            let why = if p.at_context {
                let c = offtrace_metrics::cupti::last_error();
                if c.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (CUPTI: {c}; PM sampling and the range profiler cannot run beside another profiler of the device, and some CUPTI versions refuse them beside activity tracing)"
                    )
                }
            } else {
                String::new()
            };
            say(&format!(
                "metrics {}: {e}{why}; no metrics recorded, the program is traced without them",
                p.groups.join(",")
            ))
        }
    }
}

static AT_EXIT: AtomicBool = AtomicBool::new(false);

extern "C" fn stop_at_exit() {
    let _ = std::panic::catch_unwind(stop);
}

/// Called once the recorder runs: starts the sampler, or keeps the plan for the first context.
pub fn start_from_env(say: fn(&str)) {
    let Some(p) = plan(
        std::env::var("OFFTRACE_METRICS").ok().as_deref(),
        std::env::var("OFFTRACE_SAMPLE_PERIOD_NS").ok().as_deref(),
    ) else {
        return;
    };
    if p.at_context {
        *lock(&DEFERRED) = Some(p);
    } else {
        start_now(&p, say);
    }
}

/// A CUDA context was created (resource callback): starts a deferred plan on a thread of its own
/// (not from inside CUPTI's callback). Cheap when nothing waits.
pub fn context_created(say: fn(&str)) {
    let Some(p) = lock(&DEFERRED).take() else { return };
    match std::thread::Builder::new().name("offtrace-mstart".into()).spawn(move || start_now(&p, say)) {
        Ok(t) => *lock(&STARTER) = Some(t),
        Err(e) => say(&format!("metrics: cannot start a thread: {e}; no metrics recorded")),
    }
}

/// Stops sampling (each group takes a final sample, emitted before this returns). Idempotent.
pub fn stop() {
    STOPPED.store(true, Ordering::Release);
    *lock(&DEFERRED) = None;
    if let Some(t) = lock(&STARTER).take() {
        let _ = t.join();
    }
    if let Some(s) = lock(&SAMPLER).take() {
        offtrace_metrics::counters::stop_hosted(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_groups_no_plan() {
        assert_eq!(plan(None, Some("1000000")), None);
        assert_eq!(plan(Some(""), None), None);
        assert_eq!(plan(Some(" , ,"), None), None);
    }

    #[test]
    fn cpu_and_telemetry_groups_start_at_once() {
        let p = plan(Some("cpu.sw, nvml.telemetry@1"), Some("5000000")).expect("a plan");
        assert_eq!(p.groups, ["cpu.sw", "nvml.telemetry@1"]);
        assert_eq!(p.period, Duration::from_millis(5));
        assert!(!p.at_context);
    }

    #[test]
    fn cupti_groups_wait_for_a_context() {
        let p = plan(Some("cupti.pm_sampling"), Some("1000000")).expect("a plan");
        assert_eq!(p.groups, ["cupti.pm_sampling"]);
        assert_eq!(p.period, Duration::from_millis(1));
        assert!(p.at_context);
        assert!(plan(Some("cpu.sw,cupti.pm_sampling@1"), None).expect("a plan").at_context);
    }

    #[test]
    fn bad_or_zero_periods_take_the_default() {
        for period in [None, Some("0"), Some("ten"), Some("-5")] {
            assert_eq!(plan(Some("cpu.sw"), period).expect("a plan").period, DEFAULT_PERIOD);
        }
    }

    #[test]
    fn record_env_values_give_the_plan() {
        // What `offtrace record --metrics cupti.pm_sampling --sample-period 1ms` sets (CLI
        // metrics_cmd::record_env: the group list joined with ',', the period in ns).
        let p = plan(Some(&["cupti.pm_sampling"].join(",")), Some(&Duration::from_millis(1).as_nanos().to_string()));
        assert_eq!(
            p,
            Some(Plan { groups: vec!["cupti.pm_sampling".into()], period: Duration::from_millis(1), at_context: true })
        );
    }

    #[test]
    fn an_unknown_group_reports_and_records_nothing() {
        use std::sync::atomic::AtomicUsize;
        static SAID: AtomicUsize = AtomicUsize::new(0);
        fn say(m: &str) {
            assert!(m.contains("no.such.group"), "{m}");
            SAID.fetch_add(1, Ordering::Relaxed);
        }
        let p = plan(Some("no.such.group"), None).expect("a plan");
        start_now(&p, say);
        assert_eq!(SAID.load(Ordering::Relaxed), 1);
        assert!(lock(&SAMPLER).is_none());
    }
}
