//! `offtrace_metric_*`: the metrics model of `offtrace-metrics` in C, shaped after Level Zero's
//! `zet` metric functions (group and metric enumeration with the count/array convention,
//! activation, streamer, query pool and query, calculation). Results are `ze_result_t` values
//! (`offtrace_metric_result_t`, `OFFTRACE_METRIC_RESULT_*`), including the seed's misuse codes
//! (see `offtrace_metrics::error`). Handles are ids: 0 is the null handle, and a closed or
//! destroyed handle answers `OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE`.
//!
//! Every function null-checks its pointers and runs its body under `catch_unwind` (a panic
//! becomes `OFFTRACE_METRIC_RESULT_ERROR_UNKNOWN`).

use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use offtrace_metrics::{
    GroupHandle, Metrics, MetricsError, QueryHandle, QueryPoolHandle, StreamerDesc, StreamerHandle, TypedValue,
};

pub type offtrace_metric_result_t = u32;
pub type offtrace_metric_device_t = u32;
pub type offtrace_metric_group_handle_t = u64;
pub type offtrace_metric_handle_t = u64;
pub type offtrace_metric_streamer_handle_t = u64;
pub type offtrace_metric_query_pool_handle_t = u64;
pub type offtrace_metric_query_handle_t = u64;

pub const OFFTRACE_METRIC_RESULT_SUCCESS: offtrace_metric_result_t = 0;
const NULL_POINTER: u32 = MetricsError::InvalidNullPointer as u32;
const NULL_HANDLE: u32 = MetricsError::InvalidNullHandle as u32;
const INVALID_SIZE: u32 = MetricsError::InvalidSize as u32;
const UNKNOWN: u32 = MetricsError::Unknown as u32;

/// Fixed string length of the property structs (`ZET_MAX_METRIC_*`-like).
pub const OFFTRACE_METRIC_STRING_SIZE: usize = 256;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_metric_device_properties_t {
    pub id: u32,
    /// 0 cpu, 1 gpu.
    pub type_: u32,
    pub name: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub uuid: [c_char; 64],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_metric_group_properties_t {
    pub name: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub description: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub device: u32,
    pub domain: u32,
    /// `OFFTRACE_METRIC_GROUP_SAMPLING_TYPE_EVENT_BASED` (1) | `TIME_BASED` (2).
    pub sampling_type: u32,
    pub metric_count: u32,
    /// Bytes of one raw report of this group.
    pub raw_report_size: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_metric_properties_t {
    pub name: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub description: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub component: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    pub result_units: [c_char; OFFTRACE_METRIC_STRING_SIZE],
    /// `zet_metric_type_t`.
    pub metric_type: u32,
    /// `zet_value_type_t` (1 uint64, 3 float64).
    pub result_type: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_metric_streamer_desc_t {
    pub sampling_period_ns: u64,
    pub notify_every_n_reports: u32,
    pub reserved: u32,
}

/// `zet_typed_value_t`: `type` 1 = `value` is a uint64, 3 = the bits of a double.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_metric_typed_value_t {
    pub type_: u32,
    pub reserved: u32,
    pub value: u64,
}

fn guard(f: impl FnOnce() -> Result<(), MetricsError>) -> offtrace_metric_result_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OFFTRACE_METRIC_RESULT_SUCCESS,
        Ok(Err(e)) => e.code(),
        Err(_) => UNKNOWN,
    }
}

pub(crate) fn copy_str(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

fn group_of(h: offtrace_metric_group_handle_t) -> Result<GroupHandle, MetricsError> {
    let m = Metrics::global();
    let i = usize::try_from(h).ok().and_then(|h| h.checked_sub(1)).ok_or(MetricsError::InvalidNullHandle)?;
    if i >= m.catalog().groups.len() {
        return Err(MetricsError::InvalidNullHandle);
    }
    Ok(GroupHandle(i))
}

/// The L0 count/array convention: `*count == 0` → set it to the total; else write up to it and
/// set it to how many were written.
///
/// # Safety
/// `count` is writable; `out` null or writable for `*count` items.
unsafe fn fill<T: Copy>(count: *mut u32, out: *mut T, items: &[T]) {
    // SAFETY: per the contract.
    unsafe {
        if *count == 0 || out.is_null() {
            *count = items.len() as u32;
            return;
        }
        let n = (*count as usize).min(items.len());
        for (i, it) in items.iter().take(n).enumerate() {
            *out.add(i) = *it;
        }
        *count = n as u32;
    }
}

/// Devices with metrics (`zeDeviceGet`-like): ids, the host CPU first.
///
/// # Safety
/// `count` must be writable; `devices` null or writable for `*count` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_device_get(
    count: *mut u32,
    devices: *mut offtrace_metric_device_t,
) -> offtrace_metric_result_t {
    if count.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let ids: Vec<u32> = Metrics::global().catalog().devices.iter().map(|d| d.id).collect();
        // SAFETY: checked above / caller's contract.
        unsafe { fill(count, devices, &ids) };
        Ok(())
    })
}

/// A device's properties.
///
/// # Safety
/// `props` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_device_get_properties(
    device: offtrace_metric_device_t,
    props: *mut offtrace_metric_device_properties_t,
) -> offtrace_metric_result_t {
    if props.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let d = Metrics::global()
            .catalog()
            .devices
            .iter()
            .find(|d| d.id == device)
            .ok_or(MetricsError::InvalidNullHandle)?;
        let mut p = offtrace_metric_device_properties_t { id: d.id, type_: 0, name: [0; 256], uuid: [0; 64] };
        p.type_ = u32::from(d.kind == offtrace_metrics::DeviceKind::Gpu);
        copy_str(&mut p.name, &d.name);
        copy_str(&mut p.uuid, &d.uuid);
        // SAFETY: checked non-null; caller's contract.
        unsafe { *props = p };
        Ok(())
    })
}

/// `zetMetricGroupGet`.
///
/// # Safety
/// `count` must be writable; `groups` null or writable for `*count` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_group_get(
    device: offtrace_metric_device_t,
    count: *mut u32,
    groups: *mut offtrace_metric_group_handle_t,
) -> offtrace_metric_result_t {
    if count.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let c = Metrics::global().catalog();
        if !c.devices.iter().any(|d| d.id == device) {
            return Err(MetricsError::InvalidNullHandle);
        }
        let hs: Vec<u64> = c.groups_of(device).map(|i| i as u64 + 1).collect();
        // SAFETY: checked above / caller's contract.
        unsafe { fill(count, groups, &hs) };
        Ok(())
    })
}

/// `zetMetricGroupGetProperties`.
///
/// # Safety
/// `props` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_group_get_properties(
    group: offtrace_metric_group_handle_t,
    props: *mut offtrace_metric_group_properties_t,
) -> offtrace_metric_result_t {
    if props.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let g = group_of(group)?;
        let m = Metrics::global();
        let info = m.group_info(g)?;
        let mut p = offtrace_metric_group_properties_t {
            name: [0; 256],
            description: [0; 256],
            device: info.device,
            domain: info.domain,
            sampling_type: info.sampling.0,
            metric_count: info.metrics.len() as u32,
            raw_report_size: m.report_bytes(g)? as u64,
        };
        copy_str(&mut p.name, &info.name);
        copy_str(&mut p.description, &info.description);
        // SAFETY: checked non-null; caller's contract.
        unsafe { *props = p };
        Ok(())
    })
}

/// `zetMetricGet`: a metric handle is `group << 16 | (index + 1)`.
///
/// # Safety
/// `count` must be writable; `metrics` null or writable for `*count` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_get(
    group: offtrace_metric_group_handle_t,
    count: *mut u32,
    metrics: *mut offtrace_metric_handle_t,
) -> offtrace_metric_result_t {
    if count.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let g = group_of(group)?;
        let n = Metrics::global().group_info(g)?.metrics.len() as u64;
        let hs: Vec<u64> = (0..n).map(|i| (group << 16) | (i + 1)).collect();
        // SAFETY: checked above / caller's contract.
        unsafe { fill(count, metrics, &hs) };
        Ok(())
    })
}

/// `zetMetricGetProperties`.
///
/// # Safety
/// `props` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_get_properties(
    metric: offtrace_metric_handle_t,
    props: *mut offtrace_metric_properties_t,
) -> offtrace_metric_result_t {
    if props.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let g = group_of(metric >> 16)?;
        let idx = (metric & 0xffff).checked_sub(1).ok_or(MetricsError::InvalidNullHandle)? as usize;
        let mi = Metrics::global().group_info(g)?.metrics.get(idx).ok_or(MetricsError::InvalidNullHandle)?;
        let mut p = offtrace_metric_properties_t {
            name: [0; 256],
            description: [0; 256],
            component: [0; 256],
            result_units: [0; 256],
            metric_type: mi.metric_type as u32,
            result_type: mi.result_type as u32,
        };
        copy_str(&mut p.name, &mi.name);
        copy_str(&mut p.description, &mi.description);
        copy_str(&mut p.component, &mi.component);
        copy_str(&mut p.result_units, &mi.unit);
        // SAFETY: checked non-null; caller's contract.
        unsafe { *props = p };
        Ok(())
    })
}

/// `zetDeviceActivateMetricGroups`: exactly `groups[0..count]` active on `device` (0: none).
/// Two groups of one domain: `OFFTRACE_METRIC_RESULT_ERROR_NOT_AVAILABLE`.
///
/// # Safety
/// `groups` must be readable for `count` handles (may be null when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_group_activate(
    device: offtrace_metric_device_t,
    count: u32,
    groups: *const offtrace_metric_group_handle_t,
) -> offtrace_metric_result_t {
    if count > 0 && groups.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let hs: Vec<GroupHandle> = (0..count as usize)
            // SAFETY: readable for `count` handles (caller's contract).
            .map(|i| group_of(unsafe { *groups.add(i) }))
            .collect::<Result<_, _>>()?;
        Metrics::global().activate(device, &hs)
    })
}

/// `zetMetricTracerOpen` (streamer). Group not time-based or not active:
/// `OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `desc` must be readable; `streamer` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_streamer_open(
    device: offtrace_metric_device_t,
    group: offtrace_metric_group_handle_t,
    desc: *const offtrace_metric_streamer_desc_t,
    streamer: *mut offtrace_metric_streamer_handle_t,
) -> offtrace_metric_result_t {
    if desc.is_null() || streamer.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        // SAFETY: checked non-null; readable (caller's contract).
        let d = unsafe { *desc };
        let desc = StreamerDesc {
            sampling_period: Duration::from_nanos(d.sampling_period_ns),
            notify_every_n_reports: d.notify_every_n_reports,
            ..StreamerDesc::default()
        };
        let h = Metrics::global().streamer_open(device, group_of(group)?, desc, None)?;
        // SAFETY: checked non-null; writable (caller's contract).
        unsafe { *streamer = h.0 };
        Ok(())
    })
}

/// `zetMetricTracerReadData`: `*size == 0` (or `data` null) → the bytes of up to `max_reports`
/// reports now; else reads the whole reports that fit and sets `*size` to the bytes written.
/// A closed streamer: `OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE`.
///
/// # Safety
/// `size` must be writable; `data` null or writable for `*size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_streamer_read_data(
    streamer: offtrace_metric_streamer_handle_t,
    max_reports: u32,
    size: *mut usize,
    data: *mut u8,
) -> offtrace_metric_result_t {
    if size.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let m = Metrics::global();
        let s = StreamerHandle(streamer);
        // SAFETY: checked non-null (caller's contract: writable).
        let cap = unsafe { *size };
        if cap == 0 || data.is_null() {
            let n = m.streamer_available_bytes(s, max_reports)?;
            // SAFETY: as above.
            unsafe { *size = n };
            return Ok(());
        }
        // Whole reports only: the report size of this streamer's group.
        let report = m.streamer_report_bytes(s)?;
        let fit = u32::try_from(cap / report).unwrap_or(u32::MAX).min(max_reports);
        let raw = m.streamer_read_data(s, fit)?;
        // SAFETY: `raw.len() <= cap` bytes into `data`, writable for `cap` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), data, raw.len());
            *size = raw.len();
        }
        Ok(())
    })
}

/// Waits for the streamer's notification (every N reports) at most `timeout_ns`:
/// `OFFTRACE_METRIC_RESULT_NOT_READY` on timeout.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_streamer_wait(
    streamer: offtrace_metric_streamer_handle_t,
    timeout_ns: u64,
) -> offtrace_metric_result_t {
    guard(|| Metrics::global().streamer_wait(StreamerHandle(streamer), Duration::from_nanos(timeout_ns)))
}

/// `zetMetricTracerClose`. Twice: `OFFTRACE_METRIC_RESULT_ERROR_INVALID_NULL_HANDLE`.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_streamer_close(
    streamer: offtrace_metric_streamer_handle_t,
) -> offtrace_metric_result_t {
    guard(|| Metrics::global().streamer_close(StreamerHandle(streamer)).map(|_| ()))
}

/// `zetMetricQueryPoolCreate`. Group not event-based or not active:
/// `OFFTRACE_METRIC_RESULT_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `pool` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_query_pool_create(
    device: offtrace_metric_device_t,
    group: offtrace_metric_group_handle_t,
    count: u32,
    pool: *mut offtrace_metric_query_pool_handle_t,
) -> offtrace_metric_result_t {
    if pool.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let h = Metrics::global().query_pool_create(device, group_of(group)?, count)?;
        // SAFETY: checked non-null; writable (caller's contract).
        unsafe { *pool = h.0 };
        Ok(())
    })
}

/// `zetMetricQueryPoolDestroy`.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_query_pool_destroy(
    pool: offtrace_metric_query_pool_handle_t,
) -> offtrace_metric_result_t {
    guard(|| Metrics::global().query_pool_destroy(QueryPoolHandle(pool)))
}

/// `zetMetricQueryCreate`.
///
/// # Safety
/// `query` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_query_create(
    pool: offtrace_metric_query_pool_handle_t,
    index: u32,
    query: *mut offtrace_metric_query_handle_t,
) -> offtrace_metric_result_t {
    if query.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let h = Metrics::global().query_create(QueryPoolHandle(pool), index)?;
        // SAFETY: checked non-null; writable (caller's contract).
        unsafe { *query = h.0 };
        Ok(())
    })
}

/// `zetMetricQueryDestroy`.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_query_destroy(query: offtrace_metric_query_handle_t) -> offtrace_metric_result_t {
    guard(|| Metrics::global().query_destroy(QueryHandle(query)))
}

/// `zetMetricQueryReset`.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_query_reset(query: offtrace_metric_query_handle_t) -> offtrace_metric_result_t {
    guard(|| Metrics::global().query_reset(QueryHandle(query)))
}

/// `zetCommandListAppendMetricQueryBegin` for a host command: the group's values now.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_query_begin(query: offtrace_metric_query_handle_t) -> offtrace_metric_result_t {
    guard(|| Metrics::global().query_begin(QueryHandle(query)))
}

/// `zetCommandListAppendMetricQueryEnd` for a host command.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_metric_query_end(query: offtrace_metric_query_handle_t) -> offtrace_metric_result_t {
    guard(|| Metrics::global().query_end(QueryHandle(query)))
}

/// `zetMetricQueryGetData`: one raw report; `*size == 0` (or `data` null) → its size. Before
/// the query's end: `OFFTRACE_METRIC_RESULT_NOT_READY`.
///
/// # Safety
/// `size` must be writable; `data` null or writable for `*size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_query_get_data(
    query: offtrace_metric_query_handle_t,
    size: *mut usize,
    data: *mut u8,
) -> offtrace_metric_result_t {
    if size.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        let raw = Metrics::global().query_get_data(QueryHandle(query))?;
        // SAFETY: `size` checked non-null; `data` writable for `*size` bytes (caller's contract).
        unsafe {
            if *size == 0 || data.is_null() {
                *size = raw.len();
                return Ok(());
            }
            if *size < raw.len() {
                return Err(MetricsError::InvalidSize);
            }
            std::ptr::copy_nonoverlapping(raw.as_ptr(), data, raw.len());
            *size = raw.len();
        }
        Ok(())
    })
}

/// `zetMetricGroupCalculateMetricValues`: one value per metric per report, report after
/// report. `*count == 0` (or `values` null) → the number of values; else writes up to `*count`.
/// A partial report: `OFFTRACE_METRIC_RESULT_ERROR_INVALID_SIZE`.
///
/// # Safety
/// `raw` readable for `size` bytes; `count` writable; `values` null or writable for `*count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_metric_group_calculate_metric_values(
    group: offtrace_metric_group_handle_t,
    size: usize,
    raw: *const u8,
    count: *mut u32,
    values: *mut offtrace_metric_typed_value_t,
) -> offtrace_metric_result_t {
    if raw.is_null() || count.is_null() {
        return NULL_POINTER;
    }
    guard(|| {
        // SAFETY: readable for `size` bytes (caller's contract).
        let bytes = unsafe { std::slice::from_raw_parts(raw, size) };
        let reports = Metrics::global().calculate(group_of(group)?, bytes)?;
        let flat: Vec<offtrace_metric_typed_value_t> = reports
            .iter()
            .flatten()
            .map(|v| match *v {
                TypedValue::U64(x) => offtrace_metric_typed_value_t { type_: 1, reserved: 0, value: x },
                TypedValue::F64(x) => offtrace_metric_typed_value_t { type_: 3, reserved: 0, value: x.to_bits() },
            })
            .collect();
        // SAFETY: checked above / caller's contract.
        unsafe { fill(count, values, &flat) };
        Ok(())
    })
}

const _: () = assert!(INVALID_SIZE == 0x7800_0008 && NULL_HANDLE == 0x7800_0005);
