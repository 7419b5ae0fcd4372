//! What this machine offers: devices and their metric groups, probed at discovery. A source that
//! does not work here (no `perf_event_open`, no NVML, no cpufreq files) contributes nothing.
//!
//! | device | group | domain | sampling | source |
//! |---|---|---|---|---|
//! | cpu (0) | `cpu.sw` | 0 perf_event | event + time | software events of the process |
//! | cpu (0) | `cpu.thread_sw` | 0 perf_event | event | software events of the calling thread |
//! | cpu (0) | `cpu.hw` | 1 pmu | event + time | cycles, instructions (only with a PMU) |
//! | cpu (0) | `proc.process` | 2 procfs process | time | process CPU clock, `/proc/self/{statm,io,task}` |
//! | cpu (0) | `proc.system` | 3 procfs system | time | `/proc/{stat,meminfo}` |
//! | cpu (0) | `sys.cpu` | 4 sysfs | time | cpufreq, thermal zones, RAPL |
//! | each GPU (1..) | `nvml.telemetry` | 0 nvml | time | NVML |
//!
//! `cpu.sw` and `cpu.thread_sw` share the domain of the process's perf_event configuration: one
//! of them is active at a time, like groups that program one PMU.

use std::path::Path;
use std::sync::Arc;

use crate::cupti;
use crate::error::MetricsError;
use crate::model::{Calc, DeviceInfo, DeviceKind, GroupInfo, MetricInfo, MetricType, SamplingTypes};
use crate::nvml::Gpu;
use crate::perf::{self, EventSet, Scope};
use crate::procfs;
use crate::sysfs::{self, SysPlan};

/// A user-defined source: fills the group's raw slots.
pub type ReadFn = Arc<dyn Fn(&mut [u64]) -> Result<(), MetricsError> + Send + Sync>;

/// Where a group's raw values come from.
#[derive(Clone)]
pub enum Backend {
    PerfSoftware(Scope),
    PerfHardware,
    ProcProcess,
    ProcSystem,
    Sys(SysPlan),
    Nvml(Gpu),
    /// CUPTI's range profiler on CUDA device `index` (event-based: per-kernel queries).
    CuptiRange(usize),
    /// CUPTI's PM sampling on CUDA device `index` (time-based).
    CuptiPm(usize),
    /// A source given by the embedding program (tests, tools with counters of their own).
    Function(ReadFn),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PerfSoftware(s) => write!(f, "PerfSoftware({s:?})"),
            Self::PerfHardware => write!(f, "PerfHardware"),
            Self::ProcProcess => write!(f, "ProcProcess"),
            Self::ProcSystem => write!(f, "ProcSystem"),
            Self::Sys(_) => write!(f, "Sys"),
            Self::Nvml(g) => write!(f, "Nvml({})", g.index),
            Self::CuptiRange(i) => write!(f, "CuptiRange({i})"),
            Self::CuptiPm(i) => write!(f, "CuptiPm({i})"),
            Self::Function(_) => write!(f, "Function"),
        }
    }
}

/// A metric group: its properties and its source.
#[derive(Debug, Clone)]
pub struct Group {
    pub info: GroupInfo,
    pub slots: usize,
    pub backend: Backend,
}

/// An open source of one group's raw values.
#[derive(Debug)]
pub struct Collector {
    backend: Backend,
    perf: Option<EventSet>,
    proc: Option<procfs::OpenFiles>,
    process: Option<procfs::SelfProcess>,
    range: Option<cupti::RangeProfiler>,
    pm: Option<PmState>,
}

/// PM sampling behind a streamer: the hardware samples at the streamer's period; each read
/// decodes what arrived and reports the mean of those samples (the last values when none did).
/// The samples themselves, with their ends on the trace clock, stay readable until the next
/// read ([`Collector::pm_samples`]): the counter sampler emits each at its own time.
#[derive(Debug)]
struct PmState {
    sampler: cupti::PmSampler,
    samples: Vec<cupti::PmSample>,
    /// Each sample's end on the trace clock.
    ends: Vec<u64>,
    clock: cupti::PmClock,
    last: Vec<f64>,
    /// `OFFTRACE_PM_CLOCK_LOG=FILE`: one line per decode with samples (the clocks read, the
    /// samples' raw start/end, the domain chosen), for checking the mapping on a GPU machine.
    log: Option<std::fs::File>,
}

impl PmState {
    fn map_times(&mut self) {
        self.ends.clear();
        let Some(last) = self.samples.last() else { return };
        let reading = cupti::ClockReading::now();
        let off = self.clock.offset(last.end_ns, &reading);
        self.ends.extend(self.samples.iter().map(|s| cupti::PmClock::map(s.end_ns, off)));
        if let Some(f) = self.log.as_mut() {
            use std::io::Write;
            let first = &self.samples[0];
            let _ = writeln!(
                f,
                "trace_now={} cupti_now={} realtime_now={} n={} first_start={} first_end={} last_end={} domain={:?} offset={} last_end_trace={}",
                reading.trace_now,
                reading.cupti_now.unwrap_or(0),
                reading.realtime_now,
                self.samples.len(),
                first.start_ns,
                first.end_ns,
                last.end_ns,
                self.clock.domain(),
                off,
                self.ends.last().copied().unwrap_or(0),
            );
        }
    }
}

impl Collector {
    /// Reads the group's raw slots into `out` (of the group's slot count).
    pub fn read(&mut self, out: &mut [u64]) -> Result<(), MetricsError> {
        match &self.backend {
            Backend::PerfSoftware(_) | Backend::PerfHardware => {
                self.perf.as_ref().ok_or(MetricsError::Uninitialized)?.read(out);
                Ok(())
            }
            Backend::ProcProcess => self.process.as_mut().ok_or(MetricsError::Uninitialized)?.read(out),
            Backend::ProcSystem => {
                let files = self.proc.as_mut().ok_or(MetricsError::Uninitialized)?;
                files.read()?;
                procfs::parse_system(files.text(0), files.text(1), out)
            }
            Backend::Sys(plan) => sysfs::read(plan, out),
            // Values per kernel, not a snapshot: only queries read it (`range_start/stop`).
            Backend::CuptiRange(_) => Err(MetricsError::InvalidArgument),
            Backend::CuptiPm(_) => {
                let pm = self.pm.as_mut().ok_or(MetricsError::Uninitialized)?;
                pm.samples.clear();
                pm.sampler.decode(&mut pm.samples)?;
                pm.map_times();
                if !pm.samples.is_empty() {
                    let n = pm.samples.len() as f64;
                    for (i, l) in pm.last.iter_mut().enumerate() {
                        *l = pm.samples.iter().map(|s| s.values.get(i).copied().unwrap_or(0.0)).sum::<f64>() / n;
                    }
                }
                for (o, v) in out.iter_mut().zip(&pm.last) {
                    *o = v.to_bits();
                }
                Ok(())
            }
            Backend::Nvml(gpu) => crate::nvml::read(gpu, out),
            Backend::Function(f) => f(out),
        }
    }
}

impl Collector {
    /// PM sampling: the hardware samples the last [`Self::read`] decoded, each with its end on
    /// the trace clock (`None` for other backends).
    pub fn pm_samples(&self) -> Option<impl Iterator<Item = (u64, &[f64])>> {
        let pm = self.pm.as_ref()?;
        Some(pm.ends.iter().copied().zip(pm.samples.iter().map(|s| s.values.as_slice())))
    }

    /// Whether queries of this collector are GPU ranges ([`Self::range_start`]) rather than
    /// host snapshots.
    pub fn is_range(&self) -> bool {
        self.range.is_some()
    }

    /// Begins a range-profiler query: every kernel launched from now is one range.
    pub fn range_start(&mut self) -> Result<(), MetricsError> {
        self.range.as_mut().ok_or(MetricsError::InvalidArgument)?.start()
    }

    /// Ends a range-profiler query: one entry per kernel.
    pub fn range_stop(&mut self) -> Result<Vec<cupti::RangeValues>, MetricsError> {
        self.range.as_mut().ok_or(MetricsError::InvalidArgument)?.stop()
    }
}

impl Group {
    /// Opens a collector (perf events are opened here: a thread-scope group counts the calling
    /// thread). GPU range-profiler groups need a current CUDA context on the calling thread.
    pub fn open(&self) -> Result<Collector, MetricsError> {
        self.open_for(None)
    }

    /// [`Self::open`] for a streamer of `period` (PM sampling samples at that period on the GPU;
    /// 1 ms otherwise).
    pub fn open_for(&self, period: Option<std::time::Duration>) -> Result<Collector, MetricsError> {
        let perf = match &self.backend {
            Backend::PerfSoftware(scope) => Some(perf::open_set(&perf::SOFTWARE_EVENTS, *scope)?),
            Backend::PerfHardware => Some(perf::open_set(&perf::HARDWARE_EVENTS, Scope::Process)?),
            _ => None,
        };
        let proc = match &self.backend {
            Backend::ProcSystem => Some(procfs::OpenFiles::open(&["/proc/stat".into(), "/proc/meminfo".into()])?),
            _ => None,
        };
        let names = || self.info.metrics.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
        let range = match self.backend {
            Backend::CuptiRange(index) => {
                Some(cupti::RangeProfiler::new(cupti::current_context(), index, &names(), MAX_KERNELS_PER_QUERY)?)
            }
            _ => None,
        };
        let pm = match self.backend {
            Backend::CuptiPm(index) => {
                let ns = period.map_or(1_000_000, |p| p.as_nanos().clamp(1_000, u128::from(u64::MAX)) as u64);
                let mut sampler = cupti::PmSampler::new(index, &names(), ns, 4096)?;
                sampler.start()?;
                let log = std::env::var_os("OFFTRACE_PM_CLOCK_LOG")
                    .and_then(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).ok());
                Some(PmState {
                    sampler,
                    samples: Vec::new(),
                    ends: Vec::new(),
                    clock: cupti::PmClock::default(),
                    last: vec![0.0; self.slots],
                    log,
                })
            }
            _ => None,
        };
        let process = match self.backend {
            Backend::ProcProcess => Some(procfs::SelfProcess::open()?),
            _ => None,
        };
        Ok(Collector { backend: self.backend.clone(), perf, proc, process, range, pm })
    }
}

/// Kernels one range-profiler query keeps (ranges beyond are dropped by CUPTI).
pub const MAX_KERNELS_PER_QUERY: usize = 64;

/// Devices and groups.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub devices: Vec<DeviceInfo>,
    pub groups: Vec<Group>,
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find_map(|l| Some(l.strip_prefix("model name")?.split_once(':')?.1.trim().to_owned())))
        .unwrap_or_else(|| "cpu".to_owned())
}

fn sw_metrics() -> Vec<MetricInfo> {
    use MetricType::*;
    vec![
        MetricInfo::new(
            "task_clock",
            "CPU time of the counted tasks (perf task-clock)",
            "cpu",
            "ns",
            Duration,
            Calc::Total(0),
        ),
        MetricInfo::new("cpus_utilized", "task clock per wall-clock time", "cpu", "%", Ratio, Calc::Rate(0, 100.0)),
        MetricInfo::new(
            "context_switches",
            "context switches (perf context-switches)",
            "cpu",
            "switches",
            Event,
            Calc::Total(1),
        ),
        MetricInfo::new(
            "cpu_migrations",
            "migrations between CPUs (perf cpu-migrations)",
            "cpu",
            "migrations",
            Event,
            Calc::Total(2),
        ),
        MetricInfo::new("page_faults", "page faults (perf page-faults)", "memory", "faults", Event, Calc::Total(3)),
        MetricInfo::new(
            "major_faults",
            "major page faults (perf major-faults)",
            "memory",
            "faults",
            Event,
            Calc::Total(4),
        ),
    ]
}

impl Catalog {
    /// Probes this machine.
    pub fn discover() -> Self {
        let mut c = Catalog::default();
        c.devices.push(DeviceInfo {
            id: 0,
            name: cpu_name(),
            kind: DeviceKind::Cpu,
            uuid: String::new(),
            pci_bus_id: String::new(),
        });
        let group = |name: &str, desc: &str, domain, sampling, metrics: Vec<MetricInfo>, slots, backend| Group {
            info: GroupInfo { name: name.into(), description: desc.into(), device: 0, domain, sampling, metrics },
            slots,
            backend,
        };
        if perf::SOFTWARE_EVENTS.iter().all(|&(_, t, cfg)| perf::available(t, cfg)) {
            c.groups.push(group(
                "cpu.sw",
                "software events of this process (perf_event_open: every thread and child)",
                0,
                SamplingTypes::BOTH,
                sw_metrics(),
                perf::SOFTWARE_EVENTS.len(),
                Backend::PerfSoftware(Scope::Process),
            ));
            c.groups.push(group(
                "cpu.thread_sw",
                "software events of the calling thread (perf_event_open), per command",
                0,
                SamplingTypes::EVENT_BASED,
                sw_metrics(),
                perf::SOFTWARE_EVENTS.len(),
                Backend::PerfSoftware(Scope::Thread),
            ));
        }
        if perf::HARDWARE_EVENTS.iter().all(|&(_, t, cfg)| perf::available(t, cfg)) {
            use MetricType::*;
            c.groups.push(group(
                "cpu.hw",
                "hardware events of this process (CPU PMU)",
                1,
                SamplingTypes::BOTH,
                vec![
                    MetricInfo::new("cycles", "CPU cycles", "cpu", "cycles", Event, Calc::Total(0)),
                    MetricInfo::new(
                        "instructions",
                        "instructions retired",
                        "cpu",
                        "instructions",
                        Event,
                        Calc::Total(1),
                    ),
                    MetricInfo::new("ipc", "instructions per cycle", "cpu", "ratio", Ratio, Calc::Ratio(1, 0, 1.0)),
                ],
                2,
                Backend::PerfHardware,
            ));
        }
        let mut probe = [0u64; procfs::PROCESS_SLOTS];
        if procfs::read_process(Path::new("/proc"), None, &mut probe).is_ok() {
            use MetricType::*;
            c.groups.push(group(
                "proc.process",
                "this process: CPU clock, /proc/self (statm, io, task)",
                2,
                SamplingTypes::TIME_BASED,
                vec![
                    MetricInfo::new(
                        "cpu_utilization",
                        "user + system CPU time per wall-clock time",
                        "process",
                        "%",
                        Ratio,
                        Calc::Rate(0, 100.0),
                    ),
                    MetricInfo::new(
                        "cpu_time",
                        "user + system CPU time of every thread (CLOCK_PROCESS_CPUTIME_ID)",
                        "process",
                        "ns",
                        Duration,
                        Calc::Total(0),
                    ),
                    MetricInfo::new("rss", "resident set size", "memory", "bytes", Raw, Calc::Gauge(1)),
                    MetricInfo::new("threads", "threads", "process", "threads", Raw, Calc::Gauge(2)),
                    MetricInfo::new(
                        "read_rate",
                        "bytes read by system calls per second (rchar)",
                        "io",
                        "B/s",
                        Throughput,
                        Calc::Rate(3, 1e9),
                    ),
                    MetricInfo::new(
                        "write_rate",
                        "bytes written by system calls per second (wchar)",
                        "io",
                        "B/s",
                        Throughput,
                        Calc::Rate(4, 1e9),
                    ),
                ],
                procfs::PROCESS_SLOTS,
                Backend::ProcProcess,
            ));
        }
        let mut probe = [0u64; procfs::SYSTEM_SLOTS];
        if procfs::read_system(Path::new("/proc"), &mut probe).is_ok() {
            use MetricType::*;
            c.groups.push(group(
                "proc.system",
                "the whole system from /proc (stat, meminfo)",
                3,
                SamplingTypes::TIME_BASED,
                vec![
                    MetricInfo::new(
                        "cpu_utilization",
                        "busy CPU time of all CPUs per total",
                        "cpu",
                        "%",
                        Ratio,
                        Calc::Ratio(0, 1, 100.0),
                    ),
                    MetricInfo::new("memory_used", "MemTotal - MemAvailable", "memory", "bytes", Raw, Calc::Gauge(2)),
                    MetricInfo::new("memory_available", "MemAvailable", "memory", "bytes", Raw, Calc::Gauge(3)),
                    MetricInfo::new(
                        "context_switch_rate",
                        "context switches per second, all CPUs",
                        "cpu",
                        "1/s",
                        Throughput,
                        Calc::Rate(4, 1e9),
                    ),
                ],
                procfs::SYSTEM_SLOTS,
                Backend::ProcSystem,
            ));
        }
        if let Some(plan) = sysfs::discover(Path::new("/sys")) {
            let metrics = plan.metrics.clone();
            let slots = plan.files.len();
            c.groups.push(group(
                "sys.cpu",
                "CPU frequency, thermal zones and RAPL energy from /sys",
                4,
                SamplingTypes::TIME_BASED,
                metrics,
                slots,
                Backend::Sys(plan),
            ));
        }
        for gpu in crate::nvml::discover() {
            let id = c.devices.len() as u32;
            c.devices.push(DeviceInfo {
                id,
                name: gpu.name.clone(),
                kind: DeviceKind::Gpu,
                uuid: gpu.uuid.clone(),
                pci_bus_id: String::new(),
            });
            if gpu.metrics.is_empty() {
                continue;
            }
            c.groups.push(Group {
                info: GroupInfo {
                    name: "nvml.telemetry".into(),
                    description: format!("NVML telemetry of GPU {} ({})", gpu.index, gpu.name),
                    device: id,
                    domain: 0,
                    sampling: SamplingTypes::TIME_BASED,
                    metrics: gpu.metrics.clone(),
                },
                slots: gpu.queries.len(),
                backend: Backend::Nvml(gpu.clone()),
            });
            if cupti::available() {
                // NVML's index is the CUDA ordinal where both enumerate in PCI order (one GPU,
                // or CUDA_DEVICE_ORDER=PCI_BUS_ID).
                let index = gpu.index as usize;
                let gpu_metrics = |list: &[(&str, &str, &str)]| {
                    list.iter()
                        .enumerate()
                        .map(|(i, &(n, d, u))| MetricInfo::new(n, d, "gpu", u, MetricType::Raw, Calc::GaugeF64(i)))
                        .collect::<Vec<_>>()
                };
                // One domain for both: they program the same performance monitors.
                c.groups.push(Group {
                    info: GroupInfo {
                        name: "cupti.range_profiler".into(),
                        description: format!("CUPTI range profiler, values per kernel (kernel replay), GPU {index}"),
                        device: id,
                        domain: 1,
                        sampling: SamplingTypes::EVENT_BASED,
                        metrics: gpu_metrics(&cupti::RANGE_METRICS),
                    },
                    slots: cupti::RANGE_METRICS.len(),
                    backend: Backend::CuptiRange(index),
                });
                c.groups.push(Group {
                    info: GroupInfo {
                        name: "cupti.pm_sampling".into(),
                        description: format!("CUPTI PM sampling, sampled by the GPU every period, GPU {index}"),
                        device: id,
                        domain: 1,
                        sampling: SamplingTypes::TIME_BASED,
                        metrics: gpu_metrics(&cupti::PM_METRICS),
                    },
                    slots: cupti::PM_METRICS.len(),
                    backend: Backend::CuptiPm(index),
                });
            }
        }
        c
    }

    /// Adds a user-defined group (its device must exist); returns its index.
    pub fn add_group(&mut self, info: GroupInfo, slots: usize, read: ReadFn) -> usize {
        self.groups.push(Group { info, slots, backend: Backend::Function(read) });
        self.groups.len() - 1
    }

    /// Groups of `device`, as indices.
    pub fn groups_of(&self, device: u32) -> impl Iterator<Item = usize> + '_ {
        self.groups.iter().enumerate().filter(move |(_, g)| g.info.device == device).map(|(i, _)| i)
    }

    /// Finds groups by name (`name` or `name@device`): every device's group of that name.
    pub fn find(&self, name: &str) -> Vec<usize> {
        let (n, dev) = match name.split_once('@') {
            Some((n, d)) => (n, d.parse::<u32>().ok()),
            None => (name, None),
        };
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.info.name == n && dev.is_none_or(|d| g.info.device == d))
            .map(|(i, _)| i)
            .collect()
    }
}
