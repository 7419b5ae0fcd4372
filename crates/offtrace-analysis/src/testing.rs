//! Synthetic typed traces for tests (this crate's, the exports' and the CLI's) and for the scale
//! measurements: a builder that writes definitions before first use, as the recorder does, into
//! any [`RecordSink`] (a `Vec` in tests, a [`TraceWriter`] for large files).

use std::io::Write;

use offtrace_format::*;
use rustc_hash::{FxHashMap, FxHashSet};

/// Kind numbers as the services number them (`offtrace_core::Kind`).
pub mod kind {
    pub const UR_API: u32 = 1;
    pub const QUEUE: u32 = 2;
    pub const KERNEL_DISPATCH: u32 = 3;
    pub const MEMORY_COPY: u32 = 4;
    pub const MEMORY_FILL: u32 = 5;
    pub const MEMORY_ALLOC: u32 = 6;
    pub const TASK_GRAPH: u32 = 7;
    pub const SYNC: u32 = 8;
    pub const CODE_OBJECT: u32 = 9;
    pub const MARKER: u32 = 10;
    pub const DEVICE: u32 = 15;
    pub const COUNTER: u32 = 16;
}

fn kind_name(k: u32) -> &'static str {
    match k {
        kind::UR_API => "UR_API",
        kind::QUEUE => "QUEUE",
        kind::KERNEL_DISPATCH => "KERNEL_DISPATCH",
        kind::MEMORY_COPY => "MEMORY_COPY",
        kind::MEMORY_FILL => "MEMORY_FILL",
        kind::MEMORY_ALLOC => "MEMORY_ALLOC",
        kind::TASK_GRAPH => "TASK_GRAPH",
        kind::SYNC => "SYNC",
        kind::CODE_OBJECT => "CODE_OBJECT",
        kind::MARKER => "MARKER",
        kind::DEVICE => "DEVICE",
        kind::COUNTER => "COUNTER",
        _ => "",
    }
}

/// Where built records go.
pub trait RecordSink {
    fn put(&mut self, record: Record);
}

impl RecordSink for Vec<Record> {
    fn put(&mut self, record: Record) {
        self.push(record);
    }
}

/// A trace file being written; the first write error is kept.
#[derive(Debug)]
pub struct WriterSink<W: Write> {
    pub writer: TraceWriter<W>,
    pub error: Option<WriteError>,
    pub records: u64,
}

impl<W: Write> WriterSink<W> {
    /// Writes the last record (the `End` record).
    pub fn put_end(&mut self, record: Record) {
        self.put(record);
    }
}

impl<W: Write> RecordSink for WriterSink<W> {
    fn put(&mut self, record: Record) {
        self.records += 1;
        if self.error.is_none()
            && let Err(e) = self.writer.write(&record)
        {
            self.error = Some(e);
        }
    }
}

/// Builds typed records, definitions first.
#[derive(Debug)]
pub struct TypedBuilder<S: RecordSink> {
    pub out: S,
    strings: FxHashMap<String, StrId>,
    kinds: FxHashSet<u32>,
    ops: FxHashSet<(u32, u32)>,
}

impl<S: RecordSink> TypedBuilder<S> {
    pub fn new(out: S) -> Self {
        Self { out, strings: FxHashMap::default(), kinds: FxHashSet::default(), ops: FxHashSet::default() }
    }

    pub fn str(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.strings.get(text) {
            return id;
        }
        let id = StrId(self.strings.len() as u32 + 1);
        self.strings.insert(text.to_owned(), id);
        self.out.put(Record::String { id, text: text.to_owned() });
        id
    }

    pub fn info(&mut self, key: &str, value: &str) {
        self.out.put(Record::Info { key: key.into(), value: value.into() });
    }

    /// Defines a kind (once) by name; built-in kinds get their services name when `name` is empty.
    pub fn kind(&mut self, kind: u32, name: &str) {
        if self.kinds.insert(kind) {
            let name = self.str(if name.is_empty() { kind_name(kind) } else { name });
            self.out.put(Record::KindDef { kind, name });
        }
    }

    /// Defines an operation (once) with its arguments: (name, C type, format).
    pub fn op(&mut self, kind: u32, op: u32, name: &str, args: &[(&str, &str, u8)]) {
        self.kind(kind, "");
        if self.ops.insert((kind, op)) {
            let name = self.str(name);
            let args = args
                .iter()
                .map(|(n, t, format)| ArgDef { name: self.str(n), type_name: self.str(t), size: 8, format: *format })
                .collect();
            self.out.put(Record::OperationDef(OperationDef { kind, op, name, args }));
        }
    }

    pub fn thread(&mut self, tid: u32, name: &str) {
        let name = self.str(name);
        self.out.put(Record::Thread { tid, name });
    }

    pub fn device(&mut self, handle: u64, name: &str) {
        self.kind(kind::DEVICE, "");
        let name = self.str(name);
        self.out.put(Record::Device(DeviceRecord { op: 0, handle, parent: 0, name, device_type: 1 }));
    }

    pub fn queue_create(&mut self, tid: u32, ts: u64, queue: u64, device: u64, in_order: bool) {
        self.op(kind::QUEUE, 0, "queue_create", &[]);
        let flags = u64::from(in_order);
        self.out.put(Record::Queue(QueueRecord {
            op: 0,
            tid,
            ts,
            correlation: 0,
            queue,
            device,
            context: 0x10,
            flags,
        }));
    }

    pub fn queue_destroy(&mut self, tid: u32, ts: u64, queue: u64) {
        self.op(kind::QUEUE, 1, "queue_destroy", &[]);
        self.out.put(Record::Queue(QueueRecord { op: 1, tid, ts, queue, ..Default::default() }));
    }

    /// An API call of `kind` (defined by the caller with [`Self::op`]).
    #[allow(clippy::too_many_arguments)] // one record's fields, in the record's order
    pub fn api_call(
        &mut self,
        kind: u32,
        op: u32,
        tid: u32,
        start: u64,
        end: u64,
        correlation: u64,
        args: &[u64],
        result: i64,
    ) {
        self.out.put(Record::ApiCall(ApiCall {
            kind,
            op,
            tid,
            start,
            end,
            correlation,
            external: 0,
            args: ApiArgs::from_slice(args),
            result: Some(result),
        }));
    }

    /// A kernel dispatch at enqueue (phase NONE), device times if known.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel(
        &mut self,
        tid: u32,
        ts: u64,
        correlation: u64,
        queue: u64,
        device: u64,
        name: &str,
        times: Option<(u64, u64)>,
    ) {
        self.op(kind::KERNEL_DISPATCH, 0, "kernel_launch", &[]);
        let name = self.str(name);
        let (device_start, device_end) = times.unwrap_or((0, 0));
        self.out.put(Record::Activity(Activity {
            kind: kind::KERNEL_DISPATCH,
            op: 0,
            phase: phase::NONE,
            tid,
            ts,
            correlation,
            queue,
            device,
            name,
            kernel: 0x7000,
            work_dim: 1,
            global_size: [1024, 1, 1],
            local_size: [64, 1, 1],
            device_start,
            device_end,
            ..Default::default()
        }));
    }

    /// A USM copy at enqueue (phase NONE).
    #[allow(clippy::too_many_arguments)]
    pub fn copy(
        &mut self,
        tid: u32,
        ts: u64,
        correlation: u64,
        queue: u64,
        device: u64,
        bytes: u64,
        direction: CopyDirection,
        times: Option<(u64, u64)>,
    ) {
        self.named_copy(0, "usm_memcpy", tid, ts, correlation, queue, device, bytes, direction, times);
    }

    /// A copy of operation `op`, named `name` (`buffer_write`, `map`, ...), at enqueue.
    #[allow(clippy::too_many_arguments)]
    pub fn named_copy(
        &mut self,
        op: u32,
        name: &str,
        tid: u32,
        ts: u64,
        correlation: u64,
        queue: u64,
        device: u64,
        bytes: u64,
        direction: CopyDirection,
        times: Option<(u64, u64)>,
    ) {
        self.op(kind::MEMORY_COPY, op, name, &[]);
        let (src_type, dst_type) = match direction {
            CopyDirection::HostToDevice => (MemoryType::Host, MemoryType::Device),
            CopyDirection::DeviceToHost => (MemoryType::Device, MemoryType::Host),
            CopyDirection::DeviceToDevice => (MemoryType::Device, MemoryType::Device),
            CopyDirection::HostToHost => (MemoryType::Host, MemoryType::Host),
            CopyDirection::Unknown => (MemoryType::Unknown, MemoryType::Unknown),
        };
        let (device_start, device_end) = times.unwrap_or((0, 0));
        self.out.put(Record::Activity(Activity {
            kind: kind::MEMORY_COPY,
            op,
            phase: phase::NONE,
            tid,
            ts,
            correlation,
            queue,
            device,
            bytes,
            direction,
            src_type,
            dst_type,
            device_start,
            device_end,
            ..Default::default()
        }));
    }

    /// A USM fill at enqueue.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(&mut self, tid: u32, ts: u64, correlation: u64, queue: u64, device: u64, bytes: u64) {
        self.op(kind::MEMORY_FILL, 0, "usm_fill", &[]);
        self.out.put(Record::Activity(Activity {
            kind: kind::MEMORY_FILL,
            op: 0,
            phase: phase::NONE,
            tid,
            ts,
            correlation,
            queue,
            device,
            bytes,
            ..Default::default()
        }));
    }

    /// A barrier enqueued on a queue (`SYNC`, operation barrier).
    pub fn barrier(&mut self, tid: u32, ts: u64, correlation: u64, queue: u64, device: u64) {
        self.op(kind::SYNC, 1, "barrier", &[]);
        self.out.put(Record::Activity(Activity {
            kind: kind::SYNC,
            op: 1,
            phase: phase::NONE,
            tid,
            ts,
            correlation,
            queue,
            device,
            ..Default::default()
        }));
    }

    /// The completion of earlier device work: its device times (phase COMPLETE).
    #[allow(clippy::too_many_arguments)]
    pub fn complete(
        &mut self,
        kind: u32,
        op: u32,
        tid: u32,
        ts: u64,
        correlation: u64,
        queue: u64,
        start: u64,
        end: u64,
    ) {
        self.out.put(Record::Activity(Activity {
            kind,
            op,
            phase: phase::COMPLETE,
            tid,
            ts,
            correlation,
            queue,
            device_start: start,
            device_end: end,
            ..Default::default()
        }));
    }

    #[allow(clippy::too_many_arguments)]
    pub fn alloc(
        &mut self,
        tid: u32,
        ts: u64,
        correlation: u64,
        ptr: u64,
        size: u64,
        memory_type: MemoryType,
        device: u64,
    ) {
        self.op(kind::MEMORY_ALLOC, 0, "alloc", &[]);
        self.out.put(Record::Memory(MemoryRecord { op: 0, tid, ts, correlation, ptr, size, memory_type, device }));
    }

    /// A part of the allocation holding `ptr` with a handle of its own (an OpenCL sub-buffer).
    pub fn sub_alloc(&mut self, tid: u32, ts: u64, correlation: u64, ptr: u64, size: u64) {
        self.op(kind::MEMORY_ALLOC, 2, "sub_alloc", &[]);
        let memory_type = MemoryType::Device;
        self.out.put(Record::Memory(MemoryRecord { op: 2, tid, ts, correlation, ptr, size, memory_type, device: 0 }));
    }

    pub fn free(&mut self, tid: u32, ts: u64, correlation: u64, ptr: u64) {
        self.op(kind::MEMORY_ALLOC, 1, "free", &[]);
        self.out.put(Record::Memory(MemoryRecord { op: 1, tid, ts, correlation, ptr, ..Default::default() }));
    }

    /// A task-graph node (`queue` 0 = a virtual node).
    pub fn node(&mut self, tid: u32, ts: u64, node: u64, name: &str, queue: u64) {
        self.op(kind::TASK_GRAPH, 0, "node_create", &[]);
        let name = self.str(name);
        self.out.put(Record::TaskGraph(TaskGraphRecord { op: 0, tid, ts, node, name, queue, ..Default::default() }));
    }

    /// A node standing for `event` (SYCL's virtual nodes): it continues whatever signalled the
    /// event last before it.
    pub fn virtual_node(&mut self, tid: u32, ts: u64, node: u64, event: u64) {
        self.op(kind::TASK_GRAPH, 0, "node_create", &[]);
        self.out.put(Record::TaskGraph(TaskGraphRecord { op: 0, tid, ts, node, event, ..Default::default() }));
    }

    /// `node`'s command signals `event`.
    pub fn signal(&mut self, tid: u32, ts: u64, node: u64, event: u64) {
        self.op(kind::TASK_GRAPH, 3, "signal", &[]);
        self.out.put(Record::TaskGraph(TaskGraphRecord { op: 3, tid, ts, node, event, ..Default::default() }));
    }

    /// `node`'s task: ENTER or EXIT (`phase`), `queue` 0 where it says none.
    pub fn task(&mut self, tid: u32, ts: u64, node: u64, phase: u8, name: &str, queue: u64) {
        self.op(kind::TASK_GRAPH, 2, "task", &[]);
        let name = self.str(name);
        self.out.put(Record::TaskGraph(TaskGraphRecord {
            op: 2,
            phase,
            tid,
            ts,
            node,
            name,
            queue,
            ..Default::default()
        }));
    }

    pub fn edge(&mut self, tid: u32, ts: u64, source: u64, target: u64) {
        self.op(kind::TASK_GRAPH, 1, "edge_create", &[]);
        self.out.put(Record::TaskGraph(TaskGraphRecord { op: 1, tid, ts, source, target, ..Default::default() }));
    }

    pub fn counter_def(&mut self, counter: u64, device: u64, name: &str, unit: &str) {
        self.op(kind::COUNTER, 0, "define", &[]);
        let (name, unit) = (self.str(name), self.str(unit));
        self.out.put(Record::CounterDef(CounterDef { counter, device, name, unit, value_type: 2 }));
    }

    pub fn counter_sample(&mut self, counter: u64, tid: u32, ts: u64, value: f64) {
        self.command_sample(counter, tid, ts, value, 0);
    }

    /// A value measured for one command (an event-based query): with its correlation id.
    pub fn command_sample(&mut self, counter: u64, tid: u32, ts: u64, value: f64, correlation: u64) {
        self.out.put(Record::CounterSample(CounterSample { counter, tid, ts, value: value.to_bits(), correlation }));
    }

    /// A code object's load (`op`: 0 program, 1 program build, 2 kernel; `name` "" = none).
    #[allow(clippy::too_many_arguments)]
    pub fn code_load(&mut self, tid: u32, ts: u64, op: u32, handle: u64, program: u64, name: &str, size: u64) {
        self.code_object(tid, ts, op, phase::LOAD, handle, program, name, size);
    }

    /// A code object's unload, named as the backends name it: not at all (`name` "").
    pub fn code_unload(&mut self, tid: u32, ts: u64, op: u32, handle: u64, name: &str) {
        self.code_object(tid, ts, op, phase::UNLOAD, handle, 0, name, 0);
    }

    #[allow(clippy::too_many_arguments)]
    fn code_object(&mut self, tid: u32, ts: u64, op: u32, phase: u8, handle: u64, program: u64, name: &str, size: u64) {
        const NAMES: [&str; 3] = ["program", "program_build", "kernel"];
        self.op(kind::CODE_OBJECT, op, NAMES.get(op as usize).copied().unwrap_or("op"), &[]);
        let name = if name.is_empty() { StrId(0) } else { self.str(name) };
        let r = CodeObjectRecord { op, phase, tid, ts, correlation: 0, handle, program, name, size };
        self.out.put(Record::CodeObject(r));
    }

    /// A range marker: its push and pop.
    pub fn range(&mut self, tid: u32, start: u64, end: u64, range_id: u64, message: &str) {
        self.op(kind::MARKER, 1, "range", &[]);
        let message = self.str(message);
        for (phase, ts) in [(phase::ENTER, start), (phase::EXIT, end)] {
            self.out.put(Record::Marker(MarkerRecord { op: 1, phase, tid, ts, correlation: 0, message, range_id }));
        }
    }
}

/// UR operation ids of the synthetic workload (the UR function ids of `ur_api.h`).
pub mod ur {
    pub const KERNEL_SET_ARG_POINTER: u32 = 46;
    pub const ENQUEUE_KERNEL_LAUNCH: u32 = 68;
    pub const ENQUEUE_USM_MEMCPY: u32 = 96;
    pub const ENQUEUE_USM_FILL: u32 = 95;
    pub const ENQUEUE_EVENTS_WAIT_WITH_BARRIER: u32 = 70;
    pub const USM_DEVICE_ALLOC: u32 = 101;
    pub const USM_FREE: u32 = 103;
    pub const EVENT_RELEASE: u32 = 86;
    pub const QUEUE_FINISH: u32 = 65;
}

const KERNELS: [&str; 4] = [
    "main::{lambda(sycl::handler&)#1}::operator()(sycl::handler&) const::{lambda(sycl::id<1>)#1}",
    "scale_add",
    "square",
    "dpnp::kernels::elementwise::add_contig_kernel<float, float, float, 4u, 2u, true>",
];

/// A SYCL-like program: `threads` threads each submitting to its own in-order queue (two
/// devices), per submit three argument settings and a kernel launch (with the dispatch inside
/// it, device times for every other kernel through a later completion), an event release and
/// a task-graph node with an edge to the thread's previous node; every 8th submit a USM copy
/// (alternating directions, with device times) and a queue finish; every 16th a fill and a
/// barrier; every 64th an allocation and a free; a counter sample per 32 submits. Stops after
/// at least `records` records. Returns the number of submits.
pub fn sycl_like<S: RecordSink>(b: &mut TypedBuilder<S>, threads: u32, records: u64, count: impl Fn(&S) -> u64) -> u64 {
    b.info("command", "synthetic SYCL program");
    b.info("pid", "4242");
    let p = 3; // pointer format
    let u = 0; // unsigned format
    b.op(
        kind::UR_API,
        ur::KERNEL_SET_ARG_POINTER,
        "urKernelSetArgPointer",
        &[
            ("hKernel", "ur_kernel_handle_t", p),
            ("argIndex", "uint32_t", u),
            ("pProperties", "const ur_kernel_arg_pointer_properties_t*", p),
            ("pArgValue", "const void*", p),
        ],
    );
    b.op(
        kind::UR_API,
        ur::ENQUEUE_KERNEL_LAUNCH,
        "urEnqueueKernelLaunch",
        &[
            ("hQueue", "ur_queue_handle_t", p),
            ("hKernel", "ur_kernel_handle_t", p),
            ("workDim", "uint32_t", u),
            ("pGlobalWorkOffset", "const size_t*", p),
            ("pGlobalWorkSize", "const size_t*", p),
            ("pLocalWorkSize", "const size_t*", p),
            ("numEventsInWaitList", "uint32_t", u),
            ("phEventWaitList", "const ur_event_handle_t*", p),
            ("phEvent", "ur_event_handle_t*", p),
        ],
    );
    b.op(kind::UR_API, ur::EVENT_RELEASE, "urEventRelease", &[("hEvent", "ur_event_handle_t", p)]);
    b.op(
        kind::UR_API,
        ur::ENQUEUE_USM_MEMCPY,
        "urEnqueueUSMMemcpy",
        &[
            ("hQueue", "ur_queue_handle_t", p),
            ("blocking", "bool", 4),
            ("pDst", "void*", p),
            ("pSrc", "const void*", p),
            ("size", "size_t", u),
            ("numEventsInWaitList", "uint32_t", u),
            ("phEventWaitList", "const ur_event_handle_t*", p),
            ("phEvent", "ur_event_handle_t*", p),
        ],
    );
    b.op(
        kind::UR_API,
        ur::ENQUEUE_USM_FILL,
        "urEnqueueUSMFill",
        &[
            ("hQueue", "ur_queue_handle_t", p),
            ("pMem", "void*", p),
            ("patternSize", "size_t", u),
            ("pPattern", "const void*", p),
            ("size", "size_t", u),
        ],
    );
    b.op(
        kind::UR_API,
        ur::ENQUEUE_EVENTS_WAIT_WITH_BARRIER,
        "urEnqueueEventsWaitWithBarrier",
        &[("hQueue", "ur_queue_handle_t", p)],
    );
    b.op(kind::UR_API, ur::QUEUE_FINISH, "urQueueFinish", &[("hQueue", "ur_queue_handle_t", p)]);
    b.op(
        kind::UR_API,
        ur::USM_DEVICE_ALLOC,
        "urUSMDeviceAlloc",
        &[
            ("hContext", "ur_context_handle_t", p),
            ("hDevice", "ur_device_handle_t", p),
            ("pUSMDesc", "const ur_usm_desc_t*", p),
            ("pool", "ur_usm_pool_handle_t", p),
            ("size", "size_t", u),
            ("ppMem", "void**", p),
        ],
    );
    b.op(kind::UR_API, ur::USM_FREE, "urUSMFree", &[("hContext", "ur_context_handle_t", p), ("pMem", "void*", p)]);
    let devices = [(0xd1u64, "Intel(R) Xeon(R) CPU (OpenCL)"), (0xd2, "Synthetic GPU")];
    for (h, n) in devices {
        b.device(h, n);
    }
    b.counter_def(1, 0xd2, "gpu power", "W");
    let mut ts = 1_000_000_000u64;
    for t in 0..threads {
        b.thread(1000 + t, &format!("submitter-{t}"));
        b.queue_create(1000 + t, ts, 0x5000 + u64::from(t) * 0x10, devices[(t % 2) as usize].0, true);
    }
    let mut corr = 1u64;
    let mut prev_node = vec![0u64; threads as usize];
    let mut submits = 0u64;
    let mut node = 1u64;
    while count(&b.out) < records {
        let t = (submits % u64::from(threads)) as u32;
        let tid = 1000 + t;
        let queue = 0x5000 + u64::from(t) * 0x10;
        let device = devices[(t % 2) as usize].0;
        let i = submits / u64::from(threads);
        let k = KERNELS[(i % KERNELS.len() as u64) as usize];
        ts += 200;
        let kernel = 0x7000 + (i % 4) * 0x10;
        for a in 0..3u64 {
            b.api_call(
                kind::UR_API,
                ur::KERNEL_SET_ARG_POINTER,
                tid,
                ts,
                ts + 40,
                corr,
                &[kernel, a, 0, 0x7f00_0000 + a * 0x1000],
                0,
            );
            ts += 50;
            corr += 1;
        }
        let launch = corr;
        let timed = i.is_multiple_of(2);
        b.node(tid, ts, node, k, queue);
        if prev_node[t as usize] != 0 {
            b.edge(tid, ts + 1, prev_node[t as usize], node);
        }
        prev_node[t as usize] = node;
        node += 1;
        b.kernel(tid, ts + 100, launch, queue, device, k, None);
        let event = 0x9000_0000 + submits * 8;
        b.api_call(
            kind::UR_API,
            ur::ENQUEUE_KERNEL_LAUNCH,
            tid,
            ts + 10,
            ts + 900,
            launch,
            &[queue, kernel, 1, 0, 0x7ffc_0000, 0x7ffc_0010, 0, 0, event],
            0,
        );
        corr += 1;
        ts += 920;
        if timed {
            b.complete(kind::KERNEL_DISPATCH, 0, tid, ts + 5000, launch, queue, ts + 1000, ts + 4000 + (i % 7) * 100);
        }
        b.api_call(kind::UR_API, ur::EVENT_RELEASE, tid, ts, ts + 30, corr, &[event], 0);
        corr += 1;
        ts += 40;
        if i % 8 == 7 {
            let dir = if i % 16 == 7 { CopyDirection::HostToDevice } else { CopyDirection::DeviceToHost };
            b.copy(tid, ts + 50, corr, queue, device, 1 << 20, dir, Some((ts + 2000, ts + 2000 + 100_000)));
            b.api_call(
                kind::UR_API,
                ur::ENQUEUE_USM_MEMCPY,
                tid,
                ts,
                ts + 1500,
                corr,
                &[queue, 0, 0x7f10_0000, 0x7f20_0000, 1 << 20, 0, 0, event + 1],
                0,
            );
            corr += 1;
            ts += 1600;
            b.api_call(kind::UR_API, ur::QUEUE_FINISH, tid, ts, ts + 110_000, corr, &[queue], 0);
            corr += 1;
            ts += 110_100;
        }
        if i % 16 == 15 {
            b.fill(tid, ts + 20, corr, queue, device, 4096);
            b.api_call(
                kind::UR_API,
                ur::ENQUEUE_USM_FILL,
                tid,
                ts,
                ts + 300,
                corr,
                &[queue, 0x7f30_0000, 4, 0x7ffc_0100, 4096],
                0,
            );
            corr += 1;
            ts += 310;
            b.barrier(tid, ts + 10, corr, queue, device);
            b.api_call(kind::UR_API, ur::ENQUEUE_EVENTS_WAIT_WITH_BARRIER, tid, ts, ts + 200, corr, &[queue], 0);
            corr += 1;
            ts += 210;
        }
        if i % 64 == 63 {
            let ptr = 0x7f40_0000_0000 + submits * 0x10_0000;
            b.alloc(tid, ts + 100, corr, ptr, 1 << 20, MemoryType::Device, device);
            b.api_call(
                kind::UR_API,
                ur::USM_DEVICE_ALLOC,
                tid,
                ts,
                ts + 5000,
                corr,
                &[0x10, device, 0, 0, 1 << 20, ptr],
                0,
            );
            corr += 1;
            ts += 5100;
            b.free(tid, ts + 50, corr, ptr);
            b.api_call(kind::UR_API, ur::USM_FREE, tid, ts, ts + 3000, corr, &[0x10, ptr], 0);
            corr += 1;
            ts += 3100;
        }
        if submits % 32 == 31 {
            b.counter_sample(1, tid, ts, 40.0 + (submits % 100) as f64 / 10.0);
        }
        submits += 1;
    }
    for t in 0..threads {
        b.queue_destroy(1000 + t, ts + 1000, 0x5000 + u64::from(t) * 0x10);
    }
    submits
}
