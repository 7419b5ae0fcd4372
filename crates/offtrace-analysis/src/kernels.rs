//! Kernel dispatches with their allocation properties (`KernelDispatch` records): linking each
//! to the SYCL command it belongs to, and the per-kernel aggregation `offtrace report` prints.
//!
//! The launching `urEnqueueKernelLaunch*` call runs inside the command's task_begin..task_end
//! on the same thread, and the tracing services see the dispatch during that call. So a
//! dispatch is linked, in order of preference, to:
//!
//! 1. the command open on its thread while the `ur.call` with instance `ur_instance` on that
//!    thread is open, or was open when it ended (a short per-thread history of ended calls);
//! 2. the innermost command open on its thread whose task_begin is not after the dispatch;
//! 3. a recently closed command on its thread whose task_begin..task_end contains the dispatch
//!    (the record may be written after the command's task_end);
//! 4. when the record precedes its command's notifications in the file (the agent writes
//!    dispatch records with the definitions, ahead of the thread's notification chunks): the
//!    command the `ur.call` with instance `ur_instance` on its thread is made inside, when that
//!    call ends; else the command that closes later on its thread and contains the dispatch.
//!
//! A dispatch none of these finds stays unlinked (e.g. a UR or OpenCL program without SYCL).
//! The histories are bounded per thread, so memory grows only with the dispatches themselves,
//! which the summary lists one by one.

use std::collections::{BTreeMap, VecDeque};

use offtrace_format::KernelDispatch;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::summary::{
    AllocationUse, KernelAllocationInfo, KernelAllocationStats, KernelAllocationSummary, KernelDispatchInfo,
};

/// Ended UR calls remembered per thread, for dispatch records written after their call's end.
const RECENT_UR_CALLS: usize = 32;
/// Closed commands remembered per thread, for dispatch records written after task_end.
const RECENT_COMMANDS: usize = 64;
/// Unlinked dispatches per thread still waiting for a command that may contain them.
const PENDING_PER_THREAD: usize = 1024;

/// How a dispatch was linked to its command.
pub(crate) const LINK_UR_CALL: &str = "ur_call";
pub(crate) const LINK_TASK: &str = "task";
pub(crate) const LINK_NONE: &str = "none";

/// Removes dispatch `index` from the by-call index (unless a later dispatch took its key).
fn forget_pending_ur_call(by_ur_call: &mut FxHashMap<(u32, u64), usize>, d: &KernelDispatchInfo, index: usize) {
    let key = (d.tid, d.ur_instance);
    if by_ur_call.get(&key) == Some(&index) {
        by_ur_call.remove(&key);
    }
}

/// A command open on the dispatch's thread, innermost first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenCommand<'a> {
    pub instance: u64,
    pub begin_ns: u64,
    pub name: &'a str,
}

#[derive(Debug)]
struct ClosedCommand {
    instance: u64,
    begin_ns: u64,
    end_ns: u64,
    name: String,
}

/// An ended `ur.call` (its instance) and the command (instance, name) it was made inside.
#[derive(Debug)]
struct EndedUrCall {
    instance: u64,
    command: Option<(u64, String)>,
}

/// (arg_index, size, memory type name): the shape of one allocation, without its base.
type AllocationShape = (i32, u64, String);

/// How often one shape was used: dispatches, first base, distinct bases.
#[derive(Debug)]
struct ShapeUse {
    dispatches: u64,
    first_base: u64,
    bases: FxHashSet<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct KernelDispatches {
    dispatches: Vec<KernelDispatchInfo>,
    recent_ur_calls: FxHashMap<u32, VecDeque<EndedUrCall>>,
    recent_commands: FxHashMap<u32, VecDeque<ClosedCommand>>,
    /// Per thread, unlinked dispatches in trace order (at most [`PENDING_PER_THREAD`]).
    pending: FxHashMap<u32, VecDeque<usize>>,
    /// The pending dispatches by (tid, ur_instance), for the call's end.
    pending_by_ur_call: FxHashMap<(u32, u64), usize>,
}

impl KernelDispatches {
    /// A dispatch record. `ur_call_open` says whether the `ur.call` (tid, ur_instance) is open;
    /// `open` lists the commands open on the thread, innermost first.
    pub fn dispatch(&mut self, d: &KernelDispatch, kernel: &str, ur_call_open: bool, open: &[OpenCommand<'_>]) {
        let link = self.find_link(d, ur_call_open, open);
        let index = self.dispatches.len();
        let (command_instance, command_name, link) = match link {
            Some((instance, name, how)) => (Some(instance), Some(name), how),
            None => {
                let pending = self.pending.entry(d.tid).or_default();
                if pending.len() == PENDING_PER_THREAD
                    && let Some(oldest) = pending.pop_front()
                    && let Some(old) = self.dispatches.get(oldest)
                {
                    forget_pending_ur_call(&mut self.pending_by_ur_call, old, oldest);
                }
                pending.push_back(index);
                if d.ur_instance != 0 {
                    self.pending_by_ur_call.insert((d.tid, d.ur_instance), index);
                }
                (None, None, LINK_NONE)
            }
        };
        self.dispatches.push(KernelDispatchInfo {
            tid: d.tid,
            ts_ns: d.ts,
            correlation: d.correlation,
            ur_instance: d.ur_instance,
            kernel: kernel.to_owned(),
            queue: d.queue,
            kernel_handle: d.kernel_handle,
            work_dim: d.work_dim,
            global_size: d.global_size,
            local_size: d.local_size,
            command_instance,
            command_name,
            link: link.to_owned(),
            allocations: d
                .allocations
                .iter()
                .map(|a| KernelAllocationInfo {
                    base: a.base,
                    size: a.size,
                    arg_index: a.arg_index,
                    memory_type: a.memory_type.name().to_owned(),
                })
                .collect(),
        });
    }

    fn find_link(
        &self,
        d: &KernelDispatch,
        ur_call_open: bool,
        open: &[OpenCommand<'_>],
    ) -> Option<(u64, String, &'static str)> {
        if d.ur_instance != 0 {
            if ur_call_open {
                if let Some(c) = open.first() {
                    return Some((c.instance, c.name.to_owned(), LINK_UR_CALL));
                }
            } else if let Some(EndedUrCall { command: Some((instance, name)), .. }) = self
                .recent_ur_calls
                .get(&d.tid)
                .and_then(|calls| calls.iter().rev().find(|c| c.instance == d.ur_instance))
            {
                return Some((*instance, name.clone(), LINK_UR_CALL));
            }
        }
        if let Some(c) = open.iter().find(|c| c.begin_ns <= d.ts) {
            return Some((c.instance, c.name.to_owned(), LINK_TASK));
        }
        let closed = self.recent_commands.get(&d.tid)?;
        // Innermost = the latest begin among those containing the dispatch.
        closed
            .iter()
            .filter(|c| c.begin_ns <= d.ts && d.ts <= c.end_ns)
            .max_by_key(|c| c.begin_ns)
            .map(|c| (c.instance, c.name.clone(), LINK_TASK))
    }

    /// A `ur.call` ended on `tid`, made inside `command` (instance, name), if any.
    pub fn ur_call_ended(&mut self, tid: u32, instance: u64, command: Option<(u64, &str)>) {
        if let Some((command_instance, name)) = command
            && let Some(i) = self.pending_by_ur_call.remove(&(tid, instance))
            && let Some(d) = self.dispatches.get_mut(i)
        {
            d.command_instance = Some(command_instance);
            d.command_name = Some(name.to_owned());
            d.link = LINK_UR_CALL.to_owned();
            // Leaves the pending list at the next command_closed on this thread.
        }
        let calls = self.recent_ur_calls.entry(tid).or_default();
        if calls.len() == RECENT_UR_CALLS {
            calls.pop_front();
        }
        calls.push_back(EndedUrCall { instance, command: command.map(|(i, n)| (i, n.to_owned())) });
    }

    /// A command's task ended: remember it, and link the pending dispatches it contains.
    pub fn command_closed(&mut self, tid: u32, instance: u64, begin_ns: u64, end_ns: u64, name: &str) {
        if let Some(pending) = self.pending.get_mut(&tid) {
            let dispatches = &mut self.dispatches;
            let by_ur_call = &mut self.pending_by_ur_call;
            pending.retain(|&i| {
                let Some(d) = dispatches.get_mut(i) else { return false };
                if d.command_instance.is_some() {
                    return false;
                }
                if begin_ns <= d.ts_ns && d.ts_ns <= end_ns {
                    forget_pending_ur_call(by_ur_call, d, i);
                    d.command_instance = Some(instance);
                    d.command_name = Some(name.to_owned());
                    d.link = LINK_TASK.to_owned();
                    return false;
                }
                true
            });
        }
        let closed = self.recent_commands.entry(tid).or_default();
        if closed.len() == RECENT_COMMANDS {
            closed.pop_front();
        }
        closed.push_back(ClosedCommand { instance, begin_ns, end_ns, name: name.to_owned() });
    }

    pub fn finish(self) -> KernelAllocationSummary {
        #[derive(Default)]
        struct Agg {
            dispatches: u64,
            linked: u64,
            sets: FxHashSet<Vec<AllocationShape>>,
            without_allocations: u64,
            max_dispatch_bytes: u64,
            first_dispatch: usize,
            uses: BTreeMap<AllocationShape, ShapeUse>,
        }
        let mut by_kernel: BTreeMap<String, Agg> = BTreeMap::new();
        for (i, d) in self.dispatches.iter().enumerate() {
            let name = match (&d.kernel, &d.command_name) {
                (k, _) if !k.is_empty() => k.clone(),
                (_, Some(c)) if !c.is_empty() => c.clone(),
                _ => "<unnamed>".to_owned(),
            };
            let agg = by_kernel.entry(name).or_insert_with(|| Agg { first_dispatch: i, ..Agg::default() });
            agg.dispatches += 1;
            agg.linked += u64::from(d.command_instance.is_some());
            if d.allocations.is_empty() {
                agg.without_allocations += 1;
            }
            let bytes = d.allocations.iter().map(|a| a.size).fold(0u64, u64::saturating_add);
            agg.max_dispatch_bytes = agg.max_dispatch_bytes.max(bytes);
            let mut set: Vec<AllocationShape> =
                d.allocations.iter().map(|a| (a.arg_index, a.size, a.memory_type.clone())).collect();
            set.sort();
            for a in &d.allocations {
                let key = (a.arg_index, a.size, a.memory_type.clone());
                let e = agg.uses.entry(key).or_insert_with(|| ShapeUse {
                    dispatches: 0,
                    first_base: a.base,
                    bases: FxHashSet::default(),
                });
                e.bases.insert(a.base);
            }
            // Count a shape once per dispatch even if the dispatch used it twice.
            let mut shapes = set.clone();
            shapes.dedup();
            for s in shapes {
                if let Some(e) = agg.uses.get_mut(&s) {
                    e.dispatches += 1;
                }
            }
            agg.sets.insert(set);
        }
        let mut kernels: Vec<KernelAllocationStats> = by_kernel
            .into_iter()
            .map(|(kernel, a)| {
                let mut allocations: Vec<AllocationUse> = a
                    .uses
                    .into_iter()
                    .map(|((arg_index, size, memory_type), u)| AllocationUse {
                        arg_index,
                        size,
                        memory_type,
                        dispatches: u.dispatches,
                        first_base: u.first_base,
                        distinct_bases: u.bases.len() as u64,
                    })
                    .collect();
                // Explicit arguments in order, implicit ones (-1) after them.
                allocations.sort_by(|x, y| {
                    (x.arg_index < 0, x.arg_index, std::cmp::Reverse(x.dispatches), x.size)
                        .cmp(&(y.arg_index < 0, y.arg_index, std::cmp::Reverse(y.dispatches), y.size))
                        .then_with(|| x.memory_type.cmp(&y.memory_type))
                });
                KernelAllocationStats {
                    kernel,
                    dispatches: a.dispatches,
                    linked: a.linked,
                    distinct_sets: a.sets.len() as u64,
                    without_allocations: a.without_allocations,
                    max_dispatch_bytes: a.max_dispatch_bytes,
                    allocations,
                    first_dispatch: a.first_dispatch,
                }
            })
            .collect();
        kernels.sort_by(|a, b| b.dispatches.cmp(&a.dispatches).then_with(|| a.kernel.cmp(&b.kernel)));
        KernelAllocationSummary {
            linked: self.dispatches.iter().filter(|d| d.command_instance.is_some()).count() as u64,
            kernels,
            dispatches: self.dispatches,
        }
    }
}
