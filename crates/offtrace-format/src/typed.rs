//! Typed records (format version 3; 4 added a counter sample's correlation) ↔ bytes: the tracing services' records.
//!
//! Every record with a thread starts `tag flags:varint [tid]` (tid omitted when the flags say
//! it is the previous thread-carrying record's, as for notifications), and its host
//! timestamps and correlation id are differences from the previous record of the same thread
//! (`thread_state.rs`, shared with notifications, reset at every chunk). An API call's
//! arguments are compared with the previous call of the same kind and operation on the thread:
//! equal arguments cost nothing, others are written as differences. Definitions (kinds,
//! operations, devices, counters) carry no thread and no delta state. Byte tables:
//! `docs/format.md`.

use crate::decode::{Cursor, RecordSink, decode_allocations};
use crate::error::DecodeError;
use crate::record::*;
use crate::tag::*;
use crate::thread_state::{KernelShape, ThreadState, ThreadStates};
use crate::varint::{MAX_VARINT_LEN, apply_delta, put_delta, put_u64, unzigzag, zigzag};

/// Encodes `record` if it is a typed record; `false` otherwise (nothing written).
pub(crate) fn encode(threads: &mut ThreadStates, scratch: &mut ApiScratch, record: &Record, out: &mut Vec<u8>) -> bool {
    match record {
        Record::KindDef { kind, name } => {
            out.push(TAG_KIND_DEF);
            put_u64(out, (*kind).into());
            put_u64(out, name.0.into());
        }
        Record::OperationDef(d) => {
            out.push(TAG_OPERATION_DEF);
            put_u64(out, d.kind.into());
            put_u64(out, d.op.into());
            put_u64(out, d.name.0.into());
            put_u64(out, d.args.len() as u64);
            for a in &d.args {
                put_u64(out, a.name.0.into());
                put_u64(out, a.type_name.0.into());
                out.push(a.size);
                out.push(a.format);
            }
        }
        Record::Device(d) => {
            out.push(TAG_DEVICE);
            put_u64(out, d.op.into());
            put_u64(out, d.handle);
            put_u64(out, d.parent);
            put_u64(out, d.name.0.into());
            out.push(d.device_type);
        }
        Record::CounterDef(d) => {
            out.push(TAG_COUNTER_DEF);
            put_u64(out, d.counter);
            put_u64(out, d.device);
            put_u64(out, d.name.0.into());
            put_u64(out, d.unit.0.into());
            out.push(d.value_type);
        }
        Record::ApiCall(a) => encode_api_call(threads, scratch, &a.borrowed(), out),
        Record::Activity(a) => encode_activity(threads, scratch, &a.borrowed(), out),
        Record::Queue(q) => {
            let st = head(threads, TAG_QUEUE, q.tid, 0, out);
            put_u64(out, q.op.into());
            event_times(st, q.ts, q.correlation, out);
            for v in [q.queue, q.device, q.context, q.flags] {
                put_u64(out, v);
            }
        }
        Record::Memory(m) => {
            let st = head(threads, TAG_MEMORY, m.tid, 0, out);
            put_u64(out, m.op.into());
            event_times(st, m.ts, m.correlation, out);
            put_u64(out, m.ptr);
            put_u64(out, m.size);
            out.push(m.memory_type as u8);
            put_u64(out, m.device);
        }
        Record::CodeObject(r) => {
            let st = head(threads, TAG_CODE_OBJECT, r.tid, 0, out);
            put_u64(out, r.op.into());
            out.push(r.phase);
            event_times(st, r.ts, r.correlation, out);
            put_u64(out, r.handle);
            put_u64(out, r.program);
            put_u64(out, r.name.0.into());
            put_u64(out, r.size);
        }
        Record::TaskGraph(r) => encode_task_graph(threads, scratch, r, out),
        Record::Sync(r) => {
            let st = head(threads, TAG_SYNC, r.tid, 0, out);
            put_u64(out, r.op.into());
            out.push(r.phase);
            event_times(st, r.ts, r.correlation, out);
            put_u64(out, r.object);
            put_u64(out, r.event_count.into());
        }
        Record::Marker(r) => {
            let st = head(threads, TAG_MARKER, r.tid, 0, out);
            put_u64(out, r.op.into());
            out.push(r.phase);
            event_times(st, r.ts, r.correlation, out);
            put_u64(out, r.message.0.into());
            put_u64(out, r.range_id);
        }
        Record::CounterSample(r) => {
            // A time-series sample has no command: the flag keeps its bytes as in version 3.
            let flags = if r.correlation != 0 { F_SAMPLE_CORRELATION } else { 0 };
            let st = head(threads, TAG_COUNTER_SAMPLE, r.tid, flags, out);
            put_u64(out, r.counter);
            put_delta(out, r.ts, st.ts);
            st.ts = r.ts;
            put_u64(out, r.value);
            if r.correlation != 0 {
                put_delta(out, r.correlation, st.correlation);
                st.correlation = r.correlation;
            }
        }
        Record::Generic(r) => {
            let st = head(threads, TAG_GENERIC, r.tid, 0, out);
            put_u64(out, r.kind.into());
            put_u64(out, r.op.into());
            out.push(r.phase);
            event_times(st, r.ts, r.correlation, out);
            let values = r.values.as_slice();
            out.push(values.len() as u8);
            for &v in values {
                put_u64(out, v);
            }
        }
        _ => return false,
    }
    true
}

/// Writes `tag`, the flags (with `F_SAME_TID` when it applies) and the tid when needed; returns
/// the thread's state.
fn head<'a>(threads: &'a mut ThreadStates, tag: u8, tid: u32, flags: u64, out: &mut Vec<u8>) -> &'a mut ThreadState {
    let (same, st) = threads.switch_to(tid);
    out.push(tag);
    put_u64(out, if same { flags | F_SAME_TID } else { flags });
    if !same {
        put_u64(out, tid.into());
    }
    st
}

/// A record's host time and correlation id, as differences from the thread's previous ones.
fn event_times(st: &mut ThreadState, ts: u64, correlation: u64, out: &mut Vec<u8>) {
    put_delta(out, ts, st.ts);
    put_delta(out, correlation, st.correlation);
    st.ts = ts;
    st.correlation = correlation;
}

fn api_key(kind: u32, op: u32) -> u64 {
    (u64::from(kind) << 32) | u64::from(op)
}

/// Bytes of the longest `ApiCall` encoding: tag, flags, count, and up to 8 + `MAX_API_ARGS`
/// varints (tid, kind, op, 3 deltas, external, result, args).
const API_CALL_MAX_BYTES: usize = 3 + MAX_VARINT_LEN * (8 + crate::record::MAX_API_ARGS);

/// Scratch for one `ApiCall`'s bytes, kept by the encoder (not zeroed per record: zeroing a
/// fresh stack buffer was a `memset` call per record). A power of two above the longest
/// encoding, so that an index masked with `SCRATCH - 1` needs no bounds check.
#[derive(Debug, Clone)]
pub(crate) struct ApiScratch(Box<[u8; SCRATCH]>);

const SCRATCH: usize = API_CALL_MAX_BYTES.next_power_of_two();
const _: () = assert!(API_CALL_MAX_BYTES <= SCRATCH);

impl Default for ApiScratch {
    fn default() -> Self {
        Self(Box::new([0; SCRATCH]))
    }
}

/// Where a record's bytes go: the chunk itself, or the scratch (then appended in one copy).
trait Out {
    fn byte(&mut self, b: u8);
    fn u64(&mut self, v: u64);
    fn delta(&mut self, v: u64, base: u64) {
        self.u64(zigzag(v.wrapping_sub(base) as i64));
    }
}

impl Out for Vec<u8> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    #[inline(always)]
    fn u64(&mut self, v: u64) {
        put_u64(self, v);
    }
}

impl Out for Bytes<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        Bytes::byte(self, b);
    }
    #[inline(always)]
    fn u64(&mut self, v: u64) {
        Bytes::u64(self, v);
    }
}

/// A record's bytes built in the scratch and appended to the chunk with one copy (the writer's
/// most frequent record: a `Vec::push` per byte, each with its capacity check, cost ~2x more).
struct Bytes<'a> {
    buf: &'a mut [u8; SCRATCH],
    len: usize,
}

impl Bytes<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        // Never wraps: a record built here takes at most `API_CALL_MAX_BYTES` or
        // `ACTIVITY_MAX_BYTES`, both at most `SCRATCH`; the mask only spares the bounds check.
        self.buf[self.len & (SCRATCH - 1)] = b;
        self.len += 1;
    }

    #[inline(always)]
    fn u64(&mut self, mut v: u64) {
        // One and two bytes (most flags, ids, deltas) without the loop's test per byte.
        if v < 0x80 {
            self.byte(v as u8);
            return;
        }
        if v < 0x4000 {
            self.byte((v as u8) | 0x80);
            self.byte((v >> 7) as u8);
            return;
        }
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    #[inline(always)]
    fn delta(&mut self, v: u64, base: u64) {
        self.u64(zigzag(v.wrapping_sub(base) as i64));
    }

    /// Appends the bytes to `out`. Most records are short: a fixed 32- or 64-byte copy
    /// (inlined, no `memcpy` call) and a truncate cost less than a copy of the exact length.
    #[inline(always)]
    fn append_to(&self, out: &mut Vec<u8>) {
        let len = self.len.min(SCRATCH);
        let at = out.len();
        if len <= 32 {
            out.extend_from_slice(&self.buf[..32]);
            out.truncate(at + len);
        } else if len <= 64 {
            out.extend_from_slice(&self.buf[..64]);
            out.truncate(at + len);
        } else {
            out.extend_from_slice(&self.buf[..len]);
        }
    }
}

/// Bytes of the longest `TaskGraph` encoding: tag, flags, phase, and 10 varints (tid, op, two
/// deltas, six values).
const TASK_GRAPH_MAX_BYTES: usize = 3 + MAX_VARINT_LEN * 10;
const _: () = assert!(TASK_GRAPH_MAX_BYTES <= SCRATCH);

/// A task-graph record (the most frequent record of SYCL programs after API calls: a node, its
/// edges and its signal per command) built in the scratch, as [`encode_api_call`] does: byte by
/// byte into the chunk it cost about twice as many instructions.
pub(crate) fn encode_task_graph(
    threads: &mut ThreadStates,
    scratch: &mut ApiScratch,
    r: &TaskGraphRecord,
    out: &mut Vec<u8>,
) {
    let (same, st) = threads.switch_to(r.tid);
    let mut w = Bytes { buf: &mut scratch.0, len: 0 };
    w.byte(TAG_TASK_GRAPH);
    // The flags' varint: F_SAME_TID or 0, one byte.
    const { assert!(F_SAME_TID & !0x7f == 0) };
    w.byte(if same { F_SAME_TID as u8 } else { 0 });
    if !same {
        w.u64(r.tid.into());
    }
    w.u64(r.op.into());
    w.byte(r.phase);
    w.delta(r.ts, st.ts);
    w.delta(r.correlation, st.correlation);
    st.ts = r.ts;
    st.correlation = r.correlation;
    for v in [r.node, r.source, r.target, r.name.0.into(), r.event, r.queue] {
        w.u64(v);
    }
    w.append_to(out);
}

pub(crate) fn encode_api_call(
    threads: &mut ThreadStates,
    scratch: &mut ApiScratch,
    a: &ApiCallRef<'_>,
    out: &mut Vec<u8>,
) {
    let (same, st) = threads.switch_to(a.tid);
    let args = &a.args[..a.args.len().min(MAX_API_ARGS)];
    let mut flags = if same { F_SAME_TID } else { 0 };
    if a.result.is_some() {
        flags |= F_API_RESULT;
    }
    if a.external != 0 {
        flags |= F_API_EXTERNAL;
    }
    let mut w = Bytes { buf: &mut scratch.0, len: 0 };
    w.byte(TAG_API_CALL);
    // The flags byte, set once the arguments are compared: every API flag fits one byte, so
    // its varint is that byte.
    const { assert!((F_SAME_TID | F_API_RESULT | F_API_EXTERNAL | F_API_SAME_ARGS | F_API_ARG_DELTAS) & !0x7f == 0) };
    w.byte(0);
    if !same {
        w.u64(a.tid.into());
    }
    w.u64(a.kind.into());
    w.u64(a.op.into());
    w.delta(a.start, st.ts);
    w.delta(a.end, a.start);
    w.delta(a.correlation, st.correlation);
    if a.external != 0 {
        w.u64(a.external);
    }
    if let Some(r) = a.result {
        w.u64(zigzag(r));
    }
    match st.api_args.get_mut(&api_key(a.kind, a.op)) {
        // The operation's previous arguments, as many: all equal (most calls of a loop), none
        // is written, and one comparison of the slices decides it; else they are written as
        // differences and updated in the same pass.
        Some(p) if usize::from(p.len) == args.len() => {
            if p.values.get(..args.len()) == Some(args) {
                flags |= F_API_SAME_ARGS;
            } else {
                w.byte(args.len() as u8);
                for (base, &v) in p.values.iter_mut().zip(args) {
                    w.u64(zigzag(v.wrapping_sub(*base) as i64));
                    *base = v;
                }
                flags |= F_API_ARG_DELTAS;
            }
        }
        Some(p) => {
            w.byte(args.len() as u8);
            for &v in args {
                w.u64(v);
            }
            *p = ApiArgs::from_slice(args);
        }
        None => {
            w.byte(args.len() as u8);
            for &v in args {
                w.u64(v);
            }
            st.api_args.insert(api_key(a.kind, a.op), ApiArgs::from_slice(args));
        }
    }
    w.buf[1] = flags as u8;
    w.append_to(out);
    st.ts = a.end;
    st.correlation = a.correlation;
}

/// Activities with at most this many allocation properties are built in the scratch (see
/// [`ACTIVITY_MAX_BYTES`]); longer ones are written byte by byte into the chunk.
const SCRATCH_ALLOCATIONS: usize = 10;
/// Bytes of the longest activity without allocation properties: tag, flags, 15 varints (tid,
/// kind, op, ts, correlation, queue, device, name, kernel, work_dim, 3 + 3 sizes, bytes), the 3
/// copy bytes and the 2 device-time varints; each allocation adds 3 varints and a byte.
const ACTIVITY_MAX_BYTES: usize = 1 + 2 + MAX_VARINT_LEN * 18 + 3 + SCRATCH_ALLOCATIONS * (3 * MAX_VARINT_LEN + 1);
const _: () = assert!(ACTIVITY_MAX_BYTES <= SCRATCH);

pub(crate) fn encode_activity(
    threads: &mut ThreadStates,
    scratch: &mut ApiScratch,
    a: &ActivityRef<'_>,
    out: &mut Vec<u8>,
) {
    if a.allocations.len() <= SCRATCH_ALLOCATIONS {
        let mut w = Bytes { buf: &mut scratch.0, len: 0 };
        encode_activity_into(threads, a, &mut w);
        w.append_to(out);
    } else {
        encode_activity_into(threads, a, out);
    }
}

fn encode_activity_into(threads: &mut ThreadStates, a: &ActivityRef<'_>, out: &mut impl Out) {
    let (same, st) = threads.switch_to(a.tid);
    // Each flag from an or of its fields (no branch per field): the writer encodes two of these
    // per kernel, and a branch per condition was a quarter of their cost.
    let [g0, g1, g2] = a.global_size;
    let [l0, l1, l2] = a.local_size;
    let k = &st.kernel;
    let kernel = (a.kernel | u64::from(a.work_dim) | g0 | g1 | g2 | l0 | l1 | l2) != 0;
    // Launches and completions of one kernel on a thread repeat its handle, geometry and
    // allocations: a flag each instead of 8 varints and a list (version 6).
    let same_kernel = kernel
        && ((a.kernel ^ k.kernel)
            | u64::from(a.work_dim ^ k.work_dim)
            | (g0 ^ k.global_size[0])
            | (g1 ^ k.global_size[1])
            | (g2 ^ k.global_size[2])
            | (l0 ^ k.local_size[0])
            | (l1 ^ k.local_size[1])
            | (l2 ^ k.local_size[2]))
            == 0;
    let copy = (a.direction as u8 | a.src_type as u8 | a.dst_type as u8) != 0;
    let device_times = (a.device_start | a.device_end) != 0;
    let allocations = !a.allocations.is_empty();
    let same_allocations = allocations && a.allocations == st.allocations.as_slice();
    let bit = |cond: bool, bit: u64| u64::from(cond) * bit;
    let flags = bit(same, F_SAME_TID)
        | bit(a.queue == st.queue, F_ACT_SAME_QUEUE)
        | bit(a.device == st.device, F_ACT_SAME_DEVICE)
        | bit(a.name.0 != 0, F_ACT_NAME)
        | bit(kernel, F_ACT_KERNEL)
        | bit(same_kernel, F_ACT_SAME_KERNEL)
        | bit(a.bytes != 0, F_ACT_BYTES)
        | bit(copy, F_ACT_COPY)
        | bit(device_times, F_ACT_DEVICE_TIMES | F_ACT_DEVICE_START_DELTA)
        | bit(allocations, F_ACT_ALLOCATIONS)
        | bit(same_allocations, F_ACT_SAME_ALLOCATIONS)
        | bit(a.phase == phase::COMPLETE, F_ACT_COMPLETE);
    out.byte(TAG_ACTIVITY);
    out.u64(flags);
    if !same {
        out.u64(a.tid.into());
    }
    out.u64(a.kind.into());
    out.u64(a.op.into());
    out.delta(a.ts, st.ts);
    out.delta(a.correlation, st.correlation);
    if flags & F_ACT_SAME_QUEUE == 0 {
        out.u64(a.queue);
    }
    if flags & F_ACT_SAME_DEVICE == 0 {
        out.u64(a.device);
    }
    if flags & F_ACT_NAME != 0 {
        out.u64(a.name.0.into());
    }
    if kernel && !same_kernel {
        out.u64(a.kernel);
        out.u64(a.work_dim.into());
        for &v in a.global_size.iter().chain(&a.local_size) {
            out.u64(v);
        }
        st.kernel = KernelShape {
            kernel: a.kernel,
            work_dim: a.work_dim,
            global_size: a.global_size,
            local_size: a.local_size,
        };
    }
    if a.bytes != 0 {
        out.u64(a.bytes);
    }
    if copy {
        out.byte(a.direction as u8);
        out.byte(a.src_type as u8);
        out.byte(a.dst_type as u8);
    }
    if device_times {
        out.delta(a.device_start, st.device_end);
        out.delta(a.device_end, a.device_start);
        st.device_end = a.device_end;
    }
    if allocations && !same_allocations {
        out.u64(a.allocations.len() as u64);
        for al in a.allocations {
            out.u64(al.base);
            out.u64(al.size);
            out.u64(zigzag(al.arg_index.into()));
            out.byte(al.memory_type as u8);
        }
        remember_allocations(st, a.allocations);
    }
    st.ts = a.ts;
    st.correlation = a.correlation;
    st.queue = a.queue;
    st.device = a.device;
}

/// The thread's last written allocation list (both sides keep it alike); its capacity is kept
/// from chunk to chunk.
#[inline]
fn remember_allocations(st: &mut ThreadState, allocations: &[KernelAllocation]) {
    st.allocations.clear();
    st.allocations.extend_from_slice(allocations);
}

/// Decodes the typed record whose tag (`FIRST_V3_TAG..=LAST_V3_TAG`) was just read.
/// Decodes a typed record and hands it to `sink`. A sink rather than a return value: a
/// [`Record`] is a few hundred bytes, and each `Result<Record, _>` level it was returned through
/// cost a copy of it (a fifth of the decoding's instructions); with the sink inlined, the record
/// is built where it is stored.
#[inline(always)]
pub(crate) fn decode_with(
    tag: u8,
    threads: &mut ThreadStates,
    version: u16,
    api_args: bool,
    c: &mut Cursor<'_>,
    sink: &mut impl RecordSink,
) -> Result<(), DecodeError> {
    if tag == TAG_API_CALL {
        // The most frequent record: built in the sink's storage, not returned through a
        // temporary (its argument block alone is 200 bytes).
        return decode_api_call(threads, api_args, c, sink);
    }
    match tag {
        TAG_KIND_DEF => sink.put(Record::KindDef { kind: c.u32("KindDef kind")?, name: StrId(c.u32("KindDef name")?) }),
        TAG_OPERATION_DEF => {
            let kind = c.u32("OperationDef kind")?;
            let op = c.u32("OperationDef op")?;
            let name = StrId(c.u32("OperationDef name")?);
            let count = c.varint("OperationDef arg count")?;
            // Each argument takes at least 4 bytes: bound the allocation by the bytes left.
            let remaining = c.remaining();
            if count > (remaining / 4) as u64 {
                return Err(DecodeError::LengthTooLarge { what: "OperationDef arg count", len: count, remaining });
            }
            let mut args = Vec::with_capacity(count as usize);
            for _ in 0..count {
                args.push(ArgDef {
                    name: StrId(c.u32("ArgDef name")?),
                    type_name: StrId(c.u32("ArgDef type")?),
                    size: c.u8("ArgDef size")?,
                    format: c.u8("ArgDef format")?,
                });
            }
            sink.put(Record::OperationDef(OperationDef { kind, op, name, args }))
        }
        TAG_DEVICE => sink.put(Record::Device(DeviceRecord {
            op: c.u32("Device op")?,
            handle: c.varint("Device handle")?,
            parent: c.varint("Device parent")?,
            name: StrId(c.u32("Device name")?),
            device_type: c.u8("Device type")?,
        })),
        TAG_COUNTER_DEF => sink.put(Record::CounterDef(CounterDef {
            counter: c.varint("CounterDef counter")?,
            device: c.varint("CounterDef device")?,
            name: StrId(c.u32("CounterDef name")?),
            unit: StrId(c.u32("CounterDef unit")?),
            value_type: c.u8("CounterDef value_type")?,
        })),
        TAG_ACTIVITY => decode_activity(threads, version, c, sink)?,
        TAG_QUEUE => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("Queue op")?;
            let (ts, correlation) = times(st, c)?;
            sink.put(Record::Queue(QueueRecord {
                op,
                tid,
                ts,
                correlation,
                queue: c.varint("Queue queue")?,
                device: c.varint("Queue device")?,
                context: c.varint("Queue context")?,
                flags: c.varint("Queue flags")?,
            }))
        }
        TAG_MEMORY => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("Memory op")?;
            let (ts, correlation) = times(st, c)?;
            let ptr = c.varint("Memory ptr")?;
            let size = c.varint("Memory size")?;
            let memory_type = memory_type(c, "Memory type")?;
            sink.put(Record::Memory(MemoryRecord {
                op,
                tid,
                ts,
                correlation,
                ptr,
                size,
                memory_type,
                device: c.varint("Memory device")?,
            }))
        }
        TAG_CODE_OBJECT => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("CodeObject op")?;
            let phase = c.u8("CodeObject phase")?;
            let (ts, correlation) = times(st, c)?;
            sink.put(Record::CodeObject(CodeObjectRecord {
                op,
                phase,
                tid,
                ts,
                correlation,
                handle: c.varint("CodeObject handle")?,
                program: c.varint("CodeObject program")?,
                name: StrId(c.u32("CodeObject name")?),
                size: c.varint("CodeObject size")?,
            }))
        }
        TAG_TASK_GRAPH => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("TaskGraph op")?;
            let phase = c.u8("TaskGraph phase")?;
            let (ts, correlation) = times(st, c)?;
            sink.put(Record::TaskGraph(TaskGraphRecord {
                op,
                phase,
                tid,
                ts,
                correlation,
                node: c.varint("TaskGraph node")?,
                source: c.varint("TaskGraph source")?,
                target: c.varint("TaskGraph target")?,
                name: StrId(c.u32("TaskGraph name")?),
                event: c.varint("TaskGraph event")?,
                queue: c.varint("TaskGraph queue")?,
            }))
        }
        TAG_SYNC => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("Sync op")?;
            let phase = c.u8("Sync phase")?;
            let (ts, correlation) = times(st, c)?;
            sink.put(Record::Sync(SyncRecord {
                op,
                phase,
                tid,
                ts,
                correlation,
                object: c.varint("Sync object")?,
                event_count: c.u32("Sync event_count")?,
            }))
        }
        TAG_MARKER => {
            let (tid, st) = thread(threads, c, 0)?;
            let op = c.u32("Marker op")?;
            let phase = c.u8("Marker phase")?;
            let (ts, correlation) = times(st, c)?;
            sink.put(Record::Marker(MarkerRecord {
                op,
                phase,
                tid,
                ts,
                correlation,
                message: StrId(c.u32("Marker message")?),
                range_id: c.varint("Marker range_id")?,
            }))
        }
        TAG_COUNTER_SAMPLE => {
            let allowed = if version >= 4 { F_SAMPLE_CORRELATION } else { 0 };
            let (flags, tid, st) = thread_flags(threads, c, allowed)?;
            let counter = c.varint("CounterSample counter")?;
            let ts = apply_delta(st.ts, c.varint("CounterSample ts")?);
            st.ts = ts;
            let value = c.varint("CounterSample value")?;
            let mut correlation = 0;
            if flags & F_SAMPLE_CORRELATION != 0 {
                correlation = apply_delta(st.correlation, c.varint("CounterSample correlation")?);
                st.correlation = correlation;
            }
            sink.put(Record::CounterSample(CounterSample { counter, tid, ts, value, correlation }))
        }
        TAG_GENERIC => {
            let (tid, st) = thread(threads, c, 0)?;
            let kind = c.u32("Generic kind")?;
            let op = c.u32("Generic op")?;
            let phase = c.u8("Generic phase")?;
            let (ts, correlation) = times(st, c)?;
            let mut values = ApiArgs::default();
            values_into(c, "Generic value count", &mut values, false)?;
            sink.put(Record::Generic(GenericRecord { kind, op, phase, tid, ts, correlation, values }))
        }
        _ => return Err(DecodeError::UnknownTag { tag }),
    }
    Ok(())
}

/// Reads the flags and the thread; `allowed`: the record's own flag bits besides `F_SAME_TID`.
#[inline(always)]
fn thread_flags<'a>(
    threads: &'a mut ThreadStates,
    c: &mut Cursor<'_>,
    allowed: u64,
) -> Result<(u64, u32, &'a mut ThreadState), DecodeError> {
    let flags = c.varint("typed record flags")?;
    if flags & !(allowed | F_SAME_TID) != 0 {
        return Err(DecodeError::Invalid { what: "typed record flags", found: flags });
    }
    let tid = if flags & F_SAME_TID != 0 {
        threads
            .last_tid()
            .ok_or(DecodeError::Invalid { what: "same-thread flag on the first record of a chunk", found: flags })?
    } else {
        c.u32("typed record tid")?
    };
    let (_, st) = threads.switch_to(tid);
    Ok((flags, tid, st))
}

fn thread<'a>(
    threads: &'a mut ThreadStates,
    c: &mut Cursor<'_>,
    allowed: u64,
) -> Result<(u32, &'a mut ThreadState), DecodeError> {
    thread_flags(threads, c, allowed).map(|(_, tid, st)| (tid, st))
}

#[inline(always)]
fn times(st: &mut ThreadState, c: &mut Cursor<'_>) -> Result<(u64, u64), DecodeError> {
    let ts = apply_delta(st.ts, c.varint("record ts delta")?);
    let correlation = apply_delta(st.correlation, c.varint("record correlation delta")?);
    st.ts = ts;
    st.correlation = correlation;
    Ok((ts, correlation))
}

fn memory_type(c: &mut Cursor<'_>, what: &'static str) -> Result<MemoryType, DecodeError> {
    let t = c.u8(what)?;
    MemoryType::from_u8(t).ok_or(DecodeError::Invalid { what: "memory type (0..=3)", found: t.into() })
}

/// A count byte and that many values: raw, or differences from `base` (same count).
/// Reads an argument list into `a`: fresh values, or (`deltas`) deltas against the values `a`
/// holds. In place: an [`ApiArgs`] is 200 bytes, and copying it around was a visible part of the
/// decoding time.
fn values_into(c: &mut Cursor<'_>, what: &'static str, a: &mut ApiArgs, deltas: bool) -> Result<(), DecodeError> {
    let n = c.u8(what)?;
    if usize::from(n) > MAX_API_ARGS {
        return Err(DecodeError::Invalid { what, found: n.into() });
    }
    if deltas {
        if a.len != n {
            return Err(DecodeError::Invalid { what: "argument deltas with another count", found: n.into() });
        }
        for v in a.values.iter_mut().take(usize::from(n)) {
            *v = apply_delta(*v, c.varint("argument delta")?);
        }
    } else {
        let n = usize::from(n);
        a.len = n as u8;
        for v in a.values.iter_mut().take(n) {
            *v = c.varint("argument value")?;
        }
        // Canonical form: zero past `len` (as `ApiArgs::from_slice` makes them).
        a.values[n..].fill(0);
    }
    Ok(())
}

/// Reads past an argument list as [`values_into`] reads it, with the same checks, keeping only
/// its count in `a` (what a later call's deltas are checked against).
fn skip_values(c: &mut Cursor<'_>, what: &'static str, a: &mut ApiArgs, deltas: bool) -> Result<(), DecodeError> {
    let n = c.u8(what)?;
    if usize::from(n) > MAX_API_ARGS {
        return Err(DecodeError::Invalid { what, found: n.into() });
    }
    if deltas && a.len != n {
        return Err(DecodeError::Invalid { what: "argument deltas with another count", found: n.into() });
    }
    let value = if deltas { "argument delta" } else { "argument value" };
    for _ in 0..n {
        c.skip_varint(value)?;
    }
    a.len = n;
    Ok(())
}

#[inline(always)]
fn decode_api_call(
    threads: &mut ThreadStates,
    api_args: bool,
    c: &mut Cursor<'_>,
    sink: &mut impl RecordSink,
) -> Result<(), DecodeError> {
    let (flags, tid, st) =
        thread_flags(threads, c, F_API_RESULT | F_API_EXTERNAL | F_API_SAME_ARGS | F_API_ARG_DELTAS)?;
    if flags & F_API_SAME_ARGS != 0 && flags & F_API_ARG_DELTAS != 0 {
        return Err(DecodeError::Invalid { what: "ApiCall flags: same args and deltas", found: flags });
    }
    let kind = c.u32("ApiCall kind")?;
    let op = c.u32("ApiCall op")?;
    let start = apply_delta(st.ts, c.varint("ApiCall start delta")?);
    let end = apply_delta(start, c.varint("ApiCall duration")?);
    let correlation = apply_delta(st.correlation, c.varint("ApiCall correlation delta")?);
    let external = if flags & F_API_EXTERNAL != 0 { c.varint("ApiCall external")? } else { 0 };
    let result = if flags & F_API_RESULT != 0 { Some(unzigzag(c.varint("ApiCall result")?)) } else { None };
    let key = api_key(kind, op);
    let args = if flags & (F_API_SAME_ARGS | F_API_ARG_DELTAS) != 0 {
        let Some(prev) = st.api_args.get_mut(&key) else {
            let what = if flags & F_API_SAME_ARGS != 0 {
                "same-args flag with no previous call"
            } else {
                "argument deltas with no previous call"
            };
            return Err(DecodeError::Invalid { what, found: flags });
        };
        if flags & F_API_ARG_DELTAS != 0 {
            // A failure leaves the state half-updated: the chunk's decoding stops there anyway.
            if api_args {
                values_into(c, "ApiCall arg count", prev, true)?;
            } else {
                skip_values(c, "ApiCall arg count", prev, true)?;
            }
        }
        prev
    } else {
        let a = st.api_args.entry(key).or_default();
        if api_args {
            values_into(c, "ApiCall arg count", a, false)?;
        } else {
            skip_values(c, "ApiCall arg count", a, false)?;
        }
        a
    };
    let args = if api_args { *args } else { ApiArgs::default() };
    st.ts = end;
    st.correlation = correlation;
    sink.put_api_call(ApiCall { kind, op, tid, start, end, correlation, external, args, result });
    Ok(())
}

#[inline(always)]
fn decode_activity(
    threads: &mut ThreadStates,
    version: u16,
    c: &mut Cursor<'_>,
    sink: &mut impl RecordSink,
) -> Result<(), DecodeError> {
    let allowed = if version >= 6 { F_ACT_ALL_V6 } else { F_ACT_ALL };
    let (flags, tid, st) = thread_flags(threads, c, allowed & !F_SAME_TID)?;
    let kind = c.u32("Activity kind")?;
    let op = c.u32("Activity op")?;
    let ts = apply_delta(st.ts, c.varint("Activity ts delta")?);
    let correlation = apply_delta(st.correlation, c.varint("Activity correlation delta")?);
    let queue = if flags & F_ACT_SAME_QUEUE != 0 { st.queue } else { c.varint("Activity queue")? };
    let device = if flags & F_ACT_SAME_DEVICE != 0 { st.device } else { c.varint("Activity device")? };
    let mut a = Activity {
        kind,
        op,
        phase: if flags & F_ACT_COMPLETE != 0 { phase::COMPLETE } else { phase::NONE },
        tid,
        ts,
        correlation,
        queue,
        device,
        ..Activity::default()
    };
    if flags & F_ACT_NAME != 0 {
        a.name = StrId(c.u32("Activity name")?);
    }
    if flags & F_ACT_KERNEL != 0 {
        if flags & F_ACT_SAME_KERNEL == 0 {
            st.kernel.kernel = c.varint("Activity kernel")?;
            st.kernel.work_dim = c.u32("Activity work_dim")?;
            for v in st.kernel.global_size.iter_mut().chain(st.kernel.local_size.iter_mut()) {
                *v = c.varint("Activity launch size")?;
            }
        }
        let k = st.kernel;
        (a.kernel, a.work_dim, a.global_size, a.local_size) = (k.kernel, k.work_dim, k.global_size, k.local_size);
    } else if flags & F_ACT_SAME_KERNEL != 0 {
        return Err(DecodeError::Invalid { what: "Activity same-kernel flag without the kernel flag", found: flags });
    }
    if flags & F_ACT_BYTES != 0 {
        a.bytes = c.varint("Activity bytes")?;
    }
    if flags & F_ACT_COPY != 0 {
        let d = c.u8("Activity direction")?;
        a.direction = CopyDirection::from_u8(d)
            .ok_or(DecodeError::Invalid { what: "copy direction (0..=4)", found: d.into() })?;
        a.src_type = memory_type(c, "Activity src type")?;
        a.dst_type = memory_type(c, "Activity dst type")?;
    }
    if flags & F_ACT_DEVICE_TIMES != 0 {
        let start = c.varint("Activity device_start")?;
        a.device_start = if flags & F_ACT_DEVICE_START_DELTA != 0 { apply_delta(st.device_end, start) } else { start };
        a.device_end = apply_delta(a.device_start, c.varint("Activity device duration")?);
        st.device_end = a.device_end;
    } else if flags & F_ACT_DEVICE_START_DELTA != 0 {
        return Err(DecodeError::Invalid { what: "Activity device-start flag without device times", found: flags });
    }
    if flags & F_ACT_ALLOCATIONS != 0 {
        if flags & F_ACT_SAME_ALLOCATIONS != 0 {
            if st.allocations.is_empty() {
                return Err(DecodeError::Invalid {
                    what: "Activity same-allocations flag with none before",
                    found: flags,
                });
            }
            a.allocations = st.allocations.clone();
        } else {
            a.allocations = decode_allocations(c)?;
            remember_allocations(st, &a.allocations);
        }
    } else if flags & F_ACT_SAME_ALLOCATIONS != 0 {
        return Err(DecodeError::Invalid { what: "Activity same-allocations flag without allocations", found: flags });
    }
    st.ts = ts;
    st.correlation = correlation;
    st.queue = queue;
    st.device = device;
    sink.put(Record::Activity(a));
    Ok(())
}
