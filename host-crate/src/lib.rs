//! # ferrocuda
//!
//! GPU kernels written in pure Rust (the `ferrocuda-kernels` crate, compiled to PTX), launched
//! from Rust with `cust`, checked against the CPU and measured against the memory speed limit.
//!
//! The layers, each using only the ones above it:
//! - [`runtime`]: the device ([`Gpu`]), launch configurations, typed kernel launches
//!   ([`runtime::kernel`]), errors, timing;
//! - [`cpu`]: what every kernel computes, as CPU references the GPU results are checked against;
//! - the kernel families: [`reduce`], [`stencil`], [`lab`] (warp functions, divergence),
//!   [`occupancy`], [`smoke`];
//! - the tools: [`bench`](mod@bench) (the benchmark and its report), [`sanitize`] (the compute-sanitizer
//!   pass), [`toolkit`] (finding `nvcc` and `compute-sanitizer`), [`args`] (size arguments).
//!
//! The `ferrocuda` command line (`src/bin/ferrocuda/`) is built on this library.
pub mod args;
pub mod bench;
pub mod cpu;
pub mod lab;
pub mod occupancy;
pub mod reduce;
pub mod runtime;
pub mod sanitize;
pub mod smoke;
pub mod stencil;
pub mod toolkit;

pub use ferrocuda_kernels as kernels;
pub use runtime::config::LaunchConfig;
pub use runtime::error::{Error, Result};
pub use runtime::gpu::{DeviceProps, Gpu};
pub use runtime::kernel::Kernel;
