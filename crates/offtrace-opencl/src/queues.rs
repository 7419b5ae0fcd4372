//! The queues the program created through the layer: what the program asked for (its
//! properties, whether it wanted profiling, its Codeplay counter configuration) versus what the
//! layer gave the runtime (profiling always on).
//!
//! Looked up once per enqueue (read lock) and once per profiling query of the program. An entry
//! is removed when the release that drops the program's last reference succeeds, so a later
//! queue at the same address starts clean. The program's references are counted here (its
//! retains and releases pass through the layer), not read from the runtime: the runtime's
//! `CL_QUEUE_REFERENCE_COUNT` also counts the commands still outstanding (PoCL's and Intel's
//! events hold their queue), and the layer keeps out-of-order commands' events until its harvest
//! thread reports them, so at the program's last release of such a queue it is above 1.

use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::sync::{Arc, RwLock};

use crate::counters::CounterSet;
use crate::in_order::Fifo;

#[derive(Clone, Debug)]
pub(crate) struct QueueInfo {
    pub device: usize,
    /// `CL_QUEUE_PROPERTIES` as the program asked for them.
    pub app_properties: u64,
    /// The program's `cl_queue_properties` list (for `CL_QUEUE_PROPERTIES_ARRAY`), if it gave one.
    pub app_property_list: Option<Vec<u64>>,
    pub counters: Option<Arc<CounterSet>>,
    /// Created nested inside another backend's call (a UR queue's `cl_command_queue`): that
    /// backend reports the queue, the layer emits no QUEUE records for it.
    pub nested: bool,
    /// In-order queues without counters: the commands awaiting their device times
    /// (`in_order.rs`); the others complete command by command (`enqueue.rs`).
    pub fifo: Option<Arc<Fifo>>,
    /// The program's references: 1 at creation, one more per `clRetainCommandQueue`, one less
    /// per `clReleaseCommandQueue` (successful calls).
    pub app_refs: u32,
}

/// What an enqueue needs of its queue, from one look-up.
#[derive(Default)]
pub(crate) struct QueueView {
    pub device: usize,
    pub fifo: Option<Arc<Fifo>>,
}

static QUEUES: RwLock<Option<HashMap<usize, QueueInfo>>> = RwLock::new(None);

/// Whether any queue was ever created with Codeplay counters (one relaxed load).
static ANY_COUNTERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[inline]
pub(crate) fn any_counters() -> bool {
    // Relaxed: a hint that skips work; the queue table (under its lock) is the truth.
    ANY_COUNTERS.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn insert(queue: *mut c_void, info: QueueInfo) {
    if info.counters.is_some() {
        ANY_COUNTERS.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    QUEUES.write().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::default).insert(queue as usize, info);
}

/// The program retained the queue.
pub(crate) fn retain(queue: *mut c_void) {
    if let Some(q) =
        QUEUES.write().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|m| m.get_mut(&(queue as usize)))
    {
        q.app_refs = q.app_refs.saturating_add(1);
    }
}

/// The program released the queue: when that was its last reference, the entry is removed and
/// returned (the queue is the program's no more: its destroy record is due).
pub(crate) fn release(queue: *mut c_void) -> Option<QueueInfo> {
    let removed = {
        let mut guard = QUEUES.write().unwrap_or_else(|e| e.into_inner());
        let m = guard.as_mut()?;
        let q = m.get_mut(&(queue as usize))?;
        q.app_refs = q.app_refs.saturating_sub(1);
        if q.app_refs > 0 {
            return None;
        }
        m.remove(&(queue as usize))?
    };
    if let Some(fifo) = &removed.fifo {
        fifo.release();
    }
    Some(removed)
}

pub(crate) fn get(queue: *mut c_void) -> Option<QueueInfo> {
    QUEUES.read().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&(queue as usize)).cloned())
}

/// The queue's device and FIFO (default when the queue was not created through the
/// layer).
#[inline]
pub(crate) fn view(queue: *mut c_void) -> QueueView {
    QUEUES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(queue as usize)))
        .map(|q| QueueView { device: q.device, fifo: q.fifo.clone() })
        .unwrap_or_default()
}

/// The queue's FIFO, if it is an in-order queue whose commands complete in batches.
pub(crate) fn fifo(queue: *mut c_void) -> Option<Arc<Fifo>> {
    QUEUES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(queue as usize)).and_then(|q| q.fifo.clone()))
}

/// The queue's Codeplay counters, if it was created with them.
#[inline]
pub(crate) fn counters(queue: *mut c_void) -> Option<Arc<CounterSet>> {
    if !any_counters() {
        return None;
    }
    QUEUES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(queue as usize)).and_then(|q| q.counters.clone()))
}
