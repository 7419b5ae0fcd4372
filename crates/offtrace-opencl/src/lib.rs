//! offtrace-opencl: the OpenCL backend, an ICD loader layer.
//!
//! Load it into any OpenCL program through the ICD loader (no code change):
//!
//! ```sh
//! OPENCL_LAYERS=target/debug/libofftrace_opencl.so ./my_opencl_program
//! ```
//!
//! (`offtrace record -- CMD` sets this up.) The layer reports to offtrace's tracing services
//! (`offtrace-core`):
//!
//! - `OPENCL_API` enter/exit for every function of the OpenCL 3.0 headers and their
//!   extensions, with the raw argument values and the call's `cl_int` status (operation table
//!   generated from the Khronos headers: `api.rs`, `scripts/gen_opencl_table.py`);
//! - device activity (`KERNEL_DISPATCH`, `MEMORY_COPY`, `MEMORY_FILL`, `SYNC`) with each
//!   command's device start and end in the trace clock, correlated with the enqueuing call (or
//!   the UR call around it), collected in batches on in-order queues: `enqueue.rs`,
//!   `in_order.rs`, `calibration.rs`;
//! - memory objects, SVM and USM allocations (`MEMORY_ALLOC`), programs and kernels
//!   (`CODE_OBJECT`), kernel arguments for allocation properties: `objects.rs`;
//! - and it implements `cl_codeplay_performance_counters` for every device: `counters.rs`,
//!   `perf.rs`.
//!
//! What the layer changes in the program's view, and how that is hidden: `hooks.rs`.
//! Documentation: docs/opencl.md.

// This crate is an FFI layer between the ICD loader and a runtime: every entry point is an
// `extern "C"` function over raw pointers. Each `unsafe` block carries its SAFETY comment.
#![allow(unsafe_code)]

#[rustfmt::skip] // generated: scripts/gen_opencl_table.py --check compares it byte for byte
mod api;
pub mod calibration;
mod call;
pub mod counters;
pub mod enqueue;
pub mod graph;
mod hooks;
mod in_order;
pub mod layer;
#[cfg(test)]
mod mock_runtime_tests;
mod objects;
pub mod perf;
pub mod preload;
mod queues;
mod recording;
mod sampling;

pub use api::{DISPATCH_SLOTS, OPERATIONS, op};
pub use call::OPENCL_API;
