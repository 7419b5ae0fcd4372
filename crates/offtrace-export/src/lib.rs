#![forbid(unsafe_code)]
//! Exports.
