//! offtrace-xpti: the XPTI framework — the C ABI types (`abi`), the UR API description used to
//! decode `ur.call` arguments (`ur`), offtrace's implementation of the XPTI 2026.2 dispatcher
//! (`dispatch`, exported under the 50 XPTI names by the `offtrace-xptifw` cdylib as a drop-in
//! `libxptifw.so`) and a safe Rust API over it (`api`).
//!
//! ```
//! use offtrace_xpti::api::{self, MetadataValue, Tracepoint};
//!
//! api::force_trace_enabled(true); // normally: a subscriber from XPTI_SUBSCRIBERS is loaded
//! let stream = api::register_stream("my.runtime");
//! let launch = Tracepoint::new("launch", "runtime.rs", 10, 1); // deleted on drop
//! launch.add_metadata("bytes", api::register_object(&4096u64.to_le_bytes(), MetadataValue::UnsignedInteger))?;
//! if api::check_trace_enabled(stream, api::trace_type::TASK_BEGIN) {
//!     api::notify(stream, api::trace_type::TASK_BEGIN, None, Some(&launch), api::unique_id())?;
//! }
//! # Ok::<(), offtrace_xpti::api::XptiError>(())
//! ```
//!
//! Layout of the implementation, one concept per module:
//! - `framework`: the lazily built process-wide state and subscriber loading order;
//! - `intern`: insert-only tables with lock-free reads (strings, objects, streams, vendors);
//! - `key_map`: the tracepoint keys' map: lock-free find-or-insert, one locked instruction per new key;
//! - `region`: reserved address ranges committed in huge-page steps (slab and arenas);
//! - `instance`: tracepoint instances in a never-unmapped slab, uid64 validation, per-key counters;
//! - `callbacks`: per-(stream, type) append-only callback lists, lock-free notify;
//! - `subscriber`: `XPTI_SUBSCRIBERS` loading and the `xptiTraceInit`/`Finish` protocol;
//! - `tls`: universal ID, stashed tuple, scope tracepoint;
//! - `rodata`: the main program's read-only segments (strings there never change);
//! - `shim` + `cpp/instance_shim.cpp`: the libstdc++ metadata map and the C++ interface vtables.
//!
//! Memory handed to C (interned strings, objects, events, payloads, interface objects) lives for
//! the process: arenas and the instance slab are never freed or unmapped. Compatibility notes
//! and deviations: `docs/xpti-compatibility.md`; costs: `docs/overhead.md` ("XPTI dispatcher").

#![allow(unsafe_code)] // FFI, lock-free tables and the instance slab; every block has a SAFETY note.

/// The XPTI ABI and the UR table live in `offtrace-xpti-abi`; re-exported under their old paths.
pub use offtrace_xpti_abi::{abi, ur};

pub mod api;
mod callbacks;
pub mod dispatch;
mod framework;
mod hash;
mod instance;
mod intern;
mod key_map;
mod region;
mod rodata;
mod shim;
mod subscriber;
mod sync;
mod tls;

pub use hash::fnv1a32;
