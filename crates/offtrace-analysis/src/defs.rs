//! Definitions: what ids in a trace mean (strings, payloads, metadata values and sets, streams,
//! threads), collected while reading so that later records can be resolved.
//!
//! Definitions always precede their first use in file order, so one streaming pass is enough.
//! They are bounded by the number of distinct strings/objects the agent interned, not by the
//! number of notifications.

use offtrace_format::{MetadataSetId, ObjectId, PayloadId, Record, StrId, ValueType};
use rustc_hash::FxHashMap;

use crate::names::StreamRole;

/// A payload definition with its strings resolved lazily.
#[derive(Debug, Clone, Copy)]
pub struct PayloadDef {
    pub name: StrId,
    pub file: StrId,
    pub line: u32,
    pub column: u32,
}

/// A decoded metadata value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Str(&'a str),
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Bytes(&'a [u8]),
}

impl Value<'_> {
    /// The value as an unsigned integer, where that makes sense.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U64(v) => Some(v),
            Value::I64(v) => u64::try_from(v).ok(),
            Value::Bool(b) => Some(u64::from(b)),
            Value::Str(s) => parse_u64(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Str(s) => f.write_str(s),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Bytes(b) => {
                f.write_str("0x")?;
                for x in b.iter() {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
        }
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") { u64::from_str_radix(h, 16).ok() } else { s.parse().ok() }
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(b)
}

/// Decodes a typed metadata value (little-endian, as the agent copied it).
pub fn decode_value(value_type: ValueType, bytes: &[u8]) -> Value<'_> {
    match value_type {
        ValueType::String => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            match std::str::from_utf8(&bytes[..end]) {
                Ok(s) => Value::Str(s),
                Err(_) => Value::Bytes(bytes),
            }
        }
        ValueType::UnsignedInteger => Value::U64(le_u64(bytes)),
        ValueType::SignedInteger => {
            let v = le_u64(bytes);
            let signed = match bytes.len() {
                1 => i64::from(v as u8 as i8),
                2 => i64::from(v as u16 as i16),
                4 => i64::from(v as u32 as i32),
                _ => v as i64,
            };
            Value::I64(signed)
        }
        ValueType::Floating => match bytes.len() {
            4 => Value::F64(f64::from(f32::from_bits(le_u64(bytes) as u32))),
            _ => Value::F64(f64::from_bits(le_u64(bytes))),
        },
        ValueType::Boolean => Value::Bool(bytes.iter().any(|&b| b != 0)),
        ValueType::Binary => Value::Bytes(bytes),
    }
}

/// Everything the definitions in a trace say, indexed by id.
#[derive(Debug, Default)]
pub struct Definitions {
    strings: FxHashMap<StrId, String>,
    payloads: FxHashMap<PayloadId, PayloadDef>,
    objects: FxHashMap<ObjectId, (ValueType, Vec<u8>)>,
    metadata: FxHashMap<MetadataSetId, Vec<(StrId, ObjectId)>>,
    streams: FxHashMap<u8, (StrId, StreamRole)>,
    threads: FxHashMap<u32, StrId>,
    info: Vec<(String, String)>,
}

impl Definitions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in a definition record; returns `true` if the record was one.
    pub fn observe(&mut self, record: &Record) -> bool {
        match record {
            Record::String { id, text } => {
                self.strings.insert(*id, text.clone());
            }
            Record::Payload { id, name, file, line, column } => {
                self.payloads.insert(*id, PayloadDef { name: *name, file: *file, line: *line, column: *column });
            }
            Record::Object { id, value_type, bytes } => {
                self.objects.insert(*id, (*value_type, bytes.clone()));
            }
            Record::MetadataSet { id, items } => {
                self.metadata.insert(*id, items.clone());
            }
            Record::Stream { id, name, .. } => {
                let role = StreamRole::from_name(self.str(*name));
                self.streams.insert(*id, (*name, role));
            }
            Record::Thread { tid, name } => {
                self.threads.insert(*tid, *name);
            }
            Record::Info { key, value } => self.info.push((key.clone(), value.clone())),
            _ => return false,
        }
        true
    }

    /// The text of a string id; `""` for 0 or an undefined id.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(&id).map(String::as_str).unwrap_or("")
    }

    pub fn payload(&self, id: PayloadId) -> Option<&PayloadDef> {
        self.payloads.get(&id)
    }

    /// The name in a payload; `""` when there is none.
    pub fn payload_name(&self, id: PayloadId) -> &str {
        self.payload(id).map(|p| self.str(p.name)).unwrap_or("")
    }

    pub fn object(&self, id: ObjectId) -> Option<Value<'_>> {
        self.objects.get(&id).map(|(t, b)| decode_value(*t, b))
    }

    /// The (key, value) items of a metadata set.
    pub fn metadata(&self, id: MetadataSetId) -> impl Iterator<Item = (&str, Value<'_>)> + '_ {
        self.metadata.get(&id).into_iter().flatten().filter_map(move |(k, o)| Some((self.str(*k), self.object(*o)?)))
    }

    /// One metadata value by key.
    pub fn meta(&self, id: MetadataSetId, key: &str) -> Option<Value<'_>> {
        if id.0 == 0 {
            return None;
        }
        self.metadata(id).find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    pub fn meta_u64(&self, id: MetadataSetId, key: &str) -> Option<u64> {
        self.meta(id, key).and_then(|v| v.as_u64())
    }

    pub fn meta_str(&self, id: MetadataSetId, key: &str) -> Option<&str> {
        match self.meta(id, key)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The stream's name; `stream_<id>` for an undefined stream.
    pub fn stream_name(&self, id: u8) -> std::borrow::Cow<'_, str> {
        match self.streams.get(&id) {
            Some((name, _)) => std::borrow::Cow::Borrowed(self.str(*name)),
            None => std::borrow::Cow::Owned(format!("stream_{id}")),
        }
    }

    pub fn stream_role(&self, id: u8) -> StreamRole {
        self.streams.get(&id).map(|s| s.1).unwrap_or(StreamRole::Other)
    }

    pub fn thread_name(&self, tid: u32) -> Option<&str> {
        self.threads.get(&tid).map(|s| self.str(*s)).filter(|s| !s.is_empty())
    }

    pub fn threads(&self) -> impl Iterator<Item = (u32, &str)> + '_ {
        self.threads.iter().map(|(t, s)| (*t, self.str(*s)))
    }

    /// `Info` records, in file order.
    pub fn info(&self) -> &[(String, String)] {
        &self.info
    }

    pub fn strings(&self) -> impl Iterator<Item = (StrId, &str)> + '_ {
        self.strings.iter().map(|(k, v)| (*k, v.as_str()))
    }

    pub fn payloads(&self) -> impl Iterator<Item = (PayloadId, &PayloadDef)> + '_ {
        self.payloads.iter().map(|(k, v)| (*k, v))
    }

    pub fn metadata_sets(&self) -> impl Iterator<Item = MetadataSetId> + '_ {
        self.metadata.keys().copied()
    }
}
