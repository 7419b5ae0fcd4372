//! Arbitrary bytes as the payload of a chunk with valid framing (see
//! `offtrace_format_fuzz::decode_chunk`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offtrace_format_fuzz::decode_chunk(data));
