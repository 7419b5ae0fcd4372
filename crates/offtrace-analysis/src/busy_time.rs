//! A queue's device busy time: how long the device ran at least one of the queue's commands,
//! the union of their device intervals. On an out-of-order queue commands overlap, and the sum
//! of their device times exceeds the time the queue kept the device busy (it may exceed the
//! queue's lifetime); on an in-order queue the two agree.
//!
//! Completions reach the trace in any order (out-of-order commands, several backends' buffers),
//! so the intervals are kept merged, sorted by start: at most [`OPEN_MAX`] disjoint stretches.
//! Past that the oldest half is closed: its length is added to the total, and a later interval
//! is clipped at the end of what was closed (work completing more than [`OPEN_MAX`] idle gaps
//! late would be undercounted by its part before that point). Cost: an append or an extension
//! of the last stretch for completions in time order, a binary search and a short shift
//! otherwise.

/// Disjoint stretches kept open per queue, at most.
pub const OPEN_MAX: usize = 1024;

#[derive(Debug, Default, Clone)]
pub struct BusyTime {
    /// Disjoint `[start, end)` stretches, sorted by start.
    open: Vec<(u64, u64)>,
    /// Length of the stretches closed, all ending at or before `closed_until`.
    closed_ns: u64,
    closed_until: u64,
    /// Sum of the device times added (overlaps counted each time).
    sum_ns: u64,
}

impl BusyTime {
    /// Adds a command that ran on the device from `start` to `end` (ns).
    pub fn add(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.sum_ns += end - start;
        let start = start.max(self.closed_until);
        if end <= start {
            return;
        }
        match self.open.last_mut() {
            // In time order: after the last stretch, or touching / overlapping only it.
            None => self.open.push((start, end)),
            Some(last) if start > last.1 => self.open.push((start, end)),
            Some(last) if start >= last.0 => last.1 = last.1.max(end),
            Some(_) => self.merge(start, end),
        }
        if self.open.len() > OPEN_MAX {
            let closed: Vec<(u64, u64)> = self.open.drain(..OPEN_MAX / 2).collect();
            self.closed_ns += closed.iter().map(|(s, e)| e - s).sum::<u64>();
            self.closed_until = closed.last().map_or(self.closed_until, |c| c.1);
        }
    }

    /// An interval that starts before the last stretch: merged with every stretch it meets.
    fn merge(&mut self, start: u64, end: u64) {
        // The first stretch that ends at or after `start`, and the first that starts after `end`.
        let first = self.open.partition_point(|&(_, e)| e < start);
        let past = self.open.partition_point(|&(s, _)| s <= end);
        if first >= past {
            self.open.insert(first, (start, end));
            return;
        }
        let merged = (start.min(self.open[first].0), end.max(self.open[past - 1].1));
        self.open.drain(first + 1..past);
        self.open[first] = merged;
    }

    /// Time with at least one command running.
    pub fn busy_ns(&self) -> u64 {
        self.closed_ns + self.open.iter().map(|(s, e)| e - s).sum::<u64>()
    }

    /// Sum of the commands' device times.
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(intervals: &[(u64, u64)]) -> (u64, u64) {
        let mut b = BusyTime::default();
        for &(s, e) in intervals {
            b.add(s, e);
        }
        (b.busy_ns(), b.sum_ns())
    }

    #[test]
    fn overlapping_commands_count_once_in_any_order() {
        assert_eq!(busy(&[(0, 10), (20, 30)]), (20, 20), "apart");
        assert_eq!(busy(&[(0, 10), (5, 15)]), (15, 20), "overlapping");
        assert_eq!(busy(&[(0, 10), (10, 20)]), (20, 20), "touching");
        assert_eq!(busy(&[(0, 100), (10, 20), (30, 40)]), (100, 120), "inside");
        assert_eq!(busy(&[(50, 60), (0, 10), (20, 30)]), (30, 30), "late, apart");
        assert_eq!(busy(&[(50, 60), (20, 30), (0, 55)]), (60, 75), "late, spanning two");
        assert_eq!(busy(&[(10, 20), (30, 40), (50, 60), (15, 35)]), (40, 50), "late, joining two of three");
        assert_eq!(busy(&[(5, 5), (7, 3)]), (0, 0), "empty or reversed");
    }

    #[test]
    fn a_brute_force_union_agrees() {
        // A deterministic scramble of 3,000 intervals on 0..20,000: the union counted ns by ns.
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let intervals: Vec<(u64, u64)> = (0..3000)
            .map(|i| {
                let s = (i * 6 + next() % 40).min(19_990);
                (s, s + 1 + next() % 9)
            })
            .collect();
        let mut covered = vec![false; 20_100];
        for &(s, e) in &intervals {
            covered[s as usize..e as usize].iter_mut().for_each(|c| *c = true);
        }
        let want = covered.iter().filter(|c| **c).count() as u64;
        assert_eq!(busy(&intervals).0, want);
    }

    #[test]
    fn open_stretches_stay_bounded() {
        let mut b = BusyTime::default();
        for i in 0..10 * OPEN_MAX as u64 {
            b.add(i * 10, i * 10 + 5);
        }
        assert!(b.open.len() <= OPEN_MAX);
        assert_eq!(b.busy_ns(), 10 * OPEN_MAX as u64 * 5);
    }
}
