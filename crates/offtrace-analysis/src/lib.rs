#![forbid(unsafe_code)]
//! Analysis of offtrace traces.
