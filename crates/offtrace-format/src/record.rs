//! The record model: what one trace holds, as plain Rust values.
//!
//! A trace is a sequence of [`Record`]s. Definitions ([`Record::String`], [`Record::Payload`],
//! [`Record::Object`], [`Record::MetadataSet`], [`Record::Stream`], [`Record::Thread`]) give ids
//! a meaning and always precede, in file order, the first record that refers to them. Everything
//! else refers to them by id, so strings never sit on the record path.
//!
//! Ids are per trace. `0` means "none" for every id type, so a definition never uses id 0.
//!
//! Fixed-capacity arrays ([`ArgBlock`], [`OutValues`]) keep the encoder allocation-free: the agent
//! fills a [`Notification`] on the stack inside an XPTI callback.

/// Identity of a string in this trace's string table (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrId(pub u32);

/// Identity of a payload (name, file, line, column) definition (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PayloadId(pub u32);

/// Identity of a typed metadata value (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectId(pub u32);

/// Identity of a set of metadata items attached to an event (0 = no metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MetadataSetId(pub u32);

/// The type byte of an XPTI metadata value (`metadata_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueType {
    Binary = 0,
    String = 1,
    SignedInteger = 2,
    UnsignedInteger = 3,
    Floating = 4,
    Boolean = 5,
}

impl ValueType {
    /// Maps the XPTI type byte; unknown bytes become `Binary` (the bytes are kept as they are).
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::String,
            2 => Self::SignedInteger,
            3 => Self::UnsignedInteger,
            4 => Self::Floating,
            5 => Self::Boolean,
            _ => Self::Binary,
        }
    }
}

/// Where the trace's timestamps come from. Notification timestamps in decoded records are always
/// CLOCK_MONOTONIC nanoseconds: the reader converts raw ticks with the calibration records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClockSource {
    /// `clock_gettime(CLOCK_MONOTONIC)` nanoseconds, stored as they are.
    Monotonic = 0,
    /// The x86 time-stamp counter, converted with [`Record::ClockSync`] points.
    Tsc = 1,
}

/// Maximum number of parameters recorded for one API call (UR functions have at most 12).
pub const MAX_ARGS: usize = 16;
/// Maximum number of output values recorded for one API call.
pub const MAX_OUTS: usize = 4;

/// The raw argument values of one API call, one `u64` per parameter in declaration order.
///
/// For a UR call, `values[i]` is the 8 bytes read at `params->pArg_i` (the argument variable
/// itself): a handle, pointer, size or enum. Values narrower than 8 bytes are already masked to
/// their width by the agent, which knows the parameter types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgBlock {
    pub len: u8,
    pub values: [u64; MAX_ARGS],
}

impl Default for ArgBlock {
    fn default() -> Self {
        Self { len: 0, values: [0; MAX_ARGS] }
    }
}

impl ArgBlock {
    pub fn as_slice(&self) -> &[u64] {
        &self.values[..usize::from(self.len).min(MAX_ARGS)]
    }
}

/// Values an API call wrote through its output parameters, read at the exit notification:
/// `(parameter index, value)`, e.g. the `ur_event_handle_t` behind `phEvent`, the pointer
/// behind `ppMem`, the value behind `pPropValue` of `urEventGetProfilingInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutValues {
    pub len: u8,
    pub values: [(u8, u64); MAX_OUTS],
}

impl OutValues {
    pub fn as_slice(&self) -> &[(u8, u64)] {
        &self.values[..usize::from(self.len).min(MAX_OUTS)]
    }
}

/// The identity and description of an XPTI event object (`trace_event_data_t`) as it was at
/// the moment of the notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventInfo {
    /// `unique_id` (uid64). Reused by the runtime for unrelated events later: not a long-term key.
    pub uid: u64,
    pub instance_id: u64,
    pub event_type: u16,
    pub activity_type: u16,
    /// Edge events: uid64 of the source and target node events at that moment (0 = none).
    pub source_id: u64,
    pub target_id: u64,
    pub payload: PayloadId,
    pub metadata: MetadataSetId,
}

/// The notification's `user_data`, decoded by trace type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserData {
    #[default]
    None,
    /// A C string (node kinds such as `command_group_node`, `queue.wait[...]`, `usm::free`).
    Str(StrId),
    /// `function_with_args_t` (UR calls): function id and name, `ur_result_t` at exit.
    FunctionWithArgs { function_id: u32, name: StrId, result: Option<i32>, args: ArgBlock, outs: OutValues },
    /// `mem_alloc_data_t`.
    MemAlloc { mem_object: u64, alloc_pointer: u64, alloc_size: u64, guard_zone: u64 },
    /// `offload_buffer_data_t`.
    OffloadBuffer {
        user_object: u64,
        host_object: u64,
        element_type: StrId,
        element_size: u32,
        dim: u32,
        range: [u64; 3],
    },
    /// `offload_association_data_t`.
    Association { user_object: u64, mem_object: u64 },
    /// `offload_accessor_data_t`.
    Accessor { buffer: u64, accessor: u64, target: u32, mode: u32 },
    /// A `signal`'s `ur_event_handle_t`.
    Signal { ur_event: u64 },
    /// A pointer the agent could not or would not decode.
    Pointer(u64),
}

/// One XPTI notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Notification {
    /// CLOCK_MONOTONIC nanoseconds (after the reader's conversion).
    pub ts: u64,
    /// Kernel thread id of the notifying thread.
    pub tid: u32,
    /// Trace-local stream id (see [`Record::Stream`]).
    pub stream: u8,
    pub trace_type: u16,
    /// The callback's `instance` argument: the runtime's correlation id.
    pub instance: u64,
    pub parent: Option<EventInfo>,
    pub event: Option<EventInfo>,
    pub user_data: UserData,
    /// `xptiGetStashedTuple` at the time of the notification, if any: (key, value).
    pub stash: Option<(StrId, u64)>,
    /// `xptiGetUniversalId()` at the time of the notification (0 = none).
    pub universal_id: u64,
}

/// What kind of memory an allocation a kernel uses is (Level Zero `ze_memory_type_t`
/// semantics, as USM reports it). One byte on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum MemoryType {
    /// Not a USM allocation the services knew, or its type could not be queried.
    #[default]
    Unknown = 0,
    Host = 1,
    Device = 2,
    Shared = 3,
}

impl MemoryType {
    /// The on-disk byte's meaning; `None` for bytes no version defines.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Unknown),
            1 => Some(Self::Host),
            2 => Some(Self::Device),
            3 => Some(Self::Shared),
            _ => None,
        }
    }

    /// Upper-case name as reports print it: `UNKNOWN`, `HOST`, `DEVICE`, `SHARED`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::Host => "HOST",
            Self::Device => "DEVICE",
            Self::Shared => "SHARED",
        }
    }
}

/// One allocation a kernel dispatch uses (a Level Zero kernel allocation property).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KernelAllocation {
    /// Base address of the allocation (not the argument's value, which may point inside it).
    pub base: u64,
    /// Size of the allocation in bytes.
    pub size: u64,
    /// The kernel argument that refers to it; `-1` for an implicit allocation (used by the
    /// kernel without being passed as an argument, e.g. through indirect access).
    pub arg_index: i32,
    pub memory_type: MemoryType,
}

/// One kernel dispatch as the tracing services saw it (KERNEL_DISPATCH), with its allocation
/// properties: every allocation the kernel uses, found by matching its arguments against the
/// live USM allocation table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelDispatch {
    pub tid: u32,
    /// Raw clock ticks when written, like [`Notification::ts`]; the reader converts them to
    /// CLOCK_MONOTONIC nanoseconds the same way.
    pub ts: u64,
    /// The services' internal correlation id of the API call that launched it.
    pub correlation: u64,
    /// The XPTI `instance` of the enclosing `ur.call` notification (urEnqueueKernelLaunch*),
    /// 0 = none.
    pub ur_instance: u64,
    /// Kernel name (string definition id).
    pub kernel: StrId,
    pub queue: u64,
    pub kernel_handle: u64,
    pub work_dim: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    pub allocations: Vec<KernelAllocation>,
}

// ---------------------------------------------------------------------------------------------
// Typed records (format version 3): the tracing services' records, one model for every runtime.
// ---------------------------------------------------------------------------------------------

/// Maximum number of arguments of one [`ApiCall`] (UR has at most 17, OpenCL and CUDA fewer).
pub const MAX_API_ARGS: usize = 24;

/// The argument values of one API call, one `u64` per parameter in declaration order (masked to
/// the parameter's width): name and type of each come from the kind's [`OperationDef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiArgs {
    pub len: u8,
    pub values: [u64; MAX_API_ARGS],
}

impl Default for ApiArgs {
    fn default() -> Self {
        Self { len: 0, values: [0; MAX_API_ARGS] }
    }
}

impl ApiArgs {
    /// The first `MAX_API_ARGS` values of `values`.
    pub fn from_slice(values: &[u64]) -> Self {
        let n = values.len().min(MAX_API_ARGS);
        let mut a = Self { len: n as u8, ..Self::default() };
        a.values[..n].copy_from_slice(&values[..n]);
        a
    }

    pub fn as_slice(&self) -> &[u64] {
        &self.values[..usize::from(self.len).min(MAX_API_ARGS)]
    }
}

/// One argument descriptor of an operation (as `offtrace_core::ArgDescriptor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ArgDef {
    pub name: StrId,
    pub type_name: StrId,
    /// Size in bytes of the C type.
    pub size: u8,
    /// How the value prints: the value of `offtrace_core::ArgFormat` (0 unsigned, 1 signed, 2 hex,
    /// 3 pointer, 4 bool, 5 C string, 6 enum; other values print as unsigned).
    pub format: u8,
}

/// An operation of a kind, with its arguments: for an API kind, one function of the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OperationDef {
    pub kind: u32,
    pub op: u32,
    pub name: StrId,
    pub args: Vec<ArgDef>,
}

/// Which phase of an operation a typed record is (the services' `Phase` values).
pub mod phase {
    pub const NONE: u8 = 0;
    pub const ENTER: u8 = 1;
    pub const EXIT: u8 = 2;
    pub const LOAD: u8 = 3;
    pub const UNLOAD: u8 = 4;
    /// Device activity whose device times are known.
    pub const COMPLETE: u8 = 5;
}

/// One API call of any API kind (`UR_API`, `OPENCL_API`, `CUDA_RUNTIME_API`, `CUDA_DRIVER_API`, or
/// a kind this build does not know): enter and exit in one record, written at the exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApiCall {
    pub kind: u32,
    pub op: u32,
    pub tid: u32,
    /// Enter and exit, raw ticks when written, CLOCK_MONOTONIC ns after reading.
    pub start: u64,
    pub end: u64,
    /// The services' correlation id: device activity, allocations and code objects the call
    /// caused carry the same id.
    pub correlation: u64,
    /// The tool's external correlation id at the call (0 = none).
    pub external: u64,
    pub args: ApiArgs,
    /// The call's result (`ur_result_t`, `cl_int`, ...); `None` when the exit carried none.
    pub result: Option<i64>,
}

/// An [`ApiCall`] whose arguments are borrowed (the recorder's ring entry): what
/// [`crate::TraceWriter::write_api_call_ref`] encodes without copying the arguments into an
/// [`ApiArgs`] first. Same bytes on disk as the `ApiCall` it stands for (arguments past
/// [`MAX_API_ARGS`] are cut, as by [`ApiArgs::from_slice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCallRef<'a> {
    pub kind: u32,
    pub op: u32,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub correlation: u64,
    pub external: u64,
    pub args: &'a [u64],
    pub result: Option<i64>,
}

impl ApiCall {
    /// This call with its arguments borrowed.
    pub fn borrowed(&self) -> ApiCallRef<'_> {
        ApiCallRef {
            kind: self.kind,
            op: self.op,
            tid: self.tid,
            start: self.start,
            end: self.end,
            correlation: self.correlation,
            external: self.external,
            args: self.args.as_slice(),
            result: self.result,
        }
    }
}

impl ApiCallRef<'_> {
    /// The owned record.
    pub fn to_api_call(&self) -> ApiCall {
        ApiCall {
            kind: self.kind,
            op: self.op,
            tid: self.tid,
            start: self.start,
            end: self.end,
            correlation: self.correlation,
            external: self.external,
            args: ApiArgs::from_slice(self.args),
            result: self.result,
        }
    }
}

/// Which way a copy goes (the services' `CopyDirection`). One byte on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum CopyDirection {
    #[default]
    Unknown = 0,
    HostToDevice = 1,
    DeviceToHost = 2,
    DeviceToDevice = 3,
    HostToHost = 4,
}

impl CopyDirection {
    /// The on-disk byte's meaning; `None` for bytes no version defines.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Unknown),
            1 => Some(Self::HostToDevice),
            2 => Some(Self::DeviceToHost),
            3 => Some(Self::DeviceToDevice),
            4 => Some(Self::HostToHost),
            _ => None,
        }
    }

    /// `UNKNOWN`, `HOST_TO_DEVICE`, `DEVICE_TO_HOST`, `DEVICE_TO_DEVICE`, `HOST_TO_HOST`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::HostToDevice => "HOST_TO_DEVICE",
            Self::DeviceToHost => "DEVICE_TO_HOST",
            Self::DeviceToDevice => "DEVICE_TO_DEVICE",
            Self::HostToHost => "HOST_TO_HOST",
        }
    }
}

/// Device activity: a kernel dispatch (`KERNEL_DISPATCH`), copy (`MEMORY_COPY`), fill
/// (`MEMORY_FILL`) or barrier (`SYNC`, operation barrier) on a queue.
///
/// `phase` is [`phase::NONE`] for the record written when the work was enqueued (inside the
/// API call, `ts` = enqueue time) and [`phase::COMPLETE`] for one written when its device times
/// became known. A `COMPLETE` record whose `(kind, correlation)` matches an earlier `NONE`
/// record completes that one (same work); without a match it stands alone (a backend that
/// learns everything at completion, such as CUPTI's activity API, writes only that).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Activity {
    pub kind: u32,
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    /// Host time of the record (enqueue or completion report), raw ticks when written.
    pub ts: u64,
    /// The correlation id of the API call that caused it.
    pub correlation: u64,
    /// The queue / stream (the runtime's handle as an id; see [`Record::Queue`]); 0 = unknown.
    pub queue: u64,
    pub device: u64,
    /// Kernel name, whole and demangled (0 = none: copies, fills, barriers).
    pub name: StrId,
    /// Kernel handle (0 = none).
    pub kernel: u64,
    pub work_dim: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    /// Bytes moved or written (copies, fills); 0 for kernels.
    pub bytes: u64,
    pub direction: CopyDirection,
    pub src_type: MemoryType,
    pub dst_type: MemoryType,
    /// Device start and end, CLOCK_MONOTONIC ns (the trace's clock; never converted by the
    /// reader), 0 = unknown.
    pub device_start: u64,
    pub device_end: u64,
    /// The kernel's allocation properties (kernels only).
    pub allocations: Vec<KernelAllocation>,
}

/// An [`Activity`] whose allocation properties are borrowed (the recorder's ring entry): what
/// [`crate::TraceWriter::write_activity_ref`] encodes without building the record and its
/// `Vec`. Same bytes on disk as the `Activity` it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActivityRef<'a> {
    pub kind: u32,
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub queue: u64,
    pub device: u64,
    pub name: StrId,
    pub kernel: u64,
    pub work_dim: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    pub bytes: u64,
    pub direction: CopyDirection,
    pub src_type: MemoryType,
    pub dst_type: MemoryType,
    pub device_start: u64,
    pub device_end: u64,
    pub allocations: &'a [KernelAllocation],
}

impl Activity {
    /// This activity with its allocation properties borrowed.
    pub fn borrowed(&self) -> ActivityRef<'_> {
        ActivityRef {
            kind: self.kind,
            op: self.op,
            phase: self.phase,
            tid: self.tid,
            ts: self.ts,
            correlation: self.correlation,
            queue: self.queue,
            device: self.device,
            name: self.name,
            kernel: self.kernel,
            work_dim: self.work_dim,
            global_size: self.global_size,
            local_size: self.local_size,
            bytes: self.bytes,
            direction: self.direction,
            src_type: self.src_type,
            dst_type: self.dst_type,
            device_start: self.device_start,
            device_end: self.device_end,
            allocations: &self.allocations,
        }
    }
}

impl ActivityRef<'_> {
    /// The owned record.
    pub fn to_activity(&self) -> Activity {
        Activity {
            kind: self.kind,
            op: self.op,
            phase: self.phase,
            tid: self.tid,
            ts: self.ts,
            correlation: self.correlation,
            queue: self.queue,
            device: self.device,
            name: self.name,
            kernel: self.kernel,
            work_dim: self.work_dim,
            global_size: self.global_size,
            local_size: self.local_size,
            bytes: self.bytes,
            direction: self.direction,
            src_type: self.src_type,
            dst_type: self.dst_type,
            device_start: self.device_start,
            device_end: self.device_end,
            allocations: self.allocations.to_vec(),
        }
    }
}

/// A queue or stream (`QUEUE` kind): created (a definition: its device, context, flags),
/// destroyed, or (SYCL) a command-group submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueRecord {
    pub op: u32,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub queue: u64,
    pub device: u64,
    pub context: u64,
    /// The queue's properties: the bits of [`queue_flags`].
    pub flags: u64,
}

/// The bits of [`QueueRecord::flags`], as backends set them (`offtrace_core::queue_flags`, the
/// same values); a backend sets those it knows (SYCL and CUDA: in-order only).
pub mod queue_flags {
    /// In-order execution (commands run one after another).
    pub const IN_ORDER: u64 = 1;
    /// The program asked for profiling results (OpenCL `CL_QUEUE_PROFILING_ENABLE`); the
    /// OpenCL layer turns profiling on for every queue, so this says what the program wanted.
    pub const PROFILING: u64 = 1 << 1;
    /// Priority the program asked for (OpenCL `CL_QUEUE_PRIORITY_KHR` high / low; neither:
    /// the default, or medium).
    pub const PRIORITY_HIGH: u64 = 1 << 2;
    pub const PRIORITY_LOW: u64 = 1 << 3;
    /// A device-side queue (OpenCL `CL_QUEUE_ON_DEVICE`).
    pub const ON_DEVICE: u64 = 1 << 4;
    /// The program configured `cl_codeplay_performance_counters` on it.
    pub const PERFORMANCE_COUNTERS: u64 = 1 << 5;

    /// Every bit with its name, in bit order.
    pub const NAMES: &[(u64, &str)] = &[
        (IN_ORDER, "IN_ORDER"),
        (PROFILING, "PROFILING"),
        (PRIORITY_HIGH, "PRIORITY_HIGH"),
        (PRIORITY_LOW, "PRIORITY_LOW"),
        (ON_DEVICE, "ON_DEVICE"),
        (PERFORMANCE_COUNTERS, "PERFORMANCE_COUNTERS"),
    ];

    /// The names of the bits set in `flags` (bits without a name: `bit N`).
    pub fn names(flags: u64) -> Vec<String> {
        (0..64)
            .filter(|b| flags & (1 << b) != 0)
            .map(|b| NAMES.iter().find(|n| n.0 == 1 << b).map_or_else(|| format!("bit {b}"), |n| n.1.to_owned()))
            .collect()
    }
}

/// A device or context definition (`DEVICE` kind; `op` 0 = device, 1 = context).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceRecord {
    pub op: u32,
    pub handle: u64,
    /// A device's context or platform; a context's first device (0 = none).
    pub parent: u64,
    pub name: StrId,
    /// 0 unknown, 1 CPU, 2 GPU, 3 accelerator.
    pub device_type: u8,
}

/// A memory allocation or free (`MEMORY_ALLOC`; `op` 0 = alloc, 1 = free), from the call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryRecord {
    pub op: u32,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub ptr: u64,
    pub size: u64,
    pub memory_type: MemoryType,
    pub device: u64,
}

/// A code object (`CODE_OBJECT`): program, build, kernel; phase LOAD or UNLOAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CodeObjectRecord {
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub handle: u64,
    pub program: u64,
    pub name: StrId,
    pub size: u64,
}

/// A task-graph record (`TASK_GRAPH`): node, edge, task (ENTER / EXIT) or signal, with the
/// queue of the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskGraphRecord {
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub node: u64,
    pub source: u64,
    pub target: u64,
    pub name: StrId,
    pub event: u64,
    pub queue: u64,
}

/// A host wait or barrier span edge (`SYNC`, phase ENTER / EXIT / NONE). Barriers enqueued on a
/// queue are [`Activity`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncRecord {
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub object: u64,
    pub event_count: u32,
}

/// A marker (`MARKER`): a mark (phase NONE) or a range edge (ENTER / EXIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MarkerRecord {
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub message: StrId,
    pub range_id: u64,
}

/// A counter's definition (`COUNTER`, operation define).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CounterDef {
    pub counter: u64,
    pub device: u64,
    pub name: StrId,
    pub unit: StrId,
    /// 0 = u64, 1 = i64, 2 = f64 (the sample's bits).
    pub value_type: u8,
}

/// One counter sample (`COUNTER`, operation sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CounterSample {
    pub counter: u64,
    pub tid: u32,
    pub ts: u64,
    /// The value's bits, per the definition's value type.
    pub value: u64,
    /// The command this value was measured for (an event-based query around it), the
    /// correlation id of its launch and device activity; 0 for a sample of a time series.
    /// On disk since format version 4.
    pub correlation: u64,
}

/// A record of a kind this build has no typed record for (a made-up or newer kind): its
/// values in the order of the operation's [`OperationDef`] arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GenericRecord {
    pub kind: u32,
    pub op: u32,
    pub phase: u8,
    pub tid: u32,
    pub ts: u64,
    pub correlation: u64,
    pub values: ApiArgs,
}

/// One record of a trace.
///
/// The raw layer's [`Notification`] (392 bytes) and the version-2 [`KernelDispatch`] are boxed:
/// typed traces hold none or few of them, and every record in memory is as large as the largest
/// inline variant (the reader moves and stores each one: 392 bytes a record before, 264 now).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Facts about the recording: `("pid", "1234")`, `("command", "python w4.py")`, `("agent_version", ..)`,
    /// `("dispatcher", path)`, `("detail", "normal")`.
    Info { key: String, value: String },
    /// A calibration point relating raw ticks to CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds.
    ClockSync { ticks: u64, monotonic_ns: u64, realtime_ns: u64 },
    /// A string definition.
    String { id: StrId, text: String },
    /// An XPTI stream, with the version it was initialised with.
    Stream { id: u8, name: StrId, major: u32, minor: u32, version: StrId },
    /// A thread seen in the trace.
    Thread { tid: u32, name: StrId },
    /// A payload definition (`payload_t`: name, file, line, column; `u32::MAX` = no line/column).
    Payload { id: PayloadId, name: StrId, file: StrId, line: u32, column: u32 },
    /// A typed metadata value.
    Object { id: ObjectId, value_type: ValueType, bytes: Vec<u8> },
    /// A set of metadata items: (key, value).
    MetadataSet { id: MetadataSetId, items: Vec<(StrId, ObjectId)> },
    /// One notification (the raw layer; boxed, see above).
    Notification(Box<Notification>),
    /// A kernel dispatch with its allocation properties (format version 2 and later; boxed).
    KernelDispatch(Box<KernelDispatch>),
    /// Records lost on a thread (buffer full), counted by the agent.
    Drops { tid: u32, count: u64 },
    /// A kind's name as the services name it (format 3): lets a reader name kinds it does not
    /// know. Precedes the first record of the kind.
    KindDef { kind: u32, name: StrId },
    /// An operation of a kind with its arguments (format 3).
    OperationDef(OperationDef),
    /// An API call (format 3).
    ApiCall(ApiCall),
    /// Device activity (format 3).
    Activity(Activity),
    /// A queue or stream definition / event (format 3).
    Queue(QueueRecord),
    /// A device or context definition (format 3).
    Device(DeviceRecord),
    /// An allocation or free (format 3).
    Memory(MemoryRecord),
    /// A code object load or unload (format 3).
    CodeObject(CodeObjectRecord),
    /// A task-graph node, edge, task edge or signal (format 3).
    TaskGraph(TaskGraphRecord),
    /// A host wait or barrier edge (format 3).
    Sync(SyncRecord),
    /// A marker (format 3).
    Marker(MarkerRecord),
    /// A counter definition (format 3).
    CounterDef(CounterDef),
    /// A counter sample (format 3).
    CounterSample(CounterSample),
    /// A record of a kind without a typed record (format 3).
    Generic(GenericRecord),
    /// The last record of a cleanly finished trace: totals as the agent counted them.
    End { records: u64, drops: u64 },
}

impl From<Notification> for Record {
    fn from(n: Notification) -> Self {
        Record::Notification(Box::new(n))
    }
}

impl From<KernelDispatch> for Record {
    fn from(d: KernelDispatch) -> Self {
        Record::KernelDispatch(Box::new(d))
    }
}

impl Record {
    /// Applies `f` to every host timestamp of this record (the raw-tick fields the reader
    /// converts to CLOCK_MONOTONIC ns). Device times of [`Activity`] are already in the trace's
    /// nanoseconds and are left alone.
    pub fn map_host_times(&mut self, mut f: impl FnMut(u64) -> u64) {
        match self {
            Record::Notification(n) => n.ts = f(n.ts),
            Record::KernelDispatch(d) => d.ts = f(d.ts),
            Record::ApiCall(a) => {
                a.start = f(a.start);
                a.end = f(a.end);
            }
            Record::Activity(a) => a.ts = f(a.ts),
            Record::Queue(r) => r.ts = f(r.ts),
            Record::Memory(r) => r.ts = f(r.ts),
            Record::CodeObject(r) => r.ts = f(r.ts),
            Record::TaskGraph(r) => r.ts = f(r.ts),
            Record::Sync(r) => r.ts = f(r.ts),
            Record::Marker(r) => r.ts = f(r.ts),
            Record::CounterSample(r) => r.ts = f(r.ts),
            Record::Generic(r) => r.ts = f(r.ts),
            Record::Info { .. }
            | Record::ClockSync { .. }
            | Record::String { .. }
            | Record::Stream { .. }
            | Record::Thread { .. }
            | Record::Payload { .. }
            | Record::Object { .. }
            | Record::MetadataSet { .. }
            | Record::Drops { .. }
            | Record::End { .. }
            | Record::KindDef { .. }
            | Record::OperationDef(_)
            | Record::Device(_)
            | Record::CounterDef(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader writes, moves and drops every record: a variant that grows `Record` costs
    /// every reader (`docs/overhead.md`, "Reading at scale"). The largest inline variant is the
    /// API call with its argument block; the raw layer's notification stays boxed.
    #[test]
    fn a_record_stays_264_bytes() {
        assert_eq!(size_of::<ApiCall>(), 264);
        assert!(size_of::<Notification>() > size_of::<ApiCall>(), "boxed for a reason");
        assert_eq!(size_of::<Record>(), 264);
        assert_eq!(size_of::<crate::ApiCallBrief>(), 64);
    }
}
