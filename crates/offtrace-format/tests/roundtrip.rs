//! Property tests: any sequence of records survives writer + reader unchanged (notification
//! timestamps converted as documented), whatever the chunking.

mod common;
use common::*;
use offtrace_format::*;
use proptest::prelude::*;

fn str_id() -> impl Strategy<Value = StrId> {
    prop_oneof![Just(StrId(0)), (1u32..50).prop_map(StrId), any::<u32>().prop_map(StrId)]
}

/// Small pools make the "same as previous" encodings fire; `any` covers the limits.
fn u64_value() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 1u64..300, Just(u64::MAX), any::<u64>(), (0x5600_0000_0000u64..0x5600_0000_0100)]
}

fn event_info() -> impl Strategy<Value = EventInfo> {
    prop_oneof![
        Just(EventInfo { uid: 7, instance_id: 1, event_type: 1, activity_type: 1, ..EventInfo::default() }),
        Just(EventInfo::default()),
        (u64_value(), u64_value(), any::<u16>(), any::<u16>(), u64_value(), u64_value(), any::<u32>(), any::<u32>())
            .prop_map(|(uid, instance_id, event_type, activity_type, source_id, target_id, p, m)| EventInfo {
                uid,
                instance_id,
                event_type,
                activity_type,
                source_id,
                target_id,
                payload: PayloadId(p),
                metadata: MetadataSetId(m),
            }),
    ]
}

fn arg_block() -> impl Strategy<Value = ArgBlock> {
    prop_oneof![
        Just({
            let mut a = ArgBlock { len: 3, ..ArgBlock::default() };
            a.values[..3].copy_from_slice(&[0x5600_1000, 2, 0]);
            a
        }),
        proptest::collection::vec(u64_value(), 0..=MAX_ARGS).prop_map(|v| {
            let mut a = ArgBlock { len: v.len() as u8, ..ArgBlock::default() };
            a.values[..v.len()].copy_from_slice(&v);
            a
        }),
    ]
}

fn out_values() -> impl Strategy<Value = OutValues> {
    proptest::collection::vec((any::<u8>(), u64_value()), 0..=MAX_OUTS).prop_map(|v| {
        let mut o = OutValues { len: v.len() as u8, ..OutValues::default() };
        o.values[..v.len()].copy_from_slice(&v);
        o
    })
}

fn user_data() -> impl Strategy<Value = UserData> {
    prop_oneof![
        Just(UserData::None),
        str_id().prop_map(UserData::Str),
        (prop_oneof![Just(3u32), any::<u32>()], str_id(), any::<Option<i32>>(), arg_block(), out_values()).prop_map(
            |(function_id, name, result, args, outs)| UserData::FunctionWithArgs {
                function_id,
                name,
                result,
                args,
                outs
            }
        ),
        (u64_value(), u64_value(), u64_value(), u64_value()).prop_map(|(a, b, c, d)| UserData::MemAlloc {
            mem_object: a,
            alloc_pointer: b,
            alloc_size: c,
            guard_zone: d
        }),
        (u64_value(), u64_value(), str_id(), any::<u32>(), any::<u32>(), [u64_value(), u64_value(), u64_value()])
            .prop_map(|(user_object, host_object, element_type, element_size, dim, range)| UserData::OffloadBuffer {
                user_object,
                host_object,
                element_type,
                element_size,
                dim,
                range
            }),
        (u64_value(), u64_value())
            .prop_map(|(user_object, mem_object)| UserData::Association { user_object, mem_object }),
        (u64_value(), u64_value(), any::<u32>(), any::<u32>())
            .prop_map(|(buffer, accessor, target, mode)| UserData::Accessor { buffer, accessor, target, mode }),
        u64_value().prop_map(|ur_event| UserData::Signal { ur_event }),
        u64_value().prop_map(UserData::Pointer),
    ]
}

fn notification() -> impl Strategy<Value = Notification> {
    (
        prop_oneof![1_000_000u64..1_000_100, any::<u64>()],
        prop_oneof![1u32..4, any::<u32>()],
        any::<u8>(),
        any::<u16>(),
        u64_value(),
        proptest::option::of(event_info()),
        proptest::option::of(event_info()),
        user_data(),
        proptest::option::of((str_id(), u64_value())),
        u64_value(),
    )
        .prop_map(|(ts, tid, stream, trace_type, instance, parent, event, user_data, stash, universal_id)| {
            Notification { ts, tid, stream, trace_type, instance, parent, event, user_data, stash, universal_id }
        })
}

fn kernel_dispatch() -> impl Strategy<Value = KernelDispatch> {
    let memory_type = (0u8..4).prop_map(|t| MemoryType::from_u8(t).unwrap_or_default());
    let allocation = (u64_value(), u64_value(), prop_oneof![Just(-1i32), 0i32..12, any::<i32>()], memory_type)
        .prop_map(|(base, size, arg_index, memory_type)| KernelAllocation { base, size, arg_index, memory_type });
    (
        (any::<u32>(), prop_oneof![1_000_000u64..1_000_100, any::<u64>()], u64_value(), u64_value(), str_id()),
        (u64_value(), u64_value(), prop_oneof![1u32..=3, any::<u32>()]),
        ([u64_value(), u64_value(), u64_value()], [u64_value(), u64_value(), u64_value()]),
        proptest::collection::vec(allocation, 0..8),
    )
        .prop_map(
            |(
                (tid, ts, correlation, ur_instance, kernel),
                (queue, kernel_handle, work_dim),
                (global_size, local_size),
                allocations,
            )| {
                KernelDispatch {
                    tid,
                    ts,
                    correlation,
                    ur_instance,
                    kernel,
                    queue,
                    kernel_handle,
                    work_dim,
                    global_size,
                    local_size,
                    allocations,
                }
            },
        )
}

fn memory_type() -> impl Strategy<Value = MemoryType> {
    (0u8..4).prop_map(|t| MemoryType::from_u8(t).unwrap_or_default())
}

fn api_args() -> impl Strategy<Value = ApiArgs> {
    prop_oneof![Just(vec![0x5555_0000_1000u64, 1]), proptest::collection::vec(u64_value(), 0..=MAX_API_ARGS),]
        .prop_map(|v| ApiArgs::from_slice(&v))
}

/// Threads and host times that repeat, so the delta and same-thread paths are exercised.
fn tid_ts() -> impl Strategy<Value = (u32, u64)> {
    (prop_oneof![Just(7u32), Just(8), any::<u32>()], prop_oneof![1_000_000u64..1_000_100, any::<u64>()])
}

fn typed_record() -> impl Strategy<Value = Record> {
    let kind = prop_oneof![1u32..=16, any::<u32>()];
    let arg_def = (str_id(), str_id(), any::<u8>(), any::<u8>()).prop_map(|(name, type_name, size, format)| ArgDef {
        name,
        type_name,
        size,
        format,
    });
    let allocation = (u64_value(), u64_value(), any::<i32>(), memory_type())
        .prop_map(|(base, size, arg_index, memory_type)| KernelAllocation { base, size, arg_index, memory_type });
    prop_oneof![
        (kind.clone(), str_id()).prop_map(|(kind, name)| Record::KindDef { kind, name }),
        (
            tid_ts(),
            kind.clone(),
            0u32..4,
            (u64_value(), u64_value(), u64_value()),
            api_args(),
            proptest::option::of(any::<i64>())
        )
            .prop_map(|((tid, start), kind, op, (dur, correlation, external), args, result)| {
                Record::ApiCall(ApiCall {
                    kind,
                    op,
                    tid,
                    start,
                    end: start.wrapping_add(dur),
                    correlation,
                    external,
                    args,
                    result,
                })
            }),
        (kind.clone(), any::<u32>(), str_id(), proptest::collection::vec(arg_def, 0..6))
            .prop_map(|(kind, op, name, args)| Record::OperationDef(OperationDef { kind, op, name, args })),
        (
            tid_ts(),
            kind.clone(),
            0u32..4,
            (u64_value(), u64_value(), u64_value()),
            api_args(),
            proptest::option::of(any::<i64>())
        )
            .prop_map(|((tid, start), kind, op, (dur, correlation, external), args, result)| {
                Record::ApiCall(ApiCall {
                    kind,
                    op,
                    tid,
                    start,
                    end: start.wrapping_add(dur),
                    correlation,
                    external,
                    args,
                    result,
                })
            }),
        (
            (tid_ts(), kind.clone(), any::<u32>(), prop_oneof![Just(phase::NONE), Just(phase::COMPLETE)], u64_value()),
            (
                prop_oneof![Just(0x30u64), u64_value()],
                prop_oneof![Just(0x40u64), u64_value()],
                str_id(),
                u64_value(),
                any::<u32>()
            ),
            ([u64_value(), u64_value(), u64_value()], [u64_value(), u64_value(), u64_value()], u64_value()),
            ((0u8..5).prop_map(|d| CopyDirection::from_u8(d).unwrap_or_default()), memory_type(), memory_type()),
            (u64_value(), u64_value(), proptest::collection::vec(allocation, 0..4)),
        )
            .prop_map(
                |(
                    ((tid, ts), kind, op, phase, correlation),
                    (queue, device, name, kernel, work_dim),
                    (global_size, local_size, bytes),
                    (direction, src_type, dst_type),
                    (device_start, device_end, allocations),
                )| {
                    Record::Activity(Activity {
                        kind,
                        op,
                        phase,
                        tid,
                        ts,
                        correlation,
                        queue,
                        device,
                        name,
                        kernel,
                        work_dim,
                        global_size,
                        local_size,
                        bytes,
                        direction,
                        src_type,
                        dst_type,
                        device_start,
                        device_end,
                        allocations,
                    })
                }
            ),
        (tid_ts(), any::<u32>(), (u64_value(), u64_value(), u64_value(), u64_value(), u64_value())).prop_map(
            |((tid, ts), op, (correlation, queue, device, context, flags))| {
                Record::Queue(QueueRecord { op, tid, ts, correlation, queue, device, context, flags })
            }
        ),
        (any::<u32>(), u64_value(), u64_value(), str_id(), any::<u8>()).prop_map(
            |(op, handle, parent, name, device_type)| Record::Device(DeviceRecord {
                op,
                handle,
                parent,
                name,
                device_type
            })
        ),
        (tid_ts(), any::<u32>(), (u64_value(), u64_value(), u64_value(), memory_type(), u64_value())).prop_map(
            |((tid, ts), op, (correlation, ptr, size, memory_type, device))| {
                Record::Memory(MemoryRecord { op, tid, ts, correlation, ptr, size, memory_type, device })
            }
        ),
        (tid_ts(), any::<u32>(), any::<u8>(), (u64_value(), u64_value(), u64_value(), str_id(), u64_value())).prop_map(
            |((tid, ts), op, phase, (correlation, handle, program, name, size))| {
                Record::CodeObject(CodeObjectRecord { op, phase, tid, ts, correlation, handle, program, name, size })
            }
        ),
        (
            tid_ts(),
            any::<u32>(),
            any::<u8>(),
            (u64_value(), u64_value(), u64_value(), u64_value(), str_id(), u64_value(), u64_value())
        )
            .prop_map(|((tid, ts), op, phase, (correlation, node, source, target, name, event, queue))| {
                Record::TaskGraph(TaskGraphRecord {
                    op,
                    phase,
                    tid,
                    ts,
                    correlation,
                    node,
                    source,
                    target,
                    name,
                    event,
                    queue,
                })
            }),
        (tid_ts(), any::<u32>(), any::<u8>(), (u64_value(), u64_value(), any::<u32>())).prop_map(
            |((tid, ts), op, phase, (correlation, object, event_count))| {
                Record::Sync(SyncRecord { op, phase, tid, ts, correlation, object, event_count })
            }
        ),
        (tid_ts(), any::<u32>(), any::<u8>(), (u64_value(), str_id(), u64_value())).prop_map(
            |((tid, ts), op, phase, (correlation, message, range_id))| {
                Record::Marker(MarkerRecord { op, phase, tid, ts, correlation, message, range_id })
            }
        ),
        (u64_value(), u64_value(), str_id(), str_id(), any::<u8>()).prop_map(
            |(counter, device, name, unit, value_type)| Record::CounterDef(CounterDef {
                counter,
                device,
                name,
                unit,
                value_type
            })
        ),
        (tid_ts(), u64_value(), u64_value(), u64_value()).prop_map(|((tid, ts), counter, value, correlation)| {
            Record::CounterSample(CounterSample { counter, tid, ts, value, correlation })
        }),
        (tid_ts(), kind, any::<u32>(), any::<u8>(), u64_value(), api_args()).prop_map(
            |((tid, ts), kind, op, phase, correlation, values)| {
                Record::Generic(GenericRecord { kind, op, phase, tid, ts, correlation, values })
            }
        ),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    let value_type = (0u8..6).prop_map(ValueType::from_u8);
    prop_oneof![
        6 => notification().prop_map(Record::from),
        1 => (".*", ".*").prop_map(|(key, value)| Record::Info { key, value }),
        1 => (any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(ticks, monotonic_ns, realtime_ns)| Record::ClockSync { ticks, monotonic_ns, realtime_ns }),
        1 => (str_id(), ".*").prop_map(|(id, text)| Record::String { id, text }),
        1 => (any::<u8>(), str_id(), any::<u32>(), any::<u32>(), str_id())
            .prop_map(|(id, name, major, minor, version)| Record::Stream { id, name, major, minor, version }),
        1 => (any::<u32>(), str_id()).prop_map(|(tid, name)| Record::Thread { tid, name }),
        1 => (any::<u32>(), str_id(), str_id(), any::<u32>(), any::<u32>()).prop_map(|(id, name, file, line, column)| {
            Record::Payload { id: PayloadId(id), name, file, line, column }
        }),
        1 => (any::<u32>(), value_type, proptest::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(id, value_type, bytes)| Record::Object { id: ObjectId(id), value_type, bytes }),
        1 => (any::<u32>(), proptest::collection::vec((str_id(), any::<u32>().prop_map(ObjectId)), 0..6))
            .prop_map(|(id, items)| Record::MetadataSet { id: MetadataSetId(id), items }),
        1 => kernel_dispatch().prop_map(Record::from),
        6 => typed_record(),
        1 => (any::<u32>(), any::<u64>()).prop_map(|(tid, count)| Record::Drops { tid, count }),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(records, drops)| Record::End { records, drops }),
    ]
}

/// What the reader returns for `records`: ticks converted under `header`, plus the End record
/// `finish` appends when none was written.
fn expected(header: &TraceHeader, records: &[Record]) -> Vec<Record> {
    let mut out: Vec<Record> = if header.clock == ClockSource::Tsc {
        let mut e = expected_after_read(records);
        e.pop();
        e
    } else {
        records.to_vec()
    };
    if !records.iter().any(|r| matches!(r, Record::End { .. })) {
        let drops = records
            .iter()
            .map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 })
            .fold(0u64, u64::saturating_add);
        out.push(Record::End { records: records.len() as u64, drops });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_records_round_trip(
        records in proptest::collection::vec(record(), 0..120),
        flush_every in 0usize..20,
        chunk_bytes in prop_oneof![Just(1024usize), Just(DEFAULT_CHUNK_BYTES)],
        tsc in any::<bool>(),
    ) {
        let header = if tsc { tsc_header() } else { TraceHeader::monotonic() };
        let bytes = write_trace(&header, &records, chunk_bytes, flush_every);
        let (read, err, clean) = read_all(&bytes);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert!(clean);
        prop_assert_eq!(read, expected(&header, &records));
    }
}

#[test]
fn header_round_trips() {
    let h = tsc_header();
    let bytes = write_trace(&h, &[], 1024, 0);
    let r = TraceReader::new(&bytes[..]).expect("header");
    assert_eq!(*r.header(), h);
}

#[test]
fn open_reads_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.offtrace");
    let records = synthetic_sycl_trace(50, 1);
    std::fs::write(&path, write_trace(&tsc_header(), &records, DEFAULT_CHUNK_BYTES, 100)).expect("write");
    let mut r = TraceReader::open(&path).expect("open");
    let read: Vec<Record> = r.by_ref().collect::<Result<_, _>>().expect("read");
    assert!(r.finished_cleanly());
    assert_eq!(read, expected_after_read(&records));
    let missing = TraceReader::open(dir.path().join("missing"));
    assert!(matches!(missing, Err(ReadError::Open { .. })));
}

#[test]
fn non_canonical_blocks_are_clamped() {
    // `len` beyond the capacity and values beyond `len` are not part of the record.
    let mut args = ArgBlock { len: 200, ..ArgBlock::default() };
    args.values = [9; MAX_ARGS];
    let mut outs = OutValues { len: 9, ..OutValues::default() };
    outs.values = [(1, 2); MAX_OUTS];
    let n = Notification {
        user_data: UserData::FunctionWithArgs { function_id: 1, name: StrId(1), result: Some(-1), args, outs },
        ..Notification::default()
    };
    let bytes = write_trace(&TraceHeader::monotonic(), &[Record::from(n)], 1024, 0);
    let (read, err, _) = read_all(&bytes);
    assert!(err.is_none());
    match &read[0] {
        Record::Notification(n) if let UserData::FunctionWithArgs { args, outs, .. } = &n.user_data => {
            assert_eq!(args.as_slice(), &[9; MAX_ARGS][..]);
            assert_eq!(outs.as_slice(), &[(1, 2); MAX_OUTS][..]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// A counter sample may be earlier than the thread's previous record (a GPU sample written at
/// its own time, decoded a period later): Δts is a signed delta, so it round-trips unchanged.
#[test]
fn counter_sample_earlier_than_the_threads_previous_record() {
    let sample = |ts: u64, v: f64| {
        Record::CounterSample(CounterSample { counter: 7, tid: 3, ts, value: v.to_bits(), correlation: 0 })
    };
    let records =
        vec![sample(5_000_000_000, 1.0), sample(4_997_000_000, 2.0), sample(1, 3.0), sample(5_000_000_001, 4.0)];
    for chunk_bytes in [1024, DEFAULT_CHUNK_BYTES] {
        let header = TraceHeader::monotonic();
        let (read, err, clean) = read_all(&write_trace(&header, &records, chunk_bytes, 0));
        assert!(err.is_none() && clean, "{err:?}");
        assert_eq!(read, expected(&header, &records));
        assert_eq!(read[1], sample(4_997_000_000, 2.0));
    }
}

/// Chunks whose records average at most `store_raw_up_to` bytes are stored without LZ4 (chunk
/// flag 0), larger ones compressed; both read back the same records.
#[test]
fn chunks_of_small_records_are_stored_raw_up_to_the_bound_and_read_the_same() {
    // Chunks of small API calls (a few bytes each) and chunks of long `Info` records, each
    // compressible.
    let call = |i: u64| {
        Record::ApiCall(ApiCall {
            kind: 1,
            op: 3,
            tid: 10,
            start: 1_000 + i * 100,
            end: 1_050 + i * 100,
            correlation: i + 1,
            args: ApiArgs::from_slice(&[0x5555_0000_1000, 64, 1]),
            result: Some(0),
            ..ApiCall::default()
        })
    };
    let info =
        |i: u64| Record::Info { key: "note".into(), value: format!("the same long note again, number {}", i % 4) };
    let chunks: Vec<Vec<Record>> =
        (0..6u64).map(|c| (0..150).map(|i| if c % 2 == 0 { call(c * 1000 + i) } else { info(i) }).collect()).collect();
    let chunk_flags = |bytes: &[u8]| {
        let mut flags = Vec::new();
        let mut at = FILE_HEADER_LEN;
        while at + CHUNK_HEADER_LEN <= bytes.len() && &bytes[at..at + 4] == b"OTCK" {
            let stored = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
            let raw = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().expect("4 bytes")) as usize;
            let count = u32::from_le_bytes(bytes[at + 16..at + 20].try_into().expect("4 bytes")) as usize;
            flags.push((bytes[at + 4], raw, count));
            at += CHUNK_HEADER_LEN + stored;
        }
        flags
    };
    let write = |raw_up_to: usize| {
        let mut w = TraceWriter::with_chunk_size(Vec::new(), &tsc_header(), 1 << 20).expect("header");
        w.store_raw_up_to(raw_up_to);
        for chunk in &chunks {
            for r in chunk {
                w.write(r).expect("write");
            }
            w.flush_chunk().expect("flush");
        }
        w.finish().expect("finish")
    };
    let compressed = write(0);
    // The records' six chunks, then `End`'s (4 bytes: LZ4 cannot shrink it, so raw either way).
    let all = chunk_flags(&compressed);
    assert!(all.len() == 7 && all[..6].iter().all(|&(f, _, _)| f == 1), "{all:?}");
    // A bound between the chunks' smallest and largest bytes per record: some of each.
    let bound = 16;
    let mixed = write(bound);
    let flags = chunk_flags(&mixed);
    assert_eq!(flags.len(), all.len());
    for &(f, raw, n) in &flags[..6] {
        assert_eq!(f == 0, raw <= bound * n, "flags {f}, {raw} bytes, {n} records, bound {bound}");
    }
    assert!(flags.iter().any(|&(f, _, _)| f == 0) && flags.iter().any(|&(f, _, _)| f == 1), "{flags:?}");
    assert!(mixed.len() > compressed.len());
    let (a, err_a, clean_a) = read_all(&compressed);
    let (b, err_b, clean_b) = read_all(&mixed);
    assert!(err_a.is_none() && err_b.is_none() && clean_a && clean_b);
    assert_eq!(a, b);
}
