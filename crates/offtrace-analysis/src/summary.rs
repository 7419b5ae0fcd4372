//! The summary of one trace: what `offtrace report` prints. Plain serde-serialisable values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything `offtrace report` says about a trace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub trace: TraceFacts,
    /// UR calls by function, most total time first.
    pub ur_calls: Vec<UrFunctionStats>,
    /// SYCL commands by kernel or command name, most host time first.
    pub commands: Vec<CommandStats>,
    pub memory: MemorySummary,
    pub queues: Vec<QueueStats>,
    pub graph: GraphSummary,
    pub threads: Vec<ThreadStats>,
    pub drops: DropStats,
    /// Kernel dispatches with their allocation properties.
    #[serde(default)]
    pub kernel_allocations: KernelAllocationSummary,
    /// stream name → XPTI trace type name → notifications.
    pub notifications: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TraceFacts {
    /// The trace's `Info` records (pid, command, detail, ...).
    pub info: BTreeMap<String, String>,
    /// Records read (all kinds).
    pub records: u64,
    pub notifications: u64,
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    /// last - first notification timestamp.
    pub wall_ns: u64,
    /// An `End` record was read: the agent finished the trace cleanly.
    pub complete: bool,
    /// Totals the agent wrote in the `End` record.
    pub end_records: Option<u64>,
    pub end_drops: Option<u64>,
    /// Ends whose begin was never seen (dropped or truncated), and begins never closed.
    pub unmatched_ends: u64,
    pub unclosed_begins: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UrFunctionStats {
    pub name: String,
    pub function_id: u32,
    pub calls: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// total_ns / wall time of the trace (0..1; calls on several threads can sum above 1).
    pub wall_share: f64,
    /// Calls that returned something other than `UR_RESULT_SUCCESS`.
    pub errors: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CommandStats {
    /// Kernel name (`kernel_name` metadata) or command name (payload, `[...]` suffix stripped).
    pub name: String,
    /// The node kind the runtime named (`command_group_node`, `memory_transfer_node::memcpy`, ...).
    pub kind: String,
    pub count: u64,
    /// Host enqueue time: task_begin → task_end.
    pub host_total_ns: u64,
    pub host_mean_ns: u64,
    pub host_max_ns: u64,
    /// Commands of this name whose device time is known (from `urEventGetProfilingInfo`).
    pub device_count: u64,
    /// `None` = n/a: the program never asked for this command's profiling info.
    pub device_total_ns: Option<u64>,
    pub device_mean_ns: Option<u64>,
    pub queues: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemorySummary {
    /// Allocations by kind (device / shared / host / usm = kind unknown / buffer) and device.
    pub allocations: Vec<AllocKindStats>,
    /// Most bytes live at once (every kind), and at the end of the trace.
    pub peak_live_bytes: u64,
    pub live_bytes_at_end: u64,
    pub releases: u64,
    pub buffers: BufferStats,
    /// Copies and fills.
    pub ops: Vec<MemOpStats>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AllocKindStats {
    pub kind: String,
    pub device: String,
    pub count: u64,
    pub bytes: u64,
    pub max_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BufferStats {
    pub constructed: u64,
    pub destructed: u64,
    /// Sum of element size × range over constructed buffers.
    pub bytes: u64,
    pub associations: u64,
    pub accessors: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemOpStats {
    /// `memcpy`, `fill usm`, ... for SYCL commands; the UR function for UR calls.
    pub op: String,
    /// `sycl` (command nodes with `memory_size`) or `ur` (enqueue calls).
    pub source: String,
    pub count: u64,
    pub bytes: u64,
    /// Host time (enqueue window or call duration).
    pub host_ns: u64,
    pub device_ns: Option<u64>,
    /// bytes / (device time if known, else host time), in GB/s (= bytes per ns).
    pub rate_gb_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueStats {
    pub queue_id: u64,
    pub device: String,
    pub is_inorder: Option<bool>,
    pub created_ns: Option<u64>,
    pub destroyed_ns: Option<u64>,
    pub commands: u64,
    pub host_ns: u64,
    pub device_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GraphSummary {
    pub nodes: u64,
    pub edges: u64,
    /// Edges whose source or target uid named no node seen before.
    pub unresolved_edges: u64,
    /// Nodes on the longest dependency chain, and the commands on it, in order.
    pub longest_chain_len: u64,
    pub longest_chain: Vec<String>,
    /// Host enqueue time summed along the chain.
    pub longest_chain_host_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ThreadStats {
    pub tid: u32,
    pub name: String,
    pub notifications: u64,
    pub drops: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DropStats {
    /// Sum of the `Drops` records.
    pub total: u64,
    pub by_thread: BTreeMap<u32, u64>,
}

/// Kernel dispatches with their allocation properties (`KernelDispatch` records, trace format
/// version 2 and later; empty for older traces and for agents without the tracing services).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KernelAllocationSummary {
    /// Of [`Self::dispatches`], those linked to a SYCL command.
    pub linked: u64,
    /// Per kernel name, most dispatches first.
    pub kernels: Vec<KernelAllocationStats>,
    /// Every dispatch, in trace order.
    pub dispatches: Vec<KernelDispatchInfo>,
}

/// The allocations one kernel's dispatches used.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KernelAllocationStats {
    /// The dispatch's kernel name; the linked command's name if the record named none.
    pub kernel: String,
    pub dispatches: u64,
    /// Dispatches linked to a SYCL command.
    pub linked: u64,
    /// Distinct allocation sets: the whole list of (arg_index, size, memory_type) of a dispatch.
    /// 1 means every dispatch used allocations of the same shape.
    pub distinct_sets: u64,
    /// Dispatches that used no allocation at all.
    pub without_allocations: u64,
    /// Largest sum of allocation sizes of one dispatch.
    pub max_dispatch_bytes: u64,
    /// Distinct (arg_index, size, memory_type), by argument (implicit ones last), then most
    /// dispatches first.
    pub allocations: Vec<AllocationUse>,
    /// Index in [`KernelAllocationSummary::dispatches`] of this kernel's first dispatch.
    pub first_dispatch: usize,
}

/// One distinct (arg_index, size, memory_type) of a kernel, and how often it was used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationUse {
    /// `-1`: implicit (used by the kernel without being passed as an argument).
    pub arg_index: i32,
    pub size: u64,
    /// `UNKNOWN`, `HOST`, `DEVICE` or `SHARED`.
    pub memory_type: String,
    /// Dispatches that used it.
    pub dispatches: u64,
    /// Its base address in the first dispatch that used it.
    pub first_base: u64,
    /// Distinct base addresses over those dispatches (1 = always the same allocation).
    pub distinct_bases: u64,
}

/// One kernel dispatch and the SYCL command it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDispatchInfo {
    pub tid: u32,
    /// CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// The tracing services' correlation id of the launching API call.
    pub correlation: u64,
    /// XPTI `instance` of the enclosing `urEnqueueKernelLaunch*` call (0 = none).
    pub ur_instance: u64,
    /// Kernel name as the record gave it (may be empty).
    pub kernel: String,
    pub queue: u64,
    pub kernel_handle: u64,
    pub work_dim: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    /// The SYCL command (its instance) the dispatch belongs to; `None` = outside any command.
    pub command_instance: Option<u64>,
    pub command_name: Option<String>,
    /// How it was linked: `ur_call` (the `ur.call` with instance `ur_instance` on this thread
    /// ran inside the command), `task` (`ts` inside the command's task_begin..task_end on this
    /// thread), or `none`.
    pub link: String,
    pub allocations: Vec<KernelAllocationInfo>,
}

/// One allocation of a dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAllocationInfo {
    pub base: u64,
    pub size: u64,
    /// `-1`: implicit.
    pub arg_index: i32,
    pub memory_type: String,
}
