//! The `offtrace` binary on synthetic traces (written with the format's writer) and its error
//! paths. No SYCL runtime needed.

#![allow(clippy::unwrap_used)] // tests

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use offtrace_analysis::testing::{w4_like, w4_like_with_dispatches};
use offtrace_format::{Record, TraceHeader, TraceWriter};

fn offtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn write_trace(path: &Path, records: &[Record], finish: bool) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = TraceWriter::new(f, &TraceHeader::monotonic()).unwrap();
    for (i, r) in records.iter().enumerate() {
        w.write(r).unwrap();
        if i % 20 == 19 {
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

fn trace(dir: &Path) -> PathBuf {
    let p = dir.join("t.offtrace");
    write_trace(&p, &w4_like(), true);
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
        "UR calls: 6 calls",
        "urEnqueueKernelLaunch",
        "SYCL commands: 3 commands",
        "axpy",
        "n/a",
        "Memory: peak 68.0 KiB live",
        "device",
        "copies and fills",
        "Queues: 2",
        "in-order",
        "Task graph: 3 nodes, 2 edges",
        "axpy → axpy → memcpy",
        "Threads: 2",
        "python",
        "Dropped records: 3",
        "function_with_args_begin",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in:\n{s}");
    }
}

#[test]
fn report_json_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let o = offtrace().args(["report", "--format", "json"]).arg(&t).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["notifications"]["sycl"]["task_begin"], 3);
    assert_eq!(v["notifications"]["ur.call"]["function_with_args_end"], 6);
    assert_eq!(v["commands"].as_array().unwrap().len(), 2);
    assert_eq!(v["graph"]["longest_chain_len"], 3);
    let o = offtrace().args(["report", "--format", "csv"]).arg(&t).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    for section in
        ["# ur_calls", "# sycl_commands", "# memory_ops", "# queues", "# task_graph", "# threads", "# notifications"]
    {
        assert!(s.contains(section), "{section} in {s}");
    }
    assert!(s.contains("urEnqueueUSMMemcpy,94,1,1000"), "{s}");
}

#[test]
fn report_on_truncated_trace_warns_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.offtrace");
    let recs = w4_like();
    write_trace(&p, &recs[..recs.len() - 2], false);
    let o = offtrace().args(["report", "--format", "json"]).arg(&p).output().unwrap();
    ok(&o);
    assert!(text(&o.stderr).contains("truncated"), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trace"]["complete"], false);
    assert!(v["trace"]["notifications"].as_u64().unwrap() > 20);
}

#[test]
fn report_kernel_allocations_per_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("k.offtrace");
    write_trace(&t, &w4_like_with_dispatches(), true);
    let o = offtrace().arg("report").arg(&t).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    let section: Vec<&str> =
        s.lines().skip_while(|l| !l.starts_with("Kernel allocations")).take_while(|l| !l.is_empty()).collect();
    assert_eq!(
        section,
        [
            "Kernel allocations: 3 dispatches of 2 kernels, 2 linked to a SYCL command (every allocation a kernel used; implicit = not passed as an argument)",
            "  axpy: 2 dispatches, 2 different allocation sets, up to 132.0 KiB per dispatch",
            "    arg 0: 65536 B (64.0 KiB) DEVICE (all 2 dispatches), base 0x1000",
            "    arg 1: 4096 B (4.00 KiB) HOST (all 2 dispatches), 2 bases, first 0x2000",
            "    implicit: 65536 B (64.0 KiB) SHARED (1 dispatch), base 0x30000",
            "  scale: 1 dispatch, 1 not linked to a SYCL command, no allocations",
        ],
        "{s}"
    );

    let o = offtrace().args(["report", "--format", "json"]).arg(&t).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let k = &v["kernel_allocations"];
    assert_eq!(k["dispatches"].as_array().unwrap().len(), 3);
    assert_eq!(k["dispatches"][0]["command_instance"], 30);
    assert_eq!(k["dispatches"][0]["link"], "ur_call");
    assert_eq!(k["dispatches"][0]["allocations"][2]["arg_index"], -1);
    assert_eq!(k["dispatches"][1]["allocations"][1]["base"], 0x2800);
    assert_eq!(k["dispatches"][2]["command_instance"], serde_json::Value::Null);
    assert_eq!(k["kernels"][0]["allocations"][1]["distinct_bases"], 2);

    let o = offtrace().args(["report", "--format", "csv"]).arg(&t).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    let csv: Vec<&str> =
        s.lines().skip_while(|l| *l != "# kernel_allocations").skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(
        csv,
        [
            "kernel,dispatches,linked,distinct_sets,arg_index,size,memory_type,arg_dispatches,first_base,distinct_bases",
            "axpy,2,2,2,0,65536,DEVICE,2,0x1000,1",
            "axpy,2,2,2,1,4096,HOST,2,0x2000,2",
            "axpy,2,2,2,-1,65536,SHARED,1,0x30000,1",
            "scale,1,0,1,,,,,,",
        ],
        "{s}"
    );
}

/// Version 1 traces (no KernelDispatch records) still report, with a one-line note; the v2
/// fixture's dispatches show up.
#[test]
fn report_reads_the_format_fixtures() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../offtrace-format/tests/fixtures");
    let o = offtrace().arg("report").arg(fixtures.join("v1.offtrace")).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    assert!(s.contains("Kernel allocations: none recorded"), "{s}");
    assert!(s.contains("UR calls:"), "{s}");
    let o = offtrace().arg("report").arg(fixtures.join("v2.offtrace")).output().unwrap();
    ok(&o);
    let s = text(&o.stdout);
    assert!(s.contains("Kernel allocations: 3 dispatches of 2 kernels, 0 linked"), "{s}");
    assert!(
        s.contains("  _ZTS10vector_add: 2 dispatches, 2 not linked to a SYCL command, 2 different allocation sets"),
        "{s}"
    );
    assert!(s.contains("    implicit: 65536 B (64.0 KiB) DEVICE (1 dispatch), base 0xff00000010000000"), "{s}");
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
    assert!(dir.path().join("csv/ur_calls.csv").exists());
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

fn record(args: &[&str]) -> Output {
    offtrace()
        .arg("record")
        .args(args)
        .env_remove("OFFTRACE_SYCL_RUNTIME")
        .env_remove("OFFTRACE_AGENT")
        .output()
        .unwrap()
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

#[test]
fn record_returns_the_programs_status_and_signal() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
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
    assert!(env.lines().any(|l| l.starts_with("LD_LIBRARY_PATH=") && l.contains("venv/lib")));

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

#[test]
fn record_forwards_sigterm_and_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
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
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
    let src = dir.path().join("src.offtrace");
    write_trace(&src, &w4_like(), true);
    let out = dir.path().join("t.offtrace");
    let o = record(&[
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("cp {} \"$OFFTRACE_OUTPUT\"", src.display()),
    ]);
    ok(&o);
    let e = text(&o.stderr);
    let n = w4_like().len();
    assert!(e.contains(&format!("offtrace: {n} records, 3 dropped, {}", out.display())), "{e}");
}

#[test]
fn record_default_output_name_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
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
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
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
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
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

/// Without `--dispatcher`, offtrace's own dispatcher is used when it is built next to the
/// executable (as `cargo build --workspace` does), else the runtime's with a note.
#[test]
fn record_uses_offtraces_dispatcher_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let rt = fake_runtime(dir.path());
    let agent = dir.path().join("libagent.so");
    std::fs::write(&agent, b"").unwrap();
    let out = dir.path().join("t.offtrace");
    let env_dump = dir.path().join("env");
    let script = format!("env > {}", env_dump.display());
    let o = record(&[
        "--runtime",
        rt.to_str().unwrap(),
        "--agent",
        agent.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
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
