//! [`Lanes`]: slices placed on a track so that no two slices on one lane overlap partially.
//!
//! Timeline viewers draw one track as a stack of properly nested slices; two slices that
//! overlap without one containing the other (device work of an out-of-order queue, records of
//! a damaged trace, calls of threads that share a track) are drawn wrongly (wrong durations
//! once sorted). So each logical track is split into lanes on demand: a slice goes to the first
//! lane where it is disjoint from every slice placed so far or (on a nesting track) contains
//! whole every slice it meets; otherwise to the next lane. Lane 0 is the track itself.
//!
//! Relations are strict: two slices of a lane are separated by at least a nanosecond, or one lies
//! strictly inside the other. A slice that ends exactly when the next begins, or two that start
//! together, would leave the order of their begin/end events to the viewer's sort (which keeps
//! file order for equal timestamps), so they go to different lanes.
//!
//! Slices may arrive in any order (API calls arrive at their exit, so children before their
//! parent; a device's records of one kind in batches: CUPTI delivers kernels and copies in
//! separate buffers, so a queue's copies arrive after thousands of the kernels they ran
//! between). A lane keeps its *top-level* slices (those no other slice of the lane contains),
//! sorted and disjoint, at most [`LaneMode::keep`] of them; older ones are forgotten, and a
//! slice that starts before the end of a forgotten one goes to another lane: placement is
//! conservative, never wrong. Cost: O(log keep + slices it swallows) per slice in order, plus a
//! shift of the later tops for one that arrives late; memory: `keep` intervals per lane.

/// How slices may relate on a track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneMode {
    /// Slices may contain other slices whole (calls on a thread).
    Nested,
    /// Slices must be disjoint (device work on a queue).
    Flat,
}

impl LaneMode {
    /// Top-level slices remembered per lane. A thread's calls arrive late by their nesting depth
    /// only; a queue's by up to a whole batch of another kind (run Z on the H100: 234 of 1,562
    /// copies, memsets and barriers of PyTorch's default stream went to other lanes with 256,
    /// none overlapping its kernels). Queues are few: 16,384 intervals (256 KiB) each.
    const fn keep(self) -> usize {
        match self {
            Self::Nested => 256,
            Self::Flat => 16_384,
        }
    }
}

#[derive(Debug, Default)]
struct Lane {
    /// Top-level slices `(start, end)`, sorted by start, pairwise disjoint.
    tops: Vec<(u64, u64)>,
    /// No slice starting before this may be placed (the end of forgotten slices).
    floor: u64,
}

impl Lane {
    /// Places `[start, end]` if it fits, returning whether it did.
    fn place(&mut self, start: u64, end: u64, mode: LaneMode) -> bool {
        if start <= self.floor && self.floor > 0 {
            return false;
        }
        // Tops that are not strictly separated from [start, end]: t.end >= start, t.start <= end.
        let first = self.tops.partition_point(|&(_, e)| e < start);
        let mut last = first;
        while last < self.tops.len() && self.tops[last].0 <= end {
            last += 1;
        }
        if first == last {
            self.tops.insert(first, (start, end));
        } else {
            let swallows = self.tops[first..last].iter().all(|&(s, e)| start < s && e < end);
            if mode == LaneMode::Flat || !swallows {
                return false;
            }
            self.tops.drain(first..last);
            self.tops.insert(first, (start, end));
        }
        if self.tops.len() > mode.keep() {
            let drop_n = self.tops.len() - mode.keep() / 2;
            self.floor = self.tops[..drop_n].iter().map(|&(_, e)| e).max().unwrap_or(self.floor).max(self.floor);
            self.tops.drain(..drop_n);
        }
        true
    }
}

/// The lanes of one logical track.
#[derive(Debug)]
pub(crate) struct Lanes {
    mode: LaneMode,
    lanes: Vec<Lane>,
}

impl Lanes {
    pub fn new(mode: LaneMode) -> Self {
        Self { mode, lanes: Vec::new() }
    }

    /// The lane `[start, end]` goes to (0 = the track itself); a new lane is opened when none
    /// fits, and the caller declares its track when the returned index equals the old count.
    pub fn place(&mut self, start: u64, end: u64) -> usize {
        let end = end.max(start);
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if lane.place(start, end, self.mode) {
                return i;
            }
        }
        let mut lane = Lane::default();
        lane.place(start, end, self.mode);
        self.lanes.push(lane);
        self.lanes.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the invariant the viewers need, independently of the lane logic: on each lane,
    /// any two slices are strictly apart or (nesting mode) one lies strictly inside the other.
    fn assert_no_partial_overlap(placed: &[(usize, u64, u64)], mode: LaneMode) {
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                if a.0 != b.0 {
                    continue;
                }
                let disjoint = a.2 < b.1 || b.2 < a.1;
                let nested = (a.1 < b.1 && b.2 < a.2) || (b.1 < a.1 && a.2 < b.2);
                assert!(
                    disjoint || (mode == LaneMode::Nested && nested),
                    "lane {}: [{}, {}] and [{}, {}] overlap",
                    a.0,
                    a.1,
                    a.2,
                    b.1,
                    b.2
                );
            }
        }
    }

    fn place_all(mode: LaneMode, slices: &[(u64, u64)]) -> Vec<(usize, u64, u64)> {
        let mut l = Lanes::new(mode);
        slices.iter().map(|&(s, e)| (l.place(s, e), s, e)).collect()
    }

    #[test]
    fn nested_calls_arriving_children_first_share_one_lane() {
        // child [2,3], child [4,6], parent [1,10], then a sibling [11,12] and its parent [10,20]
        let p = place_all(LaneMode::Nested, &[(2, 3), (4, 6), (1, 10), (12, 13), (11, 20)]);
        assert!(p.iter().all(|&(lane, ..)| lane == 0), "{p:?}");
    }

    #[test]
    fn crossing_slices_go_to_another_lane() {
        let p = place_all(LaneMode::Nested, &[(0, 10), (5, 15), (12, 14), (20, 30)]);
        assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 0, 0]);
        assert_no_partial_overlap(&p, LaneMode::Nested);
    }

    #[test]
    fn a_child_arriving_after_its_parent_goes_to_another_lane_on_a_nesting_track() {
        // Conservative: its siblings inside the parent are not remembered.
        let p = place_all(LaneMode::Nested, &[(0, 10), (2, 3)]);
        assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
    }

    #[test]
    fn flat_tracks_never_nest() {
        let p = place_all(LaneMode::Flat, &[(0, 10), (2, 3), (11, 12), (9, 13), (13, 14), (15, 15)]);
        assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 0, 1, 0, 0]);
        assert_no_partial_overlap(&p, LaneMode::Flat);
    }

    #[test]
    fn touching_or_equal_starts_go_to_another_lane() {
        let p = place_all(LaneMode::Nested, &[(0, 10), (10, 20), (21, 30), (21, 25)]);
        assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
    }

    #[test]
    fn random_slices_never_overlap_partially_on_a_lane_with_bounded_memory() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for mode in [LaneMode::Nested, LaneMode::Flat] {
            let mut slices = Vec::new();
            let mut t = 0;
            for _ in 0..3000 {
                t += rnd(50);
                let s = t.saturating_sub(rnd(200));
                slices.push((s, s + rnd(300)));
            }
            let p = place_all(mode, &slices);
            assert_no_partial_overlap(&p, mode);
            let mut l = Lanes::new(mode);
            for &(s, e) in &slices {
                l.place(s, e);
            }
            assert!(l.lanes.iter().all(|lane| lane.tops.len() <= mode.keep()));
        }
    }

    #[test]
    fn a_queues_copies_arriving_after_thousands_of_its_kernels_share_its_lane() {
        // 4,000 kernels of 10 ns every 100 ns, then the copies that ran in 300 of the gaps
        // (as CUPTI delivers them: another buffer, later).
        let mut slices: Vec<(u64, u64)> = (0..4000).map(|i| (i * 100, i * 100 + 10)).collect();
        slices.extend((0..300).map(|i| (i * 13 * 100 + 50, i * 13 * 100 + 60)));
        let p = place_all(LaneMode::Flat, &slices);
        assert_no_partial_overlap(&p, LaneMode::Flat);
        let spilled = p.iter().filter(|x| x.0 != 0).count();
        assert_eq!(spilled, 0, "disjoint slices of one queue went to other lanes");
    }

    #[test]
    fn a_queue_lane_stays_bounded_and_conservative_beyond_what_it_keeps() {
        let keep = LaneMode::Flat.keep() as u64;
        let mut slices: Vec<(u64, u64)> = (0..3 * keep).map(|i| (i * 100, i * 100 + 10)).collect();
        slices.push((50, 60)); // in a gap long forgotten: another lane, never a wrong one
        let mut l = Lanes::new(LaneMode::Flat);
        let lanes: Vec<usize> = slices.iter().map(|&(s, e)| l.place(s, e)).collect();
        assert!(lanes[..lanes.len() - 1].iter().all(|&lane| lane == 0));
        assert_eq!(lanes.last(), Some(&1));
        assert!(l.lanes.iter().all(|lane| lane.tops.len() <= LaneMode::Flat.keep()));
    }
}
