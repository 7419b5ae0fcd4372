//! Kind-specific payloads: what a callback record's `payload` pointer points at.
//!
//! Every payload is `#[repr(C)]` (the C header declares the same structs) and is only valid
//! during the callback that receives it. Built-in payloads are flat: their leading fields are
//! the ones the kind's [`crate::kind::ArgDescriptor`]s name, in order, so argument iteration
//! reads them generically through [`Payload::arg_values`].

#![allow(unsafe_code)] // `arg_values` reads a payload through the pointer a callback record carries

use std::ffi::{c_char, c_void};

use crate::kind::Kind;

/// Maximum number of parameters carried for one API call (UR functions have at most 17);
/// one more than `offtrace_format::record::MAX_ARGS`: `urEnqueueUSMMemcpy2D`-style calls have 17.
pub const MAX_ARGS: usize = 17;
/// Maximum number of kernel arguments carried by a dispatch record.
pub const MAX_KERNEL_ARGS: usize = 32;

/// An API call of any API kind (`UR_API`, `OPENCL_API`, `CUDA_RUNTIME_API`, `CUDA_DRIVER_API`):
/// the function's raw argument values and, at exit, its result. The kind travels in the
/// [`Payload`] variant ([`Payload::api`]), so one struct serves every runtime.
///
/// `args[i]` is the argument variable itself (a handle, pointer, size or enum), one `u64` per
/// parameter in declaration order, masked to the parameter's width; the kind's registered
/// operation table names and types them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct ApiCallPayload {
    pub function_id: u32,
    pub arg_count: u32,
    /// The function's result (`ur_result_t`, `cl_int`, `cudaError_t`, `CUresult`); meaningful
    /// when `has_result` is 1 (exit phase).
    pub result: i32,
    pub has_result: u32,
    pub args: [u64; MAX_ARGS],
}

impl ApiCallPayload {
    /// Inline: built in place in the caller's slot (the OpenCL layer's `ApiCall`), not on the
    /// stack and then moved (152 bytes per API call).
    #[inline]
    pub fn new(function_id: u32, args: &[u64]) -> Self {
        let n = args.len().min(MAX_ARGS);
        let mut a = [0u64; MAX_ARGS];
        a[..n].copy_from_slice(&args[..n]);
        Self { function_id, arg_count: n as u32, result: 0, has_result: 0, args: a }
    }
}

/// `QUEUE`: a queue or stream, as a definition (create / destroy) or a submission. Handles are
/// the runtime's values, used as ids only (never dereferenced downstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct QueuePayload {
    pub queue: u64,
    pub device: u64,
    pub context: u64,
    /// The queue's properties: the bits of [`crate::queue_flags`] (bit 0 = in-order).
    pub flags: u64,
}

/// The type of an allocation (`offtrace_memory_type_t`, the values of `ze_memory_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum MemoryType {
    #[default]
    Unknown = 0,
    Host = 1,
    Device = 2,
    Shared = 3,
}

impl MemoryType {
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => Self::Host,
            2 => Self::Device,
            3 => Self::Shared,
            _ => Self::Unknown,
        }
    }
}

/// Which way a copy goes (`offtrace_copy_direction_t`). Host = pageable or pinned host memory
/// (USM host included), device = memory of a device (USM device; shared memory counts as
/// device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum CopyDirection {
    #[default]
    Unknown = 0,
    HostToDevice = 1,
    DeviceToHost = 2,
    DeviceToDevice = 3,
    HostToHost = 4,
}

impl CopyDirection {
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => Self::HostToDevice,
            2 => Self::DeviceToHost,
            3 => Self::DeviceToDevice,
            4 => Self::HostToHost,
            _ => Self::Unknown,
        }
    }

    /// The direction of a copy from memory of type `src` to memory of type `dst` (unknown when
    /// either end is).
    pub fn from_types(src: MemoryType, dst: MemoryType) -> Self {
        use MemoryType::*;
        match (src, dst) {
            (Unknown, _) | (_, Unknown) => Self::Unknown,
            (Host, Host) => Self::HostToHost,
            (Host, _) => Self::HostToDevice,
            (_, Host) => Self::DeviceToHost,
            _ => Self::DeviceToDevice,
        }
    }
}

/// A memory range a kernel uses without naming it in an argument (printf or scratch surface).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct ImplicitAllocation {
    pub base: u64,
    pub size: u64,
    pub memory_type: MemoryType,
}

/// `KERNEL_DISPATCH`: a kernel enqueue, with the kernel's raw argument values (pointer
/// arguments are matched against the live allocation table by
/// [`crate::allocation::kernel_allocation_properties`]).
///
/// Device activity: emitted inside the API call that launched it (`emit_instant`, phase
/// `None`: it takes that call's correlation id) and/or, when the device times are known, with
/// [`crate::emit_activity`] (phase `Complete`, `device_start`/`device_end` set, the launching
/// call's correlation id given explicitly).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct KernelDispatchPayload {
    pub queue: u64,
    pub kernel: u64,
    /// The kernel's whole, demangled name (NUL-terminated), valid during the callback; may be null.
    pub kernel_name: *const c_char,
    pub work_dim: u32,
    pub kernel_arg_count: u32,
    /// Dimensions past `work_dim` are 1 (every backend, every path).
    pub global_size: [u64; 3],
    /// All 0 when the runtime chooses; else dimensions past `work_dim` are 1.
    pub local_size: [u64; 3],
    pub kernel_args: [u64; MAX_KERNEL_ARGS],
    pub implicit_allocations: *const ImplicitAllocation,
    pub implicit_allocation_count: u64,
    /// The device (its handle as an id; 0 = unknown).
    pub device: u64,
    /// Device start and end in the trace clock (CLOCK_MONOTONIC ns), 0 = unknown.
    pub device_start: u64,
    pub device_end: u64,
}

impl Default for KernelDispatchPayload {
    fn default() -> Self {
        Self {
            queue: 0,
            kernel: 0,
            kernel_name: std::ptr::null(),
            work_dim: 0,
            kernel_arg_count: 0,
            global_size: [0; 3],
            local_size: [0; 3],
            kernel_args: [0; MAX_KERNEL_ARGS],
            implicit_allocations: std::ptr::null(),
            implicit_allocation_count: 0,
            device: 0,
            device_start: 0,
            device_end: 0,
        }
    }
}

/// `MEMORY_COPY` (device activity, see [`KernelDispatchPayload`] for when it is emitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryCopyPayload {
    pub queue: u64,
    pub dst: u64,
    pub src: u64,
    pub size: u64,
    pub device: u64,
    pub direction: CopyDirection,
    pub src_type: MemoryType,
    pub dst_type: MemoryType,
    /// Device start and end in the trace clock (CLOCK_MONOTONIC ns), 0 = unknown.
    pub device_start: u64,
    pub device_end: u64,
}

/// `MEMORY_FILL` (device activity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryFillPayload {
    pub queue: u64,
    pub dst: u64,
    pub pattern: u64,
    pub pattern_size: u64,
    pub size: u64,
    pub device: u64,
    /// Device start and end in the trace clock (CLOCK_MONOTONIC ns), 0 = unknown.
    pub device_start: u64,
    pub device_end: u64,
}

/// `MEMORY_ALLOC` (operation `alloc` or `free`): from the allocating call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryAllocPayload {
    pub ptr: u64,
    pub size: u64,
    pub memory_type: MemoryType,
    pub device: u64,
}

/// `TASK_GRAPH`: node ids are the runtime's ids of the commands (SYCL: the event's uid64).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct TaskGraphPayload {
    pub node: u64,
    pub source: u64,
    pub target: u64,
    pub name: *const c_char,
    /// The runtime event a `signal` carries (its handle as an id), 0 = none.
    pub event: u64,
    /// The queue the command runs on (0 = unknown).
    pub queue: u64,
}

impl Default for TaskGraphPayload {
    fn default() -> Self {
        Self { node: 0, source: 0, target: 0, name: std::ptr::null(), event: 0, queue: 0 }
    }
}

/// `SYNC`: a host wait (ENTER/EXIT) or a barrier. A barrier enqueued on a queue is device
/// activity: `queue` set, device times when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct SyncPayload {
    pub object: u64,
    pub event_count: u32,
    pub queue: u64,
    pub device: u64,
    /// Device start and end in the trace clock (CLOCK_MONOTONIC ns), 0 = unknown.
    pub device_start: u64,
    pub device_end: u64,
}

/// `CODE_OBJECT`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CodeObjectPayload {
    pub handle: u64,
    pub program: u64,
    pub name: *const c_char,
    pub binary_size: u64,
}

impl Default for CodeObjectPayload {
    fn default() -> Self {
        Self { handle: 0, program: 0, name: std::ptr::null(), binary_size: 0 }
    }
}

/// `MARKER`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct MarkerPayload {
    pub message: *const c_char,
    pub range_id: u64,
}

/// The type of a device (`offtrace_device_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum DeviceType {
    #[default]
    Unknown = 0,
    Cpu = 1,
    Gpu = 2,
    Accelerator = 3,
}

impl DeviceType {
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => Self::Cpu,
            2 => Self::Gpu,
            3 => Self::Accelerator,
            _ => Self::Unknown,
        }
    }
}

/// `DEVICE`: a device or a context, as a definition (emitted once, before the first record that
/// names it, or as soon as the backend learns it).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct DevicePayload {
    pub handle: u64,
    /// A device's context or platform; a context's first device (0 = none).
    pub parent: u64,
    pub name: *const c_char,
    pub device_type: DeviceType,
}

impl Default for DevicePayload {
    fn default() -> Self {
        Self { handle: 0, parent: 0, name: std::ptr::null(), device_type: DeviceType::Unknown }
    }
}

/// How a counter's `value` bits read (`offtrace_counter_value_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum CounterValueType {
    #[default]
    U64 = 0,
    I64 = 1,
    F64 = 2,
}

impl CounterValueType {
    pub fn from_u32(v: u32) -> Self {
        match v {
            1 => Self::I64,
            2 => Self::F64,
            _ => Self::U64,
        }
    }
}

/// `COUNTER`: a definition (`counter_op::DEFINE`: id, device, name, unit, value type in
/// `value`) or a sample (`counter_op::SAMPLE`: id, device, value; sampled at `ts`, or at the
/// emit's time when `ts` is 0).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CounterPayload {
    /// The backend's counter id (unique per process among counters).
    pub counter: u64,
    pub device: u64,
    /// DEFINE: a [`CounterValueType`]; SAMPLE: the value's bits (`f64::to_bits` for F64).
    pub value: u64,
    pub name: *const c_char,
    pub unit: *const c_char,
    /// SAMPLE: the time the value belongs to on the trace clock (CLOCK_MONOTONIC ns), when it is
    /// not the emit's time, e.g. a GPU sample's end decoded a period later; 0: the emit's time.
    /// It may be earlier than records already emitted. Ignored for DEFINE.
    pub ts: u64,
}

impl CounterPayload {
    /// The sample's time: `ts`, or `now` when `ts` is 0.
    #[inline]
    pub fn sample_ts(&self, now: u64) -> u64 {
        if self.ts != 0 { self.ts } else { now }
    }
}

impl Default for CounterPayload {
    fn default() -> Self {
        Self { counter: 0, device: 0, value: 0, name: std::ptr::null(), unit: std::ptr::null(), ts: 0 }
    }
}

/// A payload the backend hands to the services, typed by kind. The services pass a pointer to
/// the inner struct to callbacks; [`Payload::arg_values`] feeds argument iteration. The four API
/// kinds share [`ApiCallPayload`]; the variant carries the kind.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    None,
    UrApi(&'a ApiCallPayload),
    Queue(&'a QueuePayload),
    KernelDispatch(&'a KernelDispatchPayload),
    MemoryCopy(&'a MemoryCopyPayload),
    MemoryFill(&'a MemoryFillPayload),
    MemoryAlloc(&'a MemoryAllocPayload),
    TaskGraph(&'a TaskGraphPayload),
    Sync(&'a SyncPayload),
    CodeObject(&'a CodeObjectPayload),
    Marker(&'a MarkerPayload),
    /// The raw layer (`XPTI` kind): the emitting backend's own struct, opaque to core.
    Raw(RawPayload),
    OpenclApi(&'a ApiCallPayload),
    CudaRuntimeApi(&'a ApiCallPayload),
    CudaDriverApi(&'a ApiCallPayload),
    Device(&'a DevicePayload),
    Counter(&'a CounterPayload),
}

/// The payload of a raw-layer record: a pointer to the emitting backend's struct, valid during
/// the emit, passed to callbacks as is. Core neither reads nor names its fields.
#[derive(Debug, Clone, Copy)]
pub struct RawPayload(pub *const c_void);

impl<'a> Payload<'a> {
    /// The payload of an API call of `kind` (`None` when `kind` is not an API kind).
    #[inline]
    pub fn api(kind: Kind, p: &'a ApiCallPayload) -> Payload<'a> {
        match kind {
            Kind::UrApi => Payload::UrApi(p),
            Kind::OpenclApi => Payload::OpenclApi(p),
            Kind::CudaRuntimeApi => Payload::CudaRuntimeApi(p),
            Kind::CudaDriverApi => Payload::CudaDriverApi(p),
            _ => Payload::None,
        }
    }

    /// The API call payload, for any API kind.
    #[inline]
    pub fn as_api_call(&self) -> Option<&'a ApiCallPayload> {
        match *self {
            Payload::UrApi(p) | Payload::OpenclApi(p) | Payload::CudaRuntimeApi(p) | Payload::CudaDriverApi(p) => {
                Some(p)
            }
            _ => None,
        }
    }
}

impl Payload<'_> {
    /// The kind whose payload this is (`None` for [`Payload::None`]).
    #[inline]
    pub fn kind(&self) -> Option<Kind> {
        // The variant's position, then a table: LLVM folds the first `match` to the enum's tag
        // (a `match` returning the kinds became a jump table on the exit path).
        const KINDS: [Option<Kind>; 17] = [
            None,
            Some(Kind::UrApi),
            Some(Kind::Queue),
            Some(Kind::KernelDispatch),
            Some(Kind::MemoryCopy),
            Some(Kind::MemoryFill),
            Some(Kind::MemoryAlloc),
            Some(Kind::TaskGraph),
            Some(Kind::Sync),
            Some(Kind::CodeObject),
            Some(Kind::Marker),
            Some(Kind::Xpti),
            Some(Kind::OpenclApi),
            Some(Kind::CudaRuntimeApi),
            Some(Kind::CudaDriverApi),
            Some(Kind::Device),
            Some(Kind::Counter),
        ];
        let i = match self {
            Payload::None => 0,
            Payload::UrApi(_) => 1,
            Payload::Queue(_) => 2,
            Payload::KernelDispatch(_) => 3,
            Payload::MemoryCopy(_) => 4,
            Payload::MemoryFill(_) => 5,
            Payload::MemoryAlloc(_) => 6,
            Payload::TaskGraph(_) => 7,
            Payload::Sync(_) => 8,
            Payload::CodeObject(_) => 9,
            Payload::Marker(_) => 10,
            Payload::Raw(_) => 11,
            Payload::OpenclApi(_) => 12,
            Payload::CudaRuntimeApi(_) => 13,
            Payload::CudaDriverApi(_) => 14,
            Payload::Device(_) => 15,
            Payload::Counter(_) => 16,
        };
        KINDS[i]
    }

    /// The pointer C callbacks receive as `record.payload`.
    #[inline]
    pub fn as_ptr(&self) -> *const c_void {
        match *self {
            Payload::None => std::ptr::null(),
            Payload::UrApi(p) | Payload::OpenclApi(p) | Payload::CudaRuntimeApi(p) | Payload::CudaDriverApi(p) => {
                (p as *const ApiCallPayload).cast()
            }
            Payload::Queue(p) => (p as *const QueuePayload).cast(),
            Payload::KernelDispatch(p) => (p as *const KernelDispatchPayload).cast(),
            Payload::MemoryCopy(p) => (p as *const MemoryCopyPayload).cast(),
            Payload::MemoryFill(p) => (p as *const MemoryFillPayload).cast(),
            Payload::MemoryAlloc(p) => (p as *const MemoryAllocPayload).cast(),
            Payload::TaskGraph(p) => (p as *const TaskGraphPayload).cast(),
            Payload::Sync(p) => (p as *const SyncPayload).cast(),
            Payload::CodeObject(p) => (p as *const CodeObjectPayload).cast(),
            Payload::Marker(p) => (p as *const MarkerPayload).cast(),
            Payload::Raw(p) => p.0,
            Payload::Device(p) => (p as *const DevicePayload).cast(),
            Payload::Counter(p) => (p as *const CounterPayload).cast(),
        }
    }
}

/// Raw values of the arguments of one record, for argument iteration: `(value, address)` where
/// the address points into the payload.
///
/// # Safety
///
/// `payload` must point at the payload struct of `kind` (as delivered in a callback record) and
/// be valid for reads for the duration of the call.
pub(crate) unsafe fn arg_values(kind: Kind, payload: *const c_void, out: &mut Vec<(u64, *const c_void)>) {
    out.clear();
    if payload.is_null() {
        return;
    }
    fn push<T>(out: &mut Vec<(u64, *const c_void)>, v: u64, r: &T) {
        out.push((v, (r as *const T).cast()));
    }
    // SAFETY (each arm): the caller guarantees `payload` points at a live payload of `kind`,
    // and each kind has exactly one payload struct (see `Payload`).
    unsafe {
        match kind {
            Kind::UrApi | Kind::OpenclApi | Kind::CudaRuntimeApi | Kind::CudaDriverApi => {
                let p = &*payload.cast::<ApiCallPayload>();
                for i in 0..(p.arg_count as usize).min(MAX_ARGS) {
                    push(out, p.args[i], &p.args[i]);
                }
            }
            Kind::Queue => {
                let p = &*payload.cast::<QueuePayload>();
                push(out, p.queue, &p.queue);
                push(out, p.device, &p.device);
                push(out, p.context, &p.context);
                push(out, p.flags, &p.flags);
            }
            Kind::KernelDispatch => {
                let p = &*payload.cast::<KernelDispatchPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.kernel, &p.kernel);
                push(out, p.kernel_name as u64, &p.kernel_name);
                push(out, u64::from(p.work_dim), &p.work_dim);
                for g in &p.global_size {
                    push(out, *g, g);
                }
                for l in &p.local_size {
                    push(out, *l, l);
                }
            }
            Kind::MemoryCopy => {
                let p = &*payload.cast::<MemoryCopyPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.dst, &p.dst);
                push(out, p.src, &p.src);
                push(out, p.size, &p.size);
            }
            Kind::MemoryFill => {
                let p = &*payload.cast::<MemoryFillPayload>();
                push(out, p.queue, &p.queue);
                push(out, p.dst, &p.dst);
                push(out, p.pattern, &p.pattern);
                push(out, p.pattern_size, &p.pattern_size);
                push(out, p.size, &p.size);
            }
            Kind::MemoryAlloc => {
                let p = &*payload.cast::<MemoryAllocPayload>();
                push(out, p.ptr, &p.ptr);
                push(out, p.size, &p.size);
                push(out, p.memory_type as u64, &p.memory_type);
                push(out, p.device, &p.device);
            }
            Kind::TaskGraph => {
                let p = &*payload.cast::<TaskGraphPayload>();
                push(out, p.node, &p.node);
                push(out, p.source, &p.source);
                push(out, p.target, &p.target);
                push(out, p.name as u64, &p.name);
                push(out, p.event, &p.event);
            }
            Kind::Sync => {
                let p = &*payload.cast::<SyncPayload>();
                push(out, p.object, &p.object);
                push(out, u64::from(p.event_count), &p.event_count);
            }
            Kind::CodeObject => {
                let p = &*payload.cast::<CodeObjectPayload>();
                push(out, p.handle, &p.handle);
                push(out, p.program, &p.program);
                push(out, p.name as u64, &p.name);
                push(out, p.binary_size, &p.binary_size);
            }
            Kind::Marker => {
                let p = &*payload.cast::<MarkerPayload>();
                push(out, p.message as u64, &p.message);
                push(out, p.range_id, &p.range_id);
            }
            // The raw layer's struct is the backend's: core iterates no arguments of it.
            Kind::Xpti => {}
            Kind::Device => {
                let p = &*payload.cast::<DevicePayload>();
                push(out, p.handle, &p.handle);
                push(out, p.parent, &p.parent);
                push(out, p.name as u64, &p.name);
                push(out, p.device_type as u64, &p.device_type);
            }
            Kind::Counter => {
                let p = &*payload.cast::<CounterPayload>();
                push(out, p.counter, &p.counter);
                push(out, p.device, &p.device);
                push(out, p.value, &p.value);
                push(out, p.name as u64, &p.name);
                push(out, p.unit as u64, &p.unit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Payload::kind`'s table is indexed by the variant's position: each variant maps to its
    /// own kind.
    #[test]
    fn kind_of_every_variant() {
        let api = ApiCallPayload::new(7, &[1, 2, 3, 4, 5]);
        let queue = QueuePayload { queue: 1, device: 2, context: 3, flags: 4 };
        let kernel = KernelDispatchPayload::default();
        let copy = MemoryCopyPayload::default();
        let fill = MemoryFillPayload::default();
        let alloc = MemoryAllocPayload::default();
        let graph = TaskGraphPayload::default();
        let sync = SyncPayload::default();
        let code = CodeObjectPayload::default();
        let marker = MarkerPayload { message: std::ptr::null(), range_id: 2 };
        let raw = RawPayload(std::ptr::dangling::<u64>().cast());
        let device = DevicePayload::default();
        let counter = CounterPayload::default();
        let cases: [(Payload<'_>, Option<Kind>); 17] = [
            (Payload::None, None),
            (Payload::UrApi(&api), Some(Kind::UrApi)),
            (Payload::Queue(&queue), Some(Kind::Queue)),
            (Payload::KernelDispatch(&kernel), Some(Kind::KernelDispatch)),
            (Payload::MemoryCopy(&copy), Some(Kind::MemoryCopy)),
            (Payload::MemoryFill(&fill), Some(Kind::MemoryFill)),
            (Payload::MemoryAlloc(&alloc), Some(Kind::MemoryAlloc)),
            (Payload::TaskGraph(&graph), Some(Kind::TaskGraph)),
            (Payload::Sync(&sync), Some(Kind::Sync)),
            (Payload::CodeObject(&code), Some(Kind::CodeObject)),
            (Payload::Marker(&marker), Some(Kind::Marker)),
            (Payload::Raw(raw), Some(Kind::Xpti)),
            (Payload::OpenclApi(&api), Some(Kind::OpenclApi)),
            (Payload::CudaRuntimeApi(&api), Some(Kind::CudaRuntimeApi)),
            (Payload::CudaDriverApi(&api), Some(Kind::CudaDriverApi)),
            (Payload::Device(&device), Some(Kind::Device)),
            (Payload::Counter(&counter), Some(Kind::Counter)),
        ];
        for (p, kind) in cases {
            assert_eq!(p.kind(), kind, "{p:?}");
        }
    }
}

#[cfg(test)]
mod api_tests {
    use super::*;

    /// The four API kinds share one payload struct; `Payload::api` picks the variant, so
    /// `kind()` is right for each and non-API kinds get no payload.
    #[test]
    fn api_payload_carries_its_kind() {
        let p = ApiCallPayload::new(3, &[1, 2]);
        for k in Kind::API {
            let payload = Payload::api(k, &p);
            assert_eq!(payload.kind(), Some(k));
            assert_eq!(payload.as_api_call(), Some(&p));
            assert_eq!(payload.as_ptr(), (&p as *const ApiCallPayload).cast());
        }
        assert_eq!(Payload::api(Kind::Marker, &p).kind(), None);
    }

    #[test]
    fn copy_direction_from_memory_types() {
        use MemoryType::*;
        assert_eq!(CopyDirection::from_types(Host, Device), CopyDirection::HostToDevice);
        assert_eq!(CopyDirection::from_types(Shared, Host), CopyDirection::DeviceToHost);
        assert_eq!(CopyDirection::from_types(Device, Shared), CopyDirection::DeviceToDevice);
        assert_eq!(CopyDirection::from_types(Host, Host), CopyDirection::HostToHost);
        assert_eq!(CopyDirection::from_types(Unknown, Host), CopyDirection::Unknown);
        for v in 0..6 {
            assert_eq!(CopyDirection::from_u32(v) as u32, if v <= 4 { v } else { 0 });
        }
    }
}
