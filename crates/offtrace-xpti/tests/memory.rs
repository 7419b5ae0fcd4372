//! Memory behaviour of the dispatcher (through the same functions the C exports call):
#![allow(unsafe_code)]
//! make+release cycles reuse instance slots (RSS flat over 10 million cycles); an unreleased
//! instance costs its 128-byte event cell, names and the shared payload stored once per key; its
//! side cell (interfaces, own payload) costs another 128 bytes only once someone asks for them.

use std::ffi::{CStr, c_char, c_void};

use offtrace_xpti::abi::{Payload, TraceEventData, payload_flags as pf};
use offtrace_xpti::dispatch as d;

mod common;
use common::{payload, rss_kib};

/// The tests measure process RSS: they must not run at the same time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn ten_million_make_release_cycles_keep_rss_flat() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut inst = 0u64;
    let warm = |n: u64, inst: &mut u64| {
        for i in 0..n {
            let mut p = payload(b"mem_kernel\0", c"mem.rs", (i % 64) as u32 + 1);
            // SAFETY: valid payload with static strings, valid out pointer.
            let e = unsafe { d::make_event(std::ptr::null(), &mut p, 2, 1, inst) };
            assert!(!e.is_null());
            // SAFETY: `e` is a live event from make_event.
            unsafe { d::release_event(e) };
        }
    };
    warm(100_000, &mut inst);
    let before = rss_kib();
    warm(10_000_000, &mut inst);
    let after = rss_kib();
    // Line 64 is used by every 64th call: the per-key counter survives the releases.
    assert_eq!(inst, (100_000u64 - 63).div_ceil(64) + 10_000_000 / 64, "per-key counter keeps counting");
    assert!(after <= before + 1024, "RSS grew from {before} KiB to {after} KiB over 10M make+release cycles");
}

/// A Vec of `n` words whose pages are already resident (so that filling it adds no RSS).
fn resident_vec(n: usize) -> Vec<usize> {
    let mut v = vec![0usize; n];
    for x in v.iter_mut() {
        // A non-zero value: stores of zero into zeroed memory may be optimised away.
        *x = std::hint::black_box(usize::MAX);
    }
    v
}

/// Makes `n` unreleased events of `keys` keys (lines 1..=keys), storing them in `keep`.
fn make_unreleased(keep: &mut [usize], name: &'static [u8], keys: u32, inst: &mut u64) {
    for (i, slot) in keep.iter_mut().enumerate() {
        let mut p = payload(name, c"mem.rs", (i as u32 % keys) + 1);
        // SAFETY: valid payload with static strings, valid out pointer.
        let e = unsafe { d::make_event(std::ptr::null(), &mut p, 2, 1, inst) };
        assert!(!e.is_null());
        *slot = e as usize;
    }
}

#[test]
fn unreleased_instances_cost_at_most_128_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut inst = 0u64;
    // Warm the keys, the thread's key cache and the first event commit.
    let mut warm = resident_vec(1000);
    make_unreleased(&mut warm, b"kept_kernel\0", 8, &mut inst);
    let n = 1_000_000usize;
    let mut keep = resident_vec(n);
    let before = rss_kib();
    make_unreleased(&mut keep, b"kept_kernel\0", 8, &mut inst);
    let after = rss_kib();
    let per_event = (after - before) as f64 * 1024.0 / n as f64;
    // One 128-byte event cell each; the event region is committed (and pre-faulted) in 4 MiB
    // steps, up to 4.2 B per event over a million events. Side cells stay untouched.
    println!("{per_event:.1} bytes per unreleased event");
    assert!(per_event <= 128.0 + 4.2, "{per_event:.1} B per unreleased event");
    for e in warm.into_iter().chain(keep) {
        // SAFETY: live events.
        unsafe { d::release_event(e as *mut TraceEventData) };
    }
}

/// Calls the virtual function in `slot` of the interface `obj` (Itanium ABI: `this` first).
///
/// # Safety
/// `obj` is a live interface object whose vtable has a function `fn(this) -> R` in `slot`.
unsafe fn vcall<R>(obj: *const c_void, slot: usize) -> R {
    // SAFETY: caller contract.
    unsafe {
        let vtable = *obj.cast::<*const usize>();
        let f = std::mem::transmute_copy::<usize, unsafe extern "C" fn(*const c_void) -> R>(&*vtable.add(slot));
        f(obj)
    }
}

#[test]
fn looking_up_unreleased_instances_is_exact_and_costs_the_side_cell_then() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut inst = 0u64;
    let mut warm = resident_vec(1000);
    make_unreleased(&mut warm, b"looked_up_kernel\0", 4, &mut inst);
    let n = 200_000usize;
    let mut keep = resident_vec(n);
    make_unreleased(&mut keep, b"looked_up_kernel\0", 4, &mut inst);
    for (i, &e) in keep.iter().enumerate() {
        // SAFETY: a live event.
        let ev = unsafe { &*(e as *const TraceEventData) };
        assert_eq!(ev.unique_id, e as u64);
        // Before any lookup, subscribers reading the event directly see the key's shared payload:
        // the instance's own in every field but `internal`, which holds the uid64 of the key's
        // first instance (`warm[line - 1]`: the name is new to this process).
        // SAFETY: the shared payload lives as long as the process.
        let shared = unsafe { &*ev.reserved.payload };
        assert_eq!(shared.line_no, (i % 4) as u32 + 1);
        assert_eq!(shared.internal, warm[i % 4] as u64);
        // SAFETY: names are never-freed copies.
        assert_eq!(unsafe { CStr::from_ptr(shared.name) }, c"looked_up_kernel");
        assert_eq!(shared.flags, payload(b"x\0", c"mem.rs", 1).flags | pf::PAYLOAD_REGISTERED | pf::HASH_AVAILABLE);
    }
    let before = rss_kib();
    for &e in &keep {
        let uid = e as u64;
        let own = d::query_payload_by_uid(uid);
        assert!(!own.is_null());
        // SAFETY: a live event and its materialised payload.
        let (ev, p) = unsafe { (&*(e as *const TraceEventData), &*own) };
        assert_eq!(p.internal, uid, "the instance's own payload has internal = uid64");
        assert_eq!(ev.reserved.payload.cast_const(), own, "reserved.payload now points at it");
        // SAFETY: a live event of this dispatcher.
        assert_eq!(unsafe { d::query_payload(e as *mut TraceEventData) }, own);
        let ip = d::lookup_payload(uid);
        let ie = d::lookup_event(uid);
        // SAFETY: interfaces of a live instance; slots per `docs/reference/xpti-abi.md` §7.
        unsafe {
            assert_eq!(vcall::<u64>(ip, 9), uid, "xpti_payload_t::uid64");
            assert_eq!(vcall::<*const Payload>(ip, 11), own, "xpti_payload_t::payload_ref");
            assert_eq!(CStr::from_ptr(vcall::<*const c_char>(ip, 2)), c"looked_up_kernel");
            assert_eq!(vcall::<u32>(ip, 4), p.line_no);
            assert_eq!(vcall::<u64>(ie, 4), uid, "xpti_trace_event_t::uid64");
            assert_eq!(vcall::<u64>(ie, 5), ev.instance_id);
            assert_eq!(vcall::<*const Payload>(ie, 13), own);
            assert_eq!(vcall::<*const TraceEventData>(ie, 14), e as *const TraceEventData);
            assert_eq!(vcall::<*const c_void>(ie, 2), ip, "xpti_trace_event_t::payload");
        }
    }
    let after = rss_kib();
    let per_event = (after - before) as f64 * 1024.0 / n as f64;
    println!("{per_event:.1} bytes per looked-up event");
    // The side cells were written now: 128 bytes each, in 4 KiB pages.
    assert!((120.0..=136.0).contains(&per_event), "{per_event:.1} B per looked-up event");
    for e in warm.into_iter().chain(keep) {
        // SAFETY: live events.
        unsafe { d::release_event(e as *mut TraceEventData) };
    }
}

#[test]
fn payloads_that_differ_from_their_keys_get_their_own_at_creation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut inst = 0u64;
    let make = |p: &mut Payload, inst: &mut u64| {
        // SAFETY: valid payload with static strings, valid out pointer.
        let e = unsafe { d::make_event(std::ptr::null(), p, 2, 1, inst) };
        assert!(!e.is_null());
        // SAFETY: a live event.
        unsafe { &*e }
    };
    let mut base = payload(b"differing_kernel\0", c"mem.rs", 5);
    let first = make(&mut base, &mut inst);
    let shared = first.reserved.payload;
    // Same key, other flags: the instance stores its own flags, so it gets its own payload.
    let mut with_column = payload(b"differing_kernel\0", c"mem.rs", 5);
    with_column.flags |= pf::COLUMN_INFO_AVAILABLE;
    let e = make(&mut with_column, &mut inst);
    assert_eq!(inst, 2, "same key");
    assert_ne!(e.reserved.payload, shared);
    // SAFETY: the instance's own payload, in its side cell.
    let own = unsafe { &*e.reserved.payload };
    assert_eq!(
        (own.internal, own.flags),
        (e.unique_id, with_column.flags | pf::PAYLOAD_REGISTERED | pf::HASH_AVAILABLE)
    );
    assert_eq!(d::query_payload_by_uid(e.unique_id), e.reserved.payload.cast_const(), "already materialised");
    // A line of 0xFFFFFFFF hides the column from the key (`docs/reference/xpti-abi.md` §6.1): same key, other
    // column, own payload with the caller's column.
    let mut no_line = payload(b"differing_kernel\0", c"mem.rs", u32::MAX);
    let a = make(&mut no_line, &mut inst);
    no_line.column_no = 9;
    let b = make(&mut no_line, &mut inst);
    assert_eq!(b.instance_id, a.instance_id + 1, "same key");
    // SAFETY: stored payloads live as long as the process.
    let (pa, pb) = unsafe { (&*a.reserved.payload, &*b.reserved.payload) };
    assert_eq!((pa.column_no, pb.column_no), (1, 9));
    assert_eq!(pb.internal, b.unique_id);
    // Asked for, the first instance gets its own payload too.
    // SAFETY: a live event of this dispatcher.
    let p = unsafe { &*d::query_payload((first as *const TraceEventData).cast_mut()) };
    assert_eq!(p.internal, first.unique_id);
    for e in [first, e, a, b] {
        // SAFETY: live events.
        unsafe { d::release_event((e as *const TraceEventData).cast_mut()) };
    }
}
