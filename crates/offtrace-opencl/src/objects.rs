//! What the layer remembers about the program's OpenCL objects: kernel names and argument
//! values (for dispatch payloads and kernel allocation properties), and the memory and code
//! objects it reports to the `MEMORY_ALLOC` and `CODE_OBJECT` kinds.
//!
//! Kernel names are interned for the process's lifetime (payloads hand them to tools as
//! `const char*`). Buffers and images are entered in the live allocation table under their
//! `cl_mem` handle with their size (a kernel's buffer argument *is* the handle, so it matches
//! exactly); SVM and USM allocations under their address.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;
use std::sync::{Mutex, RwLock};

use offtrace_core::{
    CodeObjectPayload, DevicePayload, DeviceType, Kind, MemoryAllocPayload, MemoryType, Payload, Phase, code_object,
    device_op, emit_instant, emit_memory_alloc, emit_memory_free, emit_memory_sub_alloc, kind_enabled,
};

use crate::api::next;
use crate::call::*;

#[derive(Default)]
struct KernelInfo {
    name: Option<&'static CStr>,
    args: Vec<u64>,
}

static KERNELS: RwLock<Option<HashMap<usize, KernelInfo>>> = RwLock::new(None);

/// The kinds of object whose program references the layer counts ([`APP_REFS`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Counted {
    /// A buffer or image: its last release is its free in the trace.
    Mem,
    /// A kernel: its last release is its code object's unload and ends its entry in the
    /// kernel table.
    Kernel,
    /// A program: its last release is its code object's unload.
    Program,
}

/// The program's references to each buffer, image, kernel and program the layer reported: 1
/// at creation, one more per successful retain, one less per successful release; the release
/// that drops the last one ends the object in the trace. Counted here, not read from the
/// runtime: its `CL_*_REFERENCE_COUNT` also counts what the runtime itself holds (a command
/// still waiting holds its buffers and kernel, PoCL's until its driver thread retires them; the
/// out-of-order commands whose events the layer keeps until its harvest thread reports them; a
/// kernel holds its program), so at the program's last release it may be above 1, and the
/// free or unload was lost.
static APP_REFS: Mutex<Option<HashMap<(Counted, usize), u32>>> = Mutex::new(None);

fn with_app_refs<R>(f: impl FnOnce(&mut HashMap<(Counted, usize), u32>) -> R) -> R {
    f(APP_REFS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::default))
}

/// `handle` was created (the program holds its first reference).
pub(crate) fn counted_created(class: Counted, handle: *mut c_void) {
    if !handle.is_null() {
        with_app_refs(|m| m.insert((class, handle as usize), 1));
    }
}

/// A successful retain of `handle`.
pub(crate) fn counted_retained(class: Counted, handle: *mut c_void) {
    with_app_refs(|m| {
        if let Some(n) = m.get_mut(&(class, handle as usize)) {
            *n = n.saturating_add(1);
        }
    });
}

/// What a release is, before it is forwarded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Release {
    /// The program's last reference: the entry is removed now, before the runtime can destroy
    /// the object and give its address to another.
    Last,
    /// One of several.
    Counted,
    /// An object the layer did not see created.
    Unknown,
}

/// Before a release of `handle` is forwarded: counts it.
pub(crate) fn counted_releasing(class: Counted, handle: *mut c_void) -> Release {
    with_app_refs(|m| match m.get_mut(&(class, handle as usize)) {
        Some(1) => {
            m.remove(&(class, handle as usize));
            Release::Last
        }
        Some(n) => {
            *n -= 1;
            Release::Counted
        }
        None => Release::Unknown,
    })
}

/// The runtime refused a release that [`counted_releasing`] counted: undone.
pub(crate) fn counted_release_failed(class: Counted, handle: *mut c_void, release: Release) {
    with_app_refs(|m| match release {
        Release::Last => {
            m.insert((class, handle as usize), 1);
        }
        Release::Counted => {
            if let Some(n) = m.get_mut(&(class, handle as usize)) {
                *n = n.saturating_add(1);
            }
        }
        Release::Unknown => {}
    });
}
static NAMES: Mutex<Option<HashSet<&'static CStr>>> = Mutex::new(None);

fn intern(s: &CStr) -> &'static CStr {
    let mut g = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let set = g.get_or_insert_with(HashSet::default);
    if let Some(&k) = set.get(s) {
        return k;
    }
    let leaked: &'static CStr = Box::leak(CString::from(s).into_boxed_c_str());
    set.insert(leaked);
    leaked
}

fn with_kernels<R>(f: impl FnOnce(&mut HashMap<usize, KernelInfo>) -> R) -> R {
    f(KERNELS.write().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::default))
}

/// The kernel's name (interned; null when unknown) and its argument values copied into `out`
/// (how many), from one look-up.
pub(crate) fn kernel_info(kernel: u64, out: &mut [u64]) -> (*const c_char, usize) {
    let g = KERNELS.read().unwrap_or_else(|e| e.into_inner());
    let Some(k) = g.as_ref().and_then(|m| m.get(&(kernel as usize))) else { return (ptr::null(), 0) };
    let n = k.args.len().min(out.len());
    out[..n].copy_from_slice(&k.args[..n]);
    (k.name.map_or(ptr::null(), CStr::as_ptr), n)
}

/// A kernel was created with `name` (null: ask the runtime).
pub(crate) fn kernel_created(kernel: *mut c_void, program: *mut c_void, name: *const c_char) {
    if kernel.is_null() {
        return;
    }
    counted_created(Counted::Kernel, kernel);
    let name = if name.is_null() {
        query_string(|size, value, ret| {
            let f = next().clGetKernelInfo?;
            // SAFETY: valid kernel; the buffer sizes are the caller's.
            Some(unsafe { f(kernel, CL_KERNEL_FUNCTION_NAME, size, value, ret.cast()) })
        })
        .map(|s| intern(&s))
    } else {
        // SAFETY: the program's kernel_name argument is a NUL-terminated string.
        Some(intern(unsafe { CStr::from_ptr(name) }))
    };
    with_kernels(|m| m.insert(kernel as usize, KernelInfo { name, args: Vec::new() }));
    if kind_enabled(Kind::CodeObject) && !nested_now() {
        let p = CodeObjectPayload {
            handle: kernel as u64,
            program: program as u64,
            name: name.map_or(ptr::null(), CStr::as_ptr),
            binary_size: 0,
        };
        emit_instant(Kind::CodeObject, code_object::KERNEL, Phase::Load, Payload::CodeObject(&p));
    }
}

pub(crate) fn kernel_released(kernel: *mut c_void) {
    with_kernels(|m| m.remove(&(kernel as usize)));
    code_object_unloaded(code_object::KERNEL, kernel);
}

/// A kernel argument was set to the raw value `value` (a `cl_mem` handle, a pointer, or the
/// first 8 bytes of a scalar).
pub(crate) fn kernel_arg(kernel: *mut c_void, index: u32, value: u64) {
    let i = index as usize;
    if i >= offtrace_core::MAX_KERNEL_ARGS {
        return;
    }
    with_kernels(|m| {
        let k = m.entry(kernel as usize).or_default();
        if k.args.len() <= i {
            k.args.resize(i + 1, 0);
        }
        k.args[i] = value;
    });
}

/// Reads a string info query into a CString (size query, then value).
pub(crate) fn query_string(f: impl Fn(usize, *mut c_void, *mut usize) -> Option<i32>) -> Option<CString> {
    let mut size = 0usize;
    if f(0, ptr::null_mut(), &mut size)? != CL_SUCCESS || size == 0 || size > 1 << 20 {
        return None;
    }
    let mut buf = vec![0u8; size];
    if f(size, buf.as_mut_ptr().cast(), ptr::null_mut())? != CL_SUCCESS {
        return None;
    }
    CStr::from_bytes_until_nul(&buf).ok().map(CStr::to_owned)
}

/// `cl_mem_flags` bits that put a buffer or image in host memory.
const CL_MEM_USE_HOST_PTR: u64 = 1 << 3;
const CL_MEM_ALLOC_HOST_PTR: u64 = 1 << 4;
const CL_MEM_FLAGS: u32 = 0x1101;
const CL_MEM_CONTEXT: u32 = 0x1106;
const CL_CONTEXT_DEVICES: u32 = 0x1081;

/// What a buffer or image was created from: the call's own flags and context, or (a sub-buffer)
/// the buffer it is part of.
#[derive(Clone, Copy)]
pub(crate) enum MemOrigin {
    Created { flags: u64, context: *mut c_void },
    PartOf(*mut c_void),
}

/// The record model's memory type of a buffer or image with `flags`: host memory when the
/// program asked for it (`CL_MEM_USE_HOST_PTR`: the program's own allocation;
/// `CL_MEM_ALLOC_HOST_PTR`: host-accessible memory the runtime allocates), device memory
/// otherwise (`CL_MEM_COPY_HOST_PTR` copies the host data into it). What the program asked
/// for, not where a CPU runtime keeps it (there all memory is the host's).
pub(crate) fn buffer_memory_type(flags: u64) -> MemoryType {
    if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR) != 0 { MemoryType::Host } else { MemoryType::Device }
}

/// The device of a context that has exactly one (0 otherwise: the memory of a context of
/// several devices belongs to none of them until used).
fn only_device(context: *mut c_void) -> u64 {
    let Some(f) = next().clGetContextInfo else { return 0 };
    let mut device = 0u64;
    let mut size = 0usize;
    // SAFETY: an 8-byte out value (one `cl_device_id`); a context of several devices answers
    // CL_INVALID_VALUE and writes nothing; the runtime validates the handle.
    let r = unsafe { f(context, CL_CONTEXT_DEVICES, 8, (&raw mut device).cast(), (&raw mut size).cast()) };
    if r == CL_SUCCESS && size == 8 { device } else { 0 }
}

/// A buffer or image `mem` was created (size from the runtime when `size` is 0), with its
/// memory type and device from what the program asked for (`origin`; a sub-buffer is its
/// parent's).
pub(crate) fn mem_created(mem: *mut c_void, size: u64, origin: MemOrigin) {
    if mem.is_null() || !kind_enabled(Kind::MemoryAlloc) && !kind_enabled(Kind::KernelDispatch) || nested_now() {
        return;
    }
    let size = if size != 0 { size } else { mem_info(mem, CL_MEM_SIZE).unwrap_or(0) };
    let (flags, context) = match origin {
        MemOrigin::Created { flags, context } => (flags, context),
        MemOrigin::PartOf(parent) => {
            (mem_info(parent, CL_MEM_FLAGS).unwrap_or(0), mem_info(parent, CL_MEM_CONTEXT).unwrap_or(0) as *mut c_void)
        }
    };
    let device = if context.is_null() { 0 } else { only_device(context) };
    counted_created(Counted::Mem, mem);
    let p = MemoryAllocPayload { ptr: mem as u64, size, memory_type: buffer_memory_type(flags), device };
    // A sub-buffer's bytes are its parent's: a `sub_alloc` keeps them out of live memory, and
    // its handle still names it in the allocation properties of a kernel it is passed to.
    match origin {
        MemOrigin::Created { .. } => emit_memory_alloc(&p),
        MemOrigin::PartOf(_) => emit_memory_sub_alloc(&p),
    }
}

const CL_IMAGE_ELEMENT_SIZE: u32 = 0x1111;

/// The bytes of an image command's `region` (a `const size_t[3]` in pixels): its pixels times
/// the image's element size, asked of the runtime (one query per image command; the region's
/// pixels when the runtime does not answer).
///
/// # Safety
///
/// `region` is null or points at three readable `size_t` (the program's argument; the runtime
/// rejects the command otherwise, and a command the runtime rejects records nothing).
#[allow(unsafe_code)]
pub(crate) unsafe fn image_region_bytes(image: *mut c_void, region: *mut c_void) -> u64 {
    // SAFETY: forwarded.
    let pixels = unsafe { crate::call::region(region) };
    if pixels == 0 || image.is_null() {
        return pixels;
    }
    let Some(f) = next().clGetImageInfo else { return pixels };
    let mut element = 0usize;
    // SAFETY: a size_t out value; the runtime validates the handle.
    let r = unsafe { f(image, CL_IMAGE_ELEMENT_SIZE, 8, (&raw mut element).cast(), ptr::null_mut()) };
    if r == CL_SUCCESS && element > 0 { pixels.saturating_mul(element as u64) } else { pixels }
}

pub(crate) fn mem_info(mem: *mut c_void, param: u32) -> Option<u64> {
    let f = next().clGetMemObjectInfo?;
    let mut v = 0u64;
    // SAFETY: an 8-byte out value (size_t / cl_uint fits); the runtime validates the handle.
    let r = unsafe { f(mem, param, 8, (&raw mut v).cast(), ptr::null_mut()) };
    (r == CL_SUCCESS).then_some(v)
}

/// An SVM or USM allocation.
pub(crate) fn usm_allocated(ptr: *mut c_void, size: usize, memory_type: MemoryType, device: *mut c_void) {
    if !ptr.is_null() && !nested_now() {
        emit_memory_alloc(&MemoryAllocPayload {
            ptr: ptr as u64,
            size: size as u64,
            memory_type,
            device: device as u64,
        });
    }
}

/// An SVM allocation in `context` (type SHARED, the context's device when it has one).
pub(crate) fn svm_allocated(ptr: *mut c_void, size: usize, context: *mut c_void) {
    if !ptr.is_null() && !nested_now() {
        let device = if context.is_null() { 0 } else { only_device(context) };
        emit_memory_alloc(&MemoryAllocPayload {
            ptr: ptr as u64,
            size: size as u64,
            memory_type: MemoryType::Shared,
            device,
        });
    }
}

pub(crate) fn freed(ptr: *mut c_void) {
    if !ptr.is_null() && !nested_now() {
        emit_memory_free(ptr as u64);
    }
}

/// A program object was created or built (`op` = PROGRAM or PROGRAM_BUILD).
pub(crate) fn program_event(op: u32, program: *mut c_void, name: *const c_char, binary_size: u64) {
    if program.is_null() || !kind_enabled(Kind::CodeObject) || nested_now() {
        return;
    }
    if op == code_object::PROGRAM {
        counted_created(Counted::Program, program);
    }
    let p = CodeObjectPayload { handle: program as u64, program: program as u64, name, binary_size };
    emit_instant(Kind::CodeObject, op, Phase::Load, Payload::CodeObject(&p));
}

pub(crate) fn code_object_unloaded(op: u32, handle: *mut c_void) {
    if kind_enabled(Kind::CodeObject) && !nested_now() {
        let p = CodeObjectPayload { handle: handle as u64, program: 0, name: ptr::null(), binary_size: 0 };
        emit_instant(Kind::CodeObject, op, Phase::Unload, Payload::CodeObject(&p));
    }
}

static DEVICES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// Defines `device` (name, type; parent = the context it was first used in) once; not for a
/// device first used nested inside another backend's call, which that backend defines.
pub(crate) fn device_seen(device: *mut c_void, context: *mut c_void) {
    if !nested_now() {
        define_device(device, context);
        define_context(context, device);
    }
}

static CONTEXTS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// Defines `context` once, as the SYCL backend defines its contexts: a `CONTEXT` record named
/// `context of <device>`, parent = `device` (the first device it was seen with), so that a
/// reader finds every queue's context (SQLite `devices`, `is_context` = 1).
fn define_context(context: *mut c_void, device: *mut c_void) {
    if context.is_null() || device.is_null() || !kind_enabled(Kind::Device) {
        return;
    }
    if !CONTEXTS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashSet::default).insert(context as usize)
    {
        return;
    }
    let Some(info) = next().clGetDeviceInfo else { return };
    let device_name = query_string(|n, v, ret| {
        // SAFETY: the layer's own buffers; a valid device.
        Some(unsafe { info(device, CL_DEVICE_NAME, n, v, ret.cast()) })
    });
    let name = device_name.and_then(|n| CString::new(format!("context of {}", n.to_string_lossy())).ok());
    let p = DevicePayload {
        handle: context as u64,
        parent: device as u64,
        name: name.as_deref().map_or(ptr::null(), CStr::as_ptr),
        device_type: DeviceType::Unknown,
    };
    emit_instant(Kind::Device, device_op::CONTEXT, Phase::None, Payload::Device(&p));
}

/// Defines `device` once, nested or not: the layer's own counters (clock calibration, Codeplay
/// counters) name the `cl_device_id`, which on the SYCL path no other record defines (the SYCL
/// backend defines the UR device), so the counters' device gets its record before them.
pub(crate) fn define_device(device: *mut c_void, context: *mut c_void) {
    if device.is_null() || !kind_enabled(Kind::Device) {
        return;
    }
    if !DEVICES.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashSet::default).insert(device as usize) {
        return;
    }
    let Some(info) = next().clGetDeviceInfo else { return };
    let name = query_string(|n, v, ret| {
        // SAFETY: the layer's own buffers; a valid device.
        Some(unsafe { info(device, CL_DEVICE_NAME, n, v, ret.cast()) })
    });
    let mut ty = 0u64;
    // SAFETY: an 8-byte out value (cl_device_type).
    unsafe { info(device, CL_DEVICE_TYPE, 8, (&raw mut ty).cast(), ptr::null_mut()) };
    let device_type = match ty {
        t if t & 2 != 0 => DeviceType::Cpu,
        t if t & 4 != 0 => DeviceType::Gpu,
        t if t & 8 != 0 => DeviceType::Accelerator,
        _ => DeviceType::Unknown,
    };
    let p = DevicePayload {
        handle: device as u64,
        parent: context as u64,
        name: name.as_deref().map_or(ptr::null(), CStr::as_ptr),
        device_type,
    };
    emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&p));
}
