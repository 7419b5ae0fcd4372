//! Task-graph edges drawn as flows between the commands they join, for the timeline exports.
//!
//! An edge (`TASK_GRAPH` edge record: `source` → `target` node) becomes a flow from the
//! producer's device slice to the consumer's, once both nodes are known to be commands and both
//! slices are drawn (a command's slice on its queue's track: its device time, or the `enqueued:`
//! instant when the runtime gave none). A node is a command when
//!
//! - OpenCL: its id has the top bit set; the rest is the correlation of the command's device
//!   activity (`docs/opencl.md`, *Event wait lists*);
//! - SYCL: its task is open on a thread when that thread's next device work is enqueued (the
//!   UR enqueue inside the task; with the OpenCL layer below, the layer's command, enqueued
//!   first inside the UR call).
//!
//! Nodes that are no command get no flow: a user event, an OpenCL stand-in for an event made
//! outside the layer, a SYCL virtual node (an event from outside the graph), a host task, a
//! CUDA graph node (its commands share the launch's correlation, so a node is no one slice).
//! Their edges wait like the others and are dropped when they leave the bounded map or at the
//! end.
//!
//! Memory: the last [`PENDING_MAX`] edges (a ring), at most two chain heads per edge,
//! [`PENDING_MAX`] SYCL node bindings (oldest first out), and the recently drawn commands in
//! a [`ByCorrelation`] table (65,536 slots, 2.5 MiB once the first command is drawn;
//! correlation ids are handed out in order, so it holds about the last 65,536 commands).
//! An edge that leaves the ring, or whose producer left the table, before its ends are drawn
//! gets no flow. Cost: an edge is a push onto a ring and two inserts of 16-byte entries; a drawn
//! command one store and, while edges wait, two look-ups (no allocation per edge: a node's
//! waiting edges are chained through the ring).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::timeline::{Bounded, ByCorrelation, PENDING_MAX};

/// The bit that marks an OpenCL command's node id (the rest is its correlation).
const OPENCL_COMMAND_NODE: u64 = 1 << 63;

/// A command's slice as drawn: where a flow starts or ends on it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DrawnCommand {
    pub track: u64,
    pub start: u64,
    pub end: u64,
    /// The command's kind (the category of an anchor on it).
    pub kind: u32,
}

impl DrawnCommand {
    /// Where a flow out of the slice starts: 1 ns before its end, inside it.
    pub fn out_at(&self) -> u64 {
        self.end.saturating_sub(1).max(self.start)
    }

    /// Where a flow into the slice ends: 1 ns after its start when that is inside it (an anchor
    /// written after the slice then nests in it whatever a reader's sort does with equal times).
    pub fn in_at(&self) -> u64 {
        if self.end >= self.start.saturating_add(2) { self.start + 1 } else { self.start }
    }
}

/// Flows a command's slice takes part in as it is drawn.
#[derive(Debug, Default)]
pub(crate) struct SliceFlows {
    /// Edges into it whose producer is drawn: the producer's slice.
    pub from: Vec<DrawnCommand>,
    /// Edges out of it whose consumer is drawn already: the consumer's slice.
    pub to: Vec<DrawnCommand>,
}

/// An edge waiting for an end, and per node the next older edge of that node that waits.
#[derive(Debug, Clone, Copy)]
struct WaitingEdge {
    source: u64,
    target: u64,
    next_at_source: u64,
    next_at_target: u64,
    /// False once drawn (it may still be linked from its other node's chain).
    live: bool,
}

/// The dependency edges seen and the slices of their commands.
#[derive(Debug)]
pub(crate) struct Dependencies {
    /// Thread → the SYCL node whose task is open there and has no command yet.
    open_tasks: FxHashMap<u32, u64>,
    /// SYCL node → the correlation of its command's device work, and back.
    node_command: Bounded<u64, u64>,
    command_node: Bounded<u64, u64>,
    /// Recently drawn commands' slices, direct-mapped by correlation.
    drawn: ByCorrelation<DrawnCommand>,
    /// The last [`PENDING_MAX`] edges (drawn ones marked), numbered from `first_edge`.
    waiting: VecDeque<WaitingEdge>,
    first_edge: u64,
    /// Node → the number of its newest waiting edge (the older ones follow through the links).
    newest: FxHashMap<u64, u64>,
}

impl Default for Dependencies {
    fn default() -> Self {
        Self {
            open_tasks: FxHashMap::default(),
            node_command: Bounded::default(),
            command_node: Bounded::default(),
            drawn: ByCorrelation::default(),
            waiting: VecDeque::new(),
            // Edge number 0 ends a chain.
            first_edge: 1,
            newest: FxHashMap::default(),
        }
    }
}

impl Dependencies {
    /// A SYCL task begins (`ENTER`) or ends (`EXIT`) on thread `tid`.
    pub fn task(&mut self, tid: u32, node: u64, enter: bool) {
        if enter {
            self.open_tasks.insert(tid, node);
        } else if self.open_tasks.get(&tid) == Some(&node) {
            self.open_tasks.remove(&tid);
        }
    }

    /// Device work with correlation `correlation` is enqueued on thread `tid`: the command of
    /// the task open there, if one is and has none yet.
    pub fn enqueued(&mut self, tid: u32, correlation: u64) {
        if self.open_tasks.is_empty() {
            return;
        }
        if let Some(node) = self.open_tasks.remove(&tid) {
            self.node_command.insert(node, correlation);
            self.command_node.insert(correlation, node);
        }
    }

    /// The correlation of node `node`'s command, if it is one.
    fn command(&self, node: u64) -> Option<u64> {
        if node & OPENCL_COMMAND_NODE != 0 {
            return Some(node & !OPENCL_COMMAND_NODE);
        }
        self.node_command.get(&node).copied()
    }

    fn drawn_node(&self, node: u64) -> Option<DrawnCommand> {
        let c = self.command(node)?;
        self.drawn.get(c)
    }

    /// An edge: both ends' slices if they are drawn (draw the flow now); otherwise it waits.
    pub fn edge(&mut self, source: u64, target: u64) -> Option<(DrawnCommand, DrawnCommand)> {
        if source == target {
            return None;
        }
        if let (Some(from), Some(to)) = (self.drawn_node(source), self.drawn_node(target)) {
            return Some((from, to));
        }
        let edge = self.first_edge + self.waiting.len() as u64;
        let next_at_source = self.newest.insert(source, edge).unwrap_or(0);
        let next_at_target = self.newest.insert(target, edge).unwrap_or(0);
        self.waiting.push_back(WaitingEdge { source, target, next_at_source, next_at_target, live: true });
        if self.waiting.len() > PENDING_MAX
            && let Some(old) = self.waiting.pop_front()
        {
            let number = self.first_edge;
            self.first_edge += 1;
            // A chain runs newest to oldest: when its head leaves, the whole chain has left.
            for node in [old.source, old.target] {
                if self.newest.get(&node) == Some(&number) {
                    self.newest.remove(&node);
                }
            }
        }
        None
    }

    /// Where edge `edge` is in the ring, if it is still there.
    fn slot(&self, edge: u64) -> Option<usize> {
        let i = usize::try_from(edge.checked_sub(self.first_edge)?).ok()?;
        (i < self.waiting.len()).then_some(i)
    }

    /// Sets `node`'s link on edge `edge` to `next`.
    fn link(&mut self, edge: u64, node: u64, next: u64) {
        if let Some(i) = self.slot(edge) {
            let e = &mut self.waiting[i];
            if e.source == node { e.next_at_source = next } else { e.next_at_target = next }
        }
    }

    /// The flows of the command with correlation `correlation`, whose slice is about to be
    /// drawn: its waiting edges whose other end is drawn (they stop waiting).
    pub fn drawing(&mut self, correlation: u64) -> SliceFlows {
        let mut flows = SliceFlows::default();
        if correlation == 0 || self.newest.is_empty() {
            return flows;
        }
        let sycl = self.command_node.get(&correlation).copied().filter(|&n| self.command(n) == Some(correlation));
        for node in [Some(correlation | OPENCL_COMMAND_NODE), sycl].into_iter().flatten() {
            let Some(mut edge) = self.newest.remove(&node) else { continue };
            // The edges still waiting are chained again, in the same order.
            let (mut kept_head, mut last_kept) = (0, 0);
            while let Some(i) = self.slot(edge) {
                let e = self.waiting[i];
                let at_source = e.source == node;
                let next = if at_source { e.next_at_source } else { e.next_at_target };
                if e.live {
                    let other = if at_source { e.target } else { e.source };
                    if let Some(d) = self.drawn_node(other) {
                        self.waiting[i].live = false;
                        if at_source { flows.to.push(d) } else { flows.from.push(d) }
                    } else {
                        if last_kept == 0 {
                            kept_head = edge;
                        } else {
                            self.link(last_kept, node, edge);
                        }
                        last_kept = edge;
                    }
                }
                edge = next;
            }
            if last_kept != 0 {
                self.link(last_kept, node, 0);
                self.newest.insert(node, kept_head);
            }
        }
        flows
    }

    /// The slice of the command with correlation `correlation` is drawn.
    pub fn drawn(&mut self, correlation: u64, slice: DrawnCommand) {
        if correlation != 0 {
            self.drawn.insert(correlation, slice);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(track: u64) -> DrawnCommand {
        DrawnCommand { track, start: 10, end: 20, kind: 1 }
    }

    #[test]
    fn an_edge_between_drawn_opencl_commands_is_drawn_at_once() {
        let mut d = Dependencies::default();
        d.drawn(5, slice(1));
        d.drawn(6, slice(2));
        let (from, to) = d.edge(5 | OPENCL_COMMAND_NODE, 6 | OPENCL_COMMAND_NODE).expect("both drawn");
        assert_eq!((from.track, to.track), (1, 2));
        assert!(d.newest.is_empty() && d.waiting.is_empty());
    }

    #[test]
    fn an_edge_waits_for_its_consumer_then_its_producer() {
        let mut d = Dependencies::default();
        assert!(d.edge(5 | OPENCL_COMMAND_NODE, 6 | OPENCL_COMMAND_NODE).is_none());
        let f = d.drawing(6);
        assert!(f.from.is_empty() && f.to.is_empty(), "its producer is not drawn");
        d.drawn(6, slice(2));
        let f = d.drawing(5);
        assert_eq!((f.from.len(), f.to.iter().map(|s| s.track).collect::<Vec<_>>()), (0, vec![2]));
        assert!(!d.newest.contains_key(&(5 | OPENCL_COMMAND_NODE)), "nothing waits on the producer");
        assert!(d.drawing(6).from.is_empty(), "the consumer's chain holds the edge drawn: skipped");
    }

    #[test]
    fn a_sycl_node_is_the_first_command_enqueued_inside_its_task() {
        let mut d = Dependencies::default();
        assert!(d.edge(100, 200).is_none());
        d.task(1, 100, true);
        d.enqueued(1, 7);
        d.enqueued(1, 8);
        d.task(1, 100, false);
        assert!(d.drawing(7).from.is_empty());
        d.drawn(7, slice(3));
        d.task(2, 200, true);
        d.enqueued(2, 9);
        d.task(2, 200, false);
        assert_eq!(d.drawing(8).from.len(), 0, "the task's second command is not its node");
        assert_eq!(d.drawing(9).from.iter().map(|s| s.track).collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn an_edge_to_a_node_that_is_no_command_never_draws() {
        let mut d = Dependencies::default();
        // A SYCL virtual node (never a task) into an OpenCL-numbered command.
        assert!(d.edge(300, 6 | OPENCL_COMMAND_NODE).is_none());
        assert!(d.drawing(6).from.is_empty());
        d.drawn(6, slice(2));
        assert_eq!(d.newest.len(), 2, "still waiting on both ends");
    }

    #[test]
    fn a_node_keeps_its_undrawn_edges_and_the_oldest_edges_leave_first() {
        let mut d = Dependencies::default();
        // Node 5 waits on 1, 2 and 3; 2 is drawn, 1 and 3 are not.
        for p in [1, 2, 3] {
            d.edge(p | OPENCL_COMMAND_NODE, 5 | OPENCL_COMMAND_NODE);
        }
        d.drawn(2, slice(2));
        assert_eq!(d.drawing(5).from.iter().map(|s| s.track).collect::<Vec<_>>(), vec![2]);
        d.drawn(5, slice(5));
        assert_eq!(d.drawing(3).to.len(), 1, "3's edge still chained at 5 and at 3");
        assert_eq!(d.drawing(1).to.len(), 1);
        // Drawn edges stay in the ring (and in chains) until they leave it, marked.
        assert!(d.waiting.iter().all(|e| !e.live), "every edge drawn");
        // The ring: the oldest edge leaves when PENDING_MAX newer ones come.
        d.edge(10 | OPENCL_COMMAND_NODE, 11 | OPENCL_COMMAND_NODE);
        for i in 0..PENDING_MAX as u64 {
            d.edge((100 + i) | OPENCL_COMMAND_NODE, 11 | OPENCL_COMMAND_NODE);
        }
        assert!(!d.newest.contains_key(&(10 | OPENCL_COMMAND_NODE)), "its chain left with it");
        assert_eq!(d.waiting.len(), PENDING_MAX);
        d.drawn(11, slice(11));
        assert!(d.drawing(10).to.is_empty(), "no flow for an edge that left");
    }
}
