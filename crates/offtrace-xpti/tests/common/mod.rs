//! Helpers shared by the integration tests that make instances and measure memory.

use std::ffi::{CStr, c_char};

use offtrace_xpti::abi::{Payload, payload_flags as pf};

/// Resident set size of this process.
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = s.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("rss field");
    pages * 4
}

/// A payload named `name` (NUL-terminated) in `file` at `line`, column 1, with the name, file
/// and line flags.
pub fn payload(name: &'static [u8], file: &'static CStr, line: u32) -> Payload {
    Payload {
        name: name.as_ptr().cast::<c_char>(),
        stack_trace: std::ptr::null(),
        source_file: file.as_ptr(),
        line_no: line,
        column_no: 1,
        code_ptr_va: std::ptr::null(),
        internal: 0,
        flags: pf::NAME_AVAILABLE | pf::SOURCE_FILE_AVAILABLE | pf::LINE_INFO_AVAILABLE,
        uid: Default::default(),
    }
}
