//! Typed records decided in-process, on real SYCL programs (Intel's runtime through dpctl),
//! checked against the raw layer recorded in the same trace.
//!
//! `examples/sycl/threads_queues.py`: 4 threads, each with its own in-order and profiling queue
//! plus one queue shared by all, submitting fills, copies in every direction, kernels, barriers
//! and host tasks at the same time.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use offtrace_core::Kind;
use offtrace_format::{
    Activity, ApiCall, CopyDirection, MemoryRecord, MemoryType, Notification, Record, StrId, TraceReader, UserData,
    phase,
};

use common::{agent, tmpdir, venv};

const BEGIN: u16 = 28;
/// A UR call of the raw layer: begin ts, end ts, function, arguments.
type RawCall = (u64, u64, String, Vec<u64>);
const END: u16 = 29;

fn run(venv: &Path, out: &Path, script: &Path, args: &[&str]) -> String {
    let o = Command::new(venv.join("bin/python"))
        .arg(script)
        .args(args)
        .env("LD_LIBRARY_PATH", venv.join("lib"))
        .env("OCL_ICD_FILENAMES", venv.join("lib/libintelocl.so"))
        .env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", venv.join("lib/libxptifw.so.1"))
        .env("XPTI_SUBSCRIBERS", agent())
        .env("UR_ENABLE_LAYERS", "UR_LAYER_TRACING")
        .env("OFFTRACE_OUTPUT", out)
        .env("OFFTRACE_RAW", "1")
        .output()
        .expect("run python");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{script:?} failed:\n{text}");
    text
}

struct Trace {
    records: Vec<Record>,
    strings: HashMap<StrId, String>,
    /// (kind, op) → operation name.
    ops: HashMap<(u32, u32), String>,
}

impl Trace {
    fn read(path: &Path) -> Self {
        let mut r = TraceReader::open(path).unwrap();
        let records: Vec<Record> = r.by_ref().collect::<Result<_, _>>().unwrap();
        assert!(r.finished_cleanly());
        let strings: HashMap<StrId, String> = records
            .iter()
            .filter_map(|r| if let Record::String { id, text } = r { Some((*id, text.clone())) } else { None })
            .collect();
        let ops = records
            .iter()
            .filter_map(|r| {
                if let Record::OperationDef(d) = r { Some(((d.kind, d.op), strings[&d.name].clone())) } else { None }
            })
            .collect();
        Self { records, strings, ops }
    }

    fn calls(&self) -> impl Iterator<Item = &ApiCall> {
        self.records.iter().filter_map(|r| if let Record::ApiCall(c) = r { Some(c) } else { None })
    }

    fn activities(&self, kind: Kind) -> impl Iterator<Item = &Activity> {
        self.records.iter().filter_map(move |r| match r {
            Record::Activity(a) if a.kind == kind as u32 => Some(a),
            _ => None,
        })
    }

    fn notifications(&self) -> impl Iterator<Item = &Notification> {
        self.records.iter().filter_map(|r| if let Record::Notification(n) = r { Some(&**n) } else { None })
    }

    fn op_name(&self, c: &ApiCall) -> &str {
        &self.ops[&(c.kind, c.op)]
    }

    /// Raw `ur.call` begins per function name.
    fn raw_begins(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for n in self.notifications() {
            if let (BEGIN, UserData::FunctionWithArgs { name, .. }) = (n.trace_type, &n.user_data) {
                *m.entry(self.strings[name].clone()).or_insert(0) += 1;
            }
        }
        m
    }
}

#[test]
fn threads_queues_typed_records_are_linked_and_complete() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("typed", "threads_queues");
    let out = dir.join("t.offtrace");
    let script = common::workspace().join("examples/sycl/threads_queues.py");
    let text = run(&venv, &out, &script, &["4", "6"]);
    assert!(text.contains("threads_queues: ok"), "{text}");
    let t = Trace::read(&out);
    let drops: u64 = t.records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum();
    assert_eq!(drops, 0);

    // UR_API calls = ur.call begin notifications, per function.
    let begins = t.raw_begins();
    let mut typed: BTreeMap<String, u64> = BTreeMap::new();
    for c in t.calls() {
        assert_eq!(c.kind, Kind::UrApi as u32);
        *typed.entry(t.op_name(c).to_owned()).or_insert(0) += 1;
    }
    assert_eq!(typed, begins, "UR_API calls per function = ur.call begins per function");

    let calls: HashMap<u64, &ApiCall> = t.calls().map(|c| (c.correlation, c)).collect();
    assert_eq!(calls.len(), t.calls().count(), "one correlation id per call");

    // Every device activity has its queue and is linked to the UR call that enqueued it.
    let enqueuers: [(Kind, &[&str]); 4] = [
        (Kind::KernelDispatch, &["urEnqueueKernelLaunchWithArgsExp"]),
        (
            Kind::MemoryCopy,
            &["urEnqueueUSMMemcpy", "urEnqueueMemBufferRead", "urEnqueueMemBufferWrite", "urEnqueueMemBufferCopy"],
        ),
        (Kind::MemoryFill, &["urEnqueueUSMFill", "urEnqueueMemBufferFill"]),
        (Kind::Sync, &["urEnqueueEventsWaitWithBarrier", "urEnqueueEventsWaitWithBarrierExt"]),
    ];
    // The raw layer's UR calls, per thread, as (begin ts, end ts, function, args): the call that
    // enqueued a record, by time on its thread, independently of the typed correlation.
    let mut raw_calls: HashMap<u32, Vec<RawCall>> = HashMap::new();
    let mut open: HashMap<(u32, u64), (u64, String, Vec<u64>)> = HashMap::new();
    for n in t.notifications() {
        if let UserData::FunctionWithArgs { name, args, .. } = &n.user_data {
            match n.trace_type {
                BEGIN => {
                    open.insert((n.tid, n.instance), (n.ts, t.strings[name].clone(), args.as_slice().to_vec()));
                }
                END => {
                    if let Some((b, f, a)) = open.remove(&(n.tid, n.instance)) {
                        raw_calls.entry(n.tid).or_default().push((b, n.ts, f, a));
                    }
                }
                _ => {}
            }
        }
    }
    let mut wrong = Vec::new();
    for (kind, functions) in enqueuers {
        let launches: Vec<&Activity> = t.activities(kind).filter(|a| a.phase == phase::NONE).collect();
        let raw: u64 = functions.iter().map(|f| begins.get(*f).copied().unwrap_or(0)).sum();
        assert_eq!(launches.len() as u64, raw, "{kind:?}: one record per enqueue call");
        assert!(!launches.is_empty() || kind == Kind::MemoryFill && raw == 0, "{kind:?} present");
        for a in &launches {
            assert_ne!(a.queue, 0, "{kind:?} without a queue: {a:?}");
            let c = calls.get(&a.correlation).unwrap_or_else(|| panic!("{kind:?} linked to no call: {a:?}"));
            let f = t.op_name(c);
            if !functions.contains(&f) || c.tid != a.tid || c.args.as_slice()[0] != a.queue {
                wrong.push(format!("{kind:?} {a:?} -> {f}"));
                continue;
            }
            // The bridge maps a call's end notification after recording it raw: the raw layer's
            // last UR call to end on the record's thread before the record is the same call.
            let inner = raw_calls[&a.tid]
                .iter()
                .filter(|(_, e, ..)| *e <= a.ts)
                .max_by_key(|(_, e, ..)| *e)
                .unwrap_or_else(|| panic!("no raw call before {a:?}"));
            if inner.2 != f || inner.3 != c.args.as_slice() {
                wrong.push(format!("{kind:?} typed {f} {:?} vs raw {} {:?}", c.args.as_slice(), inner.2, inner.3));
            }
        }
    }
    assert!(wrong.is_empty(), "{} wrong links:\n{}", wrong.len(), wrong.join("\n"));

    // Kernel names: whole and readable, the UR kernels' own.
    let names: BTreeMap<&str, usize> = t.activities(Kind::KernelDispatch).fold(BTreeMap::new(), |mut m, a| {
        *m.entry(t.strings[&a.name].as_str()).or_insert(0) += 1;
        m
    });
    assert_eq!(names.keys().copied().collect::<Vec<_>>(), ["scale_add", "square"], "{names:?}");

    // Copies: the directions of the program's memcpys, from the memory types of both ends.
    let mut directions: BTreeMap<(CopyDirection, MemoryType, MemoryType), usize> = BTreeMap::new();
    for a in t.activities(Kind::MemoryCopy) {
        assert!(a.bytes > 0);
        *directions.entry((a.direction, a.src_type, a.dst_type)).or_insert(0) += 1;
    }
    let per = 4 * 6;
    for want in [
        (CopyDirection::HostToDevice, MemoryType::Host, MemoryType::Device),
        (CopyDirection::DeviceToDevice, MemoryType::Device, MemoryType::Shared),
        (CopyDirection::DeviceToHost, MemoryType::Shared, MemoryType::Host),
    ] {
        assert!(directions.get(&want).copied().unwrap_or(0) >= per, "{want:?} in {directions:?}");
    }

    // Allocations: size and pointer from the UR call itself.
    let size_arg = |f: &str| match f {
        "urUSMHostAlloc" => Some(3),
        "urUSMDeviceAlloc" | "urUSMSharedAlloc" => Some(4),
        _ => None,
    };
    let allocs: Vec<&MemoryRecord> = t
        .records
        .iter()
        .filter_map(|r| if let Record::Memory(m) = r { Some(m) } else { None })
        .filter(|m| m.op == 0)
        .collect();
    let alloc_calls = t.calls().filter(|c| size_arg(t.op_name(c)).is_some() && c.result == Some(0)).count();
    assert_eq!(allocs.len(), alloc_calls, "one allocation record per successful UR allocation");
    for m in &allocs {
        let c = calls[&m.correlation];
        let i = size_arg(t.op_name(c)).unwrap_or_else(|| panic!("allocation inside {}", t.op_name(c)));
        assert_eq!(m.size, c.args.as_slice()[i], "size of {m:?} = the call's");
        assert_ne!(m.ptr, 0);
    }
}

/// Device times that pass through UR (`urEventGetProfilingInfo`, read by the program) complete
/// the launch's record: same kind and correlation, phase COMPLETE, the times the program read.
#[test]
fn profiling_results_give_device_times() {
    let Some(venv) = venv() else { return };
    let dir = tmpdir("typed", "profiling");
    let out = dir.join("p.offtrace");
    let script = dir.join("profiling.py");
    std::fs::write(
        &script,
        r#"
import numpy as np, dpctl, dpctl.memory as dpm, dpctl.program as dpp, ctypes
q = dpctl.SyclQueue("cpu", property="enable_profiling")
prog = dpp.create_program_from_source(q, "__kernel void twice(__global float *y) { size_t i = get_global_id(0); y[i] = 2 * y[i]; }")
k = prog.get_sycl_kernel("twice")
n = 1 << 14
y = dpm.MemoryUSMDevice(n * 4, queue=q)
h = np.ones(n, dtype=np.float32)
e1 = q.memcpy_async(y, h, n * 4)
e2 = q.submit(k, [y], [n], dEvents=[e1])
e2.wait()
for e in (e1, e2):
    print("times", e.profiling_info_start, e.profiling_info_end)
"#,
    )
    .unwrap();
    let text = run(&venv, &out, &script, &[]);
    let printed: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("times "))
        .map(|l| {
            let mut it = l.split_whitespace().map(|v| v.parse::<u64>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    assert_eq!(printed.len(), 2, "{text}");
    let t = Trace::read(&out);
    let complete: Vec<&Activity> = t
        .records
        .iter()
        .filter_map(|r| if let Record::Activity(a) = r { Some(a) } else { None })
        .filter(|a| a.phase == phase::COMPLETE)
        .collect();
    for (kind, (start, end)) in [(Kind::MemoryCopy, printed[0]), (Kind::KernelDispatch, printed[1])] {
        let c = complete
            .iter()
            .find(|a| a.kind == kind as u32)
            .unwrap_or_else(|| panic!("no completed {kind:?} in {complete:?}\n{text}"));
        assert_eq!((c.device_start, c.device_end), (start, end), "{kind:?}");
        let launch = t.activities(kind).find(|a| a.phase == phase::NONE && a.correlation == c.correlation);
        assert!(launch.is_some(), "{kind:?}: the completion has the launch's correlation id");
        assert_eq!(launch.map(|l| l.queue), Some(c.queue));
    }
}
