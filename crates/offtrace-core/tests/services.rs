//! The tracing services end to end, driven by a mock backend (a fake UR kind with arguments).
//!
//! The services are process-global, so every test takes `SERIAL` first.

#![allow(unsafe_code)]
#![allow(clippy::unwrap_used)]

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use offtrace_core::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    mock::register();
    g
}

mod mock {
    use offtrace_core::{ApiCallPayload, ArgDescriptor, ArgFormat, CallToken, Kind, Operation, Payload};

    pub const UR_QUEUE_FINISH: u32 = 3;
    pub const UR_USM_DEVICE_ALLOC: u32 = 7;
    pub const UR_KERNEL_CREATE: u32 = 11;

    const FINISH_ARGS: &[ArgDescriptor] =
        &[ArgDescriptor { name: "hQueue", type_name: "ur_queue_handle_t", size: 8, format: ArgFormat::Pointer }];
    const ALLOC_ARGS: &[ArgDescriptor] = &[
        ArgDescriptor { name: "hContext", type_name: "ur_context_handle_t", size: 8, format: ArgFormat::Pointer },
        ArgDescriptor { name: "size", type_name: "size_t", size: 8, format: ArgFormat::Unsigned },
        ArgDescriptor { name: "ppMem", type_name: "void**", size: 8, format: ArgFormat::Pointer },
    ];
    const KERNEL_ARGS: &[ArgDescriptor] = &[
        ArgDescriptor { name: "hProgram", type_name: "ur_program_handle_t", size: 8, format: ArgFormat::Pointer },
        ArgDescriptor { name: "pKernelName", type_name: "const char*", size: 8, format: ArgFormat::CString },
        ArgDescriptor { name: "flags", type_name: "int32_t", size: 4, format: ArgFormat::Signed },
    ];
    pub static OPS: &[Operation] = &[
        Operation { id: UR_QUEUE_FINISH, name: "urQueueFinish", args: FINISH_ARGS },
        Operation { id: UR_USM_DEVICE_ALLOC, name: "urUSMDeviceAlloc", args: ALLOC_ARGS },
        Operation { id: UR_KERNEL_CREATE, name: "urKernelCreate", args: KERNEL_ARGS },
    ];

    pub fn register() {
        let _ = offtrace_core::register_kind_operations(Kind::UrApi, OPS);
    }

    /// One traced UR call: enter, the body, exit with a result.
    pub fn call(function_id: u32, args: &[u64], body: impl FnOnce()) -> u64 {
        let mut p = ApiCallPayload::new(function_id, args);
        let token: CallToken = offtrace_core::emit_enter(Kind::UrApi, function_id, Payload::UrApi(&p));
        let corr = token.correlation_id();
        body();
        p.result = 0;
        p.has_result = 1;
        offtrace_core::emit_exit(token, Payload::UrApi(&p));
        corr
    }
}

/// ctx, correlation, kind, operation, phase, user data, external correlation.
type Seen1 = (u64, u64, u32, u32, u32, u64, u64);

#[derive(Default)]
struct Seen {
    records: Mutex<Vec<Seen1>>,
}

unsafe extern "C" fn record_cb(r: CallbackRecord, user: *mut UserData, data: *mut c_void) {
    // SAFETY: tests pass a `Seen` that outlives the context, and `user` is valid.
    let (seen, user) = unsafe { (&*data.cast::<Seen>(), &mut *user) };
    if r.phase == Phase::Enter as u32 {
        user.value = r.correlation_id.internal * 10;
    }
    seen.records.lock().unwrap().push((
        r.context_id.handle,
        r.correlation_id.internal,
        r.kind,
        r.operation,
        r.phase,
        user.value,
        r.correlation_id.external.value,
    ));
}

fn ctx_with_ur(seen: &Seen, ops: Option<&[u32]>) -> ContextId {
    let ctx = create_context().unwrap();
    // SAFETY: `record_cb` is sound for any record with a `Seen` that outlives the context.
    unsafe {
        configure_callback_tracing_service(ctx, Kind::UrApi, ops, record_cb, seen as *const Seen as *mut c_void)
            .unwrap()
    };
    ctx
}

#[test]
fn enter_exit_pairs_with_user_data_and_correlation() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, None);
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {}); // not started: nothing
    start_context(ctx).unwrap();
    let corr = mock::call(mock::UR_QUEUE_FINISH, &[0x1234], || {});
    destroy_context(ctx).unwrap();
    let r = seen.records.lock().unwrap().clone();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0], (ctx.handle, corr, Kind::UrApi as u32, mock::UR_QUEUE_FINISH, 1, corr * 10, 0));
    assert_eq!(r[1], (ctx.handle, corr, Kind::UrApi as u32, mock::UR_QUEUE_FINISH, 2, corr * 10, 0));
    assert!(corr > 0);
}

#[test]
fn second_configuration_of_a_kind_fails_and_ops_are_checked() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, Some(&[mock::UR_QUEUE_FINISH]));
    // SAFETY: as in `ctx_with_ur`.
    let again = unsafe {
        configure_callback_tracing_service(ctx, Kind::UrApi, None, record_cb, &seen as *const Seen as *mut c_void)
    };
    assert_eq!(again, Err(ServiceError::ServiceAlreadyConfigured));
    // SAFETY: as above.
    let bad_op = unsafe {
        configure_callback_tracing_service(ctx, Kind::Sync, Some(&[99]), record_cb, &seen as *const Seen as *mut c_void)
    };
    assert_eq!(bad_op, Err(ServiceError::OperationNotFound));
    start_context(ctx).unwrap();
    mock::call(mock::UR_USM_DEVICE_ALLOC, &[1, 2, 3], || {}); // filtered out
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    destroy_context(ctx).unwrap();
    let r = seen.records.lock().unwrap().clone();
    assert_eq!(r.iter().map(|x| x.3).collect::<Vec<_>>(), vec![mock::UR_QUEUE_FINISH; 2]);
    assert_eq!(start_context(ctx), Err(ServiceError::ContextInvalid));
    assert_eq!(stop_context(ContextId { handle: 0 }), Err(ServiceError::ContextInvalid));
}

#[test]
fn contexts_run_out_and_come_back() {
    let _g = serial();
    let ctxs: Vec<_> = (0..MAX_CONTEXTS).map_while(|_| create_context().ok()).collect();
    assert_eq!(create_context(), Err(ServiceError::OutOfResources));
    for c in &ctxs {
        destroy_context(*c).unwrap();
    }
    let c = create_context().unwrap();
    assert!(!ctxs.contains(&c), "a recycled slot gets a new id");
    destroy_context(c).unwrap();
}

#[test]
fn external_correlation_reaches_records() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, None);
    start_context(ctx).unwrap();
    push_external_correlation_id(ctx, 0, 77).unwrap();
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    assert_eq!(pop_external_correlation_id(ctx, 0), Ok(77));
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    destroy_context(ctx).unwrap();
    let ext: Vec<u64> = seen.records.lock().unwrap().iter().map(|r| r.6).collect();
    assert_eq!(ext, vec![77, 77, 0, 0]);
}

#[test]
fn nested_records_carry_the_api_calls_correlation_id() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, None);
    // SAFETY: as in `ctx_with_ur`.
    unsafe {
        configure_callback_tracing_service(ctx, Kind::CodeObject, None, record_cb, &seen as *const Seen as *mut c_void)
            .unwrap()
    };
    start_context(ctx).unwrap();
    let corr = mock::call(mock::UR_KERNEL_CREATE, &[5, 0, 0], || {
        let p = CodeObjectPayload { handle: 9, program: 5, ..Default::default() };
        emit_instant(Kind::CodeObject, code_object::KERNEL, Phase::Load, Payload::CodeObject(&p));
    });
    destroy_context(ctx).unwrap();
    let r = seen.records.lock().unwrap().clone();
    assert_eq!(r.len(), 3);
    assert_eq!((r[1].1, r[1].2, r[1].4), (corr, Kind::CodeObject as u32, Phase::Load as u32));
}

#[test]
fn device_work_reported_inside_a_call_is_noted_per_kind_and_per_call() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, None);
    // SAFETY: as in `ctx_with_ur`.
    unsafe {
        configure_callback_tracing_service(ctx, Kind::MemoryCopy, None, record_cb, &seen as *const Seen as *mut c_void)
            .unwrap()
    };
    start_context(ctx).unwrap();
    let m = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    let copy = || {
        emit_instant(Kind::MemoryCopy, 0, Phase::None, Payload::MemoryCopy(&m));
    };
    let reported = mock::call(mock::UR_QUEUE_FINISH, &[1], copy);
    let quiet = mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    // Outside any call an instant is not noted (no call to note it against).
    copy();
    // The ring keeps the last 8 calls that reported: 8 more push the first one out.
    let later: Vec<u64> = (0..8).map(|_| mock::call(mock::UR_QUEUE_FINISH, &[1], copy)).collect();
    destroy_context(ctx).unwrap();
    assert!(!reported_in_call(reported, Kind::MemoryCopy), "pushed out by 8 later calls");
    assert!(later.iter().all(|&c| reported_in_call(c, Kind::MemoryCopy)));
    assert!(!reported_in_call(later[7], Kind::KernelDispatch), "another kind");
    assert!(!reported_in_call(quiet, Kind::MemoryCopy), "a call that reported nothing");
    // On another thread: that thread's ring, empty.
    let last = later[7];
    assert!(!std::thread::spawn(move || reported_in_call(last, Kind::MemoryCopy)).join().unwrap());
}

#[test]
fn reentrant_emits_inside_callbacks_are_not_delivered() {
    let _g = serial();
    let count = Arc::new(AtomicUsize::new(0));
    let ctx = create_context().unwrap();
    let c = count.clone();
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |_r, _u| {
        c.fetch_add(1, Ordering::Relaxed);
        mock::call(mock::UR_QUEUE_FINISH, &[1], || {}); // the tool calls the runtime
    })
    .unwrap();
    start_context(ctx).unwrap();
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    destroy_context(ctx).unwrap();
    assert_eq!(count.load(Ordering::Relaxed), 2);
}

#[test]
fn stop_inside_callback_does_not_deadlock_and_exit_still_arrives() {
    let _g = serial();
    let phases = Arc::new(Mutex::new(Vec::new()));
    let ctx = create_context().unwrap();
    let p = phases.clone();
    let me = Arc::new(AtomicU64::new(0));
    let me2 = me.clone();
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, _u| {
        p.lock().unwrap().push(r.phase);
        if r.phase == Phase::Enter as u32 {
            stop_context(ContextId { handle: me2.load(Ordering::Relaxed) }).unwrap();
        }
    })
    .unwrap();
    me.store(ctx.handle, Ordering::Relaxed);
    start_context(ctx).unwrap();
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    assert_eq!(context_is_active(ctx), Ok(false));
    destroy_context(ctx).unwrap();
    assert_eq!(*phases.lock().unwrap(), vec![1, 2]);
}

#[test]
fn started_mid_call_gets_no_exit() {
    let _g = serial();
    let seen = Seen::default();
    let ctx = ctx_with_ur(&seen, None);
    mock::call(mock::UR_QUEUE_FINISH, &[1], || start_context(ctx).unwrap());
    mock::call(mock::UR_QUEUE_FINISH, &[1], || stop_context(ctx).unwrap());
    destroy_context(ctx).unwrap();
    let phases: Vec<u32> = seen.records.lock().unwrap().iter().map(|r| r.4).collect();
    assert_eq!(phases, vec![1, 2], "enter delivered → exit delivered even though stopped mid-call");
}

/// Many threads emit while another starts and stops the context: every delivered enter has
/// exactly one exit, on the same thread, with the same user data.
#[test]
fn pairing_holds_under_concurrent_start_stop() {
    let _g = serial();
    #[derive(Default)]
    struct Pairs {
        enters: AtomicU64,
        exits: AtomicU64,
        bad: AtomicU64,
    }
    let pairs = Arc::new(Pairs::default());
    let ctx = create_context().unwrap();
    let p = pairs.clone();
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, u| {
        if r.phase == Phase::Enter as u32 {
            u.value = r.correlation_id.internal ^ r.thread_id;
            p.enters.fetch_add(1, Ordering::Relaxed);
        } else {
            if u.value != r.correlation_id.internal ^ r.thread_id {
                p.bad.fetch_add(1, Ordering::Relaxed);
            }
            p.exits.fetch_add(1, Ordering::Relaxed);
        }
    })
    .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    mock::call(mock::UR_QUEUE_FINISH, &[1], std::thread::yield_now);
                }
            });
        }
        s.spawn(|| {
            for i in 0..2000 {
                if i % 2 == 0 {
                    start_context(ctx).unwrap();
                    std::thread::sleep(std::time::Duration::from_micros(20));
                } else {
                    stop_context(ctx).unwrap();
                }
                // After stop returns no callback of ctx runs: enters can only have been counted.
                if i % 2 == 1 {
                    let e = pairs.enters.load(Ordering::SeqCst);
                    std::thread::yield_now();
                    assert_eq!(pairs.enters.load(Ordering::SeqCst), e, "enter delivered after stop returned");
                }
            }
            done.store(true, Ordering::Relaxed);
        });
    });
    destroy_context(ctx).unwrap();
    let (e, x) = (pairs.enters.load(Ordering::SeqCst), pairs.exits.load(Ordering::SeqCst));
    assert!(e > 0);
    assert_eq!(e, x, "every delivered enter has exactly one exit");
    assert_eq!(pairs.bad.load(Ordering::SeqCst), 0, "user data travels from enter to exit");
}

#[test]
fn destroy_waits_for_open_pairs() {
    let _g = serial();
    let exits = Arc::new(AtomicU64::new(0));
    let ctx = create_context().unwrap();
    let x = exits.clone();
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, _| {
        if r.phase == Phase::Exit as u32 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            x.fetch_add(1, Ordering::SeqCst);
        }
    })
    .unwrap();
    start_context(ctx).unwrap();
    let entered = AtomicBool::new(false);
    let destroying = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // The call stays open until the main thread is about to destroy the context; its
            // exit callback then takes 20 ms, the window in which a destroy that did not wait
            // would return.
            mock::call(mock::UR_QUEUE_FINISH, &[1], || {
                entered.store(true, Ordering::SeqCst);
                while !destroying.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            })
        });
        while !entered.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        destroying.store(true, Ordering::SeqCst);
        destroy_context(ctx).unwrap();
        assert_eq!(exits.load(Ordering::SeqCst), 1, "destroy returned before the open pair closed");
    });
}

// ---------------------------------------------------------------- buffers

/// A delivered record, copied out of the callback (its `size` bytes).
#[derive(Clone, Debug)]
struct Owned(Vec<u64>);

impl Owned {
    /// # Safety
    /// `h` must point at a delivered record, during the callback.
    unsafe fn copy(h: *const BufferRecordHeader) -> Self {
        // SAFETY: a record is `size` readable bytes, 8-aligned (the caller's contract).
        Self(unsafe { std::slice::from_raw_parts(h.cast::<u64>(), (*h).size as usize / 8) }.to_vec())
    }

    /// The record as its kind's struct (checked against its size).
    fn get<T: Copy>(&self) -> T {
        assert!(std::mem::size_of::<T>() <= self.0.len() * 8, "the record is smaller than the struct");
        // SAFETY: checked above; the words are 8-aligned and every record struct is plain data.
        unsafe { self.0.as_ptr().cast::<T>().read() }
    }
}

impl std::ops::Deref for Owned {
    type Target = BufferRecordHeader;
    fn deref(&self) -> &BufferRecordHeader {
        assert!(self.0.len() * 8 >= std::mem::size_of::<BufferRecordHeader>());
        // SAFETY: at least a header (checked), 8-aligned.
        unsafe { &*self.0.as_ptr().cast() }
    }
}

#[derive(Default)]
struct Batches {
    sizes: Mutex<Vec<usize>>,
    drops: AtomicU64,
    records: Mutex<Vec<Owned>>,
    slow: AtomicBool,
    threads: Mutex<Vec<std::thread::ThreadId>>,
}

unsafe extern "C" fn batch_cb(
    _c: ContextId,
    _b: BufferId,
    recs: *const *const BufferRecordHeader,
    n: usize,
    data: *mut c_void,
    drops: u64,
) {
    // SAFETY: tests pass `Batches` outliving the context; `recs[..n]` is valid during the call.
    let (b, recs) =
        unsafe { (&*data.cast::<Batches>(), if n == 0 { &[][..] } else { std::slice::from_raw_parts(recs, n) }) };
    b.sizes.lock().unwrap().push(n);
    // SAFETY: each pointer is a delivered record, read during the call.
    b.records.lock().unwrap().extend(recs.iter().map(|&r| unsafe { Owned::copy(r) }));
    b.threads.lock().unwrap().push(std::thread::current().id());
    b.drops.fetch_add(drops, Ordering::SeqCst);
    if b.slow.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Waits (at most 10 s) until `cond` holds: deliveries run on the services' delivery thread.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t0 = std::time::Instant::now();
    while !cond() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "timed out waiting: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The size of the mock's `UR_QUEUE_FINISH` record (one argument).
const REC: usize = std::mem::size_of::<ApiCallRecord>() + 8;

fn buffered_ctx(b: &Batches, records: usize, watermark: usize, policy: BufferPolicy) -> (ContextId, BufferId) {
    let ctx = create_context().unwrap();
    // SAFETY: `batch_cb` is sound with a `Batches` that outlives the context.
    let buf = unsafe {
        create_buffer(ctx, records * REC, watermark * REC, policy, batch_cb, b as *const Batches as *mut c_void)
            .unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::UrApi, None, buf).unwrap();
    start_context(ctx).unwrap();
    (ctx, buf)
}

#[test]
fn buffer_record_layout() {
    assert_eq!(std::mem::size_of::<BufferRecordHeader>(), 64);
    assert_eq!(std::mem::align_of::<BufferRecordHeader>(), 8);
    assert_eq!(REC, 88);
    assert_eq!(std::mem::size_of::<CallbackRecord>(), 56);
}

#[test]
fn buffer_arguments_are_checked() {
    let _g = serial();
    let b = Batches::default();
    let ctx = create_context().unwrap();
    let data = &b as *const Batches as *mut c_void;
    // SAFETY: as in `buffered_ctx`.
    unsafe {
        assert_eq!(
            create_buffer(
                ctx,
                std::mem::size_of::<BufferRecordHeader>() - 1,
                0,
                BufferPolicy::Lossless,
                batch_cb,
                data
            ),
            Err(ServiceError::InvalidArgument)
        );
        assert_eq!(
            create_buffer(ctx, REC, 2 * REC, BufferPolicy::Lossless, batch_cb, data),
            Err(ServiceError::InvalidArgument)
        );
        assert_eq!(
            create_buffer(ContextId { handle: 3 }, REC, 0, BufferPolicy::Lossless, batch_cb, data),
            Err(ServiceError::ContextInvalid)
        );
        let buf = create_buffer(ctx, 4 * REC, REC, BufferPolicy::Lossless, batch_cb, data).unwrap();
        assert_eq!(buffer_capacity(buf), Ok(512), "4 records of 88 bytes (352), rounded up to a power of two");
        configure_buffer_tracing_service(ctx, Kind::Marker, None, buf).unwrap();
        assert_eq!(
            configure_buffer_tracing_service(ctx, Kind::Marker, None, buf),
            Err(ServiceError::ServiceAlreadyConfigured)
        );
        assert_eq!(
            configure_buffer_tracing_service(ctx, Kind::Sync, None, BufferId { handle: 0 }),
            Err(ServiceError::BufferNotFound)
        );
    }
    destroy_context(ctx).unwrap();
}

#[test]
fn watermark_triggers_delivery_and_flush_delivers_the_rest() {
    let _g = serial();
    let b = Batches::default();
    let (ctx, buf) = buffered_ctx(&b, 100, 10, BufferPolicy::Lossless);
    for _ in 0..9 {
        mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(b.sizes.lock().unwrap().is_empty(), "below the watermark: no delivery");
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    wait_until("the delivery at the watermark", || !b.sizes.lock().unwrap().is_empty());
    assert_eq!(*b.sizes.lock().unwrap(), vec![10], "at the watermark: one delivery");
    for _ in 0..5 {
        mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    }
    flush_buffer(buf).unwrap();
    assert_eq!(*b.sizes.lock().unwrap(), vec![10, 5], "a flush returns when it has delivered");
    flush_buffer(buf).unwrap();
    assert_eq!(b.sizes.lock().unwrap().len(), 2, "an empty flush calls nothing");
    let recs = b.records.lock().unwrap();
    assert!(recs.iter().all(|r| {
        let a: ApiCallRecord = r.get();
        r.kind == Kind::UrApi as u32
            && r.size as usize == REC
            && r.end_timestamp >= r.start_timestamp
            && (a.function_id, a.arg_count) == (3, 1)
            && r.0[a.args_offset as usize / 8] == 1
    }));
    drop(recs);
    let me = std::thread::current().id();
    assert!(b.threads.lock().unwrap().iter().all(|t| *t != me), "deliveries run on the services' thread");
    destroy_context(ctx).unwrap();
    assert_eq!(flush_buffer(buf), Err(ServiceError::BufferNotFound), "destroy retires the context's buffers");
}

/// Once no record has been staged over its last naps, the delivery thread sleeps without a
/// timeout: a watermark reached then must wake it (the doorbell rings). While records flow it
/// naps or polls, and finds each watermark's mark by itself. Either way every watermark is
/// delivered without a flush.
#[test]
fn a_watermark_is_delivered_after_a_quiet_period_and_while_records_flow() {
    let _g = serial();
    let b = Batches::default();
    let (ctx, _buf) = buffered_ctx(&b, 100, 10, BufferPolicy::Lossless);
    for round in 1..=3 {
        // Far longer than the delivery thread's four naps of 1 ms before it sleeps.
        std::thread::sleep(std::time::Duration::from_millis(30));
        for _ in 0..10 {
            mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
        }
        wait_until("the delivery at a watermark after a quiet period", || b.sizes.lock().unwrap().len() == round);
    }
    for _ in 0..100 {
        mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    }
    wait_until("every watermark while records flow", || b.sizes.lock().unwrap().iter().sum::<usize>() == 130);
    destroy_context(ctx).unwrap();
}

/// A thread's records below the watermark are delivered when the thread exits (its staging is
/// queued for the delivery thread), without a flush; `destroy_buffer` delivers what is staged,
/// and after it the callback is never called again and the id names nothing.
#[test]
fn thread_exit_delivers_its_staging_and_destroy_buffer_drains_then_retires() {
    let _g = serial();
    let b = Batches::default();
    let (ctx, buf) = buffered_ctx(&b, 100, 50, BufferPolicy::Lossless);
    std::thread::spawn(|| {
        for _ in 0..3 {
            mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
        }
    })
    .join()
    .unwrap();
    wait_until("the exited thread's records", || b.records.lock().unwrap().len() == 3);
    for _ in 0..2 {
        mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    }
    assert_eq!(destroy_buffer(buf), Err(ServiceError::ContextActive), "its context is started");
    stop_context(ctx).unwrap();
    destroy_buffer(buf).unwrap();
    assert_eq!(b.records.lock().unwrap().len(), 5, "destroy delivered the staged records");
    let calls = b.sizes.lock().unwrap().len();
    assert_eq!(flush_buffer(buf), Err(ServiceError::BufferNotFound));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(b.sizes.lock().unwrap().len(), calls, "no callback after destroy");
    destroy_context(ctx).unwrap();
}

#[test]
fn lossless_never_drops_under_many_threads() {
    let _g = serial();
    let b = Batches::default();
    b.slow.store(true, Ordering::Relaxed);
    let (ctx, buf) = buffered_ctx(&b, 16, 16, BufferPolicy::Lossless);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..500 {
                    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
                }
            });
        }
    });
    flush_buffer(buf).unwrap();
    assert_eq!(b.records.lock().unwrap().len(), 2000);
    assert_eq!(b.drops.load(Ordering::SeqCst), 0);
    assert_eq!(buffer_dropped_total(buf), Ok(0));
    let mut corr: Vec<u64> = b.records.lock().unwrap().iter().map(|r| r.correlation_id.internal).collect();
    corr.sort_unstable();
    corr.dedup();
    assert_eq!(corr.len(), 2000, "every record exactly once");
    destroy_context(ctx).unwrap();
}

/// Records of seven sizes from three threads through a small lossless buffer, the delivery
/// thread running beside them: each ring wraps (a record that would cross its end starts again
/// at its beginning), fills (the thread waits for the delivery thread to release space), and
/// deliveries wrap the array of record addresses the callback gets in place (two runs). Every
/// record arrives exactly once, whole, in its thread's order.
#[test]
fn mixed_sizes_wrap_the_rings_and_every_record_arrives_once_in_order() {
    let _g = serial();
    let b = Batches::default();
    let ctx = create_context().unwrap();
    // SAFETY: as in `buffered_ctx`.
    let buf = unsafe {
        create_buffer(ctx, 2048, 1000, BufferPolicy::Lossless, batch_cb, &b as *const Batches as *mut c_void).unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::UrApi, None, buf).unwrap();
    start_context(ctx).unwrap();
    const THREADS: u64 = 3;
    const N: u64 = 3000;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for i in 0..N {
                    // 0 to 6 arguments: records of 80 to 128 bytes.
                    let args = [i; 6];
                    let p = ApiCallPayload::new(3, &args[..(i % 7) as usize]);
                    emit_activity(Kind::UrApi, 3, t << 32 | i, i, i + 1, Payload::UrApi(&p));
                }
            });
        }
    });
    flush_buffer(buf).unwrap();
    assert_eq!(b.drops.load(Ordering::SeqCst), 0);
    let recs = b.records.lock().unwrap();
    assert_eq!(recs.len() as u64, THREADS * N, "every record once");
    let mut next = [0u64; THREADS as usize];
    for r in recs.iter() {
        let (t, i) = (r.correlation_id.internal >> 32, r.correlation_id.internal & 0xffff_ffff);
        assert_eq!(i, next[t as usize], "thread {t}'s records in order");
        next[t as usize] += 1;
        let a: ApiCallRecord = r.get();
        assert_eq!((r.start_timestamp, r.end_timestamp, a.arg_count), (i, i + 1, (i % 7) as u32));
        assert_eq!(r.size as usize, std::mem::size_of::<ApiCallRecord>() + 8 * (i % 7) as usize);
        let args = &r.0[a.args_offset as usize / 8..][..a.arg_count as usize];
        assert!(args.iter().all(|&v| v == i), "record {t}/{i} whole");
    }
    drop(recs);
    destroy_context(ctx).unwrap();
}

#[test]
fn discard_counts_what_it_drops() {
    let _g = serial();
    let b = Batches::default();
    b.slow.store(true, Ordering::Relaxed);
    let (ctx, buf) = buffered_ctx(&b, 8, 8, BufferPolicy::Discard);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..2000 {
                    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
                }
            });
        }
    });
    flush_buffer(buf).unwrap();
    let got = b.records.lock().unwrap().len() as u64;
    let dropped = b.drops.load(Ordering::SeqCst);
    assert_eq!(got + dropped, 8000, "delivered + counted drops = produced");
    assert_eq!(buffer_dropped_total(buf), Ok(dropped));
    assert!(dropped > 0, "a slow consumer with 4 producers must drop something");
    destroy_context(ctx).unwrap();
}

#[test]
fn activity_records_carry_explicit_timestamps() {
    let _g = serial();
    let b = Batches::default();
    let ctx = create_context().unwrap();
    // SAFETY: as in `buffered_ctx`.
    let buf = unsafe {
        create_buffer(ctx, 8 * REC, 8 * REC, BufferPolicy::Lossless, batch_cb, &b as *const Batches as *mut c_void)
            .unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::KernelDispatch, None, buf).unwrap();
    start_context(ctx).unwrap();
    let p = KernelDispatchPayload { queue: 1, kernel: 2, global_size: [64, 1, 1], work_dim: 1, ..Default::default() };
    emit_activity(Kind::KernelDispatch, kernel_dispatch::LAUNCH, 42, 100, 200, Payload::KernelDispatch(&p));
    flush_buffer(buf).unwrap();
    let r = b.records.lock().unwrap()[0].clone();
    assert_eq!((r.correlation_id.internal, r.start_timestamp, r.end_timestamp), (42, 100, 200));
    assert_eq!(r.phase, Phase::Complete as u32);
    let k: KernelDispatchRecord = r.get();
    assert_eq!((k.queue, k.kernel, k.global_size, k.work_dim), (1, 2, [64, 1, 1], 1));
    assert_eq!((k.device_start, k.device_end), (100, 200), "a completion's device times");
    destroy_context(ctx).unwrap();
}

/// A buffered counter sample is at the payload's `ts` when it carries one (a GPU sample decoded
/// later, earlier than records before it), at the emit's time otherwise.
#[test]
fn buffered_counter_samples_at_their_own_time() {
    let _g = serial();
    let b = Batches::default();
    let ctx = create_context().unwrap();
    // SAFETY: as in `buffered_ctx`.
    let buf = unsafe {
        create_buffer(ctx, 8 * REC, 8 * REC, BufferPolicy::Lossless, batch_cb, &b as *const Batches as *mut c_void)
            .unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::Counter, None, buf).unwrap();
    start_context(ctx).unwrap();
    let now = CounterPayload { counter: 3, value: 1, ..Default::default() };
    let before = timestamp_ns();
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&now));
    let after = timestamp_ns();
    let own = CounterPayload { counter: 3, value: 2, ts: before - 1_000_000, ..Default::default() };
    emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&own));
    flush_buffer(buf).unwrap();
    let recs = b.records.lock().unwrap().clone();
    assert_eq!(recs.len(), 2);
    assert!((before..=after).contains(&recs[0].start_timestamp) && recs[0].end_timestamp == recs[0].start_timestamp);
    assert_eq!((recs[1].start_timestamp, recs[1].end_timestamp), (before - 1_000_000, before - 1_000_000));
    destroy_context(ctx).unwrap();
}

/// A buffer service with an operation list records only those operations (its slot pointer
/// carries no "all operations" bit), next to one without a list (which does).
#[test]
fn buffer_operation_filter() {
    let _g = serial();
    let b = Batches::default();
    let ctx = create_context().unwrap();
    // SAFETY: as in `buffered_ctx`.
    let buf = unsafe {
        create_buffer(ctx, 16 * REC, 16 * REC, BufferPolicy::Lossless, batch_cb, &b as *const Batches as *mut c_void)
            .unwrap()
    };
    configure_buffer_tracing_service(ctx, Kind::UrApi, Some(&[mock::UR_QUEUE_FINISH]), buf).unwrap();
    configure_buffer_tracing_service(ctx, Kind::MemoryCopy, None, buf).unwrap();
    start_context(ctx).unwrap();
    mock::call(mock::UR_USM_DEVICE_ALLOC, &[1, 2, 3], || {}); // filtered out
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    let p = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    emit_activity(Kind::MemoryCopy, 5, 7, 100, 200, Payload::MemoryCopy(&p));
    flush_buffer(buf).unwrap();
    let ops: Vec<_> = b.records.lock().unwrap().iter().map(|r| (r.kind, r.operation)).collect();
    assert_eq!(ops, vec![(Kind::UrApi as u32, mock::UR_QUEUE_FINISH), (Kind::MemoryCopy as u32, 5)]);
    destroy_context(ctx).unwrap();
}

/// Activity records through each of `emit_activity`'s paths: one path per payload type
/// (the typed record encoded from the struct), a payload of another kind or none (the header
/// alone), one context
/// with an operation list, and several contexts at once.
#[test]
fn activity_paths() {
    let _g = serial();
    let (a, b) = (Batches::default(), Batches::default());
    let ctx_a = create_context().unwrap();
    let ctx_b = create_context().unwrap();
    // SAFETY: as in `buffered_ctx`.
    let (buf_a, buf_b) = unsafe {
        (
            create_buffer(
                ctx_a,
                16 * REC,
                16 * REC,
                BufferPolicy::Lossless,
                batch_cb,
                &a as *const Batches as *mut c_void,
            )
            .unwrap(),
            create_buffer(
                ctx_b,
                16 * REC,
                16 * REC,
                BufferPolicy::Lossless,
                batch_cb,
                &b as *const Batches as *mut c_void,
            )
            .unwrap(),
        )
    };
    // Context a: copies and fills; context b: fills only, and only BUFFER_FILL.
    configure_buffer_tracing_service(ctx_a, Kind::MemoryCopy, None, buf_a).unwrap();
    configure_buffer_tracing_service(ctx_a, Kind::MemoryFill, None, buf_a).unwrap();
    configure_buffer_tracing_service(ctx_b, Kind::MemoryFill, Some(&[memory_fill::BUFFER_FILL]), buf_b).unwrap();
    start_context(ctx_a).unwrap();
    start_context(ctx_b).unwrap();
    let copy = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    let fill = MemoryFillPayload { queue: 5, dst: 6, pattern: 7, pattern_size: 8, size: 9, ..Default::default() };
    // One context.
    emit_activity(Kind::MemoryCopy, memory_copy::USM_MEMCPY, 10, 100, 200, Payload::MemoryCopy(&copy));
    // A payload of another kind, and none: zeros.
    emit_activity(Kind::MemoryCopy, memory_copy::BUFFER_COPY, 11, 100, 200, Payload::MemoryFill(&fill));
    emit_activity(Kind::MemoryCopy, memory_copy::BUFFER_READ, 12, 100, 200, Payload::None);
    // Two contexts; b's list passes only BUFFER_FILL.
    emit_activity(Kind::MemoryFill, memory_fill::USM_FILL, 13, 300, 400, Payload::MemoryFill(&fill));
    emit_activity(Kind::MemoryFill, memory_fill::BUFFER_FILL, 14, 500, 600, Payload::MemoryFill(&fill));
    flush_buffer(buf_a).unwrap();
    flush_buffer(buf_b).unwrap();
    // The record's fields after the header, as words (the header alone: none).
    let fields = |r: &Owned| {
        let body: Vec<u64> = r.0[8..].to_vec();
        (r.context_id, r.kind, r.operation, r.correlation_id.internal, r.start_timestamp, body)
    };
    let got_a: Vec<_> = a.records.lock().unwrap().iter().map(fields).collect();
    let got_b: Vec<_> = b.records.lock().unwrap().iter().map(fields).collect();
    let (copy_k, fill_k) = (Kind::MemoryCopy as u32, Kind::MemoryFill as u32);
    assert_eq!(
        got_a,
        vec![
            // queue, dst, src, bytes, device, direction | src type, dst type | 0, device times
            (ctx_a, copy_k, memory_copy::USM_MEMCPY, 10, 100, vec![1, 2, 3, 4, 0, 0, 0, 100, 200]),
            (ctx_a, copy_k, memory_copy::BUFFER_COPY, 11, 100, vec![]),
            (ctx_a, copy_k, memory_copy::BUFFER_READ, 12, 100, vec![]),
            // queue, dst, pattern, pattern size, bytes, device, device times
            (ctx_a, fill_k, memory_fill::USM_FILL, 13, 300, vec![5, 6, 7, 8, 9, 0, 300, 400]),
            (ctx_a, fill_k, memory_fill::BUFFER_FILL, 14, 500, vec![5, 6, 7, 8, 9, 0, 500, 600]),
        ]
    );
    assert_eq!(got_b, vec![(ctx_b, fill_k, memory_fill::BUFFER_FILL, 14, 500, vec![5, 6, 7, 8, 9, 0, 500, 600])]);
    destroy_context(ctx_a).unwrap();
    destroy_context(ctx_b).unwrap();
}

// ---------------------------------------------------------------- markers, args, allocations

#[test]
fn marker_ranges_nest_and_pair() {
    let _g = serial();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ctx = create_context().unwrap();
    let s2 = seen.clone();
    configure_callback_tracing_closure(ctx, Kind::Marker, None, move |r, _| {
        // SAFETY: the MARKER payload is live during the callback.
        let p = unsafe { &*r.payload.cast::<MarkerPayload>() };
        let msg = if p.message.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null message is a live C string during the callback.
            unsafe { std::ffi::CStr::from_ptr(p.message) }.to_string_lossy().into_owned()
        };
        s2.lock().unwrap().push((r.operation, r.phase, msg));
    })
    .unwrap();
    start_context(ctx).unwrap();
    assert_eq!(marker_range_push(c"outer"), 0);
    assert_eq!(marker_range_push(c"inner"), 1);
    marker_mark(c"here");
    assert_eq!(marker_range_pop(), 1);
    {
        let _r = marker_range(c"guard");
    }
    assert_eq!(marker_range_pop(), 0);
    assert_eq!(marker_range_pop(), -1);
    destroy_context(ctx).unwrap();
    let s = seen.lock().unwrap();
    let phases: Vec<(u32, u32)> = s.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(phases, vec![(1, 1), (1, 1), (0, 0), (1, 2), (1, 1), (1, 2), (1, 2)]);
    assert_eq!(s[0].2, "outer");
    assert_eq!(s[2].2, "here");
}

#[test]
fn argument_iteration_decodes_names_types_values() {
    let _g = serial();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let ctx = create_context().unwrap();
    let l2 = lines.clone();
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, _| {
        if r.phase != Phase::Exit as u32 {
            return;
        }
        let mut v = l2.lock().unwrap();
        // SAFETY: inside the callback; the payload is the UR_API payload.
        unsafe {
            iterate_operation_args(r, 1, |a| {
                v.push(format!("{}: {} {} = {} ({})", a.index, a.type_name, a.name, a.value, a.indirection_count));
                true
            })
        }
        .unwrap();
    })
    .unwrap();
    start_context(ctx).unwrap();
    let name = c"vadd";
    mock::call(mock::UR_KERNEL_CREATE, &[0xabc, name.as_ptr() as u64, 0xffff_ffff], || {});
    destroy_context(ctx).unwrap();
    assert_eq!(
        *lines.lock().unwrap(),
        vec![
            "0: ur_program_handle_t hProgram = 0xabc (0)".to_string(),
            "1: const char* pKernelName = \"vadd\" (1)".to_string(),
            "2: int32_t flags = -1 (0)".to_string(),
        ]
    );
    let unknown = CallbackRecord {
        context_id: ctx,
        thread_id: 0,
        correlation_id: CorrelationId::default(),
        kind: Kind::UrApi as u32,
        operation: 1000,
        phase: 1,
        payload: std::ptr::null(),
    };
    // SAFETY: the operation check fails before the payload is read.
    assert_eq!(unsafe { iterate_operation_args(&unknown, 0, |_| true) }, Err(ServiceError::OperationNotFound));
}

#[test]
fn allocations_feed_kernel_properties() {
    let _g = serial();
    let ctx = create_context().unwrap();
    let props = Arc::new(Mutex::new(Vec::new()));
    let p2 = props.clone();
    configure_callback_tracing_closure(ctx, Kind::KernelDispatch, None, move |r, _| {
        // SAFETY: the KERNEL_DISPATCH payload is live during the callback.
        let p = unsafe { &*r.payload.cast::<KernelDispatchPayload>() };
        // SAFETY: as above (no implicit allocations).
        *p2.lock().unwrap() = unsafe { kernel_allocation_properties(p) };
    })
    .unwrap();
    start_context(ctx).unwrap();
    emit_memory_alloc(&MemoryAllocPayload { ptr: 0x7000_0000, size: 4096, memory_type: MemoryType::Device, device: 1 });
    let mut p = KernelDispatchPayload { kernel_arg_count: 2, ..Default::default() };
    p.kernel_args[0] = 7;
    p.kernel_args[1] = 0x7000_0100;
    emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&p));
    emit_memory_free(0x7000_0000);
    assert_eq!(lookup_allocation(0x7000_0100), None);
    destroy_context(ctx).unwrap();
    assert_eq!(
        *props.lock().unwrap(),
        vec![AllocationProperties { base: 0x7000_0000, size: 4096, arg_index: 1, memory_type: MemoryType::Device }]
    );
}

#[test]
fn a_payload_of_the_wrong_kind_is_not_passed() {
    let _g = serial();
    let got = Arc::new(AtomicU64::new(1));
    let ctx = create_context().unwrap();
    let g2 = got.clone();
    configure_callback_tracing_closure(ctx, Kind::Sync, None, move |r, _| {
        g2.store(r.payload as u64, Ordering::SeqCst);
    })
    .unwrap();
    start_context(ctx).unwrap();
    let wrong = MarkerPayload { message: std::ptr::null(), range_id: 0 };
    emit_instant(Kind::Sync, sync_op::WAIT, Phase::None, Payload::Marker(&wrong));
    destroy_context(ctx).unwrap();
    assert_eq!(got.load(Ordering::SeqCst), 0);
}

#[test]
fn destroy_inside_a_callback_is_refused() {
    let _g = serial();
    let res = Arc::new(Mutex::new(None));
    let ctx = create_context().unwrap();
    let r2 = res.clone();
    let handle = ctx.handle;
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, move |r, _| {
        if r.phase == Phase::Enter as u32 {
            *r2.lock().unwrap() = Some(destroy_context(ContextId { handle }));
        }
    })
    .unwrap();
    start_context(ctx).unwrap();
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    destroy_context(ctx).unwrap();
    assert_eq!(*res.lock().unwrap(), Some(Err(ServiceError::Busy)));
}

/// The asymmetric (membarrier) fences are in use exactly when the kernel offers expedited
/// private membarrier and `OFFTRACE_NO_MEMBARRIER` is not set. A context's stop waits for the
/// registration to finish, so the flag is final once `destroy_context` returns.
#[test]
fn uses_membarrier_fences_exactly_where_the_kernel_offers_them() {
    let _g = serial();
    let c = create_context().unwrap();
    destroy_context(c).unwrap();
    // MEMBARRIER_CMD_QUERY (0) returns the supported commands as a bit mask.
    // SAFETY: membarrier takes integers only and touches no user memory.
    let supported = unsafe { libc::syscall(libc::SYS_membarrier, 0 as libc::c_long, 0 as libc::c_long) };
    // MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
    let want = (1 << 3) | (1 << 4);
    let offered = supported >= 0 && supported & want == want;
    let disabled = std::env::var_os("OFFTRACE_NO_MEMBARRIER").is_some();
    assert_eq!(asymmetric_fences(), offered && !disabled, "membarrier query: {supported:#x}, disabled: {disabled}");
}

#[test]
fn argument_iteration_covers_builtin_kinds() {
    let _g = serial();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let ctx = create_context().unwrap();
    let l2 = lines.clone();
    configure_callback_tracing_closure(ctx, Kind::MemoryCopy, None, move |r, _| {
        let mut v = l2.lock().unwrap();
        // SAFETY: inside the callback; the payload is the MEMORY_COPY payload.
        unsafe {
            iterate_operation_args(r, 0, |a| {
                v.push(format!("{} {}={}", a.type_name, a.name, a.value));
                a.index < 2 // stop after the third
            })
        }
        .unwrap();
    })
    .unwrap();
    start_context(ctx).unwrap();
    let p = MemoryCopyPayload { queue: 0x30, dst: 0x1000, src: 0, size: 64, ..Default::default() };
    emit_instant(Kind::MemoryCopy, memory_copy::USM_MEMCPY, Phase::None, Payload::MemoryCopy(&p));
    destroy_context(ctx).unwrap();
    assert_eq!(
        *lines.lock().unwrap(),
        vec!["offtrace_queue_id_t queue=0x30", "void* dst=0x1000", "const void* src=nullptr"]
    );
}

/// The re-entrancy guard of a callback delivery (the thread's busy word, no flag) covers every
/// emit and refuses `destroy_context` / `flush_buffer` of *other* contexts too, from a call's
/// callbacks and from an instant's.
#[test]
fn everything_nested_in_a_callback_is_guarded() {
    let _g = serial();
    let nested = Arc::new(AtomicUsize::new(0));
    let other = create_context().unwrap();
    let n = nested.clone();
    configure_callback_tracing_closure(other, Kind::Sync, None, move |_r, _u| {
        n.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    let batches = Arc::new(AtomicUsize::new(0));
    unsafe extern "C" fn count_batch(
        _c: ContextId,
        _b: BufferId,
        _r: *const *const BufferRecordHeader,
        n: usize,
        d: *mut c_void,
        _x: u64,
    ) {
        // SAFETY: `d` is the `AtomicUsize` of the test, alive until its context is destroyed.
        unsafe { &*d.cast::<AtomicUsize>() }.fetch_add(n, Ordering::Relaxed);
    }
    let rec = std::mem::size_of::<MemoryCopyRecord>();
    // SAFETY: `count_batch` is sound for any delivery with the test's counter.
    let buf = unsafe {
        create_buffer(
            other,
            64 * rec,
            rec,
            BufferPolicy::Lossless,
            count_batch,
            Arc::as_ptr(&batches).cast_mut().cast(),
        )
    }
    .unwrap();
    configure_buffer_tracing_service(other, Kind::MemoryCopy, None, buf).unwrap();
    start_context(other).unwrap();

    let results = Arc::new(Mutex::new(Vec::new()));
    let ctx = create_context().unwrap();
    let r2 = results.clone();
    let sync = SyncPayload { object: 1, event_count: 1, ..Default::default() };
    let copy = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, ..Default::default() };
    let body = move |_r: &CallbackRecord, _u: &mut UserData| {
        let t = emit_enter(Kind::Sync, sync_op::WAIT, Payload::Sync(&sync));
        assert!(!t.is_delivered());
        emit_exit(t, Payload::Sync(&sync));
        emit_instant(Kind::Sync, sync_op::WAIT, Phase::None, Payload::Sync(&sync));
        emit_activity(Kind::MemoryCopy, 0, 1, 2, 3, Payload::MemoryCopy(&copy));
        r2.lock().unwrap().push((destroy_context(other), flush_buffer(buf)));
    };
    configure_callback_tracing_closure(ctx, Kind::UrApi, None, body.clone()).unwrap();
    configure_callback_tracing_closure(ctx, Kind::CodeObject, None, body).unwrap();
    start_context(ctx).unwrap();
    mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    emit_instant(Kind::CodeObject, 0, Phase::Load, Payload::None);
    destroy_context(ctx).unwrap();
    // Outside any callback: delivered, and destroy works.
    emit_instant(Kind::Sync, sync_op::WAIT, Phase::None, Payload::Sync(&sync));
    emit_activity(Kind::MemoryCopy, 0, 1, 2, 3, Payload::MemoryCopy(&copy));
    destroy_context(other).unwrap();
    assert_eq!(nested.load(Ordering::Relaxed), 1);
    assert_eq!(batches.load(Ordering::Relaxed), 1);
    let r = results.lock().unwrap();
    assert_eq!(r.len(), 3);
    assert!(r.iter().all(|x| *x == (Err(ServiceError::Busy), Err(ServiceError::Busy))));
}

/// Device activity with known device times reaches callback services too: phase `Complete`,
/// the causing call's correlation id (given explicitly, from another thread), the payload's
/// device times.
#[test]
fn activity_reaches_callbacks_with_the_launching_calls_correlation() {
    let _g = serial();
    let seen = Arc::new(Mutex::new(Vec::<(u32, u64, u64, u64)>::new()));
    let ctx = create_context().unwrap();
    let s = seen.clone();
    configure_callback_tracing_closure(ctx, Kind::KernelDispatch, None, move |r, _| {
        // SAFETY: a KERNEL_DISPATCH record's payload is a KernelDispatchPayload, live during the callback.
        let p = unsafe { &*r.payload.cast::<KernelDispatchPayload>() };
        s.lock().unwrap().push((r.phase, r.correlation_id.internal, p.device_start, p.device_end));
    })
    .unwrap();
    start_context(ctx).unwrap();
    let corr = mock::call(mock::UR_QUEUE_FINISH, &[1], || {});
    std::thread::spawn(move || {
        let kd = KernelDispatchPayload { device_start: 1_000, device_end: 3_000, ..Default::default() };
        emit_activity(Kind::KernelDispatch, kernel_dispatch::LAUNCH, corr, 1_000, 3_000, Payload::KernelDispatch(&kd))
    })
    .join()
    .unwrap();
    destroy_context(ctx).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(Phase::Complete as u32, corr, 1_000, 3_000)]);
}

/// kind, operation, phase, correlation, user data, external correlation of a callback record.
type CallbackView = (u32, u32, u32, u64, u64, u64);

/// What context `a` sees of a fixed sequence of emits: its callback records and its buffer
/// records, with correlation ids and user data renumbered by first appearance (they differ from
/// run to run) and the context handle dropped. Set up `a` (a buffer for `UR_API`, callbacks for
/// `UR_API` when `ur_callbacks`, callbacks for `MEMORY_ALLOC`, the UR services with `ops` as
/// their operation list), start it and, with `other`, a second context with callbacks for both
/// kinds.
fn one_context_view(ops: Option<&[u32]>, other: bool, ur_callbacks: bool) -> (Vec<CallbackView>, Vec<Vec<u64>>) {
    let seen = Seen::default();
    let batches = Batches::default();
    let ctx = create_context().unwrap();
    // SAFETY: `record_cb` / `batch_cb` are sound with a `Seen` / `Batches` that outlive the context.
    let buf = unsafe {
        let data = &seen as *const Seen as *mut c_void;
        if ur_callbacks {
            configure_callback_tracing_service(ctx, Kind::UrApi, ops, record_cb, data).unwrap();
        }
        configure_callback_tracing_service(ctx, Kind::MemoryAlloc, None, record_cb, data).unwrap();
        let buf =
            create_buffer(ctx, 64 * REC, 64 * REC, BufferPolicy::Lossless, batch_cb, batches_ptr(&batches)).unwrap();
        configure_buffer_tracing_service(ctx, Kind::UrApi, ops, buf).unwrap();
        buf
    };
    let other_seen = Seen::default();
    let other_ctx = other.then(|| {
        let c = ctx_with_ur(&other_seen, None);
        // SAFETY: as above.
        unsafe {
            configure_callback_tracing_service(
                c,
                Kind::MemoryAlloc,
                None,
                record_cb,
                &other_seen as *const Seen as *mut c_void,
            )
            .unwrap()
        };
        start_context(c).unwrap();
        c
    });
    start_context(ctx).unwrap();
    push_external_correlation_id(ctx, 0, 77).unwrap();
    mock::call(mock::UR_USM_DEVICE_ALLOC, &[1, 64, 2], || {
        emit_instant(
            Kind::MemoryAlloc,
            memory_alloc::ALLOC,
            Phase::None,
            Payload::MemoryAlloc(&MemoryAllocPayload { ptr: 0x1000, size: 64, ..Default::default() }),
        );
        mock::call(mock::UR_QUEUE_FINISH, &[3], || {});
    });
    pop_external_correlation_id(ctx, 0).unwrap();
    mock::call(mock::UR_KERNEL_CREATE, &[4, 5, 6], || {});
    flush_buffer(buf).unwrap();
    if let Some(c) = other_ctx {
        destroy_context(c).unwrap();
        assert_eq!(other_seen.records.lock().unwrap().len(), 7, "the other context saw every record");
    }
    destroy_context(ctx).unwrap();
    let mut ids = Vec::new();
    let mut renumber = |v: u64| -> u64 {
        if v == 0 {
            return 0;
        }
        let base = if v.is_multiple_of(10) && ids.contains(&(v / 10)) { v / 10 } else { v };
        let n = ids.iter().position(|&x| x == base).unwrap_or_else(|| {
            ids.push(base);
            ids.len() - 1
        }) as u64
            + 1;
        if base == v { n } else { n * 10 }
    };
    let callbacks = seen
        .records
        .lock()
        .unwrap()
        .iter()
        .map(|&(_, corr, kind, op, phase, user, ext)| (kind, op, phase, renumber(corr), renumber(user), ext))
        .collect();
    let records = batches
        .records
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            let mut w = r.0.clone();
            w[2] = 0; // the context's handle
            w[3] = renumber(w[3]); // internal correlation id
            w[5] = 0; // thread id
            assert!(w[7] >= w[6] && w[6] > 0, "a buffered call's end follows its start");
            (w[6], w[7]) = (0, 0);
            w
        })
        .collect();
    (callbacks, records)
}

fn batches_ptr(b: &Batches) -> *mut c_void {
    b as *const Batches as *mut c_void
}

#[test]
fn the_one_context_paths_deliver_what_the_several_contexts_path_does() {
    let _g = serial();
    // One context, services for every operation: the enter, exit and instant paths for one
    // context; a second context started: the loops over contexts; an operation list (of
    // every operation used here): the one-context paths hand over to the loops.
    let ops = [mock::UR_QUEUE_FINISH, mock::UR_USM_DEVICE_ALLOC, mock::UR_KERNEL_CREATE];
    let one = one_context_view(None, false, true);
    let several = one_context_view(None, true, true);
    let listed = one_context_view(Some(&ops), false, true);
    assert_eq!(one.0.len(), 7, "{:?}", one.0);
    assert_eq!(one.1.len(), 3, "{:?}", one.1);
    // The outer call's exit and its record carry the external id pushed before it; the
    // nested call and the instant too; the last call none.
    let (ur, alloc) = (Kind::UrApi as u32, Kind::MemoryAlloc as u32);
    assert_eq!(
        one.0,
        vec![
            (ur, mock::UR_USM_DEVICE_ALLOC, Phase::Enter as u32, 1, 10, 77),
            (alloc, memory_alloc::ALLOC, Phase::None as u32, 1, 0, 77),
            (ur, mock::UR_QUEUE_FINISH, Phase::Enter as u32, 2, 20, 77),
            (ur, mock::UR_QUEUE_FINISH, Phase::Exit as u32, 2, 20, 77),
            (ur, mock::UR_USM_DEVICE_ALLOC, Phase::Exit as u32, 1, 10, 77),
            (ur, mock::UR_KERNEL_CREATE, Phase::Enter as u32, 3, 30, 0),
            (ur, mock::UR_KERNEL_CREATE, Phase::Exit as u32, 3, 30, 0),
        ]
    );
    assert_eq!(several, one);
    assert_eq!(listed, one);
    // A buffer only for the calls (the exit writes the record without a callback): the same
    // records, and the instant's callback.
    for (ops, other) in [(None, false), (None, true), (Some(&ops[..]), false)] {
        let (callbacks, records) = one_context_view(ops, other, false);
        assert_eq!(records, one.1, "{ops:?} {other}");
        assert_eq!(callbacks.len(), 1, "{callbacks:?}");
        assert_eq!(callbacks[0].0, alloc);
    }
}
