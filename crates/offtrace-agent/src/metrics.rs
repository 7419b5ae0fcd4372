//! Metrics and telemetry sampled into the trace (`offtrace record --metrics/--telemetry`): the
//! groups named in `OFFTRACE_METRICS` (comma-separated, `name` or `name@device`) are streamed
//! every `OFFTRACE_SAMPLE_PERIOD_NS` (default 10 ms) by `offtrace-metrics`' [`Sampler`] on
//! a thread of its own, as `COUNTER` records through the tracing services (the recorder is
//! subscribed to them). Started once the recorder runs; stopped (after a final sample) before
//! the recorder finishes. `OFFTRACE_METRICS_STATS=FILE` writes each group's sample count and
//! sampling CPU time there at the end (JSON lines), to measure the sampling cost.

use std::sync::Mutex;
use std::time::Duration;

use offtrace_metrics::{Metrics, Sampler};

static SAMPLER: Mutex<Option<Sampler>> = Mutex::new(None);

/// Starts sampling when `OFFTRACE_METRICS` names groups. Errors go to stderr (opt-in feature).
pub fn start_from_env() {
    let Ok(spec) = std::env::var("OFFTRACE_METRICS") else { return };
    let names: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() {
        return;
    }
    let period = std::env::var("OFFTRACE_SAMPLE_PERIOD_NS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&ns| ns > 0)
        .map_or(Duration::from_millis(10), Duration::from_nanos);
    match Sampler::start(Metrics::global(), &names, period) {
        Ok(s) => *SAMPLER.lock().unwrap_or_else(|p| p.into_inner()) = Some(s),
        Err(e) => eprintln!("offtrace: metrics {spec}: {e}; no metrics recorded"),
    }
}

/// Stops sampling (each group takes a final sample). Idempotent.
pub fn stop() {
    let Some(s) = SAMPLER.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
    let stats = s.stop();
    if let Ok(path) = std::env::var("OFFTRACE_METRICS_STATS") {
        let lines: String = stats
            .iter()
            .map(|s| {
                format!(
                    "{{\"group\":\"{}\",\"device\":{},\"reports\":{},\"sampling_cpu_ns\":{},\"dropped\":{}}}\n",
                    s.group, s.device, s.stats.reports, s.stats.sampling_cpu_ns, s.stats.dropped
                )
            })
            .collect();
        let _ = std::fs::write(path, lines);
    }
}
