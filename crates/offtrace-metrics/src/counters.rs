//! Metrics into the trace: a [`Sampler`] samples groups on one thread of its own and emits each
//! calculated value as a `COUNTER` record through `offtrace-core`'s tracing services (a
//! `counter_op::DEFINE` once per metric, then one `counter_op::SAMPLE` per report, at the time of
//! the sample), so any client of the services (the recorder writing the trace) gets them.
//!
//! Counter names are `<group>.<metric>` (`cpu.sw.task_clock`), the counter's device is the
//! metric device id (0 the host CPU, 1.. NVML GPUs), units as in the catalog.

use std::ffi::CString;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use offtrace_core::{
    CounterPayload, CounterValueType, DevicePayload, DeviceType, Kind, Payload, Phase, counter_op, device_op,
    emit_instant,
};

use crate::catalog::Collector;
use crate::error::MetricsError;
use crate::model::{GroupInfo, RawReport, TypedValue};
use crate::session::{GroupHandle, Metrics, StreamerStats, monotonic_ns, thread_cpu_ns};

/// The trace's device handle of metric device `id` (a `DEVICE` record names it; counters carry
/// it): a fixed high tag and the id, so it never collides with a runtime's device handles.
pub fn device_handle(id: u32) -> u64 {
    0x4d45_4400_0000_0000 | u64::from(id)
}

/// Emits a `DEVICE` record for each metric device (name, CPU/GPU), so tools name the counters'
/// devices.
pub fn define_devices(metrics: &Metrics, ids: &[u32]) {
    for d in metrics.catalog().devices.iter().filter(|d| ids.contains(&d.id)) {
        let name = CString::new(d.name.replace('\0', "")).unwrap_or_default();
        let p = DevicePayload {
            handle: device_handle(d.id),
            parent: 0,
            name: name.as_ptr(),
            device_type: if d.kind == crate::DeviceKind::Gpu { DeviceType::Gpu } else { DeviceType::Cpu },
        };
        emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&p));
    }
}

/// Counter ids: a fixed high tag, the group index and the metric index.
pub fn counter_id(group: usize, metric: usize) -> u64 {
    0x4d45_0000_0000_0000 | ((group as u64) << 16) | metric as u64
}

struct Defined {
    names: Vec<CString>,
    units: Vec<CString>,
    defined: bool,
}

/// Emits `values` as samples at `ts` (trace clock; 0: now), after the definitions the first time.
fn emit_counters(group: usize, d: &mut Defined, info: &GroupInfo, values: &[TypedValue], ts: u64) {
    if !d.defined {
        for (i, m) in info.metrics.iter().enumerate() {
            let vt = match values.get(i) {
                Some(TypedValue::U64(_)) => CounterValueType::U64,
                _ => CounterValueType::F64,
            };
            let p = CounterPayload {
                counter: counter_id(group, i),
                device: device_handle(info.device),
                value: vt as u64,
                name: d.names[i].as_ptr(),
                unit: d.units[i].as_ptr(),
                ts: 0,
            };
            let _ = m;
            emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
        }
        d.defined = true;
    }
    for (i, v) in values.iter().enumerate() {
        let bits = match *v {
            TypedValue::U64(x) => x,
            TypedValue::F64(x) => x.to_bits(),
        };
        // A sample names its counter by id (the definition carries name and unit).
        let p = CounterPayload {
            counter: counter_id(group, i),
            device: device_handle(info.device),
            value: bits,
            name: std::ptr::null(),
            unit: std::ptr::null(),
            ts,
        };
        emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&p));
    }
}

/// Groups sampled into `COUNTER` records on **one** thread (one wake-up per period for all
/// groups: the wake-up is most of a sample's cost in a busy program).
#[derive(Debug)]
pub struct Sampler {
    metrics: &'static Metrics,
    devices: Vec<u32>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<Vec<SamplerStats>>>,
}

/// What [`Sampler::stop`] measured, per group.
#[derive(Debug, Clone)]
pub struct SamplerStats {
    pub group: String,
    pub device: u32,
    /// `sampling_cpu_ns`: the group's collect + calculate + emit time plus an equal share of the
    /// thread's remaining CPU time (waking up); the groups' sum is the thread's whole CPU time.
    /// A group's own time is measured in one round of [`ATTRIBUTE_EVERY`] and scaled (each
    /// measurement is two system calls, a sizeable part of a cheap group's cost).
    pub stats: StreamerStats,
}

/// The sampling period when `OFFTRACE_SAMPLE_PERIOD_NS` names none.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(10);

/// What `offtrace record --metrics` asks a backend's agent for: the groups named in
/// `OFFTRACE_METRICS` (comma-separated, `name` or `name@device`) and the period in
/// `OFFTRACE_SAMPLE_PERIOD_NS` ([`DEFAULT_PERIOD`] when absent, zero or not a number). `None`
/// when no group is named. Every backend that hosts a [`Sampler`] reads them through this.
pub fn requested(metrics: Option<&str>, period_ns: Option<&str>) -> Option<(Vec<String>, Duration)> {
    let groups: Vec<String> = metrics?.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if groups.is_empty() {
        return None;
    }
    let period = period_ns
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&ns| ns > 0)
        .map_or(DEFAULT_PERIOD, Duration::from_nanos);
    Some((groups, period))
}

/// Starts the [`Sampler`] the environment asks for ([`requested`] from `OFFTRACE_METRICS` and
/// `OFFTRACE_SAMPLE_PERIOD_NS`), as the agent and the OpenCL layer host it; `None` when no group
/// is named or the sampler cannot start, which is said on stderr (the user asked for it) while
/// the program runs on traced.
pub fn start_requested() -> Option<Sampler> {
    let (groups, period) = requested(
        std::env::var("OFFTRACE_METRICS").ok().as_deref(),
        std::env::var("OFFTRACE_SAMPLE_PERIOD_NS").ok().as_deref(),
    )?;
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    Sampler::start(Metrics::global(), &names, period)
        .inspect_err(|e| eprintln!("offtrace: metrics {}: {e}; no metrics recorded", groups.join(",")))
        .ok()
}

/// Stops a hosted sampler (each group takes a final sample) and writes what it measured to
/// `OFFTRACE_METRICS_STATS` when set ([`write_stats`]).
pub fn stop_hosted(s: Sampler) {
    let stats = s.stop();
    if let Ok(path) = std::env::var("OFFTRACE_METRICS_STATS") {
        write_stats(&path, &stats);
    }
}

/// Writes what [`Sampler::stop`] measured as JSON lines to `path` (`OFFTRACE_METRICS_STATS`):
/// one `{group, device, reports, sampling_cpu_ns, dropped}` per group. Errors are ignored: the
/// file is a diagnostic, never worth disturbing the traced program's exit.
pub fn write_stats(path: &str, stats: &[SamplerStats]) {
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

struct Sampled {
    gi: usize,
    info: GroupInfo,
    collector: Collector,
    base: Vec<u64>,
    prev: Vec<u64>,
    prev2: Vec<u64>,
    now: Vec<u64>,
    /// When `prev` and `prev2` were read (right after the read: see [`sample_all`]).
    prev_ts: u64,
    prev2_ts: u64,
    values: Vec<TypedValue>,
    defined: Defined,
    reports: u64,
    own_ns: u64,
    timed: u64,
}

impl Sampler {
    /// Activates the groups named (`name` or `name@device`; a name every device has means all)
    /// and samples them every `period` on one thread. An unknown name or a group that is not
    /// time-based: `INVALID_ARGUMENT`; the domain rule as [`Metrics::activate`] says.
    pub fn start(metrics: &'static Metrics, names: &[&str], period: Duration) -> Result<Self, MetricsError> {
        if period.is_zero() {
            return Err(MetricsError::InvalidArgument);
        }
        let mut handles = Vec::new();
        for n in names {
            let found = metrics.catalog().find(n);
            if found.is_empty() {
                return Err(MetricsError::InvalidArgument);
            }
            handles.extend(found.into_iter().map(GroupHandle));
        }
        handles.sort_by_key(|g| g.0);
        handles.dedup();
        let groups = &metrics.catalog().groups;
        if handles.iter().any(|g| !groups[g.0].info.sampling.contains(crate::SamplingTypes::TIME_BASED)) {
            return Err(MetricsError::InvalidArgument);
        }
        let mut devices: Vec<u32> = handles.iter().map(|g| groups[g.0].info.device).collect();
        devices.sort_unstable();
        devices.dedup();
        for d in &devices {
            let on: Vec<GroupHandle> = handles.iter().copied().filter(|g| groups[g.0].info.device == *d).collect();
            metrics.activate(*d, &on)?;
        }
        let cstr = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
        let mut sampled = Vec::new();
        for g in &handles {
            let group = &groups[g.0];
            let opened = group.open_for(Some(period)).and_then(|mut c| {
                let mut base = vec![0u64; group.slots];
                c.read(&mut base)?;
                Ok((c, base, monotonic_ns()))
            });
            let (collector, base, base_ts) = match opened {
                Ok(x) => x,
                Err(e) => {
                    for d in &devices {
                        let _ = metrics.activate(*d, &[]);
                    }
                    return Err(e);
                }
            };
            let info = group.info.clone();
            sampled.push(Sampled {
                gi: g.0,
                defined: Defined {
                    names: info.metrics.iter().map(|m| cstr(&format!("{}.{}", info.name, m.name))).collect(),
                    units: info.metrics.iter().map(|m| cstr(&m.unit)).collect(),
                    defined: false,
                },
                values: Vec::with_capacity(info.metrics.len()),
                info,
                collector,
                prev: base.clone(),
                prev2: base.clone(),
                now: base.clone(),
                base,
                prev_ts: base_ts,
                prev2_ts: base_ts,
                reports: 0,
                own_ns: 0,
                timed: 0,
            });
        }
        define_devices(metrics, &devices);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let st = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("offtrace-sample".into())
            .spawn(move || sample_all(sampled, period, &st))
            .map_err(|_| MetricsError::Unknown)?;
        Ok(Sampler { metrics, devices, stop, thread: Some(thread) })
    }

    /// Stops the thread (after a final report of every group) and deactivates the groups.
    pub fn stop(mut self) -> Vec<SamplerStats> {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        let out = self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default();
        for d in &self.devices {
            let _ = self.metrics.activate(*d, &[]);
        }
        out
    }
}

/// One round in this many times its groups one by one (see [`SamplerStats`]).
pub const ATTRIBUTE_EVERY: u64 = 16;

/// The round whose deadline (`start + period * round`) comes next after `elapsed`, at least half
/// a period away: a round that ends late (the thread was descheduled, a read was slow) skips the
/// deadlines it missed instead of sampling again at once. Two samples microseconds apart made a
/// rate of noise (615 % CPU utilisation on 2 vCPUs: a few µs of skew between the time and the
/// counter read, over a 10 µs interval).
fn next_round(elapsed: Duration, period: Duration) -> u32 {
    let p = period.as_nanos().max(1);
    u32::try_from((elapsed.as_nanos() + p / 2) / p + 1).unwrap_or(u32::MAX)
}

/// The sampling thread. Each group's reading is timed right after its read (not once per round
/// before all reads: a read that waited would count its wait into the rate's numerator but not
/// its denominator), and rates span from one reading to the next, at least half a period
/// ([`next_round`]); the final report, which may come right after the last, spans both.
fn sample_all(mut groups: Vec<Sampled>, period: Duration, stop: &(Mutex<bool>, Condvar)) -> Vec<SamplerStats> {
    let start = Instant::now();
    let cpu_start = thread_cpu_ns();
    let half_period = period.as_nanos() as u64 / 2;
    let mut rounds = 0u64;
    let mut k: u32 = 1;
    loop {
        let deadline = start + period * k;
        let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if *stopped || left.is_zero() {
                break;
            }
            stopped = stop.1.wait_timeout(stopped, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        let stopping = *stopped;
        drop(stopped);
        let timed = rounds.is_multiple_of(ATTRIBUTE_EVERY);
        for g in &mut groups {
            let t0 = if timed { thread_cpu_ns() } else { 0 };
            if g.collector.read(&mut g.now).is_err() {
                continue;
            }
            let ts = monotonic_ns();
            // A final report right after the last one spans both intervals (no rate over a sliver).
            let widen = stopping && g.reports > 0 && ts.saturating_sub(g.prev_ts) < half_period;
            let report = RawReport {
                ts_ns: ts,
                prev_ts_ns: if widen { g.prev2_ts } else { g.prev_ts },
                now: std::mem::take(&mut g.now),
                prev: std::mem::take(if widen { &mut g.prev2 } else { &mut g.prev }),
                base: std::mem::take(&mut g.base),
            };
            if let Some(samples) = g.collector.pm_samples() {
                // PM sampling: each hardware sample at its own end on the GPU (a read decodes the
                // samples completed since the last one, so the newest interval arrives a report
                // late; at the report's time the curve would be one period late).
                for (end, values) in samples {
                    g.values.clear();
                    g.values.extend(values.iter().map(|&v| TypedValue::F64(v)));
                    emit_counters(g.gi, &mut g.defined, &g.info, &g.values, end);
                }
            } else {
                crate::model::calculate_into(&g.info.metrics, &report, &mut g.values);
                emit_counters(g.gi, &mut g.defined, &g.info, &g.values, 0);
            }
            let RawReport { now, prev, base, .. } = report;
            // prev2 <- the interval's start, prev <- now; the spare vector is reused for `now`.
            if widen {
                g.prev2 = prev;
            } else {
                g.prev2.copy_from_slice(&prev);
                g.now = prev;
            }
            if widen {
                g.now = std::mem::replace(&mut g.prev, now);
            } else {
                g.prev = now;
            }
            g.base = base;
            if !widen {
                g.prev2_ts = g.prev_ts;
            }
            g.prev_ts = ts;
            g.reports += 1;
            if timed {
                g.own_ns += thread_cpu_ns().saturating_sub(t0);
                g.timed += 1;
            }
        }
        rounds += 1;
        if stopping {
            break;
        }
        k = next_round(start.elapsed(), period);
    }
    let total = thread_cpu_ns().saturating_sub(cpu_start);
    // Each group's own time over all its reports, from the timed rounds.
    let own: Vec<u64> = groups.iter().map(|g| g.own_ns * g.reports / g.timed.max(1)).collect();
    let share = total.saturating_sub(own.iter().sum()) / groups.len().max(1) as u64;
    groups
        .iter()
        .zip(own)
        .map(|(g, own)| SamplerStats {
            group: g.info.name.clone(),
            device: g.info.device,
            stats: StreamerStats { reports: g.reports, sampling_cpu_ns: (own + share).min(total), dropped: 0 },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_round_is_at_least_half_a_period_away() {
        let p = Duration::from_millis(10);
        for us in (0..50_000).step_by(70) {
            let e = Duration::from_micros(us);
            let k = next_round(e, p);
            let wait = p * k - e;
            assert!(wait >= p / 2 && wait <= p * 3 / 2, "elapsed {e:?}: round {k}, waits {wait:?}");
        }
        // On time: the next deadline; 1.99 periods in (a late round): the third, not the second.
        assert_eq!(next_round(Duration::from_millis(10), p), 2);
        assert_eq!(next_round(Duration::from_micros(19_900), p), 3);
    }
}
