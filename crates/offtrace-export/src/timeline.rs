//! What the timeline exports (Perfetto, Chrome) share: a first pass that learns the task graph's
//! edges and which commands get device times (so flows can be drawn when their first end is
//! written), thread slices paired from begin/end notifications, and flow ids.

use offtrace_analysis::{DeviceEvent, EdgeEvent, ModelSink, Summary, SummaryBuilder, names};
use offtrace_format::{Notification, UserData};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ExportError;
use crate::source::{ProgressFn, RecordSource, for_each_record};

/// A flow from a SYCL API call (task on the thread) to its command on the queue track.
pub(crate) fn command_flow(instance: u64) -> u64 {
    (instance << 2) | 1
}
/// A flow from the UR enqueue call to the command's device execution.
pub(crate) fn device_flow(instance: u64) -> u64 {
    (instance << 2) | 2
}
/// A flow along a task-graph edge.
pub(crate) fn edge_flow(edge: u32) -> u64 {
    (u64::from(edge) << 2) | 3
}

/// Per SYCL command (its instance), the allocations of the kernel dispatches linked to it, one
/// text per allocation (`arg 0: 65536 B DEVICE @ 0x1000`), for the command's slice arguments.
pub(crate) fn command_allocations(summary: &Summary) -> FxHashMap<u64, Vec<String>> {
    let mut by_command: FxHashMap<u64, Vec<String>> = FxHashMap::default();
    for d in &summary.kernel_allocations.dispatches {
        let Some(instance) = d.command_instance else { continue };
        let texts = by_command.entry(instance).or_default();
        for a in &d.allocations {
            let arg = if a.arg_index < 0 { "implicit".to_owned() } else { format!("arg {}", a.arg_index) };
            texts.push(format!("{arg}: {} B {} @ 0x{:x}", a.size, a.memory_type, a.base));
        }
    }
    by_command
}

/// What the first pass learned.
#[derive(Debug, Default)]
pub(crate) struct FirstPass {
    pub summary: Summary,
    pub out_edges: FxHashMap<u32, Vec<u32>>,
    pub in_edges: FxHashMap<u32, Vec<u32>>,
    pub device_instances: FxHashSet<u64>,
}

#[derive(Default)]
struct GraphCollector {
    edges: Vec<(u32, u32, u32)>,
    command_nodes: FxHashSet<u32>,
    device_instances: FxHashSet<u64>,
}

impl ModelSink for GraphCollector {
    fn edge(&mut self, e: &EdgeEvent<'_>) {
        if let (Some(s), Some(t)) = (e.source, e.target) {
            self.edges.push((e.edge, s, t));
        }
    }
    fn command(&mut self, c: &offtrace_analysis::CommandEvent<'_>) {
        if let Some(n) = c.node {
            self.command_nodes.insert(n);
        }
    }
    fn device(&mut self, d: &DeviceEvent<'_>) {
        self.device_instances.insert(d.instance);
    }
}

pub(crate) fn first_pass(
    source: &mut dyn RecordSource,
    progress: &mut Option<&mut ProgressFn<'_>>,
) -> Result<FirstPass, ExportError> {
    let mut builder = SummaryBuilder::new();
    let mut g = GraphCollector::default();
    for_each_record(source, 1, progress, |r| {
        builder.push_with(r, &mut g);
        Ok(())
    })?;
    // A flow needs a slice at both ends: edges from or to nodes that never ran as a command
    // (virtual nodes, ...) get none.
    let mut out_edges: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut in_edges: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (e, s, t) in g.edges {
        if g.command_nodes.contains(&s) && g.command_nodes.contains(&t) {
            out_edges.entry(s).or_default().push(e);
            in_edges.entry(t).or_default().push(e);
        }
    }
    Ok(FirstPass { summary: builder.finish(), out_edges, in_edges, device_instances: g.device_instances })
}

/// A slice boundary on a thread track.
#[derive(Debug, Clone)]
pub(crate) enum SliceAction {
    Begin { tid: u32, ts: u64, name: String, category: &'static str, flows: Vec<u64> },
    End { tid: u32, ts: u64 },
}

/// Pairs begin/end notifications per thread into properly nested slices. An end whose begin is
/// not open is ignored; an end that matches a deeper slice closes the ones above it first, so
/// the output always balances.
#[derive(Debug, Default)]
pub(crate) struct ThreadSlices {
    stacks: FxHashMap<u32, Vec<u64>>,
    open_commands: FxHashMap<u32, Vec<u64>>,
    last_ts: u64,
}

impl ThreadSlices {
    pub fn on_notification(
        &mut self,
        n: &Notification,
        defs: &offtrace_analysis::Definitions,
        device_instances: &FxHashSet<u64>,
        out: &mut dyn FnMut(SliceAction),
    ) {
        self.last_ts = self.last_ts.max(n.ts);
        if names::is_begin(n.trace_type) {
            let role = defs.stream_role(n.stream);
            let mut flows = Vec::new();
            let (name, category) = match (&n.user_data, role) {
                (UserData::FunctionWithArgs { name, .. }, _) => {
                    let fname = defs.str(*name).to_owned();
                    if names::is_enqueue(&fname)
                        && let Some(cmd) = self.open_commands.get(&n.tid).and_then(|v| v.last())
                        && device_instances.contains(cmd)
                    {
                        flows.push(device_flow(*cmd));
                    }
                    (fname, "ur")
                }
                _ => {
                    let ev = n.event.unwrap_or_default();
                    let payload = defs.payload_name(ev.payload);
                    match n.trace_type {
                        names::tt::TASK_BEGIN => {
                            self.open_commands.entry(n.tid).or_default().push(n.instance);
                            flows.push(command_flow(n.instance));
                            let name = defs
                                .meta_str(ev.metadata, "kernel_name")
                                .filter(|s| !s.is_empty())
                                .unwrap_or_else(|| names::base_name(payload));
                            (name.to_owned(), "sycl")
                        }
                        names::tt::WAIT_BEGIN => {
                            (format!("wait {}", names::base_name(payload)).trim_end().to_owned(), "sycl")
                        }
                        _ if payload.is_empty() => (names::trace_type_name(n.trace_type).into_owned(), "sycl"),
                        _ => (
                            payload.to_owned(),
                            if matches!(role, names::StreamRole::MemAlloc) { "memory" } else { "sycl" },
                        ),
                    }
                }
            };
            self.stacks.entry(n.tid).or_default().push(n.instance);
            out(SliceAction::Begin { tid: n.tid, ts: n.ts, name, category, flows });
        } else if names::is_end(n.trace_type) {
            if n.trace_type == names::tt::TASK_END
                && let Some(v) = self.open_commands.get_mut(&n.tid)
                && let Some(p) = v.iter().rposition(|&i| i == n.instance)
            {
                v.truncate(p);
            }
            let Some(stack) = self.stacks.get_mut(&n.tid) else { return };
            let Some(pos) = stack.iter().rposition(|&i| i == n.instance) else { return };
            for _ in pos..stack.len() {
                out(SliceAction::End { tid: n.tid, ts: n.ts });
            }
            stack.truncate(pos);
        }
    }

    /// Ends every slice still open (a truncated trace), at the last timestamp seen.
    pub fn close_all(&mut self, out: &mut dyn FnMut(SliceAction)) {
        let mut tids: Vec<u32> = self.stacks.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let depth = self.stacks.get(&tid).map_or(0, Vec::len);
            for _ in 0..depth {
                out(SliceAction::End { tid, ts: self.last_ts });
            }
        }
        self.stacks.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use offtrace_analysis::Definitions;
    use offtrace_analysis::testing::TraceBuilder;
    use offtrace_format::Record;

    fn run(records: &[Record]) -> Vec<String> {
        let mut defs = Definitions::new();
        let mut slices = ThreadSlices::default();
        let mut out = Vec::new();
        for r in records {
            defs.observe(r);
            if let Record::Notification(n) = r {
                slices.on_notification(n, &defs, &FxHashSet::default(), &mut |a| {
                    out.push(match a {
                        SliceAction::Begin { name, .. } => format!("B {name}"),
                        SliceAction::End { ts, .. } => format!("E {ts}"),
                    })
                });
            }
        }
        slices.close_all(&mut |a| out.push(format!("{a:?}").split_whitespace().next().unwrap_or("").to_owned()));
        out
    }

    #[test]
    fn end_of_an_outer_slice_closes_inner_ones_and_stray_ends_are_ignored() {
        let mut b = TraceBuilder::new();
        b.stream(8, "ur.call");
        b.ur_call(10, 100, 1, 1, 1, "urOuter", &[], &[]);
        b.ur_call(20, 10, 1, 2, 2, "urInner", &[], &[]);
        b.ur_call(500, 1, 1, 9, 3, "urStray", &[], &[]);
        let (defs, notes): (Vec<Record>, Vec<Record>) =
            b.records.into_iter().partition(|r| !matches!(r, Record::Notification(_)));
        let pick = |inst: u64, tt: u16| {
            notes
                .iter()
                .find(|r| matches!(r, Record::Notification(n) if n.instance == inst && n.trace_type == tt))
                .cloned()
                .unwrap()
        };
        // outer begin, inner begin, outer end (the inner end was lost), a stray end
        let mut records = defs;
        records.extend([pick(1, 28), pick(2, 28), pick(1, 29), pick(9, 29)]);
        b.records = records;
        let out = run(&b.records);
        assert_eq!(out, vec!["B urOuter", "B urInner", "E 110", "E 110"]);
    }

    #[test]
    fn unfinished_slices_are_closed_at_the_end() {
        let mut b = TraceBuilder::new();
        b.stream(8, "ur.call");
        b.ur_call(10, 100, 1, 1, 1, "urOpen", &[], &[]);
        b.records.retain(|r| !matches!(r, Record::Notification(n) if n.trace_type == 29));
        let out = run(&b.records);
        assert_eq!(out, vec!["B urOpen", "End"]);
    }
}
