//! Tables generated from the CUDA 13.0 / CUPTI 13.0 headers by `gen/gen_tables.py` (see there
//! for how; `gen/fetch-headers.sh` fetches the headers from PyPI). Checked in: building needs
//! no CUDA.

#![allow(non_snake_case, non_upper_case_globals, clippy::all)]

pub mod cupti_layout;
pub mod driver_api;
pub mod runtime_api;
