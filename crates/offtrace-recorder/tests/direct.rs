//! The recorder's two paths write the same records: the services' direct path (the recorder
//! the only consumer of a kind: plain Rust calls, `offtrace_core::set_direct_sink`) and the
//! callback path (a `CallbackRecord` per delivery, taken whenever a tool wants the kind too).
//!
//! One workload with every shape of emit (API calls nested and not, with and without an
//! external id, results and none, instants inside and outside calls, every typed payload, a
//! payload of the wrong kind, an exit without payload, waits, ranges, completions) is recorded
//! once per path; the two traces must hold the same records once the times are set aside and
//! the correlation ids renumbered in order of appearance (both are fresh per run).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use offtrace_core::*;
use offtrace_format::{Record, TraceReader};
use offtrace_recorder::{Config, finish, start_file, subscribe_with};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An API call of `kind` with `args`; `inside` runs between its enter and exit.
fn call(kind: Kind, op: u32, args: &[u64], result: Option<i32>, inside: impl FnOnce()) {
    let mut p = ApiCallPayload::new(op, args);
    let t = emit_enter(kind, op, Payload::api(kind, &p));
    inside();
    if let Some(r) = result {
        p.result = r;
        p.has_result = 1;
    }
    emit_exit(t, Payload::api(kind, &p));
}

/// A one-dimensional launch of 64 items on queue 0x30, named by `name` (interned: static).
fn kernel_on_0x30(name: &'static std::ffi::CStr) -> KernelDispatchPayload {
    KernelDispatchPayload {
        queue: 0x30,
        kernel_name: name.as_ptr(),
        work_dim: 1,
        global_size: [64, 1, 1],
        ..Default::default()
    }
}

/// `kd`'s launch and its completion with device times `(start, end)`, both by interned name.
fn launch_and_complete_interned(kd: &KernelDispatchPayload, correlation: u64, (start, end): (u64, u64)) {
    emit_instant_interned(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(kd));
    let done = KernelDispatchPayload { device_start: start, device_end: end, ..*kd };
    emit_activity_interned(
        Kind::KernelDispatch,
        kernel_dispatch::LAUNCH,
        correlation,
        start,
        end,
        Payload::KernelDispatch(&done),
    );
}

fn workload(ctx: ContextId) {
    let alloc = MemoryAllocPayload { ptr: 0x7000, size: 4096, memory_type: MemoryType::Device, device: 0x40 };
    emit_memory_alloc(&alloc);
    let q = QueuePayload { queue: 0x30, device: 0x40, context: 0x50, flags: 1 };
    emit_instant(Kind::Queue, queue_op::CREATE, Phase::None, Payload::Queue(&q));
    call(Kind::UrApi, 19, &[0x30, 0x3000, 1, 7], Some(0), || {
        let mut kd = KernelDispatchPayload {
            queue: 0x30,
            device: 0x40,
            kernel: 0x99,
            kernel_name: c"vector_add<float>(float*, float const*)".as_ptr(),
            work_dim: 1,
            global_size: [1024, 1, 1],
            local_size: [64, 1, 1],
            ..Default::default()
        };
        kd.kernel_args[0] = 0x7000;
        kd.kernel_args[1] = 5;
        kd.kernel_arg_count = 2;
        emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
        // A nested call with a copy inside it, and a payload of the wrong kind (recorded by
        // neither path).
        call(Kind::UrApi, 20, &[0x30, 0x7000, 0x8000, 256], Some(-5), || {
            let c = MemoryCopyPayload {
                queue: 0x30,
                device: 0x40,
                dst: 0x7000,
                src: 0x8000,
                size: 256,
                direction: CopyDirection::HostToDevice,
                src_type: MemoryType::Host,
                dst_type: MemoryType::Device,
                ..Default::default()
            };
            emit_instant(Kind::MemoryCopy, memory_copy::USM_MEMCPY, Phase::None, Payload::MemoryCopy(&c));
            emit_instant(Kind::MemoryFill, memory_fill::USM_FILL, Phase::None, Payload::MemoryCopy(&c));
        });
    });
    // An external id for the recorder's context, then a call without a result, then a call of
    // another API kind with a long argument list.
    push_external_correlation_id(ctx, 0, 0xe77).unwrap();
    call(Kind::UrApi, 21, &[1, 2, 3], None, || {});
    pop_external_correlation_id(ctx, 0).unwrap();
    call(Kind::OpenclApi, 3, &[9; 12], Some(0), || {});
    // An exit without payload: the services deliver it with a null payload, nothing recorded.
    let p = ApiCallPayload::new(22, &[1]);
    let t = emit_enter(Kind::UrApi, 22, Payload::UrApi(&p));
    emit_exit(t, Payload::None);
    // A wait (enter and exit of a non-API kind), a barrier, a fill.
    let w = SyncPayload { object: 0x1234, event_count: 2, ..Default::default() };
    let t = emit_enter(Kind::Sync, sync_op::WAIT, Payload::Sync(&w));
    emit_exit(t, Payload::Sync(&w));
    let b = SyncPayload { object: 0x30, event_count: 1, queue: 0x30, device: 0x40, ..Default::default() };
    emit_instant(Kind::Sync, sync_op::BARRIER, Phase::None, Payload::Sync(&b));
    let f = MemoryFillPayload { queue: 0x30, dst: 0x7000, size: 64, device: 0x40, ..Default::default() };
    emit_instant(Kind::MemoryFill, memory_fill::USM_FILL, Phase::None, Payload::MemoryFill(&f));
    // Task graph, code object, device, marker, counters.
    let n = TaskGraphPayload { node: 5, name: c"usm_memcpy".as_ptr(), queue: 0x30, ..Default::default() };
    emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&n));
    let co = CodeObjectPayload { handle: 0x66, program: 0x67, name: c"square".as_ptr(), binary_size: 10 };
    emit_instant(Kind::CodeObject, code_object::KERNEL, Phase::Load, Payload::CodeObject(&co));
    let d = DevicePayload { handle: 0x40, name: c"cpu".as_ptr(), ..Default::default() };
    emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&d));
    marker_mark(c"phase one");
    let _ = marker_range_push(c"range");
    let _ = marker_range_pop();
    let cd = CounterPayload { counter: 1, name: c"busy".as_ptr(), unit: c"%".as_ptr(), ..Default::default() };
    emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&cd));
    let cs = CounterPayload { counter: 1, value: 42, ts: 1_000, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&cs));
    // Launches and completions whose kernel names the backend interned (the OpenCL layer's):
    // the direct path knows them by address, the services' path reads them; the same text at
    // another address (the launch above's name) is the same string.
    static INTERNED: [&std::ffi::CStr; 2] = [c"vector_add<float>(float*, float const*)", c"square"];
    for pass in 0..2u64 {
        for (i, name) in INTERNED.iter().enumerate() {
            let kd = KernelDispatchPayload { device: 0x40, kernel: 0x99 + i as u64, ..kernel_on_0x30(name) };
            launch_and_complete_interned(&kd, 78, (30 + pass, 40 + pass));
        }
    }
    // A completion (it takes the direct path too) and the allocation's free.
    let done = MemoryCopyPayload { queue: 0x30, size: 256, device_start: 10, device_end: 20, ..Default::default() };
    emit_activity(Kind::MemoryCopy, memory_copy::USM_MEMCPY, 77, 10, 20, Payload::MemoryCopy(&done));
    emit_memory_free(0x7000);
}

/// The trace's records with the times zeroed and the correlation ids renumbered (0 stays 0).
fn normalized(path: &Path) -> Vec<Record> {
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut renumber = |c: &mut u64| {
        if *c != 0 {
            let next = ids.len() as u64 + 1;
            *c = *ids.entry(*c).or_insert(next);
        }
    };
    let mut out = Vec::new();
    for r in TraceReader::open(path).unwrap() {
        let mut r = r.unwrap();
        match &mut r {
            Record::ApiCall(c) => {
                (c.start, c.end) = (0, 0);
                renumber(&mut c.correlation);
            }
            Record::Activity(a) => {
                a.ts = 0;
                renumber(&mut a.correlation);
            }
            Record::Queue(x) => (x.ts, x.correlation) = (0, 0),
            Record::Memory(x) => {
                x.ts = 0;
                renumber(&mut x.correlation);
            }
            Record::CodeObject(x) => (x.ts, x.correlation) = (0, 0),
            Record::TaskGraph(x) => (x.ts, x.correlation) = (0, 0),
            Record::Sync(x) => {
                x.ts = 0;
                renumber(&mut x.correlation);
            }
            Record::Marker(x) => {
                x.ts = 0;
                renumber(&mut x.correlation);
                renumber(&mut x.range_id); // the range's correlation id
            }
            Record::CounterSample(x) => renumber(&mut x.correlation),
            Record::Generic(x) => (x.ts, x.correlation) = (0, 0),
            Record::Info { .. } | Record::ClockSync { .. } | Record::End { .. } => continue,
            _ => {}
        }
        out.push(r);
    }
    out
}

fn record(path: &Path, direct: bool) -> Vec<Record> {
    start_file(Config::default(), path, &[]).unwrap();
    let ctx = subscribe_with(false, direct).unwrap();
    assert_eq!(direct_path_applies(Kind::UrApi), direct);
    assert_eq!(direct_path_applies(Kind::MemoryCopy), direct);
    workload(ctx);
    destroy_context(ctx).unwrap();
    assert!(!direct_path_applies(Kind::UrApi));
    let stats = finish().unwrap();
    assert_eq!(stats.drops, 0);
    normalized(path)
}

#[test]
fn direct_and_services_paths_write_the_same_records() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let services = record(&dir.path().join("services.offtrace"), false);
    let direct = record(&dir.path().join("direct.offtrace"), true);
    let calls = direct.iter().filter(|r| matches!(r, Record::ApiCall(_))).count();
    assert_eq!(calls, 4, "three UR calls and one OpenCL call with a payload at their exit");
    assert!(direct.iter().any(|r| matches!(r, Record::ApiCall(c) if c.external == 0xe77)));
    assert_eq!(direct.len(), services.len());
    for (d, s) in direct.iter().zip(&services) {
        assert_eq!(d, s);
    }
}

/// A tool that subscribes to a kind takes it off the direct path (its callback sees every
/// record); when it goes, the kind is direct again.
#[test]
fn a_tool_subscribing_takes_the_kind_off_the_direct_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    start_file(Config::default(), &dir.path().join("t.offtrace"), &[]).unwrap();
    let ctx = subscribe_with(false, true).unwrap();
    assert!(direct_path_applies(Kind::UrApi));
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tool = create_context().unwrap();
    let s = seen.clone();
    configure_callback_tracing_closure(tool, Kind::UrApi, None, move |_, _| {
        s.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    start_context(tool).unwrap();
    assert!(!direct_path_applies(Kind::UrApi));
    assert!(direct_path_applies(Kind::MemoryCopy), "other kinds stay direct");
    call(Kind::UrApi, 19, &[1], Some(0), || {});
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 2, "enter and exit");
    destroy_context(tool).unwrap();
    assert!(direct_path_applies(Kind::UrApi));
    call(Kind::UrApi, 19, &[1], Some(0), || {});
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let calls = TraceReader::open(dir.path().join("t.offtrace"))
        .unwrap()
        .filter(|r| matches!(r, Ok(Record::ApiCall(_))))
        .count();
    assert_eq!(calls, 2, "both calls recorded, one per path");
}

/// On the direct path a backend's one clock reading at the end of a call is the call's end and
/// the time of the device work it reported there (`emit_instant_at`, `emit_exit_at`).
#[test]
fn one_clock_reading_ends_the_call_and_times_its_device_work() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe_with(false, true).unwrap();
    let mut p = ApiCallPayload::new(20, &[0x30]);
    let t = emit_enter(Kind::UrApi, 20, Payload::UrApi(&p));
    let now = timestamp_ns();
    let c = MemoryCopyPayload { queue: 0x30, size: 8, ..Default::default() };
    emit_instant_at(Kind::MemoryCopy, memory_copy::USM_MEMCPY, Phase::None, now, Payload::MemoryCopy(&c));
    p.has_result = 1;
    emit_exit_at(t, now, Payload::UrApi(&p));
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let records: Vec<Record> = TraceReader::open(&path).unwrap().map(|r| r.unwrap()).collect();
    let call = records.iter().find_map(|r| if let Record::ApiCall(c) = r { Some(c) } else { None }).unwrap();
    let copy = records.iter().find_map(|r| if let Record::Activity(a) = r { Some(a) } else { None }).unwrap();
    assert_eq!(copy.ts, call.end);
    assert!(call.start <= call.end);
    assert_eq!(copy.correlation, call.correlation);
}

/// Kernel names the backend interned (`emit_instant_interned`, `emit_activity_interned`) are
/// known by their address on the direct path: each launch and completion is named right with
/// more names than the recorder's cache of them holds, and in a second recording too, whose
/// string table gives the names other ids (a cache kept across recordings would name them with
/// the first one's).
#[test]
fn interned_kernel_names_name_their_records_in_every_recording() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let names: Vec<&'static std::ffi::CStr> = (0..12)
        .map(|i| &*Box::leak(std::ffi::CString::new(format!("kernel_{i}")).unwrap().into_boxed_c_str()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let path = dir.path().join(format!("t{round}.offtrace"));
        start_file(Config::default(), &path, &[]).unwrap();
        let ctx = subscribe_with(false, true).unwrap();
        assert!(direct_path_applies(Kind::KernelDispatch));
        if round == 1 {
            for i in 0..5 {
                marker_mark(&std::ffi::CString::new(format!("before {i}")).unwrap());
            }
        }
        for pass in 0..3 {
            for (i, name) in names.iter().enumerate() {
                let kd = KernelDispatchPayload { kernel: 0x100 + i as u64, ..kernel_on_0x30(name) };
                launch_and_complete_interned(&kd, 5, (10 + pass, 20 + pass));
            }
        }
        destroy_context(ctx).unwrap();
        finish().unwrap();
        let mut strings = HashMap::new();
        let mut named = 0;
        for r in TraceReader::open(&path).unwrap() {
            match r.unwrap() {
                Record::String { id, text } => {
                    strings.insert(id, text);
                }
                Record::Activity(a) => {
                    let want = format!("kernel_{}", a.kernel - 0x100);
                    assert_eq!(strings.get(&a.name), Some(&want), "round {round}: {a:?}");
                    named += 1;
                }
                _ => {}
            }
        }
        assert_eq!(named, 2 * 3 * names.len(), "round {round}");
    }
}
