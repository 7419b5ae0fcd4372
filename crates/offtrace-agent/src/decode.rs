//! Turning one XPTI callback's raw arguments into a [`Notification`].
//!
//! Runs inside the runtime's callback on the application thread: no allocation, lock, formatting
//! or I/O unless a per-thread cache misses (payloads, metadata sets, C strings), in which case
//! the `#[cold]` miss path reads memory defensively (`safe_read`) and interns through the
//! process-wide [`Interner`].
//!
//! What is read where (sycl-runtime.md §5): the event's uid/instance/types/edge ids, its payload
//! (name, file, line, column) and its metadata map (the libstdc++ node list: count = word 3,
//! first node = word 2, node = next@0, key u32@8, value i32@12); the user data by stream and
//! trace type; the stashed tuple and the universal id from the dispatcher.

use std::ffi::{c_char, c_void};

use offtrace_format::{
    ArgBlock, EventInfo, MAX_ARGS, MAX_OUTS, MetadataSetId, Notification, OutValues, PayloadId, StrId, UserData,
};
use offtrace_xpti::abi::{
    FunctionWithArgs, MemAllocData, OffloadAccessorData, OffloadAssociationData, OffloadBufferData, TraceEventData,
    XPTI_RESULT_SUCCESS, event_flags, trace_type as tt,
};
use offtrace_xpti::ur::{self, ParamKind};

use crate::dispatcher::Dispatcher;
use crate::interner::Interner;
use crate::safe_read;

/// Which decoding rules apply to a stream's user data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `sycl`, `sycl.debug`.
    Sycl,
    /// `sycl.experimental.buffer`.
    Buffer,
    /// `sycl.experimental.image` (user data kept as a pointer).
    Image,
    /// `sycl.experimental.mem_alloc`.
    MemAlloc,
    /// `ur.call`, `ur.call.debug`.
    UrCall,
}

/// Metadata items read per event at most (events carry ~4-12).
const MAX_METADATA: usize = 64;
/// Longest C string read from user data or payloads.
const MAX_STRING: usize = 4096;

const PAYLOAD_SLOTS: usize = 256;
const SET_SLOTS: usize = 256;
const STR_SLOTS: usize = 64;
/// Strings up to this length are cached with their bytes (verified on every hit).
const STR_INLINE: usize = 62;

#[derive(Clone, Copy, Default)]
struct PayloadSlot {
    key: (usize, usize, u32, u32, u64),
    id: PayloadId,
}

#[derive(Clone, Copy, Default)]
struct SetSlot {
    hash: u64,
    len: u32,
    id: MetadataSetId,
}

#[derive(Clone, Copy)]
struct StrSlot {
    ptr: usize,
    len: u8,
    bytes: [u8; STR_INLINE + 1],
    id: StrId,
}

impl Default for StrSlot {
    fn default() -> Self {
        Self { ptr: 0, len: 0, bytes: [0; STR_INLINE + 1], id: StrId(0) }
    }
}

/// Per-thread caches in front of the [`Interner`]. Allocated once per thread (cold).
pub struct ThreadCaches {
    payloads: Box<[PayloadSlot; PAYLOAD_SLOTS]>,
    sets: Box<[SetSlot; SET_SLOTS]>,
    strs: Box<[StrSlot; STR_SLOTS]>,
    scratch: Vec<u8>,
    scratch2: Vec<u8>,
}

impl std::fmt::Debug for ThreadCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ThreadCaches")
    }
}

impl Default for ThreadCaches {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadCaches {
    #[cold]
    pub fn new() -> Self {
        Self {
            payloads: Box::new([PayloadSlot::default(); PAYLOAD_SLOTS]),
            sets: Box::new([SetSlot::default(); SET_SLOTS]),
            strs: Box::new([StrSlot::default(); STR_SLOTS]),
            scratch: Vec::with_capacity(MAX_STRING),
            scratch2: Vec::with_capacity(MAX_STRING),
        }
    }
}

#[inline(always)]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

/// The decoding context: the dispatcher to query and the tables to intern into.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub dispatcher: &'a Dispatcher,
    pub interner: &'a Interner,
}

/// The raw arguments of one callback.
#[derive(Debug, Clone, Copy)]
pub struct Raw {
    pub trace_type: u16,
    pub parent: *const TraceEventData,
    pub event: *const TraceEventData,
    pub instance: u64,
    pub user_data: *const c_void,
}

/// Fills everything of `n` except `ts` and `tid`.
///
/// # Safety
/// `raw` must be the arguments of a live XPTI callback: `parent`/`event` null or valid events,
/// `user_data` null or what the runtime passes for that stream and trace type
/// (sycl-runtime.md §5); all valid for the duration of this call.
#[allow(unsafe_code)]
#[inline]
pub unsafe fn decode(ctx: Ctx<'_>, caches: &mut ThreadCaches, kind: StreamKind, stream: u8, raw: &Raw, n: &mut Notification) {
    n.stream = stream;
    n.trace_type = raw.trace_type;
    n.instance = raw.instance;
    // SAFETY: forwarded from this function's contract.
    unsafe {
        n.parent = event_info(ctx, caches, raw.parent);
        n.event = event_info(ctx, caches, raw.event);
        n.user_data = user_data(ctx, caches, kind, raw);
    }
    n.stash = stash(ctx, caches);
    n.universal_id = match ctx.dispatcher.get_universal_id {
        // SAFETY: xptiGetUniversalId takes no arguments and reads a thread-local.
        Some(f) => unsafe { f() },
        None => 0,
    };
}

#[allow(unsafe_code)]
#[inline]
unsafe fn event_info(ctx: Ctx<'_>, caches: &mut ThreadCaches, ev: *const TraceEventData) -> Option<EventInfo> {
    if ev.is_null() {
        return None;
    }
    // SAFETY: a non-null event of a live callback is a valid `trace_event_data_t`.
    let e = unsafe { &*ev };
    let payload = if e.flags & event_flags::PAYLOAD_AVAILABLE != 0 && !e.reserved.payload.is_null() {
        // SAFETY: PayloadAvailable and non-null: the event's payload lives as long as the event.
        unsafe { payload_id(ctx, caches, &*e.reserved.payload) }
    } else {
        PayloadId(0)
    };
    // SAFETY: the event's embedded metadata map is valid while the event is.
    let metadata = unsafe { metadata_set(ctx, caches, e) };
    Some(EventInfo {
        uid: e.unique_id,
        instance_id: e.instance_id,
        event_type: e.event_type,
        activity_type: e.activity_type,
        source_id: e.source_id,
        target_id: e.target_id,
        payload,
        metadata,
    })
}

#[allow(unsafe_code)]
#[inline]
unsafe fn payload_id(ctx: Ctx<'_>, caches: &mut ThreadCaches, p: &offtrace_xpti::abi::Payload) -> PayloadId {
    // Pointer identity + line/column + uid.p2: the runtime's payload strings are interned by the
    // dispatcher (stable addresses), so a hit never needs to re-read them.
    let key = (p.name as usize, p.source_file as usize, p.line_no, p.column_no, p.uid.p2);
    let h = mix(mix(mix(key.0 as u64, key.1 as u64), u64::from(key.2) << 32 | u64::from(key.3)), key.4);
    let slot = &mut caches.payloads[(h >> 56) as usize % PAYLOAD_SLOTS];
    if slot.key == key && slot.id.0 != 0 {
        return slot.id;
    }
    let id = payload_miss(ctx, &mut caches.scratch, &mut caches.scratch2, p);
    caches.payloads[(h >> 56) as usize % PAYLOAD_SLOTS] = PayloadSlot { key, id };
    id
}

#[cold]
#[inline(never)]
fn payload_miss(ctx: Ctx<'_>, a: &mut Vec<u8>, b: &mut Vec<u8>, p: &offtrace_xpti::abi::Payload) -> PayloadId {
    if !safe_read::read_c_string(p.name as usize, MAX_STRING, a) {
        a.clear();
    }
    if !safe_read::read_c_string(p.source_file as usize, MAX_STRING, b) {
        b.clear();
    }
    ctx.interner.payload(a, b, p.line_no, p.column_no)
}

#[allow(unsafe_code)]
#[inline]
unsafe fn metadata_set(ctx: Ctx<'_>, caches: &mut ThreadCaches, e: &TraceEventData) -> MetadataSetId {
    let map = &e.reserved.metadata;
    let count = map.element_count.min(MAX_METADATA);
    if count == 0 {
        return MetadataSetId(0);
    }
    let mut pairs = [(0u32, 0i32); MAX_METADATA];
    let mut node = map.before_begin_next;
    let mut n = 0;
    while n < count && !node.is_null() {
        // SAFETY: nodes of a live libstdc++ unordered_map (xpti-abi.md §4.5); the list has
        // `element_count` nodes, and we stop at that count or at a null `next`.
        let nd = unsafe { &*node };
        pairs[n] = (nd.key, nd.value);
        node = nd.next;
        n += 1;
    }
    let pairs = &mut pairs[..n];
    // Canonical order (iteration order depends on insertion history); n is small.
    for i in 1..pairs.len() {
        let mut j = i;
        while j > 0 && pairs[j - 1].0 > pairs[j].0 {
            pairs.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut h = n as u64;
    for &(k, v) in pairs.iter() {
        h = mix(h, u64::from(k) << 32 | u64::from(v as u32));
    }
    let slot = &mut caches.sets[(h >> 56) as usize % SET_SLOTS];
    if slot.hash == h && slot.len == n as u32 && slot.id.0 != 0 {
        return slot.id;
    }
    let id = ctx.interner.metadata_set(pairs, ctx.dispatcher);
    *slot = SetSlot { hash: h, len: n as u32, id };
    id
}

/// A C string pointer → StrId, content-verified: pointers are reused for other strings
/// (`queue.wait[<ptr>]` is formatted per call), so a hit compares the cached bytes.
#[allow(unsafe_code)]
#[inline]
unsafe fn c_string(ctx: Ctx<'_>, caches: &mut ThreadCaches, p: *const c_char) -> Option<StrId> {
    if p.is_null() {
        return None;
    }
    let addr = p as usize;
    let slot = &caches.strs[(mix(addr as u64, 0) >> 58) as usize % STR_SLOTS];
    if slot.ptr == addr && slot.id.0 != 0 {
        let len = usize::from(slot.len);
        // SAFETY: the pointer was a readable NUL-terminated string of `len` bytes when cached,
        // and user-data strings are string literals or live std::strings of the caller; we
        // read exactly as many bytes as the cached copy (+ NUL) and compare.
        let now = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len + 1) };
        if now == &slot.bytes[..=len] {
            return Some(slot.id);
        }
    }
    c_string_miss(ctx, caches, addr)
}

#[cold]
#[inline(never)]
fn c_string_miss(ctx: Ctx<'_>, caches: &mut ThreadCaches, addr: usize) -> Option<StrId> {
    if !safe_read::read_c_string(addr, MAX_STRING, &mut caches.scratch) {
        return None;
    }
    let s = &caches.scratch;
    // Printable text only: anything else is not a string we should trust.
    if s.iter().any(|&c| (c < 0x20 && !matches!(c, b'\n' | b'\t' | b'\r')) || c == 0x7f) {
        return None;
    }
    let id = ctx.interner.string(s);
    if s.len() <= STR_INLINE {
        let mut slot = StrSlot { ptr: addr, len: s.len() as u8, id, ..StrSlot::default() };
        slot.bytes[..s.len()].copy_from_slice(s);
        caches.strs[(mix(addr as u64, 0) >> 58) as usize % STR_SLOTS] = slot;
    }
    Some(id)
}

#[allow(unsafe_code)]
#[inline]
unsafe fn string_or_pointer(ctx: Ctx<'_>, caches: &mut ThreadCaches, ud: *const c_void) -> UserData {
    if ud.is_null() {
        return UserData::None;
    }
    // SAFETY: `c_string` only dereferences cached, verified pointers; misses read defensively.
    match unsafe { c_string(ctx, caches, ud.cast()) } {
        Some(id) => UserData::Str(id),
        None => UserData::Pointer(ud as u64),
    }
}

#[allow(unsafe_code)]
#[inline]
unsafe fn user_data(ctx: Ctx<'_>, caches: &mut ThreadCaches, kind: StreamKind, raw: &Raw) -> UserData {
    let ud = raw.user_data;
    if ud.is_null() {
        return UserData::None;
    }
    // SAFETY (every dereference below): per this module's contract, `ud` is what the runtime
    // passes for (stream, trace type), and the struct types match sycl-runtime.md §5.
    unsafe {
        match (kind, raw.trace_type) {
            (StreamKind::UrCall, tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_WITH_ARGS_END) => {
                function_with_args(ctx, caches, &*ud.cast::<FunctionWithArgs>(), raw.trace_type == tt::FUNCTION_WITH_ARGS_END)
            }
            (StreamKind::Sycl, tt::SIGNAL) => UserData::Signal { ur_event: ud as u64 },
            (StreamKind::MemAlloc, tt::MEM_ALLOC_BEGIN..=tt::MEM_RELEASE_END) if raw.event.is_null() => {
                let m = &*ud.cast::<MemAllocData>();
                UserData::MemAlloc {
                    mem_object: m.mem_object_handle as u64,
                    alloc_pointer: m.alloc_pointer as u64,
                    alloc_size: m.alloc_size as u64,
                    guard_zone: m.guard_zone_size as u64,
                }
            }
            (
                StreamKind::Buffer,
                tt::OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT | tt::OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT,
            ) => {
                let b = &*ud.cast::<OffloadBufferData>();
                UserData::OffloadBuffer {
                    user_object: b.user_object_handle as u64,
                    host_object: b.host_object_handle as u64,
                    element_type: c_string(ctx, caches, b.element_type).unwrap_or_default(),
                    element_size: b.element_size,
                    dim: b.dim,
                    range: b.range.map(|r| r as u64),
                }
            }
            (
                StreamKind::Buffer,
                tt::OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE | tt::OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE,
            ) => {
                let a = &*ud.cast::<OffloadAssociationData>();
                UserData::Association { user_object: a.user_object_handle as u64, mem_object: a.mem_object_handle as u64 }
            }
            (StreamKind::Buffer, tt::OFFLOAD_ALLOC_ACCESSOR) => {
                let a = &*ud.cast::<OffloadAccessorData>();
                UserData::Accessor {
                    buffer: a.buffer_handle as u64,
                    accessor: a.accessor_handle as u64,
                    target: a.target,
                    mode: a.mode,
                }
            }
            (StreamKind::Image | StreamKind::Buffer, _) => UserData::Pointer(ud as u64),
            _ => string_or_pointer(ctx, caches, ud),
        }
    }
}

/// Loads `size` bytes (1/2/4/8) at `p`, zero-extended.
///
/// # Safety
/// `p` points to a readable argument variable of at least `size` bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn load_sized(p: *const u8, size: u8) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match size {
            1 => u64::from(*p),
            2 => u64::from(p.cast::<u16>().read_unaligned()),
            4 => u64::from(p.cast::<u32>().read_unaligned()),
            _ => p.cast::<u64>().read_unaligned(),
        }
    }
}

/// Reads up to 8 bytes at `addr` without crossing into the next page (an output buffer may be
/// narrower than 8 bytes, e.g. a `uint32_t`; bytes past the end but within the same page are
/// readable and land in the high bytes).
///
/// # Safety
/// `addr` is an output pointer the callee successfully wrote through: its first byte is mapped.
#[allow(unsafe_code)]
#[inline]
unsafe fn load_out(addr: usize) -> u64 {
    let in_page = 4096 - addr % 4096;
    if in_page >= 8 {
        // SAFETY: the 8 bytes lie in one page whose first byte is mapped (contract).
        unsafe { (addr as *const u64).read_unaligned() }
    } else {
        let mut b = [0u8; 8];
        for (i, x) in b.iter_mut().enumerate().take(in_page) {
            // SAFETY: same page as `addr`.
            *x = unsafe { *((addr + i) as *const u8) };
        }
        u64::from_le_bytes(b)
    }
}

#[allow(unsafe_code)]
#[inline]
unsafe fn function_with_args(ctx: Ctx<'_>, caches: &mut ThreadCaches, f: &FunctionWithArgs, end: bool) -> UserData {
    let id = f.function_id;
    let name = match ctx.interner.ur_name(id) {
        Some(s) => s,
        // SAFETY: the function name is a C string (checked defensively on a miss).
        None => unsafe { c_string(ctx, caches, f.function_name) }.unwrap_or_default(),
    };
    let result = if end && !f.ret_data.is_null() {
        // SAFETY: at exit `ret_data` points to the call's `ur_result_t` (an i32 enum).
        Some(unsafe { f.ret_data.cast::<i32>().read_unaligned() })
    } else {
        None
    };
    let mut args = ArgBlock::default();
    let mut outs = OutValues::default();
    if let Some(func) = ur::function(id)
        && !f.args_data.is_null()
    {
        let params = f.args_data.cast::<*const u8>();
        let n = func.params.len().min(MAX_ARGS);
        for (i, p) in func.params[..n].iter().enumerate() {
            // SAFETY: `args_data` is the function's `ur_*_params_t`: one pointer per parameter
            // in this (generated) order; each points to the caller's argument variable of
            // `p.size` bytes.
            let ptr = unsafe { params.add(i).read() };
            let v = if ptr.is_null() { 0 } else { unsafe { load_sized(ptr, p.size) } };
            args.values[i] = v;
            if end && p.kind == ParamKind::OutPointer && v >= 4096 && result == Some(XPTI_RESULT_SUCCESS) {
                let o = usize::from(outs.len);
                if o < MAX_OUTS {
                    // SAFETY: the call succeeded, so a non-null output pointer it was given was
                    // written through: its first byte is mapped.
                    outs.values[o] = (i as u8, unsafe { load_out(v as usize) });
                    outs.len += 1;
                }
            }
        }
        args.len = n as u8;
    }
    UserData::FunctionWithArgs { function_id: id, name, result, args, outs }
}

#[inline]
fn stash(ctx: Ctx<'_>, caches: &mut ThreadCaches) -> Option<(StrId, u64)> {
    let g = ctx.dispatcher.get_stashed_tuple?;
    let mut key: *mut c_char = std::ptr::null_mut();
    let mut value = 0u64;
    // SAFETY: both out-pointers are valid locals; the dispatcher reads a thread-local.
    #[allow(unsafe_code)]
    let r = unsafe { g(&mut key, &mut value) };
    if r != XPTI_RESULT_SUCCESS || key.is_null() {
        return None;
    }
    // SAFETY: the stashed key is the pointer the runtime stashed (a string literal).
    #[allow(unsafe_code)]
    let k = unsafe { c_string(ctx, caches, key) }?;
    Some((k, value))
}
