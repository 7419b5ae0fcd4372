//! Repeated definitions: a finished recording writes every definition again in its last chunk,
//! a long one also on the way, so that one damaged chunk does not take every name with it.
//!
//! The recording and the services are process-global, so every test takes `SERIAL` first.

#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use offtrace_core::*;
use offtrace_format::{
    Batch, CHUNK_HEADER_LEN, DefinitionKey, FILE_HEADER_LEN, ReadOptions, Record, StrId, TraceReader, TraceRecords,
};
use offtrace_recorder::{Config, REPEAT_EVERY, TraceSink, finish, start, start_file, subscribe};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One UR call of operation `op` with a kernel dispatch inside it.
fn launch(op: u32, i: u64) {
    let mut p = ApiCallPayload::new(op, &[0x1000, 0x3000, 1, i]);
    let t = emit_enter(Kind::UrApi, op, Payload::UrApi(&p));
    let kd = KernelDispatchPayload {
        queue: 0x1000,
        device: 0x40,
        kernel_name: c"vector_add<float>(float*, float const*)".as_ptr(),
        work_dim: 1,
        global_size: [1024, 1, 1],
        ..Default::default()
    };
    emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
    p.has_result = 1;
    emit_exit(t, Payload::UrApi(&p));
}

/// The UR operations the tests call, named as a backend names them (its table registered once
/// per process: the recorder defines an operation from the table).
fn ops() -> [u32; 2] {
    static TABLE: [Operation; 2] = [
        Operation { id: 7, name: "urEnqueueKernelLaunch", args: &[] },
        Operation { id: 19, name: "urEnqueueUSMMemcpy", args: &[] },
    ];
    let _ = register_kind_operations(Kind::UrApi, &TABLE);
    [7, 19]
}

/// Records `calls` calls of each of [`ops`] into `path` in small chunks (many of them).
fn record(path: &std::path::Path, calls: u64) {
    let mut config = Config::default();
    config.chunk_bytes = 4096;
    start_file(config, path, &[("command", "repeats test")]).unwrap();
    let ctx = subscribe(false).unwrap();
    for i in 0..calls {
        for op in ops() {
            launch(op, i);
        }
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
}

#[test]
fn a_finished_recording_repeats_every_definition_in_its_last_chunk() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    record(&path, 500);
    let all: Vec<Record> = TraceReader::open(&path).unwrap().collect::<Result<_, _>>().unwrap();
    let defined: HashSet<DefinitionKey> = all.iter().filter_map(DefinitionKey::of).collect();
    assert!(defined.len() >= 6, "kinds, operations, strings, a thread: {defined:?}");
    let scan = TraceReader::summary_scan(&path).unwrap();
    assert!(scan.chunks > 5, "{scan:?}");
    let last: Vec<Record> =
        TraceReader::open_at_last_chunk(&path, &scan).unwrap().unwrap().collect::<Result<_, _>>().unwrap();
    let (end, repeat) = last.split_last().unwrap();
    assert!(matches!(end, Record::End { .. }), "{end:?}");
    // The last chunk is the repeat and `End`, nothing else: the records' chunks stay apart.
    assert!(repeat.iter().all(|r| DefinitionKey::of(r).is_some()), "{repeat:?}");
    let repeated: HashSet<DefinitionKey> = repeat.iter().filter_map(DefinitionKey::of).collect();
    assert_eq!(repeated, defined);
    assert_eq!(repeat.len(), defined.len(), "each definition once");
    // The tool's reader takes the repeats as known.
    let mut trace = TraceRecords::open(&path, ReadOptions::default()).unwrap();
    while trace.next_batch().is_some() {}
    assert!(trace.outcome().finished_cleanly());
    assert_eq!(trace.outcome().repeated_definitions, defined.len() as u64);
}

/// The user's case (issue 11): a byte flipped in the first chunk, where every definition was
/// first written. Every API call after it is still named by kind and operation.
#[test]
fn a_trace_whose_first_chunk_is_damaged_still_names_its_api_calls() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.offtrace");
    record(&path, 500);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[FILE_HEADER_LEN + CHUNK_HEADER_LEN + 40] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let mut trace = TraceRecords::open(&path, ReadOptions::default()).unwrap();
    let (mut strings, mut kinds, mut operations) = (HashMap::new(), HashMap::new(), HashMap::new());
    let (mut calls, mut warnings) = (Vec::new(), 0);
    while let Some(batch) = trace.next_batch() {
        match batch {
            Batch::Records(records) => {
                for r in records {
                    match r {
                        Record::String { id, text } => {
                            strings.insert(id, text);
                        }
                        Record::KindDef { kind, name } => {
                            kinds.insert(kind, name);
                        }
                        Record::OperationDef(d) => {
                            operations.insert((d.kind, d.op), d.name);
                        }
                        Record::ApiCall(c) => calls.push((c.kind, c.op)),
                        _ => {}
                    }
                }
            }
            Batch::Warning(_) => warnings += 1,
        }
    }
    assert_eq!(warnings, 1, "the damaged chunk is skipped");
    assert!(calls.len() > 500, "the calls of the other chunks are read: {}", calls.len());
    let name = |id: Option<&StrId>| id.and_then(|id| strings.get(id)).cloned().unwrap_or_default();
    for (kind, op) in calls {
        assert_eq!(name(kinds.get(&kind)), Kind::UrApi.name());
        assert_eq!(name(operations.get(&(kind, op))), Kind::UrApi.operation(op).unwrap().name);
    }
    assert!(!trace.late_definitions().is_empty(), "an export reads the file again with these first");
}

/// What a sink was asked to do: write a record, or close a chunk (`None`).
type Event = Option<Record>;

/// A sink that says it holds 64 KiB per record: the writer repeats the definitions after some
/// of its flushes.
struct Sink(Arc<Mutex<Vec<Event>>>);

impl TraceSink for Sink {
    fn write(&mut self, r: &Record) -> Result<(), String> {
        self.0.lock().unwrap().push(Some(r.clone()));
        Ok(())
    }
    fn flush_chunk(&mut self) -> Result<(), String> {
        self.0.lock().unwrap().push(None);
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
    fn bytes(&self) -> u64 {
        let events = self.0.lock().unwrap();
        events.iter().filter(|e| e.is_some()).count() as u64 * (64 << 10)
    }
}

#[test]
fn a_long_recording_repeats_its_definitions_at_a_chunk_start_now_and_then() {
    let _g = serial();
    let events = Arc::new(Mutex::new(Vec::new()));
    start(Config::default(), Box::new(Sink(events.clone()))).unwrap();
    let ctx = subscribe(false).unwrap();
    // Four records a round: 16 × REPEAT_EVERY bytes, several repeats' worth.
    let rounds = 16 * REPEAT_EVERY / (64 << 10) / 4;
    for i in 0..rounds {
        launch(ops()[0], i);
        launch(ops()[1], i);
        offtrace_recorder::flush(Duration::from_secs(10));
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let events = events.lock().unwrap();
    // The repeats: a run of definitions that are all known already, right after a flush.
    let mut known = HashSet::new();
    let mut repeats = Vec::new();
    let mut after_flush = false;
    for (i, e) in events.iter().enumerate() {
        match e {
            None => after_flush = true,
            Some(r) => {
                if let Some(key) = DefinitionKey::of(r) {
                    if !known.insert(key) && after_flush {
                        repeats.push(i);
                    }
                } else {
                    after_flush = false;
                }
            }
        }
    }
    let starts = repeats.iter().filter(|&&i| !repeats.contains(&(i - 1))).count();
    // Two or more on the way, then the one at the end.
    assert!(starts >= 3, "{starts} repeats");
    assert!(repeats.len() >= 3 * known.len(), "{} repeated of {} definitions", repeats.len(), known.len());
    // `End` counts each definition once (`record` prints it + 1, `report`'s count, which takes
    // `End` too): every record written but the repeats and `End` itself.
    let written = events.iter().flatten().count() as u64;
    let end = events.iter().flatten().find_map(|r| match r {
        Record::End { records, .. } => Some(*records),
        _ => None,
    });
    assert_eq!(end, Some(written - repeats.len() as u64 - 1));
}
