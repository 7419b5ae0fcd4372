//! Chrome trace-event JSON (`{"traceEvents": [...]}`), streamed one event at a time.
//!
//! Thread slices are `B`/`E` pairs; commands on queue pseudo-threads and device executions are
//! `X` events; flows are `s`/`f` pairs (binding to the enclosing slice); live allocated bytes
//! are a `C` counter. Timestamps are microseconds (fractional: nanosecond precision).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use offtrace_analysis::{CommandEvent, DeviceEvent, MemoryEvent, ModelSink, SummaryBuilder};
use offtrace_format::Record;
use serde_json::{Value, json};

use crate::source::{ProgressFn, RecordSource, for_each_record};
use crate::timeline::{
    FirstPass, SliceAction, ThreadSlices, command_allocations, command_flow, device_flow, edge_flow, first_pass,
};
use crate::{ExportError, ExportStats};

/// Pseudo-thread ids of queue tracks and device tracks (above any kernel tid).
fn queue_tid(queue: Option<u64>) -> u64 {
    (1 << 40) | queue.map_or(0xffff_ffff, |q| q & 0xffff_ffff)
}
fn device_tid(queue: Option<u64>) -> u64 {
    (2 << 40) | queue.map_or(0xffff_ffff, |q| q & 0xffff_ffff)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

struct JsonOut<'p> {
    out: BufWriter<File>,
    path: &'p Path,
    pid: i64,
    events: u64,
    error: Option<ExportError>,
}

impl JsonOut<'_> {
    fn event(&mut self, v: &Value) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.events == 0 { b"\n" } else { b",\n" };
        let r = self
            .out
            .write_all(sep)
            .map_err(|source| ExportError::Write { path: self.path.to_owned(), source })
            .and_then(|()| {
                serde_json::to_writer(&mut self.out, v)
                    .map_err(|source| ExportError::Json { path: self.path.to_owned(), source })
            });
        match r {
            Ok(()) => self.events += 1,
            Err(e) => self.error = Some(e),
        }
    }

    fn check(&mut self) -> Result<(), ExportError> {
        self.error.take().map_or(Ok(()), Err)
    }

    fn flow(&mut self, ph: &str, id: u64, tid: u64, ts: u64, name: &str) {
        let pid = self.pid;
        let mut v = json!({"ph": ph, "id": id, "pid": pid, "tid": tid, "ts": us(ts), "name": name, "cat": "flow"});
        if ph == "f" {
            v["bp"] = json!("e");
        }
        self.event(&v);
    }
}

struct Emitter<'a, 'p> {
    j: JsonOut<'p>,
    first: &'a FirstPass,
    /// Command instance → its kernel dispatches' allocations.
    allocations: rustc_hash::FxHashMap<u64, Vec<String>>,
}

impl ModelSink for Emitter<'_, '_> {
    fn command(&mut self, c: &CommandEvent<'_>) {
        let tid = queue_tid(c.queue_id);
        let pid = self.j.pid;
        let mut args = json!({"instance": c.instance, "kind": c.kind, "queue_id": c.queue_id, "bytes": c.memory_size});
        if let Some(a) = self.allocations.get(&c.instance) {
            args["kernel_allocations"] = json!(a);
        }
        self.j.event(&json!({
            "ph": "X", "pid": pid, "tid": tid, "ts": us(c.begin_ns), "dur": us(c.end_ns - c.begin_ns),
            "name": c.name, "cat": "command", "args": args,
        }));
        self.j.flow("f", command_flow(c.instance), tid, c.begin_ns, "enqueue");
        if let Some(node) = c.node {
            for &e in self.first.in_edges.get(&node).into_iter().flatten() {
                self.j.flow("f", edge_flow(e), tid, c.begin_ns, "dependency");
            }
            for &e in self.first.out_edges.get(&node).into_iter().flatten() {
                self.j.flow("s", edge_flow(e), tid, c.begin_ns, "dependency");
            }
        }
    }

    fn device(&mut self, d: &DeviceEvent<'_>) {
        let tid = device_tid(d.queue_id);
        let pid = self.j.pid;
        self.j.event(&json!({
            "ph": "X", "pid": pid, "tid": tid, "ts": us(d.start_ns), "dur": us(d.end_ns - d.start_ns),
            "name": d.name, "cat": "device", "args": {"instance": d.instance},
        }));
        self.j.flow("f", device_flow(d.instance), tid, d.start_ns, "device");
    }

    fn memory(&mut self, m: &MemoryEvent<'_>) {
        let pid = self.j.pid;
        self.j.event(&json!({"ph": "C", "pid": pid, "ts": us(m.end_ns), "name": "live allocated bytes", "args": {"bytes": m.live_bytes}}));
    }
}

pub(crate) fn export(
    source: &mut dyn RecordSource,
    path: &Path,
    mut progress: Option<&mut ProgressFn<'_>>,
) -> Result<ExportStats, ExportError> {
    let first = first_pass(source, &mut progress)?;
    let s = &first.summary;
    let pid: i64 = s.trace.info.get("pid").and_then(|p| p.parse().ok()).unwrap_or(0);
    let file = File::create(path).map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    let mut out = BufWriter::with_capacity(256 << 10, file);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")
        .map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    let allocations = command_allocations(s);
    let mut em = Emitter { j: JsonOut { out, path, pid, events: 0, error: None }, first: &first, allocations };
    let process = s.trace.info.get("command").cloned().unwrap_or_else(|| "traced program".to_owned());
    em.j.event(&json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}));
    for t in &s.threads {
        let name = if t.name.is_empty() { format!("thread {}", t.tid) } else { t.name.clone() };
        em.j.event(&json!({"ph": "M", "pid": pid, "tid": t.tid, "name": "thread_name", "args": {"name": name}}));
    }
    let mut queues: Vec<Option<u64>> = s.queues.iter().map(|q| Some(q.queue_id)).collect();
    queues.push(None);
    for q in queues {
        let name = q.map_or("commands (no queue)".to_owned(), |q| format!("queue {q}"));
        em.j.event(&json!({"ph": "M", "pid": pid, "tid": queue_tid(q), "name": "thread_name", "args": {"name": name}}));
        em.j.event(&json!({"ph": "M", "pid": pid, "tid": device_tid(q), "name": "thread_name", "args": {"name": format!("{name} device")}}));
    }
    em.j.check()?;

    let mut builder = SummaryBuilder::new();
    let mut slices = ThreadSlices::default();
    let outcome = for_each_record(source, 2, &mut progress, |record| {
        builder.push_with(record, &mut em);
        if let Record::Notification(n) = record {
            let j = &mut em.j;
            slices.on_notification(n, builder.definitions(), &first.device_instances, &mut |a| emit_slice(j, a));
        }
        em.j.check()
    })?;
    let j = &mut em.j;
    slices.close_all(&mut |a| emit_slice(j, a));
    em.j.check()?;
    let mut other =
        json!({"records": outcome.records, "truncated": outcome.truncated.is_some(), "clock": "CLOCK_MONOTONIC"});
    for (k, v) in &s.trace.info {
        other[k] = json!(v);
    }
    let tail = format!("\n],\"otherData\":{other}}}\n");
    em.j.out
        .write_all(tail.as_bytes())
        .and_then(|()| em.j.out.flush())
        .map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    Ok(ExportStats { records: outcome.records, items: em.j.events, truncated: outcome.truncated })
}

fn emit_slice(j: &mut JsonOut<'_>, a: SliceAction) {
    let pid = j.pid;
    match a {
        SliceAction::Begin { tid, ts, name, category, flows } => {
            j.event(&json!({"ph": "B", "pid": pid, "tid": tid, "ts": us(ts), "name": name, "cat": category}));
            for id in flows {
                j.flow("s", id, u64::from(tid), ts, if id & 3 == 1 { "enqueue" } else { "device" });
            }
        }
        SliceAction::End { tid, ts } => j.event(&json!({"ph": "E", "pid": pid, "tid": tid, "ts": us(ts)})),
    }
}
