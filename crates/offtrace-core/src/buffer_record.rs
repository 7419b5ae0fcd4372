//! Typed buffer records: what a buffer service stages for each kind, and what a tool's buffer
//! callback reads (`offtrace_buffer_tracing_*_record_t` in `offtrace.h`).
//!
//! Every record starts with a [`BufferRecordHeader`] whose first field is the record's `size`
//! in bytes (a multiple of 8): the size versions the record, as rocprofiler-sdk's
//! `rocprofiler_buffer_tracing_*_record_t` are versioned: a later version only appends fields,
//! so a tool reads a field when `size` covers it. `kind` says which struct follows. Data of
//! variable length (an API call's arguments, a kernel's arguments, names) is copied inline after
//! the fixed fields, found through an offset from the record's start (0 = absent): the payload
//! pointers a callback sees are valid during the emit only, a buffer record is read later on
//! another thread.
//!
//! The fixed fields of the device activity, memory and queue records follow the order of their
//! callback payloads (`offtrace_callback_tracing_*_data_t`), so a record's body is the payload's
//! bytes: a few 16-byte copies on the record path.
//!
//! Cost: the fixed part is one struct store; an API call copies `arg_count` words; a string is
//! measured (bounded by [`MAX_RECORD_STRING`]) and copied. The encoding is split in two steps,
//! [`RecordData::layout`] (the size, so the staging can reserve it) and [`RecordData::store`].

#![allow(unsafe_code)] // writes records into raw staging memory, reads C strings of payloads

use std::ffi::c_char;

use crate::buffer::Buffer;
use crate::callback::{CorrelationId, Phase};
use crate::context::ContextId;
use crate::correlation::ThreadState;
use crate::kind::Kind;
use crate::payload::{
    ApiCallPayload, CodeObjectPayload, CounterPayload, DevicePayload, KernelDispatchPayload, MAX_ARGS, MAX_KERNEL_ARGS,
    MarkerPayload, MemoryAllocPayload, MemoryCopyPayload, MemoryFillPayload, Payload, QueuePayload, SyncPayload,
    TaskGraphPayload,
};
use std::sync::Arc;

/// Longest string a record copies (bytes before the NUL; longer ones are cut there).
pub const MAX_RECORD_STRING: usize = 1023;

/// `offtrace_buffer_tracing_record_t`: the header of every buffer record.
///
/// `start_timestamp`/`end_timestamp`: an API call's host enter and exit; device activity
/// (phase `Complete`) its device start and end; any other record the time it was emitted (both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct BufferRecordHeader {
    /// This record's size in bytes, header and inline data included (a multiple of 8).
    pub size: u32,
    /// `offtrace_tracing_kind_t`: which `offtrace_buffer_tracing_*_record_t` this is.
    pub kind: u32,
    pub operation: u32,
    /// `offtrace_callback_phase_t`: `NONE` for a whole API call; an instant's own phase;
    /// `COMPLETE` for device activity with device times.
    pub phase: u32,
    pub context_id: ContextId,
    pub correlation_id: CorrelationId,
    pub thread_id: u64,
    pub start_timestamp: u64,
    pub end_timestamp: u64,
}

/// A record of a kind without a record of its own (`XPTI`: the raw layer's struct is the
/// backend's and lives during the emit only): the header alone.
pub type HeaderOnlyRecord = BufferRecordHeader;

/// `offtrace_buffer_tracing_api_call_record_t` (`UR_API`, `OPENCL_API`, `CUDA_*_API`): one
/// record per call, at its exit. The arguments (one `u64` each, as the callback payload's
/// `args`) are at `args_offset`; the kind's operation table names and types them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct ApiCallRecord {
    pub header: BufferRecordHeader,
    pub function_id: u32,
    pub arg_count: u32,
    pub result: i32,
    /// Bytes from the record's start to `args[0]`.
    pub args_offset: u32,
}

/// `offtrace_buffer_tracing_kernel_dispatch_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct KernelDispatchRecord {
    pub header: BufferRecordHeader,
    pub queue: u64,
    pub kernel: u64,
    pub device: u64,
    pub work_dim: u32,
    pub kernel_arg_count: u32,
    pub global_size: [u64; 3],
    pub local_size: [u64; 3],
    /// Device times in the trace clock (0 = unknown).
    pub device_start: u64,
    pub device_end: u64,
    /// Bytes from the record's start to the kernel's name (NUL-terminated; 0 = none).
    pub name_offset: u32,
    /// Bytes from the record's start to `kernel_args[0]` (`kernel_arg_count` `u64`s).
    pub args_offset: u32,
}

/// `offtrace_buffer_tracing_memory_copy_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryCopyRecord {
    pub header: BufferRecordHeader,
    pub queue: u64,
    pub dst: u64,
    pub src: u64,
    pub bytes: u64,
    pub device: u64,
    /// `offtrace_copy_direction_t`.
    pub direction: u32,
    /// `offtrace_memory_type_t` of each end.
    pub src_type: u32,
    pub dst_type: u32,
    pub reserved: u32,
    pub device_start: u64,
    pub device_end: u64,
}

/// `offtrace_buffer_tracing_memory_fill_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryFillRecord {
    pub header: BufferRecordHeader,
    pub queue: u64,
    pub dst: u64,
    /// The pattern's first 8 bytes.
    pub pattern: u64,
    pub pattern_size: u64,
    pub bytes: u64,
    pub device: u64,
    pub device_start: u64,
    pub device_end: u64,
}

/// `offtrace_buffer_tracing_memory_alloc_record_t` (operation `alloc` or `free`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MemoryAllocRecord {
    pub header: BufferRecordHeader,
    pub ptr: u64,
    pub bytes: u64,
    /// `offtrace_memory_type_t`.
    pub memory_type: u32,
    pub reserved: u32,
    pub device: u64,
}

/// `offtrace_buffer_tracing_sync_record_t`: a host wait or a barrier (device activity when
/// `queue` is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct SyncRecord {
    pub header: BufferRecordHeader,
    pub object: u64,
    pub event_count: u32,
    pub reserved: u32,
    pub queue: u64,
    pub device: u64,
    pub device_start: u64,
    pub device_end: u64,
}

/// `offtrace_buffer_tracing_queue_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct QueueRecord {
    pub header: BufferRecordHeader,
    pub queue: u64,
    pub device: u64,
    pub context: u64,
    pub flags: u64,
}

/// `offtrace_buffer_tracing_task_graph_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct TaskGraphRecord {
    pub header: BufferRecordHeader,
    pub node: u64,
    pub source: u64,
    pub target: u64,
    pub event: u64,
    pub queue: u64,
    /// Bytes from the record's start to the name (0 = none).
    pub name_offset: u32,
    pub reserved: u32,
}

/// `offtrace_buffer_tracing_code_object_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CodeObjectRecord {
    pub header: BufferRecordHeader,
    pub handle: u64,
    pub program: u64,
    pub binary_size: u64,
    pub name_offset: u32,
    pub reserved: u32,
}

/// `offtrace_buffer_tracing_marker_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct MarkerRecord {
    pub header: BufferRecordHeader,
    pub range_id: u64,
    pub message_offset: u32,
    pub reserved: u32,
}

/// `offtrace_buffer_tracing_device_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct DeviceRecord {
    pub header: BufferRecordHeader,
    pub handle: u64,
    pub parent: u64,
    /// `offtrace_device_type_t`.
    pub device_type: u32,
    pub name_offset: u32,
}

/// `offtrace_buffer_tracing_counter_record_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CounterRecord {
    pub header: BufferRecordHeader,
    pub counter: u64,
    pub device: u64,
    pub value: u64,
    pub name_offset: u32,
    pub unit_offset: u32,
}

/// The header fields the record path knows before the payload is encoded.
#[derive(Clone, Copy)]
pub(crate) struct RecordHead {
    pub kind: Kind,
    pub operation: u32,
    pub phase: Phase,
    pub context_id: ContextId,
    pub correlation_id: CorrelationId,
    pub thread_id: u64,
    pub start: u64,
    pub end: u64,
}

impl RecordHead {
    #[inline(always)]
    fn header(&self, size: usize) -> BufferRecordHeader {
        BufferRecordHeader {
            size: size as u32,
            kind: self.kind as u32,
            operation: self.operation,
            phase: self.phase as u32,
            context_id: self.context_id,
            correlation_id: self.correlation_id,
            thread_id: self.thread_id,
            start_timestamp: self.start,
            end_timestamp: self.end,
        }
    }

    /// Writes the header of a record of `size` bytes at `dst`: four 16-byte stores on x86-64 (a
    /// record streams into the staging ring, whose lines miss the L1: eight 8-byte stores fill
    /// the store buffer twice as fast).
    ///
    /// # Safety
    /// `dst` must be writable for a [`BufferRecordHeader`] (any alignment).
    #[inline(always)]
    unsafe fn store_header(&self, dst: *mut BufferRecordHeader, size: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
            let d = dst.cast::<__m128i>();
            let size_kind = (size as u64 | (u64::from(self.kind as u32) << 32)) as i64;
            let op_phase = (u64::from(self.operation) | (u64::from(self.phase as u32) << 32)) as i64;
            // SAFETY:
            // - SSE2 is part of the x86-64 baseline;
            // - four unaligned 16-byte stores cover the header's 64 bytes (size 0, kind 4,
            //   operation 8, phase 12, context 16, correlation 24 and 32, thread 40, start 48,
            //   end 56: `header_layout` checks them).
            unsafe {
                _mm_storeu_si128(d, _mm_set_epi64x(op_phase, size_kind));
                _mm_storeu_si128(
                    d.add(1),
                    _mm_set_epi64x(self.correlation_id.internal as i64, self.context_id.handle as i64),
                );
                _mm_storeu_si128(
                    d.add(2),
                    _mm_set_epi64x(self.thread_id as i64, self.correlation_id.external.value as i64),
                );
                _mm_storeu_si128(d.add(3), _mm_set_epi64x(self.end as i64, self.start as i64));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: forwarded from the caller.
        unsafe {
            dst.write_unaligned(self.header(size))
        };
    }

    /// A device activity's device times: the payload's when it has them, else the record's
    /// own when it is a completion (its start/end are the device times).
    #[inline(always)]
    fn device_times(&self, start: u64, end: u64) -> (u64, u64) {
        if start == 0 && end == 0 && self.phase == Phase::Complete { (self.start, self.end) } else { (start, end) }
    }
}

/// A record's size and the lengths of its inline strings (measured once, by `layout`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Layout {
    /// Bytes, a multiple of 8.
    pub bytes: usize,
    strings: [u32; 2],
}

impl Layout {
    #[inline(always)]
    pub(crate) fn words(&self) -> usize {
        self.bytes / 8
    }
}

/// The longest record any payload makes (a counter with two names of the longest, a kernel
/// dispatch with every argument and the longest name): a buffer must have room for one.
pub const MAX_RECORD_BYTES: usize = max(
    size_of::<KernelDispatchRecord>() + MAX_KERNEL_ARGS * 8 + round8(MAX_RECORD_STRING + 1),
    size_of::<CounterRecord>() + 2 * round8(MAX_RECORD_STRING + 1),
);

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

const fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// The length of the NUL-terminated `s` up to [`MAX_RECORD_STRING`]; 0 for null.
#[inline]
fn string_len(s: *const c_char) -> u32 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: payload strings are NUL-terminated and live during the emit (the payloads'
    // contract); the scan stops at the NUL or at the bound, whichever comes first.
    let n = unsafe { libc_strnlen(s, MAX_RECORD_STRING) };
    n as u32
}

/// `strnlen`: reads no byte past the NUL or past `max`.
///
/// # Safety
/// `s` must be readable up to its NUL or `max` bytes, whichever comes first.
unsafe fn libc_strnlen(s: *const c_char, max: usize) -> usize {
    let mut n = 0;
    // SAFETY: forwarded: each byte read is before the NUL and below `max`.
    while n < max && unsafe { *s.add(n) } != 0 {
        n += 1;
    }
    n
}

/// Space for a string of `len` bytes and its NUL, or none for a null string.
#[inline(always)]
fn string_space(s: *const c_char, len: u32) -> usize {
    if s.is_null() { 0 } else { round8(len as usize + 1) }
}

/// Copies `len` bytes of `s` and a NUL to `dst + at`; the offset to write into the record (0
/// for a null string) and the next free offset.
///
/// # Safety
/// `dst + at` must be writable for `string_space(s, len)` bytes and `s` readable for `len`.
#[inline(always)]
unsafe fn put_string(dst: *mut u8, at: usize, s: *const c_char, len: u32) -> (u32, usize) {
    if s.is_null() {
        return (0, at);
    }
    let space = round8(len as usize + 1);
    // SAFETY: the caller's contract; the last word is zeroed first so the NUL and the padding
    // are defined.
    unsafe {
        dst.add(at + space - 8).cast::<u64>().write(0);
        std::ptr::copy_nonoverlapping(s.cast::<u8>(), dst.add(at), len as usize);
    }
    (at as u32, at + space)
}

/// A payload that can be encoded as a buffer record of kind `kind`.
pub(crate) trait RecordData: Sized {
    fn layout(&self, kind: Kind) -> Layout;
    /// Writes the record (`layout` from [`Self::layout`] with the same `kind`).
    ///
    /// # Safety
    /// `dst` must be 8-aligned and writable for `layout.bytes` bytes.
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, head: &RecordHead);
    /// Stages the record in `buffer` ([`Payload`] picks its variant's type first).
    #[inline(always)]
    fn write_to(&self, buffer: &Arc<Buffer>, t: &ThreadState, slot: usize, head: &RecordHead) {
        buffer.write(t, slot, head, self);
    }
}

/// A record whose body is its payload's bytes (same fields, same order, same size: checked at
/// compile time): the header, then one fixed-size copy (16-byte moves, no call), then the
/// fields the payload leaves undefined (`reserved`, padding there) and the device times of a
/// completion that the payload lacks. `word_before_times`: the word before the device times is
/// this `u32` field and the record's `reserved` (padding in the payload): written as one word,
/// not copied and then half overwritten (one store fewer per record).
macro_rules! mirrored_record {
    ($payload:ty => $record:ident, reserved: [$($reserved:ident),*], device_times: $times:tt
        $(, word_before_times: $word:ident)?) => {
        const _: () = assert!(size_of::<$record>() == size_of::<BufferRecordHeader>() + size_of::<$payload>());
        impl RecordData for $payload {
            #[inline(always)]
            fn layout(&self, _kind: Kind) -> Layout {
                Layout { bytes: size_of::<$record>(), strings: [0; 2] }
            }
            #[inline(always)]
            unsafe fn store(&self, layout: &Layout, dst: *mut u64, h: &RecordHead) {
                let r = dst.cast::<$record>();
                // SAFETY: 8-aligned and writable for the record (the caller's contract); the
                // body has the payload's layout (asserted above), so the byte copy gives each
                // field its value (padding bytes are overwritten below or are padding there too).
                unsafe {
                    h.store_header(&raw mut (*r).header, layout.bytes);
                    let copied = mirrored_record!(@copied $times, $payload) $(- mirrored_record!(@word $word))?;
                    std::ptr::copy_nonoverlapping(
                        (self as *const $payload).cast::<u8>(),
                        dst.cast::<u8>().add(size_of::<BufferRecordHeader>()),
                        copied,
                    );
                    $((&raw mut (*r).$reserved).write(0);)*
                    $(
                        const {
                            assert!(std::mem::offset_of!($record, $word) + 4 == std::mem::offset_of!($record, reserved));
                            assert!(std::mem::offset_of!($record, $word) + 8 == std::mem::offset_of!($record, device_start));
                        };
                        let [a, b, c, d] = (self.$word as u32).to_ne_bytes();
                        (&raw mut (*r).$word).cast::<u64>().write(u64::from_ne_bytes([a, b, c, d, 0, 0, 0, 0]));
                    )?
                    mirrored_record!(@times $times, $payload, self, r, h);
                }
            }
        }
    };
    // With device times, the payload's last 16 bytes, or the record's own times where the
    // payload has none (a completion whose backend passed its times to `emit_activity` only):
    // chosen first and stored once. The record streams into ring lines that miss the L1, and
    // the stores, not the instructions, bound the record path: writing the payload's times and
    // then the record's over them cost 0.3-0.5 ns more per `MEMORY_COPY` record for the same
    // instruction count.
    (@copied yes, $payload:ty) => { size_of::<$payload>() - 16 };
    (@copied no, $payload:ty) => { size_of::<$payload>() };
    (@word $word:ident) => { 8 };
    (@times yes, $payload:ty, $p:ident, $r:ident, $h:ident) => {
        const { assert!(std::mem::offset_of!($payload, device_start) + 16 == size_of::<$payload>()) };
        if $h.phase == Phase::Complete && $p.device_start == 0 && $p.device_end == 0 {
            store_pair(&raw mut (*$r).device_start, $h.start, $h.end);
        } else {
            store_pair(&raw mut (*$r).device_start, $p.device_start, $p.device_end);
        }
    };
    (@times no, $payload:ty, $p:ident, $r:ident, $h:ident) => {};
}

/// An API call record's fixed part (after the header) at `dst` from `p` when `p`'s argument
/// count is at most [`MAX_ARGS`] (`false`, having written nothing, otherwise): the payload's
/// first four fields are the record's but the last (`has_result` there, `args_offset` here).
///
/// # Safety
///
/// `dst` is writable for 16 bytes.
#[inline(always)]
unsafe fn store_api_fixed(dst: *mut u64, p: &ApiCallPayload) -> bool {
    #[cfg(target_arch = "x86_64")]
    if p.arg_count as usize <= MAX_ARGS {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_loadu_si128, _mm_or_si128, _mm_set_epi32, _mm_storeu_si128,
        };
        const _: () = assert!(std::mem::offset_of!(ApiCallPayload, has_result) == 12);
        const _: () = assert!(std::mem::offset_of!(ApiCallRecord, args_offset) - size_of::<BufferRecordHeader>() == 12);
        // SAFETY: SSE2 is part of the x86-64 baseline; `p` is 16 bytes of `u32`/`i32` fields
        // (repr(C), no padding: the asserts); the caller's contract for `dst`.
        unsafe {
            let v = _mm_loadu_si128((&raw const *p).cast::<__m128i>());
            let keep = _mm_set_epi32(0, -1, -1, -1);
            let offset = _mm_set_epi32(size_of::<ApiCallRecord>() as i32, 0, 0, 0);
            _mm_storeu_si128(dst.cast::<__m128i>(), _mm_or_si128(_mm_and_si128(v, keep), offset));
        }
        return true;
    }
    let _ = (dst, p);
    false
}

/// Writes `a` and `b` at `dst` (two consecutive `u64`s): one 16-byte store on x86-64.
///
/// # Safety
/// `dst` must be writable for two `u64`s (any alignment).
#[inline(always)]
unsafe fn store_pair(dst: *mut u64, a: u64, b: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline; the caller's contract.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
        _mm_storeu_si128(dst.cast::<__m128i>(), _mm_set_epi64x(b as i64, a as i64));
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        dst.write_unaligned(a);
        dst.add(1).write_unaligned(b);
    }
}

mirrored_record!(MemoryCopyPayload => MemoryCopyRecord, reserved: [], device_times: yes, word_before_times: dst_type);
mirrored_record!(MemoryFillPayload => MemoryFillRecord, reserved: [], device_times: yes);
mirrored_record!(MemoryAllocPayload => MemoryAllocRecord, reserved: [reserved], device_times: no);
mirrored_record!(SyncPayload => SyncRecord, reserved: [reserved], device_times: yes);
mirrored_record!(QueuePayload => QueueRecord, reserved: [], device_times: no);

impl RecordData for ApiCallPayload {
    #[inline(always)]
    fn layout(&self, _kind: Kind) -> Layout {
        let n = (self.arg_count as usize).min(MAX_ARGS);
        Layout { bytes: size_of::<ApiCallRecord>() + 8 * n, strings: [0; 2] }
    }
    #[inline(always)]
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, h: &RecordHead) {
        let n = (self.arg_count as usize).min(MAX_ARGS);
        let r = dst.cast::<ApiCallRecord>();
        // SAFETY: 8-aligned, writable for the fixed part and `n` words after it (the layout).
        unsafe {
            h.store_header(&raw mut (*r).header, layout.bytes);
            // function id, argument count, result, args offset: the payload's first 16 bytes
            // (function id, argument count, result, `has_result`) with the last field replaced,
            // where the count needs no clamping: one load, `and`, `or` and store, where the
            // fields one by one were two loads and eight instructions more.
            let fixed = dst.add(size_of::<BufferRecordHeader>() / 8);
            if !store_api_fixed(fixed, self) {
                store_pair(
                    fixed,
                    u64::from(self.function_id) | (u64::from(n as u32) << 32),
                    u64::from(self.result as u32) | ((size_of::<ApiCallRecord>() as u64) << 32),
                );
            }
            let args = dst.add(size_of::<ApiCallRecord>() / 8);
            // A loop, not `copy_nonoverlapping`: most calls have a handful of arguments, and
            // the copy of a variable length became a call to `memcpy`.
            for i in 0..n {
                args.add(i).write(*self.args.get_unchecked(i));
            }
        }
    }
}

impl RecordData for KernelDispatchPayload {
    #[inline]
    fn layout(&self, _kind: Kind) -> Layout {
        let n = (self.kernel_arg_count as usize).min(MAX_KERNEL_ARGS);
        let name = string_len(self.kernel_name);
        Layout {
            bytes: size_of::<KernelDispatchRecord>() + 8 * n + string_space(self.kernel_name, name),
            strings: [name, 0],
        }
    }
    #[inline]
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, h: &RecordHead) {
        let n = (self.kernel_arg_count as usize).min(MAX_KERNEL_ARGS);
        let args_at = size_of::<KernelDispatchRecord>();
        // SAFETY: the layout reserved the name's space after the arguments.
        let (name_offset, _) = unsafe { put_string(dst.cast(), args_at + 8 * n, self.kernel_name, layout.strings[0]) };
        let (device_start, device_end) = h.device_times(self.device_start, self.device_end);
        let fixed = KernelDispatchRecord {
            header: h.header(layout.bytes),
            queue: self.queue,
            kernel: self.kernel,
            device: self.device,
            work_dim: self.work_dim,
            kernel_arg_count: n as u32,
            global_size: self.global_size,
            local_size: self.local_size,
            device_start,
            device_end,
            name_offset,
            args_offset: args_at as u32,
        };
        // SAFETY: 8-aligned, writable for the layout's bytes.
        unsafe {
            dst.cast::<KernelDispatchRecord>().write(fixed);
            std::ptr::copy_nonoverlapping(self.kernel_args.as_ptr(), dst.add(args_at / 8), n);
        }
    }
}

/// A record with up to two inline strings after its fixed struct.
macro_rules! string_record {
    ($payload:ty => $record:ident [$($s:ident),+] |$p:ident, $h:ident, $hdr:ident, $off:ident| $body:expr) => {
        impl RecordData for $payload {
            #[inline]
            fn layout(&self, _kind: Kind) -> Layout {
                let $p = self;
                let mut strings = [0u32; 2];
                let mut bytes = size_of::<$record>();
                for (i, s) in [$($p.$s),+].into_iter().enumerate() {
                    strings[i] = string_len(s);
                    bytes += string_space(s, strings[i]);
                }
                Layout { bytes, strings }
            }
            #[inline]
            unsafe fn store(&self, layout: &Layout, dst: *mut u64, $h: &RecordHead) {
                let $p = self;
                let mut at = size_of::<$record>();
                let mut $off = [0u32; 2];
                for (i, s) in [$($p.$s),+].into_iter().enumerate() {
                    // SAFETY: the layout reserved each string's space, in this order.
                    let (o, next) = unsafe { put_string(dst.cast(), at, s, layout.strings[i]) };
                    $off[i] = o;
                    at = next;
                }
                let $hdr = $h.header(layout.bytes);
                // SAFETY: 8-aligned and writable for the record (the caller's contract).
                unsafe { dst.cast::<$record>().write($body) };
            }
        }
    };
}

string_record!(TaskGraphPayload => TaskGraphRecord [name] |p, _h, header, off| TaskGraphRecord {
    header,
    node: p.node,
    source: p.source,
    target: p.target,
    event: p.event,
    queue: p.queue,
    name_offset: off[0],
    reserved: 0,
});

string_record!(CodeObjectPayload => CodeObjectRecord [name] |p, _h, header, off| CodeObjectRecord {
    header,
    handle: p.handle,
    program: p.program,
    binary_size: p.binary_size,
    name_offset: off[0],
    reserved: 0,
});

string_record!(MarkerPayload => MarkerRecord [message] |p, _h, header, off| MarkerRecord {
    header,
    range_id: p.range_id,
    message_offset: off[0],
    reserved: 0,
});

string_record!(DevicePayload => DeviceRecord [name] |p, _h, header, off| DeviceRecord {
    header,
    handle: p.handle,
    parent: p.parent,
    device_type: p.device_type as u32,
    name_offset: off[0],
});

string_record!(CounterPayload => CounterRecord [name, unit] |p, _h, header, off| CounterRecord {
    header,
    counter: p.counter,
    device: p.device,
    value: p.value,
    name_offset: off[0],
    unit_offset: off[1],
});

/// The header alone (a payload of another kind than the record's, or none).
struct HeaderOnly;

impl RecordData for HeaderOnly {
    #[inline(always)]
    fn layout(&self, _kind: Kind) -> Layout {
        Layout { bytes: size_of::<HeaderOnlyRecord>(), strings: [0; 2] }
    }
    #[inline(always)]
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, h: &RecordHead) {
        // SAFETY: 8-aligned and writable for the header (the caller's contract).
        unsafe { dst.cast::<BufferRecordHeader>().write(h.header(layout.bytes)) };
    }
}

/// Dispatches on the variant; a payload whose kind is not the record's gives the header alone.
macro_rules! payload_dispatch {
    ($self:ident, $kind:ident, |$r:ident| $e:expr) => {
        match *$self {
            Payload::UrApi(p) | Payload::OpenclApi(p) | Payload::CudaRuntimeApi(p) | Payload::CudaDriverApi(p)
                if $self.kind() == Some($kind) =>
            {
                let $r = p;
                $e
            }
            Payload::Queue(p) if $kind == Kind::Queue => {
                let $r = p;
                $e
            }
            Payload::KernelDispatch(p) if $kind == Kind::KernelDispatch => {
                let $r = p;
                $e
            }
            Payload::MemoryCopy(p) if $kind == Kind::MemoryCopy => {
                let $r = p;
                $e
            }
            Payload::MemoryFill(p) if $kind == Kind::MemoryFill => {
                let $r = p;
                $e
            }
            Payload::MemoryAlloc(p) if $kind == Kind::MemoryAlloc => {
                let $r = p;
                $e
            }
            Payload::TaskGraph(p) if $kind == Kind::TaskGraph => {
                let $r = p;
                $e
            }
            Payload::Sync(p) if $kind == Kind::Sync => {
                let $r = p;
                $e
            }
            Payload::CodeObject(p) if $kind == Kind::CodeObject => {
                let $r = p;
                $e
            }
            Payload::Marker(p) if $kind == Kind::Marker => {
                let $r = p;
                $e
            }
            Payload::Device(p) if $kind == Kind::Device => {
                let $r = p;
                $e
            }
            Payload::Counter(p) if $kind == Kind::Counter => {
                let $r = p;
                $e
            }
            _ => {
                let $r = &HeaderOnly;
                $e
            }
        }
    };
}

/// The payloads other than an API call's (out of line: an API call is the common record of the
/// exit path, and the `match` over every variant would otherwise sit in it).
struct OtherPayload<'p, 'a>(&'p Payload<'a>);

impl RecordData for OtherPayload<'_, '_> {
    #[inline(never)]
    fn layout(&self, kind: Kind) -> Layout {
        let this = self.0;
        payload_dispatch!(this, kind, |r| r.layout(kind))
    }
    #[inline(never)]
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, head: &RecordHead) {
        let (this, kind) = (self.0, head.kind);
        // SAFETY: forwarded from the caller.
        payload_dispatch!(this, kind, |r| unsafe { r.store(layout, dst, head) })
    }
}

impl RecordData for Payload<'_> {
    #[inline]
    fn layout(&self, kind: Kind) -> Layout {
        payload_dispatch!(self, kind, |r| r.layout(kind))
    }
    #[inline]
    unsafe fn store(&self, layout: &Layout, dst: *mut u64, head: &RecordHead) {
        let kind = head.kind;
        // SAFETY: forwarded from the caller.
        payload_dispatch!(self, kind, |r| unsafe { r.store(layout, dst, head) })
    }
    #[inline(always)]
    fn write_to(&self, buffer: &Arc<Buffer>, t: &ThreadState, slot: usize, head: &RecordHead) {
        match self.as_api_call() {
            // One check of the variant and the kind, then the API call's record, typed.
            Some(p) if self.kind() == Some(head.kind) => buffer.write(t, slot, head, p),
            _ => buffer.write(t, slot, head, &OtherPayload(self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::UserData;

    fn head(kind: Kind, phase: Phase) -> RecordHead {
        RecordHead {
            kind,
            operation: 7,
            phase,
            context_id: ContextId { handle: 3 },
            correlation_id: CorrelationId { internal: 11, external: UserData { value: 12 } },
            thread_id: 13,
            start: 100,
            end: 200,
        }
    }

    fn encode(p: &Payload<'_>, h: &RecordHead) -> Vec<u64> {
        let l = p.layout(h.kind);
        assert_eq!(l.bytes % 8, 0);
        let mut v = vec![0xdead_beef_u64; l.words()];
        // SAFETY: the vector holds `l.bytes` 8-aligned bytes.
        unsafe { p.store(&l, v.as_mut_ptr(), h) };
        v
    }

    fn cstr_at(rec: &[u64], off: u32) -> String {
        let bytes: Vec<u8> = rec.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let s = &bytes[off as usize..];
        String::from_utf8(s[..s.iter().position(|&b| b == 0).expect("NUL")].to_vec()).expect("utf8")
    }

    #[test]
    fn api_call_record_keeps_every_argument_inline() {
        let mut p = ApiCallPayload::new(42, &[1, 2, 3, 4, 5, 6, 7]);
        p.result = -3;
        let v = encode(&Payload::UrApi(&p), &head(Kind::UrApi, Phase::None));
        // SAFETY: `v` holds an `ApiCallRecord` (8-aligned).
        let r = unsafe { &*v.as_ptr().cast::<ApiCallRecord>() };
        assert_eq!(r.header.size as usize, size_of::<ApiCallRecord>() + 7 * 8);
        assert_eq!((r.header.kind, r.header.operation, r.header.thread_id), (Kind::UrApi as u32, 7, 13));
        assert_eq!((r.function_id, r.arg_count, r.result), (42, 7, -3));
        assert_eq!(&v[r.args_offset as usize / 8..], &[1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn kernel_dispatch_record_has_name_args_and_device_times() {
        let name = c"axpy";
        let mut p = KernelDispatchPayload {
            queue: 1,
            kernel: 2,
            kernel_name: name.as_ptr(),
            work_dim: 1,
            kernel_arg_count: 3,
            global_size: [64, 1, 1],
            local_size: [0; 3],
            device: 9,
            ..Default::default()
        };
        p.kernel_args[..3].copy_from_slice(&[10, 20, 30]);
        // A completion without the payload's device times takes the record's.
        let v = encode(&Payload::KernelDispatch(&p), &head(Kind::KernelDispatch, Phase::Complete));
        // SAFETY: `v` holds a `KernelDispatchRecord`.
        let r = unsafe { &*v.as_ptr().cast::<KernelDispatchRecord>() };
        assert_eq!((r.device_start, r.device_end), (100, 200));
        assert_eq!(cstr_at(&v, r.name_offset), "axpy");
        let a = r.args_offset as usize / 8;
        assert_eq!(&v[a..a + 3], &[10, 20, 30]);
        assert_eq!(r.header.size as usize, v.len() * 8);
        // An instant keeps the payload's (unknown) times.
        let v = encode(&Payload::KernelDispatch(&p), &head(Kind::KernelDispatch, Phase::None));
        // SAFETY: as above.
        let r = unsafe { &*v.as_ptr().cast::<KernelDispatchRecord>() };
        assert_eq!((r.device_start, r.device_end), (0, 0));
    }

    #[test]
    fn strings_are_cut_at_the_bound_and_null_strings_take_no_space() {
        let long = std::ffi::CString::new(vec![b'x'; MAX_RECORD_STRING + 50]).expect("cstring");
        let p = CounterPayload { counter: 1, name: long.as_ptr(), ..Default::default() };
        let v = encode(&Payload::Counter(&p), &head(Kind::Counter, Phase::None));
        // SAFETY: `v` holds a `CounterRecord`.
        let r = unsafe { &*v.as_ptr().cast::<CounterRecord>() };
        assert_eq!(cstr_at(&v, r.name_offset).len(), MAX_RECORD_STRING);
        assert_eq!(r.unit_offset, 0);
        assert_eq!(v.len() * 8, size_of::<CounterRecord>() + round8(MAX_RECORD_STRING + 1));
    }

    #[test]
    fn a_payload_of_another_kind_gives_the_header_alone() {
        let p = MemoryAllocPayload::default();
        let v = encode(&Payload::MemoryAlloc(&p), &head(Kind::MemoryCopy, Phase::None));
        assert_eq!(v.len() * 8, size_of::<BufferRecordHeader>());
        let v = encode(&Payload::None, &head(Kind::Xpti, Phase::None));
        assert_eq!(v.len() * 8, size_of::<BufferRecordHeader>());
    }

    /// The mirrored records' fields sit where their payloads' do (after the header).
    #[test]
    fn mirrored_records_have_their_payloads_layout() {
        use std::mem::offset_of;
        const H: usize = size_of::<BufferRecordHeader>();
        macro_rules! same {
            ($r:ty, $p:ty, $($rf:ident = $pf:ident),*) => {$(
                assert_eq!(offset_of!($r, $rf) - H, offset_of!($p, $pf), "{}.{}", stringify!($r), stringify!($rf));
            )*};
        }
        same!(
            MemoryCopyRecord,
            MemoryCopyPayload,
            queue = queue,
            dst = dst,
            src = src,
            bytes = size,
            device = device,
            direction = direction,
            src_type = src_type,
            dst_type = dst_type,
            device_start = device_start,
            device_end = device_end
        );
        same!(
            MemoryFillRecord,
            MemoryFillPayload,
            queue = queue,
            dst = dst,
            pattern = pattern,
            pattern_size = pattern_size,
            bytes = size,
            device = device,
            device_start = device_start,
            device_end = device_end
        );
        same!(
            MemoryAllocRecord,
            MemoryAllocPayload,
            ptr = ptr,
            bytes = size,
            memory_type = memory_type,
            device = device
        );
        same!(
            SyncRecord,
            SyncPayload,
            object = object,
            event_count = event_count,
            queue = queue,
            device = device,
            device_start = device_start,
            device_end = device_end
        );
        same!(QueueRecord, QueuePayload, queue = queue, device = device, context = context, flags = flags);
        // The padding the copy brings along is overwritten.
        let p = MemoryCopyPayload { queue: 1, dst: 2, src: 3, size: 4, device: 5, ..Default::default() };
        let v = encode(&Payload::MemoryCopy(&p), &head(Kind::MemoryCopy, Phase::Complete));
        // SAFETY: `v` holds a `MemoryCopyRecord`.
        let r = unsafe { &*v.as_ptr().cast::<MemoryCopyRecord>() };
        assert_eq!((r.queue, r.dst, r.src, r.bytes, r.device, r.reserved), (1, 2, 3, 4, 5, 0));
        assert_eq!((r.device_start, r.device_end), (100, 200));
    }

    /// A mirrored record's device times, written once: the payload's when it has them; a
    /// completion's own (the header's start and end) when it has none; none for an instant.
    #[test]
    fn mirrored_records_take_the_payloads_device_times_or_the_completions() {
        macro_rules! times {
            ($variant:ident, $payload:ident, $record:ty, $kind:ident) => {{
                let at = |p: &$payload, phase| {
                    let v = encode(&Payload::$variant(p), &head(Kind::$kind, phase));
                    // SAFETY: `v` holds the kind's record.
                    let r = unsafe { &*v.as_ptr().cast::<$record>() };
                    (r.device_start, r.device_end)
                };
                let none = $payload::default();
                let own = $payload { device_start: 7, device_end: 9, ..Default::default() };
                assert_eq!(at(&none, Phase::Complete), (100, 200), stringify!($kind));
                assert_eq!(at(&own, Phase::Complete), (7, 9), stringify!($kind));
                assert_eq!(at(&none, Phase::None), (0, 0), stringify!($kind));
                assert_eq!(at(&own, Phase::None), (7, 9), stringify!($kind));
            }};
        }
        times!(MemoryCopy, MemoryCopyPayload, MemoryCopyRecord, MemoryCopy);
        times!(MemoryFill, MemoryFillPayload, MemoryFillRecord, MemoryFill);
        times!(Sync, SyncPayload, SyncRecord, Sync);
    }

    /// `RecordHead::store_header` writes the fields where the struct has them.
    #[test]
    fn header_layout() {
        let h = head(Kind::Sync, Phase::Complete);
        let mut out = BufferRecordHeader::default();
        // SAFETY: `out` is a writable header.
        unsafe { h.store_header(&mut out, 72) };
        assert_eq!(out, h.header(72));
        let p = ApiCallPayload::new(9, &[5]);
        let v = encode(&Payload::UrApi(&p), &head(Kind::UrApi, Phase::None));
        // SAFETY: `v` holds an `ApiCallRecord`.
        let r = unsafe { &*v.as_ptr().cast::<ApiCallRecord>() };
        assert_eq!((r.function_id, r.arg_count, r.result, r.args_offset), (9, 1, 0, 80));
    }

    /// An API call record's fixed part: the payload's fields (its `has_result` not copied),
    /// from the 16-byte path and from the field-by-field one (a count above `MAX_ARGS`,
    /// clamped), and the arguments after it.
    #[test]
    fn api_call_fixed_part() {
        for (count, stored) in [(0, 0), (2, 2), (MAX_ARGS as u32, MAX_ARGS as u32), (1000, MAX_ARGS as u32)] {
            let mut p = ApiCallPayload::new(0xdead_beef, &[7; MAX_ARGS]);
            (p.arg_count, p.result, p.has_result) = (count, -5, 1);
            let v = encode(&Payload::UrApi(&p), &head(Kind::UrApi, Phase::None));
            // SAFETY: `v` holds an `ApiCallRecord`.
            let r = unsafe { &*v.as_ptr().cast::<ApiCallRecord>() };
            assert_eq!(
                (r.function_id, r.arg_count, r.result, r.args_offset),
                (0xdead_beef, stored, -5, 80),
                "count {count}"
            );
            assert_eq!(&v[10..], &vec![7; stored as usize][..], "count {count}");
        }
    }

    #[test]
    fn every_record_fits_the_largest() {
        const _: () = assert!(size_of::<BufferRecordHeader>() == 64);
        assert!(size_of::<ApiCallRecord>() + MAX_ARGS * 8 <= MAX_RECORD_BYTES);
        assert!(size_of::<CounterRecord>() + 2 * round8(MAX_RECORD_STRING + 1) <= MAX_RECORD_BYTES);
    }
}
