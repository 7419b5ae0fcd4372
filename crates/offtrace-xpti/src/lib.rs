//! offtrace-xpti: the XPTI framework — the C ABI types (`abi`), the UR API description used to
//! decode `ur.call` arguments (`ur`), offtrace's implementation of the dispatcher (`dispatch`,
//! exported under the XPTI names by the `offtrace-xptifw` cdylib) and a safe Rust API over it
//! (`api`).

#![allow(unsafe_code)] // FFI, lock-free tables and the instance slab; every block has a SAFETY note.

pub mod abi;
pub mod ur;

pub mod api;
mod callbacks;
pub mod dispatch;
mod framework;
mod hash;
mod instance;
mod intern;
mod shim;
mod subscriber;
mod tls;

pub use hash::fnv1a32;
