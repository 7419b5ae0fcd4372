//! The SYCL/UR backend of the tracing services: XPTI notifications → service records.
//!
//! Every notification goes through here, and only through here: [`on_notification`] emits it
//! as a raw `XPTI` record (the recorder of `offtrace record` is a client of that kind, see
//! `trace_client.rs`), then maps it to the typed kinds below.
//!
//! At the first `xptiTraceInit` the agent calls [`init`]: it registers the `UR_API` operation
//! table (from `offtrace_xpti_abi::ur`, with argument descriptors), loads the tools named in
//! `OFFTRACE_TOOLS` (`offtrace record --tool`), and switches the bridge on if one loaded (or
//! `OFFTRACE_SERVICES=1`, for in-process users). Mapping (details in `docs/services.md`):
//!
//! | notification | service record |
//! |---|---|
//! | `ur.call` begin / end | `UR_API` enter / exit: raw argument values, result at exit |
//! | `urUSM{Host,Device,Shared}Alloc` end, `urUSMFree` begin | `MEMORY_ALLOC` alloc / free + live table |
//! | `urEnqueueKernelLaunchWithArgsExp` end | `KERNEL_DISPATCH` (name from `urKernelCreate`/`urKernelGetInfo`, else the SYCL task) |
//! | `urEnqueueUSMMemcpy`, `urEnqueueMemBuffer{Read,Write,Copy}` end | `MEMORY_COPY` |
//! | `urEnqueueUSMFill`, `urEnqueueMemBufferFill` end | `MEMORY_FILL` |
//! | `urEnqueueEventsWaitWithBarrier[Ext]` end | `SYNC` barrier |
//! | `urProgramCreate*`/`Link`, `urProgramBuild*`/`Compile`, `urKernelCreate*` end; last `*Release` end | `CODE_OBJECT` load / unload |
//! | sycl `queue_create` / `queue_destroy` | `SYCL_QUEUE` |
//! | sycl `node_create`, `edge_create`, `signal`; `task_begin` / `task_end` | `TASK_GRAPH` instants; task enter / exit (queue, names, ids: its `graph` module) |
//! | `urEnqueue*` end inside a task | `TASK_GRAPH` edges from its wait list, its event |
//! | sycl `queue_create`, `node_create` metadata; `urQueueCreate`, `urDeviceGetInfo` end | `DEVICE` ([`crate::devices`]) |
//! | sycl `wait_begin` / `wait_end`, `barrier_begin` / `barrier_end` | `SYNC` enter / exit |
//! | without UR calls: `mem_alloc_end` / `mem_release_begin` (USM) | `MEMORY_ALLOC` (HOST or UNKNOWN) |
//! | without UR calls: sycl `task_end` of a kernel command group | `KERNEL_DISPATCH` (VERBOSE `arg<N>` values) |
//!
//! Records of other kinds emitted inside a UR call are emitted before its exit, so they carry
//! the UR call's correlation id. Enter/exit pairs are kept per thread, keyed by the XPTI
//! `instance` (identical for begin and end, docs/reference/sycl-runtime.md §7); the services themselves deliver
//! at most 64 open calls per thread, and [`MAX_OPEN`] matches.
//!
//! Cost: with no context listening, [`on_notification`] is two relaxed loads and branches.

#![allow(unsafe_code)] // reads the runtime's callback arguments (params structs, events)

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{OnceLock, RwLock};

use offtrace::XptiPayload;
use offtrace_core::{
    ApiCallPayload, ArgDescriptor, ArgFormat, CallToken, CodeObjectPayload, Generation, GenerationCounter,
    KernelDispatchPayload, Kind, MAX_KERNEL_ARGS, Memo, MemoryAllocPayload, MemoryCopyPayload, MemoryFillPayload,
    MemoryType, Operation, Payload, Phase, QueuePayload, RawPayload, SyncPayload, TaskGraphPayload, code_object,
    direct_path_applies, emit_activity, emit_enter, emit_enter_with, emit_exit, emit_exit_at, emit_instant,
    emit_instant_at, emit_instant_with, emit_memory_alloc, emit_memory_free, kernel_dispatch, kind_enabled,
    memory_copy, memory_fill, queue_flags, register_kind_operations, sycl_queue, sync_op, task_graph, timestamp_ns,
};
use offtrace_xpti_abi::abi::{
    FunctionWithArgs, TraceEventData, XPTI_RESULT_SUCCESS, event_flags, metadata_type, trace_type as tt,
};
use offtrace_xpti_abi::ur::{self, ParamKind};

use crate::decode::{Raw, StreamKind};
use crate::dispatcher::Dispatcher;
use crate::safe_read;

/// Open calls (UR calls, tasks, waits) kept per thread; deeper ones are not paired.
pub const MAX_OPEN: usize = 64;

/// Whether any tool listens: the only thing the disabled path reads.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static DISPATCHER: OnceLock<Dispatcher> = OnceLock::new();
/// A `ur.call` notification arrived: UR calls drive allocations and dispatches. Until one does
/// (no `UR_LAYER_TRACING`, or `OFFTRACE_UR_CALLS=0`) the SYCL streams stand in for them.
static UR_SEEN: AtomicBool = AtomicBool::new(false);

/// `ur_function_t` values, generated from `ur_api.h` (`offtrace_xpti_abi::ur::id`).
use offtrace_xpti_abi::ur::id as urf;

/// How an argument of a UR parameter is formatted by argument iteration.
fn arg_format(p: &ur::Param) -> ArgFormat {
    match p.kind {
        ParamKind::Enum => ArgFormat::Enum,
        ParamKind::Value if p.c_type == "bool" => ArgFormat::Bool,
        ParamKind::Value if p.c_type.starts_with("int") => ArgFormat::Signed,
        ParamKind::Value if p.c_type.ends_with("_flags_t") => ArgFormat::Hex,
        ParamKind::Value => ArgFormat::Unsigned,
        ParamKind::Pointer if p.c_type == "const char *" => ArgFormat::CString,
        ParamKind::Handle | ParamKind::Pointer | ParamKind::OutPointer => ArgFormat::Pointer,
    }
}

/// The `UR_API` operation table, built once and leaked (it lives for the process).
pub fn ur_operations() -> &'static [Operation] {
    static OPS: OnceLock<&'static [Operation]> = OnceLock::new();
    OPS.get_or_init(|| {
        let ops: Vec<Operation> = ur::FUNCTIONS
            .iter()
            .map(|f| Operation {
                id: f.id,
                name: f.name,
                args: Box::leak(
                    f.params
                        .iter()
                        .map(|p| ArgDescriptor {
                            name: p.name,
                            type_name: p.c_type,
                            size: p.size,
                            format: arg_format(p),
                        })
                        .collect::<Vec<_>>()
                        .into_boxed_slice(),
                ),
            })
            .collect();
        Box::leak(ops.into_boxed_slice())
    })
}

/// Registers the `UR_API` operations, loads the tools and switches the bridge on when one
/// loaded. Called from every `xptiTraceInit`; only the first call does anything, and a call
/// made while it runs (a tool whose `initialize` uses the runtime) returns at once instead of
/// waiting on itself.
pub fn init(dispatcher: Dispatcher) {
    static STARTED: AtomicBool = AtomicBool::new(false);
    // Relaxed: only which caller wins matters; what it sets up is published by `ACTIVE`.
    if !STARTED.swap(true, Ordering::Relaxed) {
        init_once(dispatcher);
    }
}

#[cold]
#[inline(never)]
fn init_once(dispatcher: Dispatcher) {
    let _ = DISPATCHER.set(dispatcher);
    // AlreadyRegistered is fine: an embedder registered the same table first.
    let _ = register_kind_operations(Kind::UrApi, ur_operations());
    let forced = std::env::var("OFFTRACE_SERVICES").is_ok_and(|v| v.trim() == "1");
    let loaded = match offtrace::tools::load_tools_from_env() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("offtrace: {e}");
            offtrace::tools::loaded_tools().len()
        }
    };
    // Relaxed: a hint read by the trampoline; tools configured their contexts before this
    // store, and delivery itself re-checks each context with SeqCst. Never switched off here:
    // the recorder may have switched it on (`trace_client`).
    if forced || loaded > 0 {
        ACTIVE.store(true, Ordering::Relaxed);
    }
}

/// Switches the bridge on or off (for embedders and tests that create contexts in-process).
pub fn set_active(on: bool) {
    ACTIVE.store(on, Ordering::Relaxed);
}

/// Finalises the loaded tools (before the end of the trace). Idempotent.
#[cold]
pub fn finish() {
    offtrace::tools::finalize_tools();
}

/// Hands one notification to the services: as a raw `XPTI` record (when a context wants the
/// kind: the recorder of `offtrace record` always does), then mapped to the typed kinds (when
/// the bridge is on). Disabled path: two relaxed loads.
///
/// # Safety
///
/// `raw` holds the arguments of a live XPTI callback of a stream of `kind`, valid for the
/// duration of the call: `parent` and `event` null or valid `trace_event_data_t`s, `user_data`
/// null or what the runtime passes for that stream and trace type (a `function_with_args_t` for
/// `ur.call` function_with_args notifications, whose `args_data` is the function's params
/// struct). The bridge reads through these pointers (arguments, outputs, metadata).
#[inline(always)]
pub unsafe fn on_notification(kind: StreamKind, stream: u8, stream_name: &'static CStr, raw: &Raw) {
    // The fields one by one (registers): copying `raw` as a block reads it with 16-byte loads
    // over its 8-byte stores, a store-forwarding stall per notification.
    emit_raw(
        kind,
        stream,
        stream_name,
        raw.trace_type,
        raw.parent as u64,
        raw.event as u64,
        raw.instance,
        raw.user_data as u64,
    );
    // Relaxed: see `init`.
    if ACTIVE.load(Ordering::Relaxed) {
        // SAFETY: `raw` holds the arguments of the live callback the trampoline is running.
        unsafe { dispatch(kind, raw) }
    }
}

/// The `XPTI` record of a notification; the payload is built only when a context wants the
/// kind (`emit_instant_with`: one load of its mask for the test and the delivery).
/// Inlined into the trampoline: its arguments stay in registers (as a call, two of them go
/// through the stack and come back with one 16-byte load over two 8-byte stores: a stall).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn emit_raw(
    kind: StreamKind,
    stream: u8,
    stream_name: &'static CStr,
    trace_type: u16,
    parent: u64,
    event: u64,
    instance: u64,
    user_data: u64,
) {
    let build = || XptiPayload {
        stream: stream_name.as_ptr(),
        stream_id: u64::from(stream),
        parent,
        event,
        instance,
        user_data,
        trace_type: u32::from(trace_type),
        stream_class: kind.class(),
    };
    emit_instant_with(Kind::Xpti, u32::from(trace_type), Phase::None, build, |p| {
        Payload::Raw(RawPayload((p as *const XptiPayload).cast()))
    });
}

/// Inlined into each trampoline, where `kind` is a constant: the `match` folds to the stream's
/// arm, and a UR call that nothing wants (the recorder alone, say) returns after a few loads
/// without a call (as an out-of-line function, its prologue and epilogue alone were 15
/// instructions per notification, the `match` 11 more).
#[inline(always)]
unsafe fn dispatch(kind: StreamKind, raw: &Raw) {
    // SAFETY (all arms): forwarded from `on_notification`.
    unsafe {
        match (kind, raw.trace_type) {
            (StreamKind::UrCall, tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_WITH_ARGS_END)
                if !raw.user_data.is_null() =>
            {
                let end = raw.trace_type == tt::FUNCTION_WITH_ARGS_END;
                if ur_call_wanted(raw, end) {
                    // The two fields it needs, in registers: as `&Raw`, every `ur.call`
                    // trampoline stored the whole `Raw` to its stack first.
                    ur_call(raw.user_data.cast(), raw.instance, end);
                }
            }
            (StreamKind::Sycl, _) => sycl(raw),
            (StreamKind::MemAlloc, tt::MEM_ALLOC_END | tt::MEM_RELEASE_BEGIN) if !UR_SEEN.load(Ordering::Relaxed) => {
                usm_without_ur(raw);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Per-thread state

/// What an open entry pairs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenTag {
    UrCall,
    Task,
    Wait,
    Barrier,
}

/// This thread's open calls, innermost last: plain cells, no borrow flag to set and clear. Only
/// this thread touches them and nothing here calls out while an entry is half-written, so a
/// re-entered callback sees a consistent stack. The tag and instance are read in place; the
/// token (not `Copy`: each is closed once) is taken out only when its entry ends.
struct OpenCalls {
    len: Cell<usize>,
    tags: [Cell<(OpenTag, u64)>; MAX_OPEN],
    tokens: [Cell<Option<CallToken>>; MAX_OPEN],
}

/// Longest kernel or task-graph node name kept (NUL included): the longest a record carries, so
/// a name reaches the trace whole up to the record's own limit (dpnp's kernel names run past
/// 300 bytes and read the same at either end: cut, two differ only in what was cut).
const NAME_CAP: usize = offtrace_core::MAX_RECORD_STRING + 1;

/// The SYCL task (command group) open on this thread: its kernel name, for the dispatch the
/// UR launch inside it reports.
struct PendingTask {
    instance: Cell<u64>,
    /// The task's event (live until its `task_end`): its metadata is read only when needed.
    event: Cell<*const TraceEventData>,
    /// `name` and `args` hold the event's metadata.
    resolved: Cell<bool>,
    name: RefCell<[u8; NAME_CAP]>,
    /// A UR launch inside this task reported the dispatch.
    dispatched: Cell<bool>,
    /// Without UR calls: the task's VERBOSE `arg<N>` values and global size.
    args: RefCell<([u64; MAX_KERNEL_ARGS], u32, [u64; 3])>,
}

/// This thread's state in the bridge, all of it: the open calls, the open task, the memos of
/// the shared tables, the metadata key cache and the task graph's held node. One thread-local,
/// reached once per notification through core's thread-pointer cache ([`bridge_thread`]) and
/// passed down: in a shared object (how applications load the agent) each thread-local access
/// is a `__tls_get_addr` call, and the bridge made 4 per UR pair and 14 per SYCL command when
/// each part was a thread-local of its own (`docs/history/overhead-agent-rounds-to-s11.md`).
struct BridgeThread {
    open: OpenCalls,
    task: PendingTask,
    /// This thread's last queues: a thread usually enqueues to one or two.
    queue_memo: Memo<u64, (u64, bool), 2>,
    /// This thread's last SYCL queue ids: a thread usually submits to one or two queues.
    queue_id_memo: Memo<u64, u64, 2>,
    /// Metadata key ids already named.
    keys: KeyCache,
    graph: graph::GraphThread,
}

thread_local! {
    // Const-initialised, no destructor (checked below): usable on runtime threads that outlive
    // `main`, and its address is valid for the thread's whole life (what `bridge_thread` keeps).
    static BRIDGE: BridgeThread = const {
        BridgeThread {
            open: OpenCalls {
                len: Cell::new(0),
                tags: [const { Cell::new((OpenTag::UrCall, 0)) }; MAX_OPEN],
                tokens: [const { Cell::new(None) }; MAX_OPEN],
            },
            task: PendingTask {
                instance: Cell::new(0),
                event: Cell::new(std::ptr::null()),
                resolved: Cell::new(false),
                name: RefCell::new([0; NAME_CAP]),
                dispatched: Cell::new(false),
                args: RefCell::new(([0; MAX_KERNEL_ARGS], 0, [0; 3])),
            },
            queue_memo: Memo::new(0, (0, false)),
            queue_id_memo: Memo::new(0, 0),
            keys: [const { Cell::new((0, Key::Other)) }; 32],
            graph: graph::GraphThread::new(),
        }
    };
}

const _: () = assert!(!std::mem::needs_drop::<BridgeThread>(), "BRIDGE must stay destructor-free");

/// The calling thread's [`BridgeThread`]: its address is kept in the thread's backend word
/// (`offtrace_core::backend_thread_word`, read through the thread-pointer cache: no call); the
/// thread-local itself is read once per thread, at its first notification.
#[inline(always)]
fn bridge_thread() -> &'static BridgeThread {
    let word = offtrace_core::backend_thread_word();
    match word.get() {
        0 => bridge_thread_slow(word),
        // SAFETY: only `bridge_thread_slow` stores into the word: the address of this thread's
        // `BRIDGE` (the word is this thread's own), const-initialised and destructor-free, so
        // valid for the thread's whole life; `BridgeThread` is `!Sync` (cells), so the
        // reference stays on this thread. A fork child's thread is the forking thread, at the
        // same addresses.
        p => unsafe { &*(p as *const BridgeThread) },
    }
}

#[cold]
#[inline(never)]
fn bridge_thread_slow(word: &offtrace_core::DirectThreadWord) -> &'static BridgeThread {
    let p = BRIDGE.with(|b| b as *const BridgeThread);
    word.set(p as usize);
    // SAFETY: as in `bridge_thread`: this thread's destructor-free `BRIDGE`.
    unsafe { &*p }
}

fn push_open(bt: &BridgeThread, tag: OpenTag, instance: u64, token: CallToken) {
    if !token.is_delivered() {
        return;
    }
    let o = &bt.open;
    let i = o.len.get();
    match (o.tags.get(i), o.tokens.get(i)) {
        (Some(t), Some(slot)) => {
            t.set((tag, instance));
            slot.set(Some(token));
            o.len.set(i + 1);
        }
        // Too deep: close the call now so the pair stays intact.
        _ => emit_exit(token, Payload::None),
    }
}

/// The token of the open entry (tag, instance), removed; normally the top.
fn pop_open(bt: &BridgeThread, tag: OpenTag, instance: u64) -> Option<CallToken> {
    let o = &bt.open;
    let n = o.len.get().min(MAX_OPEN);
    // The usual case: the call that ends is the innermost open one.
    let i = (0..n).rev().find(|&i| o.tags[i].get() == (tag, instance))?;
    let token = o.tokens[i].take();
    for j in i..n - 1 {
        o.tags[j].set(o.tags[j + 1].get());
        o.tokens[j].set(o.tokens[j + 1].take());
    }
    o.len.set(n - 1);
    token
}

// ---------------------------------------------------------------------------------------------
// UR calls

/// Per `ur_function_t`: 0 = not checked, 1 = the runtime's name matches the table, 2 = not.
static VERIFIED: [AtomicU8; ur::MAX_FUNCTION_ID as usize + 1] =
    [const { AtomicU8::new(0) }; ur::MAX_FUNCTION_ID as usize + 1];

/// The table entry for this call, if the runtime's function name matches it (the params struct
/// layout is only known for a matching function).
///
/// # Safety
/// `f.function_name` is null or a NUL-terminated string valid during the callback.
unsafe fn verified_function(f: &FunctionWithArgs) -> Option<&'static ur::Function> {
    let func = ur::function(f.function_id)?;
    let slot = &VERIFIED[f.function_id as usize];
    // Relaxed: a cache of a pure function of (id, runtime); a race recomputes the same value.
    match slot.load(Ordering::Relaxed) {
        1 => Some(func),
        2 => None,
        _ => {
            // SAFETY: forwarded from the contract.
            let ok = !f.function_name.is_null()
                && unsafe { CStr::from_ptr(f.function_name) }.to_bytes() == func.name.as_bytes();
            slot.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
            ok.then_some(func)
        }
    }
}

/// Loads `size` bytes (1/2/4/8) at `p`, zero-extended.
///
/// # Safety
/// `p` points to a readable variable of at least `size` bytes.
#[inline(always)]
unsafe fn load_sized(p: *const u8, size: u8) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match size {
            1 => u64::from(*p),
            2 => u64::from(p.cast::<u16>().read_unaligned()),
            4 => u64::from(p.cast::<u32>().read_unaligned()),
            _ => p.cast::<u64>().read_unaligned(),
        }
    }
}

/// Reads the u64 at an output pointer the call wrote (0 for null).
///
/// # Safety
/// `p` is null or points at an 8-byte output variable written by a successful call.
unsafe fn read_out(p: u64) -> u64 {
    if p == 0 {
        return 0;
    }
    // SAFETY: forwarded.
    unsafe { (p as *const u64).read_unaligned() }
}

/// Whether [`ur_call`] has anything to do for this call; notes that UR calls arrive.
///
/// # Safety
/// `raw.user_data` is the `function_with_args_t` of a live `ur.call` notification.
#[inline(always)]
unsafe fn ur_call_wanted(raw: &Raw, end: bool) -> bool {
    if !UR_SEEN.load(Ordering::Relaxed) {
        // Relaxed: a one-way flag; a notification racing with the first store may still take
        // the SYCL-only path once.
        UR_SEEN.store(true, Ordering::Relaxed);
    }
    // SAFETY: contract.
    let id = unsafe { (*raw.user_data.cast::<FunctionWithArgs>()).function_id };
    // Nobody wants `UR_API` records (the recorder alone, say) and the call has no effect on
    // other kinds: skip reading its arguments, unless its begin was delivered (the pair must
    // be closed even when the context stopped in between).
    kind_enabled(Kind::UrApi) || effects_wanted(id) || (end && !no_open_calls()) || graph_wanted(id)
}

/// Whether the task graph wants this call: a `urEnqueue*` (its queue, event and wait list).
#[inline(always)]
fn graph_wanted(id: u32) -> bool {
    kind_enabled(Kind::TaskGraph) && ur::function(id).is_some_and(|f| f.is_enqueue)
}

/// # Safety
/// `f` is the `function_with_args_t` of a live `ur.call` notification with this `instance`.
#[inline(never)]
unsafe fn ur_call(f: *const FunctionWithArgs, instance: u64, end: bool) {
    // SAFETY: contract.
    let f = unsafe { &*f };
    // SAFETY: the runtime passes its function name as a C string.
    let Some(func) = (unsafe { verified_function(f) }) else { return };
    let bt = bridge_thread();
    if !end {
        // The arguments are read only for a consumer of the enter's payload: the recorder alone
        // (the services' direct path) reads only the exit's.
        // SAFETY (both reads): `f` is the live call's, its name verified against `func`.
        let token =
            emit_enter_with(Kind::UrApi, f.function_id, || unsafe { read_args(f, func) }, |p| Payload::UrApi(p));
        push_open(bt, OpenTag::UrCall, instance, token);
        if f.function_id == urf::USM_FREE {
            // SAFETY: as above; the arguments of the live call.
            unsafe { ur_begin_effects(&read_args(f, func)) };
        }
        return;
    }
    // SAFETY: as above.
    let mut p = unsafe { read_args(f, func) };
    let result = if f.ret_data.is_null() {
        XPTI_RESULT_SUCCESS
    } else {
        // SAFETY: at end `ret_data` points to the call's `ur_result_t` (an i32 enum).
        unsafe { f.ret_data.cast::<i32>().read_unaligned() }
    };
    p.result = result;
    p.has_result = 1;
    // One clock reading for the call's end and the device work it reports at its end, where the
    // recorder alone takes them (`offtrace_core::direct_path_applies`); 0: each takes its own.
    let now = if direct_path_applies(Kind::UrApi) { timestamp_ns() } else { 0 };
    if result == 0 {
        // SAFETY: the call succeeded: its output pointers were written, its input pointers
        // are still the caller's live variables.
        unsafe { ur_end_effects(bt, &p, now) };
    }
    if let Some(token) = pop_open(bt, OpenTag::UrCall, instance) {
        emit_exit_at(token, now, Payload::UrApi(&p));
    }
}

/// The call's arguments, raw values masked to their width (its payload without a result).
///
/// # Safety
/// `f` is the `function_with_args_t` of a live `ur.call` notification of `func` (name verified).
#[inline(always)]
unsafe fn read_args(f: &FunctionWithArgs, func: &ur::Function) -> ApiCallPayload {
    // Built in place (inlined into its caller): `ApiCallPayload::new` returns 160 bytes by
    // value, a `memmove` per call.
    let mut p = ApiCallPayload {
        function_id: f.function_id,
        arg_count: 0,
        result: 0,
        has_result: 0,
        args: [0; offtrace_core::MAX_ARGS],
    };
    if !f.args_data.is_null() {
        let params = f.args_data.cast::<*const u8>();
        let n = func.params.len().min(offtrace_core::MAX_ARGS);
        for (i, d) in func.params[..n].iter().enumerate() {
            // SAFETY: `args_data` is the function's `ur_*_params_t` (name verified): one pointer
            // per parameter, in this order, to the caller's variable of `d.size` bytes.
            let ptr = unsafe { params.add(i).read() };
            p.args[i] = if ptr.is_null() { 0 } else { unsafe { load_sized(ptr, d.size) } };
        }
        p.arg_count = n as u32;
    }
    p
}

/// Whether a call of `ur_function_t` `id` feeds a kind some context wants now, beyond `UR_API`
/// (the functions [`ur_begin_effects`], [`ur_end_effects`] and [`code_object_load`] match).
/// The allocation table and the kernel names serve `KERNEL_DISPATCH` (allocation properties,
/// names) as well as `MEMORY_ALLOC` and `CODE_OBJECT`.
#[inline(always)]
fn effects_wanted(id: u32) -> bool {
    let dispatch = || kind_enabled(Kind::KernelDispatch);
    match id {
        urf::USM_FREE | urf::USM_HOST_ALLOC | urf::USM_DEVICE_ALLOC | urf::USM_SHARED_ALLOC => {
            dispatch() || kind_enabled(Kind::MemoryAlloc)
        }
        urf::ENQUEUE_KERNEL_LAUNCH_WITH_ARGS_EXP => dispatch(),
        urf::KERNEL_CREATE | urf::KERNEL_GET_INFO => dispatch() || kind_enabled(Kind::CodeObject),
        urf::ENQUEUE_USM_MEMCPY
        | urf::ENQUEUE_MEM_BUFFER_READ
        | urf::ENQUEUE_MEM_BUFFER_WRITE
        | urf::ENQUEUE_MEM_BUFFER_COPY => kind_enabled(Kind::MemoryCopy),
        urf::ENQUEUE_USM_FILL | urf::ENQUEUE_MEM_BUFFER_FILL => kind_enabled(Kind::MemoryFill),
        urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER | urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER_EXT => kind_enabled(Kind::Sync),
        urf::QUEUE_CREATE | urf::QUEUE_CREATE_WITH_NATIVE_HANDLE => {
            device_activity_wanted() || kind_enabled(Kind::Device)
        }
        urf::DEVICE_GET_INFO => kind_enabled(Kind::Device),
        urf::EVENT_GET_PROFILING_INFO => device_activity_wanted(),
        urf::KERNEL_RETAIN
        | urf::KERNEL_RELEASE
        | urf::PROGRAM_RETAIN
        | urf::PROGRAM_RELEASE
        | urf::KERNEL_CREATE_WITH_NATIVE_HANDLE
        | urf::PROGRAM_CREATE_WITH_IL
        | urf::PROGRAM_CREATE_WITH_BINARY
        | urf::PROGRAM_CREATE_WITH_NATIVE_HANDLE
        | urf::PROGRAM_LINK
        | urf::PROGRAM_LINK_EXP
        | urf::PROGRAM_BUILD
        | urf::PROGRAM_COMPILE
        | urf::PROGRAM_BUILD_EXP
        | urf::PROGRAM_COMPILE_EXP => kind_enabled(Kind::CodeObject),
        _ => false,
    }
}

/// Whether this thread has no open call (UR call, task, wait) whose exit is still due.
fn no_open_calls() -> bool {
    bridge_thread().open.len.get() == 0
}

/// Effects at the start of a call (inside it: records take its correlation id).
///
/// # Safety
/// `p` holds the arguments of the live call.
unsafe fn ur_begin_effects(p: &ApiCallPayload) {
    let a = &p.args;
    if p.function_id == urf::USM_FREE {
        emit_memory_free(a[1]);
    }
}

/// Effects at the end of a successful call, before its exit; the device work it reports is at
/// `now` (0: its own clock reading).
///
/// # Safety
/// `p` holds the arguments of the live call, which succeeded.
unsafe fn ur_end_effects(bt: &BridgeThread, p: &ApiCallPayload, now: u64) {
    let a = &p.args;
    // SAFETY (each read_out / deref): output pointers of a successful call were written;
    // input pointers are the caller's variables, live during the callback.
    unsafe {
        match p.function_id {
            urf::USM_HOST_ALLOC => alloc(read_out(a[4]), a[3], MemoryType::Host, 0),
            urf::USM_DEVICE_ALLOC => alloc(read_out(a[5]), a[4], MemoryType::Device, a[1]),
            urf::USM_SHARED_ALLOC => alloc(read_out(a[5]), a[4], MemoryType::Shared, a[1]),
            urf::ENQUEUE_KERNEL_LAUNCH_WITH_ARGS_EXP if kind_enabled(Kind::KernelDispatch) => kernel_launch(bt, a, now),
            urf::ENQUEUE_USM_MEMCPY if kind_enabled(Kind::MemoryCopy) => {
                let q = queue_info(bt, a[0]);
                let c = copy(q, a[2], a[3], a[4], usm_type(a[3]), usm_type(a[2]));
                emit_instant_at(Kind::MemoryCopy, memory_copy::USM_MEMCPY, Phase::None, now, Payload::MemoryCopy(&c));
                if q.profiling {
                    remember_launch(p, Launch::Copy(memory_copy::USM_MEMCPY, c));
                }
            }
            // (hQueue, hBuffer, blocking, offset, size, pDst/pSrc, ...)
            urf::ENQUEUE_MEM_BUFFER_READ if kind_enabled(Kind::MemoryCopy) => {
                let q = queue_info(bt, a[0]);
                let c = copy(q, a[5], a[1], a[4], MemoryType::Device, usm_type(a[5]));
                emit_instant_at(Kind::MemoryCopy, memory_copy::BUFFER_READ, Phase::None, now, Payload::MemoryCopy(&c));
                if q.profiling {
                    remember_launch(p, Launch::Copy(memory_copy::BUFFER_READ, c));
                }
            }
            urf::ENQUEUE_MEM_BUFFER_WRITE if kind_enabled(Kind::MemoryCopy) => {
                let q = queue_info(bt, a[0]);
                let c = copy(q, a[1], a[5], a[4], usm_type(a[5]), MemoryType::Device);
                emit_instant_at(Kind::MemoryCopy, memory_copy::BUFFER_WRITE, Phase::None, now, Payload::MemoryCopy(&c));
                if q.profiling {
                    remember_launch(p, Launch::Copy(memory_copy::BUFFER_WRITE, c));
                }
            }
            // (hQueue, hBufferSrc, hBufferDst, srcOffset, dstOffset, size, ...)
            urf::ENQUEUE_MEM_BUFFER_COPY if kind_enabled(Kind::MemoryCopy) => {
                let q = queue_info(bt, a[0]);
                let c = copy(q, a[2], a[1], a[5], MemoryType::Device, MemoryType::Device);
                emit_instant_at(Kind::MemoryCopy, memory_copy::BUFFER_COPY, Phase::None, now, Payload::MemoryCopy(&c));
                if q.profiling {
                    remember_launch(p, Launch::Copy(memory_copy::BUFFER_COPY, c));
                }
            }
            // (hQueue, pMem, patternSize, pPattern, size, ...)
            urf::ENQUEUE_USM_FILL if kind_enabled(Kind::MemoryFill) => {
                let q = queue_info(bt, a[0]);
                let f = MemoryFillPayload {
                    queue: a[0],
                    dst: a[1],
                    pattern: pattern(a[3], a[2]),
                    pattern_size: a[2],
                    size: a[4],
                    device: q.device,
                    ..Default::default()
                };
                emit_instant_at(Kind::MemoryFill, memory_fill::USM_FILL, Phase::None, now, Payload::MemoryFill(&f));
                if q.profiling {
                    remember_launch(p, Launch::Fill(memory_fill::USM_FILL, f));
                }
            }
            // (hQueue, hBuffer, pPattern, patternSize, offset, size, ...)
            urf::ENQUEUE_MEM_BUFFER_FILL if kind_enabled(Kind::MemoryFill) => {
                let q = queue_info(bt, a[0]);
                let f = MemoryFillPayload {
                    queue: a[0],
                    dst: a[1],
                    pattern: pattern(a[2], a[3]),
                    pattern_size: a[3],
                    size: a[5],
                    device: q.device,
                    ..Default::default()
                };
                emit_instant_at(Kind::MemoryFill, memory_fill::BUFFER_FILL, Phase::None, now, Payload::MemoryFill(&f));
                if q.profiling {
                    remember_launch(p, Launch::Fill(memory_fill::BUFFER_FILL, f));
                }
            }
            // (hQueue, numEventsInWaitList, ...)
            urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER | urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER_EXT
                if kind_enabled(Kind::Sync) =>
            {
                let wait_count = if p.function_id == urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER { a[1] } else { a[2] };
                let q = queue_info(bt, a[0]);
                let s = SyncPayload {
                    object: a[0],
                    event_count: wait_count as u32,
                    queue: a[0],
                    device: q.device,
                    ..Default::default()
                };
                emit_instant_at(Kind::Sync, sync_op::BARRIER, Phase::None, now, Payload::Sync(&s));
                if q.profiling {
                    remember_launch(p, Launch::Barrier(s));
                }
            }
            // (hContext, hDevice, pProperties, phQueue)
            urf::QUEUE_CREATE => {
                let flags = queue_flags_of(a[2]);
                remember_queue_device(read_out(a[3]), a[1], flags & queue_flags::PROFILING != 0, flags);
                crate::devices::learn_context(a[0], a[1]);
            }
            // (hDevice, propName, propSize, pPropValue, pPropSizeRet): a name or type the
            // runtime or the program asked for, read from the caller's buffer
            urf::DEVICE_GET_INFO if a[3] != 0 => device_info(a[0], a[1], a[2], a[3]),
            // (hNativeQueue, hContext, hDevice, pProperties, phQueue): profiling unknown, assumed
            // (the program's properties unknown: none said)
            urf::QUEUE_CREATE_WITH_NATIVE_HANDLE => remember_queue_device(read_out(a[4]), a[2], true, 0),
            // (hEvent, propName, propSize, pPropValue, pPropSizeRet)
            urf::EVENT_GET_PROFILING_INFO if a[2] >= 8 => profiling_info(a[0], a[1], read_out(a[3])),
            // (hProgram, pKernelName, phKernel)
            urf::KERNEL_CREATE => {
                remember_kernel_name(read_out(a[2]), a[1], MAX_NAME as u64);
                if kind_enabled(Kind::CodeObject) {
                    code_object_load(p);
                }
            }
            // (hKernel, propName, propSize, pPropValue, pPropSizeRet)
            urf::KERNEL_GET_INFO if a[1] == UR_KERNEL_INFO_FUNCTION_NAME && a[2] > 0 => {
                remember_kernel_name(a[0], a[3], a[2])
            }
            // (hKernel) / (hProgram): reference counts of the code objects whose load was reported
            urf::KERNEL_RETAIN | urf::PROGRAM_RETAIN => code_objects::retain(a[0]),
            urf::KERNEL_RELEASE | urf::PROGRAM_RELEASE => code_object_release(p.function_id, a[0]),
            _ if kind_enabled(Kind::CodeObject) => code_object_load(p),
            _ => {}
        }
        // Only inside a SYCL task: an enqueue outside one (a UR program, the runtime's own) has
        // no node to complete.
        if graph_wanted(p.function_id) && graph::task_open(&bt.graph) {
            // The command's name as its device activity has it (kernel, or the operation); the
            // operations' names are static, so no allocation per enqueue.
            let kernel;
            let name: Option<&CStr> = match p.function_id {
                urf::ENQUEUE_KERNEL_LAUNCH_WITH_ARGS_EXP => {
                    kernel = kernel_name(a[1]);
                    kernel.as_deref()
                }
                urf::ENQUEUE_USM_MEMCPY => Some(c"usm_memcpy"),
                urf::ENQUEUE_MEM_BUFFER_READ => Some(c"buffer_read"),
                urf::ENQUEUE_MEM_BUFFER_WRITE => Some(c"buffer_write"),
                urf::ENQUEUE_MEM_BUFFER_COPY => Some(c"buffer_copy"),
                urf::ENQUEUE_USM_FILL => Some(c"usm_fill"),
                urf::ENQUEUE_MEM_BUFFER_FILL => Some(c"buffer_fill"),
                urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER | urf::ENQUEUE_EVENTS_WAIT_WITH_BARRIER_EXT => Some(c"barrier"),
                _ => None,
            };
            graph::enqueued(bt, p, name);
        }
    }
}

/// `UR_KERNEL_INFO_FUNCTION_NAME`.
const UR_KERNEL_INFO_FUNCTION_NAME: u64 = 0;

/// Kernel handle → function name (whole, demangled), from `urKernelCreate` and
/// `urKernelGetInfo(FUNCTION_NAME)` (kernels made from native handles have no name until someone
/// asks for it; dpctl does). Written once per kernel creation, read once per dispatch (an `Arc`
/// clone: no copy of the name); never on the disabled path.
static KERNEL_NAMES: RwLock<BTreeMap<u64, std::sync::Arc<CStr>>> = RwLock::new(BTreeMap::new());

/// The name a kernel is reported by: SYCL's kernel names are type names mangled as typeinfo
/// names (`_ZTS` + the type), which demangle to `typeinfo name for T`: the type `T` is the name.
/// Other mangled names demangle as they are; anything else is kept whole.
pub fn readable_kernel_name(bytes: &[u8]) -> Vec<u8> {
    let demangled = std::str::from_utf8(bytes)
        .ok()
        .filter(|s| s.starts_with("_Z"))
        .and_then(|s| cpp_demangle::Symbol::new(s).ok())
        .and_then(|sym| sym.demangle(&cpp_demangle::DemangleOptions::default()).ok());
    match demangled {
        Some(d) => d.strip_prefix("typeinfo name for ").unwrap_or(&d).as_bytes().to_vec(),
        None => bytes.to_vec(),
    }
}

/// # Safety
/// `name` is null or points at a string of at most `cap` readable bytes (NUL-terminated or not).
unsafe fn remember_kernel_name(kernel: u64, name: u64, cap: u64) {
    if kernel == 0 || name == 0 {
        return;
    }
    let cap = (cap as usize).min(MAX_NAME);
    // SAFETY: forwarded; strnlen reads at most `cap` bytes.
    let len = unsafe { libc::strnlen(name as *const c_char, cap) };
    // SAFETY: `len` bytes at `name` were just read by strnlen.
    let bytes = unsafe { std::slice::from_raw_parts(name as *const u8, len) };
    if bytes.is_empty() {
        return;
    }
    let Ok(readable) = std::ffi::CString::new(readable_kernel_name(bytes)) else { return };
    KERNEL_NAMES.write().unwrap_or_else(|e| e.into_inner()).insert(kernel, readable.into());
}

/// Longest kernel name read from the runtime (names are kept whole up to this).
const MAX_NAME: usize = 64 * 1024;

/// The kernel's reported name, if known.
fn kernel_name(kernel: u64) -> Option<std::sync::Arc<CStr>> {
    KERNEL_NAMES.read().unwrap_or_else(|e| e.into_inner()).get(&kernel).cloned()
}

/// UR queue → its device, whether it profiles and the properties the program asked for (the
/// bits of `queue_flags` but in-order, which SYCL's `queue_create` says), from `urQueueCreate*`
/// (device activity names its device; only launches on a profiling queue wait for their device
/// times; the queue's record takes the flags).
static QUEUE_DEVICES: RwLock<BTreeMap<u64, (u64, bool, u64)>> = RwLock::new(BTreeMap::new());
/// Bumped by every change of [`QUEUE_DEVICES`], under its write lock: enqueues read the table
/// through their thread's memo ([`offtrace_core::Memo`]), without the lock.
static QUEUE_GENERATION: Generation = Generation::new();

fn remember_queue_device(queue: u64, device: u64, profiling: bool, flags: u64) {
    if queue != 0 {
        let mut t = QUEUE_DEVICES.write().unwrap_or_else(|e| e.into_inner());
        t.insert(queue, (device, profiling, flags));
        QUEUE_GENERATION.bump();
    }
}

/// A queue, its device and whether it profiles: one look-up per enqueue (the device for its
/// activity, the profiling flag for [`remember_launch`]).
#[derive(Clone, Copy)]
struct QueueInfo {
    queue: u64,
    device: u64,
    profiling: bool,
}

fn queue_info(bt: &BridgeThread, queue: u64) -> QueueInfo {
    let locked = |q: u64| {
        let t = QUEUE_DEVICES.read().unwrap_or_else(|e| e.into_inner());
        t.get(&q).map_or((0, false), |&(device, profiling, _)| (device, profiling))
    };
    let (device, profiling) = bt.queue_memo.get(&QUEUE_GENERATION, queue, locked);
    QueueInfo { queue, device, profiling }
}

/// The properties of a queue the record model names (`queue_flags`), from
/// `ur_queue_properties_t::flags` (its offset generated from `ur_api.h`), the properties pointer
/// of `urQueueCreate` (null = no flags). In-order is SYCL's to say (`is_inorder`).
///
/// # Safety
/// `props` is null or the call's `const ur_queue_properties_t *`, live during the callback.
unsafe fn queue_flags_of(props: u64) -> u64 {
    if props == 0 {
        return 0;
    }
    // SAFETY: forwarded: a live `ur_queue_properties_t`, whose `flags` is a u32 at this offset.
    let ur = unsafe { ((props as *const u8).add(ur::queue_properties::FLAGS) as *const u32).read_unaligned() };
    queue_flags_from_ur(ur)
}

/// `ur_queue_flags_t` bits (generated from `ur_api.h`) → `queue_flags`.
fn queue_flags_from_ur(ur: u32) -> u64 {
    use ur::queue_flag::{ON_DEVICE, ON_DEVICE_DEFAULT, PRIORITY_HIGH, PRIORITY_LOW, PROFILING_ENABLE};
    [
        (PROFILING_ENABLE, queue_flags::PROFILING),
        (ON_DEVICE | ON_DEVICE_DEFAULT, queue_flags::ON_DEVICE),
        (PRIORITY_LOW, queue_flags::PRIORITY_LOW),
        (PRIORITY_HIGH, queue_flags::PRIORITY_HIGH),
    ]
    .iter()
    .filter(|(bits, _)| ur & bits != 0)
    .fold(0, |f, (_, flag)| f | flag)
}

/// The properties `urQueueCreate` gave UR queue `queue` (0 when not seen).
fn queue_flags_given(queue: u64) -> u64 {
    QUEUE_DEVICES.read().unwrap_or_else(|e| e.into_inner()).get(&queue).map_or(0, |&(_, _, flags)| flags)
}

fn device_activity_wanted() -> bool {
    kind_enabled(Kind::KernelDispatch)
        || kind_enabled(Kind::MemoryCopy)
        || kind_enabled(Kind::MemoryFill)
        || kind_enabled(Kind::Sync)
}

/// The memory type of a USM pointer; memory UR did not allocate is the host's.
fn usm_type(ptr: u64) -> MemoryType {
    offtrace_core::lookup_allocation(ptr).map_or(MemoryType::Host, |(_, _, t)| t)
}

fn copy(q: QueueInfo, dst: u64, src: u64, size: u64, src_type: MemoryType, dst_type: MemoryType) -> MemoryCopyPayload {
    MemoryCopyPayload {
        queue: q.queue,
        dst,
        src,
        size,
        device: q.device,
        direction: offtrace_core::CopyDirection::from_types(src_type, dst_type),
        src_type,
        dst_type,
        ..Default::default()
    }
}

/// Device work whose device times may come through `urEventGetProfilingInfo` on its event.
// The kernel variant is the common one: boxing it would allocate per launch.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Launch {
    Kernel(KernelDispatchPayload, std::sync::Arc<CStr>),
    Copy(u32, MemoryCopyPayload),
    Fill(u32, MemoryFillPayload),
    Barrier(SyncPayload),
}

// The payloads' pointers (name, implicit allocations) are cleared or owned by the entry.
// SAFETY: `Launch` owns everything its pointers point at (the `Arc<CStr>` name) or holds null.
unsafe impl Send for Launch {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Launch {}

impl Launch {
    fn kind(&self) -> Kind {
        match self {
            Launch::Kernel(..) => Kind::KernelDispatch,
            Launch::Copy(..) => Kind::MemoryCopy,
            Launch::Fill(..) => Kind::MemoryFill,
            Launch::Barrier(..) => Kind::Sync,
        }
    }
}

struct PendingLaunch {
    launch: Launch,
    correlation: u64,
    start: u64,
    end: u64,
}

/// UR event → the launch that returned it. An event handle reused by a later launch replaces
/// the entry (the old event is gone); entries whose times were reported are removed. Bounded:
/// at `MAX_PENDING` entries the table is emptied (times of those launches, if a program ever
/// reads them, are not reported).
///
/// A hash map of boxed entries: an entry is about 400 bytes (a kernel's payload with its
/// arguments), and a `BTreeMap` moved up to eleven of them on each insertion and removal (about
/// 900 instructions each); foldhash, as in the task graph's tables (handles, not hostile input).
static PENDING: std::sync::Mutex<Option<PendingTable>> = std::sync::Mutex::new(None);
type PendingTable = std::collections::HashMap<u64, Box<PendingLaunch>, foldhash::fast::FixedState>;
const MAX_PENDING: usize = 1 << 16;

/// Where an enqueue's queue, returned event and wait list are among its arguments
/// ([`NO_PARAM`] = it has none).
#[derive(Clone, Copy)]
struct EnqueuePositions {
    queue: u8,
    event: u8,
    count: u8,
    list: u8,
}

/// An index past every argument list (`ApiCallPayload::args` reads 0 there).
const NO_PARAM: u8 = u8::MAX;

/// Per `ur_function_t`: its [`EnqueuePositions`] packed in the low 32 bits, bit 32 set once
/// computed (0 = not yet). The positions come from the parameters' names, compared once per
/// function instead of per enqueue.
static ENQUEUE_POSITIONS: [std::sync::atomic::AtomicU64; ur::MAX_FUNCTION_ID as usize + 1] =
    [const { std::sync::atomic::AtomicU64::new(0) }; ur::MAX_FUNCTION_ID as usize + 1];

fn enqueue_positions(id: u32) -> Option<EnqueuePositions> {
    let slot = ENQUEUE_POSITIONS.get(id as usize)?;
    // Relaxed: a cache of a pure function of the id; a race computes the same value twice.
    let mut packed = slot.load(Ordering::Relaxed);
    if packed == 0 {
        let func = ur::function(id)?;
        let at = |name: &str| {
            func.params.iter().position(|q| q.name == name).and_then(|i| u8::try_from(i).ok()).unwrap_or(NO_PARAM)
        };
        let bytes = [at("hQueue"), at("phEvent"), at("numEventsInWaitList"), at("phEventWaitList")];
        packed = u64::from(u32::from_le_bytes(bytes)) | (1 << 32);
        slot.store(packed, Ordering::Relaxed);
    }
    let [queue, event, count, list] = (packed as u32).to_le_bytes();
    Some(EnqueuePositions { queue, event, count, list })
}

/// `UR_PROFILING_INFO_COMMAND_START` / `_END`.
const PROFILING_START: u64 = 2;
const PROFILING_END: u64 = 3;

/// Notes the event a successful enqueue on a profiling queue returned (`phEvent`), with what it
/// launched (other queues have no device times to wait for: nothing is kept for them).
/// Keeps a launch on a profiling queue (the caller checks [`QueueInfo::profiling`]) for the
/// device times its event may report, unless a backend below delivers them: the OpenCL layer
/// under the UR OpenCL adapter converts the device's clock with a recorded calibration, where
/// the times the program reads here are the device's raw clock (35 ns off on Intel's CPU
/// device; a device whose clock is not CLOCK_MONOTONIC would be off by the whole offset). For an
/// out-of-order command the raw completion reached the file first and was the one readers kept.
fn remember_launch(p: &ApiCallPayload, launch: Launch) {
    let correlation = offtrace_core::current_correlation_id();
    if offtrace_core::times_delivered_below(correlation, launch.kind()) {
        return;
    }
    let Some(pos) = enqueue_positions(p.function_id) else { return };
    let ph = p.args.get(usize::from(pos.event)).copied().unwrap_or(0);
    // SAFETY: `phEvent` of a successful call, when given, was written by the runtime.
    let event = unsafe { read_out(ph) };
    if event == 0 {
        return;
    }
    let entry = Box::new(PendingLaunch { launch, correlation, start: 0, end: 0 });
    let mut t = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let t = t.get_or_insert_with(PendingTable::default);
    if t.len() >= MAX_PENDING {
        t.clear();
    }
    t.insert(event, entry);
}

/// [`remember_launch`] for a kernel on a profiling queue.
fn remember_kernel_launch(a: &[u64; offtrace_core::MAX_ARGS], k: &KernelDispatchPayload, name: std::sync::Arc<CStr>) {
    let mut k = *k;
    k.implicit_allocations = std::ptr::null();
    k.implicit_allocation_count = 0;
    k.kernel_name = std::ptr::null();
    let mut p = ApiCallPayload::new(urf::ENQUEUE_KERNEL_LAUNCH_WITH_ARGS_EXP, &a[..]);
    p.arg_count = 12;
    remember_launch(&p, Launch::Kernel(k, name));
}

/// A device time the program read; when both the start and the end of a launch's event are
/// known, the launch's activity is emitted with them. Device times are used when they are in
/// the trace's clock (CLOCK_MONOTONIC: the case of the CPU runtimes here, checked by distance
/// from now); otherwise they are not reported.
fn profiling_info(event: u64, prop: u64, value: u64) {
    if prop != PROFILING_START && prop != PROFILING_END {
        return;
    }
    let done = {
        let mut t = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = t.as_mut() else { return };
        let Some(e) = t.get_mut(&event) else { return };
        if prop == PROFILING_START {
            e.start = value;
        } else {
            e.end = value;
        }
        if e.start == 0 || e.end == 0 {
            return;
        }
        t.remove(&event)
    };
    let Some(e) = done.map(|e| *e) else { return };
    let now = offtrace_core::timestamp_ns();
    const SAME_CLOCK: u64 = 600_000_000_000; // 10 minutes
    if e.end < e.start || now.abs_diff(e.end) > SAME_CLOCK {
        return;
    }
    let (start, end) = (e.start, e.end);
    match e.launch {
        Launch::Kernel(mut k, name) => {
            k.kernel_name = name.as_ptr();
            (k.device_start, k.device_end) = (start, end);
            emit_activity(
                Kind::KernelDispatch,
                kernel_dispatch::LAUNCH,
                e.correlation,
                start,
                end,
                Payload::KernelDispatch(&k),
            );
        }
        Launch::Copy(op, mut c) => {
            (c.device_start, c.device_end) = (start, end);
            emit_activity(Kind::MemoryCopy, op, e.correlation, start, end, Payload::MemoryCopy(&c));
        }
        Launch::Fill(op, mut f) => {
            (f.device_start, f.device_end) = (start, end);
            emit_activity(Kind::MemoryFill, op, e.correlation, start, end, Payload::MemoryFill(&f));
        }
        Launch::Barrier(mut b) => {
            (b.device_start, b.device_end) = (start, end);
            emit_activity(Kind::Sync, sync_op::BARRIER, e.correlation, start, end, Payload::Sync(&b));
        }
    }
}

/// Up to 8 bytes of a fill pattern.
///
/// # Safety
/// `ptr` is null or points at `size` readable bytes.
unsafe fn pattern(ptr: u64, size: u64) -> u64 {
    if ptr == 0 {
        return 0;
    }
    let mut b = [0u8; 8];
    let n = (size as usize).min(8);
    // SAFETY: forwarded; at most `size` bytes.
    unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, b.as_mut_ptr(), n) };
    u64::from_le_bytes(b)
}

fn alloc(ptr: u64, size: u64, memory_type: MemoryType, device: u64) {
    if ptr != 0 {
        emit_memory_alloc(&MemoryAllocPayload { ptr, size, memory_type, device });
    }
}

/// # Safety
/// As [`ur_end_effects`].
unsafe fn code_object_load(p: &ApiCallPayload) {
    let a = &p.args;
    // SAFETY: as the caller's.
    let (op, co) = unsafe {
        match p.function_id {
            // (hContext, pIL, length, pProperties, phProgram)
            urf::PROGRAM_CREATE_WITH_IL => {
                let h = read_out(a[4]);
                (
                    code_object::PROGRAM,
                    CodeObjectPayload { handle: h, program: h, binary_size: a[2], ..Default::default() },
                )
            }
            // (hContext, numDevices, phDevices, pLengths, ppBinaries, pProperties, phProgram)
            urf::PROGRAM_CREATE_WITH_BINARY => {
                let h = read_out(a[6]);
                let len = if a[1] > 0 { read_out(a[3]) } else { 0 };
                (
                    code_object::PROGRAM,
                    CodeObjectPayload { handle: h, program: h, binary_size: len, ..Default::default() },
                )
            }
            // (hNativeProgram, hContext, pProperties, phProgram)
            urf::PROGRAM_CREATE_WITH_NATIVE_HANDLE => {
                let h = read_out(a[3]);
                (code_object::PROGRAM, CodeObjectPayload { handle: h, program: h, ..Default::default() })
            }
            // (hContext, count, phPrograms, pOptions, phProgram)
            urf::PROGRAM_LINK => {
                let h = read_out(a[4]);
                (code_object::PROGRAM, CodeObjectPayload { handle: h, program: h, ..Default::default() })
            }
            // (hContext, numDevices, phDevices, flags, count, phPrograms, pOptions, phProgram)
            urf::PROGRAM_LINK_EXP => {
                let h = read_out(a[7]);
                (code_object::PROGRAM, CodeObjectPayload { handle: h, program: h, ..Default::default() })
            }
            // (hContext, hProgram, pOptions)
            urf::PROGRAM_BUILD | urf::PROGRAM_COMPILE => (
                code_object::PROGRAM_BUILD,
                CodeObjectPayload { handle: a[1], program: a[1], name: a[2] as *const c_char, ..Default::default() },
            ),
            // (hProgram, numDevices, phDevices, flags, pOptions)
            urf::PROGRAM_BUILD_EXP | urf::PROGRAM_COMPILE_EXP => (
                code_object::PROGRAM_BUILD,
                CodeObjectPayload { handle: a[0], program: a[0], name: a[4] as *const c_char, ..Default::default() },
            ),
            // (hProgram, pKernelName, phKernel)
            urf::KERNEL_CREATE => (
                code_object::KERNEL,
                CodeObjectPayload {
                    handle: read_out(a[2]),
                    program: a[0],
                    name: a[1] as *const c_char,
                    binary_size: 0,
                },
            ),
            // (hNativeKernel, hContext, hProgram, pProperties, phKernel)
            urf::KERNEL_CREATE_WITH_NATIVE_HANDLE => {
                (code_object::KERNEL, CodeObjectPayload { handle: read_out(a[4]), program: a[2], ..Default::default() })
            }
            _ => return,
        }
    };
    if op != code_object::PROGRAM_BUILD {
        code_objects::created(co.handle);
    }
    // A kernel's name as every other record reports it (readable, demangled; `pKernelName`
    // is the mangled `_ZTS…`): one answer per kernel.
    let readable = if op == code_object::KERNEL { kernel_name(co.handle) } else { None };
    let mut co = co;
    if let Some(n) = &readable {
        co.name = n.as_ptr();
    }
    emit_instant(Kind::CodeObject, op, Phase::Load, Payload::CodeObject(&co));
}

/// A successful `urKernelRelease` / `urProgramRelease` of `handle`: UNLOAD if it dropped the
/// last reference of an object whose load was reported.
fn code_object_release(function_id: u32, handle: u64) {
    if !code_objects::release(handle) || !kind_enabled(Kind::CodeObject) {
        return;
    }
    let (op, co) = if function_id == urf::KERNEL_RELEASE {
        (code_object::KERNEL, CodeObjectPayload { handle, ..Default::default() })
    } else {
        (code_object::PROGRAM, CodeObjectPayload { handle, program: handle, ..Default::default() })
    };
    emit_instant(Kind::CodeObject, op, Phase::Unload, Payload::CodeObject(&co));
}

/// Reference counts of the programs and kernels whose creation was reported as a LOAD, so that
/// their UNLOAD is reported once, at the release that destroys them (UR objects start with one
/// reference; `urKernelRetain`/`urProgramRetain` add one, `*Release` drops one). Objects made
/// before a `CODE_OBJECT` service was configured are not tracked and get no UNLOAD.
mod code_objects {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    static COUNTS: Mutex<Option<HashMap<u64, u32>>> = Mutex::new(None);
    /// Whether `COUNTS` may hold anything: retains and releases skip the lock until a load.
    static ANY: AtomicBool = AtomicBool::new(false);

    fn with<R>(f: impl FnOnce(&mut HashMap<u64, u32>) -> R) -> R {
        let mut g = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
        f(g.get_or_insert_with(HashMap::new))
    }

    /// A program or kernel was created (one reference). A handle reused after its object died
    /// starts again at one.
    pub(super) fn created(handle: u64) {
        if handle == 0 {
            return;
        }
        // Relaxed: a hint; the map itself is under the mutex.
        ANY.store(true, Ordering::Relaxed);
        with(|m| m.insert(handle, 1));
    }

    pub(super) fn retain(handle: u64) {
        if ANY.load(Ordering::Relaxed) {
            with(|m| {
                if let Some(n) = m.get_mut(&handle) {
                    *n = n.saturating_add(1);
                }
            });
        }
    }

    /// Drops one reference; `true` when this release destroyed a tracked object.
    pub(super) fn release(handle: u64) -> bool {
        if !ANY.load(Ordering::Relaxed) {
            return false;
        }
        with(|m| match m.get_mut(&handle) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                m.remove(&handle);
                true
            }
            None => false,
        })
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn unload_only_at_the_last_release() {
            super::created(0xabc0);
            super::retain(0xabc0);
            super::retain(0xabc0);
            assert!(!super::release(0xabc0));
            assert!(!super::release(0xabc0));
            assert!(super::release(0xabc0));
            assert!(!super::release(0xabc0), "already destroyed");
            assert!(!super::release(0xdef0), "never reported");
            super::created(0xabc0); // the handle value reused by a new object
            assert!(super::release(0xabc0));
        }
    }
}

/// `ur_exp_kernel_arg_properties_t` (ur_api.h v0.12): 48 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
struct KernelArgProperties {
    stype: u32,
    _pad: u32,
    p_next: *const c_void,
    arg_type: u32,
    index: u32,
    size: usize,
    /// `ur_exp_kernel_arg_value_t`: `value` / `pointer` / `memObjTuple {hMem, flags}` / sampler.
    value: [u64; 2],
}

/// `ur_exp_kernel_arg_type_t`.
mod arg_type {
    pub const VALUE: u32 = 0;
    pub const POINTER: u32 = 1;
    pub const MEM_OBJ: u32 = 2;
    pub const LOCAL: u32 = 3;
    pub const SAMPLER: u32 = 4;
}

/// The kernel argument values of a launch: pointers (USM) as is, values up to 8 bytes read
/// through their pointer, memory objects and samplers as handles, local sizes as sizes.
///
/// # Safety
/// `args` is null or points at `count` live `ur_exp_kernel_arg_properties_t`.
unsafe fn kernel_args(args: u64, count: u64, out: &mut [u64; MAX_KERNEL_ARGS]) -> u32 {
    if args == 0 {
        return 0;
    }
    let mut n = 0u32;
    for i in 0..(count as usize).min(MAX_KERNEL_ARGS) {
        // SAFETY: forwarded: `count` entries.
        let a = unsafe { (args as *const KernelArgProperties).add(i).read_unaligned() };
        let idx = a.index as usize;
        if idx >= MAX_KERNEL_ARGS {
            continue;
        }
        out[idx] = match a.arg_type {
            arg_type::POINTER | arg_type::MEM_OBJ | arg_type::SAMPLER => a.value[0],
            arg_type::LOCAL => a.size as u64,
            // SAFETY: a value argument points at `size` readable bytes.
            arg_type::VALUE if a.value[0] != 0 && matches!(a.size, 1 | 2 | 4 | 8) => unsafe {
                load_sized(a.value[0] as *const u8, a.size as u8)
            },
            _ => 0,
        };
        n = n.max(idx as u32 + 1);
    }
    n
}

/// `urEnqueueKernelLaunchWithArgsExp` (hQueue, hKernel, workDim, pGlobalWorkOffset,
/// pGlobalWorkSize, pLocalWorkSize, numArgs, pArgs, launchPropList, numEventsInWaitList,
/// phEventWaitList, phEvent).
///
/// # Safety
/// As [`ur_end_effects`].
unsafe fn kernel_launch(bt: &BridgeThread, a: &[u64; offtrace_core::MAX_ARGS], now: u64) {
    let mut k = KernelDispatchPayload { queue: a[0], kernel: a[1], work_dim: a[2] as u32, ..Default::default() };
    let dims = (a[2] as usize).min(3);
    for d in 0..dims {
        // SAFETY: the size arrays, when given, have `workDim` entries (UR contract).
        unsafe {
            if a[4] != 0 {
                k.global_size[d] = (a[4] as *const u64).add(d).read_unaligned();
            }
            if a[5] != 0 {
                k.local_size[d] = (a[5] as *const u64).add(d).read_unaligned();
            }
        }
    }
    // The geometry convention of every path (`KernelDispatchPayload`): dimensions past
    // `work_dim` are 1 (local sizes too, when the program chose them; all 0 when the runtime
    // chooses), as the SYCL streams report them without UR.
    for d in dims..3 {
        k.global_size[d] = 1;
        if a[5] != 0 {
            k.local_size[d] = 1;
        }
    }
    // SAFETY: `pArgs` has `numArgs` entries (UR contract).
    k.kernel_arg_count = unsafe { kernel_args(a[7], a[6], &mut k.kernel_args) };
    // The UR function name when known (what the device runs: `axpy`); else the SYCL task's
    // `kernel_name` metadata (for dpctl's raw submits that is `DPCTLQueue_SubmitRange`).
    let t = &bt.task;
    t.dispatched.set(true);
    let q = queue_info(bt, a[0]);
    k.device = q.device;
    if let Some(own) = kernel_name(a[1]) {
        k.kernel_name = own.as_ptr();
        emit_instant_at(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, now, Payload::KernelDispatch(&k));
        if q.profiling {
            remember_kernel_launch(a, &k, own);
        }
        return;
    }
    if t.instance.get() != 0 {
        // SAFETY: the task is open on this thread (the launch is inside it).
        unsafe { resolve_task(bt) };
    }
    let Ok(name) = t.name.try_borrow() else { return };
    if t.instance.get() != 0 && name[0] != 0 {
        k.kernel_name = name.as_ptr().cast();
    }
    emit_instant_at(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, now, Payload::KernelDispatch(&k));
    // The name's copy (an allocation) only for a launch kept for its device times.
    if q.profiling
        && let Ok(own) = CStr::from_bytes_until_nul(&name[..])
    {
        remember_kernel_launch(a, &k, own.into());
    }
}

/// `UR_DEVICE_INFO_TYPE` / `UR_DEVICE_INFO_NAME`.
const UR_DEVICE_INFO_TYPE: u64 = 0;
const UR_DEVICE_INFO_NAME: u64 = 66;

/// A successful `urDeviceGetInfo` of a device's name or type: what it wrote into the caller's
/// buffer (`size` bytes at `value`).
///
/// # Safety
/// `value` points at `size` bytes the call wrote.
unsafe fn device_info(device: u64, prop: u64, size: u64, value: u64) {
    if !kind_enabled(Kind::Device) {
        return;
    }
    match prop {
        UR_DEVICE_INFO_NAME if size > 0 => {
            // SAFETY: forwarded; strnlen reads at most `size` bytes.
            let len = unsafe { libc::strnlen(value as *const c_char, (size as usize).min(DEVICE_NAME_CAP)) };
            // SAFETY: `len` bytes at `value` were just read by strnlen.
            let name = unsafe { std::slice::from_raw_parts(value as *const u8, len) };
            crate::devices::learn_device(device, name, None);
        }
        UR_DEVICE_INFO_TYPE if size >= 4 => {
            // SAFETY: forwarded: a `ur_device_type_t` (u32).
            let t = unsafe { (value as *const u32).read_unaligned() };
            crate::devices::learn_device(device, b"", Some(crate::devices::ur_device_type(t)));
        }
        _ => {}
    }
}

/// Longest device name kept.
const DEVICE_NAME_CAP: usize = 256;

/// SYCL queue id (`queue_id` metadata: 1, 2, 3 ... per queue) → the queue's handle (the one
/// device activity names), from `queue_create`: graph nodes name their queue by id only.
static QUEUE_IDS: RwLock<BTreeMap<u64, u64>> = RwLock::new(BTreeMap::new());

/// Bumped by every change of [`QUEUE_IDS`], under its write lock: nodes read the table through
/// their thread's memo, without the lock.
static QUEUE_ID_GENERATION: Generation = Generation::new();

fn remember_queue_id(id: u64, queue: u64) {
    if id != 0 && queue != 0 {
        let mut m = QUEUE_IDS.write().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_PENDING {
            m.clear();
        }
        m.insert(id, queue);
        QUEUE_ID_GENERATION.bump();
    }
}

/// The queue handle of SYCL queue id `id` (0 = not known).
fn queue_of_id(bt: &BridgeThread, id: u64) -> u64 {
    let locked = |id: u64| QUEUE_IDS.read().unwrap_or_else(|e| e.into_inner()).get(&id).copied().unwrap_or(0);
    bt.queue_id_memo.get(&QUEUE_ID_GENERATION, id, locked)
}

/// The task graph: node ids, their queues, names and the dependencies of commands the runtime
/// enqueues without a graph edge.
///
/// - A node's id is the XPTI `instance` of its `node_create` (one global counter: unique), not
///   the event's uid64, which the runtime reuses for unrelated commands once an event is gone
///   (the memset before a kernel and the kernel share one). Edges, tasks and signals name nodes
///   by uid64 while their events live: [`NODES`] maps them.
/// - A node's record is held back on its thread until its command is enqueued (the UR call
///   inside its task), so it carries the command's queue (kernel nodes of dpctl carry no
///   `queue_id`) and its name as its device activity reads (the kernel's: dpctl's nodes are all
///   `DPCTLQueue_SubmitRange`; `usm_memcpy` for SYCL's `memcpy` / `copy usm`, `usm_fill`,
///   `barrier`, ...); any edge, signal or task end emits it first. A node emitted before its
///   command was enqueued (another node came first on its thread, or the runtime runs its task
///   later, on any thread) cannot be held longer (its edges follow it): its task, wherever it
///   runs, is a late one ([`GraphThread`]'s `late`), and its exit record carries what the
///   enqueue told (queue, name); readers take them from there by node id.
/// - SYCL enqueues most USM commands without scheduler edges: a command's dependencies are then
///   only the wait list of its UR enqueue. Each event of that list that an earlier command of
///   the trace returned becomes an edge from that command's node (with the event), unless the
///   runtime made edges for the node itself.
mod graph {
    use super::*;
    use offtrace_core::SharedTable;

    /// Shared by every thread, without a lock (`offtrace_core::SharedTable`): 16,384 buckets of
    /// four entries, each bucket keeping its latest keys (those of live events).
    type Table = SharedTable<{ 1 << 14 }>;

    /// uid64 of a live node event → the node id.
    static NODES: Table = SharedTable::new();
    /// UR event handle → the node whose command returned it.
    static EVENTS: Table = SharedTable::new();

    fn put(t: &Table, k: u64, v: u64) {
        t.put(k, v);
    }

    fn get(t: &Table, k: u64) -> Option<u64> {
        t.get(k)
    }

    /// The node id of a live node event.
    pub(super) fn node_of(uid: u64) -> u64 {
        get(&NODES, uid).unwrap_or(uid)
    }

    /// [`node_of`], the node made last on this thread first: the runtime makes a command's
    /// node, then starts its task, makes the edges into it and signals it, on the same thread,
    /// and its event (the uid) lives until then: that node's id without the shared table.
    fn node_here(g: &GraphThread, uid: u64) -> u64 {
        match g.cur.try_borrow() {
            Ok(c) if c.uid == uid && uid != 0 => c.node,
            _ => node_of(uid),
        }
    }

    /// A node's name, NUL-terminated, with its length: copies take only the used bytes (the
    /// capacity is the record's longest string, mostly unused).
    #[derive(Clone, Copy)]
    struct NodeName {
        len: usize,
        bytes: [u8; NAME_CAP],
    }

    impl NodeName {
        const EMPTY: NodeName = NodeName { len: 0, bytes: [0; NAME_CAP] };

        /// `b` (no NUL), cut only past the record's limit.
        fn set(&mut self, b: &[u8]) {
            let n = b.len().min(NAME_CAP - 1);
            self.bytes[..n].copy_from_slice(&b[..n]);
            self.bytes[n] = 0;
            self.len = n;
        }

        /// Its used bytes and NUL into `out` (a [`NameOut`]); their length.
        fn copy_to(&self, out: &mut [u8; NAME_CAP]) -> usize {
            out[..=self.len].copy_from_slice(&self.bytes[..=self.len]);
            self.len
        }
    }

    /// Where a node's name is copied to be emitted (the node's cell is released first: emitting
    /// may run a tool's callback that makes a node here). One per thread, not a 1 KiB copy on
    /// the stack per record; a record emitted while another is being emitted on the thread
    /// (re-entered through a callback) gets a buffer of its own.
    type NameOut = [u8; NAME_CAP];

    /// The task graph's part of the thread's state ([`BridgeThread`]).
    pub(super) struct GraphThread {
        name_out: RefCell<NameOut>,
        cur: RefCell<Current>,
        /// A task run here for a node that is not [`Current`]'s (emitted before its command was
        /// enqueued: another node came first on its thread, or the runtime runs the task on
        /// another thread): what its UR enqueue tells, for the task's exit record.
        late: RefCell<Late>,
        /// The late task began after the current node's task (inside it): enqueues are its.
        late_inner: Cell<bool>,
        /// `late`'s task (0 = none open), read without borrowing it: most commands have none.
        late_task: Cell<u64>,
        /// This thread's last [`NODE_METAS`] node metadata, and the entry the next miss replaces.
        node_meta: ([Cell<Option<NodeMetaMemo>>; NODE_METAS], Cell<usize>),
    }

    impl GraphThread {
        pub(super) const fn new() -> Self {
            Self {
                name_out: RefCell::new([0; NAME_CAP]),
                cur: RefCell::new(NONE),
                late: RefCell::new(Late::NONE),
                late_inner: Cell::new(false),
                late_task: Cell::new(0),
                node_meta: ([const { Cell::new(None) }; NODE_METAS], Cell::new(0)),
            }
        }
    }

    fn with_name_out(g: &GraphThread, f: impl FnOnce(&mut NameOut)) {
        match g.name_out.try_borrow_mut() {
            Ok(mut b) => f(&mut b),
            // The thread's buffer is busy (re-entered).
            Err(_) => f(&mut Box::new([0; NAME_CAP])),
        }
    }

    /// The name copied to `out`: null when empty.
    fn out_ptr(out: &NameOut, len: usize) -> *const c_char {
        if len == 0 { std::ptr::null() } else { out.as_ptr().cast() }
    }

    /// The node made last on this thread (its record held back until `emitted`) and its task.
    #[derive(Clone, Copy)]
    struct Current {
        node: u64,
        /// The uid64 of its event (what the runtime's notifications name it by while it lives).
        uid: u64,
        name: NodeName,
        queue: u64,
        event: u64,
        emitted: bool,
        /// The runtime made an edge into this node.
        had_edges: bool,
        /// The instance of its open task (0 = none).
        task: u64,
        /// The runtime's edges into this node, held back with it: (source, edge uid, name).
        edges: [(u64, u64, [u8; EDGE_NAME_CAP]); HELD_EDGES],
        held: usize,
        /// A host task (`sycl_device_type` HOST): no UR enqueue will name it.
        host: bool,
        /// The runtime signalled this node's event.
        signalled: bool,
        /// The event its UR enqueue returned (0 = none).
        enqueue_event: u64,
    }

    /// The open task of a node emitted before its command was enqueued ([`GraphThread::late`]).
    struct Late {
        /// Its task's instance (0 = none open).
        task: u64,
        node: u64,
        /// Its UR enqueue's queue and event (0 = none yet) and the command's name.
        queue: u64,
        enqueue_event: u64,
        name: NodeName,
        /// The runtime signalled its event.
        signalled: bool,
    }

    impl Late {
        const NONE: Late =
            Late { task: 0, node: 0, queue: 0, enqueue_event: 0, name: NodeName::EMPTY, signalled: false };
    }

    /// Edges into a held-back node kept with it (more are emitted after it, at once).
    const HELD_EDGES: usize = 8;
    const EDGE_NAME_CAP: usize = 64;

    const NONE: Current = Current {
        node: 0,
        uid: 0,
        name: NodeName::EMPTY,
        queue: 0,
        event: 0,
        emitted: true,
        had_edges: false,
        task: 0,
        edges: [(0, 0, [0; EDGE_NAME_CAP]); HELD_EDGES],
        held: 0,
        host: false,
        signalled: false,
        enqueue_event: 0,
    };

    /// `name` (null or a NUL-terminated string) into `out`, cut to fit, NUL-terminated.
    ///
    /// # Safety
    /// `name` is null or a NUL-terminated string valid now.
    unsafe fn copy_name(name: *const c_char, out: &mut [u8]) {
        if out.is_empty() {
            return;
        }
        if name.is_null() {
            out[0] = 0;
            return;
        }
        // SAFETY: forwarded.
        let b = unsafe { CStr::from_ptr(name) }.to_bytes();
        let n = b.len().min(out.len() - 1);
        out[..n].copy_from_slice(&b[..n]);
        out[n] = 0;
    }

    fn name_ptr(b: &[u8]) -> *const c_char {
        if b.first().is_none_or(|&c| c == 0) { std::ptr::null() } else { b.as_ptr().cast() }
    }

    /// Emits the held-back node record, if any.
    fn flush(g: &GraphThread) {
        // Most calls find nothing held: they borrow no name buffer.
        if g.cur.try_borrow().map_or(true, |c| c.emitted) {
            return;
        }
        with_name_out(g, |out| flush_into(g, out));
    }

    fn flush_into(g: &GraphThread, out: &mut NameOut) {
        // Copied out before emitting (a callback may run SYCL code that makes a node here): the
        // name's used bytes and four words; the held edges (640 bytes) only when there are some.
        let Ok(mut c) = g.cur.try_borrow_mut() else { return };
        if c.emitted {
            return;
        }
        c.emitted = true;
        let (node, len, queue, event, held) = (c.node, c.name.copy_to(out), c.queue, c.event, c.held);
        if held > 0 {
            let edges = c.edges;
            drop(c);
            emit_node(node, out_ptr(out, len), queue, event);
            for (source, uid, name) in &edges[..held] {
                emit_edge(*uid, *source, node, name_ptr(name));
            }
        } else {
            drop(c);
            emit_node(node, out_ptr(out, len), queue, event);
        }
    }

    fn emit_node(node: u64, name: *const c_char, queue: u64, event: u64) {
        let g = TaskGraphPayload { node, name, queue, event, ..Default::default() };
        emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&g));
    }

    fn emit_edge(uid: u64, source: u64, target: u64, name: *const c_char) {
        let g = TaskGraphPayload { node: uid, source, target, name, ..Default::default() };
        emit_instant(Kind::TaskGraph, task_graph::EDGE_CREATE, Phase::None, Payload::TaskGraph(&g));
    }

    /// # Safety
    /// `e` is a live event of the current callback.
    pub(super) unsafe fn node_create(bt: &BridgeThread, d: &Dispatcher, e: &TraceEventData, instance: u64) {
        let g = &bt.graph;
        let node = if instance != 0 { instance } else { e.unique_id };
        put(&NODES, e.unique_id, node);
        // SAFETY: forwarded.
        let NodeMeta { queue_id, host } = unsafe { node_metadata(bt, d, e) };
        let queue = if queue_id == 0 { 0 } else { queue_of_id(bt, queue_id) };
        let name = payload_name(e);
        // SAFETY: the payload's name is valid during the callback.
        let event = unsafe { virtual_node_event(name) };
        // A virtual node stands for an event (the runtime makes it between its command's node
        // and that command's edges): no command of its own follows; the held node stays held.
        if event != 0 {
            let g = TaskGraphPayload { node, name, event, ..Default::default() };
            emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&g));
            return;
        }
        flush(g);
        {
            let Ok(mut c) = g.cur.try_borrow_mut() else { return };
            // A node made inside the current node's open task (SYCL's `memcpy` makes its `copy
            // usm` command's node so): that task goes on as a late one, its exit keeping its
            // node's queue and name.
            if c.task != 0
                && g.late_task.get() == 0
                && let Ok(mut l) = g.late.try_borrow_mut()
            {
                (l.task, l.node, l.queue, l.enqueue_event, l.signalled) =
                    (c.task, c.node, c.queue, c.enqueue_event, c.signalled);
                l.name = c.name;
                g.late_inner.set(false);
                g.late_task.set(c.task);
            }
            // Field by field, as `NONE` has them, except the held edges past `held` (never read)
            // and the name (written next): a whole new node was a 1 KiB copy per command. The
            // pattern names every field, so a new one cannot be left out.
            let Current {
                node: c_node,
                uid: c_uid,
                name: c_name,
                queue: c_queue,
                event,
                emitted,
                had_edges,
                task,
                edges: _,
                held,
                host: c_host,
                signalled,
                enqueue_event,
            } = &mut *c;
            (*c_node, *c_uid, *c_queue, *c_host) = (node, e.unique_id, queue, host);
            (*event, *emitted, *had_edges, *task, *held) = (NONE.event, false, NONE.had_edges, NONE.task, 0);
            (*signalled, *enqueue_event) = (NONE.signalled, NONE.enqueue_event);
            let name = if name.is_null() {
                &[][..]
            } else {
                // SAFETY: the payload's name is valid during the callback.
                unsafe { CStr::from_ptr(name) }.to_bytes()
            };
            c_name.set(name);
        }
    }

    /// What a node's record takes from its event's metadata.
    #[derive(Clone, Copy)]
    struct NodeMeta {
        /// SYCL's `queue_id` (0 = none).
        queue_id: u64,
        /// A host task (`sycl_device_type` HOST).
        host: bool,
    }

    /// The dispatcher's object ids of the values [`node_metadata`] reads: `queue_id`,
    /// `sycl_device`, `sycl_device_name`, `sycl_device_type` ([`NO_OBJECT`]: absent).
    type NodeMetaIds = [i32; 4];
    const NO_OBJECT: i32 = -1;

    /// A node metadata this thread read: its value ids, what they read, and whether the
    /// `DEVICE` kind was wanted when its device was learnt.
    #[derive(Clone, Copy)]
    struct NodeMetaMemo {
        ids: NodeMetaIds,
        meta: NodeMeta,
        device_kind: bool,
    }

    /// Distinct node metadata a thread keeps: a thread submitting to a few queues in turn (or
    /// making virtual nodes between its commands) still finds its node's values.
    const NODE_METAS: usize = 4;

    /// The node's queue id and host flag; its device learnt (`learn_device`).
    ///
    /// A thread's nodes mostly carry the same values (its queue, its device): the dispatcher
    /// interns metadata values (equal bytes, one object id; an id's bytes never change:
    /// docs/reference/xpti-abi.md §2.3), so a node whose value ids equal the last node's has its
    /// values too. Then no object is looked up through the dispatcher, nothing is copied, and
    /// its device is not learnt again (learning the same device, name and type twice changes
    /// nothing), unless the `DEVICE` kind was not wanted the first time.
    ///
    /// # Safety
    /// `e` is a live event of the current callback.
    unsafe fn node_metadata(bt: &BridgeThread, d: &Dispatcher, e: &TraceEventData) -> NodeMeta {
        let mut ids: NodeMetaIds = [NO_OBJECT; 4];
        // SAFETY: forwarded.
        unsafe {
            for_metadata_ids(&bt.keys, d, e, |k, v| match k {
                Key::QueueId => ids[0] = v,
                Key::SyclDevice => ids[1] = v,
                Key::SyclDeviceName => ids[2] = v,
                Key::SyclDeviceType => ids[3] = v,
                _ => {}
            })
        };
        let device_kind = kind_enabled(Kind::Device);
        let (memo, next) = &bt.graph.node_meta;
        let remembered = memo.iter().find_map(|m| m.get().filter(|m| m.ids == ids && (m.device_kind || !device_kind)));
        if let Some(m) = remembered {
            return m.meta;
        }
        let (mut dev_name, mut dev_type) = ([0u8; DEVICE_NAME_CAP], None);
        let mut meta = NodeMeta { queue_id: 0, host: false };
        let mut device = 0;
        for (i, &id) in ids.iter().enumerate() {
            if id == NO_OBJECT {
                continue;
            }
            // SAFETY: an object id of the event's live metadata map, owned by the dispatcher.
            let o = unsafe { (d.lookup_object)(id) };
            match i {
                0 => meta.queue_id = object_u64(&o),
                1 => device = object_u64(&o),
                2 => object_str(&o, &mut dev_name),
                _ => {
                    let mut b = [0u8; 8];
                    object_str(&o, &mut b);
                    meta.host = b.starts_with(b"HOST\0");
                    dev_type = object_device_type(&o);
                }
            }
        }
        crate::devices::learn_device(device, &dev_name, dev_type);
        let i = next.get() % NODE_METAS;
        memo[i].set(Some(NodeMetaMemo { ids, meta, device_kind }));
        next.set(i + 1);
        meta
    }

    /// An edge into the held-back node is held with it (the node's record must come first);
    /// any other edge is emitted now, after the held node.
    pub(super) fn edge_create(g: &GraphThread, e: &TraceEventData) {
        let (source, target) = (node_of(e.source_id), node_here(g, e.target_id));
        let held = (|| {
            let Ok(mut c) = g.cur.try_borrow_mut() else { return false };
            if c.node != target {
                return false;
            }
            c.had_edges = true;
            if c.emitted || c.held == HELD_EDGES {
                return false;
            }
            let i = c.held;
            c.held += 1;
            c.edges[i].0 = source;
            c.edges[i].1 = e.unique_id;
            // SAFETY: the payload's name is valid during the callback.
            unsafe { copy_name(payload_name(e), &mut c.edges[i].2) };
            true
        })();
        if !held {
            flush(g);
            emit_edge(e.unique_id, source, target, payload_name(e));
        }
    }

    /// The node and queue of the task starting (the node made last on this thread, normally).
    /// A host task's node is emitted now: no UR enqueue inside it will tell more.
    pub(super) fn task_begin(g: &GraphThread, e: &TraceEventData, instance: u64) -> (u64, u64) {
        let node = node_here(g, e.unique_id);
        let (r, host) = match g.cur.try_borrow_mut() {
            Ok(mut c) if c.node == node => {
                c.task = instance;
                g.late_inner.set(false);
                ((node, c.queue), c.host)
            }
            _ => {
                // Not this thread's current node: its record went out without its command's
                // queue; the task's exit record will carry what its UR enqueue tells.
                if let Ok(mut l) = g.late.try_borrow_mut() {
                    (l.task, l.node, l.queue, l.enqueue_event, l.signalled) = (instance, node, 0, 0, false);
                    l.name.set(b"");
                    g.late_inner.set(true);
                    g.late_task.set(instance);
                }
                ((node, 0), false)
            }
        };
        if host {
            flush(g);
        }
        r
    }

    /// The current task's node (id, queue, length of its name as its node record has it, the
    /// name copied to `out`), if `instance` is its task's or its node's.
    // Inlined into its two callers as it was before its late branch (out of line it cost a
    // command about 45 instructions more: callgrind, the `cost` test's `graph`).
    #[inline(always)]
    fn current(g: &GraphThread, instance: u64, out: &mut NameOut) -> Option<(u64, u64, usize)> {
        if instance == 0 {
            return None;
        }
        if g.late_task.get() == instance
            && let Ok(l) = g.late.try_borrow()
            && l.task == instance
        {
            return Some((l.node, l.queue, l.name.copy_to(out)));
        }
        let c = g.cur.try_borrow().ok()?;
        (c.task == instance || c.node == instance).then(|| (c.node, c.queue, c.name.copy_to(out)))
    }

    /// The name copied to `out`, or the event's payload name when empty.
    fn name_or(out: &NameOut, len: usize, e: Option<&TraceEventData>) -> *const c_char {
        if len != 0 { out_ptr(out, len) } else { e.map_or(std::ptr::null(), payload_name) }
    }

    pub(super) fn signal(g: &GraphThread, e: &TraceEventData, instance: u64, event: u64) {
        flush(g);
        with_name_out(g, |out| signal_with(g, out, e, instance, event));
    }

    fn signal_with(g: &GraphThread, out: &mut NameOut, e: &TraceEventData, instance: u64, event: u64) {
        let (node, queue, len) = current(g, instance, out).unwrap_or_else(|| (node_here(g, e.unique_id), 0, 0));
        if let Ok(mut c) = g.cur.try_borrow_mut()
            && c.node == node
        {
            c.signalled = true;
        }
        if g.late_task.get() != 0
            && let Ok(mut l) = g.late.try_borrow_mut()
            && l.node == node
        {
            l.signalled = true;
        }
        put(&EVENTS, event, node);
        let g = TaskGraphPayload { node, name: name_or(out, len, Some(e)), event, queue, ..Default::default() };
        emit_instant(Kind::TaskGraph, task_graph::SIGNAL, Phase::None, Payload::TaskGraph(&g));
    }

    /// The task's exit record (its node's id, queue and name), and the task closed.
    pub(super) fn task_end(
        g: &GraphThread,
        ev: Option<&TraceEventData>,
        instance: u64,
        exit: impl FnOnce(&TaskGraphPayload),
    ) {
        flush(g);
        with_name_out(g, |out| task_end_with(g, out, ev, instance, exit));
    }

    fn task_end_with(
        g: &GraphThread,
        out: &mut NameOut,
        ev: Option<&TraceEventData>,
        instance: u64,
        exit: impl FnOnce(&TaskGraphPayload),
    ) {
        let (node, queue, len) =
            current(g, instance, out).unwrap_or_else(|| (ev.map_or(0, |e| node_here(g, e.unique_id)), 0, 0));
        // The runtime signals no event for some commands (USM copies): the one their UR enqueue
        // returned is their signal, so that a later dependency on it (a virtual node) finds them.
        let unsignalled = (|| {
            if g.late_task.get() == instance
                && let Ok(mut l) = g.late.try_borrow_mut()
                && l.task == instance
            {
                l.task = 0;
                g.late_task.set(0);
                return (!l.signalled && l.enqueue_event != 0).then_some(l.enqueue_event);
            }
            let mut c = g.cur.try_borrow_mut().ok()?;
            if c.task != instance {
                return None;
            }
            c.task = 0;
            (!c.signalled && c.enqueue_event != 0).then_some(c.enqueue_event)
        })();
        if let Some(event) = unsignalled {
            let g = TaskGraphPayload { node, name: name_or(out, len, ev), event, queue, ..Default::default() };
            emit_instant(Kind::TaskGraph, task_graph::SIGNAL, Phase::None, Payload::TaskGraph(&g));
        }
        exit(&TaskGraphPayload { node, name: name_or(out, len, ev), queue, ..Default::default() });
    }

    /// Whether a SYCL task is open on this thread (what [`enqueued`] needs to do anything).
    pub(super) fn task_open(g: &GraphThread) -> bool {
        g.cur.try_borrow().is_ok_and(|c| c.task != 0) || g.late_task.get() != 0
    }

    /// A successful UR enqueue (`p`) on this thread: if a task is open here, its node takes the
    /// enqueue's queue and the command's name as its device activity has it (`name`), the event
    /// it returned is noted, and its wait list becomes edges when the runtime made none.
    ///
    /// # Safety
    /// `p` holds the arguments of the live call, which succeeded (output pointers written).
    pub(super) unsafe fn enqueued(bt: &BridgeThread, p: &ApiCallPayload, name: Option<&CStr>) {
        let g = &bt.graph;
        // SAFETY: forwarded.
        if unsafe { enqueued_late(g, p, name) } {
            return;
        }
        // The three fields used below, not the whole node (over 1 KiB with its held edges).
        let Some((node, had_edges, node_queue)) =
            g.cur.try_borrow().ok().filter(|c| c.task != 0).map(|c| (c.node, c.had_edges, c.queue))
        else {
            return;
        };
        let Some(pos) = enqueue_positions(p.function_id) else { return };
        let arg = |i: u8| p.args.get(usize::from(i)).copied().unwrap_or(0);
        let (queue, event_out, count, list) = (arg(pos.queue), arg(pos.event), arg(pos.count), arg(pos.list));
        // A node already emitted (another record came first on this thread) still gets them
        // for its task's and signal's records.
        if let Ok(mut cur) = g.cur.try_borrow_mut() {
            if cur.queue == 0 {
                cur.queue = queue;
            }
            if let Some(k) = name {
                cur.name.set(k.to_bytes());
            }
        }
        flush(g);
        // SAFETY: `phEvent` of a successful call, when given, was written by the runtime.
        let event = unsafe { read_out(event_out) };
        put(&EVENTS, event, node);
        if let Ok(mut cur) = g.cur.try_borrow_mut()
            && cur.enqueue_event == 0
        {
            cur.enqueue_event = event;
        }
        if had_edges || count == 0 || list == 0 {
            return;
        }
        let q = if node_queue != 0 { node_queue } else { queue };
        for i in 0..(count as usize).min(MAX_OPEN) {
            // SAFETY: `phEventWaitList` has `numEventsInWaitList` entries (UR contract).
            let waited = unsafe { (list as *const u64).add(i).read_unaligned() };
            let Some(source) = get(&EVENTS, waited) else { continue };
            if source == node {
                continue;
            }
            let g = TaskGraphPayload { source, target: node, event: waited, queue: q, ..Default::default() };
            emit_instant(Kind::TaskGraph, task_graph::EDGE_CREATE, Phase::None, Payload::TaskGraph(&g));
        }
    }

    /// [`enqueued`] for a late task ([`GraphThread::late`]), if one is open here: its first
    /// enqueue gives the queue, the command's name and the event (noted for later wait lists).
    ///
    /// # Safety
    /// As [`enqueued`].
    unsafe fn enqueued_late(g: &GraphThread, p: &ApiCallPayload, name: Option<&CStr>) -> bool {
        if g.late_task.get() == 0 {
            return false;
        }
        let Ok(mut l) = g.late.try_borrow_mut() else { return false };
        if l.task == 0 || (!g.late_inner.get() && g.cur.try_borrow().is_ok_and(|c| c.task != 0)) {
            return false;
        }
        if l.queue != 0 {
            return true;
        }
        let Some(pos) = enqueue_positions(p.function_id) else { return true };
        let arg = |i: u8| p.args.get(usize::from(i)).copied().unwrap_or(0);
        // SAFETY: `phEvent` of a successful call, when given, was written by the runtime.
        let event = unsafe { read_out(arg(pos.event)) };
        (l.queue, l.enqueue_event) = (arg(pos.queue), event);
        if let Some(k) = name {
            l.name.set(k.to_bytes());
        }
        put(&EVENTS, event, l.node);
        true
    }
}

/// The event a virtual node stands for: SYCL names the node after the `ur_event_handle_t` it
/// waits on, `virtual_node[<address>]` (and the edge out of it carries the same value as its
/// `event`), the handle a command's `signal` carries.
///
/// # Safety
/// `name` is null or a NUL-terminated string valid during the callback.
unsafe fn virtual_node_event(name: *const c_char) -> u64 {
    // The first byte first: the other nodes' names (most of them) need no `strlen`.
    // SAFETY: a non-null name is a C string (at least its NUL is readable).
    if name.is_null() || unsafe { *name.cast::<u8>() } != b'v' {
        return 0;
    }
    // SAFETY: forwarded.
    parse_virtual_node(unsafe { CStr::from_ptr(name) }.to_bytes())
}

/// `virtual_node[0x7f...]` (or without `0x`) → the address; 0 otherwise.
fn parse_virtual_node(name: &[u8]) -> u64 {
    let Some(rest) = name.strip_prefix(b"virtual_node[") else { return 0 };
    let Some(hex) = rest.strip_suffix(b"]") else { return 0 };
    let hex = hex.strip_prefix(b"0x").unwrap_or(hex);
    std::str::from_utf8(hex).ok().and_then(|h| u64::from_str_radix(h, 16).ok()).unwrap_or(0)
}

/// A string metadata value into `out` (NUL-terminated, cut at its capacity); untouched when the
/// value is not a string.
fn object_str(o: &offtrace_xpti_abi::abi::ObjectData, out: &mut [u8]) {
    if o.data.is_null() || o.type_ != metadata_type::STRING || out.is_empty() {
        return;
    }
    let n = o.size.min(out.len() - 1);
    // SAFETY: the dispatcher's object holds `size` bytes at `data`.
    unsafe { std::ptr::copy_nonoverlapping(o.data.cast::<u8>(), out.as_mut_ptr(), n) };
    out[n] = 0;
}

fn object_device_type(o: &offtrace_xpti_abi::abi::ObjectData) -> Option<offtrace_core::DeviceType> {
    let mut b = [0u8; 16];
    object_str(o, &mut b);
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    crate::devices::sycl_device_type(&b[..end])
}

// ---------------------------------------------------------------------------------------------
// SYCL notifications

/// Metadata keys the bridge reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    KernelName,
    /// `arg<N>`: an `offload_kernel_arg_data_t` (VERBOSE).
    Arg(u8),
    /// `enqueue_kernel_data`: an `offload_kernel_enqueue_data_t` (VERBOSE).
    EnqueueKernelData,
    MemoryPtr,
    MemorySize,
    SyclDeviceName,
    SyclDeviceType,
    QueueId,
    QueueHandle,
    SyclDevice,
    SyclContext,
    IsInorder,
    Other,
}

fn key_of(name: &[u8]) -> Key {
    match name {
        b"kernel_name" => Key::KernelName,
        b"queue_handle" => Key::QueueHandle,
        b"sycl_device" => Key::SyclDevice,
        b"sycl_context" => Key::SyclContext,
        b"is_inorder" => Key::IsInorder,
        b"enqueue_kernel_data" => Key::EnqueueKernelData,
        b"memory_ptr" => Key::MemoryPtr,
        b"memory_size" => Key::MemorySize,
        b"sycl_device_name" => Key::SyclDeviceName,
        b"sycl_device_type" => Key::SyclDeviceType,
        b"queue_id" => Key::QueueId,
        [b'a', b'r', b'g', digits @ ..]
            if !digits.is_empty() && digits.len() <= 2 && digits.iter().all(u8::is_ascii_digit) =>
        {
            Key::Arg(digits.iter().fold(0u8, |n, d| n * 10 + (d - b'0')))
        }
        _ => Key::Other,
    }
}

/// A small direct-mapped cache of metadata key id → [`Key`] in front of `xptiLookupString`.
type KeyCache = [Cell<(u32, Key)>; 32];

/// The [`Key`] of key id `id`, through the thread's `cache` (inlined into the metadata walk: a
/// hit is a load and a compare; a miss looks the name up, out of line).
#[inline(always)]
fn key(cache: &KeyCache, d: &Dispatcher, id: u32) -> Key {
    let slot = (id as usize) % 32;
    let (cached, k) = cache[slot].get();
    if cached == id && id != 0 {
        return k;
    }
    key_miss(cache, d, id)
}

#[cold]
#[inline(never)]
fn key_miss(cache: &KeyCache, d: &Dispatcher, id: u32) -> Key {
    // SAFETY: xptiLookupString returns null or a NUL-terminated string the dispatcher owns.
    let p = unsafe { (d.lookup_string)(id) };
    let k = if p.is_null() { Key::Other } else { key_of(unsafe { CStr::from_ptr(p) }.to_bytes()) };
    cache[(id as usize) % 32].set((id, k));
    k
}

/// Calls `f(key, object)` for each metadata item of `e` the bridge knows.
///
/// # Safety
/// `e` is a live event of the current callback.
unsafe fn for_metadata(
    keys: &KeyCache,
    d: &Dispatcher,
    e: &TraceEventData,
    mut f: impl FnMut(Key, &offtrace_xpti_abi::abi::ObjectData),
) {
    // SAFETY: forwarded; each value is an object id of this map, owned by the dispatcher.
    unsafe { for_metadata_ids(keys, d, e, |k, id| f(k, &(d.lookup_object)(id))) }
}

/// Calls `f(key, object id)` for each metadata item of `e` the bridge knows, without reading
/// the objects.
///
/// # Safety
/// `e` is a live event of the current callback.
unsafe fn for_metadata_ids(keys: &KeyCache, d: &Dispatcher, e: &TraceEventData, mut f: impl FnMut(Key, i32)) {
    let map = &e.reserved.metadata;
    let mut node = map.before_begin_next;
    let mut n = 0;
    while n < map.element_count.min(64) && !node.is_null() {
        // SAFETY: nodes of the event's live metadata map (docs/reference/xpti-abi.md §4.5), bounded by count.
        let nd = unsafe { &*node };
        let k = key(keys, d, nd.key);
        if k != Key::Other {
            f(k, nd.value);
        }
        node = nd.next;
        n += 1;
    }
}

/// An integer metadata value (little-endian, up to 8 bytes).
fn object_u64(o: &offtrace_xpti_abi::abi::ObjectData) -> u64 {
    if o.data.is_null() || o.type_ == metadata_type::STRING {
        return 0;
    }
    let mut b = [0u8; 8];
    let n = o.size.min(8);
    // SAFETY: the dispatcher's object holds `size` bytes at `data`.
    unsafe { std::ptr::copy_nonoverlapping(o.data.cast::<u8>(), b.as_mut_ptr(), n) };
    u64::from_le_bytes(b)
}

/// The event's payload name (valid during the callback), or null.
fn payload_name(e: &TraceEventData) -> *const c_char {
    if e.flags & event_flags::PAYLOAD_AVAILABLE != 0 && !e.reserved.payload.is_null() {
        // SAFETY: PayloadAvailable and non-null: the payload lives as long as the event.
        unsafe { (*e.reserved.payload).name }
    } else {
        std::ptr::null()
    }
}

/// # Safety
/// `raw` holds the arguments of a live notification on the `sycl` stream.
#[inline(never)]
unsafe fn sycl(raw: &Raw) {
    let Some(d) = DISPATCHER.get() else { return };
    let bt = bridge_thread();
    // SAFETY: a non-null event of a live callback is valid for the callback.
    let ev = unsafe { raw.event.as_ref() };
    match raw.trace_type {
        tt::QUEUE_CREATE | tt::QUEUE_DESTROY
            if kind_enabled(Kind::Queue) || kind_enabled(Kind::TaskGraph) || kind_enabled(Kind::Device) =>
        {
            let Some(e) = ev else { return };
            let mut q = QueuePayload::default();
            let (mut id, mut dev_name, mut dev_type) = (0u64, [0u8; DEVICE_NAME_CAP], None);
            // SAFETY: `e` is live.
            unsafe {
                for_metadata(&bt.keys, d, e, |k, o| match k {
                    Key::QueueHandle => q.queue = object_u64(o),
                    Key::QueueId => id = object_u64(o),
                    Key::SyclDevice => q.device = object_u64(o),
                    Key::SyclContext => q.context = object_u64(o),
                    Key::IsInorder => q.flags |= u64::from(object_u64(o) != 0) * queue_flags::IN_ORDER,
                    Key::SyclDeviceName => object_str(o, &mut dev_name),
                    Key::SyclDeviceType => dev_type = object_device_type(o),
                    _ => {}
                })
            };
            // Its UR queue was created first, with the properties the program asked for.
            q.flags |= queue_flags_given(q.queue);
            if raw.trace_type == tt::QUEUE_CREATE {
                crate::devices::learn_device(q.device, &dev_name, dev_type);
                crate::devices::learn_context(q.context, q.device);
                remember_queue_id(id, q.queue);
            }
            if kind_enabled(Kind::Queue) {
                let op = if raw.trace_type == tt::QUEUE_CREATE { sycl_queue::CREATE } else { sycl_queue::DESTROY };
                emit_instant(Kind::Queue, op, Phase::None, Payload::Queue(&q));
            }
        }
        tt::NODE_CREATE if kind_enabled(Kind::TaskGraph) => {
            let Some(e) = ev else { return };
            // SAFETY: `e` is live.
            unsafe { graph::node_create(bt, d, e, raw.instance) };
        }
        tt::EDGE_CREATE if kind_enabled(Kind::TaskGraph) => {
            let Some(e) = ev else { return };
            graph::edge_create(&bt.graph, e);
        }
        tt::SIGNAL if kind_enabled(Kind::TaskGraph) => {
            let Some(e) = ev else { return };
            graph::signal(&bt.graph, e, raw.instance, raw.user_data as u64);
        }
        tt::TASK_BEGIN => {
            if let Some(e) = ev {
                if kind_enabled(Kind::KernelDispatch) {
                    remember_task(bt, e, raw.instance);
                }
                if kind_enabled(Kind::TaskGraph) {
                    let (node, queue) = graph::task_begin(&bt.graph, e, raw.instance);
                    let g = TaskGraphPayload { node, name: payload_name(e), queue, ..Default::default() };
                    let token = emit_enter(Kind::TaskGraph, task_graph::TASK, Payload::TaskGraph(&g));
                    push_open(bt, OpenTag::Task, raw.instance, token);
                }
            }
        }
        tt::TASK_END => {
            let t = &bt.task;
            if t.instance.get() == raw.instance {
                if !t.dispatched.get() && !UR_SEEN.load(Ordering::Relaxed) && kind_enabled(Kind::KernelDispatch) {
                    // SAFETY: the task's event is live until this notification returns.
                    unsafe { resolve_task(bt) };
                    dispatch_without_ur(t);
                }
                t.instance.set(0);
                t.event.set(std::ptr::null());
            }
            if let Some(token) = pop_open(bt, OpenTag::Task, raw.instance) {
                graph::task_end(&bt.graph, ev, raw.instance, |g| emit_exit(token, Payload::TaskGraph(g)));
            }
        }
        tt::WAIT_BEGIN | tt::BARRIER_BEGIN if kind_enabled(Kind::Sync) => {
            let s = SyncPayload { object: ev.map_or(0, |e| e.unique_id), event_count: 0, ..Default::default() };
            let (tag, op) = if raw.trace_type == tt::WAIT_BEGIN {
                (OpenTag::Wait, sync_op::WAIT)
            } else {
                (OpenTag::Barrier, sync_op::BARRIER)
            };
            let token = emit_enter(Kind::Sync, op, Payload::Sync(&s));
            push_open(bt, tag, raw.instance, token);
        }
        tt::WAIT_END | tt::BARRIER_END => {
            let tag = if raw.trace_type == tt::WAIT_END { OpenTag::Wait } else { OpenTag::Barrier };
            if let Some(token) = pop_open(bt, tag, raw.instance) {
                let s = SyncPayload { object: ev.map_or(0, |e| e.unique_id), event_count: 0, ..Default::default() };
                emit_exit(token, Payload::Sync(&s));
            }
        }
        _ => {}
    }
}

/// The dispatch of a command group when no UR calls are traced: kernel name, VERBOSE `arg<N>`
/// values and global size from the task's metadata; queue and kernel handles unknown (0).
fn dispatch_without_ur(t: &PendingTask) {
    let (Ok(name), Ok(args)) = (t.name.try_borrow(), t.args.try_borrow()) else { return };
    let text = &name[..name.iter().position(|&c| c == 0).unwrap_or(0)];
    // VERBOSE sends `enqueue_kernel_data` for kernels only; otherwise tell the runtime's own
    // command-group names of non-kernel commands apart (docs/reference/sycl-runtime.md §5).
    const NOT_KERNELS: [&[u8]; 7] =
        [b"fill", b"host task", b"memcpy", b"copy ", b"prefetch", b"mem advise", b"barrier"];
    let kernel = args.2 != [0; 3] || !NOT_KERNELS.iter().any(|p| text.starts_with(p));
    if text.is_empty() || !kernel {
        return;
    }
    let mut k = KernelDispatchPayload {
        kernel_name: name.as_ptr().cast(),
        kernel_arg_count: args.1,
        kernel_args: args.0,
        global_size: args.2,
        work_dim: args.2.iter().rposition(|&g| g > 1).map_or(1, |i| i as u32 + 1),
        ..Default::default()
    };
    if args.2 == [0; 3] {
        k.work_dim = 0;
    }
    emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&k));
}

/// USM allocations and frees when no UR calls are traced: `sycl.experimental.mem_alloc`
/// `mem_alloc_end` / `mem_release_begin` with `memory_ptr`, `memory_size`, `sycl_device_name`.
/// Host memory is recognised (`"Host"`, or user data `"malloc_host"`); device and shared
/// memory cannot be told apart there and are reported as UNKNOWN.
///
/// # Safety
/// `raw` holds the arguments of a live `sycl.experimental.mem_alloc` notification.
#[inline(never)]
unsafe fn usm_without_ur(raw: &Raw) {
    let Some(d) = DISPATCHER.get() else { return };
    // SAFETY: a non-null event of a live callback is valid for the callback.
    let Some(e) = (unsafe { raw.event.as_ref() }) else { return };
    let (mut ptr, mut size, mut host) = (0u64, 0u64, false);
    // SAFETY: `e` is live.
    unsafe {
        for_metadata(&bridge_thread().keys, d, e, |k, o| match k {
            Key::MemoryPtr => ptr = object_u64(o),
            Key::MemorySize => size = object_u64(o),
            Key::SyclDeviceName if !o.data.is_null() && o.type_ == metadata_type::STRING => {
                // SAFETY: the object holds `size` bytes at `data`.
                host = std::slice::from_raw_parts(o.data.cast::<u8>(), o.size) == b"Host";
            }
            _ => {}
        })
    };
    if raw.trace_type == tt::MEM_RELEASE_BEGIN {
        if ptr != 0 {
            emit_memory_free(ptr);
        }
        return;
    }
    if !raw.user_data.is_null() {
        let mut b = [0u8; 12];
        // Defensive: the user data is a C string for USM notifications (docs/reference/sycl-runtime.md §5).
        let n = safe_read::read_bytes(raw.user_data as usize, &mut b);
        host |= n >= 12 && &b[..12] == b"malloc_host\0";
    }
    let memory_type = if host { MemoryType::Host } else { MemoryType::Unknown };
    alloc(ptr, size, memory_type, 0);
}

/// Notes the task starting on this thread, for the dispatch inside it: a few stores; its
/// metadata (kernel name, VERBOSE arguments) is read by [`resolve_task`] only if a dispatch
/// needs it (a kernel whose UR name is unknown, or no UR calls at all).
fn remember_task(bt: &BridgeThread, e: &TraceEventData, instance: u64) {
    let t = &bt.task;
    t.event.set(e);
    t.resolved.set(false);
    t.dispatched.set(false);
    t.instance.set(instance);
}

/// Reads the open task's metadata into `task.name` and `task.args`, once per task.
///
/// # Safety
/// `bt.task.event` is null or the event of a task open on this thread (live until its `task_end`).
unsafe fn resolve_task(bt: &BridgeThread) {
    let t = &bt.task;
    if t.resolved.get() {
        return;
    }
    t.resolved.set(true);
    let (Some(d), ev) = (DISPATCHER.get(), t.event.get()) else { return };
    // SAFETY: contract.
    let Some(e) = (unsafe { ev.as_ref() }) else { return };
    // SAFETY: forwarded.
    unsafe { read_task_metadata(bt, d, e) };
}

/// # Safety
/// `e` is a live event.
unsafe fn read_task_metadata(bt: &BridgeThread, d: &Dispatcher, e: &TraceEventData) {
    let t = &bt.task;
    {
        // Busy only if a tool's dispatch callback started a SYCL task from inside it.
        let Ok(mut name) = t.name.try_borrow_mut() else { return };
        let Ok(mut args) = t.args.try_borrow_mut() else { return };
        name[0] = 0;
        *args = ([0; MAX_KERNEL_ARGS], 0, [0; 3]);
        let ur_seen = UR_SEEN.load(Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe {
            for_metadata(&bt.keys, d, e, |k, o| match k {
                Key::KernelName if !o.data.is_null() && o.type_ == metadata_type::STRING => {
                    // SAFETY: the object holds `size` bytes at `data`.
                    let raw = std::slice::from_raw_parts(o.data.cast::<u8>(), o.size);
                    let raw = &raw[..raw.iter().position(|&c| c == 0).unwrap_or(raw.len())];
                    // The same readable name as the UR path gives (`_ZTS4axpy` → `axpy`).
                    let readable = readable_kernel_name(raw);
                    let n = readable.len().min(NAME_CAP - 1);
                    name[..n].copy_from_slice(&readable[..n]);
                    name[n] = 0;
                }
                Key::Arg(i) if !ur_seen && usize::from(i) < MAX_KERNEL_ARGS && o.size >= 24 && !o.data.is_null() => {
                    // offload_kernel_arg_data_t { int type; void* pointer; int size; int index }
                    let mut b = [0u8; 24];
                    // SAFETY: the object holds `size` ≥ 24 bytes at `data`.
                    std::ptr::copy_nonoverlapping(o.data.cast::<u8>(), b.as_mut_ptr(), 24);
                    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
                    let (ty, ptr, size) = (b[0], word(8), u32::from_le_bytes(b[16..20].try_into().unwrap_or([0; 4])));
                    // `pointer` points at the argument's value in the runtime's command group;
                    // read it defensively (never a fault) for pointers (3) and small values.
                    let v = if (ty == 3 || size <= 8) && ptr != 0 {
                        safe_read::read_u64(ptr as usize).unwrap_or(0)
                    } else {
                        0
                    };
                    let v = if size > 0 && size < 8 { v & ((1u64 << (size * 8)) - 1) } else { v };
                    args.0[usize::from(i)] = v;
                    args.1 = args.1.max(u32::from(i) + 1);
                }
                Key::EnqueueKernelData if !ur_seen && o.size >= 24 && !o.data.is_null() => {
                    // offload_kernel_enqueue_data_t { size_t global[3]; size_t local[3]; ... }
                    for (j, g) in args.2.iter_mut().enumerate() {
                        // SAFETY: the object holds ≥ 24 bytes at `data`.
                        *g = o.data.cast::<u64>().add(j).read_unaligned();
                    }
                }
                _ => {}
            })
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_nodes_name_their_event() {
        assert_eq!(parse_virtual_node(b"virtual_node[0x5581a2b3c4d0]"), 0x5581_a2b3_c4d0);
        assert_eq!(parse_virtual_node(b"virtual_node[5581a2b3c4d0]"), 0x5581_a2b3_c4d0);
        assert_eq!(parse_virtual_node(b"virtual_node[]"), 0);
        assert_eq!(parse_virtual_node(b"memcpy"), 0);
        assert_eq!(parse_virtual_node(b"virtual_node[0xzz]"), 0);
    }

    /// `ur_queue_flags_t` values as `ur_api.h` has them (UR_BIT(n)).
    #[test]
    fn ur_queue_flags_map_to_the_record_models() {
        let f = queue_flags_from_ur;
        assert_eq!(f(0), 0);
        assert_eq!(f(1 << 0), 0, "out-of-order is SYCL's is_inorder to say");
        assert_eq!(f(1 << 1), queue_flags::PROFILING);
        assert_eq!(f(1 << 2), queue_flags::ON_DEVICE);
        assert_eq!(f(1 << 3), queue_flags::ON_DEVICE);
        assert_eq!(f(1 << 4 | 1 << 7 | 1 << 8), 0, "discard events, submission modes: not in the model");
        assert_eq!(f(1 << 5), queue_flags::PRIORITY_LOW);
        assert_eq!(f(1 << 6 | 1 << 1), queue_flags::PRIORITY_HIGH | queue_flags::PROFILING);
    }

    #[test]
    fn kernel_arg_properties_layout_matches_ur_api_h() {
        assert_eq!(std::mem::size_of::<KernelArgProperties>(), 48);
        assert_eq!(std::mem::offset_of!(KernelArgProperties, arg_type), 16);
        assert_eq!(std::mem::offset_of!(KernelArgProperties, index), 20);
        assert_eq!(std::mem::offset_of!(KernelArgProperties, size), 24);
        assert_eq!(std::mem::offset_of!(KernelArgProperties, value), 32);
    }

    #[test]
    fn ur_operations_are_sorted_with_descriptors() {
        let ops = ur_operations();
        assert!(ops.windows(2).all(|w| w[0].id < w[1].id));
        let memcpy = ops.iter().find(|o| o.name == "urEnqueueUSMMemcpy").expect("memcpy");
        let names: Vec<_> = memcpy.args.iter().map(|a| (a.name, a.format)).collect();
        assert_eq!(
            names[..3],
            [("hQueue", ArgFormat::Pointer), ("blocking", ArgFormat::Bool), ("pDst", ArgFormat::Pointer)]
        );
        let kc = ops.iter().find(|o| o.name == "urKernelCreate").expect("kernel create");
        assert_eq!(kc.args[1].format, ArgFormat::CString);
    }

    /// 70 nested UR calls on one thread, ended in reverse order except two swapped: every
    /// delivered enter gets its exit (the services deliver at most 64 open calls per thread:
    /// the 6 deeper ones are not delivered at all), and the effects of `urUSMDeviceAlloc` /
    /// `urUSMFree` reach the allocation table.
    #[test]
    fn nested_calls_pair_beyond_the_stack_and_allocations_are_tracked() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;
        let _ = register_kind_operations(Kind::UrApi, ur_operations());
        let (enters, exits) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let ctx = offtrace_core::create_context().expect("context");
        let (e, x) = (enters.clone(), exits.clone());
        offtrace_core::configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, _| {
            let c = if r.phase == Phase::Enter as u32 { &e } else { &x };
            c.fetch_add(1, Ordering::Relaxed);
        })
        .expect("configure");
        offtrace_core::start_context(ctx).expect("start");

        // urUSMDeviceAlloc(hContext, hDevice, pUSMDesc, pool, size, ppMem)
        let alloc = ur::function_by_name("urUSMDeviceAlloc").expect("alloc");
        let (h, size, mem) = (0x10u64, 4096u64, 0x7000_0000u64);
        let pp_mem = &mem as *const u64 as u64;
        let params: [*const c_void; 6] = [
            (&h as *const u64).cast(),
            (&h as *const u64).cast(),
            (&h as *const u64).cast(),
            (&h as *const u64).cast(),
            (&size as *const u64).cast(),
            (&pp_mem as *const u64).cast(),
        ];
        let ok: i32 = 0;
        let fwa = FunctionWithArgs {
            function_id: alloc.id,
            function_name: c"urUSMDeviceAlloc".as_ptr(),
            args_data: params.as_ptr().cast_mut().cast(),
            ret_data: (&ok as *const i32).cast_mut().cast(),
            user_data: std::ptr::null_mut(),
        };
        let raw = |trace_type, instance| Raw {
            trace_type,
            parent: std::ptr::null(),
            event: std::ptr::null(),
            instance,
            user_data: (&fwa as *const FunctionWithArgs).cast(),
        };
        set_active(true);
        for i in 1..=70 {
            // SAFETY: the test builds valid notifications (live events and user data).
            unsafe { on_notification(StreamKind::UrCall, 1, c"ur.call", &raw(tt::FUNCTION_WITH_ARGS_BEGIN, i)) };
        }
        let mut order: Vec<u64> = (1..=70).rev().collect();
        order.swap(10, 11);
        for i in order {
            // SAFETY: the test builds valid notifications (live events and user data).
            unsafe { on_notification(StreamKind::UrCall, 1, c"ur.call", &raw(tt::FUNCTION_WITH_ARGS_END, i)) };
        }
        assert_eq!(offtrace_core::lookup_allocation(mem + 100), Some((mem, 4096, MemoryType::Device)));
        // urUSMFree(hContext, pMem)
        let free = ur::function_by_name("urUSMFree").expect("free");
        let free_params: [*const c_void; 2] = [(&h as *const u64).cast(), (&mem as *const u64).cast()];
        let ffree = FunctionWithArgs {
            function_id: free.id,
            function_name: c"urUSMFree".as_ptr(),
            args_data: free_params.as_ptr().cast_mut().cast(),
            ..fwa
        };
        let begin =
            Raw { user_data: (&ffree as *const FunctionWithArgs).cast(), ..raw(tt::FUNCTION_WITH_ARGS_BEGIN, 99) };
        // SAFETY: the test builds valid notifications (live events and user data).
        unsafe { on_notification(StreamKind::UrCall, 1, c"ur.call", &begin) };
        // SAFETY: the test builds valid notifications (live events and user data).
        unsafe {
            on_notification(StreamKind::UrCall, 1, c"ur.call", &Raw { trace_type: tt::FUNCTION_WITH_ARGS_END, ..begin })
        };
        set_active(false);
        offtrace_core::destroy_context(ctx).expect("destroy");
        assert_eq!(offtrace_core::lookup_allocation(mem), None);
        assert_eq!((enters.load(Ordering::Relaxed), exits.load(Ordering::Relaxed)), (65, 65));
        assert_eq!(bridge_thread().open.len.get(), 0);
    }

    #[test]
    fn kernel_args_from_launch_properties() {
        let value: u32 = 7;
        let props = [
            KernelArgProperties {
                stype: 0,
                _pad: 0,
                p_next: std::ptr::null(),
                arg_type: arg_type::POINTER,
                index: 0,
                size: 8,
                value: [0x1000, 0],
            },
            KernelArgProperties {
                stype: 0,
                _pad: 0,
                p_next: std::ptr::null(),
                arg_type: arg_type::VALUE,
                index: 2,
                size: 4,
                value: [&value as *const u32 as u64, 0],
            },
            KernelArgProperties {
                stype: 0,
                _pad: 0,
                p_next: std::ptr::null(),
                arg_type: arg_type::POINTER,
                index: 99,
                size: 8,
                value: [1, 0],
            },
        ];
        let mut out = [0u64; MAX_KERNEL_ARGS];
        // SAFETY: `props` has 3 live entries; the value argument points at `value`.
        let n = unsafe { kernel_args(props.as_ptr() as u64, 3, &mut out) };
        assert_eq!(n, 3);
        assert_eq!(out[..3], [0x1000, 0, 7]);
    }
}
