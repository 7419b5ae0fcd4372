//! The live allocation table and kernel allocation properties.
//!
//! Backends report allocations ([`record_alloc`] / [`record_free`], or [`emit_memory_alloc`] /
//! [`emit_memory_free`], which also emit `MEMORY_ALLOC` records). The table maps base address →
//! (size, type) in a `BTreeMap`, so finding the allocation containing a pointer is one range
//! query. [`kernel_allocation_properties`] matches a kernel dispatch's argument values against
//! it, like Level Zero's `zeKernelGetAllocationPropertiesExp`: every allocation an argument
//! points into (base, size, argument index, type), then the dispatch's implicit allocations
//! (argument index -1).
//!
//! Cost: the table takes a write lock per allocation and free (tens of ns, against runtime
//! allocation calls of microseconds). Lookups answer from the calling thread's memo of its last
//! few answers while the table is unchanged (one load, no lock: [`crate::generation`]), else
//! take the read lock. A dispatch's arguments are matched against the thread's [`View`]: a
//! sorted copy of the table, valid while the table's generation has not moved (one load, no
//! lock), refreshed under the read lock after a change; an argument outside the span of every
//! live allocation (a size, a count, a host pointer below the device heap) is rejected with two
//! compares, the others take a binary search. Tables larger than [`VIEW_MAX`] are matched under
//! the read lock instead (a copy per change would cost more than it saves). The table is
//! maintained whether or not a tool listens, because a dispatch may be queried at any time.

#![allow(unsafe_code)] // reads the dispatch payload's implicit-allocation array; unchecked indexing in the view's search

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::callback::{Phase, emit_instant};
use crate::generation::{Generation, GenerationCounter, Memo};
use crate::kind::{Kind, memory_alloc};
use crate::payload::{KernelDispatchPayload, MAX_KERNEL_ARGS, MemoryAllocPayload, MemoryType, Payload};

/// `offtrace_kernel_allocation_properties_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct AllocationProperties {
    pub base: u64,
    pub size: u64,
    /// The kernel argument that points into the allocation; -1 for an implicit allocation.
    pub arg_index: i32,
    pub memory_type: MemoryType,
}

static TABLE: RwLock<BTreeMap<u64, (u64, MemoryType)>> = RwLock::new(BTreeMap::new());
/// Bumped by every change of [`TABLE`], under its write lock.
static TABLE_GENERATION: Generation = Generation::new();

/// A look-up's answer: the live allocation containing a pointer, (base, size, type).
pub(crate) type Found = Option<(u64, u64, MemoryType)>;

/// A thread's last answers by pointer (`ThreadState::allocation_memo`, read through the
/// thread-pointer cache: a thread-local of its own was a `__tls_get_addr` call per look-up in a
/// shared object): a copy reads its source and its destination, usually the same buffers call
/// after call.
pub(crate) type AllocationMemo = Memo<u64, Found, 2>;

/// Most live allocations a thread's [`View`] copies; a larger table is matched under its lock.
pub const VIEW_MAX: usize = 1024;

/// A thread's sorted copy of [`TABLE`] for matching dispatch arguments, valid for the
/// generation it was copied at (see the module docs; exact for the reason
/// [`crate::generation`] gives: the generation is loaded before the lock is taken).
#[derive(Debug)]
struct View {
    /// The generation copied; [`VIEW_NONE`] when empty or the table was too large.
    generation: u64,
    /// (base, size, type) in ascending order of base.
    entries: Vec<(u64, u64, MemoryType)>,
    /// The lowest base and the highest end of the live allocations: every hit lies in
    /// `low..high` (empty when there are none).
    low: u64,
    high: u64,
}

/// A generation no view holds (a counter bumped once per change never gets there).
const VIEW_NONE: u64 = u64::MAX;

impl View {
    const fn new() -> Self {
        Self { generation: VIEW_NONE, entries: Vec::new(), low: 0, high: 0 }
    }

    /// Copies the table as of `generation` (loaded before this call); `false` when the table is
    /// larger than [`VIEW_MAX`] (the view stays invalid).
    #[cold]
    #[inline(never)]
    fn refresh(&mut self, generation: u64) -> bool {
        let t = TABLE.read().unwrap_or_else(|e| e.into_inner());
        self.generation = VIEW_NONE;
        if t.len() > VIEW_MAX {
            return false;
        }
        self.entries.clear();
        self.entries.extend(t.iter().map(|(&base, &(size, ty))| (base, size, ty)));
        self.low = self.entries.first().map_or(0, |e| e.0);
        self.high = self.entries.iter().map(|e| e.0.saturating_add(e.1)).max().unwrap_or(0);
        self.generation = generation;
        true
    }

    /// The index of the allocation containing `v`, as the table's range query answers it: the
    /// one with the greatest base at or below `v`, if `v` lies inside it.
    #[inline(always)]
    fn find(&self, v: u64) -> Option<usize> {
        if v < self.low || v >= self.high {
            return None;
        }
        // The greatest base at or below `v` (there is one: `v >= low`, the first base). A
        // halving search whose steps do not depend on the comparisons' outcome (a conditional
        // move each), three steps for eight allocations.
        let e = &self.entries[..];
        let (mut at, mut len) = (0, e.len());
        while len > 1 {
            let half = len / 2;
            // SAFETY: `at + half < at + len <= e.len()` (the loop keeps `at + len <= e.len()`).
            if unsafe { e.get_unchecked(at + half) }.0 <= v {
                at += half;
            }
            len -= half;
        }
        // SAFETY: `e` is not empty (`low < high`) and `at + len <= e.len()` with `len == 1`.
        let (base, size, _) = unsafe { *e.get_unchecked(at) };
        (v - base < size).then_some(at)
    }

    /// [`each_match`] on the view: allocations deduplicated by their index (a bit per index
    /// for the first 64, a list beyond).
    #[inline]
    fn each_match(&self, args: &[u64], mut f: impl FnMut(AllocationProperties)) {
        let mut seen = 0u64;
        let mut seen_far = [0u16; MAX_KERNEL_ARGS];
        let mut far = 0;
        for (i, &v) in args.iter().enumerate() {
            let Some(at) = self.find(v) else { continue };
            let new = if at < 64 {
                let bit = 1u64 << at;
                let new = seen & bit == 0;
                seen |= bit;
                new
            } else {
                // `at < VIEW_MAX`, which fits.
                let at = at as u16;
                let new = !seen_far[..far].contains(&at);
                if new {
                    seen_far[far] = at;
                    far += 1;
                }
                new
            };
            if new {
                // SAFETY: `find` returns an index of `entries`.
                let (base, size, memory_type) = unsafe { *self.entries.get_unchecked(at) };
                f(AllocationProperties { base, size, arg_index: i as i32, memory_type });
            }
        }
    }
}

thread_local! {
    /// This thread's copy of the table for matching dispatch arguments.
    static VIEW: RefCell<View> = const { RefCell::new(View::new()) };
}

/// Adds a live allocation (replacing any with the same base).
pub fn record_alloc(base: u64, size: u64, memory_type: MemoryType) {
    if base != 0 && size != 0 {
        let mut t = TABLE.write().unwrap_or_else(|e| e.into_inner());
        t.insert(base, (size, memory_type));
        TABLE_GENERATION.bump();
    }
}

/// Removes the allocation starting at `base`; returns it if it was live.
pub fn record_free(base: u64) -> Option<(u64, MemoryType)> {
    let mut t = TABLE.write().unwrap_or_else(|e| e.into_inner());
    let removed = t.remove(&base);
    if removed.is_some() {
        TABLE_GENERATION.bump();
    }
    removed
}

/// The live allocation containing `ptr`: (base, size, type).
pub fn lookup(ptr: u64) -> Found {
    crate::correlation::thread_state().allocation_memo.get(&TABLE_GENERATION, ptr, lookup_locked)
}

fn lookup_locked(ptr: u64) -> Found {
    let t = TABLE.read().unwrap_or_else(|e| e.into_inner());
    let (&base, &(size, ty)) = t.range(..=ptr).next_back()?;
    (ptr - base < size).then_some((base, size, ty))
}

/// Number of live allocations.
pub fn live_count() -> usize {
    TABLE.read().unwrap_or_else(|e| e.into_inner()).len()
}

/// Records the allocation and emits `MEMORY_ALLOC`/`alloc`.
pub fn emit_memory_alloc(p: &MemoryAllocPayload) {
    record_alloc(p.ptr, p.size, p.memory_type);
    emit_instant(Kind::MemoryAlloc, memory_alloc::ALLOC, Phase::None, Payload::MemoryAlloc(p));
}

/// Records a part of a live allocation that has a handle of its own (an OpenCL sub-buffer),
/// so a kernel argument naming that handle gets it as its allocation, and emits
/// `MEMORY_ALLOC`/`sub_alloc`: readers keep its bytes out of live memory (the parent holds
/// them). Its release is an [`emit_memory_free`] of the same handle.
pub fn emit_memory_sub_alloc(p: &MemoryAllocPayload) {
    record_alloc(p.ptr, p.size, p.memory_type);
    emit_instant(Kind::MemoryAlloc, memory_alloc::SUB_ALLOC, Phase::None, Payload::MemoryAlloc(p));
}

/// Emits `MEMORY_ALLOC`/`free` (size and type filled from the table when known) and removes
/// the allocation.
pub fn emit_memory_free(ptr: u64) {
    let known = record_free(ptr);
    let (size, memory_type) = known.unwrap_or((0, MemoryType::Unknown));
    let p = MemoryAllocPayload { ptr, size, memory_type, device: 0 };
    emit_instant(Kind::MemoryAlloc, memory_alloc::FREE, Phase::None, Payload::MemoryAlloc(&p));
}

/// Every allocation a dispatch uses: arguments that point into a live allocation (one entry per
/// allocation, with the first such argument's index), then the implicit allocations.
///
/// # Safety
///
/// `p.implicit_allocations` must be null or point at `p.implicit_allocation_count` readable
/// entries (true for a payload delivered in a callback, during the callback).
pub unsafe fn kernel_allocation_properties(p: &KernelDispatchPayload) -> Vec<AllocationProperties> {
    let mut out = Vec::new();
    // SAFETY: forwarded.
    unsafe { for_each_kernel_allocation(p, |a| out.push(a)) };
    out
}

/// [`kernel_allocation_properties`] without allocating: fills `out` from the start, in the same
/// order, and returns how many it filled (at most `out.len()`; the rest are cut).
///
/// # Safety
///
/// As [`kernel_allocation_properties`].
pub unsafe fn kernel_allocation_properties_into(p: &KernelDispatchPayload, out: &mut [AllocationProperties]) -> usize {
    let mut n = 0;
    // SAFETY: forwarded.
    unsafe {
        for_each_kernel_allocation(p, |a| {
            if let Some(slot) = out.get_mut(n) {
                *slot = a;
                n += 1;
            }
        })
    };
    n
}

/// Calls `f` with each allocation a dispatch uses, in [`kernel_allocation_properties`]' order,
/// without allocating or filling an array first (the recorder's record path writes each into
/// its entry). `f` must not call back into this module (it may run while the thread's view of
/// the table is borrowed, or its read lock held).
///
/// # Safety
///
/// As [`kernel_allocation_properties`].
#[inline]
pub unsafe fn for_each_kernel_allocation(p: &KernelDispatchPayload, mut f: impl FnMut(AllocationProperties)) {
    let args = &p.kernel_args[..(p.kernel_arg_count as usize).min(MAX_KERNEL_ARGS)];
    if !args.is_empty() {
        each_match(args, &mut f);
    }
    if !p.implicit_allocations.is_null() {
        // SAFETY: the caller's contract: `implicit_allocation_count` readable entries.
        let implicit =
            unsafe { std::slice::from_raw_parts(p.implicit_allocations, p.implicit_allocation_count as usize) };
        for a in implicit {
            f(AllocationProperties { base: a.base, size: a.size, arg_index: -1, memory_type: a.memory_type });
        }
    }
}

/// Matches a dispatch's arguments against the live allocations: `f` gets one entry per
/// allocation an argument points into, with the first such argument's index, in argument
/// order. From the thread's [`View`] while the table is unchanged, else under the table's read
/// lock.
fn each_match(args: &[u64], f: &mut impl FnMut(AllocationProperties)) {
    // Before the view's check: a change after this load moves the generation (module docs).
    let generation = TABLE_GENERATION.current();
    let viewed = VIEW
        .try_with(|view| {
            let mut view = view.borrow_mut();
            if view.generation != generation && !view.refresh(generation) {
                return false;
            }
            view.each_match(args, &mut *f);
            true
        })
        .unwrap_or(false);
    if !viewed {
        each_match_locked(args, f);
    }
}

/// [`each_match`] under the table's read lock: a table too large for a view, or a thread in
/// teardown.
#[cold]
#[inline(never)]
fn each_match_locked(args: &[u64], f: &mut impl FnMut(AllocationProperties)) {
    let t = TABLE.read().unwrap_or_else(|e| e.into_inner());
    let mut seen = [0u64; MAX_KERNEL_ARGS];
    let mut count = 0;
    for (i, &v) in args.iter().enumerate() {
        let Some((&base, &(size, ty))) = t.range(..=v).next_back() else { continue };
        if v.wrapping_sub(base) < size && !seen[..count].contains(&base) {
            seen[count] = base;
            count += 1;
            f(AllocationProperties { base, size, arg_index: i as i32, memory_type: ty });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::ImplicitAllocation;

    /// Held by every test here: the table is the process's, and each test checks what the whole
    /// table answers (and the random ones its size: at most `VIEW_MAX`, or above it). Plain
    /// `cargo test` runs the tests as threads of one process.
    fn table_to_myself() -> std::sync::MutexGuard<'static, ()> {
        static TABLE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TABLE.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn range_lookup_boundaries() {
        let _table = table_to_myself();
        record_alloc(0x10_0000, 0x100, MemoryType::Device);
        assert_eq!(lookup(0x10_0000), Some((0x10_0000, 0x100, MemoryType::Device)));
        assert_eq!(lookup(0x10_00ff), Some((0x10_0000, 0x100, MemoryType::Device)));
        assert_eq!(lookup(0x10_0100), None);
        assert_eq!(lookup(0x0f_ffff), None);
        assert_eq!(record_free(0x10_0000), Some((0x100, MemoryType::Device)));
        assert_eq!(lookup(0x10_0000), None);
    }

    #[test]
    fn dispatch_properties_match_args_and_implicit() {
        let _table = table_to_myself();
        record_alloc(0x20_0000, 0x1000, MemoryType::Shared);
        record_alloc(0x30_0000, 0x2000, MemoryType::Host);
        let implicit = [ImplicitAllocation { base: 0x90_0000, size: 4096, memory_type: MemoryType::Unknown }];
        let mut p = KernelDispatchPayload { kernel_arg_count: 4, ..Default::default() };
        p.kernel_args[..4].copy_from_slice(&[0x20_0010, 42, 0x30_1fff, 0x20_0000]);
        p.implicit_allocations = implicit.as_ptr();
        p.implicit_allocation_count = 1;
        // SAFETY: `implicit` outlives the call.
        let props = unsafe { kernel_allocation_properties(&p) };
        assert_eq!(
            props,
            vec![
                AllocationProperties { base: 0x20_0000, size: 0x1000, arg_index: 0, memory_type: MemoryType::Shared },
                AllocationProperties { base: 0x30_0000, size: 0x2000, arg_index: 2, memory_type: MemoryType::Host },
                AllocationProperties { base: 0x90_0000, size: 4096, arg_index: -1, memory_type: MemoryType::Unknown },
            ]
        );
        record_free(0x20_0000);
        record_free(0x30_0000);
    }

    /// What a dispatch's arguments match, computed from a copy of the table the slow way.
    fn reference(table: &BTreeMap<u64, (u64, MemoryType)>, args: &[u64]) -> Vec<AllocationProperties> {
        let mut out: Vec<AllocationProperties> = Vec::new();
        for (i, &v) in args.iter().enumerate() {
            if let Some((&base, &(size, ty))) = table.range(..=v).next_back()
                && v - base < size
                && !out.iter().any(|a| a.base == base)
            {
                out.push(AllocationProperties { base, size, arg_index: i as i32, memory_type: ty });
            }
        }
        out
    }

    fn dispatch(args: &[u64]) -> KernelDispatchPayload {
        let mut p = KernelDispatchPayload { kernel_arg_count: args.len() as u32, ..Default::default() };
        p.kernel_args[..args.len()].copy_from_slice(args);
        p
    }

    /// A small deterministic generator (xorshift).
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Checks `rounds` random dispatches against [`reference`], with arguments at, just inside
    /// and just outside the allocations' bounds, between them and far from them.
    fn check_random_dispatches(table: &BTreeMap<u64, (u64, MemoryType)>, rounds: usize, seed: u64) {
        let bases: Vec<(u64, u64)> = table.iter().map(|(&b, &(s, _))| (b, s)).collect();
        let mut x = seed;
        for _ in 0..rounds {
            let n = (next(&mut x) % MAX_KERNEL_ARGS as u64) as usize + 1;
            let args: Vec<u64> = (0..n)
                .map(|_| {
                    let (b, s) = bases[(next(&mut x) % bases.len() as u64) as usize];
                    match next(&mut x) % 8 {
                        0 => b,
                        1 => b - 1,
                        2 => b + s - 1,
                        3 => b + s,
                        4 => b + next(&mut x) % s,
                        5 => next(&mut x) % 4096,
                        6 => u64::MAX - next(&mut x) % 4096,
                        _ => next(&mut x),
                    }
                })
                .collect();
            let p = dispatch(&args);
            // SAFETY: no implicit allocations.
            let got = unsafe { kernel_allocation_properties(&p) };
            assert_eq!(got, reference(table, &args), "arguments {args:x?}");
            let mut cut = [AllocationProperties::default(); 2];
            // SAFETY: as above.
            let k = unsafe { kernel_allocation_properties_into(&p, &mut cut) };
            assert_eq!(cut[..k], got[..got.len().min(2)], "the first ones, the rest cut");
        }
    }

    /// A copy of the allocations a test recorded; they are freed when it is dropped (also when
    /// the test fails), so that the next test starts from an empty table.
    struct Recorded(BTreeMap<u64, (u64, MemoryType)>);

    impl Drop for Recorded {
        fn drop(&mut self) {
            for &base in self.0.keys() {
                record_free(base);
            }
        }
    }

    /// Allocations with gaps, neighbours that touch, and more than 64 of them (the view's
    /// deduplication switches from bits to a list there).
    fn random_table(count: usize, seed: u64) -> Recorded {
        let mut table = BTreeMap::new();
        let mut x = seed;
        let mut at = 0x7f00_0000_0000u64;
        let types = [MemoryType::Device, MemoryType::Host, MemoryType::Shared];
        for i in 0..count {
            let size = 1 + next(&mut x) % (1 << 16);
            let ty = types[i % 3];
            record_alloc(at, size, ty);
            table.insert(at, (size, ty));
            at += size + if next(&mut x).is_multiple_of(3) { 0 } else { 1 + next(&mut x) % (1 << 12) };
        }
        Recorded(table)
    }

    #[test]
    fn dispatch_matches_equal_the_tables_range_query() {
        let _table = table_to_myself();
        let table = random_table(200, 0x5eed);
        assert_eq!(live_count(), 200);
        check_random_dispatches(&table.0, 3000, 0xfeed);
    }

    #[test]
    fn a_table_larger_than_a_view_is_matched_under_its_lock() {
        let _table = table_to_myself();
        let table = random_table(VIEW_MAX + 50, 0xbeef);
        assert_eq!(live_count(), VIEW_MAX + 50);
        check_random_dispatches(&table.0, 1000, 0xcafe);
    }

    #[test]
    fn a_change_of_the_table_reaches_the_next_dispatch() {
        let _table = table_to_myself();
        let props = |args: &[u64]| {
            // SAFETY: no implicit allocations.
            unsafe { kernel_allocation_properties(&dispatch(args)) }
        };
        record_alloc(0x40_0000, 0x100, MemoryType::Device);
        assert_eq!(props(&[0x40_0010]).len(), 1);
        record_free(0x40_0000);
        assert_eq!(props(&[0x40_0010]), []);
        record_alloc(0x40_0000, 0x20, MemoryType::Host);
        assert_eq!(
            props(&[0x40_0010, 0x40_0020]),
            [AllocationProperties { base: 0x40_0000, size: 0x20, arg_index: 0, memory_type: MemoryType::Host }]
        );
        // Another thread's change, seen by this thread's next dispatch.
        std::thread::spawn(|| record_alloc(0x50_0000, 0x10, MemoryType::Shared)).join().expect("thread");
        assert_eq!(props(&[0x50_0000]).len(), 1);
        record_free(0x40_0000);
        record_free(0x50_0000);
    }
}
