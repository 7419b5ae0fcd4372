//! `/proc`: a process's CPU time, resident memory, threads and I/O (`/proc/<pid>/stat`,
//! `/proc/<pid>/io`) and the system's CPU utilisation, memory and context switches
//! (`/proc/stat`, `/proc/meminfo`). Values are the kernel's cumulative counters and gauges; rates
//! and utilisation are calculated from them (see [`crate::model::Calc`]).

use std::path::{Path, PathBuf};

use crate::error::MetricsError;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf takes an integer and returns one.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

fn page_size() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf takes an integer and returns one.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Raw slots of `proc.process`.
pub const PROCESS_SLOTS: usize = 5;

/// `[cpu_ns (utime + stime), rss_bytes, threads, rchar, wchar]` of a process (`root` is `/proc`
/// or a test directory; `pid` `None` = self).
pub fn read_process(root: &Path, pid: Option<u32>, out: &mut [u64]) -> Result<(), MetricsError> {
    let dir: PathBuf = root.join(pid.map_or_else(|| "self".to_owned(), |p| p.to_string()));
    let stat = std::fs::read_to_string(dir.join("stat")).map_err(|_| MetricsError::DeviceLost)?;
    // Fields after the command name (which may hold spaces and parentheses): from the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or(MetricsError::Unknown)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): field n is f[n - 3].
    let field = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(14) + field(15);
    out[0] = ticks * 1_000_000_000 / clock_ticks();
    out[1] = field(24) * page_size();
    out[2] = field(20);
    let io = std::fs::read_to_string(dir.join("io")).unwrap_or_default();
    let key = |k: &str| {
        io.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    out[3] = key("rchar");
    out[4] = key("wchar");
    Ok(())
}

/// Raw slots of `proc.system`.
pub const SYSTEM_SLOTS: usize = 5;

/// `[busy_ticks, total_ticks, mem_used_bytes, mem_available_bytes, context_switches]`.
pub fn read_system(root: &Path, out: &mut [u64]) -> Result<(), MetricsError> {
    let stat = std::fs::read_to_string(root.join("stat")).map_err(|_| MetricsError::DeviceLost)?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu ")).ok_or(MetricsError::Unknown)?;
    let v: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|s| s.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    out[0] = total - idle.min(total);
    out[1] = total;
    let mem = std::fs::read_to_string(root.join("meminfo")).map_err(|_| MetricsError::DeviceLost)?;
    let kib = |k: &str| {
        mem.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    let (total_mem, avail) = (kib("MemTotal"), kib("MemAvailable"));
    out[2] = total_mem.saturating_sub(avail);
    out[3] = avail;
    out[4] = stat.lines().find_map(|l| l.strip_prefix("ctxt ")?.trim().parse().ok()).unwrap_or(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_process_with_a_spaced_name() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(d.path().join("42")).expect("dir");
        // Fields 14/15 utime/stime = 30/20 ticks, 20 threads = 3, 24 rss = 10 pages.
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 30 20 0 0 20 0 3 0 123 4096000 10 18446744073709551615";
        std::fs::write(d.path().join("42/stat"), stat).expect("stat");
        std::fs::write(d.path().join("42/io"), "rchar: 1000\nwchar: 2000\nsyscr: 3\n").expect("io");
        let mut out = [0u64; PROCESS_SLOTS];
        read_process(d.path(), Some(42), &mut out).expect("read");
        assert_eq!(out[0], 50 * 1_000_000_000 / clock_ticks());
        assert_eq!(out[1], 10 * page_size());
        assert_eq!(out[2], 3);
        assert_eq!(&out[3..], &[1000, 2000]);
    }

    #[test]
    fn parses_the_system() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(d.path().join("stat"), "cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2\nctxt 777\n").expect("stat");
        std::fs::write(d.path().join("meminfo"), "MemTotal:  1000 kB\nMemFree: 1 kB\nMemAvailable:  400 kB\n")
            .expect("meminfo");
        let mut out = [0u64; SYSTEM_SLOTS];
        read_system(d.path(), &mut out).expect("read");
        assert_eq!(out, [15, 100, 600 * 1024, 400 * 1024, 777]);
    }

    #[test]
    fn reads_this_process() {
        let mut out = [0u64; PROCESS_SLOTS];
        read_process(Path::new("/proc"), None, &mut out).expect("self");
        assert!(out[1] > 0 && out[2] >= 1);
    }
}
