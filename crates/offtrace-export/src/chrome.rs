//! Chrome trace-event JSON (`{"traceEvents": [...]}`), streamed one event at a time.
//!
//! The same tracks as the Perfetto export (`timeline.rs`): the program is a process whose
//! threads carry the API calls; each device is a process of its own whose "threads" are its
//! queues (and their lanes); counters are `C` events. Slices are `X` events (complete, with a
//! duration), work without device time is an `i` instant, flows are `s`/`f` pairs bound to
//! the enclosing slices. Timestamps are microseconds with three decimals (nanoseconds, exact).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::defs::{ArgValue, json_string};
use crate::source::{RecordSource, read_records};
use crate::timeline::{FlowName, Slice, Timeline, TimelineOut, TrackKind};
use crate::{ExportError, ExportStats};

/// Pseudo process ids of devices (queue tracks) and thread ids of queues: above any real pid
/// (at most 2^22 on Linux), below 2^31 (viewers read them as 32-bit integers).
const DEVICE_PID_BASE: i64 = 0x7000_0000;

fn us(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

struct JsonOut<W: Write> {
    out: W,
    buf: String,
    events: u64,
    /// Track → (pid, tid) and its name (for counter events).
    tracks: FxHashMap<u64, (i64, i64, String)>,
    pid: i64,
    next_device_pid: i64,
    next_tid: i64,
    error: Option<std::io::Error>,
}

impl<W: Write> JsonOut<W> {
    fn begin(&mut self) {
        self.buf.push_str(if self.events == 0 { "\n" } else { ",\n" });
        self.events += 1;
    }

    fn flush_if_full(&mut self) {
        if self.buf.len() >= 256 << 10 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(self.buf.as_bytes())
        {
            self.error = Some(e);
        }
        self.buf.clear();
    }

    fn metadata(&mut self, what: &str, pid: i64, tid: Option<i64>, name: &str) {
        self.begin();
        let _ = write!(self.buf, "{{\"ph\":\"M\",\"name\":\"{what}\",\"pid\":{pid}");
        if let Some(t) = tid {
            let _ = write!(self.buf, ",\"tid\":{t}");
        }
        self.buf.push_str(",\"args\":{\"name\":");
        json_string(name, &mut self.buf);
        self.buf.push_str("}}");
    }

    fn arg(&mut self, name: &str, v: ArgValue) {
        json_string(name, &mut self.buf);
        self.buf.push(':');
        let _ = match v {
            ArgValue::Unsigned(u) => write!(self.buf, "{u}"),
            ArgValue::Signed(i) => write!(self.buf, "{i}"),
            ArgValue::Hex(h) => write!(self.buf, "\"{h:#x}\""),
            ArgValue::Bool(b) => write!(self.buf, "{b}"),
            ArgValue::Text(t) => {
                json_string(t, &mut self.buf);
                Ok(())
            }
        };
    }

    fn flow(&mut self, ph: &str, id: u64, ts: u64, pid: i64, tid: i64, flow: FlowName) {
        self.begin();
        let name = flow.as_str();
        let _ = write!(self.buf, "{{\"ph\":\"{ph}\",\"id\":{id},\"name\":\"{name}\",\"cat\":\"flow\",\"ts\":");
        us(&mut self.buf, ts);
        let _ = write!(self.buf, ",\"pid\":{pid},\"tid\":{tid}");
        if ph == "f" {
            self.buf.push_str(",\"bp\":\"e\"");
        }
        self.buf.push('}');
    }
}

impl<W: Write> TimelineOut for JsonOut<W> {
    fn track(&mut self, id: u64, parent: Option<u64>, name: &str, kind: &TrackKind) {
        let parent_pid = parent.and_then(|p| self.tracks.get(&p)).map_or(self.pid, |t| t.0);
        let (pid, tid) = match kind {
            TrackKind::Process { pid } => {
                self.pid = *pid;
                self.metadata("process_name", *pid, None, name);
                (*pid, 0)
            }
            TrackKind::Thread { tid, pid } => {
                self.metadata("thread_name", *pid, Some(i64::from(*tid)), name);
                (*pid, i64::from(*tid))
            }
            TrackKind::Device => {
                self.next_device_pid += 1;
                let pid = self.next_device_pid;
                self.metadata("process_name", pid, None, name);
                (pid, 0)
            }
            TrackKind::Queue | TrackKind::Lane => {
                self.next_tid += 1;
                let tid = self.next_tid;
                let full = match (kind, parent.and_then(|p| self.tracks.get(&p))) {
                    (TrackKind::Lane, Some(p)) => format!("{} {name}", p.2),
                    _ => name.to_owned(),
                };
                self.metadata("thread_name", parent_pid, Some(tid), &full);
                self.tracks.insert(id, (parent_pid, tid, full));
                self.flush_if_full();
                return;
            }
            TrackKind::Counter { unit } => {
                let full = if unit.is_empty() { name.to_owned() } else { format!("{name} [{unit}]") };
                self.tracks.insert(id, (parent_pid, 0, full));
                return;
            }
        };
        self.tracks.insert(id, (pid, tid, name.to_owned()));
        self.flush_if_full();
    }

    fn slice(&mut self, s: &Slice<'_>) {
        let Some(&(pid, tid, _)) = self.tracks.get(&s.track) else { return };
        self.begin();
        self.buf.push_str(if s.instant { "{\"ph\":\"i\",\"s\":\"t\",\"name\":" } else { "{\"ph\":\"X\",\"name\":" });
        json_string(s.name, &mut self.buf);
        self.buf.push_str(",\"cat\":");
        json_string(s.category, &mut self.buf);
        self.buf.push_str(",\"ts\":");
        us(&mut self.buf, s.start);
        if !s.instant {
            self.buf.push_str(",\"dur\":");
            us(&mut self.buf, s.end - s.start);
        }
        let _ = write!(self.buf, ",\"pid\":{pid},\"tid\":{tid},\"args\":{{");
        for (i, (k, v)) in s.args.iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            self.arg(k, *v);
        }
        for (i, (k, v)) in s.texts.iter().enumerate() {
            if i > 0 || !s.args.is_empty() {
                self.buf.push(',');
            }
            json_string(k, &mut self.buf);
            self.buf.push(':');
            json_string(v, &mut self.buf);
        }
        self.buf.push_str("}}");
        if let Some(id) = s.flow_out {
            self.flow("s", id, s.start, pid, tid, FlowName::Launch);
        }
        if let Some(id) = s.flow_in {
            self.flow("f", id, s.start, pid, tid, FlowName::Launch);
        }
        // A slice may take part in several flows: each is its own event pair. A dependency
        // starts at the producer's end (1 ns before it, so that it binds to the producer).
        for &id in s.deps_out {
            self.flow("s", id, s.end.saturating_sub(1).max(s.start), pid, tid, FlowName::Dependency);
        }
        for &id in s.deps_in {
            self.flow("f", id, s.start, pid, tid, FlowName::Dependency);
        }
        self.flush_if_full();
    }

    /// Chrome binds an `s` event to the slice enclosing it on its thread.
    fn flow_start(&mut self, track: u64, ts: u64, _category: &str, id: u64, flow: FlowName) {
        let Some(&(pid, tid, _)) = self.tracks.get(&track) else { return };
        self.flow("s", id, ts, pid, tid, flow);
        self.flush_if_full();
    }

    /// An `f` with `bp:"e"` binds to the slice enclosing `ts` on its thread.
    fn flow_end(&mut self, track: u64, ts: u64, _category: &str, id: u64) {
        let Some(&(pid, tid, _)) = self.tracks.get(&track) else { return };
        self.flow("f", id, ts, pid, tid, FlowName::Dependency);
        self.flush_if_full();
    }

    fn counter(&mut self, track: u64, ts: u64, value: f64) {
        let Some((pid, _, name)) = self.tracks.get(&track) else { return };
        let pid = *pid;
        let mut line = String::with_capacity(96);
        line.push_str("{\"ph\":\"C\",\"name\":");
        json_string(name, &mut line);
        line.push_str(",\"ts\":");
        us(&mut line, ts);
        let v = if value.is_finite() { value } else { 0.0 };
        let _ = write!(line, ",\"pid\":{pid},\"args\":{{\"value\":{v}}}}}");
        self.begin();
        self.buf.push_str(&line);
        self.flush_if_full();
    }
}

pub(crate) fn export(source: &mut dyn RecordSource, path: &Path) -> Result<ExportStats, ExportError> {
    let file = File::create(path).map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    let mut w = JsonOut {
        out: BufWriter::with_capacity(1 << 20, file),
        buf: String::with_capacity(300 << 10),
        events: 0,
        tracks: FxHashMap::default(),
        pid: 0,
        next_device_pid: DEVICE_PID_BASE,
        next_tid: 0x7100_0000,
        error: None,
    };
    w.buf.push_str("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\"},\"traceEvents\":[");
    let mut timeline = Timeline::new();
    let mut stats = read_records(source, |r| {
        timeline.push(r, &mut w);
        match w.error.take() {
            Some(source) => Err(ExportError::Write { path: path.to_owned(), source }),
            None => Ok(()),
        }
    })?;
    timeline.finish(&mut w);
    w.buf.push_str("\n]}\n");
    w.flush();
    if let Some(source) = w.error.take() {
        return Err(ExportError::Write { path: path.to_owned(), source });
    }
    w.out.flush().map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    stats.items = w.events;
    Ok(stats)
}
