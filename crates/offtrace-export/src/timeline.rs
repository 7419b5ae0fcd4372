//! What the timeline exports (Perfetto, Chrome JSON) share: typed records → tracks, slices,
//! flows and counters, written to a [`TimelineOut`] as the records stream past.
//!
//! Tracks: the process; a track per thread (API calls, host waits, marker ranges); per device a
//! group with a track per queue / stream (device work from device start to end; work whose
//! device time is unknown is an instant at its enqueue); counter tracks (live allocated bytes,
//! each counter the trace defines). Each logical track is split into lanes (`lanes.rs`) so that
//! no two slices of one track overlap. Flows go from each API call to the device work it caused
//! (same correlation id): the device work is recorded inside its call, so its record comes first
//! and the call's record then starts the flow. Device work drawn after its call's slice without
//! a flow of its own (each command of a CUDA graph launch: no enqueue record) gets one from an
//! anchor inside the call's slice, found among the recent calls ([`RECENT_CALLS`]). Task-graph
//! edges between commands are flows from the producer's device slice to the consumer's
//! (`dependencies.rs`).
//!
//! Memory: definitions, a lane set per track, and bounded maps of work waiting for its call or
//! its completion ([`PENDING_MAX`] each, oldest first out).

use std::collections::VecDeque;

use offtrace_analysis::early::{Completion, EarlyCompletions, RecentKeys};
use offtrace_analysis::live_memory::{Change, LiveMemory};
use offtrace_format::{Activity, ApiCall, CopyDirection, KernelAllocation, Record, StrId, TaskGraphRecord, phase};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::defs::{ArgValue, Defs};
use crate::dependencies::{Dependencies, DrawnCommand};
use crate::lanes::{LaneMode, Lanes};

/// Work remembered while waiting for its call or completion, at most (per map).
pub(crate) const PENDING_MAX: usize = 1 << 16;
/// Device work with device times waiting for its call's record, per thread, at most.
const AWAITING_CALL_MAX: usize = 64;

/// `MEMORY_ALLOC` free and sub-allocation, `MARKER` range, the `SYNC` kind (as the services
/// number them).
const MEMORY_FREE: u32 = 1;
const MEMORY_SUB_ALLOC: u32 = 2;
const MARKER_RANGE: u32 = 1;
const SYNC_KIND: u32 = 8;
/// `TASK_GRAPH` edge and task operations.
const GRAPH_EDGE_CREATE: u32 = 1;
const GRAPH_TASK: u32 = 2;

pub(crate) const PROCESS_TRACK: u64 = 1;
const LIVE_BYTES_TRACK: u64 = 2;

/// What a track is, for its descriptor.
#[derive(Debug, Clone)]
pub(crate) enum TrackKind {
    Process {
        pid: i64,
    },
    Thread {
        tid: u32,
        pid: i64,
    },
    /// A device's group of queue tracks.
    Device,
    Queue,
    /// A lane of an overlapping track (child of the track it relieves).
    Lane,
    Counter {
        unit: String,
    },
}

/// One slice to draw.
#[derive(Debug)]
pub(crate) struct Slice<'a> {
    pub track: u64,
    pub start: u64,
    pub end: u64,
    pub name: &'a str,
    pub category: &'a str,
    /// This slice starts the flow with this id (an API call that caused device work).
    pub flow_out: Option<u64>,
    /// This slice ends the flow with this id (device work).
    pub flow_in: Option<u64>,
    /// Dependency flows (task-graph edges) this slice starts (a producer's, from its end) and
    /// ends (a consumer's): `dependencies.rs`.
    pub deps_out: &'a [u64],
    pub deps_in: &'a [u64],
    pub args: &'a [(&'a str, ArgValue)],
    /// A zero-length event: an instant, not a slice.
    pub instant: bool,
    /// Text arguments (a kernel's allocation properties: `allocations[0]` =
    /// `arg 0: 65536 B DEVICE @ 0x1000`).
    pub texts: &'a [(String, String)],
}

/// Where the timeline goes.
pub(crate) trait TimelineOut {
    /// Declares (or renames) a track before its first slice.
    fn track(&mut self, id: u64, parent: Option<u64>, name: &str, kind: &TrackKind);
    fn slice(&mut self, s: &Slice<'_>);
    /// Starts flow `id` at `ts` inside a slice already written on `track` (an API call's, for
    /// device work drawn after it: [`Timeline::late_flow`]; a producer's, for a dependency).
    fn flow_start(&mut self, track: u64, ts: u64, category: &str, id: u64, flow: FlowName);
    /// Ends dependency flow `id` at `ts` inside a slice already written on `track` (a consumer
    /// drawn before its producer or its edge).
    fn flow_end(&mut self, track: u64, ts: u64, category: &str, id: u64);
    fn counter(&mut self, track: u64, ts: u64, value: f64);
}

/// What a flow stands for (Chrome's flow events' name, Perfetto's anchor instants').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowName {
    /// From an API call to the device work it caused.
    Launch,
    /// From a command to one that waited for it (a task-graph edge).
    Dependency,
}

impl FlowName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::Dependency => "dependency",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TrackKey {
    Thread(u32),
    /// A queue's definition id.
    Queue(u64),
}

/// Device work waiting for its completion.
#[derive(Debug, Clone)]
struct PendingWork {
    /// The queue's handle, and its definition id when the work was enqueued (a later queue may
    /// get the same handle).
    queue: u64,
    queue_id: u64,
    device: u64,
    /// The thread that enqueued it (whose call record starts its flow).
    tid: u32,
    name: StrId,
    op: u32,
    ts: u64,
    bytes: u64,
    direction: CopyDirection,
    /// A kernel's allocation properties.
    allocations: Vec<KernelAllocation>,
}

impl PendingWork {
    /// The work of `a`; its queue id is resolved when it is drawn, unless set before.
    fn of(a: &Activity) -> Self {
        Self {
            queue: a.queue,
            queue_id: 0,
            device: a.device,
            tid: a.tid,
            name: a.name,
            op: a.op,
            ts: a.ts,
            bytes: a.bytes,
            direction: a.direction,
            allocations: a.allocations.clone(),
        }
    }
}

/// What a late flow needs of a recent API call with a correlation id (no strings, no record).
#[derive(Debug, Clone, Copy, Default)]
struct RecentCall {
    correlation: u64,
    /// The call's lane.
    track: u64,
    /// Where a late flow starts: 1 ns before the call's end, inside its slice.
    anchor: u64,
    /// The call's kind (the anchor's category).
    kind: u32,
}

/// Slots for recent calls (2 MiB once the first call with a correlation id comes). Correlation
/// ids are handed out in order, so this holds about the last 65,536 calls: enough for the
/// completions CUPTI reports from its 8 MiB buffers long after the call.
const RECENT_CALLS: usize = 1 << 16;

/// Recent values by correlation id, direct-mapped by the id's low bits (a later id that falls
/// on a slot takes it; the slots are made at the first insert): one store per insert, one
/// compare per look-up. Correlation ids are handed out in order, so it holds about the last
/// [`RECENT_CALLS`] ids.
#[derive(Debug)]
pub(crate) struct ByCorrelation<T> {
    slots: Vec<(u64, T)>,
}

impl<T> Default for ByCorrelation<T> {
    fn default() -> Self {
        Self { slots: Vec::new() }
    }
}

impl<T: Copy + Default> ByCorrelation<T> {
    pub fn insert(&mut self, correlation: u64, value: T) {
        if self.slots.is_empty() {
            self.slots = vec![(0, T::default()); RECENT_CALLS];
        }
        self.slots[correlation as usize & (RECENT_CALLS - 1)] = (correlation, value);
    }

    pub fn get(&self, correlation: u64) -> Option<T> {
        // Id 0 (no correlation) would match an empty slot.
        self.slots
            .get(correlation as usize & (RECENT_CALLS - 1))
            .filter(|(c, _)| *c == correlation && correlation != 0)
            .map(|(_, v)| *v)
    }
}

/// Recent API calls with a correlation id.
type RecentCalls = ByCorrelation<RecentCall>;

impl RecentCalls {
    fn remember(&mut self, call: RecentCall) {
        self.insert(call.correlation, call);
    }
}

/// Flow ids of the flows to commands that share their call's correlation id: bit 52 set, apart
/// from the correlation ids that name the other flows (counters from 1; CUPTI's are 32-bit) and
/// below 2^53, so that JSON readers that parse numbers as doubles (JavaScript's: Chrome's trace
/// viewer) keep the ids apart. (With the top bit, every such id read as 2^63.)
const EXTRA_FLOWS: u64 = 1 << 52;

/// Device work with device times waiting for its call: kind, correlation, what to draw, times.
type AwaitingCall = (u32, u64, PendingWork, (u64, u64));

/// A bounded map: oldest entries leave first.
#[derive(Debug)]
pub(crate) struct Bounded<K, V> {
    map: FxHashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: std::hash::Hash + Eq + Copy, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Self { map: FxHashMap::default(), order: VecDeque::new() }
    }
}

impl<K: std::hash::Hash + Eq + Copy, V> Bounded<K, V> {
    /// Inserts; returns what left to make room: only when more than [`PENDING_MAX`] entries
    /// are in the map (keys removed earlier, still in `order`, take no room).
    pub fn insert(&mut self, k: K, v: V) -> Option<(K, V)> {
        if self.map.insert(k, v).is_none() {
            self.order.push_back(k);
        }
        while self.map.len() > PENDING_MAX {
            let old = self.order.pop_front()?;
            if let Some(v) = self.map.remove(&old) {
                return Some((old, v));
            }
        }
        None
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k)
    }

    fn is_full(&self) -> bool {
        self.map.len() >= PENDING_MAX
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        // The key stays in `order` until it reaches the front; it is skipped then.
        let v = self.map.remove(k);
        if self.order.len() > 2 * PENDING_MAX.max(self.map.len()) {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
        v
    }

    pub fn drain(&mut self) -> Vec<(K, V)> {
        let mut out = Vec::with_capacity(self.map.len());
        while let Some(k) = self.order.pop_front() {
            if let Some(v) = self.map.remove(&k) {
                out.push((k, v));
            }
        }
        out
    }
}

/// Typed records → timeline.
#[derive(Debug)]
pub(crate) struct Timeline {
    pub defs: Defs,
    declared: FxHashSet<u64>,
    devices_declared: FxHashMap<u64, u64>,
    queue_tracks: FxHashMap<u64, u64>,
    lanes: FxHashMap<TrackKey, Lanes>,
    lane_tracks: FxHashMap<(TrackKey, usize), u64>,
    next_track: u64,
    /// Correlation ids of device work whose call has not come yet: the call starts a flow.
    flow_targets: Bounded<u64, ()>,
    /// Flows started by a call whose device work completes later.
    flows_started: Bounded<u64, ()>,
    /// Recent API calls with a correlation id: device work of theirs drawn later without a
    /// flow of its own (a CUDA graph launch's commands, completions from CUPTI's buffers long
    /// after the call) gets a flow from an anchor inside the call's slice (the call's slice
    /// is written at once, so its own flow list is closed by then).
    recent_calls: RecentCalls,
    /// The last flow id handed out for such a flow or a dependency flow (below
    /// [`EXTRA_FLOWS`]).
    next_flow: u64,
    /// Task-graph edges waiting for their commands' slices, and the slices drawn.
    dependencies: Dependencies,
    /// Device work without device times yet: (kind, correlation) → what to draw.
    pending: Bounded<(u32, u64), PendingWork>,
    /// Device work with its device times whose call has not come yet, per thread: drawn when
    /// the call comes (so the flow has both ends), or at the end.
    awaiting_call: FxHashMap<u32, Vec<AwaitingCall>>,
    /// Completions whose enqueue record has not come yet (drawn at the end, or when forgotten).
    /// Several of one CUDA graph launch: `offtrace_analysis::early`.
    early: EarlyCompletions<(PendingWork, (u64, u64))>,
    /// Commands completed already: a later completion of one is not drawn again.
    completed: RecentKeys,
    open_waits: Bounded<(u32, u64), u64>,
    open_ranges: Bounded<u64, (u64, u32)>,
    counters: FxHashMap<u64, (u64, u8)>,
    live: LiveMemory,
    pid: i64,
    process_declared: bool,
    args: Vec<(String, ArgValue)>,
    /// Slices and instants written.
    pub items: u64,
}

impl Timeline {
    pub fn new() -> Self {
        Self {
            defs: Defs::default(),
            declared: FxHashSet::default(),
            devices_declared: FxHashMap::default(),
            queue_tracks: FxHashMap::default(),
            lanes: FxHashMap::default(),
            lane_tracks: FxHashMap::default(),
            next_track: 1 << 40,
            flow_targets: Bounded::default(),
            flows_started: Bounded::default(),
            recent_calls: RecentCalls::default(),
            next_flow: 0,
            dependencies: Dependencies::default(),
            pending: Bounded::default(),
            awaiting_call: FxHashMap::default(),
            early: EarlyCompletions::default(),
            completed: RecentKeys::default(),
            open_waits: Bounded::default(),
            open_ranges: Bounded::default(),
            counters: FxHashMap::default(),
            live: LiveMemory::default(),
            pid: 0,
            process_declared: false,
            args: Vec::new(),
            items: 0,
        }
    }

    fn new_track(&mut self) -> u64 {
        self.next_track += 1;
        self.next_track
    }

    fn thread_track(&mut self, out: &mut dyn TimelineOut, tid: u32) -> u64 {
        let id = (1 << 32) | u64::from(tid);
        if self.declared.insert(id) {
            out.track(id, Some(PROCESS_TRACK), &self.defs.thread_name(tid), &TrackKind::Thread { tid, pid: self.pid });
        }
        id
    }

    /// The track of the queue with definition id `queue_id` (one per queue the program created,
    /// also when a later queue got the handle of a destroyed one).
    fn queue_track(&mut self, out: &mut dyn TimelineOut, queue_id: u64, device: u64) -> u64 {
        if let Some(&t) = self.queue_tracks.get(&queue_id) {
            return t;
        }
        let def = self.defs.queues.get(&queue_id).copied().unwrap_or_default();
        let queue = def.handle;
        let device = if def.device != 0 { def.device } else { device };
        let group = match self.devices_declared.get(&device) {
            Some(&g) => g,
            None => {
                let g = self.new_track();
                out.track(g, Some(PROCESS_TRACK), &self.defs.device_name(device), &TrackKind::Device);
                self.devices_declared.insert(device, g);
                g
            }
        };
        let t = self.new_track();
        let order = match def.flags {
            Some(f) if f & 1 != 0 => " (in-order)",
            Some(_) => " (out-of-order)",
            None => "",
        };
        let name = match (queue, def.reused) {
            (0, _) => "unknown queue".to_owned(),
            (_, false) => format!("queue {queue:#x}{order}"),
            // Named apart from the earlier queue at the same handle.
            (_, true) => format!("queue {queue:#x}{order} #{queue_id}"),
        };
        out.track(t, Some(group), &name, &TrackKind::Queue);
        self.queue_tracks.insert(queue_id, t);
        t
    }

    /// The track (lane) a slice goes to on logical track `key` whose lane 0 is `base`.
    fn lane(&mut self, out: &mut dyn TimelineOut, key: TrackKey, base: u64, start: u64, end: u64) -> u64 {
        let mode = match key {
            TrackKey::Thread(_) => LaneMode::Nested,
            TrackKey::Queue(_) => LaneMode::Flat,
        };
        let lanes = self.lanes.entry(key).or_insert_with(|| Lanes::new(mode));
        let lane = lanes.place(start, end);
        if lane == 0 {
            return base;
        }
        if let Some(&t) = self.lane_tracks.get(&(key, lane)) {
            return t;
        }
        let t = self.new_track();
        out.track(t, Some(base), &format!("overlapping (lane {})", lane + 1), &TrackKind::Lane);
        self.lane_tracks.insert((key, lane), t);
        t
    }

    fn declare_process(&mut self, out: &mut dyn TimelineOut) {
        if !self.process_declared {
            self.process_declared = true;
            let name = self
                .defs
                .info
                .iter()
                .find(|(k, _)| k == "command")
                .map_or_else(|| "traced program".to_owned(), |(_, v)| v.clone());
            self.pid = self.defs.info.iter().find(|(k, _)| k == "pid").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
            out.track(PROCESS_TRACK, None, &name, &TrackKind::Process { pid: self.pid });
        }
    }

    /// Takes one record (file order).
    pub fn push(&mut self, r: &Record, out: &mut dyn TimelineOut) {
        if self.defs.observe(r) {
            if let Record::Thread { tid, .. } = r {
                let id = (1 << 32) | u64::from(*tid);
                if self.declared.contains(&id) {
                    let kind = TrackKind::Thread { tid: *tid, pid: self.pid };
                    out.track(id, Some(PROCESS_TRACK), &self.defs.thread_name(*tid), &kind);
                }
            }
            return;
        }
        self.declare_process(out);
        match r {
            Record::ApiCall(a) => self.api_call(a, out),
            Record::Activity(a) => self.activity(a, out),
            Record::TaskGraph(t) => self.task_graph(t, out),
            Record::Queue(q) => {
                self.defs.queue_record(q);
            }
            Record::Memory(m) => {
                if self.declared.insert(LIVE_BYTES_TRACK) {
                    out.track(
                        LIVE_BYTES_TRACK,
                        Some(PROCESS_TRACK),
                        "live allocated bytes",
                        &TrackKind::Counter { unit: "bytes".into() },
                    );
                }
                // Values in time order: each thread's records reach the file as a block.
                let change = match m.op {
                    MEMORY_FREE => Change::Free { ptr: m.ptr },
                    // A sub-buffer: its parent holds the bytes.
                    MEMORY_SUB_ALLOC => Change::Alloc { ptr: m.ptr, size: 0 },
                    _ => Change::Alloc { ptr: m.ptr, size: m.size },
                };
                self.live.push(m.ts, change, |ts, live| out.counter(LIVE_BYTES_TRACK, ts, live as f64));
            }
            Record::CounterDef(d) => {
                let t = self.new_track();
                let name = format!("{} ({})", self.defs.str(d.name), self.defs.device_name(d.device));
                out.track(
                    t,
                    Some(PROCESS_TRACK),
                    &name,
                    &TrackKind::Counter { unit: self.defs.str(d.unit).to_owned() },
                );
                self.counters.insert(d.counter, (t, d.value_type));
            }
            Record::CounterSample(s) => {
                let (t, value_type) = match self.counters.get(&s.counter) {
                    Some(&c) => c,
                    None => {
                        let t = self.new_track();
                        out.track(
                            t,
                            Some(PROCESS_TRACK),
                            &format!("counter {}", s.counter),
                            &TrackKind::Counter { unit: String::new() },
                        );
                        self.counters.insert(s.counter, (t, 0));
                        (t, 0)
                    }
                };
                let v = match value_type {
                    1 => s.value as i64 as f64,
                    2 => f64::from_bits(s.value),
                    _ => s.value as f64,
                };
                out.counter(t, s.ts, v);
            }
            Record::Sync(s) => match s.phase {
                phase::ENTER => {
                    self.open_waits.insert((s.tid, s.correlation), s.ts);
                }
                phase::EXIT => {
                    if let Some(start) = self.open_waits.remove(&(s.tid, s.correlation)) {
                        let name = self.defs.op(SYNC_KIND, s.op).into_owned();
                        self.thread_slice(out, s.tid, start, s.ts, &name, "SYNC", &[]);
                    }
                }
                _ => {}
            },
            Record::Marker(m) => {
                let msg = self.defs.str(m.message).to_owned();
                if m.op == MARKER_RANGE {
                    match m.phase {
                        phase::ENTER => {
                            self.open_ranges.insert(m.range_id, (m.ts, m.message.0));
                        }
                        phase::EXIT => {
                            if let Some((start, _)) = self.open_ranges.remove(&m.range_id) {
                                self.thread_slice(out, m.tid, start, m.ts, &msg, "MARKER", &[]);
                            }
                        }
                        _ => {}
                    }
                } else {
                    self.thread_instant(out, m.tid, m.ts, &msg, "MARKER");
                }
            }
            Record::Generic(g) => {
                let name = format!("{}.{}", self.defs.kind(g.kind), self.defs.op(g.kind, g.op));
                let cat = self.defs.kind(g.kind).into_owned();
                self.thread_instant(out, g.tid, g.ts, &name, &cat);
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn thread_slice(
        &mut self,
        out: &mut dyn TimelineOut,
        tid: u32,
        start: u64,
        end: u64,
        name: &str,
        category: &str,
        args: &[(&str, ArgValue)],
    ) {
        let base = self.thread_track(out, tid);
        let track = self.lane(out, TrackKey::Thread(tid), base, start, end);
        out.slice(&Slice {
            track,
            start,
            end,
            name,
            category,
            flow_out: None,
            flow_in: None,
            deps_out: &[],
            deps_in: &[],
            args,
            instant: false,
            texts: &[],
        });
        self.items += 1;
    }

    fn thread_instant(&mut self, out: &mut dyn TimelineOut, tid: u32, ts: u64, name: &str, category: &str) {
        let base = self.thread_track(out, tid);
        let track = self.lane(out, TrackKey::Thread(tid), base, ts, ts);
        out.slice(&Slice {
            track,
            start: ts,
            end: ts,
            name,
            category,
            flow_out: None,
            flow_in: None,
            deps_out: &[],
            deps_in: &[],
            args: &[],
            instant: true,
            texts: &[],
        });
        self.items += 1;
    }

    fn api_call(&mut self, a: &ApiCall, out: &mut dyn TimelineOut) {
        let mut ready = Vec::new();
        if let Some(waiting) = self.awaiting_call.get_mut(&a.tid)
            && a.correlation != 0
        {
            let mut i = 0;
            while i < waiting.len() {
                if waiting[i].1 == a.correlation {
                    ready.push(waiting.remove(i));
                } else {
                    i += 1;
                }
            }
        }
        // A flow starts only where its end is sure to be drawn: at device work drawn right
        // here (`ready`), or at work still waiting (`targeted`: drawn at its completion, when
        // it leaves the pending map, or at the end, with the flow's end from `flows_started`,
        // which therefore never drops an entry: when it is full, no flow starts).
        let targeted = self.flow_targets.remove(&a.correlation).is_some();
        let tracked = a.correlation != 0 && targeted && ready.is_empty() && !self.flows_started.is_full();
        if tracked {
            self.flows_started.insert(a.correlation, ());
        }
        let flow_out = (a.correlation != 0 && (tracked || !ready.is_empty())).then_some(a.correlation);
        let track = self.write_call(out, a, flow_out);
        if a.correlation != 0 {
            self.recent_calls.remember(RecentCall {
                correlation: a.correlation,
                track,
                anchor: a.end.saturating_sub(1).max(a.start),
                kind: a.kind,
            });
        }
        for (kind, corr, work, times) in ready {
            self.device_slice(out, kind, &work, corr, Some(times), Some(corr));
        }
    }

    fn work_name(&self, kind: u32, op: u32, name: StrId) -> String {
        if name.0 != 0 { self.defs.str(name).to_owned() } else { self.defs.op(kind, op).into_owned() }
    }

    fn activity(&mut self, a: &Activity, out: &mut dyn TimelineOut) {
        let known = a.device_start != 0 && a.device_end >= a.device_start;
        let key = (a.kind, a.correlation);
        if a.phase != phase::COMPLETE && a.correlation != 0 {
            self.dependencies.enqueued(a.tid, a.correlation);
        }
        // One slice per command and runtime level (`docs/record-model.md`): an enqueue record and
        // its completion meet whichever comes first; a second completion is not drawn.
        if a.phase == phase::COMPLETE && a.correlation != 0 && self.completed.contains(key) {
            return;
        }
        if a.phase == phase::COMPLETE && a.correlation != 0 && known && !self.pending.contains_key(&key) {
            let times = (a.device_start, a.device_end);
            if let Completion::Commands(own) = self.early.complete(key, (PendingWork::of(a), times), times) {
                for (old, (w, times)) in own {
                    let flow_in = self.flows_started.remove(&old.1).map(|()| old.1);
                    self.device_slice(out, old.0, &w, old.1, Some(times), flow_in);
                }
            }
            return;
        }
        if a.phase != phase::COMPLETE
            && a.correlation != 0
            && !known
            && let Some((_, (s, e))) = self.early.take(key)
        {
            let mut merged = a.clone();
            merged.device_start = s;
            merged.device_end = e;
            return self.activity(&merged, out);
        }
        if a.correlation != 0 && known {
            self.completed.insert(key);
        }
        if a.phase == phase::COMPLETE {
            let waiting = self.pending.remove(&key);
            if !known {
                // Its times never came (the runtime had none to give): drawn as enqueued now,
                // where its flow ends.
                if let Some(w) = waiting {
                    self.flow_targets.remove(&a.correlation);
                    let flow_in = self.flows_started.remove(&a.correlation).map(|()| a.correlation);
                    self.device_slice(out, a.kind, &w, a.correlation, None, flow_in);
                }
                return;
            }
            let work = waiting.unwrap_or_else(|| PendingWork::of(a));
            let times = (a.device_start, a.device_end);
            if self.flow_targets.contains_key(&a.correlation) {
                // Completed before its call's record came (a blocking call, or a runtime thread
                // whose records reach the file first): drawn when the call comes, so the flow
                // has both ends.
                return self.await_call(out, work.tid, (a.kind, a.correlation, work, times));
            }
            let flow_in = self.flows_started.remove(&a.correlation).map(|()| a.correlation);
            self.device_slice(out, a.kind, &work, a.correlation, Some(times), flow_in);
            return;
        }
        if a.correlation != 0 && !known {
            self.flow_targets.insert(a.correlation, ());
        }
        let mut work = PendingWork::of(a);
        // The queue that has the handle now, when the work was enqueued (a completion from a
        // lower runtime level names its own handle: its queue is resolved only if it is drawn
        // without an enqueue record).
        work.queue_id = self.defs.queue_id(a.queue, a.device);
        if known && a.correlation != 0 {
            // Drawn when its call comes (with the flow from it), or at the end without.
            self.await_call(out, a.tid, (a.kind, a.correlation, work, (a.device_start, a.device_end)));
        } else if known {
            self.device_slice(out, a.kind, &work, a.correlation, Some((a.device_start, a.device_end)), None);
        } else if let Some(((kind, corr), old)) = self.pending.insert(key, work) {
            // Waited too long for a completion: drawn as enqueued; a call that comes later
            // starts no flow to it.
            self.flow_targets.remove(&corr);
            let flow_in = self.flows_started.remove(&corr).map(|()| corr);
            self.device_slice(out, kind, &old, corr, None, flow_in);
        }
    }

    /// Device work with its times, kept until thread `tid`'s call record with its correlation
    /// comes (at most [`AWAITING_CALL_MAX`] per thread: the oldest is drawn without a flow).
    fn await_call(&mut self, out: &mut dyn TimelineOut, tid: u32, work: AwaitingCall) {
        let waiting = self.awaiting_call.entry(tid).or_default();
        if waiting.len() >= AWAITING_CALL_MAX {
            let (kind, corr, old, times) = waiting.remove(0);
            self.device_slice(out, kind, &old, corr, Some(times), None);
        }
        self.awaiting_call.entry(tid).or_default().push(work);
    }

    fn device_slice(
        &mut self,
        out: &mut dyn TimelineOut,
        kind: u32,
        w: &PendingWork,
        correlation: u64,
        times: Option<(u64, u64)>,
        flow_in: Option<u64>,
    ) {
        let flow_in = match flow_in {
            None if correlation != 0 => self.late_flow(out, correlation),
            id => id,
        };
        let queue_id = if w.queue_id != 0 { w.queue_id } else { self.defs.queue_id(w.queue, w.device) };
        let base = self.queue_track(out, queue_id, w.device);
        let (start, end, instant) = match times {
            Some((s, e)) => (s, e, false),
            None => (w.ts, w.ts, true),
        };
        let track = self.lane(out, TrackKey::Queue(queue_id), base, start, end);
        let mut name = self.work_name(kind, w.op, w.name);
        if instant {
            name.insert_str(0, "enqueued: ");
        }
        let cat = self.defs.kind(kind).into_owned();
        let mut args: Vec<(&str, ArgValue)> = vec![("correlation", ArgValue::Unsigned(correlation))];
        args.push(("queue", ArgValue::Hex(w.queue)));
        args.push(("queue_id", ArgValue::Unsigned(queue_id)));
        if w.bytes != 0 {
            args.push(("bytes", ArgValue::Unsigned(w.bytes)));
        }
        if w.direction != CopyDirection::Unknown {
            args.push(("direction", ArgValue::Text(w.direction.name())));
        }
        let texts: Vec<(String, String)> = w
            .allocations
            .iter()
            .enumerate()
            .map(|(i, al)| {
                let arg = if al.arg_index < 0 { "implicit".to_owned() } else { format!("arg {}", al.arg_index) };
                (
                    format!("allocations[{i}]"),
                    format!("{arg}: {} B {} @ {:#x}", al.size, al.memory_type.name(), al.base),
                )
            })
            .collect();
        let (deps_out, deps_in) = self.dependency_flows(out, correlation);
        out.slice(&Slice {
            track,
            start,
            end,
            name: &name,
            category: &cat,
            flow_out: None,
            flow_in,
            deps_out: &deps_out,
            deps_in: &deps_in,
            args: &args,
            instant,
            texts: &texts,
        });
        self.dependencies.drawn(correlation, DrawnCommand { track, start, end, kind });
        self.items += 1;
    }

    /// The dependency flows of the command with correlation `correlation`, about to be drawn:
    /// (those it starts, those it ends); the other ends, drawn already, get anchors.
    fn dependency_flows(&mut self, out: &mut dyn TimelineOut, correlation: u64) -> (Vec<u64>, Vec<u64>) {
        let flows = self.dependencies.drawing(correlation);
        let mut ends = Vec::with_capacity(flows.from.len());
        for producer in flows.from {
            let id = self.flow_id();
            out.flow_start(producer.track, producer.out_at(), &self.defs.kind(producer.kind), id, FlowName::Dependency);
            ends.push(id);
        }
        let mut starts = Vec::with_capacity(flows.to.len());
        for consumer in flows.to {
            let id = self.flow_id();
            out.flow_end(consumer.track, consumer.in_at(), &self.defs.kind(consumer.kind), id);
            starts.push(id);
        }
        (starts, ends)
    }

    /// A task-graph record: edges become dependency flows, tasks tie SYCL nodes to commands.
    fn task_graph(&mut self, t: &TaskGraphRecord, out: &mut dyn TimelineOut) {
        match t.op {
            GRAPH_EDGE_CREATE => {
                if let Some((from, to)) = self.dependencies.edge(t.source, t.target) {
                    let id = self.flow_id();
                    out.flow_start(from.track, from.out_at(), &self.defs.kind(from.kind), id, FlowName::Dependency);
                    out.flow_end(to.track, to.in_at(), &self.defs.kind(to.kind), id);
                }
            }
            GRAPH_TASK if t.phase == phase::ENTER || t.phase == phase::EXIT => {
                self.dependencies.task(t.tid, t.node, t.phase == phase::ENTER);
            }
            _ => {}
        }
    }

    /// A flow id of its own (below [`EXTRA_FLOWS`]'s bit, apart from correlation ids).
    fn flow_id(&mut self) -> u64 {
        self.next_flow += 1;
        EXTRA_FLOWS | self.next_flow
    }

    /// Draws what is still waiting (work whose device time never came: as enqueued).
    pub fn finish(&mut self, out: &mut dyn TimelineOut) {
        self.live.finish(|ts, live| out.counter(LIVE_BYTES_TRACK, ts, live as f64));
        for (key, (w, times)) in self.early.drain() {
            let flow_in = self.flows_started.remove(&key.1).map(|()| key.1);
            self.device_slice(out, key.0, &w, key.1, Some(times), flow_in);
        }
        let mut tids: Vec<u32> = self.awaiting_call.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            for (kind, corr, work, times) in self.awaiting_call.remove(&tid).unwrap_or_default() {
                self.device_slice(out, kind, &work, corr, Some(times), None);
            }
        }
        for ((kind, corr), w) in self.pending.drain() {
            let flow_in = self.flows_started.remove(&corr).map(|()| corr);
            self.device_slice(out, kind, &w, corr, None, flow_in);
        }
    }

    /// A flow to device work whose call's slice has no flow for it (a completion without an
    /// enqueue record: every command of a CUDA graph launch shares the launch's correlation
    /// id), if the call is recent: started at an anchor inside the call's slice.
    fn late_flow(&mut self, out: &mut dyn TimelineOut, correlation: u64) -> Option<u64> {
        let call = self.recent_calls.get(correlation)?;
        let id = self.flow_id();
        out.flow_start(call.track, call.anchor, &self.defs.kind(call.kind), id, FlowName::Launch);
        Some(id)
    }

    /// Writes an API call's slice; returns its lane.
    fn write_call(&mut self, out: &mut dyn TimelineOut, a: &ApiCall, flow_out: Option<u64>) -> u64 {
        let base = self.thread_track(out, a.tid);
        let track = self.lane(out, TrackKey::Thread(a.tid), base, a.start, a.end);
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        self.defs.for_each_arg(a.kind, a.op, a.args.as_slice(), |n, v| args.push((n.to_owned(), v)));
        args.push(("correlation".to_owned(), ArgValue::Unsigned(a.correlation)));
        if let Some(r) = a.result {
            args.push(("result".to_owned(), ArgValue::Signed(r)));
        }
        let refs: Vec<(&str, ArgValue)> = args.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let name = self.defs.op(a.kind, a.op);
        let cat = self.defs.kind(a.kind);
        out.slice(&Slice {
            track,
            start: a.start,
            end: a.end,
            name: &name,
            category: &cat,
            flow_out,
            flow_in: None,
            deps_out: &[],
            deps_in: &[],
            args: &refs,
            instant: false,
            texts: &[],
        });
        drop(refs);
        self.args = args;
        self.items += 1;
        track
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(correlation: u64) -> RecentCall {
        RecentCall { correlation, track: 7, anchor: 99, kind: 1 }
    }

    #[test]
    fn a_recent_call_is_found_until_a_call_65536_ids_later_takes_its_slot() {
        let mut recent = RecentCalls::default();
        assert!(recent.get(5).is_none(), "nothing before the first call");
        recent.remember(call(5));
        assert_eq!(recent.get(5).map(|c| (c.track, c.anchor)), Some((7, 99)));
        assert!(recent.get(0).is_none(), "an empty slot is no call of id 0");
        recent.remember(call(5 + RECENT_CALLS as u64 - 1));
        assert!(recent.get(5).is_some(), "a neighbour's slot");
        recent.remember(call(5 + RECENT_CALLS as u64));
        assert!(recent.get(5).is_none(), "its slot taken");
        assert!(recent.get(5 + RECENT_CALLS as u64).is_some());
    }
}
