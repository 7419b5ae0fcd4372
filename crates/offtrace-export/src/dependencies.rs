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
//! Memory: every map holds at most [`PENDING_MAX`](crate::timeline::PENDING_MAX) entries, oldest first out; an edge that
//! leaves the waiting map before its ends are drawn gets no flow.

use rustc_hash::FxHashMap;

use crate::timeline::Bounded;

/// The bit that marks an OpenCL command's node id (the rest is its correlation).
const OPENCL_COMMAND_NODE: u64 = 1 << 63;

/// A command's slice as drawn: where a flow starts or ends on it.
#[derive(Debug, Clone, Copy)]
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

/// The dependency edges seen and the slices of their commands.
#[derive(Debug, Default)]
pub(crate) struct Dependencies {
    /// Thread → the SYCL node whose task is open there and has no command yet.
    open_tasks: FxHashMap<u32, u64>,
    /// SYCL node → the correlation of its command's device work, and back.
    node_command: Bounded<u64, u64>,
    command_node: Bounded<u64, u64>,
    /// Correlation → its command's slice, once drawn.
    drawn: Bounded<u64, DrawnCommand>,
    /// Edges with an end not drawn yet: edge number → (source node, target node).
    waiting: Bounded<u64, (u64, u64)>,
    /// Node → its waiting edges' numbers (an entry per waiting edge end).
    by_node: FxHashMap<u64, Vec<u64>>,
    next_edge: u64,
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
        self.command(node).and_then(|c| self.drawn.get(&c)).copied()
    }

    /// An edge: both ends' slices if they are drawn (draw the flow now); otherwise it waits.
    pub fn edge(&mut self, source: u64, target: u64) -> Option<(DrawnCommand, DrawnCommand)> {
        if source == target {
            return None;
        }
        if let (Some(from), Some(to)) = (self.drawn_node(source), self.drawn_node(target)) {
            return Some((from, to));
        }
        self.next_edge += 1;
        let edge = self.next_edge;
        if let Some((old, (s, t))) = self.waiting.insert(edge, (source, target)) {
            self.forget(old, s);
            self.forget(old, t);
        }
        self.by_node.entry(source).or_default().push(edge);
        self.by_node.entry(target).or_default().push(edge);
        None
    }

    fn forget(&mut self, edge: u64, node: u64) {
        if let Some(edges) = self.by_node.get_mut(&node) {
            edges.retain(|&e| e != edge);
            if edges.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// The flows of the command with correlation `correlation`, whose slice is about to be
    /// drawn: its waiting edges whose other end is drawn (they stop waiting).
    pub fn drawing(&mut self, correlation: u64) -> SliceFlows {
        let mut flows = SliceFlows::default();
        if correlation == 0 || self.by_node.is_empty() {
            return flows;
        }
        let sycl = self.command_node.get(&correlation).copied().filter(|&n| self.command(n) == Some(correlation));
        for node in [Some(correlation | OPENCL_COMMAND_NODE), sycl].into_iter().flatten() {
            let Some(edges) = self.by_node.remove(&node) else { continue };
            let mut still = Vec::new();
            for edge in edges {
                let Some(&(s, t)) = self.waiting.get(&edge) else { continue };
                let other = if t == node { s } else { t };
                match self.drawn_node(other) {
                    Some(d) => {
                        self.waiting.remove(&edge);
                        self.forget(edge, other);
                        if t == node { flows.from.push(d) } else { flows.to.push(d) }
                    }
                    None => still.push(edge),
                }
            }
            if !still.is_empty() {
                self.by_node.insert(node, still);
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
        let (from, to) = d.edge(5 | OPENCL_COMMAND_NODE, 6 | OPENCL_COMMAND_NODE).unwrap();
        assert_eq!((from.track, to.track), (1, 2));
        assert!(d.by_node.is_empty() && d.waiting.get(&1).is_none());
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
        assert!(d.by_node.is_empty(), "nothing waits any more");
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
        assert_eq!(d.by_node.len(), 2, "still waiting on both ends");
    }
}
