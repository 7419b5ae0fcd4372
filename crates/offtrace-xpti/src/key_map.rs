//! The map from 128-bit tracepoint keys (`docs/reference/xpti-abi.md` §6.1) to their never-freed entries
//! (`instance::KeyEntry`): find-or-insert without a lock, one locked instruction per new key.
//!
//! Layout: 256 shards, each an open-addressing array of slots (linear probing, grown at load
//! 3/4: the table of a few hundred thousand keys is a few megabytes, and a smaller one stays in
//! the caches more often between two probes of the same line; 500,000 new keys took a third less
//! time than with growth at load 1/2). A slot is 0 or an entry address (8-aligned, below 2^47)
//! with 20 bits of the hash in the bits the address leaves free (the tag), so a probe compares
//! the tag before touching an entry.
//! The tag's low bits are the home slot's, so a table of up to 2^20 slots grows without reading
//! any entry; the others filter: with 256 shards a shard holds a 256th of the keys, and at a
//! million keys 7 tag bits still tell entries apart (a false match is a cache miss on the
//! entry). The entry itself holds its key (there is no separate node and no dense ID: nobody asks
//! for keys by number).
//!
//! Insertion is a compare-exchange of the first empty slot on the probe path. Two threads
//! inserting the same key meet on that slot: the loser reads the winner's entry there. Growth
//! copies a shard's slots into a table twice as large under the shard's lock and publishes it
//! with one store; the old array is leaked, never freed or rewritten (a reader may still be
//! probing it). An insert into the old array while it is being copied must not be lost (the key
//! would be inserted again into the new array: two entries, two instance counters), so each shard
//! word carries a `RESIZING` bit, set before the copy starts, and every result is validated:
//!
//! * an inserter, after its compare-exchange, loads the shard word again; a reader, after finding
//!   its key, does the same. If the word is unchanged, the entry was in the table before the
//!   `RESIZING` bit was set, so the copy (which reads every slot after setting it) carries it over.
//!   (Sequentially consistent slot compare-exchanges, word loads and the bit's read-modify-write:
//!   either the copy sees the slot, or the inserter sees the bit. On x86-64 the loads are plain
//!   moves and the compare-exchange is the one locked instruction.)
//! * otherwise the result is not trusted: the thread waits for the resize (the shard lock) and
//!   looks again in the new array. An entry inserted but not carried over was validated by
//!   nobody, so its inserter may insert it again there, or drop it for the one found there.
//!
//! The entry's inserter learns that it created the key (`Fate::Published`): the key's instance
//! counter can start at 1 for it without another locked instruction.
//!
//! Entry counts decide growth. Below 512 slots every new key adds 1; from 512 slots on the counts
//! are sampled (one new key in 2, 4, and from 2048 slots in 8, chosen by hash bits the slot index
//! does not use, adds 2, 4 or 8): one locked add per 8 new keys instead of per key in the tables
//! that matter. A probe longer than `LONG_PROBE` also grows the table, so an unlucky count can
//! never let it fill up.
//!
//! The atomics and the shard locks go through the `sync` facade: the loom models at the end of
//! this file run `find_or_insert` and `grow` with inserts racing a resize
//! (`scripts/test-tier1.sh`).

use std::marker::PhantomData;
use std::ptr;

use crate::sync::{self, AtomicU64, AtomicUsize, Mutex, Ordering};

const SHARDS: usize = 256;
/// Set in a shard word while its table is being copied into a larger one.
const RESIZING: u64 = 1 << 63;
/// Low bits of a shard word: log2 of the table's slot count (tables are 64-byte aligned).
const BITS_MASK: u64 = 63;
/// The table address in a shard word.
const WORD_ADDR_MASK: u64 = ((1 << 48) - 1) & !BITS_MASK;
/// The entry address in a slot: bits 3..47 (x86-64 user addresses are below 2^47; entries are
/// 8-aligned). The tag is in the other bits.
const ADDR_MASK: u64 = ((1 << 47) - 1) & !7;
const TAG_BITS: u32 = 20;
/// A probe this long grows the table whatever the count says (at load 3/4, linear probing's
/// longest probe in a table of 2^16 slots is about 110).
const LONG_PROBE: usize = 256;
/// In tables of `2^(SAMPLE_FROM_BITS + k)` slots, one new key in `2^k` (k ≤ `SAMPLE_BITS`) adds
/// `2^k` to its shard's count: at least 128 samples below the growth threshold.
const SAMPLE_BITS: u32 = 3;
const SAMPLE_FROM_BITS: u32 = 8;
/// Tables from this size on come from the huge-page region (each probe of a large table is a
/// random access: fewer TLB misses, and the kernel zeroes the memory instead of `calloc`).
#[cfg(not(loom))]
const REGION_TABLE_BYTES: usize = 4096;

/// What a [`KeyMap`] needs of its entries: the key they were inserted under.
pub trait Keyed: Sync + 'static {
    /// The entry's 128-bit key.
    fn key(&self) -> [u64; 2];
}

/// What became of the candidate entry handed to [`KeyMap::find_or_insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It is the key's entry: the caller created the key.
    Published,
    /// The key existed; the candidate was never visible to another thread (its memory may be
    /// reused).
    Unused,
    /// The key existed, and the candidate was briefly visible in a table being resized: other
    /// threads may still read it, so its memory must never be reused.
    Abandoned,
}

/// One shard's lock and entry count, on a cache line of its own (the shard words, read by every
/// lookup, stay apart from the counts that inserters write).
#[repr(align(64))]
#[derive(Debug)]
struct Shard {
    /// Held while the shard's table is replaced (growth, `clear`).
    resize: Mutex<()>,
    /// Entries in the shard's table, sampled (see the module docs).
    count: AtomicUsize,
}

/// A concurrent insert-only map from 128-bit keys to `&'static T` (see the module docs).
#[derive(Debug)]
pub struct KeyMap<T: Keyed> {
    /// Per shard: the slot array's address | log2(slot count) | `RESIZING`.
    words: Box<[AtomicU64]>,
    shards: Box<[Shard]>,
    initial_bits: u32,
    _entries: PhantomData<&'static T>,
}

/// The hash of a key: one 64×64→128-bit multiply of the two halves, folded. The halves are
/// already well mixed in their low words (FNV-1a values or string IDs, line numbers), and the
/// multiply spreads every input bit over the middle and high bits that the shard (top 8 bits) and
/// the tag (bits 36..56) use. Distinct keys may share a hash; the entry's key decides.
#[inline]
pub fn hash(key: [u64; 2]) -> u64 {
    let m = u128::from(key[0] ^ 0x243F_6A88_85A3_08D3).wrapping_mul(u128::from(key[1] ^ 0x1319_8A2E_0370_7344));
    (m as u64) ^ ((m >> 64) as u64)
}

#[inline]
fn shard_of(hash: u64) -> usize {
    (hash >> 56) as usize
}

/// Bits 36..56 of the hash: the probe filter, and the low 20 bits of the home slot.
#[inline]
fn tag_of(hash: u64) -> u64 {
    (hash >> 36) & ((1 << TAG_BITS) - 1)
}

/// The tag as it sits in a slot: its top 17 bits above the address, its low 3 below it.
#[inline]
fn slot_tag(tag: u64) -> u64 {
    ((tag >> 3) << 47) | (tag & 7)
}

/// The tag of a slot value.
#[inline]
fn tag_in_slot(v: u64) -> u64 {
    ((v >> 47) << 3) | (v & 7)
}

/// The home slot: the tag's bits, and low hash bits above them for tables above 2^20 slots.
#[inline]
fn home_of(hash: u64, mask: usize) -> usize {
    (tag_of(hash) | hash << TAG_BITS) as usize & mask
}

/// log2 of the sampling step in a table of `2^bits` slots: whether a new key adds to its shard's
/// count is decided by hash bits 32..35, which neither the tag, the shard nor (below 2^52 slots)
/// the home index uses.
#[inline]
fn sample_step(hash: u64, bits: u32) -> Option<u32> {
    let k = bits.saturating_sub(SAMPLE_FROM_BITS).min(SAMPLE_BITS);
    ((hash >> 32) & ((1 << k) - 1) == 0).then_some(k)
}

/// A shard's table as read from its word.
#[derive(Clone, Copy)]
struct Table {
    slots: *const AtomicU64,
    mask: usize,
}

impl Table {
    #[inline]
    fn of(word: u64) -> Table {
        Table { slots: (word & WORD_ADDR_MASK) as *const AtomicU64, mask: (1usize << (word & BITS_MASK)) - 1 }
    }

    #[inline]
    fn slot(&self, i: usize) -> &'static AtomicU64 {
        // SAFETY:
        // - `slots` points to `mask + 1` never-freed slots (`new_table`); `i` is masked.
        unsafe { &*self.slots.add(i & self.mask) }
    }
}

/// A zeroed, 64-byte-aligned, never-freed array of `1 << bits` slots, as a shard word.
#[cfg(not(loom))]
fn new_table(bits: u32) -> u64 {
    let bytes = 8usize << bits;
    let mut p: *mut u8 = ptr::null_mut();
    if bytes >= REGION_TABLE_BYTES {
        // Fresh region memory: zero-filled by the kernel, 4096-aligned, never freed.
        p = crate::region::static_chunk(bytes.next_multiple_of(4096));
    }
    if p.is_null() {
        let layout = std::alloc::Layout::from_size_align(bytes, 64).expect("slot layout");
        // SAFETY: non-zero layout. The memory is leaked (never freed).
        p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
    }
    debug_assert!(p as u64 & !WORD_ADDR_MASK == 0);
    p as u64 | u64::from(bits)
}

/// [`new_table`] under loom: loom's atomics are not plain words, so the slots are built in place
/// (and leaked, like the real tables).
#[cfg(loom)]
fn new_table(bits: u32) -> u64 {
    let n = 1usize << bits;
    let layout = std::alloc::Layout::array::<AtomicU64>(n).and_then(|l| l.align_to(64)).expect("slot layout");
    // SAFETY: non-zero layout; leaked.
    let p = unsafe { std::alloc::alloc(layout) }.cast::<AtomicU64>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    for i in 0..n {
        // SAFETY: `i < n` slots were allocated above.
        unsafe { p.add(i).write(AtomicU64::new(0)) };
    }
    p as u64 | u64::from(bits)
}

/// x86-64 user addresses are below 2^47 and entries are 8-aligned; elsewhere the slot layout
/// would need another encoding. The panic is caught at the C boundary (no event is created).
#[cold]
#[inline(never)]
fn does_not_fit(entry: *const u8) -> ! {
    panic!("key entry address {entry:p} does not fit a key map slot");
}

/// What a probe of one table found.
enum Probe<T: 'static> {
    Found(&'static T),
    Inserted,
    /// No empty slot and no match within the whole table.
    Full,
}

impl<T: Keyed> KeyMap<T> {
    /// An empty map of `SHARDS << initial_bits` slots.
    pub fn new(initial_bits: u32) -> Self {
        KeyMap {
            words: (0..SHARDS).map(|_| AtomicU64::new(new_table(initial_bits))).collect(),
            shards: (0..SHARDS).map(|_| Shard { resize: Mutex::new(()), count: AtomicUsize::new(0) }).collect(),
            initial_bits,
            _entries: PhantomData,
        }
    }

    /// The entry for `key`, or the candidate that `make` builds, inserted. `make` runs once,
    /// after the load of the key's first slot has been issued, so that building the candidate
    /// overlaps that (usually missing) load. [`Fate`] says whether the candidate was published.
    ///
    /// # Safety
    /// `make` returns a pointer to a fully initialised `T` whose key is `key`, 8-aligned, that
    /// stays valid (never freed or written) for the rest of the process once published, and
    /// that, when not published, nobody else uses unless [`Fate::Abandoned`] says it was
    /// briefly visible: the map dereferences it and hands it out as `&'static T`.
    #[inline]
    pub unsafe fn find_or_insert(&self, key: [u64; 2], make: impl FnOnce() -> *const T) -> (&'static T, Fate) {
        let h = hash(key);
        let s = shard_of(h);
        // SeqCst (here and for every load of a shard word or slot): see the module docs.
        let mut word = self.words[s].load(Ordering::SeqCst);
        let home = home_of(h, Table::of(word).mask);
        let mut first = Table::of(word).slot(home).load(Ordering::SeqCst);
        let cand = make();
        // On x86-64 Linux every address this process gets without asking for a high one (mmap
        // without a hint, malloc) is below 2^47: checked in debug builds only there.
        if (cfg!(debug_assertions) || cfg!(not(target_arch = "x86_64"))) && cand as u64 & !ADDR_MASK != 0 {
            does_not_fit(cand.cast());
        }
        let value = slot_tag(tag_of(h)) | cand as u64;
        let mut visible = false;
        loop {
            if word & RESIZING == 0 {
                let table = Table::of(word);
                let (probe, distance) = Self::probe(table, h, key, value, first);
                // SeqCst: the validation of the module docs (ordered after the slot's
                // compare-exchange or load in the probe; see `seq_cst_point` for loom).
                sync::seq_cst_point();
                let valid = self.words[s].load(Ordering::SeqCst) == word;
                match probe {
                    Probe::Inserted if valid => {
                        self.inserted(s, h, word, distance);
                        return (
                            // SAFETY: the candidate is initialised and now published forever
                            // (the caller's contract).
                            unsafe { &*cand },
                            Fate::Published,
                        );
                    }
                    Probe::Inserted => visible = true,
                    Probe::Found(e) if valid => {
                        if ptr::eq(e, cand) {
                            return (e, Fate::Published);
                        }
                        return (e, if visible { Fate::Abandoned } else { Fate::Unused });
                    }
                    Probe::Found(_) => {}
                    Probe::Full => self.grow(s, word),
                }
            }
            // The table is being (or has been) replaced: wait for the resize, then look again.
            drop(self.shards[s].resize.lock().unwrap_or_else(|e| e.into_inner()));
            word = self.words[s].load(Ordering::SeqCst);
            first = Table::of(word).slot(home_of(h, Table::of(word).mask)).load(Ordering::SeqCst);
        }
    }

    /// Probes `table` from the home slot of `h` (whose value `first` was loaded already): the
    /// entry for `key`, or `value` inserted at the first empty slot. Also returns the distance
    /// from the home slot.
    #[inline]
    fn probe(table: Table, h: u64, key: [u64; 2], value: u64, first: u64) -> (Probe<T>, usize) {
        let tag = slot_tag(tag_of(h));
        let mut i = home_of(h, table.mask);
        let mut v = first;
        let mut distance = 0;
        loop {
            if v == 0 {
                // SeqCst: see the module docs; also publishes the candidate's contents.
                match table.slot(i).compare_exchange(0, value, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => return (Probe::Inserted, distance),
                    Err(now) => v = now,
                }
            }
            if v & !ADDR_MASK == tag {
                // SAFETY: non-zero slots hold the address of a published, never-freed entry.
                let e: &'static T = unsafe { &*((v & ADDR_MASK) as *const T) };
                if e.key() == key {
                    return (Probe::Found(e), distance);
                }
            }
            distance += 1;
            if distance > table.mask {
                return (Probe::Full, distance);
            }
            i = (i + 1) & table.mask;
            v = table.slot(i).load(Ordering::SeqCst);
        }
    }

    /// Bookkeeping after a validated insert into the table of `word`: the sampled count, and
    /// growth when the table is 3/4 full or the probe was long.
    #[inline]
    fn inserted(&self, s: usize, h: u64, word: u64, distance: usize) {
        let bits = (word & BITS_MASK) as u32;
        let mut grow = distance >= LONG_PROBE;
        if let Some(k) = sample_step(h, bits) {
            // Relaxed: a size estimate; the table word's own ordering publishes the tables.
            let n = self.shards[s].count.fetch_add(1 << k, Ordering::Relaxed) + (1 << k);
            grow |= n * 4 > 3 << bits;
        }
        if grow {
            self.grow(s, word);
        }
    }

    /// Replaces the table of `word` (if still current) with one twice as large.
    #[cold]
    #[inline(never)]
    fn grow(&self, s: usize, word: u64) {
        let _guard = self.shards[s].resize.lock().unwrap_or_else(|e| e.into_inner());
        let w = &self.words[s];
        // SeqCst: the `RESIZING` bit is ordered before every slot read below (module docs).
        if w.compare_exchange(word, word | RESIZING, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return; // Replaced already (by another grower or `clear`).
        }
        sync::seq_cst_point();
        let old = Table::of(word);
        let bits = (word & BITS_MASK) as u32 + 1;
        let new_word = new_table(bits);
        let new = Table::of(new_word);
        for i in 0..=old.mask {
            // SeqCst: see above; also acquires the entry for the rehash below.
            let v = old.slot(i).load(Ordering::SeqCst);
            if v == 0 {
                continue;
            }
            let mut j = if new.mask < 1 << TAG_BITS {
                // The tag holds every bit of the home index: no entry access (a cache miss each).
                tag_in_slot(v) as usize & new.mask
            } else {
                // SAFETY: non-zero slots hold published, never-freed entries.
                home_of(hash(unsafe { &*((v & ADDR_MASK) as *const T) }.key()), new.mask)
            };
            // The new table is private until published below: relaxed accesses suffice.
            while new.slot(j).load(Ordering::Relaxed) != 0 {
                j = (j + 1) & new.mask;
            }
            new.slot(j).store(v, Ordering::Relaxed);
        }
        // SeqCst: publishes the copied slots with the new table (a release store would do for
        // that; the validation loads compare against this store too).
        w.store(new_word, Ordering::SeqCst);
    }

    /// Forgets every entry. Entries stay allocated and old tables stay readable. An insert racing
    /// `clear` lands in the new, empty tables or is validated against the old ones just before
    /// they were replaced (then it is forgotten, as if inserted before the `clear`).
    pub fn clear(&self) {
        for (w, shard) in self.words.iter().zip(self.shards.iter()) {
            let _guard = shard.resize.lock().unwrap_or_else(|e| e.into_inner());
            // SeqCst: as in `grow`.
            w.store(new_table(self.initial_bits), Ordering::SeqCst);
            // Relaxed: read only as a size estimate.
            shard.count.store(0, Ordering::Relaxed);
        }
    }

    /// Slots in use across all shards (a scan; for tests and diagnostics).
    #[allow(dead_code)]
    pub fn len(&self) -> usize {
        self.words
            .iter()
            .map(|w| {
                let t = Table::of(w.load(Ordering::SeqCst));
                (0..=t.mask).filter(|&i| t.slot(i).load(Ordering::Relaxed) != 0).count()
            })
            .sum()
    }

    /// Slots allocated across the current tables of all shards (for tests and diagnostics).
    #[allow(dead_code)]
    pub fn capacity(&self) -> usize {
        self.words.iter().map(|w| Table::of(w.load(Ordering::Relaxed)).mask + 1).sum()
    }
}

// SAFETY: the slot arrays are never freed and only accessed atomically; entries are `Sync`.
unsafe impl<T: Keyed> Sync for KeyMap<T> {}
// SAFETY: as above.
unsafe impl<T: Keyed> Send for KeyMap<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    #[derive(Debug)]
    struct E {
        key: [u64; 2],
        uses: AtomicU32,
    }

    impl Keyed for E {
        fn key(&self) -> [u64; 2] {
            self.key
        }
    }

    fn leak(key: [u64; 2]) -> *const E {
        Box::leak(Box::new(E { key, uses: AtomicU32::new(0) }))
    }

    /// `find_or_insert` with a candidate from `make` (which leaks a fresh entry for the key).
    fn find_or_insert(m: &KeyMap<E>, key: [u64; 2], make: impl FnOnce() -> *const E) -> (&'static E, Fate) {
        // SAFETY: every `make` of these tests returns `leak(key)`: initialised, never freed.
        unsafe { m.find_or_insert(key, make) }
    }

    #[test]
    fn finds_what_it_inserted_and_grows() {
        let m = KeyMap::<E>::new(1);
        let cap0 = m.capacity();
        let keys: Vec<[u64; 2]> = (0..20_000u64).map(|i| [i % 7 * 0x1_0000_0001, i / 7]).collect();
        let mut entries = Vec::new();
        for &k in &keys {
            let (e, fate) = find_or_insert(&m, k, || leak(k));
            assert_eq!(fate, Fate::Published);
            assert_eq!(e.key, k);
            entries.push(e as *const E);
        }
        for (&k, &e) in keys.iter().zip(&entries) {
            let (f, fate) = find_or_insert(&m, k, || leak(k));
            assert_eq!(fate, Fate::Unused);
            assert!(ptr::eq(f, e));
        }
        assert_eq!(m.len(), keys.len());
        assert!(m.capacity() > cap0 && m.capacity() <= keys.len() * 8, "capacity {}", m.capacity());
        m.clear();
        assert_eq!(m.len(), 0);
        let (e, fate) = find_or_insert(&m, keys[5], || leak(keys[5]));
        assert_eq!(fate, Fate::Published);
        assert!(!ptr::eq(e, entries[5]));
    }

    #[test]
    fn the_tag_gives_the_home_slot_of_tables_up_to_2_20_slots() {
        for i in 0..10_000u64 {
            let h = hash([i, i.wrapping_mul(31)]);
            let v = slot_tag(tag_of(h)) | 0x7f00_dead_bee8;
            assert_eq!(v & ADDR_MASK, 0x7f00_dead_bee8);
            assert_eq!(tag_in_slot(v), tag_of(h));
            for bits in [4, 10, 16, 20] {
                let mask = (1usize << bits) - 1;
                assert_eq!(tag_in_slot(v) as usize & mask, home_of(h, mask));
            }
        }
    }

    /// The races of the module docs, made deterministic: `make` runs after the shard word and the
    /// home slot were read, so growing the shard from inside it leaves the caller probing a
    /// replaced table.
    #[test]
    fn results_from_a_table_replaced_meanwhile_are_redone_in_the_new_one() {
        let m = KeyMap::<E>::new(3);
        let grow_shard_of = |k: [u64; 2]| {
            let s = shard_of(hash(k));
            m.grow(s, m.words[s].load(Ordering::SeqCst));
        };
        // A new key inserted into the old table after the copy: validated against the new
        // word, so inserted again there (the same entry) and published once.
        let a = [1, 2];
        let (e, fate) = find_or_insert(&m, a, || {
            grow_shard_of(a);
            leak(a)
        });
        assert_eq!(fate, Fate::Published);
        let (again, fate) = find_or_insert(&m, a, || leak(a));
        assert!(ptr::eq(e, again));
        assert_eq!(fate, Fate::Unused);
        // An existing key found in the old table: found again in the new one.
        let (found, fate) = find_or_insert(&m, a, || {
            grow_shard_of(a);
            leak(a)
        });
        assert!(ptr::eq(e, found));
        assert_eq!(fate, Fate::Unused);
        // Meanwhile another thread publishes the same key in the new table: the candidate that
        // went into the old table is abandoned for that entry.
        let b = [3, 4];
        let mut other: *const E = ptr::null();
        let (e, fate) = find_or_insert(&m, b, || {
            grow_shard_of(b);
            let (o, f) = find_or_insert(&m, b, || leak(b));
            assert_eq!(f, Fate::Published);
            other = o;
            leak(b)
        });
        assert!(ptr::eq(e, other));
        assert_eq!(fate, Fate::Abandoned);
        assert_eq!(m.len(), 2);
    }

    /// Threads insert overlapping key sets into a small map (many concurrent resizes): every key
    /// ends up with exactly one entry, every thread sees that entry, and exactly one thread
    /// publishes it.
    #[test]
    fn concurrent_inserts_of_the_same_keys_agree_across_resizes() {
        for round in 0..4u64 {
            let m = Arc::new(KeyMap::<E>::new(0));
            let threads = 4;
            let n = 20_000u64;
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        let mut got = Vec::with_capacity(n as usize);
                        let mut created = 0u64;
                        for i in 0..n {
                            // Each thread walks the keys from its own offset.
                            let i = (i + t * n / threads) % n;
                            let k = [(round << 40) | (i % 97), i];
                            let (e, fate) = find_or_insert(&m, k, || leak(k));
                            assert_eq!(e.key, k);
                            e.uses.fetch_add(1, Ordering::Relaxed);
                            if fate == Fate::Published {
                                created += 1;
                            }
                            got.push((i, e as *const E as usize));
                        }
                        (got, created)
                    })
                })
                .collect();
            let mut owner = vec![0usize; n as usize];
            let mut created = 0;
            for h in hs {
                let (got, c) = h.join().expect("thread");
                created += c;
                for (i, e) in got {
                    let o = &mut owner[i as usize];
                    assert!(*o == 0 || *o == e, "key {i}: two entries");
                    *o = e;
                }
            }
            assert_eq!(created, n, "each key published exactly once");
            assert_eq!(m.len(), n as usize);
            for (i, &e) in owner.iter().enumerate() {
                // SAFETY: leaked entries.
                assert_eq!(unsafe { &*(e as *const E) }.uses.load(Ordering::Relaxed), threads as u32, "key {i}");
            }
        }
    }
}

/// The resize races of the module docs under loom, through the shipped `find_or_insert` and
/// `grow`: shards of eight slots, six taken, so the next insert grows its shard (at load 7/8)
/// while another thread inserts into the slot left empty.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    #[derive(Debug)]
    struct E {
        key: [u64; 2],
    }

    impl Keyed for E {
        fn key(&self) -> [u64; 2] {
            self.key
        }
    }

    fn leak(key: [u64; 2]) -> *const E {
        Box::leak(Box::new(E { key }))
    }

    /// `find_or_insert` with a freshly leaked candidate.
    fn find_or_insert(m: &KeyMap<E>, key: [u64; 2]) -> (&'static E, Fate) {
        // SAFETY: `leak(key)` is initialised and never freed.
        unsafe { m.find_or_insert(key, || leak(key)) }
    }

    /// Nine keys of one shard: six to fill it, three to race.
    fn keys_of_one_shard() -> ([[u64; 2]; 6], [[u64; 2]; 3]) {
        let shard = shard_of(hash([1, 1]));
        let mut same = (1..).map(|i| [i, i]).filter(|&k| shard_of(hash(k)) == shard);
        let mut next = || same.next().expect("a key");
        ([(); 6].map(|_| next()), [(); 3].map(|_| next()))
    }

    fn addr(e: &E) -> usize {
        e as *const E as usize
    }

    /// A shard of eight slots holding the six `keys`: the next insert into it grows it.
    fn map_with(keys: [[u64; 2]; 6]) -> Arc<KeyMap<E>> {
        let m = Arc::new(KeyMap::<E>::new(3));
        for k in keys {
            assert_eq!(find_or_insert(&m, k).1, Fate::Published);
        }
        assert_eq!(m.capacity(), 256 * 8, "not grown yet");
        m
    }

    /// Different keys inserted concurrently while the shard grows: both are published, and
    /// both are found afterwards (an insert into the table being copied is not lost).
    #[test]
    fn loom_inserts_racing_a_resize_are_not_lost() {
        let (fill, [k1, k2, _]) = keys_of_one_shard();
        loom::model(move || {
            let m = map_with(fill);
            let t = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let (e, fate) = find_or_insert(&m, k1);
                    (addr(e), fate)
                })
            };
            let (e2, f2) = find_or_insert(&m, k2);
            let (e1, f1) = t.join().expect("inserter");
            assert_eq!((f1, f2), (Fate::Published, Fate::Published));
            for (k, e) in [(k1, e1), (k2, addr(e2))] {
                let (found, fate) = find_or_insert(&m, k);
                assert_eq!(fate, Fate::Unused, "key {k:?} was lost and inserted again");
                assert_eq!(addr(found), e);
            }
        });
    }

    /// The same key inserted by two threads while a third grows the shard: exactly one
    /// publishes it, both get that entry, and it is the one found afterwards.
    #[test]
    fn loom_one_entry_per_key_across_a_resize() {
        let (fill, [k1, k2, _]) = keys_of_one_shard();
        loom::model(move || {
            let m = map_with(fill);
            let spawn = |k: [u64; 2]| {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let (e, fate) = find_or_insert(&m, k);
                    (addr(e), fate)
                })
            };
            let (grower, other) = (spawn(k2), spawn(k1));
            let (e1, f1) = find_or_insert(&m, k1);
            let (e2, f2) = other.join().expect("inserter");
            grower.join().expect("grower");
            assert_eq!(addr(e1), e2, "two entries for one key");
            assert_eq!([f1, f2].iter().filter(|&&f| f == Fate::Published).count(), 1, "{f1:?} {f2:?}");
            let (found, fate) = find_or_insert(&m, k1);
            assert_eq!((addr(found), fate), (e2, Fate::Unused));
        });
    }
}
