//! A minimal protobuf encoder: varints, fixed64, strings and nested messages whose length is
//! patched into a reserved 4-byte prefix (a redundant varint, which every decoder accepts), so
//! nothing is encoded twice and no message is sized in advance.
//!
//! Field numbers of the Perfetto protos used by the export, as documented constants. Checked
//! against `protos/perfetto/trace/trace_packet.proto`, `track_event/track_event.proto`,
//! `track_event/track_descriptor.proto`, `process_descriptor.proto`, `thread_descriptor.proto`,
//! `counter_descriptor.proto`, `clock_snapshot.proto` and `common/builtin_clock.proto`.

#[allow(dead_code)] // the full documented set, not all used
pub(crate) mod field {
    /// `Trace.packet` (repeated TracePacket).
    pub const TRACE_PACKET: u32 = 1;

    /// `TracePacket.timestamp` (uint64).
    pub const PACKET_TIMESTAMP: u32 = 8;
    /// `TracePacket.trusted_packet_sequence_id` (uint32).
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    /// `TracePacket.track_event` (TrackEvent).
    pub const PACKET_TRACK_EVENT: u32 = 11;
    /// `TracePacket.sequence_flags` (uint32; 1 = SEQ_INCREMENTAL_STATE_CLEARED).
    pub const PACKET_SEQUENCE_FLAGS: u32 = 13;
    /// `TracePacket.track_descriptor` (TrackDescriptor).
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;
    /// `TracePacket.clock_snapshot` (ClockSnapshot).
    pub const PACKET_CLOCK_SNAPSHOT: u32 = 6;
    /// `TracePacket.timestamp_clock_id` (uint32): the clock of `timestamp` (BOOTTIME if unset).
    pub const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;

    /// `ClockSnapshot.clocks` (repeated Clock).
    pub const SNAPSHOT_CLOCKS: u32 = 1;
    /// `ClockSnapshot.primary_trace_clock` (BuiltinClock).
    pub const SNAPSHOT_PRIMARY_TRACE_CLOCK: u32 = 2;
    /// `ClockSnapshot.Clock.clock_id` (uint32).
    pub const CLOCK_ID: u32 = 1;
    /// `ClockSnapshot.Clock.timestamp` (uint64).
    pub const CLOCK_TIMESTAMP: u32 = 2;
    /// `BuiltinClock` values (`protos/perfetto/common/builtin_clock.proto`).
    pub const BUILTIN_CLOCK_REALTIME: u64 = 1;
    pub const BUILTIN_CLOCK_MONOTONIC: u64 = 3;

    /// `TrackDescriptor.uuid` (uint64).
    pub const TRACK_UUID: u32 = 1;
    /// `TrackDescriptor.name` (string).
    pub const TRACK_NAME: u32 = 2;
    /// `TrackDescriptor.process` (ProcessDescriptor).
    pub const TRACK_PROCESS: u32 = 3;
    /// `TrackDescriptor.thread` (ThreadDescriptor).
    pub const TRACK_THREAD: u32 = 4;
    /// `TrackDescriptor.parent_uuid` (uint64).
    pub const TRACK_PARENT_UUID: u32 = 5;
    /// `TrackDescriptor.counter` (CounterDescriptor).
    pub const TRACK_COUNTER: u32 = 8;

    /// `ProcessDescriptor.pid` (int32).
    pub const PROCESS_PID: u32 = 1;
    /// `ProcessDescriptor.process_name` (string).
    pub const PROCESS_NAME: u32 = 6;

    /// `ThreadDescriptor.pid` (int32).
    pub const THREAD_PID: u32 = 1;
    /// `ThreadDescriptor.tid` (int32).
    pub const THREAD_TID: u32 = 2;
    /// `ThreadDescriptor.thread_name` (string).
    pub const THREAD_NAME: u32 = 5;

    /// `CounterDescriptor.unit` (enum Unit; 3 = UNIT_SIZE_BYTES).
    pub const COUNTER_UNIT: u32 = 3;
    pub const COUNTER_UNIT_SIZE_BYTES: u64 = 3;

    /// `TrackEvent.debug_annotations` (repeated DebugAnnotation).
    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    /// `TrackEvent.type` (enum Type).
    pub const EVENT_TYPE: u32 = 9;
    /// `TrackEvent.track_uuid` (uint64).
    pub const EVENT_TRACK_UUID: u32 = 11;
    /// `TrackEvent.categories` (repeated string).
    pub const EVENT_CATEGORIES: u32 = 22;
    /// `TrackEvent.name` (string).
    pub const EVENT_NAME: u32 = 23;
    /// `TrackEvent.counter_value` (int64).
    pub const EVENT_COUNTER_VALUE: u32 = 30;
    /// `TrackEvent.flow_ids` (repeated fixed64).
    pub const EVENT_FLOW_IDS: u32 = 47;
    /// `TrackEvent.terminating_flow_ids` (repeated fixed64).
    pub const EVENT_TERMINATING_FLOW_IDS: u32 = 48;

    /// `TrackEvent.Type` values.
    pub const TYPE_SLICE_BEGIN: u64 = 1;
    pub const TYPE_SLICE_END: u64 = 2;
    pub const TYPE_INSTANT: u64 = 3;
    pub const TYPE_COUNTER: u64 = 4;

    /// `DebugAnnotation.name` (string).
    pub const ANNOTATION_NAME: u32 = 10;
    /// `DebugAnnotation.uint_value` (uint64).
    pub const ANNOTATION_UINT: u32 = 3;
    /// `DebugAnnotation.string_value` (string).
    pub const ANNOTATION_STRING: u32 = 6;
    /// `DebugAnnotation.bool_value` (bool).
    pub const ANNOTATION_BOOL: u32 = 2;
    /// `DebugAnnotation.int_value` (int64).
    pub const ANNOTATION_INT: u32 = 4;
    /// `DebugAnnotation.pointer_value` (uint64, shown in hex).
    pub const ANNOTATION_POINTER: u32 = 7;
    /// `TrackEvent.double_counter_value` (double).
    pub const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
}

const WIRE_VARINT: u32 = 0;
const WIRE_FIXED64: u32 = 1;
const WIRE_LEN: u32 = 2;

/// Largest message the 4-byte reserved prefix can describe.
const MAX_NESTED_LEN: usize = (1 << 28) - 1;

/// Encodes into a growable buffer; nested messages are opened with [`ProtoWriter::begin`] and
/// closed with [`ProtoWriter::end`].
#[derive(Debug, Default)]
pub(crate) struct ProtoWriter {
    pub buf: Vec<u8>,
    open: Vec<usize>,
}

impl ProtoWriter {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from((field << 3) | wire));
    }

    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, WIRE_VARINT);
        self.varint(v);
    }

    /// int32/int64 fields: two's complement as a 64-bit varint.
    pub fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    pub fn double(&mut self, field: u32, v: f64) {
        self.fixed64(field, v.to_bits());
    }

    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, WIRE_FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn string(&mut self, field: u32, s: &str) {
        self.key(field, WIRE_LEN);
        self.varint(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Opens a nested message: writes its key and reserves 4 bytes for its length.
    pub fn begin(&mut self, field: u32) {
        self.key(field, WIRE_LEN);
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&[0x80, 0x80, 0x80, 0x00]);
    }

    /// Closes the innermost open message, patching its length.
    pub fn end(&mut self) {
        let Some(at) = self.open.pop() else { return };
        let len = (self.buf.len() - at - 4).min(MAX_NESTED_LEN);
        self.buf[at] = (len as u8 & 0x7f) | 0x80;
        self.buf[at + 1] = ((len >> 7) as u8 & 0x7f) | 0x80;
        self.buf[at + 2] = ((len >> 14) as u8 & 0x7f) | 0x80;
        self.buf[at + 3] = (len >> 21) as u8 & 0x7f;
    }

    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_nested_lengths() {
        let mut w = ProtoWriter::default();
        w.uint(1, 300);
        assert_eq!(w.buf, [0x08, 0xac, 0x02]);
        let mut w = ProtoWriter::default();
        w.begin(2);
        w.string(1, "ab");
        w.end();
        assert_eq!(w.buf, [0x12, 0x84, 0x80, 0x80, 0x00, 0x0a, 0x02, b'a', b'b']);
        assert_eq!(w.depth(), 0);
    }

    #[test]
    fn negative_int_is_ten_bytes() {
        let mut w = ProtoWriter::default();
        w.int(1, -1);
        assert_eq!(w.buf.len(), 11);
    }
}
