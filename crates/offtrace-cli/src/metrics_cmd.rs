//! `offtrace metrics list`, `offtrace monitor`, and `record`'s metrics set-up
//! ([`record_env`]): which groups the agent samples, at which period, and the perf_event
//! descriptors it reads (opened in the child right before `exec`, as `perf stat` does, so the
//! counts cover the whole program).

use std::io::Write;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use offtrace_metrics::{Catalog, GroupHandle, Metrics, StreamerDesc, TypedValue, perf};

#[derive(Debug, Clone)]
pub struct ListConfig {
    pub json: bool,
}

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub groups: Vec<String>,
    pub interval: Duration,
    pub count: Option<u64>,
    pub csv: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RecordMetrics {
    pub groups: Vec<String>,
    pub period: Duration,
    pub telemetry: bool,
    /// Event-based groups measured per command (`OFFTRACE_QUERY_METRICS`).
    pub query_groups: Vec<String>,
}

/// Telemetry groups: the system and device-level ones present here.
const TELEMETRY: [&str; 3] = ["proc.system", "sys.cpu", "nvml.telemetry"];

fn telemetry_present(c: &Catalog) -> Vec<String> {
    TELEMETRY.iter().filter(|n| !c.find(n).is_empty()).map(|n| (*n).to_owned()).collect()
}

fn check_groups(c: &Catalog, names: &[String]) -> anyhow::Result<()> {
    for n in names {
        if c.find(n).is_empty() {
            let known: Vec<&str> = c.groups.iter().map(|g| g.info.name.as_str()).collect();
            bail!("no metric group {n:?} on this machine (available: {})", known.join(", "));
        }
    }
    Ok(())
}

/// How long `metrics list` waits for the OpenCL probe (it initialises every OpenCL platform).
const OPENCL_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// `offtrace metrics opencl-probe` (hidden): the Codeplay counters of the OpenCL devices this
/// process sees (`OPENCL_LAYERS` names the layer), one line each (`offtrace_metrics::opencl`).
pub fn opencl_probe() -> anyhow::Result<u8> {
    print!("{}", offtrace_metrics::opencl::format_probe(&offtrace_metrics::opencl::probe()));
    Ok(0)
}

/// The OpenCL devices behind the layer with their Codeplay counters: asked by a process of our
/// own (the probe initialises the OpenCL runtimes, which stay out of this one) with the layer in
/// `OPENCL_LAYERS`. None when the layer is not built, no runtime answers, or the probe fails or
/// takes longer than [`OPENCL_PROBE_TIMEOUT`].
fn codeplay_devices() -> Vec<offtrace_metrics::opencl::CodeplayDevice> {
    let Some(layer) = crate::record::find_opencl_layer() else { return Vec::new() };
    let Ok(exe) = std::env::current_exe() else { return Vec::new() };
    // As `record` runs a program: through the layer, preloaded where the loader the probe
    // loads has no layer support (CUDA's, first on most CUDA machines), else a listed layer.
    let choice = crate::opencl_loader::choose(crate::opencl_loader::Interpose::Auto, &exe);
    let mut cmd = Command::new(exe);
    crate::record::opencl_environment(&mut cmd, &layer, &choice);
    let child = cmd
        .args(["metrics", "opencl-probe"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return Vec::new() };
    let Some(mut stdout) = child.stdout.take() else { return Vec::new() };
    // Read on a thread so that a probe which hangs is killed at the timeout.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        let _ = tx.send(text);
    });
    let text = rx.recv_timeout(OPENCL_PROBE_TIMEOUT).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    offtrace_metrics::opencl::parse_probe(&text)
}

/// The catalog's groups and devices plus the OpenCL layer's Codeplay groups (one per OpenCL
/// device behind the layer, numbered after the catalog's devices).
struct Listing {
    devices: Vec<(u32, String, String, String)>,
    groups: Vec<offtrace_metrics::GroupInfo>,
}

fn listing(c: &Catalog) -> Listing {
    let mut devices: Vec<(u32, String, String, String)> =
        c.devices.iter().map(|d| (d.id, d.kind.name().to_owned(), d.name.clone(), d.uuid.clone())).collect();
    let mut groups: Vec<offtrace_metrics::GroupInfo> = c.groups.iter().map(|g| g.info.clone()).collect();
    let first = c.devices.iter().map(|d| d.id + 1).max().unwrap_or(0);
    for (id, d) in (first..).zip(codeplay_devices()) {
        devices.push((id, d.kind.clone(), format!("{} (OpenCL: {})", d.name, d.platform), String::new()));
        groups.push(d.group(id));
    }
    Listing { devices, groups }
}

pub fn list(cfg: &ListConfig) -> anyhow::Result<u8> {
    let c = Metrics::global().catalog();
    let all = listing(c);
    let mut out = std::io::stdout().lock();
    if cfg.json {
        let groups: Vec<serde_json::Value> = all
            .groups
            .iter()
            .map(|g| {
                serde_json::json!({
                    "name": g.name,
                    "device": g.device,
                    "domain": g.domain,
                    "sampling_types": g.sampling.names(),
                    "description": g.description,
                    "metrics": g.metrics.iter().map(|m| serde_json::json!({
                        "name": m.name,
                        "description": m.description,
                        "component": m.component,
                        "unit": m.unit,
                        "result_type": m.result_type.name(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let devices: Vec<serde_json::Value> = all
            .devices
            .iter()
            .map(|(id, kind, name, uuid)| serde_json::json!({"id": id, "name": name, "type": kind, "uuid": uuid}))
            .collect();
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({"devices": devices, "groups": groups}))?;
        writeln!(out)?;
        return Ok(0);
    }
    let widths = MetricColumns::fitting(all.groups.iter().flat_map(|g| &g.metrics));
    for (id, kind, name, _) in &all.devices {
        writeln!(out, "device {id} ({kind}): {name}")?;
        for g in all.groups.iter().filter(|g| g.device == *id) {
            writeln!(out, "  {}  domain {}  {}  — {}", g.name, g.domain, g.sampling.names().join("+"), g.description)?;
            for m in &g.metrics {
                writeln!(out, "{}", widths.row(m))?;
            }
        }
    }
    Ok(0)
}

/// The widths of `metrics list`'s metric columns (name, unit, type, component): each as wide
/// as its longest entry in the whole listing, so that every row lines up (a fixed width let a
/// 10-character unit push its row's later columns out of line).
struct MetricColumns([usize; 4]);

impl MetricColumns {
    fn cells(m: &offtrace_metrics::MetricInfo) -> [&str; 4] {
        [&m.name, &m.unit, m.result_type.name(), &m.component]
    }

    fn fitting<'a>(metrics: impl Iterator<Item = &'a offtrace_metrics::MetricInfo>) -> Self {
        let mut w = [0usize; 4];
        for m in metrics {
            for (w, c) in w.iter_mut().zip(Self::cells(m)) {
                *w = (*w).max(c.chars().count());
            }
        }
        Self(w)
    }

    fn row(&self, m: &offtrace_metrics::MetricInfo) -> String {
        let [n, u, t, c] = Self::cells(m);
        let [wn, wu, wt, wc] = self.0;
        format!("    {n:<wn$} {u:<wu$} {t:<wt$} {c:<wc$} {}", m.description)
    }
}

/// Sets the agent's environment for `record --metrics/--telemetry` and arranges the perf_event
/// descriptors (when `cpu.sw` is sampled). Nothing asked: nothing set.
pub fn record_env(cmd: &mut Command, m: &RecordMetrics) -> anyhow::Result<()> {
    let mut groups = m.groups.clone();
    let c = Metrics::global().catalog();
    check_groups(c, &groups)?;
    // The OpenCL layer's Codeplay counters are collected by the layer: present when an OpenCL
    // device behind it offers them.
    let (layer_groups, model_groups): (Vec<String>, Vec<String>) =
        m.query_groups.iter().cloned().partition(|n| offtrace_metrics::opencl::is_layer_group(n));
    if !layer_groups.is_empty() && codeplay_devices().is_empty() {
        bail!(
            "--query-metrics {}: no OpenCL device offers the layer's Codeplay counters here (the layer, {}, is built with `cargo build -p offtrace-opencl`; `offtrace metrics list` shows them)",
            offtrace_metrics::opencl::GROUP,
            "libofftrace_opencl.so next to offtrace or OFFTRACE_OPENCL_LAYER"
        );
    }
    check_groups(c, &model_groups)?;
    for n in &model_groups {
        if c.find(n).iter().any(|&g| !c.groups[g].info.sampling.contains(offtrace_metrics::SamplingTypes::EVENT_BASED))
        {
            bail!("--query-metrics {n}: not an event-based group (`offtrace metrics list` says which are)");
        }
        // A command's query begins on the enqueuing thread and ends on the thread that reports
        // its completion: a group counting one thread would measure neither.
        use offtrace_metrics::{Backend, perf::Scope};
        if c.find(n).iter().any(|&g| matches!(c.groups[g].backend, Backend::PerfSoftware(Scope::Thread))) {
            bail!("--query-metrics {n}: counts one thread, and a command's query spans two (use cpu.sw)");
        }
    }
    if m.telemetry {
        groups.extend(telemetry_present(c));
    }
    if groups.is_empty() && m.query_groups.is_empty() {
        return Ok(());
    }
    if !groups.is_empty() {
        cmd.env("OFFTRACE_METRICS", groups.join(","));
        cmd.env("OFFTRACE_SAMPLE_PERIOD_NS", m.period.as_nanos().to_string());
    }
    if !m.query_groups.is_empty() {
        cmd.env("OFFTRACE_QUERY_METRICS", m.query_groups.join(","));
    }
    if groups.iter().chain(&m.query_groups).any(|g| g.split('@').next() == Some("cpu.sw")) {
        exec_counters(cmd);
    }
    Ok(())
}

/// The program's own perf_event counters (the ones the agent samples), taken from the child
/// right after it started, read once it exited: whole-run totals, printed by `record`.
#[derive(Debug, Default)]
pub struct ChildCounters {
    counters: Vec<Option<perf::Counter>>,
}

/// After `spawn` (the child runs the program): take its counters when [`record_env`] arranged
/// them (the command names `OFFTRACE_PERF_FDS`).
pub fn after_spawn(cmd: &Command, pid: u32) -> ChildCounters {
    if !cmd.get_envs().any(|(k, v)| k == perf::FDS_ENV && v.is_some()) {
        return ChildCounters::default();
    }
    ChildCounters { counters: perf::take_from_child(pid, &PERF_FDS) }
}

impl ChildCounters {
    /// `offtrace: cpu.sw whole run: task_clock=.. ns ...` on stderr (after the program exited).
    pub fn print(&self) {
        if self.counters.iter().all(Option::is_none) {
            return;
        }
        let parts: Vec<String> = perf::SOFTWARE_EVENTS
            .iter()
            .zip(&self.counters)
            .filter_map(|((name, _, _), c)| Some(format!("{name}={}", c.as_ref()?.read())))
            .collect();
        eprintln!("offtrace: cpu.sw whole run (program exec to exit): {}", parts.join(" "));
    }
}

/// Descriptor numbers the child's perf events are moved to (below the usual 1024 soft limit).
const PERF_FDS: [i32; 5] = [900, 901, 902, 903, 904];

#[allow(unsafe_code)]
fn exec_counters(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let attrs = perf::exec_attrs();
    cmd.env(perf::FDS_ENV, perf::record_env(&PERF_FDS));
    // SAFETY: the closure runs in the forked child before exec; `open_for_exec` only makes the
    // perf_event_open, dup2 and close system calls (async-signal-safe) on the attributes built
    // above (no allocation, no lock). A failure leaves the descriptors absent: the agent then
    // opens its own counters.
    unsafe {
        cmd.pre_exec(move || {
            perf::open_for_exec(&attrs, &PERF_FDS);
            Ok(())
        });
    }
}

/// Which reports `monitor` prints, counted per group. Each group has a streamer thread of its
/// own, so the groups' reports arrive interleaved in any order: a group whose thread ran late
/// reports once while another reports twice. Taking any `groups` reports in a row for one
/// refresh of each stopped `--count 3` after 4 reports of one group and 2 of the other (a run on
/// a loaded machine). With `--count N` each group is printed N times; its further reports, while another group
/// catches up, are dropped.
struct Refreshes {
    /// (group index, reports printed) of each monitored group.
    printed: Vec<(usize, u64)>,
    count: Option<u64>,
}

impl Refreshes {
    fn new(groups: impl Iterator<Item = usize>, count: Option<u64>) -> Self {
        Self { printed: groups.map(|g| (g, 0)).collect(), count }
    }

    /// Whether to print this report of group `group` (counted when so).
    fn admit(&mut self, group: usize) -> bool {
        let Some(done) = self.printed.iter_mut().find(|p| p.0 == group).map(|p| &mut p.1) else { return false };
        if self.count.is_some_and(|n| *done >= n) {
            return false;
        }
        *done += 1;
        true
    }

    /// Every group was printed `--count` times (never without a count).
    fn complete(&self) -> bool {
        self.count.is_some_and(|n| self.printed.iter().all(|&(_, done)| done >= n))
    }
}

/// `offtrace monitor`: the telemetry groups and the chosen ones, sampled every interval, one
/// line per group and refresh (`nvidia-smi dmon` style) or CSV rows.
pub fn monitor(cfg: &MonitorConfig) -> anyhow::Result<u8> {
    let metrics = Metrics::global();
    let c = metrics.catalog();
    check_groups(c, &cfg.groups)?;
    let mut names = telemetry_present(c);
    names.extend(cfg.groups.iter().cloned());
    let mut handles: Vec<GroupHandle> = names.iter().flat_map(|n| c.find(n)).map(GroupHandle).collect();
    handles.sort_by_key(|g| g.0);
    handles.dedup();
    if handles.is_empty() {
        bail!("no metric group to monitor on this machine");
    }
    let mut devices: Vec<u32> = handles.iter().map(|g| c.groups[g.0].info.device).collect();
    devices.sort_unstable();
    devices.dedup();
    for d in &devices {
        let on: Vec<GroupHandle> = handles.iter().copied().filter(|g| c.groups[g.0].info.device == *d).collect();
        metrics.activate(*d, &on).with_context(|| format!("activating groups on device {d}"))?;
    }
    let (tx, rx) = mpsc::channel::<(usize, u64, Vec<TypedValue>)>();
    let mut streamers = Vec::new();
    for g in &handles {
        let tx = tx.clone();
        let gi = g.0;
        let desc = StreamerDesc { sampling_period: cfg.interval, keep_raw: false, ..Default::default() };
        let cb = Box::new(move |_: &offtrace_metrics::GroupInfo, r: &offtrace_metrics::RawReport, v: &[TypedValue]| {
            let _ = tx.send((gi, r.ts_ns, v.to_vec()));
        });
        streamers.push(metrics.streamer_open(c.groups[gi].info.device, *g, desc, Some(cb))?);
    }
    drop(tx);
    let mut out = std::io::stdout().lock();
    if cfg.csv {
        writeln!(out, "ts_ns,device,group,metric,value,unit")?;
    }
    let mut refreshes = Refreshes::new(handles.iter().map(|g| g.0), cfg.count);
    while let Ok((gi, ts, values)) = rx.recv() {
        if !refreshes.admit(gi) {
            continue;
        }
        let g = &c.groups[gi].info;
        if cfg.csv {
            for (m, v) in g.metrics.iter().zip(&values) {
                writeln!(out, "{ts},{},{},{},{},{}", g.device, g.name, m.name, v, m.unit)?;
            }
        } else {
            let cols: Vec<String> = g
                .metrics
                .iter()
                .zip(&values)
                .map(|(m, v)| match (v, m.unit.as_str()) {
                    (_, "bytes") => format!("{}={:.1}MiB", m.name, v.as_f64() / 1048576.0),
                    (TypedValue::F64(x), u) => format!("{}={x:.1} {u}", m.name),
                    (TypedValue::U64(x), u) => format!("{}={x} {u}", m.name),
                })
                .collect();
            writeln!(out, "{:>12.3} dev{} {:<15} {}", ts as f64 / 1e9, g.device, g.name, cols.join(" "))?;
        }
        out.flush()?;
        if refreshes.complete() {
            break;
        }
    }
    for s in streamers {
        let _ = metrics.streamer_close(s);
    }
    for d in devices {
        let _ = metrics.activate(d, &[]);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each of a row's columns starts: the offset after each run of separating spaces.
    #[test]
    fn monitor_counts_each_groups_refreshes_whatever_order_their_reports_come_in() {
        // Group 4's thread ran late: group 9 reports twice before group 4's first report.
        let mut r = Refreshes::new([4, 9].into_iter(), Some(3));
        let order = [9, 9, 4, 9, 4, 9, 9, 4, 9];
        let printed: Vec<usize> = order.iter().copied().filter(|&g| r.admit(g)).collect();
        assert_eq!(printed, [9, 9, 4, 9, 4, 4], "three of each; group 9's fourth and later dropped");
        assert!(r.complete());
        let mut r = Refreshes::new([4, 9].into_iter(), Some(3));
        for g in [9, 9, 9, 9, 4, 4] {
            r.admit(g);
        }
        assert!(!r.complete(), "group 4 has had two refreshes");
        assert!(!r.admit(7), "a group not monitored");
        let mut forever = Refreshes::new([4].into_iter(), None);
        assert!((0..100).all(|_| forever.admit(4)) && !forever.complete());
    }

    fn column_starts(row: &str) -> Vec<usize> {
        let b = row.as_bytes();
        (5..b.len()).filter(|&i| b[i] != b' ' && b[i - 1] == b' ').take(4).collect()
    }

    #[test]
    fn metrics_list_columns_line_up_whatever_the_widths_of_units() {
        use offtrace_metrics::{Calc, MetricInfo, MetricType};
        // cpu.sw's `cpu_migrations` (unit `migrations`, 10 characters) pushed its row out of line.
        let long = [
            MetricInfo::new("cpu_migrations", "d", "cpu", "migrations", MetricType::Event, Calc::Total(2)),
            MetricInfo::new(
                "a_rather_long_metric_name_here",
                "d",
                "a_component",
                "B",
                MetricType::Event,
                Calc::Total(0),
            ),
        ];
        let all = Metrics::global().catalog();
        let metrics: Vec<&MetricInfo> = all.groups.iter().flat_map(|g| &g.info.metrics).chain(&long).collect();
        let widths = MetricColumns::fitting(metrics.iter().copied());
        let starts: Vec<Vec<usize>> = metrics
            .iter()
            .filter(|m| MetricColumns::cells(m).iter().all(|c| !c.is_empty() && !c.contains(' ')))
            .map(|m| column_starts(&widths.row(m)))
            .collect();
        assert!(starts.len() > 10);
        for s in &starts {
            assert_eq!(s, &starts[0], "every row's columns start at the same offsets");
        }
    }
}
