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
//! take the read lock. It is maintained whether or not a tool listens, because a dispatch may be
//! queried at any time.

#![allow(unsafe_code)] // reads the dispatch payload's implicit-allocation array

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
type Found = Option<(u64, u64, MemoryType)>;

thread_local! {
    /// This thread's last answers by pointer: a copy reads its source and its destination,
    /// usually the same buffers call after call.
    static MEMO: Memo<u64, Found, 2> = const { Memo::new(0, None) };
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
    MEMO.try_with(|m| m.get(&TABLE_GENERATION, ptr, lookup_locked)).unwrap_or_else(|_| lookup_locked(ptr))
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

/// [`kernel_allocation_properties`] without allocating (the recorder's record path): fills
/// `out` from the start, in the same order, and returns how many it filled (at most
/// `out.len()`; the rest are cut).
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

/// Calls `f` with each allocation a dispatch uses, in [`kernel_allocation_properties`]' order.
///
/// # Safety
///
/// As [`kernel_allocation_properties`].
unsafe fn for_each_kernel_allocation(p: &KernelDispatchPayload, mut f: impl FnMut(AllocationProperties)) {
    let n = (p.kernel_arg_count as usize).min(MAX_KERNEL_ARGS);
    if n > 0 {
        // Bases already reported (one entry per allocation): at most one per argument.
        let mut seen = [0u64; MAX_KERNEL_ARGS];
        let mut count = 0;
        let t = TABLE.read().unwrap_or_else(|e| e.into_inner());
        for (i, &v) in p.kernel_args[..n].iter().enumerate() {
            let Some((&base, &(size, ty))) = t.range(..=v).next_back() else { continue };
            if v.wrapping_sub(base) < size && !seen[..count].contains(&base) {
                seen[count] = base;
                count += 1;
                f(AllocationProperties { base, size, arg_index: i as i32, memory_type: ty });
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::ImplicitAllocation;

    #[test]
    fn range_lookup_boundaries() {
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
}
