//! Metrics into the trace: a [`Sampler`] streams groups on threads of their own and emits each
//! calculated value as a `COUNTER` record through `offtrace-core`'s tracing services (a
//! `counter_op::DEFINE` once per metric, then one `counter_op::SAMPLE` per report, at the time of
//! the sample), so any client of the services (the recorder writing the trace) gets them.
//!
//! Counter names are `<group>.<metric>` (`cpu.sw.task_clock`), the counter's device is the
//! metric device id (0 the host CPU, 1.. NVML GPUs), units as in the catalog.

use std::ffi::CString;
use std::time::Duration;

use offtrace_core::{
    CounterPayload, CounterValueType, DevicePayload, DeviceType, Kind, Payload, Phase, counter_op, device_op,
    emit_instant,
};

use crate::error::MetricsError;
use crate::model::{GroupInfo, RawReport, TypedValue};
use crate::session::{GroupHandle, Metrics, StreamerDesc, StreamerHandle, StreamerStats};

/// The trace's device handle of metric device `id` (a `DEVICE` record names it; counters carry
/// it): a fixed high tag and the id, so it never collides with a runtime's device handles.
pub fn device_handle(id: u32) -> u64 {
    0x4d45_4400_0000_0000 | u64::from(id)
}

/// Emits a `DEVICE` record for each metric device (name, CPU/GPU), so tools name the counters'
/// devices.
fn define_devices(metrics: &Metrics, ids: &[u32]) {
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

fn emit_counters(group: usize, d: &mut Defined, info: &GroupInfo, values: &[TypedValue]) {
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
        };
        emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&p));
    }
}

/// Groups streamed into `COUNTER` records.
#[derive(Debug)]
pub struct Sampler {
    metrics: &'static Metrics,
    streamers: Vec<(GroupHandle, StreamerHandle)>,
}

/// What [`Sampler::stop`] measured, per group.
#[derive(Debug, Clone)]
pub struct SamplerStats {
    pub group: String,
    pub device: u32,
    pub stats: StreamerStats,
}

impl Sampler {
    /// Activates the groups named (`name` or `name@device`; a name every device has means all)
    /// and streams each every `period`. An unknown name: `INVALID_ARGUMENT`; the domain rule and
    /// sampling types as [`Metrics::activate`] and [`Metrics::streamer_open`] say.
    pub fn start(metrics: &'static Metrics, names: &[&str], period: Duration) -> Result<Self, MetricsError> {
        let mut handles = Vec::new();
        for n in names {
            let found = metrics.catalog().find(n);
            if found.is_empty() {
                return Err(MetricsError::InvalidArgument);
            }
            handles.extend(found.into_iter().map(GroupHandle));
        }
        handles.dedup();
        let mut devices: Vec<u32> = handles.iter().map(|g| metrics.catalog().groups[g.0].info.device).collect();
        devices.sort_unstable();
        devices.dedup();
        for d in &devices {
            let on: Vec<GroupHandle> =
                handles.iter().copied().filter(|g| metrics.catalog().groups[g.0].info.device == *d).collect();
            metrics.activate(*d, &on)?;
        }
        define_devices(metrics, &devices);
        let mut s = Sampler { metrics, streamers: Vec::new() };
        for g in handles {
            let info = metrics.catalog().groups[g.0].info.clone();
            let cstr = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
            let mut d = Defined {
                names: info.metrics.iter().map(|m| cstr(&format!("{}.{}", info.name, m.name))).collect(),
                units: info.metrics.iter().map(|m| cstr(&m.unit)).collect(),
                defined: false,
            };
            let gi = g.0;
            let cb =
                Box::new(move |info: &GroupInfo, _r: &RawReport, v: &[TypedValue]| emit_counters(gi, &mut d, info, v));
            let desc = StreamerDesc {
                sampling_period: period,
                notify_every_n_reports: 1,
                keep_raw: false,
                final_report: true,
            };
            match metrics.streamer_open(info.device, g, desc, Some(cb)) {
                Ok(h) => s.streamers.push((g, h)),
                Err(e) => {
                    let _ = s.stop();
                    return Err(e);
                }
            }
        }
        Ok(s)
    }

    /// Closes every streamer (each takes a final report first) and deactivates the groups.
    pub fn stop(self) -> Vec<SamplerStats> {
        let mut out = Vec::new();
        let mut devices = Vec::new();
        for (g, h) in &self.streamers {
            let info = &self.metrics.catalog().groups[g.0].info;
            if let Ok(stats) = self.metrics.streamer_close(*h) {
                out.push(SamplerStats { group: info.name.clone(), device: info.device, stats });
            }
            devices.push(info.device);
        }
        devices.sort_unstable();
        devices.dedup();
        for d in devices {
            let _ = self.metrics.activate(d, &[]);
        }
        out
    }
}
