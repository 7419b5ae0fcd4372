//! A recorded process that dies of a fatal signal keeps its last records, and dies as it would
//! have without offtrace (`src/crash.rs`).
//!
//! Each test runs this test binary again as a child (`child_entry_point`, selected by
//! `OFFTRACE_TEST_CRASH_CHILD`) that records [`CALLS`] API calls and then crashes: a write to
//! address 0, `abort()`, or a `kill` of itself with SIGTERM. The parent reads the child's trace
//! and compares its wait status with the same child's run without the crash handler.

#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // the child's crashes, its signal handler, its core-size limit

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use offtrace_core::*;
use offtrace_format::{ReadError, Record, TraceReader};
use offtrace_recorder::{Config, start_file, subscribe};

/// API calls the child records before it crashes: fewer than the open chunk holds, recorded in
/// far less than the flush timer's 100 ms, so that without the handler none reach the file.
const CALLS: u64 = 1_000;

const CHILD: &str = "OFFTRACE_TEST_CRASH_CHILD";

/// The child's side (runs only when `OFFTRACE_TEST_CRASH_CHILD` names how to crash).
#[test]
fn child_entry_point() {
    let Ok(how) = std::env::var(CHILD) else { return };
    let trace = PathBuf::from(std::env::var_os("OFFTRACE_TEST_CRASH_TRACE").unwrap());
    let handler = std::env::var("OFFTRACE_TEST_CRASH_HANDLER").unwrap() == "1";
    if how == "segv-after-own-handler" {
        install_own_handler(std::env::var_os("OFFTRACE_TEST_CRASH_MARKER").unwrap());
    }
    if how == "term-handled" {
        // SAFETY: a plain (not SA_SIGINFO) handler that stores to an atomic.
        unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    }
    // No timed chunk: what reaches the file before the crash is what the handler flushed.
    let config = Config::default().with_ring_words(1 << 14).with_timed_chunks(usize::MAX, Duration::from_secs(3600));
    if how == "segv-stuck-writer" {
        offtrace_recorder::start(config.with_crash_flush(handler), Box::new(StuckSink)).unwrap();
    } else {
        start_file(config.with_crash_flush(handler), &trace, &[]).unwrap();
    }
    let _ctx = subscribe(false).unwrap();
    record_calls();
    if how == "term-handled" {
        // The program's own SIGTERM handler lets it go on: so does the recording.
        // SAFETY: kill(2) of our own process.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
        while !TERMINATED.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::yield_now();
        }
        record_calls();
        offtrace_recorder::finish().unwrap();
        std::process::exit(0);
    }
    // SAFETY: each arm ends the process on purpose, as a crashing program would.
    unsafe {
        match how.as_str() {
            "segv" | "segv-after-own-handler" | "segv-stuck-writer" => {
                std::ptr::write_volatile(std::ptr::null_mut::<u64>(), 1)
            }
            "abort" => libc::abort(),
            "term" => {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
            other => panic!("unknown crash {other}"),
        }
    }
    // SIGTERM is delivered to whichever thread takes it: wait for it.
    std::thread::sleep(Duration::from_secs(30));
    panic!("the child outlived its crash");
}

/// A sink whose chunk never gets written: the writer is stuck, as if the crashed thread held a
/// lock it needs.
struct StuckSink;

impl offtrace_recorder::TraceSink for StuckSink {
    fn write(&mut self, _: &Record) -> Result<(), String> {
        Ok(())
    }
    fn flush_chunk(&mut self) -> Result<(), String> {
        loop {
            std::thread::park();
        }
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

fn record_calls() {
    for i in 0..CALLS {
        let mut p = ApiCallPayload::new(19, &[0x1000, i]);
        let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(&p));
        p.has_result = 1;
        emit_exit(t, Payload::UrApi(&p));
    }
}

static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_term(_sig: libc::c_int) {
    TERMINATED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The file descriptor the program's own SIGSEGV handler writes its mark to.
static MARKER_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn own_handler(_sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: write(2) is async-signal-safe; the fd is open and the bytes are static.
    unsafe { libc::write(MARKER_FD.load(std::sync::atomic::Ordering::Relaxed), b"called".as_ptr().cast(), 6) };
}

/// A program's own SIGSEGV handler, installed before the recording starts: one-shot
/// (`SA_RESETHAND`), it marks that it ran and returns, so the fault repeats and the default
/// action ends the process.
fn install_own_handler(marker: std::ffi::OsString) {
    let f = std::fs::File::create(marker).unwrap();
    MARKER_FD.store(std::os::fd::IntoRawFd::into_raw_fd(f), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler and an empty mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = own_handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
    }
}

struct Run {
    status: ExitStatus,
    /// The API calls the trace holds.
    calls: usize,
    /// The `crash` note the writer added, if any.
    crash_note: Option<String>,
    /// How the reader's iteration ended (`None`: cleanly).
    end: Option<ReadError>,
    marker: Option<String>,
}

fn run_child(dir: &Path, how: &str, handler: bool) -> Run {
    let tag = format!("{how}-{}", u8::from(handler));
    let trace = dir.join(format!("{tag}.offtrace"));
    let marker = dir.join(format!("{tag}.marker"));
    let cwd = dir.join(&tag);
    std::fs::create_dir_all(&cwd).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry_point", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, how)
        .env("OFFTRACE_TEST_CRASH_TRACE", &trace)
        .env("OFFTRACE_TEST_CRASH_MARKER", &marker)
        .env("OFFTRACE_TEST_CRASH_HANDLER", if handler { "1" } else { "0" })
        .current_dir(&cwd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else. A core dump, where
    // the system writes one, lands in the child's own folder and shows in the wait status.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
            libc::setrlimit(libc::RLIMIT_CORE, &lim);
            Ok(())
        });
    }
    let status = cmd.status().unwrap();
    if how == "segv-stuck-writer" {
        return Run { status, calls: 0, crash_note: None, end: None, marker: None };
    }
    let mut reader = TraceReader::open(&trace).unwrap();
    let mut records = Vec::new();
    let mut end = None;
    for r in reader.by_ref() {
        match r {
            Ok(r) => records.push(r),
            Err(e) => {
                end = Some(e);
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cwd);
    Run {
        status,
        calls: records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count(),
        crash_note: records.iter().find_map(|r| match r {
            Record::Info { key, value } if key == "crash" => Some(value.clone()),
            _ => None,
        }),
        end,
        marker: std::fs::read_to_string(&marker).ok(),
    }
}

/// With the handler: every call is in the trace, the trace ends as a truncated one (no chunk
/// skipped as damaged), the note names the signal; the wait status is the one without it.
fn check(how: &str, signal: libc::c_int) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let without = run_child(dir.path(), how, false);
    let with = run_child(dir.path(), how, true);
    assert_eq!(without.status.signal(), Some(signal), "{how} without the handler: {:?}", without.status);
    assert_eq!(
        with.status.into_raw(),
        without.status.into_raw(),
        "{how}: the wait status (signal, core-dump flag) differs from the run without the handler"
    );
    assert_eq!(without.calls, 0, "{how}: the run without the handler already kept its calls");
    assert_eq!(with.calls as u64, CALLS, "{how}: calls in the trace (note {:?}, end {:?})", with.crash_note, with.end);
    assert!(matches!(with.end, Some(ReadError::Truncated { .. })), "{how}: the trace ends with {:?}", with.end);
    let note = with.crash_note.clone().unwrap_or_default();
    assert!(note.starts_with(&format!("signal {signal} on thread ")), "{how}: crash note {note:?}");
    with
}

#[test]
fn a_null_write_keeps_every_record_and_dies_of_sigsegv() {
    check("segv", libc::SIGSEGV);
}

#[test]
fn abort_keeps_every_record_and_dies_of_sigabrt() {
    check("abort", libc::SIGABRT);
}

#[test]
fn sigterm_keeps_every_record_and_dies_of_sigterm() {
    check("term", libc::SIGTERM);
}

/// A handler the program installed before the recording started is still called (once: it is
/// `SA_RESETHAND`), and the process still dies of the fault.
#[test]
fn a_handler_installed_before_the_recording_is_called_after_the_flush() {
    let run = check("segv-after-own-handler", libc::SIGSEGV);
    assert_eq!(run.marker.as_deref(), Some("called"));
}

/// A program that handles SIGTERM itself (a plain handler, installed before the recording
/// started) survives it: its handler is called after the flush, and the recording goes on and
/// finishes cleanly with the records from before and after the signal (and the crash note).
#[test]
fn a_program_that_handles_sigterm_goes_on_recording() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_child(dir.path(), "term-handled", true);
    assert!(run.status.success(), "{:?}", run.status);
    assert!(run.end.is_none(), "the trace ends with {:?}", run.end);
    assert_eq!(run.calls as u64, 2 * CALLS);
    assert!(run.crash_note.is_some_and(|n| n.starts_with(&format!("signal {} on thread ", libc::SIGTERM))));
}

/// The writer cannot write (stuck): the handler gives up after its bound and the process dies of
/// the fault as it would have, rather than hanging.
#[test]
fn a_stuck_writer_does_not_keep_the_process_from_dying() {
    let dir = tempfile::tempdir().unwrap();
    let without = run_child(dir.path(), "segv-stuck-writer", false);
    let with = run_child(dir.path(), "segv-stuck-writer", true);
    assert_eq!(without.status.signal(), Some(libc::SIGSEGV), "{:?}", without.status);
    assert_eq!(with.status.into_raw(), without.status.into_raw());
}
