//! # ferrocuda
//!
//! GPU kernels written in pure Rust (the `ferrocuda-kernels` crate, compiled to PTX by
//! `ferrocuda-builder` from this crate's `build.rs`), launched from Rust with `cust`, checked
//! against the CPU and measured against the memory speed limit.
//!
//! ```no_run
//! # fn main() -> ferrocuda::Result<()> {
//! let gpu = ferrocuda::Gpu::new(0)?;
//! let x = gpu.upload(&vec![0.5f32; 1 << 20], "x")?;
//! assert_eq!(ferrocuda::reduce::sum(&gpu, &x)?, 524_288.0);
//! # Ok(()) }
//! ```
//!
//! The layers, each using only the ones above it:
//! - [`runtime`]: the driver, loaded at run time ([`runtime::driver`]: a program starts without
//!   it and says in one line that it is missing), the device ([`Gpu`]), launch configurations,
//!   typed kernel launches ([`runtime::kernel`], for ferrocuda's kernels and, through
//!   [`Gpu::load_module`], a kernel crate of your own), errors, events;
//! - the kernel families: [`reduce`] (sum, min, max, plans, the reproducible sum),
//!   [`stencil`] and [`copy`] (a device copy by bulk copies, sm_90);
//! - [`multi`]: arrays cut into one shard per rank, and their reductions.
//!
//! That is all a program that depends on this library gets, and all [`Gpu::new`] loads: the
//! library's own kernels. The lessons of the notes (the textbook reductions and stencils, the
//! warp and divergence lab, occupancy, the smoke test), the CPU references the tests check
//! against, the measuring harness and the device layer's self-tests are another package,
//! `ferrocuda-lessons` (`host-crate/lessons/`), with its own kernel crate; the `ferrocuda`
//! command line, the benchmark and the sanitizer pass are `ferrocuda-cli` (`host-crate/cli/`). `examples/` in the repository shows the library in use, including a
//! kernel crate of one's own (`examples/dot-product`).
pub mod copy;
pub mod multi;
pub mod reduce;
pub mod runtime;
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
pub use runtime::error::{DriverError, Error, Result};
pub use runtime::event::Event;
pub use runtime::gpu::{DeviceProps, Gpu, GpuStream, Wait};
pub use runtime::kernel::{Kernel, LoadedModule};
pub use runtime::memory::{DeviceBuffer, DeviceSlice, View, ViewMut};
pub use runtime::pinned::PinnedBuffer;
pub use runtime::stream::Stream;
pub use runtime::track::Access;

pub use runtime::pointer::{DeviceCopy, DevicePointer};
