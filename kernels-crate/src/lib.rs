//! # ferrocuda-kernels
//!
//! The kernels of the ferrocuda library (the fast reductions, the reproducible sum, the fast
//! stencil), written with its device layer (`ferrocuda-device`, our
//! `cuda_std`, here under the path `device`). The crate is `no_std` when built for
//! `nvptx64-nvidia-cuda` (by `ferrocuda-builder`, from the host crate's `build.rs` or `cargo
//! xtask build-ptx`). The notes' lessons, the self-tests and the deliberately broken kernels are
//! another crate, `ferrocuda-lesson-kernels`, so the library's module holds these alone. On the
//! host it compiles as an ordinary library: [`config`], and for every
//! kernel its typed handle (see [`entry`]).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![cfg_attr(
    all(target_arch = "nvptx64", feature = "entry-points"),
    feature(abi_ptx)
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod config;

pub use ferrocuda_device::device_global;
/// The typed handles and the registry of entry points (from the device layer).
pub use ferrocuda_device::entry;
pub use ferrocuda_device::grid;
/// The 16-bit float element types (from the device layer).
pub use ferrocuda_device::half;
pub use ferrocuda_device::shared_array;

/// The device layer, its own crate (`ferrocuda-device`) so that a user's kernel crate can use it
/// without these kernels; here under its old path.
pub use ferrocuda_device as device;

/// Declares this crate's entry points. On `nvptx64` they are compiled only with the
/// `entry-points` feature (on by default): a kernel crate that builds on this one's device code
/// (`ferrocuda-lesson-kernels`, with `default-features = false`) gets a PTX that holds its own
/// entry points and not these again. On the host the typed handles are always there.
macro_rules! entry_points {
    ($($item:item)*) => {
        $(
            #[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
            $item
        )*
    };
}

pub mod copy;
pub mod reduce;

pub mod stencil;
