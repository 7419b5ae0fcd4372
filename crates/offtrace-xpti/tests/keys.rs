//! Tracepoint keys under concurrency (through the same functions the C exports call): threads
//! creating instances of the same new keys at once share one key each, whose instance numbers are
//! 1..=N exactly once; the stored payload is the key's; `xptiReset` restarts the numbering.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::sync::{Barrier, Mutex};

use offtrace_xpti::abi::{Payload, TraceEventData, payload_flags as pf};
use offtrace_xpti::dispatch as d;
use offtrace_xpti::fnv1a32;

/// `xptiReset` forgets every key of the process: the tests of this file do not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

fn payload(name: &CStr, line: u32, column: u32) -> Payload {
    Payload {
        name: name.as_ptr(),
        stack_trace: std::ptr::null(),
        source_file: c"keys.rs".as_ptr(),
        line_no: line,
        column_no: column,
        code_ptr_va: std::ptr::null(),
        internal: 0,
        flags: pf::NAME_AVAILABLE | pf::SOURCE_FILE_AVAILABLE | pf::LINE_INFO_AVAILABLE | pf::COLUMN_INFO_AVAILABLE,
        uid: Default::default(),
    }
}

/// Creates an instance; returns (event, instance number).
fn make(name: &CStr, line: u32, column: u32) -> (*mut TraceEventData, u64) {
    let mut p = payload(name, line, column);
    let mut inst = 0;
    // SAFETY: valid payload with valid strings, valid out pointer.
    let e = unsafe { d::make_event(name.as_ptr(), &mut p, 2, 1, &mut inst) };
    assert!(!e.is_null());
    (e, inst)
}

/// Threads race through the same never-seen keys (each thread from its own offset, so that every
/// key is new to several threads at about the same time, and the shared map grows meanwhile).
#[test]
fn concurrent_creation_of_new_keys_numbers_each_key_1_to_n() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let threads = 4usize;
    let keys = 20_000usize;
    let names: Vec<CString> = (0..keys).map(|i| CString::new(format!("race_kernel_{i}")).expect("no NUL")).collect();
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Vec<(usize, u64, usize)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (names, barrier) = (&names, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..keys)
                        .map(|i| {
                            let k = (i + t * 7) % keys;
                            let (e, inst) = make(&names[k], k as u32 % 1000 + 1, 5);
                            // SAFETY: a live event; its payload is never freed.
                            let stored = unsafe { (*e).reserved.payload } as usize;
                            (k, inst, stored)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let mut seen = vec![Vec::new(); keys];
    let mut stored = vec![0usize; keys];
    for (k, inst, p) in per_thread.into_iter().flatten() {
        seen[k].push(inst);
        // Every instance starts out on its key's shared payload: one per key.
        assert!(stored[k] == 0 || stored[k] == p, "key {k}: two stored payloads");
        stored[k] = p;
    }
    for (k, mut v) in seen.into_iter().enumerate() {
        v.sort_unstable();
        assert_eq!(v, (1..=threads as u64).collect::<Vec<_>>(), "key {k}");
        // SAFETY: the key's stored payload lives as long as the process.
        let p = unsafe { &*(stored[k] as *const Payload) };
        // SAFETY: names are never-freed copies.
        assert_eq!(unsafe { CStr::from_ptr(p.name) }, names[k].as_c_str());
        assert_ne!(p.name, names[k].as_ptr(), "the key owns a copy of the name");
        assert_eq!(p.line_no, k as u32 % 1000 + 1);
        assert_eq!(p.uid.p1, (u64::from(fnv1a32(b"keys.rs")) << 32) | u64::from(p.line_no));
        assert_eq!(p.uid.p2, u64::from(fnv1a32(names[k].as_bytes())));
    }
}

#[test]
fn keys_differ_by_column_unless_the_line_is_unknown_and_reset_restarts_numbering() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = c"column_kernel";
    assert_eq!(make(name, 10, 1).1, 1);
    assert_eq!(make(name, 10, 2).1, 1, "another column, another key");
    assert_eq!(make(name, 10, 1).1, 2);
    assert_eq!(make(name, u32::MAX, 1).1, 1);
    assert_eq!(make(name, u32::MAX, 2).1, 2, "a line of 0xFFFFFFFF hides the column");
    // Deleting instances does not restart the numbering; a reset does.
    let (e, inst) = make(name, 11, 1);
    assert_eq!(inst, 1);
    // SAFETY: a live event.
    unsafe { d::release_event(e) };
    assert_eq!(make(name, 11, 1).1, 2);
    // SAFETY: no `api::Tracepoint` is alive in this test.
    unsafe { d::reset() };
    assert_eq!(make(name, 11, 1).1, 1);
    assert_eq!(make(name, 11, 1).1, 2);
    assert_eq!(make(name, 10, 1).1, 1);
}
