//! Ring entries: the compact form of one record between an application thread and the writer.
//!
//! An entry is a run of `u64` words pushed into the thread's ring at once (one Release store), so
//! the writer never sees half an entry:
//!
//! ```text
//! word 0   header: words (bits 0..16, header included) | tag (16..24) | phase (24..32) | op (32..64)
//! word 1   host timestamp (CLOCK_MONOTONIC ns)
//! word 2   correlation id
//! word 3.. the body, per tag (below)
//! ```
//!
//! The tag is the core `Kind` value (1..=16), or [`TAG_RAW`] for a backend's raw layer. Strings
//! are already interned (`StrId` values), so the writer turns an entry into a record without
//! looking anything up but the operation table. Bodies:
//!
//! | tag | body |
//! |---|---|
//! | API kinds | the phase byte holds flags ([`API_RESULT`], [`API_LONG`], [`API_EXTERNAL`]); end − start (low 32) \| result as `u32` << 32, or with `API_LONG` start and result in two words; the external correlation id if `API_EXTERNAL`; args... |
//! | KERNEL_DISPATCH | queue, device, name, kernel, work_dim, global[3], local[3], device start, device end, then 3 words per allocation: base, size, arg_index (low 32) \| memory type << 32 |
//! | MEMORY_COPY | queue, device, bytes, direction \| src type << 8 \| dst type << 16, device start, device end |
//! | MEMORY_FILL | queue, device, bytes, device start, device end |
//! | SYNC | object, event count, queue, device, device start, device end |
//! | QUEUE | queue, device, context, flags |
//! | DEVICE | handle, parent, name, device type |
//! | MEMORY_ALLOC | ptr, size, memory type, device |
//! | CODE_OBJECT | handle, program, name, size |
//! | TASK_GRAPH | node, source, target, name, event, queue |
//! | MARKER | message, range id |
//! | COUNTER | counter, device, value, name, unit |
//! | RAW | the backend's words ([`crate::RawLayer`]) |

use std::mem::MaybeUninit;

use offtrace_core::{Kind, sync_op};
use offtrace_format::{
    ActivityRef, ApiCallRef, CodeObjectRecord, CopyDirection, CounterDef, CounterSample, DeviceRecord,
    KernelAllocation, MarkerRecord, MemoryRecord, MemoryType, QueueRecord, Record, StrId, SyncRecord, TaskGraphRecord,
    phase,
};

/// Largest entry, header included (a kernel dispatch with [`MAX_ALLOCATIONS`] allocations).
pub const MAX_ENTRY_WORDS: usize = 128;
/// Words before the body.
pub const HEAD_WORDS: usize = 3;
/// Allocations kept per kernel dispatch (more are cut, and the cut is not counted).
pub const MAX_ALLOCATIONS: usize = (MAX_ENTRY_WORDS - HEAD_WORDS - KERNEL_FIXED) / 3;
/// Words of a kernel dispatch's body before its allocation properties.
pub(crate) const KERNEL_FIXED: usize = 13;
/// The tag of a raw-layer entry.
pub const TAG_RAW: u8 = 0xf0;
/// API entries (their phase byte is free: the exit is the only phase pushed): the call has a result.
pub(crate) const API_RESULT: u8 = 1;
/// API entries: the call took 2^32 ns or more (or has no start): start and result take a word each.
pub(crate) const API_LONG: u8 = 2;
/// API entries: an external correlation id follows.
pub(crate) const API_EXTERNAL: u8 = 4;

#[inline(always)]
pub(crate) fn header(words: usize, tag: u8, phase: u8, op: u32) -> u64 {
    words as u64 | (u64::from(tag) << 16) | (u64::from(phase) << 24) | (u64::from(op) << 32)
}

/// `(words, tag, phase, op)` of a header word.
#[inline]
pub(crate) fn parse_header(h: u64) -> (usize, u8, u8, u32) {
    ((h & 0xffff) as usize, (h >> 16) as u8, (h >> 24) as u8, (h >> 32) as u32)
}

fn memory_type(v: u64) -> MemoryType {
    MemoryType::from_u8(v as u8).unwrap_or_default()
}

fn direction(v: u64) -> CopyDirection {
    CopyDirection::from_u8(v as u8).unwrap_or_default()
}

fn str_id(v: u64) -> StrId {
    StrId(v as u32)
}

/// Writes an API call's body into `out` (room for 3 words + the arguments); returns the flags
/// for the phase byte and the words written. The compact form: the duration and the result share
/// a word, the external id only when there is one, so most calls take 1 + arguments words.
#[inline]
pub(crate) fn api_body(
    out: &mut [MaybeUninit<u64>],
    start: u64,
    end: u64,
    result: Option<i32>,
    external: u64,
    args: &[u64],
) -> (u8, usize) {
    let mut flags = 0;
    let result = match result {
        Some(r) => {
            flags |= API_RESULT;
            u64::from(r as u32)
        }
        None => 0,
    };
    let duration = end.wrapping_sub(start);
    let mut len = if duration <= u64::from(u32::MAX) {
        out[0].write(duration | (result << 32));
        1
    } else {
        flags |= API_LONG;
        out[0].write(start);
        out[1].write(result);
        2
    };
    if external != 0 {
        flags |= API_EXTERNAL;
        out[len].write(external);
        len += 1;
    }
    out[len..len + args.len()].write_copy_of_slice(args);
    (flags, len + args.len())
}

/// Words of an API call's body ([`api_body`]) for these fields, computed before it is written
/// (the recorder reserves exactly this room in the ring).
#[inline(always)]
pub(crate) fn api_body_len(start: u64, end: u64, external: u64, args: usize) -> usize {
    let time = if end.wrapping_sub(start) <= u64::from(u32::MAX) { 1 } else { 2 };
    time + usize::from(external != 0) + args
}

/// A task-graph entry as its record (the writer's fast path: no [`Record`]); `None` for other
/// tags or a short entry.
#[inline]
pub(crate) fn decode_task_graph(
    tid: u32,
    tag: u8,
    ph: u8,
    op: u32,
    ts: u64,
    correlation: u64,
    body: &[u64],
) -> Option<TaskGraphRecord> {
    if u32::from(tag) != Kind::TaskGraph as u32 {
        return None;
    }
    let &[node, source, target, name, event, queue, ..] = body else { return None };
    Some(TaskGraphRecord {
        op,
        phase: ph,
        tid,
        ts,
        correlation,
        node,
        source,
        target,
        name: str_id(name),
        event,
        queue,
    })
}

/// An API call entry as its record, the arguments borrowed from the entry (the writer's fast
/// path: no [`Record`], no argument copy); `None` when `tag` is not an API kind or the entry is
/// too short. `flags` is the entry's phase byte.
#[inline]
pub(crate) fn decode_api_call(
    tid: u32,
    tag: u8,
    flags: u8,
    op: u32,
    ts: u64,
    correlation: u64,
    body: &[u64],
) -> Option<ApiCallRef<'_>> {
    let kind = Kind::from_u32(u32::from(tag)).filter(|k| k.is_api())?;
    let (start, result, rest) = if flags & API_LONG != 0 {
        let [start, result, rest @ ..] = body else { return None };
        (*start, *result, rest)
    } else {
        let [packed, rest @ ..] = body else { return None };
        (ts.wrapping_sub(packed & u64::from(u32::MAX)), packed >> 32, rest)
    };
    let (external, args) = if flags & API_EXTERNAL != 0 {
        let [external, args @ ..] = rest else { return None };
        (*external, args)
    } else {
        (0, rest)
    };
    Some(ApiCallRef {
        kind: kind as u32,
        op,
        tid,
        start,
        end: ts,
        correlation,
        external,
        args,
        result: (flags & API_RESULT != 0).then_some(i64::from(result as u32 as i32)),
    })
}

/// A device activity entry (kernel dispatch, copy, fill, barrier on a queue) as its record, the
/// allocation properties in `allocations` (the writer's fast path: no [`Record`], no `Vec`);
/// `None` for other kinds or a malformed entry.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_activity<'a>(
    tid: u32,
    tag: u8,
    ph: u8,
    op: u32,
    ts: u64,
    correlation: u64,
    body: &[u64],
    allocations: &'a mut [KernelAllocation; MAX_ALLOCATIONS],
) -> Option<ActivityRef<'a>> {
    let kind = Kind::from_u32(u32::from(tag))?;
    let b = |i: usize| body.get(i).copied();
    let base = ActivityRef { kind: kind as u32, op, phase: ph, tid, ts, correlation, ..ActivityRef::default() };
    Some(match kind {
        Kind::KernelDispatch => {
            // The fixed part by one pattern (one length test, not one per field).
            const { assert!(KERNEL_FIXED == 13) };
            let &[
                queue,
                device,
                name,
                kernel,
                work_dim,
                g0,
                g1,
                g2,
                l0,
                l1,
                l2,
                device_start,
                device_end,
                ref rest @ ..,
            ] = body
            else {
                return None;
            };
            let mut n = 0;
            for (slot, a) in allocations.iter_mut().zip(rest.chunks_exact(3)) {
                *slot = KernelAllocation {
                    base: a[0],
                    size: a[1],
                    arg_index: a[2] as u32 as i32,
                    memory_type: memory_type(a[2] >> 32),
                };
                n += 1;
            }
            ActivityRef {
                queue,
                device,
                name: str_id(name),
                kernel,
                work_dim: work_dim as u32,
                global_size: [g0, g1, g2],
                local_size: [l0, l1, l2],
                device_start,
                device_end,
                allocations: &allocations[..n],
                ..base
            }
        }
        Kind::MemoryCopy => {
            let d = b(3)?;
            ActivityRef {
                queue: b(0)?,
                device: b(1)?,
                bytes: b(2)?,
                direction: direction(d),
                src_type: memory_type(d >> 8),
                dst_type: memory_type(d >> 16),
                device_start: b(4)?,
                device_end: b(5)?,
                ..base
            }
        }
        Kind::MemoryFill => {
            ActivityRef { queue: b(0)?, device: b(1)?, bytes: b(2)?, device_start: b(3)?, device_end: b(4)?, ..base }
        }
        // A barrier or marker enqueued on a queue is device activity; waits are host spans
        // (`decode`).
        Kind::Sync if (op == sync_op::BARRIER || op == sync_op::MARKER) && b(2)? != 0 => ActivityRef {
            phase: if ph == phase::COMPLETE { phase::COMPLETE } else { phase::NONE },
            queue: b(2)?,
            device: b(3)?,
            device_start: b(4)?,
            device_end: b(5)?,
            ..base
        },
        _ => return None,
    })
}

/// Turns one typed entry (`tag` is a core kind) into its record; `None` for a malformed entry
/// (too short for its tag) or an unknown tag.
#[inline]
pub(crate) fn decode(tid: u32, tag: u8, ph: u8, op: u32, ts: u64, correlation: u64, body: &[u64]) -> Option<Record> {
    let kind = Kind::from_u32(u32::from(tag))?;
    let b = |i: usize| body.get(i).copied();
    Some(match kind {
        Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi => {
            Record::ApiCall(decode_api_call(tid, tag, ph, op, ts, correlation, body)?.to_api_call())
        }
        Kind::KernelDispatch | Kind::MemoryCopy | Kind::MemoryFill => {
            let mut allocations = [KernelAllocation::default(); MAX_ALLOCATIONS];
            Record::Activity(decode_activity(tid, tag, ph, op, ts, correlation, body, &mut allocations)?.to_activity())
        }
        Kind::Sync => {
            let mut allocations = [KernelAllocation::default(); MAX_ALLOCATIONS];
            match decode_activity(tid, tag, ph, op, ts, correlation, body, &mut allocations) {
                Some(a) => Record::Activity(a.to_activity()),
                None => Record::Sync(SyncRecord {
                    op,
                    phase: ph,
                    tid,
                    ts,
                    correlation,
                    object: b(0)?,
                    event_count: b(1)? as u32,
                }),
            }
        }
        Kind::Queue => Record::Queue(QueueRecord {
            op,
            tid,
            ts,
            correlation,
            queue: b(0)?,
            device: b(1)?,
            context: b(2)?,
            flags: b(3)?,
        }),
        Kind::Device => Record::Device(DeviceRecord {
            op,
            handle: b(0)?,
            parent: b(1)?,
            name: str_id(b(2)?),
            device_type: b(3)? as u8,
        }),
        Kind::MemoryAlloc => Record::Memory(MemoryRecord {
            op,
            tid,
            ts,
            correlation,
            ptr: b(0)?,
            size: b(1)?,
            memory_type: memory_type(b(2)?),
            device: b(3)?,
        }),
        Kind::CodeObject => Record::CodeObject(CodeObjectRecord {
            op,
            phase: ph,
            tid,
            ts,
            correlation,
            handle: b(0)?,
            program: b(1)?,
            name: str_id(b(2)?),
            size: b(3)?,
        }),
        Kind::TaskGraph => Record::TaskGraph(TaskGraphRecord {
            op,
            phase: ph,
            tid,
            ts,
            correlation,
            node: b(0)?,
            source: b(1)?,
            target: b(2)?,
            name: str_id(b(3)?),
            event: b(4)?,
            queue: b(5)?,
        }),
        Kind::Marker => Record::Marker(MarkerRecord {
            op,
            phase: ph,
            tid,
            ts,
            correlation,
            message: str_id(b(0)?),
            range_id: b(1)?,
        }),
        Kind::Counter => {
            if op == offtrace_core::counter_op::DEFINE {
                Record::CounterDef(CounterDef {
                    counter: b(0)?,
                    device: b(1)?,
                    value_type: b(2)? as u8,
                    name: str_id(b(3)?),
                    unit: str_id(b(4)?),
                })
            } else {
                // A value per command is emitted as that command's activity (phase COMPLETE, its
                // correlation); a time series' sample as an instant, whose correlation is only
                // the enclosing call's or a fresh one: no command's, so none on disk.
                let correlation = if ph == phase::COMPLETE { correlation } else { 0 };
                Record::CounterSample(CounterSample { counter: b(0)?, tid, ts, value: b(2)?, correlation })
            }
        }
        Kind::Xpti => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = header(MAX_ENTRY_WORDS, TAG_RAW, phase::COMPLETE, u32::MAX);
        assert_eq!(parse_header(h), (MAX_ENTRY_WORDS, TAG_RAW, phase::COMPLETE, u32::MAX));
        const { assert!(MAX_ALLOCATIONS >= 32) };
    }

    #[test]
    fn short_entries_are_refused() {
        assert_eq!(decode(1, Kind::UrApi as u8, 0, 7, 10, 1, &[]), None);
        assert_eq!(decode(1, Kind::UrApi as u8, API_LONG, 7, 10, 1, &[1]), None);
        assert_eq!(decode(1, Kind::UrApi as u8, API_EXTERNAL, 7, 10, 1, &[1]), None);
        assert_eq!(decode(1, Kind::KernelDispatch as u8, 0, 0, 10, 1, &[0; 12]), None);
        assert_eq!(decode(1, 0, 0, 0, 10, 1, &[0; 12]), None);
        assert_eq!(decode(1, Kind::Xpti as u8, 0, 0, 10, 1, &[0; 12]), None);
    }

    /// Every shape of the compact API body decodes to the call it was written from: short and
    /// long (or unknown-start) durations, with and without result and external id.
    #[test]
    #[allow(unsafe_code)] // reads the words back out of the `MaybeUninit` body
    fn api_bodies_round_trip() {
        let args = [0x5555_0000_2000, 7, u64::MAX];
        let end = 5_000_000_000_u64;
        for start in [end - 120, end, end - u64::from(u32::MAX), end - u64::from(u32::MAX) - 1, 0, end + 5] {
            for result in [None, Some(0), Some(-5), Some(i32::MIN), Some(i32::MAX)] {
                for external in [0, 42, u64::MAX] {
                    let mut w = [MaybeUninit::new(0u64); 3 + 3];
                    let (flags, n) = api_body(&mut w, start, end, result, external, &args);
                    assert_eq!(n, api_body_len(start, end, external, args.len()));
                    // SAFETY: every word was initialized (zero) above.
                    let w: Vec<u64> = w.iter().map(|x| unsafe { x.assume_init() }).collect();
                    let a = decode_api_call(9, Kind::OpenclApi as u8, flags, 59, end, 77, &w[..n]).expect("decodes");
                    assert_eq!((a.start, a.end, a.external, a.args), (start, end, external, &args[..]));
                    assert_eq!(a.result, result.map(i64::from));
                    assert_eq!((a.kind, a.op, a.tid, a.correlation), (Kind::OpenclApi as u32, 59, 9, 77));
                }
            }
        }
    }

    #[test]
    fn barriers_on_a_queue_are_activity_and_waits_are_sync() {
        let barrier = decode(1, Kind::Sync as u8, 0, sync_op::BARRIER, 10, 5, &[0, 0, 0x30, 0x40, 0, 0]);
        assert!(matches!(barrier, Some(Record::Activity(offtrace_format::Activity { queue: 0x30, device: 0x40, .. }))));
        let marker = decode(1, Kind::Sync as u8, 0, sync_op::MARKER, 10, 5, &[0, 0, 0x30, 0x40, 0, 0]);
        assert!(matches!(marker, Some(Record::Activity(offtrace_format::Activity { op: 2, queue: 0x30, .. }))));
        let wait = decode(1, Kind::Sync as u8, 1, sync_op::WAIT, 10, 5, &[0x99, 2, 0, 0, 0, 0]);
        assert!(matches!(wait, Some(Record::Sync(SyncRecord { object: 0x99, event_count: 2, .. }))));
    }
}
