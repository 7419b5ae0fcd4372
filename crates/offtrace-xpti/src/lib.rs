//! offtrace-xpti: the XPTI framework — the C ABI types (`abi`), the UR API description used to
//! decode `ur.call` arguments (`ur`), and offtrace's implementation of the dispatcher.

pub mod abi;
pub mod ur;
