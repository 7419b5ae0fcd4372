//! Queues are keyed by their definition id, not by the runtime's handle: a queue created at the
//! handle of a destroyed one (the runtime reuses the memory) is a queue of its own in SQLite and
//! on the timelines, as in the report, and device work belongs to the queue that had the handle
//! when the work was enqueued, also when its completion comes after a later queue got the handle.

#![allow(clippy::unwrap_used)] // tests

mod common;

use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::Record;

const Q: u64 = 0x500;
const D: u64 = 0xd1;

/// A `queues` row: id, handle, created, destroyed, in-order.
type QueueRow = (i64, i64, Option<i64>, Option<i64>, Option<i64>);

/// Three queues, one after the other, at handle `Q`. `k_late` is enqueued on the second and
/// completes when the third has the handle.
fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.kind(kind::UR_API, "UR_API");
    b.op(kind::UR_API, 1, "urEnqueueKernelLaunch", &[("hQueue", "ur_queue_handle_t", 3)]);
    b.queue_create(1, 10, Q, D, false);
    b.kernel(1, 12, 1, Q, D, "k_first", Some((13, 14)));
    b.api_call(kind::UR_API, 1, 1, 11, 15, 1, &[Q], 0);
    b.queue_destroy(1, 20, Q);
    b.queue_create(1, 30, Q, D, true);
    b.kernel(1, 40, 2, Q, D, "k_second", Some((50, 60)));
    b.api_call(kind::UR_API, 1, 1, 39, 41, 2, &[Q], 0);
    b.kernel(1, 42, 3, Q, D, "k_late", None);
    b.api_call(kind::UR_API, 1, 1, 42, 43, 3, &[Q], 0);
    b.queue_destroy(1, 70, Q);
    b.queue_create(1, 80, Q, D, false);
    b.complete(kind::KERNEL_DISPATCH, 0, 1, 90, 3, Q, 61, 65);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn sqlite_has_a_row_per_queue_and_work_joins_its_own_queue() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let mut st = db.prepare("SELECT id, queue, created_ns, destroyed_ns, in_order FROM queues ORDER BY id").unwrap();
    let rows: Vec<QueueRow> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let q = Q as i64;
    assert_eq!(
        rows,
        [(1, q, Some(10), Some(20), Some(0)), (2, q, Some(30), Some(70), Some(1)), (3, q, Some(80), None, Some(0))]
    );
    let created = |name: &str| -> i64 {
        db.query_row(
            "SELECT q.created_ns FROM device_activity a JOIN queues q ON q.id = a.queue_id WHERE a.name = ?1",
            [name],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!((created("k_first"), created("k_second"), created("k_late")), (10, 30, 30));
    let waits: i64 = db.query_row("SELECT COUNT(*) FROM queue_wait WHERE queue_id = 2", [], |r| r.get(0)).unwrap();
    assert_eq!(waits, 2);
}

#[test]
fn timelines_have_a_track_per_queue() {
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("t.pftrace");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Perfetto, &pf)).unwrap();
    let d = common::decode_pftrace(&std::fs::read(&pf).unwrap());
    let track = |name: &str| d.slices.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}")).track;
    assert_ne!(track("k_first"), track("k_second"));
    assert_eq!(track("k_second"), track("k_late"));
    let names = |t: u64| d.tracks.get(&t).map(|t| t.name.clone()).unwrap_or_default();
    assert_eq!(names(track("k_first")), "queue 0x500 (out-of-order)");
    assert_eq!(names(track("k_second")), "queue 0x500 (in-order) #2");
    assert!(d.problems.is_empty(), "{:?}", d.problems);

    let json = dir.path().join("t.json");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let place = |name: &str| {
        let e = events.iter().find(|e| e["name"] == name && e["ph"] == "X").unwrap_or_else(|| panic!("{name}"));
        (e["pid"].clone(), e["tid"].clone(), e["args"]["queue_id"].clone())
    };
    assert_ne!(place("k_first").1, place("k_second").1);
    assert_eq!(place("k_second"), place("k_late"));
    assert_eq!(place("k_late").2, 2);
}
