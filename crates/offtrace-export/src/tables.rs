//! The tables written by the SQLite and CSV exports (documented in `docs/sqlite-schema.md`).
//! Both writers take the same rows; this file is the one place their columns are defined.

use std::borrow::Cow;

/// One value of a row. Unsigned 64-bit values (handles, pointers, uids) are stored as SQLite
/// INTEGER, i.e. reinterpreted as i64 where they exceed `i64::MAX`.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Cow<'a, str>),
}

impl Cell<'_> {
    pub fn u(v: u64) -> Self {
        Cell::Int(v as i64)
    }
    pub fn opt(v: Option<u64>) -> Self {
        v.map_or(Cell::Null, Cell::u)
    }
}

impl<'a> From<&'a str> for Cell<'a> {
    fn from(s: &'a str) -> Self {
        Cell::Text(Cow::Borrowed(s))
    }
}

impl From<String> for Cell<'_> {
    fn from(s: String) -> Self {
        Cell::Text(Cow::Owned(s))
    }
}

macro_rules! tables {
    ($( $variant:ident $name:literal [ $( $col:literal $ty:literal ),* $(,)? ] indices [ $( $idx:literal ),* ] ; )*) => {
        /// Every table, in creation order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Table { $( $variant ),* }

        impl Table {
            pub const ALL: &'static [Table] = &[ $( Table::$variant ),* ];

            pub fn name(self) -> &'static str {
                match self { $( Table::$variant => $name ),* }
            }

            /// `(column, SQLite type)`.
            pub fn columns(self) -> &'static [(&'static str, &'static str)] {
                match self { $( Table::$variant => &[ $( ($col, $ty) ),* ] ),* }
            }

            /// Columns that get an index.
            pub fn indices(self) -> &'static [&'static str] {
                match self { $( Table::$variant => &[ $( $idx ),* ] ),* }
            }
        }
    };
}

tables! {
    Meta "meta" ["key" "TEXT", "value" "TEXT"] indices [];
    Kinds "kinds" ["kind" "INTEGER", "name" "TEXT"] indices ["kind"];
    Operations "operations" ["kind" "INTEGER", "operation" "INTEGER", "name" "TEXT", "args" "TEXT"] indices ["kind"];
    Threads "threads" ["tid" "INTEGER", "name" "TEXT"] indices ["tid"];
    Devices "devices" [
        "device" "INTEGER", "parent" "INTEGER", "name" "TEXT", "device_type" "INTEGER", "is_context" "INTEGER"
    ] indices ["device"];
    Queues "queues" [
        "id" "INTEGER PRIMARY KEY", "queue" "INTEGER", "device" "INTEGER", "context" "INTEGER", "flags" "INTEGER", "in_order" "INTEGER",
        "profiling" "INTEGER", "properties" "TEXT",
        "created_ns" "INTEGER", "destroyed_ns" "INTEGER", "tid" "INTEGER"
    ] indices ["queue"];
    ApiCalls "api_calls" [
        "id" "INTEGER PRIMARY KEY", "kind" "INTEGER", "operation" "INTEGER", "tid" "INTEGER", "start_ns" "INTEGER",
        "end_ns" "INTEGER", "duration_ns" "INTEGER", "correlation" "INTEGER", "external" "INTEGER",
        "result" "INTEGER", "args" "TEXT"
    ] indices ["correlation", "tid", "kind, operation"];
    DeviceActivity "device_activity" [
        "id" "INTEGER PRIMARY KEY", "kind" "INTEGER", "operation" "INTEGER", "name" "TEXT", "tid" "INTEGER",
        "enqueue_ns" "INTEGER", "correlation" "INTEGER", "queue" "INTEGER", "queue_id" "INTEGER", "device" "INTEGER",
        "kernel" "INTEGER", "work_dim" "INTEGER", "global_x" "INTEGER", "global_y" "INTEGER",
        "global_z" "INTEGER", "local_x" "INTEGER", "local_y" "INTEGER", "local_z" "INTEGER", "bytes" "INTEGER",
        "direction" "TEXT", "src_type" "TEXT", "dst_type" "TEXT", "device_start_ns" "INTEGER",
        "device_end_ns" "INTEGER", "device_ns" "INTEGER", "allocations" "TEXT"
    ] indices ["correlation", "name", "queue", "queue_id"];
    Memory "memory" [
        "id" "INTEGER PRIMARY KEY", "op" "TEXT", "tid" "INTEGER", "ts_ns" "INTEGER", "correlation" "INTEGER",
        "address" "INTEGER", "bytes" "INTEGER", "memory_type" "TEXT", "device" "INTEGER"
    ] indices ["address", "correlation"];
    TaskGraph "task_graph" [
        "id" "INTEGER PRIMARY KEY", "op" "TEXT", "phase" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER",
        "correlation" "INTEGER", "node" "INTEGER", "source" "INTEGER", "target" "INTEGER", "name" "TEXT",
        "event" "INTEGER", "queue" "INTEGER", "queue_id" "INTEGER"
    ] indices ["node", "correlation"];
    Sync "sync" [
        "id" "INTEGER PRIMARY KEY", "op" "TEXT", "phase" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER",
        "correlation" "INTEGER", "object" "INTEGER", "event_count" "INTEGER"
    ] indices [];
    CodeObjects "code_objects" [
        "id" "INTEGER PRIMARY KEY", "op" "TEXT", "phase" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER",
        "correlation" "INTEGER", "handle" "INTEGER", "program" "INTEGER", "name" "TEXT", "size" "INTEGER"
    ] indices [];
    Markers "markers" [
        "id" "INTEGER PRIMARY KEY", "op" "TEXT", "phase" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER",
        "correlation" "INTEGER", "message" "TEXT", "range_id" "INTEGER"
    ] indices [];
    Counters "counters" [
        "counter" "INTEGER", "device" "INTEGER", "name" "TEXT", "unit" "TEXT", "value_type" "INTEGER"
    ] indices ["counter"];
    CounterSamples "counter_samples" [
        "counter" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER", "value" "REAL", "correlation" "INTEGER"
    ] indices ["counter", "correlation"];
    OtherRecords "other_records" [
        "id" "INTEGER PRIMARY KEY", "kind" "INTEGER", "operation" "INTEGER", "phase" "INTEGER", "tid" "INTEGER",
        "ts_ns" "INTEGER", "correlation" "INTEGER", "args" "TEXT"
    ] indices [];
    Drops "drops" ["tid" "INTEGER", "count" "INTEGER"] indices [];
    Notifications "notifications" ["stream" "TEXT", "type" "TEXT", "count" "INTEGER"] indices [];
}

/// Views for the usual questions (SQLite only; `docs/sqlite-schema.md`).
pub const VIEWS: &[(&str, &str)] = &[
    (
        "api_calls_named",
        "SELECT c.*, k.name AS kind_name, o.name AS operation_name, t.name AS thread_name \
         FROM api_calls c LEFT JOIN kinds k ON k.kind = c.kind \
         LEFT JOIN operations o ON o.kind = c.kind AND o.operation = c.operation \
         LEFT JOIN threads t ON t.tid = c.tid",
    ),
    (
        "device_activity_named",
        "SELECT a.*, k.name AS kind_name, d.name AS device_name \
         FROM device_activity a LEFT JOIN kinds k ON k.kind = a.kind LEFT JOIN devices d ON d.device = a.device \
         AND d.is_context = 0",
    ),
    (
        "top_kernels",
        "SELECT a.name, COUNT(*) AS dispatches, COUNT(a.device_ns) AS timed, SUM(a.device_ns) AS device_total_ns, \
         CAST(AVG(a.device_ns) AS INTEGER) AS device_mean_ns, MIN(a.device_ns) AS device_min_ns, \
         MAX(a.device_ns) AS device_max_ns FROM device_activity a JOIN kinds k ON k.kind = a.kind \
         WHERE k.name = 'KERNEL_DISPATCH' GROUP BY a.name ORDER BY device_total_ns DESC, dispatches DESC",
    ),
    (
        "command_metrics",
        "SELECT s.correlation, s.counter, c.name AS metric, c.unit, s.value, s.ts_ns, a.id AS activity, \
         k.name AS kind_name, a.name, a.device_ns FROM counter_samples s JOIN counters c ON c.counter = s.counter \
         LEFT JOIN device_activity a ON a.correlation = s.correlation LEFT JOIN kinds k ON k.kind = a.kind \
         WHERE s.correlation IS NOT NULL",
    ),
    (
        "kernel_metrics",
        "SELECT kind_name, name, metric, unit, COUNT(*) AS commands, SUM(value) AS total, AVG(value) AS mean, \
         MIN(value) AS min, MAX(value) AS max FROM command_metrics GROUP BY kind_name, name, metric, unit \
         ORDER BY kind_name IS NULL, SUM(device_ns) DESC, name, metric",
    ),
    (
        "api_calls_by_thread",
        "SELECT c.tid, t.name AS thread_name, k.name AS kind_name, o.name AS operation_name, COUNT(*) AS calls, \
         SUM(c.duration_ns) AS total_ns, CAST(AVG(c.duration_ns) AS INTEGER) AS mean_ns FROM api_calls c \
         LEFT JOIN threads t ON t.tid = c.tid LEFT JOIN kinds k ON k.kind = c.kind \
         LEFT JOIN operations o ON o.kind = c.kind AND o.operation = c.operation \
         GROUP BY c.tid, c.kind, c.operation ORDER BY c.tid, total_ns DESC",
    ),
    (
        "copy_bandwidth",
        "SELECT a.direction, COUNT(*) AS copies, SUM(a.bytes) AS bytes, COUNT(a.device_ns) AS timed, \
         SUM(CASE WHEN a.device_ns > 0 THEN a.bytes END) AS timed_bytes, SUM(a.device_ns) AS device_ns, \
         SUM(CASE WHEN a.device_ns > 0 THEN a.bytes END) * 1.0 / SUM(a.device_ns) AS gb_per_s \
         FROM device_activity a JOIN kinds k ON k.kind = a.kind \
         LEFT JOIN operations o ON o.kind = a.kind AND o.operation = a.operation \
         WHERE k.name = 'MEMORY_COPY' AND COALESCE(o.name, '') NOT IN ('map', 'image_map', 'unmap') \
         GROUP BY a.direction ORDER BY bytes DESC",
    ),
    (
        "queue_wait",
        "SELECT a.id AS activity, a.queue, a.queue_id, a.name, c.id AS api_call, c.start_ns AS call_start_ns, \
         a.device_start_ns, a.device_start_ns - c.start_ns AS wait_ns FROM device_activity a \
         JOIN api_calls c ON c.correlation = a.correlation \
         WHERE a.correlation != 0 AND a.device_start_ns IS NOT NULL",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn every_table_has_columns_and_unique_name() {
        let mut names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Table::ALL.len());
        for t in Table::ALL {
            assert!(!t.columns().is_empty());
            for i in t.indices() {
                for col in i.split(", ") {
                    assert!(t.columns().iter().any(|(c, _)| *c == col), "{}: index on unknown column {col}", t.name());
                }
            }
        }
    }
}
