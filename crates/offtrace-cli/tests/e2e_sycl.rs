//! End-to-end tests against Intel's real SYCL runtime (the project's `.venv`, made by
//! `scripts/setup-sycl.sh`): record real programs with `offtrace record`, report, export, and
//! compare what offtrace recorded with the reference full-dump subscriber (`tools/xpti-dump`)
//! loaded in the same process.
//!
//! The runtime is found through `OFFTRACE_SYCL_VENV` (default: `<workspace>/.venv`). Without it
//! these tests fail with a message saying how to install it, unless `OFFTRACE_SKIP_SYCL=1`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// `offtrace`, once the libraries it loads into the program are checked to be current.
fn offtrace() -> PathBuf {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
    PathBuf::from(env!("CARGO_BIN_EXE_offtrace"))
}

/// The built artifacts (agent, dispatcher) sit next to the `offtrace` binary.
fn bin_dir() -> PathBuf {
    offtrace().parent().expect("bin dir").to_path_buf()
}

fn venv() -> Option<PathBuf> {
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return None;
    }
    let v = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace().join(".venv"));
    assert!(
        v.join("lib/libsycl.so.9").exists() && v.join("bin/python").exists(),
        "no SYCL runtime in {}: run scripts/setup-sycl.sh (or set OFFTRACE_SYCL_VENV, or OFFTRACE_SKIP_SYCL=1 to skip)",
        v.display()
    );
    Some(v)
}

fn example(name: &str) -> PathBuf {
    workspace().join("examples/sycl").join(name)
}

fn tmpdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("offtrace-e2e-{tag}-")).tempdir().expect("tmp dir")
}

/// Runs `offtrace record` with the project's runtime, Intel's OpenCL CPU device made visible
/// (`--intel-opencl`: dpctl's USM allocations fail on PoCL, the only other device here);
/// returns (status code, stdout, stderr).
fn record(venv: &Path, out: &Path, extra: &[&str], program: &[&str]) -> (i32, String, String) {
    record_env(venv, out, extra, &[], program)
}

/// [`record`] with variables set for the program.
fn record_env(
    venv: &Path,
    out: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
    program: &[&str],
) -> (i32, String, String) {
    let mut cmd = Command::new(offtrace());
    cmd.arg("record").arg("--intel-opencl").arg("--runtime").arg(venv).arg("-o").arg(out).args(extra).arg("--");
    cmd.arg(venv.join("bin/python")).args(program).envs(env.iter().copied());
    let o = cmd.output().expect("run offtrace record");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn report_json(trace: &Path) -> serde_json::Value {
    let o =
        Command::new(offtrace()).args(["report", "--format", "json"]).arg(trace).output().expect("run offtrace report");
    assert!(o.status.success(), "report failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("report --format json is JSON")
}

fn notification_counts(report: &serde_json::Value) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let streams = report["notifications"].as_object().expect("notifications map");
    for (stream, types) in streams {
        for (tt, n) in types.as_object().expect("per-type map") {
            let n = n.as_u64().expect("count");
            if n > 0 {
                out.insert((stream.clone(), tt.clone()), n);
            }
        }
    }
    out
}

fn count(c: &BTreeMap<(String, String), u64>, stream: &str, tt: &str) -> u64 {
    c.get(&(stream.to_string(), tt.to_string())).copied().unwrap_or(0)
}

/// Independent readers of the exports (the export crate's test decoder of `.pftrace`).
#[path = "../../offtrace-export/tests/common/mod.rs"]
mod pftrace;

fn api_calls(rep: &serde_json::Value, kind: &str, op_prefix: &str) -> u64 {
    rep["api_calls"]
        .as_array()
        .expect("api_calls")
        .iter()
        .filter(|c| c["kind"] == kind && c["operation"].as_str().is_some_and(|o| o.starts_with(op_prefix)))
        .map(|c| c["calls"].as_u64().expect("calls"))
        .sum()
}

fn device_count(rep: &serde_json::Value, kind: &str) -> u64 {
    rep["device_activity"]
        .as_array()
        .expect("device_activity")
        .iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| d["count"].as_u64().expect("count"))
        .sum()
}

/// Runs SQL through Python's sqlite3 module (a reader independent of the exporter); returns the
/// lines it prints.
fn sql(db: &Path, script: &str) -> String {
    let py = Command::new("python3")
        .arg("-c")
        .arg(format!("import json, sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\n{script}"))
        .arg(db)
        .output()
        .expect("python3");
    assert!(
        py.status.success(),
        "sqlite check: {}{}",
        String::from_utf8_lossy(&py.stdout),
        String::from_utf8_lossy(&py.stderr)
    );
    String::from_utf8_lossy(&py.stdout).into_owned()
}

/// A real multi-threaded SYCL program (4 threads, each with an in-order and an out-of-order
/// queue, plus a queue they share): the report's typed sections agree with the raw layer
/// recorded beside them, every device activity has its queue, and every export reads back.
#[test]
fn record_report_and_export_a_multithreaded_program() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("threads");
    let trace = dir.path().join("tq.offtrace");
    let (code, stdout, stderr) =
        // `--raw`: the typed records are checked against the raw layer's notifications.
        record(&venv, &trace, &["--raw"], &[example("threads_queues.py").to_str().expect("utf8"), "4", "5"]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("threads_queues: ok"), "the program's own output passes through: {stdout}");
    assert!(stderr.contains("records") && stderr.contains("dropped"), "summary line: {stderr}");

    let rep = report_json(&trace);
    assert_eq!(rep["trace"]["complete"], true, "{}", rep["trace"]);
    for key in [
        "api_calls",
        "device_activity",
        "memory",
        "queues",
        "task_graph",
        "threads",
        "counters",
        "drops",
        "notifications",
    ] {
        assert!(rep.get(key).is_some(), "report has no {key}");
    }
    let c = notification_counts(&rep);
    let ur_begin = count(&c, "ur.call", "function_with_args_begin");
    assert!(ur_begin > 100, "{c:?}");
    // The typed UR_API calls add up to the raw layer's ur.call begins.
    assert_eq!(api_calls(&rep, "UR_API", ""), ur_begin);
    // One dispatch per kernel launch: 2 kernels per iteration per thread.
    let launches = api_calls(&rep, "UR_API", "urEnqueueKernelLaunch");
    assert_eq!(launches, 4 * 5 * 2);
    assert_eq!(device_count(&rep, "KERNEL_DISPATCH"), launches);
    assert_eq!(device_count(&rep, "MEMORY_COPY"), 4 * 5 * 3);
    assert_eq!(device_count(&rep, "MEMORY_FILL"), 4 * 5);
    // One barrier per iteration (urEnqueueEventsWaitWithBarrierExt; the runtime's
    // urEnqueueEventsWait markers are not commands of the program). The OpenCL layer (hosted by
    // the agent) adds no command of its own, only the device times: every kernel, copy, fill and
    // barrier has one.
    assert_eq!(api_calls(&rep, "UR_API", "urEnqueueEventsWaitWithBarrier"), 4 * 5);
    assert_eq!(device_count(&rep, "SYNC"), 4 * 5);
    for d in rep["device_activity"].as_array().expect("da") {
        assert_eq!(d["device_count"], d["count"], "every command timed: {d}");
        assert!(d["device_total_ns"].as_u64().unwrap_or(0) > 0, "{d}");
    }
    let names: Vec<&str> =
        rep["device_activity"].as_array().expect("da").iter().filter_map(|d| d["name"].as_str()).collect();
    assert!(names.contains(&"scale_add") && names.contains(&"square"), "{names:?}");
    let threads = rep["threads"].as_array().expect("threads");
    assert_eq!(threads.iter().filter(|t| t["device_activities"].as_u64().unwrap_or(0) > 0).count(), 4, "{threads:?}");
    // One record per object and runtime level (`docs/record-model.md`): the OpenCL layer, nested
    // in the UR calls, defines none of the OpenCL queues, buffers or programs the UR adapter
    // creates; the report shows the program's queues and allocations once each.
    let ur_queues = api_calls(&rep, "UR_API", "urQueueCreate");
    assert_eq!(ur_queues, count(&c, "sycl", "queue_create"), "{c:?}");
    assert!(ur_queues > 4 * 2, "two queues per thread and a shared one: {ur_queues}");
    assert_eq!(rep["queues"].as_array().expect("queues").len() as u64, ur_queues, "{}", rep["queues"]);
    let ur_allocs = ["urUSMDeviceAlloc", "urUSMSharedAlloc", "urUSMHostAlloc"]
        .iter()
        .map(|op| api_calls(&rep, "UR_API", op))
        .sum::<u64>();
    assert!(ur_allocs > 0);
    let m = &rep["memory"];
    let allocs: u64 =
        m["allocations"].as_array().expect("allocations").iter().map(|a| a["count"].as_u64().expect("count")).sum();
    assert_eq!(allocs, ur_allocs, "{m}");
    assert_eq!(m["unmatched_frees"], 0, "no frees of unknown allocations: {m}");
    assert_eq!(m["frees"].as_u64(), Some(api_calls(&rep, "UR_API", "urUSMFree")), "{m}");
    // Queues and allocations name their device by the runtime's name, not by a handle.
    for q in rep["queues"].as_array().expect("queues") {
        let device = q["device"].as_str().expect("device");
        assert!(!device.is_empty() && !device.starts_with("0x"), "a device by name: {q}");
    }
    for a in rep["memory"]["allocations"].as_array().expect("allocations") {
        if a["memory_type"] != "HOST" {
            assert!(!a["device"].as_str().expect("device").starts_with("0x"), "{a}");
        }
    }
    // Each iteration is one chain of 7 commands over three queues, whose dependencies the
    // runtime sees mostly as events of other queues (no scheduler edges): the chain is followed
    // through the enqueues' wait lists and the events they return, named as the device activity
    // names its commands. (The runtime may also order a barrier after the previous iteration's
    // host task on its queue, when that task has not run yet: the chain may be longer.)
    let g = &rep["task_graph"];
    let chain: Vec<&str> = g["longest_chain"].as_array().expect("chain").iter().filter_map(|n| n.as_str()).collect();
    assert_eq!(g["longest_chain_len"].as_u64(), Some(chain.len() as u64), "{g}");
    let iteration = ["usm_memcpy", "scale_add", "usm_memcpy", "square", "barrier", "usm_memcpy", "host task"];
    assert!(chain.windows(7).any(|w| w == iteration), "one whole iteration in {chain:?}");
    assert_eq!(g["unresolved_edges"], 0, "{g}");
    assert_eq!(g["nodes"], count(&c, "sycl", "node_create"), "every node of the runtime, once");
    let mut directions: Vec<&str> =
        rep["memory"]["copies"].as_array().expect("copies").iter().filter_map(|c| c["direction"].as_str()).collect();
    directions.sort_unstable();
    assert_eq!(directions, ["DEVICE_TO_DEVICE", "DEVICE_TO_HOST", "HOST_TO_DEVICE"]);

    // Exports, each read back by an independent reader.
    for (fmt, out) in [
        ("perfetto", dir.path().join("t.pftrace")),
        ("chrome", dir.path().join("t.json")),
        ("sqlite", dir.path().join("t.sqlite")),
        ("csv", dir.path().join("csv")),
    ] {
        let o = Command::new(offtrace())
            .arg("export")
            .arg(&trace)
            .args(["--format", fmt, "-o"])
            .arg(&out)
            .output()
            .expect("run export");
        assert!(o.status.success(), "export {fmt}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(out.exists(), "export {fmt} wrote nothing");
    }
    let d = pftrace::decode_pftrace(&std::fs::read(dir.path().join("t.pftrace")).expect("read pftrace"));
    assert!(d.problems.is_empty(), "overlapping or unbalanced slices: {:?}", d.problems);
    assert_eq!(d.packets_without_clock, 0);
    // The clock snapshot places the trace: CLOCK_MONOTONIC (3) at the recording's start, before
    // the first record, and CLOCK_REALTIME (1) at the same moment (today, not 1970).
    let clock = |id| d.clock_snapshot.iter().find(|c| c.0 == id).map(|c| c.1).unwrap_or(0);
    let first = rep["trace"]["first_ns"].as_u64().expect("first_ns");
    assert!(clock(3) > 0 && clock(3) <= first, "{:?} first {first}", d.clock_snapshot);
    assert!(clock(1) > 1_700_000_000_000_000_000, "{:?}", d.clock_snapshot);
    let queue_tracks = d.tracks.values().filter(|t| t.name.starts_with("queue ")).count();
    assert!(queue_tracks >= 9, "a track per queue: {queue_tracks}");
    let flows: usize = d.slices.iter().chain(&d.instants).map(|s| s.terminating.len()).sum();
    assert!(flows as u64 >= launches, "flows from the launches to their kernels: {flows}");
    let chrome: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("t.json")).expect("read chrome json"))
            .expect("the Chrome export is JSON");
    assert!(chrome["traceEvents"].as_array().expect("traceEvents").len() > 200);
    let out = sql(
        &dir.path().join("t.sqlite"),
        "print(db.execute(\"select count(*) from api_calls join kinds using (kind) where kinds.name = 'UR_API'\").fetchone()[0])\n\
         print(db.execute('select count(*) from device_activity where queue = 0').fetchone()[0])\n\
         print(db.execute('select count(*) from api_calls where json_valid(args) = 0').fetchone()[0])\n\
         print(db.execute(\"select count(*) from device_activity a join api_calls_named c using (correlation) where a.name = 'scale_add' and c.operation_name like 'urEnqueueKernelLaunch%'\").fetchone()[0])\n\
         print(db.execute('select count(*) from device_activity where device_ns is null').fetchone()[0])\n\
         print(db.execute(\"select count(*) from device_activity a join api_calls_named c using (correlation) where c.kind_name = 'UR_API' and a.device_start_ns + 50000 < c.start_ns\").fetchone()[0])\n\
         print(db.execute('select count(*) from (select queue, sum(device_ns) s, max(device_end_ns) - min(device_start_ns) span from device_activity a join queues q using (queue) where q.in_order = 1 group by queue) where s > span').fetchone()[0])\n\
         for v in ['top_kernels', 'api_calls_by_thread', 'copy_bandwidth', 'queue_wait']:\n    db.execute(f'select * from {v}').fetchall()\n",
    );
    let threads = sql(
        &dir.path().join("t.sqlite"),
        "print(db.execute('select count(*) - count(distinct tid) from threads').fetchone()[0])\n\
         print(db.execute('select count(*) from api_calls_named').fetchone()[0] - db.execute('select count(*) from api_calls').fetchone()[0])\n",
    );
    assert_eq!(threads.split_whitespace().collect::<Vec<_>>(), ["0", "0"], "one threads row per tid, no call twice");
    let lines: Vec<u64> = out.lines().map(|l| l.trim().parse().expect("number")).collect();
    assert_eq!(lines[0], ur_begin);
    assert_eq!(lines[1], 0, "every device activity has its queue");
    assert_eq!(lines[2], 0, "every argument column is JSON");
    assert_eq!(lines[3], 4 * 5, "every scale_add joins the launch that enqueued it");
    assert_eq!(lines[4], 0, "every device activity has its device time");
    assert_eq!(lines[5], 0, "no device time starts before the UR call that enqueued it");
    assert_eq!(lines[6], 0, "device time of an in-order queue never exceeds the span of its commands");
    // Devices and contexts are defined with names and types (OpenCL CPU device: type CPU).
    let out = sql(
        &dir.path().join("t.sqlite"),
        "for r in db.execute('select is_context, name, device_type, parent from devices order by is_context'):\n    print('|'.join(str(v) for v in r))\n",
    );
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('|').collect()).collect();
    assert!(rows.iter().any(|r| r[0] == "0" && !r[1].is_empty() && r[2] == "1"), "a named CPU device: {out}");
    assert!(rows.iter().any(|r| r[0] == "1" && r[1].starts_with("context of ") && r[3] != "0"), "a context: {out}");
}

/// The OpenCL calls the SYCL runtime's adapter makes inside each UR call are that call's
/// implementation (`docs/opencl.md`, *Under SYCL*): by default the trace has none of them, with
/// `OFFTRACE_OPENCL_NESTED=1` or `--detail verbose` it has them, and either way every kernel,
/// copy, fill and barrier keeps its device time from the OpenCL layer.
#[test]
fn nested_opencl_calls_are_recorded_on_request_only() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("nested");
    let program = [example("threads_queues.py").to_str().expect("utf8").to_owned(), "2".into(), "3".into()];
    // OpenCL calls lying inside a UR call of their thread, and all OpenCL calls.
    let nested_sql = "print(db.execute(\"select count(*) from api_calls_named o where o.kind_name = 'OPENCL_API' and exists (select 1 from api_calls_named u where u.kind_name = 'UR_API' and u.tid = o.tid and u.start_ns <= o.start_ns and o.end_ns <= u.end_ns)\").fetchone()[0])\n\
         print(db.execute(\"select count(*) from api_calls_named where kind_name = 'OPENCL_API'\").fetchone()[0])\n\
         print(db.execute('select count(*) from device_activity where device_ns is null').fetchone()[0])\n";
    for (tag, extra, nested_env) in
        [("default", &[][..], None), ("opt-in", &[][..], Some("1")), ("verbose", &["--detail", "verbose"][..], None)]
    {
        let trace = dir.path().join(format!("{tag}.offtrace"));
        let mut cmd = Command::new(offtrace());
        cmd.arg("record").arg("--intel-opencl").arg("--runtime").arg(&venv).arg("-o").arg(&trace).args(extra).arg("--");
        cmd.arg(venv.join("bin/python")).args(&program).env_remove("OFFTRACE_OPENCL_NESTED");
        if let Some(v) = nested_env {
            cmd.env("OFFTRACE_OPENCL_NESTED", v);
        }
        let o = cmd.output().expect("run offtrace record");
        assert!(o.status.success(), "{tag}: record failed: {}", String::from_utf8_lossy(&o.stderr));
        let rep = report_json(&trace);
        // Every command of the program, with its device time.
        assert_eq!(device_count(&rep, "KERNEL_DISPATCH"), 2 * 3 * 2, "{tag}");
        assert_eq!(device_count(&rep, "MEMORY_COPY"), 2 * 3 * 3, "{tag}");
        assert_eq!(device_count(&rep, "MEMORY_FILL"), 2 * 3, "{tag}");
        assert_eq!(device_count(&rep, "SYNC"), 2 * 3, "{tag}");
        for d in rep["device_activity"].as_array().expect("da") {
            assert_eq!(d["device_count"], d["count"], "{tag}: every command timed: {d}");
            assert!(d["device_total_ns"].as_u64().unwrap_or(0) > 0, "{tag}: {d}");
        }
        let db = dir.path().join(format!("{tag}.sqlite"));
        let e = Command::new(offtrace())
            .arg("export")
            .arg(&trace)
            .args(["--format", "sqlite", "-o"])
            .arg(&db)
            .output()
            .expect("run export");
        assert!(e.status.success(), "{tag}: export: {}", String::from_utf8_lossy(&e.stderr));
        let n: Vec<u64> = sql(&db, nested_sql).lines().map(|l| l.trim().parse().expect("number")).collect();
        assert_eq!(n[2], 0, "{tag}: every device activity has its device time");
        if nested_env.is_none() && extra.is_empty() {
            assert_eq!(n[0], 0, "no OpenCL call inside a UR call by default ({} OpenCL calls)", n[1]);
        } else {
            // The adapter makes several OpenCL calls per enqueue (the kernel's arguments, the
            // enqueue, event queries): at least one per command.
            assert!(n[0] >= 2 * 3 * 9, "{tag}: the nested OpenCL calls are there: {n:?}");
        }
    }
    // A tool subscribed to OPENCL_API callbacks gets every call, nested or not, by default: every
    // kernel's clEnqueueNDRangeKernel (all of them inside urEnqueueKernelLaunch).
    let so = dir.path().join("librecord_tool.so");
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-O1", "-shared", "-fPIC", "-I"])
        .arg(workspace().join("crates/offtrace-capi/include"))
        .arg(workspace().join("crates/offtrace-opencl/tests/c/record_tool.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc record_tool.c failed");
    let lines = dir.path().join("tool.txt");
    let o = Command::new(offtrace())
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(&venv)
        .arg("-o")
        .arg(dir.path().join("tool.offtrace"))
        .arg("--tool")
        .arg(&so)
        .arg("--")
        .arg(venv.join("bin/python"))
        .args(&program)
        .env_remove("OFFTRACE_OPENCL_NESTED")
        .env("OFFTRACE_TEST_OUT", &lines)
        .output()
        .expect("run offtrace record");
    assert!(o.status.success(), "tool: record failed: {}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&lines).expect("the tool's lines");
    assert_eq!(text.lines().filter(|l| l.starts_with("api clEnqueueNDRangeKernel ")).count(), 2 * 3 * 2, "{text}");
}

/// A program that reads its own profiling results on an out-of-order queue: the trace keeps the
/// device times the OpenCL layer converted with its recorded calibration (the program's raw
/// device times plus the device's clock offset, `opencl.clock_offset_ns`), once per kernel, not
/// the raw ones the SYCL backend sees in `urEventGetProfilingInfo` (on main those reached the
/// file first and were kept: 30-35 ns off on Intel's CPU device).
#[test]
fn a_program_reading_its_own_profiling_results_gets_calibrated_device_times() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("ooo-prof");
    let script = dir.path().join("ooo_profiling.py");
    std::fs::write(
        &script,
        r#"
import dpctl, dpctl.memory as dpm, dpctl.program as dpp
q = dpctl.SyclQueue("cpu", property="enable_profiling")  # out-of-order (SYCL's default)
prog = dpp.create_program_from_source(q, "__kernel void twice(__global float *y) { size_t i = get_global_id(0); y[i] = 2 * y[i]; }")
k = prog.get_sycl_kernel("twice")
n = 1 << 14
ys = [dpm.MemoryUSMDevice(n * 4, queue=q) for _ in range(4)]
evs = [q.submit(k, [y], [n]) for y in ys for _ in range(3)]
for e in evs:
    e.wait()
for e in evs:
    print("times", e.profiling_info_start, e.profiling_info_end)
"#,
    )
    .expect("write script");
    let trace = dir.path().join("p.offtrace");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[script.to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let printed: Vec<(i64, i64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("times "))
        .map(|l| {
            let v: Vec<i64> = l.split_whitespace().map(|x| x.parse().expect("ns")).collect();
            (v[0], v[1])
        })
        .collect();
    assert_eq!(printed.len(), 12, "{stdout}");
    let db = dir.path().join("p.sqlite");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(o.expect("run export").status.success());
    let out = sql(
        &db,
        "for r in db.execute(\"select 'k', device_start_ns, device_end_ns from device_activity_named \
           where kind_name = 'KERNEL_DISPATCH' order by correlation\"): print(*r)\n\
         for c, in db.execute(\"select counter from counters where name = 'opencl.clock_offset_ns'\").fetchall():\n\
         \x20   print('offset', int(db.execute('select value from counter_samples where counter = ? order by ts_ns desc limit 1', (c,)).fetchone()[0]))\n",
    );
    let rows: Vec<Vec<i64>> = out
        .lines()
        .filter_map(|l| l.strip_prefix("k "))
        .map(|l| l.split_whitespace().map(|x| x.parse().expect("ns")).collect())
        .collect();
    let offsets: Vec<i64> =
        out.lines().filter_map(|l| l.strip_prefix("offset ")).map(|x| x.parse().expect("ns")).collect();
    assert_eq!(rows.len(), printed.len(), "one device activity per kernel:\n{out}");
    assert!(!offsets.is_empty(), "the layer recorded its calibration:\n{out}");
    // Submission order = correlation order (one thread).
    let shifts: Vec<(i64, i64)> = rows.iter().zip(&printed).map(|(r, p)| (r[0] - p.0, r[1] - p.1)).collect();
    let d = shifts[0].0;
    assert!(shifts.iter().all(|&s| s == (d, d)), "one shift for every kernel's start and end: {shifts:?}");
    assert!(offsets.contains(&d), "the shift {d} ns is a device's calibrated clock offset {offsets:?}\n{out}");
}

/// A chain of dependent kernels alternating between two queues (`examples/sycl/dependency_chain.py`):
/// the task graph's longest chain is the whole chain, named by its kernels, and every node
/// record carries its command's queue.
#[test]
fn the_longest_chain_follows_dependencies_across_queues() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("chain");
    let trace = dir.path().join("dc.offtrace");
    let (code, stdout, stderr) =
        record(&venv, &trace, &[], &[example("dependency_chain.py").to_str().expect("utf8"), "7"]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("dependency_chain: ok"), "{stdout}");
    let rep = report_json(&trace);
    let g = &rep["task_graph"];
    assert_eq!(g["longest_chain_len"], 7, "{g}");
    let chain: Vec<&str> = g["longest_chain"].as_array().expect("chain").iter().filter_map(|n| n.as_str()).collect();
    assert_eq!(chain, ["step_a", "step_b", "step_a", "step_b", "step_a", "step_b", "step_a"], "{g}");
    assert_eq!(g["unresolved_edges"], 0, "{g}");
    let db = dir.path().join("dc.sqlite");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(o.expect("run export").status.success());
    let out = sql(
        &db,
        "print(db.execute(\"select count(*) from task_graph where op in ('node_create', 'signal') and queue = 0\").fetchone()[0])\n\
         print(db.execute(\"select count(distinct queue) from task_graph where op = 'node_create'\").fetchone()[0])\n",
    );
    let lines: Vec<u64> = out.lines().map(|l| l.trim().parse().expect("number")).collect();
    assert_eq!(lines, [0, 2], "every node and signal has its queue, the two queues of the program");
    // In the timeline each edge is a flow from the producer's device slice to the waiting
    // command's, across the two queues (`docs/cli.md`, *Dependency flows*), read back by the
    // repository's independent Perfetto decoder.
    let pf = dir.path().join("dc.pftrace");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "perfetto", "-o"]).arg(&pf).output();
    assert!(o.expect("run export").status.success());
    let check = Command::new("python3")
        .arg(workspace().join("scripts/review/check_pftrace.py"))
        .arg(&pf)
        .arg("--flows")
        .output()
        .expect("python3");
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    let mut flows: Vec<(&str, &str)> = Vec::new();
    for f in out.lines().filter_map(|l| l.strip_prefix("flow\t")).map(|l| l.split('\t').collect::<Vec<_>>()) {
        let [from_track, from, to_track, to] = f[..] else { panic!("{f:?}") };
        if from_track.contains(" / queue ") {
            assert_ne!(from_track, to_track, "each dependency crosses to the other queue: {f:?}");
            flows.push((from, to));
        }
    }
    flows.sort_unstable();
    let mut want = vec![("step_a", "step_b"); 3];
    want.extend([("step_b", "step_a"); 3]);
    want.push(("side", "side"));
    want.sort_unstable();
    assert_eq!(flows, want, "{out}");
    assert_eq!(g["edges"].as_u64(), Some(want.len() as u64), "a flow per edge: {g}");
}

/// dpnp's kernel names run past 256 bytes: a node's own record (`node_create`) carries the whole
/// name its `task` records have (it was cut at 256 bytes), the name its device activity has.
/// (A copy's node takes its device activity's name, `usm_memcpy`, where SYCL's task says
/// `memcpy`: only the long names are compared.)
#[test]
fn task_graph_node_names_are_whole_as_the_tasks_are() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("w2-names");
    let trace = dir.path().join("w2.offtrace");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[example("w2_matmul.py").to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let db = dir.path().join("w2.sqlite");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(o.expect("run export").status.success());
    let out = sql(
        &db,
        "print(db.execute(\"select max(length(name)) from task_graph where op = 'node_create'\").fetchone()[0])\n\
         print(db.execute(\"select count(*) from task_graph n join task_graph t on t.node = n.node and t.op = 'task' \
           where n.op = 'node_create' and length(t.name) > 255 and t.name <> n.name\").fetchone()[0])\n\
         print(db.execute(\"select count(*) from task_graph where op = 'node_create' and length(name) > 255 \
           and name not in (select name from device_activity)\").fetchone()[0])\n",
    );
    let lines: Vec<u64> = out.lines().map(|l| l.trim().parse().expect("number")).collect();
    assert!(lines[0] > 255, "dpnp's names are longer than 255 bytes: {out}");
    assert_eq!(lines[1..], [0, 0], "a node's name differs from its task's, or from its device activity's: {out}");
}

/// dpnp's commands that wait on its host tasks (`examples/sycl/dpnp_host_tasks.py`): the runtime
/// enqueues some of them after another task-graph record came on the thread (their node record
/// went out before their queue was known) or from its own threads. Every command's queue is
/// then on its node record or on its task's exit record (the task of a node emitted early, on
/// whichever thread it runs), and a USM copy's exit names it as its device activity does; the
/// SQLite export gives every command's node row its queue (from the exit where the node had none).
#[test]
fn every_dpnp_command_has_its_queue_on_its_node_or_its_task() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("dpnp-host-tasks");
    let trace = dir.path().join("d.offtrace");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[example("dpnp_host_tasks.py").to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("dpnp_host_tasks: ok"), "{stdout}");
    let db = dir.path().join("d.sqlite");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(o.expect("run export").status.success());
    // Command nodes: neither virtual (an event's) nor host tasks.
    let out = sql(
        &db,
        "cmd = \"n.op = 'node_create' and coalesce(n.event, 0) = 0 and n.name <> 'host task'\"\n\
         exit = \"t.node = n.node and t.op = 'task' and t.phase = 2\"\n\
         print(db.execute(f\"select count(*) from task_graph n where {cmd}\").fetchone()[0])\n\
         print(db.execute(f\"select count(*) from task_graph n where {cmd} and n.queue_id is null \
           and not exists (select 1 from task_graph t where {exit} and t.queue_id is not null)\").fetchone()[0])\n\
         print(db.execute(\"select count(*) from task_graph where op = 'task' and phase = 2 \
           and name <> 'host task' and queue_id is null\").fetchone()[0])\n\
         print(db.execute(\"select count(*) from task_graph where op = 'task' and phase = 2 \
           and name = 'usm_memcpy'\").fetchone()[0])\n\
         print(db.execute(f\"select count(*) from task_graph n join task_graph t on {exit} \
           where n.op = 'node_create' and n.name = 'copy usm' and t.name <> 'usm_memcpy'\").fetchone()[0])\n\
         print(db.execute(f\"select count(*) from task_graph n where {cmd} and n.queue_id is null\").fetchone()[0])\n\
         print(db.execute(f\"select count(*) from task_graph n join task_graph t on {exit} \
           where {cmd} and (n.queue <> t.queue or n.name <> t.name)\").fetchone()[0])\n",
    );
    let lines: Vec<u64> = out.lines().map(|l| l.trim().parse().expect("number")).collect();
    assert!(lines[0] >= 30, "the program's commands have nodes: {out}");
    assert_eq!(lines[1..3], [0, 0], "commands whose queue is nowhere, command tasks without a queue: {out}");
    // A copy's node held until its enqueue is named `usm_memcpy` itself, one emitted before it
    // `copy usm` (how many of each varies from run to run): their exits all say `usm_memcpy`.
    assert!(lines[3] >= 9, "the program's 9 copies: {out}");
    assert_eq!(lines[4], 0, "copies whose task's exit does not say usm_memcpy: {out}");
    assert_eq!(lines[5..], [0, 0], "command nodes without a queue id, or unlike their task's exit: {out}");
    // The report takes a node's name from its task's exit where its record had no queue.
    let rep = report_json(&trace);
    let chain = &rep["task_graph"]["longest_chain"];
    assert!(chain.as_array().is_some_and(|c| !c.is_empty() && !c.iter().any(|n| n == "copy usm")), "{chain}");
}

/// dpnp and dpctl.program kernels from three threads, each on its own queue, and one in-order
/// queue two of them share (`examples/sycl/dpnp_threads.py`, Intel's CPU device): the program's
/// own kernels are counted as it submitted them, each on the queue it used (`twice` on the three
/// threads' queues, `inc_shared` on the shared in-order one); every device-activity row has a
/// device time and a queue; dpnp's kernel names are whole (a sort kernel's template arguments
/// to the closing `>`).
#[test]
fn dpnp_kernels_from_three_threads_are_counted_timed_and_on_their_queues() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("dpnp-threads");
    let trace = dir.path().join("t.offtrace");
    let o = Command::new(offtrace())
        .arg("record")
        .arg("--runtime")
        .arg(&venv)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .arg(example("dpnp_threads.py"))
        .arg("2")
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .output()
        .expect("record");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && stdout.contains("dpnp_threads: ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let submitted = |k: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("count {k} ")))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{k}: {stdout}"))
    };
    let db = dir.path().join("t.sqlite");
    let e = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(e.expect("run export").status.success());
    let out = sql(
        &db,
        "for k in ('twice', 'inc_shared'):\n\
         \x20   print(*db.execute('select count(*), count(distinct a.queue_id), min(q.in_order), max(q.in_order) \
           from device_activity a join queues q on q.id = a.queue_id where a.name = ?', (k,)).fetchone())\n\
         print(*db.execute('select count(*), sum(device_ns is null), sum(queue_id is null) from device_activity').fetchone())\n\
         print(db.execute(\"select name from device_activity where name like '%sort_over_work_group_contig_krn%' limit 1\").fetchone()[0])\n",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("{} 3 0 0", submitted("twice")), "twice: rows, queues, in-order: {out}");
    assert_eq!(lines[1], format!("{} 1 1 1", submitted("inc_shared")), "inc_shared: rows, queues, in-order: {out}");
    let all: Vec<u64> = lines[2].split_whitespace().map(|n| n.parse().expect("number")).collect();
    assert!(all[0] >= 50 && all[1..] == [0, 0], "rows, without device time, without queue: {out}");
    let sort = lines[3];
    assert!(
        sort.starts_with("dpnp::tensor::kernels::merge_sort_detail::sort_over_work_group_contig_krn<float")
            && sort.ends_with('>'),
        "{sort}"
    );
}

/// Kernel dispatches carry their allocation properties into the SQLite export: on W4 both
/// `axpy` dispatches use their `y` (argument 0) and `x` (argument 1) arrays, 16384 `float32` of
/// DEVICE USM each.
#[test]
fn w4_kernel_allocation_properties_reach_the_sqlite_export() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("w4-alloc");
    let trace = dir.path().join("w4.offtrace");
    let w4 = example("w4_usm_multiqueue.py");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[w4.to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    // Without `--raw` (or `--detail verbose`) the trace holds typed records only.
    let rep = report_json(&trace);
    assert!(notification_counts(&rep).is_empty(), "no raw layer by default: {}", rep["notifications"]);
    assert!(api_calls(&rep, "UR_API", "urEnqueueKernelLaunch") >= 2, "{}", rep["api_calls"]);
    let db = dir.path().join("w4.sqlite");
    let o = Command::new(offtrace())
        .arg("export")
        .arg(&trace)
        .args(["--format", "sqlite", "-o"])
        .arg(&db)
        .output()
        .expect("export");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = sql(
        &db,
        "rows = db.execute(\"select allocations from device_activity where name = 'axpy'\").fetchall()\n\
         print(len(rows))\n\
         for (a,) in rows:\n    print(sorted((x['arg_index'], x['size'], x['memory_type']) for x in json.loads(a)))\n",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "2", "{out}");
    for l in &lines[1..] {
        assert_eq!(*l, "[(0, 65536, 'DEVICE'), (1, 65536, 'DEVICE')]", "{out}");
    }
}

/// `record`'s summary line counts the records `report` counts: the `End` record included, and a
/// definition two of the process's layers wrote alike (W0's main thread) once.
#[test]
fn the_record_summary_counts_what_the_report_counts() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("w0-count");
    let trace = dir.path().join("w0.offtrace");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[example("w0_smoke.py").to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let summary: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("offtrace: ")?.split_once(" records, "))
        .map(|(n, _)| n.replace(',', "").parse().expect("count"))
        .unwrap_or_else(|| panic!("no summary line: {stderr}"));
    assert_eq!(summary, report_json(&trace)["trace"]["records"].as_u64().expect("records"), "{stderr}");
}

/// `record --lossless` never drops: with a ring of two records per thread (`OFFTRACE_BUFFER_RECORDS`,
/// the agent's) every thread waits for the writer instead, the summary says 0 dropped, and the
/// report has every notification the default run keeps or counts as dropped. The default run with
/// the same ring drops (on a quiet machine it may not: then nothing below depends on it) and its
/// summary then names the flag.
#[test]
fn record_lossless_keeps_every_record_where_the_default_drops() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("lossless");
    let run = |name: &str, extra: &[&str]| {
        let trace = dir.path().join(format!("{name}.offtrace"));
        let program = example("w4_usm_multiqueue.py");
        let (code, _, stderr) =
            record_env(&venv, &trace, extra, &[("OFFTRACE_BUFFER_RECORDS", "2")], &[program.to_str().expect("utf8")]);
        assert_eq!(code, 0, "{name}: {stderr}");
        let dropped: u64 = stderr
            .lines()
            .find_map(|l| l.strip_prefix("offtrace: ")?.split_once(" records, ")?.1.split_once(" dropped"))
            .map(|(n, _)| n.replace(',', "").parse().expect("drop count"))
            .unwrap_or_else(|| panic!("{name}: no summary line: {stderr}"));
        (trace, stderr, dropped)
    };
    let note = "`offtrace record --lossless` keeps every record";
    let (lossless, err, dropped) = run("lossless", &["--lossless"]);
    assert_eq!(dropped, 0, "{err}");
    assert!(!err.contains(note), "{err}");
    let (default, err_default, dropped_default) = run("default", &[]);
    assert_eq!(err_default.contains(note), dropped_default > 0, "{err_default}");
    let records = |t: &Path| report_json(t)["trace"]["records"].as_u64().expect("records");
    let kept = records(&lossless);
    // The same program both times; the few records whose number depends on timing (clock
    // calibration samples, the writer's own) are the slack.
    let kept_default = records(&default);
    assert!(kept_default <= kept + 64, "the default run kept {kept_default}, the lossless one {kept}");
    if dropped_default > 64 {
        assert!(kept_default < kept, "the default run dropped {dropped_default} but kept {kept_default} of {kept}");
    }
}

/// W4 makes an in-order queue without profiling and an out-of-order one with
/// (`property="enable_profiling"`): the queue records say so (in-order from SYCL, profiling from
/// the `urQueueCreate` properties), in the report (JSON and text) and in SQLite's `queues`.
#[test]
fn sycl_queues_say_whether_the_program_asked_for_profiling() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("w4-profiling");
    let trace = dir.path().join("w4.offtrace");
    let (code, stdout, stderr) = record(&venv, &trace, &[], &[example("w4_usm_multiqueue.py").to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let rep = report_json(&trace);
    let created: Vec<(bool, bool)> = rep["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter(|q| !q["created_ns"].is_null())
        .map(|q| (q["in_order"].as_bool().expect("in_order"), q["profiling"].as_bool().expect("profiling")))
        .collect();
    assert!(created.contains(&(true, false)), "the in-order queue without profiling: {created:?}");
    assert!(created.contains(&(false, true)), "the out-of-order queue with profiling: {created:?}");
    let o = Command::new(offtrace()).arg("report").arg(&trace).output().expect("run report");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("out-of-order, profiling"), "{text}");
    let db = dir.path().join("w4.sqlite");
    let o = Command::new(offtrace()).arg("export").arg(&trace).args(["--format", "sqlite", "-o"]).arg(&db).output();
    assert!(o.expect("run export").status.success());
    let out = sql(
        &db,
        "print(sorted(set(db.execute(\"select in_order, profiling, properties from queues where created_ns is not null\").fetchall())))\n",
    );
    assert!(out.contains("(0, 1, '[\"PROFILING\"]')") && out.contains("(1, 0, '[\"IN_ORDER\"]')"), "{out}");
}

/// Both subscribers in one process see the same notifications: offtrace's counts per stream and
/// trace type must equal the full-dump subscriber's exactly.
fn compare_with_xpti_dump(program: &[&str], dispatcher: &str) -> BTreeMap<(String, String), u64> {
    let Some(venv) = venv() else { return BTreeMap::new() };
    let dump_lib = match std::env::var_os("OFFTRACE_XPTI_DUMP") {
        Some(p) => PathBuf::from(p),
        None => {
            let o = Command::new(workspace().join("scripts/build-xpti-dump.sh"))
                .arg(&venv)
                .stderr(Stdio::inherit())
                .output()
                .expect("build xpti-dump");
            assert!(o.status.success(), "scripts/build-xpti-dump.sh failed");
            PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
        }
    };
    let disp = match dispatcher {
        "intel" => venv.join("lib/libxptifw.so.1"),
        _ => {
            let p = bin_dir().join("libxptifw.so.1");
            if p.exists() { p } else { bin_dir().join("libxptifw.so") }
        }
    };
    // `cargo test` builds the test binaries, not the libraries loaded into the program.
    for lib in [&disp, &bin_dir().join("libofftrace_agent.so")] {
        assert!(lib.exists(), "{} is not built: cargo build --workspace first", lib.display());
    }
    if let Some(why) = offtrace_testing::stale_library(&bin_dir().join("libofftrace_agent.so"), "offtrace-agent") {
        panic!("{why}");
    }
    let dir = tmpdir(&format!(
        "cmp-{dispatcher}-{}",
        Path::new(program[0]).file_stem().and_then(|s| s.to_str()).unwrap_or("p")
    ));
    let dump = dir.path().join("dump.jsonl");
    let trace = dir.path().join("t.offtrace");
    let agent = bin_dir().join("libofftrace_agent.so");
    let status = Command::new(venv.join("bin/python"))
        .args(program)
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", &disp)
        .env("XPTI_SUBSCRIBERS", format!("{},{}", dump_lib.display(), agent.display()))
        .env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING")
        .env("DUMP_FILE", &dump)
        .env("DUMP_SKIP", "sycl.debug,ur.call.debug")
        .env("DUMP_DETAIL", "2")
        .env("OFFTRACE_OUTPUT", &trace)
        .env("OFFTRACE_DETAIL", "normal")
        .env("OFFTRACE_RAW", "1")
        .stdout(Stdio::null())
        .status()
        .expect("run program");
    assert!(status.success(), "{program:?} failed under both subscribers: {status}");

    let text = std::fs::read_to_string(&dump).expect("dump written");
    let exit = text.lines().rfind(|l| l.starts_with("{\"k\":\"exit\"")).expect("dump has an exit line");
    let exit: serde_json::Value = serde_json::from_str(exit).expect("exit line is JSON");
    let mut expected = BTreeMap::new();
    for (stream, types) in exit["counts"].as_object().expect("counts") {
        for (tt, n) in types.as_object().expect("types") {
            let n = n.as_u64().expect("n");
            let tt: u16 = tt.parse().expect("type number");
            if n > 0 {
                let name = offtrace_trace_type_name(tt);
                expected.insert((stream.clone(), name), n);
            }
        }
    }
    let got = notification_counts(&report_json(&trace));
    assert!(!expected.is_empty());
    assert_eq!(got, expected, "offtrace (left) vs xpti-dump (right) for {program:?} on the {dispatcher} dispatcher");
    got
}

fn offtrace_trace_type_name(tt: u16) -> String {
    const NAMES: &[(u16, &str)] = &[
        (0, "unknown_type"),
        (2, "graph_create"),
        (4, "node_create"),
        (6, "edge_create"),
        (8, "region_begin"),
        (9, "region_end"),
        (10, "task_begin"),
        (11, "task_end"),
        (12, "barrier_begin"),
        (13, "barrier_end"),
        (14, "lock_begin"),
        (15, "lock_end"),
        (16, "signal"),
        (18, "transfer_begin"),
        (19, "transfer_end"),
        (20, "thread_begin"),
        (21, "thread_end"),
        (22, "wait_begin"),
        (23, "wait_end"),
        (24, "function_begin"),
        (25, "function_end"),
        (26, "metadata"),
        (28, "function_with_args_begin"),
        (29, "function_with_args_end"),
        (32, "mem_alloc_begin"),
        (33, "mem_alloc_end"),
        (34, "mem_release_begin"),
        (35, "mem_release_end"),
        (36, "offload_alloc_memory_object_construct"),
        (37, "offload_alloc_memory_object_destruct"),
        (38, "offload_alloc_memory_object_associate"),
        (39, "offload_alloc_memory_object_release"),
        (40, "offload_alloc_accessor"),
        (42, "queue_create"),
        (43, "queue_destroy"),
        (126, "diagnostics"),
    ];
    NAMES.iter().find(|(v, _)| *v == tt).map(|(_, n)| n.to_string()).unwrap_or(format!("type_{tt}"))
}

#[test]
fn counts_equal_xpti_dump_on_the_bundled_example() {
    compare_with_xpti_dump(&[example("usm_pipeline.py").to_str().expect("utf8"), "3"], "intel");
}

#[test]
fn counts_equal_xpti_dump_on_w4() {
    let w4 = example("w4_usm_multiqueue.py");
    compare_with_xpti_dump(&[w4.to_str().expect("utf8")], "intel");
}

#[test]
fn counts_equal_xpti_dump_on_the_bundled_example_with_offtraces_dispatcher() {
    compare_with_xpti_dump(&[example("usm_pipeline.py").to_str().expect("utf8"), "3"], "offtrace");
}

/// Four threads submitting kernels, copies, fills, barriers and host tasks to eight queues of
/// their own and one they share.
#[test]
fn counts_equal_xpti_dump_on_threads_queues() {
    compare_with_xpti_dump(&[example("threads_queues.py").to_str().expect("utf8")], "intel");
}

#[test]
fn counts_equal_xpti_dump_on_threads_queues_with_offtraces_dispatcher() {
    compare_with_xpti_dump(&[example("threads_queues.py").to_str().expect("utf8")], "offtrace");
}

#[test]
fn counts_equal_xpti_dump_on_w4_with_offtraces_dispatcher() {
    let w4 = example("w4_usm_multiqueue.py");
    compare_with_xpti_dump(&[w4.to_str().expect("utf8")], "offtrace");
}

/// The same program under Intel's dispatcher and under offtrace's: the agent records the same
/// streams and trace types with the same counts. Waits and edges depend on host-task timing
/// (`docs/reference/sycl-runtime.md` §4: they vary by a few percent between any two runs,
/// Intel's included), so those may differ by a small margin; everything else must be equal.
#[test]
fn same_counts_under_intels_and_offtraces_dispatcher() {
    let w4 = example("w4_usm_multiqueue.py");
    let program = [w4.to_str().expect("utf8")];
    let intel = compare_with_xpti_dump(&program, "intel");
    let ours = compare_with_xpti_dump(&program, "offtrace");
    if intel.is_empty() && ours.is_empty() {
        return; // OFFTRACE_SKIP_SYCL=1
    }
    let keys: std::collections::BTreeSet<_> = intel.keys().chain(ours.keys()).cloned().collect();
    for k in keys {
        let (a, b) = (intel.get(&k).copied().unwrap_or(0), ours.get(&k).copied().unwrap_or(0));
        let timing_dependent = matches!(k.1.as_str(), "wait_begin" | "wait_end" | "edge_create") || k.0 == "ur.call";
        if timing_dependent {
            let margin = (a.max(b) / 10).max(3);
            assert!(a.abs_diff(b) <= margin, "{k:?}: intel {a}, offtrace {b} (margin {margin})");
        } else {
            assert_eq!(a, b, "{k:?}: intel {a}, offtrace {b}");
        }
    }
}

#[test]
fn exit_status_is_the_programs() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("exit");
    let (code, _, stderr) = record(&venv, &dir.path().join("t.offtrace"), &[], &["-c", "import sys; sys.exit(7)"]);
    assert_eq!(code, 7, "{stderr}");
}

#[test]
fn sigkill_mid_run_leaves_a_readable_trace() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("kill");
    let trace = dir.path().join("t.offtrace");
    let pidfile = dir.path().join("pid");
    // A long run that writes its pid, so the test can kill the program itself (not the tool).
    let script = format!(
        "import os, runpy, sys\nopen({:?}, 'w').write(str(os.getpid()))\nsys.argv = ['usm_pipeline.py', '100000']\nrunpy.run_path({:?}, run_name='__main__')\n",
        pidfile.display().to_string(),
        example("usm_pipeline.py").display().to_string()
    );
    let child = Command::new(offtrace())
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(&venv)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn record");
    let start = Instant::now();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).map(|s| s.is_empty()).unwrap_or(true) {
        assert!(start.elapsed() < Duration::from_secs(60), "program never started");
        std::thread::sleep(Duration::from_millis(50)); // poll interval: the condition decides
    }
    // SIGKILL the program once the chunks on disk (closed every ~100 ms) hold more than 100 UR
    // calls: the condition is read from the trace, not guessed from a delay.
    let ur_begins = || {
        let o = Command::new(offtrace()).args(["report", "--format", "json"]).arg(&trace).output().expect("report");
        serde_json::from_slice(&o.stdout).map_or(0, |rep| api_calls(&rep, "UR_API", ""))
    };
    while !trace.exists() || ur_begins() <= 100 {
        assert!(start.elapsed() < Duration::from_secs(120), "the trace never held 100 UR calls");
        std::thread::sleep(Duration::from_millis(50)); // poll interval: the condition decides
    }
    let pid: i32 = std::fs::read_to_string(&pidfile).expect("pid").trim().parse().expect("pid number");
    let rc = Command::new("kill").args(["-KILL", &pid.to_string()]).status().expect("kill");
    assert!(rc.success());
    let out = child.wait_with_output().expect("record finishes after the kill");
    assert_eq!(out.status.code(), Some(128 + 9), "record returns 128+SIGKILL");
    // The trace is readable up to the last complete chunk: report works and warns.
    let o = Command::new(offtrace()).args(["report", "--format", "json"]).arg(&trace).output().expect("report");
    assert!(o.status.success(), "report of a killed trace: {}", String::from_utf8_lossy(&o.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(api_calls(&rep, "UR_API", "") > 100, "{}", rep["api_calls"]);
    let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
    assert!(
        err.contains("truncated") || err.contains("did not finish") || err.contains("unfinished"),
        "a warning says the trace is incomplete: {err}"
    );
}

#[test]
fn record_with_tool_loads_print_calls_into_w4() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("tool");
    let so = dir.path().join("libprint_calls.so");
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC", "-I"])
        .arg(workspace().join("crates/offtrace-capi/include"))
        .arg(workspace().join("examples/c/print_calls.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(st.success(), "cc print_calls.c failed");
    let w4 = example("w4_usm_multiqueue.py");
    let trace = dir.path().join("w4.offtrace");
    let (code, stdout, stderr) =
        record(&venv, &trace, &["--tool", so.to_str().expect("utf8")], &[w4.to_str().expect("utf8")]);
    assert_eq!(code, 0, "record failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("[UR_API] urEnqueueUSMMemcpy -> 0"), "{stdout}");
    assert_eq!(stdout.matches("[KERNEL_DISPATCH] axpy").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("size: 65536 argIndex: 1 type: DEVICE").count(), 2, "{stdout}");
    assert!(trace.exists(), "the trace is still written");
}

/// A program that runs a SYCL child to completion, then uses SYCL itself: two traced processes
/// one after the other. Each keeps its trace (the first the path, the second `<path>.<pid>`;
/// the second used to replace the first's, the child's trace lost), `record` lists both with
/// their processes, and the report of the path names the other.
#[test]
fn a_child_that_finished_before_its_parent_traced_keeps_its_trace() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("parent");
    let script = dir.path().join("parent.py");
    let smoke = example("w0_smoke.py");
    std::fs::write(
        &script,
        format!(
            "import subprocess, sys, runpy\nsubprocess.run([sys.executable, {smoke:?}], check=True)\nrunpy.run_path({smoke:?})\n",
            smoke = smoke.display().to_string()
        ),
    )
    .expect("script");
    let out = dir.path().join("par.offtrace");
    let (code, _, err) = record(&venv, &out, &[], &[script.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    let traces: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("par.offtrace")))
        .collect();
    assert_eq!(traces.len(), 2, "{traces:?}\n{err}");
    assert!(err.contains("offtrace: 2 traces written, one per traced process:"), "{err}");
    let mut pids = Vec::new();
    for t in &traces {
        let r = report_json(t);
        let info = &r["trace"]["info"];
        let pid = info["pid"].as_str().expect("pid").to_owned();
        assert!(err.contains(&format!("pid {pid}: ")), "{err}");
        assert!(r["trace"]["complete"].as_bool().expect("complete"), "{}", t.display());
        assert!(r["device_activity"].as_array().is_some_and(|a| !a.is_empty()), "{}: its kernels", t.display());
        pids.push(pid);
    }
    assert_ne!(pids[0], pids[1]);
    let o = Command::new(offtrace()).arg("report").arg(&out).output().expect("report");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("other traces of this recording (one per traced process): "), "{text}");
}
