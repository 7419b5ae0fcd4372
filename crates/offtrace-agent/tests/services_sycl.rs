//! The tracing services' SYCL/UR backend (`services_bridge.rs`) against Intel's real SYCL
//! runtime (2026.2, OpenCL CPU device, from the project venv), with C tools loaded through
//! `OFFTRACE_TOOLS` into W4 (`examples/sycl/w4_usm_multiqueue.py`).
//!
//! Needs the venv (`scripts/setup-sycl.sh`): `OFFTRACE_SYCL_VENV`, default `<workspace>/.venv`.
//! Without it these tests fail with a message, unless `OFFTRACE_SKIP_SYCL=1`. The tools are
//! compiled with `cc` against `offtrace-capi/include` only: their `offtrace_*` references bind
//! at load time to the agent, which the loader makes `RTLD_GLOBAL` before it opens them.
//!
//! - `print_calls_prints_w4_ur_calls_with_decoded_arguments`: `examples/c/print_calls.c` prints
//!   every UR call with its arguments; one `[UR_API]` block per `ur.call` begin in the trace
//!   recorded by the same process; `urEnqueueUSMMemcpy` shows `hQueue`, `blocking`, `pDst`,
//!   `pSrc`, `size = 65536`.
//! - `w4_kernel_dispatches_list_their_usm_allocations`: `tests/c/services_check.c` subscribes
//!   every kind; enter/exit pairs match per thread (LIFO, same correlation id); records inside
//!   a UR call carry its correlation id; the two `axpy` dispatches list exactly their two
//!   USM device allocations (y = argument 0, x = argument 1, 65536 bytes each), which the
//!   tool saw reported by `urUSMDeviceAlloc`; allocation counts equal the trace's UR calls.
//! - `discard_buffer_reports_every_ur_call_as_delivered_or_dropped`: `examples/c/discard_buffer.c`:
//!   delivered + dropped = the trace's `ur.call` begin count, per-function counts equal.
//! - `without_ur_calls_verbose_sycl_metadata_gives_dispatches_and_allocations`: W4 without
//!   `UR_LAYER_TRACING`, detail VERBOSE: allocations from `sycl.experimental.mem_alloc`, the two
//!   kernel dispatches from the SYCL tasks with their `arg<N>` pointers matched to them.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use offtrace_format::{Record, TraceReader, UserData};

/// `function_with_args_begin`.
const TT_FUNCTION_BEGIN: u16 = 28;

use common::{agent, venv, workload, workspace};

fn tmpdir(name: &str) -> common::TestDir {
    common::tmpdir("services", name)
}

/// Compiles a tool against the C API header only (strict warnings, as in the capi tests).
fn tool(src: &Path, dir: &Path) -> PathBuf {
    let so = dir.join(format!("lib{}.so", src.file_stem().and_then(|s| s.to_str()).expect("name")));
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC", "-I"])
        .arg(workspace().join("crates/offtrace-capi/include"))
        .arg(src)
        .arg("-o")
        .arg(&so)
        .arg("-lpthread")
        .output()
        .expect("run cc");
    assert!(out.status.success(), "cc {} failed:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    so
}

/// Runs W4 under the agent with `tool` loaded; returns (stdout + stderr, trace path).
fn run_w4(venv: &Path, tool: &Path, dir: &Path) -> (String, PathBuf) {
    run_w4_with(venv, tool, dir, true, "normal")
}

/// [`run_w4`] with or without UR call tracing (`UR_ENABLE_LAYERS`) and a detail level.
fn run_w4_with(venv: &Path, tool: &Path, dir: &Path, ur_calls: bool, detail: &str) -> (String, PathBuf) {
    let trace = dir.join("w4.offtrace");
    let mut cmd = Command::new(venv.join("bin/python"));
    if !ur_calls {
        cmd.env_remove("UR_ENABLE_LAYERS");
    } else {
        cmd.env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING");
    }
    let out = cmd
        .arg(workload("w4_usm_multiqueue.py"))
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("XPTI_SUBSCRIBERS", agent())
        .env("OFFTRACE_DETAIL", detail)
        .env("OFFTRACE_TOOLS", tool)
        .env("OFFTRACE_OUTPUT", &trace)
        .env("OFFTRACE_RAW", "1")
        .env("PYTHONUNBUFFERED", "1")
        .current_dir(dir)
        .output()
        .expect("run W4");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "W4 failed:\n{text}");
    // The tool prints from the runtime's threads too, so its output may land between the pieces
    // of the program's `print` (each piece is one write with PYTHONUNBUFFERED): look for them.
    assert!(["W4", "[1. 3. 5. 7.]", "[0. 3. 6. 9.]"].iter().all(|p| text.contains(p)), "W4 result missing:\n{text}");
    (text, trace)
}

/// `ur.call` begin notifications in the trace, per function name.
fn ur_begins(path: &Path) -> BTreeMap<String, u64> {
    let reader = TraceReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut strings = BTreeMap::new();
    let mut streams = BTreeMap::new();
    let mut out = BTreeMap::new();
    for r in reader {
        match r.unwrap_or_else(|e| panic!("read {}: {e}", path.display())) {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::Stream { id, name, .. } => {
                streams.insert(id, strings.get(&name).cloned().unwrap_or_default());
            }
            Record::Notification(n) if n.trace_type == TT_FUNCTION_BEGIN => {
                if !streams.get(&n.stream).is_some_and(|s| s.starts_with("ur.call")) {
                    continue;
                }
                if let UserData::FunctionWithArgs { name, .. } = n.user_data {
                    *out.entry(strings.get(&name).cloned().unwrap_or_default()).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    out
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let i = line.find(&format!("{key}=")).unwrap_or_else(|| panic!("no {key}= in {line:?}")) + key.len() + 1;
    line[i..].split_whitespace().next().unwrap_or("")
}

#[test]
fn print_calls_prints_w4_ur_calls_with_decoded_arguments() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("print-calls");
    let so = tool(&workspace().join("examples/c/print_calls.c"), &dir);
    let (out, trace) = run_w4(&venv, &so, &dir);
    let begins: u64 = ur_begins(&trace).values().sum();
    let blocks = out.lines().filter(|l| l.starts_with("[UR_API] ")).count() as u64;
    assert!(begins > 200, "too few UR calls in the trace: {begins}");
    assert_eq!(blocks, begins, "one printed UR call per ur.call begin in the trace");
    // A memcpy block: header, then one line per argument with type, name and decoded value.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("[UR_API] urEnqueueUSMMemcpy -> 0 "))
        .unwrap_or_else(|| panic!("no urEnqueueUSMMemcpy:\n{out}"));
    let args = &lines[at + 1..at + 9];
    let want = [
        ("hQueue", "0x"),
        ("blocking", ""),
        ("pDst", "0x"),
        ("pSrc", "0x"),
        ("size", "65536"),
        ("numEventsInWaitList", ""),
        ("phEventWaitList", ""),
        ("phEvent", "0x"),
    ];
    for (i, (line, (name, value))) in args.iter().zip(want).enumerate() {
        let (lhs, rhs) = line.split_once(" = ").unwrap_or_else(|| panic!("argument line {line:?}"));
        assert!(lhs.trim_start().starts_with(&format!("{i}:")) && lhs.trim_end().ends_with(name), "{line:?}");
        assert!(rhs.starts_with(value), "{line:?}");
    }
    assert!(matches!(args[1].rsplit(" = ").next(), Some("true" | "false")), "blocking is a bool: {:?}", args[1]);
    // Kernel dispatches, with the kernel's own name.
    assert_eq!(out.matches("[KERNEL_DISPATCH] axpy").count(), 2, "{out}");
}

#[test]
fn w4_kernel_dispatches_list_their_usm_allocations() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("check");
    let so = tool(&workspace().join("crates/offtrace-agent/tests/c/services_check.c"), &dir);
    let (out, trace) = run_w4(&venv, &so, &dir);
    let begins = ur_begins(&trace);
    let kinds: BTreeMap<&str, (u64, u64, u64, u64, u64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("kind "))
        .map(|l| {
            let n = |k: &str| field(l, k).parse::<u64>().expect("count");
            (l.split_whitespace().next().unwrap_or(""), (n("enter"), n("exit"), n("instant"), n("load"), n("unload")))
        })
        .collect();
    let k = |name: &str| *kinds.get(name).unwrap_or_else(|| panic!("no kind {name}:\n{out}"));
    // Pairs: every enter has its exit, LIFO on its thread, same correlation id.
    let summary = out.lines().find(|l| l.starts_with("unmatched_exit=")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(summary, "unmatched_exit=0 open_at_end=0 foreign_correlation=0", "{out}");
    let ur_total: u64 = begins.values().sum();
    assert_eq!(k("UR_API").0, ur_total, "UR_API enters = ur.call begins in the trace");
    assert_eq!(k("UR_API").1, ur_total, "UR_API exits = ur.call begins in the trace");
    assert!(k("TASK_GRAPH").0 > 0 && k("TASK_GRAPH").0 == k("TASK_GRAPH").1, "{:?}", k("TASK_GRAPH"));
    assert!(k("SYNC").0 > 0 && k("SYNC").0 == k("SYNC").1, "{:?}", k("SYNC"));
    assert_eq!(k("KERNEL_DISPATCH").2, begins["urEnqueueKernelLaunchWithArgsExp"]);
    assert_eq!(k("MEMORY_COPY").2, begins["urEnqueueUSMMemcpy"]);
    assert_eq!(k("MEMORY_FILL").2, begins["urEnqueueUSMFill"]);
    let allocs = ["urUSMDeviceAlloc", "urUSMHostAlloc", "urUSMSharedAlloc"]
        .iter()
        .map(|f| begins.get(*f).copied().unwrap_or(0))
        .sum::<u64>();
    assert_eq!(k("MEMORY_ALLOC").2, allocs + begins.get("urUSMFree").copied().unwrap_or(0), "alloc + free records");
    assert!(k("QUEUE").2 >= 4, "queue create/destroy: {:?}", k("QUEUE"));
    assert!(k("CODE_OBJECT").3 >= 2, "program + kernel loads: {:?}", k("CODE_OBJECT"));
    // Unloads only at the last release of an object whose load was reported.
    assert!(k("CODE_OBJECT").4 <= k("CODE_OBJECT").3, "unloads <= loads: {:?}", k("CODE_OBJECT"));
    // One path: the recorder is a client of the same `XPTI` records the tool sees, so the
    // tool's raw notifications are exactly the trace's.
    let notifications =
        TraceReader::open(&trace).expect("open trace").filter(|r| matches!(r, Ok(Record::Notification(_)))).count()
            as u64;
    assert_eq!(k("XPTI").2, notifications, "XPTI records seen by the tool = notifications in the trace");
    // And the recorder wrote each dispatch as typed device activity with its allocation
    // properties, linked to the UR call that launched it (same correlation id, decided in-process).
    let records: Vec<Record> = TraceReader::open(&trace).expect("open trace").filter_map(Result::ok).collect();
    let strings: std::collections::HashMap<offtrace_format::StrId, String> = records
        .iter()
        .filter_map(|r| if let Record::String { id, text } = r { Some((*id, text.clone())) } else { None })
        .collect();
    let op_names: std::collections::HashMap<(u32, u32), String> = records
        .iter()
        .filter_map(|r| {
            if let Record::OperationDef(d) = r { Some(((d.kind, d.op), strings[&d.name].clone())) } else { None }
        })
        .collect();
    let calls: std::collections::HashMap<u64, &offtrace_format::ApiCall> = records
        .iter()
        .filter_map(|r| if let Record::ApiCall(c) = r { Some((c.correlation, c)) } else { None })
        .collect();
    let dispatches: Vec<&offtrace_format::Activity> = records
        .iter()
        .filter_map(|r| match r {
            Record::Activity(a)
                if a.kind == offtrace_core::Kind::KernelDispatch as u32 && a.phase == offtrace_format::phase::NONE =>
            {
                Some(a)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        dispatches.len() as u64,
        begins["urEnqueueKernelLaunchWithArgsExp"],
        "one KERNEL_DISPATCH record per launch"
    );
    for d in &dispatches {
        let call = calls.get(&d.correlation).unwrap_or_else(|| panic!("no UR call for {d:?}"));
        assert_eq!(op_names[&(call.kind, call.op)], "urEnqueueKernelLaunchWithArgsExp", "{d:?}");
        assert_eq!(d.queue, call.args.as_slice()[0], "the dispatch's queue is the call's hQueue: {d:?}");
        assert_ne!(d.queue, 0);
        let mut args: Vec<(i32, u64)> = d.allocations.iter().map(|a| (a.arg_index, a.size)).collect();
        args.sort_unstable();
        assert_eq!(args, [(0, 65536), (1, 65536)], "axpy's y and x: {d:?}");
        assert!(d.allocations.iter().all(|a| a.memory_type == offtrace_format::MemoryType::Device), "{d:?}");
    }

    // Allocations the tool saw reported (MEMORY_ALLOC, inside the UR alloc call).
    let mut device_allocs = Vec::new();
    for l in out.lines().filter(|l| l.starts_with("alloc ptr=")) {
        let inside: u32 = field(l, "inside").parse().expect("inside");
        let ty: u32 = field(l, "type").parse().expect("type");
        // urUSMHostAlloc 107 → HOST 1, urUSMDeviceAlloc 108 → DEVICE 2, urUSMSharedAlloc 109 → SHARED 3.
        assert_eq!(inside - 106, ty, "type matches the UR allocation function: {l}");
        if ty == 2 {
            device_allocs.push((field(l, "ptr").to_owned(), field(l, "size").parse::<u64>().expect("size")));
        }
    }
    // The two axpy dispatches: arguments (y, x, a); y and x are dpnp arrays of 16384 float32
    // on the queue's device: urUSMDeviceAlloc of 65536 bytes each.
    let lines: Vec<&str> = out.lines().collect();
    let dispatches: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.starts_with("dispatch ")).map(|(i, _)| i).collect();
    assert_eq!(dispatches.len(), 2, "{out}");
    let mut bases = Vec::new();
    for &i in &dispatches {
        let d = lines[i];
        assert_eq!(field(d, "name"), "axpy", "{d}");
        assert_eq!(field(d, "corr"), field(d, "ur_corr"), "dispatch carries its UR launch's correlation id: {d}");
        assert_eq!(field(d, "args"), "3", "{d}");
        assert_eq!(field(d, "allocs"), "2", "{d}");
        for (arg, l) in lines[i + 1..i + 3].iter().enumerate() {
            assert_eq!(field(l, "arg"), arg.to_string(), "{l}");
            assert_eq!(field(l, "size"), "65536", "{l}");
            assert_eq!(field(l, "type"), "2", "device: {l}");
            let base = field(l, "base").to_owned();
            assert!(
                device_allocs.iter().any(|(p, s)| *p == base && *s == 65536),
                "{base} was not a urUSMDeviceAlloc of 65536: {out}"
            );
            bases.push(base);
        }
    }
    bases.sort();
    bases.dedup();
    assert_eq!(bases.len(), 4, "four distinct arrays (y, x on q1; y2, x2 on q2): {bases:?}");
    eprintln!(
        "{}",
        lines
            .iter()
            .filter(|l| l.starts_with("dispatch") || l.starts_with("  alloc"))
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn discard_buffer_reports_every_ur_call_as_delivered_or_dropped() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("discard");
    let so = tool(&workspace().join("examples/c/discard_buffer.c"), &dir);
    let (out, trace) = run_w4(&venv, &so, &dir);
    let begins = ur_begins(&trace);
    let line = out.lines().find(|l| l.starts_with("discard_buffer: ")).unwrap_or_else(|| panic!("no report:\n{out}"));
    let n = |k: &str| field(line, k).parse::<u64>().expect("count");
    assert_eq!(n("delivered") + n("dropped"), begins.values().sum::<u64>(), "{line}");
    assert_eq!(n("dropped"), n("dropped_total"), "{line}");
    if n("dropped") == 0 {
        // Every record was delivered: the per-function counts are the trace's.
        for (name, count) in &begins {
            let row = out.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()));
            let got = row.and_then(|r| r.split_whitespace().nth(1)).and_then(|c| c.parse::<u64>().ok());
            assert_eq!(got, Some(*count), "{name}:\n{out}");
        }
    }
}

#[test]
fn without_ur_calls_verbose_sycl_metadata_gives_dispatches_and_allocations() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("no-ur");
    let so = tool(&workspace().join("crates/offtrace-agent/tests/c/services_check.c"), &dir);
    let (out, trace) = run_w4_with(&venv, &so, &dir, false, "verbose");
    assert!(ur_begins(&trace).is_empty(), "no UR calls without UR_LAYER_TRACING");
    assert!(out.contains("kind UR_API enter=0 exit=0"), "{out}");
    assert!(out.contains("unmatched_exit=0 open_at_end=0 foreign_correlation=0"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let dispatches: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.starts_with("dispatch ")).map(|(i, _)| i).collect();
    // The SYCL task's kernel_name for dpctl's raw submit, and the VERBOSE arg<N> values.
    assert_eq!(dispatches.len(), 2, "{out}");
    for &i in &dispatches {
        let d = lines[i];
        assert_eq!(field(d, "name"), "DPCTLQueue_SubmitRange", "{d}");
        assert_eq!((field(d, "args"), field(d, "allocs")), ("3", "2"), "{d}");
        for (arg, l) in lines[i + 1..i + 3].iter().enumerate() {
            assert_eq!(field(l, "arg"), arg.to_string(), "{l}");
            assert_eq!(field(l, "size"), "65536", "{l}");
            // sycl.experimental.mem_alloc does not tell device from shared memory.
            assert_eq!(field(l, "type"), "0", "UNKNOWN: {l}");
        }
    }
}

/// `crates/offtrace-capi/tests/c/lifecycle_tool.c` (written against the header only) on
/// `examples/sycl/threads_queues.py` (4 threads x 3 queues): the tool finalizes itself from
/// inside a UR exit callback after 300 exits while the workers run; its deferred finalize
/// flushes, destroys a buffer and destroys its context while another thread holds a marker
/// range (bounded); every exit callback has its buffer record with the same external id as the
/// enter; worker threads' records carry the process-wide id or the one pushed in an enter
/// callback; kernel names are readable and whole (`scale_add`, `square`), unused dimensions 1;
/// push/pop inside exit() return success; no panic text on the program's stderr.
#[test]
fn lifecycle_tool_on_threads_queues() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("lifecycle");
    let so = tool(&workspace().join("crates/offtrace-capi/tests/c/lifecycle_tool.c"), &dir);
    let out = Command::new(venv.join("bin/python"))
        .arg(workspace().join("examples/sycl/threads_queues.py"))
        .args(["4", "6"])
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("XPTI_SUBSCRIBERS", agent())
        .env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING")
        .env("OFFTRACE_TOOLS", &so)
        .env("LIFECYCLE_FINALIZE_AFTER", "300")
        // urEnqueueKernelLaunchWithArgsExp pushes, urQueueFinish pops (dpctl creates its
        // kernels from native handles, so there is no urKernelCreate here).
        .env("LIFECYCLE_PUSH_OP", "295")
        .env("RUST_BACKTRACE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .current_dir(&dir)
        .output()
        .expect("run threads_queues");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("threads_queues: ok"), "{stdout}\n{stderr}");
    for bad in ["panicked", "Thread Local", "stack backtrace", "offtrace:"] {
        assert!(!stderr.contains(bad), "{bad:?} on the program's stderr:\n{stderr}");
    }
    let value = |key: &str| -> String {
        let k = format!(" {key}=");
        let line =
            stdout.lines().find(|l| format!(" {l}").contains(&k)).unwrap_or_else(|| panic!("no {key}:\n{stdout}"));
        let l = format!(" {line}");
        let at = l.find(&k).expect("key") + k.len();
        l[at..].split(' ').next().expect("value").to_string()
    };
    let num = |key: &str| -> i64 { value(key).parse().expect("number") };
    for (k, v) in [
        ("huge_buffer", 7),
        ("configure_started", 9),
        ("configure_buffer_started", 9),
        ("destroy_buffer_started", 9),
        ("flush", 0),
        ("destroy_buffer", 0),
        ("flush_destroyed", 6),
        ("destroy_context", 0),
        ("destroy_bounded", 1),
        ("mismatches", 0),
        ("deliveries_lt_records", 1),
        ("mangled_names", 0),
        ("geometry_bad", 0),
    ] {
        assert_eq!(num(k), v, "{k}:\n{stdout}");
    }
    let (exits, buffered) = (num("exits"), num("buffered"));
    assert!(exits >= 300, "{stdout}");
    assert_eq!(exits, buffered, "every delivered exit has its buffer record:\n{stdout}");
    assert!(num("dispatches") > 0, "{stdout}");
    // The names the program's OpenCL C source gives its kernels, whole, on every dispatch.
    let mut names: Vec<String> = value("names").split(',').map(str::to_owned).collect();
    names.sort();
    assert_eq!(names, ["scale_add", "square"], "{stdout}");
    // dpctl makes its kernels from native handles: their CODE_OBJECT loads carry no name (the
    // name is learnt later, at urKernelGetInfo), so dispatch names match no load's name here.
    assert_eq!(num("unknown_names") == 0, num("unnamed_kernel_loads") == 0, "{stdout}");
    let (p, q) = (num("ext_process"), num("ext_pushed"));
    assert!(p > 0 && q > 0 && p + q == exits, "{stdout}");
    assert_eq!(value("push"), "0,0", "{stdout}");
    assert_eq!(value("pop"), "0,0,12", "{stdout}");
    eprintln!("{}", stdout.lines().filter(|l| l.contains('=')).collect::<Vec<_>>().join("\n"));
}

/// `tests/c/kinds_agree.c` (written against the header only) subscribes every kind twice in one
/// context, as callbacks and into a lossless buffer, on `examples/sycl/threads_queues.py` (4
/// worker threads x 3 queues): every callback record (a pair's exit; instants; activity) has
/// exactly one typed buffer record with the same kind, operation, correlation id, phase and
/// content (a digest of the fields both carry: arguments, kernel name and geometry, copy
/// ends and sizes, names, ...), and no buffer record is without its callback, kind by kind; the
/// buffer callback never runs on a thread that emitted records (the delivery thread) and
/// deliveries are batched.
#[test]
fn callbacks_and_buffer_records_agree_kind_by_kind_on_threads_queues() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("kinds_agree");
    let so = tool(&workspace().join("crates/offtrace-agent/tests/c/kinds_agree.c"), &dir);
    let out = Command::new(venv.join("bin/python"))
        .arg(workspace().join("examples/sycl/threads_queues.py"))
        .args(["4", "6"])
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("XPTI_SUBSCRIBERS", agent())
        .env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING")
        .env("OFFTRACE_TOOLS", &so)
        // The raw layer (XPTI kind) is opt-in: on, so that it is compared too.
        .env("OFFTRACE_RAW", "1")
        .env("PYTHONUNBUFFERED", "1")
        .current_dir(&dir)
        .output()
        .expect("run threads_queues");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("threads_queues: ok"), "{stdout}\n{stderr}");
    let summary = stdout.lines().find(|l| l.contains("kinds_agree: total=")).unwrap_or_else(|| panic!("{stdout}"));
    let value = |line: &str, key: &str| -> u64 { field(line, key).parse().unwrap_or_else(|_| panic!("{key}: {line}")) };
    assert_eq!(value(summary, "mismatches"), 0, "{stdout}");
    assert_eq!(value(summary, "delivery_on_app_thread"), 0, "{stdout}");
    let total = value(summary, "total");
    assert!(value(summary, "deliveries") * 10 < total, "batched deliveries: {summary}");
    assert!(value(summary, "named_dispatches") > 0, "{summary}");
    let kinds: BTreeMap<u64, (u64, u64)> = stdout
        .lines()
        .filter(|l| l.starts_with("kinds_agree: kind="))
        .map(|l| (value(l, "kind"), (value(l, "callbacks"), value(l, "buffered"))))
        .collect();
    // UR_API, QUEUE, KERNEL_DISPATCH, MEMORY_COPY, MEMORY_FILL, MEMORY_ALLOC, TASK_GRAPH, SYNC,
    // CODE_OBJECT, XPTI, DEVICE: every kind this program makes the runtime report.
    for kind in [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 15] {
        let (callbacks, buffered) = kinds.get(&kind).copied().unwrap_or_default();
        assert!(callbacks > 0 && buffered > 0, "kind {kind}: {callbacks} callbacks, {buffered} records\n{stdout}");
    }
    eprintln!("{}", stdout.lines().filter(|l| l.starts_with("kinds_agree")).collect::<Vec<_>>().join("\n"));
}

/// `kinds_agree.c` on W4, which reads its kernel's profiling info: callbacks and typed buffer
/// records still agree kind by kind, and the completion's record carries the device times
/// (phase COMPLETE, its start timestamp = `device_start`).
#[test]
fn w4_completion_buffer_records_carry_device_times() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("kinds_agree_w4");
    let so = tool(&workspace().join("crates/offtrace-agent/tests/c/kinds_agree.c"), &dir);
    let (out, _) = run_w4(&venv, &so, &dir);
    let summary = out.lines().find(|l| l.contains("kinds_agree: total=")).unwrap_or_else(|| panic!("{out}"));
    let value = |key: &str| -> u64 { field(summary, key).parse().unwrap_or_else(|_| panic!("{key}: {summary}")) };
    assert_eq!(value("mismatches"), 0, "{out}");
    assert!(value("timed") >= 1, "a kernel completion with device times: {summary}");
    eprintln!("{summary}");
}
