//! What the exports learn from a trace's definitions as they stream past: strings (in the one
//! naming style), kind and operation names with their argument descriptors, threads, devices
//! and queues. Everything else refers to these by id.

use std::borrow::Cow;
use std::fmt::Write as _;

use offtrace_analysis::naming::display_name;
use offtrace_format::{ArgDef, QueueRecord, Record, StrId};
use rustc_hash::FxHashMap;

/// `ArgDef.format` values (`offtrace_core::ArgFormat`).
mod format {
    pub const SIGNED: u8 = 1;
    pub const HEX: u8 = 2;
    pub const POINTER: u8 = 3;
    pub const BOOL: u8 = 4;
    pub const C_STRING: u8 = 5;
}

/// `QUEUE` operations (as the services number them).
const QUEUE_CREATE: u32 = 0;
const QUEUE_DESTROY: u32 = 1;

/// How one argument value is shown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArgValue {
    Unsigned(u64),
    Signed(i64),
    /// Pointers, handles and hex values.
    Hex(u64),
    Bool(bool),
    Text(&'static str),
}

/// A queue as its definition gave it, under its definition id (see [`Defs::queue_id`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueueDef {
    /// The runtime's handle (several queues may have had it, one after the other).
    pub handle: u64,
    pub device: u64,
    pub context: u64,
    pub flags: Option<u64>,
    /// Created at the handle of an earlier, destroyed queue.
    pub reused: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Defs {
    strings: FxHashMap<u32, Box<str>>,
    kinds: FxHashMap<u32, StrId>,
    ops: FxHashMap<(u32, u32), (StrId, Vec<ArgDef>)>,
    pub threads: FxHashMap<u32, StrId>,
    pub devices: FxHashMap<u64, StrId>,
    /// Queues by definition id.
    pub queues: FxHashMap<u64, QueueDef>,
    /// Handle → the definition id of the queue that has it now, and whether it was destroyed.
    queue_at: FxHashMap<u64, (u64, bool)>,
    pub info: Vec<(String, String)>,
}

impl Defs {
    /// Takes a definition; `true` if `record` was one.
    pub fn observe(&mut self, record: &Record) -> bool {
        match record {
            Record::String { id, text } => {
                self.strings.insert(id.0, display_name(text).into_owned().into_boxed_str());
            }
            Record::KindDef { kind, name } => {
                self.kinds.insert(*kind, *name);
            }
            Record::OperationDef(d) => {
                self.ops.insert((d.kind, d.op), (d.name, d.args.clone()));
            }
            Record::Thread { tid, name } => {
                // Defined once per layer that saw the thread: the first non-empty name wins.
                let known = self.threads.get(tid).is_some_and(|&s| !self.str(s).is_empty());
                if !known {
                    self.threads.insert(*tid, *name);
                }
            }
            Record::Device(d) => {
                self.devices.insert(d.handle, d.name);
            }
            Record::Info { key, value } => self.info.push((key.clone(), value.clone())),
            _ => return false,
        }
        true
    }

    /// Takes a queue record (created, destroyed, submission); returns the queue's definition id.
    pub fn queue_record(&mut self, q: &QueueRecord) -> u64 {
        // A queue created at the handle of a destroyed one (the runtime reuses the memory) is a
        // queue of its own, as in the report.
        let reused = q.op == QUEUE_CREATE && self.queue_at.get(&q.queue).is_some_and(|&(_, destroyed)| destroyed);
        let id = if reused { self.new_queue(q.queue, true) } else { self.queue_id(q.queue, 0) };
        let (def, at) = (self.queues.entry(id).or_default(), self.queue_at.entry(q.queue).or_default());
        match q.op {
            QUEUE_CREATE => {
                def.device = q.device;
                def.context = q.context;
                def.flags = Some(q.flags);
            }
            QUEUE_DESTROY => at.1 = true,
            _ => {}
        }
        id
    }

    /// The definition id of the queue that has `handle` now: 1, 2, ... in the order the trace
    /// first names each queue (the report's order of queue rows). A handle no queue record
    /// defined gets one too (`device`, if not 0, becomes its device).
    pub fn queue_id(&mut self, handle: u64, device: u64) -> u64 {
        let id = match self.queue_at.get(&handle) {
            Some(&(id, _)) => id,
            None => self.new_queue(handle, false),
        };
        if let Some(def) = self.queues.get_mut(&id)
            && def.device == 0
        {
            def.device = device;
        }
        id
    }

    /// The definition id of the queue that has `handle` now, if any record named it.
    pub fn known_queue_id(&self, handle: u64) -> Option<u64> {
        self.queue_at.get(&handle).map(|&(id, _)| id)
    }

    fn new_queue(&mut self, handle: u64, reused: bool) -> u64 {
        let id = self.queues.len() as u64 + 1;
        self.queues.insert(id, QueueDef { handle, reused, ..QueueDef::default() });
        self.queue_at.insert(handle, (id, false));
        id
    }

    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(&id.0).map_or("", |s| s)
    }

    pub fn kind(&self, kind: u32) -> Cow<'_, str> {
        match self.kinds.get(&kind).map(|&s| self.str(s)) {
            Some(s) if !s.is_empty() => Cow::Borrowed(s),
            _ => Cow::Owned(format!("KIND_{kind}")),
        }
    }

    pub fn op(&self, kind: u32, op: u32) -> Cow<'_, str> {
        match self.ops.get(&(kind, op)).map(|(s, _)| self.str(*s)) {
            Some(s) if !s.is_empty() => Cow::Borrowed(s),
            _ => Cow::Owned(format!("op_{op}")),
        }
    }

    pub fn op_args(&self, kind: u32, op: u32) -> &[ArgDef] {
        self.ops.get(&(kind, op)).map_or(&[], |(_, a)| a)
    }

    pub fn thread_name(&self, tid: u32) -> String {
        match self.threads.get(&tid).map(|&s| self.str(s)) {
            Some(s) if !s.is_empty() => format!("{s} ({tid})"),
            _ => format!("thread {tid}"),
        }
    }

    pub fn device_name(&self, device: u64) -> String {
        match self.devices.get(&device).map(|&s| self.str(s)) {
            Some(s) if !s.is_empty() => s.to_owned(),
            _ if device == 0 => "unknown device".to_owned(),
            _ => format!("device {device:#x}"),
        }
    }

    /// Each argument of a call with its name from the operation's definition (`arg<i>` past
    /// the definition's end), shown by its format.
    pub fn for_each_arg(&self, kind: u32, op: u32, values: &[u64], mut f: impl FnMut(&str, ArgValue)) {
        let defs = self.op_args(kind, op);
        let mut fallback = String::new();
        for (i, &v) in values.iter().enumerate() {
            let (name, fmt) = match defs.get(i) {
                Some(d) if !self.str(d.name).is_empty() => (self.str(d.name), d.format),
                other => {
                    fallback.clear();
                    let _ = write!(fallback, "arg{i}");
                    (fallback.as_str(), other.map_or(format::HEX, |d| d.format))
                }
            };
            let value = match fmt {
                format::SIGNED => ArgValue::Signed(v as i64),
                format::HEX | format::POINTER | format::C_STRING => ArgValue::Hex(v),
                format::BOOL => ArgValue::Bool(v != 0),
                _ => ArgValue::Unsigned(v),
            };
            f(name, value);
        }
    }

    /// The arguments as one JSON object (`{"hQueue":"0x5000","size":4096}`): hex values as
    /// strings, numbers as numbers.
    pub fn args_json(&self, kind: u32, op: u32, values: &[u64], out: &mut String) {
        out.clear();
        out.push('{');
        let mut first = true;
        self.for_each_arg(kind, op, values, |name, v| {
            if !first {
                out.push(',');
            }
            first = false;
            json_string(name, out);
            out.push(':');
            let _ = match v {
                ArgValue::Unsigned(u) => write!(out, "{u}"),
                ArgValue::Signed(i) => write!(out, "{i}"),
                ArgValue::Hex(h) => write!(out, "\"{h:#x}\""),
                ArgValue::Bool(b) => write!(out, "{b}"),
                ArgValue::Text(t) => {
                    json_string(t, out);
                    Ok(())
                }
            };
        });
        out.push('}');
    }
}

/// Appends `s` as a JSON string literal.
pub(crate) fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use offtrace_format::OperationDef;

    #[test]
    fn args_are_named_by_the_definition_and_valid_json() {
        let mut d = Defs::default();
        for (id, t) in [(1, "hQueue"), (2, "size"), (3, "weird \"na\tme\"")] {
            d.observe(&Record::String { id: StrId(id), text: t.into() });
        }
        let arg = |name, format| ArgDef { name: StrId(name), type_name: StrId(0), size: 8, format };
        d.observe(&Record::OperationDef(OperationDef {
            kind: 1,
            op: 2,
            name: StrId(0),
            args: vec![arg(1, 3), arg(2, 0), arg(3, 1)],
        }));
        let mut s = String::new();
        d.args_json(1, 2, &[0x5000, 4096, u64::MAX, 7], &mut s);
        assert_eq!(s, r#"{"hQueue":"0x5000","size":4096,"weird \"na\tme\"":-1,"arg3":"0x7"}"#);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap_or_default();
        assert_eq!(v["size"], 4096);
    }
}
