//! offtrace-xpti: the XPTI framework (ABI types, dispatcher, safe API).
