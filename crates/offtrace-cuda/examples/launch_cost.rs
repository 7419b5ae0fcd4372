//! What the backend's own work for one kernel launch costs the launching thread, without CUDA:
//! the records a traced `cudaLaunchKernel` makes (runtime API enter and exit, the launch-time
//! `KERNEL_DISPATCH` with five pointer parameters matched against live allocations) through
//! the services into a running recorder, as in `offtrace record`. Prints ns per launch (time
//! ratio on this machine; run under `valgrind --tool=callgrind` for instruction counts).
//!
//!     cargo run --release -p offtrace-cuda --example launch_cost [LAUNCHES]

#![allow(unsafe_code)] // parameter structs passed by pointer, as CUPTI passes them

use std::time::Instant;

use offtrace_core::MemoryType;
use offtrace_cuda::emit;
use offtrace_cuda::table::ApiDomain;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let path = std::env::temp_dir().join(format!("launch_cost-{}.offtrace", std::process::id()));
    offtrace_recorder::start_file(offtrace_recorder::Config::default(), &path, &[("command", "launch_cost")])
        .expect("recorder");
    let ctx = offtrace_recorder::subscribe(false).expect("subscribe");
    emit::register_api_tables();
    let f = ApiDomain::Runtime.functions().iter().find(|f| f.name == "cudaLaunchKernel").expect("cudaLaunchKernel");
    // The parameter struct CUPTI passes (values read at the generated offsets).
    let params = [0u8; 256];
    for i in 0..8u64 {
        emit::memory_alloc(0x7000_0000_0000 + i * (1 << 24), 1 << 24, MemoryType::Device, emit::device_id(0));
    }
    let args: [u64; 5] = std::array::from_fn(|i| 0x7000_0000_0000 + i as u64 * (1 << 24) + 64);
    let run = |k: usize| {
        for _ in 0..k {
            // SAFETY: params is a zeroed buffer at least as large as the parameter struct.
            let call = unsafe { emit::api_enter(ApiDomain::Runtime, f, params.as_ptr()) };
            // As the injection at a launch's exit: the arguments read once, one clock reading
            // for the launch record and the call's end.
            // SAFETY: as above.
            let mut p = unsafe { emit::call_payload(f, params.as_ptr()) };
            let now = offtrace_core::timestamp_ns();
            emit::kernel_dispatch(0x1_0000_0007, 0xdead_0000, c"kernel".as_ptr(), [64, 1, 1], [256, 1, 1], &args, now);
            if let Some(call) = call {
                emit::api_exit_at(call, &mut p, 0, now);
            }
        }
    };
    run(n / 10);
    let t = Instant::now();
    run(n);
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    let _ = offtrace_core::destroy_context(ctx);
    let stats = offtrace_recorder::finish();
    let _ = std::fs::remove_file(&path);
    println!("{n} launches: {ns:.0} ns per launch (runtime enter + launch-time dispatch + exit); {stats:?}");
}
