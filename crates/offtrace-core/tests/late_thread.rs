//! Emits from a thread whose thread-locals are being destroyed (the main thread inside `exit()`,
//! a runtime thread whose own thread-local destructors report events): instants and activity
//! still reach the services through the late slot, so do calls entered during the teardown
//! (the thread holds the late slot until their exits; nested calls and instants inside them
//! re-enter it), and exits of calls entered before the teardown are delivered without sharing
//! the dying slot with a new thread.

#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};

use offtrace_core::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// What the services saw.
static INSTANTS: AtomicU64 = AtomicU64::new(0);
static ENTERS: AtomicU64 = AtomicU64::new(0);
static EXITS: AtomicU64 = AtomicU64::new(0);
static BAD_USER_DATA: AtomicU64 = AtomicU64::new(0);
static ACTIVITY: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn cb(r: CallbackRecord, user: *mut UserData, _d: *mut c_void) {
    // SAFETY: `user` is valid during the callback.
    let user = unsafe { &mut *user };
    match r.phase {
        p if p == Phase::Enter as u32 => {
            ENTERS.fetch_add(1, Ordering::SeqCst);
            user.value = r.correlation_id.internal; // each call's own mark
        }
        p if p == Phase::Exit as u32 => {
            EXITS.fetch_add(1, Ordering::SeqCst);
            if user.value != r.correlation_id.internal {
                BAD_USER_DATA.fetch_add(1, Ordering::SeqCst);
            }
        }
        _ => {
            INSTANTS.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Buffer deliveries (callbacks with at least one record).
static DELIVERIES: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn buf_cb(
    _c: ContextId,
    _b: BufferId,
    _r: *const *const BufferRecordHeader,
    n: usize,
    _d: *mut c_void,
    _x: u64,
) {
    ACTIVITY.fetch_add(n as u64, Ordering::SeqCst);
    if n > 0 {
        DELIVERIES.fetch_add(1, Ordering::SeqCst);
    }
}

fn reset() {
    for c in [&INSTANTS, &ENTERS, &EXITS, &BAD_USER_DATA, &ACTIVITY, &DELIVERIES] {
        c.store(0, Ordering::SeqCst);
    }
}

fn context() -> (ContextId, BufferId) {
    let ctx = create_context().unwrap();
    // SAFETY: `cb` and `buf_cb` are sound for any record.
    unsafe {
        configure_callback_tracing_service(ctx, Kind::CodeObject, None, cb, std::ptr::null_mut()).unwrap();
        configure_callback_tracing_service(ctx, Kind::UrApi, None, cb, std::ptr::null_mut()).unwrap();
    }
    let rec = 104; // 6656 bytes (64 of the former fixed records): a 4096-byte ring
    // SAFETY: as above.
    let buf = unsafe {
        create_buffer(ctx, 64 * rec, 64 * rec, BufferPolicy::Lossless, buf_cb, std::ptr::null_mut()).unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::MemoryCopy, None, buf).unwrap();
    start_context(ctx).unwrap();
    (ctx, buf)
}

fn instant() {
    let p = CodeObjectPayload::default();
    emit_instant(Kind::CodeObject, code_object::PROGRAM, Phase::Load, Payload::CodeObject(&p));
}

fn activity() {
    let p = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    emit_activity(Kind::MemoryCopy, 0, 9, 100, 200, Payload::MemoryCopy(&p));
}

fn api_payload() -> ApiCallPayload {
    ApiCallPayload::new(1, &[0x10])
}

/// What the late destructor does, and what it saw.
struct Late {
    /// A call entered before the teardown, exited from the destructor.
    open: Option<CallToken>,
    /// Called after the instants, before the exit (to hold the dying slot's pair open).
    pause: Option<Box<dyn FnOnce()>>,
    /// Set when the enter emitted from the destructor was delivered (through the late slot).
    enter_delivered: &'static AtomicBool,
}

impl Drop for Late {
    fn drop(&mut self) {
        // The services' thread-locals were registered after this one, so glibc (which runs
        // destructors in reverse order of registration) has destroyed them already.
        for _ in 0..3 {
            instant();
        }
        activity();
        let p = api_payload();
        let t = emit_enter(Kind::UrApi, 1, Payload::UrApi(&p));
        self.enter_delivered.store(t.is_delivered(), Ordering::SeqCst);
        instant(); // inside the late call: the thread holds the late slot already
        let nested = emit_enter(Kind::UrApi, 1, Payload::UrApi(&p));
        emit_exit(nested, Payload::UrApi(&p));
        emit_exit(t, Payload::UrApi(&p));
        if let Some(pause) = self.pause.take() {
            pause();
        }
        if let Some(t) = self.open.take() {
            emit_exit(t, Payload::UrApi(&p));
        }
    }
}

thread_local! {
    static LATE: RefCell<Option<Late>> = const { RefCell::new(None) };
}

/// Runs a thread that registers `Late` first, then uses the services (so their thread-locals
/// are destroyed before `Late`), opens one call and exits inside it.
fn spawn_late(
    enter_delivered: &'static AtomicBool,
    pause: Option<Box<dyn FnOnce() + Send>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        LATE.with(|l| drop(l.borrow())); // registers its destructor before the services' ones
        instant(); // the services' thread-locals: registered now
        activity();
        let p = api_payload();
        let open = emit_enter(Kind::UrApi, 1, Payload::UrApi(&p));
        assert!(open.is_delivered());
        let pause = pause.map(|f| f as Box<dyn FnOnce()>);
        LATE.with(|l| *l.borrow_mut() = Some(Late { open: Some(open), pause, enter_delivered }));
    })
}

#[test]
fn emits_from_thread_local_destructors_are_delivered() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    reset();
    let (ctx, buf) = context();
    static ENTER_DELIVERED: AtomicBool = AtomicBool::new(false);
    let lost = late_lost();
    spawn_late(&ENTER_DELIVERED, None).join().unwrap();
    flush_buffer(buf).unwrap();
    assert_eq!(
        INSTANTS.load(Ordering::SeqCst),
        1 + 3 + 1,
        "instants before and during teardown, one inside a late call"
    );
    assert_eq!(ACTIVITY.load(Ordering::SeqCst), 1 + 1, "activity before and during teardown");
    assert!(ENTER_DELIVERED.load(Ordering::SeqCst), "an enter in teardown is delivered through the late slot");
    assert_eq!(ENTERS.load(Ordering::SeqCst), 1 + 2, "before the teardown, and a nested pair during it");
    assert_eq!(
        EXITS.load(Ordering::SeqCst),
        1 + 2,
        "the exit of the call entered before the teardown, and the late pair's"
    );
    assert_eq!(BAD_USER_DATA.load(Ordering::SeqCst), 0);
    assert_eq!(late_lost(), lost, "one late thread: no contention");
    destroy_context(ctx).unwrap();
}

#[test]
fn a_dying_slot_with_an_open_call_is_not_reused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    reset();
    let (ctx, _buf) = context();
    static ENTER_DELIVERED: AtomicBool = AtomicBool::new(false);
    let (in_teardown_tx, in_teardown_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    // The dying thread stops between its instants and its exit: its slot has an open pair.
    let dying = spawn_late(
        &ENTER_DELIVERED,
        Some(Box::new(move || {
            in_teardown_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        })),
    );
    in_teardown_rx.recv().unwrap();
    // New threads meanwhile: each opens nested calls (frames 0.. of whatever slot it gets) and
    // exits them after the dying thread's exit. Sharing the dying slot would show as user data
    // of one call seen by another's exit, or as a frame freed under a live call.
    let (opened_tx, opened_rx) = mpsc::channel::<()>();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let close_rx = std::sync::Arc::new(Mutex::new(close_rx));
    let others: Vec<_> = (0..3)
        .map(|_| {
            let opened_tx = opened_tx.clone();
            let close_rx = close_rx.clone();
            std::thread::spawn(move || {
                let p = api_payload();
                let a = emit_enter(Kind::UrApi, 1, Payload::UrApi(&p));
                let b = emit_enter(Kind::UrApi, 1, Payload::UrApi(&p));
                assert!(a.is_delivered() && b.is_delivered());
                opened_tx.send(()).unwrap();
                close_rx.lock().unwrap().recv().unwrap();
                emit_exit(b, Payload::UrApi(&p));
                emit_exit(a, Payload::UrApi(&p));
            })
        })
        .collect();
    for _ in 0..3 {
        opened_rx.recv().unwrap();
    }
    go_tx.send(()).unwrap();
    dying.join().unwrap();
    for _ in 0..3 {
        close_tx.send(()).unwrap();
    }
    for h in others {
        h.join().unwrap();
    }
    assert_eq!(ENTERS.load(Ordering::SeqCst), 1 + 2 + 6);
    assert_eq!(EXITS.load(Ordering::SeqCst), 1 + 2 + 6);
    assert_eq!(BAD_USER_DATA.load(Ordering::SeqCst), 0, "every exit saw its own call's user data");
    assert_eq!(INSTANTS.load(Ordering::SeqCst), 1 + 3 + 1);
    destroy_context(ctx).unwrap();
}

#[test]
fn contended_late_slot_loses_and_counts() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    reset();
    let (ctx, _buf) = context();
    // Two dying threads; the first holds the late slot (inside a late callback) while the second
    // emits: the second's instant is lost and counted.
    static HOLD: AtomicBool = AtomicBool::new(false);
    static HOLDING: AtomicBool = AtomicBool::new(false);
    let ctx2 = create_context().unwrap();
    unsafe extern "C" fn holding_cb(r: CallbackRecord, _u: *mut UserData, _d: *mut c_void) {
        if r.operation == code_object::KERNEL && HOLD.load(Ordering::SeqCst) {
            HOLDING.store(true, Ordering::SeqCst);
            while HOLD.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
    }
    // SAFETY: `holding_cb` is sound for any record.
    unsafe {
        configure_callback_tracing_service(
            ctx2,
            Kind::CodeObject,
            Some(&[code_object::KERNEL]),
            holding_cb,
            std::ptr::null_mut(),
        )
        .unwrap()
    };
    start_context(ctx2).unwrap();
    HOLD.store(true, Ordering::SeqCst);
    static E1: AtomicBool = AtomicBool::new(false);
    static E2: AtomicBool = AtomicBool::new(false);
    let holder = spawn_late(
        &E1,
        Some(Box::new(|| {
            let p = CodeObjectPayload::default();
            emit_instant(Kind::CodeObject, code_object::KERNEL, Phase::Load, Payload::CodeObject(&p));
        })),
    );
    while !HOLDING.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let lost = late_lost();
    let before = INSTANTS.load(Ordering::SeqCst);
    spawn_late(&E2, None).join().unwrap();
    // The second thread's 3 teardown instants, 1 activity record, and its late call (enter, the
    // instant inside it, the nested enter) found the slot taken.
    assert_eq!(late_lost() - lost, 7);
    assert_eq!(INSTANTS.load(Ordering::SeqCst) - before, 1, "only its instant from before the teardown");
    HOLD.store(false, Ordering::SeqCst);
    holder.join().unwrap();
    destroy_context(ctx2).unwrap();
    destroy_context(ctx).unwrap();
}

/// Emits `MANY_LATE` activity records from a thread-local destructor that runs after the
/// services' thread-locals are gone.
struct ManyLate;

const MANY_LATE: u64 = 392;

impl Drop for ManyLate {
    fn drop(&mut self) {
        for _ in 0..MANY_LATE {
            activity();
        }
    }
}

thread_local! {
    static MANY: RefCell<Option<ManyLate>> = const { RefCell::new(None) };
}

/// Records emitted during a thread's teardown go to the buffer's late staging and are delivered
/// in batches (at the watermark or a flush), not one record per delivery: 392 records, each
/// delivery as many as the 4096-byte staging holds (30 `MEMORY_COPY` records of 136 bytes, in
/// one callback or two where they wrap the staging's end), plus the thread's own staging.
#[test]
fn records_in_thread_teardown_are_delivered_in_batches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    reset();
    let (ctx, buf) = context();
    std::thread::spawn(|| {
        MANY.with(|m| drop(m.borrow())); // registers its destructor before the services' ones
        activity(); // the services' thread-locals: registered now
        MANY.with(|m| *m.borrow_mut() = Some(ManyLate));
    })
    .join()
    .unwrap();
    flush_buffer(buf).unwrap();
    assert_eq!(ACTIVITY.load(Ordering::SeqCst), 1 + MANY_LATE, "every record delivered");
    let deliveries = DELIVERIES.load(Ordering::SeqCst);
    let per_delivery = (4096 / std::mem::size_of::<MemoryCopyRecord>()) as u64;
    // A delivery calls the callback once per ring, twice when its records wrap the end of the
    // ring's array of record addresses (docs/services.md, *Buffers*).
    let batches = MANY_LATE / per_delivery + 2;
    assert!(deliveries <= 2 * batches, "{deliveries} deliveries for {} records", 1 + MANY_LATE);
    destroy_context(ctx).unwrap();
}
