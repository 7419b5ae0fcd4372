//! The writer thread (`offtrace-writer`) and the recording's start and finish.
//!
//! A cycle: (1) clear the wake-up request, (2) snapshot every ring's tail (Acquire), (3) write
//! the queued definitions, (4) drain each ring up to its snapshot, turning entries into records
//! (an operation's `KindDef` / `OperationDef` definitions first, the first time it appears),
//! (5) write `Drops` deltas, forget drained rings of exited threads, and close a chunk when the
//! flush interval (100 ms) passed and the chunk holds at least `min_timed_chunk_bytes` (64 KiB
//! of encoded records, about 3,000), or when `max_flush_delay` (250 ms) passed. What a SIGKILL
//! loses: the records of the open chunk, so at most the last 100 ms of a program that records
//! 64 KiB or more in 100 ms, and at most the last 250 ms of any program; a fatal signal
//! (`crash.rs`, when the agent turned it on) loses nothing the rings held. A `flush` request, a
//! fatal signal and the end of the recording close the chunk whatever its size. The writer
//! sleeps (`wakeup.rs`) until a producer wakes it (a ring passed a quarter full), a flush or a
//! fatal signal asks, or the flush interval elapses. `finish` closes the
//! gate, the writer waits until no thread is pushing (`quiesce.rs`), runs a last cycle and
//! writes the `End` record: every record that passed the gate is in the trace or in a `Drops`
//! count (thread 0 for records refused while their thread was registering).
//!
//! Repeated definitions (`docs/format.md`): the writer keeps every definition it wrote (strings,
//! kinds, operations, threads, devices, counters, the raw layer's) and writes them all again at
//! the start of the first chunk after every [`REPEAT_EVERY`] bytes of trace (or sixteen times
//! the last repeat's size, if more), and at the end, in the last chunk, with `End`: a damaged
//! chunk then takes with it only its own records, not the names of every later one. What it
//! costs: one enum match per record written here (the API calls and device activity of the
//! fast path are never definitions and are not looked at), and the repeats' bytes.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use offtrace_core::Kind;
use offtrace_format::{
    ActivityRef, ApiCallRef, ArgDef, DefinitionKey, KernelAllocation, OperationDef, Record, TaskGraphRecord,
    TraceHeader, TraceWriter,
};

use crate::entry::{self, HEAD_WORDS, MAX_ENTRY_WORDS, TAG_RAW};
use crate::recorder::{Config, Inner, LIFECYCLE, RawLayer, RingShared, current, install, uninstall};

/// Where the writer sends records: the format's `TraceWriter`, or a test double.
pub trait TraceSink: Send {
    fn write(&mut self, r: &Record) -> Result<(), String>;
    /// An API call (the most frequent record), its arguments borrowed from the ring entry: by
    /// default written as a [`Record`].
    fn write_api_call(&mut self, a: &ApiCallRef<'_>) -> Result<(), String> {
        self.write(&Record::ApiCall(a.to_api_call()))
    }
    /// A device activity, its allocation properties borrowed from the ring entry: by default
    /// written as a [`Record`].
    fn write_activity(&mut self, a: &ActivityRef<'_>) -> Result<(), String> {
        self.write(&Record::Activity(a.to_activity()))
    }
    /// A task-graph record: by default written as a [`Record`].
    fn write_task_graph(&mut self, r: &TaskGraphRecord) -> Result<(), String> {
        self.write(&Record::TaskGraph(*r))
    }
    fn flush_chunk(&mut self) -> Result<(), String>;
    /// Writes the end marker (after the `End` record).
    fn finish(self: Box<Self>) -> Result<(), String>;
    /// Bytes of trace so far, the open chunk's uncompressed records included (when to repeat
    /// the definitions); `0` for a sink that does not know (then they are repeated at the end
    /// only).
    fn bytes(&self) -> u64 {
        0
    }
    /// Uncompressed bytes of the open chunk (whether the flush timer closes it); `None` for a
    /// sink that does not know (then it closes one at every tick).
    fn open_chunk_bytes(&self) -> Option<usize> {
        None
    }
    /// Records the sink has written, whoever wrote them (the file's `Info` records before the
    /// writer started included); `None` for a sink that does not count.
    fn records_written(&self) -> Option<u64> {
        None
    }
}

impl<W: Write + Send> TraceSink for TraceWriter<W> {
    fn write(&mut self, r: &Record) -> Result<(), String> {
        TraceWriter::write(self, r).map_err(|e| e.to_string())
    }
    #[inline]
    fn write_api_call(&mut self, a: &ApiCallRef<'_>) -> Result<(), String> {
        TraceWriter::write_api_call_ref(self, a).map_err(|e| e.to_string())
    }
    #[inline]
    fn write_activity(&mut self, a: &ActivityRef<'_>) -> Result<(), String> {
        TraceWriter::write_activity_ref(self, a).map_err(|e| e.to_string())
    }
    #[inline]
    fn write_task_graph(&mut self, r: &TaskGraphRecord) -> Result<(), String> {
        TraceWriter::write_task_graph(self, r).map_err(|e| e.to_string())
    }
    fn flush_chunk(&mut self) -> Result<(), String> {
        TraceWriter::flush_chunk(self).map_err(|e| e.to_string())
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        TraceWriter::finish(*self).map(|_| ()).map_err(|e| e.to_string())
    }
    fn bytes(&self) -> u64 {
        self.bytes_written() + TraceWriter::open_chunk_bytes(self) as u64
    }
    fn open_chunk_bytes(&self) -> Option<usize> {
        Some(TraceWriter::open_chunk_bytes(self))
    }
    fn records_written(&self) -> Option<u64> {
        Some(TraceWriter::records_written(self))
    }
}

/// Trace bytes between two repeats of the definitions, at least (see the module docs).
pub const REPEAT_EVERY: u64 = 8 << 20;

/// Why a recording could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("a recording is already running")]
    AlreadyRecording,
    #[error("cannot create the trace file {path}: {source}")]
    Create { path: std::path::PathBuf, source: std::io::Error },
    #[error("cannot write the trace header: {0}")]
    Header(String),
    #[error("cannot start the writer thread: {0}")]
    Thread(std::io::Error),
}

/// What a finished recording wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Records written (definitions included once, their repeats and `End` excluded).
    pub records: u64,
    /// Entries dropped because a ring was full (default mode).
    pub drops: u64,
}

/// Why a recording did not finish cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinishError {
    #[error("no recording is running")]
    NotRecording,
    #[error("the trace could not be written completely: {0}")]
    Write(String),
    #[error("the writer thread panicked")]
    WriterPanicked,
}

/// Kinds below 2^5 and operations below 2^10 have their bit in [`Writer::seen_ops`] (every core
/// kind; the largest API tables have a few hundred operations).
const SEEN_KIND_BITS: u32 = 5;
const SEEN_OP_BITS: u32 = 10;
const SEEN_WORDS: usize = 1 << (SEEN_KIND_BITS + SEEN_OP_BITS - 6);

/// Ring words decoded before their slots are given back to the producer.
const DRAIN_BATCH_WORDS: usize = 8192;

/// How long the last drain waits for a thread that is pushing (see [`Writer::quiesce`]).
const QUIESCE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

static WRITER: Mutex<Option<std::thread::JoinHandle<Result<Stats, String>>>> = Mutex::new(None);

/// Starts recording into the trace file `path` (created; an existing file is replaced), with
/// `Info` records (`pid`, `command`, ...) first.
pub fn start_file(config: Config, path: &Path, info: &[(&str, &str)]) -> Result<(), StartError> {
    let file = std::fs::File::create(path).map_err(|source| StartError::Create { path: path.into(), source })?;
    start_open(config, file, info)
}

/// The file header of a recording starting now: timestamps are CLOCK_MONOTONIC ns (one tick =
/// 1 ns), and the start point names both clocks, so that readers (Perfetto's clock snapshot)
/// place the trace on the wall clock.
pub fn start_header() -> TraceHeader {
    let start_monotonic_ns = offtrace_core::clock::monotonic_ns();
    TraceHeader {
        pid: std::process::id(),
        start_ticks: start_monotonic_ns,
        start_monotonic_ns,
        start_realtime_ns: offtrace_core::clock::realtime_ns(),
        ..TraceHeader::monotonic()
    }
}

/// [`start_file`] into a file the caller opened (and maybe locked).
pub fn start_open(config: Config, file: std::fs::File, info: &[(&str, &str)]) -> Result<(), StartError> {
    let header = start_header();
    let mut w = TraceWriter::with_chunk_size(std::io::BufWriter::new(file), &header, config.chunk_bytes)
        .map_err(|e| StartError::Header(e.to_string()))?;
    w.store_raw_up_to(config.raw_chunk_bytes_per_record);
    for (key, value) in info {
        w.write(&Record::Info { key: (*key).into(), value: (*value).into() })
            .map_err(|e| StartError::Header(e.to_string()))?;
    }
    // The file's writer as itself, not behind `dyn TraceSink`: the writer thread's calls per
    // record are then direct (and inlined), not through the vtable.
    start_with(config, Box::new(w))
}

/// Starts recording into `sink` (timestamps are CLOCK_MONOTONIC ns: give the sink a
/// [`TraceHeader::monotonic`] header). Records come from the services client ([`crate::subscribe`]).
pub fn start(config: Config, sink: Box<dyn TraceSink>) -> Result<(), StartError> {
    start_with(config, sink)
}

/// [`start`] with the writer thread's code made for the sink's own type.
fn start_with<S: TraceSink + ?Sized + 'static>(config: Config, sink: Box<S>) -> Result<(), StartError> {
    let _g = LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner());
    if current().is_some() {
        return Err(StartError::AlreadyRecording);
    }
    crate::quiesce::prepare();
    let inner = install(Box::new(Inner {
        config,
        defs: Default::default(),
        rings: Mutex::new(Vec::new()),
        wakeup: Default::default(),
        crash: crate::crash::CrashState::in_this_process(),
        wake_pending: Default::default(),
        stopping: Default::default(),
        registering: Default::default(),
        refused: Default::default(),
        raw: std::sync::OnceLock::new(),
        flushes: Default::default(),
    }));
    let handle = crate::crash::with_sigterm_blocked(|| {
        std::thread::Builder::new().name("offtrace-writer".into()).spawn(move || writer_main(inner, sink))
    })
    .map_err(|e| {
        uninstall();
        StartError::Thread(e)
    })?;
    *WRITER.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    if inner.config.crash_flush {
        crate::crash::install();
    }
    Ok(())
}

/// Installs the backend's raw layer for the current recording (once); `false` if none is
/// running or one is installed.
pub fn set_raw_layer(layer: Box<dyn RawLayer>) -> bool {
    current().is_some_and(|inner| inner.raw.set(layer).is_ok())
}

/// The current recording's string table and definitions queue (for a raw layer).
pub fn definitions() -> Option<&'static crate::Definitions> {
    current().map(|i| &i.defs)
}

/// Stops recording: the writer drains every ring, writes `End` and closes the file. Records
/// emitted from now on are not recorded.
pub fn finish() -> Result<Stats, FinishError> {
    let _g = LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(inner) = current() else { return Err(FinishError::NotRecording) };
    // No new record starts from here; one already past the gate may still land in its ring
    // before the writer's last cycle (or be dropped, counted, if it comes after).
    uninstall();
    // SeqCst: see `register_and_record` (a registering thread sees it, or the writer sees the
    // thread registering).
    inner.stopping.store(true, Ordering::SeqCst);
    let handle = WRITER.lock().unwrap_or_else(|e| e.into_inner()).take();
    match handle {
        Some(h) => {
            inner.wakeup.wake();
            match h.join() {
                Ok(Ok(stats)) => Ok(stats),
                Ok(Err(e)) => Err(FinishError::Write(e)),
                Err(_) => Err(FinishError::WriterPanicked),
            }
        }
        None => Err(FinishError::NotRecording),
    }
}

/// Asks the writer for a cycle now (tests, `flush` requests); returns at once.
pub fn wake() {
    if let Some(inner) = current() {
        inner.wakeup.wake();
    }
}

struct Writer<S: TraceSink + ?Sized> {
    inner: &'static Inner,
    sink: Box<S>,
    error: Option<String>,
    records: u64,
    /// Definitions written again ([`Writer::repeat_definitions`]), not in `records`.
    repeated: u64,
    /// Definitions written again identical by another of the process's layers (a thread each
    /// backend names): in `records`, but a reader drops them as repeats, so `End` leaves them out.
    redundant: u64,
    drops: u64,
    seen_kinds: HashSet<u32>,
    /// The operations defined so far: a bit each for the kinds' usual operation numbers (every
    /// entry looks here; the entries of a small kernel alternate between three operations, so
    /// remembering only the last one sent most to a hash look-up), a set for the rest.
    seen_ops: Box<[u64; SEEN_WORDS]>,
    seen_ops_large: HashSet<(u32, u32), foldhash::fast::FixedState>,
    defs: Vec<Record>,
    last_flush: Instant,
    /// Drops already reported, per ring.
    reported: std::collections::HashMap<*const RingShared, u64>,
    flushes_served: u64,
    /// Every definition written, in the order written (a reused thread id or handle: its
    /// latest value in its first place), to be written again.
    defined: Vec<Record>,
    defined_at: std::collections::HashMap<DefinitionKey, usize, foldhash::fast::FixedState>,
    /// The trace size ([`TraceSink::bytes`]) at which to repeat the definitions next.
    next_repeat: u64,
}

impl<S: TraceSink + ?Sized> Writer<S> {
    fn write(&mut self, r: &Record) {
        if self.error.is_some() {
            return;
        }
        match self.sink.write(r) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
        if let Some(key) = DefinitionKey::of(r) {
            self.keep_definition(key, r.clone());
        }
    }

    /// [`Self::write`] of a definition the writer owns (the queued ones, the operations'): kept
    /// by moving it, not by a copy of its strings.
    fn write_owned(&mut self, r: Record) {
        if self.error.is_some() {
            return;
        }
        match self.sink.write(&r) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
        if let Some(key) = DefinitionKey::of(&r) {
            self.keep_definition(key, r);
        }
    }

    #[cold]
    #[inline(never)]
    fn keep_definition(&mut self, key: DefinitionKey, r: Record) {
        match self.defined_at.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => {
                let kept = &mut self.defined[*o.get()];
                if *kept == r {
                    self.redundant += 1;
                } else {
                    *kept = r;
                }
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(self.defined.len());
                self.defined.push(r);
            }
        }
    }

    /// Writes every definition so far again (`docs/format.md`, "Repeated definitions").
    #[cold]
    #[inline(never)]
    fn repeat_definitions(&mut self) {
        let before = self.sink.bytes();
        for r in &self.defined {
            if self.error.is_some() {
                return;
            }
            // A repeat is not a record of its own: the `End` record's count (what `record`
            // prints) is what a reader delivers, each definition once.
            match self.sink.write(r) {
                Ok(()) => self.repeated += 1,
                Err(e) => self.error = Some(e),
            }
        }
        let size = self.sink.bytes().saturating_sub(before);
        self.next_repeat = self.sink.bytes() + REPEAT_EVERY.max(size.saturating_mul(16));
    }

    #[inline]
    fn write_api_call(&mut self, a: &ApiCallRef<'_>) {
        if self.error.is_some() {
            return;
        }
        match self.sink.write_api_call(a) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
    }

    #[inline]
    fn write_activity(&mut self, a: &ActivityRef<'_>) {
        if self.error.is_some() {
            return;
        }
        match self.sink.write_activity(a) {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
    }

    fn write_definitions(&mut self) {
        let mut defs = std::mem::take(&mut self.defs);
        self.inner.defs.take_queue(&mut defs);
        for d in defs.drain(..) {
            self.write_owned(d);
        }
        self.defs = defs;
    }

    /// Writes `KindDef` and `OperationDef` for (kind, op) the first time it appears.
    #[inline(always)]
    fn define_operation(&mut self, kind: u32, op: u32) {
        // One test of both ranges, then the bit.
        if (kind >> SEEN_KIND_BITS) | (op >> SEEN_OP_BITS) == 0 {
            let i = ((kind << SEEN_OP_BITS) | op) as usize;
            // The mask only spares the bounds check: `i >> 6` is below `SEEN_WORDS` already.
            let word = &mut self.seen_ops[(i >> 6) & (SEEN_WORDS - 1)];
            if *word & (1 << (i & 63)) == 0 {
                *word |= 1 << (i & 63);
                self.define_new_operation(kind, op);
            }
        } else if self.seen_ops_large.insert((kind, op)) {
            self.define_new_operation(kind, op);
        }
    }

    #[cold]
    #[inline(never)]
    fn define_new_operation(&mut self, kind: u32, op: u32) {
        let defs = &self.inner.defs;
        let k = Kind::from_u32(kind);
        let kind_def = self
            .seen_kinds
            .insert(kind)
            .then(|| Record::KindDef { kind, name: defs.string(k.map_or("UNKNOWN", |k| k.name()).as_bytes()) });
        let operation = k.and_then(|k| k.operation(op));
        let def = match operation {
            Some(o) => OperationDef {
                kind,
                op,
                name: defs.string(o.name.as_bytes()),
                args: o
                    .args
                    .iter()
                    .map(|a| ArgDef {
                        name: defs.string(a.name.as_bytes()),
                        type_name: defs.string(a.type_name.as_bytes()),
                        size: a.size,
                        format: a.format as u8,
                    })
                    .collect(),
            },
            None => OperationDef { kind, op, name: defs.string(format!("op{op}").as_bytes()), args: Vec::new() },
        };
        self.write_definitions();
        if let Some(kd) = kind_def {
            self.write_owned(kd);
        }
        self.write_owned(Record::OperationDef(def));
    }

    /// Turns the entries of a ring's readable words into records (see [`walk_entries`]).
    fn entries(&mut self, tid: u32, a: &[u64], b: &[u64], limit: usize) -> usize {
        // A kernel dispatch's allocation properties, decoded from its entry (once per drain).
        let mut allocations = [KernelAllocation::default(); crate::entry::MAX_ALLOCATIONS];
        walk_entries(a, b, limit, |e| self.entry(tid, e, &mut allocations))
    }

    #[inline]
    fn entry(&mut self, tid: u32, e: &[u64], allocations: &mut [KernelAllocation; entry::MAX_ALLOCATIONS]) {
        let (_, tag, ph, op) = entry::parse_header(e[0]);
        let (ts, correlation) = (e[1], e[2]);
        let body = &e[HEAD_WORDS..];
        if tag == TAG_RAW {
            let inner: &'static Inner = self.inner;
            if let Some(layer) = inner.raw.get() {
                // Definitions queued while the entry was encoded, then its records written
                // as they are decoded (a record is large: no list of them, no moves).
                self.write_definitions();
                layer.decode(tid, ts, op, body, &mut |r| self.write(&r));
            }
            return;
        }
        // One dispatch on the kind, each to its decoder (the fast paths: no `Record`); what
        // they refuse (malformed entries, waits) goes to `entry::decode` as before.
        let kind = Kind::from_u32(u32::from(tag));
        match kind {
            Some(Kind::TaskGraph) => {
                if let Some(r) = entry::decode_task_graph(tid, tag, ph, op, ts, correlation, body) {
                    self.define_operation(u32::from(tag), op);
                    if self.error.is_none() {
                        match self.sink.write_task_graph(&r) {
                            Ok(()) => self.records += 1,
                            Err(e) => self.error = Some(e),
                        }
                    }
                }
            }
            Some(k) if k.is_api() => {
                if let Some(a) = entry::decode_api_call(tid, tag, ph, op, ts, correlation, body) {
                    self.define_operation(u32::from(tag), op);
                    self.write_api_call(&a);
                }
            }
            Some(Kind::KernelDispatch | Kind::MemoryCopy | Kind::MemoryFill | Kind::Sync) => {
                if let Some(a) = entry::decode_activity(tid, tag, ph, op, ts, correlation, body, allocations) {
                    self.define_operation(u32::from(tag), op);
                    self.write_activity(&a);
                } else {
                    self.other_entry(tid, tag, ph, op, ts, correlation, body);
                }
            }
            _ => self.other_entry(tid, tag, ph, op, ts, correlation, body),
        }
    }

    /// An entry the fast paths do not take (definitions, waits, markers, counters...).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn other_entry(&mut self, tid: u32, tag: u8, ph: u8, op: u32, ts: u64, correlation: u64, body: &[u64]) {
        if let Some(r) = entry::decode(tid, tag, ph, op, ts, correlation, body) {
            self.define_operation(u32::from(tag), op);
            // Borrowed: moving a `Record` (264 bytes) is a block copy per record, and these are
            // rarely definitions.
            self.write(&r);
        }
    }

    fn cycle(&mut self, last: bool) {
        self.inner.wake_pending.store(false, Ordering::Relaxed);
        // Before the snapshots: the drain then takes every entry pushed before the signal.
        let crash = self.inner.crash.pending();
        let rings: Vec<Arc<RingShared>> = self.inner.rings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let snapshots: Vec<usize> =
            rings.iter().map(|r| r.consumer.lock().unwrap_or_else(|e| e.into_inner()).snapshot()).collect();
        self.write_definitions();
        let mut gone = Vec::new();
        for (r, &snap) in rings.iter().zip(&snapshots) {
            // Acquire before draining: the orphan flag's Release follows the thread's last push.
            let orphaned = r.orphaned.load(Ordering::Acquire);
            {
                // Held while the entries are decoded in place: only this thread takes it (the
                // producer pushes without it); the slots are freed for the producer after.
                let mut c = r.consumer.lock().unwrap_or_else(|e| e.into_inner());
                let snap = if orphaned { c.snapshot() } else { snap };
                // In batches: the slots of each batch go back to the producer as soon as it is
                // written, as they did when the drain copied them out first.
                loop {
                    let (a, b) = c.peek(snap);
                    let used = self.entries(r.tid, a, b, DRAIN_BATCH_WORDS);
                    c.release(used);
                    if used == 0 {
                        break;
                    }
                }
            }
            if orphaned {
                gone.push(Arc::as_ptr(r));
            }
        }
        self.write_drops(&rings);
        if !gone.is_empty() {
            let mut all = self.inner.rings.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|r| !gone.contains(&Arc::as_ptr(r)));
        }
        let requested = self.inner.flushes.0.lock().unwrap_or_else(|e| e.into_inner()).0;
        if let Some((signal, tid)) = crash {
            self.write(&Record::Info { key: "crash".into(), value: format!("signal {signal} on thread {tid}") });
        }
        if last || crash.is_some() || requested != self.flushes_served || self.timed_close_due() {
            self.last_flush = Instant::now();
            if self.error.is_none()
                && let Err(e) = self.sink.flush_chunk()
            {
                self.error = Some(e);
            }
            // At the start of the chunk just opened; the last cycle repeats them before `End`.
            if !last && self.sink.bytes() >= self.next_repeat {
                self.repeat_definitions();
            }
            if crash.is_some() {
                self.inner.crash.flushed();
            }
            if requested != self.flushes_served {
                self.flushes_served = requested;
                let (m, cv) = &self.inner.flushes;
                m.lock().unwrap_or_else(|e| e.into_inner()).1 = requested;
                cv.notify_all();
            }
        }
    }

    /// Whether the flush timer closes the open chunk now: one interval passed and the chunk is
    /// large enough to be worth its own LZ4 block, header and write, or the longest delay passed.
    /// A slow program (a run under valgrind records ~10 KB per 100 ms) would otherwise close a
    /// chunk of a few hundred records at every tick.
    fn timed_close_due(&self) -> bool {
        let config = &self.inner.config;
        let since = self.last_flush.elapsed();
        since >= config.flush_interval
            && (since >= config.max_flush_delay
                || self.sink.open_chunk_bytes().is_none_or(|open| open >= config.min_timed_chunk_bytes))
    }

    /// Before the last drain: waits until no thread is registering a ring or between its second
    /// look at the gate and the end of its push (`quiesce.rs`), so that the last drain sees every
    /// entry and every drop count. A thread that stays busy longer than [`QUIESCE_TIMEOUT`]
    /// (stopped, or descheduled on a starved machine) has its one record counted as dropped.
    fn quiesce(&mut self) {
        crate::quiesce::barrier();
        let deadline = Instant::now() + QUIESCE_TIMEOUT;
        // SeqCst: pairs with `register_and_record`'s increment (see there); Acquire at least, so
        // that a registered ring is in `rings` and its push visible.
        while self.inner.registering.load(Ordering::SeqCst) != 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let rings: Vec<Arc<RingShared>> = self.inner.rings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for r in &rings {
            // Acquire: pairs with the Release of `busy = false`, publishing the push and the
            // thread's drop count.
            while r.busy.load(Ordering::Acquire) {
                if Instant::now() >= deadline {
                    self.drops += 1;
                    self.write(&Record::Drops { tid: r.tid, count: 1 });
                    break;
                }
                std::thread::yield_now();
            }
        }
        // Relaxed: published by `registering`'s Release decrement read above.
        let refused = self.inner.refused.load(Ordering::Relaxed);
        if refused > 0 {
            self.drops += refused;
            self.write(&Record::Drops { tid: 0, count: refused });
        }
    }

    /// Writes a `Drops` record for each ring that dropped entries since the last cycle.
    fn write_drops(&mut self, rings: &[Arc<RingShared>]) {
        for r in rings {
            // Relaxed: a counter; a late increment is reported next cycle.
            let total = r.dropped.load(Ordering::Relaxed);
            let reported = self.reported.entry(Arc::as_ptr(r)).or_insert(0);
            if total > *reported {
                let count = total - *reported;
                *reported = total;
                self.drops += count;
                self.write(&Record::Drops { tid: r.tid, count });
            }
        }
    }
}

/// Passes each whole entry of `a` then `b` (a ring's readable words, read in place: see
/// `Consumer::peek`) that starts before `limit` words to `f`; returns the words used. An entry
/// that wraps around the ring's end (from `a` into `b`) is put together in a scratch first.
fn walk_entries(a: &[u64], b: &[u64], limit: usize, mut f: impl FnMut(&[u64])) -> usize {
    let mut wrapped = [0u64; MAX_ENTRY_WORDS];
    let mut at = 0;
    for (part, words) in [a, b].into_iter().enumerate() {
        let mut i = 0;
        if part == 1 {
            if at < a.len() {
                return at; // stopped inside `a` (the limit)
            }
            i = at - a.len(); // past the rest of an entry that wrapped
        }
        while at < limit
            && let Some(&head) = words.get(i)
        {
            let n = entry::parse_header(head).0;
            if !(HEAD_WORDS..=MAX_ENTRY_WORDS).contains(&n) {
                // Cannot happen (this crate pushes entries whole); were it to, the rest of the
                // drain is skipped rather than read again forever.
                return a.len() + b.len();
            }
            let entry = match words.get(i..i + n) {
                Some(e) => e,
                None if part == 0 && n - (words.len() - i) <= b.len() => {
                    let (tail, rest) = wrapped[..n].split_at_mut(words.len() - i);
                    tail.copy_from_slice(&words[i..]);
                    rest.copy_from_slice(&b[..rest.len()]);
                    &wrapped[..n]
                }
                None => return a.len() + b.len(), // cannot happen either (as above)
            };
            f(entry);
            i += n;
            at += n;
        }
    }
    at
}

fn writer_main<S: TraceSink + ?Sized>(inner: &'static Inner, sink: Box<S>) -> Result<Stats, String> {
    inner.crash.writer_started();
    let mut w = Writer {
        inner,
        sink,
        error: None,
        records: 0,
        repeated: 0,
        redundant: 0,
        drops: 0,
        seen_kinds: HashSet::new(),
        seen_ops: Box::new([0; SEEN_WORDS]),
        seen_ops_large: HashSet::default(),
        defs: Vec::new(),
        last_flush: Instant::now(),
        reported: Default::default(),
        flushes_served: 0,
        defined: Vec::new(),
        defined_at: Default::default(),
        next_repeat: REPEAT_EVERY,
    };
    loop {
        let stopping = inner.stopping.load(Ordering::Acquire);
        if stopping {
            w.quiesce();
        }
        w.cycle(stopping);
        if stopping {
            break;
        }
        // Refines the services' TSC line when it is due (`offtrace_core::timestamp_ns`), here
        // rather than on the first application call after a quiet spell: a line extrapolated
        // past its span drifts from CLOCK_MONOTONIC, the device times' clock.
        let _ = offtrace_core::timestamp_ns();
        inner.wakeup.sleep(inner.config.flush_interval);
    }
    // The last cycle closed the last chunk of records: the repeat and `End` have one of their
    // own, which damage to the records' chunks leaves readable.
    if !w.defined.is_empty() {
        w.repeat_definitions();
    }
    let records =
        w.sink.records_written().map_or(w.records, |n| n.saturating_sub(w.repeated)).saturating_sub(w.redundant);
    let drops = w.drops;
    w.write(&Record::End { records, drops });
    let mut result = match w.error.take() {
        Some(e) => Err(e),
        None => Ok(Stats { records, drops }),
    };
    if let Err(e) = w.sink.finish()
        && result.is_ok()
    {
        result = Err(e);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of 3..=9 words (header: the length; then the entry's index), `count` of them.
    fn entries(count: u64) -> Vec<u64> {
        let mut words = Vec::new();
        for k in 0..count {
            let n = 3 + (k % 7) as usize;
            words.push(entry::header(n, 1, 0, 0));
            words.extend(std::iter::repeat_n(k, n - 1));
        }
        words
    }

    /// Every split of the words into the ring's two parts and every limit: the entries come out
    /// whole and in order, each once, when the walk is resumed after the words it used (as the
    /// writer's drain loop does).
    #[test]
    fn walk_entries_resumes_whole_entries_in_order_at_every_split_and_limit() {
        let words = entries(12);
        for split in 0..=words.len() {
            for limit in 1..=words.len() + 1 {
                let mut seen = Vec::new();
                let mut from = 0;
                while from < words.len() {
                    let rest = &words[from..];
                    let cut = split.saturating_sub(from).min(rest.len());
                    let (a, b) = rest.split_at(cut);
                    let used = walk_entries(a, b, limit, |e| {
                        assert!(e[1..].iter().all(|&v| v == e[1]), "split {split} limit {limit}: torn {e:?}");
                        assert_eq!(e.len(), entry::parse_header(e[0]).0);
                        seen.push(e[1]);
                    });
                    assert!(used > 0, "split {split} limit {limit}: no progress at {from}");
                    from += used;
                }
                assert_eq!(seen, (0..12).collect::<Vec<u64>>(), "split {split} limit {limit}");
            }
        }
    }

    #[test]
    fn a_malformed_header_skips_the_rest_of_the_drain() {
        let mut words = entries(3);
        words.push(1); // a length below the header's
        words.extend(entries(2));
        let mut seen = 0;
        assert_eq!(walk_entries(&words, &[], usize::MAX, |_| seen += 1), words.len());
        assert_eq!(seen, 3);
    }
}
