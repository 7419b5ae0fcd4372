//! A trace recorded by the recorder whose first chunk (every first definition) is damaged:
//! the exports still name its API calls, from the definitions the recorder repeats at the end
//! (issue 11, "one damaged chunk must not lose every name").

#![allow(clippy::unwrap_used)] // tests

use std::path::Path;

use offtrace_core::*;
use offtrace_export::{ExportFormat, ExportOptions, FileSource, export};
use offtrace_format::{CHUNK_HEADER_LEN, FILE_HEADER_LEN};
use offtrace_recorder::{Config, finish, start_file, subscribe};

const LAUNCH: u32 = 7;
const COPY: u32 = 19;

/// Records UR calls (each with a kernel dispatch) in many small chunks, then flips a byte of
/// the first chunk.
fn damaged_trace(path: &Path) {
    static TABLE: [Operation; 2] = [
        Operation { id: LAUNCH, name: "urEnqueueKernelLaunch", args: &[] },
        Operation { id: COPY, name: "urEnqueueUSMMemcpy", args: &[] },
    ];
    let _ = register_kind_operations(Kind::UrApi, &TABLE);
    let mut config = Config::default();
    config.chunk_bytes = 4096;
    start_file(config, path, &[("command", "damaged test")]).unwrap();
    let ctx = subscribe(false).unwrap();
    for i in 0..400u64 {
        for op in [LAUNCH, COPY] {
            let mut p = ApiCallPayload::new(op, &[0x1000, i]);
            let t = emit_enter(Kind::UrApi, op, Payload::UrApi(&p));
            let kd = KernelDispatchPayload {
                queue: 0x1000,
                device: 0x40,
                kernel_name: c"scale".as_ptr(),
                work_dim: 1,
                global_size: [64, 1, 1],
                ..Default::default()
            };
            emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
            p.has_result = 1;
            emit_exit(t, Payload::UrApi(&p));
        }
    }
    destroy_context(ctx).unwrap();
    finish().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[FILE_HEADER_LEN + CHUNK_HEADER_LEN + 40] ^= 0xff;
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn a_damaged_first_chunk_leaves_every_api_call_named_in_chrome_and_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.offtrace");
    damaged_trace(&trace);

    let json = dir.path().join("t.json");
    let stats =
        export(&mut FileSource::open(&trace).unwrap(), &ExportOptions::new(ExportFormat::Chrome, &json)).unwrap();
    assert_eq!(stats.warnings.len(), 1, "{:?}", stats.warnings);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let calls: Vec<&serde_json::Value> =
        v["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X" && e["cat"] == "UR_API").collect();
    // Kernels without device times are instants on their queue: named by the kernel's string.
    let kernels: Vec<&serde_json::Value> =
        v["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "KERNEL_DISPATCH").collect();
    assert!(kernels.len() > 400, "{} kernels", kernels.len());
    for k in &kernels {
        assert!(k["name"].as_str().unwrap().ends_with("scale"), "{k}");
    }
    assert!(calls.len() > 400, "{} named calls", calls.len());
    for c in &calls {
        let name = c["name"].as_str().unwrap();
        assert!(name == "urEnqueueKernelLaunch" || name == "urEnqueueUSMMemcpy", "{c}");
    }

    let db = dir.path().join("t.sqlite");
    export(&mut FileSource::open(&trace).unwrap(), &ExportOptions::new(ExportFormat::Sqlite, &db)).unwrap();
    let db = rusqlite::Connection::open(&db).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(one("SELECT COUNT(*) FROM api_calls_named WHERE operation_name IS NULL OR kind_name IS NULL"), 0);
    assert_eq!(one("SELECT COUNT(*) FROM api_calls_named"), one("SELECT COUNT(*) FROM api_calls"));
    // Each definition is one row, though the file holds it twice.
    assert_eq!(one("SELECT COUNT(*) FROM kinds"), one("SELECT COUNT(DISTINCT kind) FROM kinds"));
    assert_eq!(one("SELECT COUNT(*) FROM operations WHERE kind = 1"), 2);
}
