//! Tracepoint instances: one per `xptiMakeEvent` / `xptiCreateTracepoint` /
//! `xptiRegisterTracepointScope` / `xptiRegisterPayload` call.
//!
//! * Memory: an instance is two 128-byte cells with the same index i in two parallel reserved
//!   regions (PROT_NONE until committed, never unmapped). The event cell (`trace_event_data_t`
//!   at `events + i*128`) is committed and populated in 4 MiB steps of huge pages where available
//!   (`region::commit`). The side cell (`events + span + i*128`: the four interface vtable
//!   pointers, the instance's own `payload_t` copy, the metadata iterator) is committed without
//!   population (`region::commit_lazy`) and costs RSS only when written: when an interface
//!   pointer or the instance's own payload is handed out, or when the instance's payload differs
//!   from its key's. An event that nobody looks up costs its 128-byte cell.
//! * Shared payload: until then the event's `reserved.payload` points at the payload stored with
//!   the key ([`KeyEntry::payload`]: the first instance's payload, `internal` = the first
//!   instance's uid64), which equals the instance's own in every field but `internal`.
//!   Materialising ([`Slab::side`]) copies it into the side cell with `internal` = uid64 and
//!   swings `reserved.payload` there with a compare-exchange; concurrent materialisers write the
//!   same bytes. Slots are recycled through a per-thread free list (batches of 64 move to and from
//!   a global pool), so create/delete on a thread costs no lock and no `malloc`, and make+release
//!   cycles keep memory flat. The thread that made an instance (its *owner*, [`Owner`]) recycles
//!   its cell: its own deletions take no locked instruction, other threads' are queued for it.
//! * Identity: the uid64 is the event cell's address (Intel's is the heap address of its
//!   instance object). Validating a uid64 from C needs no table: it must lie in the committed
//!   event region, on a cell boundary, and the event's `unique_id` must equal it (stored with
//!   release ordering when the instance is complete, cleared by the one deleter: a plain store by
//!   the owner, a compare-exchange by anyone else). This is the "live uid64 registry", lock-free
//!   and without hashing. An interface
//!   pointer maps to its event by subtracting its offset in the side cell and `span`.
//! * Keys: every payload reduces to a 128-bit key (`docs/reference/xpti-abi.md` §6.1). Each key has one
//!   never-freed [`KeyEntry`] holding the owned name/file copies, the shared payload and the
//!   instance counter, found through a per-thread direct-mapped cache (pointer equality plus a
//!   string compare, which is cheaper than FNV hashing, and no compare at all for strings in the
//!   main program's read-only segments: [`crate::rodata`]) and behind it the lock-free
//!   [`KeyMap`]. A new key costs one locked instruction (the compare-exchange that publishes its
//!   entry; its creator takes instance 1 without touching the counter), and its entry is built
//!   while the map's slot is still being loaded (usually a cache miss: the map is large). The
//!   key's creator numbers its instances with plain accesses until another thread first needs a
//!   number of that key ([`next_instance`]).

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, compiler_fence};

use crate::abi::{LegacyUid, Payload, TraceEventData, event_flags, payload_flags as pf};
use crate::hash::fnv1a32;
use crate::intern::{Arena, IdVec};
use crate::key_map::{Fate, KeyMap, Keyed};
use crate::shim::{self, layout};

/// Size of an event cell, and of a side cell.
pub const CELL: usize = layout::SIDE;
const _: () = assert!(size_of::<TraceEventData>() == CELL);
/// Address space reserved for each of the two regions; smaller reservations are tried when the
/// kernel or an address-space limit (`ulimit -v`, valgrind) refuses this one.
const RESERVE: usize = 64 << 30;
const RESERVE_MIN: usize = 128 << 20;
/// Commit granularity of the event region: two huge pages (`region::commit`).
const COMMIT_STEP: usize = 2 * crate::region::HUGE;
const BATCH: usize = 64;
/// The side cell of event `i` is not at the same offset in its page as the event: loads from one
/// after stores to the other at an address equal in its low 12 bits were taken for dependent
/// (4K aliasing), which made the tracepoint scope pair about twice as slow.
const SIDE_SKEW: usize = 2048 + 64;
const PAGE: usize = 4096;

/// Static names used when a payload has none (default hashing mode).
pub const UNKNOWN_FUNCTION: &CStr = c"<unknown-function>";
/// See [`UNKNOWN_FUNCTION`].
pub const UNKNOWN_FILE: &CStr = c"<unknown-file>";

/// Alignment and size granule of a key entry with its name copies (see `entry_miss`).
const KEY_ALIGN: usize = 64;

/// Per-key data shared by all instances of one key: 96 bytes, followed in memory by the owned
/// copies of the name and file (default mode). The key's names and IDs are those of the stored
/// payload (`docs/reference/xpti-abi.md` §6.2), and so is the key itself ([`Keyed::key`]).
#[derive(Debug)]
pub struct KeyEntry {
    /// Instances created so far; survives deletion of instances.
    pub counter: AtomicU64,
    /// The owner index of the thread that made the key, which adds to `counter` with plain
    /// accesses until another thread needs a number (see [`next_instance`]); 0 once shared.
    owner: AtomicU32,
    /// The stored payload of the key's first instance (`internal` = that instance's uid64).
    /// Events whose own payload would differ from it only in `internal` point here until their
    /// payload is materialised. Immutable once the entry is published.
    pub payload: Payload,
}

impl KeyEntry {
    /// FNV-1a hash of the name (default mode) or its string ID (strict mode).
    #[inline]
    pub fn function_id(&self) -> i32 {
        self.payload.uid.p2 as u32 as i32
    }

    /// Same for the file.
    #[inline]
    pub fn file_id(&self) -> i32 {
        (self.payload.uid.p1 >> 32) as u32 as i32
    }

    /// Owned copy of the name (the string table's in strict mode; null there without a name).
    #[inline]
    pub fn name(&self) -> *const c_char {
        self.payload.name
    }

    /// Owned copy of the file name.
    #[inline]
    pub fn file(&self) -> *const c_char {
        self.payload.source_file
    }
}

/// The 128-bit key of `docs/reference/xpti-abi.md` §6.1: `p1 = file_id << 32 | function_id`,
/// `p2 = column << 32 | line` with the line sign-extended (a line of `0xFFFFFFFF` hides the
/// column).
#[inline]
fn key_of(function_id: u32, file_id: u32, line: u32, column: u32) -> [u64; 2] {
    [(u64::from(file_id) << 32) | u64::from(function_id), (u64::from(column) << 32) | (line as i32 as i64 as u64)]
}

impl Keyed for KeyEntry {
    /// The key, from the stored payload: its IDs are the key's, and its line and column those
    /// of the first instance, which has the key.
    #[inline]
    fn key(&self) -> [u64; 2] {
        key_of(self.function_id() as u32, self.file_id() as u32, self.payload.line_no, self.payload.column_no)
    }
}

// The sizes the docs give (`docs/xpti-compatibility.md`, "Memory").
const _: () = assert!(size_of::<KeyEntry>() == 96 && size_of::<CacheEntry>() == 48);

// SAFETY: immutable apart from its atomics; the pointers are to never-freed copies.
unsafe impl Sync for KeyEntry {}
// SAFETY: as above.
unsafe impl Send for KeyEntry {}

/// The instance cells: events at `events`, side cells at `events + span`, both `span` bytes.
#[derive(Debug)]
pub struct Slab {
    events: *mut u8,
    /// `events + span + SIDE_SKEW`: the side cells.
    sides: *mut u8,
    span: usize,
    /// Bytes committed in each region (the same in both).
    committed: AtomicUsize,
    carved: Mutex<usize>,
    pool: Mutex<Vec<Vec<usize>>>,
    proto: Prototype,
    /// The [`Owner`] record of each thread that has made instances, by its index (from 1).
    owners: IdVec<Owner>,
    next_owner: AtomicU32,
}

/// What other threads share with a thread that makes instances (its *owner index* is stored in
/// the `unused` field of every event it makes): the cells they deleted, for it to recycle.
///
/// Deleting one's own instance needs no locked instruction. Only the owner makes a cell live
/// again, so the owner claims it with a plain load and store. Any other thread claims it with a
/// compare-exchange and never recycles it while the owner lives: it marks the cell
/// [`remote`]`(owner)` and queues it here, and the owner recycles it the next time it needs a
/// slot, after a compare-exchange from that mark to 0. A deletion by another thread that races
/// the owner's own deletion of the same instance (both succeed, as a double delete may) leaves
/// the recycling to the owner alone: the owner's store of 0 overwrites the mark, and the queued
/// entry no longer matches it. Once the owner has exited (`exited`), or for instances made on a
/// thread without thread-local storage (index 0), the deleting thread recycles the cell itself:
/// no owner can claim it any more.
#[derive(Debug, Default)]
struct Owner {
    /// (the owner has exited, cells deleted by other threads).
    queue: Mutex<(bool, Vec<usize>)>,
    /// 1 while the owner adds to the counter of one of its keys with plain accesses.
    busy: AtomicU32,
}

/// The liveness word of a cell claimed by a thread other than its owner, before it is marked.
const CLAIMED: u64 = 3;

/// The liveness word of a cell deleted by a thread other than its owner `owner`, queued for it
/// to recycle. Never a cell address (those are 128-aligned) nor [`CLAIMED`].
#[inline]
fn remote(owner: u32) -> u64 {
    u64::from(owner) << 32 | 1
}

/// Word index of the metadata map inside an event (see `docs/reference/xpti-abi.md` §4.5).
const MAP_WORD: usize = 56 / 8;
const MAP_WORDS: usize = 7;
const SINGLE_BUCKET_OFFSET: usize = 48;

/// The liveness word's transitions (see [`Owner`]): live (the cell's address) → 0 by the owner,
/// live → [`CLAIMED`] → [`remote`]`(owner)` → 0 by another thread and then the owner, or live →
/// `CLAIMED` → 0 by another thread alone. Generic over the word so that the loom model below
/// runs these very functions on a loom atomic (the shipped word is an `AtomicU64` over the event
/// cell's memory, which loom cannot model).
pub(crate) trait LiveWord {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, v: u64, order: Ordering);
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64>;
}

impl LiveWord for AtomicU64 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    #[inline(always)]
    fn store(&self, v: u64, order: Ordering) {
        AtomicU64::store(self, v, order)
    }
    #[inline(always)]
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        AtomicU64::compare_exchange(self, current, new, success, failure)
    }
}

#[cfg(loom)]
impl LiveWord for loom::sync::atomic::AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::load(self, order)
    }
    /// A swap: loom orders a plain store only after what its own thread has seen, not after a
    /// concurrent read-modify-write of another thread, and then lets a later compare-exchange
    /// act on a value the store had replaced (C11 orders all stores to a location totally, and a
    /// read-modify-write reads the value just before it: the model failed on this alone). A swap
    /// takes its place after the newest value, as the store does in every C11 total order here.
    fn store(&self, v: u64, order: Ordering) {
        loom::sync::atomic::AtomicU64::swap(self, v, order);
    }
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        loom::sync::atomic::AtomicU64::compare_exchange(self, current, new, success, failure)
    }
}

/// Whether the word says the instance at `ev` is live. Acquire: as in `Slab::is_live`.
#[inline(always)]
fn word_is_live(id: &impl LiveWord, ev: u64) -> bool {
    id.load(Ordering::Acquire) == ev
}

/// The owner's deletion of its live instance: a plain store (only the owner makes the cell
/// live again; other threads can only have moved the word from live to a mark meanwhile, and
/// this store overwrites it). Release: the instance's writes happen before a reader sees it dead.
#[inline(always)]
fn kill_own(id: &impl LiveWord) {
    id.store(0, Ordering::Release);
}

/// Another thread's claim of the live instance at `ev`. AcqRel: exactly one non-owner deleter
/// wins (the compare fails on a dead or marked cell); it sees the owner index written before
/// the instance was published.
#[inline(always)]
fn claim_remote(id: &impl LiveWord, ev: u64) -> bool {
    id.compare_exchange(ev, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// The claimer leaves the cell to its living owner `owner` (under the owner's queue lock): false
/// when the owner's own deletion has overwritten the claim (the owner recycles it). Release: the
/// claim's writes happen before the owner's Acquire in [`reclaim_marked`].
#[inline(always)]
fn mark_for_owner(id: &impl LiveWord, owner: u32) -> bool {
    id.compare_exchange(CLAIMED, remote(owner), Ordering::Release, Ordering::Relaxed).is_ok()
}

/// The owner takes back a cell queued for it: true if it still holds the mark of that deletion.
/// Acquire: the deleted instance's writes happen before the owner's reuse of the cell.
#[inline(always)]
fn reclaim_marked(id: &impl LiveWord, owner: u32) -> bool {
    id.compare_exchange(remote(owner), 0, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// The claimer recycled the cell itself (no owner can any more): dead. Release: as in
/// [`kill_own`].
#[inline(always)]
fn kill_claimed(id: &impl LiveWord) {
    id.store(0, Ordering::Release);
}

/// Images copied into new instances instead of calling into the shim: the side cell's four
/// vtable pointers (from a Side constructed by the C++ compiler) and, when it has the expected
/// shape, an empty libstdc++ map (bucket pointer → its own single-bucket slot, count 1, no nodes,
/// max load 1.0, next resize 0; the self-referential bucket pointer is re-pointed at the copy).
#[derive(Debug)]
struct Prototype {
    vptrs: [u64; 4],
    map: Option<[u64; MAP_WORDS]>,
}

impl Prototype {
    fn build() -> Prototype {
        #[repr(C, align(16))]
        struct Buf([u64; CELL / 8]);
        let mut side = Buf([0; CELL / 8]);
        // SAFETY:
        // - `side` is 128 writable, 16-aligned bytes (`layout_matches` checks a Side needs at
        //   most 16); the shim constructs a Side there. A Side owns nothing and is never destroyed.
        unsafe { shim::ot_side_construct(side.0.as_mut_ptr().cast()) };
        let side = side.0;
        let mut map = [0u64; MAP_WORDS];
        // SAFETY: 56 writable, 8-aligned bytes; the map is empty (owns no memory) and never used.
        unsafe { shim::ot_map_construct(map.as_mut_ptr().cast()) };
        let at = map.as_ptr() as u64;
        let empty_single_bucket =
            map[0] == at + SINGLE_BUCKET_OFFSET as u64 && map[1] == 1 && map[2] == 0 && map[3] == 0 && map[6] == 0;
        Prototype { vptrs: [side[0], side[1], side[2], side[3]], map: empty_single_bucket.then_some(map) }
    }
}

// SAFETY: `events` is a fixed mapping; all mutation goes through atomics or mutexes.
unsafe impl Sync for Slab {}
// SAFETY: as above.
unsafe impl Send for Slab {}

/// Per-thread state of the creation path: the free slot list, the key cache (allocated on
/// the thread's first creation: KEY_CACHE_SIZE × 48 bytes) and the owner index.
struct ThreadCache {
    free: Vec<usize>,
    keys: Option<Box<KeyCache>>,
    /// The thread's owner index (0 until its first slot; see [`Owner`]).
    owner: u32,
    /// The `busy` flag of its [`Owner`] record when the thread may own keys (null until its
    /// first slot, and where the kernel offers no `membarrier`).
    busy: *const AtomicU32,
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        let Some(slab) = crate::framework::slab_if_built() else { return };
        if self.owner != 0 {
            // From now on other threads recycle the cells of this thread that they delete; the
            // ones already queued are recycled here.
            let cells = slab.owner(self.owner).map(|o| {
                let mut q = o.queue.lock().unwrap_or_else(|e| e.into_inner());
                q.0 = true;
                std::mem::take(&mut q.1)
            });
            for ev in cells.into_iter().flatten() {
                // SAFETY: queued cells are committed cells of this slab.
                if unsafe { slab.claim_queued(ev as *mut u8, self.owner) } {
                    self.free.push(ev);
                }
            }
        }
        if !self.free.is_empty() {
            let v = std::mem::take(&mut self.free);
            slab.pool.lock().unwrap_or_else(|e| e.into_inner()).push(v);
        }
    }
}

thread_local! {
    static THREAD: RefCell<ThreadCache> = const { RefCell::new(ThreadCache { free: Vec::new(), keys: None, owner: 0, busy: ptr::null() }) };
}

impl Slab {
    /// Reserves the address ranges of both regions (no memory is committed yet).
    pub fn new() -> Option<Self> {
        let (events, reserved) = crate::region::reserve(2 * RESERVE, 2 * RESERVE_MIN)?;
        let span = (reserved / 2) & !(crate::region::HUGE - 1);
        // SAFETY: sets a plain integer in the shim before any side cell exists.
        unsafe { shim::ot_shim_set_side_offset(-((span + SIDE_SKEW) as isize)) };
        Some(Slab {
            events,
            sides: events.wrapping_add(span + SIDE_SKEW),
            span,
            committed: AtomicUsize::new(0),
            carved: Mutex::new(0),
            pool: Mutex::new(Vec::new()),
            proto: Prototype::build(),
            owners: IdVec::new(),
            next_owner: AtomicU32::new(1),
        })
    }

    /// Whether `addr` is the event of a live instance (its uid64).
    #[inline]
    pub fn is_live(&self, addr: usize) -> bool {
        let off = addr.wrapping_sub(self.events as usize);
        // Acquire: the committed size is published after the mapping succeeded.
        if off >= self.committed.load(Ordering::Acquire) || !off.is_multiple_of(CELL) {
            return false;
        }
        // SAFETY:
        // - `addr` is a cell start inside committed (readable, never unmapped) memory.
        unsafe { unique_id(addr as *mut u8) }.load(Ordering::Acquire) == addr as u64
    }

    /// The event of the side cell that the interface pointer `iface` (at offset `iface_off` in its
    /// side cell) belongs to, if it lies on a committed side cell; liveness is not checked.
    #[inline]
    pub fn event_of_interface(&self, iface: usize, iface_off: usize) -> Option<*mut u8> {
        let off = iface.wrapping_sub(iface_off).wrapping_sub(self.sides as usize);
        // Acquire: as in `is_live`.
        (off < self.committed.load(Ordering::Acquire) && off.is_multiple_of(CELL))
            .then(|| self.events.wrapping_add(off))
    }

    /// [`event_of_interface`](Self::event_of_interface) of a live instance only.
    #[inline]
    pub fn live_of_interface(&self, iface: usize, iface_off: usize) -> Option<*mut u8> {
        let ev = self.event_of_interface(iface, iface_off)?;
        // SAFETY: `ev` is a committed event cell (checked above). Acquire: as in `is_live`.
        (unsafe { unique_id(ev) }.load(Ordering::Acquire) == ev as u64).then_some(ev)
    }

    /// The side cell of the event `ev`, without materialising anything.
    #[inline]
    pub fn side_of(&self, ev: *mut u8) -> *mut u8 {
        ev.wrapping_add(self.span + SIDE_SKEW)
    }

    /// The side cell of the live instance `ev`, materialised: vtable pointers written and the
    /// instance's own payload (`internal` = uid64) in it, with `reserved.payload` pointing there.
    /// Interface pointers and the instance's payload are handed out only through this.
    ///
    /// # Safety
    /// `ev` is a live instance of this slab (`is_live`), not deleted concurrently.
    #[inline]
    pub unsafe fn side(&self, ev: *mut u8) -> *mut u8 {
        let side = self.side_of(ev);
        let own = side.wrapping_add(layout::PAYLOAD).cast::<Payload>();
        // SAFETY: `ev` is a live event (caller contract); the field is 8-aligned.
        let slot = unsafe { payload_slot(ev) };
        // Acquire: a materialised pointer comes with the side cell written before it.
        let cur = slot.load(Ordering::Acquire);
        if cur != own {
            // SAFETY: `cur` is the key's shared payload (only ever replaced by `own`), `side`
            // a committed side cell of this live instance.
            unsafe { self.materialise(ev, cur) };
        }
        side
    }

    /// The slow path of [`side`](Self::side): writes the side cell from the shared payload
    /// `shared` and swings `reserved.payload` to it.
    ///
    /// # Safety
    /// As [`side`](Self::side); `shared` is the event's current, shared payload.
    #[cold]
    #[inline(never)]
    unsafe fn materialise(&self, ev: *mut u8, shared: *mut Payload) {
        let side = self.side_of(ev);
        let own = side.wrapping_add(layout::PAYLOAD).cast::<Payload>();
        // SAFETY:
        // - `side` is a committed, 8-aligned side cell of the live instance `ev`; `shared` a
        //   never-freed, immutable key payload. Concurrent materialisers of the same instance
        //   store the same words (relaxed atomic stores: no torn or conflicting values).
        unsafe {
            let mut p = shared.read();
            p.internal = ev as u64;
            store_words(side, &self.proto.vptrs);
            store_words(own.cast(), &std::mem::transmute::<Payload, [u64; 10]>(p));
        }
        // SAFETY: as in `side`.
        let slot = unsafe { payload_slot(ev) };
        // Release: publishes the side cell written above. A failure means another thread
        // materialised it first (the only other value the field takes).
        let _ = slot.compare_exchange(shared, own, Ordering::Release, Ordering::Relaxed);
    }

    #[cold]
    fn carve(&self) -> Option<Vec<usize>> {
        let mut carved = self.carved.lock().unwrap_or_else(|e| e.into_inner());
        let need = *carved + BATCH * CELL;
        let committed = self.committed.load(Ordering::Relaxed);
        if need > committed {
            let grow = COMMIT_STEP.max(need - committed);
            if committed + grow + PAGE > self.span {
                return None;
            }
            // Events: mapped read-write and populated in one go (huge pages where the kernel has
            // them): one kernel call instead of a page fault per 32 new instances. Side cells:
            // mapped, paid per page on first write.
            // SAFETY:
            // - both ranges lie inside our reservation, above everything committed so far (only
            //   this function commits, under `carved`); COMMIT_STEP multiples keep them aligned.
            let ok = unsafe {
                crate::region::commit(self.events.add(committed), grow)
                    && if committed == 0 {
                        // The side cells start SIDE_SKEW into their region: one page more.
                        crate::region::commit_lazy(self.events.add(self.span), grow + PAGE)
                    } else {
                        crate::region::commit_lazy(self.events.add(self.span + committed + PAGE), grow)
                    }
            };
            if !ok {
                return None;
            }
            // Release: `is_live` readers may now read the new pages.
            self.committed.store(committed + grow, Ordering::Release);
        }
        let start = self.events as usize + *carved;
        *carved = need;
        Some((0..BATCH).rev().map(|i| start + i * CELL).collect())
    }

    fn refill(&self) -> Option<Vec<usize>> {
        if let Some(v) = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(v);
        }
        self.carve()
    }

    /// A free slot (the address of an event cell holding a dead instance or zeros) from the
    /// thread's free list `free` (already borrowed by the caller), or from the global pool when
    /// the thread has none (thread exit).
    #[inline]
    fn alloc_in(&self, cache: Option<&mut ThreadCache>) -> Option<*mut u8> {
        match cache {
            Some(c) => {
                if let Some(a) = c.free.pop() {
                    return Some(a as *mut u8);
                }
                self.alloc_refill(c)
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
    fn alloc_refill(&self, c: &mut ThreadCache) -> Option<*mut u8> {
        if c.owner == 0 {
            c.owner = self.register_owner();
            if let Some(o) = self.owner(c.owner)
                && asymmetric_fences()
            {
                c.busy = &raw const o.busy;
            }
        } else if let Some(o) = self.owner(c.owner) {
            // The cells other threads deleted come first.
            let cells = std::mem::take(&mut o.queue.lock().unwrap_or_else(|e| e.into_inner()).1);
            for ev in cells {
                // SAFETY: queued cells are committed cells of this slab.
                if unsafe { self.claim_queued(ev as *mut u8, c.owner) } {
                    c.free.push(ev);
                }
            }
            if let Some(a) = c.free.pop() {
                return Some(a as *mut u8);
            }
        }
        let mut batch = self.refill()?;
        let a = batch.pop();
        c.free = batch;
        a.map(|a| a as *mut u8)
    }

    /// A new owner index with its [`Owner`] record (0 when the registry is full: the thread's
    /// instances are then deleted the way other threads delete them).
    #[cold]
    fn register_owner(&self) -> u32 {
        // Relaxed: the index only has to be unique; the record is published by `IdVec::set`.
        let i = self.next_owner.fetch_add(1, Ordering::Relaxed);
        let o: &'static Owner = Box::leak(Box::default());
        // SAFETY: a leaked box: valid for the rest of the process.
        if i == 0 || !unsafe { self.owners.set(i, (o as *const Owner).cast_mut()) } {
            return 0;
        }
        i
    }

    /// The record of owner index `i`.
    fn owner(&self, i: u32) -> Option<&'static Owner> {
        let p = self.owners.get(i);
        // SAFETY: records are leaked boxes, never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Takes back a cell queued for `owner`: if it still holds the mark of that deletion (see
    /// [`Owner`]), recycles it and returns true.
    ///
    /// # Safety
    /// `ev` is a committed cell of this slab; the caller is `owner` or acts for it after its exit.
    unsafe fn claim_queued(&self, ev: *mut u8, owner: u32) -> bool {
        // SAFETY: caller contract.
        let id = unsafe { unique_id(ev) };
        if !reclaim_marked(id, owner) {
            return false;
        }
        // SAFETY: the cell is ours alone now.
        unsafe { recycle(self, ev) };
        true
    }

    /// Returns a slot to the free lists: the thread's list ([`push_free`](Self::push_free)), or
    /// the global pool when the thread's state is gone (thread exit) or already borrowed.
    ///
    /// # Safety
    /// `slot` is a committed event cell of this slab, dead and recycled, that the caller owns
    /// and no free list holds: the next allocation hands it out and writes it.
    #[inline]
    pub unsafe fn free(&self, slot: *mut u8) {
        let a = slot as usize;
        let pushed = THREAD
            .try_with(|f| match f.try_borrow_mut() {
                Ok(mut f) => {
                    self.push_free(&mut f, a);
                    true
                }
                Err(_) => false,
            })
            .unwrap_or(false);
        if !pushed {
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(vec![a]);
        }
    }

    /// Pushes `a` to the thread's list `c`: inline while it has room (no call, no reallocation:
    /// the tracepoint scope pair deletes on every traced call), else [`spill`](Self::spill).
    #[inline(always)]
    fn push_free(&self, c: &mut ThreadCache, a: usize) {
        if c.free.len() < c.free.capacity().min(2 * BATCH - 1) {
            c.free.push(a);
        } else {
            self.spill(c, a);
        }
    }

    /// [`push_free`](Self::push_free) with a list that is full or has no capacity yet: spills half
    /// of a full list to the global pool.
    #[cold]
    #[inline(never)]
    fn spill(&self, c: &mut ThreadCache, a: usize) {
        c.free.push(a);
        if c.free.len() >= 2 * BATCH {
            let spill = c.free.split_off(BATCH);
            self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(spill);
        }
    }

    /// Every carved event address (for `xptiReset`).
    pub fn carved_slots(&self) -> impl Iterator<Item = usize> + '_ {
        let n = *self.carved.lock().unwrap_or_else(|e| e.into_inner()) / CELL;
        (0..n).map(move |i| self.events as usize + i * CELL)
    }
}

/// Stores `words` at `dst` with relaxed atomic stores (plain moves on x86-64).
///
/// # Safety
/// `dst` is 8-aligned and valid for `words.len()` words.
#[inline(always)]
unsafe fn store_words(dst: *mut u8, words: &[u64]) {
    for (i, w) in words.iter().enumerate() {
        // SAFETY: caller contract.
        unsafe { AtomicU64::from_ptr(dst.cast::<u64>().add(i)) }.store(*w, Ordering::Relaxed);
    }
}

/// The `unique_id` field of an event: its own address while the instance is live, 0 otherwise.
///
/// # Safety
/// `ev` must point into committed event memory at a cell start.
#[inline]
pub unsafe fn unique_id<'a>(ev: *mut u8) -> &'a AtomicU64 {
    // SAFETY: the caller guarantees `ev` is a committed, 8-aligned event cell.
    unsafe { AtomicU64::from_ptr(ev.cast::<u64>()) }
}

/// The `reserved.payload` field of an event.
///
/// # Safety
/// `ev` must point into committed event memory at a cell start.
#[inline]
unsafe fn payload_slot<'a>(ev: *mut u8) -> &'a AtomicPtr<Payload> {
    // SAFETY: the caller guarantees `ev` is a committed event cell; the field is 8-aligned.
    unsafe { AtomicPtr::from_ptr(&raw mut (*ev.cast::<TraceEventData>()).reserved.payload) }
}

/// The event of an instance (the cell address is the event).
#[inline]
pub fn event_of(ev: *mut u8) -> *mut TraceEventData {
    ev.cast()
}

/// Entries of the per-thread key cache (two-way: a key may sit in slot i or i ^ 1).
const KEY_CACHE_SIZE: usize = 4096;

/// The per-thread state of key lookups (allocated on the thread's first creation): the key
/// cache, the file memo and the arena that new key entries come from.
struct KeyCache {
    entries: [CacheEntry; KEY_CACHE_SIZE],
    /// The source file of the thread's last new key (default hashing mode): the caller's
    /// pointer, the key's owned copy and its FNV-1a hash. Copies are never freed, so the memo
    /// never dangles; the caller's string is compared with the copy before use.
    file_memo: (*const c_char, *const c_char, u32),
    /// Key entries and their name copies: a candidate entry is built here before it is known to
    /// be new, and given back when the key turns out to exist.
    arena: Arena,
}

impl KeyCache {
    /// An empty cache, built on the heap (192 KiB would not fit every thread's stack).
    fn new_boxed() -> Box<KeyCache> {
        let mut b = Box::<KeyCache>::new_uninit();
        let p = b.as_mut_ptr();
        // SAFETY:
        // - every field of the uninitialised box is written exactly once before `assume_init`.
        unsafe {
            for i in 0..KEY_CACHE_SIZE {
                (&raw mut (*p).entries[i]).write(CacheEntry::EMPTY);
            }
            (&raw mut (*p).file_memo).write((ptr::null(), ptr::null(), 0));
            (&raw mut (*p).arena).write(Arena::new());
            b.assume_init()
        }
    }
}

impl std::ops::Index<usize> for KeyCache {
    type Output = CacheEntry;
    #[inline(always)]
    fn index(&self, i: usize) -> &CacheEntry {
        &self.entries[i & (KEY_CACHE_SIZE - 1)]
    }
}

impl std::ops::IndexMut<usize> for KeyCache {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut CacheEntry {
        &mut self.entries[i & (KEY_CACHE_SIZE - 1)]
    }
}

#[derive(Clone, Copy)]
struct CacheEntry {
    name: *const c_char,
    file: *const c_char,
    line: u32,
    column: u32,
    generation: u32,
    /// Lengths of the key's name and file copies, NUL included (0 for a null one), and
    /// `immutable`: learnt on the entry's first hit (`learnt`), so that a new key pays nothing.
    name_len: u32,
    file_len: u32,
    /// The caller's name and file lie in the main program's read-only segments
    /// ([`crate::rodata`]): their contents cannot have changed, so a hit needs no comparison.
    immutable: bool,
    learnt: bool,
    key: *const KeyEntry,
}

impl CacheEntry {
    const EMPTY: CacheEntry = CacheEntry {
        name: ptr::null(),
        file: ptr::null(),
        line: 0,
        column: 0,
        generation: u32::MAX,
        name_len: 0,
        file_len: 0,
        immutable: false,
        learnt: false,
        key: ptr::null(),
    };

    /// Fills in the lengths of the key's copies and whether the caller's strings are immutable.
    /// The caller's strings equalled the key's copies when the entry was made (the key was
    /// found or made from them; names whose FNV-1a hashes collide share the key anyway), and
    /// immutable ones still do.
    #[cold]
    #[inline(never)]
    fn learn(&mut self) {
        // SAFETY: cached keys are never freed.
        let k = unsafe { &*self.key };
        // SAFETY: the key's copies are null or valid C strings, never freed.
        let len = |s: *const c_char| if s.is_null() { 0 } else { (unsafe { libc::strlen(s) }) as u32 + 1 };
        (self.name_len, self.file_len) = (len(k.name()), len(k.file()));
        let fixed = |s: *const c_char, n: u32| s.is_null() || crate::rodata::immutable(s.cast(), n as usize);
        self.immutable = fixed(self.name, self.name_len) && fixed(self.file, self.file_len);
        self.learnt = true;
    }
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
    map: KeyMap<KeyEntry>,
    generation: AtomicU32,
}

impl KeyTable {
    /// An empty table (room for about 6000 keys before the first growth).
    pub fn new() -> Self {
        KeyTable { map: KeyMap::new(5), generation: AtomicU32::new(0) }
    }

    /// Forgets every key (instance numbering restarts), for `xptiReset`.
    pub fn clear(&self) {
        self.map.clear();
        // Relaxed: per-thread caches compare it; a stale hit during a concurrent reset is benign.
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The entry for a normalized payload, creating it on first sight, through the thread's key
    /// cache `cache` (already borrowed by the caller; `None` on an exiting thread), and whether
    /// this call created it (its first instance is then number 1, and the counter already says
    /// so). The cache hit is inlined into the caller; the rest is
    /// [`entry_miss`](Self::entry_miss). A new entry's shared payload is that of the instance
    /// `first` (its uid64 and `spec`).
    ///
    /// # Safety
    /// `n.name`/`n.file`, where non-null, must be valid C strings. `string_id` interns a string.
    #[inline(always)]
    unsafe fn entry_in(
        &self,
        mut cache: Option<&mut Option<Box<KeyCache>>>,
        n: &Normalized,
        strict: bool,
        string_id: &dyn Fn(&CStr) -> (u32, *const c_char),
        first: (u64, &Spec, u32),
    ) -> (&'static KeyEntry, bool) {
        // Relaxed: see `clear`.
        let generation = self.generation.load(Ordering::Relaxed);
        let h = (n.name as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (n.file as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ (u64::from(n.line) | u64::from(n.column) << 32).wrapping_mul(0x1656_67B1_9E37_79F9);
        let slot = (h >> 40) as usize & (KEY_CACHE_SIZE - 1);
        if let Some(Some(keys)) = cache.as_deref_mut() {
            let hit = |e: &CacheEntry| {
                e.name == n.name
                    && e.file == n.file
                    && e.line == n.line
                    && e.column == n.column
                    && e.generation == generation
            };
            let way = if hit(&keys[slot]) {
                Some(slot)
            } else if hit(&keys[slot ^ 1]) {
                Some(slot ^ 1)
            } else {
                None
            };
            if let Some(way) = way {
                let e = &mut keys[way];
                // SAFETY: cached keys are never freed.
                let k = unsafe { &*e.key };
                if !e.immutable && !e.learnt {
                    e.learn();
                }
                // The caller's strings may have changed since they were cached: compare contents,
                // unless they are immutable.
                // SAFETY: both sides are valid C strings (caller contract; owned copies whose
                // lengths the entry holds).
                if e.immutable
                    || unsafe { same_str(n.name, k.name(), e.name_len) && same_str(n.file, k.file(), e.file_len) }
                {
                    return (k, false);
                }
            }
        }
        // SAFETY: caller contract.
        unsafe { self.entry_miss(cache, n, strict, string_id, generation, slot, first) }
    }

    /// [`entry_in`](Self::entry_in) past the thread's cache: the shared map, then the cache
    /// entry for next time.
    ///
    /// # Safety
    /// As [`entry_in`](Self::entry_in).
    #[cold]
    #[inline(never)]
    #[allow(
        clippy::too_many_arguments,
        reason = "the hit path's state, passed on as is; a struct would cost the hot path"
    )]
    unsafe fn entry_miss(
        &self,
        cache: Option<&mut Option<Box<KeyCache>>>,
        n: &Normalized,
        strict: bool,
        string_id: &dyn Fn(&CStr) -> (u32, *const c_char),
        generation: u32,
        slot: usize,
        first: (u64, &Spec, u32),
    ) -> (&'static KeyEntry, bool) {
        let mut keys: Option<&mut KeyCache> = cache.map(|c| &mut **c.get_or_insert_with(KeyCache::new_boxed));
        // SAFETY: caller contract.
        let name = (!n.name.is_null()).then(|| unsafe { CStr::from_ptr(n.name) });
        // Only measured where the memo below does not give the file (a `strlen` less).
        // SAFETY: caller contract.
        let file_of = || (!n.file.is_null()).then(|| unsafe { CStr::from_ptr(n.file) });
        let mut file = None;
        // Default mode: new keys of a thread usually share the source file of its previous new
        // key; the memo gives that file's hash and owned copy after one string compare.
        let mut file_copy: *const c_char = ptr::null();
        let (fid, flid, strict_name, strict_file) = if strict {
            let (fi, fp) = name.map_or((0, ptr::null()), string_id);
            let (li, lp) = file_of().map_or((0, ptr::null()), string_id);
            (fi, li, fp, lp)
        } else {
            let memo = keys.as_ref().map_or((ptr::null(), ptr::null(), 0), |k| k.file_memo);
            // SAFETY: `n.file` is a valid C string (caller contract), `memo.1` an owned copy.
            let flid = if !n.file.is_null() && memo.0 == n.file && unsafe { cstr_eq(n.file, memo.1) } {
                file_copy = memo.1;
                memo.2
            } else {
                file = file_of();
                file.map_or(0, |s| fnv1a32(s.to_bytes()))
            };
            (name.map_or(0, |s| fnv1a32(s.to_bytes())), flid, ptr::null(), ptr::null())
        };
        // The entry and its name copies in one piece of process-lifetime memory (instances and C
        // callers may hold the name pointers forever).
        let (nb, fb): (&[u8], &[u8]) = if strict {
            (&[], &[])
        } else if !file_copy.is_null() {
            (name.map_or(&[], CStr::to_bytes_with_nul), &[])
        } else {
            (name.map_or(&[], CStr::to_bytes_with_nul), file.map_or(&[], CStr::to_bytes_with_nul))
        };
        // A cache line of its own for the counter: every creation of the key adds to it, from
        // any thread, and entries packed back to back put one key's counter in the line of
        // another key's names and IDs, which creations read. With two threads making the same
        // keys, that false sharing made the tracepoint scope pair about 40 % slower per thread.
        let size = (size_of::<KeyEntry>() + nb.len() + fb.len()).next_multiple_of(KEY_ALIGN);
        let mut mem: *mut u8 = ptr::null_mut();
        let key_value = key_of(fid, flid, n.line, n.column);
        let make = || {
            // The candidate, built while the map's slot load is outstanding: at the arena's
            // bump pointer, given back below if the key exists.
            mem = match keys.as_deref_mut() {
                Some(k) => k.arena.alloc(size, KEY_ALIGN),
                None => crate::intern::alloc_static(size, KEY_ALIGN),
            };
            // SAFETY:
            // - `mem` is fresh, suitably aligned memory for a KeyEntry followed by both copies;
            //   the sources are valid slices disjoint from it.
            unsafe {
                let np = mem.add(size_of::<KeyEntry>());
                let fp = np.add(nb.len());
                ptr::copy_nonoverlapping(nb.as_ptr(), np, nb.len());
                if !fb.is_empty() {
                    ptr::copy_nonoverlapping(fb.as_ptr(), fp, fb.len());
                }
                let copy =
                    |b: &[u8], p: *mut u8| if b.is_empty() { ptr::null() } else { p.cast_const().cast::<c_char>() };
                let name = if strict { strict_name } else { copy(nb, np) };
                let file = if strict {
                    strict_file
                } else if !file_copy.is_null() {
                    file_copy
                } else {
                    copy(fb, fp)
                };
                let (uid, spec, owner) = first;
                let e = mem.cast::<KeyEntry>();
                // The creator's instance is number 1: published with the entry.
                (&raw mut (*e).counter).write(AtomicU64::new(1));
                (&raw mut (*e).owner).write(AtomicU32::new(owner));
                write_stored_payload(&raw mut (*e).payload, name, file, fid as i32, flid as i32, n, spec, uid);
            }
            mem.cast_const().cast()
        };
        // SAFETY (the map's contract): `make` returns a fully initialised entry for this key in
        // arena or static memory that is never freed; the arena takes it back below only when
        // it was never visible (`Fate::Unused`).
        let (key, fate) = unsafe { self.map.find_or_insert(key_value, make) };
        // (On an exiting thread the candidate came from the shared arena and stays allocated.)
        if fate == Fate::Unused
            && let Some(k) = keys.as_deref_mut()
        {
            // SAFETY: `mem` is the arena's last allocation (`size` bytes, made above) and was
            // never visible to another thread.
            unsafe { k.arena.give_back(mem, size) };
        }
        if let Some(keys) = keys {
            if !strict && !key.file().is_null() {
                keys.file_memo = (n.file, key.file(), key.file_id() as u32);
            }
            let entry = CacheEntry {
                key,
                name: n.name,
                file: n.file,
                line: n.line,
                column: n.column,
                generation,
                ..CacheEntry::EMPTY
            };
            // Two-way placement: fill the free way, else evict the partner of the last insert.
            let way = if keys[slot].key.is_null() || keys[slot].generation != generation { slot } else { slot ^ 1 };
            keys[way] = entry;
        }
        (key, fate == Fate::Published)
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

/// Whether the caller's string `s` equals the key's copy `ours`, `len` bytes long with its NUL
/// (null equals only null). The creation paths run this on every hit of the thread's key cache,
/// so it is inlined and reads 8 bytes per step; two `strcmp` calls through the PLT were about a
/// quarter of the tracepoint scope pair's time.
///
/// # Safety
/// `s` is null or a valid C string; `ours` is null or a valid C string of `len` bytes.
#[inline(always)]
unsafe fn same_str(s: *const c_char, ours: *const c_char, len: u32) -> bool {
    if s == ours {
        return true;
    }
    if s.is_null() || ours.is_null() {
        return false;
    }
    let (s, ours, n) = (s.cast::<u8>(), ours.cast::<u8>(), len as usize);
    if !cfg!(target_arch = "x86_64") || n < 8 || (s as usize & (PAGE - 1)) + n > PAGE {
        // Short, or the caller's `n` bytes would cross a page boundary.
        // SAFETY: both valid C strings (caller contract).
        return unsafe { libc::strcmp(s.cast(), ours.cast()) == 0 };
    }
    // The strings are equal exactly when the caller's first `n` bytes equal ours (ours end with
    // their only NUL). Those bytes lie in one page, which holds the caller's first byte, so
    // reading them cannot fault even where the caller's string is shorter; the bytes read past
    // its end then only make the comparison fail, as it must. The caller's words are read with
    // `asm!` for that reason ([`word_in_page`]); ours are in bounds. The last word overlaps the
    // previous one.
    // SAFETY: `i + 8 <= n` for every word read of `ours`, which is valid for `n` bytes.
    let ours_word = |i: usize| unsafe { ours.add(i).cast::<u64>().read_unaligned() };
    let mut diff = 0;
    let mut i = 0;
    while i + 8 < n {
        // SAFETY: `s + i .. s + i + 8` lies in the page of `s` (checked above).
        diff |= unsafe { word_in_page(s.wrapping_add(i)) } ^ ours_word(i);
        i += 8;
    }
    // SAFETY: as above.
    diff |= unsafe { word_in_page(s.wrapping_add(n - 8)) } ^ ours_word(n - 8);
    diff == 0
}

/// The 8 bytes at `p`, which need not belong to one object: a plain load outside the Rust
/// memory model, so it may read past the end of a C string.
///
/// # Safety
/// `p..p + 8` lies in a mapped, readable page.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn word_in_page(p: *const u8) -> u64 {
    let v: u64;
    // SAFETY: caller contract; the asm only reads.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{p}]", p = in(reg) p, v = out(reg) v, options(pure, readonly, nostack, preserves_flags));
    }
    v
}

/// Not reached (`same_str` compares with `strcmp` on other architectures).
///
/// # Safety
/// None needed.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn word_in_page(_: *const u8) -> u64 {
    0
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

/// Writes the payload an instance stores (`docs/reference/xpti-abi.md` §6.2) to `dst`: the key's names and
/// IDs, the caller's flags, line and column, `internal` = `uid`. Field by field: a `write` of a
/// whole `Payload` value goes through the stack.
///
/// # Safety
/// `dst` is valid for writes of a `Payload` and 8-aligned.
#[allow(clippy::too_many_arguments, reason = "one argument per stored field of the payload it writes in place")]
#[inline(always)]
unsafe fn write_stored_payload(
    dst: *mut Payload,
    name: *const c_char,
    file: *const c_char,
    function_id: i32,
    file_id: i32,
    n: &Normalized,
    spec: &Spec,
    uid: u64,
) {
    // SAFETY: caller contract.
    let p = unsafe { &mut *dst };
    p.name = name;
    p.stack_trace = spec.stack_trace;
    p.source_file = file;
    p.line_no = n.line;
    p.column_no = n.column;
    p.code_ptr_va = spec.code_ptr;
    p.internal = uid;
    p.flags = n.flags | pf::PAYLOAD_REGISTERED | pf::HASH_AVAILABLE;
    p.uid =
        LegacyUid { p1: ((file_id as u32 as u64) << 32) | u64::from(n.line), p2: u64::from(function_id as u32), p3: 0 };
}

/// The key entry for `n` and a live instance of it in a fresh slot, with one thread-local access
/// for both the key cache and the free slot list. Returns the event address (= uid64), the
/// instance number and the key. `INTERFACES`: the caller hands out an interface pointer of the
/// new instance (`xptiCreateTracepoint`), so its side cell is written at once (a compile-time
/// choice: the creation paths then carry no test for it).
///
/// # Safety
/// `n.name`/`n.file`, where non-null, must be valid C strings. `string_id` interns a string.
#[inline]
pub unsafe fn make<const INTERFACES: bool>(
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
        // The slot first: a new key's shared payload records the first instance's uid64.
        let ev = slab.alloc_in(Some(c))?;
        // SAFETY: caller contract.
        // The thread owns the keys it makes where it can hand them over (`next_instance`).
        let owns = if c.busy.is_null() { 0 } else { c.owner };
        let (key, created) = unsafe { keys.entry_in(Some(&mut c.keys), n, strict, string_id, (ev as u64, spec, owns)) };
        // `created`: the thread made the key, whose counter already counts this instance (1).
        let inst = if created { 1 } else { next_instance(slab, key, owns, c.busy) };
        Some((key, inst, ev, c.owner))
    });
    let (key, inst, ev, owner) = match got {
        Ok(r) => r?,
        // Thread-local storage already destroyed (thread exit).
        Err(_) => {
            let ev = slab.alloc_in(None)?;
            // SAFETY: caller contract.
            let (key, created) = unsafe { keys.entry_in(None, n, strict, string_id, (ev as u64, spec, 0)) };
            (key, if created { 1 } else { next_instance(slab, key, 0, ptr::null()) }, ev, 0)
        }
    };
    // SAFETY: `key` belongs to `n`; `ev` is a free slot of `slab`.
    unsafe { construct::<INTERFACES>(slab, ev, key, n, spec, inst, owner) };
    Some((ev, inst, key))
}

/// `KeyEntry::owner` while a thread takes a key's counter over from its owner.
const HANDING_OVER: u32 = u32::MAX;

/// The next instance number of `key`, for the thread with owner index `me` whose `busy` flag
/// is `busy` (null: it owns no keys).
///
/// The key's owner (the thread that made it) adds to the counter with plain accesses: a
/// `lock xadd` on every creation was about a tenth of the tracepoint scope pair's time. The
/// first other thread that needs a number takes the counter over once and for all
/// ([`hand_over`]): it marks the key, makes every thread of the process execute a memory barrier
/// (`membarrier`), waits until the owner is not inside a plain increment, and marks the key
/// shared. After the barrier the owner sees the mark: it announced itself (`busy`) before it
/// read the owner field, so either the hand-over sees it busy and waits, or the owner sees the
/// mark and adds like every other thread. Numbers stay 1, 2, 3… per key in creation order, as
/// in Intel's dispatcher.
#[inline(always)]
fn next_instance(slab: &Slab, key: &KeyEntry, me: u32, busy: *const AtomicU32) -> u64 {
    // Acquire: a 0 written by a hand-over comes with the owner's last plain increment.
    let owner = key.owner.load(Ordering::Acquire);
    if owner != 0 {
        if owner == me && !busy.is_null() {
            // SAFETY: the thread's own Owner record, never freed.
            let busy = unsafe { &*busy };
            busy.store(1, Ordering::Relaxed);
            // The store stays before the load in program order; the hardware's store-load
            // reordering is the hand-over's membarrier's business.
            compiler_fence(Ordering::SeqCst);
            if key.owner.load(Ordering::Relaxed) == me {
                let n = key.counter.load(Ordering::Relaxed) + 1;
                key.counter.store(n, Ordering::Relaxed);
                // Release: a hand-over that sees 0 sees the counter's new value.
                busy.store(0, Ordering::Release);
                return n;
            }
            busy.store(0, Ordering::Release);
        } else {
            hand_over(slab, key, owner);
        }
    }
    // Relaxed: the counter only has to hand out distinct, increasing numbers per key.
    key.counter.fetch_add(1, Ordering::Relaxed) + 1
}

/// Takes the counter of `key` over from its owner (`owner` as last read), or waits for the
/// thread that does (see [`next_instance`]). Once per key.
#[cold]
#[inline(never)]
fn hand_over(slab: &Slab, key: &KeyEntry, mut owner: u32) {
    let mut spins = 0u32;
    loop {
        match owner {
            0 => return,
            HANDING_OVER => {
                spins += 1;
                if spins.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                // Acquire: as in `next_instance`.
                owner = key.owner.load(Ordering::Acquire);
            }
            _ => match key.owner.compare_exchange(owner, HANDING_OVER, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    if !barrier_everywhere() {
                        // A running owner's store of `busy` reaches memory within nanoseconds,
                        // and a descheduled one's went out with its context switch.
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    if let Some(o) = slab.owner(owner) {
                        // Acquire: the owner's last plain increment happens before what follows.
                        // Bounded (about a second): an owner that died inside its increment
                        // (asynchronous cancellation) must not hang the application.
                        let mut waits = 0;
                        while o.busy.load(Ordering::Acquire) != 0 && waits < 1000 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                            waits += 1;
                        }
                    }
                    // Release: passes that on to the threads that read 0.
                    key.owner.store(0, Ordering::Release);
                    return;
                }
                Err(now) => owner = now,
            },
        }
    }
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Whether this process may make its threads execute a memory barrier (`membarrier`, Linux
/// 4.14; refused by some sandboxes and by valgrind). Without it no thread owns keys.
fn asymmetric_fences() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        // SAFETY: a system call with integer arguments.
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
    })
}

/// Makes every running thread of the process execute a full memory barrier before it returns
/// true. Registered by [`asymmetric_fences`], which held before any key had an owner; registered
/// again if refused (a child process after `fork`).
fn barrier_everywhere() -> bool {
    for _ in 0..2 {
        // SAFETY: system calls with integer arguments.
        unsafe {
            if libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 {
                return true;
            }
            libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
        }
    }
    false
}

/// Constructs a live instance of `key` numbered `instance` in the free slot `ev`, made by the
/// thread with owner index `owner`.
///
/// # Safety
/// `ev` is a free slot of `slab` owned by the caller; `key` is the key entry of `n`.
#[inline(always)]
unsafe fn construct<const INTERFACES: bool>(
    slab: &Slab,
    ev: *mut u8,
    key: &'static KeyEntry,
    n: &Normalized,
    spec: &Spec,
    instance: u64,
    owner: u32,
) {
    let w = ev.cast::<u64>();
    match &slab.proto.map {
        // SAFETY:
        // - `ev` is a free, committed, 128-byte, 8-aligned event cell owned by this thread;
        // - the words copied are the verified empty-map image; its bucket pointer must point
        //   into this map's own single-bucket slot.
        Some(map) => unsafe {
            for (i, v) in map.iter().enumerate() {
                *w.add(MAP_WORD + i) = *v;
            }
            *w.add(MAP_WORD) = ev as u64 + (MAP_WORD * 8 + SINGLE_BUCKET_OFFSET) as u64;
        },
        // SAFETY:
        // - the map field of a free event cell owned by this thread; the shim constructs in place.
        None => unsafe { shim::ot_map_construct(w.add(MAP_WORD).cast()) },
    }
    let uid = ev as u64;
    let shared = &key.payload;
    // The key's payload serves when the instance's own would differ only in `internal`: same
    // flags, stack trace, code pointer and column (names, line and IDs come from the key; the
    // column is part of the key except after a line of 0xFFFFFFFF). The creator's (instance 1:
    // only the creator gets it) always does: the key's payload was written from it.
    let payload = if !INTERFACES
        && (instance == 1
            || shared.flags == n.flags | pf::PAYLOAD_REGISTERED | pf::HASH_AVAILABLE
                && shared.stack_trace == spec.stack_trace
                && shared.code_ptr_va == spec.code_ptr
                && shared.column_no == n.column)
    {
        (shared as *const Payload).cast_mut()
    } else {
        let side = slab.side_of(ev);
        // SAFETY:
        // - the side cell of the slot owned by this thread, committed, 8-aligned; nobody reads
        //   it before the release store of `unique_id` below publishes the instance.
        unsafe {
            // A recycled side cell usually holds them already (the vtable pointers are only ever
            // written as the whole set, before the cell is published).
            if *side.cast::<u64>() != slab.proto.vptrs[0] {
                store_words(side, &slab.proto.vptrs);
            }
            let own = side.add(layout::PAYLOAD).cast::<Payload>();
            write_stored_payload(own, key.name(), key.file(), key.function_id(), key.file_id(), n, spec, uid);
            own
        }
    };
    // SAFETY:
    // - `ev` is the slot's event cell (128 bytes, `TraceEventData`'s layout is checked in `abi`).
    unsafe {
        let e = &mut *event_of(ev);
        e.data_id = instance;
        e.instance_id = instance;
        e.event_type = spec.event_type;
        e.activity_type = spec.activity_type;
        owner_of(ev).store(owner, Ordering::Relaxed);
        e.source_id = 0;
        e.target_id = 0;
        e.reserved.payload = payload;
        e.global_user_data = ptr::null_mut();
        e.flags = event_flags::UID_AVAILABLE
            | event_flags::EVENT_TYPE_AVAILABLE
            | event_flags::ACTIVITY_TYPE_AVAILABLE
            | event_flags::PAYLOAD_AVAILABLE;
        // Release: publishes the complete instance to `is_live` readers (FindEvent & co).
        unique_id(ev).store(uid, Ordering::Release);
    }
}

/// Deletes the live instance whose event is `ev`. False when it is not live (already deleted,
/// or foreign).
#[inline]
pub fn delete(slab: &Slab, ev: *mut u8) -> bool {
    let off = (ev as usize).wrapping_sub(slab.events as usize);
    // Acquire: as in `is_live`.
    if off >= slab.committed.load(Ordering::Acquire) || !off.is_multiple_of(CELL) {
        return false;
    }
    // SAFETY: `ev` is a cell start in committed memory (checked above).
    unsafe { delete_cell(slab, ev) }
}

/// [`delete`] of an event cell already known to lie in the committed region. The thread that
/// made the instance claims the cell with plain accesses; others go through
/// [`delete_remote`] (see [`Owner`]).
///
/// # Safety
/// `ev` is a cell start in the committed event region of `slab`.
#[inline]
pub unsafe fn delete_cell(slab: &Slab, ev: *mut u8) -> bool {
    // SAFETY: caller contract.
    let id = unsafe { unique_id(ev) };
    let own = THREAD.try_with(|c| {
        let mut c = c.try_borrow_mut().ok()?;
        if c.owner == 0 {
            return None;
        }
        // The owner index read next is the live instance's (Acquire).
        if !word_is_live(id, ev as u64) {
            return Some(false);
        }
        // SAFETY: caller contract.
        if unsafe { owner_of(ev) }.load(Ordering::Relaxed) != c.owner {
            return None;
        }
        // Our instance: only this thread makes the cell live again, and other threads can only
        // have moved the word from live to a mark since the load above (see `Owner`).
        kill_own(id);
        // SAFETY: the cell is ours: only this thread makes it live again.
        unsafe { recycle(slab, ev) };
        slab.push_free(&mut c, ev as usize);
        Some(true)
    });
    match own {
        Ok(Some(deleted)) => deleted,
        // SAFETY: caller contract.
        _ => unsafe { delete_remote(slab, ev) },
    }
}

/// [`delete_cell`] by a thread that is not the instance's owner (or cannot tell: thread exit).
///
/// # Safety
/// As [`delete_cell`].
#[cold]
#[inline(never)]
unsafe fn delete_remote(slab: &Slab, ev: *mut u8) -> bool {
    // SAFETY: caller contract.
    let id = unsafe { unique_id(ev) };
    if !claim_remote(id, ev as u64) {
        return false;
    }
    // SAFETY: caller contract.
    let owner = unsafe { owner_of(ev) }.load(Ordering::Relaxed);
    if let Some(o) = (owner != 0).then(|| slab.owner(owner)).flatten() {
        let mut q = o.queue.lock().unwrap_or_else(|e| e.into_inner());
        if !q.0 {
            // The owner lives and recycles the cell. If its own deletion of this instance is
            // under way, its store of 0 has overwritten CLAIMED or will overwrite the mark.
            if mark_for_owner(id, owner) {
                q.1.push(ev as usize);
            }
            return true;
        }
    }
    // No owner can claim the cell any more (it exited, or there was none): recycle it here.
    // SAFETY: the cell is ours alone.
    unsafe { recycle(slab, ev) };
    kill_claimed(id);
    // SAFETY: the dead, recycled cell we claimed above (the compare-exchange from live).
    unsafe { slab.free(ev) };
    true
}

/// Makes a dead cell reusable: destroys its metadata map if it holds anything and clears the
/// side cell's metadata iterator if the side cell was handed out.
///
/// # Safety
/// `ev` is a committed event cell of `slab` that the caller alone owns (dead, claimed).
unsafe fn recycle(slab: &Slab, ev: *mut u8) {
    let map = ev.wrapping_add(MAP_WORD * 8).cast::<u64>();
    // SAFETY: `map` is inside the committed cell we own exclusively.
    let untouched = unsafe { *map == map as u64 + SINGLE_BUCKET_OFFSET as u64 && *map.add(2) == 0 && *map.add(3) == 0 };
    if !untouched {
        // SAFETY:
        // - we own the dead event exclusively now; the shim destroys its map (nodes and heap
        //   buckets freed with libstdc++'s operator delete).
        unsafe { shim::ot_map_destroy(map.cast()) };
    }
    // An empty map on its single inline bucket owns no memory: nothing to destroy.
    let own = ev.wrapping_add(slab.span + SIDE_SKEW + layout::PAYLOAD);
    // SAFETY: the event cell we own; a plain read of its payload pointer.
    if unsafe { (*event_of(ev)).reserved.payload } == own.cast() {
        // The side cell was handed out: its metadata iterator may point at a freed node. The
        // next instance in this slot finds it null (== end()), as in a never-written cell.
        // SAFETY: the committed side cell of the slot we own.
        unsafe { *own.add(layout::ITER - layout::PAYLOAD).cast::<u64>() = 0 };
    }
}

/// The `unused` field of an event, which holds the owner index of its instance.
///
/// # Safety
/// `ev` must point into committed event memory at a cell start.
#[inline]
unsafe fn owner_of<'a>(ev: *mut u8) -> &'a AtomicU32 {
    // SAFETY: the caller guarantees a committed event cell; the field is 4-aligned.
    unsafe { AtomicU32::from_ptr(&raw mut (*ev.cast::<TraceEventData>()).unused) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's string ends on the last byte before an inaccessible page: comparing it with
    /// a key copy of any length, equal or not, must not fault.
    #[test]
    fn same_str_at_page_ends_and_every_length() {
        // SAFETY: a fresh private mapping of two pages; the second is made inaccessible.
        let base = unsafe {
            let p = libc::mmap(
                ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::mprotect(p.cast::<u8>().add(PAGE).cast(), PAGE, libc::PROT_NONE), 0);
            p.cast::<u8>()
        };
        let text = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let copy = |t: &[u8]| std::ffi::CString::new(t).expect("no NUL in the text");
        for len in 0..text.len() {
            for back in 0..24 {
                // The caller's string `text[..len]` placed to end `back` bytes before the page end.
                // SAFETY: `a..a + len + 1` lies in the first page.
                let a = unsafe { base.add(PAGE - 1 - len - back) };
                // SAFETY: as above.
                unsafe {
                    ptr::copy_nonoverlapping(text.as_ptr(), a, len);
                    *a.add(len) = 0;
                }
                let a = a.cast::<c_char>().cast_const();
                for other in 0..text.len() {
                    // Key copies: the same text cut at `other`, and with one byte changed.
                    let ours = copy(&text[..other]);
                    let n = other as u32 + 1;
                    // SAFETY: `a` a valid C string; `ours` one of `n` bytes.
                    assert_eq!(
                        unsafe { same_str(a, ours.as_ptr(), n) },
                        other == len,
                        "len {len} back {back} other {other}"
                    );
                    if other > 0 {
                        let mut t = text[..other].to_vec();
                        t[other / 2] ^= 0x20;
                        let changed = copy(&t);
                        // SAFETY: as above.
                        assert!(!unsafe { same_str(a, changed.as_ptr(), n) }, "len {len} back {back} other {other}");
                    }
                }
            }
        }
        // SAFETY: null and pointer-equal strings.
        unsafe {
            assert!(same_str(ptr::null(), ptr::null(), 0));
            assert!(!same_str(ptr::null(), c"x".as_ptr(), 2));
            assert!(!same_str(c"x".as_ptr(), ptr::null(), 0));
            let x = c"pointer-equal".as_ptr();
            assert!(same_str(x, x, 14));
            libc::munmap(base.cast(), 2 * PAGE);
        }
    }
}

/// The deletion protocol of [`Owner`] under loom: the liveness word's transitions are the
/// shipped functions above ([`word_is_live`], [`kill_own`], [`claim_remote`],
/// [`mark_for_owner`], [`reclaim_marked`], [`kill_claimed`]) run on a loom atomic; the steps
/// around them follow `delete_cell`, `delete_remote` and `claim_queued` (which address the word
/// in the event cell's memory, and recycle through the C++ shim: neither can run under loom).
/// Recycling is a write of a loom cell, so two recycles of one cell, or one not ordered after
/// the deletion's claim, fail the model.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell as LoomUnsafeCell;
    use loom::sync::Arc;
    use loom::sync::Mutex as LoomMutex;
    use loom::sync::atomic::AtomicU64 as LoomAtomicU64;

    /// The cell's address, which is also the live instance's uid.
    const EV: u64 = 0x7f00_0000_1000;
    const OWNER: u32 = 7;

    struct Cell {
        id: LoomAtomicU64,
        recycled: LoomUnsafeCell<u32>,
        /// The owner's queue: (exited, cells deleted by other threads).
        queue: LoomMutex<(bool, Vec<u64>)>,
    }

    fn cell(exited: bool) -> Arc<Cell> {
        Arc::new(Cell {
            id: LoomAtomicU64::new(EV),
            recycled: LoomUnsafeCell::new(0),
            queue: LoomMutex::new((exited, Vec::new())),
        })
    }

    fn recycle(c: &Cell) {
        // SAFETY: a write loom checks against every other recycle.
        c.recycled.with_mut(|p| unsafe { *p += 1 });
    }

    /// `delete_cell` by the owner.
    fn owner_delete(c: &Cell) -> bool {
        if !word_is_live(&c.id, EV) {
            return false;
        }
        kill_own(&c.id);
        recycle(c);
        true
    }

    /// `delete_remote`.
    fn remote_delete(c: &Cell) -> bool {
        if !claim_remote(&c.id, EV) {
            return false;
        }
        let mut q = c.queue.lock().expect("queue");
        if !q.0 {
            if mark_for_owner(&c.id, OWNER) {
                q.1.push(EV);
            }
            return true;
        }
        drop(q);
        recycle(c);
        kill_claimed(&c.id);
        true
    }

    /// The owner's `alloc_refill`: `claim_queued` of every queued cell.
    fn owner_refill(c: &Cell) {
        let cells = std::mem::take(&mut c.queue.lock().expect("queue").1);
        for _ in cells {
            if reclaim_marked(&c.id, OWNER) {
                recycle(c);
            }
        }
    }

    fn recycled(c: &Cell) -> u32 {
        // SAFETY: every thread has been joined.
        c.recycled.with(|p| unsafe { *p })
    }

    /// The owner and another thread delete the same instance at once (a double delete, which
    /// XPTI allows): both may report success, and the cell is recycled exactly once.
    #[test]
    fn loom_a_double_delete_by_owner_and_other_thread_recycles_once() {
        loom::model(|| {
            let c = cell(false);
            let other = {
                let c = c.clone();
                loom::thread::spawn(move || remote_delete(&c))
            };
            let mine = owner_delete(&c);
            owner_refill(&c);
            let theirs = other.join().expect("deleter");
            owner_refill(&c);
            assert!(mine || theirs);
            assert_eq!(recycled(&c), 1);
            assert_eq!(c.id.load(Ordering::Relaxed), 0);
        });
    }

    /// Another thread deletes while the owner refills: the owner recycles the queued cell once
    /// (now or at its next refill).
    #[test]
    fn loom_a_remote_delete_is_recycled_once_by_the_owner() {
        loom::model(|| {
            let c = cell(false);
            let other = {
                let c = c.clone();
                loom::thread::spawn(move || assert!(remote_delete(&c)))
            };
            owner_refill(&c);
            other.join().expect("deleter");
            owner_refill(&c);
            assert_eq!(recycled(&c), 1);
            assert_eq!(c.id.load(Ordering::Relaxed), 0);
        });
    }

    /// Two other threads delete the instance of an exited owner: one wins and recycles it.
    #[test]
    fn loom_two_deleters_of_an_exited_owners_instance_recycle_once() {
        loom::model(|| {
            let c = cell(true);
            let other = {
                let c = c.clone();
                loom::thread::spawn(move || remote_delete(&c))
            };
            let mine = remote_delete(&c);
            let theirs = other.join().expect("deleter");
            assert!(mine ^ theirs, "exactly one deletion succeeds");
            assert_eq!(recycled(&c), 1);
        });
    }
}
