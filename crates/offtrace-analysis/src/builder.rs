//! The streaming model builder: consumes records once, aggregates, and hands completed things
//! to a [`ModelSink`]. Memory is bounded by what is open at one time (calls in flight, live
//! allocations, events awaiting profiling info) plus the distinct names and the task graph.

use std::collections::BTreeMap;

use offtrace_format::{EventInfo, KernelDispatch, MetadataSetId, Notification, Record, UserData};
use rustc_hash::FxHashMap;

use crate::defs::Definitions;
use crate::graph::TaskGraph;
use crate::kernels::{KernelDispatches, OpenCommand};
use crate::names::{self, StreamRole, profiling_info, tt};
use crate::sink::*;
use crate::summary::*;

#[derive(Debug)]
struct OpenUrCall {
    ts: u64,
}

#[derive(Debug, Default)]
struct UrAgg {
    name: String,
    calls: u64,
    total: u64,
    min: u64,
    max: u64,
    errors: u64,
}

#[derive(Debug)]
struct OpenTask {
    ts: u64,
    tid: u32,
    name: String,
    kind: String,
    queue_id: Option<u64>,
    ur_event: Option<u64>,
    memory_size: Option<u64>,
}

#[derive(Debug, Default)]
struct CmdAgg {
    name: String,
    kind: String,
    count: u64,
    host_total: u64,
    host_max: u64,
    device_count: u64,
    device_total: u64,
    queues: Vec<u64>,
}

/// A command whose device time may still arrive through `urEventGetProfilingInfo`.
#[derive(Debug)]
struct PendingDevice {
    instance: u64,
    command: usize,
    queue_id: Option<u64>,
    mem_op: Option<usize>,
    start: Option<u64>,
    end: Option<u64>,
    done: bool,
}

#[derive(Debug)]
struct OpenAlloc {
    ts: u64,
    host_hint: bool,
    ur_kind: Option<&'static str>,
}

#[derive(Debug, Default)]
struct MemOpAgg {
    op: String,
    source: &'static str,
    count: u64,
    bytes: u64,
    host_ns: u64,
    device_ns: u64,
    device_count: u64,
}

#[derive(Debug, Default)]
struct QueueAgg {
    device: String,
    is_inorder: Option<bool>,
    created: Option<u64>,
    destroyed: Option<u64>,
    commands: u64,
    host_ns: u64,
    device_ns: u64,
}

/// Builds a [`Summary`] from records, one at a time.
///
/// ```
/// use offtrace_analysis::SummaryBuilder;
/// let mut b = SummaryBuilder::new();
/// for record in Vec::<offtrace_format::Record>::new() {
///     b.push(&record);
/// }
/// let summary = b.finish();
/// assert_eq!(summary.trace.records, 0);
/// ```
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    defs: Definitions,
    records: u64,
    notifications: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    complete: bool,
    end_records: Option<u64>,
    end_drops: Option<u64>,
    unmatched_ends: u64,

    notif_counts: FxHashMap<(u8, u16), u64>,
    thread_counts: FxHashMap<u32, u64>,
    drops_by_thread: BTreeMap<u32, u64>,

    ur_open: FxHashMap<(u32, u64), OpenUrCall>,
    ur_aggs: FxHashMap<u32, UrAgg>,

    task_open: FxHashMap<u64, OpenTask>,
    /// Per thread, the commands whose task is open (innermost last).
    open_commands: FxHashMap<u32, Vec<u64>>,
    cmd_index: FxHashMap<String, usize>,
    cmds: Vec<CmdAgg>,
    device_pending: FxHashMap<u64, PendingDevice>,

    alloc_open: FxHashMap<u64, OpenAlloc>,
    alloc_open_by_tid: FxHashMap<u32, u64>,
    release_open: FxHashMap<u64, u64>,
    live: FxHashMap<u64, u64>,
    live_bytes: u64,
    peak_live: u64,
    releases: u64,
    alloc_kinds: BTreeMap<(String, String), AllocKindStats>,
    buffers: BufferStats,
    mem_op_index: FxHashMap<(String, &'static str), usize>,
    mem_ops: Vec<MemOpAgg>,

    queues: BTreeMap<u64, QueueAgg>,

    graph: TaskGraph,
    node_by_uid: FxHashMap<u64, u32>,
    node_by_instance: FxHashMap<u64, u32>,
    unresolved_edges: u64,

    kernel_dispatches: KernelDispatches,
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The definitions read so far.
    pub fn definitions(&self) -> &Definitions {
        &self.defs
    }

    /// The task graph built so far.
    pub fn graph(&self) -> &TaskGraph {
        &self.graph
    }

    /// Takes one record in, without a sink.
    pub fn push(&mut self, record: &Record) {
        self.push_with(record, &mut NoSink);
    }

    /// Takes one record in and tells `sink` what it completed.
    pub fn push_with(&mut self, record: &Record, sink: &mut dyn ModelSink) {
        self.records += 1;
        if self.defs.observe(record) {
            return;
        }
        match record {
            Record::Notification(n) => self.notification(n, sink),
            Record::KernelDispatch(d) => self.kernel_dispatch(d),
            // Interim (until the analysis reads typed records only): a format-3 kernel launch as
            // the v2 dispatch record it replaces (no XPTI instance: linked through open commands).
            Record::Activity(a) if a.kind == 3 && a.phase == 0 => self.kernel_dispatch(&KernelDispatch {
                tid: a.tid,
                ts: a.ts,
                correlation: a.correlation,
                ur_instance: 0,
                kernel: a.name,
                queue: a.queue,
                kernel_handle: a.kernel,
                work_dim: a.work_dim,
                global_size: a.global_size,
                local_size: a.local_size,
                allocations: a.allocations.clone(),
            }),
            Record::Drops { tid, count } => {
                *self.drops_by_thread.entry(*tid).or_default() += count;
            }
            Record::End { records, drops } => {
                self.complete = true;
                self.end_records = Some(*records);
                self.end_drops = Some(*drops);
            }
            _ => {}
        }
    }

    fn notification(&mut self, n: &Notification, sink: &mut dyn ModelSink) {
        self.notifications += 1;
        self.first_ts = Some(self.first_ts.map_or(n.ts, |f| f.min(n.ts)));
        self.last_ts = Some(self.last_ts.map_or(n.ts, |l| l.max(n.ts)));
        *self.notif_counts.entry((n.stream, n.trace_type)).or_default() += 1;
        *self.thread_counts.entry(n.tid).or_default() += 1;
        match self.defs.stream_role(n.stream) {
            StreamRole::UrCall => self.ur_call(n, sink),
            StreamRole::Sycl => self.sycl(n, sink),
            StreamRole::MemAlloc => self.mem_alloc(n, sink),
            StreamRole::Buffer => self.buffer(n),
            StreamRole::Other => {}
        }
    }

    // ---- kernel dispatches (tracing services) ------------------------------------------

    fn kernel_dispatch(&mut self, d: &KernelDispatch) {
        let ur_call_open = d.ur_instance != 0 && self.ur_open.contains_key(&(d.tid, d.ur_instance));
        let open: Vec<OpenCommand<'_>> = self
            .open_commands
            .get(&d.tid)
            .into_iter()
            .flatten()
            .rev()
            .filter_map(|i| self.task_open.get(i).map(|t| OpenCommand { instance: *i, begin_ns: t.ts, name: &t.name }))
            .collect();
        self.kernel_dispatches.dispatch(d, self.defs.str(d.kernel), ur_call_open, &open);
    }

    // ---- ur.call -------------------------------------------------------------------------

    fn ur_call(&mut self, n: &Notification, sink: &mut dyn ModelSink) {
        let UserData::FunctionWithArgs { function_id, name, result, args, outs } = n.user_data else {
            return;
        };
        match n.trace_type {
            tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_BEGIN => {
                self.ur_open.insert((n.tid, n.instance), OpenUrCall { ts: n.ts });
                if let Some(kind) = names::ur_params(self.defs.str(name)).usm_kind
                    && let Some(inst) = self.alloc_open_by_tid.get(&n.tid)
                    && let Some(a) = self.alloc_open.get_mut(inst)
                {
                    a.ur_kind = Some(kind);
                }
            }
            tt::FUNCTION_WITH_ARGS_END | tt::FUNCTION_END => {
                let Some(open) = self.ur_open.remove(&(n.tid, n.instance)) else {
                    self.unmatched_ends += 1;
                    return;
                };
                let dur = n.ts.saturating_sub(open.ts);
                let fname = self.defs.str(name).to_owned();
                let fname = if fname.is_empty() { format!("ur_function_{function_id}") } else { fname };
                let agg = self.ur_aggs.entry(function_id).or_insert_with(|| UrAgg {
                    name: fname.clone(),
                    min: u64::MAX,
                    ..Default::default()
                });
                agg.calls += 1;
                agg.total += dur;
                agg.min = agg.min.min(dur);
                agg.max = agg.max.max(dur);
                if result.is_some_and(|r| r != 0) {
                    agg.errors += 1;
                }
                let command_instance = self.open_commands.get(&n.tid).and_then(|v| v.last().copied());
                let command = command_instance.and_then(|i| self.task_open.get(&i).map(|t| (i, t.name.as_str())));
                self.kernel_dispatches.ur_call_ended(n.tid, n.instance, command);
                let params = names::ur_params(&fname);
                let args_s = args.as_slice();
                let outs_s = outs.as_slice();
                if fname == "urEventGetProfilingInfo" {
                    self.profiling_info(args_s, outs_s, sink);
                }
                if let (Some(op), Some(si)) = (params.mem_op, params.size) {
                    let bytes = args_s.get(si).copied().unwrap_or(0);
                    let idx = self.mem_op_slot(&fname, "ur");
                    let m = &mut self.mem_ops[idx];
                    m.count += 1;
                    m.bytes += bytes;
                    m.host_ns += dur;
                    let _ = op;
                    sink.mem_op(&MemOpEvent {
                        op: &fname,
                        source: "ur",
                        tid: n.tid,
                        instance: n.instance,
                        begin_ns: open.ts,
                        end_ns: n.ts,
                        bytes,
                    });
                }
                sink.ur_call(&UrCallEvent {
                    tid: n.tid,
                    instance: n.instance,
                    function_id,
                    name: &fname,
                    begin_ns: open.ts,
                    end_ns: n.ts,
                    result,
                    args: args_s,
                    outs: outs_s,
                    command_instance,
                });
            }
            _ => {}
        }
    }

    /// `urEventGetProfilingInfo(hEvent, propName, propSize, pPropValue, pPropSizeRet)`: the
    /// value behind `pPropValue` (parameter 3) is in the end record's output values.
    fn profiling_info(&mut self, args: &[u64], outs: &[(u8, u64)], sink: &mut dyn ModelSink) {
        let (Some(&event), Some(&prop)) = (args.first(), args.get(1)) else { return };
        let value = outs.iter().find(|(i, _)| *i == 3).or(outs.first()).map(|(_, v)| *v);
        let Some(value) = value else { return };
        let Some(p) = self.device_pending.get_mut(&event) else { return };
        match prop {
            profiling_info::COMMAND_START => p.start = Some(value),
            profiling_info::COMMAND_END => p.end = Some(value),
            _ => return,
        }
        if p.done {
            return;
        }
        let (Some(start), Some(end)) = (p.start, p.end) else { return };
        if end < start {
            return;
        }
        p.done = true;
        let dur = end - start;
        let cmd = &mut self.cmds[p.command];
        cmd.device_count += 1;
        cmd.device_total += dur;
        if let Some(q) = p.queue_id.and_then(|q| self.queues.get_mut(&q)) {
            q.device_ns += dur;
        }
        if let Some(m) = p.mem_op.and_then(|i| self.mem_ops.get_mut(i)) {
            m.device_ns += dur;
            m.device_count += 1;
        }
        sink.device(&DeviceEvent {
            instance: p.instance,
            ur_event: event,
            name: &cmd.name,
            queue_id: p.queue_id,
            start_ns: start,
            end_ns: end,
        });
    }

    fn mem_op_slot(&mut self, op: &str, source: &'static str) -> usize {
        if let Some(&i) = self.mem_op_index.get(&(op.to_owned(), source)) {
            return i;
        }
        self.mem_ops.push(MemOpAgg { op: op.to_owned(), source, ..Default::default() });
        self.mem_op_index.insert((op.to_owned(), source), self.mem_ops.len() - 1);
        self.mem_ops.len() - 1
    }

    // ---- sycl ------------------------------------------------------------------------------

    fn queue_of(&self, n: &Notification, md: MetadataSetId) -> Option<u64> {
        if let Some(q) = self.defs.meta_u64(md, "queue_id") {
            return Some(q);
        }
        let (key, value) = n.stash?;
        (self.defs.str(key) == "queue_id" && value != 0).then_some(value)
    }

    fn command_name(&self, ev: &EventInfo) -> String {
        if let Some(k) = self.defs.meta_str(ev.metadata, "kernel_name").filter(|s| !s.is_empty()) {
            return k.to_owned();
        }
        let p = self.defs.payload_name(ev.payload);
        if p.is_empty() { "<unnamed>".to_owned() } else { names::base_name(p).to_owned() }
    }

    fn sycl(&mut self, n: &Notification, sink: &mut dyn ModelSink) {
        let ev = n.event.unwrap_or_default();
        let md = ev.metadata;
        match n.trace_type {
            tt::NODE_CREATE => {
                let full = self.defs.payload_name(ev.payload);
                let name = match self.defs.meta_str(md, "kernel_name").filter(|s| !s.is_empty()) {
                    Some(k) => k.to_owned(),
                    None if full.is_empty() => "<unnamed>".to_owned(),
                    None => full.to_owned(),
                };
                let kind = match n.user_data {
                    UserData::Str(s) => self.defs.str(s),
                    _ => "",
                };
                let node = self.graph.add_node_with_kind(name, kind.to_owned());
                if ev.uid != 0 {
                    self.node_by_uid.insert(ev.uid, node);
                }
                self.node_by_instance.insert(n.instance, node);
                let queue_id = self.queue_of(n, md);
                sink.node(&NodeEvent {
                    node,
                    instance: n.instance,
                    tid: n.tid,
                    ts_ns: n.ts,
                    name: self.graph.name(node),
                    kind,
                    queue_id,
                });
            }
            tt::EDGE_CREATE => {
                let source = self.node_by_uid.get(&ev.source_id).copied();
                let target = self.node_by_uid.get(&ev.target_id).copied();
                let edge = u32::try_from(self.graph.edge_count()).unwrap_or(u32::MAX);
                match (source, target) {
                    (Some(s), Some(t)) => self.graph.add_edge(s, t),
                    _ => self.unresolved_edges += 1,
                }
                let access_mode = self.defs.meta_u64(md, "access_mode");
                sink.edge(&EdgeEvent {
                    edge,
                    source,
                    target,
                    ts_ns: n.ts,
                    name: self.defs.payload_name(ev.payload),
                    access_mode,
                });
            }
            tt::TASK_BEGIN => {
                // task_begin's user data names the node kind only for some commands; the
                // node_create of the same command (same instance) always does.
                let kind = match n.user_data {
                    UserData::Str(s) => self.defs.str(s).to_owned(),
                    _ => self
                        .node_by_instance
                        .get(&n.instance)
                        .map(|&nd| self.graph.kind(nd).to_owned())
                        .unwrap_or_default(),
                };
                let task = OpenTask {
                    ts: n.ts,
                    tid: n.tid,
                    name: self.command_name(&ev),
                    kind,
                    queue_id: self.queue_of(n, md),
                    ur_event: None,
                    memory_size: self.defs.meta_u64(md, "memory_size"),
                };
                self.task_open.insert(n.instance, task);
                self.open_commands.entry(n.tid).or_default().push(n.instance);
            }
            tt::SIGNAL => {
                if let UserData::Signal { ur_event } | UserData::Pointer(ur_event) = n.user_data
                    && ur_event != 0
                    && let Some(t) = self.task_open.get_mut(&n.instance)
                {
                    t.ur_event = Some(ur_event);
                }
            }
            tt::TASK_END => self.task_end(n, sink),
            tt::QUEUE_CREATE | tt::QUEUE_DESTROY => {
                let destroy = n.trace_type == tt::QUEUE_DESTROY;
                let Some(queue_id) = self.defs.meta_u64(md, "queue_id").or_else(|| {
                    // the event is named "queue[<N>]"
                    let p = self.defs.payload_name(ev.payload);
                    p.strip_prefix("queue[")?.strip_suffix(']')?.parse().ok()
                }) else {
                    return;
                };
                let is_inorder = self.defs.meta(md, "is_inorder").and_then(|v| v.as_u64()).map(|v| v != 0);
                let device = self.defs.meta_str(md, "sycl_device_name").unwrap_or("").to_owned();
                let q = self.queues.entry(queue_id).or_default();
                if destroy {
                    q.destroyed = Some(n.ts);
                } else {
                    q.created = Some(n.ts);
                }
                if q.device.is_empty() {
                    q.device = device;
                }
                if q.is_inorder.is_none() {
                    q.is_inorder = is_inorder;
                }
                sink.queue(&QueueEvent {
                    destroy,
                    queue_id,
                    ts_ns: n.ts,
                    tid: n.tid,
                    is_inorder: q.is_inorder,
                    device: &q.device,
                });
            }
            _ => {}
        }
    }

    fn task_end(&mut self, n: &Notification, sink: &mut dyn ModelSink) {
        let Some(task) = self.task_open.remove(&n.instance) else {
            self.unmatched_ends += 1;
            return;
        };
        if let Some(stack) = self.open_commands.get_mut(&task.tid)
            && let Some(pos) = stack.iter().rposition(|&i| i == n.instance)
        {
            stack.remove(pos);
        }
        let dur = n.ts.saturating_sub(task.ts);
        self.kernel_dispatches.command_closed(task.tid, n.instance, task.ts, n.ts, &task.name);
        let ci = match self.cmd_index.get(&task.name) {
            Some(&i) => i,
            None => {
                self.cmds.push(CmdAgg { name: task.name.clone(), kind: task.kind.clone(), ..Default::default() });
                self.cmd_index.insert(task.name.clone(), self.cmds.len() - 1);
                self.cmds.len() - 1
            }
        };
        let cmd = &mut self.cmds[ci];
        cmd.count += 1;
        cmd.host_total += dur;
        cmd.host_max = cmd.host_max.max(dur);
        if cmd.kind.is_empty() {
            cmd.kind = task.kind.clone();
        }
        if let Some(q) = task.queue_id {
            if !cmd.queues.contains(&q) {
                cmd.queues.push(q);
            }
            let qa = self.queues.entry(q).or_default();
            qa.commands += 1;
            qa.host_ns += dur;
        }
        // USM memcpy tasks carry the node's instance + 1 (docs/reference/sycl-runtime.md §7).
        let node = self.node_by_instance.get(&n.instance).copied().or_else(|| {
            let prev = self.node_by_instance.get(&n.instance.wrapping_sub(1)).copied()?;
            (names::base_name(self.graph.name(prev)) == task.name).then_some(prev)
        });
        if let Some(node) = node {
            self.graph.add_host_time(node, dur);
        }
        let mem_op = match task.memory_size {
            Some(bytes) if bytes > 0 => {
                let idx = self.mem_op_slot(&task.name, "sycl");
                let m = &mut self.mem_ops[idx];
                m.count += 1;
                m.bytes += bytes;
                m.host_ns += dur;
                sink.mem_op(&MemOpEvent {
                    op: &task.name,
                    source: "sycl",
                    tid: task.tid,
                    instance: n.instance,
                    begin_ns: task.ts,
                    end_ns: n.ts,
                    bytes,
                });
                Some(idx)
            }
            _ => None,
        };
        if let Some(ev) = task.ur_event {
            self.device_pending.insert(
                ev,
                PendingDevice {
                    instance: n.instance,
                    command: ci,
                    queue_id: task.queue_id,
                    mem_op,
                    start: None,
                    end: None,
                    done: false,
                },
            );
        }
        sink.command(&CommandEvent {
            instance: n.instance,
            tid: task.tid,
            name: &task.name,
            kind: &task.kind,
            queue_id: task.queue_id,
            begin_ns: task.ts,
            end_ns: n.ts,
            node,
            ur_event: task.ur_event,
            memory_size: task.memory_size,
        });
    }

    // ---- sycl.experimental.mem_alloc ---------------------------------------------------

    fn mem_alloc(&mut self, n: &Notification, sink: &mut dyn ModelSink) {
        let ev = n.event.unwrap_or_default();
        let md = ev.metadata;
        match n.trace_type {
            tt::MEM_ALLOC_BEGIN => {
                let ud = match n.user_data {
                    UserData::Str(s) => self.defs.str(s),
                    _ => "",
                };
                let name = self.defs.payload_name(ev.payload);
                let host_hint = ud.contains("host") || name.contains("Host");
                self.alloc_open.insert(n.instance, OpenAlloc { ts: n.ts, host_hint, ur_kind: None });
                self.alloc_open_by_tid.insert(n.tid, n.instance);
            }
            tt::MEM_ALLOC_END => {
                let open = self.alloc_open.remove(&n.instance);
                if self.alloc_open_by_tid.get(&n.tid) == Some(&n.instance) {
                    self.alloc_open_by_tid.remove(&n.tid);
                }
                let begin = open.as_ref().map_or(n.ts, |o| o.ts);
                let (pointer, bytes, kind, device) = match n.user_data {
                    UserData::MemAlloc { alloc_pointer, alloc_size, .. } => {
                        (Some(alloc_pointer), alloc_size, "buffer", String::new())
                    }
                    _ => {
                        let device = self.defs.meta_str(md, "sycl_device_name").unwrap_or("").to_owned();
                        let kind = match &open {
                            Some(OpenAlloc { ur_kind: Some(k), .. }) => k,
                            Some(OpenAlloc { host_hint: true, .. }) => "host",
                            _ if device == "Host" => "host",
                            _ => "usm",
                        };
                        (
                            self.defs.meta_u64(md, "memory_ptr"),
                            self.defs.meta_u64(md, "memory_size").unwrap_or(0),
                            kind,
                            device,
                        )
                    }
                };
                if let Some(p) = pointer.filter(|&p| p != 0) {
                    if let Some(old) = self.live.insert(p, bytes) {
                        self.live_bytes = self.live_bytes.saturating_sub(old);
                    }
                    self.live_bytes += bytes;
                    self.peak_live = self.peak_live.max(self.live_bytes);
                }
                let k = self.alloc_kinds.entry((kind.to_owned(), device.clone())).or_insert_with(|| AllocKindStats {
                    kind: kind.to_owned(),
                    device: device.clone(),
                    ..Default::default()
                });
                k.count += 1;
                k.bytes += bytes;
                k.max_bytes = k.max_bytes.max(bytes);
                sink.memory(&MemoryEvent {
                    release: false,
                    tid: n.tid,
                    begin_ns: begin,
                    end_ns: n.ts,
                    pointer,
                    bytes,
                    kind,
                    device: &device,
                    live_bytes: self.live_bytes,
                });
            }
            tt::MEM_RELEASE_BEGIN => {
                self.release_open.insert(n.instance, n.ts);
            }
            tt::MEM_RELEASE_END => {
                let begin = self.release_open.remove(&n.instance).unwrap_or(n.ts);
                let pointer = match n.user_data {
                    UserData::MemAlloc { alloc_pointer, .. } => Some(alloc_pointer),
                    _ => self.defs.meta_u64(md, "memory_ptr"),
                };
                self.releases += 1;
                let mut bytes = 0;
                if let Some(b) = pointer.and_then(|p| self.live.remove(&p)) {
                    bytes = b;
                    self.live_bytes = self.live_bytes.saturating_sub(b);
                }
                let kind = if matches!(n.user_data, UserData::MemAlloc { .. }) { "buffer" } else { "usm" };
                sink.memory(&MemoryEvent {
                    release: true,
                    tid: n.tid,
                    begin_ns: begin,
                    end_ns: n.ts,
                    pointer,
                    bytes,
                    kind,
                    device: self.defs.meta_str(md, "sycl_device_name").unwrap_or(""),
                    live_bytes: self.live_bytes,
                });
            }
            _ => {}
        }
    }

    // ---- sycl.experimental.buffer --------------------------------------------------------

    fn buffer(&mut self, n: &Notification) {
        match n.trace_type {
            tt::MEMORY_OBJECT_CONSTRUCT => {
                self.buffers.constructed += 1;
                if let UserData::OffloadBuffer { element_size, dim, range, .. } = n.user_data {
                    let dims = (dim as usize).clamp(1, 3);
                    let elems = range[..dims].iter().map(|&r| r.max(1)).fold(1u64, u64::saturating_mul);
                    self.buffers.bytes =
                        self.buffers.bytes.saturating_add(elems.saturating_mul(u64::from(element_size)));
                }
            }
            tt::MEMORY_OBJECT_DESTRUCT => self.buffers.destructed += 1,
            tt::MEMORY_OBJECT_ASSOCIATE => self.buffers.associations += 1,
            tt::ACCESSOR => self.buffers.accessors += 1,
            _ => {}
        }
    }

    // ---- the end ---------------------------------------------------------------------------

    /// The summary of everything pushed.
    pub fn finish(self) -> Summary {
        let wall = match (self.first_ts, self.last_ts) {
            (Some(f), Some(l)) => l.saturating_sub(f),
            _ => 0,
        };
        let mut ur_calls: Vec<UrFunctionStats> = self
            .ur_aggs
            .iter()
            .map(|(&id, a)| UrFunctionStats {
                name: a.name.clone(),
                function_id: id,
                calls: a.calls,
                total_ns: a.total,
                mean_ns: a.total / a.calls.max(1),
                min_ns: if a.calls == 0 { 0 } else { a.min },
                max_ns: a.max,
                wall_share: if wall == 0 { 0.0 } else { a.total as f64 / wall as f64 },
                errors: a.errors,
            })
            .collect();
        ur_calls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));

        let mut commands: Vec<CommandStats> = self
            .cmds
            .iter()
            .map(|c| CommandStats {
                name: c.name.clone(),
                kind: c.kind.clone(),
                count: c.count,
                host_total_ns: c.host_total,
                host_mean_ns: c.host_total / c.count.max(1),
                host_max_ns: c.host_max,
                device_count: c.device_count,
                device_total_ns: (c.device_count > 0).then_some(c.device_total),
                device_mean_ns: (c.device_count > 0).then(|| c.device_total / c.device_count),
                queues: c.queues.clone(),
            })
            .collect();
        commands.sort_by(|a, b| b.host_total_ns.cmp(&a.host_total_ns).then(a.name.cmp(&b.name)));

        let ops = self
            .mem_ops
            .iter()
            .map(|m| {
                let device_ns = (m.device_count > 0).then_some(m.device_ns);
                let t = if m.device_count == m.count && m.device_ns > 0 { m.device_ns } else { m.host_ns };
                MemOpStats {
                    op: m.op.clone(),
                    source: m.source.to_owned(),
                    count: m.count,
                    bytes: m.bytes,
                    host_ns: m.host_ns,
                    device_ns,
                    rate_gb_s: (t > 0 && m.bytes > 0).then(|| m.bytes as f64 / t as f64),
                }
            })
            .collect();

        let queues = self
            .queues
            .iter()
            .map(|(&id, q)| QueueStats {
                queue_id: id,
                device: q.device.clone(),
                is_inorder: q.is_inorder,
                created_ns: q.created,
                destroyed_ns: q.destroyed,
                commands: q.commands,
                host_ns: q.host_ns,
                device_ns: q.device_ns,
            })
            .collect();

        let chain = self.graph.longest_chain();
        let graph = GraphSummary {
            nodes: self.graph.node_count() as u64,
            edges: self.graph.edge_count() as u64,
            unresolved_edges: self.unresolved_edges,
            longest_chain_len: chain.nodes.len() as u64,
            longest_chain: chain.nodes.iter().map(|&n| self.graph.name(n).to_owned()).collect(),
            longest_chain_host_ns: chain.nodes.iter().map(|&n| self.graph.host_ns(n)).sum(),
        };

        let mut threads: Vec<ThreadStats> = self
            .thread_counts
            .iter()
            .map(|(&tid, &c)| ThreadStats {
                tid,
                name: self.defs.thread_name(tid).unwrap_or("").to_owned(),
                notifications: c,
                drops: self.drops_by_thread.get(&tid).copied().unwrap_or(0),
            })
            .collect();
        for (tid, name) in self.defs.threads() {
            if !self.thread_counts.contains_key(&tid) {
                threads.push(ThreadStats {
                    tid,
                    name: name.to_owned(),
                    notifications: 0,
                    drops: self.drops_by_thread.get(&tid).copied().unwrap_or(0),
                });
            }
        }
        threads.sort_by(|a, b| b.notifications.cmp(&a.notifications).then(a.tid.cmp(&b.tid)));

        let mut notifications: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (&(stream, ty), &c) in &self.notif_counts {
            *notifications
                .entry(self.defs.stream_name(stream).into_owned())
                .or_default()
                .entry(names::trace_type_name(ty).into_owned())
                .or_default() += c;
        }

        let unclosed =
            (self.ur_open.len() + self.task_open.len() + self.alloc_open.len() + self.release_open.len()) as u64;
        Summary {
            trace: TraceFacts {
                info: self.defs.info().iter().cloned().collect(),
                records: self.records,
                notifications: self.notifications,
                first_ts_ns: self.first_ts,
                last_ts_ns: self.last_ts,
                wall_ns: wall,
                complete: self.complete,
                end_records: self.end_records,
                end_drops: self.end_drops,
                unmatched_ends: self.unmatched_ends,
                unclosed_begins: unclosed,
            },
            ur_calls,
            commands,
            memory: MemorySummary {
                allocations: self.alloc_kinds.into_values().collect(),
                peak_live_bytes: self.peak_live,
                live_bytes_at_end: self.live_bytes,
                releases: self.releases,
                buffers: self.buffers,
                ops,
            },
            queues,
            graph,
            threads,
            drops: DropStats { total: self.drops_by_thread.values().sum(), by_thread: self.drops_by_thread },
            kernel_allocations: self.kernel_dispatches.finish(),
            notifications,
        }
    }
}
