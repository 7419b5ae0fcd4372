//! offtrace-core: the contract every backend and every tool speaks.
//!
//! Modules (one concept each): `clock` (the trace clock), `ring` (single-producer byte ring),
//! services (contexts, callback and buffer tracing) live in their own modules.

pub mod clock;
pub mod ring;
mod sync;
