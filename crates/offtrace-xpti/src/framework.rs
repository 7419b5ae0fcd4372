//! The dispatcher state: one process-wide [`Framework`], built lazily by the first call that
//! needs it (like Intel's singleton), with subscribers loaded right after the core tables exist
//! so that subscriber constructors may already call back into the dispatcher.
//!
//! All memory handed to C callers (interned strings, objects, events, payloads, interface
//! objects) lives in process-lifetime arenas or the instance slab and is never unmapped.

use std::ffi::{CStr, c_char};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU16, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use crate::abi::{detail_level, event_type, trace_type};
use crate::callbacks::CallbackRegistry;
use crate::instance::{KeyTable, Slab};
use crate::intern::InternTable;
use crate::shim;
use crate::subscriber::{self, Subscriber};

/// The framework's own stream.
pub const FRAMEWORK_STREAM: &CStr = c"xpti.framework";

/// The process-wide dispatcher state.
#[derive(Debug)]
pub struct Framework {
    /// String table, IDs from 1.
    pub strings: InternTable,
    /// Object table, IDs from 0, de-duplicated by bytes (the tag is the first type seen).
    pub objects: InternTable,
    /// Stream table, IDs from 1 (`xpti.framework` first), handed out truncated to 8 bits.
    pub streams: InternTable,
    /// Vendor (tool) table for user-defined types, IDs from 1.
    pub vendors: InternTable,
    /// Per-key instance counters and owned names.
    pub keys: KeyTable,
    /// Instance cells (events and side cells).
    pub slab: Slab,
    /// Callbacks per (stream, type).
    pub callbacks: CallbackRegistry,
    /// `xptiTraceEnabled`, for the cold paths (the hot ones read `ENABLED_FW`). Written only by
    /// `set_trace_enabled`, with `ENABLED_FW`.
    pub trace_enabled: AtomicBool,
    /// `XPTI_USE_STRICT_HASH` is set.
    pub strict_hash: bool,
    /// `OFFTRACE_XPTI_STICKY_STASH` is set: `xptiUnstashTuple` is a no-op as in Intel's.
    pub sticky_stash: bool,
    /// Loaded subscribers, in handle order.
    pub subscribers: Mutex<Vec<Subscriber>>,
    /// Effective detail level per stream (low byte of the stream ID).
    pub detail: [AtomicU8; 256],
    /// `xptiGetUniqueId` counter (next value), alone on its cache lines: it is the only
    /// read-modify-write shared by all threads, and nothing read on other hot paths should share
    /// its line.
    pub unique_id: CachePadded<AtomicU64>,
    /// Default stream/event/trace types.
    pub default_stream: AtomicU8,
    /// See `default_stream`.
    pub default_event_type: AtomicU16,
    /// See `default_stream`.
    pub default_trace_type: AtomicU16,
    /// `xptiEnableTracepointScopeNotification`.
    pub scope_notify: AtomicBool,
    framework_init_once: Once,
    framework_finish_once: Once,
}

/// Keeps a value on its own pair of cache lines (adjacent-line prefetch pairs lines).
#[derive(Debug)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

static FW: OnceLock<Framework> = OnceLock::new();
static SUBSCRIBERS_LOADED: Once = Once::new();
/// `xptiFrameworkInitialize` reference count (clamped at 0, see the compatibility notes).
pub static FRAMEWORK_REFS: AtomicI64 = AtomicI64::new(0);

/// The framework, building it on first use.
#[inline]
pub fn fw() -> &'static Framework {
    match FW.get() {
        Some(f) => f,
        // SAFETY: `build` returns a pointer into the `FW` static, initialised and never dropped.
        None => unsafe { &*build() },
    }
}

/// The framework while tracing is enabled (`xptiTraceEnabled` true), else null: one load answers
/// `xptiTraceEnabled` ("built and enabled"). Only `set_trace_enabled` stores it, with a pointer to
/// the built `FW`. Notify and `xptiCheckTraceEnabled` use it too: one load and one branch
/// replace the `OnceLock` state check plus the enabled flag (the chain to the callback gets one
/// dependent load longer, which costs nothing measurable with one callback and saves work on the
/// checks and with several callbacks).
static ENABLED_FW: AtomicPtr<Framework> = AtomicPtr::new(std::ptr::null_mut());

/// The framework if it is built and tracing is enabled (no side effects).
#[inline(always)]
pub fn fw_if_enabled() -> Option<&'static Framework> {
    // Acquire: pairs with the release store in `set_trace_enabled`.
    let p = ENABLED_FW.load(Ordering::Acquire);
    // SAFETY: non-null values point at the `FW` static, initialised and never dropped.
    if p.is_null() { None } else { Some(unsafe { &*p }) }
}

/// The framework if it was already built (no side effects).
#[inline]
pub fn fw_if_built() -> Option<&'static Framework> {
    FW.get()
}

/// The instance slab if the framework was built (for thread-exit cleanup).
pub fn slab_if_built() -> Option<&'static Slab> {
    FW.get().map(|f| &f.slab)
}

/// Builds the framework. `extern "C"` so that it cannot unwind (a panic here aborts): callers
/// on the hot paths then need no unwinding landing pad, and their fast path saves no registers.
#[cold]
#[inline(never)]
extern "C" fn build() -> *const Framework {
    let f = FW.get_or_init(Framework::new);
    // Subscribers load after the core is published: their constructors and xptiTraceInit may
    // call the dispatcher, which then finds `FW` set and never waits on this Once.
    SUBSCRIBERS_LOADED.call_once(|| f.load_subscribers());
    f
}

unsafe extern "C" fn hook_lookup_string(id: u32) -> *const c_char {
    fw().lookup_string(id)
}

unsafe extern "C" fn hook_register_string(s: *const c_char) -> u32 {
    if s.is_null() {
        return crate::abi::INVALID_STRING_ID;
    }
    // SAFETY: the shim passes the key given to xpti_metadata_t::add_item, a C string.
    fw().register_string(unsafe { CStr::from_ptr(s) }).map_or(crate::abi::INVALID_STRING_ID, |(id, _)| id)
}

fn env_nonempty(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

impl Framework {
    fn new() -> Self {
        assert!(shim::layout_matches(), "offtrace-xpti: C++ shim layout mismatch");
        // SAFETY: installs plain function pointers before any instance exists.
        unsafe { shim::ot_shim_set_hooks(hook_lookup_string, hook_register_string) };
        // SAFETY: runs the shim's self-check on its own scratch maps, before any instance exists.
        unsafe { shim::ot_map_fast_first_enable() };
        let f = Framework {
            strings: InternTable::new(14, 1, u32::MAX),
            objects: InternTable::new(14, 0, i32::MAX as u32),
            streams: InternTable::new(8, 1, u32::MAX),
            vendors: InternTable::new(6, 1, 256),
            keys: KeyTable::new(),
            slab: Slab::new().expect("offtrace-xpti: cannot reserve the instance region"),
            callbacks: CallbackRegistry::new(),
            trace_enabled: AtomicBool::new(false),
            strict_hash: env_nonempty("XPTI_USE_STRICT_HASH"),
            sticky_stash: env_nonempty("OFFTRACE_XPTI_STICKY_STASH"),
            subscribers: Mutex::new(Vec::new()),
            detail: std::array::from_fn(|_| AtomicU8::new(detail_level::NORMAL)),
            unique_id: CachePadded(AtomicU64::new(1)),
            default_stream: AtomicU8::new(1),
            default_event_type: AtomicU16::new(event_type::ALGORITHM),
            default_trace_type: AtomicU16::new(trace_type::FUNCTION_BEGIN),
            scope_notify: AtomicBool::new(false),
            framework_init_once: Once::new(),
            framework_finish_once: Once::new(),
        };
        f.streams.intern(FRAMEWORK_STREAM.to_bytes(), 0);
        f
    }

    fn load_subscribers(&'static self) {
        let allowed = subscriber::trace_enable_allows(std::env::var("XPTI_TRACE_ENABLE").ok().as_deref());
        if !allowed {
            return;
        }
        let list = std::env::var("XPTI_SUBSCRIBERS").unwrap_or_default();
        let subs = subscriber::load_all(&list);
        let any = !subs.is_empty();
        *self.subscribers.lock().unwrap_or_else(|e| e.into_inner()) = subs;
        if any {
            self.set_trace_enabled(true);
        }
    }

    /// `xptiForceSetTraceEnabled` (and subscriber loading): publishes this framework as the
    /// enabled one, or withdraws it.
    pub fn set_trace_enabled(&'static self, on: bool) {
        // Writers serialise, so the flag and the pointer end in the same state.
        static WRITER: Mutex<()> = Mutex::new(());
        let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: an on/off switch read by notify and the checks; no data is published by it.
        self.trace_enabled.store(on, Ordering::Relaxed);
        let p = if on { (self as *const Framework).cast_mut() } else { std::ptr::null_mut() };
        // Release: `xptiTraceEnabled` reads the pointer with acquire.
        ENABLED_FW.store(p, Ordering::Release);
    }

    /// A snapshot of the subscribers (so that no lock is held while calling them).
    pub fn subscribers(&self) -> Vec<Subscriber> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Interns a string: `(id, pointer)`.
    #[inline]
    pub fn register_string(&self, s: &CStr) -> Option<(u32, *const c_char)> {
        let (n, _) = self.strings.intern(s.to_bytes(), 0)?;
        Some((n.id, n.data.cast()))
    }

    /// The string with this ID, or null.
    #[inline]
    pub fn lookup_string(&self, id: u32) -> *const c_char {
        self.strings.by_id(id).map_or(std::ptr::null(), |n| n.data.cast())
    }

    /// The stream ID for a name (registering it).
    pub fn register_stream(&self, name: &CStr) -> u8 {
        match self.streams.lookup(name.to_bytes()) {
            Some(n) => n.id as u8,
            None => self.streams.intern(name.to_bytes(), 0).map_or(255, |(n, _)| n.id as u8),
        }
    }

    /// Announces the framework stream once to every subscriber.
    pub fn announce_framework_stream(&self, subs: &[Subscriber]) {
        self.framework_init_once.call_once(|| {
            for s in subs {
                // SAFETY: static C strings.
                unsafe { s.announce(1, 0, c"1.0.0".as_ptr(), FRAMEWORK_STREAM.as_ptr()) };
            }
        });
    }

    /// Sends the framework stream's finish once.
    pub fn finish_framework_stream(&self, subs: &[Subscriber]) {
        self.framework_finish_once.call_once(|| {
            for s in subs {
                // SAFETY: static C string.
                unsafe { (s.finish)(FRAMEWORK_STREAM.as_ptr()) };
            }
        });
    }

    /// `xptiReset`: instances, keys, strings, callbacks and the unique-ID counter.
    pub fn reset(&self) {
        for obj in self.slab.carved_slots() {
            crate::instance::delete(&self.slab, obj as *mut u8);
        }
        self.keys.clear();
        self.strings.clear();
        self.callbacks.clear_keep_flags();
        self.unique_id.store(1, Ordering::Relaxed);
    }
}
