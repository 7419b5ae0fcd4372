//! The SYCL backend's raw layer: every XPTI notification exactly as the runtime sent it, as an
//! optional layer of the trace (format `Notification` records with their `Stream`, `Payload`,
//! `Object` and `MetadataSet` definitions), so that a trace can still be compared with the
//! runtime's stream (counts per stream and trace type equal xpti-dump's). Nothing downstream
//! needs it.
//!
//! On the application thread (inside the services' `XPTI` callback) the notification is decoded
//! while its pointers are valid (`decode::decode`: event identities, payloads, metadata, user
//! data, interned through the recording's tables) and compacted into the ring entry
//! (`compact::encode`, without the cross-entry delta: an entry the recorder drops must not leave
//! the writer's state behind). The writer thread turns the entry back into a `Notification`.

#![allow(unsafe_code)] // reads the raw payload the services pass through

use std::cell::RefCell;
use std::ffi::c_void;

use offtrace::XptiPayload;
use offtrace_format::{Notification, Record};
use offtrace_recorder::RawLayer;
use offtrace_xpti_abi::abi::trace_type as tt;

use crate::compact;
use crate::decode::{self, Ctx, Raw, StreamKind, ThreadCaches};
use crate::dispatcher::Dispatcher;
use crate::interner::Interner;

thread_local! {
    /// The thread's decode caches (events, payloads, metadata sets already interned).
    static CACHES: RefCell<Option<ThreadCaches>> = const { RefCell::new(None) };
}

// A compacted notification fits the room the recorder gives a raw entry.
const _: () = assert!(compact::MAX_WORDS <= offtrace_recorder::RAW_BODY_WORDS);

/// The raw layer of one recording.
#[derive(Debug)]
pub struct XptiRawLayer {
    dispatcher: &'static Dispatcher,
    interner: &'static Interner,
}

impl XptiRawLayer {
    pub fn new(dispatcher: &'static Dispatcher, interner: &'static Interner) -> Self {
        Self { dispatcher, interner }
    }
}

impl RawLayer for XptiRawLayer {
    unsafe fn encode(&self, _op: u32, payload: *const c_void, out: &mut [u64]) -> Option<usize> {
        let p = payload.cast::<XptiPayload>();
        if p.is_null() {
            return None;
        }
        // SAFETY: the raw kind's payload is the bridge's `XptiPayload`, live during the callback.
        let (class, stream_id, raw) = unsafe { ((*p).stream_class, (*p).stream_id, Raw::in_xpti_payload(p)) };
        let kind = StreamKind::from_class(class)?;
        let ctx = Ctx { dispatcher: self.dispatcher, interner: self.interner };
        // Straight into the recorder's entry (no intermediate array to zero and copy).
        let words: &mut [u64; compact::MAX_WORDS] = out.get_mut(..compact::MAX_WORDS)?.try_into().ok()?;
        // `ur.call` begins and ends (most notifications) are encoded from the callback's
        // arguments without building a `Notification` (the same words: `decode`'s test
        // `in_place_ur_call_matches_generic_decode`); a fresh delta per entry, as below. The
        // time and thread are the entry's (the writer sets them).
        let ur_call = kind == StreamKind::UrCall
            && matches!(raw.trace_type, tt::FUNCTION_WITH_ARGS_BEGIN | tt::FUNCTION_WITH_ARGS_END)
            && !raw.user_data.is_null();
        let stream = stream_id as u8;
        let encode = |caches: &mut ThreadCaches, words: &mut [u64; compact::MAX_WORDS]| {
            // SAFETY (both): `raw` holds the arguments of the live XPTI callback (the bridge
            // built the payload from them), for the stream `kind` describes; a ur.call
            // function_with_args notification with user data for `encode_ur_call`.
            unsafe {
                if ur_call {
                    decode::encode_ur_call(ctx, caches, stream, raw, 0, 0, 0, &mut compact::Delta::default(), words)
                } else {
                    let mut n = Notification::default();
                    decode::decode(ctx, caches, kind, stream, raw, &mut n);
                    compact::encode(&n, 0, &compact::Delta::default(), words)
                }
            }
        };
        let len = match CACHES.try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else { return None };
            Some(encode(c.get_or_insert_with(ThreadCaches::new), &mut *words))
        }) {
            Ok(Some(len)) => len,
            Ok(None) => return None,
            // The thread's thread-locals are destroyed (the main thread inside `exit`, while the
            // runtime still calls): decode with fresh caches (cold; allocates).
            Err(_) => encode(&mut ThreadCaches::new(), words),
        };
        (len <= compact::MAX_WORDS).then_some(len)
    }

    fn decode(&self, tid: u32, ts: u64, _op: u32, body: &[u64], out: &mut dyn FnMut(Record)) {
        if body.is_empty() || compact::record_len(body[0]) != body.len() {
            return;
        }
        let mut n = compact::decode(body, 0, &mut compact::Delta::default());
        n.ts = ts;
        n.tid = tid;
        out(Record::from(n));
    }
}
