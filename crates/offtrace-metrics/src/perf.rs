//! CPU counters through `perf_event_open(2)`: the kernel's software events (task clock, context
//! switches, CPU migrations, page faults) of this process or of the calling thread, and hardware
//! events (cycles, instructions) only where the kernel exposes a PMU (a VM usually does not: the
//! group is then absent).
//!
//! A process's counters come from one of two places:
//! - **inherited**: `offtrace record` opens them in the child right before `exec`, on the child
//!   itself with `inherit` and `enable_on_exec` (what `perf stat` does), and passes the file
//!   descriptors in `OFFTRACE_PERF_FDS` (`name=fd,...`). They count every thread and child
//!   process of the program from its `exec`, so totals agree with `perf stat` on the same run.
//! - **opened here**: one event per existing thread (`/proc/self/task`) with `inherit`, so
//!   threads those create are counted too; counts start at the open.

#![allow(unsafe_code)] // perf_event_open, read, dup, close

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::MetricsError;

pub const TYPE_HARDWARE: u32 = 0;
pub const TYPE_SOFTWARE: u32 = 1;
pub const SW_TASK_CLOCK: u64 = 1;
pub const SW_PAGE_FAULTS: u64 = 2;
pub const SW_CONTEXT_SWITCHES: u64 = 3;
pub const SW_CPU_MIGRATIONS: u64 = 4;
pub const SW_PAGE_FAULTS_MAJ: u64 = 6;
pub const HW_CPU_CYCLES: u64 = 0;
pub const HW_INSTRUCTIONS: u64 = 1;

/// The software events of the `cpu.sw` groups, in raw-slot order, with their
/// `OFFTRACE_PERF_FDS` names.
pub const SOFTWARE_EVENTS: [(&str, u32, u64); 5] = [
    ("task_clock", TYPE_SOFTWARE, SW_TASK_CLOCK),
    ("context_switches", TYPE_SOFTWARE, SW_CONTEXT_SWITCHES),
    ("cpu_migrations", TYPE_SOFTWARE, SW_CPU_MIGRATIONS),
    ("page_faults", TYPE_SOFTWARE, SW_PAGE_FAULTS),
    ("major_faults", TYPE_SOFTWARE, SW_PAGE_FAULTS_MAJ),
];

pub const HARDWARE_EVENTS: [(&str, u32, u64); 2] =
    [("cycles", TYPE_HARDWARE, HW_CPU_CYCLES), ("instructions", TYPE_HARDWARE, HW_INSTRUCTIONS)];

/// The environment variable carrying inherited descriptors.
pub const FDS_ENV: &str = "OFFTRACE_PERF_FDS";

/// `struct perf_event_attr` in its first published size (`PERF_ATTR_SIZE_VER0`, 64 bytes):
/// every field this crate sets is in it, and the kernel accepts any published size.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfEventAttr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// Bit 0 disabled, 1 inherit, 5 exclude_kernel, 6 exclude_hv, 12 enable_on_exec.
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
}

/// `PERF_FLAG_FD_CLOEXEC` (open flags).
pub const PERF_FLAG_FD_CLOEXEC: u64 = 1 << 3;
pub const FLAG_DISABLED: u64 = 1 << 0;
pub const FLAG_INHERIT: u64 = 1 << 1;
pub const FLAG_ENABLE_ON_EXEC: u64 = 1 << 12;

impl PerfEventAttr {
    pub fn new(type_: u32, config: u64, flags: u64) -> Self {
        Self { type_, size: std::mem::size_of::<Self>() as u32, config, flags, ..Self::default() }
    }
}

/// `perf_event_open(attr, pid, cpu = -1, group_fd = -1, flags)`: the raw descriptor or -errno.
/// Async-signal-safe (one system call): usable between `fork` and `exec`.
pub fn open_raw(attr: &PerfEventAttr, pid: i32, flags: u64) -> RawFd {
    // SAFETY:
    // - `attr` points at a live, initialised `perf_event_attr` of the size its `size` field says.
    // - the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            -1i32,
            -1i32,
            flags as libc::c_ulong,
        )
    };
    if fd < 0 { -std::io::Error::last_os_error().raw_os_error().unwrap_or(1) } else { fd as RawFd }
}

fn open_owned(type_: u32, config: u64, pid: i32, inherit: bool) -> Result<OwnedFd, MetricsError> {
    let attr = PerfEventAttr::new(type_, config, if inherit { FLAG_INHERIT } else { 0 });
    let fd = open_raw(&attr, pid, PERF_FLAG_FD_CLOEXEC);
    if fd < 0 {
        return Err(if -fd == libc::EACCES || -fd == libc::EPERM {
            MetricsError::InsufficientPermissions
        } else {
            MetricsError::UnsupportedFeature
        });
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_fd(fd: &OwnedFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes into a live u64; a perf event fd without read_format flags
    // returns exactly its 8-byte count.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
    if n == 8 { v } else { 0 }
}

/// Whether an event can be opened on the calling thread (the probe behind listing a group).
pub fn available(type_: u32, config: u64) -> bool {
    open_owned(type_, config, 0, false).is_ok()
}

/// One counter as one or more kernel events summed (one per thread when opened here).
#[derive(Debug)]
pub struct Counter {
    fds: Vec<OwnedFd>,
}

impl Counter {
    pub fn read(&self) -> u64 {
        self.fds.iter().map(read_fd).sum()
    }
}

/// The inherited descriptors of `OFFTRACE_PERF_FDS`, duplicated (each collector owns its own).
fn inherited(name: &str) -> Option<OwnedFd> {
    let spec = std::env::var(FDS_ENV).ok()?;
    let fd: RawFd = spec.split(',').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())?;
    // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` on an integer: at worst EBADF when the descriptor is
    // not open; the duplicate is new and owned by nobody else.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return None;
    }
    let owned = {
        // SAFETY: `dup` is a fresh descriptor.
        unsafe { OwnedFd::from_raw_fd(dup) }
    };
    // A descriptor that is not a perf event would read garbage: check it reads 8 bytes.
    let mut v = 0u64;
    // SAFETY: as in `read_fd`.
    let n = unsafe { libc::read(owned.as_raw_fd(), (&raw mut v).cast(), 8) };
    (n == 8).then_some(owned)
}

/// Whose events a collector counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole process (inherited descriptors, else every thread with inherit).
    Process,
    /// The calling thread only.
    Thread,
}

/// Opens `events` for `scope`: `Err` when one cannot be opened.
pub fn open_counters(events: &[(&str, u32, u64)], scope: Scope) -> Result<Vec<Counter>, MetricsError> {
    let tids: Vec<i32> = match scope {
        Scope::Thread => vec![0],
        Scope::Process => std::fs::read_dir("/proc/self/task")
            .map_err(|_| MetricsError::UnsupportedFeature)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    };
    events
        .iter()
        .map(|&(name, type_, config)| {
            if scope == Scope::Process
                && let Some(fd) = inherited(name)
            {
                return Ok(Counter { fds: vec![fd] });
            }
            let fds = tids
                .iter()
                .filter_map(|&tid| match open_owned(type_, config, tid, scope == Scope::Process) {
                    Err(MetricsError::UnsupportedFeature) if tid != 0 => None, // the thread exited
                    r => Some(r),
                })
                .collect::<Result<Vec<_>, _>>()?;
            if fds.is_empty() {
                return Err(MetricsError::UnsupportedFeature);
            }
            Ok(Counter { fds })
        })
        .collect()
}

/// Descriptors for `offtrace record`: the software events opened **disabled, inherit,
/// enable_on_exec on the calling thread** — call it in the child between `fork` and `exec`
/// (it only makes system calls). Each event's descriptor is moved to `target_fds[i]` with
/// `dup2` (no close-on-exec), so the program's agent finds it by the number that
/// [`record_env`] announces. Returns how many were opened (the first that fails stops).
pub fn open_for_exec(attrs: &[PerfEventAttr], target_fds: &[RawFd]) -> usize {
    let mut opened = 0;
    for (attr, &target) in attrs.iter().zip(target_fds) {
        let fd = open_raw(attr, 0, 0);
        if fd < 0 {
            break;
        }
        // SAFETY: dup2/close on descriptors this function owns (`fd`) and a target number the
        // caller reserved for them.
        unsafe {
            if libc::dup2(fd, target) < 0 {
                libc::close(fd);
                break;
            }
            if fd != target {
                libc::close(fd);
            }
        }
        opened += 1;
    }
    opened
}

/// The attributes [`open_for_exec`] takes for the software events.
pub fn exec_attrs() -> Vec<PerfEventAttr> {
    SOFTWARE_EVENTS
        .iter()
        .map(|&(_, t, c)| PerfEventAttr::new(t, c, FLAG_DISABLED | FLAG_INHERIT | FLAG_ENABLE_ON_EXEC))
        .collect()
}

/// `OFFTRACE_PERF_FDS`'s value for descriptors placed at `target_fds` by [`open_for_exec`].
pub fn record_env(target_fds: &[RawFd]) -> String {
    SOFTWARE_EVENTS.iter().zip(target_fds).map(|((n, _, _), fd)| format!("{n}={fd}")).collect::<Vec<_>>().join(",")
}

/// Duplicates a child's descriptors `fds` into this process (`pidfd_open` + `pidfd_getfd`,
/// Linux 5.6+; needs ptrace access to the child, which a parent of the same user has). With the
/// descriptors [`open_for_exec`] placed in the child, the parent reads the very same counters
/// after the child exited: whole-run totals. `None` where a descriptor could not be taken.
pub fn take_from_child(pid: u32, fds: &[RawFd]) -> Vec<Option<Counter>> {
    // SAFETY: pidfd_open with a pid and no flags; returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if pidfd < 0 {
        return fds.iter().map(|_| None).collect();
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    fds.iter()
        .map(|&fd| {
            // SAFETY: pidfd_getfd on a live pidfd, a descriptor number and no flags; returns a
            // new descriptor (close-on-exec) or -1.
            let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
            if got < 0 {
                return None;
            }
            // SAFETY: a fresh descriptor owned by nobody else.
            let owned = unsafe { OwnedFd::from_raw_fd(got as RawFd) };
            Some(Counter { fds: vec![owned] })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_the_first_published_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64);
    }

    #[test]
    fn thread_task_clock_counts_this_threads_work() {
        if !available(TYPE_SOFTWARE, SW_TASK_CLOCK) {
            eprintln!("perf_event_open unavailable here; skipped");
            return;
        }
        let c = open_counters(&SOFTWARE_EVENTS[..1], Scope::Thread).expect("task clock");
        let a = c[0].read();
        let cpu0 = crate::session::thread_cpu_ns();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = c[0].read();
        let cpu = crate::session::thread_cpu_ns() - cpu0;
        // The kernel's task clock of this thread equals its CPU time (CLOCK_THREAD_CPUTIME_ID)
        // over the same span, within 5% + 1 ms (the two reads are not simultaneous).
        let task = (b - a) as f64;
        assert!(cpu > 1_000_000, "spun {cpu} ns of CPU");
        assert!((task - cpu as f64).abs() <= 0.05 * cpu as f64 + 1e6, "task clock {task} ns, thread CPU {cpu} ns");
    }
}
