//! Callback registry per (stream, trace type), with a lock-free notify path.
//!
//! Intel semantics: callbacks are kept per (stream, type) in registration order and never erased;
//! unregistering only disables an entry. So each (stream, type) owns an append-only
//! [`CallbackList`] with an atomic length and per-entry atomic `enabled` flags: notify reads the
//! length with acquire and calls every enabled entry, without a lock and without allocating.
//! A full list chains to another one; lists are never freed (a concurrent notify may be walking
//! one), so no reclamation scheme is needed. Writers (register, unregister, finalize, reset)
//! serialise on one mutex; they are rare.
//!
//! Cost of a notify: two dependent loads to find the list, then with exactly one enabled callback
//! one load of it (`single`) and the indirect call; otherwise the length (same cache line as the
//! first entries), then one load and one indirect call per callback.

use std::alloc::Layout;
use std::ptr;

use crate::sync::{AtomicBool, AtomicPtr, AtomicUsize, Mutex, Ordering};

use crate::abi::TracepointCallback;

/// Trace types per stream: every `u16`. Under loom 4 (the models use types below 4; a table of
/// loom atomics is built in place, not zeroed).
const TYPES: usize = if cfg!(loom) { 4 } else { 1 << 16 };
/// Callbacks stored inline per list; more chain to another list (rare: tools register one or two
/// per type). 3 keeps a list at 80 bytes, so a stream's 65,536 lists are 5 MiB of lazily
/// paged virtual memory.
const INLINE: usize = 3;

#[derive(Debug)]
struct Entry {
    /// The callback, as a pointer (not an integer: a function pointer rebuilt from an integer
    /// has no provenance, and calling it is undefined behaviour; miri reports it).
    cb: AtomicPtr<()>,
    enabled: AtomicBool,
}

impl Entry {
    fn new() -> Entry {
        Entry { cb: AtomicPtr::new(ptr::null_mut()), enabled: AtomicBool::new(false) }
    }
}

/// The callbacks of one (stream, type): a fixed inline array (the header and the first entries
/// share a cache line), chained when full. All-zero bytes are a valid empty list. Never freed.
#[derive(Debug)]
#[repr(C)]
pub struct CallbackList {
    /// The callback to call when the chain holds exactly one enabled callback, else 0 (kept by
    /// the writers under their lock): notify's common case is one load and one indirect call.
    single: AtomicPtr<()>,
    len: AtomicUsize,
    /// The per-(stream, type) "check enabled" flag (only meaningful on the first list).
    flag: AtomicBool,
    next: AtomicPtr<CallbackList>,
    entries: [Entry; INLINE],
}

impl CallbackList {
    fn new() -> CallbackList {
        CallbackList {
            single: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
            flag: AtomicBool::new(false),
            next: AtomicPtr::new(ptr::null_mut()),
            entries: std::array::from_fn(|_| Entry::new()),
        }
    }

    fn new_leaked() -> *mut CallbackList {
        Box::into_raw(Box::new(CallbackList::new()))
    }

    /// Calls every enabled callback in registration order.
    ///
    /// # Safety
    /// The registered function pointers must be callable with these arguments (they are the
    /// subscribers' `callback_t`s).
    #[inline(always)]
    pub unsafe fn call_all(
        &self,
        trace_type: u16,
        parent: *mut crate::abi::TraceEventData,
        event: *mut crate::abi::TraceEventData,
        instance: u64,
        user_data: *const std::ffi::c_void,
    ) {
        // The common case, one enabled callback: one load, no loop, nothing live across the
        // call (the caller saves no registers).
        // Relaxed: `single` is a function pointer; the function needs no publication.
        let single = self.single.load(Ordering::Relaxed);
        if !single.is_null() {
            // SAFETY: `single` was stored from a `TracepointCallback` (`as_ptr`).
            let f: TracepointCallback = unsafe { std::mem::transmute::<*mut (), TracepointCallback>(single) };
            // SAFETY: the caller guarantees the callback contract.
            unsafe { f(trace_type, parent, event, instance, user_data) };
            return;
        }
        // Relaxed: only a shortcut for "no callback at all"; `call_many` re-reads it with acquire.
        if self.len.load(Ordering::Relaxed) != 0 {
            // SAFETY: same contract.
            unsafe { call_many(self, trace_type, parent, event, instance, user_data) }
        }
    }

    /// Recomputes `single` (writers only, under the writers' lock).
    fn update_single(&self) {
        let mut enabled = self.entries().filter(|e| e.enabled.load(Ordering::Relaxed));
        let one = match (enabled.next(), enabled.next()) {
            (Some(e), None) => e.cb.load(Ordering::Relaxed),
            _ => ptr::null_mut(),
        };
        // Relaxed: see `call_all`.
        self.single.store(one, Ordering::Relaxed);
    }

    /// Every list of the chain.
    fn chain(&self) -> impl Iterator<Item = &CallbackList> {
        let mut cur: *const CallbackList = self;
        std::iter::from_fn(move || {
            if cur.is_null() {
                return None;
            }
            // SAFETY: lists are never freed.
            let l = unsafe { &*cur };
            cur = l.next.load(Ordering::Acquire);
            Some(l)
        })
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.chain().flat_map(|l| l.entries[..l.len.load(Ordering::Acquire).min(INLINE)].iter())
    }

    fn any_enabled(&self) -> bool {
        self.entries().any(|e| e.enabled.load(Ordering::Relaxed))
    }
}

/// A callback as the pointer the lists store (its provenance kept for the call).
fn as_ptr(cb: TracepointCallback) -> *mut () {
    cb as *mut ()
}

/// A never-freed table of `TYPES` empty lists.
#[cfg(not(loom))]
fn new_table() -> Option<*mut CallbackList> {
    let layout = Layout::array::<CallbackList>(TYPES).ok()?;
    // SAFETY:
    // - non-zero layout; all-zero bytes are valid empty lists (zero atomics, null `next`).
    //   Large zeroed allocations are lazily paged by the OS: untouched types cost no memory.
    let t = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<CallbackList>();
    (!t.is_null()).then_some(t)
}

/// [`new_table`] under loom: loom's atomics are not plain words, so the lists are built in place.
#[cfg(loom)]
fn new_table() -> Option<*mut CallbackList> {
    let layout = Layout::array::<CallbackList>(TYPES).ok()?;
    // SAFETY: non-zero layout; leaked like the real tables.
    let t = unsafe { std::alloc::alloc(layout) }.cast::<CallbackList>();
    if t.is_null() {
        return None;
    }
    for i in 0..TYPES {
        // SAFETY: `i < TYPES` lists were allocated above.
        unsafe { t.add(i).write(CallbackList::new()) };
    }
    Some(t)
}

/// [`CallbackList::call_all`] for any number of callbacks. `extern "C"`: it cannot unwind (the
/// callbacks are `extern "C"` too), so notify's exported wrapper needs no landing pad.
///
/// # Safety
/// As [`CallbackList::call_all`].
#[inline(never)]
unsafe extern "C" fn call_many(
    head: &CallbackList,
    trace_type: u16,
    parent: *mut crate::abi::TraceEventData,
    event: *mut crate::abi::TraceEventData,
    instance: u64,
    user_data: *const std::ffi::c_void,
) {
    let mut list = head;
    loop {
        // Acquire: pairs with the release store of `len` in `register`, making `cb` visible.
        let n = list.len.load(Ordering::Acquire).min(INLINE);
        for e in &list.entries[..n] {
            // Relaxed: the enabled flag carries no data; a racing (un)register may go either way.
            if e.enabled.load(Ordering::Relaxed) {
                let raw = e.cb.load(Ordering::Relaxed);
                // SAFETY:
                // - `raw` was stored from a `TracepointCallback` (`as_ptr`) before `len` was released.
                let f: TracepointCallback = unsafe { std::mem::transmute::<*mut (), TracepointCallback>(raw) };
                // SAFETY: the caller guarantees the callback contract.
                unsafe { f(trace_type, parent, event, instance, user_data) };
            }
        }
        if n < INLINE {
            return;
        }
        // Acquire: pairs with the release store linking a new list.
        let next = list.next.load(Ordering::Acquire);
        if next.is_null() {
            return;
        }
        // SAFETY: linked lists are never freed.
        list = unsafe { &*next };
    }
}

/// Per-stream bookkeeping for the writers.
#[derive(Debug, Default)]
struct StreamMeta {
    /// Whether a callback was ever registered on this stream (for `xptiUnregisterStream`).
    ever: AtomicBool,
    /// Number of types whose flag is set (for `xptiCheckTraceEnabled(stream, 0)`).
    flagged: AtomicUsize,
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

/// All callbacks of the process: per stream a lazily paged array of 65,536 inline lists indexed
/// by trace type, so notify is stream table → list (address arithmetic) → length and first
/// entries: two dependent loads before the call.
#[derive(Debug)]
pub struct CallbackRegistry {
    types: [AtomicPtr<CallbackList>; 256],
    meta: [StreamMeta; 256],
    /// Writers' lock; guards the (stream, type) pairs that ever had a callback.
    writer: Mutex<Vec<(u8, u16)>>,
}

impl Default for CallbackRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl CallbackRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        CallbackRegistry {
            types: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            meta: std::array::from_fn(|_| StreamMeta::default()),
            writer: Mutex::new(Vec::new()),
        }
    }

    /// The list of (stream, type) if the stream has a table (an empty list when the type never
    /// had a callback). Lock-free.
    #[inline]
    pub fn list(&self, stream: u8, trace_type: u16) -> Option<&CallbackList> {
        // Acquire: pairs with the release publication in `table_or_create`.
        let t = self.types[stream as usize].load(Ordering::Acquire);
        // SAFETY:
        // - a published table holds TYPES empty lists and is never freed; the index is masked
        //   below TYPES (a no-op for a u16 unless under loom).
        if t.is_null() { None } else { Some(unsafe { &*t.add(trace_type as usize & (TYPES - 1)) }) }
    }

    /// `xptiCheckTraceEnabled` minus the global gate: the (stream, type) flag, or for type 0
    /// whether any type of the stream is flagged.
    #[inline]
    pub fn flag(&self, stream: u8, trace_type: u16) -> bool {
        if trace_type == 0 {
            // Relaxed: a hint for the caller's guard, like Intel's flag.
            return self.meta[stream as usize].flagged.load(Ordering::Relaxed) > 0;
        }
        // Relaxed: as above.
        self.list(stream, trace_type).is_some_and(|l| l.flag.load(Ordering::Relaxed))
    }

    fn table_or_create(&self, stream: u8) -> Option<()> {
        if !self.types[stream as usize].load(Ordering::Acquire).is_null() {
            return Some(());
        }
        let t = new_table()?;
        // Release: publishes the zeroed table (we hold the writer lock: no competing creator).
        self.types[stream as usize].store(t, Ordering::Release);
        Some(())
    }

    fn set_flag(&self, stream: u8, l: &CallbackList, on: bool) {
        // Relaxed throughout: flags are hints read with relaxed loads; writers hold the lock.
        if l.flag.swap(on, Ordering::Relaxed) != on {
            let m = &self.meta[stream as usize].flagged;
            if on {
                m.fetch_add(1, Ordering::Relaxed);
            } else {
                m.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// `xptiRegisterCallback`.
    pub fn register(&self, stream: u8, trace_type: u16, cb: TracepointCallback) -> Change {
        let mut used = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if self.table_or_create(stream).is_none() {
            return Change::Failed;
        }
        self.meta[stream as usize].ever.store(true, Ordering::Relaxed);
        let Some(head) = self.list(stream, trace_type) else { return Change::Failed };
        if !used.contains(&(stream, trace_type)) {
            used.push((stream, trace_type));
        }
        let raw = as_ptr(cb);
        if let Some(e) = head.entries().find(|e| e.cb.load(Ordering::Relaxed) == raw) {
            self.set_flag(stream, head, true);
            let was = e.enabled.swap(true, Ordering::Relaxed);
            head.update_single();
            return if was { Change::Duplicate } else { Change::Undeleted };
        }
        let mut last = head;
        while let Some(n) = {
            let p = last.next.load(Ordering::Acquire);
            // SAFETY: linked lists are never freed.
            (!p.is_null()).then(|| unsafe { &*p })
        } {
            last = n;
        }
        let mut n = last.len.load(Ordering::Relaxed);
        if n == INLINE {
            let fresh = CallbackList::new_leaked();
            // Release: links the empty list; entries are published through its `len`.
            last.next.store(fresh, Ordering::Release);
            // SAFETY: just allocated, never freed.
            last = unsafe { &*fresh };
            n = 0;
        }
        last.entries[n].cb.store(raw, Ordering::Relaxed);
        last.entries[n].enabled.store(true, Ordering::Relaxed);
        // Release: publishes the entry written above to notify's acquire load of `len`.
        last.len.store(n + 1, Ordering::Release);
        head.update_single();
        self.set_flag(stream, head, true);
        Change::Done
    }

    /// `xptiUnregisterCallback`. Unlike Intel's dispatcher the (stream, type) flag stays set
    /// while another enabled callback remains (`docs/xpti-compatibility.md`).
    pub fn unregister(&self, stream: u8, trace_type: u16, cb: TracepointCallback) -> Change {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(l) = self.list(stream, trace_type) else { return Change::NotFound };
        let raw = as_ptr(cb);
        let Some(e) = l.entries().find(|e| e.cb.load(Ordering::Relaxed) == raw) else {
            return Change::NotFound;
        };
        if !e.enabled.swap(false, Ordering::Relaxed) {
            return Change::Duplicate;
        }
        l.update_single();
        let any = l.any_enabled();
        self.set_flag(stream, l, any);
        Change::Done
    }

    /// Whether a callback was ever registered on `stream`.
    pub fn ever_registered(&self, stream: u8) -> bool {
        self.meta[stream as usize].ever.load(Ordering::Relaxed)
    }

    /// Disables every callback of `stream` and clears its flags (`xptiFinalize`,
    /// `xptiUnregisterStream`).
    pub fn disable_stream(&self, stream: u8) {
        let used = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for &(_, t) in used.iter().filter(|(s, _)| *s == stream) {
            let Some(l) = self.list(stream, t) else { continue };
            for e in l.entries() {
                e.enabled.store(false, Ordering::Relaxed);
            }
            l.update_single();
            self.set_flag(stream, l, false);
        }
    }

    /// Drops every callback but keeps the flags (`xptiReset`, Intel-compatible: the check stays
    /// true for types that had callbacks, and re-registering returns SUCCESS). The lists are
    /// emptied in place: a notify racing with the reset may still call a callback being removed
    /// (`xptiReset` is a test-only function).
    pub fn clear_keep_flags(&self) {
        let used = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for &(s, t) in used.iter() {
            let Some(l) = self.list(s, t) else { continue };
            for e in l.entries() {
                e.enabled.store(false, Ordering::Relaxed);
            }
            l.single.store(ptr::null_mut(), Ordering::Relaxed);
            // The chained lists are dropped from the chain but stay allocated for racing readers.
            l.next.store(ptr::null_mut(), Ordering::Release);
            l.len.store(0, Ordering::Release);
            for e in &l.entries {
                e.cb.store(ptr::null_mut(), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static HITS: AtomicU32 = AtomicU32::new(0);
    unsafe extern "C" fn cb_a(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        HITS.fetch_add(1, Ordering::Relaxed);
    }
    unsafe extern "C" fn cb_b(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        HITS.fetch_add(100, Ordering::Relaxed);
    }

    #[test]
    fn register_unregister_states() {
        // Each function cast once: the registry identifies callbacks by address, and Rust
        // does not promise one address per function (miri gives each cast its own).
        let (cb_a, cb_b): (TracepointCallback, TracepointCallback) = (cb_a, cb_b);
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

    #[test]
    fn single_is_the_only_enabled_callback() {
        // As above: each function cast once.
        let (cb_a, cb_b): (TracepointCallback, TracepointCallback) = (cb_a, cb_b);
        let r = CallbackRegistry::new();
        let single = |r: &CallbackRegistry| r.list(5, 7).expect("list").single.load(Ordering::Relaxed);
        assert_eq!(r.register(5, 7, cb_a), Change::Done);
        assert_eq!(single(&r), as_ptr(cb_a));
        assert_eq!(r.register(5, 7, cb_b), Change::Done);
        assert!(single(&r).is_null());
        assert_eq!(r.unregister(5, 7, cb_a), Change::Done);
        assert_eq!(single(&r), as_ptr(cb_b));
        assert_eq!(r.register(5, 7, cb_a), Change::Undeleted);
        assert!(single(&r).is_null());
        assert_eq!(r.unregister(5, 7, cb_b), Change::Done);
        assert_eq!(single(&r), as_ptr(cb_a));
        r.disable_stream(5);
        assert!(single(&r).is_null());
        assert_eq!(r.register(5, 7, cb_b), Change::Undeleted);
        assert_eq!(single(&r), as_ptr(cb_b));
        r.clear_keep_flags();
        assert!(single(&r).is_null());
    }
}

/// Register, unregister and notify racing, under loom, through the shipped `register`,
/// `unregister`, `list` and `call_all`: a notify calls each callback at most once, never one
/// that is half-registered (a null or stale function would crash the model), and every
/// callback registered before it started.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        // Calls of `cb_a` and `cb_b` in the current notify (loom runs a model's threads on the
        // test's OS thread, one iteration at a time; these are not part of the model).
        static CALLS: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    }

    unsafe extern "C" fn cb_a(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        CALLS.with(|c| c.set((c.get().0 + 1, c.get().1)));
    }
    unsafe extern "C" fn cb_b(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        CALLS.with(|c| c.set((c.get().0, c.get().1 + 1)));
    }

    /// The callbacks as function pointers, taken once: Rust does not promise that two casts
    /// of one function in different places give the same address (they did not here), and the
    /// registry identifies a callback by its address, as C callers' pointers do.
    #[derive(Clone, Copy)]
    struct Callbacks {
        a: TracepointCallback,
        b: TracepointCallback,
        x: TracepointCallback,
        y: TracepointCallback,
    }

    fn callbacks() -> Callbacks {
        Callbacks { a: cb_a, b: cb_b, x: cb_x, y: cb_y }
    }

    /// One notify of (1, 2): the calls of each callback it made.
    fn notify(r: &CallbackRegistry) -> (u32, u32) {
        CALLS.with(|c| c.set((0, 0)));
        if let Some(l) = r.list(1, 2) {
            // SAFETY: the callbacks ignore their arguments.
            unsafe { l.call_all(2, ptr::null_mut(), ptr::null_mut(), 0, ptr::null()) };
        }
        CALLS.with(Cell::get)
    }

    /// The first registration of a stream (its table is created) racing a notify.
    #[test]
    fn loom_notify_racing_the_first_register_calls_it_once_or_not_at_all() {
        let cbs = callbacks();
        loom::model(move || {
            let r = loom::sync::Arc::new(CallbackRegistry::new());
            let t = {
                let r = r.clone();
                loom::thread::spawn(move || assert_eq!(r.register(1, 2, cbs.a), Change::Done))
            };
            let (a, b) = notify(&r);
            assert!(a <= 1 && b == 0, "{a} {b}");
            t.join().expect("register");
            assert_eq!(notify(&r), (1, 0));
        });
    }

    /// A registration that chains a second list (the list holds `INLINE` callbacks) racing a
    /// notify, and an unregistration racing it: the callbacks registered before are each called
    /// once, the racing ones at most once.
    #[test]
    fn loom_notify_racing_a_chained_register_and_an_unregister() {
        let cbs = callbacks();
        loom::model(move || {
            let r = loom::sync::Arc::new(CallbackRegistry::new());
            assert_eq!(r.register(1, 2, cbs.a), Change::Done);
            // Two more entries fill the inline list; they are unregistered (disabled) at once.
            for cb in [cbs.x, cbs.y] {
                assert_eq!(r.register(1, 2, cb), Change::Done);
                assert_eq!(r.unregister(1, 2, cb), Change::Done);
            }
            let t = {
                let r = r.clone();
                loom::thread::spawn(move || {
                    assert_eq!(r.register(1, 2, cbs.b), Change::Done);
                    assert_eq!(r.unregister(1, 2, cbs.a), Change::Done);
                })
            };
            let (a, b) = notify(&r);
            assert!(a <= 1 && b <= 1, "{a} {b}");
            t.join().expect("register");
            assert_eq!(notify(&r), (0, 1));
        });
    }

    unsafe extern "C" fn cb_x(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        panic!("a disabled callback was called");
    }
    unsafe extern "C" fn cb_y(
        _: u16,
        _: *mut crate::abi::TraceEventData,
        _: *mut crate::abi::TraceEventData,
        _: u64,
        _: *const std::ffi::c_void,
    ) {
        panic!("a disabled callback was called (y)");
    }
}
