//! Device management in the shape of Level Zero's sysman (`zes`/the seed's `zetSysman*`):
//! devices and their properties, power (energy counter, limit), frequency (state, throttle
//! reasons), temperature, memory state, PCI throughput, RAS (ECC) state and events (XID, wait
//! with timeout) — over NVML for GPUs and `/proc` + `/sys` for the host CPU. What a device does
//! not offer answers `UNSUPPORTED_FEATURE`; nothing is made up.

use std::path::Path;
use std::time::Duration;

use crate::error::MetricsError;
use crate::model::{DeviceInfo, DeviceKind};
use crate::nvml::{self, Gpu, Query, XidEvents};

/// `zes_power_energy_counter_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnergyCounter {
    pub energy_uj: u64,
    pub timestamp_us: u64,
}

/// `zes_freq_state_t` (actual frequency and throttle reasons; NVML's clock event reason bits for
/// GPUs, 0 for the CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreqState {
    pub actual_mhz: f64,
    pub throttle_reasons: u64,
}

/// `zes_mem_state_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemState {
    pub size: u64,
    pub free: u64,
}

/// `zes_pci_stats_t` (throughput over NVML's 20 ms window, in KB/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciStats {
    pub tx_kbs: u64,
    pub rx_kbs: u64,
}

/// `zes_ras_state_t`: errors since boot (volatile ECC counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RasState {
    pub corrected: u64,
    pub uncorrected: u64,
}

/// An event from [`Sysman::event_wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysmanEvent {
    pub device: u32,
    /// `ZES_EVENT_TYPE_FLAG_RAS_UNCORRECTABLE_ERRORS`-like: an XID critical error and its code.
    pub xid: u64,
}

/// The host CPU and NVML's GPUs.
#[derive(Debug)]
pub struct Sysman {
    devices: Vec<DeviceInfo>,
    gpus: Vec<Gpu>,
    events: Option<XidEvents>,
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn rapl_packages() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir("/sys/class/powercap")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                // Top-level domains only (intel-rapl:N, not intel-rapl:N:M).
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("intel-rapl:") && n.matches(':').count() == 1)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl Sysman {
    pub fn new() -> Self {
        let mut devices = vec![DeviceInfo {
            id: 0,
            name: crate::Metrics::global().catalog().devices[0].name.clone(),
            kind: DeviceKind::Cpu,
            uuid: String::new(),
            pci_bus_id: String::new(),
        }];
        let gpus = nvml::discover();
        for g in &gpus {
            devices.push(DeviceInfo {
                id: devices.len() as u32,
                name: g.name.clone(),
                kind: DeviceKind::Gpu,
                uuid: g.uuid.clone(),
                pci_bus_id: String::new(),
            });
        }
        let events = if gpus.is_empty() { None } else { XidEvents::new(&gpus.iter().collect::<Vec<_>>()).ok() };
        Self { devices, gpus, events }
    }

    /// `zesDeviceGet` + properties.
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    fn gpu(&self, device: u32) -> Result<Option<&Gpu>, MetricsError> {
        match device {
            0 => Ok(None),
            d => self.gpus.get(d as usize - 1).map(Some).ok_or(MetricsError::InvalidNullHandle),
        }
    }

    fn q(gpu: &Gpu, q: Query) -> Result<u64, MetricsError> {
        nvml::query(gpu, q).ok_or(MetricsError::UnsupportedFeature)
    }

    /// `zesPowerGetEnergyCounter`: GPU energy since driver load (NVML), CPU RAPL packages summed.
    pub fn power_energy_counter(&self, device: u32) -> Result<EnergyCounter, MetricsError> {
        let timestamp_us = crate::monotonic_ns() / 1000;
        let energy_uj = match self.gpu(device)? {
            Some(g) => Self::q(g, Query::EnergyMj)? * 1000,
            None => {
                let pk = rapl_packages();
                let v: Vec<u64> = pk.iter().filter_map(|p| read_u64(&p.join("energy_uj"))).collect();
                if v.is_empty() {
                    return Err(MetricsError::UnsupportedFeature);
                }
                v.iter().sum()
            }
        };
        Ok(EnergyCounter { energy_uj, timestamp_us })
    }

    /// `zesPowerGetLimits`' sustained limit in mW.
    pub fn power_limit_mw(&self, device: u32) -> Result<u64, MetricsError> {
        match self.gpu(device)? {
            Some(g) => Self::q(g, Query::PowerLimitMw),
            None => {
                let v: Vec<u64> =
                    rapl_packages().iter().filter_map(|p| read_u64(&p.join("constraint_0_power_limit_uw"))).collect();
                if v.is_empty() { Err(MetricsError::UnsupportedFeature) } else { Ok(v.iter().sum::<u64>() / 1000) }
            }
        }
    }

    /// `zesFrequencyGetState`.
    pub fn frequency_state(&self, device: u32) -> Result<FreqState, MetricsError> {
        match self.gpu(device)? {
            Some(g) => Ok(FreqState {
                actual_mhz: Self::q(g, Query::SmClockMhz)? as f64,
                throttle_reasons: nvml::query(g, Query::ThrottleReasons).unwrap_or(0),
            }),
            None => {
                let plan = crate::sysfs::discover(Path::new("/sys")).ok_or(MetricsError::UnsupportedFeature)?;
                let m =
                    plan.metrics.iter().find(|m| m.name == "cpu_frequency").ok_or(MetricsError::UnsupportedFeature)?;
                let mut raw = vec![0; plan.files.len()];
                crate::sysfs::read(&plan, &mut raw)?;
                let r =
                    crate::model::RawReport { ts_ns: 1, prev_ts_ns: 0, now: raw.clone(), prev: raw.clone(), base: raw };
                let v = crate::model::calculate(std::slice::from_ref(m), &r);
                Ok(FreqState { actual_mhz: v[0].as_f64(), throttle_reasons: 0 })
            }
        }
    }

    /// `zesTemperatureGetState` in °C (CPU: the hottest thermal zone).
    pub fn temperature(&self, device: u32) -> Result<f64, MetricsError> {
        match self.gpu(device)? {
            Some(g) => Ok(Self::q(g, Query::TemperatureC)? as f64),
            None => {
                let zones = std::fs::read_dir("/sys/class/thermal").map_err(|_| MetricsError::UnsupportedFeature)?;
                zones
                    .filter_map(|e| read_u64(&e.ok()?.path().join("temp")))
                    .max()
                    .map(|m| m as f64 / 1000.0)
                    .ok_or(MetricsError::UnsupportedFeature)
            }
        }
    }

    /// `zesMemoryGetState`.
    pub fn memory_state(&self, device: u32) -> Result<MemState, MetricsError> {
        match self.gpu(device)? {
            Some(g) => nvml::memory_info(g)
                .map(|(t, f, _)| MemState { size: t, free: f })
                .ok_or(MetricsError::UnsupportedFeature),
            None => {
                let mut out = [0u64; crate::procfs::SYSTEM_SLOTS];
                crate::procfs::read_system(Path::new("/proc"), &mut out)?;
                Ok(MemState { size: out[2] + out[3], free: out[3] })
            }
        }
    }

    /// `zesPciGetStats` (GPUs).
    pub fn pci_stats(&self, device: u32) -> Result<PciStats, MetricsError> {
        let g = self.gpu(device)?.ok_or(MetricsError::UnsupportedFeature)?;
        Ok(PciStats { tx_kbs: Self::q(g, Query::PcieTxKbs)?, rx_kbs: Self::q(g, Query::PcieRxKbs)? })
    }

    /// `zesRasGetState` (GPUs with ECC).
    pub fn ras_state(&self, device: u32) -> Result<RasState, MetricsError> {
        let g = self.gpu(device)?.ok_or(MetricsError::UnsupportedFeature)?;
        Ok(RasState { corrected: Self::q(g, Query::EccCorrected)?, uncorrected: Self::q(g, Query::EccUncorrected)? })
    }

    /// `zesDriverEventListen`: waits at most `timeout` for an XID critical error on any GPU.
    /// Timeout: `NOT_READY`; no GPU or no event support: `UNSUPPORTED_FEATURE`.
    pub fn event_wait(&self, timeout: Duration) -> Result<SysmanEvent, MetricsError> {
        let ev = self.events.as_ref().ok_or(MetricsError::UnsupportedFeature)?;
        let e = ev.wait(u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX))?;
        let device = self.gpus.iter().position(|g| nvml::handle_of(g) == e.gpu_handle).map_or(0, |i| i as u32 + 1);
        Ok(SysmanEvent { device, xid: e.xid })
    }
}

impl Default for Sysman {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_answers_what_the_machine_has() {
        let s = Sysman::new();
        assert_eq!(s.devices()[0].kind, DeviceKind::Cpu);
        let m = s.memory_state(0).expect("/proc/meminfo");
        assert!(m.size > 0 && m.free <= m.size);
        assert_eq!(s.pci_stats(0), Err(MetricsError::UnsupportedFeature));
        assert_eq!(s.ras_state(0), Err(MetricsError::UnsupportedFeature));
        assert_eq!(s.memory_state(99).err(), Some(MetricsError::InvalidNullHandle));
        // RAPL and cpufreq: present or UNSUPPORTED_FEATURE, never a made-up value.
        match s.power_energy_counter(0) {
            Ok(e) => assert!(e.timestamp_us > 0),
            Err(e) => assert_eq!(e, MetricsError::UnsupportedFeature),
        }
        if s.devices().len() == 1 {
            assert_eq!(s.event_wait(Duration::from_millis(1)), Err(MetricsError::UnsupportedFeature));
        }
    }

    #[test]
    fn gpus_answer_through_nvml() {
        let s = Sysman::new();
        for d in s.devices().iter().filter(|d| d.kind == DeviceKind::Gpu) {
            let m = s.memory_state(d.id).expect("memory");
            assert!(m.size > 0 && m.free <= m.size);
            let f = s.frequency_state(d.id).expect("frequency");
            assert!(f.actual_mhz > 0.0);
            let t = s.temperature(d.id).expect("temperature");
            assert!((5.0..120.0).contains(&t));
            let e1 = s.power_energy_counter(d.id).expect("energy");
            std::thread::sleep(Duration::from_millis(200));
            let e2 = s.power_energy_counter(d.id).expect("energy");
            assert!(e2.energy_uj >= e1.energy_uj);
            // No XID error expected in a short wait: NOT_READY (or unsupported in a container).
            let w = s.event_wait(Duration::from_millis(50));
            assert!(matches!(w, Err(MetricsError::NotReady) | Err(MetricsError::UnsupportedFeature)), "{w:?}");
            println!("sysman gpu {}: {m:?} {f:?} {t} C energy {} uJ", d.id, e2.energy_uj);
        }
    }
}
