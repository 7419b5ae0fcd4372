//! Record tags and presence bits: the first byte(s) of every encoded record.
//!
//! Tags below `0x80` are definitions and other rare records, one tag per [`crate::Record`]
//! variant. A tag with the high bit set is a notification, and its other bits carry what the
//! hot path needs most: the kind of `user_data` (low nibble) and three "same as before" flags, so
//! that an exit notification usually costs a handful of bytes.

pub(crate) const TAG_INFO: u8 = 0x01;
pub(crate) const TAG_CLOCK_SYNC: u8 = 0x02;
pub(crate) const TAG_STRING: u8 = 0x03;
pub(crate) const TAG_STREAM: u8 = 0x04;
pub(crate) const TAG_THREAD: u8 = 0x05;
pub(crate) const TAG_PAYLOAD: u8 = 0x06;
pub(crate) const TAG_OBJECT: u8 = 0x07;
pub(crate) const TAG_METADATA_SET: u8 = 0x08;
pub(crate) const TAG_DROPS: u8 = 0x09;
pub(crate) const TAG_END: u8 = 0x0a;
/// Since format version 2.
pub(crate) const TAG_KERNEL_DISPATCH: u8 = 0x0b;

// Typed records, since format version 3 (`typed.rs`).
pub(crate) const TAG_KIND_DEF: u8 = 0x0c;
pub(crate) const TAG_OPERATION_DEF: u8 = 0x0d;
pub(crate) const TAG_API_CALL: u8 = 0x0e;
pub(crate) const TAG_ACTIVITY: u8 = 0x0f;
pub(crate) const TAG_QUEUE: u8 = 0x10;
pub(crate) const TAG_DEVICE: u8 = 0x11;
pub(crate) const TAG_MEMORY: u8 = 0x12;
pub(crate) const TAG_CODE_OBJECT: u8 = 0x13;
pub(crate) const TAG_TASK_GRAPH: u8 = 0x14;
pub(crate) const TAG_SYNC: u8 = 0x15;
pub(crate) const TAG_MARKER: u8 = 0x16;
pub(crate) const TAG_COUNTER_DEF: u8 = 0x17;
pub(crate) const TAG_COUNTER_SAMPLE: u8 = 0x18;
pub(crate) const TAG_GENERIC: u8 = 0x19;
/// The first tag of format 3.
pub(crate) const FIRST_V3_TAG: u8 = TAG_KIND_DEF;
/// The last tag of format 3.
pub(crate) const LAST_V3_TAG: u8 = TAG_GENERIC;

// The flags varint after a typed record's tag (records with a thread).
/// Same thread id as the previous thread-carrying record in this chunk (tid omitted).
pub(crate) const F_SAME_TID: u64 = 0x01;
// ApiCall.
pub(crate) const F_API_RESULT: u64 = 0x02;
pub(crate) const F_API_EXTERNAL: u64 = 0x04;
/// Arguments equal to the previous call of the same kind and operation on this thread (omitted).
pub(crate) const F_API_SAME_ARGS: u64 = 0x08;
/// Arguments written as differences from the previous call of the same operation (same count).
pub(crate) const F_API_ARG_DELTAS: u64 = 0x10;
// Activity.
pub(crate) const F_ACT_SAME_QUEUE: u64 = 0x02;
pub(crate) const F_ACT_SAME_DEVICE: u64 = 0x04;
pub(crate) const F_ACT_NAME: u64 = 0x08;
pub(crate) const F_ACT_KERNEL: u64 = 0x10;
pub(crate) const F_ACT_BYTES: u64 = 0x20;
pub(crate) const F_ACT_COPY: u64 = 0x40;
pub(crate) const F_ACT_DEVICE_TIMES: u64 = 0x80;
pub(crate) const F_ACT_ALLOCATIONS: u64 = 0x100;
pub(crate) const F_ACT_COMPLETE: u64 = 0x200;
pub(crate) const F_ACT_ALL: u64 = 0x3ff;
/// Since format version 6: with `F_ACT_KERNEL`, the kernel handle, work_dim and launch sizes
/// equal the thread's previous kernel activity's in this chunk (omitted).
pub(crate) const F_ACT_SAME_KERNEL: u64 = 0x400;
/// Since version 6: with `F_ACT_ALLOCATIONS`, the allocation list equals the thread's previous
/// written list in this chunk (omitted).
pub(crate) const F_ACT_SAME_ALLOCATIONS: u64 = 0x800;
/// Since version 6: with `F_ACT_DEVICE_TIMES`, `device_start` is a zigzag difference from the
/// thread's previous activity's `device_end` in this chunk (0 at its start), not an absolute value.
pub(crate) const F_ACT_DEVICE_START_DELTA: u64 = 0x1000;
/// The activity flags of version 6.
pub(crate) const F_ACT_ALL_V6: u64 = F_ACT_ALL | F_ACT_SAME_KERNEL | F_ACT_SAME_ALLOCATIONS | F_ACT_DEVICE_START_DELTA;
// CounterSample.
/// A correlation id follows the value (a value per command); since format version 4.
pub(crate) const F_SAMPLE_CORRELATION: u64 = 0x02;

/// Notification tag: high bit set.
pub(crate) const TAG_NOTIFICATION: u8 = 0x80;
/// Low nibble of a notification tag: the `UserData` variant.
pub(crate) const TAG_KIND_MASK: u8 = 0x0f;
/// The event equals the previous notification's event on this thread.
pub(crate) const TAG_SAME_EVENT: u8 = 0x10;
/// The parent equals the previous notification's parent on this thread.
pub(crate) const TAG_SAME_PARENT: u8 = 0x20;
/// Same thread id as the previous notification in this chunk (tid omitted).
pub(crate) const TAG_SAME_TID: u8 = 0x40;

pub(crate) const KIND_NONE: u8 = 0;
pub(crate) const KIND_STR: u8 = 1;
pub(crate) const KIND_FUNCTION_WITH_ARGS: u8 = 2;
pub(crate) const KIND_MEM_ALLOC: u8 = 3;
pub(crate) const KIND_OFFLOAD_BUFFER: u8 = 4;
pub(crate) const KIND_ASSOCIATION: u8 = 5;
pub(crate) const KIND_ACCESSOR: u8 = 6;
pub(crate) const KIND_SIGNAL: u8 = 7;
pub(crate) const KIND_POINTER: u8 = 8;

// The presence byte that follows a notification tag.
pub(crate) const P_PARENT: u8 = 0x01;
pub(crate) const P_EVENT: u8 = 0x02;
pub(crate) const P_STASH: u8 = 0x04;
pub(crate) const P_UNIVERSAL_ID: u8 = 0x08;
/// function_with_args only: (function_id, name) as the previous one on this thread.
pub(crate) const P_SAME_FUNCTION: u8 = 0x10;
/// function_with_args only: `result` is present.
pub(crate) const P_RESULT: u8 = 0x20;
/// function_with_args only: args identical to the previous function_with_args on this thread.
pub(crate) const P_SAME_ARGS: u8 = 0x40;
/// function_with_args only: at least one output value follows.
pub(crate) const P_OUTS: u8 = 0x80;
/// Bits that only a function_with_args notification may set.
pub(crate) const P_FUNCTION_ONLY: u8 = P_SAME_FUNCTION | P_RESULT | P_SAME_ARGS | P_OUTS;

// The presence byte that starts an encoded `EventInfo`: one bit per non-zero field.
pub(crate) const E_UID: u8 = 0x01;
pub(crate) const E_INSTANCE_ID: u8 = 0x02;
pub(crate) const E_EVENT_TYPE: u8 = 0x04;
pub(crate) const E_ACTIVITY_TYPE: u8 = 0x08;
pub(crate) const E_SOURCE_ID: u8 = 0x10;
pub(crate) const E_TARGET_ID: u8 = 0x20;
pub(crate) const E_PAYLOAD: u8 = 0x40;
pub(crate) const E_METADATA: u8 = 0x80;
