//! The marker API: user ranges and marks as `MARKER` records (like NVTX / ROCTx).
//!
//! `range_push` emits a `MARKER`/`range` enter (payload: the message) and keeps the call's token
//! on a per-thread stack; `range_pop` emits the matching exit. The range id in the payload is the
//! range's correlation id, so a tool can pair them in buffers too. `mark` is a one-shot record.
//! Disabled cost: one relaxed load for `mark`; a thread-local stack push/pop for ranges (the
//! nesting depth must be kept even when nobody listens).

use std::cell::RefCell;
use std::ffi::CStr;

use crate::callback::{CallToken, Phase, emit_enter, emit_exit, emit_instant, kind_enabled};
use crate::kind::{Kind, marker_op};
use crate::payload::{MarkerPayload, Payload};

thread_local! {
    static RANGES: RefCell<Vec<CallToken>> = const { RefCell::new(Vec::new()) };
}

/// A one-shot mark.
#[inline]
pub fn mark(message: &CStr) {
    if kind_enabled(Kind::Marker) {
        let p = MarkerPayload { message: message.as_ptr(), range_id: 0 };
        emit_instant(Kind::Marker, marker_op::MARK, Phase::None, Payload::Marker(&p));
    }
}

/// Opens a nested range on this thread; returns the nesting depth before the push (0-based,
/// as `nvtxRangePush`), or -1 during thread teardown.
pub fn range_push(message: &CStr) -> i32 {
    let p = MarkerPayload { message: message.as_ptr(), range_id: 0 };
    let token = emit_enter(Kind::Marker, marker_op::RANGE, Payload::Marker(&p));
    RANGES
        .try_with(|r| {
            let mut r = r.borrow_mut();
            r.push(token);
            r.len() as i32 - 1
        })
        .unwrap_or(-1)
}

/// Closes the innermost range of this thread; returns the depth of the closed range, or -1
/// when no range is open.
pub fn range_pop() -> i32 {
    let popped = RANGES.try_with(|r| {
        let mut r = r.borrow_mut();
        let t = r.pop();
        (t, r.len() as i32)
    });
    match popped {
        Ok((Some(token), depth)) => {
            let p = MarkerPayload { message: std::ptr::null(), range_id: token.correlation_id() };
            emit_exit(token, Payload::Marker(&p));
            depth
        }
        _ => -1,
    }
}

/// A range open until the guard drops.
#[derive(Debug)]
#[must_use = "the range closes when the guard drops"]
pub struct RangeGuard(());

/// Opens a range closed when the returned guard drops.
pub fn range(message: &CStr) -> RangeGuard {
    range_push(message);
    RangeGuard(())
}

impl Drop for RangeGuard {
    fn drop(&mut self) {
        range_pop();
    }
}
