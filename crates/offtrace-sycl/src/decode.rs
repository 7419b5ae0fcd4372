//! Turning one XPTI callback's raw arguments into a [`Notification`].
//!
//! Runs inside the runtime's callback on the application thread: no allocation, lock, formatting
//! or I/O unless a per-thread cache misses (payloads, metadata sets, C strings), in which case
//! the `#[cold]` miss path reads memory defensively (`safe_read`) and interns through the
//! process-wide [`Interner`].
//!
//! What is read where (docs/reference/sycl-runtime.md §5): the event's uid/instance/types/edge ids, its payload
//! (name, file, line, column) and its metadata map (the libstdc++ node list: count = word 3,
//! first node = word 2, node = next@0, key u32@8, value i32@12); the user data by stream and
//! trace type; the stashed tuple and the universal id from the dispatcher.

use std::ffi::{c_char, c_void};

use offtrace_format::{
    ArgBlock, EventInfo, MAX_ARGS, MAX_OUTS, MetadataSetId, Notification, OutValues, PayloadId, StrId, UserData,
};
use offtrace_xpti_abi::abi::{
    FunctionWithArgs, MemAllocData, MetadataMapImage, OffloadAccessorData, OffloadAssociationData, OffloadBufferData,
    TraceEventData, XPTI_RESULT_SUCCESS, event_flags, trace_type as tt,
};
use offtrace_xpti_abi::ur::{self, ParamKind};

use crate::compact;
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

impl StreamKind {
    /// The value carried in `XptiPayload::stream_class` (0 = unknown stream).
    pub const fn class(self) -> u32 {
        self as u32 + 1
    }

    /// The inverse of [`StreamKind::class`].
    #[inline]
    pub const fn from_class(c: u32) -> Option<StreamKind> {
        Some(match c {
            1 => StreamKind::Sycl,
            2 => StreamKind::Buffer,
            3 => StreamKind::Image,
            4 => StreamKind::MemAlloc,
            5 => StreamKind::UrCall,
            _ => return None,
        })
    }
}

/// Metadata items read per event at most (events carry ~4-12).
const MAX_METADATA: usize = 64;
/// Longest C string read from user data or payloads.
const MAX_STRING: usize = 4096;

const PAYLOAD_SLOTS: usize = 256;
const SET_SLOTS: usize = 256;
const STR_SLOTS: usize = 64;
/// Non-static strings up to this length are cached with their bytes.
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
    last_payload: PayloadSlot,
    payloads: Box<[PayloadSlot; PAYLOAD_SLOTS]>,
    sets: Box<[SetSlot; SET_SLOTS]>,
    /// Static strings by address.
    strs: Box<[StrSlot; STR_SLOTS]>,
    /// Other strings by content hash (`ptr` holds the hash), with their bytes.
    heap_strs: Box<[StrSlot; STR_SLOTS]>,
    static_ranges: safe_read::StaticRanges,
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
            last_payload: PayloadSlot::default(),
            payloads: Box::new([PayloadSlot::default(); PAYLOAD_SLOTS]),
            sets: Box::new([SetSlot::default(); SET_SLOTS]),
            strs: Box::new([StrSlot::default(); STR_SLOTS]),
            heap_strs: Box::new([StrSlot::default(); STR_SLOTS]),
            static_ranges: safe_read::StaticRanges::default(),
            scratch: Vec::with_capacity(MAX_STRING),
            scratch2: Vec::with_capacity(MAX_STRING),
        }
    }
}

#[inline(always)]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

/// One (key id, object id) pair's share of a metadata set's order-independent hash (a sum).
/// It must not be linear in the pair: with `mix`, the sum was `K × Σ (C ^ pair)` up to the
/// rotation, so two sets whose small object ids differ by offsets that cancel in the sum (the
/// same keys, other values: one memcpy node's against the next one's) hashed equal, and the
/// second event was recorded with the first one's metadata. The shift after the multiply
/// breaks that.
#[inline(always)]
fn pair_hash(pair: u64) -> u64 {
    let m = (pair ^ 0x51_7cc1_b727_220a).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (m ^ (m >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// The decoding context: the dispatcher to query and the tables to intern into.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub dispatcher: &'a Dispatcher,
    pub interner: &'a Interner,
}

/// The raw arguments of one callback.
///
/// Laid out like the tail of the services' `XptiPayload` (from its `parent` on; its `u32`
/// trace point type starts with this `u16`, little-endian), so the recorder reads the payload
/// the bridge built in place as a `Raw` (`trace_client::on_xpti`) instead of copying it field
/// by field on every notification.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Raw {
    pub parent: *const TraceEventData,
    pub event: *const TraceEventData,
    pub instance: u64,
    pub user_data: *const c_void,
    pub trace_type: u16,
}

impl Raw {
    /// The `Raw` inside an `XptiPayload` (see the type's docs). Its `trace_type` is the low 16
    /// bits of the payload's (what `as u16` gives; the bridge's are XPTI's 16-bit types).
    ///
    /// # Safety
    /// `p` points at a live `XptiPayload`; the result is valid as long as it.
    #[allow(unsafe_code)]
    #[inline(always)]
    pub unsafe fn in_xpti_payload<'a>(p: *const offtrace::XptiPayload) -> &'a Raw {
        use offtrace::XptiPayload as X;
        use std::mem::offset_of;
        const BASE: usize = offset_of!(X, parent);
        const _: () = assert!(
            cfg!(target_endian = "little")
                && offset_of!(X, event) - BASE == offset_of!(Raw, event)
                && offset_of!(X, instance) - BASE == offset_of!(Raw, instance)
                && offset_of!(X, user_data) - BASE == offset_of!(Raw, user_data)
                && offset_of!(X, trace_type) - BASE == offset_of!(Raw, trace_type)
                && offset_of!(Raw, parent) == 0
                && size_of::<X>() - BASE >= size_of::<Raw>()
                && align_of::<X>() >= align_of::<Raw>()
        );
        // SAFETY: the offsets and the alignment match (asserted above); the fields are plain
        // data of the same widths (pointers as `u64`, the low half of the `u32` trace type).
        unsafe { &*p.cast::<u8>().add(BASE).cast::<Raw>() }
    }
}

/// Fills everything of `n` except `ts` and `tid`.
///
/// # Safety
/// `raw` must be the arguments of a live XPTI callback: `parent`/`event` null or valid events,
/// `user_data` null or what the runtime passes for that stream and trace type
/// (docs/reference/sycl-runtime.md §5); all valid for the duration of this call.
#[allow(unsafe_code)]
#[inline(always)] // into the record path (`recorder::record_other`)
pub unsafe fn decode(
    ctx: Ctx<'_>,
    caches: &mut ThreadCaches,
    kind: StreamKind,
    stream: u8,
    raw: &Raw,
    n: &mut Notification,
) {
    n.stream = stream;
    n.trace_type = raw.trace_type;
    n.instance = raw.instance;
    // SAFETY: forwarded from this function's contract.
    unsafe {
        // Filled in place: returning these by value costs store-forwarding stalls (the callee
        // writes fields, the caller copies them with wider loads).
        event_info(ctx, caches, raw.parent, &mut n.parent);
        event_info(ctx, caches, raw.event, &mut n.event);
        user_data(ctx, caches, kind, raw, &mut n.user_data);
    }
    // The stashed tuple only on the SYCL streams: Intel's dispatcher never unstashes, so on
    // `ur.call` it is a sticky leftover of the thread's last SYCL operation, not the call's
    // context (docs/reference/sycl-runtime.md §7).
    n.stash = if kind == StreamKind::UrCall { None } else { stash(ctx, caches) };
    n.universal_id = match ctx.dispatcher.get_universal_id {
        // SAFETY: xptiGetUniversalId takes no arguments and reads a thread-local.
        Some(f) => unsafe { f() },
        None => 0,
    };
}

#[allow(unsafe_code)]
#[inline]
unsafe fn event_info(ctx: Ctx<'_>, caches: &mut ThreadCaches, ev: *const TraceEventData, out: &mut Option<EventInfo>) {
    if ev.is_null() {
        *out = None;
        return;
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
    let o = out.insert(EventInfo::default());
    o.uid = e.unique_id;
    o.instance_id = e.instance_id;
    o.event_type = e.event_type;
    o.activity_type = e.activity_type;
    o.source_id = e.source_id;
    o.target_id = e.target_id;
    o.payload = payload;
    o.metadata = metadata;
}

#[allow(unsafe_code)]
#[inline]
unsafe fn payload_id(ctx: Ctx<'_>, caches: &mut ThreadCaches, p: &offtrace_xpti_abi::abi::Payload) -> PayloadId {
    // Pointer identity + line/column + uid.p2: the runtime's payload strings are interned by the
    // dispatcher (stable addresses), so a hit never needs to re-read them.
    let key = (p.name as usize, p.source_file as usize, p.line_no, p.column_no, p.uid.p2);
    // The last payload seen on this thread first (the one UR event, a repeated SYCL operation):
    // no hashing.
    if caches.last_payload.key == key && caches.last_payload.id.0 != 0 {
        return caches.last_payload.id;
    }
    let id = payload_id_slot(ctx, caches, p, key);
    caches.last_payload = PayloadSlot { key, id };
    id
}

#[inline]
fn payload_id_slot(
    ctx: Ctx<'_>,
    caches: &mut ThreadCaches,
    p: &offtrace_xpti_abi::abi::Payload,
    key: (usize, usize, u32, u32, u64),
) -> PayloadId {
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
fn payload_miss(ctx: Ctx<'_>, a: &mut Vec<u8>, b: &mut Vec<u8>, p: &offtrace_xpti_abi::abi::Payload) -> PayloadId {
    // SAFETY: a payload's name and file are the dispatcher's copies (`docs/reference/xpti-abi.md` §6.2), owned by
    // the event the runtime is notifying about, so they are live for the whole callback.
    #[allow(unsafe_code)]
    unsafe {
        if !safe_read::read_c_string_trusted(p.name as usize, MAX_STRING, a) {
            a.clear();
        }
        if !safe_read::read_c_string_trusted(p.source_file as usize, MAX_STRING, b) {
            b.clear();
        }
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
    // An order-independent hash of the (key id, object id) pairs (iteration order depends on
    // the map's insertion history): a sum of mixed pairs. The hit path stores nothing.
    let mut node = map.before_begin_next;
    let mut n = 0;
    let mut h = 0u64;
    while n < count && !node.is_null() {
        // SAFETY: nodes of a live libstdc++ unordered_map (docs/reference/xpti-abi.md §4.5); the list has
        // `element_count` nodes, and we stop at that count or at a null `next`.
        let nd = unsafe { &*node };
        h = h.wrapping_add(pair_hash(u64::from(nd.key) << 32 | u64::from(nd.value as u32)));
        node = nd.next;
        n += 1;
    }
    let h = mix(h, n as u64);
    let slot = &caches.sets[(h >> 56) as usize % SET_SLOTS];
    if slot.hash == h && slot.len == n as u32 && slot.id.0 != 0 {
        return slot.id;
    }
    // SAFETY: as above.
    unsafe { metadata_set_miss(ctx, caches, map, n, h) }
}

#[cold]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn metadata_set_miss(
    ctx: Ctx<'_>,
    caches: &mut ThreadCaches,
    map: &MetadataMapImage,
    n: usize,
    h: u64,
) -> MetadataSetId {
    let mut pairs = Vec::with_capacity(n);
    let mut node = map.before_begin_next;
    while pairs.len() < n && !node.is_null() {
        // SAFETY: see `metadata_set`.
        let nd = unsafe { &*node };
        pairs.push((nd.key, nd.value));
        node = nd.next;
    }
    pairs.sort_unstable();
    let id = ctx.interner.metadata_set(&pairs, ctx.dispatcher);
    caches.sets[(h >> 56) as usize % SET_SLOTS] = SetSlot { hash: h, len: n as u32, id };
    id
}

/// A C string pointer → StrId without ever dereferencing a pointer that may have been freed.
///
/// Strings in read-only file-backed mappings (the runtime's literals: node kinds,
/// `usm::alignedAlloc`, the stashed `queue_id` key, ...) are cached by address: a hit is one
/// compare. Other strings (`queue.wait[<ptr>]`, formatted per call into reused heap buffers)
/// are copied with `process_vm_readv` (one syscall, never a fault) and looked up by content in
/// a per-thread cache, so the steady state takes no lock and allocates nothing.
#[allow(unsafe_code)]
#[inline]
unsafe fn c_string(ctx: Ctx<'_>, caches: &mut ThreadCaches, p: *const c_char) -> Option<StrId> {
    // SAFETY: `trusted = false`: the miss path reads with `process_vm_readv`.
    unsafe { c_string_with(ctx, caches, p, false) }
}

/// [`c_string`], and when `trusted`, a miss reads the string with plain loads instead of a
/// system call.
///
/// # Safety
/// With `trusted`, `p` must be a C string the runtime's contract keeps readable for the whole
/// callback (see [`safe_read::read_c_string_trusted`]).
#[allow(unsafe_code)]
#[inline]
unsafe fn c_string_with(ctx: Ctx<'_>, caches: &mut ThreadCaches, p: *const c_char, trusted: bool) -> Option<StrId> {
    if p.is_null() {
        return None;
    }
    let addr = p as usize;
    let slot = &caches.strs[(mix(addr as u64, 0) >> 58) as usize % STR_SLOTS];
    if slot.ptr == addr && slot.id.0 != 0 {
        return Some(slot.id);
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { c_string_miss(ctx, caches, addr, trusted) }
}

/// # Safety
/// As [`c_string_with`].
#[allow(unsafe_code)]
#[cold]
#[inline(never)]
unsafe fn c_string_miss(ctx: Ctx<'_>, caches: &mut ThreadCaches, addr: usize, trusted: bool) -> Option<StrId> {
    // Trusted strings (documented by the runtime as live during the callback) are read with
    // plain loads: `process_vm_readv` costs a system call and a page-table walk (≈ 1 µs), and
    // the SYCL runtime formats `queue.wait[<ptr>]`-style strings afresh for every wait.
    let read = if trusted {
        // SAFETY: forwarded from this function's contract.
        unsafe { safe_read::read_c_string_trusted(addr, MAX_STRING, &mut caches.scratch) }
    } else {
        safe_read::read_c_string(addr, MAX_STRING, &mut caches.scratch)
    };
    if !read {
        return None;
    }
    let s = &caches.scratch;
    // Printable text only: anything else is not a string we should trust.
    if s.iter().any(|&c| (c < 0x20 && !matches!(c, b'\n' | b'\t' | b'\r')) || c == 0x7f) {
        return None;
    }
    if caches.static_ranges.contains(addr) {
        let id = ctx.interner.string(s);
        caches.strs[(mix(addr as u64, 0) >> 58) as usize % STR_SLOTS] =
            StrSlot { ptr: addr, len: 0, bytes: [0; STR_INLINE + 1], id };
        return Some(id);
    }
    let mut h = s.len() as u64;
    for chunk in s.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(w));
    }
    let i = (h >> 58) as usize % STR_SLOTS;
    let slot = &caches.heap_strs[i];
    if slot.id.0 != 0 && slot.ptr == h as usize && usize::from(slot.len) == s.len() && slot.bytes[..s.len()] == s[..] {
        return Some(slot.id);
    }
    let id = ctx.interner.string(s);
    if s.len() <= STR_INLINE {
        let mut slot = StrSlot { ptr: h as usize, len: s.len() as u8, id, ..StrSlot::default() };
        slot.bytes[..s.len()].copy_from_slice(s);
        caches.heap_strs[i] = slot;
    }
    Some(id)
}

#[allow(unsafe_code)]
#[inline]
unsafe fn string_or_pointer(ctx: Ctx<'_>, caches: &mut ThreadCaches, ud: *const c_void, trusted: bool) -> UserData {
    if ud.is_null() {
        return UserData::None;
    }
    // SAFETY: untrusted misses read defensively (`process_vm_readv`); `trusted` is set by the
    // caller only for the trace point types whose `user_data` the runtime documents as a C string.
    match unsafe { c_string_with(ctx, caches, ud.cast(), trusted) } {
        Some(id) => UserData::Str(id),
        None => UserData::Pointer(ud as u64),
    }
}

#[allow(unsafe_code)]
#[inline]
unsafe fn user_data(ctx: Ctx<'_>, caches: &mut ThreadCaches, kind: StreamKind, raw: &Raw, out: &mut UserData) {
    let ud = raw.user_data;
    if ud.is_null() {
        *out = UserData::None;
        return;
    }
    // SAFETY (every dereference below): per this module's contract, `ud` is what the runtime
    // passes for (stream, trace type), and the struct types match docs/reference/sycl-runtime.md §5.
    unsafe {
        *out = match (kind, raw.trace_type) {
            (StreamKind::UrCall, tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_WITH_ARGS_END) => {
                let f = &*ud.cast::<FunctionWithArgs>();
                return function_with_args(ctx, caches, f, raw.trace_type == tt::FUNCTION_WITH_ARGS_END, out);
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
                UserData::Association {
                    user_object: a.user_object_handle as u64,
                    mem_object: a.mem_object_handle as u64,
                }
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
            // The SYCL runtime documents these `user_data` as C strings (or NULL), valid during
            // the callback (`docs/reference/sycl-runtime.md` §5): node kinds, `queue.wait[<ptr>]`,
            // `usm::alignedAlloc`, `queue_create`, ...
            (
                StreamKind::Sycl,
                tt::NODE_CREATE
                | tt::TASK_BEGIN
                | tt::TASK_END
                | tt::WAIT_BEGIN
                | tt::WAIT_END
                | tt::QUEUE_CREATE
                | tt::QUEUE_DESTROY,
            )
            | (StreamKind::MemAlloc, tt::NODE_CREATE | tt::MEM_ALLOC_BEGIN..=tt::MEM_RELEASE_END) => {
                string_or_pointer(ctx, caches, ud, true)
            }
            _ => string_or_pointer(ctx, caches, ud, false),
        };
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

/// A UR function's parameters as the record path walks them, packed into one word (built once
/// from the generated table, then one load per UR notification): bits `2i..2i+2` the width of
/// parameter `i`'s argument variable as log2 of its bytes (1/2/4/8), bits 32-47 the output
/// pointer parameters (bit `32 + i`), bits 48-55 the parameter count (at most `MAX_ARGS`), bit
/// 63 set for a known id: 0 for an unknown one.
fn arg_desc(function_id: u32) -> u64 {
    /// Built at compile time from the generated table: a plain indexed load on the record path
    /// (a `OnceLock` cost a state check and two loads more per UR notification).
    static DESCS: [u64; ur::MAX_FUNCTION_ID as usize + 1] = {
        const _: () = assert!(MAX_ARGS <= 16);
        let mut descs = [0u64; ur::MAX_FUNCTION_ID as usize + 1];
        let mut k = 0;
        while k < ur::FUNCTIONS.len() {
            let f = &ur::FUNCTIONS[k];
            let n = if f.params.len() < MAX_ARGS { f.params.len() } else { MAX_ARGS };
            let mut d = 1 << 63 | (n as u64) << 48;
            let mut i = 0;
            while i < n {
                let p = &f.params[i];
                let tz = p.size.trailing_zeros();
                let width = (if tz < 3 { tz } else { 3 }) as u64;
                let out = matches!(p.kind, ParamKind::OutPointer) as u64;
                d |= width << (2 * i) | out << (32 + i);
                i += 1;
            }
            if (f.id as usize) < descs.len() {
                descs[f.id as usize] = d;
            }
            k += 1;
        }
        descs
    };
    DESCS.get(function_id as usize).copied().unwrap_or(0)
}

/// Loads the argument variable at `p`, `1 << width` bytes (see [`arg_desc`]), zero-extended.
///
/// # Safety
/// `p` points to a readable argument variable of at least that many bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn load_width(p: *const u8, width: u64) -> u64 {
    // SAFETY: forwarded.
    unsafe {
        match width {
            0 => u64::from(*p),
            1 => u64::from(p.cast::<u16>().read_unaligned()),
            2 => u64::from(p.cast::<u32>().read_unaligned()),
            _ => p.cast::<u64>().read_unaligned(),
        }
    }
}

/// Whether [`event_info`] of `e` would be `d`, on its hit path only (the payload is the thread's
/// last one, no metadata): no decoding, no stores. `false` means "decode it".
///
/// # Safety
/// As [`event_info`], `e` non-null.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn event_unchanged(caches: &ThreadCaches, e: &TraceEventData, d: &EventInfo) -> bool {
    let payload = if e.flags & event_flags::PAYLOAD_AVAILABLE != 0 && !e.reserved.payload.is_null() {
        // SAFETY: as in `event_info`.
        let p = unsafe { &*e.reserved.payload };
        let key = (p.name as usize, p.source_file as usize, p.line_no, p.column_no, p.uid.p2);
        if caches.last_payload.key != key || caches.last_payload.id.0 == 0 {
            return false;
        }
        caches.last_payload.id
    } else {
        PayloadId(0)
    };
    e.unique_id == d.uid
        && e.instance_id == d.instance_id
        && payload == d.payload
        && e.reserved.metadata.element_count == 0
        && d.metadata.0 == 0
        && e.event_type == d.event_type
        && e.activity_type == d.activity_type
        && e.source_id == d.source_id
        && e.target_id == d.target_id
}

/// Encodes a `ur.call` `function_with_args_begin`/`_end` (~70% of all notifications) straight
/// from the callback's arguments into `out` (a ring reservation of [`compact::MAX_WORDS`]
/// words), in [`compact`]'s layout, without building a [`Notification`]; updates `delta` as if
/// the record were pushed (the caller commits it); returns its length in words.
///
/// The same fields as [`decode`] + [`compact::encode`], except: no stashed tuple (see
/// [`decode`]), and an exit whose begin was the ring's previous begin (same instance and
/// function) carries only the result and the output pointees: the argument values are the
/// begin's (`compact::ARGS_OF_BEGIN`; the writer restores them).
///
/// # Safety
/// As [`decode`], with `raw` a function_with_args begin/end of a `ur.call` stream and a
/// non-null `user_data`.
#[allow(unsafe_code)]
#[inline(always)] // into `record_into`: the reservation's base, tail and mask stay in registers
#[allow(clippy::too_many_arguments)]
pub unsafe fn encode_ur_call<O: compact::Out + ?Sized>(
    ctx: Ctx<'_>,
    caches: &mut ThreadCaches,
    stream: u8,
    raw: &Raw,
    ts: u64,
    tid: u32,
    ring_tid: u32,
    delta: &mut compact::Delta,
    out: &mut O,
) -> usize {
    use compact::*;
    let mut flags = 0u32;
    let mut i = 3;
    if tid != ring_tid {
        flags |= LATE_TID;
        out.set(i, u64::from(tid));
        i += 1;
    }
    // SAFETY: a function_with_args notification's user data is an `xpti::function_with_args_t`.
    let f = unsafe { &*raw.user_data.cast::<FunctionWithArgs>() };
    let end = raw.trace_type == tt::FUNCTION_WITH_ARGS_END;
    let id = f.function_id;
    // The exit of the call whose begin this ring pushed last: the universal id is the begin's.
    let follows_begin = end && delta.begin == Some((raw.instance, id));
    if follows_begin {
        flags |= UNIVERSAL_OF_BEGIN;
    } else {
        let universal = match ctx.dispatcher.get_universal_id {
            // SAFETY: xptiGetUniversalId takes no arguments and reads a thread-local.
            Some(get) => unsafe { get() },
            None => 0,
        };
        if universal != 0 {
            flags |= UNIVERSAL;
            out.set(i, universal);
            i += 1;
        }
    }
    let mut parent = None;
    let mut event = None;
    if !raw.parent.is_null() {
        // SAFETY: forwarded from this function's contract.
        unsafe { event_info(ctx, caches, raw.parent, &mut parent) };
    }
    // The usual case: the event is the previous record's (the one global "Unified Runtime call"
    // event), checked on the raw event without decoding it.
    // SAFETY: forwarded from this function's contract.
    let event_same = !raw.event.is_null()
        && delta.event.as_ref().is_some_and(|d| unsafe { event_unchanged(caches, &*raw.event, d) });
    if !event_same {
        // SAFETY: forwarded from this function's contract.
        unsafe { event_info(ctx, caches, raw.event, &mut event) };
    }
    if let Some(p) = &parent {
        flags |= PARENT;
        if delta.parent.as_ref().is_some_and(|d| compact::same_event(d, p)) {
            flags |= P_SAME;
        } else {
            put_event(out, &mut i, p, P_MD, P_EDGE, &mut flags);
        }
    }
    if event_same {
        flags |= EVENT | E_SAME;
    } else if let Some(e) = &event {
        flags |= EVENT;
        if delta.event.as_ref().is_some_and(|d| compact::same_event(d, e)) {
            flags |= E_SAME;
        } else {
            put_event(out, &mut i, e, E_MD, E_EDGE, &mut flags);
        }
    }
    let verified = ctx.interner.ur_name(id, f.function_name);
    let name = match verified {
        Some(s) => s,
        // SAFETY: the function name is a C string (checked defensively on a miss).
        None => unsafe { c_string(ctx, caches, f.function_name) }.unwrap_or_default(),
    };
    out.set(i, u64::from(id) | u64::from(name.0) << 32);
    i += 1;
    let mut result = None;
    if end && !f.ret_data.is_null() {
        // SAFETY: at exit `ret_data` points to the call's `ur_result_t` (an i32 enum).
        let r = unsafe { f.ret_data.cast::<i32>().read_unaligned() };
        flags |= HAS_RESULT;
        out.set(i, u64::from(r as u32));
        i += 1;
        result = Some(r);
    }
    let counts_at = i;
    i += 1;
    let mut nargs = 0usize;
    let mut nouts = 0usize;
    let mut idx = 0u64;
    let mut walked = false;
    // Arguments only for a function whose name matched the generated table (see `ur_name`).
    let desc = if verified.is_some() { arg_desc(id) } else { 0 };
    if desc != 0 && !f.args_data.is_null() {
        let params = f.args_data.cast::<*const u8>();
        let n = (desc >> 48) as u8 as usize;
        walked = true;
        if follows_begin {
            flags |= ARGS_OF_BEGIN;
        } else {
            // `i` is at most 20 here and `n` at most 16, so this never shortens the walk.
            let n = n.min(MAX_WORDS.saturating_sub(i));
            let mut widths = desc;
            out.set_run(i, n, |a| {
                // SAFETY: `args_data` is the function's `ur_*_params_t`: one pointer per
                // parameter in this (generated) order; each points to the caller's argument
                // variable of the table's width.
                let ptr = unsafe { params.add(a).read() };
                let v = if ptr.is_null() { 0 } else { unsafe { load_width(ptr, widths & 3) } };
                widths >>= 2;
                v
            });
            nargs = n;
        }
        if end && result == Some(XPTI_RESULT_SUCCESS) {
            // The output pointees, in parameter order (output parameters are pointer variables,
            // all of them < n).
            let outs_at = i + nargs;
            let mut m = (desc >> 32) as u16;
            while m != 0 && nouts < MAX_OUTS {
                let a = m.trailing_zeros() as usize;
                m &= m - 1;
                // SAFETY: as above; an output pointer parameter is a pointer variable.
                let ptr = unsafe { params.add(a).read() };
                let v = if ptr.is_null() { 0 } else { unsafe { ptr.cast::<u64>().read_unaligned() } };
                if v >= 4096 {
                    // SAFETY: the call succeeded, so a non-null output pointer it was given was
                    // written through: its first byte is mapped.
                    out.set(outs_at + nouts, unsafe { load_out(v as usize) });
                    idx |= (a as u64) << (8 * nouts);
                    nouts += 1;
                }
            }
        }
    }
    out.set(counts_at, nargs as u64 | (nouts as u64) << 8 | idx << 16);
    let len = (i + nargs + nouts).min(MAX_WORDS);
    out.set(0, header(raw.trace_type, stream, len, flags | UD_FWA << UD_SHIFT));
    out.set(1, ts);
    out.set(2, raw.instance);
    // Equal already when omitted as the same (the usual case: one global event), or both none
    // (the usual case: no parent).
    if flags & P_SAME == 0 && (parent.is_some() || delta.parent.is_some()) {
        delta.parent = parent;
    }
    if flags & E_SAME == 0 {
        delta.event = event;
    }
    delta.stash = None;
    if !end {
        delta.begin = walked.then_some((raw.instance, id));
    }
    len
}

#[allow(unsafe_code)]
#[inline]
unsafe fn function_with_args(
    ctx: Ctx<'_>,
    caches: &mut ThreadCaches,
    f: &FunctionWithArgs,
    end: bool,
    out: &mut UserData,
) {
    let id = f.function_id;
    let verified = ctx.interner.ur_name(id, f.function_name);
    let name = match verified {
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
    *out = UserData::FunctionWithArgs {
        function_id: id,
        name,
        result,
        args: ArgBlock::default(),
        outs: OutValues::default(),
    };
    let UserData::FunctionWithArgs { args, outs, .. } = out else { return };
    // Arguments only for a function whose name matched the generated table (see `ur_name`).
    if let Some(func) = verified.and_then(|_| ur::function(id))
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

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use offtrace_format::Record;
    use offtrace_xpti_abi::abi::{
        LegacyUid, MetadataMapImage, MetadataNode, ObjectData, Payload, ReservedData, TracepointCallback, XptiResult,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn arg_descriptors_follow_the_ur_table() {
        for id in 0..=ur::MAX_FUNCTION_ID + 1 {
            let want = ur::function(id).map_or(0, |f| {
                let params = &f.params[..f.params.len().min(MAX_ARGS)];
                params.iter().enumerate().fold(1 << 63 | (params.len() as u64) << 48, |d, (i, p)| {
                    let width = u64::from(p.size.trailing_zeros().min(3));
                    let out = u64::from(p.kind == ParamKind::OutPointer);
                    d | width << (2 * i) | out << (32 + i)
                })
            });
            assert_eq!(arg_desc(id), want, "function {id}");
        }
    }

    static LOOKUPS: AtomicUsize = AtomicUsize::new(0);
    static OBJ_BYTES: [&[u8]; 3] = [b"\x07\0\0\0\0\0\0\0", b"AMD EPYC", b"\x01"];

    unsafe extern "C" fn register_stream(_: *const c_char) -> u8 {
        2
    }
    unsafe extern "C" fn register_callback(_: u8, _: u16, _: TracepointCallback) -> XptiResult {
        0
    }
    unsafe extern "C" fn lookup_string(id: u32) -> *const c_char {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        match id {
            10 => c"queue_id".as_ptr(),
            11 => c"sycl_device_name".as_ptr(),
            12 => c"is_inorder".as_ptr(),
            _ => std::ptr::null(),
        }
    }
    unsafe extern "C" fn lookup_object(id: i32) -> ObjectData {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
        let b = OBJ_BYTES[id as usize % 3];
        ObjectData { size: b.len(), data: b.as_ptr().cast(), type_: [3u8, 1, 5][id as usize % 3] }
    }
    unsafe extern "C" fn stashed(key: *mut *mut c_char, value: *mut u64) -> XptiResult {
        // SAFETY: the decoder passes pointers to two local out-variables.
        unsafe {
            *key = c"queue_id".as_ptr().cast_mut();
            *value = 7;
        }
        0
    }
    unsafe extern "C" fn universal() -> u64 {
        42
    }

    fn mock() -> Dispatcher {
        Dispatcher {
            register_stream,
            register_callback,
            lookup_string,
            lookup_object,
            query_payload: None,
            get_stashed_tuple: Some(stashed),
            get_universal_id: Some(universal),
        }
    }

    fn payload(name: &'static std::ffi::CStr) -> Box<Payload> {
        Box::new(Payload {
            name: name.as_ptr(),
            stack_trace: std::ptr::null(),
            source_file: c"<unknown-file>".as_ptr(),
            line_no: 586,
            column_no: 24,
            code_ptr_va: std::ptr::null(),
            internal: 0,
            flags: 0x28003,
            uid: LegacyUid { p1: 1, p2: 2, p3: 0 },
        })
    }

    /// A live-looking event whose metadata map is a hand-built libstdc++ node list.
    fn event(p: &mut Payload, nodes: &mut [MetadataNode]) -> Box<TraceEventData> {
        for i in 0..nodes.len() {
            let next = if i + 1 < nodes.len() { &mut nodes[i + 1] as *mut MetadataNode } else { std::ptr::null_mut() };
            nodes[i].next = next;
        }
        Box::new(TraceEventData {
            unique_id: 0xabc,
            data_id: 3,
            instance_id: 3,
            event_type: 2,
            activity_type: 1,
            unused: 0,
            source_id: 5,
            target_id: 6,
            reserved: ReservedData {
                payload: p,
                metadata: MetadataMapImage {
                    buckets: std::ptr::null_mut(),
                    bucket_count: 13,
                    before_begin_next: nodes.first_mut().map_or(std::ptr::null_mut(), |n| n as *mut _),
                    element_count: nodes.len(),
                    max_load_factor: 1.0,
                    _pad: 0,
                    next_resize: 13,
                    single_bucket: std::ptr::null_mut(),
                },
            },
            global_user_data: std::ptr::null_mut(),
            flags: 0x39,
        })
    }

    fn node(key: u32, value: i32) -> MetadataNode {
        MetadataNode { next: std::ptr::null_mut(), key, value }
    }

    fn run(i: &Interner, c: &mut ThreadCaches, kind: StreamKind, raw: Raw) -> Notification {
        let d = mock();
        let mut n = Notification::default();
        // SAFETY: the tests build `raw` from live mock events and user data of the right types.
        unsafe { decode(Ctx { dispatcher: &d, interner: i }, c, kind, 2, &raw, &mut n) };
        n
    }

    fn raw(tt: u16, ev: *const TraceEventData, ud: *const c_void) -> Raw {
        Raw { trace_type: tt, parent: std::ptr::null(), event: ev, instance: 9, user_data: ud }
    }

    #[test]
    fn event_payload_metadata_stash_and_cache_hits() {
        let i = Interner::new();
        let mut c = ThreadCaches::new();
        let mut p = payload(c"DPCTLQueue_Submit");
        let mut nodes = [node(11, 1), node(10, 0), node(12, 2)];
        let ev = event(&mut p, &mut nodes);
        let n = run(&i, &mut c, StreamKind::Sycl, raw(tt::TASK_BEGIN, &*ev, c"command_group_node".as_ptr().cast()));
        let e = n.event.expect("event");
        assert_eq!(
            (e.uid, e.instance_id, e.event_type, e.activity_type, e.source_id, e.target_id),
            (0xabc, 3, 2, 1, 5, 6)
        );
        assert!(e.payload.0 != 0 && e.metadata.0 != 0);
        assert!(n.parent.is_none());
        assert_eq!((n.instance, n.trace_type, n.universal_id), (9, tt::TASK_BEGIN, 42));
        let mut defs = Vec::new();
        i.take_queue(&mut defs);
        let text = |id: StrId| {
            defs.iter().find_map(|r| match r {
                Record::String { id: x, text } if *x == id => Some(text.clone()),
                _ => None,
            })
        };
        let UserData::Str(s) = n.user_data else { panic!("{:?}", n.user_data) };
        assert_eq!(text(s).as_deref(), Some("command_group_node"));
        assert_eq!(text(n.stash.expect("stash").0).as_deref(), Some("queue_id"));
        assert_eq!(n.stash.map(|s| s.1), Some(7));
        let set = defs
            .iter()
            .find_map(|r| match r {
                Record::MetadataSet { id, items } if *id == e.metadata => Some(items.clone()),
                _ => None,
            })
            .expect("set defined");
        let keys: Vec<_> = set.iter().map(|(k, _)| text(*k).unwrap_or_default()).collect();
        assert_eq!(keys, ["queue_id", "sycl_device_name", "is_inorder"]);
        assert!(
            defs.iter().any(|r| matches!(r, Record::Payload { id, line: 586, column: 24, .. } if *id == e.payload))
        );

        // Same event again, and the same items in another order: cache hits, no lookups, no defs.
        let before = LOOKUPS.load(Ordering::Relaxed);
        let n2 = run(&i, &mut c, StreamKind::Sycl, raw(tt::TASK_END, &*ev, std::ptr::null()));
        let mut nodes2 = [node(12, 2), node(11, 1), node(10, 0)];
        let ev2 = event(&mut p, &mut nodes2);
        let n3 = run(&i, &mut c, StreamKind::Sycl, raw(tt::TASK_END, &*ev2, std::ptr::null()));
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), before);
        assert_eq!(n2.event, n.event);
        assert_eq!(n3.event.map(|e| e.metadata), Some(e.metadata));
        assert_eq!(n2.user_data, UserData::None);
        let mut more = Vec::new();
        i.take_queue(&mut more);
        assert!(more.is_empty(), "{more:?}");
    }

    #[test]
    fn reused_string_pointer_is_reinterned() {
        let i = Interner::new();
        let mut c = ThreadCaches::new();
        let mut buf = *b"queue.wait[0x1]\0";
        let a = run(&i, &mut c, StreamKind::Sycl, raw(tt::WAIT_BEGIN, std::ptr::null(), buf.as_ptr().cast()));
        buf[12] = b'2';
        let b = run(&i, &mut c, StreamKind::Sycl, raw(tt::WAIT_BEGIN, std::ptr::null(), buf.as_ptr().cast()));
        assert!(matches!((a.user_data, b.user_data), (UserData::Str(x), UserData::Str(y)) if x != y));
        // Not a string: unreadable, or binary.
        let bad = run(&i, &mut c, StreamKind::Sycl, raw(tt::WAIT_BEGIN, std::ptr::null(), 0x10 as *const c_void));
        assert_eq!(bad.user_data, UserData::Pointer(0x10));
        let bin = [1u8, 2, 3, 0];
        let b2 = run(&i, &mut c, StreamKind::Sycl, raw(tt::WAIT_BEGIN, std::ptr::null(), bin.as_ptr().cast()));
        assert_eq!(b2.user_data, UserData::Pointer(bin.as_ptr() as u64));
    }

    #[test]
    fn ur_call_arguments_results_and_outputs() {
        let i = Interner::new();
        let mut c = ThreadCaches::new();
        let f = ur::function_by_name("urEnqueueUSMMemcpy").expect("memcpy");
        // Argument variables; `blocking` is a bool surrounded by garbage.
        let h_queue: u64 = 0x1111;
        let blocking: [u8; 8] = [1, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee];
        let dst: u64 = 0x2000;
        let src: u64 = 0x3000;
        let size: u64 = 64;
        let nwait: [u32; 2] = [0, 0xdead_beef];
        let wait_list: u64 = 0;
        let out_event: u64 = 0x5555_0000;
        let ph_event: u64 = &out_event as *const u64 as u64;
        let params: [*const c_void; 8] = [
            (&h_queue as *const u64).cast(),
            blocking.as_ptr().cast(),
            (&dst as *const u64).cast(),
            (&src as *const u64).cast(),
            (&size as *const u64).cast(),
            nwait.as_ptr().cast(),
            (&wait_list as *const u64).cast(),
            (&ph_event as *const u64).cast(),
        ];
        let result: i32 = 0;
        let fwa = FunctionWithArgs {
            function_id: f.id,
            function_name: c"urEnqueueUSMMemcpy".as_ptr(),
            args_data: params.as_ptr().cast_mut().cast(),
            ret_data: (&result as *const i32).cast_mut().cast(),
            user_data: std::ptr::null_mut(),
        };
        let end = run(
            &i,
            &mut c,
            StreamKind::UrCall,
            raw(tt::FUNCTION_WITH_ARGS_END, std::ptr::null(), (&fwa as *const FunctionWithArgs).cast()),
        );
        let UserData::FunctionWithArgs { function_id, name, result, args, outs } = end.user_data else {
            panic!("{:?}", end.user_data)
        };
        assert_eq!((function_id, result), (f.id, Some(0)));
        assert_eq!(args.as_slice(), [0x1111, 1, 0x2000, 0x3000, 64, 0, 0, ph_event]);
        assert_eq!(outs.as_slice(), [(7, 0x5555_0000)]);
        assert_eq!(Some(name), i.ur_name(f.id, c"urEnqueueUSMMemcpy".as_ptr()));
        // An id whose runtime name differs from the table's: name kept, arguments not walked.
        let mut other = fwa;
        other.function_id = ur::function_by_name("urAdapterGet").expect("adapter").id;
        let n = run(
            &i,
            &mut c,
            StreamKind::UrCall,
            raw(tt::FUNCTION_WITH_ARGS_END, std::ptr::null(), (&other as *const FunctionWithArgs).cast()),
        );
        let UserData::FunctionWithArgs { args, outs, name, .. } = n.user_data else { panic!() };
        assert_eq!((args.len, outs.len), (0, 0));
        let mut defs = Vec::new();
        i.take_queue(&mut defs);
        assert!(
            defs.iter()
                .any(|r| matches!(r, Record::String { id, text } if *id == name && text == "urEnqueueUSMMemcpy"))
        );
        // Begin: args but no result and no outputs.
        let begin = run(
            &i,
            &mut c,
            StreamKind::UrCall,
            raw(tt::FUNCTION_WITH_ARGS_BEGIN, std::ptr::null(), (&fwa as *const FunctionWithArgs).cast()),
        );
        let UserData::FunctionWithArgs { result, outs, args, .. } = begin.user_data else { panic!() };
        assert_eq!((result, outs.len, args.len), (None, 0, 8));
    }

    /// The in-place UR encoder, decoded by the writer's `compact::decode`, gives exactly what
    /// `decode` + `compact::encode` give (no stash on `ur.call`); an exit right after its begin
    /// omits the arguments in the ring and gets them back from the begin.
    #[test]
    fn in_place_ur_call_matches_generic_decode() {
        let i = Interner::new();
        let mut c = ThreadCaches::new();
        let d = mock();
        let ctx = Ctx { dispatcher: &d, interner: &i };
        let f = ur::function_by_name("urEnqueueUSMMemcpy").expect("memcpy");
        let vars: [u64; 7] = [0x1111, 1, 0x2000, 0x3000, 64, 0, 0];
        let out_event: u64 = 0x5555_0000;
        let ph_event: u64 = &out_event as *const u64 as u64;
        let mut params: [*const c_void; 8] = [std::ptr::null(); 8];
        for (k, v) in vars.iter().enumerate() {
            params[k] = (v as *const u64).cast();
        }
        params[7] = (&ph_event as *const u64).cast();
        let ok: i32 = 0;
        let failed: i32 = 40;
        let mut pl = payload(c"Unified Runtime call");
        let ev = event(&mut pl, &mut []);
        // Another event with the same payload (the previous record's event is checked on the
        // raw event: a different one must be written out).
        let mut ev2 = event(&mut pl, &mut []);
        ev2.instance_id += 1;
        let fwa = |ret: *const i32| FunctionWithArgs {
            function_id: f.id,
            function_name: c"urEnqueueUSMMemcpy".as_ptr(),
            args_data: params.as_ptr().cast_mut().cast(),
            ret_data: ret.cast_mut().cast(),
            user_data: std::ptr::null_mut(),
        };
        let begin = fwa(std::ptr::null());
        let end_ok = fwa(&ok);
        let end_failed = fwa(&failed);
        let mut tx = compact::Delta::default();
        let mut rx = compact::Delta::default();
        let mut check_on =
            |ev: &TraceEventData, tt: u16, ud: &FunctionWithArgs, instance: u64, want_args_in_ring: bool| {
                let mut r = raw(tt, ev, (ud as *const FunctionWithArgs).cast());
                r.instance = instance;
                let mut want = run(&i, &mut c, StreamKind::UrCall, r);
                want.ts = 77;
                want.tid = 5;
                assert_eq!(want.stash, None);
                let mut words = [0u64; compact::MAX_WORDS];
                // SAFETY: `r` is a function_with_args notification with live mock data.
                let len = unsafe { encode_ur_call(ctx, &mut c, 2, &r, 77, 5, 5, &mut tx, &mut words) };
                assert_eq!(compact::record_len(words[0]), len);
                let got = compact::decode(&words[..len], 5, &mut rx);
                assert_eq!(got, want);
                let args_in_ring = (words[0] >> 32) as u32 & compact::ARGS_OF_BEGIN == 0;
                assert_eq!(args_in_ring, want_args_in_ring, "{got:?}");
                len
            };
        let mut check = |tt: u16, ud: &FunctionWithArgs, instance: u64, want_args_in_ring: bool| {
            check_on(&ev, tt, ud, instance, want_args_in_ring)
        };
        // An exit with no begin before it: full arguments.
        let full_end = check(tt::FUNCTION_WITH_ARGS_END, &end_ok, 1, true);
        let b = check(tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 2, true);
        let e = check(tt::FUNCTION_WITH_ARGS_END, &end_ok, 2, false);
        // 3 + universal id (the mock's 42); the begin repeats the event and has 8 arguments;
        // its exit: id|name, result, counts, *phEvent, and neither the universal id nor the
        // arguments (both the begin's). The first record has the event (5 words with its edge
        // ids) and all of these.
        assert_eq!((b, e, full_end), (4 + 2 + 8, 3 + 4, 4 + 5 + 3 + 8 + 1));
        // A failed call: result, no outputs, arguments from the begin.
        check(tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 3, true);
        check(tt::FUNCTION_WITH_ARGS_END, &end_failed, 3, false);
        // Nested calls: the outer exit no longer follows its begin.
        check(tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 4, true);
        check(tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 5, true);
        check(tt::FUNCTION_WITH_ARGS_END, &end_ok, 5, false);
        check(tt::FUNCTION_WITH_ARGS_END, &end_ok, 4, true);
        // A different event, then back to the first: each written out.
        let with_event = check_on(&ev2, tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 6, true);
        let same = check_on(&ev2, tt::FUNCTION_WITH_ARGS_END, &end_ok, 6, false);
        let back = check_on(&ev, tt::FUNCTION_WITH_ARGS_BEGIN, &begin, 7, true);
        assert_eq!((with_event, same, back), (b + 5, e, b + 5));
    }

    #[test]
    fn memory_and_buffer_user_data() {
        let i = Interner::new();
        let mut c = ThreadCaches::new();
        let m = MemAllocData {
            mem_object_handle: 1,
            alloc_pointer: 2,
            alloc_size: 3,
            guard_zone_size: 0,
            reserved: std::ptr::null_mut(),
        };
        let n = run(
            &i,
            &mut c,
            StreamKind::MemAlloc,
            raw(tt::MEM_ALLOC_END, std::ptr::null(), (&m as *const MemAllocData).cast()),
        );
        assert_eq!(n.user_data, UserData::MemAlloc { mem_object: 1, alloc_pointer: 2, alloc_size: 3, guard_zone: 0 });
        // USM alloc notifications carry an event and a C string instead.
        let mut p = payload(c"alignedAlloc");
        let ev = event(&mut p, &mut []);
        let n =
            run(&i, &mut c, StreamKind::MemAlloc, raw(tt::MEM_ALLOC_BEGIN, &*ev, c"usm::alignedAlloc".as_ptr().cast()));
        assert!(matches!(n.user_data, UserData::Str(_)));
        assert_eq!(n.event.map(|e| e.metadata.0), Some(0));
        let b = OffloadBufferData {
            user_object_handle: 10,
            host_object_handle: 11,
            element_type: c"f".as_ptr(),
            element_size: 4,
            dim: 1,
            range: [4096, 1, 1],
        };
        let n = run(
            &i,
            &mut c,
            StreamKind::Buffer,
            raw(tt::OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT, &*ev, (&b as *const OffloadBufferData).cast()),
        );
        let UserData::OffloadBuffer { user_object, element_type, range, .. } = n.user_data else { panic!() };
        assert_eq!((user_object, range), (10, [4096, 1, 1]));
        assert!(element_type.0 != 0);
        let a = OffloadAccessorData { buffer_handle: 1, accessor_handle: 2, target: 2014, mode: 1024 };
        let n = run(
            &i,
            &mut c,
            StreamKind::Buffer,
            raw(tt::OFFLOAD_ALLOC_ACCESSOR, &*ev, (&a as *const OffloadAccessorData).cast()),
        );
        assert_eq!(n.user_data, UserData::Accessor { buffer: 1, accessor: 2, target: 2014, mode: 1024 });
        let s = run(&i, &mut c, StreamKind::Sycl, raw(tt::SIGNAL, &*ev, 0x7777 as *const c_void));
        assert_eq!(s.user_data, UserData::Signal { ur_event: 0x7777 });
    }
}
