//! Per-thread delta state shared by the encoder and the decoder.
//!
//! Notifications on one thread look alike: timestamps grow by a little, the exit notification
//! repeats the entry's event and arguments. Each side keeps, per thread id, the previous
//! notification's values; the encoder writes only what differs and the decoder rebuilds it from
//! the same state. The state is reset at every chunk start, so each chunk decodes on its own.
//!
//! Both sides must update the state identically: [`ThreadState::remember`] is the single place
//! that does it.
//!
//! Cost: consecutive notifications usually come from the same thread, so the state of the
//! previous thread is found without hashing; a thread switch is one hash-map lookup. The first
//! notification of a thread in a chunk pushes a slot (no allocation once the vectors have grown
//! to the number of threads).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::record::{ApiArgs, ArgBlock, EventInfo, KernelAllocation, Notification, StrId, UserData};

/// What a kernel activity repeats from launch to launch of one kernel: its handle and geometry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KernelShape {
    pub kernel: u64,
    pub work_dim: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadState {
    pub ts: u64,
    pub instance: u64,
    pub universal_id: u64,
    pub parent: Option<EventInfo>,
    pub event: Option<EventInfo>,
    /// (function_id, name) of the previous function_with_args on this thread.
    pub function: (u32, StrId),
    /// Arguments of the previous function_with_args on this thread. Only `as_slice()` is
    /// meaningful: values past `len` may be stale (see [`ThreadState::previous_args`]).
    args: ArgBlock,
    /// Typed records (format 3): the previous correlation id on this thread.
    pub correlation: u64,
    /// Typed records: the previous queue and device of device activity on this thread.
    pub queue: u64,
    pub device: u64,
    /// Typed records (format 6): the previous kernel activity's handle, work_dim and launch
    /// sizes on this thread, the previous written allocation list, and the previous device end.
    pub kernel: KernelShape,
    pub allocations: Vec<KernelAllocation>,
    pub device_end: u64,
    /// Typed records: the arguments of the previous API call of each `(kind << 32) | op`.
    pub api_args: HashMap<u64, ApiArgs, BuildHasherDefault<KeyHasher>>,
}

/// A hasher for the `u64` keys above (kind and operation): one multiply, no SipHash rounds (the
/// keys are not attacker-chosen in a way that matters: a slow map costs time, not safety).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
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
            let s = args.as_slice();
            self.args.len = s.len() as u8;
            self.args.values[..s.len()].copy_from_slice(s);
        }
    }

    /// The previous function_with_args arguments on this thread.
    pub fn previous_args_slice(&self) -> &[u64] {
        self.args.as_slice()
    }

    /// The previous arguments in canonical form (zero past `len`), as the decoder returns them.
    pub fn previous_args(&self) -> ArgBlock {
        let s = self.args.as_slice();
        let mut out = ArgBlock { len: s.len() as u8, ..ArgBlock::default() };
        out.values[..s.len()].copy_from_slice(s);
        out
    }
}

/// The state of every thread seen in the current chunk, plus which thread the previous
/// notification came from.
#[derive(Debug, Default)]
pub(crate) struct ThreadStates {
    /// Thread id → slot. Same cheap hasher as the API-argument map: a thread switch is on the
    /// decode path of every record that changes thread (SipHash was a visible part of it).
    slot_of_tid: HashMap<u32, usize, BuildHasherDefault<KeyHasher>>,
    states: Vec<ThreadState>,
    /// The states of the previous chunks' threads, emptied, their argument maps' capacity kept:
    /// a chunk start would otherwise free every map and the chunk's first calls grow them again
    /// (a recording closes a chunk at least once a second).
    spare: Vec<ThreadState>,
    last_tid: Option<u32>,
    last_slot: usize,
}

impl ThreadStates {
    /// Forgets every thread; keeps the capacity.
    pub fn reset(&mut self) {
        self.slot_of_tid.clear();
        for s in self.states.drain(..) {
            let (mut api_args, mut allocations) = (s.api_args, s.allocations);
            api_args.clear();
            allocations.clear();
            self.spare.push(ThreadState { api_args, allocations, ..ThreadState::default() });
        }
        self.last_tid = None;
        self.last_slot = 0;
    }

    /// The thread of the previous notification in this chunk.
    pub fn last_tid(&self) -> Option<u32> {
        self.last_tid
    }

    /// Makes `tid` the current thread: whether it was already the previous notification's
    /// thread, and its state.
    #[inline(always)]
    pub fn switch_to(&mut self, tid: u32) -> (bool, &mut ThreadState) {
        let same = self.last_tid == Some(tid) && self.last_slot < self.states.len();
        if !same {
            self.last_slot = match self.slot_of_tid.get(&tid) {
                Some(&slot) if slot < self.states.len() => slot,
                _ => {
                    self.states.push(self.spare.pop().unwrap_or_default());
                    let slot = self.states.len() - 1;
                    self.slot_of_tid.insert(tid, slot);
                    slot
                }
            };
            self.last_tid = Some(tid);
        }
        // Invariant: `last_slot < states.len()` (checked or pushed just above), independent of
        // the input, so this index cannot fail.
        (same, &mut self.states[self.last_slot])
    }
}
