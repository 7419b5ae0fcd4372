//! Test hooks (`include/offtrace/offtrace_testing.h`): a mock backend that emits records the way
//! a real backend does (through `offtrace_core::emit_*`), for C tests and example tools to run
//! without a SYCL runtime. Not part of the tool API; stable only as far as the tests need.

use std::ffi::{CStr, c_char};

use offtrace_core::{
    ApiCallPayload, ArgDescriptor, ArgFormat, CodeObjectPayload, KernelDispatchPayload, Kind, MAX_KERNEL_ARGS,
    MemoryAllocPayload, MemoryType, Operation, Payload, Phase,
};

use crate::{OFFTRACE_STATUS_SUCCESS, guard, offtrace_status_t};

macro_rules! a {
    ($n:literal, $t:literal, $s:literal, $f:ident) => {
        ArgDescriptor { name: $n, type_name: $t, size: $s, format: ArgFormat::$f }
    };
}

/// Four real UR functions (ids and parameters as in `ur_api.h` v0.12).
static MOCK_UR: &[Operation] = &[
    Operation {
        id: 33,
        name: "urEnqueueUSMMemcpy",
        args: &[
            a!("hQueue", "ur_queue_handle_t", 8, Pointer),
            a!("blocking", "bool", 1, Bool),
            a!("pDst", "void *", 8, Pointer),
            a!("pSrc", "const void *", 8, Pointer),
            a!("size", "size_t", 8, Unsigned),
            a!("numEventsInWaitList", "uint32_t", 4, Unsigned),
            a!("phEventWaitList", "const ur_event_handle_t *", 8, Pointer),
            a!("phEvent", "ur_event_handle_t *", 8, Pointer),
        ],
    },
    Operation {
        id: 48,
        name: "urKernelCreate",
        args: &[
            a!("hProgram", "ur_program_handle_t", 8, Pointer),
            a!("pKernelName", "const char *", 8, CString),
            a!("phKernel", "ur_kernel_handle_t *", 8, Pointer),
        ],
    },
    Operation { id: 97, name: "urQueueFinish", args: &[a!("hQueue", "ur_queue_handle_t", 8, Pointer)] },
    Operation {
        id: 108,
        name: "urUSMDeviceAlloc",
        args: &[
            a!("hContext", "ur_context_handle_t", 8, Pointer),
            a!("hDevice", "ur_device_handle_t", 8, Pointer),
            a!("pUSMDesc", "const ur_usm_desc_t *", 8, Pointer),
            a!("pool", "ur_usm_pool_handle_t", 8, Pointer),
            a!("size", "size_t", 8, Unsigned),
            a!("ppMem", "void **", 8, Pointer),
        ],
    },
];

/// Installs the mock `UR_API` operation table (urEnqueueUSMMemcpy = 33, urKernelCreate = 48,
/// urQueueFinish = 97, urUSMDeviceAlloc = 108). Succeeds if a table is already installed.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_testing_register_mock_ur_table() -> offtrace_status_t {
    let _ = offtrace_core::register_kind_operations(Kind::UrApi, MOCK_UR);
    OFFTRACE_STATUS_SUCCESS
}

/// Emits one `UR_API` call (enter, then exit with `result`) with the raw argument values, and
/// returns its correlation id (0 when no context saw it).
///
/// # Safety
/// `args` must be null or hold `arg_count` values; pointer arguments the tool may dereference
/// must be valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_testing_emit_ur_call(
    function_id: u32,
    args: *const u64,
    arg_count: u32,
    result: i32,
) -> u64 {
    std::panic::catch_unwind(|| {
        let a = if args.is_null() || arg_count == 0 {
            &[][..]
        } else {
            // SAFETY: non-null, `arg_count` values per the contract.
            unsafe { std::slice::from_raw_parts(args, arg_count as usize) }
        };
        let mut p = ApiCallPayload::new(function_id, a);
        let token = offtrace_core::emit_enter(Kind::UrApi, function_id, Payload::UrApi(&p));
        let corr = token.correlation_id();
        p.result = result;
        p.has_result = 1;
        offtrace_core::emit_exit(token, Payload::UrApi(&p));
        corr
    })
    .unwrap_or(0)
}

/// Emits `MEMORY_ALLOC`/`alloc` and records the allocation in the live table.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_testing_emit_memory_alloc(ptr: u64, size: u64, memory_type: u32) -> offtrace_status_t {
    guard(|| {
        let p = MemoryAllocPayload { ptr, size, memory_type: MemoryType::from_u32(memory_type), device: 0 };
        offtrace_core::emit_memory_alloc(&p);
        Ok(())
    })
}

/// Emits `MEMORY_ALLOC`/`free` and removes the allocation from the live table.
#[unsafe(no_mangle)]
pub extern "C" fn offtrace_testing_emit_memory_free(ptr: u64) -> offtrace_status_t {
    guard(|| {
        offtrace_core::emit_memory_free(ptr);
        Ok(())
    })
}

/// Emits `urEnqueueKernelLaunch`-style work: a `KERNEL_DISPATCH`/`kernel_launch` record (phase
/// NONE) with the kernel's raw argument values and one implicit allocation when
/// `implicit_size` > 0.
///
/// # Safety
/// `kernel_name` must be null or NUL-terminated; `kernel_args` null or `arg_count` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_testing_emit_kernel_dispatch(
    kernel: u64,
    kernel_name: *const c_char,
    kernel_args: *const u64,
    arg_count: u32,
    implicit_base: u64,
    implicit_size: u64,
) -> offtrace_status_t {
    guard(|| {
        let n = (arg_count as usize).min(MAX_KERNEL_ARGS);
        let mut p = KernelDispatchPayload { kernel, kernel_name, work_dim: 1, ..Default::default() };
        if !kernel_args.is_null() {
            // SAFETY: non-null, `arg_count` values per the contract.
            p.kernel_args[..n].copy_from_slice(unsafe { std::slice::from_raw_parts(kernel_args, n) });
            p.kernel_arg_count = n as u32;
        }
        let implicit = [offtrace_core::ImplicitAllocation {
            base: implicit_base,
            size: implicit_size,
            memory_type: MemoryType::Unknown,
        }];
        if implicit_size > 0 {
            p.implicit_allocations = implicit.as_ptr();
            p.implicit_allocation_count = 1;
        }
        p.global_size = [64, 1, 1];
        p.local_size = [16, 1, 1];
        offtrace_core::emit_instant(
            Kind::KernelDispatch,
            offtrace_core::kernel_dispatch::LAUNCH,
            Phase::None,
            Payload::KernelDispatch(&p),
        );
        Ok(())
    })
}

/// Emits a `CODE_OBJECT` record: `operation` (program 0, program_build 1, kernel 2) with phase
/// LOAD (`load` != 0) or UNLOAD.
///
/// # Safety
/// `name` must be null or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offtrace_testing_emit_code_object(
    operation: u32,
    load: i32,
    handle: u64,
    name: *const c_char,
) -> offtrace_status_t {
    guard(|| {
        if !name.is_null() {
            // SAFETY: NUL-terminated per the contract (validated by reading it once).
            let _ = unsafe { CStr::from_ptr(name) };
        }
        let p = CodeObjectPayload { handle, program: 0, name, binary_size: 0 };
        let phase = if load != 0 { Phase::Load } else { Phase::Unload };
        offtrace_core::emit_instant(Kind::CodeObject, operation, phase, Payload::CodeObject(&p));
        Ok(())
    })
}
