//! Synthetic traces for tests (this crate's, the exports' and the CLI's): a tiny builder that
//! interns strings and metadata like the agent does, and a W4-like trace made with it.

use offtrace_format::*;

/// Builds record streams by hand, with definitions emitted before first use.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    pub records: Vec<Record>,
    strings: Vec<String>,
    next_payload: u32,
    next_object: u32,
    next_md: u32,
}

/// A metadata value for [`TraceBuilder::metadata`].
#[derive(Debug, Clone)]
pub enum Md<'a> {
    U(u64),
    I(i32),
    S(&'a str),
}

impl TraceBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn str(&mut self, text: &str) -> StrId {
        if let Some(i) = self.strings.iter().position(|s| s == text) {
            return StrId(i as u32 + 1);
        }
        self.strings.push(text.to_owned());
        let id = StrId(self.strings.len() as u32);
        self.records.push(Record::String { id, text: text.to_owned() });
        id
    }

    pub fn info(&mut self, key: &str, value: &str) {
        self.records.push(Record::Info { key: key.into(), value: value.into() });
    }

    pub fn stream(&mut self, id: u8, name: &str) {
        let name = self.str(name);
        let version = self.str("sycl 9.0");
        self.records.push(Record::Stream { id, name, major: 9, minor: 0, version });
    }

    pub fn thread(&mut self, tid: u32, name: &str) {
        let name = self.str(name);
        self.records.push(Record::Thread { tid, name });
    }

    pub fn payload(&mut self, name: &str) -> PayloadId {
        let name = self.str(name);
        let file = self.str("<unknown-file>");
        self.next_payload += 1;
        let id = PayloadId(self.next_payload);
        self.records.push(Record::Payload { id, name, file, line: 0, column: 0 });
        id
    }

    pub fn metadata(&mut self, items: &[(&str, Md<'_>)]) -> MetadataSetId {
        let mut out = Vec::new();
        for (k, v) in items {
            let key = self.str(k);
            let (value_type, bytes) = match v {
                Md::U(u) => (ValueType::UnsignedInteger, u.to_le_bytes().to_vec()),
                Md::I(i) => (ValueType::SignedInteger, i.to_le_bytes().to_vec()),
                Md::S(s) => (ValueType::String, s.as_bytes().to_vec()),
            };
            self.next_object += 1;
            let id = ObjectId(self.next_object);
            self.records.push(Record::Object { id, value_type, bytes });
            out.push((key, id));
        }
        self.next_md += 1;
        let id = MetadataSetId(self.next_md);
        self.records.push(Record::MetadataSet { id, items: out });
        id
    }

    pub fn event(&mut self, uid: u64, name: &str, md: &[(&str, Md<'_>)]) -> EventInfo {
        let payload = self.payload(name);
        let metadata = if md.is_empty() { MetadataSetId(0) } else { self.metadata(md) };
        EventInfo { uid, instance_id: 1, event_type: 2, activity_type: 1, payload, metadata, ..Default::default() }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn notify(
        &mut self,
        ts: u64,
        tid: u32,
        stream: u8,
        trace_type: u16,
        instance: u64,
        event: Option<EventInfo>,
        user_data: UserData,
    ) {
        let stash = Some((self.str("queue_id"), 0));
        self.records.push(Record::Notification(Notification {
            ts,
            tid,
            stream,
            trace_type,
            instance,
            parent: None,
            event,
            user_data,
            stash,
            universal_id: 0,
        }));
    }

    /// A `KernelDispatch` record; `allocations` are (base, size, arg_index, memory type).
    pub fn kernel_dispatch(
        &mut self,
        ts: u64,
        tid: u32,
        ur_instance: u64,
        kernel: &str,
        allocations: &[(u64, u64, i32, MemoryType)],
    ) {
        let kernel = self.str(kernel);
        self.records.push(Record::KernelDispatch(KernelDispatch {
            tid,
            ts,
            correlation: ts,
            ur_instance,
            kernel,
            queue: 0x51,
            kernel_handle: 0x61,
            work_dim: 1,
            global_size: [1024, 1, 1],
            local_size: [64, 1, 1],
            allocations: allocations
                .iter()
                .map(|&(base, size, arg_index, memory_type)| KernelAllocation { base, size, arg_index, memory_type })
                .collect(),
        }));
    }

    /// A UR call: begin at `ts`, end at `ts + dur`.
    #[allow(clippy::too_many_arguments)]
    pub fn ur_call(
        &mut self,
        ts: u64,
        dur: u64,
        tid: u32,
        instance: u64,
        function_id: u32,
        name: &str,
        args: &[u64],
        outs: &[(u8, u64)],
    ) {
        let name = self.str(name);
        let mut a = ArgBlock::default();
        for (i, v) in args.iter().enumerate().take(MAX_ARGS) {
            a.values[i] = *v;
        }
        a.len = args.len().min(MAX_ARGS) as u8;
        let mut o = OutValues::default();
        for (i, v) in outs.iter().enumerate().take(MAX_OUTS) {
            o.values[i] = *v;
        }
        o.len = outs.len().min(MAX_OUTS) as u8;
        let begin = UserData::FunctionWithArgs { function_id, name, result: None, args: a, outs: OutValues::default() };
        let end = UserData::FunctionWithArgs { function_id, name, result: Some(0), args: a, outs: o };
        self.notify(ts, tid, 8, 28, instance, None, begin);
        self.notify(ts + dur, tid, 8, 29, instance, None, end);
    }
}

/// Stream ids used by [`w4_like`].
pub const SYCL: u8 = 2;
pub const BUFFER: u8 = 4;
pub const MEM_ALLOC: u8 = 6;
pub const UR_CALL: u8 = 8;

/// A small trace shaped like W4: two queues, USM device/host allocations, two kernels with a
/// dependency, a memcpy, profiling info for the second kernel, a buffer, drops, an End record.
pub fn w4_like() -> Vec<Record> {
    w4(false)
}

/// [`w4_like`] with `KernelDispatch` records (format version 2): kernel A's written right after
/// its launch call (linked through `ur_instance`), kernel B's after its command's task_end and
/// without `ur_instance` (linked by time), and one `scale` dispatch on the worker thread outside
/// any command. axpy: arg 0 65536 B DEVICE at 0x1000 both times; arg 1 4096 B HOST at 0x2000
/// then 0x2800; an implicit 65536 B SHARED allocation in A only.
pub fn w4_like_with_dispatches() -> Vec<Record> {
    w4(true)
}

fn w4(dispatches: bool) -> Vec<Record> {
    use MemoryType::{Device, Host, Shared};
    let mut b = TraceBuilder::new();
    b.info("pid", "4242");
    b.info("command", "python w4.py");
    b.stream(SYCL, "sycl");
    b.stream(BUFFER, "sycl.experimental.buffer");
    b.stream(MEM_ALLOC, "sycl.experimental.mem_alloc");
    b.stream(UR_CALL, "ur.call");
    b.thread(100, "python");
    b.thread(101, "worker");
    let t = 100;
    let graph = b.event(0x6000, "sycl.application.graph", &[]);
    b.notify(1_000, t, SYCL, 2, 1, Some(graph), UserData::None);
    // queues
    for (q, inorder) in [(1u64, 1u64), (2, 0)] {
        let name = format!("queue[{q}]");
        let ev = b.event(
            0x7000 + q,
            &name,
            &[("queue_id", Md::U(q)), ("is_inorder", Md::U(inorder)), ("sycl_device_name", Md::S("CPU X"))],
        );
        let ud = UserData::Str(b.str("queue_create"));
        b.notify(2_000 + q, t, SYCL, 42, 100 + q, Some(ev), ud);
    }
    // USM device allocation (kind from the UR call inside) and a host allocation
    let alloc = b.event(0x8000, "alignedAlloc", &[("memory_size", Md::U(65536)), ("sycl_device_name", Md::S("CPU X"))]);
    let ud = UserData::Str(b.str("usm::alignedAlloc"));
    b.notify(3_000, t, MEM_ALLOC, 4, 20, Some(alloc), ud);
    b.notify(3_100, t, MEM_ALLOC, 32, 21, Some(alloc), ud);
    b.ur_call(3_200, 100, t, 22, 18, "urUSMDeviceAlloc", &[1, 2, 0, 0, 65536, 0x55], &[(5, 0x1000)]);
    let alloc_end = b.event(
        0x8000,
        "alignedAlloc",
        &[("memory_size", Md::U(65536)), ("sycl_device_name", Md::S("CPU X")), ("memory_ptr", Md::U(0x1000))],
    );
    b.notify(3_400, t, MEM_ALLOC, 33, 21, Some(alloc_end), ud);
    let host = b.event(
        0x8001,
        "alignedAllocHost",
        &[("memory_size", Md::U(4096)), ("sycl_device_name", Md::S("Host")), ("memory_ptr", Md::U(0x2000))],
    );
    let hud = UserData::Str(b.str("malloc_host"));
    b.notify(3_500, t, MEM_ALLOC, 32, 23, Some(host), hud);
    b.notify(3_600, t, MEM_ALLOC, 33, 23, Some(host), hud);
    // nodes and edges
    let cg = UserData::Str(b.str("command_group_node"));
    let ka = b.event(0xA, "axpy", &[("kernel_name", Md::S("axpy")), ("queue_id", Md::U(1))]);
    b.notify(4_000, t, SYCL, 4, 30, Some(ka), cg);
    let kb = b.event(0xB, "axpy", &[("kernel_name", Md::S("axpy")), ("queue_id", Md::U(2))]);
    b.notify(4_100, t, SYCL, 4, 40, Some(kb), cg);
    let mc = b.event(0xC, "memcpy", &[("queue_id", Md::U(1)), ("memory_size", Md::U(65536))]);
    let mud = UserData::Str(b.str("memory_transfer_node::memcpy"));
    b.notify(4_200, t, SYCL, 4, 50, Some(mc), mud);
    let mut e1 = b.event(0xE0, "Event[0x1]", &[("event", Md::U(1))]);
    e1.source_id = 0xA;
    e1.target_id = 0xB;
    b.notify(4_300, t, SYCL, 6, 60, Some(e1), UserData::None);
    let mut e2 = b.event(0xE0, "read[0x2]", &[("access_mode", Md::I(1024))]);
    e2.source_id = 0xB;
    e2.target_id = 0xC;
    b.notify(4_400, t, SYCL, 6, 61, Some(e2), UserData::None);
    // kernel A on queue 1
    b.notify(5_000, t, SYCL, 10, 30, Some(ka), cg);
    b.ur_call(5_100, 500, t, 31, 200, "urEnqueueKernelLaunch", &[0x51, 0x61, 1, 0, 0, 0, 0, 0, 0], &[(8, 0xE1)]);
    if dispatches {
        b.kernel_dispatch(
            5_300,
            t,
            31,
            "axpy",
            &[(0x1000, 65536, 0, Device), (0x2000, 4096, 1, Host), (0x30000, 65536, -1, Shared)],
        );
    }
    b.notify(5_700, t, SYCL, 16, 30, Some(ka), UserData::Signal { ur_event: 0xE1 });
    b.notify(6_000, t, SYCL, 11, 30, Some(ka), cg);
    // kernel B on queue 2 (profiling)
    b.notify(7_000, t, SYCL, 10, 40, Some(kb), cg);
    b.ur_call(7_100, 300, t, 41, 200, "urEnqueueKernelLaunch", &[0x52, 0x61, 1, 0, 0, 0, 0, 0, 0], &[(8, 0xE2)]);
    b.notify(7_500, t, SYCL, 16, 40, Some(kb), UserData::Signal { ur_event: 0xE2 });
    b.notify(8_000, t, SYCL, 11, 40, Some(kb), cg);
    if dispatches {
        b.kernel_dispatch(7_200, t, 0, "axpy", &[(0x1000, 65536, 0, Device), (0x2800, 4096, 1, Host)]);
    }
    // memcpy on queue 1 (no signal, like USM memcpy nodes)
    b.notify(9_000, t, SYCL, 10, 51, Some(mc), mud);
    b.ur_call(9_100, 1_000, t, 52, 94, "urEnqueueUSMMemcpy", &[0x51, 1, 0x1000, 0x2000, 65536, 0, 0, 0], &[(7, 0xE3)]);
    b.notify(10_500, t, SYCL, 11, 51, Some(mc), mud);
    // the program asks for kernel B's profiling info (start, end)
    b.ur_call(11_000, 50, t, 70, 77, "urEventGetProfilingInfo", &[0xE2, 2, 8, 0x7ff0, 0], &[(3, 7_600)]);
    b.ur_call(11_100, 50, t, 71, 77, "urEventGetProfilingInfo", &[0xE2, 3, 8, 0x7ff0, 0], &[(3, 9_600)]);
    // a buffer, a wait on the worker thread
    let bufud = UserData::OffloadBuffer {
        user_object: 0x90,
        host_object: 0x91,
        element_type: b.str("f"),
        element_size: 4,
        dim: 1,
        range: [256, 0, 0],
    };
    let bev = b.event(0x9000, "merge_sorted", &[]);
    b.notify(11_500, t, BUFFER, 36, 80, Some(bev), bufud);
    let qw = b.event(0x7001, "queue[1]", &[("queue_id", Md::U(1))]);
    let wud = UserData::Str(b.str("queue.wait[0x1]"));
    b.notify(12_000, 101, SYCL, 22, 90, Some(qw), wud);
    b.notify(12_500, 101, SYCL, 23, 90, Some(qw), wud);
    if dispatches {
        b.kernel_dispatch(12_600, 101, 0, "scale", &[]);
    }
    // release of the device allocation
    let free = b.event(0x8002, "free", &[("memory_ptr", Md::U(0x1000))]);
    let fud = UserData::Str(b.str("usm::free"));
    b.notify(13_000, t, MEM_ALLOC, 34, 95, Some(free), fud);
    b.notify(13_200, t, MEM_ALLOC, 35, 95, Some(free), fud);
    b.notify(13_300, t, SYCL, 99, 96, None, UserData::None);
    for q in [1u64, 2] {
        let ev = b.event(0x7000 + q, &format!("queue[{q}]"), &[("queue_id", Md::U(q))]);
        let ud = UserData::Str(b.str("queue_destroy"));
        b.notify(14_000 + q, t, SYCL, 43, 100 + q, Some(ev), ud);
    }
    b.records.push(Record::Drops { tid: 101, count: 3 });
    let n = b.records.len() as u64;
    b.records.push(Record::End { records: n + 1, drops: 3 });
    b.records
}
