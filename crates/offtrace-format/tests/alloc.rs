//! The writer's hot path does not allocate after warm-up: counted with a global allocator.
// A counting allocator needs `unsafe impl GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

mod common;
use common::*;
use offtrace_format::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

// Relaxed: a plain event counter read by the same thread that allocates.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY:
// - every method forwards to `System` with the caller's arguments unchanged, so `System`'s
//   guarantees are the allocator's.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through `alloc`/`realloc` above) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` comes from the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

#[test]
fn write_notification_does_not_allocate_after_warm_up() {
    let notifications: Vec<Notification> = synthetic_sycl_trace(3000, 5)
        .into_iter()
        .filter_map(|r| if let Record::Notification(n) = r { Some(*n) } else { None })
        .collect();
    let mut out = Vec::with_capacity(64 << 20);
    out.clear();
    let mut w = TraceWriter::new(std::io::Cursor::new(out), &tsc_header()).expect("header");
    // Warm-up: two chunks, so every buffer has reached its working size.
    for n in &notifications[..6000] {
        w.write_notification(n).expect("write");
    }
    w.flush_chunk().expect("flush");
    for n in &notifications[..6000] {
        w.write_notification(n).expect("write");
    }
    w.flush_chunk().expect("flush");

    let chunks_before = w.chunks_written();
    let before = allocations();
    for n in &notifications[6000..12000] {
        w.write_notification(n).expect("write");
    }
    let during = allocations() - before;
    let chunks = w.chunks_written() - chunks_before;
    let before = allocations();
    w.flush_chunk().expect("flush");
    let closing = allocations() - before;
    println!("6000 notifications: {during} allocations ({chunks} automatic chunk closes); flush_chunk: {closing}");
    // Only chunk closes may allocate (the compressor's hash table lives as long as the writer).
    assert!(during <= chunks * 2, "{during} allocations while writing 6000 notifications");
    assert!(closing <= 2, "{closing} allocations closing a chunk");
}
