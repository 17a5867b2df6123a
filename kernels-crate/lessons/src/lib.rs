//! # ferrocuda-lesson-kernels
//!
//! The kernels of the lessons, apart from the library's (`ferrocuda-kernels`): the notes'
//! textbook reductions and stencils, the warp and divergence lab, the smoke test, the timing
//! harness's blocking kernel, the device layer's self-tests and the kernels broken on purpose
//! for the sanitizer. The `ferrocuda` command line and the test suite load this PTX next to the
//! library's; a program that uses the library never does.
//!
//! Built to PTX by `ferrocuda-builder` (from `ferrocuda-lessons`' `build.rs` or `cargo xtask
//! build-ptx`); `no_std` on `nvptx64-nvidia-cuda`, an ordinary library of typed handles on the
//! host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod config;

pub use ferrocuda_device::device_global;
pub use ferrocuda_device::entry;
pub use ferrocuda_device::shared_array;

pub(crate) use ferrocuda_device as device;

pub mod broken;

pub mod lab;

pub mod probe;

pub mod reduce;

pub mod selftest;

pub mod smoke;

pub mod stencil;

pub mod timing;

pub mod traced;
