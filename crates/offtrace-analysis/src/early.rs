//! Completions that reach a reader before their command's enqueue record, and correlations that
//! stand for several commands.
//!
//! The rule (`docs/record-model.md`, *One device activity per command*): an enqueue record and
//! its completion with the same (kind, correlation) are one command, whichever comes first; two
//! completions of a command that has an enqueue record are one command seen by two backends (the
//! SYCL backend from the program's profiling query, the OpenCL layer from its callback); a
//! completion with no enqueue record is a command of its own. The last case has more than one
//! command per correlation: the kernels, copies and memsets of one CUDA graph launch all carry
//! the correlation of `cudaGraphLaunch`, and no launch-time record precedes them.
//!
//! So a completion without an enqueue record is held: when the enqueue record comes it takes
//! the first held completion's device times and the second held one was a duplicate; a second
//! one with the first's device times is a duplicate at once; a third is proof of several
//! commands, and the key's held completions and every later one are commands of their own. What
//! is still held when it is forgotten ([`PENDING_MAX`] keys) or at the end is commands of its
//! own. The report, the rows (SQLite, CSV) and the timelines (Perfetto, Chrome) share this type.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::PENDING_MAX;

/// A command's (kind, correlation).
pub type Key = (u32, u64);

/// What to do with a completion handed to [`EarlyCompletions::complete`].
#[derive(Debug, PartialEq, Eq)]
pub enum Completion<T> {
    /// Held until its enqueue record comes or it is forgotten; write nothing now.
    Held,
    /// The same command as a completion already held: write nothing.
    Duplicate,
    /// Commands of their own, to write now (the held ones of a key proven to have several
    /// commands, or this completion alone), plus what was forgotten to make room, each with its
    /// key.
    Commands(Vec<(Key, T)>),
}

#[derive(Debug)]
struct Held<T> {
    first: T,
    times: (u64, u64),
    second: Option<T>,
}

/// Completions waiting for their enqueue record, by (kind, correlation); see the module docs.
#[derive(Debug)]
pub struct EarlyCompletions<T> {
    held: FxHashMap<Key, Held<T>>,
    order: VecDeque<Key>,
    /// Keys proven to stand for several commands.
    several: RecentKeys,
}

impl<T> Default for EarlyCompletions<T> {
    fn default() -> Self {
        Self { held: FxHashMap::default(), order: VecDeque::new(), several: RecentKeys::default() }
    }
}

impl<T> EarlyCompletions<T> {
    /// A completion of `key` with device times `times` whose enqueue record has not come (the
    /// caller has checked that no enqueue record of `key` is waiting and that `key` was not
    /// completed already).
    pub fn complete(&mut self, key: Key, item: T, times: (u64, u64)) -> Completion<T> {
        if self.several.contains(key) {
            return Completion::Commands(vec![(key, item)]);
        }
        if let Some(h) = self.held.get_mut(&key) {
            if h.second.is_none() {
                if h.times == times {
                    return Completion::Duplicate;
                }
                h.second = Some(item);
                return Completion::Held;
            }
            // A third command of one correlation: no enqueue record will take them.
            let Some(h) = self.held.remove(&key) else { return Completion::Held };
            self.several.insert(key);
            let mut out = Vec::with_capacity(3);
            out.push((key, h.first));
            out.extend(h.second.map(|s| (key, s)));
            out.push((key, item));
            return Completion::Commands(out);
        }
        self.held.insert(key, Held { first: item, times, second: None });
        self.order.push_back(key);
        let mut out = Vec::new();
        while self.order.len() > PENDING_MAX {
            let Some(old) = self.order.pop_front() else { break };
            if let Some(h) = self.held.remove(&old) {
                out.push((old, h.first));
                out.extend(h.second.map(|s| (old, s)));
            }
        }
        if out.is_empty() { Completion::Held } else { Completion::Commands(out) }
    }

    /// The enqueue record of `key` came: the first held completion is its completion (a second
    /// one held was the same command, seen by another backend).
    pub fn take(&mut self, key: Key) -> Option<T> {
        self.held.remove(&key).map(|h| h.first)
    }

    /// What is still held, oldest first: commands of their own.
    pub fn drain(&mut self) -> Vec<(Key, T)> {
        let mut out = Vec::new();
        while let Some(key) = self.order.pop_front() {
            if let Some(h) = self.held.remove(&key) {
                out.push((key, h.first));
                if let Some(s) = h.second {
                    out.push((key, s));
                }
            }
        }
        out
    }
}

/// The newest [`PENDING_MAX`] keys inserted: the commands already completed (a later completion
/// of one, a second backend's, is not counted again), the keys with several commands.
#[derive(Debug, Default)]
pub struct RecentKeys {
    set: FxHashSet<Key>,
    order: VecDeque<Key>,
}

impl RecentKeys {
    pub fn contains(&self, key: Key) -> bool {
        self.set.contains(&key)
    }

    pub fn insert(&mut self, key: Key) {
        if self.set.insert(key) {
            self.order.push_back(key);
            while self.order.len() > PENDING_MAX {
                let Some(old) = self.order.pop_front() else { break };
                self.set.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_is_held_until_its_enqueue_record_takes_it() {
        let mut e = EarlyCompletions::default();
        assert_eq!(e.complete((1, 7), "c", (10, 20)), Completion::Held);
        assert_eq!(e.take((1, 7)), Some("c"));
        assert!(e.drain().is_empty());
    }

    #[test]
    fn a_second_completion_with_the_same_times_is_a_duplicate() {
        let mut e = EarlyCompletions::default();
        assert_eq!(e.complete((1, 7), "a", (10, 20)), Completion::Held);
        assert_eq!(e.complete((1, 7), "b", (10, 20)), Completion::Duplicate);
        assert_eq!(e.drain(), vec![((1, 7), "a")]);
    }

    #[test]
    fn the_enqueue_record_takes_the_first_of_two_and_drops_the_second() {
        let mut e = EarlyCompletions::default();
        e.complete((1, 7), "a", (10, 20));
        assert_eq!(e.complete((1, 7), "b", (10, 21)), Completion::Held);
        assert_eq!(e.take((1, 7)), Some("a"));
        assert!(e.drain().is_empty());
    }

    #[test]
    fn two_completions_never_taken_are_two_commands() {
        let mut e = EarlyCompletions::default();
        e.complete((1, 7), "a", (10, 20));
        e.complete((1, 7), "b", (30, 40));
        e.complete((2, 7), "other kind", (10, 20));
        assert_eq!(e.drain(), vec![((1, 7), "a"), ((1, 7), "b"), ((2, 7), "other kind")]);
    }

    #[test]
    fn a_third_completion_makes_every_one_of_the_key_a_command() {
        let mut e = EarlyCompletions::default();
        e.complete((1, 7), "a", (10, 20));
        e.complete((1, 7), "b", (30, 40));
        assert_eq!(
            e.complete((1, 7), "c", (50, 60)),
            Completion::Commands(vec![((1, 7), "a"), ((1, 7), "b"), ((1, 7), "c")])
        );
        assert_eq!(e.complete((1, 7), "d", (70, 80)), Completion::Commands(vec![((1, 7), "d")]));
        // Even with the first's times: a graph may run the same node's kernel again.
        assert_eq!(e.complete((1, 7), "e", (10, 20)), Completion::Commands(vec![((1, 7), "e")]));
        assert!(e.drain().is_empty());
    }

    #[test]
    fn forgotten_completions_are_commands() {
        let mut e = EarlyCompletions::default();
        for c in 0..PENDING_MAX as u64 {
            assert_eq!(e.complete((1, c + 1), c, (c + 1, c + 2)), Completion::Held);
        }
        assert_eq!(e.complete((1, u64::MAX), 99, (1, 2)), Completion::Commands(vec![((1, 1), 0)]));
    }
}
