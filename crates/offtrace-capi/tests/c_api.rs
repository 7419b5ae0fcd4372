//! C tests: compiles the C programs under `tests/c/` and the example tools under `examples/c/`
//! with `cc` against the built `libofftrace.so` and `include/offtrace/*.h` (with `-Wall -Wextra
//! -Werror`), runs them, and checks their output. Also checks the header's struct layouts
//! against the Rust definitions.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use offtrace::XptiPayload;
use offtrace::tools::{offtrace_client_id_t, offtrace_tool_configure_result_t};
use offtrace_core::*;

/// target/<profile>, where cargo puts `libofftrace.so` (the test binary is in `deps/`). The
/// cdylib is (re)built here by `cargo build -p offtrace-capi --lib` for this test's target
/// directory and profile: building the tests makes the crate an rlib for the harness and does
/// not produce or refresh the cdylib.
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-q", "-p", "offtrace-capi", "--lib"])
                .env("CARGO_TARGET_DIR", dir.parent().unwrap())
                .current_dir(manifest());
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            assert!(cmd.status().unwrap().success(), "cargo build -p offtrace-capi failed");
            assert!(dir.join("libofftrace.so").exists(), "libofftrace.so not in {}", dir.display());
            dir
        })
        .clone()
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Per process: under nextest every test is its own process, and one must not rewrite an
/// executable another runs.
fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c_api").join(std::process::id().to_string());
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `src` (relative to the workspace root or the crate) into `out`.
fn cc(src: &Path, out: &str, shared: bool) -> PathBuf {
    let lib = lib_dir();
    let o = out_dir().join(out);
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(manifest().join("include"));
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    cmd.arg(src).arg("-o").arg(&o).arg("-L").arg(&lib).arg("-lofftrace");
    cmd.arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lpthread");
    let r = cmd.output().unwrap();
    assert!(r.status.success(), "cc {} failed:\n{}", src.display(), String::from_utf8_lossy(&r.stderr));
    o
}

fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new(exe);
    c.args(args).env_remove("OFFTRACE_TOOLS");
    for (k, v) in env {
        c.env(k, v);
    }
    let r = c.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    (r.status.success(), text)
}

fn test_c(name: &str) -> PathBuf {
    manifest().join("tests/c").join(name)
}

fn example_c(name: &str) -> PathBuf {
    manifest().join("../../examples/c").join(name)
}

#[test]
fn every_function_and_error_code() {
    let exe = cc(&test_c("api.c"), "api", false);
    let (ok, out) = run(&exe, &[], &[]);
    assert!(ok, "{out}");
    assert!(out.contains("api: all checks passed"), "{out}");
}

#[test]
fn pairing_under_concurrent_start_stop_from_c() {
    let exe = cc(&test_c("concurrency.c"), "concurrency", false);
    let (ok, out) = run(&exe, &[], &[]);
    assert!(ok, "{out}");
}

#[test]
fn header_layouts_match_rust() {
    use std::mem::{offset_of, size_of};
    let exe = cc(&test_c("layout.c"), "layout", false);
    let (ok, out) = run(&exe, &[], &[]);
    assert!(ok, "{out}");
    let c: HashMap<&str, usize> = out
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    let rust: Vec<(&str, usize)> = vec![
        ("offtrace_context_id_t", size_of::<ContextId>()),
        ("offtrace_buffer_id_t", size_of::<BufferId>()),
        ("offtrace_user_data_t", size_of::<UserData>()),
        ("offtrace_correlation_id_t", size_of::<CorrelationId>()),
        ("offtrace_correlation_id_t.external", offset_of!(CorrelationId, external)),
        ("offtrace_callback_tracing_record_t", size_of::<CallbackRecord>()),
        ("offtrace_callback_tracing_record_t.thread_id", offset_of!(CallbackRecord, thread_id)),
        ("offtrace_callback_tracing_record_t.correlation_id", offset_of!(CallbackRecord, correlation_id)),
        ("offtrace_callback_tracing_record_t.kind", offset_of!(CallbackRecord, kind)),
        ("offtrace_callback_tracing_record_t.operation", offset_of!(CallbackRecord, operation)),
        ("offtrace_callback_tracing_record_t.phase", offset_of!(CallbackRecord, phase)),
        ("offtrace_callback_tracing_record_t.payload", offset_of!(CallbackRecord, payload)),
        ("offtrace_buffer_tracing_record_t", size_of::<BufferRecordHeader>()),
        ("offtrace_buffer_tracing_record_t.size", offset_of!(BufferRecordHeader, size)),
        ("offtrace_buffer_tracing_record_t.kind", offset_of!(BufferRecordHeader, kind)),
        ("offtrace_buffer_tracing_record_t.operation", offset_of!(BufferRecordHeader, operation)),
        ("offtrace_buffer_tracing_record_t.phase", offset_of!(BufferRecordHeader, phase)),
        ("offtrace_buffer_tracing_record_t.context_id", offset_of!(BufferRecordHeader, context_id)),
        ("offtrace_buffer_tracing_record_t.correlation_id", offset_of!(BufferRecordHeader, correlation_id)),
        ("offtrace_buffer_tracing_record_t.thread_id", offset_of!(BufferRecordHeader, thread_id)),
        ("offtrace_buffer_tracing_record_t.start_timestamp", offset_of!(BufferRecordHeader, start_timestamp)),
        ("offtrace_buffer_tracing_record_t.end_timestamp", offset_of!(BufferRecordHeader, end_timestamp)),
        ("offtrace_buffer_tracing_api_call_record_t", size_of::<ApiCallRecord>()),
        ("offtrace_buffer_tracing_api_call_record_t.header", offset_of!(ApiCallRecord, header)),
        ("offtrace_buffer_tracing_api_call_record_t.function_id", offset_of!(ApiCallRecord, function_id)),
        ("offtrace_buffer_tracing_api_call_record_t.arg_count", offset_of!(ApiCallRecord, arg_count)),
        ("offtrace_buffer_tracing_api_call_record_t.result", offset_of!(ApiCallRecord, result)),
        ("offtrace_buffer_tracing_api_call_record_t.args_offset", offset_of!(ApiCallRecord, args_offset)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t", size_of::<KernelDispatchRecord>()),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.queue", offset_of!(KernelDispatchRecord, queue)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.kernel", offset_of!(KernelDispatchRecord, kernel)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.device", offset_of!(KernelDispatchRecord, device)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.work_dim", offset_of!(KernelDispatchRecord, work_dim)),
        (
            "offtrace_buffer_tracing_kernel_dispatch_record_t.kernel_arg_count",
            offset_of!(KernelDispatchRecord, kernel_arg_count),
        ),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.global_size", offset_of!(KernelDispatchRecord, global_size)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.local_size", offset_of!(KernelDispatchRecord, local_size)),
        (
            "offtrace_buffer_tracing_kernel_dispatch_record_t.device_start",
            offset_of!(KernelDispatchRecord, device_start),
        ),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.device_end", offset_of!(KernelDispatchRecord, device_end)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.name_offset", offset_of!(KernelDispatchRecord, name_offset)),
        ("offtrace_buffer_tracing_kernel_dispatch_record_t.args_offset", offset_of!(KernelDispatchRecord, args_offset)),
        ("offtrace_buffer_tracing_memory_copy_record_t", size_of::<MemoryCopyRecord>()),
        ("offtrace_buffer_tracing_memory_copy_record_t.queue", offset_of!(MemoryCopyRecord, queue)),
        ("offtrace_buffer_tracing_memory_copy_record_t.device", offset_of!(MemoryCopyRecord, device)),
        ("offtrace_buffer_tracing_memory_copy_record_t.dst", offset_of!(MemoryCopyRecord, dst)),
        ("offtrace_buffer_tracing_memory_copy_record_t.src", offset_of!(MemoryCopyRecord, src)),
        ("offtrace_buffer_tracing_memory_copy_record_t.bytes", offset_of!(MemoryCopyRecord, bytes)),
        ("offtrace_buffer_tracing_memory_copy_record_t.direction", offset_of!(MemoryCopyRecord, direction)),
        ("offtrace_buffer_tracing_memory_copy_record_t.src_type", offset_of!(MemoryCopyRecord, src_type)),
        ("offtrace_buffer_tracing_memory_copy_record_t.dst_type", offset_of!(MemoryCopyRecord, dst_type)),
        ("offtrace_buffer_tracing_memory_copy_record_t.device_start", offset_of!(MemoryCopyRecord, device_start)),
        ("offtrace_buffer_tracing_memory_copy_record_t.device_end", offset_of!(MemoryCopyRecord, device_end)),
        ("offtrace_buffer_tracing_memory_fill_record_t", size_of::<MemoryFillRecord>()),
        ("offtrace_buffer_tracing_memory_fill_record_t.queue", offset_of!(MemoryFillRecord, queue)),
        ("offtrace_buffer_tracing_memory_fill_record_t.device", offset_of!(MemoryFillRecord, device)),
        ("offtrace_buffer_tracing_memory_fill_record_t.dst", offset_of!(MemoryFillRecord, dst)),
        ("offtrace_buffer_tracing_memory_fill_record_t.pattern", offset_of!(MemoryFillRecord, pattern)),
        ("offtrace_buffer_tracing_memory_fill_record_t.pattern_size", offset_of!(MemoryFillRecord, pattern_size)),
        ("offtrace_buffer_tracing_memory_fill_record_t.bytes", offset_of!(MemoryFillRecord, bytes)),
        ("offtrace_buffer_tracing_memory_fill_record_t.device_start", offset_of!(MemoryFillRecord, device_start)),
        ("offtrace_buffer_tracing_memory_fill_record_t.device_end", offset_of!(MemoryFillRecord, device_end)),
        ("offtrace_buffer_tracing_memory_alloc_record_t", size_of::<MemoryAllocRecord>()),
        ("offtrace_buffer_tracing_memory_alloc_record_t.ptr", offset_of!(MemoryAllocRecord, ptr)),
        ("offtrace_buffer_tracing_memory_alloc_record_t.bytes", offset_of!(MemoryAllocRecord, bytes)),
        ("offtrace_buffer_tracing_memory_alloc_record_t.device", offset_of!(MemoryAllocRecord, device)),
        ("offtrace_buffer_tracing_memory_alloc_record_t.memory_type", offset_of!(MemoryAllocRecord, memory_type)),
        ("offtrace_buffer_tracing_sync_record_t", size_of::<SyncRecord>()),
        ("offtrace_buffer_tracing_sync_record_t.object", offset_of!(SyncRecord, object)),
        ("offtrace_buffer_tracing_sync_record_t.queue", offset_of!(SyncRecord, queue)),
        ("offtrace_buffer_tracing_sync_record_t.device", offset_of!(SyncRecord, device)),
        ("offtrace_buffer_tracing_sync_record_t.event_count", offset_of!(SyncRecord, event_count)),
        ("offtrace_buffer_tracing_sync_record_t.device_start", offset_of!(SyncRecord, device_start)),
        ("offtrace_buffer_tracing_sync_record_t.device_end", offset_of!(SyncRecord, device_end)),
        ("offtrace_buffer_tracing_queue_record_t", size_of::<QueueRecord>()),
        ("offtrace_buffer_tracing_queue_record_t.queue", offset_of!(QueueRecord, queue)),
        ("offtrace_buffer_tracing_queue_record_t.device", offset_of!(QueueRecord, device)),
        ("offtrace_buffer_tracing_queue_record_t.context", offset_of!(QueueRecord, context)),
        ("offtrace_buffer_tracing_queue_record_t.flags", offset_of!(QueueRecord, flags)),
        ("offtrace_buffer_tracing_task_graph_record_t", size_of::<TaskGraphRecord>()),
        ("offtrace_buffer_tracing_task_graph_record_t.node", offset_of!(TaskGraphRecord, node)),
        ("offtrace_buffer_tracing_task_graph_record_t.source", offset_of!(TaskGraphRecord, source)),
        ("offtrace_buffer_tracing_task_graph_record_t.target", offset_of!(TaskGraphRecord, target)),
        ("offtrace_buffer_tracing_task_graph_record_t.event", offset_of!(TaskGraphRecord, event)),
        ("offtrace_buffer_tracing_task_graph_record_t.queue", offset_of!(TaskGraphRecord, queue)),
        ("offtrace_buffer_tracing_task_graph_record_t.name_offset", offset_of!(TaskGraphRecord, name_offset)),
        ("offtrace_buffer_tracing_code_object_record_t", size_of::<CodeObjectRecord>()),
        ("offtrace_buffer_tracing_code_object_record_t.handle", offset_of!(CodeObjectRecord, handle)),
        ("offtrace_buffer_tracing_code_object_record_t.program", offset_of!(CodeObjectRecord, program)),
        ("offtrace_buffer_tracing_code_object_record_t.binary_size", offset_of!(CodeObjectRecord, binary_size)),
        ("offtrace_buffer_tracing_code_object_record_t.name_offset", offset_of!(CodeObjectRecord, name_offset)),
        ("offtrace_buffer_tracing_marker_record_t", size_of::<MarkerRecord>()),
        ("offtrace_buffer_tracing_marker_record_t.range_id", offset_of!(MarkerRecord, range_id)),
        ("offtrace_buffer_tracing_marker_record_t.message_offset", offset_of!(MarkerRecord, message_offset)),
        ("offtrace_buffer_tracing_device_record_t", size_of::<DeviceRecord>()),
        ("offtrace_buffer_tracing_device_record_t.handle", offset_of!(DeviceRecord, handle)),
        ("offtrace_buffer_tracing_device_record_t.parent", offset_of!(DeviceRecord, parent)),
        ("offtrace_buffer_tracing_device_record_t.device_type", offset_of!(DeviceRecord, device_type)),
        ("offtrace_buffer_tracing_device_record_t.name_offset", offset_of!(DeviceRecord, name_offset)),
        ("offtrace_buffer_tracing_counter_record_t", size_of::<CounterRecord>()),
        ("offtrace_buffer_tracing_counter_record_t.counter", offset_of!(CounterRecord, counter)),
        ("offtrace_buffer_tracing_counter_record_t.device", offset_of!(CounterRecord, device)),
        ("offtrace_buffer_tracing_counter_record_t.value", offset_of!(CounterRecord, value)),
        ("offtrace_buffer_tracing_counter_record_t.name_offset", offset_of!(CounterRecord, name_offset)),
        ("offtrace_buffer_tracing_counter_record_t.unit_offset", offset_of!(CounterRecord, unit_offset)),
        ("OFFTRACE_BUFFER_RECORD_MAX_SIZE", offtrace_core::MAX_RECORD_BYTES),
        ("offtrace_kernel_allocation_properties_t", size_of::<AllocationProperties>()),
        ("offtrace_kernel_allocation_properties_t.size", offset_of!(AllocationProperties, size)),
        ("offtrace_kernel_allocation_properties_t.arg_index", offset_of!(AllocationProperties, arg_index)),
        ("offtrace_kernel_allocation_properties_t.type", offset_of!(AllocationProperties, memory_type)),
        ("offtrace_callback_tracing_ur_api_data_t", size_of::<ApiCallPayload>()),
        ("offtrace_callback_tracing_ur_api_data_t.arg_count", offset_of!(ApiCallPayload, arg_count)),
        ("offtrace_callback_tracing_ur_api_data_t.result", offset_of!(ApiCallPayload, result)),
        ("offtrace_callback_tracing_ur_api_data_t.has_result", offset_of!(ApiCallPayload, has_result)),
        ("offtrace_callback_tracing_ur_api_data_t.args", offset_of!(ApiCallPayload, args)),
        ("offtrace_callback_tracing_sycl_queue_data_t", size_of::<QueuePayload>()),
        ("offtrace_implicit_allocation_t", size_of::<ImplicitAllocation>()),
        ("offtrace_implicit_allocation_t.type", offset_of!(ImplicitAllocation, memory_type)),
        ("offtrace_callback_tracing_kernel_dispatch_data_t", size_of::<KernelDispatchPayload>()),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.kernel_name",
            offset_of!(KernelDispatchPayload, kernel_name),
        ),
        ("offtrace_callback_tracing_kernel_dispatch_data_t.work_dim", offset_of!(KernelDispatchPayload, work_dim)),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.kernel_arg_count",
            offset_of!(KernelDispatchPayload, kernel_arg_count),
        ),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.global_size",
            offset_of!(KernelDispatchPayload, global_size),
        ),
        ("offtrace_callback_tracing_kernel_dispatch_data_t.local_size", offset_of!(KernelDispatchPayload, local_size)),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.kernel_args",
            offset_of!(KernelDispatchPayload, kernel_args),
        ),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.implicit_allocations",
            offset_of!(KernelDispatchPayload, implicit_allocations),
        ),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.implicit_allocation_count",
            offset_of!(KernelDispatchPayload, implicit_allocation_count),
        ),
        ("offtrace_callback_tracing_kernel_dispatch_data_t.device", offset_of!(KernelDispatchPayload, device)),
        (
            "offtrace_callback_tracing_kernel_dispatch_data_t.device_start",
            offset_of!(KernelDispatchPayload, device_start),
        ),
        ("offtrace_callback_tracing_kernel_dispatch_data_t.device_end", offset_of!(KernelDispatchPayload, device_end)),
        ("offtrace_callback_tracing_memory_copy_data_t", size_of::<MemoryCopyPayload>()),
        ("offtrace_callback_tracing_memory_copy_data_t.device", offset_of!(MemoryCopyPayload, device)),
        ("offtrace_callback_tracing_memory_copy_data_t.direction", offset_of!(MemoryCopyPayload, direction)),
        ("offtrace_callback_tracing_memory_copy_data_t.src_type", offset_of!(MemoryCopyPayload, src_type)),
        ("offtrace_callback_tracing_memory_copy_data_t.dst_type", offset_of!(MemoryCopyPayload, dst_type)),
        ("offtrace_callback_tracing_memory_copy_data_t.device_start", offset_of!(MemoryCopyPayload, device_start)),
        ("offtrace_callback_tracing_memory_copy_data_t.device_end", offset_of!(MemoryCopyPayload, device_end)),
        ("offtrace_callback_tracing_memory_fill_data_t", size_of::<MemoryFillPayload>()),
        ("offtrace_callback_tracing_memory_fill_data_t.device", offset_of!(MemoryFillPayload, device)),
        ("offtrace_callback_tracing_memory_fill_data_t.device_start", offset_of!(MemoryFillPayload, device_start)),
        ("offtrace_callback_tracing_memory_fill_data_t.device_end", offset_of!(MemoryFillPayload, device_end)),
        ("offtrace_callback_tracing_memory_alloc_data_t", size_of::<MemoryAllocPayload>()),
        ("offtrace_callback_tracing_memory_alloc_data_t.type", offset_of!(MemoryAllocPayload, memory_type)),
        ("offtrace_callback_tracing_memory_alloc_data_t.device", offset_of!(MemoryAllocPayload, device)),
        ("offtrace_callback_tracing_task_graph_data_t", size_of::<TaskGraphPayload>()),
        ("offtrace_callback_tracing_task_graph_data_t.name", offset_of!(TaskGraphPayload, name)),
        ("offtrace_callback_tracing_task_graph_data_t.event", offset_of!(TaskGraphPayload, event)),
        ("offtrace_callback_tracing_task_graph_data_t.queue", offset_of!(TaskGraphPayload, queue)),
        ("offtrace_callback_tracing_sync_data_t", size_of::<SyncPayload>()),
        ("offtrace_callback_tracing_sync_data_t.event_count", offset_of!(SyncPayload, event_count)),
        ("offtrace_callback_tracing_sync_data_t.queue", offset_of!(SyncPayload, queue)),
        ("offtrace_callback_tracing_sync_data_t.device", offset_of!(SyncPayload, device)),
        ("offtrace_callback_tracing_sync_data_t.device_start", offset_of!(SyncPayload, device_start)),
        ("offtrace_callback_tracing_sync_data_t.device_end", offset_of!(SyncPayload, device_end)),
        ("offtrace_callback_tracing_code_object_data_t", size_of::<CodeObjectPayload>()),
        ("offtrace_callback_tracing_code_object_data_t.name", offset_of!(CodeObjectPayload, name)),
        ("offtrace_callback_tracing_code_object_data_t.binary_size", offset_of!(CodeObjectPayload, binary_size)),
        ("offtrace_callback_tracing_marker_data_t", size_of::<MarkerPayload>()),
        ("offtrace_callback_tracing_marker_data_t.range_id", offset_of!(MarkerPayload, range_id)),
        ("offtrace_callback_tracing_device_data_t", size_of::<DevicePayload>()),
        ("offtrace_callback_tracing_device_data_t.name", offset_of!(DevicePayload, name)),
        ("offtrace_callback_tracing_device_data_t.device_type", offset_of!(DevicePayload, device_type)),
        ("offtrace_callback_tracing_counter_data_t", size_of::<CounterPayload>()),
        ("offtrace_callback_tracing_counter_data_t.value", offset_of!(CounterPayload, value)),
        ("offtrace_callback_tracing_counter_data_t.unit", offset_of!(CounterPayload, unit)),
        ("offtrace_callback_tracing_counter_data_t.ts", offset_of!(CounterPayload, ts)),
        ("offtrace_callback_tracing_xpti_data_t", size_of::<XptiPayload>()),
        ("offtrace_callback_tracing_xpti_data_t.instance", offset_of!(XptiPayload, instance)),
        ("offtrace_callback_tracing_xpti_data_t.trace_type", offset_of!(XptiPayload, trace_type)),
        ("offtrace_client_id_t", size_of::<offtrace_client_id_t>()),
        ("offtrace_client_id_t.handle", offset_of!(offtrace_client_id_t, handle)),
        ("offtrace_tool_configure_result_t", size_of::<offtrace_tool_configure_result_t>()),
        ("offtrace_tool_configure_result_t.initialize", offset_of!(offtrace_tool_configure_result_t, initialize)),
        ("offtrace_tool_configure_result_t.finalize", offset_of!(offtrace_tool_configure_result_t, finalize)),
        ("offtrace_tool_configure_result_t.tool_data", offset_of!(offtrace_tool_configure_result_t, tool_data)),
    ];
    assert_eq!(rust.len(), c.len(), "layout.c and this list must name the same items");
    for (k, v) in rust {
        assert_eq!(c.get(k), Some(&v), "{k}: C {:?} vs Rust {v}", c.get(k));
    }
}

/// Compiled once: tests run in parallel and must not rewrite an executable another one runs.
fn driver() -> PathBuf {
    static DRIVER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DRIVER.get_or_init(|| cc(&test_c("driver.c"), "driver", false)).clone()
}

#[test]
fn tools_load_initialize_finalize_each_with_own_context() {
    let d = driver();
    let a = cc(&test_c("test_tool.c"), "libtool_a.so", true);
    let b = cc(&test_c("test_tool.c"), "libtool_b.so", true);
    let spec = format!("{}:{}", a.display(), b.display());
    // Through OFFTRACE_TOOLS (the driver passes NULL).
    let (ok, out) = run(&d, &[], &[("OFFTRACE_TOOLS", &spec), ("DRIVER_ITERATIONS", "3")]);
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        vec![
            "configure version=200 runtime=offtrace 0.2.0 priority=0 handle=1",
            "init test-tool data=hello ctx_ok=1",
            "configure version=200 runtime=offtrace 0.2.0 priority=1 handle=2",
            "init test-tool data=hello ctx_ok=1",
            "fini test-tool data=hello calls=24",
            "fini test-tool data=hello calls=24",
        ],
        "{out}"
    );
}

#[test]
fn tool_declines_fails_or_finalizes_itself() {
    let d = driver();
    let t = cc(&test_c("test_tool.c"), "libtool_modes.so", true);
    let p = t.to_str().unwrap();
    let (ok, out) = run(&d, &[p], &[("TEST_TOOL_MODE", "decline")]);
    assert!(ok && !out.contains("init"), "{out}");
    let (ok, out) = run(&d, &[p], &[("TEST_TOOL_MODE", "fail")]);
    assert!(!ok && out.contains("initialize returned 7") && !out.contains("fini"), "{out}");
    let (ok, out) = run(&d, &[p], &[("TEST_TOOL_MODE", "self_finalize")]);
    assert!(ok && out.matches("fini").count() == 1 && out.contains("calls=0"), "{out}");
    let (ok, out) = run(&d, &["/nonexistent/libnothing.so"], &[]);
    assert!(!ok && out.contains("cannot load tool"), "{out}");
    let (ok, out) = run(&d, &[lib_dir().join("libofftrace.so").to_str().unwrap()], &[]);
    assert!(!ok && out.contains("does not export offtrace_configure"), "{out}");
}

/// `lifecycle_tool.c` (header only) on the mock workload, 4 threads: configuration locked on a
/// started context, absurd buffer sizes refused, client_finalize from a callback deferred (its
/// finalize flushes: every exit has its buffer record), destroy_context bounded while two
/// threads hold marker ranges, destroy_buffer, one external id per call in enter, exit and
/// buffer record, the process-wide id on worker threads, push/pop inside exit() after the
/// thread-locals are gone; nothing on stderr.
#[test]
fn lifecycle_tool_every_rule() {
    let d = driver();
    let t = cc(&test_c("lifecycle_tool.c"), "liblifecycle_tool.so", true);
    let out = Command::new(&d)
        .arg(&t)
        .env_remove("OFFTRACE_TOOLS")
        .env("DRIVER_THREADS", "4")
        // Long enough that the deferred finalize stops and destroys the context while the
        // four threads still emit (the stop race: a call reaches a context whole or not at all).
        .env("DRIVER_ITERATIONS", "20000")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "the application's stderr must stay clean:\n{stderr}");
    let value = |key: &str| -> String {
        let k = format!("{key}=");
        let at = stdout.find(&k).unwrap_or_else(|| panic!("no {key} in:\n{stdout}")) + k.len();
        stdout[at..].split([' ', '\n']).next().unwrap().to_string()
    };
    let num = |key: &str| -> i64 { value(key).parse().unwrap() };
    assert_eq!(num("huge_buffer"), 7, "{stdout}"); // INVALID_ARGUMENT
    assert_eq!(num("configure_started"), 9, "{stdout}"); // CONTEXT_ACTIVE
    assert_eq!(num("configure_buffer_started"), 9, "{stdout}");
    assert_eq!(num("destroy_buffer_started"), 9, "{stdout}");
    assert_eq!(num("flush"), 0, "finalize deferred out of the callback: flush works\n{stdout}");
    assert_eq!(num("destroy_buffer"), 0, "{stdout}");
    assert_eq!(num("flush_destroyed"), 6, "{stdout}"); // BUFFER_NOT_FOUND
    assert_eq!(num("destroy_context"), 0, "{stdout}");
    assert_eq!(num("destroy_bounded"), 1, "{stdout}");
    let (exits, buffered) = (num("exits"), num("buffered"));
    assert!(exits >= 200, "{stdout}");
    assert_eq!(exits, buffered, "every delivered exit has its buffer record:\n{stdout}");
    assert_eq!(num("deliveries_lt_records"), 1, "{stdout}");
    assert_eq!(num("mismatches"), 0, "{stdout}");
    let (p, q) = (num("ext_process"), num("ext_pushed"));
    assert!(p > 0 && q > 0 && p + q == exits, "process-wide id on workers, pushed id after the enter:\n{stdout}");
    assert_eq!(value("push"), "0,0", "{stdout}");
    assert_eq!(value("pop"), "0,0,12", "{stdout}");
    assert_eq!(value("values"), "10,9", "{stdout}");
}

/// A tool whose initialize fails after starting a context: the context is destroyed, none of its
/// callbacks runs on the workload that follows, and its finalize does not run.
#[test]
fn lifecycle_tool_failed_initialize_runs_nothing_more() {
    let d = driver();
    let t = cc(&test_c("lifecycle_tool.c"), "liblifecycle_fail.so", true);
    let out = Command::new(&d)
        .arg(&t)
        .env_remove("OFFTRACE_TOOLS")
        .env("LIFECYCLE_MODE", "fail")
        .env("DRIVER_KEEP_GOING", "1")
        .env("DRIVER_ITERATIONS", "20")
        .output()
        .expect("run driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fail_init_started=1"), "{stdout}");
    assert!(stdout.contains("after_fail callbacks=0 context_status=2"), "{stdout}");
    assert!(!stdout.contains("finalize"), "{stdout}");
}

#[test]
fn example_print_calls() {
    let d = driver();
    let t = cc(&example_c("print_calls.c"), "libprint_calls.so", true);
    let (ok, out) = run(&d, &[t.to_str().unwrap()], &[]);
    assert!(ok, "{out}");
    for want in [
        "[UR_API] urUSMDeviceAlloc -> 0",
        "    4: size_t                     size                 = 4096",
        "[UR_API] urKernelCreate -> 0",
        "    1: const char *               pKernelName          = \"vector_add\"",
        "[UR_API] urEnqueueUSMMemcpy -> 0",
        "    1: bool                       blocking             = true",
        "[KERNEL_DISPATCH] vector_add",
        "    Allocation 0: 0x50000000, size: 4096 argIndex: 0 type: DEVICE",
        "[UR_API] urQueueFinish -> 0",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn example_discard_buffer() {
    let d = driver();
    let t = cc(&example_c("discard_buffer.c"), "libdiscard_buffer.so", true);
    let (ok, out) = run(&d, &[t.to_str().unwrap()], &[("DRIVER_THREADS", "4"), ("DRIVER_ITERATIONS", "2000")]);
    assert!(ok, "{out}");
    let line = out.lines().find(|l| l.starts_with("discard_buffer:")).unwrap();
    let field = |k: &str| -> u64 {
        line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{k}="))).unwrap().parse().unwrap()
    };
    let produced = 4 * 2000 * 4;
    assert_eq!(field("delivered") + field("dropped"), produced, "{out}");
    assert_eq!(field("dropped"), field("dropped_total"), "{out}");
    assert!(out.contains("urQueueFinish"), "{out}");
}

#[test]
fn example_rust_tool() {
    let d = driver();
    let tool = lib_dir().join("examples/librust_tool.so");
    if !tool.exists() {
        // `cargo test` builds examples; a filtered run may not have.
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "offtrace-capi", "--example", "rust_tool"])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let (ok, out) = run(&d, &[tool.to_str().unwrap()], &[("DRIVER_ITERATIONS", "5")]);
    assert!(ok, "{out}");
    for f in ["urEnqueueUSMMemcpy", "urKernelCreate", "urQueueFinish", "urUSMDeviceAlloc"] {
        assert!(out.lines().any(|l| l.contains(f) && l.split_whitespace().nth(2) == Some("5")), "{f} x5 in:\n{out}");
    }
}

#[test]
fn headers_compile_as_pedantic_c99_and_cpp17() {
    let src = out_dir().join("headers.c");
    std::fs::write(
        &src,
        "#include <offtrace/offtrace.h>\n#include <offtrace/offtrace_testing.h>\n\
         int main(void) { offtrace_context_id_t c; return offtrace_create_context(&c) == OFFTRACE_STATUS_SUCCESS ? 0 : 1; }\n",
    )
    .unwrap();
    for (compiler, std, lang) in [("cc", "-std=c99", "c"), ("c++", "-std=c++17", "c++")] {
        let r = Command::new(compiler)
            .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-x", lang])
            .arg("-I")
            .arg(manifest().join("include"))
            .arg(&src)
            .output();
        match r {
            Ok(r) => assert!(r.status.success(), "{compiler}: {}", String::from_utf8_lossy(&r.stderr)),
            Err(e) => eprintln!("{compiler} not available: {e}"),
        }
    }
}
