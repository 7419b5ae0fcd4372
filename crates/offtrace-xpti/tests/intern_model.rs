//! Model test of string and object interning through the dispatcher entry points: whatever the
//! sequence of registrations, IDs equal those of a `HashMap` model (strings sequential from the
//! first ID handed out in this process, objects de-duplicated by bytes with the first type kept),
//! interned pointers never change, and lookups round-trip. Runs concurrently with the other tests
//! of this binary only through disjoint values, so it compares deltas, not absolute IDs.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};

use offtrace_xpti::dispatch as d;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn strings_match_a_hashmap_model(words in proptest::collection::vec("[a-z]{0,3}", 1..200), salt in any::<u64>()) {
        let mut model: HashMap<String, (u32, *const c_char)> = HashMap::new();
        let mut next_expected: Option<u32> = None;
        for w in &words {
            let s = format!("model.{salt:x}.{w}");
            let c = CString::new(s.clone()).expect("no NUL");
            let mut out: *mut c_char = std::ptr::null_mut();
            // SAFETY: valid C string and out pointer.
            let id = unsafe { d::register_string(c.as_ptr(), &mut out) };
            match model.get(&s) {
                Some(&(mid, mptr)) => {
                    prop_assert_eq!(id, mid);
                    prop_assert_eq!(out.cast_const(), mptr);
                }
                None => {
                    if let Some(n) = next_expected {
                        prop_assert_eq!(id, n, "new strings get the next ID");
                    }
                    next_expected = Some(id + 1);
                    model.insert(s.clone(), (id, out.cast_const()));
                }
            }
            // SAFETY: interned strings are valid, never-freed C strings.
            let back = unsafe { CStr::from_ptr(d::lookup_string(id)) };
            prop_assert_eq!(back.to_str().ok(), Some(s.as_str()));
        }
    }

    #[test]
    fn objects_match_a_hashmap_model(values in proptest::collection::vec((0u8..16, 0u8..6), 1..200), salt in any::<u64>()) {
        let mut model: HashMap<Vec<u8>, (i32, u8)> = HashMap::new();
        for (v, ty) in values {
            let bytes = [&salt.to_le_bytes()[..], &[v]].concat();
            // SAFETY: valid slice.
            let id = unsafe { d::register_object(bytes.as_ptr().cast(), bytes.len(), ty) };
            let (mid, mty) = *model.entry(bytes.clone()).or_insert((id, ty));
            prop_assert_eq!(id, mid);
            let o = d::lookup_object(id);
            prop_assert_eq!(o.size, bytes.len());
            prop_assert_eq!(o.type_, mty, "the first type wins");
            // SAFETY: object data is never freed; `size` bytes readable.
            prop_assert_eq!(unsafe { std::slice::from_raw_parts(o.data.cast::<u8>(), o.size) }, &bytes[..]);
        }
    }
}
