//! The raw layer's definition tables (payloads, metadata objects and sets) over the recording's
//! string table and definitions queue (`offtrace_recorder::Definitions`: one id space per trace,
//! shared with the typed records).
//!
//! The record path never comes here in the steady state: each thread keeps small direct-mapped
//! caches (see `decode.rs`) in front of these tables, and UR function names are a lock-free
//! array indexed by function id. A miss takes the one `Mutex`, interns, and appends the new
//! definition to the queue *before* returning the id, so a notification that carries an id is
//! always pushed to its ring after its definition was queued. The writer relies on that: it
//! snapshots ring tails first, then drains this queue, then drains rings up to the snapshots.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use offtrace_format::{MetadataSetId, ObjectId, PayloadId, Record, StrId, ValueType};
use offtrace_recorder::Definitions;
use offtrace_xpti_abi::ur;

use crate::dispatcher::Dispatcher;

type Map<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// `ur_names` slot value: the runtime's name for this id is not the table's.
const UR_MISMATCH: u32 = u32::MAX;

/// Largest metadata value copied into the trace (bigger values are truncated).
const MAX_OBJECT_BYTES: usize = 64 * 1024;

#[derive(Default)]
struct Tables {
    /// xpti string id (metadata keys) → ours.
    xpti_strings: Map<u32, StrId>,
    payloads: Map<(StrId, StrId, u32, u32), PayloadId>,
    /// xpti object id → ours (xpti objects are de-duplicated by bytes and never change).
    objects: Map<i32, ObjectId>,
    sets: Map<Vec<(u32, i32)>, MetadataSetId>,
    next_object: u32,
    next_payload: u32,
    next_set: u32,
}

/// The raw layer's definition tables. One per recording; tests make their own.
pub struct Interner {
    defs: &'static Definitions,
    tables: Mutex<Tables>,
    /// `ur_function_t` → interned name (0 = not yet), lock-free on the record path.
    ur_names: Box<[AtomicU32]>,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interner")
    }
}

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

impl Interner {
    /// Tables with their own string table and queue (tests; leaks one small `Definitions`).
    pub fn new() -> Self {
        Self::with_definitions(Box::leak(Box::default()))
    }

    /// Tables over a recording's string table and definitions queue.
    pub fn with_definitions(defs: &'static Definitions) -> Self {
        Self {
            defs,
            tables: Mutex::default(),
            ur_names: (0..=ur::MAX_FUNCTION_ID).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        // A panic while holding the lock leaves consistent tables (every insert is completed
        // before its id escapes), so a poisoned lock is still usable.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a non-interned definition-like record (Info, Stream, Thread, ClockSync).
    #[cold]
    pub fn push(&self, r: Record) {
        self.defs.push(r);
    }

    /// Takes every queued definition, in queue order (writer thread).
    pub fn take_queue(&self, into: &mut Vec<Record>) {
        self.defs.take_queue(into);
    }

    #[cold]
    #[inline(never)]
    pub fn string(&self, bytes: &[u8]) -> StrId {
        self.defs.string(bytes)
    }

    #[cold]
    #[inline(never)]
    pub fn payload(&self, name: &[u8], file: &[u8], line: u32, column: u32) -> PayloadId {
        let mut t = self.lock();
        let name = self.defs.string(name);
        let file = self.defs.string(file);
        if let Some(&id) = t.payloads.get(&(name, file, line, column)) {
            return id;
        }
        t.next_payload += 1;
        let id = PayloadId(t.next_payload);
        t.payloads.insert((name, file, line, column), id);
        self.defs.push(Record::Payload { id, name, file, line, column });
        id
    }

    /// The set for these (xpti key string id, xpti object id) pairs (sorted by the caller),
    /// resolving keys and values through the dispatcher only when the set is new.
    #[cold]
    #[inline(never)]
    pub fn metadata_set(&self, pairs: &[(u32, i32)], d: &Dispatcher) -> MetadataSetId {
        if pairs.is_empty() {
            return MetadataSetId(0);
        }
        let mut t = self.lock();
        if let Some(&id) = t.sets.get(pairs) {
            return id;
        }
        let mut items = Vec::with_capacity(pairs.len());
        for &(key, value) in pairs {
            let k = match t.xpti_strings.get(&key) {
                Some(&k) => k,
                None => {
                    // SAFETY: xptiLookupString takes any id and returns NULL or a string that
                    // lives as long as the framework.
                    #[allow(unsafe_code)]
                    let p = unsafe { (d.lookup_string)(key) };
                    let k = if p.is_null() {
                        self.defs.string(format!("<string {key}>").as_bytes())
                    } else {
                        // SAFETY: non-null result of xptiLookupString: a NUL-terminated string.
                        #[allow(unsafe_code)]
                        let s = unsafe { std::ffi::CStr::from_ptr(p) };
                        self.defs.string(s.to_bytes())
                    };
                    t.xpti_strings.insert(key, k);
                    k
                }
            };
            let v = match t.objects.get(&value) {
                Some(&v) => v,
                None => {
                    // SAFETY: xptiLookupObject takes any id; an unknown id gives size 0.
                    #[allow(unsafe_code)]
                    let o = unsafe { (d.lookup_object)(value) };
                    let bytes = if o.data.is_null() || o.size == 0 {
                        Vec::new()
                    } else {
                        // SAFETY: a known object's `data` points to `size` bytes owned by the
                        // dispatcher's object table for the framework's lifetime.
                        #[allow(unsafe_code)]
                        unsafe {
                            std::slice::from_raw_parts(o.data.cast::<u8>(), o.size.min(MAX_OBJECT_BYTES)).to_vec()
                        }
                    };
                    t.next_object += 1;
                    let id = ObjectId(t.next_object);
                    t.objects.insert(value, id);
                    self.defs.push(Record::Object { id, value_type: ValueType::from_u8(o.type_), bytes });
                    id
                }
            };
            items.push((k, v));
        }
        t.next_set += 1;
        let id = MetadataSetId(t.next_set);
        t.sets.insert(pairs.to_vec(), id);
        self.defs.push(Record::MetadataSet { id, items });
        id
    }

    /// The interned name of a UR function from the generated table, if the runtime's
    /// `function_name` for this id is the table's name: the first call per id compares them
    /// (reading `name_ptr` defensively), so a runtime whose ids differ from the header the table
    /// was generated from never gets its `args_data` walked with the wrong parameter list.
    /// `None` for an unknown or mismatching id. Lock-free after the first call per function.
    #[inline(always)] // into the record path (else an out-of-line call per UR notification)
    pub fn ur_name(&self, function_id: u32, name_ptr: *const std::ffi::c_char) -> Option<StrId> {
        let slot = self.ur_names.get(function_id as usize)?;
        // Acquire: pairs with the Release store in `ur_name_slow`, so the definition queued by
        // the thread that interned the name happens-before our ring push (and thus before the
        // writer's snapshot of our ring and its later drain of the queue). Free on x86.
        match slot.load(Ordering::Acquire) {
            0 => self.ur_name_slow(function_id, name_ptr, slot),
            UR_MISMATCH => None,
            v => Some(StrId(v)),
        }
    }

    #[cold]
    #[inline(never)]
    fn ur_name_slow(&self, function_id: u32, name_ptr: *const std::ffi::c_char, slot: &AtomicU32) -> Option<StrId> {
        let f = ur::function(function_id)?;
        let mut runtime_name = Vec::new();
        let same = crate::safe_read::read_c_string(name_ptr as usize, 256, &mut runtime_name)
            && runtime_name == f.name.as_bytes();
        if !same {
            // Release: as below (nothing to publish; keeps one ordering for the slot).
            slot.store(UR_MISMATCH, Ordering::Release);
            return None;
        }
        let id = self.string(f.name.as_bytes());
        // Release: publishes the queued definition to `ur_name`'s Acquire (racing threads
        // store the same value).
        slot.store(id.0, Ordering::Release);
        Some(id)
    }
}
