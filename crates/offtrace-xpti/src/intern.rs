//! Insert-only intern tables with lock-free reads: the string table, the object table, the stream
//! table and the vendor table all use one [`InternTable`].
//!
//! Layout: 64 shards, each an open-addressing array of tagged node pointers (linear probing, load
//! factor ≤ 1/2). Nodes are immutable, published with a release store and never freed (they live
//! in per-thread bump arenas for the life of the process, so pointers handed to C stay valid
//! forever, also across `xptiReset`; the arenas take 64 KiB pieces of one huge-page-backed
//! region, see `region.rs`). Readers take no lock and never see a torn node; writers
//! lock only their shard, so concurrent inserts of different strings rarely wait on each other.
//! A shard grows by building a twice-as-large copy under its lock and publishing it with one
//! pointer store; the old array is leaked rather than freed, because a reader may still be
//! probing it. That is what Intel's phmap resize gets wrong under concurrent inserts
//! (`docs/reference/xpti-abi.md` §10): here nothing a reader can reach is ever freed or rewritten.
//!
//! IDs are dense and sequential from `first_id`; [`IdVec`] maps an ID back to its node with two
//! loads and no lock.

use std::alloc::{Layout, alloc_zeroed};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::hash::table_hash;

const SHARDS: usize = 64;
/// Size of the pieces the per-thread arenas take from `region::static_chunk`.
const ARENA_CHUNK: usize = 64 * 1024;

/// A boxed slice of `n` null atomic pointers from a zeroed allocation: the OS pages it lazily, so
/// large, sparsely used tables cost only the pages touched.
pub fn zeroed_ptr_slice<T>(n: usize) -> Box<[AtomicPtr<T>]> {
    let layout = Layout::array::<AtomicPtr<T>>(n).expect("table layout");
    // SAFETY:
    // - non-zero layout; all-zero bytes are valid null `AtomicPtr`s.
    let p = unsafe { alloc_zeroed(layout) }.cast::<AtomicPtr<T>>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY:
    // - `p` was allocated with the global allocator for exactly `n` elements, all initialised.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) }
}

/// One interned entry. Immutable once published.
#[repr(C)]
#[derive(Debug)]
pub struct Node {
    hash: u64,
    /// The dense ID.
    pub id: u32,
    /// Caller-defined tag (the object type for the object table).
    pub tag: u8,
    /// Length of `data` without the trailing NUL.
    pub len: usize,
    /// The bytes, followed by a NUL so that string tables can hand `data` out as a C string.
    pub data: *const u8,
}

impl Node {
    /// The bytes of the entry.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY:
        // - `data` points to `len` initialised bytes in an arena that is never freed.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

// SAFETY: nodes are immutable after publication and point only into never-freed arena memory.
unsafe impl Send for Node {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for Node {}

/// A bump allocator over leaked chunks, used by one thread at a time (a thread's own, or the
/// shared one under its mutex).
#[derive(Debug)]
pub(crate) struct Arena {
    ptr: *mut u8,
    left: usize,
}

// SAFETY: an arena is owned by one thread or behind a mutex; it hands out never-freed memory.
unsafe impl Send for Arena {}

impl Arena {
    pub(crate) const fn new() -> Self {
        Arena { ptr: ptr::null_mut(), left: 0 }
    }

    /// `size` bytes of uninitialised, never-freed memory aligned to `align` (a power of two).
    #[inline]
    pub(crate) fn alloc(&mut self, size: usize, align: usize) -> *mut u8 {
        let pad = (self.ptr as usize).wrapping_neg() & (align - 1);
        if self.ptr.is_null() || pad + size > self.left {
            return self.alloc_in_new_chunk(size, align);
        }
        // SAFETY:
        // - `pad + size <= left`, so both offsets stay inside the current chunk.
        let p = unsafe { self.ptr.add(pad) };
        // SAFETY: as above.
        self.ptr = unsafe { p.add(size) };
        self.left -= pad + size;
        p
    }

    /// [`alloc`](Self::alloc) when the current chunk is used up (the rest of it is left unused).
    #[cold]
    #[inline(never)]
    fn alloc_in_new_chunk(&mut self, size: usize, align: usize) -> *mut u8 {
        // Process-lifetime memory (pointers are handed to C), populated in huge-page steps by
        // `region`; not zeroed again: every user writes what it allocates before publishing it.
        // The global allocator (leaked) only if the region is exhausted.
        let chunk = (size + align).next_multiple_of(ARENA_CHUNK);
        let p = crate::region::static_chunk(chunk);
        if p.is_null() {
            let buf: &'static mut [std::mem::MaybeUninit<u8>] = Box::leak(Box::new_uninit_slice(chunk));
            self.ptr = buf.as_mut_ptr().cast::<u8>();
        } else {
            self.ptr = p;
        }
        self.left = chunk;
        self.alloc(size, align)
    }

    /// Takes back the `size` bytes at `p` if they were the last allocation (the next allocation
    /// reuses them); otherwise they stay allocated.
    ///
    /// # Safety
    /// `p` and `size` are those of an allocation of this arena that nobody else can reach: if
    /// it was the last one, the next allocation hands the same bytes out again.
    pub(crate) unsafe fn give_back(&mut self, p: *mut u8, size: usize) {
        if p.wrapping_add(size) == self.ptr {
            self.ptr = p;
            self.left += size;
        }
    }
}

thread_local! {
    static THREAD_ARENA: std::cell::RefCell<Arena> = const { std::cell::RefCell::new(Arena::new()) };
}
static SHARED_ARENA: Mutex<Arena> = Mutex::new(Arena::new());

/// Process-lifetime memory for one node: the calling thread's arena, or a shared one on a thread
/// that is exiting.
fn alloc_node(size: usize) -> *mut u8 {
    alloc_static(size, align_of::<Node>())
}

/// `size` bytes of uninitialised, never-freed memory aligned to `align` (a power of two): the
/// calling thread's arena, or a shared one on a thread that is exiting. Must not be called while
/// the calling thread is inside another `alloc_static`.
pub(crate) fn alloc_static(size: usize, align: usize) -> *mut u8 {
    THREAD_ARENA
        .try_with(|a| a.borrow_mut().alloc(size, align))
        .unwrap_or_else(|_| SHARED_ARENA.lock().unwrap_or_else(|e| e.into_inner()).alloc(size, align))
}

/// Maps dense IDs to pointers with two dependent loads, growing without moving anything.
#[derive(Debug)]
pub struct IdVec<T> {
    chunks: Box<[AtomicPtr<AtomicPtr<T>>]>,
}

const ID_CHUNK_BITS: u32 = 12;
const ID_CHUNK: usize = 1 << ID_CHUNK_BITS;
const ID_CHUNKS: usize = 1 << 14; // 64 M IDs

impl<T> IdVec<T> {
    /// An empty map.
    pub fn new() -> Self {
        IdVec { chunks: zeroed_ptr_slice(ID_CHUNKS) }
    }

    /// The pointer stored for `id`, or null.
    #[inline]
    pub fn get(&self, id: u32) -> *mut T {
        let id = id as usize;
        let Some(chunk) = self.chunks.get(id >> ID_CHUNK_BITS) else { return ptr::null_mut() };
        // Acquire: pairs with the release store that published the chunk.
        let chunk = chunk.load(Ordering::Acquire);
        if chunk.is_null() {
            return ptr::null_mut();
        }
        // SAFETY:
        // - `chunk` points to ID_CHUNK atomics, never freed; the index is masked below ID_CHUNK.
        unsafe { (*chunk.add(id & (ID_CHUNK - 1))).load(Ordering::Acquire) }
    }

    /// Stores `value` for `id`. Returns false when `id` is beyond the capacity.
    ///
    /// # Safety
    /// `value` is null or points to a `T` valid for the rest of the process: readers of the
    /// map (`Interner::by_id`, `Slab::owner`) dereference what [`Self::get`] returns.
    pub unsafe fn set(&self, id: u32, value: *mut T) -> bool {
        let id = id as usize;
        let Some(slot) = self.chunks.get(id >> ID_CHUNK_BITS) else { return false };
        let mut chunk = slot.load(Ordering::Acquire);
        if chunk.is_null() {
            let layout = Layout::array::<AtomicPtr<T>>(ID_CHUNK).expect("small layout");
            // SAFETY:
            // - the layout has non-zero size; all-zero bytes are valid null AtomicPtrs.
            let fresh = unsafe { alloc_zeroed(layout) }.cast::<AtomicPtr<T>>();
            if fresh.is_null() {
                return false;
            }
            // AcqRel: publish the zeroed chunk, or see the winner's chunk (the loser's leaks).
            chunk = match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => fresh,
                Err(winner) => winner,
            };
        }
        // SAFETY:
        // - `chunk` points to ID_CHUNK atomics, never freed; the index is masked.
        unsafe { (*chunk.add(id & (ID_CHUNK - 1))).store(value, Ordering::Release) };
        true
    }
}

impl<T> Default for IdVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// One shard's open-addressing slot array. Each slot is 0 or `tag << 48 | node address`
/// (x86-64 user addresses fit in 48 bits), so a probe compares 16 hash bits before touching a
/// node. Slots only ever go from 0 to a node; a full-enough table is replaced by a copy twice as
/// large, and the old one is leaked (a lock-free reader may still be probing it), so the slot
/// memory is `'static`.
#[derive(Debug)]
struct Slots {
    mask: usize,
    slots: &'static [AtomicU64],
}

impl Slots {
    fn with_capacity(cap: usize) -> *mut Slots {
        let slots = zeroed_u64_slice(cap);
        Box::into_raw(Box::new(Slots { mask: cap - 1, slots }))
    }
}

/// Tables from this size on come from the huge-page region (`region::static_chunk`): a probe of
/// a large table is a random access, and with 4 KiB pages each one also misses the TLB (a
/// two-dimensional page walk under a hypervisor).
const REGION_TABLE_BYTES: usize = 64 * 1024;

/// `n` zero slots, never freed.
fn zeroed_u64_slice(n: usize) -> &'static [AtomicU64] {
    let bytes = n * size_of::<AtomicU64>();
    if bytes >= REGION_TABLE_BYTES {
        let p = crate::region::static_chunk(bytes.next_multiple_of(4096)).cast::<AtomicU64>();
        if !p.is_null() {
            // SAFETY:
            // - `p` is fresh, never-handed-out region memory: zero-filled by the kernel (nothing
            //   has written it), 4096-aligned, at least `n` slots long, never freed; all-zero
            //   bytes are valid `AtomicU64`s.
            return unsafe { std::slice::from_raw_parts(p, n) };
        }
    }
    let layout = Layout::array::<AtomicU64>(n).expect("slot layout");
    // SAFETY:
    // - non-zero layout; zero bytes are valid `AtomicU64`s.
    let p = unsafe { alloc_zeroed(layout) }.cast::<AtomicU64>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: allocated by the global allocator for exactly `n` initialised elements, never freed.
    unsafe { std::slice::from_raw_parts(p, n) }
}

const ADDR_MASK: u64 = (1 << 48) - 1;

/// Bits 40..56 of the hash (the shard uses the top bits): the probe filter, and the low 16 bits
/// of the home slot index, so that a table of up to 2^16 slots grows without reading any node.
/// (An occupied slot is never 0: the node address is not null.)
#[inline]
fn tag_of(hash: u64) -> u64 {
    (hash >> 40) & 0xFFFF
}

/// The home slot of `hash` in a table with `mask`: the tag's bits, and low hash bits above them
/// for tables larger than 2^16 slots.
#[inline]
fn home_of(hash: u64, mask: usize) -> usize {
    (tag_of(hash) | hash << 16) as usize & mask
}

#[derive(Debug)]
struct Shard {
    table: AtomicPtr<Slots>,
    /// Held by inserters of this shard; guards its entry count.
    insert: Mutex<((), usize)>,
}

/// An insert-only intern table (see the module docs).
#[derive(Debug)]
pub struct InternTable {
    shards: Box<[Shard]>,
    ids: IdVec<Node>,
    next_id: AtomicU32,
    first_id: u32,
    max_id: u32,
    initial_slots: usize,
}

impl InternTable {
    /// A table sized for about `1 << size_bits` entries before its first resize, whose IDs start
    /// at `first_id` and stop below `max_id`.
    pub fn new(size_bits: u32, first_id: u32, max_id: u32) -> Self {
        let initial_slots = ((1usize << size_bits) * 2 / SHARDS).max(16);
        InternTable {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    table: AtomicPtr::new(Slots::with_capacity(initial_slots)),
                    insert: Mutex::new(((), 0)),
                })
                .collect(),
            ids: IdVec::new(),
            next_id: AtomicU32::new(first_id),
            first_id,
            max_id,
            initial_slots,
        }
    }

    #[inline]
    fn shard(&self, hash: u64) -> &Shard {
        &self.shards[(hash >> 58) as usize % SHARDS]
    }

    #[inline]
    fn find_in(table: &Slots, hash: u64, bytes: &[u8]) -> Option<&'static Node> {
        let tag = tag_of(hash);
        let mut i = home_of(hash, table.mask);
        loop {
            // Acquire: pairs with the release store publishing the node.
            let v = table.slots[i].load(Ordering::Acquire);
            if v == 0 {
                return None;
            }
            if v >> 48 == tag {
                // SAFETY:
                // - non-zero slots hold the address of a fully initialised, never-freed node.
                let node: &'static Node = unsafe { &*((v & ADDR_MASK) as *const Node) };
                if node.hash == hash && node.bytes() == bytes {
                    return Some(node);
                }
            }
            i = (i + 1) & table.mask;
        }
    }

    /// The entry for `bytes`, if interned. Lock-free.
    #[inline]
    pub fn lookup(&self, bytes: &[u8]) -> Option<&'static Node> {
        let hash = table_hash(bytes);
        // Acquire: pairs with the release store of a resized table.
        let t = self.shard(hash).table.load(Ordering::Acquire);
        // SAFETY: tables are never freed.
        Self::find_in(unsafe { &*t }, hash, bytes)
    }

    fn place(table: &Slots, hash: u64, node: *const Node) {
        Self::place_value(table, home_of(hash, table.mask), (tag_of(hash) << 48) | node as u64);
    }

    /// Stores the slot value `v` at the first free slot from `home`.
    fn place_value(table: &Slots, home: usize, v: u64) {
        let mut i = home;
        while table.slots[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & table.mask;
        }
        // Release: publishes the node's contents to lock-free readers of this slot.
        table.slots[i].store(v, Ordering::Release);
    }

    /// Interns `bytes` (copied, NUL-terminated) and returns the entry and whether it is new.
    /// `None` when the ID space is exhausted.
    pub fn intern(&self, bytes: &[u8], tag: u8) -> Option<(&'static Node, bool)> {
        let hash = table_hash(bytes);
        let shard = self.shard(hash);
        let t = shard.table.load(Ordering::Acquire);
        // SAFETY: tables are never freed.
        if let Some(n) = Self::find_in(unsafe { &*t }, hash, bytes) {
            return Some((n, false));
        }
        let mut guard = shard.insert.lock().unwrap_or_else(|e| e.into_inner());
        // Re-check under the shard lock: another thread may have inserted the same bytes.
        let t = shard.table.load(Ordering::Acquire);
        // SAFETY: tables are never freed.
        let mut table = unsafe { &*t };
        if let Some(n) = Self::find_in(table, hash, bytes) {
            return Some((n, false));
        }
        // Relaxed: the counter only hands out distinct IDs (under some shard lock each, so no
        // gaps); publication is by the release stores below.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id >= self.max_id {
            self.next_id.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let count = &mut guard.1;
        // The node and its bytes in one allocation (one cache line for short strings), from the
        // inserting thread's arena: entries a thread registers in sequence sit in sequence, so
        // lookups in the same order are prefetcher-friendly.
        let node_mem = alloc_node(size_of::<Node>() + bytes.len() + 1).cast::<Node>();
        // SAFETY:
        // - `node_mem` is fresh arena memory for a Node followed by len + 1 bytes.
        let data = unsafe { node_mem.cast::<u8>().add(size_of::<Node>()) };
        // SAFETY: as above; the source is a valid slice; regions are disjoint.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            *data.add(bytes.len()) = 0;
            node_mem.write(Node { hash, id, tag, len: bytes.len(), data });
        }
        *count += 1;
        if *count * 2 > table.slots.len() {
            // Grow: copy every slot into a table twice as large, then publish it. Readers still
            // on the old table may miss entries added from now on; they then take this lock and
            // find them in the new table.
            let bigger = Slots::with_capacity(table.slots.len() * 2);
            // SAFETY: just allocated.
            let b = unsafe { &*bigger };
            for v in table.slots.iter() {
                let v = v.load(Ordering::Relaxed);
                if v != 0 {
                    let home = if b.mask <= 0xFFFF {
                        // The tag holds every bit of the home index: no node access (which
                        // would be a cache miss per entry).
                        (v >> 48) as usize & b.mask
                    } else {
                        // SAFETY: non-zero slots are published nodes.
                        home_of(unsafe { &*((v & ADDR_MASK) as *const Node) }.hash, b.mask)
                    };
                    Self::place_value(b, home, v);
                }
            }
            // Release: the copied slots become visible with the table pointer.
            shard.table.store(bigger, Ordering::Release);
            table = b;
        }
        // SAFETY: a published node, never freed.
        unsafe { self.ids.set(id, node_mem) };
        Self::place(table, hash, node_mem);
        // SAFETY: just written, never freed.
        Some((unsafe { &*node_mem }, true))
    }

    /// The entry with this ID, or `None`.
    #[inline]
    pub fn by_id(&self, id: u32) -> Option<&'static Node> {
        let p = self.ids.get(id);
        // SAFETY: non-null pointers in `ids` are published, never-freed nodes.
        if p.is_null() { None } else { Some(unsafe { &*p }) }
    }

    /// Number of IDs handed out.
    #[allow(dead_code)]
    pub fn len(&self) -> usize {
        (self.next_id.load(Ordering::Relaxed).min(self.max_id) - self.first_id) as usize
    }

    /// Whether nothing is interned.
    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry (IDs restart at `first_id`). Old nodes stay allocated, so pointers
    /// already handed out remain readable. Not atomic with respect to concurrent inserts
    /// (`xptiReset` is a test-only function).
    pub fn clear(&self) {
        let mut guards: Vec<_> =
            self.shards.iter().map(|s| s.insert.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let end = self.next_id.load(Ordering::Relaxed).min(self.max_id);
        for id in self.first_id..end {
            // SAFETY: null.
            unsafe { self.ids.set(id, ptr::null_mut()) };
        }
        for (s, g) in self.shards.iter().zip(guards.iter_mut()) {
            // The old table is leaked: lock-free readers may still be probing it.
            s.table.store(Slots::with_capacity(self.initial_slots), Ordering::Release);
            g.1 = 0;
        }
        self.next_id.store(self.first_id, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sequential_and_stable() {
        let t = InternTable::new(4, 1, u32::MAX);
        let (a, new_a) = t.intern(b"alpha", 0).expect("id");
        let (b, _) = t.intern(b"beta", 0).expect("id");
        let (a2, new_a2) = t.intern(b"alpha", 0).expect("id");
        assert!(new_a && !new_a2);
        assert_eq!((a.id, b.id, a2.id), (1, 2, 1));
        assert_eq!(a.data, a2.data);
        assert_eq!(t.by_id(2).map(|n| n.bytes()), Some(&b"beta"[..]));
        assert!(t.by_id(3).is_none());
        t.clear();
        assert!(t.by_id(1).is_none());
        assert_eq!(t.intern(b"beta", 0).expect("id").0.id, 1);
    }

    #[test]
    fn the_tag_gives_the_home_slot_of_tables_up_to_2_16_slots() {
        let mut h = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..10_000 {
            h = h.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            for bits in [4, 10, 16] {
                let mask = (1usize << bits) - 1;
                let v = (tag_of(h) << 48) | 0x7f00_dead_beef;
                assert_eq!((v >> 48) as usize & mask, home_of(h, mask));
            }
        }
    }

    #[test]
    fn concurrent_inserts_agree() {
        let t = std::sync::Arc::new(InternTable::new(6, 1, u32::MAX));
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    (0..2000)
                        .map(|i| t.intern(format!("s{}", (i * 7 + k) % 3000).as_bytes(), 0).expect("id").0.id)
                        .count()
                })
            })
            .collect();
        for h in hs {
            h.join().expect("thread");
        }
        assert_eq!(
            t.len(),
            (0..4)
                .flat_map(|k| (0..2000).map(move |i| (i * 7 + k) % 3000))
                .collect::<std::collections::HashSet<_>>()
                .len()
        );
    }
}
