//! Lock-free reads of a locked table: a generation counter and per-thread memos of its answers.
//!
//! Tables that the record path reads on each call and that change rarely (live allocations,
//! queues and their devices) stay behind a lock for their writers, and carry a [`Generation`]
//! that every writer bumps after changing them, while still holding the write lock. A reader keeps
//! the answers it looked up last in a [`Memo`] of its own thread, each tagged with the generation
//! it read *before* taking the lock: while the generation has not moved, the answer is still the
//! table's, and the read is one load of the counter and a compare, with no lock and no
//! read-modify-write on a line shared with other threads (an uncontended `RwLock` read costs two
//! atomic read-modify-writes, tens of cycles each).
//!
//! Why it is exact. A writer changes the table, then bumps the counter (`Release`), then unlocks.
//! A reader that misses loads the counter (`Acquire`), then locks and looks up: if it loaded the
//! new value, the writer still held the lock or had released it, so the look-up sees the change;
//! if it loaded the old value, the memo is tagged with the old generation and dropped at the next
//! read after the bump. A write that completed before a read began (it happened-before the read,
//! through any synchronisation) has its bump visible to that read (coherence), so no read after a
//! completed write returns the old answer. Model: `loom_a_read_after_a_completed_write_sees_it`.
//!
//! Cost: a hit is one `Acquire` load (a plain load on x86) and N compares; a miss adds the
//! table's own look-up. Memos live in the readers' thread-locals (const-initialised, no
//! destructor, so they work on threads in teardown).

use std::cell::Cell;

/// The generation of a table: how many times it changed. See the module docs.
pub trait GenerationCounter {
    /// The current generation (`Acquire`: pairs with the `Release` of [`Self::bump`]).
    fn current(&self) -> u64;
    /// Marks the table changed. Call after the change, while holding the table's write lock.
    fn bump(&self);
}

/// The process-wide counter of a table in a `static` (loom's atomics cannot be built in one;
/// the model uses its own counter through [`GenerationCounter`]).
#[derive(Debug, Default)]
pub struct Generation(std::sync::atomic::AtomicU64);

impl Generation {
    pub const fn new() -> Self {
        Self(std::sync::atomic::AtomicU64::new(0))
    }
}

impl GenerationCounter for Generation {
    #[inline(always)]
    fn current(&self) -> u64 {
        // Acquire: pairs with `bump`'s Release (see the module docs for why the lock order matters).
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    #[inline]
    fn bump(&self) {
        // Release: publishes the change made under the lock before the new generation.
        self.0.fetch_add(1, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(loom)]
impl GenerationCounter for crate::sync::AtomicU64 {
    fn current(&self) -> u64 {
        self.load(crate::sync::Ordering::Acquire)
    }
    fn bump(&self) {
        self.fetch_add(1, crate::sync::Ordering::Release);
    }
}

/// One thread's last `N` answers of a table, each valid for the generation it was read at.
/// Not `Sync`: keep it in a thread-local.
#[derive(Debug)]
pub struct Memo<K: Copy + Eq, V: Copy, const N: usize> {
    /// (generation, key, answer); an entry never filled holds [`EMPTY`] as its generation (no
    /// `Option`: its tag would be one more test per entry on every hit).
    entries: Cell<[(u64, K, V); N]>,
    /// The entry the next miss replaces (round robin).
    next: Cell<usize>,
}

/// The generation of an entry never filled: a counter bumped once per table change never gets
/// there.
const EMPTY: u64 = u64::MAX;

impl<K: Copy + Eq, V: Copy, const N: usize> Memo<K, V, N> {
    /// An empty memo; `key` and `value` only fill the unused entries (const, so that the memo
    /// can be a const-initialised thread-local).
    pub const fn new(key: K, value: V) -> Self {
        Self { entries: Cell::new([(EMPTY, key, value); N]), next: Cell::new(0) }
    }

    /// The table's answer for `key`: a remembered one while `generation` has not moved, else
    /// `look_up(key)` (which reads the table under its lock), remembered.
    #[inline]
    pub fn get(&self, generation: &impl GenerationCounter, key: K, look_up: impl FnOnce(K) -> V) -> V {
        // Before the look-up: a change after this load moves the generation and drops the memo.
        let g = generation.current();
        // Entry by entry: a copy of the whole array out of the cell would cost more than the test.
        let entries: &Cell<[(u64, K, V)]> = &self.entries;
        let entries = entries.as_slice_of_cells();
        for e in entries {
            let (eg, ek, v) = e.get();
            if eg == g && ek == key {
                return v;
            }
        }
        let v = look_up(key);
        let i = self.next.get() % N;
        entries[i].set((g, key, v));
        self.next.set(i + 1);
        v
    }
}

impl<K: Copy + Eq + Default, V: Copy + Default, const N: usize> Default for Memo<K, V, N> {
    fn default() -> Self {
        Self::new(K::default(), V::default())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::RwLock;

    #[test]
    fn a_memo_answers_from_the_table_until_the_generation_moves() {
        let table = RwLock::new(1u64);
        let generation = Generation::new();
        let memo: Memo<u64, u64, 2> = Memo::default();
        let looked_up = Cell::new(0);
        let read = |k: u64| {
            memo.get(&generation, k, |_| {
                looked_up.set(looked_up.get() + 1);
                *table.read().expect("lock")
            })
        };
        assert_eq!(read(7), 1);
        assert_eq!(read(7), 1);
        assert_eq!(read(8), 1);
        assert_eq!(read(7), 1);
        assert_eq!(looked_up.get(), 2, "two keys, each looked up once");
        {
            let mut t = table.write().expect("lock");
            *t = 2;
            generation.bump();
        }
        assert_eq!(read(7), 2, "a change drops every memo");
        assert_eq!(read(8), 2);
        assert_eq!(looked_up.get(), 4);
        // A third key evicts the oldest entry (7): its next read looks up again.
        assert_eq!(read(9), 2);
        assert_eq!(read(7), 2);
        assert_eq!(looked_up.get(), 6);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

    /// A writer changes the table and then says so (a flag, any synchronisation would do); a
    /// reader that reads the table before and after seeing the flag must see the change after
    /// it, and never an older value than it saw before. Fails when the generation is read after
    /// the look-up (a memo of the old value tagged with the new generation).
    #[test]
    fn loom_a_read_after_a_completed_write_sees_it() {
        loom::model(|| {
            let table = Arc::new(loom::sync::Mutex::new(1u64));
            let generation = Arc::new(AtomicU64::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let writer = {
                let (table, generation, done) = (table.clone(), generation.clone(), done.clone());
                loom::thread::spawn(move || {
                    {
                        let mut t = table.lock().expect("lock");
                        *t = 2;
                        generation.bump();
                    }
                    done.store(true, Ordering::Release);
                })
            };
            let memo: Memo<u64, u64, 1> = Memo::default();
            let read = || memo.get(&*generation, 7, |_| *table.lock().expect("lock"));
            let first = read();
            let seen = done.load(Ordering::Acquire);
            let second = read();
            assert!(second >= first, "went back from {first} to {second}");
            if seen {
                assert_eq!(second, 2, "a read after the completed write returned the old value");
            }
            writer.join().expect("writer");
        });
    }
}
