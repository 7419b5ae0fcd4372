//! Writes the CUDA-relevant records of an offtrace trace as JSON lines in the shape of the
//! backend's `OFFTRACE_CUDA_DUMP` (kernel, copy, set, launch with allocations, graph node and
//! edge, api counts), so `scripts/cuda/check.py` can check a typed trace like a dump.
//!
//!     cargo run --release -p offtrace-cuda --example trace_jsonl -- TRACE > trace.jsonl

use std::collections::HashMap;
use std::io::Write;

use offtrace_format::{Record, StrId, TraceReader};

fn esc(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: trace_jsonl TRACE")?;
    let mut strings: HashMap<StrId, String> = HashMap::new();
    let mut ops: HashMap<(u32, u32), String> = HashMap::new();
    let mut kinds: HashMap<u32, String> = HashMap::new();
    let mut counter_types: HashMap<u64, u8> = HashMap::new();
    let mut calls: HashMap<(u32, u32), u64> = HashMap::new();
    let mut call_correlations = std::collections::HashSet::new();
    // Lines are written at the end: an activity's call may come later in the file (a call's
    // record is written at its exit, and each thread's ring is drained on its own).
    let mut out: Vec<u8> = Vec::new();
    let mut pending: Vec<(usize, u64)> = Vec::new();
    let s = |strings: &HashMap<StrId, String>, id: StrId| strings.get(&id).cloned().unwrap_or_default();
    for rec in TraceReader::open(&path)? {
        match rec? {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::KindDef { kind, name } => {
                kinds.insert(kind, s(&strings, name));
            }
            Record::OperationDef(d) => {
                ops.insert((d.kind, d.op), s(&strings, d.name));
            }
            Record::Info { key, value } => {
                writeln!(out, r#"{{"t":"info","key":{},"value":{}}}"#, esc(&key), esc(&value))?
            }
            Record::ApiCall(c) => {
                *calls.entry((c.kind, c.op)).or_default() += 1;
                call_correlations.insert(c.correlation);
                if std::env::var_os("TRACE_JSONL_CALLS").is_some() {
                    writeln!(
                        out,
                        r#"{{"t":"call","tid":{},"corr":{},"start":{},"end":{},"name":{}}}"#,
                        c.tid,
                        c.correlation,
                        c.start,
                        c.end,
                        esc(ops.get(&(c.kind, c.op)).map_or("?", String::as_str))
                    )?;
                }
            }
            Record::Activity(a) => {
                let kind = kinds.get(&a.kind).map_or("", String::as_str);
                pending.push((out.len(), a.correlation));
                let in_call = "@IN_CALL@";
                match (kind, a.phase) {
                    ("KERNEL_DISPATCH", 5) => writeln!(
                        out,
                        r#"{{"t":"kernel","name":{},"start":{},"end":{},"queue":{},"device":{},"corr":{},"corr_in_trace":{},"grid":[{},{},{}],"block":[{},{},{}]}}"#,
                        esc(&s(&strings, a.name)),
                        a.device_start,
                        a.device_end,
                        a.queue,
                        a.device,
                        a.correlation,
                        in_call,
                        a.global_size[0] / a.local_size[0].max(1),
                        a.global_size[1] / a.local_size[1].max(1),
                        a.global_size[2] / a.local_size[2].max(1),
                        a.local_size[0],
                        a.local_size[1],
                        a.local_size[2]
                    )?,
                    ("KERNEL_DISPATCH", _) => {
                        let allocs: Vec<String> = a
                            .allocations
                            .iter()
                            .map(|x| {
                                format!(
                                    r#"{{"arg":{},"base":{},"size":{},"type":"{:?}"}}"#,
                                    x.arg_index, x.base, x.size, x.memory_type
                                )
                            })
                            .collect();
                        writeln!(
                            out,
                            r#"{{"t":"launch","kernel":{},"corr":{},"allocations":[{}]}}"#,
                            esc(&s(&strings, a.name)),
                            a.correlation,
                            allocs.join(",")
                        )?
                    }
                    ("MEMORY_COPY", 5) => writeln!(
                        out,
                        r#"{{"t":"copy","kind":"{}","bytes":{},"start":{},"end":{},"queue":{},"corr":{},"corr_in_trace":{}}}"#,
                        match a.direction {
                            offtrace_format::CopyDirection::HostToDevice => "HtoD",
                            offtrace_format::CopyDirection::DeviceToHost => "DtoH",
                            offtrace_format::CopyDirection::DeviceToDevice => "DtoD",
                            offtrace_format::CopyDirection::HostToHost => "HtoH",
                            _ => "unknown",
                        },
                        a.bytes,
                        a.device_start,
                        a.device_end,
                        a.queue,
                        a.correlation,
                        in_call
                    )?,
                    ("MEMORY_FILL", 5) => writeln!(
                        out,
                        r#"{{"t":"set","bytes":{},"start":{},"end":{},"queue":{},"corr":{}}}"#,
                        a.bytes, a.device_start, a.device_end, a.queue, a.correlation
                    )?,
                    _ => {}
                }
            }
            Record::TaskGraph(g) => {
                if g.op == 0 {
                    writeln!(
                        out,
                        r#"{{"t":"graph_node","graph":{},"node":{},"name":{}}}"#,
                        g.source,
                        g.node,
                        esc(&s(&strings, g.name))
                    )?
                } else if g.op == 1 {
                    writeln!(out, r#"{{"t":"graph_edge","graph":{},"from":{},"to":{}}}"#, g.node, g.source, g.target)?
                }
            }
            Record::Drops { tid, count } => writeln!(out, r#"{{"t":"drops","tid":{tid},"count":{count}}}"#)?,
            // Counters (`record --metrics`): definitions and samples, values decoded per the
            // definition's type (scripts/metrics/pm_vs_kernels.py bins them against kernels).
            Record::CounterDef(d) => {
                counter_types.insert(d.counter, d.value_type);
                writeln!(
                    out,
                    r#"{{"t":"counter_def","counter":{},"device":{},"name":{},"unit":{}}}"#,
                    d.counter,
                    d.device,
                    esc(&s(&strings, d.name)),
                    esc(&s(&strings, d.unit))
                )?
            }
            Record::CounterSample(c) => {
                let value = match counter_types.get(&c.counter) {
                    Some(2) => f64::from_bits(c.value),
                    Some(1) => c.value as i64 as f64,
                    _ => c.value as f64,
                };
                writeln!(out, r#"{{"t":"counter","counter":{},"ts":{},"value":{}}}"#, c.counter, c.ts, value)?
            }
            _ => {}
        }
    }
    let mut text = String::from_utf8(out)?;
    for &(at, corr) in pending.iter().rev() {
        let line_end = text[at..].find('\n').map_or(text.len(), |e| at + e);
        if let Some(i) = text[at..line_end].find("@IN_CALL@") {
            let v = if call_correlations.contains(&corr) { "true" } else { "false" };
            text.replace_range(at + i..at + i + "@IN_CALL@".len(), v);
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    out.write_all(text.as_bytes())?;
    for ((kind, op), n) in &calls {
        writeln!(
            out,
            r#"{{"t":"api","kind":{},"name":{},"calls":{}}}"#,
            esc(kinds.get(kind).map_or("?", String::as_str)),
            esc(ops.get(&(*kind, *op)).map_or("?", String::as_str)),
            n
        )?;
    }
    Ok(())
}
