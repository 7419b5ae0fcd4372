//! [`Analyzer`]: the streaming aggregation behind `offtrace report`, over typed records only.
//!
//! Every section is keyed by what the trace itself defines: kinds by their `KindDef` name,
//! operations by their `OperationDef` name, devices and queues by their definitions. A backend
//! that emits a kind this crate has never heard of is reported like any other (no code for it
//! here). The raw notification layer, when recorded, is only counted (`notifications`).
//!
//! Memory is bounded by what the program had at once, not by the number of records: distinct
//! names, operations, queues, threads, live allocations, code objects loaded and not unloaded (or
//! unloaded before their load reached the file; [`PENDING_MAX`] each), device work whose enqueuing call
//! (per thread, [`AWAITING_CALL_MAX`]) or completion ([`PENDING_MAX`]) has not arrived yet,
//! and the task-graph nodes that may still gain an edge ([`GRAPH_NODES_MAX`]); the capped ones
//! forget their oldest entries first. A completion that arrives after its work was forgotten is
//! counted as work of its own.
//!
//! Cost: a few small-map lookups per record; device work finds its call without hashing (the
//! call's record follows its work's on the same thread: a short per-thread list).

use std::collections::{BTreeMap, VecDeque};

use offtrace_format::{
    Activity, ApiCall, ApiCallBrief, CodeObjectRecord, CopyDirection, MemoryRecord, MemoryType, Record, StrId,
    TaskGraphRecord, phase, queue_flags,
};
use rustc_hash::FxHashMap;

use crate::early::{Completion, EarlyCompletions, RecentKeys};
use crate::live_memory::{Change, LiveMemory};
use crate::names;
use crate::naming::display_name;
use crate::report::*;

/// Device work waiting for its completion, remembered at most.
pub const PENDING_MAX: usize = 1 << 16;
/// Device work waiting for its call's record, per thread, at most (calls nest a few deep).
pub const AWAITING_CALL_MAX: usize = 64;
/// Calls per thread that a later (enclosing) call may still contain, at most: a UR call makes
/// tens of OpenCL calls; one with more than this many counts the oldest of them twice.
const OUTER_CALLS_MAX: usize = 4096;
/// Task-graph nodes remembered for the longest chain, at most.
pub const GRAPH_NODES_MAX: usize = 1 << 16;

/// Signals kept per event address (its reuses by commands on different threads whose blocks
/// interleave in the file).
const SIGNALS_PER_EVENT: usize = 4;

/// `MEMORY_ALLOC` operations (as the services number them).
const MEMORY_FREE: u32 = 1;
const MEMORY_SUB_ALLOC: u32 = 2;
/// The name Intel's SYCL runtime gives every host task's node (`docs/record-model.md`, "SYCL
/// host tasks": nothing in its notifications names the work).
const SYCL_HOST_TASK: &str = "host task";
/// `TASK_GRAPH` operations.
const GRAPH_NODE_CREATE: u32 = 0;
const GRAPH_EDGE_CREATE: u32 = 1;
const GRAPH_TASK: u32 = 2;
const GRAPH_SIGNAL: u32 = 3;
/// The `CODE_OBJECT` kind (as the services number it).
const CODE_OBJECT_KIND: u32 = 9;
/// `MARKER` operations.
const MARKER_RANGE: u32 = 1;

#[derive(Debug, Default)]
struct ApiAcc {
    d: Durations,
    errors: u64,
    device_activities: u64,
}

/// What names a group of device activity: the kernel's name, else the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ActivityName {
    Str(StrId),
    Op(u32),
}

#[derive(Debug)]
struct ActivityAcc {
    kind: u32,
    name: ActivityName,
    count: u64,
    device: Durations,
    host: Durations,
    bytes: u64,
    queues: Vec<u64>,
}

#[derive(Debug, Default)]
struct QueueAcc {
    device: u64,
    context: u64,
    flags: Option<u64>,
    created_ns: Option<u64>,
    destroyed_ns: Option<u64>,
    commands: BTreeMap<u32, u64>,
    busy: crate::busy_time::BusyTime,
}

#[derive(Debug, Default)]
struct ThreadAcc {
    /// Device work enqueued inside a call whose record (written at the call's exit) has not
    /// come yet: (correlation, activity group), oldest first.
    awaiting_call: Vec<(u64, u32)>,
    name: StrId,
    api_calls: u64,
    /// Time inside API calls, a call nested in another (an OpenCL call inside a UR call, a
    /// runtime's own calls) counted once: the per-thread sum used to exceed the wall time.
    api_ns: u64,
    /// The newest calls not known to be nested in another, (start, end). Calls nest on a thread
    /// and reach the file at their exit, inner ones first: a call that contains the newest
    /// entries is their parent, and their time is already inside its own.
    outer_calls: VecDeque<(u64, u64)>,
    device_activities: u64,
    drops: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct AllocAcc {
    count: u64,
    bytes: u64,
    max: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct CopyAcc {
    count: u64,
    bytes: u64,
    device_count: u64,
    device_bytes: u64,
    device_ns: u64,
}

#[derive(Debug, Default)]
struct CounterAcc {
    device: u64,
    name: StrId,
    unit: StrId,
    value_type: u8,
    samples: u64,
    min: f64,
    max: f64,
    sum: f64,
    last: f64,
}

/// The code objects of one operation, or of one (operation, name).
#[derive(Debug, Default, Clone, Copy)]
struct CodeObjectAcc {
    loads: u64,
    unloads: u64,
    unmatched_unloads: u64,
    sized_loads: u64,
    bytes: u64,
    max_bytes: u64,
}

impl CodeObjectAcc {
    fn load(&mut self, size: u64) {
        self.loads += 1;
        if size > 0 {
            self.sized_loads += 1;
            self.bytes = self.bytes.saturating_add(size);
            self.max_bytes = self.max_bytes.max(size);
        }
    }

    fn add(&mut self, o: &CodeObjectAcc) {
        self.loads += o.loads;
        self.unloads += o.unloads;
        self.sized_loads += o.sized_loads;
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.max_bytes = self.max_bytes.max(o.max_bytes);
    }

    /// Bytes and the largest, `None` when no load carried a size.
    fn sizes(&self) -> (Option<u64>, Option<u64>) {
        let sized = self.sized_loads > 0;
        (sized.then_some(self.bytes), sized.then_some(self.max_bytes))
    }
}

/// A task-graph node, for the longest chain: chain length ending here (real commands only),
/// its predecessor on that chain, and its name.
#[derive(Debug, Clone, Copy)]
struct NodeAcc {
    len: u32,
    real: bool,
    pred: u64,
    name: StrId,
    /// Its node record carried its command's queue (and so the command's name).
    queued: bool,
}

/// What a command's enqueue record said, which its completion (from a lower runtime level, with
/// that level's queue handle and its own view of the copy) does not change.
#[derive(Debug, Clone, Copy)]
struct Enqueued {
    queue: u64,
    direction: CopyDirection,
    bytes: u64,
}

/// What the report takes from an API call.
#[derive(Debug, Clone, Copy)]
struct CallFacts {
    kind: u32,
    op: u32,
    tid: u32,
    start: u64,
    end: u64,
    correlation: u64,
    failed: bool,
}

/// Reads typed records in file order and aggregates them into a [`Report`].
#[derive(Debug, Default)]
pub struct Analyzer {
    records: u64,
    info: BTreeMap<String, String>,
    format_version: u16,
    /// A value per command was seen: `command_groups` is kept for every command from then on.
    has_command_values: bool,
    first_ns: Option<u64>,
    last_ns: u64,
    end: Option<(u64, u64)>,
    strings: FxHashMap<u32, Box<str>>,
    kinds: FxHashMap<u32, StrId>,
    ops: FxHashMap<(u32, u32), StrId>,
    devices: FxHashMap<u64, StrId>,
    threads: FxHashMap<u32, ThreadAcc>,
    api: FxHashMap<(u32, u32), ApiAcc>,
    activity: Vec<ActivityAcc>,
    activity_index: FxHashMap<(u32, ActivityName), usize>,
    /// Device work enqueued without device times: (kind, correlation) → its group and what the
    /// enqueue record said (queue, copy direction, bytes), so that the completion record adds
    /// its device time to the same group, queue and direction instead of counting it again.
    awaiting_completion: FxHashMap<(u32, u64), (usize, Enqueued)>,
    completion_order: VecDeque<(u32, u64)>,
    /// Completions whose enqueue record has not come yet: two backends' records of one command
    /// reach the file in either order (different threads' buffers), and a CUDA graph launch's
    /// commands share one correlation with no enqueue record (`crate::early`).
    early_completion: EarlyCompletions<Activity>,
    /// Commands already completed: a later completion of the same (kind, correlation) (the SYCL
    /// backend's from the program's profiling query beside the OpenCL layer's) is not counted.
    completed: RecentKeys,
    queues: FxHashMap<u64, QueueAcc>,
    queue_order: Vec<u64>,
    /// Queues whose handle a later queue reused (created after the first one was destroyed), by
    /// their position in `queue_order`: each queue the program created is one row.
    retired_queues: BTreeMap<usize, QueueAcc>,
    /// Live bytes and their peak, in time order (threads' records reach the file out of it).
    live: LiveMemory,
    allocations: BTreeMap<(u8, u64), AllocAcc>,
    sub_allocations: SubAllocationStats,
    /// Copies and fills by (kind, direction, operation): which kind is a fill, and which
    /// operation a map or unmap, is known from the definitions, which a damaged trace may give
    /// only at its end (the repeat).
    copies: BTreeMap<(u32, u8, u32), CopyAcc>,
    nodes: FxHashMap<u64, NodeAcc>,
    node_order: VecDeque<u64>,
    /// Node → the nodes depending on it, so a node that becomes a real command after its edges
    /// were made (a CUDA graph node, linked to its command when the device activity arrives)
    /// lengthens the chains through it. Dropped with the node.
    successors: FxHashMap<u64, Vec<u64>>,
    /// Event (signalled by a command) → the latest signals of it, (time, node), for nodes that
    /// stand for an event. A runtime reuses an event's address once it is released, on any
    /// thread, and the threads' records reach the file in blocks, not in time order: a node
    /// continues the command that signalled its event last *before the node was made*, not the
    /// one that came last in the file.
    signalled: FxHashMap<u64, [(u64, u64); SIGNALS_PER_EVENT]>,
    signal_order: VecDeque<u64>,
    graph_nodes: u64,
    host_tasks: u64,
    graph_edges: u64,
    graph_signals: u64,
    unresolved_edges: u64,
    counters: BTreeMap<u64, CounterAcc>,
    /// Values per command (samples with a correlation id): (correlation, counter, value),
    /// joined with the commands' device activity at the end (either may come first in the file).
    command_values: Vec<(u64, u64, f64)>,
    /// Command (correlation) → the device-activity groups it was counted in (one per runtime
    /// level, at most two kept; `u32::MAX` = none). Filled once the trace has shown a value per
    /// command; before that, only the last [`PENDING_MAX`] commands are kept, in
    /// `recent_commands` (a push and a pop per command instead of a hash insert: most traces
    /// have no values per command), and moved here when the first value comes (values come
    /// within milliseconds of their command's completion).
    command_groups: FxHashMap<u64, [u32; 2]>,
    recent_commands: VecDeque<(u64, u32)>,
    /// Code objects per operation, and per (operation, name): bounded by the distinct names.
    code_object_ops: BTreeMap<u32, CodeObjectAcc>,
    code_object_names: FxHashMap<(u32, StrId), CodeObjectAcc>,
    /// Loaded code objects, (operation, handle) → (name, load number), so that an unload (whose
    /// record usually names nothing) counts under its load's name, as the SQLite export names
    /// it; the oldest forgotten past [`PENDING_MAX`] (`code_load_order`).
    loaded_code: FxHashMap<(u32, u64), (StrId, u64)>,
    code_load_order: VecDeque<((u32, u64), u64)>,
    /// Unloads without a load so far, (operation, handle) → (time, name): a load of the handle
    /// from before that time, later in the file, is theirs. The oldest forgotten past
    /// [`PENDING_MAX`] (they stay unmatched).
    early_unloads: FxHashMap<(u32, u64), (u64, StrId)>,
    early_unload_order: VecDeque<((u32, u64), u64)>,
    code_loads: u64,
    markers: BTreeMap<(u32, u32), (u64, u64)>,
    open_ranges: FxHashMap<(u32, u64), u64>,
    other: BTreeMap<(u32, u32), u64>,
    drops: DropStats,
    stream_names: FxHashMap<u8, StrId>,
    notifications: FxHashMap<(u8, u16), u64>,
}

impl Analyzer {
    pub fn new() -> Self {
        Self::default()
    }

    /// The trace's format version (for the report's facts).
    pub fn set_format_version(&mut self, version: u16) {
        self.format_version = version;
    }

    fn str(&self, id: StrId) -> &str {
        self.strings.get(&id.0).map_or("", |s| s)
    }

    fn kind_name(&self, kind: u32) -> String {
        match self.kinds.get(&kind) {
            Some(&s) if !self.str(s).is_empty() => self.str(s).to_owned(),
            _ => format!("KIND_{kind}"),
        }
    }

    fn op_name(&self, kind: u32, op: u32) -> String {
        match self.ops.get(&(kind, op)) {
            Some(&s) if !self.str(s).is_empty() => self.str(s).to_owned(),
            _ => format!("op_{op}"),
        }
    }

    fn device_name(&self, device: u64) -> String {
        match self.devices.get(&device) {
            Some(&s) if !self.str(s).is_empty() => self.str(s).to_owned(),
            _ if device == 0 => String::new(),
            _ => format!("{device:#x}"),
        }
    }

    fn seen(&mut self, ts: u64) {
        if ts == 0 {
            return;
        }
        if self.first_ns.is_none_or(|f| ts < f) {
            self.first_ns = Some(ts);
        }
        self.last_ns = self.last_ns.max(ts);
    }

    /// Takes one record (in file order).
    pub fn push(&mut self, record: &Record) {
        self.records += 1;
        match record {
            Record::Info { key, value } => {
                self.info.insert(key.clone(), value.clone());
            }
            Record::String { id, text } => {
                // Names are shown in the one style of every section; demangled once, here.
                self.strings.insert(id.0, display_name(text).into_owned().into_boxed_str());
            }
            Record::Thread { tid, name } => self.threads.entry(*tid).or_default().name = *name,
            Record::Stream { id, name, .. } => {
                self.stream_names.insert(*id, *name);
            }
            Record::KindDef { kind, name } => {
                self.kinds.insert(*kind, *name);
            }
            Record::OperationDef(d) => {
                self.ops.insert((d.kind, d.op), d.name);
            }
            Record::Device(d) => {
                self.devices.insert(d.handle, d.name);
            }
            Record::ApiCall(a) => self.api_call(a),
            Record::Activity(a) => self.activity(a),
            Record::Queue(q) => {
                self.seen(q.ts);
                if q.op == 0 && self.queues.get(&q.queue).is_some_and(|a| a.destroyed_ns.is_some()) {
                    let pos = self.queue_order.iter().rposition(|&h| h == q.queue);
                    if let (Some(pos), Some(old)) = (pos, self.queues.remove(&q.queue)) {
                        self.retired_queues.insert(pos, old);
                    }
                }
                let known = self.queues.contains_key(&q.queue);
                if !known {
                    self.queue_order.push(q.queue);
                }
                let acc = self.queues.entry(q.queue).or_default();
                match q.op {
                    0 => {
                        acc.device = q.device;
                        acc.context = q.context;
                        acc.flags = Some(q.flags);
                        acc.created_ns = Some(q.ts);
                    }
                    1 => acc.destroyed_ns = Some(q.ts),
                    _ => {}
                }
            }
            Record::Memory(m) => self.memory(m),
            Record::TaskGraph(t) => self.task_graph(t),
            Record::Sync(s) => self.seen(s.ts),
            Record::CodeObject(c) => self.code_object(c),
            Record::Marker(m) => {
                self.seen(m.ts);
                let acc = self.markers.entry((m.message.0, m.op)).or_default();
                if m.op == MARKER_RANGE {
                    match m.phase {
                        phase::ENTER => {
                            self.open_ranges.insert((m.tid, m.range_id), m.ts);
                        }
                        phase::EXIT => {
                            acc.0 += 1;
                            if let Some(start) = self.open_ranges.remove(&(m.tid, m.range_id)) {
                                acc.1 += m.ts.saturating_sub(start);
                            }
                        }
                        _ => acc.0 += 1,
                    }
                } else {
                    acc.0 += 1;
                }
            }
            Record::CounterDef(d) => {
                let c = self.counters.entry(d.counter).or_default();
                c.device = d.device;
                c.name = d.name;
                c.unit = d.unit;
                c.value_type = d.value_type;
            }
            Record::CounterSample(s) => {
                self.seen(s.ts);
                let c = self.counters.entry(s.counter).or_default();
                let v = match c.value_type {
                    1 => s.value as i64 as f64,
                    2 => f64::from_bits(s.value),
                    _ => s.value as f64,
                };
                if c.samples == 0 {
                    c.min = v;
                    c.max = v;
                } else {
                    c.min = c.min.min(v);
                    c.max = c.max.max(v);
                }
                c.samples += 1;
                c.sum += v;
                c.last = v;
                if s.correlation != 0 {
                    if !self.has_command_values {
                        self.has_command_values = true;
                        for (correlation, g) in std::mem::take(&mut self.recent_commands) {
                            self.command_group(correlation, g);
                        }
                    }
                    self.command_values.push((s.correlation, s.counter, v));
                }
            }
            Record::Generic(g) => {
                self.seen(g.ts);
                *self.other.entry((g.kind, g.op)).or_default() += 1;
            }
            Record::Drops { tid, count } => {
                self.drops.total += count;
                *self.drops.by_thread.entry(*tid).or_default() += count;
                self.threads.entry(*tid).or_default().drops += count;
            }
            Record::End { records, drops } => self.end = Some((*records, *drops)),
            Record::Notification(n) => {
                self.seen(n.ts);
                *self.notifications.entry((n.stream, n.trace_type)).or_default() += 1;
            }
            _ => {}
        }
    }

    fn api_call(&mut self, a: &ApiCall) {
        self.call(CallFacts {
            kind: a.kind,
            op: a.op,
            tid: a.tid,
            start: a.start,
            end: a.end,
            correlation: a.correlation,
            failed: a.result.is_some_and(|r| r != 0),
        });
    }

    /// Takes an API call read apart from the records ([`ReadOptions::api_calls_apart`]), at its
    /// place in file order.
    ///
    /// [`ReadOptions::api_calls_apart`]: offtrace_format::ReadOptions::api_calls_apart
    pub fn push_api_call(&mut self, a: &ApiCallBrief) {
        self.records += 1;
        self.call(CallFacts {
            kind: a.kind,
            op: a.op,
            tid: a.tid,
            start: a.start,
            end: a.end,
            correlation: a.correlation,
            failed: a.result.is_some_and(|r| r != 0),
        });
    }

    #[inline(always)]
    fn call(&mut self, a: CallFacts) {
        self.seen(a.start);
        self.seen(a.end);
        let ns = a.end.saturating_sub(a.start);
        let acc = self.api.entry((a.kind, a.op)).or_default();
        acc.d.add(ns);
        if a.failed {
            acc.errors += 1;
        }
        let t = self.threads.entry(a.tid).or_default();
        t.api_calls += 1;
        while let Some(&(s, e)) = t.outer_calls.back()
            && a.start <= s
            && e <= a.end
        {
            t.api_ns = t.api_ns.saturating_sub(e - s);
            t.outer_calls.pop_back();
        }
        // A call inside the newest outer one (records of one thread out of exit order) is in it.
        if !t.outer_calls.back().is_some_and(|&(s, e)| s <= a.start && a.end <= e) {
            t.api_ns += ns;
            t.outer_calls.push_back((a.start, a.start + ns));
            if t.outer_calls.len() > OUTER_CALLS_MAX {
                t.outer_calls.pop_front();
            }
        }
        if !t.awaiting_call.is_empty() {
            let before = t.awaiting_call.len();
            let activity = &mut self.activity;
            t.awaiting_call.retain(|&(corr, g)| {
                if corr != a.correlation {
                    return true;
                }
                activity[g as usize].host.add(ns);
                false
            });
            let found = (before - t.awaiting_call.len()) as u64;
            acc.device_activities += found;
            t.device_activities += found;
        }
    }

    fn activity_group(&mut self, a: &Activity) -> usize {
        let name = if a.name.0 != 0 { ActivityName::Str(a.name) } else { ActivityName::Op(a.op) };
        let key = (a.kind, name);
        if let Some(&i) = self.activity_index.get(&key) {
            return i;
        }
        self.activity.push(ActivityAcc {
            kind: a.kind,
            name,
            count: 0,
            device: Durations::default(),
            host: Durations::default(),
            bytes: 0,
            queues: Vec::new(),
        });
        let i = self.activity.len() - 1;
        self.activity_index.insert(key, i);
        i
    }

    /// One device activity per command and runtime level: an enqueue record (phase NONE) and
    /// its completion (phase COMPLETE, same kind and correlation) are one command whichever
    /// comes first; a second completion of the same command is not counted (the first wins);
    /// completions with no enqueue record are commands of their own, several per correlation
    /// for a CUDA graph launch (`crate::early`).
    fn activity(&mut self, a: &Activity) {
        let key = (a.kind, a.correlation);
        if a.correlation == 0 {
            return self.activity_record(a);
        }
        if a.phase == phase::COMPLETE {
            if self.completed.contains(key) {
                self.seen(a.ts);
                return;
            }
            if !self.awaiting_completion.contains_key(&key) {
                self.seen(a.ts);
                if let Completion::Commands(own) =
                    self.early_completion.complete(key, a.clone(), (a.device_start, a.device_end))
                {
                    for (_, c) in &own {
                        self.activity_record(c);
                    }
                }
                return;
            }
            self.completed.insert(key);
            return self.activity_record(a);
        }
        if let Some(c) = self.early_completion.take(key) {
            let mut merged = a.clone();
            if a.device_start == 0 {
                merged.device_start = c.device_start;
                merged.device_end = c.device_end;
            }
            self.completed.insert(key);
            return self.activity_record(&merged);
        }
        if a.device_start != 0 {
            self.completed.insert(key);
        }
        self.activity_record(a)
    }

    /// Remembers that command `correlation` was counted in activity group `g`.
    fn command_group(&mut self, correlation: u64, g: u32) {
        let slots = self.command_groups.entry(correlation).or_insert([u32::MAX; 2]);
        if let Some(free) = slots.iter_mut().find(|s| **s == g || **s == u32::MAX) {
            *free = g;
        }
    }

    /// Completions still waiting for their enqueue record at the end: work of their own.
    fn flush_early_completions(&mut self) {
        for (_, c) in self.early_completion.drain() {
            self.activity_record(&c);
        }
    }

    fn activity_record(&mut self, a: &Activity) {
        self.seen(a.ts);
        let key = (a.kind, a.correlation);
        // A completion of work already counted adds its device time to that work's group.
        let completes = a.phase == phase::COMPLETE && a.correlation != 0;
        // The queue is the enqueue record's: a completion from a lower runtime level (the OpenCL
        // layer under SYCL) names its own queue handle, not the one the program used.
        // The copy's direction too: the OpenCL layer sees a SYCL buffer read into USM device
        // memory as a read to the host, the UR level as device to device.
        let (group, counted, Enqueued { queue, direction, bytes }) =
            match completes.then(|| self.awaiting_completion.remove(&key)).flatten() {
                Some((g, enqueued)) => (g, true, enqueued),
                None => {
                    (self.activity_group(a), false, Enqueued { queue: a.queue, direction: a.direction, bytes: a.bytes })
                }
            };
        let known = a.device_start != 0 && a.device_end >= a.device_start;
        let acc = &mut self.activity[group];
        if !counted {
            acc.count += 1;
            acc.bytes += a.bytes;
            if !acc.queues.contains(&a.queue) && acc.queues.len() < 64 {
                acc.queues.push(a.queue);
            }
        }
        if known {
            acc.device.add(a.device_end - a.device_start);
            self.seen(a.device_start);
            self.seen(a.device_end);
        }
        if !counted {
            if a.correlation != 0 {
                if self.has_command_values {
                    self.command_group(a.correlation, group as u32);
                } else {
                    if self.recent_commands.len() == PENDING_MAX {
                        self.recent_commands.pop_front();
                    }
                    self.recent_commands.push_back((a.correlation, group as u32));
                }
            }
            if a.correlation != 0 && a.phase != phase::COMPLETE {
                let waiting = &mut self.threads.entry(a.tid).or_default().awaiting_call;
                if waiting.len() >= AWAITING_CALL_MAX {
                    waiting.remove(0);
                }
                waiting.push((a.correlation, group as u32));
                if !known {
                    let enqueued = Enqueued { queue: a.queue, direction: a.direction, bytes: a.bytes };
                    self.awaiting_completion.insert(key, (group, enqueued));
                    self.completion_order.push_back(key);
                    if self.completion_order.len() > PENDING_MAX
                        && let Some(old) = self.completion_order.pop_front()
                    {
                        self.awaiting_completion.remove(&old);
                    }
                }
            }
            if !self.queues.contains_key(&a.queue) {
                self.queue_order.push(a.queue);
            }
            let q = self.queues.entry(a.queue).or_default();
            if q.device == 0 {
                q.device = a.device;
            }
            *q.commands.entry(a.kind).or_default() += 1;
        }
        if known {
            self.queues.entry(queue).or_default().busy.add(a.device_start, a.device_end);
        }
        // Copies and fills by direction (a kernel has no bytes).
        if bytes != 0 || direction != CopyDirection::Unknown {
            let device_ns = if known { Some(a.device_end - a.device_start) } else { None };
            let c = self.copies.entry((a.kind, direction as u8, a.op)).or_default();
            if !counted {
                c.count += 1;
                c.bytes += bytes;
            }
            if let Some(ns) = device_ns {
                c.device_count += 1;
                c.device_bytes += bytes;
                c.device_ns += ns;
            }
        }
    }

    fn is_fill(&self, kind: u32) -> bool {
        self.kinds.get(&kind).is_some_and(|&s| self.str(s).contains("FILL"))
    }

    /// A code object's load or unload: an unload is matched to its load by (operation, handle),
    /// as the SQLite export matches it (`offtrace-export`, `rows.rs`).
    fn code_object(&mut self, c: &CodeObjectRecord) {
        self.seen(c.ts);
        let key = (c.op, c.handle);
        match c.phase {
            phase::LOAD => {
                self.code_object_ops.entry(c.op).or_default().load(c.size);
                self.code_object_names.entry((c.op, c.name)).or_default().load(c.size);
                // Its unload came first in the file (released on another thread, whose block
                // was written before this one's): matched now, counted under this name.
                if let Some(&(unload_ts, unload_name)) = self.early_unloads.get(&key)
                    && unload_ts >= c.ts
                {
                    self.early_unloads.remove(&key);
                    if let Some(op) = self.code_object_ops.get_mut(&c.op) {
                        op.unmatched_unloads = op.unmatched_unloads.saturating_sub(1);
                    }
                    if unload_name.0 == 0 {
                        if let Some(n) = self.code_object_names.get_mut(&(c.op, unload_name)) {
                            n.unloads = n.unloads.saturating_sub(1);
                        }
                        self.code_object_names.entry((c.op, c.name)).or_default().unloads += 1;
                    }
                    return;
                }
                self.code_loads += 1;
                self.loaded_code.insert(key, (c.name, self.code_loads));
                self.code_load_order.push_back((key, self.code_loads));
                while self.code_load_order.len() > PENDING_MAX {
                    let Some((old, at)) = self.code_load_order.pop_front() else { break };
                    // Only the load it was: a handle loaded again since has a later number.
                    if self.loaded_code.get(&old).is_some_and(|l| l.1 == at) {
                        self.loaded_code.remove(&old);
                    }
                }
            }
            phase::UNLOAD => {
                let op = self.code_object_ops.entry(c.op).or_default();
                op.unloads += 1;
                let name = match self.loaded_code.remove(&key) {
                    Some((loaded_as, _)) if c.name.0 == 0 => loaded_as,
                    Some(_) => c.name,
                    None => {
                        op.unmatched_unloads += 1;
                        self.early_unloads.insert(key, (c.ts, c.name));
                        self.early_unload_order.push_back((key, c.ts));
                        if self.early_unload_order.len() > PENDING_MAX
                            && let Some((old, ts)) = self.early_unload_order.pop_front()
                            && self.early_unloads.get(&old).is_some_and(|u| u.0 == ts)
                        {
                            self.early_unloads.remove(&old);
                        }
                        c.name
                    }
                };
                self.code_object_names.entry((c.op, name)).or_default().unloads += 1;
            }
            _ => {}
        }
    }

    /// The code-object section: per operation, its names merged by text (a name interned
    /// twice is one name), most bytes then most loads first.
    fn code_objects(&self) -> Vec<CodeObjectStats> {
        let mut names: BTreeMap<u32, BTreeMap<&str, CodeObjectAcc>> = BTreeMap::new();
        for (&(op, name), acc) in &self.code_object_names {
            names.entry(op).or_default().entry(self.str(name)).or_default().add(acc);
        }
        self.code_object_ops
            .iter()
            .map(|(&op, acc)| {
                let mut unnamed_loads = 0;
                let mut rows: Vec<CodeObjectNameStats> = Vec::new();
                for (&name, n) in names.get(&op).into_iter().flatten() {
                    if name.is_empty() {
                        unnamed_loads += n.loads;
                        continue;
                    }
                    let (bytes, max_bytes) = n.sizes();
                    rows.push(CodeObjectNameStats {
                        name: name.to_owned(),
                        loads: n.loads,
                        unloads: n.unloads,
                        bytes,
                        max_bytes,
                    });
                }
                rows.sort_by(|a, b| {
                    b.bytes
                        .unwrap_or(0)
                        .cmp(&a.bytes.unwrap_or(0))
                        .then(b.loads.cmp(&a.loads))
                        .then_with(|| a.name.cmp(&b.name))
                });
                let (bytes, max_bytes) = acc.sizes();
                let matched = acc.unloads.saturating_sub(acc.unmatched_unloads);
                CodeObjectStats {
                    operation: self.op_name(CODE_OBJECT_KIND, op),
                    loads: acc.loads,
                    unloads: acc.unloads,
                    unmatched_unloads: acc.unmatched_unloads,
                    loaded_at_end: acc.loads.saturating_sub(matched),
                    sized_loads: acc.sized_loads,
                    bytes,
                    max_bytes,
                    unnamed_loads,
                    names: rows,
                }
            })
            .collect()
    }

    fn memory(&mut self, m: &MemoryRecord) {
        self.seen(m.ts);
        if m.op == MEMORY_FREE {
            self.live.push(m.ts, Change::Free { ptr: m.ptr }, |_, _| {});
            return;
        }
        if m.op == MEMORY_SUB_ALLOC {
            // Its parent's bytes: live with none of its own, so its free matches and subtracts
            // nothing.
            self.sub_allocations.count += 1;
            self.sub_allocations.bytes += m.size;
            self.live.push(m.ts, Change::Alloc { ptr: m.ptr, size: 0 }, |_, _| {});
            return;
        }
        let a = self.allocations.entry((m.memory_type as u8, m.device)).or_default();
        a.count += 1;
        a.bytes += m.size;
        a.max = a.max.max(m.size);
        let class = (m.memory_type as u8, m.device);
        self.live.push(m.ts, Change::AllocIn { ptr: m.ptr, size: m.size, class }, |_, _| {});
    }

    fn task_graph(&mut self, t: &TaskGraphRecord) {
        self.seen(t.ts);
        match t.op {
            GRAPH_NODE_CREATE => {
                self.graph_nodes += 1;
                if self.str(t.name) == SYCL_HOST_TASK {
                    self.host_tasks += 1;
                }
                // A node submitted to a queue is a real command; one without a queue is so far
                // virtual (until its task runs, below).
                let real = t.queue != 0;
                let mut node = NodeAcc { len: u32::from(real), real, pred: 0, name: t.name, queued: real };
                // A node that stands for an event (a dependency on earlier work) continues the
                // chain of the command that signalled that event.
                if t.event != 0
                    && let Some(cmd) = self.signaller(t.event, t.ts)
                    && let Some(c) = self.nodes.get(&cmd)
                    && c.len + node.len > node.len
                {
                    node.len += c.len;
                    node.pred = cmd;
                }
                if self.nodes.insert(t.node, node).is_none() {
                    self.node_order.push_back(t.node);
                    if self.node_order.len() > GRAPH_NODES_MAX
                        && let Some(old) = self.node_order.pop_front()
                    {
                        self.nodes.remove(&old);
                        self.successors.remove(&old);
                    }
                }
            }
            GRAPH_EDGE_CREATE => {
                self.graph_edges += 1;
                let (Some(&s), Some(&target)) = (self.nodes.get(&t.source), self.nodes.get(&t.target)) else {
                    self.unresolved_edges += 1;
                    return;
                };
                // Nodes arrive in dependency order (a node's edges in before its edges out), so
                // the chain ending at the source is final when its out-edges are made.
                let len = s.len + u32::from(target.real);
                if len > target.len
                    && let Some(n) = self.nodes.get_mut(&t.target)
                {
                    n.len = len;
                    n.pred = t.source;
                }
                self.successors.entry(t.source).or_default().push(t.target);
            }
            // A node whose command runs as a task is a real command, whatever its creation said.
            // A SYCL node's task begins when it is submitted, before later nodes depend on it; a
            // CUDA graph node's task is the device activity it produced (phase COMPLETE), which
            // arrives after the whole graph was built, so the chains through it grow here.
            GRAPH_TASK if t.phase == phase::ENTER || t.phase == phase::COMPLETE => {
                // The SYCL backend names a node at its creation with the kernel's name cut to a
                // fixed size, and its task with the whole name: the whole one is shown.
                let whole = t.name != StrId(0)
                    && self.nodes.get(&t.node).is_some_and(|n| {
                        let (cut, task) = (self.str(n.name), self.str(t.name));
                        task.len() > cut.len() && task.starts_with(cut)
                    });
                if whole && let Some(n) = self.nodes.get_mut(&t.node) {
                    n.name = t.name;
                }
                if let Some(n) = self.nodes.get_mut(&t.node)
                    && !n.real
                {
                    n.real = true;
                    n.len += 1;
                    // The command's name (a kernel's) says more than the node's type.
                    if t.phase == phase::COMPLETE && t.name != StrId(0) {
                        n.name = t.name;
                    }
                    self.lengthen_chains_from(t.node);
                }
            }
            // A node recorded before its command was enqueued (no queue yet) has its queue and
            // the command's name (a copy's `usm_memcpy` where the node said `copy usm`) on its
            // task's exit record.
            GRAPH_TASK if t.phase == phase::EXIT && t.queue != 0 && t.name != StrId(0) => {
                if let Some(n) = self.nodes.get_mut(&t.node)
                    && !n.queued
                {
                    n.name = t.name;
                    n.queued = true;
                }
            }
            GRAPH_SIGNAL => {
                self.graph_signals += 1;
                if t.event == 0 {
                    return;
                }
                let mut fresh = false;
                let slots = self.signalled.entry(t.event).or_insert_with(|| {
                    fresh = true;
                    [(0, 0); SIGNALS_PER_EVENT]
                });
                // The oldest signal (or an empty slot) makes room.
                let slot = slots.iter_mut().min_by_key(|(ts, node)| (*node != 0, *ts)).expect("slots");
                *slot = (t.ts, t.node);
                if fresh {
                    self.signal_order.push_back(t.event);
                    if self.signal_order.len() > GRAPH_NODES_MAX
                        && let Some(old) = self.signal_order.pop_front()
                    {
                        self.signalled.remove(&old);
                    }
                }
            }
            _ => {}
        }
    }

    /// The node that signalled `event` last at or before `ts`.
    fn signaller(&self, event: u64, ts: u64) -> Option<u64> {
        let slots = self.signalled.get(&event)?;
        slots.iter().filter(|&&(at, node)| node != 0 && at <= ts).max_by_key(|&&(at, _)| at).map(|&(_, node)| node)
    }

    /// Carries a longer chain ending at `from` on to the nodes that depend on it (longest
    /// path by relaxation; a graph is acyclic, and a bounded number of steps keeps a malformed
    /// trace with a cycle from looping).
    fn lengthen_chains_from(&mut self, from: u64) {
        let mut work = vec![from];
        let mut steps = 0usize;
        while let Some(x) = work.pop() {
            let Some(len) = self.nodes.get(&x).map(|n| n.len) else { continue };
            let Some(next) = self.successors.get(&x) else { continue };
            for &y in next {
                steps += 1;
                if steps > 4 * GRAPH_NODES_MAX {
                    return;
                }
                if let Some(n) = self.nodes.get_mut(&y) {
                    let cand = len + u32::from(n.real);
                    if cand > n.len {
                        n.len = cand;
                        n.pred = x;
                        work.push(y);
                    }
                }
            }
        }
    }

    fn longest_chain(&self) -> (u64, Vec<String>) {
        let Some((&end, best)) = self.nodes.iter().max_by_key(|(id, n)| (n.len, std::cmp::Reverse(**id))) else {
            return (0, Vec::new());
        };
        let mut names = Vec::new();
        let mut cur = Some((end, *best));
        let mut steps = 0;
        while let Some((_, n)) = cur {
            if n.real {
                names.push(self.str(n.name).to_owned());
            }
            steps += 1;
            cur = (n.pred != 0 && steps <= self.nodes.len())
                .then(|| self.nodes.get(&n.pred).map(|p| (n.pred, *p)))
                .flatten();
        }
        names.reverse();
        (u64::from(best.len), names)
    }

    fn activity_name(&self, a: &ActivityAcc) -> String {
        match a.name {
            ActivityName::Str(s) => self.str(s).to_owned(),
            ActivityName::Op(op) => self.op_name(a.kind, op),
        }
    }

    /// Values per command joined with their commands' device activity by correlation: one row
    /// per (activity group, counter), then one per counter for values whose command has no
    /// device activity in the trace. Groups in the device-activity section's order (most device
    /// time first), counters by name.
    fn command_metrics(&self) -> Vec<CommandMetricStats> {
        const NO_ACTIVITY: u32 = u32::MAX;
        let mut acc: BTreeMap<(u32, u64), (u64, f64, f64, f64)> = BTreeMap::new();
        let mut add = |group: u32, counter: u64, v: f64| {
            let e = acc.entry((group, counter)).or_insert((0, 0.0, v, v));
            e.0 += 1;
            e.1 += v;
            e.2 = e.2.min(v);
            e.3 = e.3.max(v);
        };
        for &(correlation, counter, v) in &self.command_values {
            match self.command_groups.get(&correlation) {
                Some(groups) if groups[0] != NO_ACTIVITY => {
                    for &g in groups.iter().filter(|&&g| g != NO_ACTIVITY) {
                        add(g, counter, v);
                    }
                }
                _ => add(NO_ACTIVITY, counter, v),
            }
        }
        let mut rows: Vec<(u32, CommandMetricStats)> = acc
            .into_iter()
            .map(|((group, counter), (commands, total, min, max))| {
                let c = self.counters.get(&counter);
                let (kind, name) = match self.activity.get(group as usize) {
                    Some(a) => (self.kind_name(a.kind), self.activity_name(a)),
                    None => (String::new(), String::new()),
                };
                let row = CommandMetricStats {
                    kind,
                    name,
                    metric: c.map_or_else(|| format!("counter_{counter}"), |c| self.str(c.name).to_owned()),
                    unit: c.map_or_else(String::new, |c| self.str(c.unit).to_owned()),
                    device: c.map_or_else(String::new, |c| self.device_name(c.device)),
                    commands,
                    total,
                    mean: total / commands as f64,
                    min,
                    max,
                };
                (group, row)
            })
            .collect();
        let rank = |g: u32| match self.activity.get(g as usize) {
            Some(a) => (false, std::cmp::Reverse(a.device.total_ns), std::cmp::Reverse(a.count)),
            None => (true, std::cmp::Reverse(0), std::cmp::Reverse(0)),
        };
        rows.sort_by(|(ga, a), (gb, b)| {
            rank(*ga).cmp(&rank(*gb)).then_with(|| a.name.cmp(&b.name)).then_with(|| a.metric.cmp(&b.metric))
        });
        rows.into_iter().map(|(_, r)| r).collect()
    }

    /// The report. `outcome` says how the reading ended; `warnings` what was stepped over.
    pub fn finish(mut self, complete: bool, warnings: Vec<String>, problem: Option<String>) -> Report {
        self.flush_early_completions();
        self.live.finish(|_, _| {});
        let mut api_calls: Vec<ApiCallStats> = self
            .api
            .iter()
            .map(|(&(kind, op), acc)| ApiCallStats {
                kind: self.kind_name(kind),
                operation: self.op_name(kind, op),
                calls: acc.d.count,
                total_ns: acc.d.total_ns,
                mean_ns: acc.d.mean_ns(),
                min_ns: acc.d.min_ns,
                max_ns: acc.d.max_ns,
                errors: acc.errors,
                device_activities: acc.device_activities,
            })
            .collect();
        api_calls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.operation.cmp(&b.operation)));

        let mut device_activity: Vec<DeviceActivityStats> = self
            .activity
            .iter()
            .map(|a| {
                let known = a.device.count > 0;
                DeviceActivityStats {
                    kind: self.kind_name(a.kind),
                    name: match a.name {
                        ActivityName::Str(s) => self.str(s).to_owned(),
                        ActivityName::Op(op) => self.op_name(a.kind, op),
                    },
                    count: a.count,
                    device_count: a.device.count,
                    device_total_ns: known.then_some(a.device.total_ns),
                    device_mean_ns: known.then(|| a.device.mean_ns()),
                    device_min_ns: known.then_some(a.device.min_ns),
                    device_max_ns: known.then_some(a.device.max_ns),
                    host_enqueue_count: a.host.count,
                    host_enqueue_total_ns: a.host.total_ns,
                    host_enqueue_mean_ns: a.host.mean_ns(),
                    bytes: a.bytes,
                    queues: a.queues.clone(),
                }
            })
            .collect();
        device_activity.sort_by(|a, b| {
            b.device_total_ns
                .unwrap_or(0)
                .cmp(&a.device_total_ns.unwrap_or(0))
                .then(b.count.cmp(&a.count))
                .then_with(|| a.name.cmp(&b.name))
        });

        let memory_type_name = |t: u8| MemoryType::from_u8(t).map_or("UNKNOWN", MemoryType::name).to_owned();
        let (mut copies, mut fills, mut maps) =
            (BTreeMap::<u8, CopyAcc>::new(), FillStats::default(), FillStats::default());
        for (&(kind, direction, op), c) in &self.copies {
            // A map or unmap is not a transfer to time: on memory the host can reach (any CPU
            // device, integrated GPUs) it copies nothing and takes nanoseconds, and the unmap of a
            // map for reading copies nothing anywhere, yet each carries the region's bytes. In a
            // direction's bandwidth they would add their bytes and next to no time.
            let sum = if self.is_fill(kind) {
                &mut fills
            } else if matches!(self.op_name(kind, op).as_str(), "map" | "image_map" | "unmap") {
                &mut maps
            } else {
                let to = copies.entry(direction).or_default();
                to.count += c.count;
                to.bytes += c.bytes;
                to.device_count += c.device_count;
                to.device_bytes += c.device_bytes;
                to.device_ns += c.device_ns;
                continue;
            };
            sum.count += c.count;
            sum.bytes += c.bytes;
            sum.device_count += c.device_count;
            sum.device_ns += c.device_ns;
        }
        let memory = MemoryReport {
            allocations: self
                .allocations
                .iter()
                .map(|(&(t, dev), a)| AllocationStats {
                    memory_type: memory_type_name(t),
                    device: self.device_name(dev),
                    count: a.count,
                    bytes: a.bytes,
                    max_bytes: a.max,
                    peak_live_bytes: self.live.peak_bytes_in((t, dev)),
                })
                .collect(),
            peak_live_bytes: self.live.peak_bytes(),
            peak_live_ns: self.live.peak_ns(),
            live_bytes_at_end: self.live.live_bytes(),
            frees: self.live.frees(),
            unmatched_frees: self.live.unmatched_frees(),
            sub_allocations: self.sub_allocations.clone(),
            copies: copies
                .iter()
                .map(|(&d, c)| CopyStats {
                    direction: CopyDirection::from_u8(d).unwrap_or_default().name().to_owned(),
                    count: c.count,
                    bytes: c.bytes,
                    device_count: c.device_count,
                    device_bytes: c.device_bytes,
                    device_ns: c.device_ns,
                    bandwidth_gb_s: (c.device_ns > 0).then(|| c.device_bytes as f64 / c.device_ns as f64),
                })
                .collect(),
            fills,
            maps,
        };

        let queues = self
            .queue_order
            .iter()
            .enumerate()
            .filter_map(|(i, q)| self.retired_queues.get(&i).or_else(|| self.queues.get(q)).map(|acc| (*q, acc)))
            .map(|(queue, q)| QueueStats {
                queue,
                device: self.device_name(q.device),
                context: q.context,
                in_order: q.flags.map(|f| f & queue_flags::IN_ORDER != 0),
                profiling: q.flags.map(|f| f & queue_flags::PROFILING != 0),
                created_ns: q.created_ns,
                destroyed_ns: q.destroyed_ns,
                commands: q.commands.iter().map(|(&k, &n)| (self.kind_name(k), n)).collect(),
                total_commands: q.commands.values().sum(),
                device_busy_ns: q.busy.busy_ns(),
                device_time_sum_ns: q.busy.sum_ns(),
            })
            .collect();

        let (longest_chain_len, longest_chain) = self.longest_chain();
        let task_graph = TaskGraphReport {
            nodes: self.graph_nodes,
            edges: self.graph_edges,
            signals: self.graph_signals,
            unresolved_edges: self.unresolved_edges,
            longest_chain_len,
            longest_chain,
            host_tasks: self.host_tasks,
        };

        let mut threads: Vec<(&u32, &ThreadAcc)> = self.threads.iter().collect();
        threads.sort_unstable_by_key(|(tid, _)| **tid);
        let threads = threads
            .into_iter()
            .map(|(&tid, t)| ThreadStats {
                tid,
                name: self.str(t.name).to_owned(),
                api_calls: t.api_calls,
                api_total_ns: t.api_ns,
                device_activities: t.device_activities,
                drops: t.drops,
            })
            .collect();

        let counters = self
            .counters
            .values()
            .map(|c| CounterStats {
                name: self.str(c.name).to_owned(),
                unit: self.str(c.unit).to_owned(),
                device: self.device_name(c.device),
                samples: c.samples,
                min: c.min,
                max: c.max,
                mean: if c.samples > 0 { c.sum / c.samples as f64 } else { 0.0 },
                last: c.last,
            })
            .collect();

        let command_metrics = self.command_metrics();
        let code_objects = self.code_objects();

        let markers = self
            .markers
            .iter()
            .map(|(&(msg, op), &(count, total_ns))| MarkerStats {
                name: self.str(StrId(msg)).to_owned(),
                kind: if op == MARKER_RANGE { "RANGE" } else { "MARK" }.to_owned(),
                count,
                total_ns,
            })
            .collect();

        let other = self
            .other
            .iter()
            .map(|(&(kind, op), &count)| OtherStats {
                kind: self.kind_name(kind),
                operation: self.op_name(kind, op),
                count,
            })
            .collect();

        let mut notifications: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (&(stream, tt), &n) in &self.notifications {
            let sname = match self.stream_names.get(&stream) {
                Some(&s) if !self.str(s).is_empty() => self.str(s).to_owned(),
                _ => format!("stream_{stream}"),
            };
            *notifications.entry(sname).or_default().entry(names::trace_type_name(tt).into_owned()).or_default() += n;
        }

        let first = self.first_ns;
        Report {
            trace: TraceFacts {
                info: self.info,
                format_version: self.format_version,
                records: self.records,
                first_ns: first,
                last_ns: first.map(|_| self.last_ns),
                wall_ns: first.map_or(0, |f| self.last_ns.saturating_sub(f)),
                complete: complete && self.end.is_some(),
                warnings,
                problem,
                end_records: self.end.map(|e| e.0),
                end_drops: self.end.map(|e| e.1),
            },
            api_calls,
            device_activity,
            memory,
            code_objects,
            queues,
            task_graph,
            threads,
            counters,
            command_metrics,
            markers,
            other,
            drops: self.drops,
            notifications,
        }
    }
}
