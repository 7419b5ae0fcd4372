//! The two API kinds' operation tables: every CUPTI callback id of the runtime and driver
//! domains, with its parameters as the generated tables describe them, and reading a call's
//! argument values out of CUPTI's parameter struct.
//!
//! A parameter is read as one `u64`: its first `min(size, 8)` bytes, zero-extended (sign-extended
//! for `Signed`). Parameters passed by value that are wider than 8 bytes (`cudaExtent`,
//! `cudaPitchedPtr`, IPC handles) therefore carry their first 8 bytes; `dim3` is split into its
//! three members by the generator.

use crate::generated::{driver_api::DRIVER_API, runtime_api::RUNTIME_API};

/// How a parameter's value prints (the core's `ArgFormat`, kept separate so the generated
/// tables do not depend on the services' types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamFormat {
    Unsigned,
    Signed,
    Hex,
    Pointer,
    Bool,
    CString,
    Enum,
}

/// One member of a CUPTI parameter struct (`<function>_params`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub c_type: &'static str,
    /// Byte offset in the parameter struct.
    pub offset: u16,
    /// `sizeof` the member.
    pub size: u16,
    pub format: ParamFormat,
}

/// One callback id of the runtime or driver domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiFunction {
    /// The CUPTI callback id (`CUpti_runtime_api_trace_cbid` / `CUpti_driver_api_trace_cbid`).
    pub id: u32,
    /// The function's name as CUPTI's `functionName` gives it (`cudaMalloc`, `cuMemAlloc_v2`).
    pub name: &'static str,
    /// The enumerator's suffix (`cudaMalloc_v3020`), which names the parameter struct.
    pub cbid_name: &'static str,
    /// `sizeof` the parameter struct (0 without one).
    pub params_size: u16,
    /// Whether the headers define a parameter struct for this id (ids of removed or internal
    /// functions have none: their calls carry no arguments).
    pub has_params: bool,
    pub params: &'static [Param],
}

/// The CUDA API domains offtrace traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiDomain {
    Runtime,
    Driver,
}

impl ApiDomain {
    /// Every callback id of the domain, sorted by id.
    pub fn functions(self) -> &'static [ApiFunction] {
        match self {
            ApiDomain::Runtime => RUNTIME_API,
            ApiDomain::Driver => DRIVER_API,
        }
    }

    /// The function with callback id `cbid`.
    pub fn function(self, cbid: u32) -> Option<&'static ApiFunction> {
        let f = self.functions();
        // CUPTI numbers ids densely from 1 (test `tables_are_sorted_unique_and_complete`): the
        // id's own index, checked (every callback looks its function up, twice per call).
        match f.get((cbid as usize).wrapping_sub(1)) {
            Some(e) if e.id == cbid => Some(e),
            _ => f.binary_search_by_key(&cbid, |f| f.id).ok().map(|i| &f[i]),
        }
    }

    /// The kind name tools see.
    pub fn kind_name(self) -> &'static str {
        match self {
            ApiDomain::Runtime => "CUDA_RUNTIME_API",
            ApiDomain::Driver => "CUDA_DRIVER_API",
        }
    }
}

/// Reads the argument values of `f` from its CUPTI parameter struct into `out` (one `u64` per
/// parameter, in declaration order); returns how many were written.
///
/// # Safety
/// `params` must be null or point to a readable `f.params_size`-byte parameter struct of `f`
/// (CUPTI's `functionParams` for this callback id).
pub unsafe fn read_args(f: &ApiFunction, params: *const u8, out: &mut [u64]) -> usize {
    if params.is_null() {
        return 0;
    }
    let n = f.params.len().min(out.len());
    for (slot, p) in out.iter_mut().zip(&f.params[..n]) {
        // SAFETY: the caller guarantees the struct is readable; offset + size lie inside it
        // (both come from the compiler's layout of this struct).
        *slot = unsafe { read_value(params.add(usize::from(p.offset)), p.size, p.format) };
    }
    n
}

/// # Safety
/// `at` must be readable for `min(size, 8)` bytes.
unsafe fn read_value(at: *const u8, size: u16, format: ParamFormat) -> u64 {
    // SAFETY: readable per the caller; unaligned reads because the struct may be packed.
    unsafe {
        match (size, format) {
            (1, ParamFormat::Signed) => at.cast::<i8>().read_unaligned() as i64 as u64,
            (2, ParamFormat::Signed) => at.cast::<i16>().read_unaligned() as i64 as u64,
            (4, ParamFormat::Signed) => at.cast::<i32>().read_unaligned() as i64 as u64,
            (1, _) => u64::from(at.read_unaligned()),
            (2, _) => u64::from(at.cast::<u16>().read_unaligned()),
            (4, _) => u64::from(at.cast::<u32>().read_unaligned()),
            (s, _) if s >= 8 => at.cast::<u64>().read_unaligned(),
            (s, _) => {
                let mut b = [0u8; 8];
                std::ptr::copy_nonoverlapping(at, b.as_mut_ptr(), usize::from(s));
                u64::from_le_bytes(b)
            }
        }
    }
}

/// The index of parameter `name` of `f`.
pub fn param_index(f: &ApiFunction, name: &str) -> Option<usize> {
    f.params.iter().position(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::cupti_layout as l;
    use crate::generated::{driver_api, runtime_api};

    #[test]
    fn tables_are_sorted_unique_and_complete() {
        for d in [ApiDomain::Runtime, ApiDomain::Driver] {
            let f = d.functions();
            assert!(f.windows(2).all(|w| w[0].id < w[1].id), "{d:?} sorted by id");
            assert_eq!(f[0].id, 1);
            // Every id from 1 to SIZE-1 is in the enum (CUPTI numbers them densely).
            assert_eq!(f.last().map(|f| f.id as usize), Some(f.len()), "{d:?} dense");
        }
        assert_eq!(RUNTIME_API.len(), 522);
        assert_eq!(DRIVER_API.len(), 806);
        for d in [ApiDomain::Runtime, ApiDomain::Driver] {
            assert!(d.functions().iter().all(|f| d.function(f.id).map(|g| g.id) == Some(f.id)));
            assert!(d.function(0).is_none() && d.function(d.functions().len() as u32 + 1).is_none());
            assert!(d.function(u32::MAX).is_none());
        }
    }

    #[test]
    fn known_ids_names_and_layouts() {
        // Values from cupti_runtime_cbid.h / cupti_driver_cbid.h of CUPTI 13.0.
        let rt = ApiDomain::Runtime.function(runtime_api::CBID_cudaLaunchKernel_v7000).expect("launch");
        assert_eq!((rt.id, rt.name), (211, "cudaLaunchKernel"));
        let names: Vec<_> = rt.params.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "func",
                "gridDim.x",
                "gridDim.y",
                "gridDim.z",
                "blockDim.x",
                "blockDim.y",
                "blockDim.z",
                "args",
                "sharedMem",
                "stream"
            ]
        );
        assert_eq!(rt.params_size, 56);
        let m = ApiDomain::Runtime.function(runtime_api::CBID_cudaMalloc_v3020).expect("malloc");
        assert_eq!(m.name, "cudaMalloc");
        assert_eq!(m.params[0].c_type, "void**");
        assert_eq!((m.params[1].name, m.params[1].offset, m.params[1].format), ("size", 8, ParamFormat::Unsigned));
        let d = ApiDomain::Driver.function(driver_api::CBID_cuLaunchKernel).expect("cuLaunchKernel");
        assert_eq!(d.id, 307);
        assert_eq!(param_index(d, "kernelParams"), Some(9));
        assert_eq!(d.params[9].offset, 48);
        assert_eq!(d.params[8].format, ParamFormat::Pointer, "CUstream is a handle");
        let a = ApiDomain::Driver.function(driver_api::CBID_cuMemAlloc_v2).expect("cuMemAlloc_v2");
        assert_eq!(a.params[1].c_type, "size_t");
        assert_eq!(a.params[0].format, ParamFormat::Pointer);
    }

    #[test]
    fn cupti_record_layouts() {
        // CUPTI 13.0 (CUPTI_API_VERSION 130001); LP64.
        assert_eq!(l::CUPTI_API_VERSION, 130001);
        assert_eq!(l::CUpti_CallbackData::correlationId, (64, 4));
        assert_eq!(l::CUpti_ActivityKernel10::start.0, 16);
        assert_eq!(l::CUpti_ActivityKernel10::name.1, 8);
        assert_eq!(l::CUpti_ActivityMemcpy6::bytes, (8, 8));
        assert_eq!(l::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 10);
        assert_eq!(l::CUPTI_ACTIVITY_KIND_MEMORY2, 49);
        assert_eq!(l::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 39);
    }

    #[test]
    fn reads_arguments_by_offset_and_width() {
        // cuLaunchKernel_params laid out by hand at the generated offsets.
        let f = ApiDomain::Driver.function(driver_api::CBID_cuLaunchKernel).expect("cuLaunchKernel");
        let mut buf = vec![0u8; usize::from(f.params_size)];
        buf[0..8].copy_from_slice(&0xdead_beef_u64.to_le_bytes());
        buf[8..12].copy_from_slice(&128u32.to_le_bytes());
        buf[40..48].copy_from_slice(&0x77u64.to_le_bytes());
        let mut out = [0u64; 17];
        // SAFETY: buf is params_size bytes.
        let n = unsafe { read_args(f, buf.as_ptr(), &mut out) };
        assert_eq!(n, 11);
        assert_eq!((out[0], out[1], out[8]), (0xdead_beef, 128, 0x77));
        // SAFETY: null is allowed.
        assert_eq!(unsafe { read_args(f, std::ptr::null(), &mut out) }, 0);
        let mut small = [0u64; 2];
        // SAFETY: as above.
        assert_eq!(unsafe { read_args(f, buf.as_ptr(), &mut small) }, 2);
    }

    #[test]
    fn signed_values_sign_extend() {
        let v = (-3i32).to_le_bytes();
        // SAFETY: 4 readable bytes.
        assert_eq!(unsafe { read_value(v.as_ptr(), 4, ParamFormat::Signed) }, (-3i64) as u64);
        // SAFETY: as above.
        assert_eq!(unsafe { read_value(v.as_ptr(), 4, ParamFormat::Unsigned) }, 0xffff_fffd);
    }
}
