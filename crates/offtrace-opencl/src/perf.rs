//! The OS's per-process counters (`perf_event_open`), read around each command of a queue that
//! has Codeplay counters.
//!
//! Opened once, at the layer's initialisation, on the calling thread with `inherit` (so they
//! also count every thread it creates afterwards: the runtime's worker threads, which OpenCL
//! runtimes start at platform initialisation, after the loader initialised its layers).
//! `read()` of an inherited counter sums the thread's and its live and exited children's counts.
//! Each counter is opened with `exclude_kernel = 0` first and `= 1` if that is refused
//! (unprivileged users with `perf_event_paranoid` >= 2). A counter the kernel refuses is absent:
//! it is not offered as a Codeplay counter, never faked. In VMs without a PMU the hardware
//! counters (cycles, instructions, cache misses) are refused with ENOENT.

use std::sync::OnceLock;

/// One perf counter the layer may offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfCounter {
    pub perf_type: u32,
    pub config: u64,
    pub name: &'static str,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;

/// Every counter the layer tries, in the order of their Codeplay uuids.
pub const CANDIDATES: [PerfCounter; 7] = [
    PerfCounter { perf_type: PERF_TYPE_SOFTWARE, config: 1, name: "task-clock" },
    PerfCounter { perf_type: PERF_TYPE_SOFTWARE, config: 3, name: "context-switches" },
    PerfCounter { perf_type: PERF_TYPE_SOFTWARE, config: 2, name: "page-faults" },
    PerfCounter { perf_type: PERF_TYPE_SOFTWARE, config: 4, name: "cpu-migrations" },
    PerfCounter { perf_type: PERF_TYPE_HARDWARE, config: 0, name: "cycles" },
    PerfCounter { perf_type: PERF_TYPE_HARDWARE, config: 1, name: "instructions" },
    PerfCounter { perf_type: PERF_TYPE_HARDWARE, config: 3, name: "cache-misses" },
];

/// Values of every candidate at one moment; `None` for counters that are not open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub [Option<u64>; CANDIDATES.len()]);

struct Open {
    fds: [Option<i32>; CANDIDATES.len()],
}

static OPEN: OnceLock<Open> = OnceLock::new();

#[allow(unsafe_code)]
fn open_one(c: &PerfCounter, exclude_kernel: bool) -> Option<i32> {
    // struct perf_event_attr, 128 bytes (PERF_ATTR_SIZE_VER7): type, size, config, ...,
    // the flag bits at byte 40 (bit 1 inherit, bit 5 exclude_kernel, bit 6 exclude_hv).
    let mut attr = [0u64; 16];
    attr[0] = u64::from(c.perf_type) | (128u64 << 32);
    attr[1] = c.config;
    let mut flags = 1u64 << 1;
    if exclude_kernel {
        flags |= (1 << 5) | (1 << 6);
    }
    attr[5] = flags;
    // SAFETY: a valid, zero-initialised perf_event_attr of the size it declares; pid 0 = this
    // thread, cpu -1 = any, no group, no flags.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 8u64 /* PERF_FLAG_FD_CLOEXEC */)
    };
    (fd >= 0).then_some(fd as i32)
}

/// Opens the counters (once; later calls return at once).
pub(crate) fn init() {
    OPEN.get_or_init(|| {
        let mut fds = [None; CANDIDATES.len()];
        for (i, c) in CANDIDATES.iter().enumerate() {
            fds[i] = open_one(c, false).or_else(|| open_one(c, true));
        }
        Open { fds }
    });
}

/// Which candidates are open (after `init`).
pub fn available() -> [bool; CANDIDATES.len()] {
    let mut out = [false; CANDIDATES.len()];
    if let Some(o) = OPEN.get() {
        for (i, fd) in o.fds.iter().enumerate() {
            out[i] = fd.is_some();
        }
    }
    out
}

/// The open counters' values now; `None` before `init`.
pub(crate) fn snapshot() -> Option<Snapshot> {
    let o = OPEN.get()?;
    let mut s = Snapshot::default();
    for (i, fd) in o.fds.iter().enumerate() {
        if let Some(fd) = fd {
            let mut v = 0u64;
            // SAFETY: an open perf fd; reading 8 bytes into a u64 (read_format 0).
            #[allow(unsafe_code)]
            let n = unsafe { libc::read(*fd, (&raw mut v).cast(), 8) };
            if n == 8 {
                s.0[i] = Some(v);
            }
        }
    }
    Some(s)
}

impl std::ops::Index<usize> for Snapshot {
    type Output = Option<u64>;
    fn index(&self, i: usize) -> &Option<u64> {
        &self.0[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter as `init` opens it counts the opening thread's work. Opened here, on the
    /// test's own thread: the process-wide set belongs to whichever thread ran `init` first,
    /// which under `cargo test` (tests as threads of one process) may be another test's.
    #[test]
    fn task_clock_counts_this_threads_work() {
        let c = &CANDIDATES[0];
        let Some(fd) = open_one(c, false).or_else(|| open_one(c, true)) else {
            return; // perf_event_open refused here (seccomp / paranoid): nothing to check
        };
        let read = || {
            let mut v = 0u64;
            // SAFETY: the open perf fd; 8 bytes into a u64 (read_format 0).
            #[allow(unsafe_code)]
            let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
            assert_eq!(n, 8);
            v
        };
        let a = read();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let b = read();
        // SAFETY: closing the fd opened above, once.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(fd)
        };
        assert!(b > a, "task-clock did not advance: {a} -> {b}");
    }
}
