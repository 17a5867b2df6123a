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
pub mod cpu;
pub mod lab;
pub mod occupancy;
pub mod reduce;
pub mod runtime;
pub mod smoke;
pub mod stencil;

pub use ferrocuda_kernels as kernels;
pub use runtime::gpu::EmbeddedPtx;

// `include_ptx!` tables name `::ferrocuda::EmbeddedPtx`, in this crate as in a user's.
extern crate self as ferrocuda;

/// The PTX that `ferrocuda-builder` built for the kernel crate whose library is `$lib`, from
/// this package's `build.rs`: a `&'static [EmbeddedPtx]`, lowest architecture first.
///
/// ```ignore
/// static KERNELS: &[ferrocuda::EmbeddedPtx] = ferrocuda::include_ptx!("my_kernels");
/// ```
#[macro_export]
macro_rules! include_ptx {
    ($lib:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $lib, "_ptx.rs"))
    };
}
pub use runtime::config::LaunchConfig;
pub use runtime::error::{Error, Result};
pub use runtime::gpu::{DeviceProps, Gpu};
pub use runtime::kernel::Kernel;
