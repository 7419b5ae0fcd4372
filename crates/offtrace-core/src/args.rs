//! Argument iteration: a record's arguments as (index, type, name, value text, address,
//! indirection count), from the kind's argument descriptors and the payload's raw values.
//!
//! Cold: formats into a reused `String`; meant for tools printing calls, not for the record path.

#![allow(unsafe_code)] // reads the payload and, when asked to dereference, C strings

use std::ffi::{c_char, c_void};
use std::fmt::Write as _;

use crate::callback::CallbackRecord;
use crate::error::ServiceError;
use crate::kind::{ArgDescriptor, ArgFormat, Kind};
use crate::payload::arg_values;

/// One argument, valid during the iteration callback.
#[derive(Debug, Clone, Copy)]
pub struct ArgInfo<'a> {
    pub index: u32,
    pub type_name: &'static str,
    pub name: &'static str,
    pub value: &'a str,
    /// Where the raw value sits in the payload.
    pub address: *const c_void,
    pub indirection_count: i32,
}

/// Longest C string read when dereferencing a `const char*` argument.
pub const MAX_STRING: usize = 256;

fn mask(v: u64, size: u8) -> u64 {
    if size >= 8 { v } else { v & ((1u64 << (u32::from(size) * 8)) - 1) }
}

/// Formats one raw value. `max_deref > 0` allows reading through `const char*` arguments.
///
/// # Safety
///
/// When `max_deref > 0`, a non-null `CString` value must point at readable memory (true for a
/// payload delivered in a callback, during the callback).
pub unsafe fn format_value(out: &mut String, d: &ArgDescriptor, v: u64, max_deref: i32) {
    out.clear();
    let v = mask(v, d.size);
    let _ = match d.format {
        ArgFormat::Unsigned | ArgFormat::Enum => write!(out, "{v}"),
        ArgFormat::Signed => {
            let shift = 64 - u32::from(d.size.clamp(1, 8)) * 8;
            write!(out, "{}", ((v << shift) as i64) >> shift)
        }
        ArgFormat::Hex => write!(out, "{v:#x}"),
        ArgFormat::Bool => write!(out, "{}", v != 0),
        ArgFormat::Pointer if v == 0 => write!(out, "nullptr"),
        ArgFormat::Pointer => write!(out, "{v:#x}"),
        ArgFormat::CString if v == 0 => write!(out, "nullptr"),
        ArgFormat::CString if max_deref > 0 => {
            let p = v as *const c_char;
            // SAFETY: the caller guarantees `p` is readable; strnlen bounds the read.
            let len = unsafe { libc::strnlen(p, MAX_STRING) };
            // SAFETY: `len` bytes at `p` are readable (strnlen read them).
            let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
            write!(out, "\"{}\"", String::from_utf8_lossy(bytes))
        }
        ArgFormat::CString => write!(out, "{v:#x}"),
    };
}

/// Calls `f` for each argument of `record` in order until it returns `false`.
///
/// # Safety
///
/// `record.payload` must be null or the payload of `record.kind` as delivered to a callback, and
/// still valid (call this from inside the callback).
pub unsafe fn iterate_operation_args(
    record: &CallbackRecord,
    max_deref: i32,
    mut f: impl FnMut(&ArgInfo<'_>) -> bool,
) -> Result<(), ServiceError> {
    let kind = Kind::from_u32(record.kind).ok_or(ServiceError::KindNotFound)?;
    let op = kind.operation(record.operation).ok_or(if kind.operations().is_empty() {
        ServiceError::NotAvailable
    } else {
        ServiceError::OperationNotFound
    })?;
    if record.payload.is_null() {
        return Err(ServiceError::NotAvailable);
    }
    let mut values = Vec::with_capacity(op.args.len());
    // SAFETY: forwarded from this function's contract.
    unsafe { arg_values(kind, record.payload, &mut values) };
    let mut text = String::with_capacity(64);
    for (i, (d, &(v, address))) in op.args.iter().zip(values.iter()).enumerate() {
        // SAFETY: forwarded: the payload (and what it points at) is live during the callback.
        unsafe { format_value(&mut text, d, v, max_deref) };
        let info = ArgInfo {
            index: i as u32,
            type_name: d.type_name,
            name: d.name,
            value: &text,
            address,
            indirection_count: d.indirection_count(),
        };
        if !f(&info) {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! fmt_case {
        ($name:ident, $fmt:ident, $size:literal, $v:expr, $want:literal) => {
            #[test]
            fn $name() {
                let d = ArgDescriptor { name: "x", type_name: "t", size: $size, format: ArgFormat::$fmt };
                let mut s = String::new();
                // SAFETY: no dereference (max_deref = 0).
                unsafe { format_value(&mut s, &d, $v, 0) };
                assert_eq!(s, $want);
            }
        };
    }
    fmt_case!(unsigned_masks_to_size, Unsigned, 4, 0xffff_ffff_0000_0005, "5");
    fmt_case!(signed_extends_i32, Signed, 4, 0xffff_fffe, "-2");
    fmt_case!(signed_i64_min, Signed, 8, 1 << 63, "-9223372036854775808");
    fmt_case!(hex_flags, Hex, 8, 255, "0xff");
    fmt_case!(pointer_null, Pointer, 8, 0, "nullptr");
    fmt_case!(pointer_value, Pointer, 8, 0x1000, "0x1000");
    fmt_case!(cstring_not_dereferenced, CString, 8, 0x2000, "0x2000");
    fmt_case!(bool_true, Bool, 1, 0x100 | 1, "true");

    #[test]
    fn cstring_dereferenced() {
        let d = ArgDescriptor { name: "s", type_name: "const char*", size: 8, format: ArgFormat::CString };
        let msg = c"hello";
        let mut s = String::new();
        // SAFETY: `msg` is a live C string.
        unsafe { format_value(&mut s, &d, msg.as_ptr() as u64, 1) };
        assert_eq!(s, "\"hello\"");
    }
}
