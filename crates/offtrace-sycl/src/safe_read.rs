//! Reading memory that may not be readable, without faulting: `process_vm_readv` on our own
//! process (the kernel reports `EFAULT` instead of delivering SIGSEGV). A syscall per call
//! (~0.3-1 µs): cold paths only (cache misses), never per notification.

use std::ffi::c_void;
use std::sync::OnceLock;

const PAGE: usize = 4096;

fn own_pid() -> libc::pid_t {
    static PID: OnceLock<libc::pid_t> = OnceLock::new();
    // SAFETY: getpid has no preconditions.
    #[allow(unsafe_code)]
    *PID.get_or_init(|| unsafe { libc::getpid() })
}

/// Copies up to `buf.len()` bytes from `addr`, stopping at the first unreadable page. Returns
/// the number of bytes copied (0 for null or unreadable).
pub fn read_bytes(addr: usize, buf: &mut [u8]) -> usize {
    if addr < PAGE {
        return 0;
    }
    let mut done = 0;
    while done < buf.len() {
        let at = addr.wrapping_add(done);
        let chunk = (PAGE - at % PAGE).min(buf.len() - done);
        let local = libc::iovec { iov_base: buf[done..].as_mut_ptr().cast::<c_void>(), iov_len: chunk };
        let remote = libc::iovec { iov_base: at as *mut c_void, iov_len: chunk };
        // SAFETY:
        // - `local` describes `chunk` writable bytes inside `buf`;
        // - the remote range is only read by the kernel, which checks it and fails with EFAULT
        //   instead of faulting; it never touches our address space otherwise.
        #[allow(unsafe_code)]
        let got = unsafe { libc::process_vm_readv(own_pid(), &local, 1, &remote, 1, 0) };
        if got <= 0 {
            break;
        }
        done += got as usize;
        if (got as usize) < chunk {
            break;
        }
    }
    done
}

/// Reads a NUL-terminated string of at most `max` bytes at `addr` into `out` (cleared first).
/// `false` when the pointer is null, unreadable, or no NUL appears within `max` readable bytes.
pub fn read_c_string(addr: usize, max: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let mut buf = [0u8; 256];
    let mut at = addr;
    while out.len() < max {
        let want = buf.len().min(max - out.len()).min(PAGE - at % PAGE);
        let got = read_bytes(at, &mut buf[..want]);
        if got == 0 {
            return false;
        }
        if let Some(nul) = buf[..got].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..nul]);
            return true;
        }
        out.extend_from_slice(&buf[..got]);
        at = at.wrapping_add(got);
    }
    false
}

/// Reads a NUL-terminated string of at most `max` bytes at `addr` into `out` (cleared first)
/// with plain loads: no system call. `false` for a null or implausible pointer, or when no NUL
/// appears within `max` bytes.
///
/// # Safety
/// `addr` must point to a string that stays readable during the call: one the runtime's
/// documented contract guarantees valid for the duration of the callback (a payload's strings,
/// the C-string `user_data` of the SYCL trace point types listed in `docs/reference/sycl-runtime.md` §5). Up to
/// `max` bytes are read when no NUL comes first, so the string (or the readable memory after it)
/// must extend that far or be terminated.
#[allow(unsafe_code)]
pub unsafe fn read_c_string_trusted(addr: usize, max: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    // Null, the first page, and non-canonical addresses are never a valid string.
    if !(PAGE..(1usize << 47)).contains(&addr) {
        return false;
    }
    let p = addr as *const u8;
    for i in 0..max {
        // SAFETY: the caller guarantees a readable, NUL-terminated string at `addr`; we stop at
        // its NUL, so every byte read belongs to it.
        let c = unsafe { p.add(i).read() };
        if c == 0 {
            return true;
        }
        out.push(c);
    }
    false
}

/// Reads a `T`-sized plain value; `None` if not fully readable.
pub fn read_u64(addr: usize) -> Option<u64> {
    let mut b = [0u8; 8];
    (read_bytes(addr, &mut b) == 8).then(|| u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strings_and_rejects_bad_pointers() {
        let s = c"hello world";
        let mut out = Vec::new();
        assert!(read_c_string(s.as_ptr() as usize, 64, &mut out));
        assert_eq!(out, b"hello world");
        assert!(!read_c_string(0, 64, &mut out));
        assert!(!read_c_string(16, 64, &mut out));
        assert!(!read_c_string(usize::MAX - 8, 64, &mut out));
        // too long for the bound
        assert!(!read_c_string(s.as_ptr() as usize, 5, &mut out));
        let v = 0x1122_3344_5566_7788u64;
        assert_eq!(read_u64(&v as *const u64 as usize), Some(v));
        assert_eq!(read_u64(8), None);
    }
}

/// The process's mappings, to tell read-only, file-backed memory (`.rodata` / `.text` of loaded
/// objects: it never changes and stays mapped until its object is unloaded, so a string there
/// can be cached by address) from everything else. Parsed from `/proc/self/maps` (cold): again
/// only when an address lies in no known mapping, and at most about once a second.
#[derive(Debug, Default)]
pub struct StaticRanges {
    /// (start, end, read-only file-backed), sorted by start.
    ranges: Vec<(usize, usize, bool)>,
    loaded_at: Option<std::time::Instant>,
}

impl StaticRanges {
    /// Whether `addr` lies in a read-only, file-backed mapping.
    #[cold]
    pub fn contains(&mut self, addr: usize) -> bool {
        if let Some(is_static) = self.find(addr) {
            return is_static;
        }
        if self.loaded_at.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
            return false;
        }
        self.reload();
        self.find(addr).unwrap_or(false)
    }

    fn find(&self, addr: usize) -> Option<bool> {
        let i = self.ranges.partition_point(|&(start, _, _)| start <= addr);
        let &(_, end, is_static) = self.ranges.get(i.checked_sub(1)?)?;
        (addr < end).then_some(is_static)
    }

    fn reload(&mut self) {
        self.loaded_at = Some(std::time::Instant::now());
        self.ranges.clear();
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return };
        self.ranges.extend(maps.lines().filter_map(parse_mapping));
        self.ranges.sort_unstable();
    }
}

/// `start-end perms offset dev inode [path]` → (start, end, read-only with a file path).
fn parse_mapping(line: &str) -> Option<(usize, usize, bool)> {
    let mut f = line.split_whitespace();
    let (range, perms) = (f.next()?, f.next()?);
    let path = f.nth(3).unwrap_or("");
    let is_static = perms.starts_with('r') && perms.as_bytes().get(1) != Some(&b'w') && path.starts_with('/');
    let (a, b) = range.split_once('-')?;
    Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?, is_static))
}

#[cfg(test)]
mod static_tests {
    use super::*;

    #[test]
    fn literals_are_static_heap_is_not() {
        let mut r = StaticRanges::default();
        assert!(r.contains(c"a string literal".as_ptr() as usize));
        let heap = String::from("heap");
        assert!(!r.contains(heap.as_ptr() as usize));
        assert!(!r.contains(0x10));
        let m = |l| parse_mapping(l).map(|x| x.2);
        assert_eq!(m("7f00-7f10 r--p 00000000 08:01 123 /usr/lib/libsycl.so.9"), Some(true));
        assert_eq!(m("7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/libsycl.so.9"), Some(true));
        assert_eq!(m("7f00-7f10 rw-p 00000000 08:01 123 /usr/lib/libsycl.so.9"), Some(false));
        assert_eq!(m("7f00-7f10 r--p 00000000 00:00 0 [vvar]"), Some(false));
        assert_eq!(m("7f00-7f10 rw-p 00000000 00:00 0"), Some(false));
        assert_eq!(parse_mapping("7f00-7f10 r--p 00000000 08:01 123 /x").map(|x| (x.0, x.1)), Some((0x7f00, 0x7f10)));
    }
}
