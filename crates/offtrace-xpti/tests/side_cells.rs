//! Side cells under concurrency (through the same functions the C exports call): threads asking
//! at once for the payload and interfaces of instances nobody asked for before all get the same
//! pointers and the instance's exact payload, while other threads create, look up and release
//! instances of the same keys.
#![allow(unsafe_code)]

use std::ffi::c_char;
use std::sync::Barrier;

use offtrace_xpti::abi::{Payload, TraceEventData, payload_flags as pf};
use offtrace_xpti::dispatch as d;

fn payload(line: u32) -> Payload {
    Payload {
        name: c"side_kernel".as_ptr(),
        stack_trace: std::ptr::null(),
        source_file: c"side.rs".as_ptr(),
        line_no: line,
        column_no: 3,
        code_ptr_va: std::ptr::null(),
        internal: 0,
        flags: pf::NAME_AVAILABLE | pf::SOURCE_FILE_AVAILABLE | pf::LINE_INFO_AVAILABLE | pf::COLUMN_INFO_AVAILABLE,
        uid: Default::default(),
    }
}

fn make(line: u32) -> u64 {
    let mut p = payload(line);
    let mut inst = 0;
    // SAFETY: valid payload with static strings, valid out pointer.
    let e = unsafe { d::make_event(c"side_kernel".as_ptr(), &mut p, 2, 1, &mut inst) };
    assert!(!e.is_null());
    e as u64
}

/// What a thread saw of one instance: its payload, the two interfaces.
type Seen = (usize, usize, usize);

#[test]
fn concurrent_first_lookups_agree_and_are_exact() {
    const THREADS: usize = 4;
    const EVENTS: usize = 20_000;
    for round in 0..5u32 {
        let uids: Vec<u64> = (0..EVENTS).map(|i| make(i as u32 % 16 + 1 + round * 16)).collect();
        let barrier = Barrier::new(THREADS + 1);
        let seen: Vec<Vec<Seen>> = std::thread::scope(|s| {
            let lookers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (uids, barrier) = (&uids, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        // Half the threads walk forwards, half backwards: every instance is asked
                        // for by two threads at about the same time somewhere in the run.
                        let order: Vec<usize> =
                            if t % 2 == 0 { (0..uids.len()).collect() } else { (0..uids.len()).rev().collect() };
                        let mut out = vec![(0, 0, 0); uids.len()];
                        for i in order {
                            let uid = uids[i];
                            let (p, ie) = if t % 3 == 0 {
                                (d::query_payload_by_uid(uid) as usize, d::lookup_event(uid) as usize)
                            } else {
                                let ie = d::lookup_event(uid) as usize;
                                (d::query_payload_by_uid(uid) as usize, ie)
                            };
                            out[i] = (p, ie, d::lookup_payload(uid) as usize);
                        }
                        out
                    })
                })
                .collect();
            // Meanwhile: create, materialise and release instances of the same keys.
            let churn = s.spawn(|| {
                barrier.wait();
                for i in 0..EVENTS as u32 {
                    let uid = make(i % 16 + 1 + round * 16);
                    if i % 2 == 0 {
                        let p = d::query_payload_by_uid(uid);
                        // SAFETY: the live instance's own payload.
                        assert_eq!(unsafe { (*p).internal }, uid);
                    }
                    // SAFETY: a live event.
                    unsafe { d::release_event(uid as *mut TraceEventData) };
                }
            });
            let seen = lookers.into_iter().map(|h| h.join().expect("looker")).collect();
            churn.join().expect("churn");
            seen
        });
        for (i, &uid) in uids.iter().enumerate() {
            let first = seen[0][i];
            for s in &seen[1..] {
                assert_eq!(s[i], first, "threads disagree on instance {i}");
            }
            let (p, ie, ip) = first;
            // SAFETY: a live event and its materialised payload.
            let (ev, p) = unsafe { (&*(uid as *const TraceEventData), &*(p as *const Payload)) };
            assert_eq!(ev.reserved.payload as usize, p as *const Payload as usize);
            assert_eq!(p.internal, uid);
            assert_eq!(p.line_no, i as u32 % 16 + 1 + round * 16);
            assert_eq!((p.column_no, p.flags & 0xff), (3, 0x1b));
            // SAFETY: the name is a never-freed copy.
            assert_eq!(unsafe { std::ffi::CStr::from_ptr(p.name) }, c"side_kernel");
            assert_ne!(p.name, c"side_kernel".as_ptr().cast::<c_char>(), "the dispatcher's copy");
            assert_eq!(ip + 8, ie, "payload and event interfaces of one side cell");
        }
        for uid in uids {
            // SAFETY: live events.
            unsafe { d::release_event(uid as *mut TraceEventData) };
        }
    }
}
