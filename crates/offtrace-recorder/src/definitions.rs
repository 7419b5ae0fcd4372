//! The trace's string table and definitions queue, shared by the record path, the writer and a
//! backend's raw layer (one id space per trace).
//!
//! The record path does not come here in the steady state: each thread keeps its own cache of
//! the strings it interned (`recorder.rs`). A miss takes the one `Mutex`, assigns the id and
//! queues the `String` definition *before* returning it, so an entry that carries the id is
//! pushed to its ring after the definition was queued; the writer snapshots ring tails first,
//! then drains this queue, then the rings up to the snapshots, so every definition precedes its
//! first use in the file.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use offtrace_format::{Record, StrId};

type Map<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A string table's key: the bytes, hashed as the `[u8]` they borrow as (so a look-up by `&[u8]`
/// finds them). Its own `Hash`, inlined: `Box`'s generic one became a function call of its own in
/// the tables' `insert` and rehash when the crate's code around them changed (once per new
/// string; `docs/history/overhead-recorder-rounds-to-s11.md`, "What a crash loses").
#[derive(PartialEq, Eq)]
pub(crate) struct StrKey(pub(crate) Box<[u8]>);

impl std::hash::Hash for StrKey {
    #[inline(always)]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0[..].hash(state);
    }
}

impl std::borrow::Borrow<[u8]> for StrKey {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Default)]
struct Tables {
    strings: Map<StrKey, StrId>,
    queue: Vec<Record>,
}

/// The string table and the definitions queue of one recording.
#[derive(Default)]
pub struct Definitions {
    tables: Mutex<Tables>,
    /// The queue may hold records (set under the lock when one is queued): the writer takes the
    /// lock only then (it looks once per raw entry; an uncontended look is one load).
    queued: AtomicBool,
}

impl std::fmt::Debug for Definitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Definitions").finish_non_exhaustive()
    }
}

impl Definitions {
    /// The id of `bytes` (UTF-8 expected; invalid bytes are replaced in the trace), defining it
    /// on first use. Empty strings are id 0 (none).
    pub fn string(&self, bytes: &[u8]) -> StrId {
        self.intern(bytes).0
    }

    /// [`Self::string`], and whether this call defined it (`true`: its first use in the trace).
    pub(crate) fn intern(&self, bytes: &[u8]) -> (StrId, bool) {
        if bytes.is_empty() {
            return (StrId(0), false);
        }
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = t.strings.get(bytes) {
            return (id, false);
        }
        let id = StrId(t.strings.len() as u32 + 1);
        t.strings.insert(StrKey(bytes.into()), id);
        // `from_utf8` first: it checks ASCII a word at a time, where the lossy conversion walks
        // byte by byte (hundreds of new strings a run on the application's thread).
        let text = match std::str::from_utf8(bytes) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        };
        t.queue.push(Record::String { id, text });
        // Release: the entry that carries `id` is pushed after this; the writer's Acquire of
        // the ring's tail, then of this flag, sees it set.
        self.queued.store(true, Ordering::Release);
        (id, true)
    }

    /// Queues a definition record (the writer writes it before any entry pushed after this call).
    pub fn push(&self, r: Record) {
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).queue.push(r);
        // Release: as in `string`.
        self.queued.store(true, Ordering::Release);
    }

    /// Moves the queued definitions into `into`, in queue order (the writer; tests).
    pub fn take_queue(&self, into: &mut Vec<Record>) {
        // Acquire: pairs with the Release in `string` / `push`.
        if !self.queued.load(Ordering::Acquire) {
            return;
        }
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        // Cleared under the lock: a record queued later sets it again after its push.
        self.queued.store(false, Ordering::Relaxed);
        into.append(&mut t.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_defined_once_in_order() {
        let d = Definitions::default();
        assert_eq!(d.string(b""), StrId(0));
        assert_eq!(d.string(b"a"), StrId(1));
        assert_eq!(d.string(b"b"), StrId(2));
        assert_eq!(d.string(b"a"), StrId(1));
        let mut q = Vec::new();
        d.take_queue(&mut q);
        assert_eq!(
            q,
            vec![Record::String { id: StrId(1), text: "a".into() }, Record::String { id: StrId(2), text: "b".into() }]
        );
        d.take_queue(&mut q);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn intern_says_first_use_once_per_string() {
        let d = Definitions::default();
        assert_eq!(d.intern(b""), (StrId(0), false));
        assert_eq!(d.intern(b"virtual_node[56003d850b40]"), (StrId(1), true));
        assert_eq!(d.intern(b"virtual_node[56003d850b40]"), (StrId(1), false));
        assert_eq!(d.intern(b"k"), (StrId(2), true));
        assert_eq!(d.string(b"k"), StrId(2));
        assert_eq!(d.string(b"bad \xff byte"), StrId(3));
        let mut q = Vec::new();
        d.take_queue(&mut q);
        assert_eq!(q.len(), 3, "each string defined once");
        assert_eq!(q[2], Record::String { id: StrId(3), text: "bad \u{fffd} byte".into() }, "invalid bytes replaced");
    }
}
