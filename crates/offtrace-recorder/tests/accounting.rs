//! Every record that reaches the recorder is either in the trace or counted as dropped, also
//! when the rings overflow and when the recording finishes under a record being pushed. Both
//! situations are forced, not hoped for: a sink that holds the writer until the test lets it go
//! (overflow), and a raw layer that holds a record between the recorder's gate and its push
//! while `finish` runs.
//!
//! The recording and the services are process-global: one test at a time (`SERIAL`).

#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // implements `RawLayer::encode`, an unsafe trait method (it reads no pointer)

use std::io::BufWriter;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use offtrace_core::*;
use offtrace_format::{Record, TraceReader, TraceWriter};
use offtrace_recorder::{
    Config, RawLayer, TraceSink, finish, set_raw_layer, start, start_file, start_header, subscribe,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(path: &Path) -> Vec<Record> {
    let mut r = TraceReader::open(path).unwrap();
    let records: Vec<Record> = r.by_ref().collect::<Result<_, _>>().unwrap();
    assert!(r.finished_cleanly());
    records
}

fn drops(records: &[Record]) -> u64 {
    records.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum()
}

/// A trace file whose writes wait until the test opens the gate (its chunk flushes do not).
struct GatedSink {
    out: TraceWriter<BufWriter<std::fs::File>>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl GatedSink {
    fn wait(&self) {
        let (open, cv) = &*self.gate;
        let _open = cv.wait_while(open.lock().unwrap(), |open| !*open).unwrap();
    }
}

impl TraceSink for GatedSink {
    fn write(&mut self, r: &Record) -> Result<(), String> {
        self.wait();
        self.out.write(r).map_err(|e| e.to_string())
    }
    fn flush_chunk(&mut self) -> Result<(), String> {
        self.out.flush_chunk().map_err(|e| e.to_string())
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        self.out.finish().map(|_| ()).map_err(|e| e.to_string())
    }
}

/// One UR call (one record), with four arguments.
fn call(i: u64) {
    let mut p = ApiCallPayload::new(19, &[0x5555_0000_2000, 0x3000, 1, i]);
    let t = emit_enter(Kind::UrApi, 19, Payload::UrApi(&p));
    p.has_result = 1;
    emit_exit(t, Payload::UrApi(&p));
}

/// The writer is held (its first write waits) while one thread emits far more than its ring
/// holds: entries must drop, and each one is counted.
#[test]
fn a_full_ring_drops_and_counts_every_dropped_record() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    let out = TraceWriter::new(BufWriter::new(std::fs::File::create(&path).unwrap()), &start_header()).unwrap();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let config = Config::default().with_ring_words(256).with_flush_interval(Duration::from_secs(5));
    start(config, Box::new(GatedSink { out, gate: gate.clone() })).unwrap();
    let ctx = subscribe(false).unwrap();
    const EMITTED: u64 = 10_000;
    for i in 0..EMITTED {
        call(i);
    }
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    destroy_context(ctx).unwrap();
    let stats = finish().unwrap();

    let records = read(&path);
    let written = records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count() as u64;
    let dropped = drops(&records);
    // 256 words hold about 25 calls: nearly all of them drop.
    assert!(dropped > EMITTED / 2, "{dropped} drops of {EMITTED}");
    assert_eq!(written + dropped, EMITTED);
    assert_eq!(stats.drops, dropped);
    assert!(matches!(records.last(), Some(Record::End { drops: d, .. }) if *d == dropped));
}

/// A raw layer that tells the test when a record is inside the record path (past the gate, not
/// yet pushed) and waits there until the test lets it go.
struct HeldRawLayer {
    inside: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
}

const HELD_OP: u32 = 7;

impl RawLayer for HeldRawLayer {
    unsafe fn encode(&self, op: u32, _payload: *const std::ffi::c_void, out: &mut [u64]) -> Option<usize> {
        if op != HELD_OP {
            return None;
        }
        self.inside.lock().unwrap().send(()).unwrap();
        self.release.lock().unwrap().recv_timeout(Duration::from_secs(10)).unwrap();
        out[0] = 42;
        Some(1)
    }

    fn decode(&self, _tid: u32, _ts: u64, _op: u32, body: &[u64], out: &mut dyn FnMut(Record)) {
        out(Record::Info { key: "held".into(), value: body[0].to_string() });
    }
}

/// `finish` is called while a record is between the recorder's gate and its push: `finish`
/// waits for it, and the record is in the trace (before, `finish` returned at once and the
/// record went into a ring nobody read, counted nowhere).
#[test]
fn a_record_emitted_as_the_recording_finishes_is_recorded_or_counted() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    start_file(Config::default(), &path, &[]).unwrap();
    let ctx = subscribe(true).unwrap();
    let (inside_tx, inside) = channel();
    let (release, release_rx) = channel();
    assert!(set_raw_layer(Box::new(HeldRawLayer { inside: Mutex::new(inside_tx), release: Mutex::new(release_rx) })));

    static PAYLOAD: u64 = 0;
    let emitter = std::thread::spawn(|| {
        let raw = RawPayload(std::ptr::addr_of!(PAYLOAD).cast());
        emit_instant(Kind::Xpti, HELD_OP, Phase::None, Payload::Raw(raw));
    });
    inside.recv_timeout(Duration::from_secs(10)).unwrap();
    let finisher = std::thread::spawn(finish);
    let until = Instant::now() + Duration::from_millis(300);
    while !finisher.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let returned_early = finisher.is_finished();
    release.send(()).unwrap();
    emitter.join().unwrap();
    let stats = finisher.join().unwrap().unwrap();
    destroy_context(ctx).unwrap();
    assert!(!returned_early, "finish returned while a record was being pushed");

    let records = read(&path);
    let held = records.iter().filter(|r| matches!(r, Record::Info { key, .. } if key == "held")).count() as u64;
    assert_eq!(held + drops(&records), 1);
    assert_eq!(held, 1, "the record waited for is recorded");
    assert_eq!(stats.drops, 0);
}
