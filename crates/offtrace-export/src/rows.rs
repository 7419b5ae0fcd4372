//! Turns records into table rows (shared by the SQLite and CSV exports), in one pass.

use offtrace_analysis::{
    CommandEvent, DeviceEvent, EdgeEvent, MemOpEvent, MemoryEvent, NodeEvent, QueueEvent, UrCallEvent,
};
use offtrace_analysis::{Definitions, ModelSink, Summary, SummaryBuilder, names};
use offtrace_format::{Record, UserData};

use crate::source::{ProgressFn, RecordSource, for_each_record};
use crate::tables::{Cell, Table};
use crate::{ExportError, ExportStats};

/// Receives rows.
pub(crate) trait TableWriter {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError>;
}

/// The model sink that writes rows; the first write error is latched and reported after the
/// record that caused it.
struct RowSink<'w> {
    out: &'w mut dyn TableWriter,
    error: Option<ExportError>,
    rows: u64,
}

impl RowSink<'_> {
    fn put(&mut self, table: Table, cells: &[Cell<'_>]) {
        if self.error.is_some() {
            return;
        }
        match self.out.row(table, cells) {
            Ok(()) => self.rows += 1,
            Err(e) => self.error = Some(e),
        }
    }

    fn check(&mut self) -> Result<(), ExportError> {
        self.error.take().map_or(Ok(()), Err)
    }
}

fn hex_list(values: &[u64]) -> String {
    let v: Vec<String> = values.iter().map(|v| format!("0x{v:x}")).collect();
    format!("[{}]", v.join(","))
}

impl ModelSink for RowSink<'_> {
    fn ur_call(&mut self, c: &UrCallEvent<'_>) {
        let outs: Vec<String> = c.outs.iter().map(|(i, v)| format!("{i}:0x{v:x}")).collect();
        self.put(
            Table::UrCalls,
            &[
                Cell::Int(i64::from(c.tid)),
                Cell::u(c.instance),
                Cell::Int(i64::from(c.function_id)),
                c.name.into(),
                Cell::u(c.begin_ns),
                Cell::u(c.end_ns),
                Cell::u(c.end_ns - c.begin_ns),
                c.result.map_or(Cell::Null, |r| Cell::Int(i64::from(r))),
                Cell::opt(c.command_instance),
                hex_list(c.args).into(),
                format!("[{}]", outs.join(",")).into(),
            ],
        );
    }

    fn command(&mut self, c: &CommandEvent<'_>) {
        self.put(
            Table::SyclCommands,
            &[
                Cell::u(c.instance),
                Cell::Int(i64::from(c.tid)),
                c.name.into(),
                c.kind.into(),
                Cell::opt(c.queue_id),
                Cell::opt(c.node.map(u64::from)),
                Cell::u(c.begin_ns),
                Cell::u(c.end_ns),
                Cell::u(c.end_ns - c.begin_ns),
                Cell::opt(c.ur_event),
                Cell::opt(c.memory_size),
            ],
        );
    }

    fn node(&mut self, n: &NodeEvent<'_>) {
        self.put(
            Table::Nodes,
            &[
                Cell::u(u64::from(n.node)),
                Cell::u(n.instance),
                Cell::Int(i64::from(n.tid)),
                Cell::u(n.ts_ns),
                n.name.into(),
                n.kind.into(),
                Cell::opt(n.queue_id),
            ],
        );
    }

    fn edge(&mut self, e: &EdgeEvent<'_>) {
        self.put(
            Table::Edges,
            &[
                Cell::u(u64::from(e.edge)),
                Cell::opt(e.source.map(u64::from)),
                Cell::opt(e.target.map(u64::from)),
                Cell::u(e.ts_ns),
                e.name.into(),
                Cell::opt(e.access_mode),
            ],
        );
    }

    fn memory(&mut self, m: &MemoryEvent<'_>) {
        self.put(
            Table::MemoryAllocations,
            &[
                if m.release { "release" } else { "alloc" }.into(),
                Cell::Int(i64::from(m.tid)),
                Cell::u(m.begin_ns),
                Cell::u(m.end_ns),
                Cell::opt(m.pointer),
                Cell::u(m.bytes),
                m.kind.into(),
                m.device.into(),
                Cell::u(m.live_bytes),
            ],
        );
    }

    fn mem_op(&mut self, o: &MemOpEvent<'_>) {
        self.put(
            Table::MemoryOps,
            &[
                o.op.into(),
                o.source.into(),
                Cell::Int(i64::from(o.tid)),
                Cell::u(o.instance),
                Cell::u(o.begin_ns),
                Cell::u(o.end_ns),
                Cell::u(o.end_ns.saturating_sub(o.begin_ns)),
                Cell::u(o.bytes),
            ],
        );
    }

    fn queue(&mut self, q: &QueueEvent<'_>) {
        self.put(
            Table::Queues,
            &[
                Cell::u(q.queue_id),
                if q.destroy { "destroy" } else { "create" }.into(),
                Cell::u(q.ts_ns),
                Cell::Int(i64::from(q.tid)),
                q.is_inorder.map_or(Cell::Null, |b| Cell::Int(i64::from(b))),
                q.device.into(),
            ],
        );
    }

    fn device(&mut self, d: &DeviceEvent<'_>) {
        self.put(
            Table::DeviceExecutions,
            &[
                Cell::u(d.instance),
                Cell::u(d.ur_event),
                d.name.into(),
                Cell::opt(d.queue_id),
                Cell::u(d.start_ns),
                Cell::u(d.end_ns),
                Cell::u(d.end_ns - d.start_ns),
            ],
        );
    }
}

/// `(kind, text)` of a notification's user data.
pub(crate) fn user_data_text(defs: &Definitions, ud: &UserData) -> (&'static str, Option<String>) {
    match *ud {
        UserData::None => ("none", None),
        UserData::Str(s) => ("string", Some(defs.str(s).to_owned())),
        UserData::FunctionWithArgs { function_id, name, result, .. } => (
            "function_with_args",
            Some(match result {
                Some(r) => format!("{} (id {function_id}) -> {r}", defs.str(name)),
                None => format!("{} (id {function_id})", defs.str(name)),
            }),
        ),
        UserData::MemAlloc { mem_object, alloc_pointer, alloc_size, guard_zone } => (
            "mem_alloc",
            Some(format!(
                "mem_object=0x{mem_object:x} pointer=0x{alloc_pointer:x} size={alloc_size} guard_zone={guard_zone}"
            )),
        ),
        UserData::OffloadBuffer { user_object, host_object, element_type, element_size, dim, range } => (
            "offload_buffer",
            Some(format!(
                "user_object=0x{user_object:x} host_object=0x{host_object:x} element_type={} element_size={element_size} dim={dim} range={range:?}",
                defs.str(element_type)
            )),
        ),
        UserData::Association { user_object, mem_object } => {
            ("association", Some(format!("user_object=0x{user_object:x} mem_object=0x{mem_object:x}")))
        }
        UserData::Accessor { buffer, accessor, target, mode } => {
            ("accessor", Some(format!("buffer=0x{buffer:x} accessor=0x{accessor:x} target={target} mode={mode}")))
        }
        UserData::Signal { ur_event } => ("signal", Some(format!("ur_event=0x{ur_event:x}"))),
        UserData::Pointer(p) => ("pointer", Some(format!("0x{p:x}"))),
    }
}

/// Writes every table in one pass.
pub(crate) fn write_tables(
    source: &mut dyn RecordSource,
    out: &mut dyn TableWriter,
    mut progress: Option<&mut ProgressFn<'_>>,
) -> Result<(ExportStats, Summary), ExportError> {
    let mut builder = SummaryBuilder::new();
    let mut sink = RowSink { out, error: None, rows: 0 };
    let mut seq: u64 = 0;
    let outcome = for_each_record(source, 1, &mut progress, |record| {
        builder.push_with(record, &mut sink);
        sink.check()?;
        let defs = builder.definitions();
        match record {
            Record::String { id, text } => {
                sink.put(Table::Strings, &[Cell::Int(i64::from(id.0)), text.as_str().into()])
            }
            Record::MetadataSet { id, .. } => {
                for (k, v) in defs.metadata(*id) {
                    sink.put(Table::Metadata, &[Cell::Int(i64::from(id.0)), k.into(), v.to_string().into()]);
                }
            }
            Record::Notification(n) => {
                seq += 1;
                let (kind, text) = user_data_text(defs, &n.user_data);
                let event_name = n.event.map(|e| defs.payload_name(e.payload)).unwrap_or("");
                sink.put(
                    Table::Notifications,
                    &[
                        Cell::u(seq),
                        Cell::u(n.ts),
                        Cell::Int(i64::from(n.tid)),
                        defs.stream_name(n.stream).into_owned().into(),
                        Cell::Int(i64::from(n.trace_type)),
                        names::trace_type_name(n.trace_type).into_owned().into(),
                        Cell::u(n.instance),
                        Cell::opt(n.event.map(|e| e.uid)),
                        event_name.into(),
                        Cell::opt(n.parent.map(|e| e.uid)),
                        Cell::opt(n.event.map(|e| u64::from(e.metadata.0)).filter(|&m| m != 0)),
                        kind.into(),
                        text.map_or(Cell::Null, Cell::from),
                        n.stash.map_or(Cell::Null, |(k, _)| defs.str(k).into()),
                        Cell::opt(n.stash.map(|(_, v)| v)),
                        Cell::opt(Some(n.universal_id).filter(|&u| u != 0)),
                    ],
                );
            }
            _ => {}
        }
        sink.check()
    })?;
    let summary = builder.finish();
    let mut meta: Vec<(String, String)> =
        summary.trace.info.iter().map(|(k, v)| (format!("info.{k}"), v.clone())).collect();
    meta.push(("records".into(), summary.trace.records.to_string()));
    meta.push(("notifications".into(), summary.trace.notifications.to_string()));
    meta.push(("first_ts_ns".into(), summary.trace.first_ts_ns.map(|v| v.to_string()).unwrap_or_default()));
    meta.push(("last_ts_ns".into(), summary.trace.last_ts_ns.map(|v| v.to_string()).unwrap_or_default()));
    meta.push(("wall_ns".into(), summary.trace.wall_ns.to_string()));
    meta.push(("complete".into(), summary.trace.complete.to_string()));
    meta.push(("truncated".into(), outcome.truncated.is_some().to_string()));
    meta.push(("drops".into(), summary.drops.total.to_string()));
    meta.push(("clock".into(), "CLOCK_MONOTONIC ns".into()));
    meta.push(("schema_version".into(), "2".into()));
    for (k, v) in &meta {
        sink.put(Table::Meta, &[k.as_str().into(), v.as_str().into()]);
    }
    for t in &summary.threads {
        sink.put(
            Table::Threads,
            &[Cell::Int(i64::from(t.tid)), t.name.as_str().into(), Cell::u(t.notifications), Cell::u(t.drops)],
        );
    }
    for (tid, count) in &summary.drops.by_thread {
        sink.put(Table::Drops, &[Cell::Int(i64::from(*tid)), Cell::u(*count)]);
    }
    // Written at the end: a dispatch's link to its command may only be known after the records
    // that follow it.
    for (id, d) in summary.kernel_allocations.dispatches.iter().enumerate() {
        let id = id as u64;
        let bytes = d.allocations.iter().map(|a| a.size).fold(0u64, u64::saturating_add);
        let [gx, gy, gz] = d.global_size;
        let [lx, ly, lz] = d.local_size;
        sink.put(
            Table::KernelDispatches,
            &[
                Cell::u(id),
                Cell::Int(i64::from(d.tid)),
                Cell::u(d.ts_ns),
                Cell::u(d.correlation),
                Cell::opt(Some(d.ur_instance).filter(|&i| i != 0)),
                d.kernel.as_str().into(),
                Cell::u(d.queue),
                Cell::u(d.kernel_handle),
                Cell::Int(i64::from(d.work_dim)),
                Cell::u(gx),
                Cell::u(gy),
                Cell::u(gz),
                Cell::u(lx),
                Cell::u(ly),
                Cell::u(lz),
                Cell::opt(d.command_instance),
                d.command_name.as_deref().map_or(Cell::Null, Cell::from),
                d.link.as_str().into(),
                Cell::u(d.allocations.len() as u64),
                Cell::u(bytes),
            ],
        );
        for a in &d.allocations {
            sink.put(
                Table::KernelAllocations,
                &[
                    Cell::u(id),
                    Cell::Int(i64::from(a.arg_index)),
                    Cell::u(a.base),
                    Cell::u(a.size),
                    a.memory_type.as_str().into(),
                ],
            );
        }
    }
    sink.check()?;
    Ok((ExportStats { records: outcome.records, items: sink.rows, truncated: outcome.truncated }, summary))
}
