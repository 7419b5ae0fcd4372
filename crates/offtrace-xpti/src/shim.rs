//! FFI to the C++ shim (`cpp/instance_shim.cpp`): the side cell's interface vtables and the
//! libstdc++ metadata map.

use std::ffi::{c_char, c_int, c_void};

/// `const char *lookup(uint32_t id)`.
pub type LookupStringHook = unsafe extern "C" fn(u32) -> *const c_char;
/// `uint32_t register(const char *s)`.
pub type RegisterStringHook = unsafe extern "C" fn(*const c_char) -> u32;

#[allow(dead_code)] // the map helpers are used by tests and kept for tools
unsafe extern "C" {
    pub fn ot_shim_set_hooks(lookup: LookupStringHook, register: RegisterStringHook);
    pub fn ot_shim_set_side_offset(side_to_event: isize);
    pub fn ot_side_size() -> usize;
    pub fn ot_side_align() -> usize;
    pub fn ot_layout(out: *mut usize);
    pub fn ot_side_construct(mem: *mut c_void);
    pub fn ot_map_insert_or_assign(map: *mut c_void, key: u32, value: i32) -> c_int;
    pub fn ot_map_size(map: *const c_void) -> usize;
    pub fn ot_map_find(map: *const c_void, key: u32, value: *mut i32) -> c_int;
    pub fn ot_map_clear(map: *mut c_void);
    pub fn ot_map_construct(mem: *mut c_void);
    /// Checks the map's allocation-light first insert against libstdc++ and enables it (1) or
    /// leaves every insert to libstdc++ (0).
    pub fn ot_map_fast_first_enable() -> c_int;
    pub fn ot_map_destroy(mem: *mut c_void);
}

/// Byte offsets inside one side cell (checked against the C++ compiler's at start-up). The
/// event is a separate 128-byte cell (`instance.rs`).
pub mod layout {
    /// Size of a side cell, equal to the size of an event cell.
    pub const SIDE: usize = 128;
    pub const PAYLOAD_IFACE: usize = 0;
    pub const EVENT_IFACE: usize = 8;
    pub const METADATA_IFACE: usize = 16;
    pub const TRACEPOINT_IFACE: usize = 24;
    pub const PAYLOAD: usize = 32;
    pub const ITER: usize = 112;
}

/// Whether the C++ compiler laid the side cell out as `layout` says.
pub fn layout_matches() -> bool {
    let mut out = [0usize; 6];
    // SAFETY:
    // - `out` has the 6 slots the shim writes; the shim only uses its own static buffer.
    unsafe {
        ot_layout(out.as_mut_ptr());
        out == [
            layout::PAYLOAD_IFACE,
            layout::EVENT_IFACE,
            layout::METADATA_IFACE,
            layout::TRACEPOINT_IFACE,
            layout::PAYLOAD,
            layout::ITER,
        ] && ot_side_size() == layout::SIDE
            && ot_side_align() <= 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{MetadataMapImage, MetadataNode};

    #[test]
    fn shim_layout_is_what_rust_assumes() {
        assert!(layout_matches());
    }

    #[test]
    fn map_image_matches_libstdcxx_description() {
        let mut mem = std::mem::MaybeUninit::<MetadataMapImage>::uninit();
        let p = mem.as_mut_ptr().cast::<c_void>();
        // SAFETY: 56 bytes, 8-aligned, constructed and destroyed by the shim.
        unsafe {
            ot_map_construct(p);
            let m = &*mem.as_ptr();
            assert_eq!(m.bucket_count, 1);
            assert_eq!(m.buckets as usize, p as usize + 48);
            assert_eq!(m.element_count, 0);
            assert_eq!(m.max_load_factor, 1.0);
            assert_eq!(ot_map_insert_or_assign(p, 7, -3), 0);
            assert_eq!(ot_map_insert_or_assign(p, 9, 4), 0);
            assert_eq!(ot_map_insert_or_assign(p, 7, 5), 1);
            let m = &*mem.as_ptr();
            assert_eq!(m.element_count, 2);
            assert_eq!(m.bucket_count, 13);
            let mut seen = vec![];
            let mut n: *mut MetadataNode = m.before_begin_next;
            while !n.is_null() {
                seen.push(((*n).key, (*n).value));
                n = (*n).next;
            }
            assert_eq!(seen, vec![(9, 4), (7, 5)]);
            ot_map_destroy(p);
        }
    }

    #[test]
    fn first_insert_stays_on_the_inline_bucket_and_grows_like_libstdcxx() {
        // SAFETY: the self-check uses its own scratch maps.
        assert_eq!(unsafe { ot_map_fast_first_enable() }, 1);
        let mut mem = std::mem::MaybeUninit::<MetadataMapImage>::uninit();
        let p = mem.as_mut_ptr().cast::<c_void>();
        // SAFETY: 56 bytes, 8-aligned, constructed and destroyed by the shim.
        unsafe {
            ot_map_construct(p);
            assert_eq!(ot_map_insert_or_assign(p, 7, -3), 0);
            let m = &*mem.as_ptr();
            assert_eq!((m.bucket_count, m.element_count), (1, 1));
            assert_eq!(m.buckets as usize, p as usize + 48);
            let mut v = 0;
            assert_eq!(ot_map_find(p, 7, &mut v), 1);
            assert_eq!(v, -3);
            assert_eq!(ot_map_insert_or_assign(p, 7, 5), 1);
            assert_eq!(ot_map_insert_or_assign(p, 9, 4), 0);
            let m = &*mem.as_ptr();
            assert_eq!((m.bucket_count, m.element_count), (13, 2));
            let mut seen = vec![];
            let mut n: *mut MetadataNode = m.before_begin_next;
            while !n.is_null() {
                seen.push(((*n).key, (*n).value));
                n = (*n).next;
            }
            assert_eq!(seen, vec![(9, 4), (7, 5)]);
            ot_map_destroy(p);
        }
    }
}
