//! Decoding CUPTI activity records (device work with device timestamps) into plain values.
//!
//! CUPTI fills buffers the backend hands it (`buffer_requested`) and returns them full
//! (`buffer_completed`) on a CUPTI thread: decoding and emitting happen there, off the
//! application's threads. Each record starts with its `CUpti_ActivityKind`; fields are read at
//! the offsets the generator took from the CUPTI 13.0 headers (`generated::cupti_layout`).
//! Timestamps are CUPTI's: the trace clock when the backend registered its timestamp callback
//! (`Injection::clock_offset_ns` = 0), else CLOCK_REALTIME, shifted by that offset.

#![allow(unsafe_code)] // reads records out of CUPTI's buffers

use std::ffi::{CStr, c_char};

use crate::generated::cupti_layout as l;

/// Copy direction (`CUpti_ActivityMemcpyKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    Unknown,
    HostToDevice,
    DeviceToHost,
    HostToArray,
    ArrayToHost,
    ArrayToArray,
    ArrayToDevice,
    DeviceToArray,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
}

impl CopyKind {
    pub fn from_cupti(v: u8) -> Self {
        match i64::from(v) {
            l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD => Self::HostToDevice,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH => Self::DeviceToHost,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA => Self::HostToArray,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH => Self::ArrayToHost,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA => Self::ArrayToArray,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD => Self::ArrayToDevice,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA => Self::DeviceToArray,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD => Self::DeviceToDevice,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH => Self::HostToHost,
            l::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP => Self::PeerToPeer,
            _ => Self::Unknown,
        }
    }

    /// Short name, as torch.profiler spells directions (`HtoD`, `DtoH`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::HostToDevice => "HtoD",
            Self::DeviceToHost => "DtoH",
            Self::HostToArray => "HtoA",
            Self::ArrayToHost => "AtoH",
            Self::ArrayToArray => "AtoA",
            Self::ArrayToDevice => "AtoD",
            Self::DeviceToArray => "DtoA",
            Self::DeviceToDevice => "DtoD",
            Self::HostToHost => "HtoH",
            Self::PeerToPeer => "PtoP",
        }
    }
}

/// `CUpti_ActivityMemoryKind`.
pub fn memory_kind_name(v: u32) -> &'static str {
    match i64::from(v) {
        l::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE => "pageable",
        l::CUPTI_ACTIVITY_MEMORY_KIND_PINNED => "pinned",
        l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE => "device",
        l::CUPTI_ACTIVITY_MEMORY_KIND_ARRAY => "array",
        l::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED => "managed",
        l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC => "device_static",
        l::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC => "managed_static",
        _ => "unknown",
    }
}

/// Where a record ran: device, context and stream (the stream is the trace's queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    pub device: u32,
    pub context: u32,
    pub stream: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelActivity {
    pub name: *const c_char,
    pub start: u64,
    pub end: u64,
    pub place: Place,
    pub correlation: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub graph_node: u64,
    pub graph: u32,
    pub cluster: [u32; 3],
    pub device_launched: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyActivity {
    pub kind: CopyKind,
    pub src_kind: u32,
    pub dst_kind: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub place: Place,
    pub correlation: u32,
    pub graph_node: u64,
    pub graph: u32,
    /// Peer copies: source and destination devices (equal to `place.device` otherwise).
    pub src_device: u32,
    pub dst_device: u32,
    pub flags: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetActivity {
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub place: Place,
    pub correlation: u32,
    pub memory_kind: u32,
    pub graph_node: u64,
    pub graph: u32,
}

/// `CUpti_ActivitySynchronizationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    EventSynchronize,
    StreamWaitEvent,
    StreamSynchronize,
    ContextSynchronize,
    Other(u32),
}

impl SyncKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::EventSynchronize => "event_synchronize",
            Self::StreamWaitEvent => "stream_wait_event",
            Self::StreamSynchronize => "stream_synchronize",
            Self::ContextSynchronize => "context_synchronize",
            Self::Other(_) => "other",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncActivity {
    pub kind: SyncKind,
    pub start: u64,
    pub end: u64,
    pub context: u32,
    /// `CUPTI_SYNCHRONIZATION_INVALID_VALUE` (all ones) for context synchronisation.
    pub stream: u32,
    pub event: u32,
    pub correlation: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryActivity {
    pub release: bool,
    pub memory_kind: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub place: Place,
    pub correlation: u32,
    pub is_async: bool,
    /// 0 = not from a pool (`CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID`), 1 local, 2 imported.
    pub pool_type: u32,
    pub pool_address: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolActivity {
    /// `CUpti_ActivityMemoryPoolOperationType`: created, destroyed, trimmed.
    pub operation: u32,
    pub pool_type: u32,
    pub address: u64,
    pub size: u64,
    pub release_threshold: u64,
    pub utilized: u64,
    pub timestamp: u64,
    pub device: u32,
    pub correlation: u32,
}

/// An NVTX mark or one end of an NVTX range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerActivity {
    pub flags: u32,
    pub timestamp: u64,
    /// Pairs a range's start with its end.
    pub id: u32,
    /// NUL-terminated; null at a range's end.
    pub name: *const c_char,
    pub domain: *const c_char,
}

impl MarkerActivity {
    pub fn is_start(&self) -> bool {
        i64::from(self.flags) & l::CUPTI_ACTIVITY_FLAG_MARKER_START != 0
    }
    pub fn is_end(&self) -> bool {
        i64::from(self.flags) & l::CUPTI_ACTIVITY_FLAG_MARKER_END != 0
    }
    pub fn is_instant(&self) -> bool {
        i64::from(self.flags) & l::CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS != 0
    }
}

/// One launch of a CUDA graph (`cudaGraphLaunch`), from its first node's start to its last's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphActivity {
    pub start: u64,
    pub end: u64,
    pub place: Place,
    pub graph: u32,
    pub correlation: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleActivity {
    pub context: u32,
    pub id: u32,
    pub cubin_size: u32,
    /// CUPTI reports load and unload with the same record kind and no phase field.
    pub cubin: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverheadActivity {
    pub kind: u32,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
}

/// A host API call as CUPTI's activity API records it (`CUPTI_ACTIVITY_KIND_RUNTIME`/`DRIVER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiActivity {
    pub driver: bool,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub thread: u32,
    pub correlation: u32,
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Kernel(KernelActivity),
    Copy(CopyActivity),
    Set(SetActivity),
    Sync(SyncActivity),
    Memory(MemoryActivity),
    Pool(PoolActivity),
    Marker(MarkerActivity),
    Graph(GraphActivity),
    Module(ModuleActivity),
    ExternalCorrelation {
        external_kind: u32,
        external_id: u64,
        correlation: u32,
    },
    Overhead(OverheadActivity),
    Api(ApiActivity),
    /// A kind this backend does not decode (its `CUpti_ActivityKind`).
    Other(u32),
}

/// Reads a field `(offset, size)` as an unsigned integer.
///
/// # Safety
/// `rec + offset .. + size` must be readable.
#[inline]
unsafe fn get(rec: *const u8, (offset, size): (usize, usize)) -> u64 {
    // SAFETY: readable per the caller; records are 8-byte aligned but fields may not be.
    unsafe {
        let p = rec.add(offset);
        match size {
            1 => u64::from(p.read()),
            2 => u64::from(p.cast::<u16>().read_unaligned()),
            4 => u64::from(p.cast::<u32>().read_unaligned()),
            _ => p.cast::<u64>().read_unaligned(),
        }
    }
}

/// Decodes the record at `rec`, adding `clock_offset` to its timestamps.
///
/// # Safety
/// `rec` must point to a complete CUPTI activity record (as `cuptiActivityGetNextRecord`
/// returns it) of the CUPTI 13 layouts.
pub unsafe fn decode(rec: *const u8, clock_offset: i64) -> Activity {
    let ts = |v: u64| if v == 0 { 0 } else { v.wrapping_add_signed(clock_offset) };
    // SAFETY (all reads below): every record starts with its kind, and the kind says which
    // struct it is, so the struct's fields are in the record (the caller's guarantee).
    unsafe {
        let kind = get(rec, l::CUpti_Activity::kind) as i64;
        match kind {
            l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL | l::CUPTI_ACTIVITY_KIND_KERNEL => {
                use l::CUpti_ActivityKernel10 as k;
                Activity::Kernel(KernelActivity {
                    name: get(rec, k::name) as usize as *const c_char,
                    start: ts(get(rec, k::start)),
                    end: ts(get(rec, k::end)),
                    place: Place {
                        device: get(rec, k::deviceId) as u32,
                        context: get(rec, k::contextId) as u32,
                        stream: get(rec, k::streamId) as u32,
                    },
                    correlation: get(rec, k::correlationId) as u32,
                    grid: [get(rec, k::gridX) as i32, get(rec, k::gridY) as i32, get(rec, k::gridZ) as i32],
                    block: [get(rec, k::blockX) as i32, get(rec, k::blockY) as i32, get(rec, k::blockZ) as i32],
                    registers_per_thread: get(rec, k::registersPerThread) as u16,
                    static_shared_memory: get(rec, k::staticSharedMemory) as i32,
                    dynamic_shared_memory: get(rec, k::dynamicSharedMemory) as i32,
                    local_memory_per_thread: get(rec, k::localMemoryPerThread) as u32,
                    graph_node: get(rec, k::graphNodeId),
                    graph: get(rec, k::graphId) as u32,
                    cluster: [get(rec, k::clusterX) as u32, get(rec, k::clusterY) as u32, get(rec, k::clusterZ) as u32],
                    device_launched: get(rec, k::isDeviceLaunched) != 0,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MEMCPY => {
                use l::CUpti_ActivityMemcpy6 as m;
                let device = get(rec, m::deviceId) as u32;
                Activity::Copy(CopyActivity {
                    kind: CopyKind::from_cupti(get(rec, m::copyKind) as u8),
                    src_kind: get(rec, m::srcKind) as u32,
                    dst_kind: get(rec, m::dstKind) as u32,
                    bytes: get(rec, m::bytes),
                    start: ts(get(rec, m::start)),
                    end: ts(get(rec, m::end)),
                    place: Place {
                        device,
                        context: get(rec, m::contextId) as u32,
                        stream: get(rec, m::streamId) as u32,
                    },
                    correlation: get(rec, m::correlationId) as u32,
                    graph_node: get(rec, m::graphNodeId),
                    graph: get(rec, m::graphId) as u32,
                    src_device: device,
                    dst_device: device,
                    flags: get(rec, m::flags) as u8,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MEMCPY2 => {
                use l::CUpti_ActivityMemcpyPtoP4 as m;
                Activity::Copy(CopyActivity {
                    kind: CopyKind::from_cupti(get(rec, m::copyKind) as u8),
                    src_kind: get(rec, m::srcKind) as u32,
                    dst_kind: get(rec, m::dstKind) as u32,
                    bytes: get(rec, m::bytes),
                    start: ts(get(rec, m::start)),
                    end: ts(get(rec, m::end)),
                    place: Place {
                        device: get(rec, m::deviceId) as u32,
                        context: get(rec, m::contextId) as u32,
                        stream: get(rec, m::streamId) as u32,
                    },
                    correlation: get(rec, m::correlationId) as u32,
                    graph_node: get(rec, m::graphNodeId),
                    graph: get(rec, m::graphId) as u32,
                    src_device: get(rec, m::srcDeviceId) as u32,
                    dst_device: get(rec, m::dstDeviceId) as u32,
                    flags: get(rec, m::flags) as u8,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MEMSET => {
                use l::CUpti_ActivityMemset4 as m;
                Activity::Set(SetActivity {
                    value: get(rec, m::value) as u32,
                    bytes: get(rec, m::bytes),
                    start: ts(get(rec, m::start)),
                    end: ts(get(rec, m::end)),
                    place: Place {
                        device: get(rec, m::deviceId) as u32,
                        context: get(rec, m::contextId) as u32,
                        stream: get(rec, m::streamId) as u32,
                    },
                    correlation: get(rec, m::correlationId) as u32,
                    memory_kind: get(rec, m::memoryKind) as u32,
                    graph_node: get(rec, m::graphNodeId),
                    graph: get(rec, m::graphId) as u32,
                })
            }
            l::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
                use l::CUpti_ActivitySynchronization2 as s;
                let t = get(rec, s::type_) as i64;
                Activity::Sync(SyncActivity {
                    kind: match t {
                        l::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE => SyncKind::EventSynchronize,
                        l::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT => SyncKind::StreamWaitEvent,
                        l::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE => SyncKind::StreamSynchronize,
                        l::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE => SyncKind::ContextSynchronize,
                        _ => SyncKind::Other(t as u32),
                    },
                    start: ts(get(rec, s::start)),
                    end: ts(get(rec, s::end)),
                    context: get(rec, s::contextId) as u32,
                    stream: get(rec, s::streamId) as u32,
                    event: get(rec, s::cudaEventId) as u32,
                    correlation: get(rec, s::correlationId) as u32,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MEMORY2 => {
                use l::CUpti_ActivityMemory4 as m;
                Activity::Memory(MemoryActivity {
                    release: get(rec, m::memoryOperationType) as i64 == l::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                    memory_kind: get(rec, m::memoryKind) as u32,
                    address: get(rec, m::address),
                    bytes: get(rec, m::bytes),
                    timestamp: ts(get(rec, m::timestamp)),
                    place: Place {
                        device: get(rec, m::deviceId) as u32,
                        context: get(rec, m::contextId) as u32,
                        stream: get(rec, m::streamId) as u32,
                    },
                    correlation: get(rec, m::correlationId) as u32,
                    is_async: get(rec, m::isAsync) != 0,
                    pool_type: get(rec, m::memoryPoolConfig_memoryPoolType) as u32,
                    pool_address: get(rec, m::memoryPoolConfig_address),
                })
            }
            l::CUPTI_ACTIVITY_KIND_MEMORY_POOL => {
                use l::CUpti_ActivityMemoryPool3 as m;
                Activity::Pool(PoolActivity {
                    operation: get(rec, m::memoryPoolOperationType) as u32,
                    pool_type: get(rec, m::memoryPoolType) as u32,
                    address: get(rec, m::address),
                    size: get(rec, m::size),
                    release_threshold: get(rec, m::releaseThreshold),
                    utilized: get(rec, m::utilizedSize),
                    timestamp: ts(get(rec, m::timestamp)),
                    device: get(rec, m::deviceId) as u32,
                    correlation: get(rec, m::correlationId) as u32,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MARKER => {
                use l::CUpti_ActivityMarker2 as m;
                Activity::Marker(MarkerActivity {
                    flags: get(rec, m::flags) as u32,
                    timestamp: ts(get(rec, m::timestamp)),
                    id: get(rec, m::id) as u32,
                    name: get(rec, m::name) as usize as *const c_char,
                    domain: get(rec, m::domain) as usize as *const c_char,
                })
            }
            l::CUPTI_ACTIVITY_KIND_GRAPH_TRACE => {
                use l::CUpti_ActivityGraphTrace2 as g;
                Activity::Graph(GraphActivity {
                    start: ts(get(rec, g::start)),
                    end: ts(get(rec, g::end)),
                    place: Place {
                        device: get(rec, g::deviceId) as u32,
                        context: get(rec, g::contextId) as u32,
                        stream: get(rec, g::streamId) as u32,
                    },
                    graph: get(rec, g::graphId) as u32,
                    correlation: get(rec, g::correlationId) as u32,
                })
            }
            l::CUPTI_ACTIVITY_KIND_MODULE => {
                use l::CUpti_ActivityModule as m;
                Activity::Module(ModuleActivity {
                    context: get(rec, m::contextId) as u32,
                    id: get(rec, m::id) as u32,
                    cubin_size: get(rec, m::cubinSize) as u32,
                    cubin: get(rec, m::cubin),
                })
            }
            l::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
                use l::CUpti_ActivityExternalCorrelation as e;
                Activity::ExternalCorrelation {
                    external_kind: get(rec, e::externalKind) as u32,
                    external_id: get(rec, e::externalId),
                    correlation: get(rec, e::correlationId) as u32,
                }
            }
            l::CUPTI_ACTIVITY_KIND_OVERHEAD => {
                use l::CUpti_ActivityOverhead3 as o;
                Activity::Overhead(OverheadActivity {
                    kind: get(rec, o::overheadKind) as u32,
                    start: ts(get(rec, o::start)),
                    end: ts(get(rec, o::end)),
                    correlation: get(rec, o::correlationId) as u32,
                })
            }
            l::CUPTI_ACTIVITY_KIND_RUNTIME | l::CUPTI_ACTIVITY_KIND_DRIVER => {
                use l::CUpti_ActivityAPI as a;
                Activity::Api(ApiActivity {
                    driver: kind == l::CUPTI_ACTIVITY_KIND_DRIVER,
                    cbid: get(rec, a::cbid) as u32,
                    start: ts(get(rec, a::start)),
                    end: ts(get(rec, a::end)),
                    thread: get(rec, a::threadId) as u32,
                    correlation: get(rec, a::correlationId) as u32,
                })
            }
            other => Activity::Other(other as u32),
        }
    }
}

/// A NUL-terminated string from a record, or `""`.
///
/// # Safety
/// `p` must be null or a NUL-terminated string that lives at least as long as the result is
/// used (CUPTI's names live as long as the buffer they came in, or longer).
pub unsafe fn c_str<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        // SAFETY: per the caller.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(buf: &mut [u8], (off, size): (usize, usize), v: u64) {
        buf[off..off + size].copy_from_slice(&v.to_le_bytes()[..size]);
    }

    #[test]
    fn decodes_a_kernel_record_at_the_generated_offsets() {
        use l::CUpti_ActivityKernel10 as k;
        let mut buf = vec![0u8; k::SIZE];
        let name = c"_Z6vecAddPfS_S_i";
        put(&mut buf, k::kind, l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u64);
        put(&mut buf, k::start, 1_000);
        put(&mut buf, k::end, 3_500);
        put(&mut buf, k::gridX, 256);
        put(&mut buf, k::gridY, 1);
        put(&mut buf, k::gridZ, 1);
        put(&mut buf, k::blockX, 128);
        put(&mut buf, k::registersPerThread, 32);
        put(&mut buf, k::dynamicSharedMemory, 4096);
        put(&mut buf, k::streamId, 7);
        put(&mut buf, k::correlationId, 42);
        put(&mut buf, k::graphNodeId, 0x1234);
        put(&mut buf, k::name, name.as_ptr() as u64);
        // SAFETY: a complete Kernel10 record.
        let a = unsafe { decode(buf.as_ptr(), 100) };
        let Activity::Kernel(kr) = a else { panic!("{a:?}") };
        assert_eq!((kr.start, kr.end), (1_100, 3_600), "timestamps shifted into the trace clock");
        assert_eq!(kr.grid, [256, 1, 1]);
        assert_eq!(kr.block[0], 128);
        assert_eq!(kr.registers_per_thread, 32);
        assert_eq!(kr.dynamic_shared_memory, 4096);
        assert_eq!((kr.place.stream, kr.correlation, kr.graph_node), (7, 42, 0x1234));
        // SAFETY: name is a static C string.
        assert_eq!(unsafe { c_str(kr.name) }, "_Z6vecAddPfS_S_i");
    }

    #[test]
    fn decodes_copies_sets_and_markers() {
        use l::CUpti_ActivityMemcpy6 as m;
        let mut buf = vec![0u8; 256];
        put(&mut buf, m::kind, l::CUPTI_ACTIVITY_KIND_MEMCPY as u64);
        put(&mut buf, m::copyKind, l::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH as u64);
        put(&mut buf, m::srcKind, l::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u64);
        put(&mut buf, m::dstKind, l::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u64);
        put(&mut buf, m::bytes, 1 << 20);
        // SAFETY: a complete Memcpy6 record inside 256 bytes.
        let Activity::Copy(c) = (unsafe { decode(buf.as_ptr(), 0) }) else { panic!() };
        assert_eq!((c.kind, c.bytes), (CopyKind::DeviceToHost, 1 << 20));
        assert_eq!((memory_kind_name(c.src_kind), memory_kind_name(c.dst_kind)), ("device", "pinned"));

        let mut buf = vec![0u8; 256];
        use l::CUpti_ActivityMemset4 as s;
        put(&mut buf, s::kind, l::CUPTI_ACTIVITY_KIND_MEMSET as u64);
        put(&mut buf, s::value, 0xab);
        put(&mut buf, s::bytes, 4096);
        // SAFETY: as above.
        let Activity::Set(st) = (unsafe { decode(buf.as_ptr(), 0) }) else { panic!() };
        assert_eq!((st.value, st.bytes), (0xab, 4096));

        let mut buf = vec![0u8; 256];
        use l::CUpti_ActivityMarker2 as mk;
        put(&mut buf, mk::kind, l::CUPTI_ACTIVITY_KIND_MARKER as u64);
        put(&mut buf, mk::flags, l::CUPTI_ACTIVITY_FLAG_MARKER_START as u64);
        put(&mut buf, mk::timestamp, 77);
        put(&mut buf, mk::id, 5);
        // SAFETY: as above.
        let Activity::Marker(mr) = (unsafe { decode(buf.as_ptr(), -7) }) else { panic!() };
        assert!(mr.is_start() && !mr.is_end() && !mr.is_instant());
        assert_eq!((mr.timestamp, mr.id), (70, 5));
        // SAFETY: null is allowed.
        assert_eq!(unsafe { c_str(mr.name) }, "");
    }

    #[test]
    fn unknown_kinds_are_passed_over() {
        let mut buf = vec![0u8; 64];
        put(&mut buf, l::CUpti_Activity::kind, 52);
        // SAFETY: the kind field is all that is read for an unknown kind.
        assert_eq!(unsafe { decode(buf.as_ptr(), 0) }, Activity::Other(52));
    }

    #[test]
    fn zero_timestamps_stay_zero() {
        use l::CUpti_ActivityKernel10 as k;
        let mut buf = vec![0u8; k::SIZE];
        put(&mut buf, k::kind, l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u64);
        // SAFETY: a complete record.
        let Activity::Kernel(kr) = (unsafe { decode(buf.as_ptr(), 1 << 40) }) else { panic!() };
        assert_eq!(kr.start, 0);
    }
}
