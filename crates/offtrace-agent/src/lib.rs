//! The offtrace agent.
