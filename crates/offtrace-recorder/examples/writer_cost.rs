//! The writer thread's instructions per small OpenCL kernel, without the runtime: per kernel the
//! three records of `many_kernels` (the enqueue's `OPENCL_API` call with its 9 arguments, the
//! launch inside it, the completion with device times on another thread), emitted on the direct
//! path, drained by the writer once the emitting is done (a ring large enough for every record
//! and no timer during the run), so that the count does not depend on the machine's load.
//!
//! ```sh
//! cargo build --release -p offtrace-recorder --example writer_cost
//! for n in 10000 30000; do
//!   valgrind --tool=callgrind --toggle-collect='*writer_main*' target/release/examples/writer_cost $n
//! done   # per kernel: (Ir(30000) - Ir(10000)) / 20000
//! ```

use std::time::Duration;

use offtrace_core::*;
use offtrace_recorder::{Config, finish, start_file, subscribe_with};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("offtrace-writer-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("t.offtrace");
    let config = Config::default().with_ring_words(1 << 23).with_flush_interval(Duration::from_secs(3600));
    start_file(config, &path, &[]).expect("start");
    let ctx = subscribe_with(false, true).expect("subscribe");
    let name = c"add_one";
    let kd = |i: u64| KernelDispatchPayload {
        queue: 0x5555_0000_1000,
        device: 0x5555_0000_2000,
        kernel: 0x5555_0000_3000,
        kernel_name: name.as_ptr(),
        work_dim: 1,
        global_size: [64, 1, 1],
        local_size: [0; 3],
        device_start: if i == 0 { 0 } else { 1_000_000 + i * 700 },
        device_end: if i == 0 { 0 } else { 1_000_000 + i * 700 + 350 },
        ..Default::default()
    };
    let mut correlations = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let args = [0x5555_0000_1000, 0x5555_0000_3000, 1, 0, 0x7ffd_0000_1000, 0, 0, 0, 0];
        let mut p = ApiCallPayload::new(59, &args);
        let t = emit_enter(Kind::OpenclApi, 59, Payload::OpenclApi(&p));
        emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd(0)));
        correlations.push(t.correlation_id());
        p.result = 0;
        p.has_result = 1;
        emit_exit(t, Payload::OpenclApi(&p));
    }
    std::thread::spawn(move || {
        for (i, &c) in correlations.iter().enumerate() {
            let p = kd(i as u64 + 1);
            emit_activity(
                Kind::KernelDispatch,
                kernel_dispatch::LAUNCH,
                c,
                p.device_start,
                p.device_end,
                Payload::KernelDispatch(&p),
            );
        }
    })
    .join()
    .expect("completions");
    destroy_context(ctx).expect("destroy");
    let stats = finish().expect("finish");
    assert_eq!(stats.drops, 0);
    println!("{n} kernels, {} records", stats.records);
    let _ = std::fs::remove_dir_all(&dir);
}
