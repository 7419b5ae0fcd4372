//! The injection from the outside: without CUDA (every machine CI runs on) it must stay out of
//! the way; with CUDA (`#[ignore = "needs CUDA"]`, run by `scripts/gpu-tests.sh`'s machine) the
//! CUDA C workload's trace must hold what the program did.

#![allow(unsafe_code)] // std::env::set_var

use std::path::PathBuf;
use std::process::Command;

use offtrace_format::{Record, TraceReader};

/// Without a CUPTI the driver's call succeeds (returns 1: the program runs on), tracing is
/// off, and a second call is harmless.
#[test]
fn without_cupti_initialize_injection_returns_success_and_stays_off() {
    // SAFETY: setting an environment variable before any other thread of this test binary reads it.
    unsafe { std::env::set_var("OFFTRACE_CUPTI", "/nonexistent/libcupti.so.13") };
    if std::path::Path::new("/usr/local/cuda").exists() {
        return; // a CUDA machine: the ignored test below covers it
    }
    assert_eq!(offtrace_cuda::InitializeInjection(), 1);
    assert!(offtrace_cuda::injection::get().is_none(), "no injection without CUPTI");
    assert_eq!(offtrace_cuda::InitializeInjection(), 1);
    offtrace_cuda::offtrace_cuda_flush();
    // The measurement switch has nothing to switch: an error code, not a crash.
    assert_eq!(offtrace_cuda::offtrace_cuda_measure_phase(1), -1);
}

/// `OFFTRACE_GPU_WORKLOAD` = the built `examples/cuda/workload.cu`, `OFFTRACE_CUDA_LIB` = the
/// release `libofftrace_cuda.so`. Checks the typed trace of one run.
#[test]
#[ignore = "needs CUDA"]
fn workload_trace_holds_kernels_copies_graph_and_allocations() {
    let workload = PathBuf::from(std::env::var("OFFTRACE_GPU_WORKLOAD").expect("OFFTRACE_GPU_WORKLOAD"));
    let lib = PathBuf::from(std::env::var("OFFTRACE_CUDA_LIB").expect("OFFTRACE_CUDA_LIB"));
    let dir = std::env::temp_dir().join(format!("offtrace-cuda-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let trace = dir.join("w.offtrace");
    let out = Command::new(&workload)
        .env("CUDA_INJECTION64_PATH", &lib)
        .env("OFFTRACE_OUTPUT", &trace)
        .output()
        .expect("run workload");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut strings = std::collections::HashMap::new();
    let mut kinds = std::collections::HashMap::new();
    let (mut kernels, mut copies, mut nodes, mut edges, mut with_allocs) = (Vec::new(), 0, 0, 0, 0);
    for r in TraceReader::open(&trace).expect("open") {
        match r.expect("record") {
            Record::String { id, text } => {
                strings.insert(id, text);
            }
            Record::KindDef { kind, name } => {
                kinds.insert(kind, strings.get(&name).cloned().unwrap_or_default());
            }
            Record::Activity(a) => match (kinds.get(&a.kind).map(String::as_str), a.phase) {
                (Some("KERNEL_DISPATCH"), 5) => {
                    assert!(a.device_end > a.device_start && a.device_start > 0);
                    kernels.push(strings.get(&a.name).cloned().unwrap_or_default());
                }
                (Some("KERNEL_DISPATCH"), _) => with_allocs += usize::from(!a.allocations.is_empty()),
                (Some("MEMORY_COPY"), 5) => copies += 1,
                _ => {}
            },
            Record::TaskGraph(g) if g.op == 0 => nodes += 1,
            Record::TaskGraph(g) if g.op == 1 => edges += 1,
            _ => {}
        }
    }
    let count = |p: &str| kernels.iter().filter(|k| k.starts_with(p)).count();
    // 12 stream launches, 5 launches of the explicit graph and 3 of the captured one each.
    assert_eq!((count("scale("), count("add("), count("reduce_sum(")), (20, 20, 1), "{kernels:?}");
    assert_eq!(copies, 34);
    assert!(nodes >= 4 && edges >= 3, "{nodes} nodes, {edges} edges");
    // The two launches made while their stream was captured are no commands: no launch record.
    assert_eq!(with_allocs, 25, "every stream launch names its allocations, and only those");
    let _ = std::fs::remove_dir_all(&dir);
}
