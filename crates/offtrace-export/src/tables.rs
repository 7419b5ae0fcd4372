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
    Strings "strings" ["id" "INTEGER", "text" "TEXT"] indices ["id"];
    Metadata "metadata" ["set_id" "INTEGER", "key" "TEXT", "value" "TEXT"] indices ["set_id"];
    Threads "threads" ["tid" "INTEGER", "name" "TEXT", "notifications" "INTEGER", "drops" "INTEGER"] indices [];
    Notifications "notifications" [
        "seq" "INTEGER", "ts_ns" "INTEGER", "tid" "INTEGER", "stream" "TEXT", "trace_type" "INTEGER",
        "trace_type_name" "TEXT", "instance" "INTEGER", "event_uid" "INTEGER", "event_name" "TEXT",
        "parent_uid" "INTEGER", "metadata_set" "INTEGER", "user_data_kind" "TEXT", "user_data" "TEXT",
        "stash_key" "TEXT", "stash_value" "INTEGER", "universal_id" "INTEGER"
    ] indices ["ts_ns", "instance", "tid"];
    UrCalls "ur_calls" [
        "tid" "INTEGER", "instance" "INTEGER", "function_id" "INTEGER", "name" "TEXT", "begin_ns" "INTEGER",
        "end_ns" "INTEGER", "dur_ns" "INTEGER", "result" "INTEGER", "command_instance" "INTEGER",
        "args" "TEXT", "outs" "TEXT"
    ] indices ["name", "begin_ns", "command_instance"];
    SyclCommands "sycl_commands" [
        "instance" "INTEGER", "tid" "INTEGER", "name" "TEXT", "kind" "TEXT", "queue_id" "INTEGER",
        "node_id" "INTEGER", "begin_ns" "INTEGER", "end_ns" "INTEGER", "dur_ns" "INTEGER",
        "ur_event" "INTEGER", "memory_size" "INTEGER"
    ] indices ["instance", "name", "queue_id"];
    DeviceExecutions "device_executions" [
        "instance" "INTEGER", "ur_event" "INTEGER", "name" "TEXT", "queue_id" "INTEGER",
        "start_ns" "INTEGER", "end_ns" "INTEGER", "dur_ns" "INTEGER"
    ] indices ["instance"];
    Nodes "nodes" [
        "node_id" "INTEGER", "instance" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER", "name" "TEXT",
        "kind" "TEXT", "queue_id" "INTEGER"
    ] indices ["node_id", "instance"];
    Edges "edges" [
        "edge_id" "INTEGER", "source_node" "INTEGER", "target_node" "INTEGER", "ts_ns" "INTEGER",
        "name" "TEXT", "access_mode" "INTEGER"
    ] indices ["source_node", "target_node"];
    MemoryAllocations "memory_allocations" [
        "event" "TEXT", "tid" "INTEGER", "begin_ns" "INTEGER", "end_ns" "INTEGER", "pointer" "INTEGER",
        "bytes" "INTEGER", "kind" "TEXT", "device" "TEXT", "live_bytes" "INTEGER"
    ] indices ["pointer", "end_ns"];
    MemoryOps "memory_ops" [
        "op" "TEXT", "source" "TEXT", "tid" "INTEGER", "instance" "INTEGER", "begin_ns" "INTEGER",
        "end_ns" "INTEGER", "dur_ns" "INTEGER", "bytes" "INTEGER"
    ] indices ["op"];
    Queues "queues" [
        "queue_id" "INTEGER", "event" "TEXT", "ts_ns" "INTEGER", "tid" "INTEGER", "is_inorder" "INTEGER",
        "device" "TEXT"
    ] indices ["queue_id"];
    Drops "drops" ["tid" "INTEGER", "count" "INTEGER"] indices [];
    KernelDispatches "kernel_dispatches" [
        "dispatch_id" "INTEGER", "tid" "INTEGER", "ts_ns" "INTEGER", "correlation" "INTEGER",
        "ur_instance" "INTEGER", "kernel" "TEXT", "queue" "INTEGER", "kernel_handle" "INTEGER",
        "work_dim" "INTEGER", "global_x" "INTEGER", "global_y" "INTEGER", "global_z" "INTEGER",
        "local_x" "INTEGER", "local_y" "INTEGER", "local_z" "INTEGER", "command_instance" "INTEGER",
        "command_name" "TEXT", "link" "TEXT", "allocations" "INTEGER", "allocation_bytes" "INTEGER"
    ] indices ["dispatch_id", "kernel", "command_instance"];
    KernelAllocations "kernel_allocations" [
        "dispatch_id" "INTEGER", "arg_index" "INTEGER", "base" "INTEGER", "size" "INTEGER",
        "memory_type" "TEXT"
    ] indices ["dispatch_id", "base"];
}

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
                assert!(t.columns().iter().any(|(c, _)| c == i), "{}: index on unknown column {i}", t.name());
            }
        }
    }
}
