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
    Alloc { ptr: u64, size: u64 },
    Free { ptr: u64 },
}

/// Live bytes, their peak, and frees, applied in time order.
#[derive(Debug, Default)]
pub struct LiveMemory {
    /// (time, arrival, change): arrival keeps file order among equal times.
    pending: Vec<(u64, u64, Change)>,
    arrivals: u64,
    live: FxHashMap<u64, u64>,
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
                Change::Alloc { ptr, size } => {
                    // The address came back without a free we saw: the old allocation is gone.
                    if let Some(old) = self.live.insert(ptr, size) {
                        self.live_bytes = self.live_bytes.saturating_sub(old);
                    }
                    self.live_bytes += size;
                    if self.live_bytes > self.peak {
                        self.peak = self.live_bytes;
                        self.peak_ns = Some(ts);
                    }
                }
                Change::Free { ptr } => {
                    self.frees += 1;
                    match self.live.remove(&ptr) {
                        Some(size) => self.live_bytes = self.live_bytes.saturating_sub(size),
                        None => self.unmatched_frees += 1,
                    }
                }
            }
            on_change(ts, self.live_bytes);
        }
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
    fn unmatched_frees_and_reused_addresses() {
        let mut m = LiveMemory::default();
        m.push(1, Change::Free { ptr: 9 }, |_, _| {});
        m.push(2, Change::Alloc { ptr: 5, size: 10 }, |_, _| {});
        m.push(3, Change::Alloc { ptr: 5, size: 4 }, |_, _| {});
        m.finish(|_, _| {});
        assert_eq!((m.live_bytes(), m.peak_bytes(), m.frees(), m.unmatched_frees()), (4, 10, 1, 1));
    }
}
