//! The program's event wait lists as the trace's task graph (`TASK_GRAPH` nodes and edges), so
//! that readers which know no runtime (`offtrace report`'s longest chain, SQLite's
//! `task_graph`) see an OpenCL program's cross-queue dependencies as the SYCL backend's.
//!
//! An enqueue whose wait list is not empty gets a node (id: its command's correlation id with
//! [`NODE_TAG`], name: what its device activity is named, its queue) and one edge per entry of
//! the list, from the waited event's node to it. A waited event's node is emitted the first
//! time something waits on it (before its edge): a command's, when the program asked for the
//! command's event ([`produced`] noted it; node id from that command's correlation, its queue
//! and name); a user event's (`clCreateUserEvent`: named `user event`, no queue, the event);
//! or, for an event the layer did not see made (before it was loaded, or enqueued inside
//! another backend's call), a node standing for that event (`event`, its queue as the runtime
//! says, the event). A marker or barrier without a wait list (it waits on everything before it
//! in its queue) and `clWaitForEvents` (a host wait) make no edges.
//!
//! Cost: nothing for a command with an empty wait list whose event the program does not take
//! (the path of issue 13's many small kernels is unchanged). A command whose event the program
//! takes: one relaxed load, one mutex and one map insert; `clReleaseEvent`: one relaxed load,
//! and a mutex and removal while the map holds events. Memory: one entry per event the program
//! holds, removed at its `clReleaseEvent`; at most [`PRODUCERS_MAX`] (a program that never
//! releases its events starts the map over; a wait on a forgotten event then gets an event's
//! node).

use rustc_hash::FxHashMap as HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use offtrace_core::{Kind, Payload, Phase, TaskGraphPayload, emit_instant, kind_enabled, task_graph};

use crate::api::next;
use crate::call::CL_SUCCESS;

/// Set on every OpenCL node id: the rest is the command's correlation id, which no SYCL node
/// id (an event's uid64 or a small instance number) in the same trace can then be.
pub const NODE_TAG: u64 = 1 << 63;
/// Events remembered at most (see the module docs).
const PRODUCERS_MAX: usize = 1 << 16;
/// Wait-list entries read per enqueue at most (a longer list is a program error).
const WAITS_MAX: usize = 4096;

const CL_EVENT_COMMAND_QUEUE: u32 = 0x11D0;
const CL_EVENT_COMMAND_TYPE: u32 = 0x11D1;
const CL_COMMAND_USER: u64 = 0x1204;

/// What a waited event's node is.
#[derive(Clone, Copy)]
struct Producer {
    node: u64,
    queue: u64,
    /// A process-lifetime C string.
    name: usize,
    /// The event a node stands for (a user event, an unknown one); 0 for a command.
    event: u64,
    emitted: bool,
}

static PRODUCERS: Mutex<Option<HashMap<u64, Producer>>> = Mutex::new(None);
/// Whether `PRODUCERS` may hold events (a hint for `clReleaseEvent`: the mutex is the truth).
static ANY: AtomicBool = AtomicBool::new(false);

fn lock() -> std::sync::MutexGuard<'static, Option<HashMap<u64, Producer>>> {
    PRODUCERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether some context wants the task graph (one relaxed load).
#[inline(always)]
pub(crate) fn wanted() -> bool {
    kind_enabled(Kind::TaskGraph)
}

fn insert(event: u64, p: Producer) {
    let mut g = lock();
    let m = g.get_or_insert_with(HashMap::default);
    if m.len() >= PRODUCERS_MAX && !m.contains_key(&event) {
        m.clear();
    }
    m.insert(event, p);
    // Relaxed: a hint; the map's mutex is the truth.
    ANY.store(true, Ordering::Relaxed);
}

/// The program took the event of the command `correlation` (it may wait on it later); `emitted`:
/// the command's node is in the trace already (it had a wait list itself).
pub(crate) fn produced(event: u64, correlation: u64, queue: u64, name: *const c_char, emitted: bool) {
    let p = Producer { node: correlation | NODE_TAG, queue, name: name as usize, event: 0, emitted };
    insert(event, p);
}

/// The program released `event`: a handle the runtime may give a later event.
#[inline(always)]
pub(crate) fn forget(event: *mut c_void) {
    // Relaxed: a hint; the map's mutex is the truth.
    if ANY.load(Ordering::Relaxed) {
        forget_slow(event as u64);
    }
}

#[cold]
#[inline(never)]
fn forget_slow(event: u64) {
    if let Some(m) = lock().as_mut() {
        m.remove(&event);
    }
}

/// The name of a command as its device activity names it: the kernel's name (`kernel` when
/// unknown), else the operation's name in core's table (what readers show for the activity).
pub(crate) fn command_name(kind: Kind, op: u32, kernel_name: *const c_char) -> *const c_char {
    let fallback: &'static CStr = match kind {
        Kind::KernelDispatch if !kernel_name.is_null() => return kernel_name,
        Kind::KernelDispatch => c"kernel",
        Kind::MemoryCopy => c"copy",
        Kind::MemoryFill => c"fill",
        _ => c"command",
    };
    let names = operation_names(kind);
    names.binary_search_by_key(&op, |&(id, _)| id).map_or(fallback.as_ptr(), |i| names[i].1.as_ptr())
}

/// Core's operation names of the command kinds whose nodes have no kernel name, as C strings
/// (a node's name is one), made once; sorted by id as core's tables are.
fn operation_names(kind: Kind) -> &'static [(u32, CString)] {
    const KINDS: [Kind; 3] = [Kind::MemoryCopy, Kind::MemoryFill, Kind::Sync];
    static NAMES: OnceLock<[Vec<(u32, CString)>; 3]> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        KINDS.map(|k| k.operations().iter().filter_map(|o| Some((o.id, CString::new(o.name).ok()?))).collect())
    });
    KINDS.iter().position(|&k| k == kind).map_or(&[], |i| &names[i])
}

fn event_info(event: u64, param: u32) -> Option<u64> {
    let f = next().clGetEventInfo?;
    let mut v = 0u64;
    // SAFETY: an 8-byte out value (cl_command_type is 4 bytes, a queue 8: both fit, the rest
    // stays 0 on little-endian); the runtime validates the event and answers an error for a
    // bad one.
    let r = unsafe { f(event as *mut c_void, param, 8, (&raw mut v).cast(), ptr::null_mut()) };
    (r == CL_SUCCESS).then_some(v)
}

/// The node of an event the layer has no command for: a user event's or one standing for it.
fn stand_in(event: u64) -> Producer {
    let user = event_info(event, CL_EVENT_COMMAND_TYPE).is_some_and(|t| t & 0xffff_ffff == CL_COMMAND_USER);
    let (name, queue) =
        if user { (c"user event", 0) } else { (c"event", event_info(event, CL_EVENT_COMMAND_QUEUE).unwrap_or(0)) };
    let node = offtrace_core::next_correlation_id() | NODE_TAG;
    Producer { node, queue, name: name.as_ptr() as usize, event, emitted: false }
}

fn emit_node(p: &Producer) {
    let g = TaskGraphPayload {
        node: p.node,
        name: p.name as *const c_char,
        queue: p.queue,
        event: p.event,
        ..Default::default()
    };
    emit_instant(Kind::TaskGraph, task_graph::NODE_CREATE, Phase::None, Payload::TaskGraph(&g));
}

/// The command `correlation` on `queue`, named `name`, waits on the `count` events at `list`:
/// its node, each waited event's node if not in the trace yet, one edge per entry. Inside the
/// enqueue call, after the command's own record. Returns whether it emitted the command's node.
///
/// # Safety
/// `list` is null or holds `count` events (the enqueue that just succeeded read them so).
pub(crate) unsafe fn waits(
    correlation: u64,
    queue: u64,
    name: *const c_char,
    count: u32,
    list: *const *mut c_void,
) -> bool {
    if count == 0 || list.is_null() {
        return false;
    }
    let n = (count as usize).min(WAITS_MAX);
    // SAFETY: the caller guarantees `count` readable entries; n <= count.
    let waited = unsafe { std::slice::from_raw_parts(list, n) };
    // Under the lock only look-ups: emitting may run a tool's callback, which may call OpenCL
    // (`clReleaseEvent` takes this lock).
    let mut sources: Vec<(u64, Option<Producer>)> = Vec::with_capacity(n);
    {
        let mut g = lock();
        for &e in waited {
            // (node, the producer when its node is not in the trace yet); node 0: not known.
            let known = g.as_mut().and_then(|m| m.get_mut(&(e as u64))).map(|p| {
                let first = !p.emitted;
                p.emitted = true;
                (p.node, first.then_some(*p))
            });
            sources.push(known.unwrap_or((0, None)));
        }
    }
    let mut fresh: Vec<Producer> = Vec::new();
    for (i, &e) in waited.iter().enumerate() {
        match sources[i] {
            (0, _) => {
                // Not known: a user event's node or one standing for the event, remembered so
                // that later waits on it share the node (the same event twice here: one node).
                let e = e as u64;
                let p = match fresh.iter().find(|p| p.event == e) {
                    Some(p) => *p,
                    None => {
                        let p = stand_in(e);
                        emit_node(&p);
                        fresh.push(p);
                        p
                    }
                };
                sources[i].0 = p.node;
            }
            (_, Some(p)) => emit_node(&p),
            _ => {}
        }
    }
    for p in fresh {
        insert(p.event, Producer { emitted: true, ..p });
    }
    let node = correlation | NODE_TAG;
    emit_node(&Producer { node, queue, name: name as usize, event: 0, emitted: true });
    for (i, &e) in waited.iter().enumerate() {
        let g = TaskGraphPayload { source: sources[i].0, target: node, event: e as u64, queue, ..Default::default() };
        emit_instant(Kind::TaskGraph, task_graph::EDGE_CREATE, Phase::None, Payload::TaskGraph(&g));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(event: u64) -> Option<Producer> {
        lock().as_ref().and_then(|m| m.get(&event).copied())
    }

    /// The map holds at most `PRODUCERS_MAX` events (a program that never releases its events
    /// starts it over), and a released event is forgotten (its handle may come back for another).
    #[test]
    fn the_event_map_is_bounded_and_forgets_released_events() {
        let base = 0x7e00_0000_0000u64;
        for i in 0..=PRODUCERS_MAX as u64 {
            produced(base + i, 10 + i, 0x50, c"k".as_ptr(), false);
        }
        assert!(lock().as_ref().map_or(0, |m| m.len()) <= PRODUCERS_MAX);
        let last = base + PRODUCERS_MAX as u64;
        let p = known(last).expect("the newest event is kept");
        assert_eq!((p.node, p.queue, p.emitted), ((10 + PRODUCERS_MAX as u64) | NODE_TAG, 0x50, false));
        forget(last as *mut c_void);
        assert!(known(last).is_none(), "released");
    }

    #[test]
    fn a_command_node_is_named_as_its_device_activity() {
        // SAFETY: `command_name` returns a static C string or the one it was given.
        let name =
            |k, op, kn: *const c_char| unsafe { CStr::from_ptr(command_name(k, op, kn)) }.to_str().expect("UTF-8");
        assert_eq!(name(Kind::KernelDispatch, 0, c"scale".as_ptr()), "scale");
        assert_eq!(name(Kind::KernelDispatch, 0, ptr::null()), "kernel");
        assert_eq!(name(Kind::MemoryCopy, offtrace_core::memory_copy::BUFFER_WRITE, ptr::null()), "buffer_write");
        assert_eq!(name(Kind::MemoryFill, offtrace_core::memory_fill::BUFFER_FILL, ptr::null()), "buffer_fill");
        assert_eq!(name(Kind::Sync, offtrace_core::sync_op::MARKER, ptr::null()), "marker");
        // The names the core gives these operations (what readers show for the activity).
        for (kind, op) in
            [(Kind::MemoryCopy, 0..15), (Kind::MemoryFill, 0..3)].into_iter().flat_map(|(k, r)| r.map(move |o| (k, o)))
        {
            let core = kind.operations().iter().find(|o| o.id == op).map(|o| o.name);
            assert_eq!(core, Some(name(kind, op, ptr::null())), "{kind:?} {op}");
        }
    }
}
