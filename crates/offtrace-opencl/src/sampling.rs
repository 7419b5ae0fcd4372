//! `offtrace record --metrics` for programs that use OpenCL alone: when the layer hosts the
//! recorder (`recording.rs`), it hosts the metrics [`Sampler`] too, as the SYCL agent and the
//! CUDA injection do — the groups named in `OFFTRACE_METRICS` are sampled every
//! `OFFTRACE_SAMPLE_PERIOD_NS` (`offtrace_metrics::counters::requested`) on a thread of the
//! sampler's own, as `COUNTER` records through the services the recorder is subscribed to.
//! Started once the recorder runs; stopped (each group takes a final sample) before it
//! finishes. Without this the option was silently ignored for such programs. Per-command
//! queries (`--query-metrics`) other than the layer's own Codeplay counters are not hosted here.

use std::sync::Mutex;

use offtrace_metrics::Sampler;
use offtrace_metrics::counters::{start_requested, stop_hosted};

static SAMPLER: Mutex<Option<Sampler>> = Mutex::new(None);

/// Starts sampling when `OFFTRACE_METRICS` names groups; a group that cannot start is said on
/// stderr (the option asked for it) and the program runs on traced.
pub(crate) fn start_from_env() {
    if let Some(s) = start_requested() {
        *SAMPLER.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
    }
}

/// Stops sampling after a final sample of each group. Idempotent.
pub(crate) fn stop() {
    if let Some(s) = SAMPLER.lock().unwrap_or_else(|p| p.into_inner()).take() {
        stop_hosted(s);
    }
}
