//! Arbitrary bytes as a whole trace file (see `offtrace_format_fuzz::read_trace`). Seeded from
//! the fixtures (see `seed.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| offtrace_format_fuzz::read_trace(data));
