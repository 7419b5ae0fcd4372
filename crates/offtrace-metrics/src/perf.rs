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
//!
//! **Read as one group.** The events of a set are one perf_event group (the first is the leader,
//! `PERF_FORMAT_GROUP`), so a sample is one `read` per group instead of one per event. That
//! matters beyond the system call: reading an inherited event sums its per-thread children, and
//! each child running on another CPU is read by an inter-processor interrupt (a VM exit in a
//! VM); a group read takes one interrupt per child for all the events, not one per event.

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
/// `PERF_FORMAT_GROUP` (read_format): one read returns every event of the group.
pub const FORMAT_GROUP: u64 = 1 << 3;

impl PerfEventAttr {
    pub fn new(type_: u32, config: u64, flags: u64) -> Self {
        Self { type_, size: std::mem::size_of::<Self>() as u32, config, flags, ..Self::default() }
    }
}

/// `perf_event_open(attr, pid, cpu = -1, group_fd = -1, flags)`: the raw descriptor or -errno.
/// Async-signal-safe (one system call): usable between `fork` and `exec`.
pub fn open_raw(attr: &PerfEventAttr, pid: i32, flags: u64) -> RawFd {
    open_raw_in(attr, pid, -1, flags)
}

/// [`open_raw`] into the group led by `group_fd` (-1: a new group).
pub fn open_raw_in(attr: &PerfEventAttr, pid: i32, group_fd: RawFd, flags: u64) -> RawFd {
    // SAFETY:
    // - `attr` points at a live, initialised `perf_event_attr` of the size its `size` field says.
    // - the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            -1i32,
            group_fd,
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

/// Most events in one group read (`nr` then the values).
const MAX_GROUP: usize = 8;

/// One read of `fd` into `buf`: the bytes read, or -1.
fn read_raw(fd: RawFd, buf: &mut [u64; 1 + MAX_GROUP]) -> isize {
    // SAFETY: reading at most the byte length of a live buffer.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(buf)) }
}

/// The event's own count: 8 bytes for a plain event; for a group leader (`PERF_FORMAT_GROUP`)
/// the first value after `nr`, which is the leader's.
fn read_fd(fd: &OwnedFd) -> u64 {
    let mut buf = [0u64; 1 + MAX_GROUP];
    match read_raw(fd.as_raw_fd(), &mut buf) {
        8 => buf[0],
        n if n >= 16 => buf[1],
        _ => 0,
    }
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
    // A descriptor that is not a perf event would read garbage: check it reads one count (8
    // bytes) or one group (`nr` and `nr` counts).
    let mut buf = [0u64; 1 + MAX_GROUP];
    let n = read_raw(owned.as_raw_fd(), &mut buf);
    (n == 8 || (n >= 16 && n as usize == 8 * (1 + buf[0] as usize))).then_some(owned)
}

/// The events of a group or set, read at once into raw slots.
#[derive(Debug)]
pub struct EventSet {
    /// Group leaders (one per thread when opened here, one when inherited), each reading all
    /// `n` events; empty when the events are plain ones (`singles`).
    leaders: Vec<OwnedFd>,
    /// The groups' other events, opened here: closing a sibling's descriptor would free it.
    _siblings: Vec<OwnedFd>,
    singles: Vec<Counter>,
    n: usize,
}

impl EventSet {
    /// Reads every event into `out[..n]` (sums over the set's leaders): one `read` per leader.
    pub fn read(&self, out: &mut [u64]) {
        if self.leaders.is_empty() {
            for (o, c) in out.iter_mut().zip(&self.singles) {
                *o = c.read();
            }
            return;
        }
        let n = self.n.min(out.len());
        let out = &mut out[..n];
        out.fill(0);
        let mut buf = [0u64; 1 + MAX_GROUP];
        for l in &self.leaders {
            let got = read_raw(l.as_raw_fd(), &mut buf);
            if got < 8 {
                continue;
            }
            let nr = (buf[0] as usize).min(MAX_GROUP);
            for (o, v) in out.iter_mut().zip(&buf[1..1 + nr]) {
                *o += v;
            }
        }
    }

    /// Whether the events are read as groups (the path every sample takes when the kernel
    /// accepts groups with `inherit`).
    pub fn is_grouped(&self) -> bool {
        !self.leaders.is_empty()
    }
}

/// The attributes of event `i` of a group of software/hardware events: the leader (0) reads
/// the whole group.
fn group_attr(type_: u32, config: u64, flags: u64, leader: bool) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(type_, config, flags);
    if leader {
        a.read_format = FORMAT_GROUP;
    }
    a
}

/// Opens `events` as one group on thread `tid` (`inherit` for a process): every descriptor,
/// the leader first (a sibling lives as long as its descriptor: all are kept), or `Err` when one
/// event cannot be opened (the group is closed again).
fn open_group(events: &[(&str, u32, u64)], tid: i32, inherit: bool) -> Result<Vec<OwnedFd>, MetricsError> {
    let flags = if inherit { FLAG_INHERIT } else { 0 };
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(events.len());
    for (i, &(_, type_, config)) in events.iter().enumerate() {
        let attr = group_attr(type_, config, flags, i == 0);
        let group_fd = fds.first().map_or(-1, |l| l.as_raw_fd());
        // SAFETY: `attr` is a live, initialised perf_event_attr; the rest are integers (the
        // group descriptor is open: `fds` owns it).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &raw const attr,
                tid,
                -1i32,
                group_fd,
                PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(if e == libc::EACCES || e == libc::EPERM {
                MetricsError::InsufficientPermissions
            } else {
                MetricsError::UnsupportedFeature
            });
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        fds.push(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    Ok(fds)
}

/// Whose events a collector counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole process (inherited descriptors, else every thread with inherit).
    Process,
    /// The calling thread only.
    Thread,
}

/// Opens `events` for `scope` as one set read at once ([`EventSet`]): `Err` when one cannot be
/// opened. Process scope takes `OFFTRACE_PERF_FDS` when it names the events (a group there is
/// read as one), else opens one group per existing thread with `inherit`.
pub fn open_set(events: &[(&str, u32, u64)], scope: Scope) -> Result<EventSet, MetricsError> {
    if events.len() > MAX_GROUP {
        return Err(MetricsError::InvalidArgument);
    }
    if scope == Scope::Process
        && let Some(leader) = inherited(events[0].0)
    {
        let mut buf = [0u64; 1 + MAX_GROUP];
        if read_raw(leader.as_raw_fd(), &mut buf) as usize == 8 * (1 + events.len()) && buf[0] as usize == events.len()
        {
            // Keep the siblings' descriptors too: a sibling lives as long as one is open, and the
            // program might close the numbers `record` gave them.
            let siblings = events[1..].iter().filter_map(|&(name, _, _)| inherited(name)).collect();
            return Ok(EventSet { leaders: vec![leader], _siblings: siblings, singles: Vec::new(), n: events.len() });
        }
        // Plain inherited events (an older `record`): one read each.
        let singles = open_counters(events, scope)?;
        return Ok(EventSet { leaders: Vec::new(), _siblings: Vec::new(), singles, n: events.len() });
    }
    let tids: Vec<i32> = match scope {
        Scope::Thread => vec![0],
        Scope::Process => std::fs::read_dir("/proc/self/task")
            .map_err(|_| MetricsError::UnsupportedFeature)?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    };
    let mut leaders = Vec::with_capacity(tids.len());
    let mut siblings = Vec::new();
    for &tid in &tids {
        match open_group(events, tid, scope == Scope::Process) {
            Ok(mut fds) => {
                siblings.extend(fds.drain(1..));
                leaders.extend(fds);
            }
            Err(MetricsError::UnsupportedFeature) if tid != 0 && !leaders.is_empty() => {} // the thread exited
            Err(e) if leaders.is_empty() => {
                // No group at all (a kernel without groups of inherited events): plain events.
                let singles = open_counters(events, scope).map_err(|_| e)?;
                return Ok(EventSet { leaders: Vec::new(), _siblings: Vec::new(), singles, n: events.len() });
            }
            Err(_) => {}
        }
    }
    Ok(EventSet { leaders, _siblings: siblings, singles: Vec::new(), n: events.len() })
}

/// Opens `events` for `scope`, one [`Counter`] per event: `Err` when one cannot be opened.
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
/// [`record_env`] announces. The events form one group led by the first (see [`exec_attrs`]).
/// Returns how many were opened (the first that fails stops).
pub fn open_for_exec(attrs: &[PerfEventAttr], target_fds: &[RawFd]) -> usize {
    let mut opened = 0;
    for (attr, &target) in attrs.iter().zip(target_fds) {
        // The leader is already at its target number: the siblings name it there.
        let group = if opened == 0 { -1 } else { target_fds[0] };
        let fd = open_raw_in(attr, 0, group, 0);
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

/// The attributes [`open_for_exec`] takes for the software events: one group, the leader
/// (task clock) reading the whole group.
pub fn exec_attrs() -> Vec<PerfEventAttr> {
    SOFTWARE_EVENTS
        .iter()
        .enumerate()
        .map(|(i, &(_, t, c))| group_attr(t, c, FLAG_DISABLED | FLAG_INHERIT | FLAG_ENABLE_ON_EXEC, i == 0))
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

    /// In a process of its own: the counters are the process's (inherited by new threads), and
    /// other tests' threads (plain `cargo test` runs the tests as threads of one process) ran
    /// between the two reads: a run beside them saw the set's task clock move 26 ms and the
    /// single events' 54 ms.
    #[test]
    fn a_process_group_counts_what_single_events_count() {
        offtrace_testing::in_own_process(
            "perf::tests::a_process_group_counts_what_single_events_count",
            &[],
            a_process_group_counts_what_single_events_count_alone,
        );
    }

    fn a_process_group_counts_what_single_events_count_alone() {
        if !available(TYPE_SOFTWARE, SW_TASK_CLOCK) {
            eprintln!("perf_event_open unavailable here; skipped");
            return;
        }
        // Opened in one order (set, then singles): every later event is seen by both.
        let set = open_set(&SOFTWARE_EVENTS, Scope::Process).expect("set");
        let singles = open_counters(&SOFTWARE_EVENTS, Scope::Process).expect("singles");
        assert!(set.is_grouped(), "groups of inherited software events open on this kernel");
        let mut a = [0u64; 5];
        set.read(&mut a);
        let s0: Vec<u64> = singles.iter().map(Counter::read).collect();
        // Work on a new thread (inherited children) that faults pages in and sleeps.
        std::thread::spawn(|| {
            let v = vec![1u8; 8 << 20];
            std::hint::black_box(&v);
            // 20 ms of this thread's CPU time (not wall time: the machine may be loaded).
            let c0 = crate::session::thread_cpu_ns();
            while crate::session::thread_cpu_ns() - c0 < 20_000_000 {
                std::hint::black_box(0);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        })
        .join()
        .expect("worker");
        let mut b = [0u64; 5];
        set.read(&mut b);
        let s1: Vec<u64> = singles.iter().map(Counter::read).collect();
        let d_set: Vec<u64> = (0..5).map(|i| b[i] - a[i]).collect();
        let d_single: Vec<u64> = (0..5).map(|i| s1[i] - s0[i]).collect();
        assert!(d_set[0] > 15_000_000, "task clock moved by the worker's 20 ms: {d_set:?}");
        assert!(d_set[3] >= 1000, "8 MiB faulted in: {d_set:?}");
        // Task clock: the reads are not simultaneous (a few µs apart); the rest count the same.
        assert!(d_set[0].abs_diff(d_single[0]) < 2_000_000, "{d_set:?} vs {d_single:?}");
        for i in 1..5 {
            assert!(d_set[i].abs_diff(d_single[i]) <= 2, "event {i}: {d_set:?} vs {d_single:?}");
        }
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
