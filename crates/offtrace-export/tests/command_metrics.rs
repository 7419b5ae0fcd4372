//! Values per command (event-based metric queries) in SQLite: `counter_samples.correlation`
//! ties each to its command, `kernel_metrics` gives the report's `command_metrics` rows.

#![allow(clippy::unwrap_used)] // tests

use offtrace_analysis::Analyzer;
use offtrace_analysis::testing::{TypedBuilder, kind};
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::Record;

const Q: u64 = 0x5000;
const D: u64 = 0xd1;

fn trace() -> Vec<Record> {
    let mut b = TypedBuilder::new(Vec::new());
    b.device(D, "cpu");
    b.counter_def(100, D, "cpu.sw.task_clock.per_command", "ns");
    b.counter_def(101, D, "cpu.sw.task_clock", "ns");
    b.queue_create(1, 10, Q, D, true);
    // k_big: commands 1 and 2 (2's completion before its enqueue record); k_small: command 3.
    b.kernel(1, 100, 1, Q, D, "k_big", None);
    b.complete(kind::KERNEL_DISPATCH, 0, 2, 300, 1, Q, 1_000, 2_000);
    b.command_sample(100, 2, 310, 900.0, 1);
    b.complete(kind::KERNEL_DISPATCH, 0, 2, 400, 2, Q, 2_100, 3_100);
    b.command_sample(100, 2, 410, 1_100.0, 2);
    b.kernel(1, 350, 2, Q, D, "k_big", None);
    b.counter_sample(101, 3, 420, 5.0e6);
    b.kernel(1, 500, 3, Q, D, "k_small", Some((3_200, 3_300)));
    b.command_sample(100, 2, 510, 80.0, 3);
    b.command_sample(100, 2, 520, 7.0, 77); // its command left no device activity
    b.out.push(Record::End { records: 0, drops: 0 });
    b.out
}

#[test]
fn sqlite_ties_values_to_their_commands_as_the_report_does() {
    let records = trace();
    let mut a = Analyzer::new();
    for r in &records {
        a.push(r);
    }
    let rep = a.finish(true, Vec::new(), None);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&records, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT COUNT(*) FROM counter_samples"), 5);
    assert_eq!(one("SELECT COUNT(*) FROM counter_samples WHERE correlation IS NULL"), 1, "the time series");
    assert_eq!(one("SELECT COUNT(*) FROM command_metrics WHERE activity IS NULL"), 1);
    assert_eq!(
        one("SELECT CAST(value AS INTEGER) FROM command_metrics WHERE correlation = 2 AND name = 'k_big'"),
        1_100
    );

    let mut stmt = db
        .prepare("SELECT kind_name, name, metric, unit, commands, total, mean, min, max FROM kernel_metrics")
        .unwrap();
    type Row = (Option<String>, Option<String>, String, String, i64, f64, f64, f64, f64);
    let rows: Vec<Row> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let from_report: Vec<Row> = rep
        .command_metrics
        .iter()
        .map(|m| {
            let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            (
                opt(&m.kind),
                opt(&m.name),
                m.metric.clone(),
                m.unit.clone(),
                m.commands as i64,
                m.total,
                m.mean,
                m.min,
                m.max,
            )
        })
        .collect();
    assert_eq!(rows, from_report);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0].1.as_deref(), Some("k_big"));
    assert_eq!((rows[0].4, rows[0].5, rows[0].6), (2, 2_000.0, 1_000.0));
}
