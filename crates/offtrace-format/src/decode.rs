//! Bytes → Record: the inverse of `encode.rs`, over one decompressed chunk.
//!
//! Every read is bounds-checked against the chunk, every length is checked against the bytes
//! left before anything is allocated, every narrowing is checked: malformed input yields a
//! [`DecodeError`], never a panic. Notification `ts` values come out as raw ticks; the reader
//! converts them.

use crate::error::DecodeError;
use crate::record::*;
use crate::records::ApiCallBrief;
use crate::tag::*;
use crate::thread_state::ThreadStates;
use crate::varint::{MAX_VARINT_LEN, apply_delta, get_u64, unzigzag};

/// A read position in one chunk's bytes.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self.rest().first().ok_or(DecodeError::UnexpectedEnd { what })?;
        self.pos += 1;
        Ok(b)
    }

    /// Inlined fast path for the one-byte varints most fields are (deltas, flags, counts).
    #[inline(always)]
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_long(what)
    }

    #[inline(never)]
    fn varint_long(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let rest = self.rest();
        // Away from the chunk's end (nearly always), a fixed-length window: the compiler drops
        // the bounds checks and unrolls (timestamps, correlation ids and pointers are 2-9 bytes).
        if let Some(w) = rest.first_chunk::<MAX_VARINT_LEN>() {
            let mut value = 0u64;
            for (i, &b) in w.iter().enumerate() {
                value |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    if i == MAX_VARINT_LEN - 1 && b > 1 {
                        break;
                    }
                    self.pos += i + 1;
                    return Ok(value);
                }
            }
            return Err(DecodeError::VarintOverflow { what });
        }
        match get_u64(rest) {
            Some((v, len)) => {
                self.pos += len;
                Ok(v)
            }
            None if rest.iter().take(10).all(|b| b & 0x80 != 0) && rest.len() < 10 => {
                Err(DecodeError::UnexpectedEnd { what })
            }
            None => Err(DecodeError::VarintOverflow { what }),
        }
    }

    /// Reads past a varint without building its value: same checks and errors as
    /// [`Self::varint`].
    #[inline(always)]
    pub(crate) fn skip_varint(&mut self, what: &'static str) -> Result<(), DecodeError> {
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(());
        }
        if let Some(w) = self.rest().first_chunk::<MAX_VARINT_LEN>() {
            // The terminating byte is the first without the continuation bit; a tenth byte may
            // hold only the 64th bit.
            let end = w.iter().position(|&b| b < 0x80);
            if let Some(i) = end
                && (i < MAX_VARINT_LEN - 1 || w[i] <= 1)
            {
                self.pos += i + 1;
                return Ok(());
            }
        }
        self.varint(what).map(|_| ())
    }

    #[inline(always)]
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| DecodeError::OutOfRange { what, found: v, max: u32::MAX.into() })
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let v = self.varint(what)?;
        u16::try_from(v).map_err(|_| DecodeError::OutOfRange { what, found: v, max: u16::MAX.into() })
    }

    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.varint(what)?;
        let remaining = self.remaining();
        if len > remaining as u64 {
            return Err(DecodeError::LengthTooLarge { what, len, remaining });
        }
        let start = self.pos;
        let end = start + len as usize;
        self.pos = end;
        self.buf.get(start..end).ok_or(DecodeError::UnexpectedEnd { what })
    }

    pub(crate) fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| DecodeError::InvalidUtf8 { what })
    }
}

/// Where a decoded record goes. Records are built by the decoder directly in their destination
/// (each arm of the decoder calls [`RecordSink::put`] with the record it builds): a [`Record`] is
/// a few hundred bytes, and each place it was built first and moved from cost a copy of it
/// (returning it through `Result`, or from a `match` into a closure: a fifth of the decoding).
pub(crate) trait RecordSink {
    fn put(&mut self, record: Record);

    /// An API call (the most frequent record): a sink may keep it apart.
    #[inline(always)]
    fn put_api_call(&mut self, call: ApiCall) {
        self.put(Record::ApiCall(call));
    }
}

/// A batch whose API calls are kept apart, without their arguments (see
/// [`crate::ReadOptions::api_calls_apart`]).
pub(crate) struct SplitSink<'a> {
    pub records: &'a mut Vec<Record>,
    pub calls: &'a mut Vec<ApiCallBrief>,
}

impl RecordSink for SplitSink<'_> {
    #[inline(always)]
    fn put(&mut self, record: Record) {
        self.records.push(record);
    }

    #[inline(always)]
    fn put_api_call(&mut self, a: ApiCall) {
        self.calls.push(ApiCallBrief {
            at: self.records.len() as u32,
            kind: a.kind,
            op: a.op,
            tid: a.tid,
            start: a.start,
            end: a.end,
            correlation: a.correlation,
            external: a.external,
            result: a.result,
        });
    }
}

impl RecordSink for Vec<Record> {
    #[inline(always)]
    fn put(&mut self, record: Record) {
        self.push(record);
    }
}

impl RecordSink for Option<Record> {
    #[inline(always)]
    fn put(&mut self, record: Record) {
        *self = Some(record);
    }
}

#[derive(Debug)]
pub(crate) struct Decoder {
    threads: ThreadStates,
    /// The file's format version: tags added later are errors in older files.
    version: u16,
    /// Whether API calls carry their argument values (see [`crate::ReadOptions::api_args`]).
    api_args: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::for_version(crate::header::FORMAT_VERSION)
    }
}

impl Decoder {
    pub fn for_version(version: u16) -> Self {
        Self { threads: ThreadStates::default(), version, api_args: true }
    }

    /// API calls come out without their argument values (`args.len` = 0) when `false`: what a
    /// reader that never looks at them saves (the values are still read past and checked).
    pub fn with_api_args(mut self, api_args: bool) -> Self {
        self.api_args = api_args;
        self
    }

    pub fn reset(&mut self) {
        self.threads.reset();
    }

    /// Decodes the record at the cursor. Notification timestamps are raw ticks.
    pub fn decode(&mut self, c: &mut Cursor<'_>) -> Result<Record, DecodeError> {
        let mut out = None;
        self.decode_with(c, &mut out)?;
        out.ok_or(DecodeError::Invalid { what: "record (none decoded)", found: 0 })
    }

    /// Decodes the record at the cursor and appends it to `out` (what the tool's reader uses:
    /// the record is built in place, not copied through return values).
    #[inline]
    pub fn decode_into(&mut self, c: &mut Cursor<'_>, out: &mut Vec<Record>) -> Result<(), DecodeError> {
        self.decode_with(c, out)
    }

    /// Like [`Self::decode_into`], an API call going to `sink.calls` instead.
    #[inline]
    pub fn decode_split(&mut self, c: &mut Cursor<'_>, sink: &mut SplitSink<'_>) -> Result<(), DecodeError> {
        self.decode_with(c, sink)
    }

    /// Decodes the record at the cursor and hands it to `sink` (see [`RecordSink`]).
    #[inline(always)]
    fn decode_with(&mut self, c: &mut Cursor<'_>, sink: &mut impl RecordSink) -> Result<(), DecodeError> {
        let tag = c.u8("record tag")?;
        if tag & TAG_NOTIFICATION != 0 {
            sink.put(Record::Notification(Box::new(self.decode_notification(tag, c)?)));
            return Ok(());
        }
        if (FIRST_V3_TAG..=LAST_V3_TAG).contains(&tag) && self.version >= 3 {
            return crate::typed::decode_with(tag, &mut self.threads, self.version, self.api_args, c, sink);
        }
        let record = match tag {
            TAG_INFO => Record::Info { key: c.string("Info key")?, value: c.string("Info value")? },
            TAG_CLOCK_SYNC => Record::ClockSync {
                ticks: c.varint("ClockSync ticks")?,
                monotonic_ns: c.varint("ClockSync monotonic_ns")?,
                realtime_ns: c.varint("ClockSync realtime_ns")?,
            },
            TAG_STRING => Record::String { id: StrId(c.u32("String id")?), text: c.string("String text")? },
            TAG_STREAM => Record::Stream {
                id: c.u8("Stream id")?,
                name: StrId(c.u32("Stream name")?),
                major: c.u32("Stream major")?,
                minor: c.u32("Stream minor")?,
                version: StrId(c.u32("Stream version")?),
            },
            TAG_THREAD => Record::Thread { tid: c.u32("Thread tid")?, name: StrId(c.u32("Thread name")?) },
            TAG_PAYLOAD => Record::Payload {
                id: PayloadId(c.u32("Payload id")?),
                name: StrId(c.u32("Payload name")?),
                file: StrId(c.u32("Payload file")?),
                line: c.u32("Payload line")?,
                column: c.u32("Payload column")?,
            },
            TAG_OBJECT => {
                let id = ObjectId(c.u32("Object id")?);
                let vt = c.u8("Object value_type")?;
                if vt > ValueType::Boolean as u8 {
                    return Err(DecodeError::Invalid { what: "Object value_type (0..=5)", found: vt.into() });
                }
                Record::Object { id, value_type: ValueType::from_u8(vt), bytes: c.bytes("Object bytes")?.to_vec() }
            }
            TAG_METADATA_SET => {
                let id = MetadataSetId(c.u32("MetadataSet id")?);
                let count = c.varint("MetadataSet item count")?;
                // Each item takes at least 2 bytes: bound the allocation by the bytes left.
                let remaining = c.remaining();
                if count > (remaining / 2) as u64 {
                    return Err(DecodeError::LengthTooLarge { what: "MetadataSet item count", len: count, remaining });
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push((StrId(c.u32("MetadataSet key")?), ObjectId(c.u32("MetadataSet value")?)));
                }
                Record::MetadataSet { id, items }
            }
            TAG_DROPS => Record::Drops { tid: c.u32("Drops tid")?, count: c.varint("Drops count")? },
            TAG_END => Record::End { records: c.varint("End records")?, drops: c.varint("End drops")? },
            TAG_KERNEL_DISPATCH if self.version < 2 => {
                return Err(DecodeError::TagNotInVersion { tag, version: self.version, since: 2 });
            }
            TAG_KERNEL_DISPATCH => Record::KernelDispatch(Box::new(decode_kernel_dispatch(c)?)),
            // Version 3 and later decoded them above.
            FIRST_V3_TAG..=LAST_V3_TAG => {
                return Err(DecodeError::TagNotInVersion { tag, version: self.version, since: 3 });
            }
            _ => return Err(DecodeError::UnknownTag { tag }),
        };
        sink.put(record);
        Ok(())
    }

    fn decode_notification(&mut self, tag: u8, c: &mut Cursor<'_>) -> Result<Notification, DecodeError> {
        let kind = tag & TAG_KIND_MASK;
        if kind > KIND_POINTER {
            return Err(DecodeError::UnknownTag { tag });
        }
        let presence = c.u8("notification presence byte")?;
        if kind != KIND_FUNCTION_WITH_ARGS && presence & P_FUNCTION_ONLY != 0 {
            return Err(DecodeError::Invalid {
                what: "presence bits of function_with_args on another user_data kind",
                found: presence.into(),
            });
        }
        let tid = if tag & TAG_SAME_TID != 0 {
            self.threads.last_tid().ok_or(DecodeError::Invalid {
                what: "same-thread flag on the first notification of a chunk",
                found: tag.into(),
            })?
        } else {
            c.u32("notification tid")?
        };
        let (_, st) = self.threads.switch_to(tid);

        let ts = apply_delta(st.ts, c.varint("notification ts delta")?);
        let stream = c.u8("notification stream")?;
        let trace_type = c.u16("notification trace_type")?;
        let instance = apply_delta(st.instance, c.varint("notification instance delta")?);
        let parent = if tag & TAG_SAME_PARENT != 0 {
            st.parent
                .ok_or(DecodeError::Invalid { what: "same-parent flag with no previous parent", found: tag.into() })?
                .into()
        } else if presence & P_PARENT != 0 {
            Some(get_event(c, "parent")?)
        } else {
            None
        };
        let event = if tag & TAG_SAME_EVENT != 0 {
            st.event
                .ok_or(DecodeError::Invalid { what: "same-event flag with no previous event", found: tag.into() })?
                .into()
        } else if presence & P_EVENT != 0 {
            Some(get_event(c, "event")?)
        } else {
            None
        };
        let stash =
            if presence & P_STASH != 0 { Some((StrId(c.u32("stash key")?), c.varint("stash value")?)) } else { None };
        let universal_id = if presence & P_UNIVERSAL_ID != 0 {
            let v = apply_delta(st.universal_id, c.varint("universal_id delta")?);
            if v == 0 {
                return Err(DecodeError::Invalid { what: "universal_id flagged present but 0", found: 0 });
            }
            v
        } else {
            0
        };
        let user_data = match kind {
            KIND_NONE => UserData::None,
            KIND_STR => UserData::Str(StrId(c.u32("user_data string")?)),
            KIND_FUNCTION_WITH_ARGS => {
                let (function_id, name) = if presence & P_SAME_FUNCTION != 0 {
                    st.function
                } else {
                    (c.u32("function_id")?, StrId(c.u32("function name")?))
                };
                let result = if presence & P_RESULT != 0 {
                    let z = unzigzag(c.varint("function result")?);
                    Some(
                        i32::try_from(z)
                            .map_err(|_| DecodeError::Invalid { what: "function result (i32)", found: z as u64 })?,
                    )
                } else {
                    None
                };
                let args = if presence & P_SAME_ARGS != 0 {
                    st.previous_args()
                } else {
                    let len = c.u8("argument count")?;
                    if usize::from(len) > MAX_ARGS {
                        return Err(DecodeError::OutOfRange {
                            what: "argument count",
                            found: len.into(),
                            max: MAX_ARGS as u64,
                        });
                    }
                    let mut a = ArgBlock { len, ..ArgBlock::default() };
                    for v in a.values.iter_mut().take(usize::from(len)) {
                        *v = c.varint("argument value")?;
                    }
                    a
                };
                let mut outs = OutValues::default();
                if presence & P_OUTS != 0 {
                    let len = c.u8("output value count")?;
                    if len == 0 || usize::from(len) > MAX_OUTS {
                        return Err(DecodeError::OutOfRange {
                            what: "output value count (1..=4)",
                            found: len.into(),
                            max: MAX_OUTS as u64,
                        });
                    }
                    outs.len = len;
                    for v in outs.values.iter_mut().take(usize::from(len)) {
                        *v = (c.u8("output parameter index")?, c.varint("output value")?);
                    }
                }
                UserData::FunctionWithArgs { function_id, name, result, args, outs }
            }
            KIND_MEM_ALLOC => UserData::MemAlloc {
                mem_object: c.varint("mem_object")?,
                alloc_pointer: c.varint("alloc_pointer")?,
                alloc_size: c.varint("alloc_size")?,
                guard_zone: c.varint("guard_zone")?,
            },
            KIND_OFFLOAD_BUFFER => UserData::OffloadBuffer {
                user_object: c.varint("user_object")?,
                host_object: c.varint("host_object")?,
                element_type: StrId(c.u32("element_type")?),
                element_size: c.u32("element_size")?,
                dim: c.u32("dim")?,
                range: [c.varint("range[0]")?, c.varint("range[1]")?, c.varint("range[2]")?],
            },
            KIND_ASSOCIATION => {
                UserData::Association { user_object: c.varint("user_object")?, mem_object: c.varint("mem_object")? }
            }
            KIND_ACCESSOR => UserData::Accessor {
                buffer: c.varint("accessor buffer")?,
                accessor: c.varint("accessor")?,
                target: c.u32("accessor target")?,
                mode: c.u32("accessor mode")?,
            },
            KIND_SIGNAL => UserData::Signal { ur_event: c.varint("signal ur_event")? },
            _ => UserData::Pointer(c.varint("user_data pointer")?),
        };
        let n = Notification { ts, tid, stream, trace_type, instance, parent, event, user_data, stash, universal_id };
        st.remember(&n);
        Ok(n)
    }
}

/// Smallest encoding of one allocation: base, size, arg_index (1 byte each at least), type byte.
pub(crate) const MIN_ALLOCATION_BYTES: usize = 4;

/// A list of kernel allocations: count, then (base, size, arg_index zigzag, type byte) each.
pub(crate) fn decode_allocations(c: &mut Cursor<'_>) -> Result<Vec<KernelAllocation>, DecodeError> {
    let count = c.varint("allocation count")?;
    // Bound the allocation by the bytes left before reserving anything.
    let remaining = c.remaining();
    if count > (remaining / MIN_ALLOCATION_BYTES) as u64 {
        return Err(DecodeError::LengthTooLarge { what: "allocation count", len: count, remaining });
    }
    let mut allocations = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let base = c.varint("allocation base")?;
        let size = c.varint("allocation size")?;
        let z = unzigzag(c.varint("allocation arg_index")?);
        let arg_index = i32::try_from(z)
            .map_err(|_| DecodeError::Invalid { what: "allocation arg_index (i32)", found: z as u64 })?;
        let t = c.u8("allocation memory_type")?;
        let memory_type = MemoryType::from_u8(t)
            .ok_or(DecodeError::Invalid { what: "allocation memory_type (0..=3)", found: t.into() })?;
        allocations.push(KernelAllocation { base, size, arg_index, memory_type });
    }
    Ok(allocations)
}

fn decode_kernel_dispatch(c: &mut Cursor<'_>) -> Result<KernelDispatch, DecodeError> {
    let tid = c.u32("KernelDispatch tid")?;
    let ts = c.varint("KernelDispatch ts")?;
    let correlation = c.varint("KernelDispatch correlation")?;
    let ur_instance = c.varint("KernelDispatch ur_instance")?;
    let kernel = StrId(c.u32("KernelDispatch kernel")?);
    let queue = c.varint("KernelDispatch queue")?;
    let kernel_handle = c.varint("KernelDispatch kernel_handle")?;
    let work_dim = c.u32("KernelDispatch work_dim")?;
    let global_size = [c.varint("global_size[0]")?, c.varint("global_size[1]")?, c.varint("global_size[2]")?];
    let local_size = [c.varint("local_size[0]")?, c.varint("local_size[1]")?, c.varint("local_size[2]")?];
    let count = c.varint("KernelDispatch allocation count")?;
    // Bound the allocation by the bytes left before reserving anything.
    let remaining = c.remaining();
    if count > (remaining / MIN_ALLOCATION_BYTES) as u64 {
        return Err(DecodeError::LengthTooLarge { what: "KernelDispatch allocation count", len: count, remaining });
    }
    let mut allocations = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let base = c.varint("allocation base")?;
        let size = c.varint("allocation size")?;
        let z = unzigzag(c.varint("allocation arg_index")?);
        let arg_index = i32::try_from(z)
            .map_err(|_| DecodeError::Invalid { what: "allocation arg_index (i32)", found: z as u64 })?;
        let t = c.u8("allocation memory_type")?;
        let memory_type = MemoryType::from_u8(t)
            .ok_or(DecodeError::Invalid { what: "allocation memory_type (0..=3)", found: t.into() })?;
        allocations.push(KernelAllocation { base, size, arg_index, memory_type });
    }
    Ok(KernelDispatch {
        tid,
        ts,
        correlation,
        ur_instance,
        kernel,
        queue,
        kernel_handle,
        work_dim,
        global_size,
        local_size,
        allocations,
    })
}

fn get_event(c: &mut Cursor<'_>, _which: &'static str) -> Result<EventInfo, DecodeError> {
    let p = c.u8("event presence byte")?;
    let mut field = |bit: u8, what: &'static str| -> Result<u64, DecodeError> {
        if p & bit != 0 {
            let v = c.varint(what)?;
            if v == 0 {
                return Err(DecodeError::Invalid { what: "event field flagged present but 0", found: 0 });
            }
            Ok(v)
        } else {
            Ok(0)
        }
    };
    let uid = field(E_UID, "event uid")?;
    let instance_id = field(E_INSTANCE_ID, "event instance_id")?;
    let event_type = field(E_EVENT_TYPE, "event event_type")?;
    let activity_type = field(E_ACTIVITY_TYPE, "event activity_type")?;
    let source_id = field(E_SOURCE_ID, "event source_id")?;
    let target_id = field(E_TARGET_ID, "event target_id")?;
    let payload = field(E_PAYLOAD, "event payload")?;
    let metadata = field(E_METADATA, "event metadata")?;
    let narrow16 = |v: u64, what: &'static str| {
        u16::try_from(v).map_err(|_| DecodeError::OutOfRange { what, found: v, max: u16::MAX.into() })
    };
    let narrow32 = |v: u64, what: &'static str| {
        u32::try_from(v).map_err(|_| DecodeError::OutOfRange { what, found: v, max: u32::MAX.into() })
    };
    Ok(EventInfo {
        uid,
        instance_id,
        event_type: narrow16(event_type, "event event_type")?,
        activity_type: narrow16(activity_type, "event activity_type")?,
        source_id,
        target_id,
        payload: PayloadId(narrow32(payload, "event payload")?),
        metadata: MetadataSetId(narrow32(metadata, "event metadata")?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Encoder;

    fn fwa(nargs: usize, nouts: usize) -> Notification {
        let mut args = ArgBlock { len: nargs as u8, ..ArgBlock::default() };
        for (i, v) in args.values.iter_mut().take(nargs).enumerate() {
            *v = u64::MAX - i as u64;
        }
        let mut outs = OutValues { len: nouts as u8, ..OutValues::default() };
        for (i, v) in outs.values.iter_mut().take(nouts).enumerate() {
            *v = (i as u8, u64::MAX);
        }
        Notification {
            ts: 10,
            tid: 1,
            user_data: UserData::FunctionWithArgs {
                function_id: 1,
                name: StrId(2),
                result: Some(i32::MIN),
                args,
                outs,
            },
            ..Notification::default()
        }
    }

    fn round_trip(n: &Notification) -> (Notification, usize) {
        let mut bytes = Vec::new();
        Encoder::default().encode_notification(n, &mut bytes);
        let mut c = Cursor::new(&bytes);
        let r = Decoder::default().decode(&mut c).expect("decodes");
        assert_eq!(c.pos(), bytes.len(), "consumes the whole record");
        match r {
            Record::Notification(d) => (*d, bytes.len()),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Round trip at a count, and rejection of the count patched one above the limit.
    macro_rules! count_boundary_tests {
        ($($name:ident: args $nargs:expr, outs $nouts:expr;)*) => {$(
            #[test]
            fn $name() {
                let n = fwa($nargs, $nouts);
                assert_eq!(round_trip(&n).0, n);
            }
        )*};
    }

    count_boundary_tests! {
        args_0: args 0, outs 0;
        args_1: args 1, outs 0;
        args_max_minus_1: args MAX_ARGS - 1, outs 0;
        args_max: args MAX_ARGS, outs 0;
        outs_1: args 2, outs 1;
        outs_max_minus_1: args 2, outs MAX_OUTS - 1;
        outs_max: args MAX_ARGS, outs MAX_OUTS;
    }

    /// Patches the count byte of an encoded record and expects rejection.
    fn rejects_count(n: &Notification, count_at: usize, count: u8) {
        let mut bytes = Vec::new();
        Encoder::default().encode_notification(n, &mut bytes);
        bytes[count_at] = count;
        let r = Decoder::default().decode(&mut Cursor::new(&bytes));
        assert!(matches!(r, Err(DecodeError::OutOfRange { .. })), "count {count}: {r:?}");
    }

    #[test]
    fn args_above_max_rejected() {
        // tag presence tid ts stream type instance fid name result(5 bytes) | count
        let n = fwa(1, 0);
        rejects_count(&n, 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 5, (MAX_ARGS + 1) as u8);
        rejects_count(&n, 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 5, u8::MAX);
    }

    #[test]
    fn outs_zero_or_above_max_rejected() {
        let n = fwa(1, 1);
        // ... result(5), args count(1), u64::MAX (10) | outs count
        let at = 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 5 + 1 + 10;
        rejects_count(&n, at, 0);
        rejects_count(&n, at, (MAX_OUTS + 1) as u8);
    }

    #[test]
    fn exit_after_entry_is_small() {
        let mut enc = Encoder::default();
        let mut entry = fwa(8, 0);
        if let UserData::FunctionWithArgs { result, .. } = &mut entry.user_data {
            *result = None;
        }
        entry.ts = 1 << 40;
        entry.tid = 123_456;
        entry.instance = 1 << 33;
        entry.universal_id = 0x9e37_79b9_0000_1234;
        let mut exit = entry;
        exit.ts += 5_000;
        if let UserData::FunctionWithArgs { result, .. } = &mut exit.user_data {
            *result = Some(0);
        }
        let mut bytes = Vec::new();
        enc.encode_notification(&entry, &mut bytes);
        let entry_len = bytes.len();
        enc.encode_notification(&exit, &mut bytes);
        let exit_len = bytes.len() - entry_len;
        // tag, presence, ts delta (2), stream, trace_type, instance delta, universal_id delta, result
        assert!(exit_len <= 9, "exit notification took {exit_len} bytes");
        let mut dec = Decoder::default();
        let mut c = Cursor::new(&bytes);
        assert_eq!(dec.decode(&mut c), Ok(Record::Notification(Box::new(entry))));
        assert_eq!(dec.decode(&mut c), Ok(Record::Notification(Box::new(exit))));
    }

    #[test]
    fn same_flags_without_history_are_rejected() {
        // Same-tid flag on the first notification of a chunk.
        let r = Decoder::default().decode(&mut Cursor::new(&[0xc0, 0x00, 0, 0, 0, 0]));
        assert!(matches!(r, Err(DecodeError::Invalid { .. })), "{r:?}");
        // Same-event flag with no previous event.
        let r = Decoder::default().decode(&mut Cursor::new(&[0x90, 0x00, 1, 0, 0, 0, 0]));
        assert!(matches!(r, Err(DecodeError::Invalid { .. })), "{r:?}");
    }
}
