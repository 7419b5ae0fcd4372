//! The report of one trace: what `offtrace report` prints, and the JSON it writes
//! (`docs/report-json.md` documents every key). Plain serde values, sections by kind, kinds
//! named as the tracing services name them (`UR_API`, `KERNEL_DISPATCH`, `MEMORY_COPY`, ...).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything `offtrace report` says about a trace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub trace: TraceFacts,
    /// API calls per kind and operation, most total time first.
    pub api_calls: Vec<ApiCallStats>,
    /// Device activity per kind and name, most device time (then count) first.
    pub device_activity: Vec<DeviceActivityStats>,
    pub memory: MemoryReport,
    /// Code objects (`CODE_OBJECT`) per operation (`program`, `program_build`, `kernel`), in
    /// the order the trace numbers them: what the runtimes loaded, built and released. Empty
    /// without code-object records (and in reports written before the section existed).
    #[serde(default)]
    pub code_objects: Vec<CodeObjectStats>,
    /// Queues / streams, in order of first appearance.
    pub queues: Vec<QueueStats>,
    pub task_graph: TaskGraphReport,
    pub threads: Vec<ThreadStats>,
    pub counters: Vec<CounterStats>,
    /// Values per command (event-based metric queries) per device-activity kind and name,
    /// joined with the commands by correlation id. Empty without such values.
    #[serde(default)]
    pub command_metrics: Vec<CommandMetricStats>,
    pub markers: Vec<MarkerStats>,
    /// Records of kinds without a typed record (a newer or made-up kind), per kind and operation.
    pub other: Vec<OtherStats>,
    pub drops: DropStats,
    /// The optional raw layer: stream name → notification type name → count. Empty when the
    /// trace holds no raw notifications.
    pub notifications: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TraceFacts {
    /// The trace's `Info` records (pid, command, detail, ...).
    pub info: BTreeMap<String, String>,
    pub format_version: u16,
    /// Records read (all types).
    pub records: u64,
    /// First and last timestamp of any timed record (CLOCK_MONOTONIC ns), and their distance.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub wall_ns: u64,
    /// The recording finished (End record and end marker read, nothing damaged).
    pub complete: bool,
    /// Damage the reader stepped over (each: what was wrong and what was skipped).
    pub warnings: Vec<String>,
    /// Why the file does not end cleanly (truncated, ...), if it does not.
    pub problem: Option<String>,
    /// Totals the recorder wrote in the `End` record.
    pub end_records: Option<u64>,
    pub end_drops: Option<u64>,
}

/// Count, total, mean, min and max of a duration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durations {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Durations {
    pub fn add(&mut self, ns: u64) {
        if self.count == 0 || ns < self.min_ns {
            self.min_ns = ns;
        }
        self.max_ns = self.max_ns.max(ns);
        self.total_ns = self.total_ns.saturating_add(ns);
        self.count += 1;
    }

    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// One operation of one API kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApiCallStats {
    /// `UR_API`, `OPENCL_API`, `CUDA_RUNTIME_API`, `CUDA_DRIVER_API`, or any kind a backend
    /// defined in the trace.
    pub kind: String,
    /// The function's name, from the operation table the trace defines.
    pub operation: String,
    pub calls: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Calls whose result was not the kind's success value (0).
    pub errors: u64,
    /// Calls that caused device activity (correlated), and how many activities.
    pub device_activities: u64,
}

/// Device work of one kind and name (a kernel's dispatches, the copies of one direction, ...).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceActivityStats {
    /// `KERNEL_DISPATCH`, `MEMORY_COPY`, `MEMORY_FILL`, `BARRIER`, ...
    pub kind: String,
    /// Kernel name (demangled, whole) or the operation (`usm_memcpy`, `buffer_fill`, ...).
    pub name: String,
    pub count: u64,
    /// Activities whose device start and end are known.
    pub device_count: u64,
    /// Device time (end - start) over those: `None` when no activity's time is known.
    pub device_total_ns: Option<u64>,
    pub device_mean_ns: Option<u64>,
    pub device_min_ns: Option<u64>,
    pub device_max_ns: Option<u64>,
    /// Host time of the API calls that enqueued them (enter → exit), over those found.
    pub host_enqueue_count: u64,
    pub host_enqueue_total_ns: u64,
    pub host_enqueue_mean_ns: u64,
    /// Bytes moved or filled (copies and fills).
    pub bytes: u64,
    /// Queues that ran them.
    pub queues: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Allocations by memory type and device.
    pub allocations: Vec<AllocationStats>,
    /// Most bytes live at once (every type), and at the end of the trace.
    pub peak_live_bytes: u64,
    pub peak_live_ns: Option<u64>,
    pub live_bytes_at_end: u64,
    pub frees: u64,
    /// Frees of an address no allocation of the trace returned.
    pub unmatched_frees: u64,
    /// Parts of allocations with a handle of their own (OpenCL sub-buffers): not in
    /// `allocations` nor in live bytes, their bytes are their parents'.
    #[serde(default)]
    pub sub_allocations: SubAllocationStats,
    /// Copies by direction (not maps and unmaps: `maps`).
    pub copies: Vec<CopyStats>,
    pub fills: FillStats,
    /// Maps and unmaps (OpenCL `clEnqueueMap*`, `clEnqueueUnmapMemObject`, `clEnqueueSVMUnmap`):
    /// the bytes of the regions they made visible, which they may not have copied.
    #[serde(default)]
    pub maps: FillStats,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubAllocationStats {
    pub count: u64,
    /// The bytes they cover inside their parents.
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AllocationStats {
    /// `HOST`, `DEVICE`, `SHARED`, `UNKNOWN`, ...
    pub memory_type: String,
    /// The device's name (or its id when the trace names none); empty for host memory.
    pub device: String,
    pub count: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    /// Most bytes of this type and device live at once (`peak_live_bytes` adds every type).
    #[serde(default)]
    pub peak_live_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CopyStats {
    /// `HOST_TO_DEVICE`, `DEVICE_TO_HOST`, `DEVICE_TO_DEVICE`, `HOST_TO_HOST`, `UNKNOWN`.
    pub direction: String,
    pub count: u64,
    pub bytes: u64,
    /// Copies whose device time is known, their bytes and device time.
    pub device_count: u64,
    pub device_bytes: u64,
    pub device_ns: u64,
    /// `device_bytes / device_ns` in GB/s (= bytes per ns); `None` without device times: a
    /// rate from host enqueue time would measure the enqueue, not the copy.
    pub bandwidth_gb_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FillStats {
    pub count: u64,
    pub bytes: u64,
    pub device_count: u64,
    pub device_ns: u64,
}

/// The code objects of one operation: programs (OpenCL and SYCL programs, CUDA modules), program
/// builds (named by their build options) or kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeObjectStats {
    /// The operation's name from the trace's definitions (`program`, `program_build`, `kernel`).
    pub operation: String,
    /// LOAD records (create, build), and UNLOAD records (the release that dropped it).
    pub loads: u64,
    pub unloads: u64,
    /// Unloads of a handle with no load before them in time (or one whose load was forgotten:
    /// loads are remembered until their unload or `PENDING_MAX` later loads). A load later in
    /// the file but earlier in time (another thread's block) is matched.
    pub unmatched_unloads: u64,
    /// Loads not unloaded by the end of the trace (`loads` − matched unloads).
    pub loaded_at_end: u64,
    /// Loads whose record carried a size (binary, IL or source bytes), and their bytes and the
    /// largest: `None` when no load carried one (a size of 0 is no size).
    pub sized_loads: u64,
    pub bytes: Option<u64>,
    pub max_bytes: Option<u64>,
    /// Loads whose record carried no name (SYCL programs; builds without options).
    pub unnamed_loads: u64,
    /// Per name as the records give it (an unload counted under its load's name), most bytes
    /// then most loads first; every distinct name.
    pub names: Vec<CodeObjectNameStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeObjectNameStats {
    pub name: String,
    pub loads: u64,
    pub unloads: u64,
    /// Bytes of its loads that carried a size, and the largest; `None` without any.
    pub bytes: Option<u64>,
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueStats {
    pub queue: u64,
    /// The device's name (or id).
    pub device: String,
    pub context: u64,
    pub in_order: Option<bool>,
    /// The program asked for profiling (`queue_flags::PROFILING`; null without a queue record).
    #[serde(default)]
    pub profiling: Option<bool>,
    pub created_ns: Option<u64>,
    pub destroyed_ns: Option<u64>,
    /// Device activity it ran, by kind.
    pub commands: BTreeMap<String, u64>,
    pub total_commands: u64,
    /// Time the device ran at least one of this queue's commands (of those with device times):
    /// the union of their device intervals, overlapping commands of an out-of-order queue
    /// counted once (`busy_time.rs`).
    pub device_busy_ns: u64,
    /// Sum of the device times known on this queue (overlaps counted each time: above
    /// `device_busy_ns` where commands overlapped).
    #[serde(default)]
    pub device_time_sum_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskGraphReport {
    pub nodes: u64,
    pub edges: u64,
    pub signals: u64,
    /// Edges from or to a node the trace never defined, or one older than the last
    /// `GRAPH_NODES_MAX` nodes (forgotten to bound memory).
    pub unresolved_edges: u64,
    /// The longest dependency chain over real commands (nodes submitted to a queue or run as a
    /// task; virtual nodes do not count): its length in commands, and the commands on it in
    /// order.
    pub longest_chain_len: u64,
    pub longest_chain: Vec<String>,
    /// Nodes of SYCL host tasks (named `host task`): they run later on the runtime's thread
    /// pool, and the trace has their submission only, not their execution.
    #[serde(default)]
    pub host_tasks: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ThreadStats {
    pub tid: u32,
    pub name: String,
    pub api_calls: u64,
    pub api_total_ns: u64,
    /// Device activities this thread enqueued.
    pub device_activities: u64,
    pub drops: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CounterStats {
    pub name: String,
    pub unit: String,
    pub device: String,
    pub samples: u64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub last: f64,
}

/// One metric's values per command over the commands of one device-activity kind and name
/// (a kernel, a copy, ...): what an event-based query measured around each of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CommandMetricStats {
    /// The activity's kind and name as in `device_activity`; both empty for values whose
    /// command has no device activity in the trace.
    pub kind: String,
    pub name: String,
    /// The counter (`<group>.<metric>.per_command`).
    pub metric: String,
    pub unit: String,
    pub device: String,
    /// Commands with a value.
    pub commands: u64,
    pub total: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MarkerStats {
    pub name: String,
    /// `MARK` (an instant) or `RANGE`.
    pub kind: String,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherStats {
    pub kind: String,
    pub operation: String,
    pub count: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DropStats {
    /// Records the recorder could not keep (buffer full), summed.
    pub total: u64,
    pub by_thread: BTreeMap<u32, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_track_count_total_min_max_mean() {
        let mut d = Durations::default();
        assert_eq!(d.mean_ns(), 0);
        for ns in [30, 10, 20] {
            d.add(ns);
        }
        assert_eq!(d, Durations { count: 3, total_ns: 60, min_ns: 10, max_ns: 30 });
        assert_eq!(d.mean_ns(), 20);
    }
}
