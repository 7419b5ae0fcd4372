//! `offtrace metrics list` and `offtrace record --metrics` on Intel's real SYCL runtime (the
//! project's `.venv`; `OFFTRACE_SKIP_SYCL=1` skips the recording test): the trace holds the
//! groups' counter definitions, their device, and samples whose process totals never decrease
//! and stay within the whole-run totals `record` prints at exit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use offtrace_format::{Record, TraceReader};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The libraries `offtrace record` loads into the program are current (a test run builds
/// the crates' rlibs, not them).
fn fresh_libraries() {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
}

fn offtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

#[test]
fn metrics_list_json_has_the_process_groups() {
    let o = offtrace().args(["metrics", "list", "--format", "json"]).output().expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let groups = v["groups"].as_array().expect("groups");
    let proc = groups.iter().find(|g| g["name"] == "proc.process").expect("proc.process on Linux");
    assert_eq!(proc["device"], 0);
    assert_eq!(proc["sampling_types"], serde_json::json!(["time_based"]));
    assert!(proc["metrics"].as_array().expect("metrics").iter().any(|m| m["name"] == "rss" && m["unit"] == "bytes"));
    for g in groups {
        assert!(g["domain"].is_u64() && !g["metrics"].as_array().expect("metrics").is_empty(), "{g}");
    }
    let o = offtrace().args(["record", "--metrics", "no.such.group", "--", "true"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no metric group \"no.such.group\""));
}

#[test]
fn record_metrics_puts_counters_into_the_trace() {
    fresh_libraries();
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return;
    }
    let venv = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace().join(".venv"));
    assert!(venv.join("bin/python").exists(), "no SYCL runtime in {} (OFFTRACE_SKIP_SYCL=1 skips)", venv.display());
    let list = offtrace().args(["metrics", "list", "--format", "json"]).output().expect("list");
    let has_sw = String::from_utf8_lossy(&list.stdout).contains("\"cpu.sw\"");
    let groups = if has_sw { "cpu.sw,proc.process" } else { "proc.process" };
    let dir = tempfile::tempdir().expect("tmp");
    let trace = dir.path().join("m.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(&venv)
        .args(["--metrics", groups, "--sample-period", "5ms", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .arg(workspace().join("examples/sycl/usm_pipeline.py"))
        .output()
        .expect("record");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");

    let mut strings = HashMap::new();
    let mut defs = HashMap::new();
    let mut devices = HashMap::new();
    let mut samples: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for r in TraceReader::open(&trace).expect("open") {
        match r.expect("record") {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::CounterDef(d) => {
                defs.insert(d.counter, d);
            }
            Record::CounterSample(s) => samples.entry(s.counter).or_default().push((s.ts, s.value)),
            Record::Device(d) => {
                devices.insert(d.handle, d.name);
            }
            _ => {}
        }
    }
    let by_name: HashMap<&str, u64> = defs.values().map(|d| (strings[&d.name].as_str(), d.counter)).collect();
    let rss = by_name["proc.process.rss"];
    assert_eq!(strings[&defs[&rss].unit], "bytes");
    assert!(devices.contains_key(&defs[&rss].device), "the counters' device is defined");
    let rss_samples = &samples[&rss];
    assert!(rss_samples.len() >= 3, "{} rss samples", rss_samples.len());
    assert!(rss_samples.iter().all(|&(_, v)| v > 1 << 20), "a Python process has more than 1 MiB resident");
    if has_sw {
        let tc = &samples[&by_name["cpu.sw.task_clock"]];
        assert!(tc.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "task clock never decreases");
        let whole: u64 = stderr
            .lines()
            .find(|l| l.contains("cpu.sw whole run"))
            .and_then(|l| l.split("task_clock=").nth(1)?.split_whitespace().next()?.parse().ok())
            .expect("record prints the whole-run totals");
        let last = tc.last().expect("samples").1;
        assert!(last > 0 && last <= whole, "trace's last task clock {last} within the whole run's {whole}");
    }
}

#[test]
fn monitor_prints_each_refresh_of_the_telemetry() {
    let o = offtrace()
        .args(["monitor", "--group", "proc.process", "--interval", "20ms", "--count", "3", "--format", "csv"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("ts_ns,device,group,metric,value,unit"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 3 refreshes of proc.system (telemetry) and proc.process; every row has 6 fields and a number.
    let rss: Vec<&Vec<&str>> = rows.iter().filter(|r| r[2] == "proc.process" && r[3] == "rss").collect();
    assert_eq!(rss.len(), 3, "{out}");
    assert!(rows.iter().any(|r| r[2] == "proc.system"), "{out}");
    assert!(rows.iter().all(|r| r.len() == 6 && r[4].parse::<f64>().is_ok()), "{out}");
}

/// `record --query-metrics cpu.sw`: one per-command value of each metric per completed command
/// (kernel, copy, fill), from its launch to its completion; their task clock stays within the
/// whole run's, and a group that is not event-based is refused.
#[test]
fn query_metrics_give_one_value_per_command() {
    fresh_libraries();
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return;
    }
    let list = offtrace().args(["metrics", "list", "--format", "json"]).output().expect("list");
    if !String::from_utf8_lossy(&list.stdout).contains("\"cpu.sw\"") {
        eprintln!("no perf_event software counters here; skipped");
        return;
    }
    let o = offtrace().args(["record", "--query-metrics", "proc.process", "--", "true"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an event-based group"), "{o:?}");
    let o = offtrace().args(["record", "--query-metrics", "cpu.thread_sw", "--", "true"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("counts one thread"), "{o:?}");

    let venv = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace().join(".venv"));
    assert!(venv.join("bin/python").exists(), "no SYCL runtime in {} (OFFTRACE_SKIP_SYCL=1 skips)", venv.display());
    let dir = tempfile::tempdir().expect("tmp");
    let trace = dir.path().join("q.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(&venv)
        .args(["--query-metrics", "cpu.sw", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .arg(workspace().join("examples/sycl/usm_pipeline.py"))
        .arg("20")
        .output()
        .expect("record");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");

    let mut strings = HashMap::new();
    let mut defs = HashMap::new();
    let mut devices = HashMap::new();
    let mut samples: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut sample_commands: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut launches = std::collections::HashSet::new();
    let mut completes = std::collections::HashSet::new();
    for r in TraceReader::open(&trace).expect("open") {
        match r.expect("record") {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::CounterDef(d) => {
                defs.insert(d.counter, d);
            }
            Record::CounterSample(s) => {
                samples.entry(s.counter).or_default().push(s.value);
                sample_commands.entry(s.counter).or_default().push(s.correlation);
            }
            Record::Device(d) => {
                devices.insert(d.handle, d.name);
            }
            // Kernels, copies, fills (core's kinds 3, 4, 5): launches and completions by correlation.
            Record::Activity(a) if (3..=5).contains(&a.kind) => {
                if a.phase == offtrace_format::phase::COMPLETE {
                    completes.insert(a.correlation);
                } else {
                    launches.insert(a.correlation);
                }
            }
            _ => {}
        }
    }
    let by_name: HashMap<&str, u64> = defs.values().map(|d| (strings[&d.name].as_str(), d.counter)).collect();
    let tc = by_name["cpu.sw.task_clock.per_command"];
    assert_eq!(strings[&defs[&tc].unit], "ns");
    assert!(devices.contains_key(&defs[&tc].device), "the counters' device is defined");
    assert!(!by_name.contains_key("cpu.sw.task_clock"), "no time series without --metrics");
    let values = &samples[&tc];
    // Every command launched and completed while recording got its values (a completion without
    // a launch record — reported at another level — has no query to end).
    let completed = launches.intersection(&completes).count();
    assert!(completed >= 20, "{completed} launched and completed commands");
    assert_eq!(values.len(), completed, "one value per completed command");
    for m in ["context_switches", "page_faults", "cpu_migrations", "major_faults", "cpus_utilized"] {
        assert_eq!(samples[&by_name[format!("cpu.sw.{m}.per_command").as_str()]].len(), completed, "{m}");
    }
    let whole: u64 = stderr
        .lines()
        .find(|l| l.contains("cpu.sw whole run"))
        .and_then(|l| l.split("task_clock=").nth(1)?.split_whitespace().next()?.parse().ok())
        .expect("record prints the whole-run totals");
    assert!(
        values.iter().all(|&v| v > 0 && v < whole),
        "each command's task clock within the run's {whole}: {values:?}"
    );

    // On disk each value names its command: the launched and completed commands, once each.
    let mut measured = sample_commands[&tc].clone();
    measured.sort_unstable();
    let mut expected: Vec<u64> = launches.intersection(&completes).copied().collect();
    expected.sort_unstable();
    assert_eq!(measured, expected, "one value per command, tied to it by correlation");

    // The report's per-kernel view: every value joined with its command's device activity, the
    // totals per kernel name adding up to the values in the file.
    let o = offtrace().args(["report", "--format", "json"]).arg(&trace).output().expect("report");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows: Vec<&serde_json::Value> = rep["command_metrics"]
        .as_array()
        .expect("command_metrics")
        .iter()
        .filter(|m| m["metric"] == "cpu.sw.task_clock.per_command")
        .collect();
    assert!(rows.iter().all(|m| m["kind"] != ""), "every value has its command's device activity: {rows:?}");
    let kernels: Vec<&str> =
        rows.iter().filter(|m| m["kind"] == "KERNEL_DISPATCH").filter_map(|m| m["name"].as_str()).collect();
    assert!(!kernels.is_empty(), "per-kernel rows: {rows:?}");
    let commands: u64 = rows.iter().map(|m| m["commands"].as_u64().expect("commands")).sum();
    assert_eq!(commands, completed as u64, "{rows:?}");
    let total: f64 = rows.iter().map(|m| m["total"].as_f64().expect("total")).sum();
    let in_file: u64 = values.iter().sum();
    assert!((total - in_file as f64).abs() <= 1e-9 * in_file as f64, "report {total} vs file {in_file}");
    for m in &rows {
        let (n, t, mean) = (
            m["commands"].as_f64().unwrap_or(0.0),
            m["total"].as_f64().unwrap_or(0.0),
            m["mean"].as_f64().unwrap_or(0.0),
        );
        assert!((mean * n - t).abs() <= 1e-6 * t.max(1.0), "{m}");
    }
}

/// `record --query-metrics cpu.sw` on four threads submitting to their own and a shared queue
/// (`examples/sycl/threads_queues.py 4 10`: 80 kernels, 120 copies, 40 fills): every command
/// has its launch and its completion, each completion emitted after its launch (the agent ends
/// the query the launch began), and exactly one value of each metric names it.
#[test]
fn query_metrics_value_every_command_of_threads_and_queues() {
    fresh_libraries();
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return;
    }
    let list = offtrace().args(["metrics", "list", "--format", "json"]).output().expect("list");
    if !String::from_utf8_lossy(&list.stdout).contains("\"cpu.sw\"") {
        eprintln!("no perf_event software counters here; skipped");
        return;
    }
    let venv = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace().join(".venv"));
    assert!(venv.join("bin/python").exists(), "no SYCL runtime in {} (OFFTRACE_SKIP_SYCL=1 skips)", venv.display());
    let dir = tempfile::tempdir().expect("tmp");
    let trace = dir.path().join("tq.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(&venv)
        .args(["--query-metrics", "cpu.sw", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .arg(workspace().join("examples/sycl/threads_queues.py"))
        .args(["4", "10"])
        .output()
        .expect("record");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let mut launches: HashMap<(u32, u64), u64> = HashMap::new();
    let mut completions: HashMap<(u32, u64), u64> = HashMap::new();
    let mut values: HashMap<u64, u32> = HashMap::new();
    let mut task_clock = None;
    let mut strings = HashMap::new();
    for r in TraceReader::open(&trace).expect("open") {
        match r.expect("record") {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::CounterDef(d) if strings.get(&d.name).is_some_and(|n| n == "cpu.sw.task_clock.per_command") => {
                task_clock = Some(d.counter);
            }
            Record::CounterSample(s) if Some(s.counter) == task_clock => *values.entry(s.correlation).or_default() += 1,
            Record::Activity(a) if (3..=5).contains(&a.kind) => {
                let at = if a.phase == offtrace_format::phase::COMPLETE { &mut completions } else { &mut launches };
                assert!(at.insert((a.kind, a.correlation), a.ts).is_none(), "one record of each: {a:?}");
            }
            _ => {}
        }
    }
    let count = |kind| launches.keys().filter(|(k, _)| *k == kind).count();
    assert_eq!((count(3), count(4), count(5)), (80, 120, 40), "kernels, copies, fills");
    let mut launched: Vec<_> = launches.keys().collect();
    let mut completed: Vec<_> = completions.keys().collect();
    launched.sort_unstable();
    completed.sort_unstable();
    assert_eq!(launched, completed, "every completion has its launch record and every launch its completion");
    let early: Vec<_> = completions.iter().filter(|(k, ts)| **ts < launches[k]).collect();
    assert!(early.is_empty(), "completions emitted before their launch: {early:?}");
    assert_eq!(values.len(), launches.len(), "a value for every command");
    assert!(values.iter().all(|(c, &n)| n == 1 && launches.keys().any(|(_, l)| l == c)), "one value per command");
}

/// The OpenCL layer's Codeplay counters as the event-based group `codeplay` (PoCL, through the
/// system's ICD loader; `OFFTRACE_SKIP_OPENCL=1` skips): `metrics list` shows one group per
/// OpenCL device behind the layer with the counters' units, and `record --query-metrics
/// codeplay` on a plain OpenCL program gives every command a value of each of them, under the
/// names `<group>.<metric>` the listing gives.
#[test]
fn query_metrics_codeplay_gives_every_opencl_command_the_layers_counters() {
    fresh_libraries();
    if std::env::var_os("OFFTRACE_SKIP_OPENCL").is_some_and(|v| v == "1") {
        return;
    }
    let icd = std::fs::read_to_string("/etc/OpenCL/vendors/pocl.icd")
        .expect("no PoCL: run scripts/setup-opencl.sh (or OFFTRACE_SKIP_OPENCL=1 to skip)");
    let dir = tempfile::tempdir().expect("tmp");
    let program = dir.path().join("vector_add");
    let st = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&program)
        .arg(workspace().join("examples/opencl/vector_add.c"))
        .arg("-lOpenCL")
        .status()
        .expect("cc");
    assert!(st.success(), "cc vector_add.c: run scripts/setup-opencl.sh");
    // PoCL whichever ICD loader the program gets (record may put the SYCL venv's first).
    let pocl = |c: &mut Command| {
        c.env("OCL_ICD_FILENAMES", icd.trim()).env("OFFTRACE_CL_PLATFORM", "Portable");
    };

    let mut list = offtrace();
    list.args(["metrics", "list", "--format", "json"]);
    pocl(&mut list);
    let list = list.output().expect("list");
    assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).expect("JSON");
    let group = v["groups"].as_array().expect("groups").iter().find(|g| g["name"] == "codeplay").cloned();
    let group = group.unwrap_or_else(|| panic!("no codeplay group: {v}"));
    assert_eq!(group["sampling_types"], serde_json::json!(["event_based"]));
    let device = v["devices"].as_array().expect("devices").iter().find(|d| d["id"] == group["device"]).expect("device");
    assert!(device["name"].as_str().expect("name").contains("(OpenCL: Portable Computing Language)"), "{device}");
    let metrics: Vec<(String, String)> = group["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .map(|m| (m["name"].as_str().unwrap_or("").to_owned(), m["unit"].as_str().unwrap_or("").to_owned()))
        .collect();
    for (name, unit) in [("device_time", "ns"), ("bytes_moved", "bytes"), ("bandwidth", "bytes/s")] {
        assert!(metrics.contains(&(name.to_owned(), unit.to_owned())), "{name} {unit}: {metrics:?}");
    }

    let trace = dir.path().join("cl.offtrace");
    let mut rec = offtrace();
    rec.args(["record", "--query-metrics", "codeplay", "-o"]).arg(&trace).arg("--").arg(&program);
    pocl(&mut rec);
    let o = rec.output().expect("record");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("platform \"Portable Computing Language\"") && out.contains(", ok"), "{out}");
    let rep = offtrace().args(["report", "--format", "json"]).arg(&trace).output().expect("report");
    let rep: serde_json::Value = serde_json::from_slice(&rep.stdout).expect("report JSON");
    let activity = rep["device_activity"].as_array().expect("device_activity");
    let rows = rep["command_metrics"].as_array().expect("command_metrics");
    assert!(!activity.is_empty());
    // Every command (kernels, copies, fills, maps) has one value of each listed counter, named
    // `codeplay.<metric>` as the listing names them.
    for a in activity {
        for (m, _) in &metrics {
            let name = format!("codeplay.{m}");
            let row = rows.iter().find(|r| r["kind"] == a["kind"] && r["name"] == a["name"] && r["metric"] == name);
            let row = row.unwrap_or_else(|| panic!("no {name} for {a}: {rows:?}"));
            assert_eq!(row["commands"], a["count"], "{name} of {a}");
        }
    }
    assert!(rows.iter().all(|r| r["metric"].as_str().unwrap_or("").starts_with("codeplay.")), "{rows:?}");
    // The kernels' device time is the commands' own (the layer's clock: END − START).
    let kernels = activity.iter().find(|a| a["kind"] == "KERNEL_DISPATCH").expect("kernels");
    let dt = rows
        .iter()
        .find(|r| r["kind"] == "KERNEL_DISPATCH" && r["metric"] == "codeplay.device_time")
        .expect("device_time");
    let (total, device_total) =
        (dt["total"].as_f64().unwrap_or(0.0), kernels["device_total_ns"].as_f64().unwrap_or(-1.0));
    assert!((total - device_total).abs() <= 0.01 * device_total + 1000.0, "{total} vs {device_total}");
}
