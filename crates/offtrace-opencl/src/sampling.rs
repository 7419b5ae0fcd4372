//! `offtrace record --metrics` for programs that use OpenCL alone: when the layer hosts the
//! recorder (`recording.rs`), it hosts the metrics [`Sampler`] too, as the SYCL agent and the
//! CUDA injection do — the groups named in `OFFTRACE_METRICS` are sampled every
//! `OFFTRACE_SAMPLE_PERIOD_NS` (`offtrace_metrics::counters::requested`) on a thread of the
//! sampler's own, as `COUNTER` records through the services the recorder is subscribed to.
//! Started once the recorder runs; stopped (each group takes a final sample) before it
//! finishes. Without this the option was silently ignored for such programs. Per-command
//! queries (`--query-metrics`) other than the layer's own Codeplay counters are not hosted here.

use std::sync::Mutex;

use offtrace_metrics::{Metrics, Sampler};

static SAMPLER: Mutex<Option<Sampler>> = Mutex::new(None);

/// Starts sampling when `OFFTRACE_METRICS` names groups; a group that cannot start is said on
/// stderr (the option asked for it) and the program runs on traced.
pub(crate) fn start_from_env() {
    let Some((groups, period)) = offtrace_metrics::counters::requested(
        std::env::var("OFFTRACE_METRICS").ok().as_deref(),
        std::env::var("OFFTRACE_SAMPLE_PERIOD_NS").ok().as_deref(),
    ) else {
        return;
    };
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    match Sampler::start(Metrics::global(), &names, period) {
        Ok(s) => *SAMPLER.lock().unwrap_or_else(|p| p.into_inner()) = Some(s),
        Err(e) => eprintln!("offtrace: metrics {}: {e}; no metrics recorded", groups.join(",")),
    }
}

/// Stops sampling after a final sample of each group. Idempotent.
pub(crate) fn stop() {
    let Some(s) = SAMPLER.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
    let stats = s.stop();
    if let Ok(path) = std::env::var("OFFTRACE_METRICS_STATS") {
        offtrace_metrics::counters::write_stats(&path, &stats);
    }
}
