//! The agent against Intel's real SYCL runtime (2026.2, OpenCL CPU device, from the project venv).
//!
//! Needs the venv (`scripts/setup-sycl.sh`): `OFFTRACE_SYCL_VENV`, default `<workspace>/.venv`.
//! Without it these tests fail with a message, unless `OFFTRACE_SKIP_SYCL=1`.
//!
//! - `w4_counts_match_reference_and_xpti_dump`: records W4 with the agent and Intel's dispatcher,
//!   reads the trace back, checks per-(stream, trace type) counts against the ranges of
//!   `W4_RANGES` and — with the reference full-dump subscriber (`tools/xpti-dump`) loaded in the
//!   same process, so both see the same notifications — checks they are equal to the dump's counts.
//! - `sigkill_leaves_a_readable_trace`: SIGKILLs a traced process mid-run; the reader returns
//!   the complete chunks, then a truncation error.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use offtrace_format::{Record, TraceReader, UserData};

use common::{agent, venv, workload, xpti_dump};

fn tmpdir(name: &str) -> common::TestDir {
    common::tmpdir("agent", name)
}

fn traced(venv: &Path, subscribers: &str, out: &Path, script: &Path) -> Command {
    let mut c = Command::new(venv.join("bin/python"));
    c.arg(script)
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("XPTI_SUBSCRIBERS", subscribers)
        .env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING")
        .env("OFFTRACE_OUTPUT", out)
        .env("OFFTRACE_RAW", "1");
    c
}

type Counts = BTreeMap<(String, u16), u64>;

struct Trace {
    records: Vec<Record>,
    error: Option<offtrace_format::ReadError>,
}

fn read(path: &Path) -> Trace {
    let reader = TraceReader::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut records = Vec::new();
    let mut error = None;
    for r in reader {
        match r {
            Ok(r) => records.push(r),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    Trace { records, error }
}

fn counts(records: &[Record]) -> Counts {
    let mut streams = BTreeMap::new();
    let mut strings = BTreeMap::new();
    let mut c = Counts::new();
    for r in records {
        match r {
            Record::String { id, text } => {
                strings.insert(*id, text.clone());
            }
            Record::Stream { id, name, .. } => {
                streams.insert(*id, strings.get(name).cloned().expect("stream name defined before the stream"));
            }
            Record::Notification(n) => {
                let s = streams.get(&n.stream).cloned().expect("stream defined before its notifications");
                *c.entry((s, n.trace_type)).or_default() += 1;
            }
            _ => {}
        }
    }
    c
}

/// Per-(stream, tt) counts of an xpti-dump JSONL file.
fn dump_counts(path: &Path) -> Counts {
    let text = std::fs::read_to_string(path).expect("dump file");
    let mut c = Counts::new();
    for l in text.lines().filter(|l| l.starts_with("{\"k\":\"cb\"")) {
        let field = |k: &str| {
            let i = l.find(&format!("\"{k}\":")).expect("field") + k.len() + 3;
            l[i..].split([',', '}']).next().expect("value").trim_matches('"').to_owned()
        };
        *c.entry((field("stream"), field("tt").parse().expect("tt"))).or_default() += 1;
    }
    c
}

/// docs/reference/sycl-runtime.md §4, W4 column, with margins for run-to-run variation of waits and edges.
const W4_RANGES: &[(&str, u16, u64, u64)] = &[
    ("sycl", 2, 1, 1),
    ("sycl", 4, 15, 24),
    ("sycl", 6, 2, 5),
    ("sycl", 10, 13, 20),
    ("sycl", 11, 13, 20),
    ("sycl", 16, 4, 8),
    ("sycl", 22, 20, 36),
    ("sycl", 23, 20, 36),
    ("sycl", 42, 4, 7),
    ("sycl", 43, 2, 5),
    ("sycl.experimental.mem_alloc", 4, 18, 30),
    ("sycl.experimental.mem_alloc", 32, 10, 16),
    ("sycl.experimental.mem_alloc", 33, 10, 16),
    ("sycl.experimental.mem_alloc", 34, 8, 14),
    ("sycl.experimental.mem_alloc", 35, 8, 14),
    ("ur.call", 28, 220, 340),
    ("ur.call", 29, 220, 340),
];

#[test]
fn w4_counts_match_reference_and_xpti_dump() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("w4");
    let out = dir.join("w4.offtrace");
    let script = workload("w4_usm_multiqueue.py");
    let subs = format!("{},{}", xpti_dump(&venv).display(), agent().display());
    let o = traced(&venv, &subs, &out, &script)
        .env("DUMP_FILE", dir.join("w4.jsonl"))
        .env("DUMP_SKIP", "sycl.debug,ur.call.debug")
        .env("DUMP_DETAIL", "2")
        .output()
        .expect("run python");
    assert!(o.status.success(), "W4 failed: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
    let t = read(&out);
    assert!(t.error.is_none(), "trace error: {:?}", t.error);
    assert!(matches!(t.records.last(), Some(Record::End { .. })), "trace does not end with End");
    let c = counts(&t.records);
    for (s, tt, lo, hi) in W4_RANGES {
        let n = c.get(&((*s).to_owned(), *tt)).copied().unwrap_or(0);
        assert!((*lo..=*hi).contains(&n), "{s} type {tt}: {n} not in {lo}..={hi}; all counts: {c:?}");
    }
    let drops: u64 = t.records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum();
    assert_eq!(drops, 0);
    // Every UR exit carries a result, decoded arguments, and the enqueue calls' *phEvent.
    // The argument values at exit equal those at entry (the agent records them at entry only
    // and the writer restores them).
    let mut ur_ends = 0;
    let mut signals = Vec::new();
    let mut out_events = Vec::new();
    let mut begins = std::collections::HashMap::new();
    for r in &t.records {
        if let Record::Notification(n) = r {
            match n.user_data {
                UserData::FunctionWithArgs { args, .. } if n.trace_type == 28 => {
                    begins.insert((n.tid, n.instance), args);
                }
                UserData::FunctionWithArgs { result, args, outs, .. } if n.trace_type == 29 => {
                    ur_ends += 1;
                    assert!(result.is_some());
                    assert!(args.len > 0 || outs.len == 0);
                    assert_eq!(begins.get(&(n.tid, n.instance)), Some(&args), "UR exit {n:?}");
                    out_events.extend(outs.as_slice().iter().map(|&(_, v)| v));
                }
                UserData::Signal { ur_event } => signals.push(ur_event),
                _ => {}
            }
        }
    }
    assert!(ur_ends > 0);
    for s in &signals {
        assert!(out_events.contains(s), "signal's ur_event {s:#x} not among UR output values");
    }
    let dc = dump_counts(&dir.join("w4.jsonl"));
    assert_eq!(c, dc, "agent counts differ from xpti-dump's in the same process");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigkill_leaves_a_readable_trace() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("kill");
    let out = dir.join("killed.offtrace");
    let script = dir.join("loop.py");
    std::fs::write(
        &script,
        "import dpctl, dpctl.memory as m, time\n\
         q = dpctl.SyclQueue()\n\
         print('ready', flush=True)\n\
         while True:\n\
         \x20   a = m.MemoryUSMDevice(1024, queue=q)\n\
         \x20   a.copy_from_host(bytearray(1024))\n\
         \x20   time.sleep(0.001)\n",
    )
    .expect("script");
    let mut child = traced(&venv, &agent().display().to_string(), &out, &script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("ready line");
    assert_eq!(line.trim(), "ready");
    // Kill once the chunks on disk hold more than 20 UR calls: the condition is read from the
    // trace itself (the writer closes a chunk every 100 ms), not guessed from a delay.
    let ur_calls =
        |t: &Trace| -> u64 { counts(&t.records).iter().filter(|((s, _), _)| s == "ur.call").map(|(_, n)| n).sum() };
    let t0 = Instant::now();
    let before = loop {
        if out.exists() {
            let t = read(&out);
            if ur_calls(&t) > 20 {
                break ur_calls(&t);
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the traced program wrote no chunk with UR calls");
        assert!(child.try_wait().expect("try_wait").is_none(), "the traced program exited by itself");
        std::thread::sleep(Duration::from_millis(10)); // poll interval: the condition above decides
    };
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let t = read(&out);
    let e = t.error.as_ref().expect("a killed trace has no end marker: the reader must report truncation");
    assert!(e.is_truncated(), "expected a truncation error, got {e}");
    let ur = ur_calls(&t);
    assert!(ur >= before, "the kill lost complete chunks: {ur} UR calls read after it, {before} before");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `OFFTRACE_DEBUG_STREAMS=1` subscribes the debug streams (the runtime then sends there
/// instead of `sycl`/`ur.call`); `OFFTRACE_UR_CALLS=0` leaves `ur.call` unsubscribed.
#[test]
fn stream_selection_knobs() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("knobs");
    let script = workload("w4_usm_multiqueue.py");
    let per_stream = |env: &[(&str, &str)], name: &str| {
        let out = dir.join(name);
        let mut cmd = traced(&venv, &agent().display().to_string(), &out, &script);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = cmd.output().expect("run python");
        assert!(o.status.success(), "W4 failed: {}", String::from_utf8_lossy(&o.stderr));
        let t = read(&out);
        assert!(t.error.is_none(), "{:?}", t.error);
        let mut m = BTreeMap::<String, u64>::new();
        for ((s, _), n) in counts(&t.records) {
            *m.entry(s).or_default() += n;
        }
        m
    };
    let debug = per_stream(&[("OFFTRACE_DEBUG_STREAMS", "1")], "debug.offtrace");
    assert!(debug.get("sycl.debug").copied().unwrap_or(0) > 50, "{debug:?}");
    assert!(debug.get("ur.call.debug").copied().unwrap_or(0) > 400, "{debug:?}");
    assert!(!debug.contains_key("sycl") && !debug.contains_key("ur.call"), "{debug:?}");
    let no_ur = per_stream(&[("OFFTRACE_UR_CALLS", "0")], "nour.offtrace");
    assert!(no_ur.get("sycl").copied().unwrap_or(0) > 50, "{no_ur:?}");
    assert!(!no_ur.keys().any(|s| s.starts_with("ur.")), "{no_ur:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child process that inherits `OFFTRACE_OUTPUT` and loads the agent too writes
/// `<path>.<pid>` and leaves the parent's trace intact.
#[test]
fn child_process_does_not_clobber_the_trace() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("child");
    let out = dir.join("parent.offtrace");
    let script = dir.join("parent.py");
    std::fs::write(
        &script,
        "import subprocess, sys, dpctl\n\
         q = dpctl.SyclQueue()\n\
         r = subprocess.run([sys.executable, '-c', 'import dpctl; dpctl.SyclQueue(); print(\"child\")'])\n\
         q2 = dpctl.SyclQueue()\n\
         sys.exit(r.returncode)\n",
    )
    .expect("script");
    let o = traced(&venv, &agent().display().to_string(), &out, &script).output().expect("run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let parent = read(&out);
    assert!(parent.error.is_none(), "{:?}", parent.error);
    assert!(matches!(parent.records.last(), Some(Record::End { .. })));
    let pid = parent.records.iter().find_map(|r| match r {
        Record::Info { key, value } if key == "pid" => Some(value.clone()),
        _ => None,
    });
    let children: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("parent.offtrace."))
        .collect();
    assert_eq!(children.len(), 1, "{children:?}");
    assert_ne!(Some(children[0].trim_start_matches("parent.offtrace.").to_owned()), pid);
    let child = read(&dir.join(&children[0]));
    assert!(child.error.is_none() && !counts(&child.records).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a ring too small for bursts, any lost records are counted: notifications + `Drops` cover
/// what the full-dump subscriber saw in the same process, and `End` carries the drop total.
#[test]
fn tiny_ring_counts_every_drop() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("tiny");
    let out = dir.join("tiny.offtrace");
    let script = workload("w4_usm_multiqueue.py");
    let dump = xpti_dump(&venv);
    let o = traced(&venv, &format!("{},{}", dump.display(), agent().display()), &out, &script)
        .env("OFFTRACE_BUFFER_RECORDS", "2")
        .env("DUMP_FILE", dir.join("tiny.jsonl"))
        .env("DUMP_SKIP", "sycl.debug,ur.call.debug")
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = read(&out);
    assert!(t.error.is_none(), "{:?}", t.error);
    let notifications: u64 = counts(&t.records).values().sum();
    let drops: u64 = t.records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum();
    let seen: u64 = dump_counts(&dir.join("tiny.jsonl")).values().sum();
    // Whether a 64-word ring overflows depends on how fast the writer drains it (most runs drop,
    // a quiet machine may not): the accounting below holds either way, as in offtrace-recorder's
    // `default_mode_counts_every_drop`.
    assert!(notifications > 0, "a tiny ring still records");
    // `Drops` count every lost ring entry, of the raw layer and of the typed records alike (one
    // counter per thread): the raw notifications recorded plus every drop cover what the dump
    // saw, and none is invented.
    assert!(notifications <= seen, "{notifications} recorded of {seen} seen");
    assert!(notifications + drops >= seen, "{notifications} recorded + {drops} dropped < {seen} seen");
    assert!(matches!(t.records.last(), Some(Record::End { drops: d, .. }) if *d == drops));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What one notification says, in the terms both the agent's trace and xpti-dump's JSON can
/// express: compared per thread, in callback order.
#[derive(Debug, PartialEq, Default)]
struct Obs {
    stream: String,
    tt: u16,
    instance: u64,
    event_uid: Option<u64>,
    parent_uid: Option<u64>,
    payload: Option<String>,
    /// Metadata keys, with the value of unsigned-integer items.
    md: BTreeMap<String, Option<u64>>,
    stash: Option<(String, u64)>,
    ur_name: Option<String>,
    ur_result: Option<i64>,
    ud_str: Option<String>,
    signal: Option<u64>,
    /// `xptiGetUniversalId()` in the callback, when non-zero.
    universal: Option<u64>,
}

fn hex(v: &serde_json::Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.trim_start_matches("0x"), 16).ok()
}

fn dump_observations(path: &Path) -> BTreeMap<u64, Vec<Obs>> {
    let text = std::fs::read_to_string(path).expect("dump");
    let mut by_tid: BTreeMap<u64, Vec<Obs>> = BTreeMap::new();
    for l in text.lines().filter(|l| l.starts_with("{\"k\":\"cb\"")) {
        let r: serde_json::Value = serde_json::from_str(l).expect("json line");
        let ev = &r["event"];
        let mut o = Obs {
            stream: r["stream"].as_str().unwrap_or_default().to_owned(),
            tt: r["tt"].as_u64().unwrap_or(0) as u16,
            instance: r["instance"].as_u64().unwrap_or(0),
            event_uid: hex(&ev["uid"]),
            parent_uid: hex(&r["parent"]["uid"]),
            payload: ev["payload"]["name"].as_str().map(str::to_owned),
            stash: r["stash"]["key"].as_str().map(|k| (k.to_owned(), r["stash"]["value"].as_u64().unwrap_or(0))),
            universal: hex(&r["universal_id"]),
            ..Obs::default()
        };
        // The agent records the stashed tuple on the SYCL streams only: on `ur.call` it is the
        // sticky leftover of the thread's last SYCL operation (Intel's dispatcher never
        // unstashes; docs/reference/sycl-runtime.md §7). Everything else is compared on every stream.
        if o.stream.starts_with("ur.call") {
            o.stash = None;
        }
        if let Some(md) = ev["md"].as_object() {
            for (k, v) in md {
                o.md.insert(k.clone(), if v["type"] == 3 { v["v"].as_u64() } else { None });
            }
        }
        if let Some(f) = r.get("fwa") {
            o.ur_name = f["function_name"].as_str().map(str::to_owned);
            o.ur_result = if o.tt == 29 { f["ret_value"].as_i64() } else { None };
        }
        o.ud_str = r["ud_str"].as_str().map(str::to_owned);
        if o.tt == 16 && o.stream == "sycl" {
            o.signal = hex(&r["ud"]);
        }
        by_tid.entry(r["tid"].as_u64().unwrap_or(0)).or_default().push(o);
    }
    by_tid
}

fn trace_observations(records: &[Record]) -> BTreeMap<u64, Vec<Obs>> {
    use offtrace_format::{ObjectId, PayloadId, StrId, ValueType};
    let mut strings: BTreeMap<StrId, String> = BTreeMap::new();
    let mut streams = BTreeMap::new();
    let mut payloads: BTreeMap<PayloadId, StrId> = BTreeMap::new();
    let mut objects: BTreeMap<ObjectId, (ValueType, Vec<u8>)> = BTreeMap::new();
    let mut sets = BTreeMap::new();
    let mut by_tid: BTreeMap<u64, Vec<Obs>> = BTreeMap::new();
    let s =
        |strings: &BTreeMap<StrId, String>, id: StrId| strings.get(&id).cloned().expect("string defined before use");
    for r in records {
        match r {
            Record::String { id, text } => {
                strings.insert(*id, text.clone());
            }
            Record::Stream { id, name, .. } => {
                streams.insert(*id, s(&strings, *name));
            }
            Record::Payload { id, name, .. } => {
                payloads.insert(*id, *name);
            }
            Record::Object { id, value_type, bytes } => {
                objects.insert(*id, (*value_type, bytes.clone()));
            }
            Record::MetadataSet { id, items } => {
                sets.insert(*id, items.clone());
            }
            Record::Notification(n) => {
                let mut o = Obs {
                    stream: streams.get(&n.stream).cloned().expect("stream defined"),
                    tt: n.trace_type,
                    instance: n.instance,
                    event_uid: n.event.map(|e| e.uid),
                    parent_uid: n.parent.map(|e| e.uid),
                    stash: n.stash.map(|(k, v)| (s(&strings, k), v)),
                    universal: (n.universal_id != 0).then_some(n.universal_id),
                    ..Obs::default()
                };
                if let Some(e) = n.event {
                    if e.payload.0 != 0 {
                        let name = payloads.get(&e.payload).copied().expect("payload defined before use");
                        o.payload = Some(s(&strings, name));
                    }
                    if e.metadata.0 != 0 {
                        for (k, v) in sets.get(&e.metadata).expect("set defined before use") {
                            let (t, b) = objects.get(v).expect("object defined before use");
                            let val = (*t == ValueType::UnsignedInteger && b.len() == 8)
                                .then(|| u64::from_le_bytes(b[..8].try_into().expect("8 bytes")));
                            o.md.insert(s(&strings, *k), val);
                        }
                    }
                }
                match n.user_data {
                    UserData::FunctionWithArgs { name, result, .. } => {
                        o.ur_name = Some(s(&strings, name));
                        o.ur_result = result.map(i64::from);
                    }
                    UserData::Str(id) => o.ud_str = Some(s(&strings, id)),
                    UserData::Signal { ur_event } => o.signal = Some(ur_event),
                    _ => {}
                }
                by_tid.entry(u64::from(n.tid)).or_default().push(o);
            }
            _ => {}
        }
    }
    by_tid
}

/// Every notification of `script`, decoded, equals what the full-dump subscriber saw in the same
/// process: same threads, same order, same payload names, metadata keys and integer values, stash
/// (SYCL streams), UR function names and results, user-data strings and signal handles.
fn decoded_fields_match_xpti_dump(script: &str, min_notifications: usize, min_with_metadata: usize) {
    let Some(venv) = venv() else { return };
    let dir = tmpdir(&format!("fields-{}", script.trim_end_matches(".py")));
    let dump = xpti_dump(&venv);
    let out = dir.join("t.offtrace");
    let o = traced(&venv, &format!("{},{}", dump.display(), agent().display()), &out, &workload(script))
        .env("DUMP_FILE", dir.join("dump.jsonl"))
        .env("DUMP_SKIP", "sycl.debug,ur.call.debug")
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = read(&out);
    assert!(t.error.is_none(), "{:?}", t.error);
    let ours = trace_observations(&t.records);
    let theirs = dump_observations(&dir.join("dump.jsonl"));
    let total: usize = theirs.values().map(Vec::len).sum();
    assert!(total > min_notifications, "only {total} notifications in the dump");
    let with_md = theirs.values().flatten().filter(|o| !o.md.is_empty()).count();
    assert!(with_md > min_with_metadata, "only {with_md} notifications with metadata");
    assert_eq!(ours.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>(), "threads differ");
    for (tid, want) in &theirs {
        let got = &ours[tid];
        assert_eq!(got.len(), want.len(), "thread {tid}: notification count");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g, w, "thread {tid}, notification {i}");
        }
    }
}

#[test]
fn w4_decoded_fields_match_xpti_dump() {
    decoded_fields_match_xpti_dump("w4_usm_multiqueue.py", 500, 50);
}

/// Four submitting threads, nine queues: per-thread caches and metadata of many similar
/// commands (the same keys, other values) on several threads at once.
#[test]
fn threads_queues_decoded_fields_match_xpti_dump() {
    decoded_fields_match_xpti_dump("threads_queues.py", 3000, 500);
}

/// A process that never calls `xptiTraceFinish` still gets a complete trace: the agent's ELF
/// destructor ends it at exit. Driven from Python `ctypes` against Intel's dispatcher, without
/// the SYCL runtime (so nothing finalises the stream).
#[test]
fn trace_ends_at_exit_without_finish() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("nofinish");
    let out = dir.join("nofinish.offtrace");
    let script = dir.join("nofinish.py");
    std::fs::write(
        &script,
        r#"import ctypes, os, sys
x = ctypes.CDLL(os.environ["XPTI_FRAMEWORK_DISPATCHER"], mode=ctypes.RTLD_GLOBAL)
a = ctypes.CDLL(sys.argv[1])
x.xptiForceSetTraceEnabled(True)
a.xptiTraceInit(0, 12, b"0.12", b"ur.call")
sid = x.xptiRegisterStream(b"ur.call")
class FWA(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("name", ctypes.c_char_p), ("args", ctypes.c_void_p),
                ("ret", ctypes.c_void_p), ("ud", ctypes.c_void_p)]
f = FWA(178, b"urAdapterGet", None, None, None)
x.xptiNotifySubscribers.argtypes = [ctypes.c_uint8, ctypes.c_uint16, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p]
for i in range(1, 101):
    x.xptiNotifySubscribers(sid, 28, None, None, i, ctypes.byref(f))
"#,
    )
    .expect("script");
    let o = Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(agent())
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("OFFTRACE_OUTPUT", &out)
        .env("OFFTRACE_RAW", "1")
        .env_remove("XPTI_SUBSCRIBERS")
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = read(&out);
    assert!(t.error.is_none(), "{:?}", t.error);
    assert!(matches!(t.records.last(), Some(Record::End { .. })), "no End record");
    let c = counts(&t.records);
    assert_eq!(c.get(&("ur.call".to_owned(), 28)), Some(&100), "{c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 4 threads × 20,000 notifications through Intel's dispatcher (Python `ctypes` releases the
/// GIL around foreign calls, so the threads notify concurrently): every notification that is
/// not counted as a drop decodes exactly once, in its thread's order.
#[test]
fn threads_record_every_notification_once_in_order() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("threads");
    let out = dir.join("threads.offtrace");
    let script = dir.join("threads.py");
    std::fs::write(
        &script,
        r#"import ctypes, os, sys, threading
x = ctypes.CDLL(os.environ["XPTI_FRAMEWORK_DISPATCHER"], mode=ctypes.RTLD_GLOBAL)
a = ctypes.CDLL(sys.argv[1])
x.xptiForceSetTraceEnabled(True)
a.xptiTraceInit(0, 12, b"0.12", b"ur.call")
sid = x.xptiRegisterStream(b"ur.call")
class FWA(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("name", ctypes.c_char_p), ("args", ctypes.c_void_p),
                ("ret", ctypes.c_void_p), ("ud", ctypes.c_void_p)]
notify = x.xptiNotifySubscribers
notify.argtypes = [ctypes.c_uint8, ctypes.c_uint16, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_uint64, ctypes.c_void_p]
def run(t):
    f = FWA(178, b"urAdapterGet", None, None, None)
    p = ctypes.byref(f)
    for i in range(20000):
        notify(sid, 28, None, None, (t << 32) | i, p)
ts = [threading.Thread(target=run, args=(t,)) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()
a.xptiTraceFinish(b"ur.call")
"#,
    )
    .expect("script");
    let o = Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(agent())
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("OFFTRACE_OUTPUT", &out)
        .env("OFFTRACE_RAW", "1")
        .env("OFFTRACE_BUFFER_RECORDS", "65536")
        .env_remove("XPTI_SUBSCRIBERS")
        .output()
        .expect("run python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = read(&out);
    assert!(t.error.is_none(), "{:?}", t.error);
    let mut last: BTreeMap<u64, Option<u64>> = BTreeMap::new();
    let mut per_thread: BTreeMap<u64, u64> = BTreeMap::new();
    let mut tids_of: BTreeMap<u64, u32> = BTreeMap::new();
    for r in &t.records {
        if let Record::Notification(n) = r {
            let (th, i) = (n.instance >> 32, n.instance & 0xffff_ffff);
            let prev = last.entry(th).or_default();
            assert!(prev.is_none_or(|p| i > p), "thread {th}: {i} after {prev:?}");
            *prev = Some(i);
            *per_thread.entry(th).or_default() += 1;
            assert_eq!(*tids_of.entry(th).or_insert(n.tid), n.tid, "one Python thread, one tid");
        }
    }
    let drops: u64 = t.records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum();
    assert_eq!(per_thread.len(), 4);
    assert_eq!(per_thread.values().sum::<u64>() + drops, 80_000, "{per_thread:?} + {drops} drops");
    assert!(matches!(t.records.last(), Some(Record::End { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `OFFTRACE_DETAIL` is what the agent answers to the detail-level query, and the runtime
/// attaches metadata accordingly (docs/reference/sycl-runtime.md §6).
#[test]
fn detail_level_controls_sycl_metadata() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("detail");
    let script = workload("w4_usm_multiqueue.py");
    let keys = |detail: &str| {
        let out = dir.join(format!("{detail}.offtrace"));
        let o = traced(&venv, &agent().display().to_string(), &out, &script)
            .env("OFFTRACE_DETAIL", detail)
            .output()
            .expect("run python");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = read(&out);
        assert!(t.error.is_none(), "{:?}", t.error);
        let info = t.records.iter().find_map(|r| match r {
            Record::Info { key, value } if key == "detail" => Some(value.clone()),
            _ => None,
        });
        assert_eq!(info.as_deref(), Some(detail));
        let obs = trace_observations(&t.records);
        obs.values()
            .flatten()
            .filter(|o| o.stream == "sycl")
            .flat_map(|o| o.md.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let basic = keys("basic");
    let verbose = keys("verbose");
    assert!(basic.contains("kernel_name") && !basic.contains("sycl_device_name"), "{basic:?}");
    assert!(verbose.contains("sycl_device_name") && verbose.contains("enqueue_kernel_data"), "{verbose:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
