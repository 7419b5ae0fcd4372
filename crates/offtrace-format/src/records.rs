//! [`TraceRecords`]: the reader the tool uses. It reads a trace file's records in file order,
//! decoding chunks on several threads, and steps over damage instead of stopping at it.
//!
//! Chunks decode independently (every delta state resets at a chunk start), so the work splits
//! by chunk: an I/O thread reads and verifies chunks (crc32) and hands them round-robin to `N`
//! decode threads (LZ4 + record decoding); the caller's thread takes the decoded batches back
//! in the same round-robin order, so records come out exactly in file order, and converts
//! timestamps (calibration points apply in file order). Channels are bounded (2 chunks per
//! thread each way), so memory is a few chunks' worth whatever the file's size.
//!
//! Damage: a chunk that does not verify is skipped with a [`ReadWarning`] and reading resumes at
//! the next valid chunk (see `chunks.rs`); a chunk whose crc is right but whose records do not
//! decode keeps the records before the bad one, with a warning. A truncated file ends with
//! [`ReadOutcome::truncated`] set after every complete chunk.
//!
//! ```no_run
//! use offtrace_format::{Batch, ReadOptions, TraceRecords};
//!
//! let mut trace = TraceRecords::open("run.offtrace", ReadOptions::default())?;
//! let mut n = 0u64;
//! while let Some(batch) = trace.next_batch() {
//!     match batch {
//!         Batch::Records(records) => {
//!             n += records.len() as u64;
//!             trace.recycle(records);
//!         }
//!         Batch::Warning(w) => eprintln!("warning: {w}"),
//!     }
//! }
//! println!("{n} records, cleanly finished: {}", trace.outcome().finished_cleanly());
//! # Ok::<(), offtrace_format::ReadError>(())
//! ```

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::chunks::{ChunkScanner, FramedChunk, Framing, FramingEnd, ReadWarning};
use crate::decode::{Cursor, Decoder, SplitSink};
use crate::definition::{Definition, DefinitionTable};
use crate::error::ReadError;
use crate::header::{CHUNK_FLAG_LZ4, FILE_HEADER_LEN, TraceHeader};
use crate::reader::TraceReader;
use crate::record::Record;
use crate::timebase::Timebase;

/// How to read.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Threads that decode chunks; `0` decodes on the caller's thread (and starts no thread).
    pub decode_threads: usize,
    /// Whether API calls carry their argument values. A reader that never looks at them (the
    /// report) sets `false`: its [`crate::ApiCall::args`] are then empty, and each call costs
    /// no copy of its 200-byte argument block. Everything else decodes the same, with the same
    /// checks.
    pub api_args: bool,
    /// API calls (most of a trace's records) do not come in [`Batch::Records`] but apart,
    /// without their arguments, from [`TraceRecords::api_calls`], each with its place among the
    /// batch's records. For a reader that needs only their times and ids (the report): a call
    /// is then 64 bytes in memory instead of a 264-byte [`Record`].
    pub api_calls_apart: bool,
}

/// An API call without its argument values (see [`ReadOptions::api_calls_apart`]), and where it
/// was among the records of its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApiCallBrief {
    /// The number of the batch's records that came before it in the file.
    pub at: u32,
    pub kind: u32,
    pub op: u32,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub correlation: u64,
    pub external: u64,
    pub result: Option<i64>,
}

impl ApiCallBrief {
    /// The call as a record, without arguments.
    pub fn to_api_call(&self) -> crate::ApiCall {
        crate::ApiCall {
            kind: self.kind,
            op: self.op,
            tid: self.tid,
            start: self.start,
            end: self.end,
            correlation: self.correlation,
            external: self.external,
            args: crate::ApiArgs::default(),
            result: self.result,
        }
    }
}

impl Default for ReadOptions {
    /// One decode thread per available core (at most 8), or `OFFTRACE_READ_THREADS` when set
    /// (read once, here).
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        let decode_threads = std::env::var("OFFTRACE_READ_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(cores);
        Self { decode_threads, api_args: true, api_calls_apart: false }
    }
}

/// What [`TraceRecords::next_batch`] returns: the records of one chunk, or damage stepped over.
#[derive(Debug)]
pub enum Batch {
    Records(Vec<Record>),
    Warning(ReadWarning),
}

/// How the reading went, complete once [`TraceRecords::next_batch`] has returned `None`.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReadOutcome {
    pub records: u64,
    /// Valid chunks read.
    pub chunks: u64,
    /// Warnings returned (damage stepped over).
    pub warnings: u64,
    /// The end marker was read.
    pub end_marker: bool,
    /// The trace's `End` record was read.
    pub end_record: bool,
    /// Definitions the file repeats (identical to one read before): taken, not returned again.
    pub repeated_definitions: u64,
    /// Why the file does not end cleanly (truncated, trailing bytes, counts that do not match),
    /// if it does not. A truncated file is a recording that was cut off: every complete chunk
    /// was read.
    pub problem: Option<ReadError>,
}

impl ReadOutcome {
    /// End marker and End record read, nothing damaged or missing.
    pub fn finished_cleanly(&self) -> bool {
        self.end_marker && self.end_record && self.warnings == 0 && self.problem.is_none()
    }

    /// The file stops before its end marker.
    pub fn truncated(&self) -> Option<&ReadError> {
        self.problem.as_ref().filter(|p| p.is_truncated())
    }
}

/// Decoded `Vec<Record>`s handed back by the caller, reused by the decode threads: a chunk's
/// records are megabytes, and a fresh allocation of that size is page faults every time.
type Pool = Arc<Mutex<Vec<Vec<Record>>>>;

enum Work {
    Chunk(FramedChunk),
    Skipped(ReadWarning),
    End(FramingEnd),
}

enum Decoded {
    /// A batch of a chunk's records, its API calls when kept apart, a problem met in it, and
    /// whether it is the chunk's last.
    Records(Vec<Record>, Vec<ApiCallBrief>, Option<ReadWarning>, bool),
    Skipped(ReadWarning),
    End(FramingEnd),
}

/// Records per batch: a chunk is handed over in batches of at most this many records, so
/// memory does not grow with the chunk size. A record is 264 bytes in memory: a batch (528 KiB)
/// stays in a core's L2 cache between the decode thread that writes it and the reader; 8192 took
/// the same CPU time and 8 MB more peak RSS.
const BATCH_RECORDS: usize = 2048;

/// The decompressed payload of a verified chunk (`raw` is scratch space), or why it has none.
fn payload<'a>(chunk: &'a FramedChunk, raw: &'a mut Vec<u8>) -> Result<&'a [u8], ReadWarning> {
    let h = &chunk.header;
    if h.flags & CHUNK_FLAG_LZ4 == 0 {
        return Ok(&chunk.stored);
    }
    let corrupt = |problem: String| ReadWarning {
        error: ReadError::CorruptChunk { chunk: chunk.index, offset: chunk.offset, problem },
        action: format!("skipped the chunk's {} records", h.record_count),
    };
    raw.clear();
    raw.resize(h.raw_len as usize, 0);
    match lz4_flex::block::decompress_into(&chunk.stored, raw) {
        Ok(n) if n == raw.len() => Ok(raw),
        Ok(n) => Err(corrupt(format!("decompressed to {n} bytes, header says {}", h.raw_len))),
        Err(e) => Err(corrupt(format!("LZ4 decompression failed: {e}"))),
    }
}

/// Where the decoding of one chunk stands.
struct ChunkCursor {
    pos: usize,
    next: u32,
}

/// Decodes up to `max` more records of a chunk into `out`. Records before a malformed one are
/// kept; the problem comes back as a warning and ends the chunk. Returns (warning, last part).
fn decode_part(
    chunk: &FramedChunk,
    bytes: &[u8],
    decoder: &mut Decoder,
    at: &mut ChunkCursor,
    out: &mut Vec<Record>,
    mut calls: Option<&mut Vec<ApiCallBrief>>,
    max: usize,
) -> (Option<ReadWarning>, bool) {
    let count = chunk.header.record_count;
    let end = count.min(at.next.saturating_add(u32::try_from(max).unwrap_or(u32::MAX)));
    out.reserve((end - at.next) as usize);
    while at.next < end {
        let mut c = Cursor::new(bytes.get(at.pos..).unwrap_or(&[]));
        let decoded = match calls.as_deref_mut() {
            Some(calls) => decoder.decode_split(&mut c, &mut SplitSink { records: out, calls }),
            None => decoder.decode_into(&mut c, out),
        };
        match decoded {
            Ok(()) => {
                at.pos += c.pos();
                at.next += 1;
            }
            Err(source) => {
                let i = at.next;
                at.next = count;
                let warning = ReadWarning {
                    error: ReadError::Record {
                        chunk: chunk.index,
                        offset: chunk.offset,
                        record: i,
                        position: at.pos + c.pos(),
                        source,
                    },
                    action: format!("kept the chunk's first {i} records, skipped its other {}", count - i),
                };
                return (Some(warning), true);
            }
        }
    }
    if at.next < count {
        return (None, false);
    }
    let trailing = (at.pos < bytes.len()).then(|| ReadWarning {
        error: ReadError::CorruptChunk {
            chunk: chunk.index,
            offset: chunk.offset,
            problem: format!("{} bytes follow the chunk's last record", bytes.len() - at.pos),
        },
        action: "kept the chunk's records".to_owned(),
    });
    (trailing, true)
}

/// Decodes a whole chunk, sending each batch to `send` (which returns `false` to stop).
fn decode_chunk(
    chunk: &FramedChunk,
    decoder: &mut Decoder,
    raw: &mut Vec<u8>,
    pool: &Pool,
    max: usize,
    calls_apart: bool,
    mut send: impl FnMut(Decoded) -> bool,
) {
    let bytes = match payload(chunk, raw) {
        Ok(b) => b,
        Err(w) => {
            send(Decoded::Records(Vec::new(), Vec::new(), Some(w), true));
            return;
        }
    };
    decoder.reset();
    let mut at = ChunkCursor { pos: 0, next: 0 };
    loop {
        let mut out = take_vec(pool);
        let mut calls = Vec::new();
        let (warning, last) =
            decode_part(chunk, bytes, decoder, &mut at, &mut out, calls_apart.then_some(&mut calls), max);
        if !send(Decoded::Records(out, calls, warning, last)) || last {
            return;
        }
    }
}

/// A batch from the pool, emptied here (dropping a batch's records is work the decode threads
/// take off the caller's thread).
fn take_vec(pool: &Pool) -> Vec<Record> {
    let mut v = pool.lock().ok().and_then(|mut p| p.pop()).unwrap_or_default();
    v.clear();
    v
}

enum Pipeline {
    Inline { scanner: ChunkScanner, decoder: Decoder, raw: Vec<u8>, ready: VecDeque<Decoded> },
    Threads { from_workers: Vec<Receiver<Decoded>>, next: usize, threads: Vec<JoinHandle<()>> },
}

/// Reads a trace's records in file order, decoding on several threads, stepping over damage.
pub struct TraceRecords {
    header: TraceHeader,
    pipeline: Pipeline,
    timebase: Timebase,
    pool: Pool,
    pending: VecDeque<Batch>,
    /// The API calls of the last records batch, when kept apart.
    calls: Vec<ApiCallBrief>,
    calls_apart: bool,
    outcome: ReadOutcome,
    finished: bool,
    definitions: DefinitionTable,
    /// Damage was stepped over: definitions from here on may be needed by records before it.
    damaged: bool,
    /// The definitions first read after damage (see [`Self::late_definitions`]).
    late_definitions: Vec<Record>,
}

impl std::fmt::Debug for TraceRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceRecords").field("header", &self.header).field("outcome", &self.outcome).finish()
    }
}

/// Batches kept for reuse.
const POOL_MAX: usize = 4;

impl TraceRecords {
    /// Opens a trace file and reads its header. An empty file is [`ReadError::Empty`], a file
    /// that is no trace [`ReadError::NotATrace`].
    pub fn open(path: impl AsRef<Path>, options: ReadOptions) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let open_err = |source| ReadError::Open { path: path.to_owned(), source };
        let file = File::open(path).map_err(open_err)?;
        let file_len = file.metadata().map_err(open_err)?.len();
        if file_len == 0 {
            return Err(ReadError::Empty { path: path.to_owned() });
        }
        let reader = TraceReader::new(BufReader::with_capacity(256 << 10, file))?;
        let header = *reader.header();
        let scanner = ChunkScanner::new(reader.into_inner(), file_len, FILE_HEADER_LEN as u64);
        let pool: Pool = Arc::default();
        let pipeline = if options.decode_threads == 0 {
            Pipeline::Inline {
                scanner,
                decoder: Decoder::for_version(header.version).with_api_args(options.api_args),
                raw: Vec::new(),
                ready: VecDeque::new(),
            }
        } else {
            Self::start_threads(scanner, header.version, options, &pool)
        };
        Ok(Self {
            header,
            pipeline,
            timebase: Timebase::new(&header),
            pool,
            pending: VecDeque::new(),
            calls: Vec::new(),
            calls_apart: options.api_calls_apart,
            outcome: ReadOutcome::default(),
            finished: false,
            definitions: DefinitionTable::default(),
            damaged: false,
            late_definitions: Vec::new(),
        })
    }

    /// Takes `definitions` as read already (a second reading that returned them first, see
    /// [`Self::late_definitions`]): the file's own copies of them are then repeats.
    pub fn seed_definitions(&mut self, definitions: &[Record]) {
        for d in definitions {
            self.definitions.observe(d);
        }
    }

    /// The definitions first read after damage that was stepped over, in file order. The
    /// records between the damage and these had no definition for the ids they define (the
    /// writer repeats its definitions, and the first copy was in the damaged part): a reader
    /// that names records as they stream past reads the file again with these first. Empty
    /// for an undamaged file. Complete once [`Self::next_batch`] has returned `None`.
    pub fn late_definitions(&self) -> &[Record] {
        &self.late_definitions
    }

    /// Takes the definitions of a batch (file order): a repeat is dropped (the reader has it),
    /// a conflict is dropped with a warning (the first definition stays), a definition first
    /// met after damage is kept for [`Self::late_definitions`].
    fn take_definitions(&mut self, records: &mut Vec<Record>, calls: &mut [ApiCallBrief]) {
        let mut dropped: Vec<u32> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            match self.definitions.observe(r) {
                None | Some(Definition::Redefined) => {}
                Some(Definition::New) => {
                    if self.damaged {
                        self.late_definitions.push(r.clone());
                    }
                }
                Some(Definition::Repeat) => {
                    self.outcome.repeated_definitions += 1;
                    dropped.push(i as u32);
                }
                Some(Definition::Conflict(key)) => {
                    self.outcome.warnings += 1;
                    self.pending.push_back(Batch::Warning(ReadWarning {
                        error: ReadError::ConflictingDefinition { chunk: self.outcome.chunks, key },
                        action: "kept the first definition".to_owned(),
                    }));
                    dropped.push(i as u32);
                }
            }
        }
        if dropped.is_empty() {
            return;
        }
        let (mut i, mut next) = (0u32, dropped.iter().peekable());
        records.retain(|_| {
            let keep = next.next_if_eq(&&i).is_none();
            i += 1;
            keep
        });
        for c in calls {
            c.at -= dropped.partition_point(|&d| d < c.at) as u32;
        }
    }

    fn start_threads(scanner: ChunkScanner, version: u16, options: ReadOptions, pool: &Pool) -> Pipeline {
        let n = options.decode_threads;
        let apart = options.api_calls_apart;
        let mut to_workers: Vec<SyncSender<Work>> = Vec::with_capacity(n);
        let mut from_workers = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n + 1);
        for i in 0..n {
            let (tx, rx) = sync_channel::<Work>(2);
            let (dtx, drx) = sync_channel::<Decoded>(1);
            to_workers.push(tx);
            from_workers.push(drx);
            let pool = Arc::clone(pool);
            let spawned = std::thread::Builder::new().name(format!("offtrace-decode-{i}")).spawn(move || {
                let mut decoder = Decoder::for_version(version).with_api_args(options.api_args);
                let mut raw = Vec::new();
                // Ends when the I/O thread is done (its sender dropped) or the reader is dropped.
                while let Ok(work) = rx.recv() {
                    let sent = match work {
                        Work::Chunk(c) => {
                            let mut ok = true;
                            decode_chunk(&c, &mut decoder, &mut raw, &pool, BATCH_RECORDS, apart, |d| {
                                ok = dtx.send(d).is_ok();
                                ok
                            });
                            ok
                        }
                        Work::Skipped(w) => dtx.send(Decoded::Skipped(w)).is_ok(),
                        Work::End(e) => dtx.send(Decoded::End(e)).is_ok(),
                    };
                    if !sent {
                        break;
                    }
                }
            });
            if let Ok(h) = spawned {
                threads.push(h);
            }
        }
        if threads.len() < n {
            // Could not start the threads: decode on the caller's thread instead.
            return Pipeline::Inline {
                scanner,
                decoder: Decoder::for_version(version).with_api_args(options.api_args),
                raw: Vec::new(),
                ready: VecDeque::new(),
            };
        }
        let io = std::thread::Builder::new().name("offtrace-read".into()).spawn(move || {
            for (seq, item) in scanner.enumerate() {
                let work = match item {
                    Framing::Chunk(c) => Work::Chunk(c),
                    Framing::Skipped(w) => Work::Skipped(w),
                    Framing::End(e) => Work::End(e),
                };
                let last = matches!(work, Work::End(_));
                if to_workers[seq % n].send(work).is_err() || last {
                    break;
                }
            }
        });
        match io {
            Ok(h) => threads.push(h),
            Err(_) => {
                // The workers end when their senders drop; report the failure as the end.
                let (tx, rx) = sync_channel(1);
                let _ = tx.send(Decoded::End(FramingEnd {
                    end_marker: false,
                    problem: Some(ReadError::Io {
                        offset: 0,
                        source: std::io::Error::other("cannot start the trace reading thread"),
                    }),
                }));
                return Pipeline::Threads { from_workers: vec![rx], next: 0, threads };
            }
        }
        Pipeline::Threads { from_workers, next: 0, threads }
    }

    /// The file header.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// How the reading went so far; final once [`Self::next_batch`] returned `None`.
    pub fn outcome(&self) -> &ReadOutcome {
        &self.outcome
    }

    /// The outcome, taking the reader.
    pub fn into_outcome(mut self) -> ReadOutcome {
        std::mem::take(&mut self.outcome)
    }

    /// Hands a batch's `Vec` back for reuse (optional; saves an allocation and the dropping of
    /// its records on this thread).
    pub fn recycle(&self, records: Vec<Record>) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < POOL_MAX
        {
            p.push(records);
        }
    }

    fn next_decoded(&mut self) -> Decoded {
        match &mut self.pipeline {
            Pipeline::Inline { scanner, decoder, raw, ready } => {
                if let Some(d) = ready.pop_front() {
                    return d;
                }
                match scanner.next() {
                    Some(Framing::Chunk(c)) => {
                        decode_chunk(&c, decoder, raw, &self.pool, BATCH_RECORDS, self.calls_apart, |d| {
                            ready.push_back(d);
                            true
                        });
                        ready.pop_front().unwrap_or(Decoded::End(FramingEnd::default()))
                    }
                    Some(Framing::Skipped(w)) => Decoded::Skipped(w),
                    Some(Framing::End(e)) => Decoded::End(e),
                    None => Decoded::End(FramingEnd::default()),
                }
            }
            Pipeline::Threads { from_workers, next, .. } => {
                let i = *next % from_workers.len().max(1);
                match from_workers.get(i).map(Receiver::recv) {
                    Some(Ok(d)) => {
                        // A chunk's batches all come from one worker; then the next worker.
                        if !matches!(d, Decoded::Records(_, _, _, false)) {
                            *next = next.wrapping_add(1);
                        }
                        d
                    }
                    _ => Decoded::End(FramingEnd {
                        end_marker: false,
                        problem: Some(ReadError::Io {
                            offset: 0,
                            source: std::io::Error::other("a trace decoding thread stopped"),
                        }),
                    }),
                }
            }
        }
    }

    /// With [`ReadOptions::api_calls_apart`], the API calls of the last [`Batch::Records`]
    /// returned, in file order, each with its place among the batch's records (timestamps in
    /// CLOCK_MONOTONIC ns); empty otherwise.
    pub fn api_calls(&self) -> &[ApiCallBrief] {
        &self.calls
    }

    /// The next chunk's records (timestamps in CLOCK_MONOTONIC ns), or a warning about damage
    /// stepped over; `None` at the end of the file.
    pub fn next_batch(&mut self) -> Option<Batch> {
        if let Some(b) = self.pending.pop_front() {
            return Some(b);
        }
        if self.finished {
            return None;
        }
        match self.next_decoded() {
            Decoded::Records(mut records, mut calls, warning, last) => {
                self.outcome.records += (records.len() + calls.len()) as u64;
                if !self.timebase.is_identity() {
                    // In file order: a calibration point applies to the calls after it.
                    let mut next_call = calls.iter_mut().peekable();
                    for (i, r) in records.iter_mut().enumerate() {
                        while let Some(c) = next_call.next_if(|c| c.at as usize <= i) {
                            c.start = self.timebase.ticks_to_ns(c.start);
                            c.end = self.timebase.ticks_to_ns(c.end);
                        }
                        self.timebase.convert(r);
                    }
                    for c in next_call {
                        c.start = self.timebase.ticks_to_ns(c.start);
                        c.end = self.timebase.ticks_to_ns(c.end);
                    }
                }
                // Counted after: a conflict's warning names this chunk, `chunks` until then.
                self.take_definitions(&mut records, &mut calls);
                if last {
                    self.outcome.chunks += 1;
                }
                self.calls = calls;
                if let Some(Record::End { .. }) = records.last() {
                    self.outcome.end_record = true;
                }
                if let Some(w) = warning {
                    self.outcome.warnings += 1;
                    self.damaged = true;
                    self.pending.push_back(Batch::Warning(w));
                }
                Some(Batch::Records(records))
            }
            Decoded::Skipped(w) => {
                self.outcome.warnings += 1;
                self.damaged = true;
                Some(Batch::Warning(w))
            }
            Decoded::End(end) => {
                self.finished = true;
                self.outcome.end_marker = end.end_marker;
                self.outcome.problem = end.problem;
                if let Pipeline::Threads { from_workers, threads, .. } = &mut self.pipeline {
                    from_workers.clear();
                    for t in threads.drain(..) {
                        let _ = t.join();
                    }
                }
                None
            }
        }
    }

    /// Calls `on_record` for every record in file order and `on_warning` for damage stepped
    /// over. Stops at the first error `on_record` returns. API calls kept apart
    /// ([`ReadOptions::api_calls_apart`]) come as [`Record::ApiCall`]s without arguments, in
    /// their places.
    pub fn for_each<E>(
        &mut self,
        mut on_record: impl FnMut(&Record) -> Result<(), E>,
        mut on_warning: impl FnMut(&ReadWarning),
    ) -> Result<(), E> {
        while let Some(batch) = self.next_batch() {
            match batch {
                Batch::Records(records) => {
                    let calls = std::mem::take(&mut self.calls);
                    let mut next_call = calls.iter().peekable();
                    for (i, r) in records.iter().enumerate() {
                        while let Some(c) = next_call.next_if(|c| c.at as usize <= i) {
                            on_record(&Record::ApiCall(c.to_api_call()))?;
                        }
                        on_record(r)?;
                    }
                    for c in next_call {
                        on_record(&Record::ApiCall(c.to_api_call()))?;
                    }
                    self.recycle(records);
                }
                Batch::Warning(w) => on_warning(&w),
            }
        }
        Ok(())
    }
}
