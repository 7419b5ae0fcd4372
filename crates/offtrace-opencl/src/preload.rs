//! Preload mode: the layer for programs whose ICD loader has no layer support.
//!
//! CUDA's `libOpenCL.so.1` (an old Khronos loader, before the system's in the ld.so cache or
//! `LD_LIBRARY_PATH` wherever the CUDA toolkit is set up), ocl-icd before 2.3.0 (2.2.14 read
//! `OCL_ICD_LAYERS`), or a vendor's `libOpenCL.so` linked directly never read `OPENCL_LAYERS`. For those `offtrace record` puts this same library in `LD_PRELOAD`: it
//! exports every function of the ICD dispatch table under its C name (`api::exports`,
//! generated), so the program's calls reach it before the loader's. Each export forwards to
//! [`table`]: at the first call that is filled from the program's real loader (`dlsym` by name,
//! the loader's exported functions dispatch through the ICD objects themselves, so nothing is
//! patched) and handed to the layer's own initialisation as its "next" table, exactly as a
//! loader's `clInitLayer` would; the table the exports then use is the layer's. Extension
//! functions go through the hooked `clGetExtensionFunctionAddress[ForPlatform]` as in layer mode.
//!
//! Which loader: `OFFTRACE_OPENCL_LOADER` (the path `record` found; only if that file is loaded
//! here, `RTLD_NOLOAD`), else the next definition of `clGetPlatformIDs` after this library in
//! the global scope (`RTLD_NEXT`: the program's own `-lOpenCL`), else a loaded
//! `libOpenCL.so.1`, else any loaded object that exports `clGetPlatformIDs` and is not an ICD
//! (no `clIcdGetPlatformIDsKHR`): a loader opened `RTLD_LOCAL` (pyopencl's bundled one) is not
//! in the global scope, but its callers still resolve `clXxx` to these exports first. An object
//! that defines `clGetLayerInfo` is a layer (another copy of this one), never the loader.
//!
//! The exports act only from the global scope (`LD_PRELOAD`): loaded by `dlopen` without
//! `RTLD_GLOBAL`, as the ICD loaders load layers and the XPTI dispatcher loads the agent (which
//! links this crate), this library interposes nothing.
//!
//! One owner per process: the first to install the layer owns it. When a loader's
//! `clInitLayer` came first (it supports layers and `OPENCL_LAYERS` names this library), the
//! exports forward untouched to the program's loader; when the exports came first, every later
//! `clInitLayer` gets its own table back (the layer passes that loader through). So no call is
//! recorded twice, also where the program's loader forwards to a layer-capable loader beneath
//! it (which would otherwise call the layer again from inside the exports' call), and each
//! traced call goes down the table of the loader it was made to. The price: in a process that
//! uses two loaders, one through these exports and one that loads layers (the SYCL runtime's
//! own, which UR reaches through its own handle), only the first to initialise is traced.
//!
//! Cost: the export (an `Acquire` load, an indirect call) in front of the layer's wrapper, and
//! the loader's own entry point behind it: 22-26 instructions per call more than layer
//! mode (`docs/overhead.md`, *OpenCL preload mode*).

use std::ffi::{CStr, c_void};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use crate::api::{DISPATCH_SLOTS, IcdDispatch, SLOT_NAMES};

/// The environment variable naming the loader `offtrace record` found for the program.
pub const LOADER_ENV: &str = "OFFTRACE_OPENCL_LOADER";

/// The table the exports call: the layer's, or the loader's own when a loader runs the layer.
static TABLE: AtomicPtr<IcdDispatch> = AtomicPtr::new(ptr::null_mut());
/// Whether a loader's `clInitLayer` installed the layer.
static LAYER_INSTALLED: AtomicBool = AtomicBool::new(false);
/// Whether the exports installed the layer (they record in front of the program's loader).
static PRELOAD_INSTALLED: AtomicBool = AtomicBool::new(false);
/// Serialises the two owners' decisions (the first exported call, each `clInitLayer`).
static DECIDE: Mutex<()> = Mutex::new(());

/// The table behind the exports, made at the first call.
#[inline(always)]
pub(crate) fn table() -> &'static IcdDispatch {
    // Acquire: pairs with the Release store in `init_table`, which publishes the leaked table.
    let t = TABLE.load(Ordering::Acquire);
    if t.is_null() {
        return init_table();
    }
    // SAFETY: TABLE holds null or a leaked (process-lifetime) table.
    unsafe { &*t }
}

/// An all-null table: every export then answers `CL_INVALID_OPERATION` (no loader found).
fn empty() -> &'static IcdDispatch {
    static EMPTY: AtomicPtr<IcdDispatch> = AtomicPtr::new(ptr::null_mut());
    let t = EMPTY.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: a leaked table.
        return unsafe { &*t };
    }
    // Null slots are None.
    let table = leaked([ptr::null_mut::<c_void>(); DISPATCH_SLOTS]);
    match EMPTY.compare_exchange(ptr::null_mut(), ptr::from_ref(table).cast_mut(), Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => table,
        // SAFETY: another thread's leaked table.
        Err(other) => unsafe { &*other },
    }
}

#[cold]
#[inline(never)]
fn init_table() -> &'static IcdDispatch {
    std::panic::catch_unwind(|| {
        let _decide = DECIDE.lock().unwrap_or_else(|e| e.into_inner());
        let t = TABLE.load(Ordering::Acquire);
        if !t.is_null() {
            // SAFETY: a leaked table.
            return unsafe { &*t };
        }
        // No loader yet (a caller that looked the symbols up before loading one): answer this
        // call with errors and look again at the next.
        let Some(handle) = find_loader() else { return empty() };
        let loader = loader_table(handle);
        // Relaxed (both flags, here and in `layer_may_init`): written and read under DECIDE.
        let chosen: &'static IcdDispatch = if LAYER_INSTALLED.load(Ordering::Relaxed) {
            // A loader runs the layer already: forward untouched.
            loader
        } else {
            PRELOAD_INSTALLED.store(true, Ordering::Relaxed);
            crate::layer::init_preload(loader).unwrap_or(loader)
        };
        // Release: publishes the leaked table to the exports' Acquire load.
        TABLE.store(ptr::from_ref(chosen).cast_mut(), Ordering::Release);
        chosen
    })
    .unwrap_or_else(|_| empty())
}

/// Whether a loader's `clInitLayer` may install the layer: not when the exports own it (that
/// loader's calls would be recorded twice, or go down the wrong loader's table). Called by the
/// layer's initialisation.
pub(crate) fn layer_may_init() -> bool {
    let _decide = DECIDE.lock().unwrap_or_else(|e| e.into_inner());
    if PRELOAD_INSTALLED.load(Ordering::Relaxed) {
        return false;
    }
    LAYER_INSTALLED.store(true, Ordering::Relaxed);
    true
}

/// Whether the exports own the layer (they record in front of the program's loader).
pub fn preload_active() -> bool {
    // Relaxed: set once before the backend starts (under DECIDE); a status flag.
    PRELOAD_INSTALLED.load(Ordering::Relaxed)
}

/// The table of the loader's own exported functions (looked up by name in its object).
fn loader_table(handle: *mut c_void) -> &'static IcdDispatch {
    let mut slots = [ptr::null_mut::<c_void>(); DISPATCH_SLOTS];
    for (slot, name) in slots.iter_mut().zip(SLOT_NAMES.iter()) {
        // SAFETY: handle is a live dlopen handle; name is NUL-terminated.
        *slot = unsafe { libc::dlsym(handle, name.as_ptr()) };
    }
    // Each non-null slot is the loader's function of that slot's name, hence of its signature.
    leaked(slots)
}

/// `slots` as a dispatch table for the process's lifetime; each slot must be null or a function
/// of that slot's signature.
fn leaked(slots: [*mut c_void; DISPATCH_SLOTS]) -> &'static IcdDispatch {
    // SAFETY: IcdDispatch is DISPATCH_SLOTS pointer-sized fields, `Option<fn>` with null = None
    // (layer.rs test `dispatch_table_is_one_pointer_per_slot`); the callers pass null or a
    // function of the slot's signature.
    Box::leak(Box::new(unsafe { std::mem::transmute::<[*mut c_void; DISPATCH_SLOTS], IcdDispatch>(slots) }))
}

/// The load base of the object holding `addr` (0 when none does).
fn object_base(addr: *const c_void) -> usize {
    // SAFETY: Dl_info is pointers and ints: all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 { 0 } else { info.dli_fbase as usize }
}

/// The load base of this library.
fn own_base() -> usize {
    object_base(own_base as *const c_void)
}

const GET_PLATFORM_IDS: &CStr = c"clGetPlatformIDs";

/// A loaded object's handle (`RTLD_NOLOAD`: never loads anything), if the `clGetPlatformIDs`
/// found through it is a loader's: not this library's, nor any layer's (an object that also
/// defines `clGetLayerInfo`, such as another copy of offtrace's layer, whose exports would
/// forward back here).
fn loaded(path: &CStr) -> Option<*mut c_void> {
    // SAFETY: path is NUL-terminated; RTLD_NOLOAD only returns an already loaded object.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_NOW) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: a live handle, NUL-terminated names.
    let (f, layer) =
        unsafe { (libc::dlsym(handle, GET_PLATFORM_IDS.as_ptr()), libc::dlsym(handle, c"clGetLayerInfo".as_ptr())) };
    let base = object_base(f);
    if f.is_null() || base == 0 || base == own_base() || object_base(layer) == base {
        close(handle);
        return None;
    }
    Some(handle)
}

/// Gives back a reference taken with `RTLD_NOLOAD` (the object stays loaded: others hold it).
fn close(handle: *mut c_void) {
    // SAFETY: a handle returned by dlopen, closed once.
    unsafe { libc::dlclose(handle) };
}

/// The program's loader, in the order of the module docs.
fn find_loader() -> Option<*mut c_void> {
    if let Some(path) = std::env::var_os(LOADER_ENV).filter(|p| !p.is_empty())
        && let Ok(path) = std::ffi::CString::new(path.into_encoded_bytes())
        && let Some(found) = loaded(&path)
    {
        return Some(found);
    }
    // SAFETY: RTLD_NEXT lookup of a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, GET_PLATFORM_IDS.as_ptr()) };
    if let Some(file) = object_file(next)
        && let Some(found) = loaded(&file)
    {
        return Some(found);
    }
    loaded(c"libOpenCL.so.1").or_else(scan_loaded)
}

/// The file of the object holding `addr`, if any.
fn object_file(addr: *const c_void) -> Option<std::ffi::CString> {
    // SAFETY: Dl_info is pointers and ints: all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address.
    if addr.is_null() || unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the dynamic loader while the object is loaded (the
    // caller holds a handle of it); copied at once.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_owned())
}

/// The first loaded object, other than this library, that defines `clGetPlatformIDs` itself and
/// is not an ICD (an ICD defines `clIcdGetPlatformIDsKHR`): a loader opened `RTLD_LOCAL`.
fn scan_loaded() -> Option<*mut c_void> {
    let mut names: Vec<std::ffi::CString> = Vec::new();
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: dl_iterate_phdr's info, valid for the call; data is the Vec passed below.
        let (info, names) = unsafe { (&*info, &mut *data.cast::<Vec<std::ffi::CString>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a NUL-terminated path owned by the dynamic loader.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
        0
    }
    // SAFETY: the callback only reads `info` and pushes to the Vec it is given.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut names).cast()) };
    names.iter().find_map(|name| {
        let handle = loaded(name)?;
        // SAFETY: a live handle, NUL-terminated names.
        let (own, icd) = unsafe {
            (libc::dlsym(handle, GET_PLATFORM_IDS.as_ptr()), libc::dlsym(handle, c"clIcdGetPlatformIDsKHR".as_ptr()))
        };
        let defines_it = object_file(own).as_ref() == Some(name);
        let is_icd = object_file(icd).as_ref() == Some(name);
        if defines_it && !is_icd {
            Some(handle)
        } else {
            close(handle);
            None
        }
    })
}
