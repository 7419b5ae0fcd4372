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
    let io = std::fs::read_to_string(dir.join("io")).unwrap_or_default();
    parse_process(&stat, &io, out)
}

/// [`read_process`] from the texts of `stat` and `io`.
pub fn parse_process(stat: &str, io: &str, out: &mut [u64]) -> Result<(), MetricsError> {
    // Fields after the command name (which may hold spaces and parentheses): from the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or(MetricsError::Unknown)?;
    // rest's first field is field 3 (state): field n is the (n - 3)th.
    let mut f = [0u64; 22];
    for (i, w) in rest.split_whitespace().take(22).enumerate() {
        f[i] = w.parse().unwrap_or(0);
    }
    let field = |n: usize| f[n - 3];
    let ticks = field(14) + field(15);
    out[0] = ticks * 1_000_000_000 / clock_ticks();
    out[1] = field(24) * page_size();
    out[2] = field(20);
    let key = |k: &str| {
        io.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    out[3] = key("rchar");
    out[4] = key("wchar");
    Ok(())
}

/// `/proc` files kept open and re-read from offset 0 (the kernel regenerates their text), so a
/// sample costs one `pread` per file instead of open + read + close.
///
/// One `pread` per file, not a read loop up to end of file (which costs a second system call
/// per file and sample): the files read here are single-record `/proc` files (`single_open`),
/// whose whole text one read returns when the buffer holds it. A read that fills the buffer is
/// the only case read further (the buffer then grows). Not for multi-record files (`maps`),
/// which return a page's worth of records per read.
#[derive(Debug)]
pub struct OpenFiles {
    files: Vec<Option<std::fs::File>>,
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
}

impl OpenFiles {
    /// Opens `paths` (a missing one reads as empty text).
    pub fn open(paths: &[PathBuf]) -> Result<Self, MetricsError> {
        let files: Vec<Option<std::fs::File>> = paths.iter().map(|p| std::fs::File::open(p).ok()).collect();
        if files.first().is_none_or(Option::is_none) {
            return Err(MetricsError::UnsupportedFeature);
        }
        Ok(Self { bufs: vec![vec![0u8; 4096]; files.len()], lens: vec![0; files.len()], files })
    }

    /// Re-reads every file (no allocation unless a text outgrew its buffer); then [`Self::text`].
    pub fn read(&mut self) -> Result<(), MetricsError> {
        use std::os::unix::fs::FileExt;
        for ((f, b), len) in self.files.iter().zip(self.bufs.iter_mut()).zip(self.lens.iter_mut()) {
            *len = 0;
            let Some(f) = f else { continue };
            loop {
                let n = f.read_at(&mut b[*len..], *len as u64).map_err(|_| MetricsError::DeviceLost)?;
                *len += n;
                if *len < b.len() {
                    break;
                }
                // Filled: the text may go on. Grow and read on (rare: the first sample of a big file).
                b.resize(b.len() * 2, 0);
            }
        }
        Ok(())
    }

    /// The text of file `i` as of the last [`Self::read`] (empty if missing or not UTF-8).
    pub fn text(&self, i: usize) -> &str {
        self.bufs.get(i).map_or("", |b| std::str::from_utf8(&b[..self.lens[i]]).unwrap_or(""))
    }
}

/// `proc.process` of this process, sampled cheaply (the sampler's per-sample path): CPU time from
/// `CLOCK_PROCESS_CPUTIME_ID` (exact, where `/proc/self/stat` has clock ticks), resident pages from
/// `/proc/self/statm`, threads from the link count of `/proc/self/task` (2 + one per thread: one
/// `fstat`, no text), and `rchar`/`wchar` from `/proc/self/io`. Same slots as [`read_process`];
/// 15 % cheaper per sample than `stat` + `io` on the loaded 2-vCPU VM (`perf_read_cost` example).
#[derive(Debug)]
pub struct SelfProcess {
    files: OpenFiles,
    task: std::fs::File,
    page: u64,
}

impl SelfProcess {
    pub fn open() -> Result<Self, MetricsError> {
        let files = OpenFiles::open(&[PathBuf::from("/proc/self/statm"), PathBuf::from("/proc/self/io")])?;
        let task = std::fs::File::open("/proc/self/task").map_err(|_| MetricsError::UnsupportedFeature)?;
        Ok(Self { files, task, page: page_size() })
    }

    /// `[cpu_ns, rss_bytes, threads, rchar, wchar]` now.
    pub fn read(&mut self, out: &mut [u64]) -> Result<(), MetricsError> {
        use std::os::fd::AsRawFd;
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        #[allow(unsafe_code)]
        // SAFETY: clock_gettime writes a timespec into a live local.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        if r != 0 {
            return Err(MetricsError::DeviceLost);
        }
        #[allow(unsafe_code)]
        // SAFETY: a zeroed `stat` (plain integers) is a valid value for fstat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        #[allow(unsafe_code)]
        // SAFETY: fstat of an open descriptor into a live `stat`.
        let r = unsafe { libc::fstat(self.task.as_raw_fd(), &mut st) };
        if r != 0 {
            return Err(MetricsError::DeviceLost);
        }
        self.files.read()?;
        out[0] = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        // statm: size resident shared text lib data dt (pages).
        out[1] =
            self.files.text(0).split_whitespace().nth(1).and_then(|w| w.parse::<u64>().ok()).unwrap_or(0) * self.page;
        out[2] = st.st_nlink.saturating_sub(2);
        let io = self.files.text(1);
        let key = |k: &str| {
            io.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok()).unwrap_or(0)
        };
        out[3] = key("rchar");
        out[4] = key("wchar");
        Ok(())
    }
}

/// Raw slots of `proc.system`.
pub const SYSTEM_SLOTS: usize = 5;

/// `[busy_ticks, total_ticks, mem_used_bytes, mem_available_bytes, context_switches]`.
pub fn read_system(root: &Path, out: &mut [u64]) -> Result<(), MetricsError> {
    let stat = std::fs::read_to_string(root.join("stat")).map_err(|_| MetricsError::DeviceLost)?;
    let mem = std::fs::read_to_string(root.join("meminfo")).map_err(|_| MetricsError::DeviceLost)?;
    parse_system(&stat, &mem, out)
}

/// [`read_system`] from the texts of `stat` and `meminfo`.
pub fn parse_system(stat: &str, mem: &str, out: &mut [u64]) -> Result<(), MetricsError> {
    let cpu = stat.lines().find(|l| l.starts_with("cpu ")).ok_or(MetricsError::Unknown)?;
    let mut v = [0u64; 8];
    for (i, w) in cpu.split_whitespace().skip(1).take(8).enumerate() {
        v[i] = w.parse().unwrap_or(0);
    }
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total: u64 = v.iter().sum();
    let idle = v[3] + v[4];
    out[0] = total - idle.min(total);
    out[1] = total;
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
    fn open_files_read_the_same_as_fresh_reads() {
        let mut f = OpenFiles::open(&[PathBuf::from("/proc/self/stat"), PathBuf::from("/proc/self/io")]).expect("open");
        let mut a = [0u64; PROCESS_SLOTS];
        f.read().expect("read");
        parse_process(f.text(0), f.text(1), &mut a).expect("parse");
        f.read().expect("re-read");
        let mut b = [0u64; PROCESS_SLOTS];
        parse_process(f.text(0), f.text(1), &mut b).expect("parse");
        assert!(f.text(1).contains("wchar:") && f.text(0).ends_with('\n'), "whole texts read");
        assert!(a[2] >= 1 && b[2] >= 1 && b[1] > 0, "{a:?} {b:?}");
        assert!(b[0] >= a[0] && b[3] >= a[3], "counters move forward: {a:?} {b:?}");
    }

    #[test]
    fn open_files_grow_past_a_full_buffer() {
        let d = tempfile::tempdir().expect("tmp");
        let text: String = (0..1000).map(|i| format!("line {i:5}\n")).collect();
        assert!(text.len() > 2 * 4096);
        std::fs::write(d.path().join("big"), &text).expect("write");
        let mut f = OpenFiles::open(&[d.path().join("big")]).expect("open");
        f.read().expect("read");
        assert_eq!(f.text(0), text);
        f.read().expect("re-read");
        assert_eq!(f.text(0), text);
    }

    /// In a process of its own: the process's CPU time, RSS and thread count are every thread's,
    /// and other tests' threads (plain `cargo test` runs the tests as threads of one process)
    /// would move them between the reads; their CPU time can also reach /proc/self/stat later
    /// than the fast read's clock (which counts threads running on other CPUs up to now): a
    /// run beside other tests saw the fast read 14 ms above the later stat read, where one
    /// clock tick (10 ms) is allowed.
    #[test]
    fn self_process_agrees_with_stat_and_io() {
        offtrace_testing::in_own_process(
            "procfs::tests::self_process_agrees_with_stat_and_io",
            &[],
            self_process_agrees_with_stat_and_io_alone,
        );
    }

    fn self_process_agrees_with_stat_and_io_alone() {
        let mut fast = SelfProcess::open().expect("open");
        let mut a = [0u64; PROCESS_SLOTS];
        let mut b = [0u64; PROCESS_SLOTS];
        let mut c = [0u64; PROCESS_SLOTS];
        read_process(Path::new("/proc"), None, &mut a).expect("stat");
        fast.read(&mut b).expect("fast");
        read_process(Path::new("/proc"), None, &mut c).expect("stat");
        // CPU time: exact here, clock ticks there (10 ms): within a tick of the two stat reads.
        let tick = 1_000_000_000 / clock_ticks();
        assert!(b[0] + tick >= a[0] && b[0] <= c[0] + tick, "{a:?} {b:?} {c:?}");
        // RSS and threads: the same numbers (the test harness may start or end a thread between).
        // RSS moves between the reads (the first read faults pages in; the harness's threads
        // allocate and free: runs saw +72 pages between `a` and `b`, and `b` 66 pages above both
        // `a` and `c` of 728): compared with the range of both within a quarter, which still
        // fails a unit error (pages for kB or bytes is a factor of 4 or more).
        let (lo, hi) = (a[1].min(c[1]), a[1].max(c[1]));
        assert!(b[1] >= lo - lo / 4 && b[1] <= hi + hi / 4, "rss {a:?} {b:?} {c:?}");
        assert!(b[2] >= 1 && b[2].abs_diff(a[2]) <= 2, "threads {a:?} {b:?}");
        assert!(b[3] >= a[3] && b[3] <= c[3] && b[4] >= a[4] && b[4] <= c[4], "io {a:?} {b:?} {c:?}");
        // A new thread shows in the thread count.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        let mut d = [0u64; PROCESS_SLOTS];
        fast.read(&mut d).expect("fast");
        drop(tx);
        let _ = t.join();
        let mut e = [0u64; PROCESS_SLOTS];
        fast.read(&mut e).expect("fast");
        assert_eq!(d[2], e[2] + 1, "one thread more while it lived: {d:?} {e:?}");
    }

    #[test]
    fn reads_this_process() {
        let mut out = [0u64; PROCESS_SLOTS];
        read_process(Path::new("/proc"), None, &mut out).expect("self");
        assert!(out[1] > 0 && out[2] >= 1);
    }
}
