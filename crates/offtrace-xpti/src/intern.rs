//! Insert-only intern tables with lock-free reads: the string table, the object table, the stream
//! table and the vendor table all use one [`InternTable`].
//!
//! Layout: a fixed power-of-two array of bucket heads, each a singly linked list of immutable
//! nodes that are published with a release store and never freed (they live in per-shard bump
//! arenas for the life of the process, so pointers handed to C stay valid forever, also across
//! `xptiReset`). Readers take no lock and never see a torn node; writers lock only the shard of
//! their bucket, so concurrent inserts of different strings do not serialise (and cannot crash
//! each other the way Intel's resizing table does, `xpti-abi.md` §10). There is no rehash: the
//! head array is large and lazily paged (zeroed allocation), chains stay short.
//!
//! IDs are dense and sequential from `first_id`; [`IdVec`] maps an ID back to its node with two
//! loads and no lock.

use std::alloc::{Layout, alloc_zeroed};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use crate::hash::table_hash;

const SHARDS: usize = 64;
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
    next: *const Node,
    hash: u64,
    /// The dense ID.
    pub id: u32,
    /// Caller-defined tag (the object type for the object table).
    pub tag: u8,
    /// Length of `data` without the trailing NUL.
    pub len: usize,
    /// The bytes, followed by a NUL so that string tables can hand `data` out as a C string.
    pub data: *const u8,
    /// Caller-defined data attached at insertion (the key table's `KeyEntry`).
    pub extra: *const std::ffi::c_void,
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

/// A bump allocator over leaked chunks; used only under its shard's mutex.
#[derive(Debug)]
struct Arena {
    ptr: *mut u8,
    left: usize,
}

// SAFETY: the arena is only touched while its shard mutex is held.
unsafe impl Send for Arena {}

impl Arena {
    const fn new() -> Self {
        Arena { ptr: ptr::null_mut(), left: 0 }
    }

    fn alloc(&mut self, size: usize, align: usize) -> *mut u8 {
        let pad = (self.ptr as usize).wrapping_neg() & (align - 1);
        if self.ptr.is_null() || pad + size > self.left {
            let chunk = size.max(ARENA_CHUNK);
            // Process-lifetime memory: intentionally leaked (pointers are handed to C).
            let buf: &'static mut [u8] = Box::leak(vec![0u8; chunk + align].into_boxed_slice());
            self.ptr = buf.as_mut_ptr();
            self.left = buf.len();
            return self.alloc(size, align);
        }
        // SAFETY:
        // - `pad + size <= left`, so both offsets stay inside the current chunk.
        let p = unsafe { self.ptr.add(pad) };
        // SAFETY: as above.
        self.ptr = unsafe { p.add(size) };
        self.left -= pad + size;
        p
    }
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
    pub fn set(&self, id: u32, value: *mut T) -> bool {
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

/// An insert-only intern table (see the module docs).
#[derive(Debug)]
pub struct InternTable {
    heads: Box<[AtomicPtr<Node>]>,
    mask: usize,
    shards: Box<[Mutex<Arena>]>,
    ids: IdVec<Node>,
    next_id: AtomicU32,
    first_id: u32,
    max_id: u32,
}

impl InternTable {
    /// A table with `1 << bucket_bits` buckets whose IDs start at `first_id` and stop below `max_id`.
    pub fn new(bucket_bits: u32, first_id: u32, max_id: u32) -> Self {
        let n = 1usize << bucket_bits;
        InternTable {
            heads: zeroed_ptr_slice(n),
            mask: n - 1,
            shards: (0..SHARDS).map(|_| Mutex::new(Arena::new())).collect(),
            ids: IdVec::new(),
            next_id: AtomicU32::new(first_id),
            first_id,
            max_id,
        }
    }

    #[inline]
    fn find_in(&self, head: *const Node, hash: u64, bytes: &[u8]) -> Option<&'static Node> {
        let mut cur = head;
        while !cur.is_null() {
            // SAFETY:
            // - nodes are published with release stores after full initialisation, read here
            //   after an acquire load of the head, and never freed.
            let node: &'static Node = unsafe { &*cur };
            if node.hash == hash && node.bytes() == bytes {
                return Some(node);
            }
            cur = node.next;
        }
        None
    }

    /// The entry for `bytes`, if interned. Lock-free.
    #[inline]
    pub fn lookup(&self, bytes: &[u8]) -> Option<&'static Node> {
        let hash = table_hash(bytes);
        // Acquire: pairs with the release store in `intern` so the node's fields are visible.
        let head = self.heads[hash as usize & self.mask].load(Ordering::Acquire);
        self.find_in(head, hash, bytes)
    }

    /// Interns `bytes` (copied, NUL-terminated) and returns the entry and whether it is new.
    /// `None` when the ID space is exhausted.
    pub fn intern(&self, bytes: &[u8], tag: u8) -> Option<(&'static Node, bool)> {
        self.intern_with(bytes, tag, |_| ptr::null())
    }

    /// Like [`intern`](Self::intern); `make_extra` runs under the shard lock for a new entry
    /// (given the interned copy of the bytes) and its result is published with the node.
    pub fn intern_with(
        &self,
        bytes: &[u8],
        tag: u8,
        make_extra: impl FnOnce(*const u8) -> *const std::ffi::c_void,
    ) -> Option<(&'static Node, bool)> {
        let hash = table_hash(bytes);
        let bucket = hash as usize & self.mask;
        let head = self.heads[bucket].load(Ordering::Acquire);
        if let Some(n) = self.find_in(head, hash, bytes) {
            return Some((n, false));
        }
        let mut arena = self.shards[bucket % SHARDS].lock().unwrap_or_else(|e| e.into_inner());
        // Re-check under the shard lock: another thread may have inserted the same bytes.
        let head = self.heads[bucket].load(Ordering::Acquire);
        if let Some(n) = self.find_in(head, hash, bytes) {
            return Some((n, false));
        }
        // Relaxed: the counter only hands out distinct IDs; publication is by the stores below.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id >= self.max_id {
            return None;
        }
        let data = arena.alloc(bytes.len() + 1, 8);
        // SAFETY:
        // - `data` has room for len + 1 bytes; the source is a valid slice; regions are disjoint.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            *data.add(bytes.len()) = 0;
        }
        let node_mem = arena.alloc(size_of::<Node>(), align_of::<Node>()).cast::<Node>();
        // SAFETY:
        // - `node_mem` is fresh, aligned arena memory for one Node.
        unsafe {
            node_mem.write(Node { next: head, hash, id, tag, len: bytes.len(), data, extra: make_extra(data) });
        }
        // Release: publishes the node's contents to lock-free readers of the id map and bucket.
        self.ids.set(id, node_mem);
        self.heads[bucket].store(node_mem, Ordering::Release);
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
        let _guards: Vec<_> = self.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let end = self.next_id.load(Ordering::Relaxed).min(self.max_id);
        for id in self.first_id..end {
            self.ids.set(id, ptr::null_mut());
        }
        for h in self.heads.iter() {
            h.store(ptr::null_mut(), Ordering::Release);
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
    fn concurrent_inserts_agree() {
        let t = std::sync::Arc::new(InternTable::new(6, 1, u32::MAX));
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    (0..2000).map(|i| t.intern(format!("s{}", (i * 7 + k) % 3000).as_bytes(), 0).expect("id").0.id).count()
                })
            })
            .collect();
        for h in hs {
            h.join().expect("thread");
        }
        assert_eq!(t.len(), (0..4).flat_map(|k| (0..2000).map(move |i| (i * 7 + k) % 3000)).collect::<std::collections::HashSet<_>>().len());
    }
}
