//! Definitions: the records that give a trace's ids their meaning (strings, kinds, operations,
//! threads, devices, counters, and the raw layer's streams, payloads and metadata), and the
//! table a reader keeps to take a definition that the file repeats.
//!
//! From format version 5 a writer may write a definition again (the recorder repeats every
//! definition so far at the end of a recording and now and then on the way, so that one damaged
//! chunk does not take the names of the whole trace with it; `docs/format.md`, "Repeated
//! definitions"). A reader takes a repeat that says what the first one said as nothing new. One
//! that says something else is a conflict, except for the two keys the system itself reuses: a
//! thread id (the kernel gives an exited thread's id to a new thread) and a device or context
//! handle (a runtime reuses freed memory); a new value for those replaces the old one, as it
//! always did.
//!
//! Cost: one enum match per record; for a definition (rare) one hash of its fields and one map
//! look-up. The table keeps 8 bytes of fingerprint per key, not the definitions themselves.

use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::record::Record;

/// What a definition defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DefinitionKey {
    String(u32),
    Kind(u32),
    Operation {
        kind: u32,
        op: u32,
    },
    Thread(u32),
    /// A device (`op` 0) or a context (`op` 1) by its handle.
    Device {
        op: u32,
        handle: u64,
    },
    Counter(u64),
    Stream(u8),
    Payload(u32),
    Object(u32),
    MetadataSet(u32),
}

impl DefinitionKey {
    /// The key `record` defines, `None` if it is no definition.
    #[inline]
    pub fn of(record: &Record) -> Option<Self> {
        Some(match record {
            Record::String { id, .. } => Self::String(id.0),
            Record::KindDef { kind, .. } => Self::Kind(*kind),
            Record::OperationDef(d) => Self::Operation { kind: d.kind, op: d.op },
            Record::Thread { tid, .. } => Self::Thread(*tid),
            Record::Device(d) => Self::Device { op: d.op, handle: d.handle },
            Record::CounterDef(d) => Self::Counter(d.counter),
            Record::Stream { id, .. } => Self::Stream(*id),
            Record::Payload { id, .. } => Self::Payload(id.0),
            Record::Object { id, .. } => Self::Object(id.0),
            Record::MetadataSet { id, .. } => Self::MetadataSet(id.0),
            _ => return None,
        })
    }

    /// Whether a later definition of the key may say something else: thread ids and device or
    /// context handles are reused over a recording; every other id is given out once.
    pub fn is_reusable(self) -> bool {
        matches!(self, Self::Thread(_) | Self::Device { .. })
    }
}

impl fmt::Display for DefinitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String(id) => write!(f, "string {id}"),
            Self::Kind(kind) => write!(f, "kind {kind}"),
            Self::Operation { kind, op } => write!(f, "operation {op} of kind {kind}"),
            Self::Thread(tid) => write!(f, "thread {tid}"),
            Self::Device { op: 1, handle } => write!(f, "context {handle:#x}"),
            Self::Device { handle, .. } => write!(f, "device {handle:#x}"),
            Self::Counter(c) => write!(f, "counter {c}"),
            Self::Stream(id) => write!(f, "stream {id}"),
            Self::Payload(id) => write!(f, "payload {id}"),
            Self::Object(id) => write!(f, "object {id}"),
            Self::MetadataSet(id) => write!(f, "metadata set {id}"),
        }
    }
}

/// What a definition is to the ones read before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    /// The first definition of its key.
    New,
    /// The same as the key's definition so far: nothing new.
    Repeat,
    /// A new value for a reusable key (a thread id or a handle given to something else).
    Redefined,
    /// A different value for a key that is defined once: the file contradicts itself.
    Conflict(DefinitionKey),
}

/// The definitions read so far (their keys and a fingerprint of what each said).
#[derive(Debug, Default, Clone)]
pub struct DefinitionTable {
    seen: HashMap<DefinitionKey, u64>,
}

impl DefinitionTable {
    /// Takes `record`: `None` if it is no definition, else what it is to the definitions so far.
    /// A conflicting definition leaves the first one in the table.
    pub fn observe(&mut self, record: &Record) -> Option<Definition> {
        let key = DefinitionKey::of(record)?;
        let print = fingerprint(record);
        Some(match self.seen.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(print);
                Definition::New
            }
            std::collections::hash_map::Entry::Occupied(o) if *o.get() == print => Definition::Repeat,
            std::collections::hash_map::Entry::Occupied(mut o) if key.is_reusable() => {
                o.insert(print);
                Definition::Redefined
            }
            std::collections::hash_map::Entry::Occupied(_) => Definition::Conflict(key),
        })
    }

    /// Keys defined.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// A hash of everything a definition says (its key included). `DefaultHasher::new()` is the
/// same function for every table of a process, which is all a comparison needs.
fn fingerprint(record: &Record) -> u64 {
    let mut h = DefaultHasher::new();
    std::mem::discriminant(record).hash(&mut h);
    match record {
        Record::String { id, text } => (id, text).hash(&mut h),
        Record::KindDef { kind, name } => (kind, name).hash(&mut h),
        Record::OperationDef(d) => (d.kind, d.op, d.name, &d.args).hash(&mut h),
        Record::Thread { tid, name } => (tid, name).hash(&mut h),
        Record::Device(d) => (d.op, d.handle, d.parent, d.name, d.device_type).hash(&mut h),
        Record::CounterDef(d) => (d.counter, d.device, d.name, d.unit, d.value_type).hash(&mut h),
        Record::Stream { id, name, major, minor, version } => (id, name, major, minor, version).hash(&mut h),
        Record::Payload { id, name, file, line, column } => (id, name, file, line, column).hash(&mut h),
        Record::Object { id, value_type, bytes } => (id, *value_type as u8, bytes).hash(&mut h),
        Record::MetadataSet { id, items } => (id, items).hash(&mut h),
        _ => {}
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ArgDef, DeviceRecord, OperationDef, StrId};

    fn string(id: u32, text: &str) -> Record {
        Record::String { id: StrId(id), text: text.into() }
    }

    #[test]
    fn a_repeat_that_says_the_same_is_nothing_new() {
        let mut t = DefinitionTable::default();
        let op = Record::OperationDef(OperationDef {
            kind: 1,
            op: 7,
            name: StrId(3),
            args: vec![ArgDef { name: StrId(4), type_name: StrId(5), size: 8, format: 3 }],
        });
        for r in [string(3, "urEnqueueKernelLaunch"), Record::KindDef { kind: 1, name: StrId(2) }, op.clone()] {
            assert_eq!(t.observe(&r), Some(Definition::New));
            assert_eq!(t.observe(&r), Some(Definition::Repeat));
        }
        assert_eq!(t.observe(&Record::Drops { tid: 1, count: 2 }), None);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_different_value_for_a_once_given_id_is_a_conflict_and_the_first_stays() {
        let mut t = DefinitionTable::default();
        assert_eq!(t.observe(&string(3, "a")), Some(Definition::New));
        assert_eq!(t.observe(&string(3, "b")), Some(Definition::Conflict(DefinitionKey::String(3))));
        assert_eq!(t.observe(&string(3, "a")), Some(Definition::Repeat));
        let def = |args: Vec<ArgDef>| Record::OperationDef(OperationDef { kind: 1, op: 7, name: StrId(3), args });
        assert_eq!(t.observe(&def(vec![])), Some(Definition::New));
        let one = vec![ArgDef { name: StrId(4), type_name: StrId(5), size: 8, format: 3 }];
        assert_eq!(t.observe(&def(one)), Some(Definition::Conflict(DefinitionKey::Operation { kind: 1, op: 7 })));
    }

    #[test]
    fn a_reused_thread_id_or_handle_takes_its_new_value() {
        let mut t = DefinitionTable::default();
        let thread = |name| Record::Thread { tid: 40, name: StrId(name) };
        assert_eq!(t.observe(&thread(1)), Some(Definition::New));
        assert_eq!(t.observe(&thread(2)), Some(Definition::Redefined));
        assert_eq!(t.observe(&thread(2)), Some(Definition::Repeat));
        let device =
            |op, name| Record::Device(DeviceRecord { op, handle: 0x10, parent: 0, name: StrId(name), device_type: 1 });
        assert_eq!(t.observe(&device(0, 1)), Some(Definition::New));
        // A context at a device's handle is a key of its own.
        assert_eq!(t.observe(&device(1, 2)), Some(Definition::New));
        assert_eq!(t.observe(&device(0, 3)), Some(Definition::Redefined));
    }
}
