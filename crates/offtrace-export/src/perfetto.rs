//! Perfetto export: a protobuf `Trace` of `TracePacket`s, written without protoc.
//!
//! The clock is stated: the first packet is a `ClockSnapshot` with the trace's start on
//! CLOCK_MONOTONIC and CLOCK_REALTIME, `primary_trace_clock` = MONOTONIC, and every timed
//! packet says `timestamp_clock_id` = MONOTONIC (the data are CLOCK_MONOTONIC ns; a reader
//! that assumed its default, BOOTTIME, would shift them by the time the machine slept).
//!
//! Tracks, slices, flows and counters come from [`crate::timeline`]; this file encodes them.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::defs::ArgValue;
use crate::proto::{ProtoWriter, field as f};
use crate::source::{RecordSource, read_records};
use crate::timeline::{FlowName, Slice, Timeline, TimelineOut, TrackKind};
use crate::{ExportError, ExportStats};

const SEQUENCE_ID: u64 = 1;

/// Packets, flushed to the file every 256 KiB; the first I/O error is latched.
struct PacketWriter<W: Write> {
    proto: ProtoWriter,
    out: W,
    packets: u64,
    first: bool,
    error: Option<std::io::Error>,
}

impl<W: Write> PacketWriter<W> {
    /// An instant named after the flow, with `id` in `field` (flow ids or terminating ones).
    fn flow_anchor(&mut self, track: u64, ts: u64, category: &str, flow: FlowName, field: u32, id: u64) {
        self.packet(Some(ts));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, f::TYPE_INSTANT);
        self.proto.uint(f::EVENT_TRACK_UUID, track);
        self.proto.string(f::EVENT_CATEGORIES, category);
        self.proto.string(f::EVENT_NAME, flow.as_str());
        self.proto.fixed64(field, id);
        self.proto.end();
        self.finish_packet();
    }

    fn packet(&mut self, ts: Option<u64>) {
        self.proto.begin(f::TRACE_PACKET);
        if let Some(ts) = ts {
            self.proto.uint(f::PACKET_TIMESTAMP, ts);
            self.proto.uint(f::PACKET_TIMESTAMP_CLOCK_ID, f::BUILTIN_CLOCK_MONOTONIC);
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
        if self.proto.buf.len() >= 256 << 10 {
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

    /// The clock snapshot: the trace's start on both clocks the header recorded.
    fn clock_snapshot(&mut self, monotonic_ns: u64, realtime_ns: u64) {
        self.packet(None);
        self.proto.begin(f::PACKET_CLOCK_SNAPSHOT);
        for (id, ts) in [(f::BUILTIN_CLOCK_MONOTONIC, monotonic_ns), (f::BUILTIN_CLOCK_REALTIME, realtime_ns)] {
            if ts == 0 && id == f::BUILTIN_CLOCK_REALTIME {
                continue;
            }
            self.proto.begin(f::SNAPSHOT_CLOCKS);
            self.proto.uint(f::CLOCK_ID, id);
            self.proto.uint(f::CLOCK_TIMESTAMP, ts);
            self.proto.end();
        }
        self.proto.uint(f::SNAPSHOT_PRIMARY_TRACE_CLOCK, f::BUILTIN_CLOCK_MONOTONIC);
        self.proto.end();
        self.finish_packet();
    }

    fn annotation(&mut self, name: &str, v: ArgValue) {
        self.proto.begin(f::EVENT_DEBUG_ANNOTATIONS);
        self.proto.string(f::ANNOTATION_NAME, name);
        match v {
            ArgValue::Unsigned(u) => self.proto.uint(f::ANNOTATION_UINT, u),
            ArgValue::Signed(i) => self.proto.int(f::ANNOTATION_INT, i),
            ArgValue::Hex(h) => self.proto.uint(f::ANNOTATION_POINTER, h),
            ArgValue::Bool(b) => self.proto.uint(f::ANNOTATION_BOOL, u64::from(b)),
            ArgValue::Text(t) => self.proto.string(f::ANNOTATION_STRING, t),
        }
        self.proto.end();
    }
}

impl<W: Write> TimelineOut for PacketWriter<W> {
    fn track(&mut self, id: u64, parent: Option<u64>, name: &str, kind: &TrackKind) {
        self.packet(None);
        self.proto.begin(f::PACKET_TRACK_DESCRIPTOR);
        self.proto.uint(f::TRACK_UUID, id);
        if let Some(p) = parent {
            self.proto.uint(f::TRACK_PARENT_UUID, p);
        }
        match kind {
            TrackKind::Process { pid } => {
                self.proto.begin(f::TRACK_PROCESS);
                self.proto.int(f::PROCESS_PID, *pid);
                self.proto.string(f::PROCESS_NAME, name);
                self.proto.end();
            }
            TrackKind::Thread { tid, pid } => {
                self.proto.begin(f::TRACK_THREAD);
                self.proto.int(f::THREAD_PID, *pid);
                self.proto.int(f::THREAD_TID, i64::from(*tid));
                self.proto.string(f::THREAD_NAME, name);
                self.proto.end();
            }
            TrackKind::Counter { unit } => {
                self.proto
                    .string(f::TRACK_NAME, &if unit.is_empty() { name.to_owned() } else { format!("{name} [{unit}]") });
                self.proto.begin(f::TRACK_COUNTER);
                if unit == "bytes" {
                    self.proto.uint(f::COUNTER_UNIT, f::COUNTER_UNIT_SIZE_BYTES);
                }
                self.proto.end();
            }
            TrackKind::Device | TrackKind::Queue | TrackKind::Lane => self.proto.string(f::TRACK_NAME, name),
        }
        self.proto.end();
        self.finish_packet();
    }

    fn slice(&mut self, s: &Slice<'_>) {
        self.packet(Some(s.start));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, if s.instant { f::TYPE_INSTANT } else { f::TYPE_SLICE_BEGIN });
        self.proto.uint(f::EVENT_TRACK_UUID, s.track);
        self.proto.string(f::EVENT_CATEGORIES, s.category);
        self.proto.string(f::EVENT_NAME, s.name);
        if let Some(id) = s.flow_out {
            self.proto.fixed64(f::EVENT_FLOW_IDS, id);
        }
        if let Some(id) = s.flow_in {
            self.proto.fixed64(f::EVENT_TERMINATING_FLOW_IDS, id);
        }
        // Both fields are repeated: a command's slice may end its call's flow and the flows
        // from the commands it waited for, and start the flows to those that wait for it.
        for &id in s.deps_out {
            self.proto.fixed64(f::EVENT_FLOW_IDS, id);
        }
        for &id in s.deps_in {
            self.proto.fixed64(f::EVENT_TERMINATING_FLOW_IDS, id);
        }
        for (k, v) in s.args {
            self.annotation(k, *v);
        }
        for (k, v) in s.texts {
            self.proto.begin(f::EVENT_DEBUG_ANNOTATIONS);
            self.proto.string(f::ANNOTATION_NAME, k);
            self.proto.string(f::ANNOTATION_STRING, v);
            self.proto.end();
        }
        self.proto.end();
        self.finish_packet();
        if !s.instant {
            self.packet(Some(s.end));
            self.proto.begin(f::PACKET_TRACK_EVENT);
            self.proto.uint(f::EVENT_TYPE, f::TYPE_SLICE_END);
            self.proto.uint(f::EVENT_TRACK_UUID, s.track);
            self.proto.end();
            self.finish_packet();
        }
    }

    /// An instant carrying the flow: Perfetto names a slice's outgoing flows on the slice's own
    /// event, written already; an instant inside it nests under it (trace processor's depth 1).
    fn flow_start(&mut self, track: u64, ts: u64, category: &str, id: u64, flow: FlowName) {
        self.flow_anchor(track, ts, category, flow, f::EVENT_FLOW_IDS, id);
    }

    /// An instant ending the flow, inside a slice written already (as [`Self::flow_start`]).
    fn flow_end(&mut self, track: u64, ts: u64, category: &str, id: u64) {
        self.flow_anchor(track, ts, category, FlowName::Dependency, f::EVENT_TERMINATING_FLOW_IDS, id);
    }

    fn counter(&mut self, track: u64, ts: u64, value: f64) {
        self.packet(Some(ts));
        self.proto.begin(f::PACKET_TRACK_EVENT);
        self.proto.uint(f::EVENT_TYPE, f::TYPE_COUNTER);
        self.proto.uint(f::EVENT_TRACK_UUID, track);
        self.proto.double(f::EVENT_DOUBLE_COUNTER_VALUE, value);
        self.proto.end();
        self.finish_packet();
    }
}

pub(crate) fn export(source: &mut dyn RecordSource, path: &Path) -> Result<ExportStats, ExportError> {
    let file = File::create(path).map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    let mut w = PacketWriter {
        proto: ProtoWriter::default(),
        out: BufWriter::with_capacity(1 << 20, file),
        packets: 0,
        first: true,
        error: None,
    };
    let header = source.header();
    w.clock_snapshot(header.start_monotonic_ns, header.start_realtime_ns);
    let mut timeline = Timeline::new();
    let mut stats = read_records(source, |r| {
        timeline.push(r, &mut w);
        match w.error.take() {
            Some(source) => Err(ExportError::Write { path: path.to_owned(), source }),
            None => Ok(()),
        }
    })?;
    timeline.finish(&mut w);
    w.flush();
    if let Some(source) = w.error.take() {
        return Err(ExportError::Write { path: path.to_owned(), source });
    }
    w.out.flush().map_err(|source| ExportError::Write { path: path.to_owned(), source })?;
    stats.items = w.packets;
    Ok(stats)
}
