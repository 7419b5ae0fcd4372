//! Tracepoint instances: one 256-byte object per `xptiMakeEvent` / `xptiCreateTracepoint` /
//! `xptiRegisterTracepointScope` / `xptiRegisterPayload` call.
//!
//! * Memory: instances live in one reserved virtual region (PROT_NONE until committed and
//!   populated in 4 MiB steps of huge pages where available (`region`), never unmapped), carved into 256-byte slots. Freed slots go to a per-thread free list
//!   (batches of 64 move to and from a global pool), so create/delete on a thread costs no lock
//!   and no `malloc`, and make+release cycles keep memory flat.
//! * Identity: the uid64 is the slot address (like Intel's, which uses the heap address of the
//!   instance). Validating a uid64 from C needs no table: it must lie in the committed region, on
//!   a slot boundary, and the slot's key pointer must be non-null (set with release ordering when
//!   the instance is complete, cleared with a compare-exchange by the one deleter). This is the
//!   "live uid64 registry", lock-free and without hashing.
//! * Keys: every payload reduces to a 128-bit key (`xpti-abi.md` §6.1). Each key has one
//!   never-freed [`KeyEntry`] holding the owned name/file copies and the instance counter, found
//!   through a per-thread direct-mapped cache (pointer equality plus a string compare, which is
//!   cheaper than FNV hashing) and behind it a lock-free intern table.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::abi::{Payload, TraceEventData, event_flags, payload_flags as pf};
use crate::hash::fnv1a32;
use crate::intern::InternTable;
use crate::shim::{self, layout};

const SLOT: usize = layout::SIZE;
/// Address space reserved for instances; smaller reservations are tried when the kernel or an
/// address-space limit (`ulimit -v`, valgrind) refuses this one.
const RESERVE: usize = 64 << 30;
const RESERVE_MIN: usize = 256 << 20;
/// Commit granularity: two huge pages (`region::commit`).
const COMMIT_STEP: usize = 2 * crate::region::HUGE;
const BATCH: usize = 64;

/// Static names used when a payload has none (default hashing mode).
pub const UNKNOWN_FUNCTION: &CStr = c"<unknown-function>";
/// See [`UNKNOWN_FUNCTION`].
pub const UNKNOWN_FILE: &CStr = c"<unknown-file>";

/// Per-key data shared by all instances of one key. `repr(C)`: the C++ shim reads the first two
/// fields (`ot_key_info`).
#[repr(C)]
#[derive(Debug)]
pub struct KeyEntry {
    /// FNV-1a hash of the name (default mode) or its string ID (strict mode).
    pub function_id: i32,
    /// Same for the file.
    pub file_id: i32,
    /// Owned copy of the name (null in strict mode without a name).
    pub name: *const c_char,
    /// Owned copy of the file name.
    pub file: *const c_char,
    /// Instances created so far; survives deletion of instances.
    pub counter: AtomicU64,
}

// SAFETY: immutable apart from the atomic counter; the pointers are to never-freed copies.
unsafe impl Sync for KeyEntry {}
// SAFETY: as above.
unsafe impl Send for KeyEntry {}

/// The slab of instance slots.
#[derive(Debug)]
pub struct Slab {
    base: *mut u8,
    reserved: usize,
    committed: AtomicUsize,
    carved: Mutex<usize>,
    pool: Mutex<Vec<Vec<usize>>>,
    /// A freshly constructed instance (C++ constructor), when its empty-map image has the
    /// expected shape: new instances copy its vtable pointers and map image instead of calling
    /// into the shim (see [`Prototype`]).
    proto: Option<Prototype>,
}

/// Word indexes inside a 256-byte instance (see `shim::layout`).
const MAP_WORD: usize = (layout::EVENT + 56) / 8;
const MAP_WORDS: usize = 7;
const SINGLE_BUCKET_OFFSET: usize = 48;

/// The image of an instance straight out of its C++ constructor: four vtable pointers, an empty
/// libstdc++ map (bucket pointer → its own single-bucket slot, count 1, no nodes, max load 1.0,
/// next resize 0) and a null metadata iterator. Copying it (and re-pointing the self-referential
/// bucket pointer at the new object) constructs an instance without a call into C++; the copy
/// is used only if the prototype was verified to have exactly that shape.
#[derive(Debug)]
struct Prototype {
    words: [u64; SLOT / 8],
}

impl Prototype {
    fn build() -> Option<Prototype> {
        #[repr(C, align(16))]
        struct Buf([u64; SLOT / 8]);
        let mut buf = Box::new(Buf([0; SLOT / 8]));
        let obj = buf.0.as_mut_ptr().cast::<u8>();
        // SAFETY:
        // - `obj` is 256 writable, 16-aligned bytes; the shim constructs an instance there.
        unsafe { shim::ot_instance_construct(obj.cast()) };
        let w = buf.0;
        let map = obj as u64 + (MAP_WORD * 8) as u64;
        let empty_single_bucket = w[MAP_WORD] == map + SINGLE_BUCKET_OFFSET as u64
            && w[MAP_WORD + 1] == 1
            && w[MAP_WORD + 2] == 0
            && w[MAP_WORD + 3] == 0
            && w[MAP_WORD + 6] == 0;
        // The prototype's map owns no memory: leaking the box (never destroyed) is harmless.
        let words = w;
        std::mem::forget(buf);
        empty_single_bucket.then_some(Prototype { words })
    }
}

// SAFETY: `base` is a fixed mapping; all mutation goes through atomics or mutexes.
unsafe impl Sync for Slab {}
// SAFETY: as above.
unsafe impl Send for Slab {}

/// Per-thread state of the creation path: the free slot list and the key cache (allocated on
/// the thread's first creation: KEY_CACHE_SIZE × 40 bytes).
struct ThreadCache {
    free: Vec<usize>,
    keys: Option<Box<KeyCache>>,
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        if !self.free.is_empty()
            && let Some(slab) = crate::framework::slab_if_built()
        {
            let v = std::mem::take(&mut self.free);
            slab.pool.lock().unwrap_or_else(|e| e.into_inner()).push(v);
        }
    }
}

thread_local! {
    /// The source file of the thread's last new key (default hashing mode): the caller's
    /// pointer, the key's owned copy and its FNV-1a hash. Copies are never freed, so the memo
    /// never dangles; the caller's string is compared with the copy before use.
    static FILE_MEMO: Cell<(*const c_char, *const c_char, u32)> = const { Cell::new((ptr::null(), ptr::null(), 0)) };
    static THREAD: RefCell<ThreadCache> = const { RefCell::new(ThreadCache { free: Vec::new(), keys: None }) };
}

impl Slab {
    /// Reserves the address range (no memory is committed yet).
    pub fn new() -> Option<Self> {
        let (base, reserved) = crate::region::reserve(RESERVE, RESERVE_MIN)?;
        Some(Slab {
            base,
            reserved,
            committed: AtomicUsize::new(0),
            carved: Mutex::new(0),
            pool: Mutex::new(Vec::new()),
            proto: Prototype::build(),
        })
    }

    /// Whether `addr` is the start of a live instance.
    #[inline]
    pub fn is_live(&self, addr: usize) -> bool {
        let off = addr.wrapping_sub(self.base as usize);
        // Acquire: the committed size is published after mprotect succeeded.
        if off >= self.committed.load(Ordering::Acquire) || !off.is_multiple_of(SLOT) {
            return false;
        }
        // SAFETY:
        // - `addr` is a slot start inside committed (readable, never unmapped) memory.
        !unsafe { key_slot(addr as *mut u8) }.load(Ordering::Acquire).is_null()
    }

    #[cold]
    fn carve(&self) -> Option<Vec<usize>> {
        let mut carved = self.carved.lock().unwrap_or_else(|e| e.into_inner());
        let need = *carved + BATCH * SLOT;
        let committed = self.committed.load(Ordering::Relaxed);
        if need > committed {
            let grow = COMMIT_STEP.max(need - committed);
            if committed + grow > self.reserved {
                return None;
            }
            // Map the step read-write and populate it in one go (huge pages where the kernel has
            // them): one kernel call instead of a page fault per 16 new instances.
            // SAFETY:
            // - the range lies inside our reservation, above everything committed so far (only
            //   this function commits, under `carved`); COMMIT_STEP multiples keep it aligned.
            if !unsafe { crate::region::commit(self.base.add(committed), grow) } {
                return None;
            }
            // Release: `is_live` readers may now read the new pages.
            self.committed.store(committed + grow, Ordering::Release);
        }
        let start = self.base as usize + *carved;
        *carved = need;
        Some((0..BATCH).rev().map(|i| start + i * SLOT).collect())
    }

    fn refill(&self) -> Option<Vec<usize>> {
        if let Some(v) = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(v);
        }
        self.carve()
    }

    /// A free slot (uninitialised memory of SLOT bytes) from the thread's free list `free`
    /// (already borrowed by the caller), or from the global pool when the thread has none
    /// (thread exit).
    #[inline]
    fn alloc_in(&self, free: Option<&mut Vec<usize>>) -> Option<*mut u8> {
        match free {
            Some(free) => {
                if let Some(a) = free.pop() {
                    return Some(a as *mut u8);
                }
                self.alloc_refill(free)
            }
            None => {
                let mut batch = self.refill()?;
                let a = batch.pop();
                if !batch.is_empty() {
                    self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(batch);
                }
                a.map(|a| a as *mut u8)
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_refill(&self, free: &mut Vec<usize>) -> Option<*mut u8> {
        let mut batch = self.refill()?;
        let a = batch.pop();
        *free = batch;
        a.map(|a| a as *mut u8)
    }

    /// Returns a slot to the free lists.
    #[inline]
    pub fn free(&self, slot: *mut u8) {
        let a = slot as usize;
        let r = THREAD.try_with(|f| {
            let mut f = f.borrow_mut();
            f.free.push(a);
            if f.free.len() >= 2 * BATCH {
                let spill = f.free.split_off(BATCH);
                self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(spill);
            }
        });
        if r.is_err() {
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(vec![a]);
        }
    }

    /// Every carved slot address (for `xptiReset`).
    pub fn carved_slots(&self) -> impl Iterator<Item = usize> + '_ {
        let n = *self.carved.lock().unwrap_or_else(|e| e.into_inner()) / SLOT;
        (0..n).map(move |i| self.base as usize + i * SLOT)
    }
}

/// The key pointer field of an instance: non-null while the instance is live.
///
/// # Safety
/// `obj` must point into committed slab memory at a slot start.
#[inline]
pub unsafe fn key_slot<'a>(obj: *mut u8) -> &'a AtomicPtr<KeyEntry> {
    // SAFETY: the caller guarantees `obj + KEY` is inside a committed slot; 8-aligned.
    unsafe { &*obj.add(layout::KEY).cast::<AtomicPtr<KeyEntry>>() }
}

/// The event of an instance.
#[inline]
pub fn event_of(obj: *mut u8) -> *mut TraceEventData {
    obj.wrapping_add(layout::EVENT).cast()
}

/// The stored payload of an instance.
#[inline]
pub fn payload_of(obj: *mut u8) -> *mut Payload {
    obj.wrapping_add(layout::PAYLOAD).cast()
}

/// Entries of the per-thread key cache (two-way: a key may sit in slot i or i ^ 1).
const KEY_CACHE_SIZE: usize = 4096;

/// The per-thread key cache (allocated on the thread's first creation).
#[repr(transparent)]
struct KeyCache([CacheEntry; KEY_CACHE_SIZE]);

impl KeyCache {
    /// An empty cache, built on the heap (160 KiB would not fit every thread's stack).
    fn new_boxed() -> Box<KeyCache> {
        let v: Box<[CacheEntry]> = vec![CacheEntry::EMPTY; KEY_CACHE_SIZE].into_boxed_slice();
        let a: Box<[CacheEntry; KEY_CACHE_SIZE]> = v.try_into().unwrap_or_else(|_| unreachable!());
        // SAFETY: `KeyCache` is a `repr(transparent)` wrapper of the array.
        unsafe { Box::from_raw(Box::into_raw(a).cast::<KeyCache>()) }
    }
}

impl std::ops::Index<usize> for KeyCache {
    type Output = CacheEntry;
    #[inline(always)]
    fn index(&self, i: usize) -> &CacheEntry {
        &self.0[i & (KEY_CACHE_SIZE - 1)]
    }
}

impl std::ops::IndexMut<usize> for KeyCache {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut CacheEntry {
        &mut self.0[i & (KEY_CACHE_SIZE - 1)]
    }
}

#[derive(Clone, Copy)]
struct CacheEntry {
    name: *const c_char,
    file: *const c_char,
    line: u32,
    column: u32,
    generation: u32,
    key: *const KeyEntry,
}

impl CacheEntry {
    const EMPTY: CacheEntry =
        CacheEntry { name: ptr::null(), file: ptr::null(), line: 0, column: 0, generation: u32::MAX, key: ptr::null() };
}

/// A payload reduced to what identifies its key.
#[derive(Debug, Clone, Copy)]
pub struct Normalized {
    /// Effective name pointer (caller's, or the static unknown name; null in strict mode without one).
    pub name: *const c_char,
    /// Effective file pointer.
    pub file: *const c_char,
    /// Line and column as given.
    pub line: u32,
    /// See `line`.
    pub column: u32,
    /// Flags after adding the unknown-name/file flags.
    pub flags: u64,
}

/// Applies §6.1 step 2's substitutions for missing names (default mode only).
///
/// # Safety
/// Non-null string pointers in `p` with their flag set must be valid C strings.
pub fn normalize(p: &Payload, strict: bool) -> Normalized {
    let mut flags = p.flags;
    let mut name = if flags & pf::NAME_AVAILABLE != 0 { p.name } else { ptr::null() };
    let mut file = if flags & pf::SOURCE_FILE_AVAILABLE != 0 { p.source_file } else { ptr::null() };
    if !strict {
        if name.is_null() {
            name = UNKNOWN_FUNCTION.as_ptr();
            flags |= pf::NAME_AVAILABLE;
        }
        if file.is_null() {
            file = UNKNOWN_FILE.as_ptr();
            flags |= pf::SOURCE_FILE_AVAILABLE;
        }
    }
    Normalized { name, file, line: p.line_no, column: p.column_no, flags }
}

/// The per-key table.
#[derive(Debug)]
pub struct KeyTable {
    table: InternTable,
    generation: AtomicU32,
}

impl KeyTable {
    /// An empty table.
    pub fn new() -> Self {
        KeyTable { table: InternTable::new(12, 0, u32::MAX), generation: AtomicU32::new(0) }
    }

    /// Forgets every key (instance numbering restarts), for `xptiReset`.
    pub fn clear(&self) {
        self.table.clear();
        // Relaxed: per-thread caches compare it; a stale hit during a concurrent reset is benign.
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The entry for a normalized payload, creating it on first sight, through the thread's key
    /// cache `cache` (already borrowed by the caller; `None` on an exiting thread). The cache hit
    /// is inlined into the caller; the rest is [`entry_miss`](Self::entry_miss).
    ///
    /// # Safety
    /// `n.name`/`n.file`, where non-null, must be valid C strings. `string_id` interns a string.
    #[inline(always)]
    unsafe fn entry_in(
        &self,
        cache: Option<&mut Option<Box<KeyCache>>>,
        n: &Normalized,
        strict: bool,
        string_id: &dyn Fn(&CStr) -> (u32, *const c_char),
    ) -> Option<&'static KeyEntry> {
        // Relaxed: see `clear`.
        let generation = self.generation.load(Ordering::Relaxed);
        let h = (n.name as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (n.file as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ (u64::from(n.line) | u64::from(n.column) << 32).wrapping_mul(0x1656_67B1_9E37_79F9);
        let slot = (h >> 40) as usize & (KEY_CACHE_SIZE - 1);
        if let Some(Some(keys)) = cache.as_deref() {
            let hit = |e: &CacheEntry| {
                e.name == n.name && e.file == n.file && e.line == n.line && e.column == n.column && e.generation == generation
            };
            let k = if hit(&keys[slot]) {
                keys[slot].key
            } else if hit(&keys[slot ^ 1]) {
                keys[slot ^ 1].key
            } else {
                ptr::null()
            };
            if !k.is_null() {
                // SAFETY: cached keys are never freed.
                let k = unsafe { &*k };
                // The caller's strings may have changed since they were cached: compare contents.
                // SAFETY: both sides are valid C strings (caller contract; owned copies).
                if unsafe { cstr_eq(n.name, k.name) && cstr_eq(n.file, k.file) } {
                    return Some(k);
                }
            }
        }
        // SAFETY: caller contract.
        unsafe { self.entry_miss(cache, n, strict, string_id, generation, slot) }
    }

    /// [`entry_in`](Self::entry_in) past the thread's cache: the shared table, then the cache
    /// entry for next time.
    ///
    /// # Safety
    /// As [`entry_in`](Self::entry_in).
    #[cold]
    #[inline(never)]
    unsafe fn entry_miss(
        &self,
        cache: Option<&mut Option<Box<KeyCache>>>,
        n: &Normalized,
        strict: bool,
        string_id: &dyn Fn(&CStr) -> (u32, *const c_char),
        generation: u32,
        slot: usize,
    ) -> Option<&'static KeyEntry> {
        // SAFETY: caller contract.
        let name = (!n.name.is_null()).then(|| unsafe { CStr::from_ptr(n.name) });
        // SAFETY: caller contract.
        let file = (!n.file.is_null()).then(|| unsafe { CStr::from_ptr(n.file) });
        // Default mode: new keys of a thread usually share the source file of its previous new
        // key; the memo gives that file's hash and owned copy after one string compare.
        let mut file_copy: *const c_char = ptr::null();
        let (fid, flid, strict_name, strict_file) = if strict {
            let (fi, fp) = name.map_or((0, ptr::null()), string_id);
            let (li, lp) = file.map_or((0, ptr::null()), string_id);
            (fi, li, fp, lp)
        } else {
            let memo = FILE_MEMO.try_with(Cell::get).unwrap_or((ptr::null(), ptr::null(), 0));
            // SAFETY: `n.file` is a valid C string (caller contract), `memo.1` an owned copy.
            let flid = if !n.file.is_null() && memo.0 == n.file && unsafe { cstr_eq(n.file, memo.1) } {
                file_copy = memo.1;
                memo.2
            } else {
                file.map_or(0, |s| fnv1a32(s.to_bytes()))
            };
            (name.map_or(0, |s| fnv1a32(s.to_bytes())), flid, ptr::null(), ptr::null())
        };
        let p1 = (u64::from(flid) << 32) | u64::from(fid);
        let p2 = (u64::from(n.column) << 32) | (n.line as i32 as i64 as u64);
        let mut kb = [0u8; 16];
        kb[..8].copy_from_slice(&p1.to_le_bytes());
        kb[8..].copy_from_slice(&p2.to_le_bytes());
        let (node, _) = self.table.intern_with(&kb, 0, |_| {
            // The entry and its name copies in one piece of process-lifetime memory (instances
            // and C callers may hold the name pointers forever).
            let (nb, fb): (&[u8], &[u8]) = if strict {
                (&[], &[])
            } else if !file_copy.is_null() {
                (name.map_or(&[], CStr::to_bytes_with_nul), &[])
            } else {
                (name.map_or(&[], CStr::to_bytes_with_nul), file.map_or(&[], CStr::to_bytes_with_nul))
            };
            let mem = crate::intern::alloc_static(size_of::<KeyEntry>() + nb.len() + fb.len(), align_of::<KeyEntry>());
            // SAFETY:
            // - `mem` is fresh, suitably aligned memory for a KeyEntry followed by both copies;
            //   the sources are valid slices disjoint from it.
            unsafe {
                let np = mem.add(size_of::<KeyEntry>());
                let fp = np.add(nb.len());
                ptr::copy_nonoverlapping(nb.as_ptr(), np, nb.len());
                ptr::copy_nonoverlapping(fb.as_ptr(), fp, fb.len());
                let copy = |b: &[u8], p: *mut u8| if b.is_empty() { ptr::null() } else { p.cast_const().cast::<c_char>() };
                mem.cast::<KeyEntry>().write(KeyEntry {
                    function_id: fid as i32,
                    file_id: flid as i32,
                    name: if strict { strict_name } else { copy(nb, np) },
                    file: if strict {
                        strict_file
                    } else if !file_copy.is_null() {
                        file_copy
                    } else {
                        copy(fb, fp)
                    },
                    counter: AtomicU64::new(0),
                });
            }
            mem.cast_const().cast()
        })?;
        let key: &'static KeyEntry = {
            // SAFETY: `extra` of a key node is always a leaked KeyEntry.
            unsafe { &*node.extra.cast::<KeyEntry>() }
        };
        if !strict && !key.file.is_null() {
            let _ = FILE_MEMO.try_with(|m| m.set((n.file, key.file, key.file_id as u32)));
        }
        if let Some(keys) = cache {
            let keys = keys.get_or_insert_with(KeyCache::new_boxed);
            let entry = CacheEntry { name: n.name, file: n.file, line: n.line, column: n.column, generation, key };
            // Two-way placement: fill the free way, else evict the partner of the last insert.
            let way = if keys[slot].key.is_null() || keys[slot].generation != generation { slot } else { slot ^ 1 };
            keys[way] = entry;
        }
        Some(key)
    }
}

impl Default for KeyTable {
    fn default() -> Self {
        Self::new()
    }
}

/// Compares two C strings (pointer-equal strings short-circuit). Null equals only null.
///
/// # Safety
/// Non-null arguments must be valid C strings.
#[inline]
unsafe fn cstr_eq(a: *const c_char, b: *const c_char) -> bool {
    if a == b {
        return true;
    }
    if a.is_null() || b.is_null() {
        return false;
    }
    // SAFETY: both valid C strings (caller contract).
    unsafe { libc::strcmp(a, b) == 0 }
}


/// What the caller asks for a new instance.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Event type of the instance's event.
    pub event_type: u16,
    /// Activity type (stored in 16 bits).
    pub activity_type: u16,
    /// Stack trace pointer to store (already interned or null).
    pub stack_trace: *const c_char,
    /// Code pointer to store: Intel's binary keeps it only in strict-hash mode (and drops it,
    /// keeping the flag, by default).
    pub code_ptr: *const c_void,
}

/// The key entry for `n` and a live instance of it in a fresh slot, with one thread-local access for both the key
/// cache and the free slot list. Returns the object address (= uid64), the instance number and
/// the key.
///
/// # Safety
/// `n.name`/`n.file`, where non-null, must be valid C strings. `string_id` interns a string.
#[inline]
pub unsafe fn make(
    slab: &Slab,
    keys: &KeyTable,
    n: &Normalized,
    strict: bool,
    string_id: &dyn Fn(&CStr) -> (u32, *const c_char),
    spec: &Spec,
) -> Option<(*mut u8, u64, &'static KeyEntry)> {
    let got = THREAD.try_with(|c| {
        let mut c = c.borrow_mut();
        let c = &mut *c;
        // SAFETY: caller contract.
        let key = unsafe { keys.entry_in(Some(&mut c.keys), n, strict, string_id) }?;
        Some((key, slab.alloc_in(Some(&mut c.free))?))
    });
    let (key, obj) = match got {
        Ok(r) => r?,
        // Thread-local storage already destroyed (thread exit).
        // SAFETY: caller contract.
        Err(_) => (unsafe { keys.entry_in(None, n, strict, string_id) }?, slab.alloc_in(None)?),
    };
    // SAFETY: `key` belongs to `n`; `obj` is a free slot of `slab`.
    let (obj, inst) = unsafe { construct(slab, obj, key, n, spec) };
    Some((obj, inst, key))
}

/// Constructs a live instance of `key` in the free slot `obj`.
///
/// # Safety
/// `obj` is a free slot of `slab` owned by the caller; `key` is the key entry of `n`.
#[inline(always)]
unsafe fn construct(slab: &Slab, obj: *mut u8, key: &'static KeyEntry, n: &Normalized, spec: &Spec) -> (*mut u8, u64) {
    // Relaxed: the counter only has to hand out distinct, increasing numbers per key.
    let instance = key.counter.fetch_add(1, Ordering::Relaxed) + 1;
    match &slab.proto {
        Some(proto) => {
            let w = obj.cast::<u64>();
            // SAFETY:
            // - `obj` is a free, committed, 256-byte, 8-aligned slot owned by this thread;
            // - the words copied are the verified constructor image (vtable pointers, empty map,
            //   iterator); the map's bucket pointer must point into this object's own slot.
            unsafe {
                for i in 0..4 {
                    *w.add(i) = proto.words[i];
                }
                for i in MAP_WORD..MAP_WORD + MAP_WORDS {
                    *w.add(i) = proto.words[i];
                }
                *w.add(MAP_WORD) = obj as u64 + (MAP_WORD * 8 + SINGLE_BUCKET_OFFSET) as u64;
                *w.add(SLOT / 8 - 1) = proto.words[SLOT / 8 - 1];
            }
        }
        // SAFETY:
        // - `obj` is a free, committed, 256-byte slot suitably aligned; the shim constructs in place.
        None => unsafe {
            shim::ot_instance_construct(obj.cast::<c_void>());
        },
    }
    let uid = obj as u64;
    let payload = payload_of(obj);
    let (name, file) = (key.name, key.file);
    // SAFETY:
    // - `payload`/`event` point at the constructed object's embedded payload_t/trace_event_data_t
    //   (offsets checked against the C++ compiler by `shim::layout_matches`).
    unsafe {
        let p = &mut *payload;
        p.name = name;
        p.stack_trace = spec.stack_trace;
        p.source_file = file;
        p.line_no = n.line;
        p.column_no = n.column;
        p.code_ptr_va = spec.code_ptr;
        p.internal = uid;
        p.flags = n.flags | pf::PAYLOAD_REGISTERED | pf::HASH_AVAILABLE;
        p.uid.p1 = ((key.file_id as u32 as u64) << 32) | u64::from(n.line);
        p.uid.p2 = u64::from(key.function_id as u32);
        p.uid.p3 = 0;
        let e = &mut *event_of(obj);
        e.unique_id = uid;
        e.data_id = instance;
        e.instance_id = instance;
        e.event_type = spec.event_type;
        e.activity_type = spec.activity_type;
        e.unused = 0;
        e.source_id = 0;
        e.target_id = 0;
        e.reserved.payload = payload;
        e.global_user_data = ptr::null_mut();
        e.flags = event_flags::UID_AVAILABLE
            | event_flags::EVENT_TYPE_AVAILABLE
            | event_flags::ACTIVITY_TYPE_AVAILABLE
            | event_flags::PAYLOAD_AVAILABLE;
        // Release: publishes the complete object to `is_live` readers (FindEvent & co).
        key_slot(obj).store((key as *const KeyEntry).cast_mut(), Ordering::Release);
    }
    (obj, instance)
}

/// Deletes the live instance at `obj`. False when it is not live (already deleted, or foreign).
#[inline]
pub fn delete(slab: &Slab, obj: *mut u8) -> bool {
    if !slab.is_live(obj as usize) {
        return false;
    }
    // SAFETY: `is_live` established that `obj` is a slot start in committed memory.
    let k = unsafe { key_slot(obj) };
    let cur = k.load(Ordering::Acquire);
    // AcqRel: exactly one deleter wins; it sees the creator's writes and publishes "dead".
    if cur.is_null() || k.compare_exchange(cur, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire).is_err() {
        return false;
    }
    let map = obj.wrapping_add(MAP_WORD * 8).cast::<u64>();
    // SAFETY: `map` is inside the committed slot we now own exclusively.
    let untouched = unsafe {
        *map == map as u64 + SINGLE_BUCKET_OFFSET as u64 && *map.add(2) == 0 && *map.add(3) == 0
    };
    if !untouched {
        // SAFETY:
        // - we own the dead object exclusively now; the shim runs its destructor (map nodes and
        //   heap buckets freed with libstdc++'s operator delete).
        unsafe { shim::ot_instance_destroy(obj.cast()) };
    }
    // An empty map on its single inline bucket owns no memory: nothing to destroy.
    slab.free(obj);
    true
}
