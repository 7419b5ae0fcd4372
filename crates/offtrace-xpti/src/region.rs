//! Reserved address ranges committed in steps backed by transparent huge pages: the memory under
//! the instance events and the process-lifetime arenas (strings, objects, keys); and ranges
//! committed without population, paid page by page on first write (the instances' side cells).
//!
//! Cost: on the reference VM the kernel takes 1.3–2 µs to provide one fresh 4 KiB page (fault or
//! `MAP_POPULATE`), which is 40 ns per 128-byte event that `xptiMakeEvent` never frees, more
//! than everything else `xptiMakeEvent` does. A 2 MiB huge page costs about 0.36 µs per 4 KiB.
//! Commits are therefore 2 MiB-aligned multiples of 2 MiB, advised `MADV_HUGEPAGE` and populated
//! at once (`MADV_POPULATE_WRITE`), so the kernel hands out huge pages where it has them and
//! 4 KiB pages otherwise (same RSS either way: the step is committed in full). A huge-page commit
//! that turns out slower than 4 KiB pages would have been (a hypervisor backing the pages only
//! now) switches the next commits to 4 KiB pages for a while (`SLOW_NS_PER_4K`). Where the kernel
//! has no `MADV_POPULATE_WRITE` (before Linux 5.14) the pages are touched one by one instead.
//!
//! Nothing here is ever unmapped: pointers into these ranges are handed to C for the life of the
//! process.

use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Alignment and granularity of commits: one x86-64 huge page.
pub const HUGE: usize = 2 << 20;

/// `MADV_POPULATE_WRITE` (Linux 5.14); not in every `libc` release.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Reserves `want` bytes of address space (no memory), `HUGE`-aligned; when the kernel or an
/// address-space limit (`ulimit -v`, valgrind) refuses, a quarter of the size, down to `min`.
/// Returns the base and the usable size.
pub fn reserve(want: usize, min: usize) -> Option<(*mut u8, usize)> {
    let mut size = want;
    loop {
        // SAFETY:
        // - an anonymous PROT_NONE reservation; no existing mapping is touched.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size + HUGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // The unused head (below the aligned base) stays reserved and unused.
            let base = (p as usize).next_multiple_of(HUGE);
            return Some((base as *mut u8, size));
        }
        if size <= min {
            return None;
        }
        size /= 4;
    }
}

/// Maps fresh anonymous read-write memory over `[at, at + len)` (`MAP_FIXED`, plus `flags`).
/// `None` when the kernel refuses.
///
/// # Safety
/// As [`commit`]: the range is the caller's own uncommitted part of a reservation.
unsafe fn map_read_write(at: *mut u8, len: usize, flags: libc::c_int) -> Option<*mut libc::c_void> {
    // SAFETY:
    // - caller contract: the range is our own uncommitted PROT_NONE reservation, so MAP_FIXED
    //   replaces nothing anyone else uses.
    let p = unsafe {
        libc::mmap(
            at.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | flags,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p)
}

/// Makes `[at, at + len)` readable and writable and populates it (huge pages where possible).
/// False when the kernel refuses the mapping (out of memory).
///
/// # Safety
/// The range must lie inside a reservation from [`reserve`] that the caller owns and has not
/// committed yet; `at` and `len` must be multiples of the page size.
pub unsafe fn commit(at: *mut u8, len: usize) -> bool {
    // SAFETY: caller contract (forwarded).
    let Some(p) = (unsafe { map_read_write(at, len, 0) }) else { return false };
    // Relaxed: a heuristic shared by all commits; a stale value only changes one page size.
    let skip = SKIP_HUGE.load(Ordering::Relaxed);
    let huge = skip == 0;
    if !huge {
        SKIP_HUGE.store(skip - 1, Ordering::Relaxed);
    }
    let t0 = huge.then(std::time::Instant::now);
    // SAFETY:
    // - advice and population on the range just mapped; errors only mean "not done".
    unsafe {
        if huge {
            // Advice only: with THP disabled the range keeps 4 KiB pages.
            libc::madvise(p, len, libc::MADV_HUGEPAGE);
        }
        if libc::madvise(p, len, MADV_POPULATE_WRITE) != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
        {
            // Older kernel: fault the pages in now rather than one at a time on the hot path.
            // (Other errors, e.g. ENOMEM, leave the pages to be faulted on first use.)
            for off in (0..len).step_by(4096) {
                ptr::write_volatile(at.add(off), 0);
            }
        }
    }
    if let Some(t0) = t0 {
        // Relaxed: as above.
        if t0.elapsed().as_nanos() > (len / 4096) as u128 * SLOW_NS_PER_4K {
            // Back off exponentially while huge pages stay slow (the warm ones are used up).
            let backoff = (BACKOFF.load(Ordering::Relaxed) * 2).clamp(SKIP_AFTER_SLOW, 1 << 12);
            BACKOFF.store(backoff, Ordering::Relaxed);
            SKIP_HUGE.store(backoff, Ordering::Relaxed);
        } else {
            BACKOFF.store(SKIP_AFTER_SLOW / 2, Ordering::Relaxed);
        }
    }
    true
}

/// Makes `[at, at + len)` readable and writable without populating it, in 4 KiB pages
/// (`MADV_NOHUGEPAGE`, so that a kernel with transparent huge pages "always" does not back a
/// single write with 2 MiB): each page costs RSS only once something writes to it. For memory
/// that most objects never touch (the instances' side cells). False when the kernel refuses.
///
/// # Safety
/// As [`commit`].
pub unsafe fn commit_lazy(at: *mut u8, len: usize) -> bool {
    // SAFETY: caller contract (forwarded).
    let Some(p) = (unsafe { map_read_write(at, len, libc::MAP_NORESERVE) }) else { return false };
    // SAFETY: advice on the range just mapped; an error only means "not done".
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    true
}

/// A huge-page commit slower than this per 4 KiB (a 4 KiB-page commit costs 1.3–2 µs per page on
/// the reference VM, a huge page 0.36 µs per 4 KiB) got huge pages the hypervisor had not backed
/// (guests that report free memory to the host, e.g. virtio free page reporting, get such pages
/// back cold, 5–9 µs per 4 KiB); 4 KiB pages come from the guest's warm low-order free lists.
const SLOW_NS_PER_4K: u128 = 2500;
/// Commits made with 4 KiB pages after a slow huge-page commit before huge pages are tried again
/// (doubled after each further slow try, up to 4096). Small: a single cold huge page among warm
/// ones is common, and a retry that is slow again costs one step.
const SKIP_AFTER_SLOW: u32 = 4;
static SKIP_HUGE: AtomicU32 = AtomicU32::new(0);
static BACKOFF: AtomicU32 = AtomicU32::new(SKIP_AFTER_SLOW / 2);

/// Address space for [`static_chunk`]: chunks are carved upwards and committed in `HUGE` steps.
const CHUNKS_RESERVE: usize = 16 << 30;
const CHUNKS_RESERVE_MIN: usize = 64 << 20;

struct Chunks {
    base: *mut u8,
    reserved: usize,
    carved: usize,
    committed: usize,
}

// SAFETY: the raw base is a process-lifetime mapping; all access is under the mutex.
unsafe impl Send for Chunks {}

static CHUNKS: std::sync::Mutex<Chunks> =
    std::sync::Mutex::new(Chunks { base: ptr::null_mut(), reserved: 0, carved: 0, committed: 0 });

/// `size` bytes (a multiple of 4096) of populated, never-freed memory, 4096-aligned and
/// zero-filled (fresh anonymous memory, never handed out before), for the per-thread arenas and
/// large intern tables; null when the address space or memory is exhausted (the caller then uses
/// the global allocator). One short lock per chunk, not per allocation.
pub fn static_chunk(size: usize) -> *mut u8 {
    let mut c = CHUNKS.lock().unwrap_or_else(|e| e.into_inner());
    if c.base.is_null() {
        let Some((base, reserved)) = reserve(CHUNKS_RESERVE, CHUNKS_RESERVE_MIN) else {
            return ptr::null_mut();
        };
        c.base = base;
        c.reserved = reserved;
    }
    let need = c.carved + size;
    if need > c.committed {
        let grow = (need - c.committed).next_multiple_of(HUGE);
        if c.committed + grow > c.reserved {
            return ptr::null_mut();
        }
        // SAFETY:
        // - the range is inside our reservation, above everything committed so far (only this
        //   function commits, under the lock); HUGE multiples keep it page aligned.
        if !unsafe { commit(c.base.add(c.committed), grow) } {
            return ptr::null_mut();
        }
        c.committed += grow;
    }
    // SAFETY: `carved + size <= committed <= reserved`: inside the reservation.
    let p = unsafe { c.base.add(c.carved) };
    c.carved = need;
    p
}
