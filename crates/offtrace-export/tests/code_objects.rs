//! A code object's unload record names only its handle: its SQLite row takes the name and
//! program of the object's load.

#![allow(clippy::unwrap_used)] // tests

use offtrace_analysis::testing::TypedBuilder;
use offtrace_export::{ExportFormat, ExportOptions, export_records};
use offtrace_format::{CodeObjectRecord, Record, StrId, phase};

const PROGRAM: u32 = 0;
const KERNEL: u32 = 2;
const P: u64 = 0x7000;
const K: u64 = 0x7100;

fn object(op: u32, phase: u8, ts: u64, handle: u64, program: u64, name: StrId) -> Record {
    Record::CodeObject(CodeObjectRecord { op, phase, tid: 1, ts, handle, program, name, ..Default::default() })
}

#[test]
fn an_unload_row_has_the_name_and_program_of_its_load() {
    let mut b = TypedBuilder::new(Vec::new());
    b.thread(1, "main");
    let name = b.str("vector_add");
    b.out.push(object(PROGRAM, phase::LOAD, 10, P, P, StrId(0)));
    b.out.push(object(KERNEL, phase::LOAD, 11, K, P, name));
    b.out.push(object(KERNEL, phase::UNLOAD, 20, K, 0, StrId(0)));
    b.out.push(object(PROGRAM, phase::UNLOAD, 21, P, P, StrId(0)));
    // Unloaded already, and never loaded: nothing to take.
    b.out.push(object(KERNEL, phase::UNLOAD, 22, K, 0, StrId(0)));
    b.out.push(object(KERNEL, phase::UNLOAD, 23, 0x7200, 0, StrId(0)));
    b.out.push(Record::End { records: 0, drops: 0 });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    export_records(&b.out, &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let mut st = db.prepare("SELECT phase, handle, program, name FROM code_objects ORDER BY ts_ns").unwrap();
    let rows: Vec<(i64, i64, i64, String)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect();
    let (p, k) = (P as i64, K as i64);
    let row = |phase, handle, program, name: &str| (phase, handle, program, name.to_owned());
    assert_eq!(
        rows,
        [
            row(3, p, p, ""),
            row(3, k, p, "vector_add"),
            row(4, k, p, "vector_add"),
            row(4, p, p, ""),
            row(4, k, 0, ""),
            row(4, 0x7200, 0, ""),
        ]
    );
}
