//! # ferrocuda-kernels
//!
//! The kernels of ferrocuda, written with its device layer (`ferrocuda-device`, our
//! `cuda_std`, here under the path `device`). The crate is `no_std` when built for
//! `nvptx64-nvidia-cuda` (by `ferrocuda-builder`, from the host crate's `build.rs` or `cargo
//! xtask build-ptx`). On the host it compiles as an ordinary library: [`config`], and for every
//! kernel its typed handle (see [`entry`]).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod config;

pub use ferrocuda_device::device_global;
/// The typed handles and the registry of entry points (from the device layer).
pub use ferrocuda_device::entry;
pub use ferrocuda_device::grid;
#[cfg(target_arch = "nvptx64")]
pub use ferrocuda_device::shared_array;

/// The device layer, its own crate (`ferrocuda-device`) so that a user's kernel crate can use it
/// without these kernels; here under its old path.
#[cfg(target_arch = "nvptx64")]
pub use ferrocuda_device as device;

pub mod broken;

pub mod lab;

pub mod reduce;

pub mod stencil;

pub mod smoke;

pub mod timing;

pub mod selftest;
