#!/usr/bin/env python3
"""Generates offtrace-cuda's tables from the CUPTI and CUDA headers.

Usage: gen_tables.py INCLUDE_DIR OUT_DIR

INCLUDE_DIR holds cupti.h, cupti_runtime_cbid.h, cupti_driver_cbid.h, generated_cuda_meta.h,
generated_cuda_runtime_api_meta.h, cuda.h and cuda_runtime_api.h: the `nvidia/cu13/include`
folder of the PyPI wheels nvidia-cuda-cupti and nvidia-cuda-runtime unpacked together
(`gen/fetch-headers.sh` does that). Nothing is copied by hand: callback ids and names come from
the cbid enums, each parameter's name and C type from the generated parameter structs, and
every offset and size from a C probe compiled with the host's C compiler against those headers
(LP64, x86-64: the layout the CUDA driver uses on Linux).

Writes OUT_DIR/runtime_api.rs, OUT_DIR/driver_api.rs and OUT_DIR/cupti_layout.rs.
"""
import os
import re
import subprocess
import sys
import tempfile

INC, OUT = sys.argv[1], sys.argv[2]


def read(name):
    with open(os.path.join(INC, name), encoding="utf-8") as f:
        return f.read()


def cbids(header, prefix):
    """[(id, cbid_name)] of one callback-id enum, without INVALID, SIZE and FORCE_INT."""
    out = []
    for m in re.finditer(r"^\s*" + prefix + r"(\w+)\s*=\s*(\d+)\s*,", read(header), re.M):
        name, value = m.group(1), int(m.group(2))
        if name in ("INVALID", "SIZE"):
            continue
        out.append((value, name))
    ids = [v for v, _ in out]
    assert len(ids) == len(set(ids)), header + ": duplicate callback ids"
    return sorted(out)


def param_structs(header):
    """{struct tag name without _params_st: [(member, c type)]}."""
    text = re.sub(r"//[^\n]*", "", read(header))
    out = {}
    for m in re.finditer(r"typedef struct (\w+)_params_st\s*\{(.*?)\}\s*(\w+)_params\s*;", text, re.S):
        tag, body = m.group(1), m.group(2)
        members = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            fp = re.match(r"(.*)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", decl)
            if fp:
                members.append((fp.group(2), fp.group(1).strip() + " (*)(" + fp.group(3) + ")"))
                continue
            mm = re.match(r"(.*?)(\w+)\s*(\[[^\]]*\])?$", decl)
            assert mm, (tag, decl)
            ctype = mm.group(1).strip().replace(" *", "*").replace("* ", "*")
            ctype = re.sub(r"\s+", " ", ctype)
            if mm.group(3):
                ctype += mm.group(3)
            members.append((mm.group(2), ctype))
        out[tag] = members
    return out


RUNTIME = cbids("cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_")
DRIVER = cbids("cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")
RT_PARAMS = param_structs("generated_cuda_runtime_api_meta.h")
DRV_PARAMS = param_structs("generated_cuda_meta.h")

# Fields of the CUPTI structs the backend reads (names chosen here; offsets from the probe).
LAYOUT = {
    "CUpti_CallbackData": ["callbackSite", "functionName", "functionParams", "functionReturnValue",
                           "symbolName", "context", "contextUid", "correlationData", "correlationId"],
    "CUpti_ResourceData": ["context", "resourceHandle.stream", "resourceDescriptor"],
    "CUpti_ModuleResourceData": ["moduleId", "cubinSize", "pCubin"],
    "CUpti_GraphData": ["graph", "originalGraph", "node", "originalNode", "nodeType", "dependency", "graphExec"],
    "CUpti_NvtxData": ["functionName", "functionParams", "functionReturnValue"],
    "CUpti_SubscriberParams": ["structSize", "subscriberName", "oldSubscriberName", "oldSubscriberSize"],
    "CUpti_Activity": ["kind"],
    "CUlaunchConfig": ["gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes",
                       "hStream"],
    "cudaLaunchConfig_t": ["gridDim.x", "gridDim.y", "gridDim.z", "blockDim.x", "blockDim.y", "blockDim.z",
                           "dynamicSmemBytes", "stream"],
    "CUpti_ActivityKernel10": ["kind", "registersPerThread", "start", "end", "completed", "deviceId", "contextId",
                               "streamId", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                               "staticSharedMemory", "dynamicSharedMemory", "localMemoryPerThread",
                               "correlationId", "gridId", "name", "launchType", "graphNodeId", "graphId",
                               "clusterX", "clusterY", "clusterZ", "isDeviceLaunched"],
    "CUpti_ActivityMemcpy6": ["kind", "copyKind", "srcKind", "dstKind", "flags", "bytes", "start", "end",
                              "deviceId", "contextId", "streamId", "correlationId", "graphNodeId", "graphId"],
    "CUpti_ActivityMemcpyPtoP4": ["kind", "copyKind", "srcKind", "dstKind", "flags", "bytes", "start", "end",
                                  "deviceId", "contextId", "streamId", "srcDeviceId", "dstDeviceId",
                                  "correlationId", "graphNodeId", "graphId"],
    "CUpti_ActivityMemset4": ["kind", "value", "bytes", "start", "end", "deviceId", "contextId", "streamId",
                              "correlationId", "flags", "memoryKind", "graphNodeId", "graphId"],
    "CUpti_ActivityMemory4": ["kind", "memoryOperationType", "memoryKind", "correlationId", "address", "bytes",
                              "timestamp", "deviceId", "contextId", "streamId", "name", "isAsync",
                              "memoryPoolConfig.memoryPoolType", "memoryPoolConfig.address"],
    "CUpti_ActivityMemoryPool3": ["kind", "memoryPoolOperationType", "memoryPoolType", "correlationId",
                                  "deviceId", "address", "size", "releaseThreshold", "timestamp", "utilizedSize"],
    "CUpti_ActivitySynchronization2": ["kind", "type", "start", "end", "correlationId", "contextId", "streamId",
                                       "cudaEventId"],
    "CUpti_ActivityMarker2": ["kind", "flags", "timestamp", "id", "objectKind", "objectId", "name", "domain"],
    "CUpti_ActivityGraphTrace2": ["kind", "correlationId", "start", "end", "deviceId", "graphId", "contextId",
                                  "streamId"],
    "CUpti_ActivityModule": ["kind", "contextId", "id", "cubinSize", "cubin"],
    "CUpti_ActivityExternalCorrelation": ["kind", "externalKind", "externalId", "correlationId"],
    "CUpti_ActivityOverhead3": ["kind", "overheadKind", "objectKind", "start", "end", "correlationId"],
    "CUpti_ActivityAPI": ["kind", "cbid", "start", "end", "processId", "threadId", "correlationId", "returnValue"],
}

# Enum constants the backend uses (values from the probe).
CONSTANTS = [
    "CUPTI_SUCCESS", "CUPTI_ERROR_MAX_LIMIT_REACHED", "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
    "CUPTI_ERROR_NOT_INITIALIZED", "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
    "CUPTI_API_ENTER", "CUPTI_API_EXIT",
    "CUPTI_CB_DOMAIN_DRIVER_API", "CUPTI_CB_DOMAIN_RUNTIME_API", "CUPTI_CB_DOMAIN_RESOURCE",
    "CUPTI_CB_DOMAIN_SYNCHRONIZE", "CUPTI_CB_DOMAIN_NVTX",
    "CUPTI_CBID_RESOURCE_CONTEXT_CREATED", "CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING",
    "CUPTI_CBID_RESOURCE_STREAM_CREATED", "CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING",
    "CUPTI_CBID_RESOURCE_MODULE_LOADED", "CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING",
    "CUPTI_CBID_RESOURCE_GRAPH_CREATED", "CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING",
    "CUPTI_CBID_RESOURCE_GRAPH_CLONED", "CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED",
    "CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING", "CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_CREATED",
    "CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED", "CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED",
    "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL",
    "CUPTI_ACTIVITY_KIND_MARKER", "CUPTI_ACTIVITY_KIND_OVERHEAD", "CUPTI_ACTIVITY_KIND_MODULE",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION",
    "CUPTI_ACTIVITY_KIND_MEMCPY2", "CUPTI_ACTIVITY_KIND_MEMORY2", "CUPTI_ACTIVITY_KIND_MEMORY_POOL",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN", "CUPTI_ACTIVITY_MEMCPY_KIND_HTOD", "CUPTI_ACTIVITY_MEMCPY_KIND_DTOH",
    "CUPTI_ACTIVITY_MEMCPY_KIND_HTOA", "CUPTI_ACTIVITY_MEMCPY_KIND_ATOH", "CUPTI_ACTIVITY_MEMCPY_KIND_ATOA",
    "CUPTI_ACTIVITY_MEMCPY_KIND_ATOD", "CUPTI_ACTIVITY_MEMCPY_KIND_DTOA", "CUPTI_ACTIVITY_MEMCPY_KIND_DTOD",
    "CUPTI_ACTIVITY_MEMCPY_KIND_HTOH", "CUPTI_ACTIVITY_MEMCPY_KIND_PTOP",
    "CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN", "CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE", "CUPTI_ACTIVITY_MEMORY_KIND_PINNED",
    "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE", "CUPTI_ACTIVITY_MEMORY_KIND_ARRAY", "CUPTI_ACTIVITY_MEMORY_KIND_MANAGED",
    "CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC", "CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC",
    "CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION", "CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE",
    "CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED", "CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED",
    "CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED",
    "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT",
    "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE",
    "CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS", "CUPTI_ACTIVITY_FLAG_MARKER_START", "CUPTI_ACTIVITY_FLAG_MARKER_END",
    "CUPTI_ACTIVITY_FLAG_FLUSH_FORCED",
    "CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE", "CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT",
    "CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER",
    "CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN", "CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0",
    "CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1",
    "CU_GRAPH_NODE_TYPE_KERNEL", "CU_GRAPH_NODE_TYPE_MEMCPY", "CU_GRAPH_NODE_TYPE_MEMSET",
    "CU_GRAPH_NODE_TYPE_HOST", "CU_GRAPH_NODE_TYPE_GRAPH", "CU_GRAPH_NODE_TYPE_EMPTY",
    "CUPTI_API_VERSION", "CUDA_VERSION",
]


def probe(rt, drv):
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <cupti.h>',
            
             '#define F(T, M) printf("F %s %s %zu %zu\\n", #T, #M, offsetof(T, M), sizeof(((T*)0)->M));',
             '#define S(T) printf("S %s %zu\\n", #T, sizeof(T));',
             '#define C(N) printf("C %s %lld\\n", #N, (long long)(N));', 'int main(void) {']
    for table in (rt, drv):
        for tag, members in table.items():
            t = "struct " + tag + "_params_st"
            lines.append('printf("S %s %zu\\n", "' + tag + '", sizeof(' + t + '));')
            for name, _ in members:
                lines.append('printf("F %s %s %zu %zu\\n", "' + tag + '", "' + name + '", offsetof(' + t + ', '
                             + name + '), sizeof(((' + t + '*)0)->' + name + '));')
    for t, fields in LAYOUT.items():
        lines.append("S(" + t + ")")
        for f in fields:
            lines.append("F(" + t + ", " + f + ")")
    for c in CONSTANTS:
        lines.append("C(" + c + ")")
    lines += ["return 0;", "}"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-w", "-DCUPTILP64", "-I", INC, src, "-o", exe], check=True)
        text = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    sizes, fields, consts = {}, {}, {}
    for line in text.splitlines():
        p = line.split()
        if p[0] == "S":
            sizes[p[1]] = int(p[2])
        elif p[0] == "F":
            fields[(p[1], p[2])] = (int(p[3]), int(p[4]))
        else:
            consts[p[1]] = int(p[2])
    return sizes, fields, consts


SIZES, FIELDS, CONSTS = probe(RT_PARAMS, DRV_PARAMS)

HANDLE_TYPES = re.compile(r"^(const )?(CU\w+|cuda\w+_t|cudaStream_t|cudaEvent_t|cudaGraph\w*_t)$")


def fmt_of(ctype, size):
    """The core's ArgFormat name for a C type."""
    base = ctype.replace("const ", "").strip()
    if re.match(r"^(const )?char\*$", ctype.replace(" ", "")) or base.replace(" ", "") == "char*":
        return "CString"
    if "*" in ctype or "(*)" in ctype:
        return "Pointer"
    if base in ("CUdeviceptr", "CUdeviceptr_v2", "cudaStream_t", "cudaEvent_t", "CUstream", "CUcontext",
                "CUevent", "CUfunction", "CUmodule", "CUgraph", "CUgraphExec", "CUgraphNode", "CUlibrary",
                "CUkernel", "CUmemoryPool", "cudaMemPool_t", "cudaGraph_t", "cudaGraphExec_t",
                "cudaGraphNode_t", "cudaKernel_t", "cudaLibrary_t", "CUarray", "cudaArray_t",
                "cudaArray_const_t", "CUtexObject", "CUsurfObject", "cudaTextureObject_t",
                "cudaSurfaceObject_t", "CUmemGenericAllocationHandle", "cudaUserObject_t", "CUuserObject",
                "CUexternalMemory", "CUexternalSemaphore", "CUgreenCtx", "CUlinkState", "CUmipmappedArray",
                "cudaMipmappedArray_t", "cudaMipmappedArray_const_t", "CUgraphicsResource",
                "cudaGraphicsResource_t", "cudaExternalMemory_t", "cudaExternalSemaphore_t"):
        return "Pointer"
    if base.startswith("enum ") or base.startswith("CU") and base.endswith("_enum"):
        return "Enum"
    if base in ("int", "short", "long", "long long", "int64_t", "int32_t", "ssize_t", "CUdevice", "CUdevice_v1"):
        return "Signed"
    if base in ("unsigned int", "unsigned", "size_t", "unsigned long", "unsigned long long", "uint32_t",
                "uint64_t", "unsigned short", "unsigned char", "uint8_t", "uint16_t", "cuuint64_t", "cuuint32_t"):
        return "Unsigned"
    if base in ("float", "double"):
        return "Hex"
    if base.endswith("Flags") or "flags" in base.lower():
        return "Hex"
    if size in (1, 2, 4, 8) and (base.startswith("CU") or base.startswith("cuda")):
        # CUDA typedefs of enumerations (CUresult, CUmemorytype, cudaMemcpyKind, ...) and handles
        # not listed above: 4 bytes is an enumeration, 8 an opaque handle.
        return "Enum" if size == 4 else "Pointer"
    return "Hex"


def esc(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def api_name(cbid, runtime):
    """The function's name as CUPTI's `functionName` gives it: the runtime's cbids carry the
    version the function appeared in (`cudaMalloc_v3020`), which the symbol does not."""
    if runtime:
        return re.sub(r"_v\d{4,5}$", "", cbid)
    return cbid


def emit_api(path, table_name, cbid_list, params, runtime, kind_doc):
    out = ["// @generated by crates/offtrace-cuda/gen/gen_tables.py from the CUDA "
           + str(CONSTS["CUDA_VERSION"]) + " / CUPTI " + str(CONSTS["CUPTI_API_VERSION"]) + " headers. Do not edit.",
           "//! " + kind_doc, "",
           "use crate::table::{ApiFunction, Param, ParamFormat::*};", "",
           "/// Every callback id of the domain, sorted by id.",
           "pub static " + table_name + ": &[ApiFunction] = &["]
    missing = 0
    for cid, cbid in cbid_list:
        tag = cbid if cbid in params else None
        plist = []
        psize = 0
        if tag is not None:
            psize = SIZES[tag]
            for name, ctype in params[tag]:
                off, size = FIELDS[(tag, name)]
                if ctype in ("dim3",) and size == 12:
                    for i, axis in enumerate("xyz"):
                        plist.append((name + "." + axis, "unsigned int", off + 4 * i, 4, "Unsigned"))
                    continue
                plist.append((name, ctype, off, size, fmt_of(ctype, size)))
        else:
            missing += 1
        ps = ", ".join('Param {{ name: "{}", c_type: "{}", offset: {}, size: {}, format: {} }}'.format(
            esc(n), esc(t), o, s, f) for n, t, o, s, f in plist)
        out.append('    ApiFunction {{ id: {}, name: "{}", cbid_name: "{}", params_size: {}, has_params: {}, '
                   'params: &[{}] }},'.format(cid, esc(api_name(cbid, runtime)), esc(cbid), psize,
                                              "true" if tag is not None else "false", ps))
    out.append("];")
    out.append("")
    out.append("/// Callback ids of this domain without a parameter struct in the headers (removed or internal).")
    out.append("pub const WITHOUT_PARAMS: usize = {};".format(missing))
    for cid, cbid in cbid_list:
        out.append("pub const CBID_{}: u32 = {};".format(cbid, cid))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


emit_api(os.path.join(OUT, "runtime_api.rs"), "RUNTIME_API", RUNTIME, RT_PARAMS, True,
         "CUDA runtime API callback ids (`CUPTI_CB_DOMAIN_RUNTIME_API`) and their parameter structs.")
emit_api(os.path.join(OUT, "driver_api.rs"), "DRIVER_API", DRIVER, DRV_PARAMS, False,
         "CUDA driver API callback ids (`CUPTI_CB_DOMAIN_DRIVER_API`) and their parameter structs.")

lay = ["// @generated by crates/offtrace-cuda/gen/gen_tables.py from the CUDA "
       + str(CONSTS["CUDA_VERSION"]) + " / CUPTI " + str(CONSTS["CUPTI_API_VERSION"]) + " headers. Do not edit.",
       "//! Offsets and sizes of the CUPTI structs the backend reads, and the enum values it uses.",
       "#![allow(non_upper_case_globals, dead_code)]", ""]
for t, fields in LAYOUT.items():
    lay.append("/// `{}`.".format(t))
    lay.append("pub mod {} {{".format(t))
    lay.append("    pub const SIZE: usize = {};".format(SIZES[t]))
    for fld in fields:
        off, size = FIELDS[(t, fld)]
        n = fld.replace(".", "_")
        if n in ("type", "match", "ref", "fn", "mod", "use", "impl", "self", "struct", "enum", "where"):
            n += "_"  # a Rust keyword
        lay.append("    pub const {}: (usize, usize) = ({}, {});".format(n, off, size))
    lay.append("}")
for c in CONSTANTS:
    lay.append("pub const {}: i64 = {};".format(c, CONSTS[c]))
with open(os.path.join(OUT, "cupti_layout.rs"), "w") as f:
    f.write("\n".join(lay) + "\n")
print("runtime", len(RUNTIME), "driver", len(DRIVER), "runtime structs", len(RT_PARAMS), "driver structs",
      len(DRV_PARAMS))
