//! The pairing guarantee with the fallback fences (`fence(SeqCst)` on both sides, as on kernels
//! without `membarrier`): its own process, so `OFFTRACE_NO_MEMBARRIER` is read before the first
//! context exists.

#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // `set_var` before any thread exists

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use offtrace_core::*;

#[test]
fn pairing_holds_with_symmetric_fences() {
    // SAFETY: the only test of this process, before any other thread exists.
    unsafe { std::env::set_var("OFFTRACE_NO_MEMBARRIER", "1") };
    let ctx = create_context().unwrap();
    assert!(!asymmetric_fences());
    let (enters, exits) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (e2, x2) = (enters.clone(), exits.clone());
    configure_callback_tracing_closure(ctx, Kind::Sync, None, move |r, u| {
        if r.phase == Phase::Enter as u32 {
            u.value = r.correlation_id.internal;
            e2.fetch_add(1, Ordering::Relaxed);
        } else {
            assert_eq!(u.value, r.correlation_id.internal);
            x2.fetch_add(1, Ordering::Relaxed);
        }
    })
    .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                let p = SyncPayload { object: 1, event_count: 0, ..Default::default() };
                while !done.load(Ordering::Relaxed) {
                    let t = emit_enter(Kind::Sync, sync_op::WAIT, Payload::Sync(&p));
                    std::thread::yield_now();
                    emit_exit(t, Payload::Sync(&p));
                }
            });
        }
        s.spawn(|| {
            for i in 0..1000 {
                if i % 2 == 0 {
                    start_context(ctx).unwrap();
                    std::thread::sleep(std::time::Duration::from_micros(20));
                } else {
                    stop_context(ctx).unwrap();
                    let e = enters.load(Ordering::SeqCst);
                    std::thread::yield_now();
                    assert_eq!(enters.load(Ordering::SeqCst), e, "enter delivered after stop returned");
                }
            }
            done.store(true, Ordering::Relaxed);
        });
    });
    destroy_context(ctx).unwrap();
    assert!(enters.load(Ordering::SeqCst) > 0);
    assert_eq!(enters.load(Ordering::SeqCst), exits.load(Ordering::SeqCst));
}
