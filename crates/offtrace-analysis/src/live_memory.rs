//! [`LiveMemory`]: bytes live over time, from allocation and free records that reach the file
//! out of time order.
//!
//! Each thread's records are written when its buffer fills or the thread ends, so one thread's
//! allocations and frees can all come before another thread's earlier allocations (the four
//! workers of `examples/sycl/threads_queues.py` hold 256 KiB at once; read in file order, the
//! peak was 64 KiB). Changes are held in a window and applied in time order: the window's older
//! half is applied when it fills (out-of-order stretches are milliseconds, the window holds
//! [`WINDOW`] changes), the rest at [`LiveMemory::finish`]. Memory: the window and the live
//! allocations.
//!
//! An allocation may name its class ([`Change::AllocIn`]: the report's memory type and device),
//! whose live bytes and peak are kept as well ([`LiveMemory::peak_bytes_in`]): the peak of all
//! classes adds host and device memory, which a user holds against one device's figure
//! (`torch.cuda.max_memory_reserved`, docs/cuda.md run Z).
//!
//! ```
//! use offtrace_analysis::live_memory::{Change, LiveMemory};
//! let mut m = LiveMemory::default();
//! let mut seen = Vec::new();
//! m.push(30, Change::Free { ptr: 0xa }, |ts, live| seen.push((ts, live)));
//! m.push(10, Change::Alloc { ptr: 0xa, size: 64 }, |ts, live| seen.push((ts, live)));
//! m.push(20, Change::Alloc { ptr: 0xb, size: 32 }, |ts, live| seen.push((ts, live)));
//! m.finish(|ts, live| seen.push((ts, live)));
//! assert_eq!(seen, [(10, 64), (20, 96), (30, 32)]);
//! assert_eq!((m.peak_bytes(), m.peak_ns(), m.live_bytes()), (96, Some(20), 32));
//! ```

use rustc_hash::FxHashMap;

/// Changes held before the older half is applied.
pub const WINDOW: usize = 1 << 16;

/// One allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Alloc {
        ptr: u64,
        size: u64,
    },
    /// An allocation of a class whose own live bytes and peak are kept.
    AllocIn {
        ptr: u64,
        size: u64,
        class: Class,
    },
    Free {
        ptr: u64,
    },
}

/// What an allocation's bytes are counted under besides the total: (memory type, device).
pub type Class = (u8, u64);

/// Live bytes, their peak, and frees, applied in time order.
#[derive(Debug, Default)]
pub struct LiveMemory {
    /// (time, arrival, change): arrival keeps file order among equal times.
    pending: Vec<(u64, u64, Change)>,
    arrivals: u64,
    live: FxHashMap<u64, (u64, Option<Class>)>,
    /// Per class: (live bytes, peak).
    classes: FxHashMap<Class, (u64, u64)>,
    live_bytes: u64,
    peak: u64,
    peak_ns: Option<u64>,
    frees: u64,
    unmatched_frees: u64,
}

impl LiveMemory {
    /// Takes a change at time `ts` (file order); `on_change(ts, live_bytes)` hears each change
    /// once it is applied, in time order.
    pub fn push(&mut self, ts: u64, change: Change, on_change: impl FnMut(u64, u64)) {
        self.pending.push((ts, self.arrivals, change));
        self.arrivals += 1;
        if self.pending.len() >= WINDOW {
            self.apply(WINDOW / 2, on_change);
        }
    }

    /// Applies everything still held.
    pub fn finish(&mut self, on_change: impl FnMut(u64, u64)) {
        self.apply(self.pending.len(), on_change);
    }

    /// Applies the `n` oldest changes held.
    fn apply(&mut self, n: usize, mut on_change: impl FnMut(u64, u64)) {
        self.pending.sort_unstable_by_key(|&(ts, arrival, _)| (ts, arrival));
        let rest = self.pending.split_off(n.min(self.pending.len()));
        for (ts, _, change) in std::mem::replace(&mut self.pending, rest) {
            match change {
                Change::Alloc { ptr, size } => self.alloc(ts, ptr, size, None),
                Change::AllocIn { ptr, size, class } => self.alloc(ts, ptr, size, Some(class)),
                Change::Free { ptr } => {
                    self.frees += 1;
                    match self.live.remove(&ptr) {
                        Some((size, class)) => self.release(size, class),
                        None => self.unmatched_frees += 1,
                    }
                }
            }
            on_change(ts, self.live_bytes);
        }
    }

    fn alloc(&mut self, ts: u64, ptr: u64, size: u64, class: Option<Class>) {
        // The address came back without a free we saw: the old allocation is gone.
        if let Some((old, old_class)) = self.live.insert(ptr, (size, class)) {
            self.release(old, old_class);
        }
        self.live_bytes += size;
        if self.live_bytes > self.peak {
            self.peak = self.live_bytes;
            self.peak_ns = Some(ts);
        }
        if let Some(c) = class {
            let (live, peak) = self.classes.entry(c).or_default();
            *live += size;
            *peak = (*peak).max(*live);
        }
    }

    fn release(&mut self, size: u64, class: Option<Class>) {
        self.live_bytes = self.live_bytes.saturating_sub(size);
        if let Some((live, _)) = class.and_then(|c| self.classes.get_mut(&c)) {
            *live = live.saturating_sub(size);
        }
    }

    /// Most bytes of `class` live at once (0 for a class no allocation named).
    pub fn peak_bytes_in(&self, class: Class) -> u64 {
        self.classes.get(&class).map_or(0, |&(_, peak)| peak)
    }

    /// Bytes live after the changes applied so far.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Most bytes live at once, and when.
    pub fn peak_bytes(&self) -> u64 {
        self.peak
    }

    pub fn peak_ns(&self) -> Option<u64> {
        self.peak_ns
    }

    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// Frees of an address no allocation applied before it returned.
    pub fn unmatched_frees(&self) -> u64 {
        self.unmatched_frees
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_written_one_after_another_are_applied_in_time_order() {
        // Four threads, each allocating 64 KiB and freeing it later; each thread's records come
        // as a block (its buffer), the blocks in thread order.
        let mut m = LiveMemory::default();
        for t in 0..4u64 {
            m.push(10 + t, Change::Alloc { ptr: 0x1000 * (t + 1), size: 65536 }, |_, _| {});
            m.push(100 + t, Change::Free { ptr: 0x1000 * (t + 1) }, |_, _| {});
        }
        m.finish(|_, _| {});
        assert_eq!((m.peak_bytes(), m.peak_ns(), m.live_bytes()), (4 * 65536, Some(13), 0));
        assert_eq!((m.frees(), m.unmatched_frees()), (4, 0));
    }

    #[test]
    fn a_full_window_applies_its_older_half_and_values_come_in_time_order() {
        let mut m = LiveMemory::default();
        let mut seen = Vec::new();
        let n = WINDOW as u64 + 10;
        // Newest first within pairs: (2i+1, then 2i).
        for i in 0..n {
            let (a, b) = (2 * i + 1, 2 * i);
            m.push(a, Change::Alloc { ptr: a, size: 1 }, |ts, live| seen.push((ts, live)));
            m.push(b, Change::Alloc { ptr: b, size: 1 }, |ts, live| seen.push((ts, live)));
        }
        assert!(!seen.is_empty(), "the window's older half was applied before the end");
        m.finish(|ts, live| seen.push((ts, live)));
        assert_eq!(seen.len() as u64, 2 * n);
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0 && w[1].1 == w[0].1 + 1), "in time order");
        assert_eq!(m.peak_bytes(), 2 * n);
    }

    #[test]
    fn each_class_has_its_own_peak_and_the_total_adds_them() {
        // Run Z's shape: pinned host buffers live while device segments come and go.
        let (host, dev) = ((1u8, 0u64), (2u8, 0u64));
        let mut m = LiveMemory::default();
        m.push(1, Change::AllocIn { ptr: 0x10, size: 64, class: dev }, |_, _| {});
        m.push(2, Change::AllocIn { ptr: 0x20, size: 32, class: host }, |_, _| {});
        m.push(3, Change::AllocIn { ptr: 0x30, size: 512, class: dev }, |_, _| {});
        m.push(4, Change::Free { ptr: 0x30 }, |_, _| {});
        m.push(5, Change::AllocIn { ptr: 0x40, size: 16, class: host }, |_, _| {});
        // An address reused without a free we saw: the old one leaves its own class.
        m.push(6, Change::AllocIn { ptr: 0x10, size: 8, class: host }, |_, _| {});
        m.push(7, Change::AllocIn { ptr: 0x50, size: 100, class: dev }, |_, _| {});
        m.finish(|_, _| {});
        assert_eq!((m.peak_bytes(), m.peak_bytes_in(dev), m.peak_bytes_in(host)), (608, 576, 56));
        assert_eq!(m.peak_bytes_in((3, 0)), 0);
        assert_eq!(m.live_bytes(), 32 + 16 + 8 + 100);
    }

    #[test]
    fn unmatched_frees_and_reused_addresses() {
        let mut m = LiveMemory::default();
        m.push(1, Change::Free { ptr: 9 }, |_, _| {});
        m.push(2, Change::Alloc { ptr: 5, size: 10 }, |_, _| {});
        m.push(3, Change::Alloc { ptr: 5, size: 4 }, |_, _| {});
        m.finish(|_, _| {});
        assert_eq!((m.live_bytes(), m.peak_bytes(), m.frees(), m.unmatched_frees()), (4, 10, 1, 1));
    }
}
