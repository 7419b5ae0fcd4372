//! The one naming style of every report section and export: how a kernel, command or call is
//! shown to a person.
//!
//! - Itanium-mangled names (`_Z…`, the SYCL runtime's kernel names are `_ZTS…` type names) are
//!   demangled, without the demangler's `typeinfo name for ` prefix; SYCL's inline namespace
//!   `sycl::_V1::` reads `sycl::`.
//! - A name is never cut in the middle: where space is short, [`shorten_left`] keeps the end
//!   (where a C++ name keeps what tells two kernels apart: the lambda, the template arguments)
//!   and marks what it left out with `…` at the start, at a `::` boundary when there is one.
//!
//! Demangling costs microseconds: callers name each string definition once and keep the result.

use std::borrow::Cow;

const TYPEINFO_NAME: &str = "typeinfo name for ";

/// The name as reports and exports show it.
pub fn display_name(raw: &str) -> Cow<'_, str> {
    let raw = raw.trim();
    let s: Cow<'_, str> = if raw.starts_with("_Z") {
        match demangle(raw) {
            Some(d) => Cow::Owned(d),
            None => Cow::Borrowed(raw),
        }
    } else {
        Cow::Borrowed(raw)
    };
    let s = match s.strip_prefix(TYPEINFO_NAME) {
        Some(rest) => Cow::Owned(rest.to_owned()),
        None => s,
    };
    if s.contains("sycl::_V1::") { Cow::Owned(s.replace("sycl::_V1::", "sycl::")) } else { s }
}

fn demangle(raw: &str) -> Option<String> {
    let sym = cpp_demangle::Symbol::new(raw.as_bytes()).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().no_return_type();
    sym.demangle(&opts).ok()
}

/// `name` in at most `max_chars` characters: whole if it fits, else its end with `…` in front,
/// starting after a `::` where one is close enough.
pub fn shorten_left(name: &str, max_chars: usize) -> Cow<'_, str> {
    let len = name.chars().count();
    if len <= max_chars || max_chars < 2 {
        return Cow::Borrowed(name);
    }
    let keep = max_chars - 1;
    let start = name.char_indices().nth(len - keep).map_or(0, |(i, _)| i);
    let tail = &name[start..];
    // Prefer to start right after a `::` within the first third of the kept part.
    let tail = match tail.find("::") {
        Some(i) if i + 2 < tail.len() && i <= keep / 3 => &tail[i + 2..],
        _ => tail.trim_start_matches(':'),
    };
    Cow::Owned(format!("…{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sycl_kernel_type_names_are_demangled_without_typeinfo() {
        let n = display_name("_ZTSZZ4mainENKUlRN4sycl3_V17handlerEE_clES2_EUlNS0_2idILi1EEEE_");
        assert!(!n.contains("typeinfo"), "{n}");
        assert!(!n.contains("_V1"), "{n}");
        assert!(n.starts_with("main::"), "{n}");
        assert!(n.contains("lambda(sycl::id<1>)"), "{n}");
        assert_eq!(display_name("_ZTS12ReduceKernelIfLi256EE"), "ReduceKernel<float, 256>");
    }

    #[test]
    fn plain_and_broken_names_stay_as_they_are() {
        assert_eq!(display_name("scale_add"), "scale_add");
        assert_eq!(display_name("_Znot a symbol"), "_Znot a symbol");
        assert_eq!(display_name("typeinfo name for Foo"), "Foo");
    }

    #[test]
    fn shortening_keeps_the_end_and_marks_the_cut() {
        assert_eq!(shorten_left("short", 10), "short");
        let long = "dpnp::kernels::elementwise::add_contig_kernel<float, float, float, 4u, 2u, true>";
        let s = shorten_left(long, 40);
        assert!(s.starts_with('…'), "{s}");
        assert!(s.chars().count() <= 40, "{s}");
        assert!(long.ends_with(&s[3..]), "{s}");
        assert_eq!(shorten_left("aaaa::bbbbbbbbbbbbbbbbbbbb", 22), "…bbbbbbbbbbbbbbbbbbbb");
    }
}
