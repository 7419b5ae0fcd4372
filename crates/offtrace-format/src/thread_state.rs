//! Per-thread delta state shared by the encoder and the decoder.
//!
//! Notifications on one thread look alike: timestamps grow by a little, the exit notification
//! repeats the entry's event and arguments. Each side keeps, per thread id, the previous
//! notification's values; the encoder writes only what differs and the decoder rebuilds it from
//! the same state. The state is reset at every chunk start, so each chunk decodes on its own.
//!
//! Both sides must update the state identically: [`ThreadState::remember`] is the single place
//! that does it, called with the notification as decoded (or as it will decode).

use std::collections::HashMap;

use crate::record::{ArgBlock, EventInfo, Notification, StrId, UserData};

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ThreadState {
    pub ts: u64,
    pub instance: u64,
    pub universal_id: u64,
    pub parent: Option<EventInfo>,
    pub event: Option<EventInfo>,
    /// (function_id, name) of the previous function_with_args on this thread.
    pub function: (u32, StrId),
    /// Arguments of the previous function_with_args on this thread (canonical: zero past `len`).
    pub args: ArgBlock,
}

impl ThreadState {
    pub fn remember(&mut self, n: &Notification) {
        self.ts = n.ts;
        self.instance = n.instance;
        if n.universal_id != 0 {
            self.universal_id = n.universal_id;
        }
        self.parent = n.parent;
        self.event = n.event;
        if let UserData::FunctionWithArgs { function_id, name, args, .. } = &n.user_data {
            self.function = (*function_id, *name);
            self.args = canonical_args(args);
        }
    }
}

/// The args as the decoder will see them: `len` clamped to `MAX_ARGS`, zero past it.
pub(crate) fn canonical_args(a: &ArgBlock) -> ArgBlock {
    let s = a.as_slice();
    let mut out = ArgBlock { len: s.len() as u8, ..ArgBlock::default() };
    out.values[..s.len()].copy_from_slice(s);
    out
}

/// The state of every thread seen in the current chunk, plus the thread of the previous
/// notification (consecutive notifications usually come from the same thread).
///
/// `clear()` keeps the map's capacity, so a writer does not allocate per chunk after warm-up.
#[derive(Debug, Default)]
pub(crate) struct ThreadStates {
    pub by_tid: HashMap<u32, ThreadState>,
    pub last_tid: Option<u32>,
}

impl ThreadStates {
    pub fn reset(&mut self) {
        self.by_tid.clear();
        self.last_tid = None;
    }

    pub fn get(&mut self, tid: u32) -> &mut ThreadState {
        self.by_tid.entry(tid).or_default()
    }
}
