//! `OFFTRACE_CUDA_DUMP=FILE`: every decoded device record and the backend's counters as JSON
//! lines, written on CUPTI's buffer thread (never on an application thread).
//!
//! This is the backend's own check, independent of the recorder and the trace format: the GPU
//! test suite (`scripts/gpu-tests.sh`) compares it with torch.profiler's records of the same
//! steps. One object per line; `"t"` names the record: `kernel`, `copy`, `set`, `sync`,
//! `memory`, `pool`, `marker`, `graph`, `module`, `extcorr`, `overhead`, `api` (API call counts
//! per function, at the end), `summary` (at the end).
//!
//! The file is claimed as a trace is (`offtrace_recorder::claim_output`): `OFFTRACE_CUDA_DUMP`
//! is inherited by child processes, and a child that initialises CUDA (torch.compile's compile
//! workers do) used to truncate the parent's dump while the parent still wrote it (run Z,
//! docs/cuda.md). The first process writes FILE, each later one `FILE.<pid>`.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

use crate::activity::{Activity, c_str, memory_kind_name};

/// The open dump file, if `OFFTRACE_CUDA_DUMP` named one.
pub struct Dump {
    out: Mutex<Option<BufWriter<std::fs::File>>>,
}

impl std::fmt::Debug for Dump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dump")
    }
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Dump {
    /// Opens the dump for this process; returns it and the path it writes (`path` or
    /// `path.<pid>`).
    pub fn open(path: &str) -> std::io::Result<(Self, std::path::PathBuf)> {
        let (file, path) = offtrace_recorder::claim_output(std::path::Path::new(path))?;
        Ok((Self { out: Mutex::new(Some(BufWriter::with_capacity(1 << 20, file))) }, path))
    }

    pub fn line(&self, text: &str) {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = g.as_mut() {
            // The dump is a check: a failed write leaves it short, which the check reports.
            let _ = w.write_all(text.as_bytes());
            let _ = w.write_all(b"\n");
        }
    }

    pub fn flush(&self) {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = g.as_mut() {
            let _ = w.flush();
        }
    }
}

/// One record as a JSON line (without the newline); `corr` is the services' correlation id
/// (0 when unknown).
pub fn record_line(a: &Activity, corr: u64) -> Option<String> {
    let mut s = String::with_capacity(256);
    match a {
        Activity::Kernel(k) => {
            // SAFETY: CUPTI's kernel names live at least as long as the buffer being processed.
            let name = unsafe { c_str(k.name) };
            let _ = write!(
                s,
                r#"{{"t":"kernel","name":{},"start":{},"end":{},"device":{},"context":{},"stream":{},"cupti_corr":{},"corr":{},"grid":[{},{},{}],"block":[{},{},{}],"registers":{},"static_shared":{},"dynamic_shared":{},"local_per_thread":{},"graph":{},"graph_node":{}}}"#,
                json_str(name),
                k.start,
                k.end,
                k.place.device,
                k.place.context,
                k.place.stream,
                k.correlation,
                corr,
                k.grid[0],
                k.grid[1],
                k.grid[2],
                k.block[0],
                k.block[1],
                k.block[2],
                k.registers_per_thread,
                k.static_shared_memory,
                k.dynamic_shared_memory,
                k.local_memory_per_thread,
                k.graph,
                k.graph_node
            );
        }
        Activity::Copy(c) => {
            let _ = write!(
                s,
                r#"{{"t":"copy","kind":"{}","src_kind":"{}","dst_kind":"{}","bytes":{},"start":{},"end":{},"device":{},"context":{},"stream":{},"src_device":{},"dst_device":{},"cupti_corr":{},"corr":{},"graph":{},"graph_node":{}}}"#,
                c.kind.name(),
                memory_kind_name(c.src_kind),
                memory_kind_name(c.dst_kind),
                c.bytes,
                c.start,
                c.end,
                c.place.device,
                c.place.context,
                c.place.stream,
                c.src_device,
                c.dst_device,
                c.correlation,
                corr,
                c.graph,
                c.graph_node
            );
        }
        Activity::Set(m) => {
            let _ = write!(
                s,
                r#"{{"t":"set","value":{},"bytes":{},"memory_kind":"{}","start":{},"end":{},"device":{},"context":{},"stream":{},"cupti_corr":{},"corr":{},"graph":{},"graph_node":{}}}"#,
                m.value,
                m.bytes,
                memory_kind_name(m.memory_kind),
                m.start,
                m.end,
                m.place.device,
                m.place.context,
                m.place.stream,
                m.correlation,
                corr,
                m.graph,
                m.graph_node
            );
        }
        Activity::Sync(y) => {
            let _ = write!(
                s,
                r#"{{"t":"sync","kind":"{}","start":{},"end":{},"context":{},"stream":{},"event":{},"cupti_corr":{},"corr":{}}}"#,
                y.kind.name(),
                y.start,
                y.end,
                y.context,
                y.stream as i32,
                y.event as i32,
                y.correlation,
                corr
            );
        }
        Activity::Memory(m) => {
            let _ = write!(
                s,
                r#"{{"t":"memory","op":"{}","memory_kind":"{}","address":{},"bytes":{},"timestamp":{},"device":{},"stream":{},"async":{},"pool_type":{},"pool":{},"cupti_corr":{},"corr":{}}}"#,
                if m.release { "free" } else { "alloc" },
                memory_kind_name(m.memory_kind),
                m.address,
                m.bytes,
                m.timestamp,
                m.place.device,
                m.place.stream as i32,
                m.is_async,
                m.pool_type,
                m.pool_address,
                m.correlation,
                corr
            );
        }
        Activity::Pool(p) => {
            let _ = write!(
                s,
                r#"{{"t":"pool","op":{},"pool_type":{},"address":{},"size":{},"release_threshold":{},"utilized":{},"timestamp":{},"device":{},"cupti_corr":{}}}"#,
                p.operation,
                p.pool_type,
                p.address,
                p.size,
                p.release_threshold,
                p.utilized,
                p.timestamp,
                p.device,
                p.correlation
            );
        }
        Activity::Marker(m) => {
            // SAFETY: CUPTI's marker strings live at least as long as the buffer.
            let (name, domain) = unsafe { (c_str(m.name), c_str(m.domain)) };
            let phase = if m.is_start() {
                "start"
            } else if m.is_end() {
                "end"
            } else {
                "mark"
            };
            let _ = write!(
                s,
                r#"{{"t":"marker","phase":"{}","id":{},"name":{},"domain":{},"timestamp":{}}}"#,
                phase,
                m.id,
                json_str(name),
                json_str(domain),
                m.timestamp
            );
        }
        Activity::Graph(g) => {
            let _ = write!(
                s,
                r#"{{"t":"graph","graph":{},"start":{},"end":{},"device":{},"stream":{},"cupti_corr":{},"corr":{}}}"#,
                g.graph, g.start, g.end, g.place.device, g.place.stream, g.correlation, corr
            );
        }
        Activity::Module(m) => {
            let _ =
                write!(s, r#"{{"t":"module","id":{},"context":{},"cubin_size":{}}}"#, m.id, m.context, m.cubin_size);
        }
        Activity::ExternalCorrelation { external_kind, external_id, correlation } => {
            let _ = write!(
                s,
                r#"{{"t":"extcorr","external_kind":{},"external_id":{},"cupti_corr":{},"corr":{}}}"#,
                external_kind, external_id, correlation, corr
            );
        }
        Activity::Overhead(o) => {
            let _ = write!(s, r#"{{"t":"overhead","kind":{},"start":{},"end":{}}}"#, o.kind, o.start, o.end);
        }
        Activity::Api(_) | Activity::Other(_) => return None,
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{CopyActivity, CopyKind, Place};

    #[test]
    fn a_second_process_keeps_the_first_ones_dump_and_writes_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("d.jsonl");
        let p = path.to_str().expect("utf-8");
        let (first, at) = Dump::open(p).expect("first");
        assert_eq!(at, path);
        first.line(r#"{"t":"start","who":"parent"}"#);
        // The second opener (a child process with the inherited variable; here the same pid).
        let (second, own) = Dump::open(p).expect("second");
        assert_eq!(own, dir.path().join(format!("d.jsonl.{}", std::process::id())));
        second.line(r#"{"t":"start","who":"child"}"#);
        second.flush();
        first.line(r#"{"t":"summary"}"#);
        first.flush();
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"t\":\"start\",\"who\":\"parent\"}\n{\"t\":\"summary\"}\n"
        );
        assert_eq!(std::fs::read_to_string(&own).expect("read"), "{\"t\":\"start\",\"who\":\"child\"}\n");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
    }

    #[test]
    fn a_copy_line_names_direction_and_memory_kinds() {
        let c = CopyActivity {
            kind: CopyKind::HostToDevice,
            src_kind: 2,
            dst_kind: 3,
            bytes: 64,
            start: 1,
            end: 2,
            place: Place { device: 0, context: 1, stream: 7 },
            correlation: 9,
            graph_node: 0,
            graph: 0,
            src_device: 0,
            dst_device: 0,
            flags: 0,
        };
        let line = record_line(&Activity::Copy(c), 33).expect("line");
        assert!(
            line.starts_with(r#"{"t":"copy","kind":"HtoD","src_kind":"pinned","dst_kind":"device","bytes":64"#),
            "{line}"
        );
        assert!(line.contains(r#""corr":33"#));
    }
}
