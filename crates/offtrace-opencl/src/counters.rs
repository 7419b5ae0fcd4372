//! `cl_codeplay_performance_counters` (Codeplay's proposal, version 1, as specified), for every
//! device behind the layer.
//!
//! - `clGetDeviceInfo(CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY)` lists [`device_counters`]: the
//!   command's device time, bytes moved, bandwidth, and the OS counters that `perf.rs` could open.
//! - `CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY` → `cl_performance_counter_config_codeplay*` in the
//!   properties of `clCreateCommandQueueWithProperties[KHR]` enables counters on a queue
//!   ([`parse_config`]; the layer removes the key before the runtime sees the list).
//! - `clGetEventProfilingInfo(CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY)` returns one
//!   `cl_performance_counter_result_codeplay` (8 bytes) per enabled counter, in the order they
//!   were enabled ([`query`]).
//!
//! Errors (the spec's and the base specification's): an unknown uuid, a null config, a config
//! with count 0 or null descs → `CL_INVALID_VALUE` at queue creation; the query on a user event
//! or on an event of a queue without counters → `CL_INVALID_VALUE`; a `param_value_size`
//! smaller than `count * 8` with a non-null `param_value` → `CL_INVALID_VALUE`; a command not
//! complete yet → `CL_PROFILING_INFO_NOT_AVAILABLE`.
//!
//! What each counter measures, and how overlapping commands are attributed: docs/opencl.md.

use rustc_hash::FxHashMap as HashMap;
use std::ffi::{CStr, CString, c_void};
use std::ptr;
use std::sync::{Arc, Mutex};

use offtrace_core::{CounterPayload, CounterValueType, Kind, Payload, Phase, counter_op, emit_activity, emit_instant};

use crate::api::next;
use crate::call::*;
use crate::perf::{self, CANDIDATES};

pub const CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY: u32 = 0x4260;
pub const CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY: u64 = 0x4261;
pub const CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY: u32 = 0x4262;
pub const EXTENSION_NAME: &str = "cl_codeplay_performance_counters";

pub const UNIT_GENERIC: u32 = 0x0;
pub const UNIT_NANOSECONDS: u32 = 0x2;
pub const UNIT_BYTES: u32 = 0x3;
pub const UNIT_BYTES_PER_SECOND: u32 = 0x4;
pub const UNIT_CYCLES: u32 = 0xA;
pub const STORAGE_UINT64: u32 = 0x3;
pub const STORAGE_FLOAT64: u32 = 0x5;

/// `cl_performance_counter_codeplay`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PerformanceCounterCodeplay {
    pub unit: u32,
    pub storage: u32,
    pub uuid: u32,
    pub name: [u8; 256],
    pub category: [u8; 256],
    pub description: [u8; 256],
}

/// `cl_performance_counter_desc_codeplay`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PerformanceCounterDescCodeplay {
    pub uuid: u32,
    pub data: *mut c_void,
}

/// `cl_performance_counter_config_codeplay`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PerformanceCounterConfigCodeplay {
    pub count: u32,
    pub descs: *mut PerformanceCounterDescCodeplay,
}

/// What a counter measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    DeviceTime,
    BytesMoved,
    Bandwidth,
    /// Index into `perf::CANDIDATES`.
    Perf(usize),
}

/// One counter the layer offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    pub uuid: u32,
    pub unit: u32,
    pub storage: u32,
    pub name: &'static str,
    pub category: &'static str,
    pub description: &'static str,
    pub source: Source,
}

const FIXED: [Counter; 3] = [
    Counter {
        uuid: 1,
        unit: UNIT_NANOSECONDS,
        storage: STORAGE_UINT64,
        name: "device_time",
        category: "timing",
        description: "CL_PROFILING_COMMAND_END - CL_PROFILING_COMMAND_START of the command",
        source: Source::DeviceTime,
    },
    Counter {
        uuid: 2,
        unit: UNIT_BYTES,
        storage: STORAGE_UINT64,
        name: "bytes_moved",
        category: "memory",
        description: "bytes copied, read, written, mapped or filled by the command (0 for kernels)",
        source: Source::BytesMoved,
    },
    Counter {
        uuid: 3,
        unit: UNIT_BYTES_PER_SECOND,
        storage: STORAGE_FLOAT64,
        name: "bandwidth",
        category: "memory",
        description: "bytes_moved / device_time (0 when either is 0)",
        source: Source::Bandwidth,
    },
];

const PERF_INFO: [(u32, &str, &str, &str); CANDIDATES.len()] = [
    (UNIT_NANOSECONDS, "task_clock", "os", "CPU time of the process's threads during the command (perf task-clock)"),
    (UNIT_GENERIC, "context_switches", "os", "context switches of the process's threads during the command"),
    (UNIT_GENERIC, "page_faults", "os", "page faults of the process's threads during the command"),
    (UNIT_GENERIC, "cpu_migrations", "os", "CPU migrations of the process's threads during the command"),
    (UNIT_CYCLES, "cycles", "hardware", "CPU cycles of the process's threads during the command (PMU)"),
    (
        UNIT_GENERIC,
        "instructions",
        "hardware",
        "instructions retired by the process's threads during the command (PMU)",
    ),
    (
        UNIT_GENERIC,
        "cache_misses",
        "hardware",
        "last-level cache misses of the process's threads during the command (PMU)",
    ),
];

/// The counters this process offers (the fixed ones, then the perf counters that opened).
pub fn device_counters() -> Vec<Counter> {
    let mut out = FIXED.to_vec();
    for (i, open) in perf::available().into_iter().enumerate() {
        if open {
            let (unit, name, category, description) = PERF_INFO[i];
            out.push(Counter {
                uuid: 16 + i as u32,
                unit,
                storage: STORAGE_UINT64,
                name,
                category,
                description,
                source: Source::Perf(i),
            });
        }
    }
    out
}

fn c_string<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

impl Counter {
    pub fn to_c(&self) -> PerformanceCounterCodeplay {
        PerformanceCounterCodeplay {
            unit: self.unit,
            storage: self.storage,
            uuid: self.uuid,
            name: c_string(self.name),
            category: c_string(self.category),
            description: c_string(self.description),
        }
    }
}

/// The counters enabled on one queue, in the order the program enabled them.
#[derive(Debug, PartialEq, Eq)]
pub struct CounterSet {
    pub counters: Vec<Counter>,
}

/// Reads and validates a `cl_performance_counter_config_codeplay*` property value.
///
/// # Safety
///
/// `config` is null or points at a readable config whose `descs` holds `count` readable entries.
#[allow(unsafe_code)]
pub unsafe fn parse_config(config: *const PerformanceCounterConfigCodeplay) -> Result<CounterSet, i32> {
    if config.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: non-null, readable by the caller's guarantee.
    let c = unsafe { *config };
    if c.count == 0 || c.descs.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let offered = device_counters();
    let mut counters = Vec::with_capacity(c.count as usize);
    for i in 0..c.count as usize {
        // SAFETY: descs holds count entries.
        let d = unsafe { *c.descs.add(i) };
        let Some(k) = offered.iter().find(|k| k.uuid == d.uuid) else { return Err(CL_INVALID_VALUE) };
        counters.push(*k);
    }
    Ok(CounterSet { counters })
}

/// One command's results, one raw 8-byte value per enabled counter (the union's bits).
#[derive(Clone, Debug, PartialEq)]
pub struct CounterValues(pub Vec<u64>);

impl CounterValues {
    pub(crate) fn compute(
        set: &CounterSet,
        device_ns: Option<u64>,
        bytes: u64,
        start: Option<&perf::Snapshot>,
        end: Option<&perf::Snapshot>,
    ) -> Self {
        let dt = device_ns.unwrap_or(0);
        let v = set
            .counters
            .iter()
            .map(|c| match c.source {
                Source::DeviceTime => dt,
                Source::BytesMoved => bytes,
                Source::Bandwidth => {
                    let bw = if dt == 0 || bytes == 0 { 0.0 } else { bytes as f64 * 1e9 / dt as f64 };
                    bw.to_bits()
                }
                Source::Perf(i) => match (start.and_then(|s| s[i]), end.and_then(|e| e[i])) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => 0,
                },
            })
            .collect();
        CounterValues(v)
    }
}

/// Results of completed commands, by event. An entry is replaced when the runtime reuses the
/// event's address for a later command; at most `MAX_RESULTS` are kept (the oldest go first).
type ResultTable = (HashMap<usize, CounterValues>, std::collections::VecDeque<usize>);
static RESULTS: Mutex<Option<ResultTable>> = Mutex::new(None);
const MAX_RESULTS: usize = 1 << 16;

pub(crate) fn store_results(event: usize, values: CounterValues) {
    let mut g = RESULTS.lock().unwrap_or_else(|e| e.into_inner());
    let (map, order) = g.get_or_insert_with(Default::default);
    if map.insert(event, values).is_none() {
        order.push_back(event);
        if order.len() > MAX_RESULTS
            && let Some(old) = order.pop_front()
        {
            map.remove(&old);
        }
    }
}

fn stored(event: usize) -> Option<CounterValues> {
    RESULTS.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|(m, _)| m.get(&event).cloned())
}

fn event_info_u(event: *mut c_void, param: u32) -> Option<u64> {
    let f = next().clGetEventInfo?;
    let mut v = 0u64;
    // SAFETY: an 8-byte out value; the runtime validates the event.
    #[allow(unsafe_code)]
    let r = unsafe { f(event, param, 8, (&raw mut v).cast(), ptr::null_mut()) };
    (r == CL_SUCCESS).then_some(v)
}

/// `clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY, ...)`.
///
/// # Safety
///
/// `param_value` is null or writable for `param_value_size` bytes; `size_ret` null or writable.
#[allow(unsafe_code)]
pub(crate) unsafe fn query(
    event: *mut c_void,
    param_value_size: usize,
    param_value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    let Some(queue) = event_info_u(event, CL_EVENT_COMMAND_QUEUE) else { return -58 }; // CL_INVALID_EVENT
    let Some(set) = (queue != 0).then(|| crate::queues::counters(queue as *mut c_void)).flatten() else {
        return CL_INVALID_VALUE; // user event, or a queue without counters
    };
    let need = set.counters.len() * 8;
    if !param_value.is_null() && param_value_size < need {
        return CL_INVALID_VALUE;
    }
    let mut values = stored(event as usize);
    if values.is_none() && event_info_u(event, CL_EVENT_COMMAND_EXECUTION_STATUS).map(|s| s as u32) == Some(0) {
        // Complete, but the runtime has not run our completion callback yet (it may run it just
        // after the program's wait returns): it is imminent.
        for _ in 0..2000 {
            std::thread::sleep(std::time::Duration::from_micros(50));
            values = stored(event as usize);
            if values.is_some() {
                break;
            }
        }
    }
    let Some(values) = values else { return CL_PROFILING_INFO_NOT_AVAILABLE };
    if !param_value.is_null() {
        // SAFETY: param_value is writable for param_value_size >= need bytes.
        unsafe { ptr::copy_nonoverlapping(values.0.as_ptr().cast::<u8>(), param_value.cast::<u8>(), need) };
    }
    if !size_ret.is_null() {
        // SAFETY: size_ret writable by the caller's contract.
        unsafe { *size_ret = need };
    }
    CL_SUCCESS
}

/// `clGetDeviceInfo(device, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, ...)`.
///
/// # Safety
///
/// As [`query`].
#[allow(unsafe_code)]
pub(crate) unsafe fn device_info(param_value_size: usize, param_value: *mut c_void, size_ret: *mut usize) -> i32 {
    let list: Vec<PerformanceCounterCodeplay> = device_counters().iter().map(Counter::to_c).collect();
    let need = list.len() * size_of::<PerformanceCounterCodeplay>();
    if !param_value.is_null() {
        if param_value_size < need {
            return CL_INVALID_VALUE;
        }
        // SAFETY: writable for param_value_size >= need bytes.
        unsafe { ptr::copy_nonoverlapping(list.as_ptr().cast::<u8>(), param_value.cast::<u8>(), need) };
    }
    if !size_ret.is_null() {
        // SAFETY: writable by the caller's contract.
        unsafe { *size_ret = need };
    }
    CL_SUCCESS
}

/// Counter ids already defined in the trace, by (uuid, device).
static DEFINED: Mutex<Option<HashMap<(u32, u64), u64>>> = Mutex::new(None);

fn unit_text(unit: u32) -> &'static CStr {
    match unit {
        UNIT_NANOSECONDS => c"ns",
        UNIT_BYTES => c"bytes",
        UNIT_BYTES_PER_SECOND => c"bytes/s",
        UNIT_CYCLES => c"cycles",
        _ => c"",
    }
}

/// The same results as trace counter samples (`COUNTER` kind): each counter is defined once
/// per device (name `codeplay.<name>`), then sampled at the command's completion as a value
/// per command: emitted as the command's activity (`correlation`, its device `times`), so that
/// the trace ties each value to its command (`docs/metrics.md`, values per command).
pub(crate) fn emit_samples(set: &CounterSet, device: u64, correlation: u64, times: (u64, u64), values: &CounterValues) {
    if !offtrace_core::kind_enabled(Kind::Counter) {
        return;
    }
    for (c, &value) in set.counters.iter().zip(&values.0) {
        let (id, new) = {
            let mut g = DEFINED.lock().unwrap_or_else(|e| e.into_inner());
            let m = g.get_or_insert_with(HashMap::default);
            let next = 0xC0DE_0000_0000 + m.len() as u64;
            match m.get(&(c.uuid, device)) {
                Some(&id) => (id, false),
                None => {
                    m.insert((c.uuid, device), next);
                    (next, true)
                }
            }
        };
        let name = CString::new(format!("codeplay.{}", c.name)).unwrap_or_default();
        let unit = unit_text(c.unit);
        if new {
            let value_type =
                if c.storage == STORAGE_FLOAT64 { CounterValueType::F64 } else { CounterValueType::U64 } as u64;
            let p = CounterPayload {
                counter: id,
                device,
                value: value_type,
                name: name.as_ptr(),
                unit: unit.as_ptr(),
                ts: 0,
            };
            crate::objects::define_device(device as *mut std::ffi::c_void, std::ptr::null_mut());
            emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
        }
        let p = CounterPayload { counter: id, device, value, name: name.as_ptr(), unit: unit.as_ptr(), ts: 0 };
        emit_activity(Kind::Counter, counter_op::SAMPLE, correlation, times.0, times.1, Payload::Counter(&p));
    }
}

/// Whether `OFFTRACE_QUERY_METRICS` (`offtrace record --query-metrics codeplay`) names the
/// `codeplay` group (`offtrace_metrics::opencl::GROUP`, as `metrics list` shows these counters):
/// then every queue gets every counter, as if the program had enabled them, and each command's
/// values reach the trace as its `codeplay.<name>` samples. Read once.
pub(crate) fn requested_for_every_queue() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var("OFFTRACE_QUERY_METRICS").is_ok_and(|v| names_group(&v)))
}

/// Whether a comma-separated group list names `codeplay` (or `codeplay@<device>`).
fn names_group(list: &str) -> bool {
    list.split(',').any(|n| n.trim().split('@').next() == Some("codeplay"))
}

/// Keeps the `Arc` type in one place for the queue table.
pub(crate) fn shared(set: CounterSet) -> Arc<CounterSet> {
    Arc::new(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_layouts_match_the_spec() {
        assert_eq!(size_of::<PerformanceCounterCodeplay>(), 4 * 3 + 256 * 3);
        assert_eq!(std::mem::offset_of!(PerformanceCounterCodeplay, name), 12);
        assert_eq!(std::mem::offset_of!(PerformanceCounterCodeplay, description), 12 + 512);
        assert_eq!(size_of::<PerformanceCounterDescCodeplay>(), 16);
        assert_eq!(size_of::<PerformanceCounterConfigCodeplay>(), 16);
    }

    #[test]
    fn config_errors_are_invalid_value() {
        let mut descs = [PerformanceCounterDescCodeplay { uuid: 1, data: ptr::null_mut() }];
        let ok = PerformanceCounterConfigCodeplay { count: 1, descs: descs.as_mut_ptr() };
        // SAFETY (all): configs on the stack, valid for their counts.
        #[allow(unsafe_code)]
        unsafe {
            assert_eq!(parse_config(&ok).map(|s| s.counters[0].uuid), Ok(1));
            assert_eq!(parse_config(ptr::null()), Err(CL_INVALID_VALUE));
            assert_eq!(parse_config(&PerformanceCounterConfigCodeplay { count: 0, ..ok }), Err(CL_INVALID_VALUE));
            assert_eq!(
                parse_config(&PerformanceCounterConfigCodeplay { count: 1, descs: ptr::null_mut() }),
                Err(CL_INVALID_VALUE)
            );
            (*ok.descs).uuid = 0xdead;
            assert_eq!(parse_config(&ok), Err(CL_INVALID_VALUE));
        }
    }

    #[test]
    fn values_follow_the_enabled_order_and_units() {
        let set = CounterSet { counters: vec![FIXED[2], FIXED[0], FIXED[1]] };
        let v = CounterValues::compute(&set, Some(2_000), 4_096, None, None);
        assert_eq!(f64::from_bits(v.0[0]), 4_096.0 * 1e9 / 2_000.0);
        assert_eq!(&v.0[1..], &[2_000, 4_096]);
        let none = CounterValues::compute(&set, None, 0, None, None);
        assert_eq!(none.0, vec![0f64.to_bits(), 0, 0]);
    }

    #[test]
    fn the_record_option_names_the_group() {
        assert!(names_group("codeplay") && names_group("cpu.sw, codeplay@2"));
        assert!(!names_group("cpu.sw") && !names_group("codeplay.device_time") && !names_group(""));
    }

    #[test]
    fn absent_perf_counters_are_not_listed() {
        perf::init();
        let listed: Vec<u32> = device_counters().iter().map(|c| c.uuid).collect();
        for (i, open) in perf::available().into_iter().enumerate() {
            assert_eq!(listed.contains(&(16 + i as u32)), open, "{}", CANDIDATES[i].name);
        }
        assert!(listed.starts_with(&[1, 2, 3]));
    }
}
