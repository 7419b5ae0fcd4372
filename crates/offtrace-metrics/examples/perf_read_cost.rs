//! Where a `cpu.sw` sample's time goes when the program has busy threads: the sampling thread's
//! CPU time (CLOCK_THREAD_CPUTIME_ID) per periodic wake-up, for a wake-up alone, the five
//! process-wide (inherited) software events read one by one, the same events read as one
//! perf_event group (`PERF_FORMAT_GROUP`), and `/proc/self/{stat,io}`.
//! `cargo run --release -p offtrace-metrics --example perf_read_cost [busy_threads] [period_us] [rounds]`

#![allow(unsafe_code)] // perf_event_open, read

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use offtrace_metrics::perf::{self, FLAG_INHERIT, PERF_FLAG_FD_CLOEXEC, PerfEventAttr};
use offtrace_metrics::{procfs, thread_cpu_ns};

fn open(attr: &PerfEventAttr, group: RawFd) -> RawFd {
    // SAFETY: a live attr; pid 0 = this thread (inherit: the threads it creates later).
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, 0, -1i32, group, PERF_FLAG_FD_CLOEXEC)
    };
    assert!(fd >= 0, "perf_event_open: {}", std::io::Error::last_os_error());
    fd as RawFd
}

fn read_into(fd: RawFd, buf: &mut [u64]) -> isize {
    // SAFETY: reading into a live buffer of its byte length.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(buf)) }
}

/// Threads of this process: `/proc/self/task`'s link count is 2 + the number of threads.
fn task_links(dir: &std::fs::File) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: fstat into a live zeroed stat of an open descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstat(dir.as_raw_fd(), &mut st) };
    st.st_nlink.saturating_sub(2)
}

fn main() {
    let mut args = std::env::args().skip(1).map(|s| s.parse::<u64>().expect("number"));
    let busy = args.next().unwrap_or(3) as usize;
    let period = Duration::from_micros(args.next().unwrap_or(10_000));
    let rounds = args.next().unwrap_or(300) as u32;

    // Opened on this thread before the busy threads start, with inherit: they are counted.
    let single: Vec<RawFd> =
        perf::SOFTWARE_EVENTS.iter().map(|&(_, t, c)| open(&PerfEventAttr::new(t, c, FLAG_INHERIT), -1)).collect();
    let mut group = Vec::new();
    for (i, &(_, t, c)) in perf::SOFTWARE_EVENTS.iter().enumerate() {
        let mut a = PerfEventAttr::new(t, c, FLAG_INHERIT);
        a.read_format = perf::FORMAT_GROUP;
        group.push(open(&a, if i == 0 { -1 } else { group[0] }));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..busy)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    // A worker pool blocks now and then: the count of live, inactive children varies.
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        })
        .collect();
    let task = std::fs::File::open("/proc/self/task").expect("task");
    let mut files = procfs::OpenFiles::open(&["/proc/self/stat".into(), "/proc/self/io".into()]).expect("proc");
    let mut out = [0u64; 8];
    let mut buf = [0u64; 1 + 5];
    let one = |path: &str| procfs::OpenFiles::open(&[path.into()]).expect("proc");
    let (mut stat, mut io, mut statm, mut status) =
        (one("/proc/self/stat"), one("/proc/self/io"), one("/proc/self/statm"), one("/proc/self/status"));
    let names = [
        "wake-up only",
        "5 single reads",
        "1 group read",
        "/proc/self stat+io",
        "stat",
        "io",
        "statm",
        "status",
        "process cputime clock",
        "getrusage",
        "fstat /proc/self/task",
        "cputime+statm+fstat(task)+io",
    ];
    let mut run = |i: usize| match i {
        0 => {}
        1 => {
            for &fd in &single {
                read_into(fd, &mut out[..1]);
            }
        }
        2 => assert_eq!(read_into(group[0], &mut buf), 48),
        3 => {
            files.read().expect("read");
            procfs::parse_process(files.text(0), files.text(1), &mut out).expect("parse");
        }
        4 => {
            stat.read().expect("read");
            out[0] = stat.text(0).len() as u64;
        }
        5 => {
            io.read().expect("read");
            out[0] = io.text(0).len() as u64;
        }
        6 => {
            statm.read().expect("read");
            out[0] = statm.text(0).len() as u64;
        }
        7 => {
            status.read().expect("read");
            out[0] = status.text(0).len() as u64;
        }
        8 => {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes a timespec into a live local.
            unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
            out[0] = ts.tv_nsec as u64;
        }
        10 => out[0] = task_links(&task),
        11 => {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes a timespec into a live local.
            unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
            statm.read().expect("read");
            io.read().expect("read");
            out[0] = ts.tv_nsec as u64 + task_links(&task) + statm.text(0).len() as u64 + io.text(0).len() as u64;
        }
        _ => {
            // SAFETY: writes an rusage into a live zeroed local.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
            out[0] = ru.ru_utime.tv_usec as u64;
        }
    };
    // Interleaved: each round runs every variant once, each after its own sleep to the next
    // period boundary (a cold wake-up, as in the sampler).
    let mut cpu = [0u64; 12];
    let mut work = [0u64; 12];
    let start = Instant::now();
    let mut k = 1;
    for _ in 0..rounds {
        for i in 0..names.len() {
            let c0 = thread_cpu_ns();
            let deadline = start + period * k;
            k += 1;
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            let w0 = thread_cpu_ns();
            run(i);
            let c1 = thread_cpu_ns();
            cpu[i] += c1 - c0;
            work[i] += c1 - w0;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    println!("{busy} busy threads, period {period:?}, {rounds} rounds; sampling thread CPU per wake-up:");
    for (i, name) in names.iter().enumerate() {
        println!(
            "  {name:<20} whole {:>7.2} us   of which the read {:>7.2} us",
            cpu[i] as f64 / f64::from(rounds) / 1e3,
            work[i] as f64 / f64::from(rounds) / 1e3
        );
    }
    let mut g = [0u64; 6];
    read_into(group[0], &mut g);
    let s: Vec<u64> = single
        .iter()
        .map(|&fd| {
            let mut v = [0u64];
            read_into(fd, &mut v);
            v[0]
        })
        .collect();
    println!("  counts single {s:?} group {:?}", &g[1..]);
}
