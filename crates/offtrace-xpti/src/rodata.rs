//! The main program's read-only segments. Bytes there never change while the process runs (the
//! main program is never unloaded, and its read-only `PT_LOAD` segments are never written), so a
//! pointer into them identifies a string's contents. The creation paths use this to skip
//! comparing a caller's strings with the copies of a key found in the thread's key cache
//! (`instance.rs`): the source locations the SYCL runtime passes on every traced call
//! (`tracepoint_scope_t`) are string literals of the application.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// Read-only segments kept (an ELF program has one to three).
const MAX: usize = 8;

/// `[start, end)` address ranges.
#[derive(Debug, Default)]
struct Ranges {
    n: usize,
    r: [(usize, usize); MAX],
}

static RANGES: OnceLock<Ranges> = OnceLock::new();

/// The read-only `PT_LOAD` segments of the first object `dl_iterate_phdr` reports, which is the
/// main program.
fn collect() -> Ranges {
    unsafe extern "C" fn first_object(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Ranges` passed below; `info` and its program headers are valid
        // for the duration of the callback (dl_iterate_phdr's contract).
        unsafe {
            let out = &mut *data.cast::<Ranges>();
            let info = &*info;
            for i in 0..usize::from(info.dlpi_phnum) {
                let ph = &*info.dlpi_phdr.add(i);
                if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_W == 0 && out.n < MAX {
                    let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                    out.r[out.n] = (start, start.wrapping_add(ph.p_memsz as usize));
                    out.n += 1;
                }
            }
        }
        1 // stop after the main program
    }
    let mut out = Ranges::default();
    // SAFETY: the callback only writes `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first_object), (&raw mut out).cast()) };
    out
}

/// Whether the `len` bytes at `p` lie in one read-only segment of the main program.
#[inline]
pub fn immutable(p: *const u8, len: usize) -> bool {
    let r = RANGES.get_or_init(collect);
    let (a, n) = (p as usize, len);
    r.r[..r.n].iter().any(|&(s, e)| a >= s && a <= e && n <= e - a)
}

#[cfg(test)]
mod tests {
    use super::*;

    static LITERAL: &[u8] = b"a literal of the test program\0";

    #[test]
    fn literals_of_the_program_are_immutable_heap_and_stack_are_not() {
        assert!(immutable(LITERAL.as_ptr(), LITERAL.len()));
        let heap = LITERAL.to_vec();
        assert!(!immutable(heap.as_ptr(), heap.len()));
        let stack = [1u8; 16];
        assert!(!immutable(stack.as_ptr(), stack.len()));
        assert!(!immutable(std::ptr::null(), 1));
        // A range running past the end of its segment.
        assert!(!immutable(LITERAL.as_ptr(), usize::MAX));
    }
}
