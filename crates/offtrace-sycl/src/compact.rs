//! The in-ring form of a [`Notification`]: a variable number of `u64` words, optional fields
//! present only when non-zero, and fields equal to the ring's previous record omitted.
//!
//! A `Notification` is 392 bytes (its argument block alone holds 16 values); written into a
//! ring slot it costs seven cache-line transfers per record between the application's core and
//! the writer's. Encoded here a UR call with 8 arguments takes 20 words, or 15 when it repeats
//! the previous record's event and stashed tuple (the usual case: one global event, a sticky
//! stash); a SYCL task notification 8-15. Encoding runs on the record path; decoding on the
//! writer thread, which keeps the same [`Delta`] state per ring as the producer.
//!
//! ```text
//! word 0   trace_type:16 | stream:8 | len:8 (words, incl. this one) | flags:32
//! word 1   ts
//! word 2   instance
//! [tid]          LATE_TID      (otherwise the ring's thread)
//! [universal_id] UNIVERSAL
//! [stash key, value]           STASH, unless STASH_SAME
//! [parent event] PARENT        unless P_SAME: uid, instance_id, event_type:16|activity:16|payload:32,
//!                              [metadata] P_MD, [source, target] P_EDGE
//! [event]        EVENT         the same, with E_SAME, E_MD, E_EDGE
//! [user data]    kind in flags bits 24..28: Str 1 word; UR call: id|name, [result] HAS_RESULT,
//!                nargs|nouts<<8|out indices<<16, args, outs; MemAlloc 4; buffer 7; ...
//! ```
//!
//! A `ur.call` function_with_args begin/end is encoded by `decode::encode_ur_call` straight from
//! the callback's arguments into a ring reservation (no `Notification`); its exit omits the
//! argument values when the ring's previous begin was the same call (`ARGS_OF_BEGIN`), and this
//! module's [`decode`] puts them back.

use offtrace_format::{
    ArgBlock, EventInfo, MAX_ARGS, MAX_OUTS, MetadataSetId, Notification, OutValues, PayloadId, StrId, UserData,
};

/// The most words one record takes.
pub const MAX_WORDS: usize = 64;

pub(crate) const LATE_TID: u32 = 1 << 0;
pub(crate) const UNIVERSAL: u32 = 1 << 1;
pub(crate) const STASH: u32 = 1 << 2;
pub(crate) const PARENT: u32 = 1 << 3;
pub(crate) const P_MD: u32 = 1 << 4;
pub(crate) const P_EDGE: u32 = 1 << 5;
pub(crate) const EVENT: u32 = 1 << 6;
pub(crate) const E_MD: u32 = 1 << 7;
pub(crate) const E_EDGE: u32 = 1 << 8;
pub(crate) const HAS_RESULT: u32 = 1 << 9;
/// The parent / event / stash equal the previous record's of this ring: no words.
pub(crate) const P_SAME: u32 = 1 << 10;
pub(crate) const E_SAME: u32 = 1 << 11;
pub(crate) const STASH_SAME: u32 = 1 << 12;
/// A UR call's exit whose argument values are omitted: they are those of the ring's last
/// `function_with_args_begin`, which has the same instance and function id (the inputs do not
/// change during the call; the exit carries the result and the output pointees). The writer
/// restores them, so the trace file still has the arguments at both begin and end.
pub(crate) const ARGS_OF_BEGIN: u32 = 1 << 13;
/// A UR call's exit that follows the same call's begin (same instance and function id, as for
/// `ARGS_OF_BEGIN`): its universal id is the begin's (the SYCL operation that issued the call
/// cannot change during it) and was not read again (`xptiGetUniversalId` is a call into the
/// dispatcher). The writer restores it.
pub(crate) const UNIVERSAL_OF_BEGIN: u32 = 1 << 14;
pub(crate) const UD_SHIFT: u32 = 24;

pub(crate) const UD_NONE: u32 = 0;
pub(crate) const UD_STR: u32 = 1;
pub(crate) const UD_FWA: u32 = 2;
pub(crate) const UD_MEM: u32 = 3;
pub(crate) const UD_BUF: u32 = 4;
pub(crate) const UD_ASSOC: u32 = 5;
pub(crate) const UD_ACC: u32 = 6;
pub(crate) const UD_SIGNAL: u32 = 7;
pub(crate) const UD_PTR: u32 = 8;

/// Where encoded words go: a staging array, or a ring reservation (in place).
pub trait Out {
    fn set(&mut self, i: usize, w: u64);

    /// Words `at..at + n` are `word(0)`, …, `word(n - 1)` (the same as `set` one by one; an
    /// array checks the run's bounds once, not per word).
    #[inline(always)]
    fn set_run(&mut self, at: usize, n: usize, mut word: impl FnMut(usize) -> u64) {
        for a in 0..n {
            self.set(at + a, word(a));
        }
    }
}

impl Out for [u64; MAX_WORDS] {
    #[inline(always)]
    fn set(&mut self, i: usize, w: u64) {
        if let Some(x) = self.get_mut(i) {
            *x = w;
        }
    }
}

/// A ring reservation that does not wrap (`Reservation::contiguous`).
impl Out for [std::mem::MaybeUninit<u64>; MAX_WORDS] {
    #[inline(always)]
    fn set(&mut self, i: usize, w: u64) {
        if let Some(x) = self.get_mut(i) {
            x.write(w);
        }
    }

    #[inline(always)]
    fn set_run(&mut self, at: usize, n: usize, mut word: impl FnMut(usize) -> u64) {
        for (a, x) in self[at.min(MAX_WORDS)..at.saturating_add(n).min(MAX_WORDS)].iter_mut().enumerate() {
            x.write(word(a));
        }
    }
}

impl Out for offtrace_core::ring::Reservation<'_, u64> {
    #[inline(always)]
    fn set(&mut self, i: usize, w: u64) {
        offtrace_core::ring::Reservation::set(self, i, w);
    }
}

/// Writes `e` at `*i` (advancing it); sets `md`/`edge` in `flags` when those words are present.
#[inline(always)]
pub(crate) fn put_event<O: Out + ?Sized>(
    out: &mut O,
    i: &mut usize,
    e: &EventInfo,
    md: u32,
    edge: u32,
    flags: &mut u32,
) {
    out.set(*i, e.uid);
    out.set(*i + 1, e.instance_id);
    out.set(*i + 2, u64::from(e.event_type) | u64::from(e.activity_type) << 16 | u64::from(e.payload.0) << 32);
    *i += 3;
    if e.metadata.0 != 0 {
        *flags |= md;
        out.set(*i, u64::from(e.metadata.0));
        *i += 1;
    }
    if e.source_id != 0 || e.target_id != 0 {
        *flags |= edge;
        out.set(*i, e.source_id);
        out.set(*i + 1, e.target_id);
        *i += 2;
    }
}

/// `a == b`, inlined (the derived `PartialEq`, out of line, became a `memcmp` call). The fields
/// most likely to differ first.
#[inline(always)]
pub(crate) fn same_event(a: &EventInfo, b: &EventInfo) -> bool {
    a.uid == b.uid
        && a.instance_id == b.instance_id
        && a.payload == b.payload
        && a.metadata == b.metadata
        && a.event_type == b.event_type
        && a.activity_type == b.activity_type
        && a.source_id == b.source_id
        && a.target_id == b.target_id
}

/// Word 0 of a record.
#[inline(always)]
pub(crate) fn header(trace_type: u16, stream: u8, len: usize, flags: u32) -> u64 {
    u64::from(trace_type) | u64::from(stream) << 16 | (len as u64) << 24 | u64::from(flags) << 32
}

struct W<'a, O: Out + ?Sized> {
    out: &'a mut O,
    n: usize,
}

impl<O: Out + ?Sized> W<'_, O> {
    #[inline(always)]
    fn put(&mut self, w: u64) {
        // The largest layout is 42 words (3 + tid + universal + 2 stash + 2 x 6 events + 23 for
        // a UR call with 16 args and 4 outputs); `Out::set` ignores indices out of range.
        self.out.set(self.n, w);
        self.n += 1;
    }
}

#[inline(always)]
fn event<O: Out + ?Sized>(w: &mut W<'_, O>, e: &EventInfo, md: u32, edge: u32, flags: &mut u32) {
    put_event(w.out, &mut w.n, e, md, edge, flags);
}

/// What the previous record of a ring carried, for delta encoding: a UR call repeats the one
/// global event and the sticky stashed tuple of its thread, a SYCL notification its graph
/// parent. The producer updates it only for records that reached the ring ([`Delta::commit`]),
/// the consumer for every record it decodes, so both sides agree.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delta {
    pub(crate) parent: Option<EventInfo>,
    pub(crate) event: Option<EventInfo>,
    pub(crate) stash: Option<(StrId, u64)>,
    /// Producer: (instance, function id) of the last function_with_args_begin pushed.
    pub(crate) begin: Option<(u64, u32)>,
    /// Consumer: the last function_with_args_begin decoded, with its arguments.
    begin_args: Option<(u64, u32, ArgBlock)>,
    /// Consumer: the last function_with_args_begin decoded, with its universal id.
    begin_universal: Option<(u64, u32, u64)>,
}

impl Delta {
    /// Records that `n` was pushed.
    #[inline]
    pub fn commit(&mut self, n: &Notification) {
        self.parent = n.parent;
        self.event = n.event;
        self.stash = n.stash;
    }
}

/// Encodes `n` into `out`; returns the number of words. `ring_tid` is the ring owner's tid: a
/// different `n.tid` is stored in the record. Fields equal to `prev`'s are omitted.
#[inline(always)] // into the record path: the reservation stays in registers
pub fn encode<O: Out + ?Sized>(n: &Notification, ring_tid: u32, prev: &Delta, out: &mut O) -> usize {
    let mut flags = 0u32;
    let mut w = W { out, n: 3 };
    if n.tid != ring_tid {
        flags |= LATE_TID;
        w.put(u64::from(n.tid));
    }
    if n.universal_id != 0 {
        flags |= UNIVERSAL;
        w.put(n.universal_id);
    }
    if let Some((k, v)) = n.stash {
        flags |= STASH;
        if prev.stash == n.stash {
            flags |= STASH_SAME;
        } else {
            w.put(u64::from(k.0));
            w.put(v);
        }
    }
    if let Some(p) = &n.parent {
        flags |= PARENT;
        if prev.parent.as_ref().is_some_and(|d| same_event(d, p)) {
            flags |= P_SAME;
        } else {
            event(&mut w, p, P_MD, P_EDGE, &mut flags);
        }
    }
    if let Some(e) = &n.event {
        flags |= EVENT;
        if prev.event.as_ref().is_some_and(|d| same_event(d, e)) {
            flags |= E_SAME;
        } else {
            event(&mut w, e, E_MD, E_EDGE, &mut flags);
        }
    }
    let kind = match &n.user_data {
        UserData::None => UD_NONE,
        UserData::Str(s) => {
            w.put(u64::from(s.0));
            UD_STR
        }
        UserData::FunctionWithArgs { function_id, name, result, args, outs } => {
            w.put(u64::from(*function_id) | u64::from(name.0) << 32);
            if let Some(r) = result {
                flags |= HAS_RESULT;
                w.put(u64::from(*r as u32));
            }
            let a = args.as_slice();
            let o = outs.as_slice();
            let mut idx = 0u64;
            for (i, (p, _)) in o.iter().enumerate() {
                idx |= u64::from(*p) << (8 * i);
            }
            w.put(a.len() as u64 | (o.len() as u64) << 8 | idx << 16);
            for &v in a {
                w.put(v);
            }
            for &(_, v) in o {
                w.put(v);
            }
            UD_FWA
        }
        UserData::MemAlloc { mem_object, alloc_pointer, alloc_size, guard_zone } => {
            w.put(*mem_object);
            w.put(*alloc_pointer);
            w.put(*alloc_size);
            w.put(*guard_zone);
            UD_MEM
        }
        UserData::OffloadBuffer { user_object, host_object, element_type, element_size, dim, range } => {
            w.put(*user_object);
            w.put(*host_object);
            w.put(u64::from(element_type.0) | u64::from(*element_size) << 32);
            w.put(u64::from(*dim));
            for &r in range {
                w.put(r);
            }
            UD_BUF
        }
        UserData::Association { user_object, mem_object } => {
            w.put(*user_object);
            w.put(*mem_object);
            UD_ASSOC
        }
        UserData::Accessor { buffer, accessor, target, mode } => {
            w.put(*buffer);
            w.put(*accessor);
            w.put(u64::from(*target) | u64::from(*mode) << 32);
            UD_ACC
        }
        UserData::Signal { ur_event } => {
            w.put(*ur_event);
            UD_SIGNAL
        }
        UserData::Pointer(p) => {
            w.put(*p);
            UD_PTR
        }
    };
    flags |= kind << UD_SHIFT;
    let len = w.n.min(MAX_WORDS);
    w.out.set(0, header(n.trace_type, n.stream, len, flags));
    w.out.set(1, n.ts);
    w.out.set(2, n.instance);
    len
}

/// The length in words of the record whose first word is `w0` (at least 3).
#[inline]
pub fn record_len(w0: u64) -> usize {
    ((w0 >> 24) & 0xff).max(3) as usize
}

struct R<'a> {
    w: &'a [u64],
    i: usize,
}

impl R<'_> {
    fn get(&mut self) -> u64 {
        let v = self.w.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }
}

fn read_event(r: &mut R<'_>, flags: u32, md: u32, edge: u32) -> EventInfo {
    let uid = r.get();
    let instance_id = r.get();
    let t = r.get();
    let metadata = if flags & md != 0 { MetadataSetId(r.get() as u32) } else { MetadataSetId(0) };
    let (source_id, target_id) = if flags & edge != 0 { (r.get(), r.get()) } else { (0, 0) };
    EventInfo {
        uid,
        instance_id,
        event_type: t as u16,
        activity_type: (t >> 16) as u16,
        source_id,
        target_id,
        payload: PayloadId((t >> 32) as u32),
        metadata,
    }
}

/// Decodes one record (the words [`encode`] wrote) and updates `prev`. Never panics; missing
/// words read as 0.
pub fn decode(words: &[u64], ring_tid: u32, prev: &mut Delta) -> Notification {
    let mut r = R { w: words, i: 0 };
    let w0 = r.get();
    let flags = (w0 >> 32) as u32;
    let mut n = Notification {
        trace_type: w0 as u16,
        stream: (w0 >> 16) as u8,
        ts: r.get(),
        instance: r.get(),
        tid: ring_tid,
        ..Notification::default()
    };
    if flags & LATE_TID != 0 {
        n.tid = r.get() as u32;
    }
    if flags & UNIVERSAL != 0 {
        n.universal_id = r.get();
    }
    if flags & STASH != 0 {
        n.stash = if flags & STASH_SAME != 0 {
            prev.stash
        } else {
            let k = StrId(r.get() as u32);
            Some((k, r.get()))
        };
    }
    if flags & PARENT != 0 {
        n.parent = if flags & P_SAME != 0 { prev.parent } else { Some(read_event(&mut r, flags, P_MD, P_EDGE)) };
    }
    if flags & EVENT != 0 {
        n.event = if flags & E_SAME != 0 { prev.event } else { Some(read_event(&mut r, flags, E_MD, E_EDGE)) };
    }
    n.user_data = match flags >> UD_SHIFT {
        UD_STR => UserData::Str(StrId(r.get() as u32)),
        UD_FWA => {
            let w = r.get();
            let result = if flags & HAS_RESULT != 0 { Some(r.get() as u32 as i32) } else { None };
            let counts = r.get();
            let mut args = ArgBlock { len: (counts as u8).min(MAX_ARGS as u8), ..ArgBlock::default() };
            for v in args.values.iter_mut().take(usize::from(args.len)) {
                *v = r.get();
            }
            let function_id = w as u32;
            if flags & ARGS_OF_BEGIN != 0 {
                if let Some((i, f, a)) = prev.begin_args
                    && i == n.instance
                    && f == function_id
                {
                    args = a;
                }
            } else if n.trace_type == offtrace_xpti_abi::abi::trace_type::FUNCTION_WITH_ARGS_BEGIN {
                prev.begin_args = Some((n.instance, function_id, args));
            }
            if n.trace_type == offtrace_xpti_abi::abi::trace_type::FUNCTION_WITH_ARGS_BEGIN {
                prev.begin_universal = Some((n.instance, function_id, n.universal_id));
            } else if flags & UNIVERSAL_OF_BEGIN != 0
                && let Some((i, f, u)) = prev.begin_universal
                && i == n.instance
                && f == function_id
            {
                n.universal_id = u;
            }
            let mut outs = OutValues { len: ((counts >> 8) as u8).min(MAX_OUTS as u8), ..OutValues::default() };
            for (i, v) in outs.values.iter_mut().take(usize::from(outs.len)).enumerate() {
                *v = ((counts >> (16 + 8 * i)) as u8, r.get());
            }
            UserData::FunctionWithArgs { function_id: w as u32, name: StrId((w >> 32) as u32), result, args, outs }
        }
        UD_MEM => {
            UserData::MemAlloc { mem_object: r.get(), alloc_pointer: r.get(), alloc_size: r.get(), guard_zone: r.get() }
        }
        UD_BUF => {
            let user_object = r.get();
            let host_object = r.get();
            let t = r.get();
            let dim = r.get() as u32;
            let range = [r.get(), r.get(), r.get()];
            UserData::OffloadBuffer {
                user_object,
                host_object,
                element_type: StrId(t as u32),
                element_size: (t >> 32) as u32,
                dim,
                range,
            }
        }
        UD_ASSOC => UserData::Association { user_object: r.get(), mem_object: r.get() },
        UD_ACC => {
            let buffer = r.get();
            let accessor = r.get();
            let t = r.get();
            UserData::Accessor { buffer, accessor, target: t as u32, mode: (t >> 32) as u32 }
        }
        UD_SIGNAL => UserData::Signal { ur_event: r.get() },
        UD_PTR => UserData::Pointer(r.get()),
        _ => UserData::None,
    };
    prev.commit(&n);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_event() -> impl Strategy<Value = Option<EventInfo>> {
        prop::option::of(
            (
                any::<u64>(),
                any::<u64>(),
                any::<u16>(),
                any::<u16>(),
                any::<u64>(),
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
            )
                .prop_map(|(uid, instance_id, event_type, activity_type, s, t, p, m)| {
                    let (source_id, target_id) = if s % 3 == 0 { (0, 0) } else { (s, t) };
                    EventInfo {
                        uid,
                        instance_id,
                        event_type,
                        activity_type,
                        source_id,
                        target_id,
                        payload: PayloadId(p),
                        metadata: MetadataSetId(if m % 2 == 0 { 0 } else { m }),
                    }
                }),
        )
    }

    fn arb_user_data() -> impl Strategy<Value = UserData> {
        prop_oneof![
            Just(UserData::None),
            any::<u32>().prop_map(|s| UserData::Str(StrId(s))),
            (
                any::<u32>(),
                any::<u32>(),
                prop::option::of(any::<i32>()),
                prop::collection::vec(any::<u64>(), 0..=MAX_ARGS),
                prop::collection::vec((any::<u8>(), any::<u64>()), 0..=MAX_OUTS)
            )
                .prop_map(|(function_id, name, result, a, o)| {
                    let mut args = ArgBlock { len: a.len() as u8, ..ArgBlock::default() };
                    args.values[..a.len()].copy_from_slice(&a);
                    let mut outs = OutValues { len: o.len() as u8, ..OutValues::default() };
                    outs.values[..o.len()].copy_from_slice(&o);
                    UserData::FunctionWithArgs { function_id, name: StrId(name), result, args, outs }
                }),
            (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(a, b, c, d)| UserData::MemAlloc {
                mem_object: a,
                alloc_pointer: b,
                alloc_size: c,
                guard_zone: d
            }),
            (any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<[u64; 3]>()).prop_map(
                |(u, h, t, s, d, range)| {
                    UserData::OffloadBuffer {
                        user_object: u,
                        host_object: h,
                        element_type: StrId(t),
                        element_size: s,
                        dim: d,
                        range,
                    }
                }
            ),
            (any::<u64>(), any::<u64>()).prop_map(|(u, m)| UserData::Association { user_object: u, mem_object: m }),
            (any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(b, a, t, m)| UserData::Accessor {
                buffer: b,
                accessor: a,
                target: t,
                mode: m
            }),
            any::<u64>().prop_map(|e| UserData::Signal { ur_event: e }),
            any::<u64>().prop_map(UserData::Pointer),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(ts in any::<u64>(), tid in any::<u32>(), ring_tid in any::<u32>(), stream in any::<u8>(),
                      trace_type in any::<u16>(), instance in any::<u64>(), parent in arb_event(), event in arb_event(),
                      user_data in arb_user_data(), stash in prop::option::of((any::<u32>(), any::<u64>())),
                      universal_id in any::<u64>()) {
            let n = Notification { ts, tid, stream, trace_type, instance, parent, event, user_data,
                                   stash: stash.map(|(k, v)| (StrId(k), v)), universal_id };
            let mut out = [0u64; MAX_WORDS];
            let len = encode(&n, ring_tid, &Delta::default(), &mut out);
            prop_assert!(len <= MAX_WORDS);
            prop_assert_eq!(record_len(out[0]), len);
            prop_assert_eq!(decode(&out[..len], ring_tid, &mut Delta::default()), n);
        }

        /// A ring's sequence with repeated fields and dropped records (not committed, never
        /// decoded) decodes to exactly the pushed records.
        #[test]
        fn delta_sequences(seq in prop::collection::vec((0u8..3, 0u8..3, 0u8..3, any::<bool>(), any::<u64>()), 1..40)) {
            let ev = |k: u8| (k > 0).then(|| EventInfo { uid: u64::from(k), instance_id: 7, payload: PayloadId(u32::from(k)), ..EventInfo::default() });
            let mut tx = Delta::default();
            let mut rx = Delta::default();
            for (p, e, st, dropped, ts) in seq {
                let n = Notification { ts, tid: 1, parent: ev(p), event: ev(e),
                                       stash: (st > 0).then_some((StrId(1), u64::from(st))), ..Notification::default() };
                let mut out = [0u64; MAX_WORDS];
                let len = encode(&n, 1, &tx, &mut out);
                if dropped { continue; }
                tx.commit(&n);
                prop_assert_eq!(decode(&out[..len], 1, &mut rx), n);
            }
        }
    }

    #[test]
    fn typical_sizes() {
        let ev = EventInfo {
            uid: 1,
            instance_id: 1,
            event_type: 2,
            activity_type: 1,
            payload: PayloadId(3),
            ..EventInfo::default()
        };
        let mut args = ArgBlock { len: 8, ..ArgBlock::default() };
        args.values[0] = 1;
        let n = Notification {
            ts: 1,
            tid: 5,
            stream: 8,
            trace_type: 29,
            instance: 9,
            event: Some(ev),
            stash: Some((StrId(1), 2)),
            user_data: UserData::FunctionWithArgs {
                function_id: 33,
                name: StrId(4),
                result: Some(0),
                args,
                outs: OutValues { len: 1, ..OutValues::default() },
            },
            ..Notification::default()
        };
        let mut out = [0u64; MAX_WORDS];
        let mut d = Delta::default();
        assert_eq!(encode(&n, 5, &d, &mut out), 20);
        d.commit(&n);
        // The next UR call on this thread: same global event, same sticky stash.
        assert_eq!(encode(&n, 5, &d, &mut out), 15);
        assert!(decode(&[], 0, &mut Delta::default()) == Notification::default());
    }
}
