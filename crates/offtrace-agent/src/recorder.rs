//! The recorder: per-thread rings, the registry that hands them to the writer thread, and the
//! writer thread that turns them into a trace file.
//!
//! Record path (an application thread, inside an XPTI callback): one load of the global state
//! (the gate; Acquire, a plain load on x86), one clock read, one access to a const, destructor-free thread-local (the
//! thread's `Local` pointer; no re-entrancy flag of its own: [`record`] is called only from the
//! services' delivery (`trace_client`), whose guard already keeps a thread from re-entering it),
//! a wait-free ring reservation, the record written in place in its compact form, and one
//! Release store that publishes it. A `ur.call` function_with_args begin/end (most of the
//! traffic) is encoded straight from the callback's arguments (`decode::encode_ur_call`); other
//! notifications are decoded into a [`Notification`] on the stack first. The first
//! notification of a thread registers its ring (`#[cold]`: allocation, a mutex, a `Thread`
//! definition). A full ring (fewer than `compact::MAX_WORDS` words free) drops the record and
//! counts it; the count reaches the trace as a `Drops` record. Thread exit marks the ring
//! orphaned; the writer drains and frees it.
//!
//! Start: `xptiTraceInit` on the application's thread only decides the tick source (the TSC when
//! `/proc/cpuinfo` says it is invariant), takes the start point and spawns the writer; the
//! writer measures the TSC rate (20 ms after the start point, or at once when a finish or
//! flush request comes earlier) before it writes the header, so the application never waits
//! for the calibration.
//!
//! Writer (thread `offtrace-writer`): wakes every 20 ms, or when a producer has pushed half a
//! ring since the last wake-up; per cycle it (1) adopts newly registered rings, (2) snapshots
//! every ring's tail (Acquire), (3) drains the definitions queue, (4) drains each ring up to its
//! snapshot — so every definition a notification refers to precedes it in the file, and a UR
//! exit recorded without its arguments gets those of its begin back — then
//! writes `Drops` deltas, a `ClockSync` about once a second, and closes a chunk at least every
//! 100 ms so a SIGKILL leaves a readable trace.
//!
//! Finish: the last `xptiTraceFinish` (`sycl`, or every initialised stream), else the agent's
//! ELF destructor (which glibc runs after the runtime's), stops recording, asks the writer for a
//! last cycle, a final `ClockSync` and the `End` record, and waits at most 5 s. An `atexit`
//! handler only drains and closes a chunk (the runtime still notifies after it). Notifications
//! that arrive later (runtime threads outlive `main`) see the gate closed and return; those of
//! threads whose TLS is already destroyed (the main thread during `exit`) go through one shared,
//! `try_lock`ed late ring. A forked child stops recording.

use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use offtrace_core::clock::{Clock, TickSource};
use offtrace_core::ring::{self, Consumer, Producer};
use offtrace_format::{Notification, Record, TraceHeader, TraceWriter};

use crate::compact;
use crate::config::Config;
use crate::decode::{self, Ctx, Raw, StreamKind, ThreadCaches};
use crate::dispatcher::Dispatcher;
use crate::interner::Interner;
use offtrace_xpti::abi::trace_type as tt;

/// Where the writer sends records: the format's `TraceWriter`, or a test double.
pub trait TraceSink: Send {
    fn write(&mut self, r: &Record) -> Result<(), String>;
    fn write_notification(&mut self, n: &Notification) -> Result<(), String>;
    fn flush_chunk(&mut self) -> Result<(), String>;
    /// Writes `End` and the end marker.
    fn finish(self: Box<Self>) -> Result<(), String>;
}

impl<W: Write + Send> TraceSink for TraceWriter<W> {
    fn write(&mut self, r: &Record) -> Result<(), String> {
        TraceWriter::write(self, r).map_err(|e| e.to_string())
    }
    fn write_notification(&mut self, n: &Notification) -> Result<(), String> {
        TraceWriter::write_notification(self, n).map_err(|e| e.to_string())
    }
    fn flush_chunk(&mut self) -> Result<(), String> {
        TraceWriter::flush_chunk(self).map_err(|e| e.to_string())
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        TraceWriter::finish(*self).map(|_| ()).map_err(|e| e.to_string())
    }
}

const IDLE: u8 = 0;
const RECORDING: u8 = 1;
const FINISHED: u8 = 2;

/// The gate: RECORDING between a successful start and finish.
static STATE: AtomicU8 = AtomicU8::new(IDLE);
static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// Notifications lost because two exiting threads met at the late ring (reported as `Drops`
/// with tid 0).
static LATE_LOST: AtomicU64 = AtomicU64::new(0);

const WAKE_INTERVAL: Duration = Duration::from_millis(20);
const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
const SYNC_INTERVAL: Duration = Duration::from_secs(1);
const FINISH_TIMEOUT: Duration = Duration::from_secs(5);
const CALIBRATION_SPAN: Duration = Duration::from_millis(20);

/// Ring words per configured record (`OFFTRACE_BUFFER_RECORDS`): a compact record is 10-20
/// words, so this holds at least the configured number of typical records.
const WORDS_PER_RECORD: usize = 16;

struct RingEntry {
    consumer: Consumer<u64>,
    /// Words of a record not yet complete (never used in practice: a record is pushed with one
    /// Release store, so a snapshot never splits it).
    partial: Vec<u64>,
    /// Delta-decoding state (mirrors the producer's).
    delta: compact::Delta,
    tid: u32,
    drops: Arc<AtomicU64>,
    reported_drops: u64,
    orphaned: Arc<AtomicBool>,
}

/// The process-wide recorder.
pub struct Recorder {
    pub clock: Clock,
    pub interner: Interner,
    pub dispatcher: Dispatcher,
    pub config: Config,
    new_rings: Mutex<Vec<RingEntry>>,
    writer: OnceLock<std::thread::Thread>,
    /// The writer thread's tid (0 until it runs): `thread::current()` is unusable in ELF
    /// destructors, so the "am I the writer" checks compare tids.
    writer_tid: std::sync::atomic::AtomicU32,
    shutdown: AtomicBool,
    flush_requests: AtomicU64,
    flushes_done: (Mutex<u64>, Condvar),
    finished: (Mutex<bool>, Condvar),
    /// Records pushed to rings / dropped (all threads), for the End totals and the report.
    pub total_drops: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("clock", &self.clock).field("config", &self.config).finish()
    }
}

struct Local {
    producer: Producer<u64>,
    /// The notifying thread (re-read per record on the shared late ring).
    tid: u32,
    /// The tid records of this ring default to.
    ring_tid: u32,
    /// Delta-encoding state: what the last pushed record carried.
    delta: compact::Delta,
    pushed: usize,
    wake_mask: usize,
    drops: Arc<AtomicU64>,
    orphaned: Arc<AtomicBool>,
    caches: ThreadCaches,
}

impl Drop for Local {
    fn drop(&mut self) {
        // Release: the pushes before this are published by the ring's own Release stores; this
        // only tells the writer that no more will come, so it may free the ring once drained.
        self.orphaned.store(true, Ordering::Release);
    }
}

/// The record path's thread-local state: const-initialised and without a destructor, so an
/// access is a plain TLS address computation (one `__tls_get_addr` in the cdylib, no lazy-init
/// or destructor-registration check). The thread's [`Local`] is owned by [`OWNER`], touched only
/// on the cold paths (registration, thread exit).
struct Tls {
    /// The thread's `Local`: null before registration, [`DEAD`] once [`OWNER`] freed it.
    local: Cell<*mut Local>,
}

/// [`Tls::local`] after the thread's `Local` was freed (thread exit): record through the late ring.
const DEAD: *mut Local = std::ptr::dangling_mut::<Local>();

/// Owns the thread's `Local` (a `Box` leaked into [`Tls::local`]); its destructor marks the
/// pointer [`DEAD`] first, then frees the `Local` (which tells the writer the ring is orphaned).
struct Owner(Cell<*mut Local>);

impl Drop for Owner {
    fn drop(&mut self) {
        let p = self.0.replace(std::ptr::null_mut());
        // `TLS` has no destructor: always accessible on this thread.
        TLS.with(|t| t.local.set(DEAD));
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` in `local_cold` and is freed only here;
            // `TLS.local` no longer points to it, and no `record` runs on this thread now (a
            // thread-exit destructor is not inside a callback).
            #[allow(unsafe_code)]
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

thread_local! {
    static TLS: Tls = const { Tls { local: Cell::new(std::ptr::null_mut()) } };
    static OWNER: Owner = const { Owner(Cell::new(std::ptr::null_mut())) };
}

/// The recorder, if recording started.
pub fn get() -> Option<&'static Recorder> {
    RECORDER.get()
}

/// Whether notifications are being recorded now.
pub fn is_recording() -> bool {
    STATE.load(Ordering::Relaxed) == RECORDING
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::gettid() as u32
    }
}

fn thread_name() -> Vec<u8> {
    let mut buf = [0u8; 17];
    // SAFETY: PR_GET_NAME writes at most 16 bytes + NUL into the 17-byte buffer.
    #[allow(unsafe_code)]
    let r = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()) };
    if r != 0 {
        return Vec::new();
    }
    buf.iter().take_while(|&&b| b != 0).copied().collect()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into `buf`.
    #[allow(unsafe_code)]
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if r != 0 {
        return String::new();
    }
    String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned()
}

/// Starts recording: opens the trace, queues the Info records and the first ClockSync, spawns
/// the writer. Cold; called once. On failure tracing stays off (one line on stderr).
#[cold]
pub fn start(dispatcher: Dispatcher, dispatcher_path: &str, config: Config) -> Option<&'static Recorder> {
    let mut config = config;
    let file = match claim_output(&config.output) {
        Ok((f, path)) => {
            config.output = path;
            f
        }
        Err(e) => {
            eprintln!("offtrace: cannot create {}: {e}; tracing off", config.output.display());
            return None;
        }
    };
    // The tick source is decided at once; the TSC rate is measured by the writer thread
    // (`writer_main`), so the application's thread never waits for the 20 ms calibration.
    let calibration = Clock::calibration_start();
    let clock = if std::env::var("OFFTRACE_CLOCK").is_ok_and(|v| v == "monotonic") {
        Clock::monotonic()
    } else {
        Clock::detect_source()
    };
    // The trace's start point: taken now, on the application's thread, so no record precedes it.
    let sync = clock.sync_point();
    let output = config.output.clone();
    let make: MakeSink = Box::new(move |clock: &Clock| {
        let mut header = match clock.source() {
            TickSource::Tsc => {
                TraceHeader::tsc(clock.ticks_per_second() as f64, sync.ticks, sync.monotonic_ns, sync.realtime_ns)
            }
            TickSource::Monotonic => {
                let mut h = TraceHeader::monotonic();
                h.start_ticks = sync.ticks;
                h.start_monotonic_ns = sync.monotonic_ns;
                h.start_realtime_ns = sync.realtime_ns;
                h
            }
        };
        header.pid = std::process::id();
        match TraceWriter::new(file, &header) {
            Ok(w) => Some(Box::new(w) as Box<dyn TraceSink>),
            Err(e) => {
                eprintln!("offtrace: cannot write {}: {e}; tracing off", output.display());
                None
            }
        }
    });
    start_inner(dispatcher, dispatcher_path, config, clock, Some(calibration), make)
}

/// Makes the sink on the writer thread, once the clock is calibrated (the TSC rate goes into the
/// trace header); `None` turns tracing off.
type MakeSink = Box<dyn FnOnce(&Clock) -> Option<Box<dyn TraceSink>> + Send>;

/// Opens the trace file and holds an exclusive `flock` on it for the process's lifetime.
/// `%p` in the path becomes the pid. When another live process already holds the file (a child
/// process that inherited `OFFTRACE_OUTPUT` and loaded the agent too), this process writes to
/// `<path>.<pid>` instead of clobbering that trace.
#[cold]
fn claim_output(path: &std::path::Path) -> std::io::Result<(File, std::path::PathBuf)> {
    use std::os::fd::AsRawFd;
    let pid = std::process::id();
    let path = std::path::PathBuf::from(path.to_string_lossy().replace("%p", &pid.to_string()));
    let lock = |f: &File| {
        // SAFETY: flock on a valid, owned file descriptor.
        #[allow(unsafe_code)]
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        r == 0
    };
    let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(&path)?;
    if lock(&f) {
        // Only regular files are truncated (the output may be /dev/null or a FIFO).
        if f.metadata()?.is_file() {
            f.set_len(0)?;
        }
        return Ok((f, path));
    }
    let mut own = path.into_os_string();
    own.push(format!(".{pid}"));
    let own = std::path::PathBuf::from(own);
    let f = File::create(&own)?;
    lock(&f);
    Ok((f, own))
}

/// [`start`] with any sink (tests, benchmarks).
#[cold]
pub fn start_with_sink(
    dispatcher: Dispatcher,
    dispatcher_path: &str,
    config: Config,
    clock: Clock,
    sink: Box<dyn TraceSink>,
) -> Option<&'static Recorder> {
    start_inner(dispatcher, dispatcher_path, config, clock, None, Box::new(move |_: &Clock| Some(sink)))
}

#[cold]
fn start_inner(
    dispatcher: Dispatcher,
    dispatcher_path: &str,
    config: Config,
    clock: Clock,
    calibration: Option<(u64, u64)>,
    make: MakeSink,
) -> Option<&'static Recorder> {
    let rec = Recorder {
        clock,
        interner: Interner::new(),
        dispatcher,
        config,
        new_rings: Mutex::new(Vec::new()),
        writer: OnceLock::new(),
        writer_tid: std::sync::atomic::AtomicU32::new(0),
        shutdown: AtomicBool::new(false),
        flush_requests: AtomicU64::new(0),
        flushes_done: (Mutex::new(0), Condvar::new()),
        finished: (Mutex::new(false), Condvar::new()),
        total_drops: AtomicU64::new(0),
    };
    if RECORDER.set(rec).is_err() {
        return RECORDER.get();
    }
    let rec = RECORDER.get()?;
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let command: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    let s = rec.clock.sync_point();
    for (k, v) in [
        ("pid", std::process::id().to_string()),
        ("command", command.join(" ")),
        ("agent_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("dispatcher", dispatcher_path.to_owned()),
        ("detail", rec.config.detail_name().to_owned()),
        ("hostname", hostname()),
        ("ring_records", rec.config.ring_records.to_string()),
        ("output", rec.config.output.display().to_string()),
    ] {
        rec.interner.push(Record::Info { key: k.to_owned(), value: v });
    }
    rec.interner.push(Record::ClockSync { ticks: s.ticks, monotonic_ns: s.monotonic_ns, realtime_ns: s.realtime_ns });
    let spawned = std::thread::Builder::new().name("offtrace-writer".into()).spawn(move || {
        // A panic here is a bug; it must not leave `finish` waiting its full timeout.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer_main(rec, calibration, make))).is_err() {
            eprintln!("offtrace: the writer thread failed; the trace is incomplete");
            STATE.store(FINISHED, Ordering::Relaxed);
            let (m, cv) = &rec.finished;
            *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
    });
    match spawned {
        Ok(h) => {
            let _ = rec.writer.set(h.thread().clone());
        }
        Err(e) => {
            eprintln!("offtrace: cannot start the writer thread: {e}; tracing off");
            return None;
        }
    }
    // A forked child has no writer thread: it stops recording (the parent's trace is not
    // touched; the child's rings would only fill and drop).
    // SAFETY: registering a plain extern "C" fn with no captured state.
    #[allow(unsafe_code)]
    unsafe {
        libc::pthread_atfork(None, None, Some(stop_in_child));
    }
    // Release: publishes `RECORDER` (set above) to the record path, which reads it unchecked
    // after its Acquire load of the gate.
    STATE.store(RECORDING, Ordering::Release);
    // The recorder is a client of the tracing services: notifications reach `record` through
    // its `XPTI` callback (`trace_client`).
    if let Err(e) = crate::trace_client::subscribe() {
        eprintln!("offtrace: cannot subscribe the recorder to the tracing services: {e}; tracing off");
        STATE.store(FINISHED, Ordering::Relaxed);
        return None;
    }
    Some(rec)
}

extern "C" fn stop_in_child() {
    // Relaxed: the child is single-threaded right after fork.
    STATE.store(FINISHED, Ordering::Relaxed);
}

/// Records one notification. The record path: see the module docs.
///
/// Called only from the services' delivery of an `XPTI` record (`trace_client::on_xpti`): while
/// it runs, the services deliver nothing else on this thread (their re-entrancy guard), so a
/// notification the recorder causes itself is not recorded, and the thread's `Local` is never
/// borrowed twice.
#[inline(always)]
pub fn record(kind: StreamKind, stream: u8, raw: &Raw) {
    // Two entry points, so that the common case's code (`kind` known) is not interleaved with
    // the generic path's: a `ur.call` function_with_args begin/end, and everything else.
    if is_ur_call_with_args(kind, raw) { record_ur_call(stream, raw) } else { record_other(kind, stream, raw) }
}

/// A `ur.call` function_with_args begin/end with user data: encoded in place
/// (`decode::encode_ur_call`).
#[inline(always)]
fn is_ur_call_with_args(kind: StreamKind, raw: &Raw) -> bool {
    kind == StreamKind::UrCall
        && matches!(raw.trace_type, tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_WITH_ARGS_END)
        && !raw.user_data.is_null()
}

#[inline(never)]
fn record_ur_call(stream: u8, raw: &Raw) {
    record_impl(StreamKind::UrCall, stream, raw, Some(true));
}

#[inline(never)]
fn record_other(kind: StreamKind, stream: u8, raw: &Raw) {
    record_impl(kind, stream, raw, Some(false));
}

/// `ur`: whether this is [`is_ur_call_with_args`], when the caller knows.
#[inline(always)]
fn record_impl(kind: StreamKind, stream: u8, raw: &Raw, ur: Option<bool>) {
    // Acquire: pairs with the Release that set RECORDING, after `RECORDER` was set (a plain
    // load on x86). A stale value at start or finish records or skips one notification.
    if STATE.load(Ordering::Acquire) != RECORDING {
        return;
    }
    // SAFETY: RECORDING is stored only after `RECORDER` was set (`start_inner`), and a set
    // `OnceLock` stays set; the Acquire above makes it visible. One load and branch less.
    #[allow(unsafe_code)]
    let rec = unsafe { RECORDER.get().unwrap_unchecked() };
    let ts = rec.clock.now();
    // The address only (inlined: a TLS offset); `TLS` has no destructor and lives as long as
    // the thread.
    let t: *const Tls = TLS.with(std::ptr::from_ref);
    // SAFETY: see above; only this thread accesses its `TLS`.
    #[allow(unsafe_code)]
    let t = unsafe { &*t };
    let mut p = t.local.get();
    if p.is_null() || p == DEAD {
        p = local_cold(rec, t);
        if p.is_null() {
            return;
        }
        if p == DEAD {
            record_late(rec, ts, kind, stream, raw);
            return;
        }
    }
    // SAFETY: a live `Local` owned by this thread's `OWNER` (freed only by its destructor, which
    // first resets `t.local`); the services' re-entrancy guard (see [`record`]) excludes any
    // other reference to it meanwhile.
    #[allow(unsafe_code)]
    let local = unsafe { &mut *p };
    record_into(rec, local, ts, kind, stream, raw, ur);
}

/// The thread's `Local` when [`Tls::local`] is not one yet: registered at the thread's first
/// notification; [`DEAD`] after its thread-locals were destroyed (glibc destroys the main
/// thread's TLS at exit before the runtime's own teardown, which still makes UR calls: those go
/// to the shared late ring); null when nothing is to be recorded.
#[cold]
#[inline(never)]
fn local_cold(rec: &Recorder, t: &Tls) -> *mut Local {
    let p = t.local.get();
    if !p.is_null() {
        return p;
    }
    let registered = OWNER.try_with(|o| {
        let Some(local) = register_thread(rec) else { return std::ptr::null_mut() };
        let p = Box::into_raw(local);
        o.0.set(p);
        t.local.set(p);
        p
    });
    registered.unwrap_or(DEAD)
}

#[inline(always)]
fn record_into(rec: &Recorder, local: &mut Local, ts: u64, kind: StreamKind, stream: u8, raw: &Raw, ur: Option<bool>) {
    let ctx = Ctx { dispatcher: &rec.dispatcher, interner: &rec.interner };
    if ur.unwrap_or_else(|| is_ur_call_with_args(kind, raw)) {
        // The common case: encoded in place into the ring (no Notification, no staging copy).
        let Some(mut r) = local.producer.reserve(compact::MAX_WORDS) else {
            // Relaxed: a counter; the writer reads it only to report it.
            local.drops.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (caches, delta, tid, ring_tid) = (&mut local.caches, &mut local.delta, local.tid, local.ring_tid);
        // Written as one array (plain stores) unless the reservation wraps around the end of the
        // ring (once per lap): that case reserves again in a cold function, so the reservation
        // here never has its address taken and stays in registers (passed as `&mut`, all its
        // fields were stored to the stack on every record).
        if let Some(words) =
            r.contiguous().and_then(|s| <&mut [std::mem::MaybeUninit<u64>; compact::MAX_WORDS]>::try_from(s).ok())
        {
            // SAFETY: a function_with_args notification of a `ur.call` stream with user data
            // (`is_ur_call_with_args`), the arguments of the live callback.
            #[allow(unsafe_code)]
            let len = unsafe { decode::encode_ur_call(ctx, caches, stream, raw, ts, tid, ring_tid, delta, words) };
            r.commit(len);
        } else {
            // SAFETY: as above (`r` is abandoned: nothing was written to it).
            #[allow(unsafe_code)]
            let pushed = unsafe {
                encode_ur_call_wrapping(ctx, &mut local.producer, caches, stream, raw, ts, tid, ring_tid, delta)
            };
            if !pushed {
                // Relaxed: as above (never happens: see `encode_ur_call_wrapping`).
                local.drops.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        local.pushed = local.pushed.wrapping_add(1);
        if local.pushed & local.wake_mask == 0 {
            wake_writer(rec);
        }
        return;
    }
    // Decoded on the stack (hot in L1), then compacted into the ring: a Notification is 392
    // bytes, its compact form ~100-150.
    let mut n = Notification { ts, tid: local.tid, ..Notification::default() };
    // SAFETY: `raw` holds the arguments of the live callback that called us (trampolines
    // in lib.rs), for the stream `kind` describes.
    #[allow(unsafe_code)]
    unsafe {
        decode::decode(ctx, &mut local.caches, kind, stream, raw, &mut n);
    }
    // Compacted in place into the ring.
    let Some(mut r) = local.producer.reserve(compact::MAX_WORDS) else {
        // Relaxed: a counter; the writer reads it only to report it.
        local.drops.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let len = compact::encode(&n, local.ring_tid, &local.delta, &mut r);
    r.commit(len);
    local.delta.commit(&n);
    local.pushed = local.pushed.wrapping_add(1);
    if local.pushed & local.wake_mask == 0 {
        wake_writer(rec);
    }
}

/// [`decode::encode_ur_call`] into a reservation that wraps around the end of the ring (once per
/// lap: kept out of the record path's code). Reserves again: the caller's reservation
/// succeeded, and only this thread fills the ring, so this one does too (`false` if not).
///
/// # Safety
/// As [`decode::encode_ur_call`].
#[cold]
#[inline(never)]
#[allow(unsafe_code, clippy::too_many_arguments)]
unsafe fn encode_ur_call_wrapping(
    ctx: Ctx<'_>,
    producer: &mut ring::Producer<u64>,
    caches: &mut ThreadCaches,
    stream: u8,
    raw: &Raw,
    ts: u64,
    tid: u32,
    ring_tid: u32,
    delta: &mut compact::Delta,
) -> bool {
    let Some(mut r) = producer.reserve(compact::MAX_WORDS) else { return false };
    // SAFETY: forwarded.
    let len = unsafe { decode::encode_ur_call(ctx, caches, stream, raw, ts, tid, ring_tid, delta, &mut r) };
    r.commit(len);
    true
}

/// Threads whose TLS is gone (exiting threads, the main thread during `exit`) share one
/// mutex-protected ring. Rare and cold; the tid is re-read per notification.
#[cold]
#[inline(never)]
fn record_late(rec: &Recorder, ts: u64, kind: StreamKind, stream: u8, raw: &Raw) {
    static LATE: Mutex<Option<Box<Local>>> = Mutex::new(None);
    // try_lock: never block (or self-deadlock) an exiting thread; contention here is a drop.
    let Ok(mut guard) = LATE.try_lock() else {
        // Relaxed: a counter, reported by the writer.
        LATE_LOST.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if guard.is_none() {
        *guard = register_thread(rec);
    }
    let Some(local) = guard.as_mut() else { return };
    local.tid = gettid();
    record_into(rec, local, ts, kind, stream, raw, None);
}

#[cold]
#[inline(never)]
fn wake_writer(rec: &Recorder) {
    if let Some(t) = rec.writer.get() {
        t.unpark();
    }
}

#[cold]
#[inline(never)]
fn register_thread(rec: &Recorder) -> Option<Box<Local>> {
    let tid = gettid();
    let name = thread_name();
    let name = rec.interner.string(&name);
    rec.interner.push(Record::Thread { tid, name });
    // At least one reservation's worth: a push reserves `MAX_WORDS` words, so a smaller ring
    // would drop everything.
    let words = rec.config.ring_records.saturating_mul(WORDS_PER_RECORD).max(compact::MAX_WORDS);
    let (producer, consumer) = ring::ring::<u64>(words);
    let drops = Arc::new(AtomicU64::new(0));
    let orphaned = Arc::new(AtomicBool::new(false));
    let wake_mask = (producer.capacity() / WORDS_PER_RECORD / 2).next_power_of_two().max(1) - 1;
    rec.new_rings.lock().unwrap_or_else(|e| e.into_inner()).push(RingEntry {
        consumer,
        partial: Vec::new(),
        delta: compact::Delta::default(),
        tid,
        drops: drops.clone(),
        reported_drops: 0,
        orphaned: orphaned.clone(),
    });
    Some(Box::new(Local {
        producer,
        tid,
        ring_tid: tid,
        delta: compact::Delta::default(),
        pushed: 0,
        wake_mask,
        drops,
        orphaned,
        caches: ThreadCaches::new(),
    }))
}

/// Latches the first write error (reported once on stderr).
fn note(error: &mut Option<String>, r: Result<(), String>) {
    if let (Err(e), None) = (r, &error) {
        eprintln!("offtrace: writing the trace failed: {e}; recording continues without output");
        *error = Some(e);
    }
}

struct WriterState {
    rings: Vec<RingEntry>,
    snaps: Vec<usize>,
    defs: Vec<Record>,
    error: Option<String>,
    records: u64,
}

impl WriterState {
    fn note(&mut self, r: Result<(), String>) {
        note(&mut self.error, r);
    }

    fn cycle(&mut self, rec: &Recorder, sink: &mut dyn TraceSink) {
        self.rings.append(&mut rec.new_rings.lock().unwrap_or_else(|e| e.into_inner()));
        self.snaps.clear();
        self.snaps.extend(self.rings.iter().map(|r| r.consumer.snapshot()));
        rec.interner.take_queue(&mut self.defs);
        let failed = self.error.is_some();
        for d in self.defs.drain(..) {
            if !failed {
                let r = sink.write(&d);
                note(&mut self.error, r);
            }
        }
        let mut err = None;
        let mut written = 0;
        for (r, &s) in self.rings.iter_mut().zip(&self.snaps) {
            let tid = r.tid;
            let partial = &mut r.partial;
            let delta = &mut r.delta;
            r.consumer.drain_to(s, |w| {
                partial.push(w);
                if partial.len() < compact::record_len(partial[0]) {
                    return;
                }
                let n = compact::decode(partial, tid, delta);
                partial.clear();
                written += 1;
                if err.is_none() && !failed {
                    err = sink.write_notification(&n).err();
                }
            });
            // Relaxed: a counter (see `record`).
            let d = r.drops.load(Ordering::Relaxed);
            if d != r.reported_drops {
                let delta = d - r.reported_drops;
                r.reported_drops = d;
                rec.total_drops.fetch_add(delta, Ordering::Relaxed);
                if !failed {
                    let res = sink.write(&Record::Drops { tid: r.tid, count: delta });
                    note(&mut self.error, res);
                }
            }
        }
        self.records += written;
        // Relaxed: a counter (see `record_late`).
        let lost = LATE_LOST.swap(0, Ordering::Relaxed);
        if lost != 0 {
            rec.total_drops.fetch_add(lost, Ordering::Relaxed);
            if !failed {
                let res = sink.write(&Record::Drops { tid: 0, count: lost });
                note(&mut self.error, res);
            }
        }
        if let Some(e) = err {
            self.note(Err(e));
        }
        // Acquire: pairs with the Release in `Local::drop`; no push follows it, so a ring found
        // empty after that is finished.
        self.rings.retain(|r| !(r.orphaned.load(Ordering::Acquire) && r.consumer.is_empty()));
    }
}

fn writer_main(rec: &'static Recorder, calibration: Option<(u64, u64)>, make: MakeSink) {
    // Relaxed: only compared with the caller's own tid.
    rec.writer_tid.store(gettid(), Ordering::Relaxed);
    // The TSC calibration (~20 ms since `start`), here rather than on the application's thread;
    // producers meanwhile stamp raw ticks into their rings.
    // The wait is cut short by a finish or flush request (a program that ends within 20 ms must
    // not wait for the calibration at exit): the rate is then measured over the time elapsed,
    // less precise but only for a trace that short.
    let clock = match calibration {
        Some(t0) => {
            let span = CALIBRATION_SPAN.as_nanos() as u64;
            loop {
                let elapsed = offtrace_core::clock::monotonic_ns().saturating_sub(t0.1);
                // Acquire: pairs with the Release in `finish` / `flush_now` (only a wake-up
                // condition here; the cycle below re-reads both).
                if elapsed >= span
                    || rec.shutdown.load(Ordering::Acquire)
                    || rec.flush_requests.load(Ordering::Acquire) != 0
                {
                    break;
                }
                std::thread::park_timeout(Duration::from_nanos(span - elapsed));
            }
            rec.clock.calibrated_since(t0, Duration::ZERO)
        }
        None => rec.clock,
    };
    rec.interner.push(Record::Info {
        key: "clock".to_owned(),
        value: format!("{:?} {} ticks/s", clock.source(), clock.ticks_per_second()),
    });
    let Some(mut sink) = make(&clock) else {
        // Relaxed: the gate (see `record`).
        STATE.store(FINISHED, Ordering::Relaxed);
        let (m, cv) = &rec.finished;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        return;
    };
    let mut st = WriterState { rings: Vec::new(), snaps: Vec::new(), defs: Vec::new(), error: None, records: 0 };
    let mut last_flush = Instant::now();
    let mut last_sync = Instant::now();
    let mut served = 0u64;
    loop {
        // Acquire: pairs with the Release in `finish`; recording stopped before it was set.
        let stop = rec.shutdown.load(Ordering::Acquire);
        // Acquire: pairs with `flush_now`'s Release increment.
        let flush_req = rec.flush_requests.load(Ordering::Acquire);
        st.cycle(rec, sink.as_mut());
        if stop || last_sync.elapsed() >= SYNC_INTERVAL {
            let s = rec.clock.sync_point();
            if st.error.is_none() {
                let r = sink.write(&Record::ClockSync {
                    ticks: s.ticks,
                    monotonic_ns: s.monotonic_ns,
                    realtime_ns: s.realtime_ns,
                });
                st.note(r);
            }
            last_sync = Instant::now();
        }
        if stop {
            break;
        }
        if flush_req != served || last_flush.elapsed() >= FLUSH_INTERVAL {
            if st.error.is_none() {
                let r = sink.flush_chunk();
                st.note(r);
            }
            last_flush = Instant::now();
            if flush_req != served {
                served = flush_req;
                let (m, cv) = &rec.flushes_done;
                let mut done = m.lock().unwrap_or_else(|e| e.into_inner());
                *done = flush_req;
                cv.notify_all();
            }
        }
        std::thread::park_timeout(WAKE_INTERVAL);
    }
    if st.error.is_none() {
        let r = sink.finish();
        st.note(r);
    }
    let (m, cv) = &rec.finished;
    *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
    cv.notify_all();
}

/// Stops recording and writes the end of the trace; waits for the writer at most 5 s.
/// Idempotent; safe from any thread, including during process exit.
#[cold]
pub fn finish() {
    // Relaxed suffices for the gate itself; the exchange makes finish run once.
    if STATE.compare_exchange(RECORDING, FINISHED, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return;
    }
    let Some(rec) = RECORDER.get() else { return };
    // Release: pairs with the writer's Acquire; it runs a last cycle after seeing this.
    rec.shutdown.store(true, Ordering::Release);
    let Some(t) = rec.writer.get() else { return };
    // Relaxed: see `writer_tid`.
    if rec.writer_tid.load(Ordering::Relaxed) == gettid() {
        return;
    }
    t.unpark();
    let (m, cv) = &rec.finished;
    let g = m.lock().unwrap_or_else(|e| e.into_inner());
    let _ = cv.wait_timeout_while(g, FINISH_TIMEOUT, |done| !*done);
}

/// Asks the writer to drain everything and close a chunk now, and waits (at most 1 s). Used at
/// process exit when no `xptiTraceFinish` came (yet): what was recorded is then on disk even if
/// the process dies before finishing.
#[cold]
pub fn flush_now() {
    if !is_recording() {
        return;
    }
    let Some(rec) = RECORDER.get() else { return };
    let Some(t) = rec.writer.get() else { return };
    // Relaxed: see `writer_tid`.
    if rec.writer_tid.load(Ordering::Relaxed) == gettid() {
        return;
    }
    // Release: pairs with the writer's Acquire load of the request counter.
    let want = rec.flush_requests.fetch_add(1, Ordering::Release) + 1;
    t.unpark();
    let (m, cv) = &rec.flushes_done;
    let g = m.lock().unwrap_or_else(|e| e.into_inner());
    let _ = cv.wait_timeout_while(g, Duration::from_secs(1), |done| *done < want);
}
