//! NVIDIA telemetry through NVML, loaded with `dlopen("libnvidia-ml.so.1")` at first use. No
//! library, no driver or no GPU: no device and no group, and nothing fails. Each metric is listed
//! only when its query answered `NVML_SUCCESS` on that GPU at discovery.

#![allow(unsafe_code)] // dlopen/dlsym and calls through the resolved C function pointers

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::OnceLock;

use crate::error::MetricsError;
use crate::model::{Calc, MetricInfo, MetricType};

type Device = *mut c_void;
type Ret = c_int;
const SUCCESS: Ret = 0;
const TIMEOUT: Ret = 10;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Memory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlMemory_v2_t`: `used` excludes the driver's reserved memory (what nvidia-smi shows).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlMemory_v2` = `NVML_STRUCT_VERSION(Memory, 2)`: the struct's size | 2 << 24.
const MEMORY_V2: c_uint = std::mem::size_of::<MemoryV2>() as c_uint | (2 << 24);

/// `nvmlEventData_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct EventData {
    device: Device,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// The resolved entry points (all from one library handle, never closed).
struct Api {
    count: unsafe extern "C" fn(*mut c_uint) -> Ret,
    handle: unsafe extern "C" fn(c_uint, *mut Device) -> Ret,
    name: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret,
    uuid: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret,
    power: Option<unsafe extern "C" fn(Device, *mut c_uint) -> Ret>,
    energy: Option<unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret>,
    clock: Option<unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret>,
    temperature: Option<unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret>,
    utilization: Option<unsafe extern "C" fn(Device, *mut Utilization) -> Ret>,
    memory: Option<unsafe extern "C" fn(Device, *mut Memory) -> Ret>,
    memory_v2: Option<unsafe extern "C" fn(Device, *mut MemoryV2) -> Ret>,
    pcie: Option<unsafe extern "C" fn(Device, c_int, *mut c_uint) -> Ret>,
    throttle: Option<unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret>,
    ecc: Option<unsafe extern "C" fn(Device, c_int, c_int, *mut c_ulonglong) -> Ret>,
    power_limit: Option<unsafe extern "C" fn(Device, *mut c_uint) -> Ret>,
    event_set_create: Option<unsafe extern "C" fn(*mut *mut c_void) -> Ret>,
    register_events: Option<unsafe extern "C" fn(Device, c_ulonglong, *mut c_void) -> Ret>,
    event_wait: Option<unsafe extern "C" fn(*mut c_void, *mut EventData, c_uint) -> Ret>,
}

// SAFETY: the struct holds only C function pointers into a library that is never unloaded;
// NVML's entry points are thread-safe (its documentation says so for all but init/shutdown).
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> Option<T> {
    // SAFETY: `lib` is a live dlopen handle; `name` is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `T` is the C function pointer type of the NVML symbol `name` (its documented
    // prototype), of pointer size.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

fn load() -> Option<Api> {
    let path = std::env::var("OFFTRACE_NVML_LIBRARY").unwrap_or_else(|_| "libnvidia-ml.so.1".to_owned());
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: dlopen with a NUL-terminated path; a null handle means absent.
    let lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return None;
    }
    let init: unsafe extern "C" fn() -> Ret = sym(lib, c"nvmlInit_v2")?;
    // SAFETY: nvmlInit_v2 takes no argument; called once (OnceLock).
    if unsafe { init() } != SUCCESS {
        return None;
    }
    Some(Api {
        count: sym(lib, c"nvmlDeviceGetCount_v2")?,
        handle: sym(lib, c"nvmlDeviceGetHandleByIndex_v2")?,
        name: sym(lib, c"nvmlDeviceGetName")?,
        uuid: sym(lib, c"nvmlDeviceGetUUID")?,
        power: sym(lib, c"nvmlDeviceGetPowerUsage"),
        energy: sym(lib, c"nvmlDeviceGetTotalEnergyConsumption"),
        clock: sym(lib, c"nvmlDeviceGetClockInfo"),
        temperature: sym(lib, c"nvmlDeviceGetTemperature"),
        utilization: sym(lib, c"nvmlDeviceGetUtilizationRates"),
        memory: sym(lib, c"nvmlDeviceGetMemoryInfo"),
        memory_v2: sym(lib, c"nvmlDeviceGetMemoryInfo_v2"),
        pcie: sym(lib, c"nvmlDeviceGetPcieThroughput"),
        throttle: sym(lib, c"nvmlDeviceGetCurrentClocksEventReasons")
            .or_else(|| sym(lib, c"nvmlDeviceGetCurrentClocksThrottleReasons")),
        ecc: sym(lib, c"nvmlDeviceGetTotalEccErrors"),
        power_limit: sym(lib, c"nvmlDeviceGetEnforcedPowerLimit"),
        event_set_create: sym(lib, c"nvmlEventSetCreate"),
        register_events: sym(lib, c"nvmlDeviceRegisterEvents"),
        event_wait: sym(lib, c"nvmlEventSetWait_v2"),
    })
}

fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(load).as_ref()
}

/// One raw value of a GPU: which NVML query gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    PowerMw,
    EnergyMj,
    SmClockMhz,
    MemClockMhz,
    TemperatureC,
    GpuUtilPct,
    MemUtilPct,
    MemUsedBytes,
    PcieTxKbs,
    PcieRxKbs,
    ThrottleReasons,
    EccCorrected,
    EccUncorrected,
    PowerLimitMw,
}

/// A GPU seen through NVML.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub index: u32,
    handle: usize,
    pub name: String,
    pub uuid: String,
    /// The queries that answered at discovery, in raw-slot order, and the metrics over them.
    pub queries: Vec<Query>,
    pub metrics: Vec<MetricInfo>,
}

fn c_string(f: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret, d: Device) -> String {
    let mut buf = [0 as c_char; 128];
    // SAFETY: `buf` holds 128 bytes as told; NVML NUL-terminates on success.
    if unsafe { f(d, buf.as_mut_ptr(), buf.len() as c_uint) } != SUCCESS {
        return String::new();
    }
    // SAFETY: NUL-terminated within the buffer on success.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// One query on a device; `None` when NVML does not answer it.
pub fn query(gpu: &Gpu, q: Query) -> Option<u64> {
    let a = api()?;
    let d = gpu.handle as Device;
    let mut u: c_uint = 0;
    let mut ull: c_ulonglong = 0;
    // SAFETY: each call passes the device handle NVML gave and out-pointers to live locals of
    // the documented types.
    let (rc, v) = unsafe {
        match q {
            Query::PowerMw => ((a.power?)(d, &mut u), u64::from(u)),
            Query::EnergyMj => ((a.energy?)(d, &mut ull), ull),
            Query::SmClockMhz => ((a.clock?)(d, 1, &mut u), u64::from(u)), // NVML_CLOCK_SM
            Query::MemClockMhz => ((a.clock?)(d, 2, &mut u), u64::from(u)), // NVML_CLOCK_MEM
            Query::TemperatureC => ((a.temperature?)(d, 0, &mut u), u64::from(u)), // NVML_TEMPERATURE_GPU
            Query::GpuUtilPct | Query::MemUtilPct => {
                let mut ut = Utilization::default();
                let rc = (a.utilization?)(d, &mut ut);
                (rc, u64::from(if q == Query::GpuUtilPct { ut.gpu } else { ut.memory }))
            }
            Query::MemUsedBytes => match memory_v2(a, d) {
                Some(m) => (SUCCESS, m.used),
                None => {
                    let mut m = Memory::default();
                    ((a.memory?)(d, &mut m), m.used)
                }
            },
            Query::PcieTxKbs => ((a.pcie?)(d, 0, &mut u), u64::from(u)), // NVML_PCIE_UTIL_TX_BYTES
            Query::PcieRxKbs => ((a.pcie?)(d, 1, &mut u), u64::from(u)), // NVML_PCIE_UTIL_RX_BYTES
            Query::ThrottleReasons => ((a.throttle?)(d, &mut ull), ull),
            // NVML_MEMORY_ERROR_TYPE_CORRECTED/UNCORRECTED, NVML_VOLATILE_ECC (since boot).
            Query::EccCorrected => ((a.ecc?)(d, 0, 0, &mut ull), ull),
            Query::EccUncorrected => ((a.ecc?)(d, 1, 0, &mut ull), ull),
            Query::PowerLimitMw => ((a.power_limit?)(d, &mut u), u64::from(u)),
        }
    };
    (rc == SUCCESS).then_some(v)
}

fn metric_of(q: Query, slot: usize) -> MetricInfo {
    use MetricType::*;
    let (name, desc, comp, unit, ty, calc) = match q {
        Query::PowerMw => ("power", "board power draw", "power", "W", Raw, Calc::GaugeScaled(slot, 1e-3)),
        Query::EnergyMj => ("energy", "energy since the start", "power", "J", Event, Calc::TotalScaled(slot, 1e-3)),
        Query::SmClockMhz => ("sm_clock", "SM clock", "frequency", "MHz", Raw, Calc::Gauge(slot)),
        Query::MemClockMhz => ("memory_clock", "memory clock", "frequency", "MHz", Raw, Calc::Gauge(slot)),
        Query::TemperatureC => ("temperature", "GPU die temperature", "thermal", "C", Raw, Calc::Gauge(slot)),
        Query::GpuUtilPct => {
            ("utilization", "time a kernel ran (NVML sample period)", "gpu", "%", Ratio, Calc::Gauge(slot))
        }
        Query::MemUtilPct => {
            ("memory_utilization", "time memory was read or written", "memory", "%", Ratio, Calc::Gauge(slot))
        }
        Query::MemUsedBytes => (
            "memory_used",
            "device memory in use (without the driver's reserve)",
            "memory",
            "bytes",
            Raw,
            Calc::Gauge(slot),
        ),
        Query::PcieTxKbs => {
            ("pcie_tx", "PCIe transmit throughput (20 ms window)", "pcie", "KB/s", Throughput, Calc::Gauge(slot))
        }
        Query::PcieRxKbs => {
            ("pcie_rx", "PCIe receive throughput (20 ms window)", "pcie", "KB/s", Throughput, Calc::Gauge(slot))
        }
        Query::ThrottleReasons => (
            "throttle_reasons",
            "clock event reasons (nvmlClocksEventReason bits)",
            "frequency",
            "bitmask",
            Flag,
            Calc::Gauge(slot),
        ),
        Query::EccCorrected => {
            ("ecc_corrected", "corrected ECC errors since the start", "ras", "errors", Event, Calc::Total(slot))
        }
        Query::EccUncorrected => {
            ("ecc_uncorrected", "uncorrected ECC errors since the start", "ras", "errors", Event, Calc::Total(slot))
        }
        Query::PowerLimitMw => {
            ("power_limit", "enforced power limit", "power", "W", Raw, Calc::GaugeScaled(slot, 1e-3))
        }
    };
    MetricInfo::new(name, desc, comp, unit, ty, calc)
}

const ALL_QUERIES: [Query; 14] = [
    Query::PowerMw,
    Query::EnergyMj,
    Query::SmClockMhz,
    Query::MemClockMhz,
    Query::TemperatureC,
    Query::GpuUtilPct,
    Query::MemUtilPct,
    Query::MemUsedBytes,
    Query::PcieTxKbs,
    Query::PcieRxKbs,
    Query::ThrottleReasons,
    Query::EccCorrected,
    Query::EccUncorrected,
    Query::PowerLimitMw,
];

/// The GPUs NVML sees, each with the queries that answer (empty without NVML).
pub fn discover() -> Vec<Gpu> {
    let Some(a) = api() else { return Vec::new() };
    let mut n: c_uint = 0;
    // SAFETY: out-pointer to a live local.
    if unsafe { (a.count)(&mut n) } != SUCCESS {
        return Vec::new();
    }
    let mut gpus = Vec::new();
    for index in 0..n {
        let mut d: Device = std::ptr::null_mut();
        // SAFETY: index < count; out-pointer to a live local.
        if unsafe { (a.handle)(index, &mut d) } != SUCCESS {
            continue;
        }
        let mut gpu = Gpu {
            index,
            handle: d as usize,
            name: c_string(a.name, d),
            uuid: c_string(a.uuid, d),
            queries: Vec::new(),
            metrics: Vec::new(),
        };
        for q in ALL_QUERIES {
            if query(&gpu, q).is_some() {
                let slot = gpu.queries.len();
                gpu.queries.push(q);
                gpu.metrics.push(metric_of(q, slot));
            }
        }
        gpus.push(gpu);
    }
    gpus
}

/// `nvmlDeviceGetMemoryInfo_v2` where the driver has it.
fn memory_v2(a: &Api, d: Device) -> Option<MemoryV2> {
    let mut m = MemoryV2 { version: MEMORY_V2, ..MemoryV2::default() };
    // SAFETY: the device handle NVML gave; out-pointer to a live `nvmlMemory_v2_t` whose
    // version field names its layout.
    (unsafe { (a.memory_v2?)(d, &mut m) } == SUCCESS).then_some(m)
}

/// `(total, free, used)` device memory in bytes (`used` without the driver's reserve where
/// NVML has the v2 query).
pub fn memory_info(gpu: &Gpu) -> Option<(u64, u64, u64)> {
    let a = api()?;
    if let Some(m) = memory_v2(a, gpu.handle as Device) {
        return Some((m.total, m.free, m.used));
    }
    let mut m = Memory::default();
    // SAFETY: the device handle NVML gave; out-pointer to a live `nvmlMemory_t`.
    (unsafe { (a.memory?)(gpu.handle as Device, &mut m) } == SUCCESS).then_some((m.total, m.free, m.used))
}

/// The raw NVML device handle (for [`XidEvent::gpu_handle`] matching).
pub fn handle_of(gpu: &Gpu) -> usize {
    gpu.handle
}

/// Reads every query of `gpu` into `out`.
pub fn read(gpu: &Gpu, out: &mut [u64]) -> Result<(), MetricsError> {
    for (o, q) in out.iter_mut().zip(&gpu.queries) {
        *o = query(gpu, *q).ok_or(MetricsError::DeviceLost)?;
    }
    Ok(())
}

/// An XID (critical error) event set over some GPUs.
#[derive(Debug)]
pub struct XidEvents {
    set: usize,
}

/// An event from [`XidEvents::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidEvent {
    pub gpu_handle: usize,
    pub xid: u64,
}

impl XidEvents {
    /// Registers XID critical-error events (`nvmlEventTypeXidCriticalError`) of `gpus`.
    pub fn new(gpus: &[&Gpu]) -> Result<Self, MetricsError> {
        let a = api().ok_or(MetricsError::Uninitialized)?;
        let (Some(create), Some(register)) = (a.event_set_create, a.register_events) else {
            return Err(MetricsError::UnsupportedFeature);
        };
        let mut set: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer to a live local.
        if unsafe { create(&mut set) } != SUCCESS {
            return Err(MetricsError::UnsupportedFeature);
        }
        for g in gpus {
            // SAFETY: a device handle from NVML and the set just created.
            if unsafe { register(g.handle as Device, 0x8, set) } != SUCCESS {
                return Err(MetricsError::UnsupportedFeature);
            }
        }
        Ok(Self { set: set as usize })
    }

    /// Waits at most `timeout_ms` for an XID event: `Err(NotReady)` on timeout.
    pub fn wait(&self, timeout_ms: u32) -> Result<XidEvent, MetricsError> {
        let a = api().ok_or(MetricsError::Uninitialized)?;
        let wait = a.event_wait.ok_or(MetricsError::UnsupportedFeature)?;
        let mut e = EventData {
            device: std::ptr::null_mut(),
            event_type: 0,
            event_data: 0,
            gpu_instance_id: 0,
            compute_instance_id: 0,
        };
        // SAFETY: the set NVML created; out-pointer to a live local of `nvmlEventData_t`.
        match unsafe { wait(self.set as *mut c_void, &mut e, timeout_ms) } {
            SUCCESS => Ok(XidEvent { gpu_handle: e.device as usize, xid: e.event_data }),
            TIMEOUT => Err(MetricsError::NotReady),
            _ => Err(MetricsError::DeviceLost),
        }
    }
}

/// Whether NVML loaded and initialised.
pub fn present() -> bool {
    api().is_some()
}

#[cfg(test)]
mod tests {
    #[test]
    fn absent_library_lists_nothing() {
        // On a machine without the NVIDIA driver nothing is found and nothing fails.
        if super::present() {
            assert!(!super::discover().is_empty());
        } else {
            assert!(super::discover().is_empty());
        }
    }
}
