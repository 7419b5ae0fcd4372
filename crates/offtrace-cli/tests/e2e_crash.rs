//! `offtrace record` of an OpenCL program (PoCL; `OFFTRACE_SKIP_OPENCL=1` skips) and of a Python
//! SYCL script (the project's venv; `OFFTRACE_SKIP_SYCL=1` skips) that crash after their work:
//! the report shows the calls made just before the crash, and `record` exits with the status it
//! gave before (128 + the signal). With `OFFTRACE_CRASH_HANDLER=0` the same
//! run loses them (the open chunk dies with the process), which is what every run did before
//! the recorder flushed on fatal signals. The layer must be built next to `offtrace`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

/// `offtrace`, once the libraries it loads into the program are checked to be current.
fn offtrace() -> Command {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

/// A few OpenCL calls on PoCL, then the crash its first argument names.
const PROGRAM: &str = r#"
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    cl_platform_id platforms[8], platform = 0;
    cl_uint n = 0;
    clGetPlatformIDs(8, platforms, &n);
    for (cl_uint i = 0; i < n; i++) {
        char name[256] = {0};
        clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
        if (strstr(name, "Portable")) platform = platforms[i];
    }
    if (!platform) return 3;
    cl_device_id device;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS) return 4;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    static int data[1024];
    for (int i = 0; i < 7; i++) clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL);
    clFinish(q);
    if (argc > 1 && !strcmp(argv[1], "segv")) *(volatile int *)0 = 1;
    if (argc > 1 && !strcmp(argv[1], "abort")) abort();
    if (argc > 1 && !strcmp(argv[1], "term")) { kill(getpid(), SIGTERM); sleep(30); }
    return 0;
}
"#;

/// The program built into `dir`; None when OpenCL tests are skipped.
fn program(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("crash.c");
    std::fs::write(&src, PROGRAM).expect("write crash.c");
    common::opencl_program(dir, &src, "crash", &["-O1"], &[])
}

/// `record`'s exit code, the report's calls of `clEnqueueWriteBuffer` and `clFinish`, and the
/// trace's `crash` note.
fn record(dir: &Path, prog: &Path, how: &str, handler: bool) -> (Option<i32>, u64, u64, Option<String>) {
    let trace = dir.join(format!("{how}-{}.offtrace", u8::from(handler)));
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(prog)
        .arg(how)
        .env("OFFTRACE_CRASH_HANDLER", if handler { "1" } else { "0" })
        .current_dir(dir)
        .output()
        .expect("record");
    let r = offtrace().args(["report", "--format", "json"]).arg(&trace).output().expect("report");
    assert!(r.status.success(), "report: {}", String::from_utf8_lossy(&r.stderr));
    let r: serde_json::Value = serde_json::from_slice(&r.stdout).expect("JSON");
    let calls = |operation: &str| -> u64 {
        r["api_calls"]
            .as_array()
            .expect("api_calls")
            .iter()
            .filter(|c| c["operation"] == operation)
            .map(|c| c["calls"].as_u64().expect("calls"))
            .sum()
    };
    let note = r["trace"]["info"]["crash"].as_str().map(str::to_owned);
    (o.status.code(), calls("clEnqueueWriteBuffer"), calls("clFinish"), note)
}

/// `kept`: whether the trace keeps the last calls (see the abort test for when it does not).
fn check(how: &str, signal: i32, kept: bool) {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = program(dir.path()) else { return };
    // The program alone (no offtrace) dies of the signal: `record` says 128 + it, as before.
    let alone = Command::new(&prog).arg(how).current_dir(dir.path()).status().expect("run");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&alone), Some(signal), "{how}: {alone:?}");
    let (code, writes, finishes, note) = record(dir.path(), &prog, how, true);
    assert_eq!(code, Some(128 + signal), "{how}: record's exit code");
    if !kept {
        return;
    }
    assert_eq!((writes, finishes), (7, 1), "{how}: the last calls before the crash");
    assert_eq!(note, Some(format!("signal {signal} on thread {}", note_tid(note.as_deref()))), "{how}");
    let (code, writes, finishes, _) = record(dir.path(), &prog, how, false);
    assert_eq!(code, Some(128 + signal), "{how}: record's exit code without the handler");
    // Lost: the open chunk (unless the flush timer closed it in the microseconds between
    // `clFinish` and the crash).
    assert_ne!((writes, finishes), (7, 1), "{how}: without the handler the last calls are lost");
}

/// The thread id in a crash note (checked to be a number).
fn note_tid(note: Option<&str>) -> u32 {
    note.and_then(|n| n.rsplit(' ').next()).and_then(|t| t.parse().ok()).expect("a crash note with a thread id")
}

#[test]
fn a_crashing_opencl_program_keeps_its_last_calls() {
    check("segv", libc::SIGSEGV, true);
}

/// PoCL's LLVM installs its own SIGABRT handler after the recorder's (so it wins: ours is never
/// re-installed); that handler puts ours back and returns, and glibc's `abort()` then sets the
/// default action and raises again, so ours never runs: the last calls are lost, as before. The
/// exit status is still the program's. (A plain `abort()` keeps them: the recorder's test
/// `abort_keeps_every_record_and_dies_of_sigabrt`.)
#[test]
fn an_aborting_opencl_program_on_pocl_dies_as_before() {
    check("abort", libc::SIGABRT, false);
}

#[test]
fn a_terminated_opencl_program_keeps_its_last_calls() {
    check("term", libc::SIGTERM, true);
}

/// Some SYCL work (dpnp on the venv's runtime), then the crash the first argument names.
const SCRIPT: &str = r#"
import ctypes, os, signal, sys
import dpnp

x = dpnp.arange(4096, dtype="f4")
for _ in range(5):
    x = x * 2
print(float(x.sum()))
how = sys.argv[1]
if how == "null-read":
    ctypes.string_at(0)
elif how == "term":
    os.kill(os.getpid(), signal.SIGTERM)
elif how == "abort":
    os.abort()
"#;

fn venv() -> Option<PathBuf> {
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return None;
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let v = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace.join(".venv"));
    assert!(
        v.join("lib/libsycl.so.9").exists() && v.join("bin/python").exists(),
        "no SYCL runtime in {}: run scripts/setup-sycl.sh (or set OFFTRACE_SYCL_VENV, or OFFTRACE_SKIP_SYCL=1 to skip)",
        v.display()
    );
    Some(v)
}

/// `record`'s exit code, the report's calls of each enqueue operation, and the crash note, for
/// the script run with `how`. (Waits are not compared: a run that exits normally makes one or two
/// more at exit, as the runtime tears down.)
fn record_script(
    dir: &Path,
    venv: &Path,
    how: &str,
    handler: bool,
) -> (Option<i32>, std::collections::BTreeMap<String, u64>, Option<String>) {
    let script = dir.join("crash.py");
    std::fs::write(&script, SCRIPT).expect("write crash.py");
    let trace = dir.join(format!("{how}-{}.offtrace", u8::from(handler)));
    let o = offtrace()
        .arg("record")
        .arg("--intel-opencl")
        .arg("--runtime")
        .arg(venv)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(venv.join("bin/python"))
        .arg(&script)
        .arg(how)
        .env("OFFTRACE_CRASH_HANDLER", if handler { "1" } else { "0" })
        .current_dir(dir)
        .output()
        .expect("record");
    let r = offtrace().args(["report", "--format", "json"]).arg(&trace).output().expect("report");
    assert!(r.status.success(), "report: {}", String::from_utf8_lossy(&r.stderr));
    let r: serde_json::Value = serde_json::from_slice(&r.stdout).expect("JSON");
    let mut calls = std::collections::BTreeMap::new();
    for c in r["api_calls"].as_array().expect("api_calls") {
        let op = c["operation"].as_str().expect("operation");
        if op.contains("Enqueue") {
            *calls.entry(op.to_owned()).or_default() += c["calls"].as_u64().expect("calls");
        }
    }
    (o.status.code(), calls, r["trace"]["info"]["crash"].as_str().map(str::to_owned))
}

/// The script's enqueues (kernel launches, copies) are all in the crashed run's trace, as many as
/// in a run that exits normally (where `kept`); without the handler the last are lost.
fn check_script(how: &str, signal: i32, kept: bool) {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let (code, clean, _) = record_script(dir.path(), &venv, "none", true);
    assert_eq!(code, Some(0));
    assert!(clean.keys().any(|op| op.starts_with("urEnqueueKernelLaunch")), "{clean:?}");
    let (code, crashed, note) = record_script(dir.path(), &venv, how, true);
    assert_eq!(code, Some(128 + signal), "{how}: record's exit code");
    if !kept {
        return;
    }
    assert_eq!(crashed, clean, "{how}: the last calls before the crash");
    assert!(note.is_some_and(|n| n.starts_with(&format!("signal {signal} on thread "))), "{how}");
    let (code, without, _) = record_script(dir.path(), &venv, how, false);
    assert_eq!(code, Some(128 + signal), "{how}: record's exit code without the handler");
    assert_ne!(without, clean, "{how}: without the handler the last calls are lost");
}

#[test]
fn a_python_sycl_script_that_reads_address_0_keeps_its_last_calls() {
    check_script("null-read", libc::SIGSEGV, true);
}

#[test]
fn a_terminated_python_sycl_script_keeps_its_last_calls() {
    check_script("term", libc::SIGTERM, true);
}

/// As on PoCL (`an_aborting_opencl_program_on_pocl_dies_as_before`): PoCL's LLVM, and a second
/// library with LLVM's flags that the SYCL venv's runtime loads, install SIGABRT handlers after
/// the recorder's, and `abort()` ends the process without it. The exit status is the program's.
#[test]
fn an_aborting_python_sycl_script_dies_as_before() {
    check_script("abort", libc::SIGABRT, false);
}
