//! The CUPTI → services mapping (`emit.rs`) seen by a services client, without CUDA: decoded
//! records built by hand go through `emit::activity` and the API path, and a context checks
//! what arrives (kinds, phases, correlation, queues, device times, copy directions).

#![allow(unsafe_code)] // reads payloads through the callback record's pointer

use std::sync::{Arc, Mutex};

use offtrace_core::{
    CopyDirection, KernelDispatchPayload, Kind, MemoryCopyPayload, MemoryType, Phase,
    configure_callback_tracing_closure, create_context, destroy_context, start_context,
};
use offtrace_cuda::activity::{Activity, CopyActivity, CopyKind, KernelActivity, Place};
use offtrace_cuda::emit;
use offtrace_cuda::table::ApiDomain;

#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Call { kind: Kind, op: u32, phase: u32, corr: u64, args: Vec<u64>, result: Option<i32> },
    Kernel { corr: u64, phase: u32, queue: u64, device: u64, start: u64, end: u64, name: String, global: [u64; 3] },
    Copy { corr: u64, direction: CopyDirection, size: u64, src: MemoryType, dst: MemoryType, start: u64 },
}

/// Held by each test: the tracing services are the process's, so a started context sees every
/// test's records (plain `cargo test` runs the tests as threads of one process); each destroys
/// its context before it lets go.
fn services_to_myself() -> std::sync::MutexGuard<'static, ()> {
    static SERVICES: Mutex<()> = Mutex::new(());
    SERVICES.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn api_calls_and_device_activity_reach_a_services_client() {
    let _services = services_to_myself();
    emit::register_api_tables();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let ctx = create_context().expect("context");
    for kind in [Kind::CudaRuntimeApi, Kind::KernelDispatch, Kind::MemoryCopy] {
        let seen = seen.clone();
        configure_callback_tracing_closure(ctx, kind, None, move |r, _| {
            let k = Kind::from_u32(r.kind).expect("kind");
            let s = match k {
                Kind::CudaRuntimeApi => {
                    // SAFETY: the payload of an API kind is an ApiCallPayload, valid during the call.
                    let p = unsafe { &*r.payload.cast::<offtrace_core::ApiCallPayload>() };
                    Seen::Call {
                        kind: k,
                        op: r.operation,
                        phase: r.phase,
                        corr: r.correlation_id.internal,
                        args: p.args[..p.arg_count as usize].to_vec(),
                        result: (p.has_result == 1).then_some(p.result),
                    }
                }
                Kind::KernelDispatch => {
                    // SAFETY: KERNEL_DISPATCH carries a KernelDispatchPayload.
                    let p = unsafe { &*r.payload.cast::<KernelDispatchPayload>() };
                    let name = if p.kernel_name.is_null() {
                        String::new()
                    } else {
                        // SAFETY: a NUL-terminated name valid during the callback.
                        unsafe { std::ffi::CStr::from_ptr(p.kernel_name) }.to_string_lossy().into_owned()
                    };
                    Seen::Kernel {
                        corr: r.correlation_id.internal,
                        phase: r.phase,
                        queue: p.queue,
                        device: p.device,
                        start: p.device_start,
                        end: p.device_end,
                        name,
                        global: p.global_size,
                    }
                }
                _ => {
                    // SAFETY: MEMORY_COPY carries a MemoryCopyPayload.
                    let p = unsafe { &*r.payload.cast::<MemoryCopyPayload>() };
                    Seen::Copy {
                        corr: r.correlation_id.internal,
                        direction: p.direction,
                        size: p.size,
                        src: p.src_type,
                        dst: p.dst_type,
                        start: p.device_start,
                    }
                }
            };
            seen.lock().expect("lock").push(s);
        })
        .expect("configure");
    }
    start_context(ctx).expect("start");

    // cudaMalloc(&p, 4096): enter, exit with the out-pointer's address and the size.
    let f = ApiDomain::Runtime.function(offtrace_cuda::runtime_api::CBID_cudaMalloc_v3020).expect("cudaMalloc");
    let mut params = vec![0u8; usize::from(f.params_size)];
    params[0..8].copy_from_slice(&0x7000u64.to_le_bytes());
    params[8..16].copy_from_slice(&4096u64.to_le_bytes());
    // SAFETY: params is cudaMalloc's parameter struct (params_size bytes).
    let call = unsafe { emit::api_enter(ApiDomain::Runtime, f, params.as_ptr()) }.expect("delivered");
    let corr = call.correlation();
    // SAFETY: as above.
    unsafe { emit::api_exit(call, f, params.as_ptr(), 2) };

    // A kernel and a copy that call launched, completed later on CUPTI's thread.
    let name = c"_Z5scalePfPKffi";
    let k = KernelActivity {
        name: name.as_ptr(),
        start: 100,
        end: 250,
        place: Place { device: 0, context: 1, stream: 7 },
        correlation: 42,
        grid: [4096, 1, 1],
        block: [256, 1, 1],
        registers_per_thread: 16,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        local_memory_per_thread: 0,
        graph_node: 0,
        graph: 0,
        cluster: [0; 3],
        device_launched: false,
    };
    emit::activity(&Activity::Kernel(k), corr);
    let c = CopyActivity {
        kind: CopyKind::DeviceToHost,
        src_kind: offtrace_cuda::cupti_layout::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u32,
        dst_kind: offtrace_cuda::cupti_layout::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u32,
        bytes: 4096,
        start: 300,
        end: 400,
        place: Place { device: 0, context: 1, stream: 7 },
        correlation: 42,
        graph_node: 0,
        graph: 0,
        src_device: 0,
        dst_device: 0,
        flags: 0,
    };
    emit::activity(&Activity::Copy(c), corr);
    destroy_context(ctx).expect("destroy");

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    let op = offtrace_cuda::runtime_api::CBID_cudaMalloc_v3020;
    assert_eq!(
        seen[0],
        Seen::Call {
            kind: Kind::CudaRuntimeApi,
            op,
            phase: Phase::Enter as u32,
            corr,
            args: vec![0x7000, 4096],
            result: None
        }
    );
    assert_eq!(
        seen[1],
        Seen::Call {
            kind: Kind::CudaRuntimeApi,
            op,
            phase: Phase::Exit as u32,
            corr,
            args: vec![0x7000, 4096],
            result: Some(2)
        }
    );
    let queue = emit::queue_id(1, 7);
    assert_eq!(queue, (1 << 32) | 7);
    match &seen[2] {
        Seen::Kernel { corr: c2, phase, queue: q, device, start, end, name, global } => {
            assert_eq!((*c2, *q, *device, *start, *end), (corr, queue, 1, 100, 250));
            assert_eq!(*phase, Phase::Complete as u32);
            assert_eq!(*global, [4096 * 256, 1, 1]);
            // Demangled where the process has a C++ runtime (this test binary links none; the
            // name stays as CUPTI gave it otherwise).
            assert!(name == "scale(float*, float const*, float, int)" || name == "_Z5scalePfPKffi", "{name}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seen[3],
        Seen::Copy {
            corr,
            direction: CopyDirection::DeviceToHost,
            size: 4096,
            src: MemoryType::Device,
            dst: MemoryType::Host,
            start: 300
        }
    );
}

/// A kernel and a memset that a CUDA graph launched (CUPTI's records carry the graph node id)
/// reach a client as their own records and as task records of their nodes, with the launch's
/// correlation, the stream's queue and the device times; a kernel outside a graph has none.
#[test]
fn a_graph_nodes_command_is_that_nodes_task() {
    let _services = services_to_myself();
    use offtrace_core::TaskGraphPayload;
    use offtrace_cuda::activity::SetActivity;
    /// Operation, phase, correlation, node, graph, queue.
    type Task = (u32, u32, u64, u64, u64, u64);
    let seen: Arc<Mutex<Vec<Task>>> = Arc::default();
    let ctx = create_context().expect("context");
    {
        let seen = seen.clone();
        configure_callback_tracing_closure(ctx, Kind::TaskGraph, None, move |r, _| {
            // SAFETY: TASK_GRAPH carries a TaskGraphPayload, valid during the call.
            let p = unsafe { &*r.payload.cast::<TaskGraphPayload>() };
            seen.lock().expect("lock").push((
                r.operation,
                r.phase,
                r.correlation_id.internal,
                p.node,
                p.source,
                p.queue,
            ));
        })
        .expect("configure");
    }
    start_context(ctx).expect("start");
    let place = Place { device: 0, context: 1, stream: 9 };
    let node = (2u64 << 32) | 1;
    let kernel = |graph_node, graph| KernelActivity {
        name: c"k".as_ptr(),
        start: 500,
        end: 600,
        place,
        correlation: 77,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        registers_per_thread: 8,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        local_memory_per_thread: 0,
        graph_node,
        graph,
        cluster: [0; 3],
        device_launched: false,
    };
    emit::activity(&Activity::Kernel(kernel(node, 2)), 1234);
    emit::activity(&Activity::Kernel(kernel(0, 0)), 1235);
    let set = SetActivity {
        value: 0,
        bytes: 64,
        start: 400,
        end: 450,
        place,
        correlation: 77,
        memory_kind: 0,
        graph_node: node - 1,
        graph: 2,
    };
    emit::activity(&Activity::Set(set), 1234);
    destroy_context(ctx).expect("destroy");

    let task = offtrace_core::task_graph::TASK;
    let complete = Phase::Complete as u32;
    let queue = emit::queue_id(1, 9);
    assert_eq!(
        *seen.lock().expect("lock"),
        [(task, complete, 1234, node, 2, queue), (task, complete, 1234, node - 1, 2, queue)]
    );
}
