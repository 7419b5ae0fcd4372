//! Metrics and telemetry sampled into the trace (`offtrace record --metrics/--telemetry`): the
//! groups named in `OFFTRACE_METRICS` (comma-separated, `name` or `name@device`) are streamed
//! every `OFFTRACE_SAMPLE_PERIOD_NS` (default 10 ms) by `offtrace-metrics`' [`Sampler`] on
//! a thread of its own, as `COUNTER` records through the tracing services (the recorder is
//! subscribed to them). Started once the recorder runs; stopped (after a final sample) before
//! the recorder finishes. `OFFTRACE_METRICS_STATS=FILE` writes each group's sample count and
//! sampling CPU time there at the end (JSON lines), to measure the sampling cost.
//!
//! **Per command** (`OFFTRACE_QUERY_METRICS`, `record --query-metrics`): each event-based group
//! named gets a query pool; a callback service on the device activity kinds (kernel, copy, fill)
//! begins a query at the command's launch (on the enqueuing thread, inside the enqueue call) and
//! ends it at the command's completion (whatever thread reports it), keyed by the command's
//! correlation id. The values cannot be emitted from there (the services drop records emitted
//! inside a callback delivery: re-entrancy guard), so they are queued and a thread of this module
//! emits them with `emit_activity`: `COUNTER` samples carrying the **command's correlation id**,
//! counters `<group>.<metric>.per_command` (ids of their own, apart from the time series). With a
//! process-wide group (`cpu.sw`) a command's values are everything the process did between its
//! launch and its completion: overlapping commands each see the shared time (as the OpenCL
//! layer's Codeplay counters, docs/opencl.md).

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use offtrace_core::{
    CallbackRecord, ContextId, CounterPayload, CounterValueType, Kind, Payload, Phase, UserData, counter_op,
    emit_activity, emit_instant,
};
use offtrace_metrics::{GroupHandle, GroupInfo, Metrics, QueryHandle, QueryPoolHandle, Sampler, TypedValue};

static SAMPLER: Mutex<Option<Sampler>> = Mutex::new(None);
static QUERIES: Mutex<Option<Queries>> = Mutex::new(None);

/// One event-based group measured per command.
struct QueryGroup {
    gi: usize,
    info: GroupInfo,
    pool: QueryPoolHandle,
    names: Vec<CString>,
    units: Vec<CString>,
}

/// A finished command's values, waiting for the emitter thread.
struct Done {
    group: usize,
    correlation: u64,
    start: u64,
    end: u64,
    values: Vec<TypedValue>,
}

#[derive(Default)]
struct Pending {
    /// Queries begun at a launch: (correlation, group index) → query and launch time.
    open: HashMap<(u64, usize), (QueryHandle, u64)>,
    done: Vec<Done>,
    stop: bool,
}

struct Shared {
    metrics: &'static Metrics,
    groups: Vec<QueryGroup>,
    pending: Mutex<Pending>,
    wake: Condvar,
}

struct Queries {
    ctx: ContextId,
    shared: Arc<Shared>,
    emitter: Option<std::thread::JoinHandle<()>>,
}

/// Counter ids of per-command values: a tag apart from the time series' (`counter_id`).
fn per_command_id(group: usize, metric: usize) -> u64 {
    0x4d51_0000_0000_0000 | ((group as u64) << 16) | metric as u64
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The callback of the device activity kinds: launch (phase NONE) begins, completion ends.
fn on_command(shared: &Shared, record: &CallbackRecord) {
    let correlation = record.correlation_id.internal;
    if correlation == 0 {
        return;
    }
    let now = offtrace_metrics::monotonic_ns();
    let m = shared.metrics;
    if record.phase == Phase::None as u32 {
        for (i, g) in shared.groups.iter().enumerate() {
            let Ok(q) = m.query_create(g.pool, 0) else { continue };
            if m.query_begin(q).is_err() {
                let _ = m.query_destroy(q);
                continue;
            }
            if let Some((old, _)) = lock(&shared.pending).open.insert((correlation, i), (q, now)) {
                let _ = m.query_destroy(old); // a relaunch under the same id: the newer wins
            }
        }
    } else if record.phase == Phase::Complete as u32 {
        for (i, g) in shared.groups.iter().enumerate() {
            let Some((q, start)) = lock(&shared.pending).open.remove(&(correlation, i)) else { continue };
            let values = m
                .query_end(q)
                .and_then(|()| m.query_get_data(q))
                .and_then(|raw| m.calculate(GroupHandle(g.gi), &raw))
                .ok()
                .and_then(|mut v| v.pop());
            let _ = m.query_destroy(q);
            if let Some(values) = values {
                lock(&shared.pending).done.push(Done { group: i, correlation, start, end: now, values });
                shared.wake.notify_one();
            }
        }
    }
}

/// Emits queued values (outside any callback delivery): definitions once, then one sample per
/// metric with the command's correlation id.
fn emitter(shared: &Shared) {
    let mut defined = vec![false; shared.groups.len()];
    loop {
        let (batch, stop) = {
            let mut p = lock(&shared.pending);
            while p.done.is_empty() && !p.stop {
                p = shared.wake.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            (std::mem::take(&mut p.done), p.stop)
        };
        for d in &batch {
            let g = &shared.groups[d.group];
            let device = offtrace_metrics::device_handle(g.info.device);
            if !defined[d.group] {
                if !defined.iter().any(|&x| x) {
                    // Name the metric devices (the sampler does the same; a repeat is harmless).
                    let mut ids: Vec<u32> = shared.groups.iter().map(|g| g.info.device).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    offtrace_metrics::define_devices(shared.metrics, &ids);
                }
                for (mi, v) in d.values.iter().enumerate() {
                    let vt =
                        if matches!(v, TypedValue::U64(_)) { CounterValueType::U64 } else { CounterValueType::F64 };
                    let p = CounterPayload {
                        counter: per_command_id(g.gi, mi),
                        device,
                        value: vt as u64,
                        name: g.names[mi].as_ptr(),
                        unit: g.units[mi].as_ptr(),
                        ts: 0,
                    };
                    emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
                }
                defined[d.group] = true;
            }
            for (mi, v) in d.values.iter().enumerate() {
                let value = match *v {
                    TypedValue::U64(x) => x,
                    TypedValue::F64(x) => x.to_bits(),
                };
                let p = CounterPayload {
                    counter: per_command_id(g.gi, mi),
                    device,
                    value,
                    name: std::ptr::null(),
                    unit: std::ptr::null(),
                    ts: 0,
                };
                emit_activity(Kind::Counter, counter_op::SAMPLE, d.correlation, d.start, d.end, Payload::Counter(&p));
            }
        }
        if stop {
            return;
        }
        // Batch what completes over the next few ms into one wake-up.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts per-command queries for the groups named in `OFFTRACE_QUERY_METRICS`.
fn start_queries(spec: &str) -> Result<Queries, String> {
    let m = Metrics::global();
    let c = m.catalog();
    let mut handles: Vec<usize> = Vec::new();
    for n in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let found = c.find(n);
        if found.is_empty() {
            return Err(format!("no group {n}"));
        }
        handles.extend(found);
    }
    handles.sort_unstable();
    handles.dedup();
    // Activate them alongside what is active already (the time-based sampler's groups).
    let mut devices: Vec<u32> = handles.iter().map(|&g| c.groups[g].info.device).collect();
    devices.sort_unstable();
    devices.dedup();
    for d in &devices {
        let mut on: Vec<GroupHandle> =
            c.groups_of(*d).filter(|&g| m.is_active(GroupHandle(g))).map(GroupHandle).collect();
        on.extend(
            handles
                .iter()
                .filter(|&&g| c.groups[g].info.device == *d && !m.is_active(GroupHandle(g)))
                .map(|&g| GroupHandle(g)),
        );
        m.activate(*d, &on).map_err(|e| format!("activating: {e}"))?;
    }
    let cstr = |s: String| CString::new(s.replace('\0', "")).unwrap_or_default();
    let mut groups = Vec::new();
    for &gi in &handles {
        let info = c.groups[gi].info.clone();
        let pool =
            m.query_pool_create(info.device, GroupHandle(gi), u32::MAX).map_err(|e| format!("{}: {e}", info.name))?;
        groups.push(QueryGroup {
            gi,
            names: info.metrics.iter().map(|x| cstr(format!("{}.{}.per_command", info.name, x.name))).collect(),
            units: info.metrics.iter().map(|x| cstr(x.unit.clone())).collect(),
            info,
            pool,
        });
    }
    let shared = Arc::new(Shared { metrics: m, groups, pending: Mutex::new(Pending::default()), wake: Condvar::new() });
    let ctx = offtrace_core::create_context().map_err(|e| format!("services: {e}"))?;
    for kind in [Kind::KernelDispatch, Kind::MemoryCopy, Kind::MemoryFill] {
        let sh = Arc::clone(&shared);
        offtrace_core::configure_callback_tracing_closure(
            ctx,
            kind,
            None,
            move |r: &CallbackRecord, _: &mut UserData| on_command(&sh, r),
        )
        .map_err(|e| format!("services: {e}"))?;
    }
    let sh = Arc::clone(&shared);
    let emitter = std::thread::Builder::new()
        .name("offtrace-query".into())
        .spawn(move || emitter(&sh))
        .map_err(|e| format!("thread: {e}"))?;
    offtrace_core::start_context(ctx).map_err(|e| format!("services: {e}"))?;
    Ok(Queries { ctx, shared, emitter: Some(emitter) })
}

fn stop_queries(mut q: Queries) {
    // No more launches or completions delivered once this returns.
    let _ = offtrace_core::stop_context(q.ctx);
    {
        let mut p = lock(&q.shared.pending);
        // Commands launched but not complete: their queries are dropped, not reported.
        for (_, (h, _)) in p.open.drain() {
            let _ = q.shared.metrics.query_destroy(h);
        }
        p.stop = true;
    }
    q.shared.wake.notify_all();
    if let Some(t) = q.emitter.take() {
        let _ = t.join();
    }
    for g in &q.shared.groups {
        let _ = q.shared.metrics.query_pool_destroy(g.pool);
    }
    let _ = offtrace_core::destroy_context(q.ctx);
}

/// Starts sampling when `OFFTRACE_METRICS` names groups, and per-command queries when
/// `OFFTRACE_QUERY_METRICS` does. Errors go to stderr (opt-in features).
pub fn start_from_env() {
    start_sampler_from_env();
    if let Ok(spec) = std::env::var("OFFTRACE_QUERY_METRICS") {
        // The OpenCL layer's Codeplay counters are collected by the layer (hosted here too).
        let spec: Vec<&str> =
            spec.split(',').filter(|n| !n.trim().is_empty() && !offtrace_metrics::opencl::is_layer_group(n)).collect();
        let spec = spec.join(",");
        if spec.is_empty() {
            return;
        }
        match start_queries(&spec) {
            Ok(q) => *lock(&QUERIES) = Some(q),
            Err(e) => eprintln!("offtrace: query metrics {spec}: {e}; no per-command values recorded"),
        }
    }
}

fn start_sampler_from_env() {
    if let Some(s) = offtrace_metrics::counters::start_requested() {
        *SAMPLER.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
    }
}

/// Stops sampling (each group takes a final sample) and per-command queries (completed commands'
/// values are emitted). Idempotent.
pub fn stop() {
    if let Some(q) = lock(&QUERIES).take() {
        stop_queries(q);
    }
    if let Some(s) = SAMPLER.lock().unwrap_or_else(|p| p.into_inner()).take() {
        offtrace_metrics::counters::stop_hosted(s);
    }
}
