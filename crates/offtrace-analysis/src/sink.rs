//! Model events: what the builder recognises while it reads, handed to a [`ModelSink`] as soon
//! as each thing is complete. Exports implement the sink to write rows and slices without
//! keeping the trace in memory.

/// A UR call, at its end notification.
#[derive(Debug, Clone, Copy)]
pub struct UrCallEvent<'a> {
    pub tid: u32,
    pub instance: u64,
    pub function_id: u32,
    pub name: &'a str,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub result: Option<i32>,
    pub args: &'a [u64],
    pub outs: &'a [(u8, u64)],
    /// The SYCL command (its instance) open on this thread when the call was made.
    pub command_instance: Option<u64>,
}

/// A SYCL command's host enqueue (task_begin → task_end), at task_end.
#[derive(Debug, Clone, Copy)]
pub struct CommandEvent<'a> {
    pub instance: u64,
    pub tid: u32,
    pub name: &'a str,
    pub kind: &'a str,
    pub queue_id: Option<u64>,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub node: Option<u32>,
    /// The `ur_event_handle_t` its `signal` carried.
    pub ur_event: Option<u64>,
    pub memory_size: Option<u64>,
}

/// A task-graph node, at node_create.
#[derive(Debug, Clone, Copy)]
pub struct NodeEvent<'a> {
    pub node: u32,
    pub instance: u64,
    pub tid: u32,
    pub ts_ns: u64,
    pub name: &'a str,
    pub kind: &'a str,
    pub queue_id: Option<u64>,
}

/// A task-graph edge, at edge_create.
#[derive(Debug, Clone, Copy)]
pub struct EdgeEvent<'a> {
    pub edge: u32,
    pub source: Option<u32>,
    pub target: Option<u32>,
    pub ts_ns: u64,
    pub name: &'a str,
    pub access_mode: Option<u64>,
}

/// A memory allocation (at mem_alloc_end) or release (at mem_release_end).
#[derive(Debug, Clone, Copy)]
pub struct MemoryEvent<'a> {
    pub release: bool,
    pub tid: u32,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub pointer: Option<u64>,
    pub bytes: u64,
    /// device / shared / host / usm / buffer.
    pub kind: &'a str,
    pub device: &'a str,
    /// Bytes live after this event (every kind).
    pub live_bytes: u64,
}

/// A copy or fill: a SYCL command with `memory_size`, or a UR enqueue call.
#[derive(Debug, Clone, Copy)]
pub struct MemOpEvent<'a> {
    pub op: &'a str,
    pub source: &'a str,
    pub tid: u32,
    pub instance: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
}

/// A queue created or destroyed.
#[derive(Debug, Clone, Copy)]
pub struct QueueEvent<'a> {
    pub destroy: bool,
    pub queue_id: u64,
    pub ts_ns: u64,
    pub tid: u32,
    pub is_inorder: Option<bool>,
    pub device: &'a str,
}

/// Device execution of a command, once the program's profiling queries gave start and end.
#[derive(Debug, Clone, Copy)]
pub struct DeviceEvent<'a> {
    pub instance: u64,
    pub ur_event: u64,
    pub name: &'a str,
    pub queue_id: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Receives model events in trace order. Every method defaults to doing nothing.
pub trait ModelSink {
    fn ur_call(&mut self, _call: &UrCallEvent<'_>) {}
    fn command(&mut self, _cmd: &CommandEvent<'_>) {}
    fn node(&mut self, _node: &NodeEvent<'_>) {}
    fn edge(&mut self, _edge: &EdgeEvent<'_>) {}
    fn memory(&mut self, _mem: &MemoryEvent<'_>) {}
    fn mem_op(&mut self, _op: &MemOpEvent<'_>) {}
    fn queue(&mut self, _queue: &QueueEvent<'_>) {}
    fn device(&mut self, _dev: &DeviceEvent<'_>) {}
}

/// A sink that ignores everything (for summaries alone).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSink;
impl ModelSink for NoSink {}
