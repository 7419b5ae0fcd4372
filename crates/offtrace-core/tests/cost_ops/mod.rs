//! The services' cost loops, shared by the executable harness (`tests/cost.rs`, offtrace-core
//! linked as an rlib: a thread-local is one `%fs`-relative access) and the shared-object one
//! (`examples/cost_so.rs`, a cdylib that `tests/cost.rs` loads with `dlopen` when `COST_SO`
//! names it: each thread-local access of a dlopen'd library is a call to `__tls_get_addr`, as
//! in the agent, OpenCL and CUDA libraries applications load). The same code in both.

use std::ffi::c_void;
use std::hint::black_box;

use offtrace_core::*;

/// One measurement's result.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Measured {
    /// CPU time of the emitting thread per operation (ns).
    pub thread_ns_per_op: f64,
    /// CPU time of the process per operation (ns), up to the final flush.
    pub process_ns_per_op: f64,
    /// Whether the record paths used their compiler fences (membarrier registered) as the loop ended.
    pub asymmetric: bool,
}

unsafe extern "C" fn noop_cb(r: CallbackRecord, u: *mut UserData, d: *mut c_void) {
    black_box((r, u, d));
}

unsafe extern "C" fn noop_buffer(
    _c: ContextId,
    _b: BufferId,
    r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _x: u64,
) {
    black_box((r, n));
}

/// A tool that reads every record (the first word of each: its size and kind), as a real
/// tool does: the delivery thread then reads each ring line the producer wrote, which the
/// producer must take back on its next lap. `COST_READ_RECORDS=1` picks it (the no-op
/// callback reads no record, so the ring's lines never leave the producer's core);
/// `COST_READ_RECORDS=all` reads every word of each record, as a delivery thread that expanded
/// compact ring entries into full records would (`docs/overhead.md`, *Tool API*, s12-act).
unsafe extern "C" fn reading_buffer(
    _c: ContextId,
    _b: BufferId,
    r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _x: u64,
) {
    static ALL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let all = *ALL.get_or_init(|| std::env::var("COST_READ_RECORDS").is_ok_and(|v| v == "all"));
    let mut sum = 0u64;
    for i in 0..n {
        // SAFETY: the services pass `n` valid record addresses, valid during the call.
        let rec = unsafe { *r.add(i) };
        // SAFETY: a valid record (as above), 8-aligned and `size` bytes long.
        let size = unsafe { (*rec).size } as usize;
        sum += size as u64;
        if all {
            for w in 1..size / 8 {
                // SAFETY: word `w` is within the record's `size` bytes.
                sum = sum.wrapping_add(unsafe { rec.cast::<u64>().add(w).read() });
            }
        }
    }
    black_box(sum);
}

/// A tool that works per record as long as `reading_buffer` but reads no record (a chain of
/// `COST_SPIN_RECORDS` multiplies per record): with it, what the producer pays beside a busy
/// delivery thread is told apart from what it pays for the lines that thread reads.
unsafe extern "C" fn spinning_buffer(
    _c: ContextId,
    _b: BufferId,
    r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _x: u64,
) {
    static SPIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let k = *SPIN.get_or_init(|| std::env::var("COST_SPIN_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0));
    let mut x = r as u64 | 1;
    for _ in 0..n as u64 * k {
        x = black_box(x).wrapping_mul(3);
    }
    black_box(x);
}

/// Sets up a context for `op`, runs `op` `n` times, tears the context down.
pub fn measure(op: &str, n: u64) -> Measured {
    let ctx = create_context().unwrap();
    let rec = 104; // the buffer sizes of the fixed 104-byte records, for side-by-side numbers
    // Other sizes for experiments (the numbers in docs/overhead.md use these defaults).
    let env_bytes =
        |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (size, watermark) = (env_bytes("COST_BUFFER_BYTES", 4096 * rec), env_bytes("COST_WATERMARK_BYTES", 2048 * rec));
    let tool = if std::env::var_os("COST_READ_RECORDS").is_some() {
        reading_buffer
    } else if std::env::var_os("COST_SPIN_RECORDS").is_some() {
        spinning_buffer
    } else {
        noop_buffer
    };
    // SAFETY: the no-op callbacks are sound for any record.
    unsafe {
        if op == "callback" {
            configure_callback_tracing_service(ctx, Kind::UrApi, None, noop_cb, std::ptr::null_mut()).unwrap();
        } else if op == "instant" {
            configure_callback_tracing_service(ctx, Kind::Xpti, None, noop_cb, std::ptr::null_mut()).unwrap();
        } else if op == "activity_off" || op == "activity_built_off" {
            // A context with a buffer for API calls only: `emit_activity` of a copy delivers
            // nothing (what the backend does anyway, without a tool that wants copies).
            let buf = create_buffer(ctx, size, watermark, BufferPolicy::Lossless, tool, std::ptr::null_mut()).unwrap();
            configure_buffer_tracing_service(ctx, Kind::UrApi, None, buf).unwrap();
        } else if op == "api_off" {
            // The same for API calls: a buffer for copies only.
            let buf = create_buffer(ctx, size, watermark, BufferPolicy::Lossless, tool, std::ptr::null_mut()).unwrap();
            configure_buffer_tracing_service(ctx, Kind::MemoryCopy, None, buf).unwrap();
        } else {
            let buf = create_buffer(ctx, size, watermark, BufferPolicy::Lossless, tool, std::ptr::null_mut()).unwrap();
            configure_buffer_tracing_service(ctx, Kind::UrApi, None, buf).unwrap();
            configure_buffer_tracing_service(ctx, Kind::MemoryCopy, None, buf).unwrap();
        }
    }
    start_context(ctx).unwrap();
    // The steady state: the process's membarrier registration (on a thread of its own, started
    // with the first context) done, so the record paths use their compiler fences. It needs the
    // kernel's RCU threads, which a real-time loop on both CPUs (the quiet mode) would starve
    // for the whole run; `COST_SYMMETRIC=1` measures without waiting.
    if std::env::var_os("COST_SYMMETRIC").is_none() {
        let since = std::time::Instant::now();
        while !asymmetric_fences() && since.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let p = ApiCallPayload::new(97, &[0x1000]);
    let m = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    let x = [0u64; 8]; // a backend's raw struct (opaque to core)
    let stack: usize = std::env::var("COST_STACK").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let (t0, p0) = (cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID), cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID));
    below(stack, &mut || run(op, n, &p, &m, &x));
    let t1 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    // As the loop ended (destroy waits for a pending registration).
    let asymmetric = asymmetric_fences();
    destroy_context(ctx).unwrap();
    let p1 = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    Measured {
        thread_ns_per_op: (t1 - t0) as f64 / n as f64,
        process_ns_per_op: (p1 - p0) as f64 / n as f64,
        asymmetric,
    }
}

/// Runs `f` with its frame `bytes` (rounded down to 256) further down the stack: where the
/// loop's stack slots fall relative to the thread-locals and the ring moves the emitting
/// thread's time by up to half a nanosecond, so runs can average over placements.
fn below(bytes: usize, f: &mut dyn FnMut()) {
    #[inline(never)]
    fn pad<const N: usize>(f: &mut dyn FnMut()) {
        let pad = [0u8; N];
        black_box(&pad);
        f();
        black_box(&pad);
    }
    macro_rules! by {
        ($($k:literal)*) => {
            match bytes / 256 {
                $($k => pad::<{ $k * 256 + 8 }>(f),)*
                _ => f(),
            }
        };
    }
    by!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
}

#[inline(never)]
fn run(op: &str, n: u64, p: &ApiCallPayload, m: &MemoryCopyPayload, x: &[u64; 8]) {
    // One loop per operation (the choice made once, not per iteration: a string compare per
    // iteration had cost every operation about 8 instructions of its own).
    macro_rules! each {
        (|$i:ident| $body:expr) => {
            for $i in 0..n {
                $body;
            }
        };
    }
    match op {
        "callback" | "buffer_record" | "api_off" => each!(|_i| {
            let t = emit_enter(Kind::UrApi, 97, Payload::UrApi(black_box(p)));
            emit_exit(t, Payload::UrApi(black_box(p)));
        }),
        // Outside any call: a fresh correlation id per instant (an XPTI notification).
        "instant" => {
            each!(|_i| emit_instant(Kind::Xpti, 3, Phase::None, Payload::Raw(RawPayload(black_box(x).as_ptr().cast()))))
        }
        "buffer_activity" | "activity_off" => {
            each!(|i| emit_activity(Kind::MemoryCopy, 0, i, 100, 200, Payload::MemoryCopy(black_box(m))))
        }
        // The payload built per record, as a backend does (fields stored just before the
        // call, so the record path reads what is still in the store buffer).
        "buffer_activity_built" | "activity_built_off" => each!(|i| {
            let m = MemoryCopyPayload { queue: 1, dst: black_box(i), src: 3, size: 4, ..Default::default() };
            emit_activity(Kind::MemoryCopy, 0, i, 100, 200, Payload::MemoryCopy(black_box(&m)))
        }),
        "timestamp" => each!(|_i| black_box(timestamp_ns())),
        // The harness alone: the loop and a payload's address through `black_box`, what each
        // operation above has besides the services' own work.
        "loop" => each!(|_i| black_box(p)),
        _ => {}
    }
}

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is writable; the clock ids are valid on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
