//! Tables generated from the CUDA 13.0 / CUPTI 13.0 headers by `gen/gen_tables.py` (see there
//! for how; `gen/fetch-headers.sh` fetches the headers from PyPI). Checked in: building needs
//! no CUDA. Not formatted by rustfmt: regenerating must give the same bytes.

#![allow(non_snake_case, non_upper_case_globals, clippy::all)]

#[rustfmt::skip]
pub mod cupti_layout;
#[rustfmt::skip]
pub mod driver_api;
#[rustfmt::skip]
pub mod runtime_api;
