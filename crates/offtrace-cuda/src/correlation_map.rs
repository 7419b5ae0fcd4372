//! CUPTI correlation id → the services' correlation id.
//!
//! CUPTI numbers each API call (`CUpti_CallbackData::correlationId`, 32 bits) and stamps the
//! device records the call caused with the same number. The services give each call their own
//! id (`CallToken::correlation_id`). The callback path stores the pair here; the activity thread
//! looks the CUPTI id up when the device record arrives, so kernels, copies and fills carry the
//! id of the API call that launched them.
//!
//! A fixed table of `SLOTS` entries indexed by the CUPTI id modulo `SLOTS`: no lock, no
//! allocation on the callback path (a compare-exchange and three stores, under a per-slot sequence word). An entry is overwritten when
//! the id `SLOTS` later is stored, so a device record that arrives after more than `SLOTS`
//! newer API calls finds no pair (it then gets a fresh id, counted in [`CorrelationMap::misses`]).
//! CUPTI delivers buffers in order and the backend flushes them at least every second, so
//! with 2^18 slots that takes over 262,144 API calls between launch and delivery.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

const SLOTS: usize = 1 << 18;

/// One pair under a sequence word: odd while a writer fills it.
#[derive(Default)]
struct Slot {
    seq: AtomicU32,
    key: AtomicU32,
    value: AtomicU64,
}

/// The map (process-wide: `static` in the injection).
pub struct CorrelationMap {
    slots: Box<[Slot]>,
    misses: AtomicU64,
}

impl std::fmt::Debug for CorrelationMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorrelationMap").field("misses", &self.misses()).finish()
    }
}

impl Default for CorrelationMap {
    fn default() -> Self {
        Self::new()
    }
}

impl CorrelationMap {
    pub fn new() -> Self {
        Self { slots: (0..SLOTS).map(|_| Slot::default()).collect(), misses: AtomicU64::new(0) }
    }

    /// Records that CUPTI's `cupti` is the services' `ours`. Keeps an existing pair for the same
    /// CUPTI id: the outermost call (a runtime call) wins over the driver calls CUPTI reports
    /// inside it with the same id. When another thread is writing the same slot (ids `SLOTS`
    /// apart, at the same instant) the pair is not stored.
    #[inline]
    pub fn insert(&self, cupti: u32, ours: u64) {
        if cupti == 0 || ours == 0 {
            return;
        }
        let slot = &self.slots[cupti as usize % SLOTS];
        // Relaxed: a hint; only the thread making the call stores this id.
        if slot.key.load(Ordering::Relaxed) == cupti {
            return;
        }
        let seq = slot.seq.load(Ordering::Relaxed);
        // Acquire on success: the writes below stay after the odd sequence is visible.
        if seq & 1 == 1
            || slot.seq.compare_exchange(seq, seq.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return;
        }
        slot.key.store(cupti, Ordering::Relaxed);
        slot.value.store(ours, Ordering::Relaxed);
        // Release: publishes key and value with the even sequence.
        slot.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The services' id of CUPTI's `cupti`, if still stored.
    #[inline]
    pub fn get(&self, cupti: u32) -> Option<u64> {
        if cupti == 0 {
            return None;
        }
        let slot = &self.slots[cupti as usize % SLOTS];
        // Acquire: pairs with the writer's Release of this (even) sequence.
        let s1 = slot.seq.load(Ordering::Acquire);
        let key = slot.key.load(Ordering::Relaxed);
        let value = slot.value.load(Ordering::Relaxed);
        // Acquire fence: the two reads above happen before the re-check of the sequence.
        fence(Ordering::Acquire);
        let s2 = slot.seq.load(Ordering::Relaxed);
        if s1 & 1 == 1 || s1 != s2 || key != cupti {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(value)
    }

    /// How many lookups found no pair.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_found_outermost_wins_and_old_ones_age_out() {
        let m = CorrelationMap::new();
        m.insert(5, 500);
        m.insert(5, 501); // a driver call inside the runtime call: same CUPTI id
        assert_eq!(m.get(5), Some(500));
        assert_eq!(m.get(6), None);
        m.insert(5 + SLOTS as u32, 900);
        assert_eq!(m.get(5), None, "overwritten by the id SLOTS later");
        assert_eq!(m.get(5 + SLOTS as u32), Some(900));
        assert_eq!(m.misses(), 2);
        m.insert(0, 1);
        assert_eq!(m.get(0), None);
    }

    #[test]
    fn concurrent_writers_and_a_reader_never_see_a_wrong_pair() {
        let m = std::sync::Arc::new(CorrelationMap::new());
        std::thread::scope(|s| {
            for t in 0..2u32 {
                let m = &m;
                s.spawn(move || {
                    for i in 0..200_000u32 {
                        let id = i * 2 + t + 1;
                        m.insert(id, u64::from(id) * 10);
                    }
                });
            }
            let m = &m;
            s.spawn(move || {
                for i in 1..400_000u32 {
                    if let Some(v) = m.get(i) {
                        assert_eq!(v, u64::from(i) * 10);
                    }
                }
            });
        });
    }
}
