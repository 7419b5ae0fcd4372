//! The functions the layer does more than trace: queue creation (profiling forced on, Codeplay
//! counters configured), the queries whose answers the layer must keep as the program expects
//! them, extension lookup, and the objects it reports (kernels, memory, programs).
//!
//! Each hook has the generated wrapper's signature with the next layer's entry point first; the
//! wrapper has already emitted the enter record and emits the exit with the hook's result. A
//! hook calls the next layer directly (`next()`), never its own wrappers, so nothing it does is
//! traced.
//!
//! Profiling on every queue, invisibly: the layer adds `CL_QUEUE_PROFILING_ENABLE` to the
//! properties of every queue it creates (if the runtime refuses the queue with it, the program's
//! own properties are tried as given). For a queue whose program did not ask for profiling,
//! `clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)` masks the bit out again, and
//! `clGetEventProfilingInfo` answers `CL_PROFILING_INFO_NOT_AVAILABLE` as the runtime would
//! have; `CL_QUEUE_PROPERTIES_ARRAY` returns the program's own list.

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

use offtrace_core::{
    Kind, MemoryType, Payload, Phase, QueuePayload, code_object, emit_instant, kind_enabled, queue_flags, queue_op,
};

use crate::api::{EXT_NEXT, extension_wrapper, next, sig};
use crate::call::*;
use crate::counters::{
    self, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY, CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY,
};
use crate::objects::{self, Counted, MemOrigin, Release};
use crate::queues::{self, QueueInfo};

/// At most this many key/value pairs are read from a properties list.
const MAX_PROPERTIES: usize = 64;

// ---- queues ----------------------------------------------------------------------------------

const CL_QUEUE_ON_DEVICE: u64 = 1 << 2;
const CL_QUEUE_PRIORITY_KHR: u64 = 0x1096;
const CL_QUEUE_PRIORITY_HIGH_KHR: u64 = 1 << 0;
const CL_QUEUE_PRIORITY_LOW_KHR: u64 = 1 << 2;

/// The `QUEUE` record's flags: what the program asked for (before the layer adds profiling).
fn queue_flags(info: &QueueInfo) -> u64 {
    let p = info.app_properties;
    let mut flags = 0;
    for (set, bit) in [
        (p & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE == 0, queue_flags::IN_ORDER),
        (p & CL_QUEUE_PROFILING_ENABLE != 0, queue_flags::PROFILING),
        (p & CL_QUEUE_ON_DEVICE != 0, queue_flags::ON_DEVICE),
        (info.counters.is_some(), queue_flags::PERFORMANCE_COUNTERS),
    ] {
        if set {
            flags |= bit;
        }
    }
    let priority = info.app_property_list.as_deref().unwrap_or_default().chunks(2).find_map(|kv| match *kv {
        [k, v] if k == CL_QUEUE_PRIORITY_KHR => Some(v),
        _ => None,
    });
    match priority {
        Some(CL_QUEUE_PRIORITY_HIGH_KHR) => flags | queue_flags::PRIORITY_HIGH,
        Some(CL_QUEUE_PRIORITY_LOW_KHR) => flags | queue_flags::PRIORITY_LOW,
        _ => flags,
    }
}

fn register_queue(queue: *mut c_void, context: *mut c_void, device: *mut c_void, info: QueueInfo) {
    if queue.is_null() {
        return;
    }
    // The device first: the calibration's counters name it.
    objects::device_seen(device, context);
    crate::calibration::calibrate_device(device, queue);
    let flags = queue_flags(&info);
    let mut info = info;
    if info.counters.is_none() && counters::requested_for_every_queue() {
        // `record --query-metrics codeplay`: every counter on every queue, values per command.
        info.counters = Some(counters::shared(counters::CounterSet { counters: counters::device_counters() }));
    }
    // Queues with counters keep a completion callback per command (the counters are read there).
    let in_order = info.app_properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE == 0;
    let fifo = (in_order && info.counters.is_none()).then(crate::in_order::fifo_for_new_queue);
    let info = QueueInfo { nested: crate::call::nested_now(), fifo, ..info };
    if kind_enabled(Kind::Queue) && !info.nested {
        let p = QueuePayload { queue: queue as u64, device: device as u64, context: context as u64, flags };
        emit_instant(Kind::Queue, queue_op::CREATE, Phase::None, Payload::Queue(&p));
    }
    queues::insert(queue, info);
}

pub(crate) unsafe fn clCreateCommandQueue(
    next: sig::clCreateCommandQueue_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: u64,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: the program's arguments, with one more property bit.
    let mut q = unsafe { next(context, device, properties | CL_QUEUE_PROFILING_ENABLE, errcode_ret) };
    if q.is_null() && properties & CL_QUEUE_PROFILING_ENABLE == 0 {
        // SAFETY: exactly the program's call.
        q = unsafe { next(context, device, properties, errcode_ret) };
    }
    register_queue(
        q,
        context,
        device,
        QueueInfo {
            device: device as usize,
            app_properties: properties,
            app_property_list: None,
            counters: None,
            nested: false,
            fifo: None,
            app_refs: 1,
        },
    );
    q
}

/// The program's `cl_queue_properties` list, up to and including its terminating 0.
unsafe fn read_properties(list: *const u64) -> Option<Vec<u64>> {
    if list.is_null() {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..MAX_PROPERTIES {
        // SAFETY: a zero-terminated key/value list (the OpenCL contract); keys at even indices.
        let key = unsafe { *list.add(2 * i) };
        out.push(key);
        if key == 0 {
            return Some(out);
        }
        // SAFETY: as above.
        out.push(unsafe { *list.add(2 * i + 1) });
    }
    out.push(0);
    Some(out)
}

unsafe fn create_queue_with_properties(
    next: sig::clCreateCommandQueueWithProperties_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: the program's properties list.
    let app_list = unsafe { read_properties(properties.cast::<u64>()) };
    let mut app_properties = 0u64;
    let mut counters = None;
    let mut given = Vec::new();
    let mut saw_properties = false;
    if let Some(list) = &app_list {
        for pair in list.chunks(2) {
            let &[key, value] = pair else { break };
            if key == CL_QUEUE_PROPERTIES {
                app_properties = value;
                saw_properties = true;
                given.extend([key, value | CL_QUEUE_PROFILING_ENABLE]);
            } else if key == counters::CL_QUEUE_PERFORMANCE_COUNTERS_CODEPLAY {
                // SAFETY: the property's value is a config pointer (the extension's contract).
                match unsafe { counters::parse_config(value as *const counters::PerformanceCounterConfigCodeplay) } {
                    Ok(set) => counters = Some(counters::shared(set)),
                    Err(code) => {
                        set_errcode(errcode_ret, code);
                        return ptr::null_mut();
                    }
                }
            } else {
                given.extend([key, value]);
            }
        }
    }
    if !saw_properties {
        given.extend([CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE]);
    }
    given.push(0);
    // SAFETY: the program's list with profiling added and the Codeplay key removed.
    let mut q = unsafe { next(context, device, given.as_mut_ptr().cast(), errcode_ret) };
    if q.is_null() && app_properties & CL_QUEUE_PROFILING_ENABLE == 0 {
        let mut plain: Vec<u64> = given
            .chunks(2)
            .flat_map(|p| match *p {
                [k, _] if k == CL_QUEUE_PROPERTIES => vec![k, app_properties],
                [k, v] => vec![k, v],
                _ => vec![],
            })
            .collect();
        plain.push(0);
        // SAFETY: the program's own list (without the Codeplay key, which the runtime does not know).
        q = unsafe { next(context, device, plain.as_mut_ptr().cast(), errcode_ret) };
    }
    register_queue(
        q,
        context,
        device,
        QueueInfo {
            device: device as usize,
            app_properties,
            app_property_list: app_list,
            counters,
            nested: false,
            fifo: None,
            app_refs: 1,
        },
    );
    q
}

pub(crate) unsafe fn clCreateCommandQueueWithProperties(
    next: sig::clCreateCommandQueueWithProperties_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    unsafe { create_queue_with_properties(next, context, device, properties, errcode_ret) }
}

pub(crate) unsafe fn clCreateCommandQueueWithPropertiesKHR(
    next: sig::clCreateCommandQueueWithPropertiesKHR_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded (same signature as the core function).
    unsafe { create_queue_with_properties(next, context, device, properties, errcode_ret) }
}

/// `clCreateCommandQueueWithPropertiesKHR` for drivers that do not provide it: the OpenCL 2.0
/// core function has the same signature and meaning.
pub(crate) unsafe extern "C" fn clCreateCommandQueueWithPropertiesKHR_fallback(
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    match next().clCreateCommandQueueWithProperties {
        // SAFETY: forwarded to the core function of the same signature.
        Some(f) => unsafe { f(context, device, properties, errcode_ret) },
        None => {
            set_errcode(errcode_ret, CL_INVALID_OPERATION);
            ptr::null_mut()
        }
    }
}

/// Answers an info query from `bytes` with OpenCL's size rules.
unsafe fn answer(bytes: &[u8], size: usize, value: *mut c_void, size_ret: *mut c_void) -> i32 {
    if !value.is_null() {
        if size < bytes.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: value is writable for size >= len bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), value.cast::<u8>(), bytes.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: the program's size_t*.
        unsafe { *size_ret.cast::<usize>() = bytes.len() };
    }
    CL_SUCCESS
}

pub(crate) unsafe fn clGetCommandQueueInfo(
    next: sig::clGetCommandQueueInfo_fn,
    queue: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut c_void,
) -> i32 {
    if u64::from(param) == CL_QUEUE_PROPERTIES {
        // SAFETY: forwarded.
        let r = unsafe { next(queue, param, size, value, size_ret) };
        if r == CL_SUCCESS
            && !value.is_null()
            && size >= 8
            && let Some(q) = queues::get(queue)
            && q.app_properties & CL_QUEUE_PROFILING_ENABLE == 0
        {
            // SAFETY: the runtime just wrote a cl_command_queue_properties there.
            unsafe { *value.cast::<u64>() &= !CL_QUEUE_PROFILING_ENABLE };
        }
        return r;
    }
    if param == CL_QUEUE_PROPERTIES_ARRAY
        && let Some(list) = queues::get(queue).and_then(|q| q.app_property_list)
    {
        let bytes: Vec<u8> = list.iter().flat_map(|v| v.to_ne_bytes()).collect();
        // SAFETY: the program's buffers.
        return unsafe { answer(&bytes, size, value, size_ret) };
    }
    // SAFETY: forwarded.
    unsafe { next(queue, param, size, value, size_ret) }
}

/// In-order queues: what was enqueued before the call is complete when it returns; the harvest
/// thread is told so and reports it (`in_order.rs`), not the program's thread.
pub(crate) unsafe fn clFinish(next: sig::clFinish_fn, queue: *mut c_void) -> i32 {
    let fifo = if crate::in_order::outstanding() > 0 { queues::fifo(queue) } else { None };
    let upto = fifo.as_ref().map(|f| f.pushed());
    // SAFETY: forwarded.
    let r = unsafe { next(queue) };
    if r == CL_SUCCESS
        && let (Some(f), Some(upto)) = (fifo, upto)
    {
        f.completed_upto(upto);
    }
    r
}

/// The events waited for may end commands of in-order queues: the harvest thread is woken to
/// report their completed prefixes.
pub(crate) unsafe fn clWaitForEvents(next: sig::clWaitForEvents_fn, count: u32, events: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(count, events) };
    if r == CL_SUCCESS {
        crate::in_order::wake_harvest();
    }
    r
}

/// Counts the program's references of its queues (`queues.rs`: the runtime's count includes the
/// commands still outstanding, the layer's out-of-order ones among them).
pub(crate) unsafe fn clRetainCommandQueue(next: sig::clRetainCommandQueue_fn, queue: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(queue) };
    if r == CL_SUCCESS {
        queues::retain(queue);
    }
    r
}

/// The release that drops the program's last reference ends the queue in the trace.
pub(crate) unsafe fn clReleaseCommandQueue(next: sig::clReleaseCommandQueue_fn, queue: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(queue) };
    if r == CL_SUCCESS
        && let Some(info) = queues::release(queue)
        && kind_enabled(Kind::Queue)
        && !info.nested
    {
        let p = QueuePayload { queue: queue as u64, device: info.device as u64, ..Default::default() };
        emit_instant(Kind::Queue, queue_op::DESTROY, Phase::None, Payload::Queue(&p));
    }
    r
}

// ---- device info and profiling --------------------------------------------------------------

const CL_NAME_VERSION_MAX_NAME_SIZE: usize = 64;

#[inline(always)]
pub(crate) unsafe fn clGetDeviceInfo(
    next: sig::clGetDeviceInfo_fn,
    device: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut c_void,
) -> i32 {
    if !matches!(
        param,
        CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY | CL_DEVICE_EXTENSIONS | CL_DEVICE_EXTENSIONS_WITH_VERSION
    ) {
        // SAFETY: forwarded.
        return unsafe { next(device, param, size, value, size_ret) };
    }
    // SAFETY: forwarded.
    unsafe { device_info_answered_by_layer(next, device, param, size, value, size_ret) }
}

#[cold]
#[inline(never)]
unsafe fn device_info_answered_by_layer(
    next: sig::clGetDeviceInfo_fn,
    device: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut c_void,
) -> i32 {
    match param {
        CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY => {
            // SAFETY: the program's buffers.
            unsafe { counters::device_info(size, value, size_ret.cast()) }
        }
        CL_DEVICE_EXTENSIONS => {
            let Some(s) = objects::query_string(|n, v, ret| {
                // SAFETY: the layer's own buffers.
                Some(unsafe { next(device, param, n, v, ret.cast()) })
            }) else {
                // SAFETY: forwarded (the runtime reports its own error).
                return unsafe { next(device, param, size, value, size_ret) };
            };
            let mut text = s.to_string_lossy().trim_end().to_string();
            for ext in extra_extensions(&text) {
                text.push(' ');
                text.push_str(ext);
            }
            text.push(' '); // OpenCL extension strings conventionally end with a space
            let mut bytes = text.into_bytes();
            bytes.push(0);
            // SAFETY: the program's buffers.
            unsafe { answer(&bytes, size, value, size_ret) }
        }
        CL_DEVICE_EXTENSIONS_WITH_VERSION => {
            let mut n = 0usize;
            // SAFETY: a size query.
            let r = unsafe { next(device, param, 0, ptr::null_mut(), (&raw mut n).cast()) };
            if r != CL_SUCCESS {
                // SAFETY: forwarded.
                return unsafe { next(device, param, size, value, size_ret) };
            }
            let mut bytes = vec![0u8; n];
            // SAFETY: a buffer of the size the runtime asked for.
            if n > 0 && unsafe { next(device, param, n, bytes.as_mut_ptr().cast(), ptr::null_mut()) } != CL_SUCCESS {
                // SAFETY: forwarded.
                return unsafe { next(device, param, size, value, size_ret) };
            }
            let names: String = bytes
                .chunks(4 + CL_NAME_VERSION_MAX_NAME_SIZE)
                .filter_map(|c| CStr::from_bytes_until_nul(&c[4..]).ok())
                .map(|c| format!("{} ", c.to_string_lossy()))
                .collect();
            for ext in extra_extensions(&names) {
                bytes.extend((1u32 << 22).to_ne_bytes()); // CL_MAKE_VERSION(1, 0, 0)
                let mut name = [0u8; CL_NAME_VERSION_MAX_NAME_SIZE];
                name[..ext.len()].copy_from_slice(ext.as_bytes());
                bytes.extend(name);
            }
            // SAFETY: the program's buffers.
            unsafe { answer(&bytes, size, value, size_ret) }
        }
        // SAFETY: forwarded.
        _ => unsafe { next(device, param, size, value, size_ret) },
    }
}

/// The extensions the layer adds to a device's list: the counters, and the queue-creation
/// extension they depend on when the driver lacks it (the layer provides its entry point).
fn extra_extensions(existing: &str) -> Vec<&'static str> {
    let has = |e: &str| existing.split_whitespace().any(|x| x == e);
    let mut out = Vec::new();
    if !has("cl_khr_create_command_queue") {
        out.push("cl_khr_create_command_queue");
    }
    if !has(counters::EXTENSION_NAME) {
        out.push(counters::EXTENSION_NAME);
    }
    out
}

pub(crate) unsafe fn clGetEventProfilingInfo(
    next: sig::clGetEventProfilingInfo_fn,
    event: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut c_void,
) -> i32 {
    if param == CL_PROFILING_COMMAND_PERFORMANCE_COUNTERS_CODEPLAY {
        // SAFETY: the program's buffers.
        return unsafe { counters::query(event, size, value, size_ret.cast()) };
    }
    if let Some(info) = crate::api::next().clGetEventInfo {
        let mut queue: *mut c_void = ptr::null_mut();
        // SAFETY: an 8-byte out value; the runtime validates the event.
        let r = unsafe { info(event, CL_EVENT_COMMAND_QUEUE, 8, (&raw mut queue).cast(), ptr::null_mut()) };
        if r == CL_SUCCESS
            && !queue.is_null()
            && let Some(q) = queues::get(queue)
            && q.app_properties & CL_QUEUE_PROFILING_ENABLE == 0
        {
            return CL_PROFILING_INFO_NOT_AVAILABLE;
        }
    }
    // SAFETY: forwarded.
    unsafe { next(event, param, size, value, size_ret) }
}

// ---- extension functions --------------------------------------------------------------------

/// The wrapper for an extension function the next layer returned as `real` (or provides none
/// of). With several platforms returning different entry points for one name, the first
/// platform's calls are traced and the others' are returned unwrapped (docs/opencl.md).
fn wrap_extension(name: *mut c_void, real: *mut c_void) -> *mut c_void {
    if name.is_null() {
        return real;
    }
    // SAFETY: the program's NUL-terminated function name.
    let name = unsafe { CStr::from_ptr(name as *const c_char) };
    let Some((idx, wrapper)) = extension_wrapper(name.to_bytes()) else { return real };
    if real.is_null() {
        return if name.to_bytes() == b"clCreateCommandQueueWithPropertiesKHR" { wrapper } else { real };
    }
    match EXT_NEXT[idx].compare_exchange(ptr::null_mut(), real, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => wrapper,
        Err(prev) if prev == real => wrapper,
        Err(_) => real,
    }
}

pub(crate) unsafe fn clGetExtensionFunctionAddressForPlatform(
    next: sig::clGetExtensionFunctionAddressForPlatform_fn,
    platform: *mut c_void,
    name: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    wrap_extension(name, unsafe { next(platform, name) })
}

pub(crate) unsafe fn clGetExtensionFunctionAddress(
    next: sig::clGetExtensionFunctionAddress_fn,
    name: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    wrap_extension(name, unsafe { next(name) })
}

// ---- kernels ---------------------------------------------------------------------------------

pub(crate) unsafe fn clSetKernelArg(
    next: sig::clSetKernelArg_fn,
    kernel: *mut c_void,
    index: u32,
    size: usize,
    value: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(kernel, index, size, value) };
    if r == CL_SUCCESS && kind_enabled(Kind::KernelDispatch) {
        let mut v = [0u8; 8];
        if !value.is_null() {
            // SAFETY: value points at `size` readable bytes (OpenCL's contract).
            unsafe { ptr::copy_nonoverlapping(value.cast::<u8>(), v.as_mut_ptr(), size.min(8)) };
        }
        objects::kernel_arg(kernel, index, u64::from_ne_bytes(v));
    }
    r
}

pub(crate) unsafe fn clSetKernelArgSVMPointer(
    next: sig::clSetKernelArgSVMPointer_fn,
    kernel: *mut c_void,
    index: u32,
    value: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(kernel, index, value) };
    if r == CL_SUCCESS && kind_enabled(Kind::KernelDispatch) {
        objects::kernel_arg(kernel, index, value as u64);
    }
    r
}

pub(crate) unsafe fn clSetKernelArgMemPointerINTEL(
    next: sig::clSetKernelArgMemPointerINTEL_fn,
    kernel: *mut c_void,
    index: u32,
    value: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(kernel, index, value) };
    if r == CL_SUCCESS && kind_enabled(Kind::KernelDispatch) {
        objects::kernel_arg(kernel, index, value as u64);
    }
    r
}

pub(crate) unsafe fn clCreateKernel(
    next: sig::clCreateKernel_fn,
    program: *mut c_void,
    name: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let k = unsafe { next(program, name, errcode_ret) };
    objects::kernel_created(k, program, name as *const c_char);
    k
}

pub(crate) unsafe fn clCreateKernelsInProgram(
    next: sig::clCreateKernelsInProgram_fn,
    program: *mut c_void,
    num_kernels: u32,
    kernels: *mut c_void,
    num_kernels_ret: *mut c_void,
) -> i32 {
    let mut n = 0u32;
    let ret = if num_kernels_ret.is_null() { (&raw mut n).cast() } else { num_kernels_ret };
    // SAFETY: forwarded (with our count slot when the program passed none).
    let r = unsafe { next(program, num_kernels, kernels, ret) };
    if r == CL_SUCCESS && !kernels.is_null() {
        // SAFETY: ret points at the count the runtime wrote.
        let count = unsafe { *ret.cast::<u32>() }.min(num_kernels);
        for i in 0..count as usize {
            // SAFETY: the runtime filled `count` kernels.
            let k = unsafe { *kernels.cast::<*mut c_void>().add(i) };
            objects::kernel_created(k, program, ptr::null());
        }
    }
    r
}

fn ref_count(
    f: Option<unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut c_void) -> i32>,
    h: *mut c_void,
    param: u32,
) -> u32 {
    let mut rc = 0u32;
    if let Some(f) = f {
        // SAFETY: a 4-byte out value; the runtime validates the handle.
        unsafe { f(h, param, 4, (&raw mut rc).cast(), ptr::null_mut()) };
    }
    rc
}

pub(crate) unsafe fn clRetainKernel(next: sig::clRetainKernel_fn, kernel: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(kernel) };
    if r == CL_SUCCESS {
        objects::counted_retained(Counted::Kernel, kernel);
    }
    r
}

/// The release that drops the program's last reference (counted by the layer; a kernel the
/// layer did not see created: the runtime's count) unloads the kernel.
pub(crate) unsafe fn clReleaseKernel(next: sig::clReleaseKernel_fn, kernel: *mut c_void) -> i32 {
    let release = objects::counted_releasing(Counted::Kernel, kernel);
    let last = match release {
        Release::Last => true,
        Release::Counted => false,
        Release::Unknown => ref_count(crate::api::next().clGetKernelInfo, kernel, CL_KERNEL_REFERENCE_COUNT) == 1,
    };
    // SAFETY: forwarded.
    let r = unsafe { next(kernel) };
    if r != CL_SUCCESS {
        objects::counted_release_failed(Counted::Kernel, kernel, release);
    } else if last {
        objects::kernel_released(kernel);
    }
    r
}

/// The program's release of an event: the task graph forgets it (`graph.rs`), before the
/// runtime may give its handle to a new event.
///
/// # Safety
/// As the runtime's `clReleaseEvent`.
pub(crate) unsafe fn clReleaseEvent(next: sig::clReleaseEvent_fn, event: *mut c_void) -> i32 {
    crate::graph::forget(event);
    // SAFETY: forwarded.
    unsafe { next(event) }
}

// ---- memory ----------------------------------------------------------------------------------

pub(crate) unsafe fn clCreateBuffer(
    next: sig::clCreateBuffer_fn,
    context: *mut c_void,
    flags: u64,
    size: usize,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(context, flags, size, host_ptr, errcode_ret) };
    objects::mem_created(m, size as u64, MemOrigin::Created { flags, context });
    m
}

pub(crate) unsafe fn clCreateBufferWithProperties(
    next: sig::clCreateBufferWithProperties_fn,
    context: *mut c_void,
    properties: *mut c_void,
    flags: u64,
    size: usize,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(context, properties, flags, size, host_ptr, errcode_ret) };
    objects::mem_created(m, size as u64, MemOrigin::Created { flags, context });
    m
}

pub(crate) unsafe fn clCreateSubBuffer(
    next: sig::clCreateSubBuffer_fn,
    buffer: *mut c_void,
    flags: u64,
    create_type: u32,
    info: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(buffer, flags, create_type, info, errcode_ret) };
    objects::mem_created(m, 0, MemOrigin::PartOf(buffer));
    m
}

pub(crate) unsafe fn clCreateImage(
    next: sig::clCreateImage_fn,
    context: *mut c_void,
    flags: u64,
    format: *mut c_void,
    desc: *mut c_void,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(context, flags, format, desc, host_ptr, errcode_ret) };
    objects::mem_created(m, 0, MemOrigin::Created { flags, context });
    m
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clCreateImageWithProperties(
    next: sig::clCreateImageWithProperties_fn,
    context: *mut c_void,
    properties: *mut c_void,
    flags: u64,
    format: *mut c_void,
    desc: *mut c_void,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(context, properties, flags, format, desc, host_ptr, errcode_ret) };
    objects::mem_created(m, 0, MemOrigin::Created { flags, context });
    m
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clCreateImage2D(
    next: sig::clCreateImage2D_fn,
    context: *mut c_void,
    flags: u64,
    format: *mut c_void,
    width: usize,
    height: usize,
    row_pitch: usize,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m = unsafe { next(context, flags, format, width, height, row_pitch, host_ptr, errcode_ret) };
    objects::mem_created(m, 0, MemOrigin::Created { flags, context });
    m
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clCreateImage3D(
    next: sig::clCreateImage3D_fn,
    context: *mut c_void,
    flags: u64,
    format: *mut c_void,
    width: usize,
    height: usize,
    depth: usize,
    row_pitch: usize,
    slice_pitch: usize,
    host_ptr: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let m =
        unsafe { next(context, flags, format, width, height, depth, row_pitch, slice_pitch, host_ptr, errcode_ret) };
    objects::mem_created(m, 0, MemOrigin::Created { flags, context });
    m
}

pub(crate) unsafe fn clRetainMemObject(next: sig::clRetainMemObject_fn, mem: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(mem) };
    if r == CL_SUCCESS {
        objects::counted_retained(Counted::Mem, mem);
    }
    r
}

/// The release that drops the program's last reference (counted by the layer: `objects.rs`,
/// `APP_REFS`) is the object's free, recorded before the runtime can reuse its address.
pub(crate) unsafe fn clReleaseMemObject(next: sig::clReleaseMemObject_fn, mem: *mut c_void) -> i32 {
    let release = objects::counted_releasing(Counted::Mem, mem);
    if release == Release::Last {
        objects::freed(mem);
    }
    // SAFETY: forwarded.
    let r = unsafe { next(mem) };
    if r != CL_SUCCESS {
        objects::counted_release_failed(Counted::Mem, mem, release);
    }
    r
}

pub(crate) unsafe fn clSVMAlloc(
    next: sig::clSVMAlloc_fn,
    context: *mut c_void,
    flags: u64,
    size: usize,
    alignment: u32,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, flags, size, alignment) };
    // Shared virtual memory: host and device address it alike (coarse or fine grain: the
    // record model's types do not tell them apart; `docs/opencl.md`).
    objects::svm_allocated(p, size, context);
    p
}

pub(crate) unsafe fn clSVMFree(next: sig::clSVMFree_fn, context: *mut c_void, svm: *mut c_void) {
    objects::freed(svm);
    // SAFETY: forwarded.
    unsafe { next(context, svm) }
}

pub(crate) unsafe fn clHostMemAllocINTEL(
    next: sig::clHostMemAllocINTEL_fn,
    context: *mut c_void,
    properties: *mut c_void,
    size: usize,
    alignment: u32,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, properties, size, alignment, errcode_ret) };
    objects::usm_allocated(p, size, MemoryType::Host, ptr::null_mut());
    p
}

pub(crate) unsafe fn clDeviceMemAllocINTEL(
    next: sig::clDeviceMemAllocINTEL_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    size: usize,
    alignment: u32,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, device, properties, size, alignment, errcode_ret) };
    objects::usm_allocated(p, size, MemoryType::Device, device);
    p
}

pub(crate) unsafe fn clSharedMemAllocINTEL(
    next: sig::clSharedMemAllocINTEL_fn,
    context: *mut c_void,
    device: *mut c_void,
    properties: *mut c_void,
    size: usize,
    alignment: u32,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, device, properties, size, alignment, errcode_ret) };
    objects::usm_allocated(p, size, MemoryType::Shared, device);
    p
}

pub(crate) unsafe fn clMemFreeINTEL(next: sig::clMemFreeINTEL_fn, context: *mut c_void, p: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(context, p) };
    if r == CL_SUCCESS {
        objects::freed(p);
    }
    r
}

pub(crate) unsafe fn clMemBlockingFreeINTEL(
    next: sig::clMemBlockingFreeINTEL_fn,
    context: *mut c_void,
    p: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(context, p) };
    if r == CL_SUCCESS {
        objects::freed(p);
    }
    r
}

// ---- programs --------------------------------------------------------------------------------

pub(crate) unsafe fn clCreateProgramWithSource(
    next: sig::clCreateProgramWithSource_fn,
    context: *mut c_void,
    count: u32,
    strings: *mut c_void,
    lengths: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, count, strings, lengths, errcode_ret) };
    if !p.is_null() && kind_enabled(Kind::CodeObject) {
        let mut total = 0u64;
        for i in 0..count as usize {
            // SAFETY: `count` strings, with `lengths` null or `count` lengths (0 = NUL-terminated).
            let len = unsafe {
                let l = if lengths.is_null() { 0 } else { *lengths.cast::<usize>().add(i) };
                let s = *strings.cast::<*const c_char>().add(i);
                if l == 0 && !s.is_null() { CStr::from_ptr(s).to_bytes().len() } else { l }
            };
            total += len as u64;
        }
        objects::program_event(code_object::PROGRAM, p, ptr::null(), total);
    }
    p
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clCreateProgramWithBinary(
    next: sig::clCreateProgramWithBinary_fn,
    context: *mut c_void,
    num_devices: u32,
    devices: *mut c_void,
    lengths: *mut c_void,
    binaries: *mut c_void,
    status: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, num_devices, devices, lengths, binaries, status, errcode_ret) };
    let size = if lengths.is_null() || num_devices == 0 {
        0
    } else {
        // SAFETY: one length per device.
        unsafe { *lengths.cast::<usize>() as u64 }
    };
    objects::program_event(code_object::PROGRAM, p, ptr::null(), size);
    p
}

pub(crate) unsafe fn clCreateProgramWithIL(
    next: sig::clCreateProgramWithIL_fn,
    context: *mut c_void,
    il: *mut c_void,
    length: usize,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, il, length, errcode_ret) };
    objects::program_event(code_object::PROGRAM, p, ptr::null(), length as u64);
    p
}

pub(crate) unsafe fn clCreateProgramWithILKHR(
    next: sig::clCreateProgramWithILKHR_fn,
    context: *mut c_void,
    il: *mut c_void,
    length: usize,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, il, length, errcode_ret) };
    objects::program_event(code_object::PROGRAM, p, ptr::null(), length as u64);
    p
}

pub(crate) unsafe fn clCreateProgramWithBuiltInKernels(
    next: sig::clCreateProgramWithBuiltInKernels_fn,
    context: *mut c_void,
    num_devices: u32,
    devices: *mut c_void,
    names: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, num_devices, devices, names, errcode_ret) };
    objects::program_event(code_object::PROGRAM, p, names as *const c_char, 0);
    p
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clBuildProgram(
    next: sig::clBuildProgram_fn,
    program: *mut c_void,
    num_devices: u32,
    devices: *mut c_void,
    options: *mut c_void,
    notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(program, num_devices, devices, options, notify, user_data) };
    if r == CL_SUCCESS {
        objects::program_event(code_object::PROGRAM_BUILD, program, options as *const c_char, 0);
    }
    r
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clCompileProgram(
    next: sig::clCompileProgram_fn,
    program: *mut c_void,
    num_devices: u32,
    devices: *mut c_void,
    options: *mut c_void,
    num_headers: u32,
    headers: *mut c_void,
    header_names: *mut c_void,
    notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: forwarded.
    let r =
        unsafe { next(program, num_devices, devices, options, num_headers, headers, header_names, notify, user_data) };
    if r == CL_SUCCESS {
        objects::program_event(code_object::PROGRAM_BUILD, program, options as *const c_char, 0);
    }
    r
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn clLinkProgram(
    next: sig::clLinkProgram_fn,
    context: *mut c_void,
    num_devices: u32,
    devices: *mut c_void,
    options: *mut c_void,
    num_inputs: u32,
    inputs: *mut c_void,
    notify: *mut c_void,
    user_data: *mut c_void,
    errcode_ret: *mut c_void,
) -> *mut c_void {
    // SAFETY: forwarded.
    let p = unsafe { next(context, num_devices, devices, options, num_inputs, inputs, notify, user_data, errcode_ret) };
    objects::program_event(code_object::PROGRAM, p, options as *const c_char, 0);
    p
}

pub(crate) unsafe fn clRetainProgram(next: sig::clRetainProgram_fn, program: *mut c_void) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { next(program) };
    if r == CL_SUCCESS {
        objects::counted_retained(Counted::Program, program);
    }
    r
}

/// The release that drops the program's last reference (counted by the layer: the runtime's
/// count also holds one per kernel still alive) unloads the program.
pub(crate) unsafe fn clReleaseProgram(next: sig::clReleaseProgram_fn, program: *mut c_void) -> i32 {
    let release = objects::counted_releasing(Counted::Program, program);
    // SAFETY: forwarded.
    let r = unsafe { next(program) };
    if r != CL_SUCCESS {
        objects::counted_release_failed(Counted::Program, program, release);
    } else if release == Release::Last {
        objects::code_object_unloaded(code_object::PROGRAM, program);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(app_properties: u64, list: Option<Vec<u64>>) -> QueueInfo {
        QueueInfo {
            device: 0,
            app_properties,
            app_property_list: list,
            counters: None,
            nested: false,
            fifo: None,
            app_refs: 1,
        }
    }

    /// The record's flags are the program's properties: order, profiling, on-device, and the
    /// priority from its properties list.
    #[test]
    fn queue_flags_are_the_programs_properties() {
        use queue_flags::*;
        assert_eq!(queue_flags(&info(0, None)), IN_ORDER);
        assert_eq!(queue_flags(&info(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, None)), 0);
        assert_eq!(queue_flags(&info(CL_QUEUE_PROFILING_ENABLE, None)), IN_ORDER | PROFILING);
        let ooo_device = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_ON_DEVICE;
        assert_eq!(queue_flags(&info(ooo_device, None)), ON_DEVICE);
        let list = |p| Some(vec![CL_QUEUE_PROPERTIES, 0, CL_QUEUE_PRIORITY_KHR, p, 0]);
        assert_eq!(queue_flags(&info(0, list(CL_QUEUE_PRIORITY_HIGH_KHR))), IN_ORDER | PRIORITY_HIGH);
        assert_eq!(queue_flags(&info(0, list(CL_QUEUE_PRIORITY_LOW_KHR))), IN_ORDER | PRIORITY_LOW);
        assert_eq!(queue_flags(&info(0, list(1 << 1))), IN_ORDER, "medium is the default");
    }
}
