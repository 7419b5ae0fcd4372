//! A map of `u64` → `u64` shared by all threads without a lock on its paths, for a backend's
//! tables of live runtime objects: the SYCL bridge's task graph keeps two (uid64 of a live node
//! event → node id; UR event → the node whose command returned it), written once per node and
//! per signal, read once per edge, per task and per waited event.
//!
//! - **Buckets of [`WAYS`] entries**, indexed by a Fibonacci hash of the key (ids and handles the
//!   runtime chose, not input an attacker controls). A bucket keeps its keys most recent first:
//!   a put moves its key to the front (or inserts it there, the bucket's oldest entry falling
//!   out). An entry is lost once `WAYS` newer keys landed in its bucket: with the bridge's
//!   16,384 buckets, after 65,536 later puts on average; an entry still read 1,000 puts later
//!   is lost with a probability of about 6e-7, 20,000 puts later about 3.5 % (Poisson). The
//!   bridge's tables were a `Mutex` around a hash map emptied at 65,536 entries: about 145
//!   instructions per put (lock, hash, probe, growth), and an entry read 20,000 puts later was
//!   lost with a probability of about 30 % (every entry at once when the map was full).
//! - **A sequence lock per bucket**: a writer makes the bucket's sequence odd with a
//!   compare-exchange (uncontended unless two threads put into one bucket at once), stores its entries and makes it even again; a reader reads the sequence,
//!   the entries and the sequence again, and retries while a writer was inside. Every field is
//!   an atomic (relaxed loads and stores): a torn read is discarded, never undefined behaviour.
//!   The loom model below checks that a reader never pairs one put's key with another's value.
//!
//! Cost: a get is a hash, two loads of the sequence and up to `WAYS` key compares; a put two
//! compare-exchanges (the first learns the sequence), up to `2 * WAYS` moves and one store. No allocation, ever: the table is a
//! static array (`BUCKETS * 72` bytes of `.bss`, touched only where keys land).

use crate::sync::{AtomicU64, Ordering, fence, spin_wait};

/// Entries per bucket.
pub const SHARED_TABLE_WAYS: usize = 4;
const WAYS: usize = SHARED_TABLE_WAYS;
#[cfg(all(test, not(loom)))]
const BUCKETS: usize = 1 << 14;

struct Bucket {
    /// Even: no writer inside; odd: a writer is storing the entries.
    seq: AtomicU64,
    /// Most recent first; 0 = empty.
    keys: [AtomicU64; WAYS],
    values: [AtomicU64; WAYS],
}

impl Bucket {
    #[cfg(not(loom))]
    const fn empty() -> Bucket {
        Bucket {
            seq: AtomicU64::new(0),
            keys: [const { AtomicU64::new(0) }; WAYS],
            values: [const { AtomicU64::new(0) }; WAYS],
        }
    }

    #[cfg(loom)]
    fn empty() -> Bucket {
        Bucket {
            seq: AtomicU64::new(0),
            keys: std::array::from_fn(|_| AtomicU64::new(0)),
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The map, `N` buckets (a power of two; `N * SHARED_TABLE_WAYS` entries): generic so that the
/// loom model runs the shipped code on one bucket. Meant for a `static`.
pub struct SharedTable<const N: usize> {
    buckets: [Bucket; N],
}

impl<const N: usize> Default for SharedTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> SharedTable<N> {
    const BITS: u32 = N.trailing_zeros();

    /// An empty table.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self { buckets: [const { Bucket::empty() }; N] }
    }

    /// An empty table.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self { buckets: std::array::from_fn(|_| Bucket::empty()) }
    }

    #[inline(always)]
    fn bucket(&self, key: u64) -> &Bucket {
        let i =
            if Self::BITS == 0 { 0 } else { (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - Self::BITS)) as usize };
        &self.buckets[i]
    }

    /// Maps `key` to `value` (a key of 0 is not kept).
    pub fn put(&self, key: u64, value: u64) {
        if key == 0 {
            return;
        }
        let b = self.bucket(key);
        let mut spins = 0u32;
        // The lock: the sequence from even to odd with a compare-exchange, this writer's first
        // access to it. The first try expects 0 (a fresh bucket) and learns the value from its
        // failure: no load before the compare-exchange (loom's model of the readers' retries
        // misses interleavings after such a load; the tries cost about as much).
        let mut seen = 0u64;
        let seq = loop {
            let s = seen & !1;
            // Acquire (success): pairs with the previous writer's Release, so its entries are
            // what this writer reads and moves. Relaxed on failure: only the value is used.
            match b.seq.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break s,
                Err(now) => {
                    // Another writer inside (odd): wait for it; else retry at once.
                    if now & 1 == 1 {
                        spin_wait(&mut spins);
                    }
                    seen = now;
                }
            }
        };
        // Release fence: a reader that sees any store below sees the odd sequence after it
        // (its Acquire fence), and retries.
        fence(Ordering::Release);
        // The writer holds the bucket: relaxed loads read its own or earlier writers' stores.
        let at = (0..WAYS).find(|&i| b.keys[i].load(Ordering::Relaxed) == key).unwrap_or(WAYS - 1);
        for i in (1..=at).rev() {
            b.keys[i].store(b.keys[i - 1].load(Ordering::Relaxed), Ordering::Relaxed);
            b.values[i].store(b.values[i - 1].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        b.keys[0].store(key, Ordering::Relaxed);
        b.values[0].store(value, Ordering::Relaxed);
        // Release: publishes the entries with the even sequence (to readers and the next writer).
        b.seq.store(seq + 2, Ordering::Release);
    }

    /// The value of `key`, if the table has it.
    pub fn get(&self, key: u64) -> Option<u64> {
        if key == 0 {
            return None;
        }
        let b = self.bucket(key);
        let mut spins = 0u32;
        loop {
            // Acquire: pairs with a writer's Release store of this (even) sequence: its entries
            // are visible to the loads below.
            let s = b.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                let mut found = None;
                for i in 0..WAYS {
                    if b.keys[i].load(Ordering::Relaxed) == key {
                        found = Some(b.values[i].load(Ordering::Relaxed));
                        break;
                    }
                }
                // Acquire fence: if a load above read a later writer's store, the sequence
                // below reads that writer's odd value or later (its Release fence): retry.
                fence(Ordering::Acquire);
                if b.seq.load(Ordering::Relaxed) == s {
                    return found;
                }
            }
            spin_wait(&mut spins);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_keeps_its_latest_keys_most_recent_first() {
        let t = SharedTable::<1>::new();
        assert_eq!(t.get(7), None);
        t.put(0, 1);
        assert_eq!(t.get(0), None, "key 0 is never kept");
        for k in 1..=4 {
            t.put(k, k * 10);
        }
        assert_eq!((1..=4).map(|k| t.get(k)).collect::<Vec<_>>(), [Some(10), Some(20), Some(30), Some(40)]);
        t.put(1, 11); // moved to the front: 2 is the oldest now
        t.put(5, 50);
        assert_eq!(t.get(2), None, "the oldest key fell out");
        assert_eq!((t.get(1), t.get(3), t.get(4), t.get(5)), (Some(11), Some(30), Some(40), Some(50)));
    }

    #[test]
    fn keys_spread_over_the_buckets() {
        static T: SharedTable<BUCKETS> = SharedTable::new();
        let t = &T;
        // Event handles (16-byte aligned heap addresses) and sequential uids, 8,192 keys in
        // 65,536 entries: a bucket with more than four of them is rare.
        let keys: Vec<u64> = (0..4096u64).map(|i| 0x7f00_1234_0000 + i * 16).chain(1..=4096).collect();
        for &k in &keys {
            t.put(k, !k);
        }
        let kept = keys.iter().filter(|&&k| t.get(k) == Some(!k)).count();
        assert!(kept > keys.len() * 999 / 1000, "{kept} of {} kept", keys.len());
    }

    #[test]
    fn threads_never_read_a_torn_entry() {
        let t = std::sync::Arc::new(SharedTable::<2>::new());
        let writers: Vec<_> = (0..3u64)
            .map(|w| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let k = 1 + (i + w) % 7;
                        t.put(k, k << 32 | i);
                    }
                })
            })
            .collect();
        for i in 0..60_000u64 {
            let k = 1 + i % 7;
            if let Some(v) = t.get(k) {
                assert_eq!(v >> 32, k, "key {k} read with another key's value {v:#x}");
            }
        }
        for w in writers {
            w.join().expect("writer");
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Two writers put different keys into one bucket at once (each moving the other's entry
    /// if it came first): once both are done, both keys are there with their values (without
    /// the writers' exclusion, one's moves could overwrite the other's key).
    #[test]
    fn loom_two_writers_of_one_bucket_keep_both_keys() {
        loom::model(|| {
            let t = Arc::new(SharedTable::<1>::new());
            let t2 = t.clone();
            let w = loom::thread::spawn(move || t2.put(1, 100));
            t.put(2, 200);
            w.join().expect("w");
            assert_eq!((t.get(1), t.get(2)), (Some(100), Some(200)));
        });
    }

    /// A key stays in its bucket while another key's put moves it one way down: a reader finds
    /// it, with its own value, whatever the interleaving (without the sequence check, it could
    /// read the moved key's slot with the new key's value, or miss it).
    #[test]
    fn loom_a_key_moved_by_another_put_stays_readable() {
        loom::model(|| {
            let t = Arc::new(SharedTable::<1>::new());
            t.put(1, 100);
            let t2 = t.clone();
            let w = loom::thread::spawn(move || t2.put(2, 200));
            assert_eq!(t.get(1), Some(100));
            w.join().expect("w");
            assert_eq!((t.get(1), t.get(2)), (Some(100), Some(200)));
        });
    }

    /// A key put twice by two threads: a reader finds one of the two values, and once both are
    /// done, one of them still.
    #[test]
    fn loom_a_key_put_twice_reads_one_of_its_values() {
        loom::model(|| {
            let t = Arc::new(SharedTable::<1>::new());
            let t2 = t.clone();
            let w = loom::thread::spawn(move || t2.put(5, 1));
            t.put(5, 2);
            let v = t.get(5);
            assert!(v == Some(1) || v == Some(2), "{v:?}");
            w.join().expect("w");
            let v = t.get(5);
            assert!(v == Some(1) || v == Some(2), "{v:?}");
        });
    }
}
