//! `offtrace_sysman_*`: device management shaped after Level Zero's sysman (`zes`), over NVML
//! for GPUs and `/proc` + `/sys` for the host CPU (`offtrace_metrics::Sysman`). Device ids are
//! the metrics API's (0 the host CPU, 1.. GPUs). What a device does not offer answers
//! `OFFTRACE_METRIC_RESULT_ERROR_UNSUPPORTED_FEATURE`. Null pointers are checked; bodies run
//! under `catch_unwind`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::time::Duration;

use offtrace_metrics::{MetricsError, Sysman};

use crate::metrics::{offtrace_metric_device_properties_t, offtrace_metric_device_t, offtrace_metric_result_t};

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_energy_counter_t {
    pub energy_uj: u64,
    pub timestamp_us: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_freq_state_t {
    pub actual_mhz: f64,
    pub throttle_reasons: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_mem_state_t {
    pub size: u64,
    pub free: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_pci_stats_t {
    pub tx_kbs: u64,
    pub rx_kbs: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_ras_state_t {
    pub corrected: u64,
    pub uncorrected: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offtrace_sysman_event_t {
    pub device: u32,
    pub reserved: u32,
    pub xid: u64,
}

fn sysman() -> &'static Sysman {
    static S: OnceLock<Sysman> = OnceLock::new();
    S.get_or_init(Sysman::new)
}

const NULL_POINTER: u32 = MetricsError::InvalidNullPointer as u32;

/// Writes `f()`'s value through `out` (checked non-null by the caller).
fn put<T>(out: *mut T, f: impl FnOnce() -> Result<T, MetricsError>) -> offtrace_metric_result_t {
    if out.is_null() {
        return NULL_POINTER;
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => {
            // SAFETY: checked non-null; writable per each function's contract.
            unsafe { out.write(v) };
            0
        }
        Ok(Err(e)) => e.code(),
        Err(_) => MetricsError::Unknown.code(),
    }
}

/// `zesDeviceGet`: `*count == 0` (or `devices` null) → the number of devices.
///
/// # Safety
/// `count` writable; `devices` null or writable for `*count` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_device_get(
    count: *mut u32,
    devices: *mut offtrace_metric_device_t,
) -> offtrace_metric_result_t {
    if count.is_null() {
        return NULL_POINTER;
    }
    match catch_unwind(|| sysman().devices().iter().map(|d| d.id).collect::<Vec<u32>>()) {
        Ok(ids) => {
            // SAFETY: `count` checked; `devices` writable for `*count` (caller's contract).
            unsafe {
                if *count == 0 || devices.is_null() {
                    *count = ids.len() as u32;
                } else {
                    let n = (*count as usize).min(ids.len());
                    std::ptr::copy_nonoverlapping(ids.as_ptr(), devices, n);
                    *count = n as u32;
                }
            }
            0
        }
        Err(_) => MetricsError::Unknown.code(),
    }
}

/// `zesDeviceGetProperties`.
///
/// # Safety
/// `props` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_device_get_properties(
    device: offtrace_metric_device_t,
    props: *mut offtrace_metric_device_properties_t,
) -> offtrace_metric_result_t {
    put(props, || {
        let d = sysman().devices().iter().find(|d| d.id == device).ok_or(MetricsError::InvalidNullHandle)?;
        let mut p = offtrace_metric_device_properties_t { id: d.id, type_: 0, name: [0; 256], uuid: [0; 64] };
        p.type_ = u32::from(d.kind == offtrace_metrics::DeviceKind::Gpu);
        crate::metrics::copy_str(&mut p.name, &d.name);
        crate::metrics::copy_str(&mut p.uuid, &d.uuid);
        Ok(p)
    })
}

/// `zesPowerGetEnergyCounter`.
///
/// # Safety
/// `energy` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_power_get_energy_counter(
    device: offtrace_metric_device_t,
    energy: *mut offtrace_sysman_energy_counter_t,
) -> offtrace_metric_result_t {
    put(energy, || {
        let e = sysman().power_energy_counter(device)?;
        Ok(offtrace_sysman_energy_counter_t { energy_uj: e.energy_uj, timestamp_us: e.timestamp_us })
    })
}

/// `zesPowerGetLimits`: the sustained (enforced) limit in mW.
///
/// # Safety
/// `sustained_mw` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_power_get_limit(
    device: offtrace_metric_device_t,
    sustained_mw: *mut u64,
) -> offtrace_metric_result_t {
    put(sustained_mw, || sysman().power_limit_mw(device))
}

/// `zesFrequencyGetState`.
///
/// # Safety
/// `state` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_frequency_get_state(
    device: offtrace_metric_device_t,
    state: *mut offtrace_sysman_freq_state_t,
) -> offtrace_metric_result_t {
    put(state, || {
        let f = sysman().frequency_state(device)?;
        Ok(offtrace_sysman_freq_state_t { actual_mhz: f.actual_mhz, throttle_reasons: f.throttle_reasons })
    })
}

/// `zesTemperatureGetState` in degrees Celsius.
///
/// # Safety
/// `celsius` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_temperature_get_state(
    device: offtrace_metric_device_t,
    celsius: *mut f64,
) -> offtrace_metric_result_t {
    put(celsius, || sysman().temperature(device))
}

/// `zesMemoryGetState`.
///
/// # Safety
/// `state` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_memory_get_state(
    device: offtrace_metric_device_t,
    state: *mut offtrace_sysman_mem_state_t,
) -> offtrace_metric_result_t {
    put(state, || {
        let m = sysman().memory_state(device)?;
        Ok(offtrace_sysman_mem_state_t { size: m.size, free: m.free })
    })
}

/// `zesPciGetStats`: throughput in KB/s.
///
/// # Safety
/// `stats` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_pci_get_stats(
    device: offtrace_metric_device_t,
    stats: *mut offtrace_sysman_pci_stats_t,
) -> offtrace_metric_result_t {
    put(stats, || {
        let p = sysman().pci_stats(device)?;
        Ok(offtrace_sysman_pci_stats_t { tx_kbs: p.tx_kbs, rx_kbs: p.rx_kbs })
    })
}

/// `zesRasGetState`: ECC errors since boot.
///
/// # Safety
/// `state` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_ras_get_state(
    device: offtrace_metric_device_t,
    state: *mut offtrace_sysman_ras_state_t,
) -> offtrace_metric_result_t {
    put(state, || {
        let r = sysman().ras_state(device)?;
        Ok(offtrace_sysman_ras_state_t { corrected: r.corrected, uncorrected: r.uncorrected })
    })
}

/// `zesDriverEventListen`: waits at most `timeout_ms` for an XID critical error on any GPU;
/// `OFFTRACE_METRIC_RESULT_NOT_READY` on timeout.
///
/// # Safety
/// `event` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_sysman_event_wait(
    timeout_ms: u32,
    event: *mut offtrace_sysman_event_t,
) -> offtrace_metric_result_t {
    put(event, || {
        let e = sysman().event_wait(Duration::from_millis(u64::from(timeout_ms)))?;
        Ok(offtrace_sysman_event_t { device: e.device, reserved: 0, xid: e.xid })
    })
}
