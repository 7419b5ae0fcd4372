//! Typed records → table rows (shared by the SQLite and CSV exports), in one pass.
//!
//! One row per record, joined by ids: kinds and operations by their numbers, API calls and the
//! device work they caused by `correlation`, threads by `tid`, queues and devices by handle.
//! A device activity's completion (phase COMPLETE) is merged into the row of the work it
//! completes, so each piece of device work is one row; work waits for its completion at most
//! [`crate::timeline::PENDING_MAX`] activities long (then it is written without device times).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use offtrace_analysis::early::{Completion, EarlyCompletions, RecentKeys};
use offtrace_format::{
    Activity, CodeObjectRecord, CopyDirection, MemoryType, Record, StrId, TaskGraphRecord, phase, queue_flags,
};
use rustc_hash::FxHashMap;

use crate::defs::{Defs, json_string};
use crate::source::{RecordSource, read_records};
use crate::tables::{Cell, Table};
use crate::timeline::{Bounded, PENDING_MAX};
use crate::{ExportError, ExportStats};

/// `TASK_GRAPH` operations (`offtrace_core::task_graph`: a dependency of the writers only).
mod task_graph {
    pub const NODE_CREATE: u32 = 0;
    pub const TASK: u32 = 2;
    pub const SIGNAL: u32 = 3;
}

/// Receives rows.
pub(crate) trait TableWriter {
    fn row(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError>;
}

fn t(s: &str) -> Cell<'_> {
    Cell::from(s)
}

fn memory_type(m: MemoryType) -> &'static str {
    m.name()
}

fn op_name(defs: &Defs, kind: u32, op: u32) -> String {
    defs.op(kind, op).into_owned()
}

/// What the queue records said of a queue (its device, context and flags are in `Defs`).
#[derive(Debug, Default)]
struct QueueRow {
    created: Option<u64>,
    destroyed: Option<u64>,
    tid: Option<u32>,
}

struct Rows<'w> {
    out: &'w mut dyn TableWriter,
    defs: Defs,
    rows: u64,
    /// Work waiting for its completion, with the definition id of its queue at enqueue.
    pending: FxHashMap<(u32, u64), (Activity, u64)>,
    pending_order: VecDeque<(u32, u64)>,
    /// Completions whose enqueue record has not come yet (written at the end, or when forgotten;
    /// several of one CUDA graph launch: `offtrace_analysis::early`).
    early: EarlyCompletions<Activity>,
    /// Commands completed already: a later completion of one is not written again.
    completed: RecentKeys,
    /// Task-graph rows of nodes recorded before their command's queue was known, by node,
    /// waiting for their task's exit record, which carries it (`docs/record-model.md`, its
    /// task-graph row); a node waits while fewer than [`PENDING_MAX`] later ones are held
    /// (then it is written without it).
    unqueued: Bounded<u64, Vec<TaskGraphRecord>>,
    /// Loaded code objects by (operation, handle): their name and program, which their unload
    /// record leaves out, with their place in `loaded_order`; a load is kept until its unload,
    /// or until [`PENDING_MAX`] later loads came.
    loaded: FxHashMap<(u32, u64), (StrId, u64, u64)>,
    loaded_order: VecDeque<((u32, u64), u64)>,
    loads: u64,
    /// By the queue's definition id.
    queues: BTreeMap<u64, QueueRow>,
    /// One row per tid, written at the end: a thread can be defined more than once (by each
    /// backend's layer that saw it); the first non-empty name wins.
    threads: BTreeMap<u32, String>,
    drops: BTreeMap<u32, u64>,
    notifications: BTreeMap<(u8, u16), u64>,
    streams: FxHashMap<u8, offtrace_format::StrId>,
    counter_types: FxHashMap<u64, u8>,
    json: String,
}

impl Rows<'_> {
    fn put(&mut self, table: Table, cells: &[Cell<'_>]) -> Result<(), ExportError> {
        self.rows += 1;
        self.out.row(table, cells)
    }

    fn record(&mut self, r: &Record) -> Result<(), ExportError> {
        match r {
            Record::Info { key, value } => self.put(Table::Meta, &[t(key), t(value)])?,
            Record::String { .. } | Record::Payload { .. } | Record::Object { .. } | Record::MetadataSet { .. } => {}
            Record::KindDef { kind, name } => {
                let name = self.defs.str(*name).to_owned();
                self.put(Table::Kinds, &[Cell::Int((*kind).into()), t(&name)])?;
            }
            Record::OperationDef(d) => {
                let mut args = String::from("[");
                for (i, a) in d.args.iter().enumerate() {
                    if i > 0 {
                        args.push(',');
                    }
                    args.push_str("{\"name\":");
                    json_string(self.defs.str(a.name), &mut args);
                    args.push_str(",\"type\":");
                    json_string(self.defs.str(a.type_name), &mut args);
                    let _ = write!(args, ",\"size\":{},\"format\":{}}}", a.size, a.format);
                }
                args.push(']');
                let name = self.defs.str(d.name).to_owned();
                self.put(Table::Operations, &[Cell::Int(d.kind.into()), Cell::Int(d.op.into()), t(&name), t(&args)])?;
            }
            Record::Thread { tid, name } => {
                let row = self.threads.entry(*tid).or_default();
                if row.is_empty() {
                    self.defs.str(*name).clone_into(row);
                }
            }
            Record::Device(d) => {
                let name = self.defs.str(d.name).to_owned();
                self.put(
                    Table::Devices,
                    &[
                        Cell::u(d.handle),
                        Cell::u(d.parent),
                        t(&name),
                        Cell::Int(d.device_type.into()),
                        Cell::Int(d.op.into()),
                    ],
                )?;
            }
            Record::Stream { id, name, .. } => {
                self.streams.insert(*id, *name);
            }
            Record::ApiCall(a) => {
                self.defs.args_json(a.kind, a.op, a.args.as_slice(), &mut self.json);
                let args = std::mem::take(&mut self.json);
                let r = self.put(
                    Table::ApiCalls,
                    &[
                        Cell::Null,
                        Cell::Int(a.kind.into()),
                        Cell::Int(a.op.into()),
                        Cell::Int(a.tid.into()),
                        Cell::u(a.start),
                        Cell::u(a.end),
                        Cell::u(a.end.saturating_sub(a.start)),
                        Cell::u(a.correlation),
                        if a.external != 0 { Cell::u(a.external) } else { Cell::Null },
                        a.result.map_or(Cell::Null, Cell::Int),
                        t(&args),
                    ],
                );
                self.json = args;
                r?;
            }
            Record::Activity(a) => self.activity(a)?,
            Record::Queue(q) => {
                let id = self.defs.queue_record(q);
                let row = self.queues.entry(id).or_default();
                match q.op {
                    0 => {
                        row.created = Some(q.ts);
                        row.tid = Some(q.tid);
                    }
                    1 => row.destroyed = Some(q.ts),
                    _ => {}
                }
            }
            Record::Memory(m) => {
                let op = op_name(&self.defs, 6, m.op);
                self.put(
                    Table::Memory,
                    &[
                        Cell::Null,
                        t(&op),
                        Cell::Int(m.tid.into()),
                        Cell::u(m.ts),
                        Cell::u(m.correlation),
                        Cell::u(m.ptr),
                        Cell::u(m.size),
                        t(memory_type(m.memory_type)),
                        Cell::u(m.device),
                    ],
                )?;
            }
            Record::TaskGraph(g) => self.task_graph(g)?,
            Record::Sync(s) => {
                let op = op_name(&self.defs, 8, s.op);
                self.put(
                    Table::Sync,
                    &[
                        Cell::Null,
                        t(&op),
                        Cell::Int(s.phase.into()),
                        Cell::Int(s.tid.into()),
                        Cell::u(s.ts),
                        Cell::u(s.correlation),
                        Cell::u(s.object),
                        Cell::Int(s.event_count.into()),
                    ],
                )?;
            }
            Record::CodeObject(c) => {
                let c = &self.code_object(c);
                let op = op_name(&self.defs, 9, c.op);
                let name = self.defs.str(c.name).to_owned();
                self.put(
                    Table::CodeObjects,
                    &[
                        Cell::Null,
                        t(&op),
                        Cell::Int(c.phase.into()),
                        Cell::Int(c.tid.into()),
                        Cell::u(c.ts),
                        Cell::u(c.correlation),
                        Cell::u(c.handle),
                        Cell::u(c.program),
                        t(&name),
                        Cell::u(c.size),
                    ],
                )?;
            }
            Record::Marker(m) => {
                let op = op_name(&self.defs, 10, m.op);
                let msg = self.defs.str(m.message).to_owned();
                self.put(
                    Table::Markers,
                    &[
                        Cell::Null,
                        t(&op),
                        Cell::Int(m.phase.into()),
                        Cell::Int(m.tid.into()),
                        Cell::u(m.ts),
                        Cell::u(m.correlation),
                        t(&msg),
                        Cell::u(m.range_id),
                    ],
                )?;
            }
            Record::CounterDef(c) => {
                self.counter_types.insert(c.counter, c.value_type);
                let (name, unit) = (self.defs.str(c.name).to_owned(), self.defs.str(c.unit).to_owned());
                self.put(
                    Table::Counters,
                    &[Cell::u(c.counter), Cell::u(c.device), t(&name), t(&unit), Cell::Int(c.value_type.into())],
                )?;
            }
            Record::CounterSample(s) => {
                // The value's bits are read as the definition's type says.
                let v = match self.counter_types.get(&s.counter) {
                    Some(1) => s.value as i64 as f64,
                    Some(2) => f64::from_bits(s.value),
                    _ => s.value as f64,
                };
                self.put(
                    Table::CounterSamples,
                    &[
                        Cell::u(s.counter),
                        Cell::Int(s.tid.into()),
                        Cell::u(s.ts),
                        Cell::Real(v),
                        // NULL for a time series' sample: no command to join.
                        if s.correlation == 0 { Cell::Null } else { Cell::u(s.correlation) },
                    ],
                )?;
            }
            Record::Generic(g) => {
                self.defs.args_json(g.kind, g.op, g.values.as_slice(), &mut self.json);
                let args = std::mem::take(&mut self.json);
                let r = self.put(
                    Table::OtherRecords,
                    &[
                        Cell::Null,
                        Cell::Int(g.kind.into()),
                        Cell::Int(g.op.into()),
                        Cell::Int(g.phase.into()),
                        Cell::Int(g.tid.into()),
                        Cell::u(g.ts),
                        Cell::u(g.correlation),
                        t(&args),
                    ],
                );
                self.json = args;
                r?;
            }
            Record::Drops { tid, count } => *self.drops.entry(*tid).or_default() += count,
            Record::Notification(n) => *self.notifications.entry((n.stream, n.trace_type)).or_default() += 1,
            _ => {}
        }
        Ok(())
    }

    /// A node recorded without a queue (nor an event: a virtual node never gets one) is held,
    /// with its task's enter and signals that lack it too, until its task's exit: a late node's
    /// exit carries its command's queue and name (`docs/sqlite-schema.md`, `task_graph`), which
    /// its rows then take, so a node's row alone says its queue. Held rows are written after the
    /// records that came meanwhile (their ids are later than their edges').
    fn task_graph(&mut self, g: &TaskGraphRecord) -> Result<(), ExportError> {
        if g.queue == 0 {
            let held = match g.op {
                task_graph::NODE_CREATE => g.event == 0,
                task_graph::TASK => g.phase != phase::EXIT,
                task_graph::SIGNAL => true,
                _ => false,
            };
            if held && (g.op == task_graph::NODE_CREATE || self.unqueued.contains_key(&g.node)) {
                if let Some(rows) = self.unqueued.get_mut(&g.node) {
                    rows.push(*g);
                } else if let Some((_, rows)) = self.unqueued.insert(g.node, vec![*g]) {
                    for r in rows {
                        self.task_graph_row(&r)?;
                    }
                }
                return Ok(());
            }
        }
        if g.op == task_graph::TASK
            && g.phase == phase::EXIT
            && let Some(rows) = self.unqueued.remove(&g.node)
        {
            for mut r in rows {
                r.queue = g.queue;
                if r.op == task_graph::NODE_CREATE && g.queue != 0 && g.name.0 != 0 {
                    r.name = g.name;
                }
                self.task_graph_row(&r)?;
            }
        }
        self.task_graph_row(g)
    }

    fn task_graph_row(&mut self, g: &TaskGraphRecord) -> Result<(), ExportError> {
        let op = op_name(&self.defs, 7, g.op);
        let name = self.defs.str(g.name).to_owned();
        self.put(
            Table::TaskGraph,
            &[
                Cell::Null,
                t(&op),
                Cell::Int(g.phase.into()),
                Cell::Int(g.tid.into()),
                Cell::u(g.ts),
                Cell::u(g.correlation),
                Cell::u(g.node),
                Cell::u(g.source),
                Cell::u(g.target),
                t(&name),
                Cell::u(g.event),
                Cell::u(g.queue),
                if g.queue != 0 { Cell::opt(self.defs.known_queue_id(g.queue)) } else { Cell::Null },
            ],
        )
    }

    /// `c`, an unload given the name and program of its load (kept until then, bounded).
    fn code_object(&mut self, c: &CodeObjectRecord) -> CodeObjectRecord {
        let key = (c.op, c.handle);
        match c.phase {
            phase::LOAD => {
                self.loads += 1;
                self.loaded.insert(key, (c.name, c.program, self.loads));
                self.loaded_order.push_back((key, self.loads));
                while self.loaded_order.len() > PENDING_MAX {
                    let Some((old, at)) = self.loaded_order.pop_front() else { break };
                    // Only the load it was: a handle loaded again since has a later place.
                    if self.loaded.get(&old).is_some_and(|l| l.2 == at) {
                        self.loaded.remove(&old);
                    }
                }
                *c
            }
            phase::UNLOAD => {
                let mut c = *c;
                if let Some((name, program, _)) = self.loaded.remove(&key) {
                    if c.name.0 == 0 {
                        c.name = name;
                    }
                    if c.program == 0 {
                        c.program = program;
                    }
                }
                c
            }
            _ => *c,
        }
    }

    fn activity(&mut self, a: &Activity) -> Result<(), ExportError> {
        let known = a.device_start != 0 && a.device_end >= a.device_start;
        let key = (a.kind, a.correlation);
        if a.correlation == 0 {
            return self.activity_row(a, None);
        }
        // One row per command and runtime level (`docs/record-model.md`).
        if a.phase == phase::COMPLETE {
            if self.completed.contains(key) {
                return Ok(());
            }
            if let Some((mut work, queue_id)) = self.pending.remove(&key) {
                self.completed.insert(key);
                work.device_start = a.device_start;
                work.device_end = a.device_end;
                return self.activity_row(&work, Some(queue_id));
            }
            if let Completion::Commands(own) = self.early.complete(key, a.clone(), (a.device_start, a.device_end)) {
                for (_, c) in &own {
                    self.activity_row(c, None)?;
                }
            }
            return Ok(());
        }
        if let Some(c) = self.early.take(key) {
            self.completed.insert(key);
            let mut work = a.clone();
            if !known {
                work.device_start = c.device_start;
                work.device_end = c.device_end;
            }
            return self.activity_row(&work, None);
        }
        if known {
            self.completed.insert(key);
            return self.activity_row(a, None);
        }
        // The queue that has the handle now, when the work is enqueued: by the time its
        // completion comes, a later queue may have the handle.
        let queue_id = self.defs.queue_id(a.queue, a.device);
        if self.pending.insert(key, (a.clone(), queue_id)).is_none() {
            self.pending_order.push_back(key);
        }
        while self.pending_order.len() > PENDING_MAX {
            let Some(old) = self.pending_order.pop_front() else { break };
            if let Some((w, queue_id)) = self.pending.remove(&old) {
                self.activity_row(&w, Some(queue_id))?;
            }
        }
        Ok(())
    }

    /// Writes `a`'s row; `queue_id`: its queue's definition id when it was enqueued, `None` for
    /// the queue that has its handle now.
    fn activity_row(&mut self, a: &Activity, queue_id: Option<u64>) -> Result<(), ExportError> {
        let queue_id = queue_id.unwrap_or_else(|| self.defs.queue_id(a.queue, a.device));
        let name = if a.name.0 != 0 { self.defs.str(a.name).to_owned() } else { op_name(&self.defs, a.kind, a.op) };
        let known = a.device_start != 0 && a.device_end >= a.device_start;
        let allocations = if a.allocations.is_empty() {
            Cell::Null
        } else {
            let mut s = String::from("[");
            for (i, al) in a.allocations.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let _ = write!(
                    s,
                    "{{\"base\":\"{:#x}\",\"size\":{},\"arg_index\":{},\"memory_type\":\"{}\"}}",
                    al.base,
                    al.size,
                    al.arg_index,
                    al.memory_type.name()
                );
            }
            s.push(']');
            Cell::from(s)
        };
        let copy = a.bytes != 0 || a.direction != CopyDirection::Unknown;
        let kernel = a.work_dim != 0;
        let g = |v: u64| if kernel { Cell::u(v) } else { Cell::Null };
        self.put(
            Table::DeviceActivity,
            &[
                Cell::Null,
                Cell::Int(a.kind.into()),
                Cell::Int(a.op.into()),
                t(&name),
                Cell::Int(a.tid.into()),
                Cell::u(a.ts),
                Cell::u(a.correlation),
                Cell::u(a.queue),
                Cell::u(queue_id),
                Cell::u(a.device),
                if a.kernel != 0 { Cell::u(a.kernel) } else { Cell::Null },
                if kernel { Cell::Int(a.work_dim.into()) } else { Cell::Null },
                g(a.global_size[0]),
                g(a.global_size[1]),
                g(a.global_size[2]),
                g(a.local_size[0]),
                g(a.local_size[1]),
                g(a.local_size[2]),
                if copy { Cell::u(a.bytes) } else { Cell::Null },
                if copy { t(a.direction.name()) } else { Cell::Null },
                if copy { t(a.src_type.name()) } else { Cell::Null },
                if copy { t(a.dst_type.name()) } else { Cell::Null },
                if known { Cell::u(a.device_start) } else { Cell::Null },
                if known { Cell::u(a.device_end) } else { Cell::Null },
                if known { Cell::u(a.device_end - a.device_start) } else { Cell::Null },
                allocations,
            ],
        )
    }

    fn finish(&mut self) -> Result<(), ExportError> {
        for (_, c) in self.early.drain() {
            self.activity_row(&c, None)?;
        }
        while let Some(k) = self.pending_order.pop_front() {
            if let Some((w, queue_id)) = self.pending.remove(&k) {
                self.activity_row(&w, Some(queue_id))?;
            }
        }
        for (_, rows) in self.unqueued.drain() {
            for r in rows {
                self.task_graph_row(&r)?;
            }
        }
        for (tid, name) in std::mem::take(&mut self.threads) {
            self.put(Table::Threads, &[Cell::Int(tid.into()), t(&name)])?;
        }
        // One row per queue the program created (a handle reused by a later queue is two rows),
        // and per handle that device work named without a queue record.
        let mut ids: Vec<u64> = self.defs.queues.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let def = self.defs.queues.get(&id).copied().unwrap_or_default();
            let row = self.queues.remove(&id).unwrap_or_default();
            self.put(
                Table::Queues,
                &[
                    Cell::u(id),
                    Cell::u(def.handle),
                    Cell::u(def.device),
                    Cell::u(def.context),
                    Cell::opt(def.flags),
                    def.flags.map_or(Cell::Null, |f| Cell::Int((f & queue_flags::IN_ORDER) as i64)),
                    def.flags.map_or(Cell::Null, |f| Cell::Int(i64::from(f & queue_flags::PROFILING != 0))),
                    def.flags.map_or(Cell::Null, |f| {
                        let names: Vec<String> = queue_flags::names(f).iter().map(|n| format!("\"{n}\"")).collect();
                        Cell::Text(format!("[{}]", names.join(",")).into())
                    }),
                    Cell::opt(row.created),
                    Cell::opt(row.destroyed),
                    row.tid.map_or(Cell::Null, |t| Cell::Int(t.into())),
                ],
            )?;
        }
        for (tid, n) in std::mem::take(&mut self.drops) {
            self.put(Table::Drops, &[Cell::Int(tid.into()), Cell::u(n)])?;
        }
        for ((stream, tt), n) in std::mem::take(&mut self.notifications) {
            let s = match self.streams.get(&stream) {
                Some(&id) => self.defs.str(id).to_owned(),
                None => format!("stream_{stream}"),
            };
            let tt = offtrace_analysis::names::trace_type_name(tt).into_owned();
            self.put(Table::Notifications, &[t(&s), t(&tt), Cell::u(n)])?;
        }
        Ok(())
    }
}

/// Reads `source` once, writing every table's rows into `out`.
pub(crate) fn write_tables(
    source: &mut dyn RecordSource,
    out: &mut dyn TableWriter,
) -> Result<ExportStats, ExportError> {
    let header = source.header();
    let mut rows = Rows {
        out,
        defs: Defs::default(),
        rows: 0,
        pending: FxHashMap::default(),
        pending_order: VecDeque::new(),
        early: EarlyCompletions::default(),
        completed: RecentKeys::default(),
        loaded: FxHashMap::default(),
        loaded_order: VecDeque::new(),
        loads: 0,
        unqueued: Bounded::default(),
        queues: BTreeMap::new(),
        threads: BTreeMap::new(),
        drops: BTreeMap::new(),
        notifications: BTreeMap::new(),
        streams: FxHashMap::default(),
        counter_types: FxHashMap::default(),
        json: String::new(),
    };
    rows.put(Table::Meta, &[t("format_version"), Cell::from(header.version.to_string())])?;
    rows.put(Table::Meta, &[t("clock"), t("CLOCK_MONOTONIC ns")])?;
    let mut stats = read_records(source, |r| {
        rows.defs.observe(r);
        rows.record(r)
    })?;
    rows.finish()?;
    stats.items = rows.rows;
    Ok(stats)
}
