//! `libamdhip64.so.5` built from kfdrt: HIP's C API with the ABI of Debian's HIP 5.2
//! headers (`/usr/include/hip/hip_runtime_api.h`, HIP_VERSION 5.2.21153).
//!
//! A thin layer: each entry point converts its C arguments, validates handles
//! ([`handles`]), calls kfdrt's Rust API and maps the error. HIP semantics live in kfdrt.
//! Every call sets the calling thread's last error to what it returns (HIP 5.2's
//! `HIP_RETURN`, ROCm/hipamd `src/hip_internal.hpp`); `hipGetLastError` returns and
//! clears it, `hipPeekAtLastError` only returns it.
//!
//! The soname and symbol versions come from `build.rs`.

#![deny(missing_docs)]
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    clippy::missing_safety_doc
)]

pub mod api;
pub mod error;
pub mod handles;
pub mod kernel;
pub mod layout;
pub mod managed;
pub mod pool;
pub mod types;
pub mod unsupported;
pub mod vmm;

include!(concat!(env!("OUT_DIR"), "/symver.rs"));
