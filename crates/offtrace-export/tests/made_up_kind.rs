//! A test backend with a made-up API ("foo": `fooInit`, `fooMalloc`, `fooLaunchKernel`,
//! `fooSynchronize`, its own operation table and argument names) emits through core's tracing
//! services; the recorder writes the trace; the report and every export name and relate its
//! records correctly. Analysis and exports hold no code for it: they read the kind and
//! operation definitions the trace carries (and the last test checks that their sources name no
//! runtime's kind at all).

#![allow(clippy::unwrap_used)]

mod common;

use offtrace_core::*;
use offtrace_export::{ExportFormat, ExportOptions, FileSource, export};

/// The made-up runtime's function table, as its backend would generate it. It registers under
/// an API kind no other code in this test process uses.
const FOO: Kind = Kind::CudaDriverApi;
const FOO_INIT: u32 = 1;
const FOO_MALLOC: u32 = 4;
const FOO_LAUNCH: u32 = 9;
const FOO_SYNC: u32 = 12;
const FOO_OPS: &[Operation] = &[
    Operation {
        id: FOO_INIT,
        name: "fooInit",
        args: &[ArgDescriptor { name: "flags", type_name: "unsigned", size: 4, format: ArgFormat::Hex }],
    },
    Operation {
        id: FOO_MALLOC,
        name: "fooMalloc",
        args: &[
            ArgDescriptor { name: "ptr", type_name: "void**", size: 8, format: ArgFormat::Pointer },
            ArgDescriptor { name: "bytes", type_name: "size_t", size: 8, format: ArgFormat::Unsigned },
        ],
    },
    Operation {
        id: FOO_LAUNCH,
        name: "fooLaunchKernel",
        args: &[
            ArgDescriptor { name: "fooStream", type_name: "foo_stream_t", size: 8, format: ArgFormat::Pointer },
            ArgDescriptor { name: "blocks", type_name: "int", size: 4, format: ArgFormat::Signed },
        ],
    },
    Operation { id: FOO_SYNC, name: "fooSynchronize", args: &[] },
];

const THREADS: u64 = 3;
const LAUNCHES: u64 = 400;

fn call(op: u32, args: &[u64], inside: impl FnOnce(u64)) {
    let mut p = ApiCallPayload::new(op, args);
    let t = emit_enter(FOO, op, Payload::api(FOO, &p));
    inside(t.correlation_id());
    p.result = 0;
    p.has_result = 1;
    emit_exit(t, Payload::api(FOO, &p));
}

/// What the foo backend does for one program: init, an allocation, launches on its stream
/// (each dispatch emitted inside its launch; its device times reported later, as a profiling
/// API would), a synchronize.
fn foo_program(thread: u64) {
    let stream = 0xf000 + thread;
    call(FOO_INIT, &[0], |_| {});
    call(FOO_MALLOC, &[0x7fff_0000, 1 << 20], |_| {
        emit_memory_alloc(&MemoryAllocPayload {
            ptr: 0x9000_0000 + (thread << 24),
            size: 1 << 20,
            memory_type: MemoryType::Device,
            device: 0xde,
        });
    });
    let mut done = Vec::new();
    for i in 0..LAUNCHES {
        call(FOO_LAUNCH, &[stream, i], |corr| {
            let kd = KernelDispatchPayload {
                queue: stream,
                device: 0xde,
                kernel_name: c"foo_saxpy(float, float*, float*)".as_ptr(),
                work_dim: 1,
                global_size: [256 * (i + 1), 1, 1],
                ..Default::default()
            };
            emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
            done.push((corr, kd));
        });
    }
    call(FOO_SYNC, &[], |_| {
        // The device times arrive now, on the device's clock converted to the trace's.
        let mut t = clock::monotonic_ns();
        for (corr, mut kd) in done.drain(..) {
            kd.device_start = t;
            kd.device_end = t + 1000;
            t += 1500;
            emit_activity(
                Kind::KernelDispatch,
                kernel_dispatch::LAUNCH,
                corr,
                kd.device_start,
                kd.device_end,
                Payload::KernelDispatch(&kd),
            );
        }
    });
}

#[test]
fn a_made_up_api_kind_is_reported_and_exported_through_the_services_and_the_recorder() {
    register_kind_operations(FOO, FOO_OPS).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foo.offtrace");
    offtrace_recorder::start_file(offtrace_recorder::Config::default(), &path, &[("command", "foo program")]).unwrap();
    let ctx = offtrace_recorder::subscribe(false).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || foo_program(t));
        }
    });
    destroy_context(ctx).unwrap();
    let stats = offtrace_recorder::finish().unwrap();
    assert_eq!(stats.drops, 0);

    // The report names the kind and its operations from the trace's definitions.
    let r = offtrace_analysis::analyze_file(&path, |w| panic!("{w}")).unwrap();
    assert!(r.trace.complete);
    let launches = r.api_calls.iter().find(|c| c.operation == "fooLaunchKernel").unwrap();
    assert_eq!(launches.kind, FOO.name());
    assert_eq!(launches.calls, THREADS * LAUNCHES);
    assert_eq!(launches.device_activities, THREADS * LAUNCHES, "every dispatch linked to its launch");
    for op in ["fooInit", "fooMalloc", "fooSynchronize"] {
        assert_eq!(r.api_calls.iter().find(|c| c.operation == op).unwrap().calls, THREADS, "{op}");
    }
    assert_eq!(r.device_activity.len(), 1);
    let k = &r.device_activity[0];
    assert_eq!((k.kind.as_str(), k.name.as_str()), ("KERNEL_DISPATCH", "foo_saxpy(float, float*, float*)"));
    assert_eq!(
        (k.count, k.device_count, k.device_mean_ns, k.host_enqueue_count),
        (THREADS * LAUNCHES, THREADS * LAUNCHES, Some(1000), THREADS * LAUNCHES)
    );
    assert_eq!(r.queues.len() as u64, THREADS);
    assert!(r.queues.iter().all(|q| q.total_commands == LAUNCHES && q.device_busy_ns == LAUNCHES * 1000));
    assert_eq!(r.memory.allocations.len(), 1);
    assert_eq!(r.memory.allocations[0].count, THREADS);
    assert_eq!(r.memory.peak_live_bytes, THREADS << 20);

    // Perfetto: the calls on their threads, the dispatches on their streams, flows between.
    let pf = dir.path().join("foo.pftrace");
    export(&mut FileSource::open(&path).unwrap(), &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let calls: Vec<_> = d.slices.iter().filter(|s| s.name == "fooLaunchKernel").collect();
    assert_eq!(calls.len() as u64, THREADS * LAUNCHES);
    assert!(
        calls
            .iter()
            .all(|c| c.category == FOO.name() && c.annotations.starts_with(&["fooStream".into(), "blocks".into()]))
    );
    let kernels: Vec<_> = d.slices.iter().filter(|s| s.name == "foo_saxpy(float, float*, float*)").collect();
    assert_eq!(kernels.len() as u64, THREADS * LAUNCHES);
    let started: std::collections::HashSet<u64> = calls.iter().flat_map(|c| c.flows.iter().copied()).collect();
    assert!(kernels.iter().all(|k| k.terminating.len() == 1 && started.contains(&k.terminating[0])));

    // SQLite: named through the definitions, arguments by their names.
    let db_path = dir.path().join("foo.sqlite");
    export(&mut FileSource::open(&path).unwrap(), &ExportOptions::new(ExportFormat::Sqlite, &db_path)).unwrap();
    let db = rusqlite::Connection::open(&db_path).unwrap();
    let n: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM api_calls_named WHERE operation_name = 'fooLaunchKernel' AND json_extract(args, '$.fooStream') LIKE '0xf00%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n as u64, THREADS * LAUNCHES);
    let linked: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM device_activity a JOIN api_calls_named c USING (correlation) WHERE c.operation_name = 'fooLaunchKernel' AND a.device_ns = 1000",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(linked as u64, THREADS * LAUNCHES);
}

/// The claim "no code for it in analysis or exports", checked: their code (comments aside)
/// names no kind or function of any runtime.
#[test]
fn analysis_and_exports_name_no_runtime_kind() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["offtrace-analysis/src", "offtrace-export/src"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = e.unwrap().path();
            if path.file_name().is_some_and(|n| n == "testing.rs") {
                continue; // synthetic traces for tests
            }
            let text: String = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for kind in
                ["UR_API", "OPENCL_API", "CUDA_RUNTIME_API", "CUDA_DRIVER_API", "urEnqueue", "clEnqueue", "cuLaunch"]
            {
                assert!(!text.contains(kind), "{} names {kind}", path.display());
            }
        }
    }
}
