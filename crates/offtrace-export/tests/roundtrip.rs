//! Round trips of every export format through independent readers: a minimal protobuf decoder
//! written here (not the encoder's code), serde_json, rusqlite, and the csv crate.

#![allow(clippy::unwrap_used)] // tests

use std::collections::HashMap;

use offtrace_analysis::testing::{w4_like, w4_like_with_dispatches};
use offtrace_export::{ExportFormat, ExportOptions, Table, export_records};
use offtrace_format::Record;

// ---- an independent minimal protobuf decoder -------------------------------------------

#[derive(Debug, Clone)]
enum Val {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32,
}

fn read_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
        assert!(shift < 70, "varint too long");
    }
}

/// Decodes one message into (field number, value) pairs, in order.
fn decode(b: &[u8]) -> Vec<(u32, Val)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let key = read_varint(b, &mut pos);
        let field = (key >> 3) as u32;
        let v = match key & 7 {
            0 => Val::Varint(read_varint(b, &mut pos)),
            1 => {
                let v = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
                pos += 8;
                Val::Fixed64(v)
            }
            2 => {
                let len = read_varint(b, &mut pos) as usize;
                let v = b[pos..pos + len].to_vec();
                pos += len;
                Val::Bytes(v)
            }
            5 => {
                let v = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap());
                pos += 4;
                let _ = v;
                Val::Fixed32
            }
            w => panic!("unexpected wire type {w} at {pos}"),
        };
        out.push((field, v));
    }
    assert_eq!(pos, b.len());
    out
}

fn get(m: &[(u32, Val)], field: u32) -> Option<&Val> {
    m.iter().find(|(f, _)| *f == field).map(|(_, v)| v)
}
fn get_u(m: &[(u32, Val)], field: u32) -> Option<u64> {
    match get(m, field)? {
        Val::Varint(v) => Some(*v),
        _ => None,
    }
}
fn get_msg(m: &[(u32, Val)], field: u32) -> Option<Vec<(u32, Val)>> {
    match get(m, field)? {
        Val::Bytes(b) => Some(decode(b)),
        _ => None,
    }
}
fn get_str(m: &[(u32, Val)], field: u32) -> Option<String> {
    match get(m, field)? {
        Val::Bytes(b) => Some(String::from_utf8(b.clone()).unwrap()),
        _ => None,
    }
}
fn all_fixed(m: &[(u32, Val)], field: u32) -> Vec<u64> {
    m.iter()
        .filter(|(f, _)| *f == field)
        .filter_map(|(_, v)| if let Val::Fixed64(x) = v { Some(*x) } else { None })
        .collect()
}

#[test]
fn perfetto_decodes_with_balanced_slices_and_flows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pftrace");
    let stats = export_records(&w4_like(), &ExportOptions::new(ExportFormat::Perfetto, &path)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let trace = decode(&bytes);
    assert!(trace.iter().all(|(f, _)| *f == 1), "Trace has only packet fields");
    assert_eq!(trace.len() as u64, stats.items);

    let mut tracks: HashMap<u64, String> = HashMap::new();
    let mut thread_tracks = Vec::new();
    let mut counter_tracks = 0;
    let mut depth: HashMap<u64, i64> = HashMap::new();
    let mut names_by_track: HashMap<u64, Vec<String>> = HashMap::new();
    let mut flows: HashMap<u64, usize> = HashMap::new();
    let mut terminating: HashMap<u64, usize> = HashMap::new();
    let mut counters = Vec::new();
    for (i, (_, v)) in trace.iter().enumerate() {
        let Val::Bytes(b) = v else { panic!("packet not a message") };
        let p = decode(b);
        assert_eq!(get_u(&p, 10), Some(1), "trusted_packet_sequence_id");
        if i == 0 {
            assert_eq!(get_u(&p, 13), Some(1), "first packet clears incremental state");
        }
        if let Some(td) = get_msg(&p, 60) {
            let uuid = get_u(&td, 1).unwrap();
            let name = get_str(&td, 2)
                .or_else(|| get_msg(&td, 4).and_then(|t| get_str(&t, 5)))
                .or_else(|| get_msg(&td, 3).and_then(|t| get_str(&t, 6)))
                .unwrap();
            if let Some(t) = get_msg(&td, 4) {
                thread_tracks.push((get_u(&t, 2).unwrap(), name.clone()));
            }
            if get_msg(&td, 8).is_some() {
                counter_tracks += 1;
            }
            assert!(tracks.insert(uuid, name).is_none(), "track uuids unique");
        } else if let Some(te) = get_msg(&p, 11) {
            assert!(get_u(&p, 8).is_some(), "events carry timestamps");
            let track = get_u(&te, 11).unwrap();
            assert!(tracks.contains_key(&track), "event on a described track");
            match get_u(&te, 9).unwrap() {
                1 => {
                    *depth.entry(track).or_default() += 1;
                    names_by_track.entry(track).or_default().push(get_str(&te, 23).unwrap());
                    for id in all_fixed(&te, 47) {
                        *flows.entry(id).or_default() += 1;
                    }
                    for id in all_fixed(&te, 48) {
                        *terminating.entry(id).or_default() += 1;
                    }
                }
                2 => {
                    let d = depth.entry(track).or_default();
                    *d -= 1;
                    assert!(*d >= 0, "end without begin on {}", tracks[&track]);
                }
                4 => counters.push(get_u(&te, 30).unwrap()),
                t => panic!("unexpected type {t}"),
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0), "begin/end balance: {depth:?}");
    let mut tids: Vec<u64> = thread_tracks.iter().map(|t| t.0).collect();
    tids.sort();
    assert_eq!(tids, vec![100, 101]);
    assert!(thread_tracks.contains(&(100, "python".to_owned())));
    assert_eq!(counter_tracks, 1);
    let track_names: Vec<&String> = tracks.values().collect();
    assert!(track_names.iter().any(|n| n.starts_with("queue 1 (in-order, CPU X)")));
    assert!(track_names.iter().any(|n| n.as_str() == "queue 2 (out-of-order, CPU X) device"));
    // thread 100: tasks and UR calls; queue tracks: commands; device track: kernel B
    let thread_names = &names_by_track[&((1u64 << 32) | 100)];
    assert!(thread_names.contains(&"axpy".to_owned()));
    assert!(thread_names.contains(&"urEnqueueKernelLaunch".to_owned()));
    assert!(
        thread_names.contains(&"wait queue".to_owned())
            || names_by_track[&((1u64 << 32) | 101)].contains(&"wait queue".to_owned())
    );
    let q1 = &names_by_track[&((2u64 << 32) | 1)];
    assert_eq!(q1, &vec!["axpy".to_owned(), "memcpy".to_owned()]);
    let dev2 = &names_by_track[&((3u64 << 32) | 2)];
    assert_eq!(dev2, &vec!["axpy".to_owned()]);
    // flows: 3 task→command, 1 enqueue→device, 2 graph edges; each has a start and an end
    assert_eq!(terminating.len(), 3 + 1 + 2);
    for (id, n) in &terminating {
        assert_eq!(flows.get(id), Some(n), "flow {id:#x} starts once and ends once");
    }
    assert_eq!(counters, vec![65536, 65536 + 4096, 4096]);
}

#[test]
fn perfetto_truncated_trace_still_balances() {
    let mut recs = w4_like();
    // cut inside the first kernel's task (after its task_begin and the UR begin)
    let cut = recs.iter().position(|r| matches!(r, Record::Notification(n) if n.trace_type == 16)).unwrap();
    recs.truncate(cut);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pftrace");
    export_records(&recs, &ExportOptions::new(ExportFormat::Perfetto, &path)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut depth: HashMap<u64, i64> = HashMap::new();
    for (_, v) in decode(&bytes) {
        let Val::Bytes(b) = v else { panic!() };
        if let Some(te) = get_msg(&decode(&b), 11) {
            let d = depth.entry(get_u(&te, 11).unwrap()).or_default();
            match get_u(&te, 9) {
                Some(1) => *d += 1,
                Some(2) => *d -= 1,
                _ => {}
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0));
}

#[test]
fn chrome_json_parses_and_balances() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let stats = export_records(&w4_like(), &ExportOptions::new(ExportFormat::Chrome, &path)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert_eq!(events.len() as u64, stats.items);
    let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!(count("B"), count("E"));
    assert_eq!(count("X"), 3 + 1);
    assert_eq!(count("C"), 3);
    assert_eq!(count("s"), count("f"));
    assert!(events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "python"));
    assert!(events.iter().any(|e| e["ph"] == "B" && e["name"] == "urEnqueueUSMMemcpy"));
    assert_eq!(v["otherData"]["pid"], "4242");
}

#[test]
fn sqlite_every_table_selects() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let recs = w4_like();
    export_records(&recs, &ExportOptions::new(ExportFormat::Sqlite, &path)).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut counts = HashMap::new();
    for t in Table::ALL {
        let n: i64 = conn.query_row(&format!("SELECT COUNT(*) FROM {}", t.name()), [], |r| r.get(0)).unwrap();
        counts.insert(t.name(), n);
    }
    let notifications = recs.iter().filter(|r| matches!(r, Record::Notification(_))).count() as i64;
    assert_eq!(counts["notifications"], notifications);
    assert_eq!(counts["ur_calls"], 6);
    assert_eq!(counts["sycl_commands"], 3);
    assert_eq!(counts["device_executions"], 1);
    assert_eq!(counts["nodes"], 3);
    assert_eq!(counts["edges"], 2);
    assert_eq!(counts["memory_allocations"], 3);
    assert_eq!(counts["memory_ops"], 2);
    assert_eq!(counts["queues"], 4);
    assert_eq!(counts["threads"], 2);
    assert_eq!(counts["drops"], 1);
    assert!(counts["strings"] > 10 && counts["metadata"] > 10 && counts["meta"] > 5);
    let dur: i64 = conn
        .query_row("SELECT d.dur_ns FROM device_executions d JOIN sycl_commands c USING (instance)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(dur, 2000);
    let (src, dst): (String, String) = conn
        .query_row(
            "SELECT s.name, t.name FROM edges e JOIN nodes s ON s.node_id = e.source_node JOIN nodes t ON t.node_id = e.target_node WHERE e.edge_id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((src.as_str(), dst.as_str()), ("axpy", "memcpy"));
    let pid: String = conn.query_row("SELECT value FROM meta WHERE key = 'info.pid'", [], |r| r.get(0)).unwrap();
    assert_eq!(pid, "4242");
    let n_idx: i64 =
        conn.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index'", [], |r| r.get(0)).unwrap();
    assert!(n_idx >= 10);
}

#[test]
fn csv_one_file_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("csv");
    export_records(&w4_like(), &ExportOptions::new(ExportFormat::Csv, &out)).unwrap();
    for t in Table::ALL {
        let mut r = csv::Reader::from_path(out.join(format!("{}.csv", t.name()))).unwrap();
        let headers = r.headers().unwrap().clone();
        assert_eq!(headers.len(), t.columns().len());
        for row in r.records() {
            assert_eq!(row.unwrap().len(), t.columns().len());
        }
    }
    let mut r = csv::Reader::from_path(out.join("ur_calls.csv")).unwrap();
    assert_eq!(r.records().count(), 6);
}

// ---- kernel dispatches with their allocation properties ---------------------------------

/// dispatch_id, kernel, command_instance, command_name, link, allocations, allocation_bytes, ur_instance
type DispatchRow = (i64, String, Option<i64>, Option<String>, String, i64, i64, Option<i64>);

#[test]
fn sqlite_and_csv_kernel_dispatch_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.sqlite");
    export_records(&w4_like_with_dispatches(), &ExportOptions::new(ExportFormat::Sqlite, &path)).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<DispatchRow> = conn
        .prepare(
            "SELECT dispatch_id, kernel, command_instance, command_name, link, allocations, allocation_bytes, ur_instance \
             FROM kernel_dispatches ORDER BY dispatch_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        [
            (0, "axpy".into(), Some(30), Some("axpy".into()), "ur_call".into(), 3, 65536 + 4096 + 65536, Some(31)),
            (1, "axpy".into(), Some(40), Some("axpy".into()), "task".into(), 2, 65536 + 4096, None),
            (2, "scale".into(), None, None, "none".into(), 0, 0, None),
        ]
    );
    // Each allocation with its command: the join a performance engineer would write.
    let allocs: Vec<(i64, i64, i64, String, String)> = conn
        .prepare(
            "SELECT a.arg_index, a.base, a.size, a.memory_type, c.name FROM kernel_allocations a \
             JOIN kernel_dispatches d USING (dispatch_id) JOIN sycl_commands c ON c.instance = d.command_instance \
             ORDER BY d.dispatch_id, a.rowid",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(allocs.len(), 5);
    assert_eq!(allocs[2], (-1, 0x30000, 65536, "SHARED".into(), "axpy".into()));
    assert_eq!(allocs[4], (1, 0x2800, 4096, "HOST".into(), "axpy".into()));
    let (g, l): (i64, i64) = conn
        .query_row("SELECT global_x, local_x FROM kernel_dispatches WHERE dispatch_id = 0", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((g, l), (1024, 64));

    let out = dir.path().join("csv");
    export_records(&w4_like_with_dispatches(), &ExportOptions::new(ExportFormat::Csv, &out)).unwrap();
    let mut r = csv::Reader::from_path(out.join("kernel_allocations.csv")).unwrap();
    let rows: Vec<Vec<String>> = r.records().map(|row| row.unwrap().iter().map(str::to_owned).collect()).collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[0], ["0", "0", "4096", "65536", "DEVICE"]);
    let mut r = csv::Reader::from_path(out.join("kernel_dispatches.csv")).unwrap();
    assert_eq!(r.records().count(), 3);
}

#[test]
fn timeline_exports_put_allocations_on_the_command_slice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.json");
    export_records(&w4_like_with_dispatches(), &ExportOptions::new(ExportFormat::Chrome, &path)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let commands: Vec<&serde_json::Value> =
        v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X" && e["cat"] == "command").collect();
    let a = commands.iter().find(|e| e["args"]["instance"] == 30).unwrap();
    assert_eq!(
        a["args"]["kernel_allocations"],
        serde_json::json!([
            "arg 0: 65536 B DEVICE @ 0x1000",
            "arg 1: 4096 B HOST @ 0x2000",
            "implicit: 65536 B SHARED @ 0x30000"
        ])
    );
    let memcpy = commands.iter().find(|e| e["name"] == "memcpy").unwrap();
    assert!(memcpy["args"].get("kernel_allocations").is_none());

    let path = dir.path().join("k.pftrace");
    export_records(&w4_like_with_dispatches(), &ExportOptions::new(ExportFormat::Perfetto, &path)).unwrap();
    let mut annotations = Vec::new();
    for (_, v) in decode(&std::fs::read(&path).unwrap()) {
        let Val::Bytes(b) = v else { continue };
        let Some(te) = get_msg(&decode(&b), 11) else { continue };
        for (f, a) in &te {
            if let (4, Val::Bytes(a)) = (*f, a) {
                let a = decode(a);
                if let (Some(name), Some(text)) = (get_str(&a, 10), get_str(&a, 6)) {
                    annotations.push((get_str(&te, 23).unwrap(), name, text));
                }
            }
        }
    }
    assert_eq!(
        annotations,
        [
            ("axpy".to_owned(), "kernel_allocations[0]".to_owned(), "arg 0: 65536 B DEVICE @ 0x1000".to_owned()),
            ("axpy".into(), "kernel_allocations[1]".into(), "arg 1: 4096 B HOST @ 0x2000".into()),
            ("axpy".into(), "kernel_allocations[2]".into(), "implicit: 65536 B SHARED @ 0x30000".into()),
            ("axpy".into(), "kernel_allocations[0]".into(), "arg 0: 65536 B DEVICE @ 0x1000".into()),
            ("axpy".into(), "kernel_allocations[1]".into(), "arg 1: 4096 B HOST @ 0x2800".into()),
        ]
    );
}
