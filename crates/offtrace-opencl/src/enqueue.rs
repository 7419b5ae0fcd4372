//! Device activity: each enqueued command's device start and end, collected without blocking
//! the program, converted into the trace clock and emitted with the correlation id of the call
//! that enqueued it.
//!
//! Protocol, per command (`Submission`): before the next layer's enqueue the wrapper points the
//! `event` argument at a local when the program passed none (so every command has an event);
//! after a successful enqueue it takes one reference of its own (`clRetainEvent`, not for the
//! local: that one is already ours). A command of an in-order queue then goes into its queue's
//! FIFO and is completed in a batch (`in_order.rs`: no callback per command). A command of an
//! out-of-order queue without Codeplay counters goes into the unordered list, which the harvest
//! thread (`in_order.rs`) polls: each command whose event is final
//! (`CL_EVENT_COMMAND_EXECUTION_STATUS`) has `CL_PROFILING_COMMAND_START/END` read (profiling is
//! on for every queue, see `hooks.rs`), converted (`calibration.rs`) and emitted as one activity
//! record (`emit_activity`), and its event released ([`poll_unordered`]). No callback: Intel's
//! OpenCL CPU runtime deadlocks now and then when several threads wait on out-of-order queues,
//! and a multi-threaded SYCL program hung that way more often while the layer registered a
//! `CL_COMPLETE` callback on each of their commands (which that runtime runs inside the TBB task
//! that ran the command): docs/history/hang-2026-11-26-query-metrics.md. A command of a queue with Codeplay counters
//! is filed in the pending table with `CL_RUNNING` and `CL_COMPLETE` callbacks (the counters are
//! read when the command starts and ends): the complete one reads the times and the counters,
//! emits, stores the results and hands the event to the release list, whose references are
//! dropped by the next submission or at exit, never inside the runtime's own callback.
//!
//! Commands issued inside another backend's API call (the SYCL path) are not reported on their
//! own: their intervals are gathered per enclosing call and kind ([`Group`]) and delivered once.
//!
//! Commands whose callback never came (the program exited or was killed first, or the runtime
//! dropped the command) are still in the pending table or a FIFO at exit: `finish` emits each as an
//! activity record with start = end = 0 (no device time), and counts them (`incomplete()`).
//! Commands that ended with an error status (the callback's status < 0) are emitted with start
//! = end = 0 as well and counted in `failed()`.
//!
//! Cost per command when activity is wanted, on an in-order queue: one mutex push into its FIFO
//! (and a retain when the program asked for the event); on an out-of-order queue one mutex push
//! into the unordered list; with Codeplay counters one `clSetEventCallback` and one mutex push
//! into the pending table. Then, off the program's thread as a rule, two profiling queries and
//! one emit (and for an out-of-order command one status query per harvest round until it is
//! complete). When no context wants device activity and the queue has no
//! counters, a submission is inert (one relaxed load).

use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use offtrace_core::{
    CopyDirection, KernelDispatchPayload, Kind, MAX_KERNEL_ARGS, MemoryCopyPayload, MemoryFillPayload, MemoryType,
    Payload, SyncPayload, emit_activity_interned, emit_instant_interned, kernel_dispatch, kind_enabled,
};

use crate::api::next;
use crate::call::*;
use crate::counters::{CounterSet, CounterValues};

/// What a command did, as known at enqueue time.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Command {
    Kernel {
        kernel: u64,
        work_dim: u32,
        global: [u64; 3],
        local: [u64; 3],
        /// The kernel's name as its launch record gave it (an interned, process-lifetime string;
        /// 0 before the launch record): its completion reuses it instead of a second look-up.
        name: usize,
    },
    Copy {
        op: u32,
        dst: u64,
        src: u64,
        size: u64,
        direction: CopyDirection,
        src_type: MemoryType,
        dst_type: MemoryType,
    },
    Fill {
        op: u32,
        dst: u64,
        pattern: u64,
        pattern_size: u64,
        size: u64,
    },
    Sync {
        op: u32,
        count: u32,
    },
}

/// Mapped host pointer → (bytes its map covered, maps not yet unmapped): an unmap names only
/// the pointer, and carries the bytes its map made visible. Only maps and unmaps come here (not
/// the common commands). Bounded: a program that maps without unmapping cannot grow it past
/// [`MAX_MAPPINGS`] (it then starts over; an unmap of a forgotten mapping has 0 bytes).
static MAPPINGS: Mutex<Option<HashMap<u64, (u64, u32)>>> = Mutex::new(None);
const MAX_MAPPINGS: usize = 4096;

/// A map returned `ptr` for `size` bytes (`ptr` 0: it failed); returns `size`.
pub(crate) fn mapping(ptr: u64, size: u64) -> u64 {
    if ptr != 0 {
        let mut g = MAPPINGS.lock().unwrap_or_else(|e| e.into_inner());
        let m = g.get_or_insert_with(HashMap::default);
        if m.len() >= MAX_MAPPINGS && !m.contains_key(&ptr) {
            m.clear();
        }
        // The same region mapped again returns the same pointer: each map is unmapped once.
        let e = m.entry(ptr).or_insert((size, 0));
        *e = (size, e.1.saturating_add(1));
    }
    size
}

/// The bytes mapped at `ptr`, its mapping's count taken down by the unmap (0: not mapped here).
pub(crate) fn unmapping(ptr: u64) -> u64 {
    let mut g = MAPPINGS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(m) = g.as_mut() else { return 0 };
    let Some(&(size, count)) = m.get(&ptr) else { return 0 };
    if count <= 1 {
        m.remove(&ptr);
    } else {
        m.insert(ptr, (size, count - 1));
    }
    size
}

impl Command {
    /// # Safety
    ///
    /// `global` / `local` are null or point at `work_dim` readable `size_t`.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn kernel(kernel: u64, work_dim: u32, global: *const usize, local: *const usize) -> Self {
        let read = |p: *const usize| {
            let mut out = [0u64; 3];
            if !p.is_null() {
                for (i, o) in out.iter_mut().enumerate().take((work_dim as usize).min(3)) {
                    // SAFETY: the caller guarantees work_dim readable entries.
                    *o = unsafe { *p.add(i) } as u64;
                }
            }
            out
        };
        Command::Kernel { kernel, work_dim, global: read(global), local: read(local), name: 0 }
    }

    /// A copy; `direction` is `None` for USM / SVM copies, whose ends are looked up in the live
    /// allocation table (an address it does not know is host memory).
    ///
    /// # Safety
    ///
    /// None: plain values (unsafe only for the generated call sites' uniformity).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn copy(op: u32, dst: u64, src: u64, size: u64, direction: Option<CopyDirection>) -> Self {
        let (src_type, dst_type) = match direction {
            Some(CopyDirection::HostToDevice) => (MemoryType::Host, MemoryType::Device),
            Some(CopyDirection::DeviceToHost) => (MemoryType::Device, MemoryType::Host),
            Some(CopyDirection::DeviceToDevice) => (MemoryType::Device, MemoryType::Device),
            Some(CopyDirection::HostToHost) => (MemoryType::Host, MemoryType::Host),
            _ => (usm_type(src), usm_type(dst)),
        };
        let direction = direction.unwrap_or_else(|| CopyDirection::from_types(src_type, dst_type));
        Command::Copy { op, dst, src, size, direction, src_type, dst_type }
    }

    /// # Safety
    ///
    /// `pattern` is null or points at `pattern_size` readable bytes.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn fill(op: u32, dst: u64, pattern: *const c_void, pattern_size: u64, size: u64) -> Self {
        let mut bytes = [0u8; 8];
        if !pattern.is_null() {
            let n = (pattern_size as usize).min(8);
            // SAFETY: the caller guarantees pattern_size readable bytes; n <= pattern_size.
            unsafe { ptr::copy_nonoverlapping(pattern.cast::<u8>(), bytes.as_mut_ptr(), n) };
        }
        Command::Fill { op, dst, pattern: u64::from_le_bytes(bytes), pattern_size, size }
    }

    /// # Safety
    ///
    /// None (see [`Command::copy`]).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn sync(op: u32, count: u32) -> Self {
        Command::Sync { op, count }
    }

    /// Bytes the command moved (copies and fills), for the counters.
    pub(crate) fn bytes(&self) -> u64 {
        match *self {
            Command::Copy { size, .. } | Command::Fill { size, .. } => size,
            _ => 0,
        }
    }

    fn kind_op(&self) -> (Kind, u32) {
        match *self {
            Command::Kernel { .. } => (Kind::KernelDispatch, kernel_dispatch::LAUNCH),
            Command::Copy { op, .. } => (Kind::MemoryCopy, op),
            Command::Fill { op, .. } => (Kind::MemoryFill, op),
            Command::Sync { op, .. } => (Kind::Sync, op),
        }
    }

    /// Emits `f` with this command's payload; `device_start` / `device_end` in the trace clock
    /// (0 at enqueue, or when the device times never arrived). Returns the kernel name the
    /// payload carried (null for other commands).
    ///
    /// A kernel's completion whose only consumer is the recorder (core's direct path) carries
    /// the name its launch record had and no kernel arguments: the recorder keeps allocation
    /// properties at launch only, so the second look-up of the kernel's table bought nothing.
    /// A tool's callback (the services' path) gets the arguments at completion too.
    ///
    /// The kernel name is the layer's, interned for the process's lifetime (`objects::intern`):
    /// `f` may emit the payload with core's `_interned` functions.
    fn with_payload(
        &self,
        queue: u64,
        device: u64,
        times: (u64, u64),
        f: impl FnOnce(Kind, u32, Payload<'_>),
    ) -> *const std::ffi::c_char {
        let (kind, op) = self.kind_op();
        let (device_start, device_end) = times;
        match *self {
            Command::Kernel { kernel, work_dim, global, local, name } => {
                let mut p = KernelDispatchPayload {
                    queue,
                    kernel,

                    work_dim,
                    global_size: global,
                    local_size: local,
                    device,
                    device_start,
                    device_end,
                    ..Default::default()
                };
                if name != 0 && offtrace_core::direct_path_applies(Kind::KernelDispatch) {
                    p.kernel_name = name as *const std::ffi::c_char;
                } else {
                    let (name, n) = crate::objects::kernel_info(kernel, &mut p.kernel_args[..MAX_KERNEL_ARGS]);
                    p.kernel_name = name;
                    p.kernel_arg_count = n as u32;
                }
                f(kind, op, Payload::KernelDispatch(&p));
                p.kernel_name
            }
            Command::Copy { dst, src, size, direction, src_type, dst_type, .. } => {
                let p = MemoryCopyPayload {
                    queue,
                    dst,
                    src,
                    size,
                    device,
                    direction,
                    src_type,
                    dst_type,
                    device_start,
                    device_end,
                };
                f(kind, op, Payload::MemoryCopy(&p));
                ptr::null()
            }
            Command::Fill { dst, pattern, pattern_size, size, .. } => {
                let p = MemoryFillPayload { queue, dst, pattern, pattern_size, size, device, device_start, device_end };
                f(kind, op, Payload::MemoryFill(&p));
                ptr::null()
            }
            Command::Sync { count, .. } => {
                let p = SyncPayload { object: queue, event_count: count, queue, device, device_start, device_end };
                f(kind, op, Payload::Sync(&p));
                ptr::null()
            }
        }
    }
}

/// The memory type of a USM / SVM address: the live allocation table's, else host memory.
fn usm_type(addr: u64) -> MemoryType {
    match offtrace_core::lookup_allocation(addr) {
        Some((_, _, MemoryType::Shared)) => MemoryType::Shared,
        Some((_, _, MemoryType::Device)) => MemoryType::Device,
        _ => MemoryType::Host,
    }
}

const ACTIVITY_KINDS: [Kind; 4] = [Kind::KernelDispatch, Kind::MemoryCopy, Kind::MemoryFill, Kind::Sync];

/// Whether some context wants device activity (four relaxed loads).
#[inline(always)]
pub(crate) fn activity_wanted() -> bool {
    ACTIVITY_KINDS.iter().any(|&k| kind_enabled(k))
}

/// One enqueue in progress (see the module docs).
pub(crate) struct Submission {
    queue: *mut c_void,
    user_event: *mut *mut c_void,
    local: *mut c_void,
    correlation: u64,
    /// Inside another API call (the SYCL path): that backend reported the launch already.
    nested: bool,
    counters: Option<Arc<CounterSet>>,
    track: bool,
    host_before: u64,
}

impl Submission {
    #[inline(always)]
    pub(crate) fn new(queue: *mut c_void, user_event: *mut *mut c_void, call: &crate::call::ApiCall) -> Self {
        let counters = crate::queues::counters(queue);
        let track = counters.is_some() || activity_wanted();
        let host_before = if track { offtrace_core::clock::monotonic_ns() } else { 0 };
        Self {
            queue,
            user_event,
            local: ptr::null_mut(),
            correlation: call.outer_correlation(),
            nested: call.nested(),
            counters,
            track,
            host_before,
        }
    }

    /// The `event` argument to pass on: the program's, or the local one when it passed none.
    #[inline(always)]
    pub(crate) fn event_out(&mut self) -> *mut *mut c_void {
        if self.track && self.user_event.is_null() { &mut self.local } else { self.user_event }
    }

    /// After the next layer's enqueue returned `result`.
    #[inline(always)]
    pub(crate) fn submitted(self, result: i32, api_op: u32, command: Command) {
        if self.track {
            self.submitted_slow(result, api_op, command, 0, ptr::null());
        }
    }

    /// [`Submission::submitted`] for an enqueue with an event wait list (`count` events at
    /// `list`): the same gate, the list goes to the task graph (`graph.rs`) when not empty.
    #[inline(always)]
    pub(crate) fn submitted_waiting(self, result: i32, api_op: u32, command: Command, count: u32, list: *mut c_void) {
        if self.track {
            self.submitted_slow(result, api_op, command, count, list.cast_const().cast());
        }
    }

    #[cold]
    #[inline(never)]
    fn submitted_slow(self, result: i32, _api_op: u32, command: Command, waits: u32, list: *const *mut c_void) {
        let host_after = offtrace_core::clock::monotonic_ns();
        // Relaxed: a hint; the list's mutex is the truth, and a miss waits for the next enqueue.
        if RELEASES_WAITING.load(Ordering::Relaxed) {
            drain_releases();
        }
        if result != CL_SUCCESS {
            return;
        }
        let correlation = if self.correlation != 0 { self.correlation } else { offtrace_core::next_correlation_id() };
        // The command itself, inside the API call that enqueued it (kernel allocation properties
        // at launch time), unless an enclosing API call's backend (UR on the SYCL path) reported
        // it already; its device times complete it later (`emit_activity`, same correlation).
        let view = crate::queues::view(self.queue);
        let device = view.device;
        let mut command = command;
        if !self.nested {
            // The payload's kernel name is interned for the process (`objects::intern`).
            let launched = command.with_payload(self.queue as u64, device as u64, (0, 0), |kind, op, p| {
                emit_instant_interned(kind, op, offtrace_core::Phase::None, p)
            });
            if let Command::Kernel { name, .. } = &mut command {
                *name = launched as usize;
            }
        }
        let event = if self.user_event.is_null() {
            self.local
        } else {
            // SAFETY: the enqueue succeeded, so the program's `event` holds the new event.
            #[allow(unsafe_code)]
            let ev = unsafe { *self.user_event };
            if !ev.is_null()
                && let Some(retain) = next().clRetainEvent
            {
                // SAFETY: a valid event just returned by the runtime.
                #[allow(unsafe_code)]
                unsafe {
                    retain(ev)
                };
            }
            ev
        };
        // The task graph (`graph.rs`): not for a command of another backend's call, whose
        // backend has a graph of its own (SYCL's).
        if !self.nested && (waits != 0 || !self.user_event.is_null()) && crate::graph::wanted() {
            self.graph(correlation, &command, waits, list, event);
        }
        if event.is_null() {
            return;
        }
        let perf_at_start = if self.counters.is_some() { crate::perf::snapshot().map(Box::new) } else { None };
        let pending = Pending {
            event: event as usize,
            queue: self.queue as u64,
            device: device as u64,
            correlation,
            command,
            counters: self.counters,
            host_before: self.host_before,
            host_after,
            // The counters' window opens at the enqueue until the command is seen running
            // (`on_running`): a runtime that reports CL_RUNNING only at completion (NVIDIA's)
            // would otherwise leave it empty.
            perf_at_start,
            nested: self.nested,
        };
        if self.nested {
            // Before its completion can be reported: the group counts it as outstanding.
            group_open(correlation, &command, self.queue as u64, device as u64);
        }
        SUBMITTED.fetch_add(1, Ordering::Relaxed);
        if let Some(fifo) = view.fifo {
            // An in-order queue: completed in batches (`in_order.rs`). A command other than a
            // kernel may have completed before its enqueue returned (a blocking read): if it did,
            // it and the commands before it are reported now.
            let kernel = matches!(command, Command::Kernel { .. });
            let pushed = fifo.push(pending);
            if !kernel {
                fifo.harvest_if_complete(event as usize, pushed);
            }
            return;
        }
        if pending.counters.is_none() {
            // An out-of-order queue: polled by the harvest thread (`poll_unordered`).
            lock(&UNORDERED).push(pending);
            // Relaxed: a hint; the list's mutex is the truth.
            UNORDERED_WAITING.store(true, Ordering::Relaxed);
            crate::in_order::start_harvest_thread();
            return;
        }
        let id = PENDING_ID.fetch_add(1, Ordering::Relaxed);
        lock(&PENDING).get_or_insert_with(HashMap::default).insert(id, pending);
        let Some(set_callback) = next().clSetEventCallback else {
            return;
        };
        // SAFETY: a valid event; the callback never unwinds; user data is our id.
        #[allow(unsafe_code)]
        unsafe {
            set_callback(event, CL_RUNNING, on_running as *mut c_void, id as *mut c_void)
        };
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let r = unsafe { set_callback(event, CL_COMPLETE, on_complete as *mut c_void, id as *mut c_void) };
        if r != CL_SUCCESS {
            // No callback: the command is reported at exit with whatever its event says then.
            NO_CALLBACK.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Submission {
    /// The command's node and edges when its wait list is not empty; its event noted when the
    /// program took it (a later wait list may name it).
    #[cold]
    #[inline(never)]
    fn graph(&self, correlation: u64, command: &Command, waits: u32, list: *const *mut c_void, event: *mut c_void) {
        let (kind, op) = command.kind_op();
        let kernel_name = match *command {
            Command::Kernel { name, .. } => name as *const std::ffi::c_char,
            _ => ptr::null(),
        };
        let name = crate::graph::command_name(kind, op, kernel_name);
        let queue = self.queue as u64;
        // SAFETY: the enqueue succeeded, so its wait list held `waits` valid events.
        #[allow(unsafe_code)]
        let emitted = unsafe { crate::graph::waits(correlation, queue, name, waits, list) };
        if !self.user_event.is_null() && !event.is_null() {
            crate::graph::produced(event as u64, correlation, queue, name, emitted);
        }
    }
}

/// A command whose device times have not arrived yet.
pub(crate) struct Pending {
    pub(crate) event: usize,
    queue: u64,
    device: u64,
    correlation: u64,
    command: Command,
    counters: Option<Arc<CounterSet>>,
    host_before: u64,
    host_after: u64,
    /// Boxed: only commands of queues with Codeplay counters have one, and every command of an
    /// in-order queue is copied into its FIFO (`in_order.rs`).
    perf_at_start: Option<Box<crate::perf::Snapshot>>,
    /// Issued inside another backend's API call: completes a [`Group`], not a record of its own.
    nested: bool,
}

#[cfg(test)]
impl Pending {
    /// A kernel of queue 0x50 on device 0xd1 whose event is `event` (tests).
    pub(crate) fn for_test(event: usize) -> Self {
        Self {
            event,
            queue: 0x50,
            device: 0xd1,
            correlation: 1,
            command: Command::Kernel { kernel: 0, work_dim: 1, global: [64, 1, 1], local: [0; 3], name: 0 },
            counters: None,
            host_before: 0,
            host_after: 0,
            perf_at_start: None,
            nested: false,
        }
    }
}

static PENDING: Mutex<Option<HashMap<u64, Pending>>> = Mutex::new(None);
static PENDING_ID: AtomicU64 = AtomicU64::new(1);
static RELEASES: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static RELEASES_WAITING: AtomicBool = AtomicBool::new(false);
/// Commands of out-of-order queues without counters, waiting for their events to be final:
/// polled by the harvest thread ([`poll_unordered`]).
static UNORDERED: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
/// Whether `UNORDERED` may hold commands (a hint: the list's mutex is the truth).
static UNORDERED_WAITING: AtomicBool = AtomicBool::new(false);
static SUBMITTED: AtomicU64 = AtomicU64::new(0);
static COMPLETED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static INCOMPLETE: AtomicU64 = AtomicU64::new(0);
static NO_CALLBACK: AtomicU64 = AtomicU64::new(0);
static FINISHED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Commands tracked, completed with device times, failed, and never completed (at exit).
pub fn stats() -> (u64, u64, u64, u64) {
    (
        SUBMITTED.load(Ordering::Relaxed),
        COMPLETED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
        INCOMPLETE.load(Ordering::Relaxed),
    )
}

extern "C" fn on_running(event: *mut c_void, _status: i32, user: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // NVIDIA's OpenCL calls the CL_RUNNING callback only once the command completed: a
        // reading then would make the window empty; the one taken at the enqueue stays.
        if crate::in_order::terminal(event as usize) {
            return;
        }
        let snap = crate::perf::snapshot().map(Box::new);
        if let Some(p) = lock(&PENDING).as_mut().and_then(|m| m.get_mut(&(user as u64))) {
            p.perf_at_start = snap;
        }
    });
}

extern "C" fn on_complete(event: *mut c_void, status: i32, user: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        // The counters' end reading first (before the table's lock), and only for queues
        // with Codeplay counters: a perf read is a system call per counter.
        let perf_end = if crate::queues::any_counters() { crate::perf::snapshot() } else { None };
        let Some(p) = lock(&PENDING).as_mut().and_then(|m| m.remove(&(user as u64))) else { return };
        let perf_end = if p.counters.is_some() { perf_end } else { None };
        let held = p.event;
        // The runtime called this callback for `CL_COMPLETE`: the event is final.
        let _ = complete(&p, event, status, perf_end, &mut Default::default());
        // The reference is dropped outside the runtime's callback (next enqueue, or at exit).
        lock(&RELEASES).push(held);
        RELEASES_WAITING.store(true, Ordering::Relaxed);
    });
}

/// A command's device interval from its START and END profiling values, or none: a value the
/// runtime did not give, a zero (NVIDIA's OpenCL reports START = END = 0, and QUEUED = 0, for
/// markers and barriers: converted, the command would start decades before its enqueue), or an
/// END before the START.
pub(crate) fn device_interval(start: Option<u64>, end: Option<u64>) -> Option<(u64, u64)> {
    match (start, end) {
        (Some(s), Some(e)) if s != 0 && e >= s => Some((s, e)),
        _ => None,
    }
}

/// Reads a `cl_ulong` profiling value of `event`.
pub(crate) fn profiling(event: *mut c_void, param: u32) -> Option<u64> {
    let f = next().clGetEventProfilingInfo?;
    let mut v = 0u64;
    // SAFETY: valid event; an 8-byte out value.
    #[allow(unsafe_code)]
    let r = unsafe { f(event, param, 8, (&raw mut v).cast(), ptr::null_mut()) };
    (r == CL_SUCCESS).then_some(v)
}

/// Reads a completed command's device times from `event` and emits its activity record (or
/// completes its group); the caller drops the layer's event reference. Returns `false` instead
/// when `status` said complete but the event is not (a batch harvested one command too many:
/// see `in_order.rs`): the caller keeps the command for later. By reference: the FIFO's harvest
/// reads its commands where they are.
#[must_use]
pub(crate) fn complete(
    p: &Pending,
    event: *mut c_void,
    status: i32,
    perf_end: Option<crate::perf::Snapshot>,
    cached: &mut crate::calibration::Cached,
) -> bool {
    let calibration = cached.get(p.device);
    let mut offset = calibration.map_or(0, |c| c.offset_ns);
    let times = if status == CL_COMPLETE {
        match device_interval(profiling(event, CL_PROFILING_COMMAND_START), profiling(event, CL_PROFILING_COMMAND_END))
        {
            Some((s, e)) => {
                // The offset's lower bound from this command: its START cannot precede the host
                // time its enqueue began (`calibration::Floor`).
                let bound = (p.host_before as i64).wrapping_sub(s as i64);
                cached.floor.note(bound, p.host_after);
                if crate::calibration::could_improve(calibration.as_ref(), p.host_before, p.host_after)
                    && let Some(q) = profiling(event, CL_PROFILING_COMMAND_QUEUED)
                {
                    crate::calibration::observe_queued(p.device, q, p.host_before, p.host_after, cached.floor);
                    offset = cached.get(p.device).map_or(0, |c| c.offset_ns);
                }
                if bound > offset && cached.get(p.device).is_some() {
                    crate::calibration::raise(
                        p.device,
                        crate::calibration::Floor { offset_ns: bound, at_ns: p.host_after },
                    );
                    offset = cached.get(p.device).map_or(0, |c| c.offset_ns);
                }
                Some((s, e))
            }
            None => None,
        }
    } else {
        None
    };
    if times.is_none() && status == CL_COMPLETE && !crate::in_order::terminal(event as usize) {
        return false;
    }
    let (start, end) = match times {
        Some((s, e)) => (crate::calibration::apply(offset, s), crate::calibration::apply(offset, e)),
        None => (0, 0),
    };
    if times.is_some() {
        COMPLETED.fetch_add(1, Ordering::Relaxed);
    } else {
        FAILED.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(set) = &p.counters {
        let values = CounterValues::compute(
            set,
            times.map(|(s, e)| e.saturating_sub(s)),
            p.command.bytes(),
            p.perf_at_start.as_deref(),
            perf_end.as_ref(),
        );
        crate::counters::emit_samples(set, p.device, p.correlation, (start, end), &values);
        crate::counters::store_results(event as usize, values);
    }
    if p.nested {
        group_complete(p.correlation, &p.command, (start, end));
    } else {
        p.command.with_payload(p.queue, p.device, (start, end), |kind, op, payload| {
            emit_activity_interned(kind, op, p.correlation, start, end, payload)
        });
    }
    true
}

/// The commands one enclosing API call (a UR call on the SYCL path) issued, of one kind: the
/// enclosing backend reported that call's command once (its queue, name, geometry); the layer
/// delivers its device interval once, the union of its OpenCL commands' (first start, last
/// end), when all of them completed and the call is over (`close_outer`). One UR call may issue
/// several OpenCL commands: a copy or fill split in parts, a barrier made of a marker and a
/// barrier. Commands whose times never came count as untimed; a group none of whose commands
/// has times is delivered with start = end = 0.
struct Group {
    outstanding: u32,
    closed: bool,
    /// The enclosing backend did not report this command (a UR call it does not count as a
    /// command, e.g. `urEnqueueEventsWait`'s marker): nothing is delivered.
    unreported: bool,
    start: u64,
    end: u64,
    queue: u64,
    device: u64,
    command: Command,
}

static GROUPS: Mutex<Option<HashMap<(u64, u8), Group>>> = Mutex::new(None);
static OPEN_GROUPS: AtomicU64 = AtomicU64::new(0);

fn kind_index(c: &Command) -> u8 {
    match c {
        Command::Kernel { .. } => 0,
        Command::Copy { .. } => 1,
        Command::Fill { .. } => 2,
        Command::Sync { .. } => 3,
    }
}

fn group_open(correlation: u64, command: &Command, queue: u64, device: u64) {
    // A group, once opened, is always delivered (with times, or untimed): the enclosing backend
    // leaves this command's device times to the layer.
    offtrace_core::note_times_below(correlation, command.kind_op().0);
    let mut g = lock(&GROUPS);
    let map = g.get_or_insert_with(HashMap::default);
    let e = map.entry((correlation, kind_index(command))).or_insert_with(|| {
        OPEN_GROUPS.fetch_add(1, Ordering::Relaxed);
        Group { outstanding: 0, closed: false, unreported: false, start: 0, end: 0, queue, device, command: *command }
    });
    e.outstanding += 1;
    if e.outstanding > 1 {
        // The parts of a split copy / fill add up to the whole command's bytes.
        if let Command::Copy { size, .. } | Command::Fill { size, .. } = &mut e.command {
            *size += command.bytes();
        }
        // A barrier made of a marker and a barrier (the UR adapter's) is a barrier.
        if let (Command::Sync { op, .. }, Command::Sync { op: part, .. }) = (&mut e.command, command)
            && *part == offtrace_core::sync_op::BARRIER
        {
            *op = *part;
        }
    }
}

fn group_complete(correlation: u64, command: &Command, (start, end): (u64, u64)) {
    let key = (correlation, kind_index(command));
    let done = {
        let mut g = lock(&GROUPS);
        let Some(map) = g.as_mut() else { return };
        let Some(e) = map.get_mut(&key) else { return };
        e.outstanding = e.outstanding.saturating_sub(1);
        if start != 0 && end >= start {
            e.start = if e.start == 0 { start } else { e.start.min(start) };
            e.end = e.end.max(end);
        }
        if e.outstanding == 0 && e.closed { map.remove(&key) } else { None }
    };
    if let Some(e) = done {
        emit_group(correlation, e);
    }
}

fn emit_group(correlation: u64, e: Group) {
    OPEN_GROUPS.fetch_sub(1, Ordering::Relaxed);
    if e.unreported {
        return;
    }
    let (start, end) = (e.start, e.end);
    e.command.with_payload(e.queue, e.device, (start, end), |kind, op, payload| {
        emit_activity_interned(kind, op, correlation, start, end, payload)
    });
}

/// The enclosing call with correlation `correlation` is over (its thread made an OpenCL call
/// outside it): its groups are delivered as soon as their commands completed (now, if they
/// did), unless the enclosing backend reported no command of the group's kind in that call.
pub(crate) fn close_outer(correlation: u64) {
    if OPEN_GROUPS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let done: Vec<Group> = {
        let mut g = lock(&GROUPS);
        let Some(map) = g.as_mut() else { return };
        let mut out = Vec::new();
        for k in 0..4u8 {
            let key = (correlation, k);
            if let Some(e) = map.get_mut(&key) {
                e.closed = true;
                // On the call's thread, after the call: did its backend report this command?
                e.unreported = !offtrace_core::reported_in_call(correlation, e.command.kind_op().0);
                if e.outstanding == 0
                    && let Some(e) = map.remove(&key)
                {
                    out.push(e);
                }
            }
        }
        out
    };
    for e in done {
        emit_group(correlation, e);
    }
}

/// The enclosing backend reported a command of `kind` in the call `correlation` (on the call's
/// thread, at the end of the call, after its nested OpenCL calls: `offtrace_core::set_reported_hook`).
/// That call's group of this kind is complete as far as enqueues go: it is delivered as soon as
/// its commands completed (now, if they did). Without this a group waited for its thread's next
/// OpenCL call outside the call (`close_outer`), which a runtime worker thread may never make:
/// its last command then got its times only at the layer's finish, after the agent's trace ended.
pub(crate) fn on_reported(correlation: u64, kind: Kind) {
    // Relaxed: a group is opened on this same thread, earlier in the call being reported.
    if OPEN_GROUPS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let index = match kind {
        Kind::KernelDispatch => 0,
        Kind::MemoryCopy => 1,
        Kind::MemoryFill => 2,
        Kind::Sync => 3,
        _ => return,
    };
    let done = {
        let mut g = lock(&GROUPS);
        let Some(map) = g.as_mut() else { return };
        let key = (correlation, index);
        match map.get_mut(&key) {
            Some(e) => {
                e.closed = true;
                e.unreported = false;
                if e.outstanding == 0 { map.remove(&key) } else { None }
            }
            None => None,
        }
    };
    if let Some(e) = done {
        emit_group(correlation, e);
    }
}

/// Whether the reported hook is the layer's (`on_reported`): then a group still open at the end
/// is one its enclosing backend never reported.
pub(crate) static REPORTED_HOOKED: AtomicBool = AtomicBool::new(false);

/// At the end: every group, with what arrived (not those no backend reported, when the layer
/// is told of the reports).
fn flush_groups() {
    let all: Vec<((u64, u8), Group)> = lock(&GROUPS).take().map(|m| m.into_iter().collect()).unwrap_or_default();
    // Relaxed: set once at initialisation, long before the end.
    let hooked = REPORTED_HOOKED.load(Ordering::Relaxed);
    for ((correlation, _), mut e) in all {
        if hooked && !e.closed {
            e.unreported = true;
        }
        emit_group(correlation, e);
    }
}

/// Reports the out-of-order commands whose events are final (their device times, their activity
/// record) and drops the layer's reference of each; the others stay. On the harvest thread, and
/// once more when it stops; never on the program's thread (one status query per outstanding
/// command). Returns how many it reported.
pub(crate) fn poll_unordered() -> usize {
    poll_unordered_upto(POLL_PER_ROUND)
}

/// The last poll, when the harvest thread stops (at exit, before the runtime's exit handlers):
/// every outstanding command, not a round's 1,024. A program that ends right after its
/// `clFinish` leaves all its out-of-order commands to this poll (20,000 kernels: on PoCL 5,764
/// of them were reported without device times while it polled 1,024).
pub(crate) fn poll_unordered_at_stop() -> usize {
    poll_unordered_upto(usize::MAX)
}

fn poll_unordered_upto(limit: usize) -> usize {
    // Relaxed: a hint (see `UNORDERED_WAITING`).
    if !UNORDERED_WAITING.load(Ordering::Relaxed) {
        return 0;
    }
    let mut batch = {
        let mut u = lock(&UNORDERED);
        UNORDERED_WAITING.store(false, Ordering::Relaxed);
        std::mem::take(&mut *u)
    };
    // A bounded round: the rest waits for the next, behind what this round polled.
    let unpolled = batch.split_off(batch.len().min(limit));
    let release = next().clReleaseEvent;
    let mut waiting = Vec::new();
    let mut reported = 0;
    let mut cached = crate::calibration::Cached::default();
    for p in batch {
        let event = p.event;
        let status = match crate::in_order::execution_status(event) {
            Some(s) if s <= CL_COMPLETE => s,
            _ => {
                waiting.push(p);
                continue;
            }
        };
        if !complete(&p, event as *mut c_void, status, None, &mut cached) {
            waiting.push(p);
            continue;
        }
        reported += 1;
        if let Some(release) = release {
            // SAFETY: the layer held one reference of the event, and this is not inside a
            // runtime callback.
            #[allow(unsafe_code)]
            unsafe {
                release(event as *mut c_void)
            };
        }
    }
    if !waiting.is_empty() || !unpolled.is_empty() {
        let mut u = lock(&UNORDERED);
        let arrived = std::mem::replace(&mut *u, unpolled);
        u.extend(waiting);
        u.extend(arrived);
        UNORDERED_WAITING.store(true, Ordering::Relaxed);
    }
    reported
}

/// The most out-of-order commands one harvest round asks about (a status query each): a program
/// with many commands outstanding costs the harvest thread a bounded round, and its commands are
/// reported over several rounds.
const POLL_PER_ROUND: usize = 1024;

/// Drops the layer's references of completed commands' events (outside the runtime's callbacks).
pub(crate) fn drain_releases() {
    let events = {
        let mut r = lock(&RELEASES);
        RELEASES_WAITING.store(false, Ordering::Relaxed);
        if r.is_empty() {
            return;
        }
        std::mem::take(&mut *r)
    };
    if let Some(release) = next().clReleaseEvent {
        for ev in events {
            // SAFETY: the layer holds one reference of each event in the list.
            #[allow(unsafe_code)]
            unsafe {
                release(ev as *mut c_void)
            };
        }
    }
}

/// At exit: reports every command whose completion never arrived, releases what the layer holds.
pub(crate) fn finish() {
    if FINISHED.swap(true, Ordering::AcqRel) {
        return;
    }
    // First: the harvest thread stops (a last poll of the out-of-order commands, while the
    // runtime may still be called); what is left was never completed, or completed too late.
    let mut left = crate::in_order::stop();
    left.extend(lock(&PENDING).take().map(|m| m.into_values()).into_iter().flatten());
    left.extend(std::mem::take(&mut *lock(&UNORDERED)));
    for p in left {
        INCOMPLETE.fetch_add(1, Ordering::Relaxed);
        if p.nested {
            group_complete(p.correlation, &p.command, (0, 0));
            continue;
        }
        p.command.with_payload(p.queue, p.device, (0, 0), |kind, op, payload| {
            emit_activity_interned(kind, op, p.correlation, 0, 0, payload)
        });
    }
    flush_groups();
    // The runtime may already be torn down at exit: the remaining references are left to the
    // process's end rather than released into a runtime that is gone.
    lock(&RELEASES).clear();
}

/// Files `p` in the unordered list as a submission on an out-of-order queue does (tests).
#[cfg(test)]
pub(crate) fn file_unordered_for_test(p: Pending) {
    lock(&UNORDERED).push(p);
    UNORDERED_WAITING.store(true, Ordering::Relaxed);
}

/// Commands still waiting for their completion (tests).
pub fn pending_count() -> usize {
    lock(&PENDING).as_ref().map_or(0, |m| m.len()) + lock(&UNORDERED).len() + crate::in_order::outstanding() as usize
}

#[allow(dead_code)]
fn _assert_send() {
    fn s<T: Send>() {}
    s::<Pending>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_or_reversed_profiling_values_are_no_device_interval() {
        assert_eq!(device_interval(Some(10), Some(25)), Some((10, 25)));
        assert_eq!(device_interval(Some(10), Some(10)), Some((10, 10)));
        assert_eq!(device_interval(Some(0), Some(0)), None, "NVIDIA's markers and barriers");
        assert_eq!(device_interval(Some(0), Some(25)), None);
        assert_eq!(device_interval(Some(30), Some(25)), None);
        assert_eq!(device_interval(None, Some(25)), None);
        assert_eq!(device_interval(Some(10), None), None);
    }
    use offtrace_core::{ApiCallPayload, Phase, configure_callback_tracing_closure, create_context, start_context};

    /// An unmap gets the bytes of the map that returned its pointer, once per map; a failed map
    /// (null) and a pointer never mapped give 0.
    #[test]
    fn an_unmap_carries_the_bytes_its_map_covered() {
        // Addresses of this test alone (the table is process-wide; other tests map none).
        let (a, b) = (0x7e57_0000_1000, 0x7e57_0000_2000);
        assert_eq!(mapping(a, 4096), 4096);
        assert_eq!(mapping(0, 512), 512, "a failed map still reports its size");
        assert_eq!(unmapping(0), 0);
        assert_eq!(unmapping(b), 0, "never mapped");
        // The same region mapped twice: the same pointer, unmapped twice.
        assert_eq!(mapping(a, 4096), 4096);
        assert_eq!(unmapping(a), 4096);
        assert_eq!(unmapping(a), 4096);
        assert_eq!(unmapping(a), 0, "each map is unmapped once");
    }

    fn copy(size: u64) -> Command {
        Command::Copy {
            op: 0,
            dst: 0x2000,
            src: 0x1000,
            size,
            direction: CopyDirection::HostToDevice,
            src_type: MemoryType::Host,
            dst_type: MemoryType::Device,
        }
    }

    /// An enclosing (UR-like) call; `report`: its backend reports the copy at enqueue.
    fn enclosing_call(report: bool, inside: impl FnOnce(u64)) -> u64 {
        let p = ApiCallPayload::new(1, &[]);
        let token = offtrace_core::emit_enter(Kind::UrApi, 1, Payload::api(Kind::UrApi, &p));
        let corr = token.correlation_id();
        assert_ne!(corr, 0);
        inside(corr);
        if report {
            copy(300).with_payload(0x50, 0xd1, (0, 0), |k, op, p| offtrace_core::emit_instant(k, op, Phase::None, p));
        }
        offtrace_core::emit_exit(token, Payload::api(Kind::UrApi, &p));
        corr
    }

    type Got = Vec<(u64, u64, u64, u64)>;

    /// The collected completions of the calls `calls` (correlation ids, unique in the process),
    /// in the order they came. The services and the layer's group table are process-wide and
    /// plain `cargo test` runs these tests as threads of one process: every started context
    /// sees every test's copies, so each test looks at its own calls only.
    fn of(got: &Mutex<Got>, calls: &[u64]) -> Got {
        lock(got).iter().copied().filter(|c| calls.contains(&c.0)).collect()
    }

    /// Held by each test that opens groups: `OPEN_GROUPS` counts the process's groups, and
    /// each such test checks that it comes back to 0 (a group emitted twice or never would
    /// leave it off), which holds only while no other test has a group open.
    static OPENS_GROUPS: Mutex<()> = Mutex::new(());

    /// Groups of the call `correlation` still in the layer's table (any kind).
    fn groups_left(correlation: u64) -> usize {
        lock(&GROUPS).as_ref().map_or(0, |m| m.keys().filter(|k| k.0 == correlation).count())
    }

    /// A started context that collects the COMPLETE copies: (correlation, start, end, bytes).
    fn completed_copies() -> Arc<Mutex<Got>> {
        let got: Arc<Mutex<Got>> = Arc::default();
        let ctx = create_context().expect("context");
        configure_callback_tracing_closure(ctx, Kind::UrApi, None, |_, _| {}).expect("ur");
        let g = got.clone();
        configure_callback_tracing_closure(ctx, Kind::MemoryCopy, None, move |r, _| {
            if r.phase == Phase::Complete as u32 {
                // SAFETY: MEMORY_COPY records carry a MemoryCopyPayload, valid during the call.
                #[allow(unsafe_code)]
                let p = unsafe { &*(r.payload as *const MemoryCopyPayload) };
                lock(&g).push((r.correlation_id.internal, p.device_start, p.device_end, p.size));
            }
        })
        .expect("copy");
        start_context(ctx).expect("start");
        got
    }

    /// A UR call on a thread that makes no OpenCL call after it (a runtime worker thread, or a
    /// program's thread that enqueues once): the command's device times are delivered as soon
    /// as the enclosing backend reported the command and the command completed, whichever
    /// comes last, not at the layer's finish (which on the SYCL path comes after the trace
    /// ended).
    #[test]
    fn a_command_whose_thread_makes_no_further_opencl_call_gets_its_device_times() {
        let _serial = lock(&OPENS_GROUPS);
        let _ = offtrace_core::set_reported_hook(on_reported);
        let got = completed_copies();
        // Completed after the report (a command still running when its enqueue returned).
        let corr = std::thread::spawn(|| enclosing_call(true, |corr| group_open(corr, &copy(64), 0x50, 0xd1)))
            .join()
            .expect("thread");
        assert!(of(&got, &[corr]).is_empty(), "nothing before the command completed");
        group_complete(corr, &copy(64), (5_000, 5_100));
        assert_eq!(of(&got, &[corr]), vec![(corr, 5_000, 5_100, 64)]);
        // Completed before the report (a blocking copy).
        let blocking = std::thread::spawn(|| {
            enclosing_call(true, |corr| {
                group_open(corr, &copy(32), 0x50, 0xd1);
                group_complete(corr, &copy(32), (6_000, 6_050));
            })
        })
        .join()
        .expect("thread");
        assert_eq!(of(&got, &[corr, blocking]), vec![(corr, 5_000, 5_100, 64), (blocking, 6_000, 6_050, 32)]);
        assert_eq!(groups_left(corr) + groups_left(blocking), 0);
        assert_eq!(OPEN_GROUPS.load(Ordering::Relaxed), 0);
    }

    /// The answer the enclosing backend gets at the end of its call
    /// (`offtrace_core::times_delivered_below`): yes for
    /// the kinds the layer opened a group for in that call, on that thread; no for another
    /// kind, another call, or another thread.
    #[test]
    fn the_layer_claims_the_device_times_of_the_commands_it_grouped() {
        let _serial = lock(&OPENS_GROUPS);
        let _got = completed_copies();
        let corr = enclosing_call(true, |corr| {
            assert!(!offtrace_core::times_delivered_below(corr, Kind::MemoryCopy), "nothing before the nested enqueue");
            group_open(corr, &copy(64), 0x50, 0xd1);
            assert!(offtrace_core::times_delivered_below(corr, Kind::MemoryCopy));
            assert!(!offtrace_core::times_delivered_below(corr, Kind::KernelDispatch), "another kind");
            assert!(!offtrace_core::times_delivered_below(corr + 1, Kind::MemoryCopy), "another call");
            let elsewhere =
                std::thread::spawn(move || offtrace_core::times_delivered_below(corr, Kind::MemoryCopy)).join();
            assert_eq!(elsewhere.ok(), Some(false), "another thread");
            group_complete(corr, &copy(64), (1, 2));
        });
        let next = enclosing_call(true, |next| {
            group_open(next, &copy(8), 0x50, 0xd1);
            group_complete(next, &copy(8), (3, 4));
        });
        assert!(offtrace_core::times_delivered_below(next, Kind::MemoryCopy));
        assert!(!offtrace_core::times_delivered_below(corr, Kind::MemoryCopy), "the thread's last call only");
        // The thread's next call outside them ends both (when no reported hook did): nothing of
        // this test stays open for the next one.
        close_outer(corr);
        close_outer(next);
        assert_eq!(groups_left(corr) + groups_left(next), 0);
        assert_eq!(OPEN_GROUPS.load(Ordering::Relaxed), 0);
    }

    /// One UR call issuing two OpenCL copies: one completion, after the call is over and both
    /// parts completed, with the union of their intervals and their bytes; a UR call whose
    /// backend reported no command gets no completion from the layer. The same with or without
    /// the layer's reported hook (installed once per process, by whichever test comes first):
    /// the hook closes a reported group at its report, `close_outer` at the thread's next call.
    #[test]
    fn a_command_split_in_parts_is_completed_once_with_the_union_of_their_intervals() {
        let _serial = lock(&OPENS_GROUPS);
        let got = completed_copies();

        let corr = enclosing_call(true, |corr| {
            group_open(corr, &copy(100), 0x50, 0xd1);
            group_open(corr, &copy(200), 0x50, 0xd1);
            group_complete(corr, &copy(100), (1_000, 1_100));
        });
        assert!(of(&got, &[corr]).is_empty(), "nothing before the call is over");
        close_outer(corr);
        assert!(of(&got, &[corr]).is_empty(), "nothing while a part is outstanding");
        group_complete(corr, &copy(200), (1_050, 1_300));
        assert_eq!(of(&got, &[corr]), vec![(corr, 1_000, 1_300, 300)]);

        let other = enclosing_call(false, |corr| {
            group_open(corr, &copy(64), 0x50, 0xd1);
            group_complete(corr, &copy(64), (2_000, 2_100));
        });
        close_outer(other);
        assert_eq!(
            of(&got, &[corr, other]),
            vec![(corr, 1_000, 1_300, 300)],
            "no completion of a command its backend did not report"
        );
        assert_eq!(groups_left(corr) + groups_left(other), 0, "both calls' groups are gone");
        assert_eq!(OPEN_GROUPS.load(Ordering::Relaxed), 0);
    }
}
