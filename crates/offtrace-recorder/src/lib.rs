//! offtrace-recorder: per-thread rings, a writer thread and the trace file — a tracing-services
//! client that writes the typed records of any backend (`docs/record-model.md`).
//!
//! Depends only on `offtrace-core` (the services it subscribes to) and `offtrace-format` (the
//! file it writes). Every backend's agent links it: the backend emits into the services, the
//! recorder is one of their clients.
//!
//! ```
//! use offtrace_core::*;
//! use offtrace_format::{Record, TraceReader};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("t.offtrace");
//! offtrace_recorder::start_file(offtrace_recorder::Config::default(), &path, &[("command", "doc test")])?;
//! let ctx = offtrace_recorder::subscribe(false)?;
//!
//! // A backend emits an API call with a kernel dispatch inside it.
//! let mut p = ApiCallPayload::new(7, &[0x1000, 64]);
//! let token = emit_enter(Kind::UrApi, 7, Payload::UrApi(&p));
//! let kd = KernelDispatchPayload { queue: 0x30, kernel_name: c"square".as_ptr(), ..Default::default() };
//! emit_instant(Kind::KernelDispatch, kernel_dispatch::LAUNCH, Phase::None, Payload::KernelDispatch(&kd));
//! p.has_result = 1;
//! emit_exit(token, Payload::UrApi(&p));
//!
//! destroy_context(ctx)?;
//! let stats = offtrace_recorder::finish()?;
//! assert_eq!(stats.drops, 0);
//! let records: Vec<Record> = TraceReader::open(&path)?.collect::<Result<_, _>>()?;
//! let call = records.iter().find_map(|r| if let Record::ApiCall(c) = r { Some(c) } else { None }).unwrap();
//! let dispatch = records.iter().find_map(|r| if let Record::Activity(a) = r { Some(a) } else { None }).unwrap();
//! assert_eq!(dispatch.correlation, call.correlation); // decided in-process
//! assert_eq!(dispatch.queue, 0x30);
//! # Ok(())
//! # }
//! ```
//!
//! Modes: by default a full ring drops the entry and counts it (`Drops` records in the trace);
//! [`Config::lossless`] never drops (the emitting thread waits for the writer). Overhead and
//! drops against rate: `docs/overhead.md`, benchmark `benches/rate.rs`.

mod client;
mod crash;
mod definitions;
mod entry;
mod output;
mod quiesce;
mod recorder;
mod wakeup;
mod writer;

pub use client::{subscribe, subscribe_with};
pub use crash::{CRASH_FLUSH_TIMEOUT, crash_flush_wanted};
pub use definitions::Definitions;
pub use entry::{HEAD_WORDS, MAX_ALLOCATIONS, MAX_ENTRY_WORDS};
pub use output::{claim_output, start_claimed};
pub use recorder::{
    Config, RAW_BODY_WORDS, RAW_CHUNK_BYTES_PER_RECORD, RawLayer, flush, is_recording, late_lost, stop_in_child,
    total_drops,
};
pub use writer::{
    FinishError, REPEAT_EVERY, StartError, Stats, TraceSink, definitions, finish, set_raw_layer, start, start_file,
    start_header, start_open, wake,
};
