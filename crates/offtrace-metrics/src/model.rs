//! The vocabulary of the Level Zero metrics model (`zet_metric_group_properties_t`,
//! `zet_metric_properties_t`, `zet_typed_value_t`), independent of any source.
//!
//! A **device** (the host CPU, each NVIDIA GPU) has **metric groups**; a group has a **domain**
//! (an exclusive resource of the device: one active group per domain) and **sampling types**
//! (time-based: a streamer samples it periodically; event-based: a query brackets a command).
//! A group's **metrics** each say how its value is **calculated** from raw data ([`Calc`]):
//! collection (reading counters into raw reports) and calculation (turning reports into typed
//! values) are separate steps, as in the seed.

use std::fmt;

/// A device offtrace collects metrics of. `id` 0 is the host CPU; NVML GPUs follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub id: u32,
    pub name: String,
    pub kind: DeviceKind,
    /// Stable identity where the source has one (GPU UUID, PCI bus id).
    pub uuid: String,
    pub pci_bus_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    Cpu,
    Gpu,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
        }
    }
}

/// `zet_metric_group_sampling_type_t` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SamplingTypes(pub u32);

impl SamplingTypes {
    /// `ZET_METRIC_GROUP_SAMPLING_TYPE_EVENT_BASED` = `ZE_BIT(0)`.
    pub const EVENT_BASED: Self = Self(1);
    /// `ZET_METRIC_GROUP_SAMPLING_TYPE_TIME_BASED` = `ZE_BIT(1)`.
    pub const TIME_BASED: Self = Self(2);
    pub const BOTH: Self = Self(3);

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// `["event_based", "time_based"]` as present.
    pub fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.contains(Self::EVENT_BASED) {
            v.push("event_based");
        }
        if self.contains(Self::TIME_BASED) {
            v.push("time_based");
        }
        v
    }
}

/// `zet_metric_type_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MetricType {
    Duration = 0,
    Event = 1,
    EventWithRange = 2,
    Throughput = 3,
    Timestamp = 4,
    Flag = 5,
    Ratio = 6,
    Raw = 7,
}

/// `zet_value_type_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ValueType {
    U32 = 0,
    U64 = 1,
    F32 = 2,
    F64 = 3,
    Bool8 = 4,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            Self::U32 => "uint32",
            Self::U64 => "uint64",
            Self::F32 => "float32",
            Self::F64 => "float64",
            Self::Bool8 => "bool8",
        }
    }
}

/// `zet_typed_value_t`: a calculated value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TypedValue {
    U64(u64),
    F64(f64),
}

impl TypedValue {
    pub fn as_f64(self) -> f64 {
        match self {
            Self::U64(v) => v as f64,
            Self::F64(v) => v,
        }
    }
    pub fn value_type(self) -> ValueType {
        match self {
            Self::U64(_) => ValueType::U64,
            Self::F64(_) => ValueType::F64,
        }
    }
}

impl fmt::Display for TypedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::U64(v) => write!(f, "{v}"),
            Self::F64(v) => write!(f, "{v:.3}"),
        }
    }
}

/// How a metric's value is calculated from raw reports (indices into the group's raw slots).
/// A report carries, per raw slot, the value now, at the interval's start and at the baseline
/// (streamer open / query begin).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Calc {
    /// Counted since the baseline: `now - base` (U64).
    Total(usize),
    /// Counted since the baseline, scaled: `(now - base) * scale` (F64).
    TotalScaled(usize, f64),
    /// The value now (U64).
    Gauge(usize),
    /// The value now, scaled (F64).
    GaugeScaled(usize, f64),
    /// The value now, stored as the bits of an f64 (sources that compute values themselves:
    /// CUPTI's metric evaluation).
    GaugeF64(usize),
    /// Per interval: `(now - prev) / interval_ns * scale` (F64; scale 1e9 gives per second).
    Rate(usize, f64),
    /// Per interval: `(now_a - prev_a) / (now_b - prev_b) * scale` (F64; 0 when b did not move).
    Ratio(usize, usize, f64),
}

/// `zet_metric_properties_t` plus how to calculate it.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricInfo {
    pub name: String,
    pub description: String,
    /// The component measured (`cpu`, `process`, `memory`, `gpu`, `pcie`, ...).
    pub component: String,
    pub unit: String,
    pub metric_type: MetricType,
    pub result_type: ValueType,
    pub calc: Calc,
}

impl MetricInfo {
    pub fn new(
        name: &str,
        description: &str,
        component: &str,
        unit: &str,
        metric_type: MetricType,
        calc: Calc,
    ) -> Self {
        let result_type = match calc {
            Calc::Total(_) | Calc::Gauge(_) => ValueType::U64,
            _ => ValueType::F64,
        };
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            component: component.to_owned(),
            unit: unit.to_owned(),
            metric_type,
            result_type,
            calc,
        }
    }
}

/// `zet_metric_group_properties_t` plus its metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInfo {
    pub name: String,
    pub description: String,
    pub device: u32,
    pub domain: u32,
    pub sampling: SamplingTypes,
    pub metrics: Vec<MetricInfo>,
}

/// One collection of a group's raw slots, in the model's raw form (`docs/metrics.md`):
/// `[ts_ns, prev_ts_ns, now[0..n], prev[0..n], base[0..n]]`, little-endian u64 each. Reports are
/// self-contained: calculation needs no state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawReport {
    pub ts_ns: u64,
    pub prev_ts_ns: u64,
    pub now: Vec<u64>,
    pub prev: Vec<u64>,
    pub base: Vec<u64>,
}

impl RawReport {
    /// Bytes of one report of a group with `slots` raw slots.
    pub fn encoded_len(slots: usize) -> usize {
        8 * (2 + 3 * slots)
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts_ns.to_le_bytes());
        out.extend_from_slice(&self.prev_ts_ns.to_le_bytes());
        for v in self.now.iter().chain(&self.prev).chain(&self.base) {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Decodes every whole report of `slots` slots in `raw`; a trailing partial report is an error.
    pub fn decode_all(raw: &[u8], slots: usize) -> Option<Vec<RawReport>> {
        let len = Self::encoded_len(slots);
        if !raw.len().is_multiple_of(len) {
            return None;
        }
        let word = |b: &[u8], i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        Some(
            raw.chunks_exact(len)
                .map(|b| RawReport {
                    ts_ns: word(b, 0),
                    prev_ts_ns: word(b, 1),
                    now: (0..slots).map(|i| word(b, 2 + i)).collect(),
                    prev: (0..slots).map(|i| word(b, 2 + slots + i)).collect(),
                    base: (0..slots).map(|i| word(b, 2 + 2 * slots + i)).collect(),
                })
                .collect(),
        )
    }
}

/// Calculates one report into one typed value per metric (the group's order).
pub fn calculate(metrics: &[MetricInfo], r: &RawReport) -> Vec<TypedValue> {
    let mut out = Vec::with_capacity(metrics.len());
    calculate_into(metrics, r, &mut out);
    out
}

/// [`calculate`] into a reused vector (cleared first).
pub fn calculate_into(metrics: &[MetricInfo], r: &RawReport, out: &mut Vec<TypedValue>) {
    let interval = r.ts_ns.saturating_sub(r.prev_ts_ns);
    out.clear();
    out.extend(metrics.iter().map(|m| {
        let at = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        let delta = |i: usize| at(&r.now, i).wrapping_sub(at(&r.prev, i)) as i64 as f64;
        match m.calc {
            Calc::Total(i) => TypedValue::U64(at(&r.now, i).saturating_sub(at(&r.base, i))),
            Calc::TotalScaled(i, s) => TypedValue::F64(at(&r.now, i).saturating_sub(at(&r.base, i)) as f64 * s),
            Calc::Gauge(i) => TypedValue::U64(at(&r.now, i)),
            Calc::GaugeScaled(i, s) => TypedValue::F64(at(&r.now, i) as f64 * s),
            Calc::GaugeF64(i) => TypedValue::F64(f64::from_bits(at(&r.now, i))),
            Calc::Rate(i, s) => TypedValue::F64(if interval == 0 { 0.0 } else { delta(i) / interval as f64 * s }),
            Calc::Ratio(a, b, s) => {
                let d = delta(b);
                TypedValue::F64(if d == 0.0 { 0.0 } else { delta(a) / d * s })
            }
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_reports_round_trip_and_calculate() {
        let r = RawReport {
            ts_ns: 3_000,
            prev_ts_ns: 1_000,
            now: vec![50, 7, 40],
            prev: vec![30, 5, 20],
            base: vec![10, 1, 0],
        };
        let mut raw = Vec::new();
        r.encode_into(&mut raw);
        r.encode_into(&mut raw);
        assert_eq!(raw.len(), 2 * RawReport::encoded_len(3));
        let back = RawReport::decode_all(&raw, 3).expect("whole reports");
        assert_eq!(back, vec![r.clone(), r.clone()]);
        assert!(RawReport::decode_all(&raw[..raw.len() - 1], 3).is_none());
        let m = |c| MetricInfo::new("m", "", "c", "u", MetricType::Event, c);
        let v = calculate(
            &[
                m(Calc::Total(0)),
                m(Calc::Gauge(1)),
                m(Calc::Rate(0, 1e9)),
                m(Calc::Ratio(2, 0, 100.0)),
                m(Calc::GaugeScaled(1, 0.5)),
            ],
            &r,
        );
        let f = RawReport { now: vec![2.5f64.to_bits()], prev: vec![0], base: vec![0], ..r.clone() };
        assert_eq!(calculate(&[m(Calc::GaugeF64(0))], &f), vec![TypedValue::F64(2.5)]);
        assert_eq!(v[0], TypedValue::U64(40));
        assert_eq!(v[1], TypedValue::U64(7));
        assert_eq!(v[2], TypedValue::F64(20.0 / 2_000.0 * 1e9));
        assert_eq!(v[3], TypedValue::F64(100.0));
        assert_eq!(v[4], TypedValue::F64(3.5));
    }
}
