//! Round trips of every export format through independent readers: the minimal protobuf
//! decoder and slice rebuilder of `common/` (not the encoder's code), serde_json, rusqlite, csv.

#![allow(clippy::unwrap_used)] // tests

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{ViewSlice, decode_pftrace};
use offtrace_analysis::testing::{TypedBuilder, kind, sycl_like, ur};
use offtrace_export::{ExportError, ExportFormat, ExportOptions, ExportStats, RecordSource, export, export_records};
use offtrace_format::{CopyDirection, Record, TraceHeader, phase};

/// A SYCL-like trace plus what a viewer finds hard: calls on one thread that cross (a damaged
/// or misattributed trace), device work that overlaps on one queue (an out-of-order queue), a
/// slice that ends when the next begins, and a made-up API kind.
fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    sycl_like(&mut b, 3, 6_000, |v: &Vec<Record>| v.len() as u64);
    let t = 9_000_000_000;
    b.thread(7, "crossing");
    b.api_call(kind::UR_API, ur::QUEUE_FINISH, 7, t, t + 100, 900_001, &[0x6000], 0);
    b.api_call(kind::UR_API, ur::QUEUE_FINISH, 7, t + 50, t + 150, 900_002, &[0x6000], 0);
    b.api_call(kind::UR_API, ur::QUEUE_FINISH, 7, t + 150, t + 200, 900_003, &[0x6000], 0);
    b.api_call(kind::UR_API, ur::QUEUE_FINISH, 7, t + 300, t + 400, 900_004, &[0x6000], 0);
    b.api_call(kind::UR_API, ur::QUEUE_FINISH, 7, t + 300, t + 350, 900_005, &[0x6000], 0);
    b.queue_create(7, t, 0x6000, 0xd2, false);
    for i in 0..6u64 {
        let c = 900_100 + i;
        b.kernel(7, t + 500 + i, c, 0x6000, 0xd2, "ooo_kernel", Some((t + 1000 + i * 10, t + 1100 + i * 10)));
        b.api_call(kind::UR_API, ur::ENQUEUE_KERNEL_LAUNCH, 7, t + 400 + i * 20, t + 410 + i * 20, c, &[0x6000], 0);
    }
    let name = b.str("alloc_kernel");
    b.out.push(Record::Activity(offtrace_format::Activity {
        kind: kind::KERNEL_DISPATCH,
        tid: 7,
        ts: t + 3000,
        correlation: 900_300,
        queue: 0x6000,
        device: 0xd2,
        name,
        work_dim: 1,
        device_start: t + 3100,
        device_end: t + 3200,
        allocations: vec![
            offtrace_format::KernelAllocation {
                base: 0x1000,
                size: 65536,
                arg_index: 0,
                memory_type: offtrace_format::MemoryType::Device,
            },
            offtrace_format::KernelAllocation {
                base: 0x9000,
                size: 64,
                arg_index: -1,
                memory_type: offtrace_format::MemoryType::Shared,
            },
        ],
        ..Default::default()
    }));
    b.kind(77, "FOO_API");
    b.op(77, 1, "fooLaunch", &[("stream", "foo_stream_t", 3), ("count", "int", 1)]);
    b.api_call(77, 1, 7, t + 2000, t + 2100, 900_200, &[0xabc, u64::MAX], 0);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The thread a track belongs to (lanes are children of their thread's track).
fn thread_of(d: &common::Decoded, mut track: u64) -> Option<i64> {
    loop {
        let t = d.tracks.get(&track)?;
        if let Some((_, tid)) = t.thread {
            return Some(tid);
        }
        track = t.parent?;
    }
}

/// The queue track (name) a track belongs to.
fn queue_of(d: &common::Decoded, mut track: u64) -> Option<String> {
    loop {
        let t = d.tracks.get(&track)?;
        if t.name.starts_with("queue ") || t.name == "unknown queue" {
            return Some(t.name.clone());
        }
        track = t.parent?;
    }
}

#[test]
fn perfetto_states_its_clock_rebuilds_every_slice_and_flows_from_calls_to_device_work() {
    let records = trace();
    let dir = tmp();
    let out = dir.path().join("t.pftrace");
    export_records(&records, &ExportOptions::new(ExportFormat::Perfetto, &out)).unwrap();
    let d = decode_pftrace(&std::fs::read(&out).unwrap());
    assert!(d.problems.is_empty(), "{:#?}", &d.problems[..d.problems.len().min(10)]);
    assert_eq!(d.packets_without_clock, 0);
    assert_eq!(d.primary_clock, Some(common::pf::MONOTONIC));
    assert!(d.clock_snapshot.iter().any(|(id, _)| *id == common::pf::MONOTONIC));

    // Every API call is one slice on its thread, exactly where the record put it.
    let mut want: Vec<(i64, u64, u64)> = records
        .iter()
        .filter_map(|r| if let Record::ApiCall(a) = r { Some((i64::from(a.tid), a.start, a.end)) } else { None })
        .collect();
    let mut got: Vec<(i64, u64, u64)> = d
        .slices
        .iter()
        .filter(|s| s.category.ends_with("_API"))
        .map(|s| (thread_of(&d, s.track).unwrap(), s.start, s.end))
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);
    let foo = d.slices.iter().find(|s| s.name == "fooLaunch").unwrap();
    assert_eq!(foo.category, "FOO_API");
    assert_eq!(foo.annotations[..2], ["stream".to_owned(), "count".to_owned()]);

    // Every device work with device times is a slice on its queue's track.
    let mut pending: HashMap<(u32, u64), u64> = HashMap::new();
    let mut want_dev = Vec::new();
    for r in &records {
        if let Record::Activity(a) = r {
            if a.device_start != 0 {
                let q = if a.phase == phase::COMPLETE {
                    pending.remove(&(a.kind, a.correlation)).unwrap()
                } else {
                    a.queue
                };
                want_dev.push((format!("queue {q:#x}"), a.device_start, a.device_end));
            } else {
                pending.insert((a.kind, a.correlation), a.queue);
            }
        }
    }
    let mut got_dev: Vec<(String, u64, u64)> = d
        .slices
        .iter()
        .filter(|s| !s.category.ends_with("_API") && s.category != "MARKER" && s.category != "SYNC")
        .map(|s| {
            let q = queue_of(&d, s.track).unwrap();
            (q.split(' ').take(2).collect::<Vec<_>>().join(" "), s.start, s.end)
        })
        .collect();
    want_dev.sort();
    got_dev.sort();
    assert_eq!(got_dev, want_dev);
    // The overlapping device work of the out-of-order queue needed lanes; none overlaps there.
    let ooo: Vec<&ViewSlice> = d.slices.iter().filter(|s| s.name == "ooo_kernel").collect();
    assert_eq!(ooo.len(), 6);
    assert!(ooo.iter().map(|s| s.track).collect::<std::collections::HashSet<_>>().len() > 1);
    // Work whose device time never came is an instant at its enqueue.
    let enqueued = d.instants.iter().filter(|s| s.name.starts_with("enqueued: ")).count();
    assert_eq!(enqueued, pending.len());

    // Flows: each device slice ends the flow its launching call started.
    let starts: HashMap<u64, &ViewSlice> = d.slices.iter().flat_map(|s| s.flows.iter().map(move |f| (*f, s))).collect();
    let ends: Vec<(u64, &ViewSlice)> =
        d.slices.iter().flat_map(|s| s.terminating.iter().map(move |f| (*f, s))).collect();
    assert!(ends.len() >= want_dev.len() / 2, "{} flows for {} device slices", ends.len(), want_dev.len());
    for (id, dev) in ends {
        let call = starts.get(&id).unwrap_or_else(|| panic!("flow {id} has no start"));
        assert!(call.category == "UR_API", "{}", call.name);
        assert!(call.name.starts_with("urEnqueue"), "{}", call.name);
        assert!(thread_of(&d, call.track).is_some());
        assert!(queue_of(&d, dev.track).is_some());
    }
    // A kernel's allocation properties are its slice's arguments.
    let k = d.slices.iter().find(|s| s.name == "alloc_kernel").unwrap();
    assert!(k.annotations.iter().any(|a| a == "allocations[1]"), "{:?}", k.annotations);
    // Counters: live bytes and the power counter.
    let counter_tracks: Vec<&common::Track> = d.tracks.values().filter(|t| t.counter).collect();
    assert!(counter_tracks.iter().any(|t| t.name.contains("live allocated bytes")));
    assert!(counter_tracks.iter().any(|t| t.name.starts_with("gpu power") && t.name.ends_with("[W]")));
    assert!(!d.counters.is_empty());
}

#[test]
fn chrome_json_has_the_same_slices_without_overlap_and_matched_flows() {
    let records = trace();
    let dir = tmp();
    let out = dir.path().join("t.json");
    export_records(&records, &ExportOptions::new(ExportFormat::Chrome, &out)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut by_track: BTreeMap<(i64, i64), Vec<(u64, u64)>> = BTreeMap::new();
    let ns = |x: &serde_json::Value| (x.as_f64().unwrap() * 1000.0).round() as u64;
    let mut flows_s = std::collections::HashSet::new();
    let mut flows_f = Vec::new();
    let mut calls = 0;
    for e in events {
        match e["ph"].as_str().unwrap() {
            "X" => {
                let (s, dur) = (ns(&e["ts"]), ns(&e["dur"]));
                by_track
                    .entry((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()))
                    .or_default()
                    .push((s, s + dur));
                if e["cat"].as_str().unwrap().ends_with("_API") {
                    calls += 1;
                }
            }
            "s" => {
                flows_s.insert(e["id"].as_u64().unwrap());
            }
            "f" => flows_f.push(e["id"].as_u64().unwrap()),
            _ => {}
        }
    }
    assert_eq!(calls, records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count());
    for ((pid, tid), mut slices) in by_track {
        slices.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
        let mut stack: Vec<(u64, u64)> = Vec::new();
        for (s, e) in slices {
            while stack.last().is_some_and(|&(_, pe)| pe < s) {
                stack.pop();
            }
            if let Some(&(ps, pe)) = stack.last() {
                assert!(ps < s && e < pe, "({pid},{tid}): [{s},{e}] overlaps [{ps},{pe}]");
            }
            stack.push((s, e));
        }
    }
    assert!(!flows_f.is_empty());
    for f in flows_f {
        assert!(flows_s.contains(&f), "flow {f} ends without a start");
    }
    assert_eq!(v["otherData"]["clock"], "CLOCK_MONOTONIC");
    let k = events.iter().find(|e| e["name"] == "alloc_kernel").unwrap();
    assert_eq!(k["args"]["allocations[0]"], "arg 0: 65536 B DEVICE @ 0x1000");
    assert_eq!(k["args"]["allocations[1]"], "implicit: 64 B SHARED @ 0x9000");
}

#[test]
fn sqlite_tables_join_by_ids_and_the_views_answer() {
    let records = trace();
    let dir = tmp();
    let out = dir.path().join("t.sqlite");
    export_records(&records, &ExportOptions::new(ExportFormat::Sqlite, &out)).unwrap();
    let db = rusqlite::Connection::open(&out).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let calls = records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count() as i64;
    assert_eq!(one("SELECT COUNT(*) FROM api_calls"), calls);
    assert_eq!(one("SELECT COUNT(*) FROM api_calls WHERE json_valid(args) = 0"), 0);
    assert_eq!(one("SELECT COUNT(*) FROM api_calls_named WHERE operation_name IS NULL"), 0);
    assert_eq!(one("SELECT COUNT(*) FROM api_calls_named WHERE kind_name = 'FOO_API'"), 1);
    assert_eq!(one("SELECT json_extract(args, '$.stream') = '0xabc' FROM api_calls WHERE kind = 77"), 1);
    let work = records.iter().filter(|r| matches!(r, Record::Activity(a) if a.phase == phase::NONE)).count() as i64;
    assert_eq!(one("SELECT COUNT(*) FROM device_activity"), work, "completions merge into their work's row");
    assert_eq!(one("SELECT COUNT(*) FROM device_activity WHERE queue = 0"), 0);
    // Every device work joins its call, except `alloc_kernel`, which was given none.
    assert_eq!(one("SELECT COUNT(*) FROM device_activity a JOIN api_calls c USING (correlation)"), work - 1);
    assert_eq!(
        one(
            "SELECT COUNT(*) FROM device_activity_named WHERE kind_name = 'MEMORY_COPY' AND direction NOT IN ('HOST_TO_DEVICE', 'DEVICE_TO_HOST')"
        ),
        0
    );
    assert!(one("SELECT COUNT(*) FROM top_kernels") >= 4);
    let dispatches = one("SELECT SUM(dispatches) FROM top_kernels");
    assert_eq!(
        dispatches,
        records
            .iter()
            .filter(|r| matches!(r, Record::Activity(a) if a.phase == phase::NONE && a.kind == kind::KERNEL_DISPATCH))
            .count() as i64
    );
    let bw: f64 = db.query_row("SELECT MIN(gb_per_s) FROM copy_bandwidth", [], |r| r.get(0)).unwrap();
    assert!((bw - 10.48576).abs() < 1e-6, "{bw}");
    assert!(one("SELECT COUNT(*) FROM queue_wait") > 0);
    assert_eq!(one("SELECT COUNT(*) FROM queue_wait WHERE wait_ns < 0"), 0);
    assert!(one("SELECT COUNT(*) FROM api_calls_by_thread") > 0);
    assert_eq!(one("SELECT COUNT(*) FROM queues"), 4);
    assert_eq!(one("SELECT COUNT(*) FROM queues WHERE in_order = 0"), 1);
    assert!(one("SELECT COUNT(*) FROM memory WHERE op = 'alloc'") > 0);
    assert!(one("SELECT COUNT(*) FROM counter_samples") > 0);
    assert_eq!(one("SELECT COUNT(*) FROM operations WHERE json_valid(args) = 0"), 0);
    let _ = CopyDirection::HostToDevice;
}

#[test]
fn csv_writes_one_file_per_table_with_a_header() {
    let records = trace();
    let dir = tmp();
    let out = dir.path().join("csv");
    export_records(&records, &ExportOptions::new(ExportFormat::Csv, &out)).unwrap();
    for t in offtrace_export::Table::ALL {
        let mut r = csv::Reader::from_path(out.join(format!("{}.csv", t.name()))).unwrap();
        assert_eq!(r.headers().unwrap().len(), t.columns().len(), "{}", t.name());
    }
    let n = csv::Reader::from_path(out.join("api_calls.csv")).unwrap().records().count();
    assert_eq!(n, records.iter().filter(|r| matches!(r, Record::ApiCall(_))).count());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left beside the output");
}

/// The CSV files left every row id empty (SQLite assigns them, CSV wrote the NULL), so no row
/// of `device_activity.csv` could be named (the `queue_wait` view's `activity`), nor a call of
/// `api_calls.csv`. Each id is now the one SQLite gives the same row.
#[test]
fn csv_row_ids_are_the_sqlite_ids() {
    let records = trace();
    let dir = tmp();
    let csv_dir = dir.path().join("csv");
    let db = dir.path().join("t.sqlite");
    export_records(&records, &ExportOptions::new(ExportFormat::Csv, &csv_dir)).unwrap();
    export_records(&records, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut checked = 0;
    for t in offtrace_export::Table::ALL.iter().filter(|t| t.columns()[0].0 == "id") {
        let mut r = csv::Reader::from_path(csv_dir.join(format!("{}.csv", t.name()))).unwrap();
        let ids: Vec<String> = r.records().map(|row| row.unwrap()[0].to_string()).collect();
        let mut q = conn.prepare(&format!("SELECT id FROM {} ORDER BY rowid", t.name())).unwrap();
        let want: Vec<String> =
            q.query_map([], |row| row.get::<_, i64>(0)).unwrap().map(|v| v.unwrap().to_string()).collect();
        assert_eq!(ids.len(), want.len(), "{}", t.name());
        let first = ids.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(
            first,
            None,
            "{}: row {first:?}: CSV id {:?}, SQLite {:?}",
            t.name(),
            first.map(|i| &ids[i]),
            first.map(|i| &want[i])
        );
        checked += ids.len();
    }
    assert!(checked > 100, "{checked} rows with ids");
}

/// A source that fails after some records (a disk error, say).
struct Failing<'a>(&'a [Record]);

impl RecordSource for Failing<'_> {
    fn header(&self) -> TraceHeader {
        TraceHeader::monotonic()
    }
    fn read(&mut self, f: &mut dyn FnMut(&Record) -> Result<(), ExportError>) -> Result<ExportStats, ExportError> {
        for r in &self.0[..self.0.len() / 2] {
            f(r)?;
        }
        Err(ExportError::Write { path: "test".into(), source: std::io::Error::other("disk gone") })
    }
}

#[test]
fn a_failed_export_leaves_no_partial_output() {
    let records = trace();
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome, ExportFormat::Sqlite, ExportFormat::Csv] {
        let dir = tmp();
        let out = dir.path().join("out");
        assert!(export(&mut Failing(&records), &ExportOptions::new(format, &out)).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{format:?} left something behind");
        // An earlier good export stays as it was.
        export_records(&records, &ExportOptions::new(format, &out)).unwrap();
        assert!(export(&mut Failing(&records), &ExportOptions::new(format, &out)).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "{format:?}");
    }
}

/// A source that counts how often it was asked for records.
struct Counting<'a>(&'a [Record], usize);

impl RecordSource for Counting<'_> {
    fn header(&self) -> TraceHeader {
        TraceHeader::monotonic()
    }
    fn read(&mut self, f: &mut dyn FnMut(&Record) -> Result<(), ExportError>) -> Result<ExportStats, ExportError> {
        self.1 += 1;
        for r in self.0 {
            f(r)?;
        }
        Ok(ExportStats::default())
    }
}

#[test]
fn an_output_that_cannot_be_made_is_refused_before_reading_naming_the_users_path() {
    let records = trace();
    let dir = tmp();
    let folder = dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"keep me").unwrap();
    let missing = dir.path().join("no-such-folder").join("out.pftrace");
    let cases = [
        (ExportFormat::Perfetto, &missing, "does not exist"),
        (ExportFormat::Sqlite, &folder, "it is a folder"),
        (ExportFormat::Chrome, &folder, "it is a folder"),
        (ExportFormat::Csv, &file, "it is a file"),
        (ExportFormat::Csv, &missing, "does not exist"),
    ];
    for (format, out, says) in cases {
        let mut src = Counting(&records, 0);
        let e = export(&mut src, &ExportOptions::new(format, out)).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ExportError::Output { .. }), "{format:?} {}: {msg}", out.display());
        assert!(msg.contains(says) && msg.contains(&out.display().to_string()), "{msg}");
        assert!(!msg.contains("partial"), "the temporary name is ours, not the user's: {msg}");
        assert_eq!(src.1, 0, "{format:?}: nothing read");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
    // A CSV folder that exists, and a file name in the current folder, are fine.
    export_records(&records, &ExportOptions::new(ExportFormat::Csv, &folder)).unwrap();
}

/// The live-bytes counter takes its values in time order: four threads each allocate 64 KiB
/// before any frees, but each thread's records reach the file as a block, the first thread's
/// frees before the second's allocations. Perfetto and Chrome show 256 KiB at the peak.
#[test]
fn live_bytes_are_counted_in_time_order_in_perfetto_and_chrome() {
    let mut b = offtrace_analysis::testing::TypedBuilder::new(Vec::new());
    b.kind(kind::MEMORY_ALLOC, "MEMORY_ALLOC");
    for t in 0..4u64 {
        let tid = 10 + t as u32;
        b.alloc(tid, 100 + t, 0, 0x1000 * (t + 1), 65536, offtrace_format::MemoryType::Device, 0xd1);
        b.free(tid, 1_000 + t, 0, 0x1000 * (t + 1));
    }
    b.out.push(Record::End { records: 0, drops: 0 });
    let dir = tmp();
    let pf = dir.path().join("t.pftrace");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = decode_pftrace(&std::fs::read(&pf).unwrap());
    let track = d.tracks.iter().find(|(_, t)| t.name.starts_with("live allocated bytes")).map(|(id, _)| *id).unwrap();
    let mut values: Vec<(u64, f64)> = d.counters.iter().filter(|c| c.0 == track).map(|c| (c.1, c.2)).collect();
    values.sort_by_key(|v| v.0);
    let expect: Vec<(u64, f64)> =
        [(100, 1.0), (101, 2.0), (102, 3.0), (103, 4.0), (1_000, 3.0), (1_001, 2.0), (1_002, 1.0), (1_003, 0.0)]
            .iter()
            .map(|&(ts, n)| (ts, n * 65536.0))
            .collect();
    assert_eq!(values, expect);

    let json = dir.path().join("t.json");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let peak = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["args"]["value"].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(peak, 4.0 * 65536.0);
}

/// A sub-buffer (its parent's bytes with a handle of its own) leaves the live-bytes counter
/// where it was, in Perfetto and Chrome: 64 KiB throughout, not 80 KiB while it lived.
#[test]
fn sub_buffers_leave_the_live_bytes_counter_alone() {
    let mut b = offtrace_analysis::testing::TypedBuilder::new(Vec::new());
    b.kind(kind::MEMORY_ALLOC, "MEMORY_ALLOC");
    b.alloc(1, 100, 0, 0xa000, 65536, offtrace_format::MemoryType::Device, 0xd1);
    b.sub_alloc(1, 110, 0, 0xb000, 16384);
    b.free(1, 120, 0, 0xb000);
    b.free(1, 130, 0, 0xa000);
    b.out.push(Record::End { records: 0, drops: 0 });
    let dir = tmp();
    let pf = dir.path().join("t.pftrace");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = decode_pftrace(&std::fs::read(&pf).unwrap());
    let track = d.tracks.iter().find(|(_, t)| t.name.starts_with("live allocated bytes")).map(|(id, _)| *id).unwrap();
    let mut values: Vec<(u64, f64)> = d.counters.iter().filter(|c| c.0 == track).map(|c| (c.1, c.2)).collect();
    values.sort_by_key(|v| v.0);
    assert_eq!(values, [(100, 65536.0), (110, 65536.0), (120, 65536.0), (130, 0.0)]);

    let json = dir.path().join("t.json");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let peak = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
        .filter_map(|e| e["args"]["value"].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(peak, 65536.0);
}

/// A map and an unmap of a 4 MiB buffer on a CPU device take nanoseconds and copy nothing; in
/// `copy_bandwidth` they multiplied a direction's rate (here 4 MiB in 2 ms = 2.1 GB/s became
/// 8 MiB in 2.0006 ms = 4.2 GB/s). They stay in `device_activity`, by name.
#[test]
fn copy_bandwidth_leaves_out_maps_and_unmaps() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.device(0xd, "cpu");
    b.queue_create(1, 10, 0x9, 0xd, true);
    const MIB4: u64 = 4 << 20;
    let commands = [(2, "buffer_write", 1_000, 2_000_000), (5, "unmap", 3_000_000, 600)];
    for (i, &(op, name, start, ns)) in commands.iter().enumerate() {
        let times = Some((start, start + ns));
        b.named_copy(op, name, 1, start - 500, 100 + i as u64, 0x9, 0xd, MIB4, CopyDirection::HostToDevice, times);
    }
    let dir = tmp();
    let out = dir.path().join("m.sqlite");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Sqlite, &out)).unwrap();
    let db = rusqlite::Connection::open(&out).unwrap();
    let (copies, bytes, gb): (i64, i64, f64) = db
        .query_row("SELECT copies, bytes, gb_per_s FROM copy_bandwidth WHERE direction = 'HOST_TO_DEVICE'", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((copies, bytes), (1, MIB4 as i64));
    assert!((gb - MIB4 as f64 / 2e6).abs() < 1e-9, "{gb}");
    let maps: i64 =
        db.query_row("SELECT COUNT(*) FROM device_activity WHERE name = 'unmap'", [], |r| r.get(0)).unwrap();
    assert_eq!(maps, 1);
}
