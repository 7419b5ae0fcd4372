//! Perfetto export: a protobuf `Trace` of `TracePacket`s, written without protoc.
//!
//! Tracks: one process track, a track per thread (SYCL tasks, UR calls, waits and memory
//! operations as nested slices), a track per queue (each command's host enqueue window), a
//! device track per queue (device execution, where the program's profiling queries made it
//! known), and a counter track of live allocated bytes. Flows connect a SYCL task on its
//! thread to its command on the queue, a UR enqueue call to the device execution it caused,
//! and the commands at both ends of each task-graph edge.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use offtrace_analysis::{CommandEvent, DeviceEvent, MemoryEvent, ModelSink, SummaryBuilder};
use offtrace_format::Record;
use rustc_hash::FxHashMap;

use crate::proto::{ProtoWriter, field as f};
use crate::source::{ProgressFn, RecordSource, for_each_record};
use crate::timeline::{
    FirstPass, SliceAction, ThreadSlices, command_allocations, command_flow, device_flow, edge_flow, first_pass,
};
use crate::{ExportError, ExportStats};

const SEQUENCE_ID: u64 = 1;
const PROCESS_TRACK: u64 = 1;
const COUNTER_TRACK: u64 = 2;

fn thread_track(tid: u32) -> u64 {
    (1 << 32) | u64::from(tid)
}
fn queue_track(queue: Option<u64>) -> u64 {
    (2 << 32) | queue.map_or(0xffff_ffff, |q| q & 0xffff_ffff)
}
fn device_track(queue: Option<u64>) -> u64 {
    (3 << 32) | queue.map_or(0xffff_ffff, |q| q & 0xffff_ffff)
}

/// Packets, flushed to the file every 64 KiB; the first I/O error is latched.
struct PacketWriter<'p> {
    proto: ProtoWriter,
    out: BufWriter<File>,
    path: &'p Path,
    packets: u64,
    first: bool,
    error: Option<std::io::Error>,
}

impl PacketWriter<'_> {
    fn packet(&mut self, ts: Option<u64>) {
        self.proto.begin(f::TRACE_PACKET);
        if let Some(ts) = ts {
            self.proto.uint(f::PACKET_TIMESTAMP, ts);
        }
        self.proto.uint(f::PACKET_SEQUENCE_ID, SEQUENCE_ID);
        if self.first {
            self.proto.uint(f::PACKET_SEQUENCE_FLAGS, 1);
            self.first = false;
        }
    }

    fn finish_packet(&mut self) {
        self.proto.end();
        self.packets += 1;
        if self.proto.buf.len() >= 64 << 10 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(&self.proto.buf)
        {
            self.error = Some(e);
        }
        self.proto.buf.clear();
    }

    fn check(&mut self) -> Result<(), ExportError> {
        match self.error.take() {
            Some(source) => Err(ExportError::Write { path: self.path.to_owned(), source }),
            None => Ok(()),
        }
    }

    fn track(&mut self, uuid: u64, name: &str, parent: Option<u64>) {
        self.packet(None);
        self.proto.begin(f::PACKET_TRACK_DESCRIPTOR);
        self.proto.uint(f::TRACK_UUID, uuid);
        self.proto.string(f::TRACK_NAME, name);
        if let Some(p) = parent {
            self.proto.uint(f::TRACK_PARENT_UUID, p);
        }
        self.proto.end();
        self.finish_packet();
    }

    fn process_track(&mut self, pid: i64, name: &str) {
        self.packet(None);
        self.proto.begin(f::PACKET_TRACK_DESCRIPTOR);
        self.proto.uint(f::TRACK_UUID, PROCESS_TRACK);
        self.proto.begin(f::TRACK_PROCESS);
        self.proto.int(f::PROCESS_PID, pid);
        self.proto.string(f::PROCESS_NAME, name);
        self.proto.end();
        self.proto.end();
        self.finish_packet();
    }

    fn thread_track(&mut self, pid: i64, tid: u32, name: &str) {
        self.packet(None);
        self.proto.begin(f::PACKET_TRACK_DESCRIPTOR);
        self.proto.uint(f::TRACK_UUID, thread_track(tid));
        self.proto.uint(f::TRACK_PARENT_UUID, PROCESS_TRACK);
        self.proto.begin(f::TRACK_THREAD);
        self.proto.int(f::THREAD_PID, pid);
        self.proto.int(f::THREAD_TID, i64::from(tid));
        self.proto.string(f::THREAD_NAME, name);
        self.proto.end();
        self.proto.end();
        self.finish_packet();
    }

    fn counter_track(&mut self, uuid: u64, name: &str) {
        self.packet(None);
        self.proto.begin(f::PACKET_TRACK_DESCRIPTOR);
        self.proto.uint(f::TRACK_UUID, uuid);
        self.proto.string(f::TRACK_NAME, name);
        self.proto.uint(f::TRACK_PARENT_UUID, PROCESS_TRACK);
        self.proto.begin(f::TRACK_COUNTER);
        self.proto.uint(f::COUNTER_UNIT, f::COUNTER_UNIT_SIZE_BYTES);
        self.proto.end();
        self.proto.end();
        self.finish_packet();
    }

    #[allow(clippy::too_many_arguments)]
    fn slice_begin(
        &mut self,
        ts: u64,
        track: u64,
        name: &str,
        category: &str,
        flows: &[u64],
        terminating: &[u64],
        annotations: &[(&str, u64)],
        text_annotations: &[(String, &str)],
    ) {
        self.packet(Some(ts));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, f::TYPE_SLICE_BEGIN);
        self.proto.uint(f::EVENT_TRACK_UUID, track);
        self.proto.string(f::EVENT_CATEGORIES, category);
        self.proto.string(f::EVENT_NAME, name);
        for &id in flows {
            self.proto.fixed64(f::EVENT_FLOW_IDS, id);
        }
        for &id in terminating {
            self.proto.fixed64(f::EVENT_TERMINATING_FLOW_IDS, id);
        }
        for (k, v) in annotations {
            self.proto.begin(f::EVENT_DEBUG_ANNOTATIONS);
            self.proto.string(f::ANNOTATION_NAME, k);
            self.proto.uint(f::ANNOTATION_UINT, *v);
            self.proto.end();
        }
        for (k, v) in text_annotations {
            self.proto.begin(f::EVENT_DEBUG_ANNOTATIONS);
            self.proto.string(f::ANNOTATION_NAME, k);
            self.proto.string(f::ANNOTATION_STRING, v);
            self.proto.end();
        }
        self.proto.end();
        self.finish_packet();
    }

    fn slice_end(&mut self, ts: u64, track: u64) {
        self.packet(Some(ts));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, f::TYPE_SLICE_END);
        self.proto.uint(f::EVENT_TRACK_UUID, track);
        self.proto.end();
        self.finish_packet();
    }

    fn counter(&mut self, ts: u64, track: u64, value: i64) {
        self.packet(Some(ts));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, f::TYPE_COUNTER);
        self.proto.uint(f::EVENT_TRACK_UUID, track);
        self.proto.int(f::EVENT_COUNTER_VALUE, value);
        self.proto.end();
        self.finish_packet();
    }
}

/// The second pass's sink: queue, device and counter tracks.
struct Emitter<'a, 'p> {
    w: PacketWriter<'p>,
    first: &'a FirstPass,
    /// Command instance → its kernel dispatches' allocations.
    allocations: FxHashMap<u64, Vec<String>>,
}

impl ModelSink for Emitter<'_, '_> {
    fn command(&mut self, c: &CommandEvent<'_>) {
        let mut terminating = vec![command_flow(c.instance)];
        let mut flows = Vec::new();
        if let Some(node) = c.node {
            if let Some(e) = self.first.in_edges.get(&node) {
                terminating.extend(e.iter().map(|&e| edge_flow(e)));
            }
            if let Some(e) = self.first.out_edges.get(&node) {
                flows.extend(e.iter().map(|&e| edge_flow(e)));
            }
        }
        let mut ann = vec![("instance", c.instance)];
        if let Some(b) = c.memory_size {
            ann.push(("bytes", b));
        }
        // One `kernel_allocations[i]` annotation per allocation the kernel used.
        let texts: Vec<(String, &str)> = self
            .allocations
            .get(&c.instance)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| (format!("kernel_allocations[{i}]"), t.as_str()))
            .collect();
        let track = queue_track(c.queue_id);
        self.w.slice_begin(c.begin_ns, track, c.name, "command", &flows, &terminating, &ann, &texts);
        self.w.slice_end(c.end_ns, track);
    }

    fn device(&mut self, d: &DeviceEvent<'_>) {
        let track = device_track(d.queue_id);
        self.w.slice_begin(
            d.start_ns,
            track,
            d.name,
            "device",
            &[],
            &[device_flow(d.instance)],
            &[("instance", d.instance)],
            &[],
        );
        self.w.slice_end(d.end_ns, track);
    }

    fn memory(&mut self, m: &MemoryEvent<'_>) {
        self.w.counter(m.end_ns, COUNTER_TRACK, i64::try_from(m.live_bytes).unwrap_or(i64::MAX));
    }
}

pub(crate) fn export(
    source: &mut dyn RecordSource,
    path: &Path,
    mut progress: Option<&mut ProgressFn<'_>>,
) -> Result<ExportStats, ExportError> {
    let first = first_pass(source, &mut progress)?;
    let file = File::create(path).map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    let w = PacketWriter {
        proto: ProtoWriter::default(),
        out: BufWriter::with_capacity(256 << 10, file),
        path,
        packets: 0,
        first: true,
        error: None,
    };
    let allocations = command_allocations(&first.summary);
    let mut em = Emitter { w, first: &first, allocations };
    let s = &first.summary;
    let pid: i64 = s.trace.info.get("pid").and_then(|p| p.parse().ok()).unwrap_or(0);
    let process = s.trace.info.get("command").cloned().unwrap_or_else(|| "traced program".to_owned());
    em.w.process_track(pid, &process);
    for t in &s.threads {
        let name = if t.name.is_empty() { format!("thread {}", t.tid) } else { t.name.clone() };
        em.w.thread_track(pid, t.tid, &name);
    }
    let mut queue_ids: Vec<Option<u64>> = s.queues.iter().map(|q| Some(q.queue_id)).collect();
    if s.commands.iter().any(|c| c.queues.is_empty()) {
        queue_ids.push(None);
    }
    for q in &queue_ids {
        let stats = q.and_then(|id| s.queues.iter().find(|x| x.queue_id == id));
        let name = match (q, stats) {
            (Some(id), Some(st)) => {
                let order = match st.is_inorder {
                    Some(true) => "in-order",
                    Some(false) => "out-of-order",
                    None => "?",
                };
                if st.device.is_empty() {
                    format!("queue {id} ({order})")
                } else {
                    format!("queue {id} ({order}, {})", st.device)
                }
            }
            (Some(id), None) => format!("queue {id}"),
            (None, _) => "commands (no queue)".to_owned(),
        };
        em.w.track(queue_track(*q), &name, Some(PROCESS_TRACK));
        em.w.track(device_track(*q), &format!("{name} device"), Some(PROCESS_TRACK));
    }
    em.w.counter_track(COUNTER_TRACK, "live allocated bytes");
    em.w.check()?;

    let mut builder = SummaryBuilder::new();
    let mut slices = ThreadSlices::default();
    let outcome = for_each_record(source, 2, &mut progress, |record| {
        builder.push_with(record, &mut em);
        if let Record::Notification(n) = record {
            let w = &mut em.w;
            slices.on_notification(n, builder.definitions(), &first.device_instances, &mut |a| emit_slice(w, a));
        }
        em.w.check()
    })?;
    let w = &mut em.w;
    slices.close_all(&mut |a| emit_slice(w, a));
    em.w.flush();
    em.w.check()?;
    em.w.out.flush().map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    Ok(ExportStats { records: outcome.records, items: em.w.packets, truncated: outcome.truncated })
}

fn emit_slice(w: &mut PacketWriter<'_>, a: SliceAction) {
    match a {
        SliceAction::Begin { tid, ts, name, category, flows } => {
            w.slice_begin(ts, thread_track(tid), &name, category, &flows, &[], &[], &[]);
        }
        SliceAction::End { tid, ts } => w.slice_end(ts, thread_track(tid)),
    }
}
