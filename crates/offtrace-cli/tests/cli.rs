//! The `offtrace` binary on synthetic traces (written with the format's writer) and its error
//! paths. No SYCL runtime needed.

#![allow(clippy::unwrap_used)] // tests

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offtrace_analysis::testing::{TypedBuilder, sycl_like};
use offtrace_format::{Record, TraceHeader, TraceWriter};

fn offtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn write_trace(path: &Path, records: &[Record], finish: bool) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = TraceWriter::with_chunk_size(f, &TraceHeader::monotonic(), 4096).unwrap();
    for (i, r) in records.iter().enumerate() {
        w.write(r).unwrap();
        if i % 500 == 499 {
            w.flush_chunk().unwrap();
        }
    }
    if finish {
        w.finish().unwrap();
    } else {
        w.flush_chunk().unwrap();
        // dropped without finishing: no end marker, like a killed recording
        std::mem::forget(w);
    }
}

fn sycl_records(threads: u32, records: u64) -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    sycl_like(&mut b, threads, records, |v: &Vec<Record>| v.len() as u64);
    b.out
}

fn trace(dir: &Path) -> PathBuf {
    let p = dir.join("t.offtrace");
    write_trace(&p, &sycl_records(3, 5000), true);
    p
}

fn ok(o: &Output) {
    assert!(o.status.success(), "status {:?}\nstdout:\n{}\nstderr:\n{}", o.status, text(&o.stdout), text(&o.stderr));
}

#[test]
fn report_text_has_every_section() {
    let dir = tempfile::tempdir().unwrap();
    let o = offtrace().arg("report").arg(trace(dir.path())).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    for needle in [
        "trace: ",
        "complete",
        "API calls: ",
        "UR_API: ",
        "urEnqueueKernelLaunch",
        "Device activity: ",
        "KERNEL_DISPATCH",
        "main::{lambda(sycl::handler&)#1}::operator()(sycl::handler&) const::{lambda(sycl::id<1>)#1}",
        "dpnp::kernels::elementwise::add_contig_kernel<float, float, float, 4u, 2u, true>",
        "MEMORY_COPY",
        "usm_memcpy",
        "MEMORY_FILL",
        "Memory: peak 1.00 MiB live",
        "HOST_TO_DEVICE",
        "10.49 GB/s",
        "Queues: 3",
        "in-order",
        "Synthetic GPU",
        "Task graph: ",
        "longest dependency chain over real commands",
        "Threads: 3",
        "submitter-0",
        "Counters: 1",
        "gpu power",
        "Dropped records: 0",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in:\n{s}");
    }
    assert!(!s.contains("typeinfo"), "{s}");
    assert!(!s.contains("Raw notifications"), "no raw layer in this trace: {s}");
}

#[test]
fn report_json_has_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let o = offtrace().args(["report", "--format", "json"]).arg(&t).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in [
        "trace",
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
        assert!(v.get(key).is_some(), "no key {key}");
    }
    let call = &v["api_calls"][0];
    for key in ["kind", "operation", "calls", "total_ns", "mean_ns", "min_ns", "max_ns"] {
        assert!(call.get(key).is_some(), "api_calls[0] has no {key}: {call}");
    }
    let launches =
        v["api_calls"].as_array().unwrap().iter().find(|c| c["operation"] == "urEnqueueKernelLaunch").unwrap();
    let kernels: u64 = v["device_activity"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "KERNEL_DISPATCH")
        .map(|d| d["count"].as_u64().unwrap())
        .sum();
    assert_eq!(launches["kind"], "UR_API");
    assert_eq!(launches["calls"].as_u64().unwrap(), kernels, "one dispatch per launch");
    let d = &v["device_activity"][0];
    for key in [
        "kind",
        "name",
        "count",
        "device_total_ns",
        "device_mean_ns",
        "device_min_ns",
        "device_max_ns",
        "host_enqueue_mean_ns",
        "queues",
    ] {
        assert!(d.get(key).is_some(), "device_activity[0] has no {key}: {d}");
    }
}

#[test]
fn report_csv_has_a_section_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let o = offtrace().args(["report", "--format", "csv"]).arg(trace(dir.path())).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    for section in [
        "# api_calls",
        "# device_activity",
        "# memory_copies",
        "# code_objects",
        "# code_object_names",
        "# queues",
        "# task_graph",
        "# threads",
        "# counters",
    ] {
        assert!(s.contains(section), "{section} in {s}");
    }
}

#[test]
fn report_on_truncated_trace_warns_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.offtrace");
    let recs = sycl_records(2, 3000);
    write_trace(&p, &recs[..recs.len() - 2], false);
    let o = offtrace().args(["report", "--format", "json"]).arg(&p).output().unwrap();
    ok(&o);
    assert!(text(&o.stderr).contains("truncated"), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trace"]["complete"], false);
    assert!(v["api_calls"].as_array().unwrap().len() > 3);
}

/// Flips a byte in the middle of the third chunk.
fn damage(path: &Path) -> u64 {
    let mut b = std::fs::read(path).unwrap();
    let mut at = 64usize;
    for _ in 0..2 {
        let stored = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 24 + stored;
    }
    let count = u32::from_le_bytes(b[at + 16..at + 20].try_into().unwrap());
    let stored = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
    b[at + 24 + stored / 2] ^= 0x10;
    std::fs::write(path, b).unwrap();
    u64::from(count)
}

#[test]
fn a_corrupt_chunk_is_skipped_with_a_warning_in_report_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let o = offtrace().args(["report", "--format", "json"]).arg(&t).output().unwrap();
    let clean: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let lost = damage(&t);
    let o = offtrace().args(["report", "--format", "json"]).arg(&t).output().unwrap();
    ok(&o);
    let err = text(&o.stderr);
    assert!(err.contains("warning: corrupt trace: chunk 2") && err.contains("reading resumed at byte"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trace"]["records"].as_u64().unwrap() + lost, clean["trace"]["records"].as_u64().unwrap());
    assert_eq!(v["trace"]["complete"], false);
    assert_eq!(v["trace"]["warnings"].as_array().unwrap().len(), 1);
    let o = offtrace().arg("report").arg(&t).output().unwrap();
    ok(&o);
    assert!(text(&o.stdout).contains("DAMAGED (1 stretch skipped, listed below)"), "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("  warning: corrupt trace: chunk 2"), "{}", text(&o.stdout));
    let out = dir.path().join("t.sqlite");
    let o = offtrace().arg("export").arg(&t).args(["--format", "sqlite", "-o"]).arg(&out).output().unwrap();
    ok(&o);
    let e = text(&o.stderr);
    assert!(e.contains("warning: corrupt trace: chunk 2") && e.contains("reading resumed at byte"), "{e}");
    assert!(out.exists());
}

/// Issue 11: a byte flipped in the first chunk, where the definitions are first written. The
/// file repeats them before `End`, as the recorder does: the report and the export still name
/// every API call (no `KIND_1`, no `op_9`).
#[test]
fn a_damaged_first_chunk_leaves_every_name_in_report_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.offtrace");
    let mut records = sycl_records(3, 5000);
    let repeat: Vec<Record> =
        records.iter().filter(|r| offtrace_format::DefinitionKey::of(r).is_some()).cloned().collect();
    let end = records.pop().unwrap();
    records.extend(repeat);
    records.push(end);
    write_trace(&t, &records, true);
    let clean = offtrace().arg("report").arg(&t).output().unwrap();
    ok(&clean);
    let mut b = std::fs::read(&t).unwrap();
    b[64 + 24 + 100] ^= 0xff;
    std::fs::write(&t, b).unwrap();
    let o = offtrace().arg("report").arg(&t).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    assert!(s.contains("DAMAGED (1 stretch skipped"), "{s}");
    assert!(!s.contains("KIND_") && !s.contains("op_"), "{s}");
    for name in ["UR_API", "urEnqueueKernelLaunch", "urEventRelease"] {
        assert!(s.contains(name), "{name}: {s}");
    }
    let out = dir.path().join("t.json");
    let o = offtrace().arg("export").arg(&t).args(["--format", "chrome", "-o"]).arg(&out).output().unwrap();
    ok(&o);
    let json = std::fs::read_to_string(&out).unwrap();
    assert!(!json.contains("KIND_") && !json.contains("\"op_"), "an unnamed kind or operation in the export");
    assert!(json.contains("urEnqueueKernelLaunch"));
}

#[test]
fn report_of_an_empty_file_says_it_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.offtrace");
    std::fs::write(&p, b"").unwrap();
    for args in [&["report"][..], &["export", "--format", "perfetto", "-o", "x.pftrace"][..]] {
        let o = offtrace().args(args).arg(&p).current_dir(dir.path()).output().unwrap();
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o.stderr).contains("is empty (0 bytes): the recording wrote nothing"), "{}", text(&o.stderr));
    }
    assert!(!dir.path().join("x.pftrace").exists());
}

#[test]
fn report_into_a_closed_pipe_exits_quietly() {
    // Thousands of kernel names: far more output than a pipe holds.
    let mut b = TypedBuilder::new(Vec::new());
    for i in 0..5000u64 {
        b.kernel(1, i * 10, i + 1, 0x5000, 0xd1, &format!("kernel_number_{i}_with_a_long_name"), None);
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("many.offtrace");
    write_trace(&p, &b.out, true);
    for format in ["text", "json", "csv"] {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "\"$0\" report --format {format} \"$1\" | head -c 100 > /dev/null; echo \"status=${{PIPESTATUS:-0}}\""
            ))
            .arg(env!("CARGO_BIN_EXE_offtrace"))
            .arg(&p)
            .output()
            .unwrap();
        ok(&o);
        assert_eq!(text(&o.stderr), "", "{format}: offtrace said something on a closed pipe");
    }
}

#[test]
fn report_reads_the_format_fixtures() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../offtrace-format/tests/fixtures");
    // Raw-only versions: the notification counts.
    for v in ["v1", "v2"] {
        let o = offtrace().arg("report").arg(fixtures.join(format!("{v}.offtrace"))).output().unwrap();
        ok(&o);
        let s = text(&o.stdout);
        assert!(s.contains("Raw notifications by stream and type"), "{v}: {s}");
        assert!(s.contains("edge_create"), "{v}: {s}");
    }
    let o = offtrace().args(["report", "--format", "json"]).arg(fixtures.join("v3.offtrace")).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trace"]["format_version"], 3);
    assert!(!v["api_calls"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn report_of_a_non_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.offtrace");
    std::fs::write(&p, b"hello world, not a trace at all; definitely not").unwrap();
    let o = offtrace().arg("report").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).starts_with("offtrace: error: "), "{}", text(&o.stderr));
    let o = offtrace().arg("report").arg(dir.path().join("missing")).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn export_all_four_formats() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    for (fmt, out) in [("perfetto", "t.pftrace"), ("chrome", "t.json"), ("sqlite", "t.sqlite"), ("csv", "csv")] {
        let out = dir.path().join(out);
        let o = offtrace().arg("export").arg(&t).args(["--format", fmt, "-o"]).arg(&out).output().unwrap();
        ok(&o);
        assert!(out.exists(), "{fmt}");
        assert!(text(&o.stderr).contains("exported"), "{}", text(&o.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("t.json")).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 20);
    assert!(dir.path().join("csv/api_calls.csv").exists());
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
}

#[test]
fn export_to_a_place_that_cannot_hold_it_says_so_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let missing = dir.path().join("no-such-folder/run.pftrace");
    let o = offtrace().arg("export").arg(&t).args(["--format", "perfetto", "-o"]).arg(&missing).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("does not exist: choose another -o") && !e.contains("partial"), "{e}");
    let o = offtrace().arg("export").arg(&t).args(["--format", "sqlite", "-o"]).arg(dir.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("it is a folder: choose another -o"), "{}", text(&o.stderr));
    // Over the trace itself (the same file by another name): refused, the trace kept.
    let before = std::fs::read(&t).unwrap();
    let same = t.parent().unwrap().join(".").join(t.file_name().unwrap());
    let o = offtrace().arg("export").arg(&t).args(["--format", "chrome", "-o"]).arg(&same).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("it is the trace being exported: choose another -o"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&t).unwrap(), before);
}

#[test]
fn usage_errors_exit_2() {
    let o = offtrace().args(["record", "--bogus", "--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = offtrace().args(["export", "x.offtrace", "--format", "pdf", "-o", "y"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = offtrace().arg("record").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = offtrace().output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// A directory that looks like a runtime (the two library names exist) for the error paths.
fn fake_runtime(dir: &Path) -> PathBuf {
    let lib = dir.join("venv/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libsycl.so.9"), b"").unwrap();
    std::fs::write(lib.join("libxptifw.so.1"), b"").unwrap();
    dir.join("venv")
}

/// An agent file for `--agent` (the fake runtime's programs never load it).
fn fake_agent(dir: &Path) -> PathBuf {
    let agent = dir.join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
    agent
}

fn record(args: &[&str]) -> Output {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
    offtrace()
        .arg("record")
        .args(args)
        .env_remove("OFFTRACE_SYCL_RUNTIME")
        .env_remove("OFFTRACE_AGENT")
        .output()
        .unwrap()
}

/// `offtrace record` with the fake runtime and agent, writing `out`, of `sh -c script`.
fn record_sh(rt: &Path, agent: &Path, out: &Path, script: &str) -> Output {
    record_sh_with(&[], rt, agent, out, script)
}

/// [`record_sh`] with `flags` before the others.
fn record_sh_with(flags: &[&str], rt: &Path, agent: &Path, out: &Path, script: &str) -> Output {
    let mut args = flags.to_vec();
    args.extend([
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    record(&args)
}

#[test]
fn record_missing_program() {
    let o = record(&["--", "definitely-not-a-program-xyz"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("program not found: definitely-not-a-program-xyz"), "{}", text(&o.stderr));
}

#[test]
fn record_missing_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.offtrace");
    let o = record(&["--runtime", dir.path().to_str().unwrap(), "-o", out.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("no SYCL runtime") && e.contains("scripts/setup-sycl.sh"), "{e}");
    assert!(!out.exists(), "no file left behind");
}

#[test]
fn record_unwritable_output() {
    let o = record(&["-o", "/nonexistent-dir/sub/t.offtrace", "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("cannot write the trace to /nonexistent-dir/sub/t.offtrace"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn record_missing_agent() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let out = dir.path().join("t.offtrace");
    let o = record(&[
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        "/nonexistent/libagent.so",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("agent not found: /nonexistent/libagent.so"), "{}", text(&o.stderr));
}

/// A program run from a venv (its `bin/python`) is traced with that venv's SYCL runtime, also
/// when it is not the project's venv and nothing names it: before, `record` took it for an
/// OpenCL-only program and set none of the runtime's environment (dpctl then failed with "USM
/// allocation failed"; `scripts/test.sh` with `OFFTRACE_SYCL_VENV` elsewhere failed so).
#[test]
fn record_finds_the_runtime_of_the_venv_the_program_runs_from() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let bin = rt.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let env_dump = dir.path().join("env");
    let prog = bin.join("python");
    std::fs::write(&prog, format!("#!/bin/sh\nenv > {}\n", env_dump.display())).unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let o = offtrace()
        .args(["record", "--agent", agent.to_str().unwrap(), "--dispatcher", "intel", "-o", out.to_str().unwrap()])
        .arg("--")
        .arg(&prog)
        .env_remove("OFFTRACE_SYCL_RUNTIME")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let env = std::fs::read_to_string(&env_dump).unwrap();
    let lib = rt.join("lib").canonicalize().unwrap();
    assert!(env.contains(&format!("XPTI_FRAMEWORK_DISPATCHER={}", lib.join("libxptifw.so.1").display())), "{env}");
}

#[test]
fn record_returns_the_programs_status_and_signal() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let base = [
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "--dispatcher",
        "intel",
        "-o",
        out.to_str().unwrap(),
        "--",
    ];
    let env_dump = dir.path().join("env");
    let script = format!("env > {}; exit 3", env_dump.display());
    let mut args = base.to_vec();
    args.extend(["sh", "-c", &script]);
    let o = record(&args);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no trace was written"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("a SYCL, OpenCL or CUDA runtime"), "{}", text(&o.stderr));
    let env = std::fs::read_to_string(&env_dump).unwrap();
    for needle in [
        "XPTI_TRACE_ENABLE=1",
        "UR_ENABLE_LAYERS=UR_LAYER_TRACING",
        "OFFTRACE_DETAIL=normal",
        "OFFTRACE_UR_CALLS=1",
        "OFFTRACE_DEBUG_STREAMS=0",
        "libofftrace",
    ] {
        if needle == "libofftrace" {
            continue;
        }
        assert!(env.contains(needle), "{needle} in env:\n{env}");
    }
    assert!(env.contains(&format!("XPTI_SUBSCRIBERS={}", agent.display())));
    assert!(env.contains(&format!(
        "XPTI_FRAMEWORK_DISPATCHER={}",
        rt.join("lib/libxptifw.so.1").canonicalize().unwrap().display()
    )));
    assert!(env.contains(&format!("OFFTRACE_OUTPUT={}", out.display())) || env.contains("OFFTRACE_OUTPUT=/"));

    let mut args = base.to_vec();
    args.extend(["--no-ur-calls", "--detail", "verbose"]);
    let _ = args;
    let args2 = [
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--no-ur-calls",
        "--detail",
        "verbose",
        "--",
        "sh",
        "-c",
        &format!("env > {}", env_dump.display()),
    ];
    let o = record(&args2);
    assert_eq!(o.status.code(), Some(0));
    let env = std::fs::read_to_string(&env_dump).unwrap();
    assert!(env.contains("OFFTRACE_UR_CALLS=0") && env.contains("OFFTRACE_DETAIL=verbose"), "{env}");

    // killed by a signal: 128 + signal
    let mut args = base.to_vec();
    args.extend(["sh", "-c", "kill -TERM $$"]);
    let o = record(&args);
    assert_eq!(o.status.code(), Some(128 + 15));
}

/// The program's library search path is the user's: `record` used to put the runtime's lib
/// folder first in `LD_LIBRARY_PATH`, so a C program linked with `-lOpenCL` loaded the SYCL
/// venv's Khronos loader instead of the system's. A program that exits with 127 (the dynamic
/// loader's status for a library not found) gets a hint naming the folder, unless it is on the
/// path already, and not the `--intel-opencl` hint.
#[test]
fn record_leaves_the_library_search_path_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    std::fs::write(rt.join("lib/libintelocl.so"), b"").unwrap();
    let lib = rt.join("lib").canonicalize().unwrap();
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let dump = dir.path().join("env");
    let run = |library_path: Option<&str>, status: u8| {
        let script = format!("env | grep ^LD_LIBRARY_PATH= > {}; exit {status}", dump.display());
        let mut c = offtrace();
        c.args(["record", "--runtime", rt.to_str().unwrap(), "--agent", agent.to_str().unwrap()])
            .args(["--dispatcher", "intel", "-o"])
            .arg(&out)
            .args(["--", "sh", "-c", &script])
            .env_remove("OCL_ICD_FILENAMES")
            .env_remove("OCL_ICD_VENDORS");
        match library_path {
            Some(p) => c.env("LD_LIBRARY_PATH", p),
            None => c.env_remove("LD_LIBRARY_PATH"),
        };
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(i32::from(status)), "{}", text(&o.stderr));
        (std::fs::read_to_string(&dump).unwrap(), text(&o.stderr))
    };
    assert_eq!(run(None, 0).0, "", "record set LD_LIBRARY_PATH");
    assert_eq!(run(Some("/mine/lib"), 0).0, "LD_LIBRARY_PATH=/mine/lib\n");

    let hint = format!(
        "give it the LD_LIBRARY_PATH it needs without offtrace (record leaves it as it is), e.g. LD_LIBRARY_PATH={}",
        lib.display()
    );
    let (_, err) = run(None, 127);
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.starts_with("offtrace: hint: the program exited with status 127") && l.ends_with(&hint)),
        "{err}"
    );
    assert!(!err.contains("--intel-opencl"), "{err}");
    let on_path = format!("/mine/lib:{}", lib.display());
    let (_, err) = run(Some(&on_path), 127);
    assert!(!err.contains("hint"), "{err}");
    let (_, err) = run(None, 1);
    assert!(!err.contains("LD_LIBRARY_PATH") && err.contains("--intel-opencl"), "{err}");
}

/// `record` of `sh -c script` on the fake runtime (with `libintelocl.so` when `intel_cpu`),
/// the ICD loaders' variables set only as `icd_env` says; returns the output.
fn record_icd(dir: &Path, intel_cpu: bool, flag: bool, icd_env: &[(&str, &str)], script: &str) -> Output {
    let rt = fake_runtime(dir);
    let intelocl = rt.join("lib/libintelocl.so");
    if intel_cpu {
        std::fs::write(&intelocl, b"").unwrap();
    } else {
        let _ = std::fs::remove_file(&intelocl);
    }
    let agent = fake_agent(dir);
    let out = dir.join("t.offtrace");
    let mut c = offtrace();
    c.arg("record");
    if flag {
        c.arg("--intel-opencl");
    }
    c.args(["--runtime", rt.to_str().unwrap(), "--agent", agent.to_str().unwrap(), "--dispatcher", "intel", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", script])
        .env_remove("OCL_ICD_FILENAMES")
        .env_remove("OCL_ICD_VENDORS");
    for (k, v) in icd_env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A program traced sees the OpenCL devices it sees untraced: `record` sets neither
/// `OCL_ICD_FILENAMES` nor `OCL_ICD_VENDORS` (it used to add the runtime's OpenCL CPU runtime
/// through both); `--intel-opencl` sets both where the user did not, the vendors folder holding
/// the runtime's ICD, and refuses a runtime without one.
#[test]
fn record_leaves_the_icd_loaders_variables_to_the_user_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("env");
    let script = format!(
        "env | grep ^OCL_ICD_ > {d}; [ -n \"$OCL_ICD_VENDORS\" ] && cat \"$OCL_ICD_VENDORS\"/*.icd >> {d}; true",
        d = dump.display()
    );
    let lines = || std::fs::read_to_string(&dump).unwrap();

    let o = record_icd(dir.path(), true, false, &[], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(lines(), "", "record set the ICD loaders' variables");
    let o = record_icd(dir.path(), true, false, &[("OCL_ICD_FILENAMES", "/mine/libx.so")], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(lines(), "OCL_ICD_FILENAMES=/mine/libx.so\n");

    let o = record_icd(dir.path(), true, true, &[], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let runtime = dir.path().join("venv/lib/libintelocl.so").canonicalize().unwrap();
    let got = lines();
    assert!(got.contains(&format!("OCL_ICD_FILENAMES={}\n", runtime.display())), "{got}");
    assert!(got.contains("OCL_ICD_VENDORS="), "{got}");
    assert!(got.lines().any(|l| l == runtime.display().to_string()), "the vendors folder names the runtime: {got}");
    let o = record_icd(dir.path(), true, true, &[("OCL_ICD_FILENAMES", "/mine/libx.so")], &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(lines().contains("OCL_ICD_FILENAMES=/mine/libx.so\n"), "{}", lines());

    let o = record_icd(dir.path(), false, true, &[], &script);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--intel-opencl: the SYCL runtime in"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("has no libintelocl.so"), "{}", text(&o.stderr));
}

/// A failed run's summary ends with one hint naming `--intel-opencl` when the runtime's OpenCL
/// CPU device was hidden from the program by default; never after a successful run, with the
/// flag, when the user set an ICD loader variable, or for a runtime without that device.
#[test]
fn a_failed_run_hints_at_the_runtimes_opencl_cpu_device_only_when_record_hid_it() {
    let dir = tempfile::tempdir().unwrap();
    let hint = "offtrace: hint: the program exited with status 3;";
    let o = record_icd(dir.path(), true, false, &[], "exit 3");
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with(hint) && last.contains("record --intel-opencl"), "the last line: {err}");
    assert!(!last.contains("OCL_ICD_FILENAMES") && last.contains("libintelocl.so"), "{err}");
    assert!(err.find("no trace was written").unwrap() < err.find(hint).unwrap(), "after the summary: {err}");
    assert_eq!(err.matches("offtrace: hint:").count(), 1, "{err}");

    for (what, intel_cpu, flag, env, script) in [
        ("success", true, false, &[][..], "exit 0"),
        ("--intel-opencl", true, true, &[][..], "exit 3"),
        ("OCL_ICD_VENDORS set", true, false, &[("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")][..], "exit 3"),
        ("OCL_ICD_FILENAMES set", true, false, &[("OCL_ICD_FILENAMES", "/mine/libx.so")][..], "exit 3"),
        ("no libintelocl.so", false, false, &[][..], "exit 3"),
    ] {
        let o = record_icd(dir.path(), intel_cpu, flag, env, script);
        // (The fake runtime writes no trace: a successful run gets the nothing-recorded hint.)
        assert!(!text(&o.stderr).contains("offtrace: hint: the program exited"), "{what}: {}", text(&o.stderr));
    }
}

#[test]
fn record_forwards_sigterm_and_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let marker = dir.path().join("got-term");
    let ready = dir.path().join("ready");
    // The program says when its trap is installed; the test signals only then.
    let script = format!(
        "trap 'echo term > {}; exit 42' TERM; echo > {}; while true; do sleep 0.05; done",
        marker.display(),
        ready.display()
    );
    let mut child = offtrace()
        .arg("record")
        .args([
            "--runtime",
            rt.to_str().unwrap(),
            "--agent",
            agent.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--",
        ])
        .args(["sh", "-c", &script])
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the program never started");
        assert!(child.try_wait().unwrap().is_none(), "record exited before the program was ready");
        std::thread::sleep(std::time::Duration::from_millis(5)); // poll interval: the condition decides
    }
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(42), "the tool waited and returned the program's status");
    assert!(marker.exists(), "the program got the forwarded SIGTERM");
}

#[test]
fn record_summary_line_on_a_written_trace() {
    // A "program" that writes a trace where the agent would: checks the summary line.
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let src = dir.path().join("src.offtrace");
    let mut records = sycl_records(2, 2000);
    records.push(Record::Drops { tid: 1000, count: 3 });
    // As the recorder counts: the records before `End`.
    records.push(Record::End { records: records.len() as u64, drops: 3 });
    write_trace(&src, &records, true);
    let out = dir.path().join("t.offtrace");
    let o = record_sh(&rt, &agent, &out, &format!("cp {} \"$OFFTRACE_OUTPUT\"", src.display()));
    ok(&o);
    let e = text(&o.stderr);
    let n = records.len();
    let n = format!("{},{:03}", n / 1000, n % 1000);
    assert!(e.contains(&format!("offtrace: {n} records, 3 dropped, {}", out.display())), "{e}");
}

/// A trace cut off (no `End`, no end marker) is read in full for the summary line, as `report`
/// reads it: a definition written again alike counts once, and the counts agree.
#[test]
fn record_summary_of_a_cut_off_trace_counts_what_report_counts() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let src = dir.path().join("src.offtrace");
    let mut records = sycl_records(2, 2000);
    let again: Vec<Record> = records.iter().filter(|r| matches!(r, Record::Thread { .. })).cloned().collect();
    assert!(!again.is_empty());
    records.extend(again);
    write_trace(&src, &records, false);
    let out = dir.path().join("t.offtrace");
    let o = record_sh(&rt, &agent, &out, &format!("cp {} \"$OFFTRACE_OUTPUT\"", src.display()));
    ok(&o);
    let e = text(&o.stderr);
    assert!(e.contains("warning: the trace is truncated"), "{e}");
    let summary: u64 = e
        .lines()
        .find_map(|l| l.strip_prefix("offtrace: ")?.split_once(" records, "))
        .map(|(n, _)| n.replace(',', "").parse().unwrap())
        .unwrap_or_else(|| panic!("no summary line: {e}"));
    let rep = offtrace().args(["report", "--format", "json"]).arg(&out).output().unwrap();
    let rep: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert_eq!(summary, rep["trace"]["records"].as_u64().unwrap(), "{e}");
}

#[test]
fn record_default_output_name_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    std::fs::write(dir.path().join("offtrace-sh-1.offtrace"), b"keep").unwrap();
    let o = offtrace()
        .current_dir(dir.path())
        .args(["record", "--runtime", rt.to_str().unwrap(), "--agent", agent.to_str().unwrap(), "--"])
        .args(["sh", "-c", "echo \"$OFFTRACE_OUTPUT\""])
        .output()
        .unwrap();
    ok(&o);
    assert!(text(&o.stdout).trim().ends_with("/offtrace-sh-2.offtrace"), "{}", text(&o.stdout));
    assert_eq!(std::fs::read(dir.path().join("offtrace-sh-1.offtrace")).unwrap(), b"keep");
}

#[test]
fn record_missing_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let o = record(&[
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "--dispatcher",
        "/nonexistent/libxptifw.so",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("XPTI dispatcher not found: /nonexistent/libxptifw.so"), "{}", text(&o.stderr));
}

#[test]
fn record_missing_tool() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.offtrace");
    let o = record(&["--tool", "/nonexistent/libtool.so", "-o", out.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--tool /nonexistent/libtool.so: no such file"), "{}", text(&o.stderr));
    assert!(!out.exists(), "no file left behind");
}

#[test]
fn record_tools_set_offtrace_tools_absolute_comma_separated() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let (a, b) = (dir.path().join("liba.so"), dir.path().join("libb.so"));
    std::fs::write(&a, b"").unwrap();
    std::fs::write(&b, b"").unwrap();
    let out = dir.path().join("t.offtrace");
    let seen = dir.path().join("tools");
    let script = format!("printf '%s' \"$OFFTRACE_TOOLS\" > {}", seen.display());
    let o = offtrace()
        .current_dir(dir.path())
        .arg("record")
        .args(["--runtime", rt.to_str().unwrap(), "--agent", agent.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--tool", "liba.so", "--tool", b.to_str().unwrap(), "--", "sh", "-c", &script])
        .env_remove("OFFTRACE_SYCL_RUNTIME")
        .env_remove("OFFTRACE_AGENT")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let want = format!("{},{}", a.canonicalize().unwrap().display(), b.canonicalize().unwrap().display());
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), want);
}

/// `--lossless` reaches every backend: with a SYCL runtime (the agent's environment) and
/// without one (an OpenCL or CUDA program alone, where it used to be left out).
#[test]
fn record_lossless_is_set_with_and_without_a_sycl_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let env_dump = dir.path().join("env");
    let script = format!("env > {}", env_dump.display());
    let lossless = |env: &str| env.lines().any(|l| l == "OFFTRACE_LOSSLESS=1");
    let out = dir.path().join("sycl.offtrace");
    let o = record_sh_with(&["--lossless"], &rt, &agent, &out, &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(lossless(&std::fs::read_to_string(&env_dump).unwrap()), "with a SYCL runtime");
    // No SYCL runtime (OFFTRACE_SYCL_RUNTIME names a folder without one), an OpenCL layer file:
    // the OpenCL-only recording.
    let empty = dir.path().join("no-runtime");
    std::fs::create_dir_all(&empty).unwrap();
    let layer = dir.path().join("libofftrace_opencl.so");
    std::fs::write(&layer, b"").unwrap();
    let out = dir.path().join("opencl.offtrace");
    for with in [false, true] {
        let o = offtrace()
            .arg("record")
            .args(with.then_some("--lossless"))
            .args(["--opencl-interpose", "layer", "-o", out.to_str().unwrap(), "--", "sh", "-c", &script])
            .env("OFFTRACE_SYCL_RUNTIME", &empty)
            .env("OFFTRACE_OPENCL_LAYER", &layer)
            .env_remove("OFFTRACE_LOSSLESS")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let env = std::fs::read_to_string(&env_dump).unwrap();
        assert!(env.lines().any(|l| l.starts_with("OPENCL_LAYERS=")), "the OpenCL-only branch ran: {env}");
        assert_eq!(lossless(&env), with, "without a SYCL runtime, --lossless {with}");
    }
}

/// Without `--dispatcher`, offtrace's own dispatcher is used when it is built next to the
/// executable (as `cargo build --workspace` does), else the runtime's with a note.
#[test]
fn record_uses_offtraces_dispatcher_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let out = dir.path().join("t.offtrace");
    let env_dump = dir.path().join("env");
    let script = format!("env > {}", env_dump.display());
    let o = record_sh(&rt, &agent, &out, &script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let env = std::fs::read_to_string(&env_dump).unwrap();
    let line = env.lines().find(|l| l.starts_with("XPTI_FRAMEWORK_DISPATCHER=")).expect("dispatcher set");
    let exe_dir = std::path::PathBuf::from(env!("CARGO_BIN_EXE_offtrace")).parent().unwrap().to_path_buf();
    let ours = ["libxptifw.so.1", "libxptifw.so"].iter().map(|n| exe_dir.join(n)).find(|p| p.exists());
    match ours {
        Some(p) => assert_eq!(line, format!("XPTI_FRAMEWORK_DISPATCHER={}", p.canonicalize().unwrap().display())),
        None => {
            assert!(line.ends_with("lib/libxptifw.so.1"), "{line}");
            assert!(text(&o.stderr).contains("not built"), "{}", text(&o.stderr));
        }
    }
}

/// A trace as a traced process writes it: its pid and command first.
fn process_trace(path: &Path, pid: u32, command: &str) {
    let mut records = vec![
        Record::Info { key: "pid".into(), value: pid.to_string() },
        Record::Info { key: "command".into(), value: command.into() },
    ];
    records.extend(sycl_records(1, 200));
    records.push(Record::End { records: records.len() as u64 + 1, drops: 0 });
    write_trace(path, &records, true);
}

#[test]
fn record_replaces_an_earlier_recording_and_lists_every_trace_written() {
    // Every traced process keeps its trace: the first writes the path, later ones
    // `<path>.<pid>`. `record -o` clears an earlier recording's files first (the program checks
    // that they are gone), then names each trace with its process; `report` names the others.
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = fake_agent(dir.path());
    let (parent, child) = (dir.path().join("parent.offtrace"), dir.path().join("child.offtrace"));
    process_trace(&parent, 4242, "python parent.py");
    process_trace(&child, 4243, "python child.py");
    let out = dir.path().join("t.offtrace");
    std::fs::write(&out, b"an earlier recording").unwrap();
    process_trace(&dir.path().join("t.offtrace.77"), 77, "an earlier recording's child");
    // A file of the user's with a sibling's name but no trace: neither removed nor listed.
    std::fs::write(dir.path().join("t.offtrace.78"), b"notes").unwrap();
    let script = format!(
        "test ! -e \"$OFFTRACE_OUTPUT\" && test ! -e \"$OFFTRACE_OUTPUT.77\" && cp {} \"$OFFTRACE_OUTPUT\" && cp {} \"$OFFTRACE_OUTPUT.4243\"",
        parent.display(),
        child.display()
    );
    let o = record_sh(&rt, &agent, &out, &script);
    ok(&o);
    let e = text(&o.stderr);
    assert!(e.contains("offtrace: 2 traces written, one per traced process:"), "{e}");
    assert!(e.contains(&format!("dropped, {} (", out.display())), "{e}");
    assert!(e.contains(&format!("dropped, {}.4243 (", out.display())), "{e}");
    assert!(e.contains("pid 4242: python parent.py") && e.contains("pid 4243: python child.py"), "{e}");
    assert!(!dir.path().join("t.offtrace.77").exists());
    assert_eq!(std::fs::read(dir.path().join("t.offtrace.78")).unwrap(), b"notes");
    assert!(!e.contains("t.offtrace.78"), "{e}");
    let r = offtrace().arg("report").arg(&out).output().unwrap();
    ok(&r);
    let t = text(&r.stdout);
    assert!(
        t.contains(&format!("other traces of this recording (one per traced process): {}.4243", out.display())),
        "{t}"
    );
}
