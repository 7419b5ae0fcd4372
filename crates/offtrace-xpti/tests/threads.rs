//! Instances across threads. A thread deletes its own instances without a locked instruction,
//! and other threads' deletions go through the owner (`instance.rs`, `Owner`). These tests check
//! what that must not change: instance numbering, unique cells, memory that stays flat when one
//! thread makes and another releases, and double deletions racing from several threads.
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Arc, Barrier, Mutex};

use offtrace_xpti::abi::{TraceEventData, XPTI_RESULT_SUCCESS};
use offtrace_xpti::dispatch as d;

mod common;
use common::{payload, rss_kib};

/// Tests that count RSS or numbering must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

fn make(name: &'static [u8], line: u32) -> (usize, u64) {
    let mut p = payload(name, c"threads.rs", line);
    let mut inst = 0;
    // SAFETY: valid payload with static strings, valid out pointer.
    let e = unsafe { d::make_event(std::ptr::null(), &mut p, 2, 1, &mut inst) };
    assert!(!e.is_null());
    (e as usize, inst)
}

fn release(e: usize) {
    // SAFETY: `e` is an event of this dispatcher (live or not: release checks).
    unsafe { d::release_event(e as *mut TraceEventData) };
}

#[test]
fn each_key_is_numbered_1_2_3_across_threads_and_deletions() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Past several blocks, with every other instance released at once.
    for i in 1..=200u64 {
        let (e, inst) = make(b"numbering_a\0", 7);
        assert_eq!(inst, i);
        if i % 2 == 0 {
            release(e);
        }
    }
    // Another thread goes on with the same key, and this one after it.
    std::thread::spawn(|| {
        let (_, first) = make(b"numbering_a\0", 7);
        let (_, second) = make(b"numbering_a\0", 7);
        assert_eq!((first, second), (201, 202));
    })
    .join()
    .expect("test thread");
    assert_eq!(make(b"numbering_a\0", 7).1, 203);
    // A key first made on another thread, which has exited: this thread goes on from its count.
    std::thread::spawn(|| {
        for i in 1..=5 {
            assert_eq!(make(b"numbering_b\0", 8).1, i);
        }
    })
    .join()
    .expect("test thread");
    assert_eq!(make(b"numbering_b\0", 8).1, 6);
    // The scope tracepoints share the counter of their key.
    for i in 1..=70u64 {
        // SAFETY: static strings.
        let tp = unsafe {
            d::create_tracepoint(c"numbering_c".as_ptr(), c"threads.rs".as_ptr(), 9, 1, std::ptr::null_mut())
        };
        assert!(!tp.is_null());
        // SAFETY: a tracepoint interface of this dispatcher (docs/reference/xpti-abi.md §7: slot 6 is instance()).
        let inst = unsafe { vcall_u64(tp, 6) };
        assert_eq!(inst, i);
        // SAFETY: created above through the C entry point; no Rust owner.
        assert_eq!(unsafe { d::delete_tracepoint(tp) }, XPTI_RESULT_SUCCESS);
    }
}

/// Calls the virtual function in `slot` of a C++ interface object that returns a `u64`.
///
/// # Safety
/// `obj` is a live interface object with at least `slot + 1` virtual functions.
unsafe fn vcall_u64(obj: *mut c_void, slot: usize) -> u64 {
    // SAFETY: caller contract; Itanium ABI: the vtable pointer is the first word.
    unsafe {
        let vt = *obj.cast::<*const unsafe extern "C" fn(*mut c_void) -> u64>();
        (*vt.add(slot))(obj)
    }
}

#[test]
fn threads_making_one_key_at_once_share_one_sequence() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const THREADS: usize = 4;
    const EACH: usize = 5_000;
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut mine = Vec::with_capacity(EACH);
                for _ in 0..EACH {
                    let (e, inst) = make(b"shared_key\0", 11);
                    mine.push(inst);
                    release(e);
                }
                mine
            })
        })
        .collect();
    let all: Vec<Vec<u64>> = threads.into_iter().map(|t| t.join().expect("test thread")).collect();
    let mut seen = HashSet::new();
    for mine in &all {
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "numbers increase on each thread");
        for &i in mine {
            assert!(seen.insert(i), "instance number {i} handed out twice");
        }
    }
    assert_eq!(seen, (1..=(THREADS * EACH) as u64).collect::<HashSet<_>>(), "1..=N without gaps");
}

#[test]
fn making_on_one_thread_and_releasing_on_another_keeps_memory_flat() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run = |n: usize| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<usize>>(4);
        let producer = std::thread::spawn(move || {
            let mut batch = Vec::with_capacity(1000);
            for i in 0..n {
                batch.push(make(b"handoff\0", (i % 16) as u32 + 1).0);
                if batch.len() == 1000 {
                    tx.send(std::mem::replace(&mut batch, Vec::with_capacity(1000))).expect("consumer");
                }
            }
            tx.send(batch).expect("consumer");
        });
        for batch in rx {
            for e in batch {
                release(e);
            }
        }
        producer.join().expect("test thread");
    };
    run(200_000);
    let before = rss_kib();
    run(3_000_000);
    let after = rss_kib();
    assert!(
        after <= before + 2048,
        "RSS grew from {before} KiB to {after} KiB: cells released on another thread are not reused"
    );
}

#[test]
fn racing_double_deletions_never_hand_out_a_cell_twice() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const THREADS: usize = 4;
    const ROUNDS: usize = 1000;
    const PER_ROUND: usize = 64;
    let start = Arc::new(Barrier::new(THREADS));
    let shared: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let ts: Vec<_> = (0..THREADS)
        .map(|t| {
            let (start, shared) = (start.clone(), shared.clone());
            std::thread::spawn(move || {
                let mut live = HashSet::new();
                let mut twice = 0;
                for round in 0..ROUNDS {
                    // Thread 0 makes this round's tracepoints; every thread, the maker
                    // included, then deletes all of them at the same time.
                    if t == 0 {
                        let mut v = shared.lock().expect("lock");
                        v.clear();
                        for i in 0..PER_ROUND {
                            // SAFETY: static strings.
                            let tp = unsafe {
                                d::create_tracepoint(
                                    c"race".as_ptr(),
                                    c"threads.rs".as_ptr(),
                                    i as u32 + 1,
                                    1,
                                    std::ptr::null_mut(),
                                )
                            };
                            v.push(tp as usize);
                        }
                    }
                    start.wait();
                    let mine = shared.lock().expect("lock").clone();
                    for (i, &tp) in mine.iter().enumerate() {
                        let tp = if (i + t + round) % 2 == 0 { tp } else { mine[mine.len() - 1 - i] };
                        // SAFETY: created through the C entry point; no Rust owner.
                        unsafe { d::delete_tracepoint(tp as *mut c_void) };
                    }
                    start.wait();
                    // Every thread now makes instances and keeps them alive: no two live
                    // instances may share a cell (their uid64 is the cell's address).
                    for i in 0..8 {
                        let (e, _) = make(b"race_check\0", i + 1);
                        // Counted, not asserted: a panicking thread would leave the others
                        // waiting at the barrier.
                        if !live.insert(e) {
                            twice += 1;
                        }
                    }
                    if live.len() > 512 {
                        for e in live.drain() {
                            release(e);
                        }
                    }
                    start.wait();
                }
                (live, twice)
            })
        })
        .collect();
    let mut all = HashSet::new();
    for t in ts {
        let (live, twice) = t.join().expect("test thread");
        assert_eq!(twice, 0, "a live cell handed out twice on one thread");
        for e in live {
            assert!(all.insert(e), "a live cell handed out to two threads");
            // SAFETY: `e` is an event of this dispatcher.
            let found = d::find_event(unsafe { (*(e as *const TraceEventData)).unique_id });
            assert_eq!(found as usize, e, "each kept instance is live and found by its uid64");
        }
    }
}

#[test]
fn a_key_handed_over_while_its_owner_counts_keeps_one_sequence() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const EACH: usize = 3_000;
    // A fresh key per round (lines 1000..), made by the owner thread, which goes on making
    // instances while the other thread starts on the same key: the hand-over happens while the
    // owner is inside or next to its plain increments.
    for round in 0..40u32 {
        let line = 1000 + round;
        let start = Arc::new(Barrier::new(2));
        let s2 = start.clone();
        let owner = std::thread::spawn(move || {
            let mut mine = vec![make(b"handover\0", line).1];
            s2.wait();
            for _ in 0..EACH {
                let (e, inst) = make(b"handover\0", line);
                mine.push(inst);
                release(e);
            }
            mine
        });
        start.wait();
        let mut all: Vec<u64> = (0..EACH)
            .map(|_| make(b"handover\0", line))
            .map(|(e, inst)| {
                release(e);
                inst
            })
            .collect();
        let theirs = owner.join().expect("owner thread");
        assert!(
            theirs.windows(2).all(|w| w[0] < w[1]) && all.windows(2).all(|w| w[0] < w[1]),
            "increasing on each thread"
        );
        all.extend(theirs);
        all.sort_unstable();
        assert_eq!(all, (1..=(2 * EACH + 1) as u64).collect::<Vec<_>>(), "round {round}: one sequence 1..=N");
    }
}
