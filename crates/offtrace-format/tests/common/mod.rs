//! Test-only generators: a deterministic, SYCL/UR-like record sequence (for the size
//! measurement and the checked-in fixture) and helpers shared by the integration tests.
#![allow(dead_code, clippy::field_reassign_with_default, clippy::explicit_counter_loop)]

use offtrace_format::*;

/// xorshift64*: deterministic across platforms and Rust versions (the fixture depends on it).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub const TICKS_PER_SECOND: f64 = 2.5e9;
pub const START_TICKS: u64 = 1_000_000_000_000;
pub const START_MONOTONIC_NS: u64 = 400_000_000_000;

pub fn tsc_header() -> TraceHeader {
    let mut h = TraceHeader::tsc(TICKS_PER_SECOND, START_TICKS, START_MONOTONIC_NS, 1_763_000_000_000_000_000);
    h.pid = 4242;
    h
}

// XPTI trace point types as the SYCL runtime uses them.
const NODE_CREATE: u16 = 0x0002;
const TASK_BEGIN: u16 = 0x0006;
const TASK_END: u16 = 0x0007;
const WAIT_BEGIN: u16 = 0x0010;
const WAIT_END: u16 = 0x0011;
const FUNCTION_WITH_ARGS_BEGIN: u16 = 0x0016;
const FUNCTION_WITH_ARGS_END: u16 = 0x0017;
const SIGNAL: u16 = 0x0019;

const UR_STREAM: u8 = 1;
const SYCL_STREAM: u8 = 2;

struct UrFn {
    id: u32,
    name: StrId,
}

/// A SYCL-like workload: kernels submitted in a loop on one queue, each preceded by argument
/// setting, occasionally a USM copy and a wait, as `ur.call` begin/end pairs with their
/// arguments plus `sycl` node/task notifications. Notification `ts` are TSC ticks.
pub fn synthetic_sycl_trace(kernels: usize, seed: u64) -> Vec<Record> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let s = |id: u32| StrId(id);
    out.push(Record::Info { key: "pid".into(), value: "4242".into() });
    out.push(Record::Info { key: "command".into(), value: "python w4.py".into() });
    out.push(Record::ClockSync {
        ticks: START_TICKS,
        monotonic_ns: START_MONOTONIC_NS,
        realtime_ns: 1_763_000_000_000_000_000,
    });
    let names = [
        "ur.call",
        "sycl",
        "1.0",
        "urKernelSetArgPointer",
        "urKernelSetArgValue",
        "urEnqueueKernelLaunch",
        "urEventRelease",
        "urEnqueueUSMMemcpy",
        "urEventWait",
        "urQueueFinish",
        "command_group_node",
        "queue.wait",
        "vector_add",
        "matmul",
        "reduce",
        "w4.py",
        "sycl_device",
        "kernel_name",
        "queue_id",
        "main",
    ];
    for (i, t) in names.iter().enumerate() {
        out.push(Record::String { id: s(i as u32 + 1), text: (*t).into() });
    }
    out.push(Record::Stream { id: UR_STREAM, name: s(1), major: 1, minor: 0, version: s(3) });
    out.push(Record::Stream { id: SYCL_STREAM, name: s(2), major: 1, minor: 0, version: s(3) });
    let main_tid = 4242u32;
    let worker_tid = 4251u32;
    out.push(Record::Thread { tid: main_tid, name: s(20) });
    out.push(Record::Thread { tid: worker_tid, name: StrId(0) });
    for k in 0..3u32 {
        out.push(Record::Payload { id: PayloadId(k + 1), name: s(13 + k), file: s(16), line: 40 + k * 7, column: 9 });
        out.push(Record::Object { id: ObjectId(k + 1), value_type: ValueType::String, bytes: b"cpu".to_vec() });
        out.push(Record::Object {
            id: ObjectId(k + 11),
            value_type: ValueType::UnsignedInteger,
            bytes: (k as u64).to_le_bytes().to_vec(),
        });
        out.push(Record::MetadataSet {
            id: MetadataSetId(k + 1),
            items: vec![(s(17), ObjectId(k + 1)), (s(19), ObjectId(k + 11))],
        });
    }
    let set_arg_ptr = UrFn { id: 35, name: s(4) };
    let set_arg_val = UrFn { id: 34, name: s(5) };
    let launch = UrFn { id: 71, name: s(6) };
    let ev_release = UrFn { id: 57, name: s(7) };
    let memcpy = UrFn { id: 101, name: s(8) };
    let ev_wait = UrFn { id: 55, name: s(9) };
    let q_finish = UrFn { id: 63, name: s(10) };

    let queue = 0x5600_2a31_9e40u64;
    let kernel_handles = [0x5600_2a3c_1100u64, 0x5600_2a3c_5a80, 0x5600_2a3d_0f20];
    let usm = [0x7f3a_c800_0000u64, 0x7f3a_c840_0000, 0x7f3a_c880_0000];
    let stack = 0x7ffd_5e2a_1c00u64;
    let mut ticks = START_TICKS + 50_000;
    let correlation = std::cell::Cell::new(1000u64);
    let mut event_instance = 0u64;
    let mut ur_event = 0x5600_2b00_0000u64;
    let mut pending_events: Vec<u64> = Vec::new();

    for i in 0..kernels {
        let k = (i % 3) as u32;
        let uid = 0x9e37_79b9_0000_0000u64 ^ (u64::from(k) << 20) ^ 0x1234;
        event_instance += 1;
        let node = EventInfo {
            uid,
            instance_id: event_instance,
            event_type: 1,
            activity_type: 1,
            source_id: 0,
            target_id: 0,
            payload: PayloadId(k + 1),
            metadata: MetadataSetId(k + 1),
        };
        let sycl = |ticks: u64, trace_type: u16, ud: UserData| {
            Record::from(Notification {
                ts: ticks,
                tid: main_tid,
                stream: SYCL_STREAM,
                trace_type,
                instance: event_instance,
                parent: None,
                event: Some(node),
                user_data: ud,
                stash: None,
                universal_id: uid,
            })
        };
        if i < 3 {
            out.push(sycl(ticks, NODE_CREATE, UserData::Str(s(11))));
            ticks += 800 + rng.below(400);
        }
        out.push(sycl(ticks, TASK_BEGIN, UserData::Str(s(11))));
        ticks += 300 + rng.below(300);

        let call = |out: &mut Vec<Record>, ticks: &mut u64, f: &UrFn, args: &[u64], outs: &[(u8, u64)], dur: u64| {
            correlation.set(correlation.get() + 1);
            let instance = correlation.get();
            let mut a = ArgBlock::default();
            a.len = args.len() as u8;
            a.values[..args.len()].copy_from_slice(args);
            let mut o = OutValues::default();
            o.len = outs.len() as u8;
            o.values[..outs.len()].copy_from_slice(outs);
            let n = |ts, trace_type, result, outs| {
                Record::from(Notification {
                    ts,
                    tid: main_tid,
                    stream: UR_STREAM,
                    trace_type,
                    instance,
                    parent: None,
                    event: None,
                    user_data: UserData::FunctionWithArgs { function_id: f.id, name: f.name, result, args: a, outs },
                    stash: None,
                    universal_id: uid,
                })
            };
            out.push(n(*ticks, FUNCTION_WITH_ARGS_BEGIN, None, OutValues::default()));
            *ticks += dur;
            out.push(n(*ticks, FUNCTION_WITH_ARGS_END, Some(0), o));
            *ticks += 200 + dur / 8;
        };
        let kh = kernel_handles[k as usize];
        let sp = stack - 0x40 * rng.below(4);
        call(&mut out, &mut ticks, &set_arg_ptr, &[kh, 0, 0, usm[0]], &[], 900 + rng.below(300));
        call(&mut out, &mut ticks, &set_arg_ptr, &[kh, 1, 0, usm[1]], &[], 900 + rng.below(300));
        call(&mut out, &mut ticks, &set_arg_ptr, &[kh, 2, 0, usm[2]], &[], 900 + rng.below(300));
        call(&mut out, &mut ticks, &set_arg_val, &[kh, 3, 8, 0, sp + 0x18], &[], 800 + rng.below(200));
        let wait_list = if pending_events.is_empty() { 0 } else { 1 };
        ur_event += 0x80 + 0x40 * rng.below(3);
        call(
            &mut out,
            &mut ticks,
            &launch,
            &[queue, kh, 1, sp + 0x20, sp + 0x28, 0, wait_list, if wait_list == 1 { sp + 0x30 } else { 0 }, sp + 0x38],
            &[(8, ur_event)],
            9_000 + rng.below(20_000),
        );
        pending_events.push(ur_event);
        if pending_events.len() > 2 {
            let e = pending_events.remove(0);
            call(&mut out, &mut ticks, &ev_release, &[e], &[], 400 + rng.below(200));
        }
        out.push(sycl(ticks, TASK_END, UserData::Str(s(11))));
        ticks += 2_000 + rng.below(5_000);
        if i % 8 == 7 {
            ur_event += 0x80;
            call(
                &mut out,
                &mut ticks,
                &memcpy,
                &[queue, 0, usm[2], sp - 0x1000, 4096, 0, 0, sp + 0x40],
                &[(7, ur_event)],
                20_000 + rng.below(30_000),
            );
            let wait = EventInfo {
                uid: 0x5151_0000 + i as u64,
                instance_id: 1,
                event_type: 8,
                activity_type: 2,
                ..EventInfo::default()
            };
            let w = |ticks, trace_type| {
                Record::from(Notification {
                    ts: ticks,
                    tid: main_tid,
                    stream: SYCL_STREAM,
                    trace_type,
                    instance: correlation.get(),
                    event: Some(wait),
                    user_data: UserData::Str(s(12)),
                    ..Notification::default()
                })
            };
            out.push(w(ticks, WAIT_BEGIN));
            call(&mut out, &mut ticks, &ev_wait, &[1, sp + 0x48], &[], 30_000 + rng.below(100_000));
            call(&mut out, &mut ticks, &q_finish, &[queue], &[], 5_000 + rng.below(5_000));
            out.push(w(ticks, WAIT_END));
            // Host-side completion on a runtime worker thread.
            out.push(Record::from(Notification {
                ts: ticks + 10,
                tid: worker_tid,
                stream: SYCL_STREAM,
                trace_type: SIGNAL,
                instance: correlation.get(),
                user_data: UserData::Signal { ur_event },
                ..Notification::default()
            }));
        }
        if i % 1000 == 999 {
            // The agent re-calibrates about once a second.
            out.push(Record::ClockSync {
                ticks,
                monotonic_ns: convert(ticks, START_TICKS, START_MONOTONIC_NS) + 3,
                realtime_ns: 1_763_000_000_000_000_000 + ticks,
            });
        }
    }
    out
}

/// Independent implementation of the reader's tick conversion.
pub fn convert(ticks: u64, sync_ticks: u64, sync_ns: u64) -> u64 {
    let delta = ticks as i128 - sync_ticks as i128;
    let ns = (delta as f64 * (1e9 / TICKS_PER_SECOND)).round() as i128;
    (sync_ns as i128 + ns).clamp(0, u64::MAX as i128) as u64
}

/// What the reader should return for `records` written under [`tsc_header`]: notification
/// ticks converted to CLOCK_MONOTONIC ns, and the End record the writer appends.
pub fn expected_after_read(records: &[Record]) -> Vec<Record> {
    let (mut st, mut sn) = (START_TICKS, START_MONOTONIC_NS);
    let mut out = Vec::with_capacity(records.len() + 1);
    for r in records {
        match r {
            Record::ClockSync { ticks, monotonic_ns, .. } => {
                st = *ticks;
                sn = *monotonic_ns;
                out.push(r.clone());
            }
            other => {
                let mut r = other.clone();
                r.map_host_times(|t| convert(t, st, sn));
                out.push(r);
            }
        }
    }
    out.push(Record::End { records: records.len() as u64, drops: 0 });
    out
}

/// Writes `records` into an in-memory trace, flushing a chunk every `flush_every` records.
pub fn write_trace(header: &TraceHeader, records: &[Record], chunk_bytes: usize, flush_every: usize) -> Vec<u8> {
    let mut w = TraceWriter::with_chunk_size(Vec::new(), header, chunk_bytes).expect("header");
    for (i, r) in records.iter().enumerate() {
        w.write(r).expect("write");
        if flush_every > 0 && i % flush_every == flush_every - 1 {
            w.flush_chunk().expect("flush");
        }
    }
    w.finish().expect("finish")
}

/// Reads everything: the records before the first error, and that error.
pub fn read_all(bytes: &[u8]) -> (Vec<Record>, Option<ReadError>, bool) {
    let mut r = match TraceReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e), false),
    };
    let mut records = Vec::new();
    let mut err = None;
    for item in r.by_ref() {
        match item {
            Ok(rec) => records.push(rec),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert!(r.next().is_none(), "the iterator ends after an error or the end marker");
    (records, err, r.finished_cleanly())
}
