//! The layer against a mock runtime (unit tests, no OpenCL installed): a dispatch table of Rust
//! functions stands for the ICD loader's, and the tests call the layer's table as a program
//! would. They check what the layer changes in the program's view and what it hides again.

use std::ffi::{CStr, c_void};
use std::ptr;
use std::sync::Mutex;

use crate::api::{DISPATCH_SLOTS, IcdDispatch};
use crate::call::*;
use crate::counters::{
    CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY, PerformanceCounterConfigCodeplay,
    PerformanceCounterDescCodeplay,
};
use crate::layer::clInitLayer;

/// What the mock runtime was asked: the properties list of each queue it created.
static CREATED: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());
const DEVICE: usize = 0xd00;
const EXTENSIONS: &[u8] = b"cl_khr_fp64 cl_khr_il_program\0";

unsafe extern "C" fn create_queue(
    _c: *mut c_void,
    _d: *mut c_void,
    props: *mut c_void,
    err: *mut c_void,
) -> *mut c_void {
    let mut list = Vec::new();
    let p = props.cast::<u64>();
    let mut i = 0;
    // SAFETY: a zero-terminated list from the layer.
    while !p.is_null() && unsafe { *p.add(i) } != 0 {
        list.extend(unsafe { [*p.add(i), *p.add(i + 1)] });
        i += 2;
    }
    let mut g = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    g.push(list);
    set_errcode(err, CL_SUCCESS);
    (0x1000 + g.len()) as *mut c_void
}

unsafe extern "C" fn queue_info(q: *mut c_void, param: u32, size: usize, value: *mut c_void, ret: *mut c_void) -> i32 {
    let g = CREATED.lock().unwrap_or_else(|e| e.into_inner());
    let Some(list) = g.get((q as usize).wrapping_sub(0x1001)) else { return -36 };
    let v: u64 = match param {
        0x1093 => list.chunks(2).find(|p| p[0] == CL_QUEUE_PROPERTIES).map_or(0, |p| p[1]),
        0x1092 => 1,
        _ => return CL_INVALID_VALUE,
    };
    if !value.is_null() && size >= 8 {
        // SAFETY: the caller's buffer of `size` bytes.
        unsafe { value.cast::<u64>().write_unaligned(v) };
    }
    if !ret.is_null() {
        // SAFETY: the caller's size_t.
        unsafe { *ret.cast::<usize>() = 8 };
    }
    CL_SUCCESS
}

unsafe extern "C" fn device_info(
    _d: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    ret: *mut c_void,
) -> i32 {
    if param != CL_DEVICE_EXTENSIONS {
        return CL_INVALID_VALUE;
    }
    if !value.is_null() {
        if size < EXTENSIONS.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: the caller's buffer, large enough.
        unsafe { ptr::copy_nonoverlapping(EXTENSIONS.as_ptr(), value.cast::<u8>(), EXTENSIONS.len()) };
    }
    if !ret.is_null() {
        // SAFETY: the caller's size_t.
        unsafe { *ret.cast::<usize>() = EXTENSIONS.len() };
    }
    CL_SUCCESS
}

unsafe extern "C" fn release_queue(_q: *mut c_void) -> i32 {
    CL_SUCCESS
}

/// The mock runtime's events: their `CL_EVENT_COMMAND_EXECUTION_STATUS`; released ones; every
/// event an event function was called with (status and profiling queries, releases).
static EVENTS: Mutex<Vec<(usize, i32)>> = Mutex::new(Vec::new());
static RELEASED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static EVENT_CALLS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn called_with(event: usize) -> usize {
    EVENT_CALLS.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|&&e| e == event).count()
}

fn set_status(event: usize, status: i32) {
    let mut g = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    g.retain(|&(e, _)| e != event);
    g.push((event, status));
}

fn status_of(event: usize) -> Option<i32> {
    EVENTS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|&&(e, _)| e == event).map(|&(_, s)| s)
}

unsafe extern "C" fn event_info(
    ev: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    _ret: *mut c_void,
) -> i32 {
    EVENT_CALLS.lock().unwrap_or_else(|e| e.into_inner()).push(ev as usize);
    let Some(status) = status_of(ev as usize) else {
        return -58; /* CL_INVALID_EVENT */
    };
    if param != CL_EVENT_COMMAND_EXECUTION_STATUS || size < 4 || value.is_null() {
        return CL_INVALID_VALUE;
    }
    // SAFETY: the caller's 4-byte buffer.
    unsafe { value.cast::<i32>().write_unaligned(status) };
    CL_SUCCESS
}

/// Profiling results as a runtime gives them: only for a complete command.
unsafe extern "C" fn event_profiling(
    ev: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    _ret: *mut c_void,
) -> i32 {
    EVENT_CALLS.lock().unwrap_or_else(|e| e.into_inner()).push(ev as usize);
    match status_of(ev as usize) {
        Some(CL_COMPLETE) if size >= 8 && !value.is_null() => {
            // SAFETY: the caller's 8-byte buffer.
            unsafe { value.cast::<u64>().write_unaligned(1_000 * ev as u64 + u64::from(param & 0xf)) };
            CL_SUCCESS
        }
        Some(_) => CL_PROFILING_INFO_NOT_AVAILABLE,
        None => -58,
    }
}

unsafe extern "C" fn release_event(ev: *mut c_void) -> i32 {
    EVENT_CALLS.lock().unwrap_or_else(|e| e.into_inner()).push(ev as usize);
    RELEASED.lock().unwrap_or_else(|e| e.into_inner()).push(ev as usize);
    CL_SUCCESS
}

/// The events the mock runtime was asked to call back.
static CALLBACKS_SET: Mutex<Vec<usize>> = Mutex::new(Vec::new());
const MARKER_EVENT: usize = 0xf2;

unsafe extern "C" fn set_event_callback(ev: *mut c_void, _t: i32, _f: *mut c_void, _u: *mut c_void) -> i32 {
    CALLBACKS_SET.lock().unwrap_or_else(|e| e.into_inner()).push(ev as usize);
    CL_SUCCESS
}

unsafe extern "C" fn retain_event(_ev: *mut c_void) -> i32 {
    CL_SUCCESS
}

/// A marker whose event is `MARKER_EVENT`, running.
unsafe extern "C" fn enqueue_marker(_q: *mut c_void, _n: u32, _w: *mut c_void, ev: *mut c_void) -> i32 {
    set_status(MARKER_EVENT, 1 /* CL_RUNNING */);
    if !ev.is_null() {
        // SAFETY: the caller's cl_event slot.
        unsafe { *ev.cast::<usize>() = MARKER_EVENT };
    }
    CL_SUCCESS
}

fn layer_table() -> &'static IcdDispatch {
    // One layer table per process (`clInitLayer` keeps its first target): built once.
    static TABLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let t = *TABLE.get_or_init(|| ptr::from_ref(init_layer_table()) as usize);
    // SAFETY: the address of the layer's table, which lives for the process.
    unsafe { &*(t as *const IcdDispatch) }
}

fn init_layer_table() -> &'static IcdDispatch {
    let mut slots = [ptr::null_mut::<c_void>(); DISPATCH_SLOTS];
    // SAFETY: IcdDispatch is DISPATCH_SLOTS nullable pointers (layer::tests checks the size).
    let mut target = unsafe { std::mem::transmute::<[*mut c_void; DISPATCH_SLOTS], IcdDispatch>(slots) };
    target.clCreateCommandQueueWithProperties = Some(create_queue);
    target.clGetCommandQueueInfo = Some(queue_info);
    target.clGetDeviceInfo = Some(device_info);
    target.clReleaseCommandQueue = Some(release_queue);
    target.clGetEventInfo = Some(event_info);
    target.clGetEventProfilingInfo = Some(event_profiling);
    target.clReleaseEvent = Some(release_event);
    target.clRetainEvent = Some(retain_event);
    target.clSetEventCallback = Some(set_event_callback);
    target.clEnqueueMarkerWithWaitList = Some(enqueue_marker);
    // SAFETY: as above, back.
    slots = unsafe { std::mem::transmute::<IcdDispatch, [*mut c_void; DISPATCH_SLOTS]>(target) };
    let mut n = 0u32;
    let mut table: *const IcdDispatch = ptr::null();
    // SAFETY: a full table and two out pointers.
    let r = unsafe { clInitLayer(DISPATCH_SLOTS as u32, slots.as_ptr().cast(), &mut n, &mut table) };
    assert_eq!((r, n as usize), (CL_SUCCESS, DISPATCH_SLOTS));
    // SAFETY: the layer's table lives for the process.
    unsafe { &*table }
}

#[test]
fn the_layer_adds_profiling_and_counters_and_hides_them_again() {
    let t = layer_table();
    let create = t.clCreateCommandQueueWithProperties.expect("wrapped");
    let info = t.clGetCommandQueueInfo.expect("wrapped");
    let dev = DEVICE as *mut c_void;
    let mut err = 1;

    // A queue without profiling: the runtime is asked for profiling; the program does not see it.
    let mut props = [CL_QUEUE_PROPERTIES, 1 /* out of order */, 0];
    // SAFETY (all calls below): arguments as a program passes them, buffers of the sizes given.
    let q = unsafe { create(ptr::null_mut(), dev, props.as_mut_ptr().cast(), (&raw mut err).cast()) };
    assert_eq!(err, CL_SUCCESS);
    assert_eq!(
        CREATED.lock().unwrap_or_else(|e| e.into_inner()).last(),
        Some(&vec![CL_QUEUE_PROPERTIES, 1 | CL_QUEUE_PROFILING_ENABLE])
    );
    let mut v = 0u64;
    assert_eq!(unsafe { info(q, 0x1093, 8, (&raw mut v).cast(), ptr::null_mut()) }, CL_SUCCESS);
    assert_eq!(v, 1, "CL_QUEUE_PROPERTIES as the program asked");
    let mut list = [0u64; 8];
    let mut size = 0usize;
    assert_eq!(
        unsafe { info(q, CL_QUEUE_PROPERTIES_ARRAY, 64, list.as_mut_ptr().cast(), (&raw mut size).cast()) },
        CL_SUCCESS
    );
    assert_eq!(&list[..size / 8], &props[..], "CL_QUEUE_PROPERTIES_ARRAY is the program's own list");

    // No properties at all: profiling is the only one the runtime gets.
    let _ = unsafe { create(ptr::null_mut(), dev, ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(
        CREATED.lock().unwrap_or_else(|e| e.into_inner()).last(),
        Some(&vec![CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE])
    );

    // Codeplay counters: the key never reaches the runtime; an unknown uuid is CL_INVALID_VALUE.
    let mut descs = [PerformanceCounterDescCodeplay { uuid: 1, data: ptr::null_mut() }];
    let config = PerformanceCounterConfigCodeplay { count: 1, descs: descs.as_mut_ptr() };
    let mut props = [CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY, &raw const config as u64, 0];
    let before = CREATED.lock().unwrap_or_else(|e| e.into_inner()).len();
    let q2 = unsafe { create(ptr::null_mut(), dev, props.as_mut_ptr().cast(), (&raw mut err).cast()) };
    assert!(!q2.is_null() && err == CL_SUCCESS);
    assert_eq!(
        CREATED.lock().unwrap_or_else(|e| e.into_inner()).last(),
        Some(&vec![CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE])
    );
    assert!(crate::queues::counters(q2).is_some());
    // SAFETY: `config.descs` points at `descs`, alive on this frame.
    unsafe { (*config.descs).uuid = 0xdead };
    let q3 = unsafe { create(ptr::null_mut(), dev, props.as_mut_ptr().cast(), (&raw mut err).cast()) };
    assert!(q3.is_null());
    assert_eq!(err, CL_INVALID_VALUE);
    assert_eq!(
        CREATED.lock().unwrap_or_else(|e| e.into_inner()).len(),
        before + 1,
        "the bad queue never reached the runtime"
    );

    // Extensions: the runtime's, then the two the layer provides.
    let dinfo = t.clGetDeviceInfo.expect("wrapped");
    let mut n = 0usize;
    assert_eq!(unsafe { dinfo(dev, CL_DEVICE_EXTENSIONS, 0, ptr::null_mut(), (&raw mut n).cast()) }, CL_SUCCESS);
    let mut buf = vec![0u8; n];
    assert_eq!(
        unsafe { dinfo(dev, CL_DEVICE_EXTENSIONS, n - 1, buf.as_mut_ptr().cast(), ptr::null_mut()) },
        CL_INVALID_VALUE
    );
    assert_eq!(unsafe { dinfo(dev, CL_DEVICE_EXTENSIONS, n, buf.as_mut_ptr().cast(), ptr::null_mut()) }, CL_SUCCESS);
    let text = CStr::from_bytes_until_nul(&buf).expect("NUL").to_str().expect("utf8");
    assert_eq!(text, "cl_khr_fp64 cl_khr_il_program cl_khr_create_command_queue cl_codeplay_performance_counters ");
    // The counters list, and what the runtime does not know stays its answer.
    assert_eq!(
        unsafe { dinfo(dev, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, 0, ptr::null_mut(), (&raw mut n).cast()) },
        CL_SUCCESS
    );
    assert_eq!(n % size_of::<crate::counters::PerformanceCounterCodeplay>(), 0);
    assert!(n / size_of::<crate::counters::PerformanceCounterCodeplay>() >= 3);
    assert_eq!(unsafe { dinfo(dev, 0x1234, 0, ptr::null_mut(), (&raw mut n).cast()) }, CL_INVALID_VALUE);

    // A slot the runtime does not provide answers CL_INVALID_OPERATION instead of crashing.
    let finish = t.clFinish.expect("wrapped");
    assert_eq!(unsafe { finish(q) }, CL_INVALID_OPERATION);
}

/// An in-order queue's FIFO (`in_order.rs`) reports the completed prefix and releases its
/// events; a command that sits before a completed one in the FIFO but is not complete itself
/// (threads pushed in another order than they enqueued) goes back, and is reported once it is.
#[test]
fn an_in_order_fifo_reports_completed_prefixes_and_keeps_what_is_still_running() {
    let _ = layer_table();
    let events = [0xe1, 0xe2, 0xe3, 0xe4, 0xe5];
    // This test's events among the released ones (other tests release theirs meanwhile when
    // they run as threads of one process, as under plain `cargo test`).
    let released = || {
        let mut v = RELEASED.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.retain(|e| events.contains(e));
        v.sort_unstable();
        v
    };
    // Not registered with the harvest thread: this test alone harvests it.
    let fifo = crate::in_order::Fifo::default();
    for e in events {
        set_status(e, 1 /* CL_RUNNING */);
        let _ = fifo.push(crate::enqueue::Pending::for_test(e));
    }
    assert_eq!(fifo.poll(), 0, "nothing complete, nothing taken");
    assert!(released().is_empty());

    set_status(0xe1, CL_COMPLETE);
    set_status(0xe2, CL_COMPLETE);
    assert_eq!(fifo.poll(), 2, "the completed prefix, found by the binary search");
    assert_eq!(released(), vec![0xe1, 0xe2]);
    assert_eq!(crate::in_order::fifo_len(&fifo), 3);

    // 0xe4 completed before 0xe3: the prefix up to 0xe4 is taken, 0xe3 goes back.
    set_status(0xe4, CL_COMPLETE);
    assert_eq!(fifo.poll(), 2);
    assert_eq!(released(), vec![0xe1, 0xe2, 0xe4]);
    assert_eq!(crate::in_order::fifo_len(&fifo), 2, "0xe3 and 0xe5 are still waiting");

    // After a clFinish everything pushed before it is complete: no status query needed.
    set_status(0xe3, CL_COMPLETE);
    set_status(0xe5, CL_COMPLETE);
    fifo.harvest_upto(fifo.pushed());
    assert_eq!(released(), events.to_vec());
    assert_eq!(crate::in_order::fifo_len(&fifo), 0);
}

/// The harvest thread's rounds take whole blocks of a FIFO, or all of it once all is complete:
/// a completed part of a block waits (moving it out command by command cost more than its
/// report's own work on the harvest thread), and nothing complete is left behind for good.
#[test]
fn the_harvest_thread_takes_whole_blocks_or_everything() {
    let _ = layer_table();
    let block = 256;
    let events: Vec<usize> = (0..block + 6).map(|i| 0x20_0000 + i).collect();
    let released = || {
        let r = RELEASED.lock().unwrap_or_else(|e| e.into_inner());
        events.iter().filter(|e| r.contains(e)).count()
    };
    // Not registered with the harvest thread: this test alone harvests it.
    let fifo = crate::in_order::Fifo::default();
    for &e in &events {
        set_status(e, 1 /* CL_RUNNING */);
        let _ = fifo.push(crate::enqueue::Pending::for_test(e));
    }
    for &e in &events[..10] {
        set_status(e, CL_COMPLETE);
    }
    assert_eq!(fifo.poll_whole_blocks(), 10, "found complete");
    assert_eq!(released(), 0, "a part of the first block waits");
    for &e in &events[..block + 2] {
        set_status(e, CL_COMPLETE);
    }
    assert_eq!(fifo.poll_whole_blocks(), block + 2);
    assert_eq!(released(), block, "the first block, whole");
    assert_eq!(crate::in_order::fifo_len(&fifo), 6);
    for &e in &events {
        set_status(e, CL_COMPLETE);
    }
    // All complete, but the last block is not full and a command was pushed since the
    // previous round: the program is filling it, it stays.
    let late = 0x20_1000;
    set_status(late, CL_COMPLETE);
    let _ = fifo.push(crate::enqueue::Pending::for_test(late));
    assert_eq!(fifo.poll_whole_blocks(), 7);
    assert_eq!(released(), block, "the last block, not full, stays while pushes come");
    // No push since: all of it.
    assert_eq!(fifo.poll_whole_blocks(), 7);
    assert_eq!(released(), events.len(), "all complete and no push since: all taken");
    assert!(RELEASED.lock().unwrap_or_else(|e| e.into_inner()).contains(&late));
    assert_eq!(crate::in_order::fifo_len(&fifo), 0);
    // Pushes, then a `clFinish` (all known complete): all of it at once, pushes or not.
    let finished = [0x20_1001, 0x20_1002];
    for e in finished {
        set_status(e, CL_COMPLETE);
        let _ = fifo.push(crate::enqueue::Pending::for_test(e));
    }
    fifo.completed_upto(fifo.pushed());
    assert_eq!(fifo.poll_whole_blocks(), 2);
    assert_eq!(crate::in_order::fifo_len(&fifo), 0, "known complete: the last block taken");
}

/// A command of an out-of-order queue has no completion callback (Intel's CPU runtime runs
/// callbacks inside its own tasks; a SYCL program deadlocked in that runtime more often with them:
/// docs/history/hang-2026-11-26-query-metrics.md): the harvest polls its event, leaves it while
/// it runs, and once it is complete reads its times and releases it.
#[test]
fn an_out_of_order_command_is_polled_and_reported_once_complete() {
    let _ = layer_table();
    let ev = 0xf1;
    set_status(ev, 1 /* CL_RUNNING */);
    crate::enqueue::file_unordered_for_test(crate::enqueue::Pending::for_test(ev));
    // Polled by this test, or by a harvest thread another test started.
    crate::enqueue::poll_unordered();
    assert!(called_with(ev) >= 1, "its status was asked");
    assert!(!RELEASED.lock().unwrap_or_else(|e| e.into_inner()).contains(&ev), "still running");
    assert!(crate::enqueue::pending_count() >= 1);

    set_status(ev, CL_COMPLETE);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !RELEASED.lock().unwrap_or_else(|e| e.into_inner()).contains(&ev) {
        crate::enqueue::poll_unordered();
        assert!(std::time::Instant::now() < deadline, "the completed command was never reported");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(called_with(ev) >= 4, "status, START and END read, then the event released");
}

/// At exit the harvest thread's last poll takes every out-of-order command that completed, not a
/// round's 1,024: a program that exits right after its `clFinish` left the rest without device
/// times (`many_kernels --out-of-order --kernels 20000` on PoCL: 14,336 of 20,100 timed). Runs in
/// a process of its own: the harvest thread stops for good, and the other tests here poll the
/// out-of-order list themselves, outside the harvest thread's rounds (a poll of theirs holding
/// this test's commands while the last poll runs would leave them unreported).
#[test]
fn the_last_poll_at_stop_reports_every_completed_out_of_order_command() {
    offtrace_testing::in_own_process(
        "mock_runtime_tests::the_last_poll_at_stop_reports_every_completed_out_of_order_command",
        &[],
        the_last_poll_at_stop_reports_every_completed_out_of_order_command_alone,
    );
}

fn the_last_poll_at_stop_reports_every_completed_out_of_order_command_alone() {
    let _ = layer_table();
    let events: Vec<usize> = (0..1500).map(|i| 0x10_0000 + i).collect();
    for &e in &events {
        set_status(e, CL_COMPLETE);
        crate::enqueue::file_unordered_for_test(crate::enqueue::Pending::for_test(e));
    }
    // What the layer's finish does first.
    let left = crate::in_order::stop();
    assert!(left.is_empty(), "no in-order command here");
    let released = RELEASED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let missing = events.iter().filter(|e| !released.contains(e)).count();
    assert_eq!(missing, 0, "{missing} of {} completed commands not reported at stop", events.len());
}

/// Enqueued through the layer on an out-of-order queue while activity is recorded: the layer asks
/// the runtime for no completion callback, and reports the command by polling once its event is
/// complete. Fails if the layer goes back to a callback per out-of-order command.
#[test]
fn the_layer_registers_no_callback_on_an_out_of_order_command() {
    let t = layer_table();
    let ctx = offtrace_core::create_context().expect("context");
    offtrace_core::configure_callback_tracing_closure(ctx, offtrace_core::Kind::Sync, None, |_, _| {})
        .expect("sync activity");
    offtrace_core::start_context(ctx).expect("start");
    let create = t.clCreateCommandQueueWithProperties.expect("wrapped");
    let marker = t.clEnqueueMarkerWithWaitList.expect("wrapped");
    let mut props = [CL_QUEUE_PROPERTIES, 1 /* out of order */, 0];
    let mut err = 1;
    // SAFETY: arguments as a program passes them.
    let q = unsafe { create(ptr::null_mut(), DEVICE as *mut c_void, props.as_mut_ptr().cast(), (&raw mut err).cast()) };
    assert_eq!(err, CL_SUCCESS);
    let mut ev: *mut c_void = ptr::null_mut();
    // SAFETY: as above; one cl_event slot.
    assert_eq!(unsafe { marker(q, 0, ptr::null_mut(), (&raw mut ev).cast()) }, CL_SUCCESS);
    assert_eq!(ev as usize, MARKER_EVENT);
    assert!(CALLBACKS_SET.lock().unwrap_or_else(|e| e.into_inner()).is_empty(), "a callback was registered");

    set_status(MARKER_EVENT, CL_COMPLETE);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !RELEASED.lock().unwrap_or_else(|e| e.into_inner()).contains(&MARKER_EVENT) {
        crate::enqueue::poll_unordered();
        assert!(std::time::Instant::now() < deadline, "the completed marker was never reported");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let _ = offtrace_core::stop_context(ctx);
}
