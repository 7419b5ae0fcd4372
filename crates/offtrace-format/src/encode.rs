//! Record → bytes: the compact encoding of one chunk's records.
//!
//! The encoder is stateful per chunk: notifications are written as differences from the
//! previous notification of the same thread (see `thread_state.rs`), and [`Encoder::reset`] at
//! each chunk start makes every chunk decodable on its own. Output goes into a caller-owned
//! `Vec<u8>` that keeps its capacity, so encoding a notification does not allocate after
//! warm-up (the first record of a new thread inserts into a map; after that, nothing).

use crate::record::{EventInfo, KernelDispatch, Notification, Record, UserData};
use crate::tag::*;
use crate::thread_state::ThreadStates;
use crate::varint::{put_delta, put_u64, zigzag};

#[derive(Debug, Default)]
pub(crate) struct Encoder {
    threads: ThreadStates,
    api_scratch: crate::typed::ApiScratch,
}

impl Encoder {
    pub fn reset(&mut self) {
        self.threads.reset();
    }

    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) {
        match record {
            Record::Notification(n) => self.encode_notification(n, out),
            Record::Info { key, value } => {
                out.push(TAG_INFO);
                put_bytes(out, key.as_bytes());
                put_bytes(out, value.as_bytes());
            }
            Record::ClockSync { ticks, monotonic_ns, realtime_ns } => {
                out.push(TAG_CLOCK_SYNC);
                put_u64(out, *ticks);
                put_u64(out, *monotonic_ns);
                put_u64(out, *realtime_ns);
            }
            Record::String { id, text } => {
                out.push(TAG_STRING);
                put_u64(out, id.0.into());
                put_bytes(out, text.as_bytes());
            }
            Record::Stream { id, name, major, minor, version } => {
                out.push(TAG_STREAM);
                out.push(*id);
                put_u64(out, name.0.into());
                put_u64(out, (*major).into());
                put_u64(out, (*minor).into());
                put_u64(out, version.0.into());
            }
            Record::Thread { tid, name } => {
                out.push(TAG_THREAD);
                put_u64(out, (*tid).into());
                put_u64(out, name.0.into());
            }
            Record::Payload { id, name, file, line, column } => {
                out.push(TAG_PAYLOAD);
                put_u64(out, id.0.into());
                put_u64(out, name.0.into());
                put_u64(out, file.0.into());
                put_u64(out, (*line).into());
                put_u64(out, (*column).into());
            }
            Record::Object { id, value_type, bytes } => {
                out.push(TAG_OBJECT);
                put_u64(out, id.0.into());
                out.push(*value_type as u8);
                put_bytes(out, bytes);
            }
            Record::MetadataSet { id, items } => {
                out.push(TAG_METADATA_SET);
                put_u64(out, id.0.into());
                put_u64(out, items.len() as u64);
                for (key, value) in items {
                    put_u64(out, key.0.into());
                    put_u64(out, value.0.into());
                }
            }
            Record::KernelDispatch(d) => encode_kernel_dispatch(d, out),
            Record::Drops { tid, count } => {
                out.push(TAG_DROPS);
                put_u64(out, (*tid).into());
                put_u64(out, *count);
            }
            Record::End { records, drops } => {
                out.push(TAG_END);
                put_u64(out, *records);
                put_u64(out, *drops);
            }
            typed => {
                let encoded = crate::typed::encode(&mut self.threads, &mut self.api_scratch, typed, out);
                debug_assert!(encoded, "every other record is typed");
            }
        }
    }

    /// Encodes one API call (format 3) whose times are raw ticks.
    pub fn encode_api_call(&mut self, a: &crate::record::ApiCallRef<'_>, out: &mut Vec<u8>) {
        crate::typed::encode_api_call(&mut self.threads, &mut self.api_scratch, a, out);
    }

    /// Encodes one device activity (format 3) whose `ts` is in raw ticks.
    pub fn encode_activity(&mut self, a: &crate::record::ActivityRef<'_>, out: &mut Vec<u8>) {
        crate::typed::encode_activity(&mut self.threads, &mut self.api_scratch, a, out);
    }

    /// Encodes one task-graph record (format 3) whose `ts` is in raw ticks.
    pub fn encode_task_graph(&mut self, r: &crate::record::TaskGraphRecord, out: &mut Vec<u8>) {
        crate::typed::encode_task_graph(&mut self.threads, &mut self.api_scratch, r, out);
    }

    /// Encodes one notification whose `ts` is in raw ticks.
    pub fn encode_notification(&mut self, n: &Notification, out: &mut Vec<u8>) {
        let (same_tid, st) = self.threads.switch_to(n.tid);

        let kind = match n.user_data {
            UserData::None => KIND_NONE,
            UserData::Str(_) => KIND_STR,
            UserData::FunctionWithArgs { .. } => KIND_FUNCTION_WITH_ARGS,
            UserData::MemAlloc { .. } => KIND_MEM_ALLOC,
            UserData::OffloadBuffer { .. } => KIND_OFFLOAD_BUFFER,
            UserData::Association { .. } => KIND_ASSOCIATION,
            UserData::Accessor { .. } => KIND_ACCESSOR,
            UserData::Signal { .. } => KIND_SIGNAL,
            UserData::Pointer(_) => KIND_POINTER,
        };
        let same_event = n.event.is_some() && n.event == st.event;
        let same_parent = n.parent.is_some() && n.parent == st.parent;
        let mut tag = TAG_NOTIFICATION | kind;
        if same_event {
            tag |= TAG_SAME_EVENT;
        }
        if same_parent {
            tag |= TAG_SAME_PARENT;
        }
        if same_tid {
            tag |= TAG_SAME_TID;
        }

        let mut presence = 0u8;
        if n.parent.is_some() && !same_parent {
            presence |= P_PARENT;
        }
        if n.event.is_some() && !same_event {
            presence |= P_EVENT;
        }
        if n.stash.is_some() {
            presence |= P_STASH;
        }
        if n.universal_id != 0 {
            presence |= P_UNIVERSAL_ID;
        }
        if let UserData::FunctionWithArgs { function_id, name, result, args, outs } = &n.user_data {
            if (*function_id, *name) == st.function {
                presence |= P_SAME_FUNCTION;
            }
            if result.is_some() {
                presence |= P_RESULT;
            }
            if args.as_slice() == st.previous_args_slice() {
                presence |= P_SAME_ARGS;
            }
            if !outs.as_slice().is_empty() {
                presence |= P_OUTS;
            }
        }

        out.push(tag);
        out.push(presence);
        if !same_tid {
            put_u64(out, n.tid.into());
        }
        put_delta(out, n.ts, st.ts);
        out.push(n.stream);
        put_u64(out, n.trace_type.into());
        put_delta(out, n.instance, st.instance);
        if presence & P_PARENT != 0
            && let Some(p) = &n.parent
        {
            put_event(out, p);
        }
        if presence & P_EVENT != 0
            && let Some(e) = &n.event
        {
            put_event(out, e);
        }
        if let Some((key, value)) = n.stash {
            put_u64(out, key.0.into());
            put_u64(out, value);
        }
        if n.universal_id != 0 {
            put_delta(out, n.universal_id, st.universal_id);
        }
        match &n.user_data {
            UserData::None => {}
            UserData::Str(s) => put_u64(out, s.0.into()),
            UserData::FunctionWithArgs { function_id, name, result, args, outs } => {
                if presence & P_SAME_FUNCTION == 0 {
                    put_u64(out, (*function_id).into());
                    put_u64(out, name.0.into());
                }
                if let Some(r) = result {
                    put_u64(out, zigzag((*r).into()));
                }
                if presence & P_SAME_ARGS == 0 {
                    let values = args.as_slice();
                    out.push(values.len() as u8);
                    for &v in values {
                        put_u64(out, v);
                    }
                }
                let outs = outs.as_slice();
                if !outs.is_empty() {
                    out.push(outs.len() as u8);
                    for &(index, value) in outs {
                        out.push(index);
                        put_u64(out, value);
                    }
                }
            }
            UserData::MemAlloc { mem_object, alloc_pointer, alloc_size, guard_zone } => {
                for v in [*mem_object, *alloc_pointer, *alloc_size, *guard_zone] {
                    put_u64(out, v);
                }
            }
            UserData::OffloadBuffer { user_object, host_object, element_type, element_size, dim, range } => {
                put_u64(out, *user_object);
                put_u64(out, *host_object);
                put_u64(out, element_type.0.into());
                put_u64(out, (*element_size).into());
                put_u64(out, (*dim).into());
                for &r in range {
                    put_u64(out, r);
                }
            }
            UserData::Association { user_object, mem_object } => {
                put_u64(out, *user_object);
                put_u64(out, *mem_object);
            }
            UserData::Accessor { buffer, accessor, target, mode } => {
                put_u64(out, *buffer);
                put_u64(out, *accessor);
                put_u64(out, (*target).into());
                put_u64(out, (*mode).into());
            }
            UserData::Signal { ur_event } => put_u64(out, *ur_event),
            UserData::Pointer(p) => put_u64(out, *p),
        }
        st.remember(n);
    }
}

/// `ts` is raw ticks, stored whole: a dispatch is one record among the dozens of
/// notifications of its launch, so a delta against thread state would save little and tie this
/// record to the notification state machine.
fn encode_kernel_dispatch(d: &KernelDispatch, out: &mut Vec<u8>) {
    out.push(TAG_KERNEL_DISPATCH);
    put_u64(out, d.tid.into());
    put_u64(out, d.ts);
    put_u64(out, d.correlation);
    put_u64(out, d.ur_instance);
    put_u64(out, d.kernel.0.into());
    put_u64(out, d.queue);
    put_u64(out, d.kernel_handle);
    put_u64(out, d.work_dim.into());
    for &v in d.global_size.iter().chain(&d.local_size) {
        put_u64(out, v);
    }
    put_u64(out, d.allocations.len() as u64);
    for a in &d.allocations {
        put_u64(out, a.base);
        put_u64(out, a.size);
        put_u64(out, zigzag(a.arg_index.into()));
        out.push(a.memory_type as u8);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_event(out: &mut Vec<u8>, e: &EventInfo) {
    let fields: [(u8, u64); 8] = [
        (E_UID, e.uid),
        (E_INSTANCE_ID, e.instance_id),
        (E_EVENT_TYPE, e.event_type.into()),
        (E_ACTIVITY_TYPE, e.activity_type.into()),
        (E_SOURCE_ID, e.source_id),
        (E_TARGET_ID, e.target_id),
        (E_PAYLOAD, e.payload.0.into()),
        (E_METADATA, e.metadata.0.into()),
    ];
    let mut presence = 0u8;
    for (bit, v) in fields {
        if v != 0 {
            presence |= bit;
        }
    }
    out.push(presence);
    for (_, v) in fields {
        if v != 0 {
            put_u64(out, v);
        }
    }
}
