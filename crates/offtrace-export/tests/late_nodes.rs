//! A SYCL node recorded before its command was enqueued has no queue on its own record: its
//! task's exit record carries the queue and the command's name (`docs/record-model.md`, its
//! task-graph row). The SQLite and CSV rows of such a node (and of its task's enter) carry them, as a
//! node recorded after its enqueue does; a virtual node and a host task's node stay without one.

#![allow(clippy::unwrap_used)] // tests

use offtrace_analysis::testing::TypedBuilder;
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::{CopyDirection, Record};

const Q: u64 = 0x500;
const D: u64 = 0xd1;
const ENTER: u8 = 1;
const EXIT: u8 = 2;

/// Node 5, a copy, recorded before its enqueue (`copy usm`, no queue), its exit on another
/// thread naming `usm_memcpy` on `Q`; node 6 recorded with its queue; node 7 virtual; node 8 a
/// host task (its exit has no queue either).
fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.queue_create(1, 10, Q, D, true);
    b.node(1, 20, 5, "copy usm", 0);
    b.node(1, 21, 6, "k", Q);
    b.edge(1, 22, 5, 6);
    b.virtual_node(1, 23, 7, 0x99);
    b.node(1, 24, 8, "host task", 0);
    b.task(2, 30, 8, ENTER, "host task", 0);
    b.task(2, 31, 8, EXIT, "host task", 0);
    b.task(2, 40, 5, ENTER, "memcpy", 0);
    b.copy(2, 41, 1, Q, D, 64, CopyDirection::HostToDevice, None);
    b.task(2, 42, 5, EXIT, "usm_memcpy", Q);
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

/// (op, phase, node, name, queue, queue_id) by op, node and phase.
type Row = (String, i64, i64, String, i64, Option<i64>);

fn rows(db: &rusqlite::Connection) -> Vec<Row> {
    let mut st = db
        .prepare("SELECT op, phase, node, name, queue, queue_id FROM task_graph WHERE op <> 'edge_create' ORDER BY op, node, phase")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn expected() -> Vec<Row> {
    let q = Q as i64;
    let row =
        |op: &str, phase, node, name: &str, queue, queue_id| (op.into(), phase, node, name.into(), queue, queue_id);
    vec![
        row("node_create", 0, 5, "usm_memcpy", q, Some(1)),
        row("node_create", 0, 6, "k", q, Some(1)),
        row("node_create", 0, 7, "", 0, None),
        row("node_create", 0, 8, "host task", 0, None),
        row("task", 1, 5, "memcpy", q, Some(1)),
        row("task", 2, 5, "usm_memcpy", q, Some(1)),
        row("task", 1, 8, "host task", 0, None),
        row("task", 2, 8, "host task", 0, None),
    ]
}

#[test]
fn sqlite_node_rows_take_the_queue_of_their_tasks_exit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&trace(), &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    assert_eq!(rows(&db), expected());
    let n: i64 = db.query_row("SELECT COUNT(*) FROM task_graph", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 9, "every record is one row");
}

#[test]
fn csv_node_rows_take_the_queue_of_their_tasks_exit() {
    let dir = tempfile::tempdir().unwrap();
    export_records(&trace(), &ExportOptions::new(ExportFormat::Csv, dir.path())).unwrap();
    let mut r = csv::Reader::from_path(dir.path().join("task_graph.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap();
    let (op, node, queue, queue_id, name) = (col("op"), col("node"), col("queue"), col("queue_id"), col("name"));
    let node5: Vec<(String, String, String, String)> = r
        .records()
        .map(Result::unwrap)
        .filter(|x| &x[node] == "5")
        .map(|x| (x[op].to_owned(), x[name].to_owned(), x[queue].to_owned(), x[queue_id].to_owned()))
        .collect();
    let q = Q.to_string();
    let own = |op: &str, name: &str| (op.to_owned(), name.to_owned(), q.clone(), "1".to_owned());
    let mut want = vec![own("node_create", "usm_memcpy"), own("task", "memcpy"), own("task", "usm_memcpy")];
    let mut node5 = node5;
    node5.sort();
    want.sort();
    assert_eq!(node5, want);
}

/// A node whose task never exits is written at the end of the export, without a queue; one
/// whose exit comes after 65,536 later nodes were held (the export's bound on what it holds) was
/// written without one too.
#[test]
fn a_node_held_too_long_is_written_without_its_queue() {
    const HELD_MAX: u64 = 1 << 16;
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    b.queue_create(1, 10, Q, D, true);
    for n in 1..=HELD_MAX + 1 {
        b.node(1, 10 + n, n, "copy usm", 0);
    }
    b.task(1, HELD_MAX + 20, 1, EXIT, "usm_memcpy", Q);
    b.task(1, HELD_MAX + 21, 2, EXIT, "usm_memcpy", Q);
    b.out.push(Record::End { records: 0, drops: 0 });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let queue_of = |node: u64| -> i64 {
        db.query_row("SELECT queue FROM task_graph WHERE op = 'node_create' AND node = ?1", [node as i64], |r| r.get(0))
            .unwrap()
    };
    assert_eq!((queue_of(1), queue_of(2), queue_of(3)), (0, Q as i64, 0));
    let n: i64 = db.query_row("SELECT COUNT(*) FROM task_graph", [], |r| r.get(0)).unwrap();
    assert_eq!(n, HELD_MAX as i64 + 3);
}
