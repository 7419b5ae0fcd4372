//! A `fork` child of a process whose services run: the child has no delivery thread (`fork`
//! copies only the forking thread), so its records are delivered on its own producing thread
//! at each watermark, as in a process without one. The producer's request for delivery tells
//! the parent's delivery thread from its own by the process id noted at the fork (a
//! `pthread_atfork` child handler); left at the parent's, the child's watermarks would go to a
//! thread it does not have and nothing would arrive before its next flush.

#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use offtrace_core::*;

/// Records the buffer callback got (in whichever process runs it).
static DELIVERED: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn count(
    _c: ContextId,
    _b: BufferId,
    _r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _drops: u64,
) {
    DELIVERED.fetch_add(n as u64, Ordering::SeqCst);
}

fn copies(n: u64) {
    let m = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    for i in 0..n {
        emit_activity(Kind::MemoryCopy, 0, i + 1, 100, 200, Payload::MemoryCopy(&m));
    }
}

#[test]
fn a_fork_child_delivers_its_watermarks_on_its_own_thread() {
    let ctx = create_context().unwrap();
    let record = size_of::<MemoryCopyRecord>();
    // SAFETY: the callback only counts.
    let buf =
        unsafe { create_buffer(ctx, 64 * record, 8 * record, BufferPolicy::Lossless, count, std::ptr::null_mut()) }
            .unwrap();
    configure_buffer_tracing_service(ctx, Kind::MemoryCopy, None, buf).unwrap();
    start_context(ctx).unwrap();
    copies(10);
    flush_buffer(buf).unwrap();
    assert_eq!(DELIVERED.load(Ordering::SeqCst), 10, "the parent's records, through its delivery thread");
    // The delivery thread idle (none of its locks held) when the process forks.
    std::thread::sleep(Duration::from_millis(50));

    // SAFETY: the child only emits (its own thread's staging, the buffer's locks, which no
    // thread holds now) and leaves with `_exit`.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        DELIVERED.store(0, Ordering::SeqCst);
        // Three watermarks' worth, and no flush: each watermark is delivered here.
        copies(24);
        let got = DELIVERED.load(Ordering::SeqCst);
        // SAFETY: `_exit` ends the child without running the test harness's exit path.
        unsafe { libc::_exit(if got >= 16 { 0 } else { 10 + got.min(100) as i32 }) };
    }
    let since = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: `child` is our child; `status` is writable.
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if r == child {
            break;
        }
        if since.elapsed() > Duration::from_secs(20) {
            // SAFETY: our child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("the fork child did not finish within 20 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(libc::WIFEXITED(status), "the child ended by a signal: {status:#x}");
    let code = libc::WEXITSTATUS(status);
    assert_eq!(code, 0, "the child's callback got {} records at its watermarks (want at least 16)", code - 10);
    destroy_context(ctx).unwrap();
}
