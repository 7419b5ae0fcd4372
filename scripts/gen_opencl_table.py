#!/usr/bin/env python3
"""Generate crates/offtrace-opencl/src/api.rs from the Khronos OpenCL headers.

usage: scripts/gen_opencl_table.py [--include DIR] [--out FILE] [--check]
defaults: --include /usr/include (Debian `opencl-headers`, installed by scripts/setup-opencl.sh)
          --out crates/offtrace-opencl/src/api.rs
--check:  regenerate into memory and fail (exit 1) if the checked-in file differs.

How: the C preprocessor (`cc -E -P`) expands CL/cl.h, cl_ext.h, cl_gl.h, cl_egl.h, cl_icd.h with
every deprecated API and the beta extensions enabled (so every prototype is visible), then this
script reads from the expanded text:

  - `struct _cl_icd_dispatch`: the ICD dispatch table, slot by slot, in order. A slot typed
    `cl_api_clX` is the function clX; the `void *` slots are Windows-only (D3D/DX9) functions.
    Operation id = slot index, so ids are stable across header versions (the table only grows).
  - `typedef R (*cl_api_clX)(params)`: the signature of each slot's function, with parameter
    names.
  - `extern R clX(params);` prototypes not in the dispatch table: extension functions (USM,
    command buffers, semaphores, ...), reached through clGetExtensionFunctionAddress[ForPlatform].
    Operation ids continue after the last slot, in header order.
  - `typedef <base> cl_x;` chains: each parameter's C type is resolved to a base type, which gives
    its width, its Rust type in the wrapper's signature and its `ArgFormat`:
      pointers, function pointers, arrays, handles (`struct _cl_x *`)  -> Pointer (`const char *` -> CString)
      cl_bool                                                          -> Bool
      *_info, *_type, cl_channel_*, *_mode, *_status, *_format enums   -> Enum
      cl_bitfield-derived flags (cl_mem_flags, ...)                    -> Hex
      other signed / unsigned integers                                 -> Signed / Unsigned

Output: the operation table (`OPERATIONS`), one const per function (`op::clX`), a `#[repr(C)]`
mirror of the dispatch table (`IcdDispatch`, `Option<fn>` per slot), one `extern "C"` wrapper per
function (trace enter, call the hook or the next layer, trace exit), the table of wrappers handed
to the loader, and the extension-function lookup. Which functions have a hand-written hook (in
`crates/offtrace-opencl/src/hooks.rs`) and which enqueue commands produce device activity is
listed below (HOOKS, ENQUEUE): that is the layer's design, not the header's.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--include", default="/usr/include")
ap.add_argument("--out", default=str(root / "crates/offtrace-opencl/src/api.rs"))
ap.add_argument("--check", action="store_true")
opts = ap.parse_args()

PRELUDE = """
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_2_0_APIS
#define CL_USE_DEPRECATED_OPENCL_2_1_APIS
#define CL_USE_DEPRECATED_OPENCL_2_2_APIS
#define CL_ENABLE_BETA_EXTENSIONS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <CL/cl_gl.h>
#include <CL/cl_egl.h>
#include <CL/cl_icd.h>
"""
inc = Path(opts.include)
if not (inc / "CL/cl_icd.h").exists():
    sys.exit(f"gen_opencl_table: {inc}/CL/cl_icd.h not found (run scripts/setup-opencl.sh or pass --include)")
try:
    text = subprocess.run(["cc", "-E", "-P", "-x", "c", "-I", str(inc), "-"],
                          input=PRELUDE, capture_output=True, text=True, check=True).stdout
except (OSError, subprocess.CalledProcessError) as e:
    sys.exit(f"gen_opencl_table: the C preprocessor failed: {e}")
version = "unknown"
vfile = inc / "CL/cl_version.h"
for line in (inc / "CL/cl.h").read_text().splitlines()[:40]:
    m = re.search(r"Copyright \(c\) (\d{4})", line)
    if m:
        version = m.group(1)
text = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", text)
flat = re.sub(r"\s+", " ", text)

# ---- typedefs -------------------------------------------------------------------------------
BASE = {
    "int8_t": ("i8", 1, True), "uint8_t": ("u8", 1, False), "int16_t": ("i16", 2, True),
    "uint16_t": ("u16", 2, False), "int32_t": ("i32", 4, True), "uint32_t": ("u32", 4, False),
    "int64_t": ("i64", 8, True), "uint64_t": ("u64", 8, False), "size_t": ("usize", 8, False),
    "intptr_t": ("isize", 8, True), "uintptr_t": ("usize", 8, False), "signed char": ("i8", 1, True),
    "unsigned char": ("u8", 1, False), "char": ("i8", 1, True), "short": ("i16", 2, True),
    "unsigned short": ("u16", 2, False), "int": ("i32", 4, True), "unsigned int": ("u32", 4, False),
    "long": ("i64", 8, True), "unsigned long": ("u64", 8, False), "long long": ("i64", 8, True),
    "unsigned long long": ("u64", 8, False), "unsigned": ("u32", 4, False),
    "long int": ("i64", 8, True), "long unsigned int": ("u64", 8, False), "short int": ("i16", 2, True),
    "short unsigned int": ("u16", 2, False), "signed short": ("i16", 2, True), "signed int": ("i32", 4, True),
    "signed long": ("i64", 8, True), "__int32_t": ("i32", 4, True), "__uint32_t": ("u32", 4, False),
    "__int64_t": ("i64", 8, True), "__uint64_t": ("u64", 8, False), "__int8_t": ("i8", 1, True),
    "__uint8_t": ("u8", 1, False), "__int16_t": ("i16", 2, True), "__uint16_t": ("u16", 2, False),
}
typedefs = {}
handles = set()
for m in re.finditer(r"typedef ([\w ]+?) (\w+) ?;", flat):
    typedefs[m.group(2)] = m.group(1).strip()
for m in re.finditer(r"typedef struct (\w+) ?\* ?(\w+) ?;", flat):
    handles.add(m.group(2))
for m in re.finditer(r"typedef void ?\* ?(\w+) ?;", flat):
    handles.add(m.group(1))


def chain(t):
    """The typedef chain of `t`, from t itself to its base."""
    out = [t]
    while t in typedefs and t not in BASE and t not in handles and len(out) < 20:
        t = typedefs[t]
        out.append(t)
    return out


ENUM_SUFFIX = ("_info", "_type", "_mode", "_status", "_order", "_format", "_id")


def classify(ctype, name):
    """(rust type, size, ArgFormat) of a parameter or return type."""
    t = re.sub(r"\bconst\b", "", ctype).replace("struct ", "").strip()
    t = re.sub(r"\s+", " ", t)
    if "*" in ctype or "(" in ctype or "[" in ctype:
        norm = re.sub(r"\s+", "", ctype)
        if norm == "constchar*":
            return "*mut c_void", 8, "CString"
        return "*mut c_void", 8, "Pointer"
    if t in handles:
        return "*mut c_void", 8, "Pointer"
    c = chain(t)
    base = c[-1]
    if base in handles:
        return "*mut c_void", 8, "Pointer"
    if base not in BASE:
        raise SystemExit(f"gen_opencl_table: cannot resolve type {ctype!r} of {name!r} (chain {c})")
    rust, size, signed = BASE[base]
    if "cl_bool" in c:
        return rust, size, "Bool"
    if "cl_bitfield" in c:
        return rust, size, "Hex"
    if any(x.endswith(ENUM_SUFFIX) or x.startswith("cl_channel_") for x in c if x.startswith("cl_")) and not signed:
        return rust, size, "Enum"
    return rust, size, "Signed" if signed else "Unsigned"


def split_params(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_param(p, i):
    m = re.match(r"^(.*?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", p)
    if m:  # function pointer
        ftype = re.sub(r"\(\s*\*\s*\w+\s*\)", "(*)", p, count=1)
        return m.group(2), re.sub(r"\s+", " ", ftype).replace("( ", "(").replace(" )", ")").strip()
    m = re.match(r"^(.*?)(\w+)\s*(\[[^\]]*\])?$", p)
    if not m or not m.group(1).strip():
        return f"arg{i}", p
    ctype = m.group(1).strip() + ("*" if m.group(3) else "")
    ctype = re.sub(r"\s*\*", "*", ctype)
    return m.group(2), ctype


def parse_sig(ret, params):
    params = params.strip()
    args = []
    if params and params != "void":
        for i, p in enumerate(split_params(params)):
            name, ctype = parse_param(p, i)
            rust, size, fmt = classify(ctype, name)
            args.append(dict(name=name, ctype=ctype, rust=rust, size=size, fmt=fmt))
    ret = re.sub(r"\s*\*", "*", ret.strip())
    rret = None if ret == "void" else classify(ret, "return")[0]
    return dict(ret=ret, rust_ret=rret, args=args)


# ---- dispatch table ----------------------------------------------------------------------------
m = re.search(r"typedef struct _cl_icd_dispatch \{(.*?)\} cl_icd_dispatch;", flat)
if not m:
    sys.exit("gen_opencl_table: struct _cl_icd_dispatch not found in cl_icd.h")
slots = []
void_api = set(re.findall(r"typedef void ?\* ?cl_api_(\w+) ?;", flat))
for field in m.group(1).split(";"):
    field = field.strip()
    if not field:
        continue
    fm = re.match(r"^(\w+|void ?\*) ?(\w+)$", field)
    if not fm:
        sys.exit(f"gen_opencl_table: unexpected dispatch field {field!r}")
    ty = fm.group(1).replace(" ", "")
    slots.append(("void*" if ty.startswith("cl_api_") and ty[7:] in void_api else ty, fm.group(2)))

api_sigs = {}
for m in re.finditer(r"typedef ([\w ]+?\**) ?\( ?\* ?cl_api_(\w+) ?\) ?\((.*?)\) ?;", flat):
    api_sigs[m.group(2)] = parse_sig(m.group(1), m.group(3))
protos = {}
proto_order = []
for m in re.finditer(r"extern ([\w ]+?\**) ?(cl[A-Z]\w*) ?\(([^;]*?)\) ?;", flat):
    name = m.group(2)
    if name in ("clGetLayerInfo", "clInitLayer") or name in protos:
        continue
    protos[name] = parse_sig(m.group(1), m.group(3))
    proto_order.append(name)

functions = []  # (id, name, sig, slot index or None)
for i, (ty, name) in enumerate(slots):
    if ty == "void*":
        continue
    if ty != f"cl_api_{name}" or name not in api_sigs:
        sys.exit(f"gen_opencl_table: slot {name} has type {ty} without a cl_api typedef")
    # Prefer the prototype: some cl_api typedefs omit parameter names.
    functions.append((i, name, protos.get(name, api_sigs[name]), i))
slot_names = {n for _, n in slots}
ext = [n for n in proto_order if n not in slot_names]
for j, name in enumerate(ext):
    functions.append((len(slots) + j, name, protos[name], None))

# ---- the layer's design: hooks and enqueue commands -------------------------------------------
# Functions whose wrapper calls a hand-written hook in hooks.rs (same name, `next` first).
HOOKS = {
    "clCreateCommandQueue", "clCreateCommandQueueWithProperties", "clCreateCommandQueueWithPropertiesKHR",
    "clGetCommandQueueInfo", "clRetainCommandQueue", "clReleaseCommandQueue", "clReleaseEvent", "clFinish", "clWaitForEvents", "clGetDeviceInfo", "clGetEventProfilingInfo",
    "clGetExtensionFunctionAddress", "clGetExtensionFunctionAddressForPlatform", "clSetKernelArg",
    "clSetKernelArgSVMPointer", "clSetKernelArgMemPointerINTEL", "clCreateKernel", "clCreateKernelsInProgram",
    "clRetainKernel", "clReleaseKernel", "clCreateBuffer", "clCreateBufferWithProperties", "clCreateSubBuffer", "clCreateImage",
    "clCreateImageWithProperties", "clCreateImage2D", "clCreateImage3D", "clRetainMemObject", "clReleaseMemObject", "clSVMAlloc",
    "clSVMFree", "clHostMemAllocINTEL", "clDeviceMemAllocINTEL", "clSharedMemAllocINTEL", "clMemFreeINTEL",
    "clMemBlockingFreeINTEL", "clCreateProgramWithSource", "clCreateProgramWithBinary", "clCreateProgramWithIL",
    "clCreateProgramWithILKHR", "clCreateProgramWithBuiltInKernels", "clBuildProgram", "clCompileProgram",
    "clLinkProgram", "clRetainProgram", "clReleaseProgram",
}
# Extension functions the layer provides itself when the driver does not (hooks.rs `<name>_fallback`).
FALLBACK = {"clCreateCommandQueueWithPropertiesKHR"}
# Enqueue commands that produce device activity: name -> (kind, operation, payload fields as Rust
# expressions over the parameters). `region(r)` is the product of a `const size_t[3]` region.
K, C, F, S = "KernelDispatch", "MemoryCopy", "MemoryFill", "Sync"
# Copies: `dir` is the direction when the command fixes it (buffers and images live on the
# device, the host pointer on the host); USM / SVM copies find it from the allocation table.
# Maps and unmaps are the core's `map` / `unmap` copies (direction: the map's device to host, the
# unmap's host to device), rect copies and image commands have operations of their own with the
# region's bytes (an image's region is in pixels: times its element size), markers as barriers.
H2D, D2H, D2D, USM = "HostToDevice", "DeviceToHost", "DeviceToDevice", None
ENQUEUE = {
    "clEnqueueNDRangeKernel": (K, "LAUNCH", dict(kernel="kernel", work_dim="work_dim", gws="global_work_size", lws="local_work_size")),
    "clEnqueueTask": (K, "LAUNCH", dict(kernel="kernel", work_dim="1", gws="ptr::null_mut()", lws="ptr::null_mut()")),
    "clEnqueueNativeKernel": (K, "LAUNCH", dict(kernel="0", work_dim="0", gws="ptr::null_mut()", lws="ptr::null_mut()")),
    "clEnqueueReadBuffer": (C, "BUFFER_READ", dict(dst="ptr", src="buffer", size="size as u64", dir=D2H)),
    "clEnqueueWriteBuffer": (C, "BUFFER_WRITE", dict(dst="buffer", src="ptr", size="size as u64", dir=H2D)),
    "clEnqueueCopyBuffer": (C, "BUFFER_COPY", dict(dst="dst_buffer", src="src_buffer", size="size as u64", dir=D2D)),
    "clEnqueueReadBufferRect": (C, "BUFFER_READ_RECT", dict(dst="ptr", src="buffer", size="crate::call::region(region)", dir=D2H)),
    "clEnqueueWriteBufferRect": (C, "BUFFER_WRITE_RECT", dict(dst="buffer", src="ptr", size="crate::call::region(region)", dir=H2D)),
    "clEnqueueCopyBufferRect": (C, "BUFFER_COPY_RECT", dict(dst="dst_buffer", src="src_buffer", size="crate::call::region(region)", dir=D2D)),
    "clEnqueueReadImage": (C, "IMAGE_READ", dict(dst="ptr", src="image", size="crate::objects::image_region_bytes(image, region)", dir=D2H)),
    "clEnqueueWriteImage": (C, "IMAGE_WRITE", dict(dst="image", src="ptr", size="crate::objects::image_region_bytes(image, region)", dir=H2D)),
    "clEnqueueCopyImage": (C, "IMAGE_COPY", dict(dst="dst_image", src="src_image", size="crate::objects::image_region_bytes(src_image, region)", dir=D2D)),
    "clEnqueueCopyImageToBuffer": (C, "IMAGE_TO_BUFFER", dict(dst="dst_buffer", src="src_image", size="crate::objects::image_region_bytes(src_image, region)", dir=D2D)),
    "clEnqueueCopyBufferToImage": (C, "BUFFER_TO_IMAGE", dict(dst="dst_image", src="src_buffer", size="crate::objects::image_region_bytes(dst_image, region)", dir=D2D)),
    "clEnqueueSVMMemcpy": (C, "USM_MEMCPY", dict(dst="dst_ptr", src="src_ptr", size="size as u64", dir=USM)),
    "clEnqueueMemcpyINTEL": (C, "USM_MEMCPY", dict(dst="dst_ptr", src="src_ptr", size="size as u64", dir=USM)),
    "clEnqueueMapBuffer": (C, "MAP", dict(dst="r", src="buffer", size="crate::enqueue::mapping(r as u64, size as u64)", dir=D2H)),
    "clEnqueueMapImage": (C, "IMAGE_MAP", dict(dst="r", src="image", size="crate::enqueue::mapping(r as u64, crate::objects::image_region_bytes(image, region))", dir=D2H)),
    "clEnqueueSVMMap": (C, "MAP", dict(dst="svm_ptr", src="svm_ptr", size="crate::enqueue::mapping(if r == 0 { svm_ptr as u64 } else { 0 }, size as u64)", dir=D2H)),
    "clEnqueueUnmapMemObject": (C, "UNMAP", dict(dst="memobj", src="mapped_ptr", size="crate::enqueue::unmapping(mapped_ptr as u64)", dir=H2D)),
    "clEnqueueSVMUnmap": (C, "UNMAP", dict(dst="svm_ptr", src="0", size="crate::enqueue::unmapping(svm_ptr as u64)", dir=H2D)),
    "clEnqueueMigrateMemObjects": (C, "BUFFER_COPY", dict(dst="0", src="0", size="0", dir=D2D)),
    "clEnqueueSVMMigrateMem": (C, "USM_MEMCPY", dict(dst="0", src="0", size="0", dir=D2D)),
    "clEnqueueMigrateMemINTEL": (C, "USM_MEMCPY", dict(dst="ptr", src="0", size="size as u64", dir=D2D)),
    "clEnqueueFillBuffer": (F, "BUFFER_FILL", dict(dst="buffer", pattern="pattern", pattern_size="pattern_size as u64", size="size as u64")),
    "clEnqueueFillImage": (F, "IMAGE_FILL", dict(dst="image", pattern="fill_color", pattern_size="16", size="crate::objects::image_region_bytes(image, region)")),
    "clEnqueueSVMMemFill": (F, "USM_FILL", dict(dst="svm_ptr", pattern="pattern", pattern_size="pattern_size as u64", size="size as u64")),
    "clEnqueueMemFillINTEL": (F, "USM_FILL", dict(dst="dst_ptr", pattern="pattern", pattern_size="pattern_size as u64", size="size as u64")),
    "clEnqueueMemsetINTEL": (F, "USM_FILL", dict(dst="dst_ptr", pattern="&raw const value", pattern_size="1", size="size as u64")),
    "clEnqueueMarker": (S, "MARKER", dict(count="0")),
    "clEnqueueMarkerWithWaitList": (S, "MARKER", dict(count="num_events_in_wait_list")),
    "clEnqueueBarrierWithWaitList": (S, "BARRIER", dict(count="num_events_in_wait_list")),
}
names = {f[1] for f in functions}
for n in list(HOOKS) + list(ENQUEUE):
    if n not in names:
        sys.exit(f"gen_opencl_table: {n} (HOOKS/ENQUEUE) is not a function of these headers")

# ---- output --------------------------------------------------------------------------------------
o = []
w = o.append
w("//! The OpenCL API as the layer sees it: operation table, dispatch table, wrappers.")
w("//!")
w(f"//! GENERATED by `scripts/gen_opencl_table.py` from the Khronos OpenCL headers ({version}): do not edit.")
w("//! Regenerate with `python3 scripts/gen_opencl_table.py`; `--check` verifies this file is current.")
w("//!")
w(f"//! {len(slots)} dispatch slots ({sum(1 for t, _ in slots if t == 'void*')} Windows-only, untraced), "
  f"{len(ext)} extension functions; {len(functions)} operations.")
w("")
w("#![allow(non_snake_case, non_upper_case_globals, non_camel_case_types, clippy::missing_safety_doc, clippy::too_many_arguments)]")
w("#![allow(clippy::unnecessary_cast, clippy::useless_conversion, unused_unsafe, clippy::let_unit_value)]")
w("")
w("use std::ffi::c_void;")
w("use std::ptr;")
w("use std::sync::atomic::{AtomicPtr, Ordering};")
w("")
w("use offtrace_core::{ArgDescriptor, ArgFormat, Operation};")
w("")
w("use crate::call::ApiCall;")
w("use crate::enqueue::{Command, Submission};")
w("")
w("macro_rules! arg {")
w("    ($name:literal, $ty:literal, $size:literal, $fmt:ident) => {")
w("        ArgDescriptor { name: $name, type_name: $ty, size: $size, format: ArgFormat::$fmt }")
w("    };")
w("}")
w("")
w("/// Operation ids of `OPENCL_API` (dispatch slot index; extension functions after the last slot).")
w("pub mod op {")
for fid, name, _, _ in functions:
    w(f"    pub const {name}: u32 = {fid};")
w("}")
w("")
w(f"/// Number of slots of `cl_icd_dispatch` in these headers.")
w(f"pub const DISPATCH_SLOTS: usize = {len(slots)};")
w("")
w("/// Every function, sorted by id, with its parameters (name, C type, width, format).")
w("pub static OPERATIONS: &[Operation] = &[")
for fid, name, sig, _ in functions:
    args = ", ".join(f'arg!("{a["name"]}", "{a["ctype"]}", {a["size"]}, {a["fmt"]})' for a in sig["args"])
    w(f'    Operation {{ id: {fid}, name: "{name}", args: &[{args}] }},')
w("];")
w("")


def fn_type(sig):
    params = ", ".join(a["rust"] for a in sig["args"])
    ret = f" -> {sig['rust_ret']}" if sig["rust_ret"] else ""
    return f"unsafe extern \"C\" fn({params}){ret}"


w("/// Signatures (`<name>_fn`) of every function.")
w("pub mod sig {")
w("    use std::ffi::c_void;")
for fid, name, sig, _ in functions:
    w(f"    pub type {name}_fn = {fn_type(sig)};")
w("}")
w("")
w("/// `cl_icd_dispatch`: one entry per slot, in the headers' order (the loader's and the layer's tables).")
w("#[repr(C)]")
w("#[derive(Clone, Copy)]")
w("pub struct IcdDispatch {")
for ty, name in slots:
    if ty == "void*":
        w(f"    pub {name}: *mut c_void,")
    else:
        w(f"    pub {name}: Option<sig::{name}_fn>,")
w("}")
w("")
w("/// The next layer's table (the loader's, or a layer below): set once by `clInitLayer`.")
w("pub(crate) static NEXT: AtomicPtr<IcdDispatch> = AtomicPtr::new(ptr::null_mut());")
w("")
w("/// The next layer's table; the layer's wrappers run only after `clInitLayer` published it.")
w("#[inline(always)]")
w("pub(crate) fn next() -> &'static IcdDispatch {")
w("    // SAFETY: the wrappers are reachable only through the table `clInitLayer` returns, after it")
w("    // stored NEXT (Release); the loader's table lives for the process.")
w("    unsafe { &*NEXT.load(Ordering::Acquire) }")
w("}")
w("")
ext_idx = {name: j for j, name in enumerate(ext)}
w(f"/// The real entry points of the extension functions, as the next layer returned them.")
w(f"pub(crate) static EXT_NEXT: [AtomicPtr<c_void>; {len(ext)}] = [const {{ AtomicPtr::new(ptr::null_mut()) }}; {len(ext)}];")
w("")


def ret_default(sig):
    r = sig["rust_ret"]
    if r is None:
        return "()"
    if r == "*mut c_void":
        return "ptr::null_mut()"
    return "crate::call::CL_INVALID_OPERATION as " + r if r == "i32" else "0"


for fid, name, sig, slot in functions:
    args = sig["args"]
    params = ", ".join(f"{a['name']}: {a['rust']}" for a in args)
    ret = f" -> {sig['rust_ret']}" if sig["rust_ret"] else ""
    has_err = any(a["name"] == "errcode_ret" for a in args)
    arg_vals = ", ".join(f"{a['name']} as u64" for a in args)
    w(f"pub(crate) unsafe extern \"C\" fn {name}({params}){ret} {{")
    if slot is not None:
        w(f"    let Some(next) = next().{name} else {{")
    elif name in FALLBACK:
        # The layer provides this entry point where the driver lacks it.
        w(f"    let raw = EXT_NEXT[{ext_idx[name]}].load(Ordering::Acquire);")
        w(f"    // SAFETY: EXT_NEXT holds null or the next layer's entry point of exactly this function.")
        w(f"    let next = (unsafe {{ std::mem::transmute::<*mut c_void, Option<sig::{name}_fn>>(raw) }})")
        w(f"        .unwrap_or(crate::hooks::{name}_fallback as sig::{name}_fn);")
    else:
        w(f"    let raw = EXT_NEXT[{ext_idx[name]}].load(Ordering::Acquire);")
        w(f"    // SAFETY: EXT_NEXT holds null or the next layer's entry point of exactly this function.")
        w(f"    let Some(next) = (unsafe {{ std::mem::transmute::<*mut c_void, Option<sig::{name}_fn>>(raw) }}) else {{")
    if name not in FALLBACK:
        if has_err:
            w(f"        crate::call::set_errcode(errcode_ret, crate::call::CL_INVALID_OPERATION);")
        w(f"        return{(' ' + ret_default(sig)) if sig['rust_ret'] else ''};")
        w("    };")
    # Nothing unwinds into the runtime: a panic in the layer (none is expected) becomes
    # CL_OUT_OF_HOST_MEMORY (or a null object with that error code) instead of an abort.
    w("    let errcode_arg = errcode_ret;" if has_err else "    let errcode_arg = ptr::null_mut::<c_void>();")
    w("    crate::call::no_unwind(errcode_arg, move || {")
    w("    let mut call = ApiCall::new();")
    enter = "enter_enqueue" if name in ENQUEUE else "enter"
    w(f"    call.{enter}(op::{name}, &[{arg_vals}]);")
    call_args = [a["name"] + (" as _" if a["name"] == "errcode_ret" else "") for a in args]
    if has_err:
        w("    let mut errcode_local = 0i32;")
        w("    let errcode_ret = crate::call::errcode_slot(errcode_ret, &mut errcode_local);")
    if name in ENQUEUE:
        kind, opname, fields = ENQUEUE[name]
        evname = "event"
        if not any(a["name"] == evname for a in args):
            sys.exit(f"gen_opencl_table: {name} has no event parameter")
        w(f"    let mut submission = Submission::new(command_queue, {evname} as *mut *mut c_void, &call);")
        call_args = [("submission.event_out() as _" if a == evname else a) for a in call_args]
    target = f"crate::hooks::{name}(next, " if name in HOOKS else "next("
    w(f"    // SAFETY: the application's arguments, passed on unchanged to the next layer's {name}.")
    rbind = "r" if sig["rust_ret"] is not None else "()"
    w(f"    let {rbind} = unsafe {{ {target}{', '.join(call_args)}) }};")
    if name in ENQUEUE:
        kind, opname, fields = ENQUEUE[name]
        res = "r" if sig["rust_ret"] == "i32" else "unsafe { *errcode_ret }"
        if kind == "KernelDispatch":
            cmd = (f"Command::kernel({fields['kernel']} as u64, {fields['work_dim']} as u32, "
                   f"{fields['gws']} as *const usize, {fields['lws']} as *const usize)")
        elif kind == "MemoryCopy":
            d = f"Some(offtrace_core::CopyDirection::{fields['dir']})" if fields["dir"] else "None"
            cmd = f"Command::copy(offtrace_core::memory_copy::{opname}, {fields['dst']} as u64, {fields['src']} as u64, {fields['size']}, {d})"
        elif kind == "MemoryFill":
            cmd = (f"Command::fill(offtrace_core::memory_fill::{opname}, {fields['dst']} as u64, "
                   f"{fields['pattern']} as *const c_void, {fields['pattern_size']}, {fields['size']})")
        else:
            cmd = f"Command::sync(offtrace_core::sync_op::{opname}, {fields['count']} as u32)"
        w(f"    // SAFETY: the pointer arguments were valid for the call that just returned.")
        if any(a["name"] == "event_wait_list" for a in args):
            w(f"    submission.submitted_waiting({res}, op::{name}, unsafe {{ {cmd} }}, num_events_in_wait_list, event_wait_list);")
        else:
            w(f"    submission.submitted({res}, op::{name}, unsafe {{ {cmd} }});")
    if sig["rust_ret"] == "i32":
        w("    call.exit(r, 0);")
    elif has_err:
        w(f"    // SAFETY: errcode_ret points at the caller's cl_int or at errcode_local.")
        w(f"    call.exit(unsafe {{ *errcode_ret }}, r as u64);")
    elif sig["rust_ret"] is None:
        w("    call.exit(0, 0);")
    else:
        w("    call.exit(0, r as u64);")
    if sig["rust_ret"] is not None:
        w("    r")
    w("    })")
    w("}")
    w("")

w("/// The layer's dispatch table: every slot wrapped; Windows-only slots left null (the loader")
w("/// fills null slots from the next table).")
w("pub(crate) fn layer_dispatch() -> IcdDispatch {")
w("    IcdDispatch {")
for ty, name in slots:
    if ty == "void*":
        w(f"        {name}: ptr::null_mut(),")
    else:
        w(f"        {name}: Some({name}),")
w("    }")
w("}")
w("")
# Preload mode (`preload.rs`): the same library, put in LD_PRELOAD, exports every dispatch
# slot's function under its C name; each forwards to the table `preload::table()` chooses (the
# layer's wrappers, or the program's loader itself when that loader runs the layer already).
# Extension functions are not exported (loaders do not export them: they are reached through
# clGetExtensionFunctionAddress[ForPlatform], hooked as in layer mode).
w("/// The C name of each dispatch slot, in order (preload mode fills a table from the loader by name).")
w(f"pub static SLOT_NAMES: [&std::ffi::CStr; {len(slots)}] = [")
for ty, name in slots:
    w(f'    c"{name}",')
w("];")
w("")
w("/// Preload mode's exported entry points: one per dispatch slot, under the slot's C name.")
w("pub mod exports {")
w("    use std::ffi::c_void;")
w("    use std::ptr;")
w("")
for ty, name in slots:
    if ty == "void*":
        continue
    sig = api_sigs[name] if name not in protos else protos[name]
    args = sig["args"]
    params = ", ".join(f"{a['name']}: {a['rust']}" for a in args)
    ret = f" -> {sig['rust_ret']}" if sig["rust_ret"] else ""
    has_err = any(a["name"] == "errcode_ret" for a in args)
    w(f"    #[unsafe(export_name = \"{name}\")]")
    w(f"    pub unsafe extern \"C\" fn export_{name}({params}){ret} {{")
    w(f"        let Some(f) = crate::preload::table().{name} else {{")
    if has_err:
        w(f"            crate::call::set_errcode(errcode_ret, crate::call::CL_INVALID_OPERATION);")
    w(f"            return{(' ' + ret_default(sig).replace('crate::call::CL_INVALID_OPERATION as i32', 'crate::call::CL_INVALID_OPERATION')) if sig['rust_ret'] else ''};")
    w("        };")
    w(f"        // SAFETY: the program's arguments, passed on unchanged to the same function of the table.")
    w(f"        unsafe {{ f({', '.join(a['name'] for a in args)}) }}")
    w("    }")
w("}")
w("")
w("/// The wrapper of extension function `name` and its index in [`EXT_NEXT`].")
w("pub(crate) fn extension_wrapper(name: &[u8]) -> Option<(usize, *mut c_void)> {")
w("    Some(match name {")
for name in ext:
    w(f"        b\"{name}\" => ({ext_idx[name]}, {name} as sig::{name}_fn as *mut c_void),")
w("        _ => return None,")
w("    })")
w("}")
w("")

out = "\n".join(o)
path = Path(opts.out)
if opts.check:
    if not path.exists() or path.read_text() != out:
        sys.exit(f"gen_opencl_table: {path} is not what the headers generate; run scripts/gen_opencl_table.py")
    print(f"gen_opencl_table: {path} is current")
else:
    path.write_text(out)
    print(f"gen_opencl_table: wrote {path} ({len(functions)} operations)")
