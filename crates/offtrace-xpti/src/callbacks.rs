//! Callback registry per (stream, trace type), with a lock-free notify path.
//!
//! Intel semantics: callbacks are kept per (stream, type) in registration order and never erased;
//! unregistering only disables an entry. So each (stream, type) owns an append-only
//! [`CallbackList`] with an atomic length and per-entry atomic `enabled` flags: notify reads the
//! length with acquire and calls every enabled entry, without a lock and without allocating.
//! A list that fills up is replaced by a copy twice as large; the old one is left allocated
//! (never freed) because a concurrent notify may still be walking it. Writers (register,
//! unregister, finalize, reset) serialise on one mutex; they are rare.
//!
//! Cost of a notify: two dependent loads to find the list, one load of the length, then one
//! load and one indirect call per callback.

use std::alloc::{Layout, alloc_zeroed};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use crate::abi::TracepointCallback;

const TYPES: usize = 1 << 16;

#[derive(Debug)]
struct Entry {
    cb: AtomicUsize,
    enabled: AtomicBool,
}

/// The callbacks of one (stream, type).
#[derive(Debug)]
pub struct CallbackList {
    len: AtomicUsize,
    /// The per-(stream, type) "check enabled" flag.
    flag: AtomicBool,
    entries: Box<[Entry]>,
}

impl CallbackList {
    fn with_capacity(cap: usize) -> Box<Self> {
        Box::new(CallbackList {
            len: AtomicUsize::new(0),
            flag: AtomicBool::new(false),
            entries: (0..cap).map(|_| Entry { cb: AtomicUsize::new(0), enabled: AtomicBool::new(false) }).collect(),
        })
    }

    /// Calls every enabled callback in registration order.
    ///
    /// # Safety
    /// The registered function pointers must be callable with these arguments (they are the
    /// subscribers' `callback_t`s).
    #[inline]
    pub unsafe fn call_all(
        &self,
        trace_type: u16,
        parent: *mut crate::abi::TraceEventData,
        event: *mut crate::abi::TraceEventData,
        instance: u64,
        user_data: *const std::ffi::c_void,
    ) {
        // Acquire: pairs with the release increment in `register`, making the entry's `cb` visible.
        let n = self.len.load(Ordering::Acquire);
        for e in &self.entries[..n] {
            // Relaxed: the enabled flag carries no data; a racing (un)register may go either way.
            if e.enabled.load(Ordering::Relaxed) {
                let raw = e.cb.load(Ordering::Relaxed);
                // SAFETY:
                // - `raw` was stored from a non-null `TracepointCallback` before `len` was released.
                let f: TracepointCallback = unsafe { std::mem::transmute::<usize, TracepointCallback>(raw) };
                // SAFETY: the caller guarantees the callback contract.
                unsafe { f(trace_type, parent, event, instance, user_data) };
            }
        }
    }

    fn any_enabled(&self) -> bool {
        let n = self.len.load(Ordering::Acquire);
        self.entries[..n].iter().any(|e| e.enabled.load(Ordering::Relaxed))
    }
}

/// The lists of one stream, indexed by trace type (a lazily paged array of 65,536 pointers).
#[derive(Debug)]
struct StreamCallbacks {
    types: *mut AtomicPtr<CallbackList>,
    /// Whether a callback was ever registered on this stream (for `xptiUnregisterStream`).
    ever: AtomicBool,
    /// Number of types whose flag is set (for `xptiCheckTraceEnabled(stream, 0)`).
    flagged: AtomicUsize,
}

impl StreamCallbacks {
    #[inline]
    fn slot(&self, trace_type: u16) -> &AtomicPtr<CallbackList> {
        // SAFETY:
        // - `types` points to TYPES zero-initialised AtomicPtrs, never freed; u16 < TYPES.
        unsafe { &*self.types.add(trace_type as usize) }
    }
}

/// Result of a registration change, mapped to XPTI result codes by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Done.
    Done,
    /// Already in the requested state.
    Duplicate,
    /// Re-enabled a previously disabled entry.
    Undeleted,
    /// No such entry.
    NotFound,
    /// Out of memory.
    Failed,
}

/// All callbacks of the process.
#[derive(Debug)]
pub struct CallbackRegistry {
    streams: [AtomicPtr<StreamCallbacks>; 256],
    writer: Mutex<()>,
}

impl Default for CallbackRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl CallbackRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        CallbackRegistry { streams: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())), writer: Mutex::new(()) }
    }

    #[inline]
    fn stream(&self, stream: u8) -> Option<&StreamCallbacks> {
        // Acquire: pairs with the release publication in `stream_or_create`.
        let p = self.streams[stream as usize].load(Ordering::Acquire);
        // SAFETY: published StreamCallbacks are never freed.
        if p.is_null() { None } else { Some(unsafe { &*p }) }
    }

    /// The list of (stream, type), if one exists. Lock-free.
    #[inline]
    pub fn list(&self, stream: u8, trace_type: u16) -> Option<&CallbackList> {
        let s = self.stream(stream)?;
        let l = s.slot(trace_type).load(Ordering::Acquire);
        // SAFETY: published lists are never freed.
        if l.is_null() { None } else { Some(unsafe { &*l }) }
    }

    /// `xptiCheckTraceEnabled` minus the global gate: the (stream, type) flag, or for type 0
    /// whether any type of the stream is flagged.
    #[inline]
    pub fn flag(&self, stream: u8, trace_type: u16) -> bool {
        let Some(s) = self.stream(stream) else { return false };
        if trace_type == 0 {
            // Relaxed: a hint for the caller's guard, like Intel's flag.
            return s.flagged.load(Ordering::Relaxed) > 0;
        }
        let l = s.slot(trace_type).load(Ordering::Acquire);
        // SAFETY: published lists are never freed.
        !l.is_null() && unsafe { &*l }.flag.load(Ordering::Relaxed)
    }

    fn stream_or_create(&self, stream: u8) -> Option<&StreamCallbacks> {
        if let Some(s) = self.stream(stream) {
            return Some(s);
        }
        let layout = Layout::array::<AtomicPtr<CallbackList>>(TYPES).ok()?;
        // SAFETY:
        // - non-zero layout; zero bytes are valid null AtomicPtrs. Large zeroed allocations are
        //   lazily paged by the OS, so untouched types cost no memory.
        let types = unsafe { alloc_zeroed(layout) }.cast::<AtomicPtr<CallbackList>>();
        if types.is_null() {
            return None;
        }
        let s = Box::into_raw(Box::new(StreamCallbacks { types, ever: AtomicBool::new(false), flagged: AtomicUsize::new(0) }));
        // Release: publishes the initialised StreamCallbacks (we hold the writer lock, no race).
        self.streams[stream as usize].store(s, Ordering::Release);
        // SAFETY: just published, never freed.
        Some(unsafe { &*s })
    }

    fn set_flag(s: &StreamCallbacks, l: &CallbackList, on: bool) {
        // Relaxed throughout: flags are hints read with relaxed loads; writers hold the lock.
        if l.flag.swap(on, Ordering::Relaxed) != on {
            if on {
                s.flagged.fetch_add(1, Ordering::Relaxed);
            } else {
                s.flagged.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// `xptiRegisterCallback`.
    pub fn register(&self, stream: u8, trace_type: u16, cb: TracepointCallback) -> Change {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = self.stream_or_create(stream) else { return Change::Failed };
        s.ever.store(true, Ordering::Relaxed);
        let slot = s.slot(trace_type);
        let mut lp = slot.load(Ordering::Acquire);
        if lp.is_null() {
            lp = Box::into_raw(CallbackList::with_capacity(4));
            slot.store(lp, Ordering::Release);
        }
        // SAFETY: published lists are never freed.
        let mut l = unsafe { &*lp };
        let raw = cb as usize;
        let n = l.len.load(Ordering::Relaxed);
        if let Some(e) = l.entries[..n].iter().find(|e| e.cb.load(Ordering::Relaxed) == raw) {
            Self::set_flag(s, l, true);
            return if e.enabled.swap(true, Ordering::Relaxed) { Change::Duplicate } else { Change::Undeleted };
        }
        if n == l.entries.len() {
            let bigger = CallbackList::with_capacity(n * 2);
            for (dst, src) in bigger.entries.iter().zip(l.entries.iter()) {
                dst.cb.store(src.cb.load(Ordering::Relaxed), Ordering::Relaxed);
                dst.enabled.store(src.enabled.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            bigger.len.store(n, Ordering::Relaxed);
            bigger.flag.store(l.flag.load(Ordering::Relaxed), Ordering::Relaxed);
            // The old list is leaked on purpose: a concurrent notify may still read it.
            let bp = Box::into_raw(bigger);
            // Release: publishes the copied entries to notify.
            slot.store(bp, Ordering::Release);
            // SAFETY: just published, never freed.
            l = unsafe { &*bp };
        }
        l.entries[n].cb.store(raw, Ordering::Relaxed);
        l.entries[n].enabled.store(true, Ordering::Relaxed);
        // Release: publishes the entry written above to notify's acquire load of `len`.
        l.len.store(n + 1, Ordering::Release);
        Self::set_flag(s, l, true);
        Change::Done
    }

    /// `xptiUnregisterCallback`. Unlike Intel's dispatcher the (stream, type) flag stays set
    /// while another enabled callback remains (`docs/xpti-compatibility.md`).
    pub fn unregister(&self, stream: u8, trace_type: u16, cb: TracepointCallback) -> Change {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(l) = self.list(stream, trace_type) else { return Change::NotFound };
        let Some(s) = self.stream(stream) else { return Change::NotFound };
        let raw = cb as usize;
        let n = l.len.load(Ordering::Relaxed);
        let Some(e) = l.entries[..n].iter().find(|e| e.cb.load(Ordering::Relaxed) == raw) else {
            return Change::NotFound;
        };
        if !e.enabled.swap(false, Ordering::Relaxed) {
            return Change::Duplicate;
        }
        let any = l.any_enabled();
        Self::set_flag(s, l, any);
        Change::Done
    }

    /// Whether a callback was ever registered on `stream`.
    pub fn ever_registered(&self, stream: u8) -> bool {
        self.stream(stream).is_some_and(|s| s.ever.load(Ordering::Relaxed))
    }

    /// Disables every callback of `stream` and clears its flags (`xptiFinalize`,
    /// `xptiUnregisterStream`).
    pub fn disable_stream(&self, stream: u8) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = self.stream(stream) else { return };
        for t in 0..TYPES {
            let lp = s.slot(t as u16).load(Ordering::Acquire);
            if lp.is_null() {
                continue;
            }
            // SAFETY: published lists are never freed.
            let l = unsafe { &*lp };
            for e in &l.entries[..l.len.load(Ordering::Relaxed)] {
                e.enabled.store(false, Ordering::Relaxed);
            }
            Self::set_flag(s, l, false);
        }
    }

    /// Drops every callback but keeps the flags (`xptiReset`, Intel-compatible: the check stays
    /// true for types that had callbacks, and re-registering returns SUCCESS).
    pub fn clear_keep_flags(&self) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for st in 0..256usize {
            let Some(s) = self.stream(st as u8) else { continue };
            for t in 0..TYPES {
                let slot = s.slot(t as u16);
                let lp = slot.load(Ordering::Acquire);
                if lp.is_null() {
                    continue;
                }
                // SAFETY: published lists are never freed.
                let old = unsafe { &*lp };
                for e in &old.entries[..old.len.load(Ordering::Relaxed)] {
                    e.enabled.store(false, Ordering::Relaxed);
                }
                let fresh = CallbackList::with_capacity(4);
                fresh.flag.store(old.flag.load(Ordering::Relaxed), Ordering::Relaxed);
                // Release: publish the empty list; the old one stays allocated for racing readers.
                slot.store(Box::into_raw(fresh), Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static HITS: AtomicU32 = AtomicU32::new(0);
    unsafe extern "C" fn cb_a(_: u16, _: *mut crate::abi::TraceEventData, _: *mut crate::abi::TraceEventData, _: u64, _: *const std::ffi::c_void) {
        HITS.fetch_add(1, Ordering::Relaxed);
    }
    unsafe extern "C" fn cb_b(_: u16, _: *mut crate::abi::TraceEventData, _: *mut crate::abi::TraceEventData, _: u64, _: *const std::ffi::c_void) {
        HITS.fetch_add(100, Ordering::Relaxed);
    }

    #[test]
    fn register_unregister_states() {
        let r = CallbackRegistry::new();
        assert_eq!(r.register(3, 10, cb_a), Change::Done);
        assert_eq!(r.register(3, 10, cb_a), Change::Duplicate);
        assert_eq!(r.register(3, 10, cb_b), Change::Done);
        assert!(r.flag(3, 10) && r.flag(3, 0) && !r.flag(3, 11) && !r.flag(4, 10));
        assert_eq!(r.unregister(3, 10, cb_a), Change::Done);
        assert!(r.flag(3, 10), "flag stays while cb_b is enabled");
        assert_eq!(r.unregister(3, 10, cb_a), Change::Duplicate);
        assert_eq!(r.unregister(3, 11, cb_a), Change::NotFound);
        HITS.store(0, Ordering::Relaxed);
        // SAFETY: the callbacks ignore their arguments.
        unsafe { r.list(3, 10).expect("list").call_all(10, ptr::null_mut(), ptr::null_mut(), 0, ptr::null()) };
        assert_eq!(HITS.load(Ordering::Relaxed), 100);
        assert_eq!(r.register(3, 10, cb_a), Change::Undeleted);
        assert_eq!(r.unregister(3, 10, cb_a), Change::Done);
        assert_eq!(r.unregister(3, 10, cb_b), Change::Done);
        assert!(!r.flag(3, 10) && !r.flag(3, 0));
    }
}
