//! # ferrocuda-lessons
//!
//! The lessons of the notes, built on the `ferrocuda` library: what the `ferrocuda` command line
//! and the test suite run, and what a program using the library never loads.
//!
//! - [`cpu`]: what every kernel computes, as CPU references the GPU results are checked
//!   against, and the inputs the checks use;
//! - [`reduce`]: every textbook reduction of the notes ([`reduce::ReduceVariant`], run with
//!   [`reduce::ReduceRun`]) beside the library's fast path, and their measurement;
//! - [`stencil`]: the notes' stencils ([`stencil::StencilVariant`]) beside the fast one;
//! - [`lab`] (warp functions, divergence, stream overlap), [`occupancy`], [`smoke`];
//! - [`timing`]: the event-timed harness the benchmark measures with.
//!
//! Their kernels are a kernel crate of their own, `ferrocuda-lesson-kernels` (re-exported as
//! [`kernels`]), built to PTX by this package's `build.rs` and loaded by [`kernel`] on a
//! [`Gpu`]'s first use of it, next to the library's module.
pub mod as_printed;
pub mod cpu;
pub mod draw;
pub mod lab;
pub mod lang;
pub mod occupancy;
pub mod reduce;
pub mod smoke;
pub mod stencil;
pub mod timing;
pub mod waves;

pub use ferrocuda_lesson_kernels as kernels;

use ferrocuda::kernels::entry::{Entry, EntryInfo};
use ferrocuda::runtime::kernel::Untyped;
use ferrocuda::{EmbeddedPtx, Gpu, Kernel, Result};

/// The PTX of `ferrocuda-lesson-kernels`, every architecture, oldest first.
pub static LESSON_PTX: &[EmbeddedPtx] = ferrocuda::include_ptx!("ferrocuda_lesson_kernels");

/// The package whose PTX [`LESSON_PTX`] is.
pub const LESSON_PACKAGE: &str = "ferrocuda-lesson-kernels";

/// The kernel behind `entry` on `gpu`, a lesson's or the library's (by the package that
/// declares it): the lessons' module is loaded on the first call for this `Gpu` and kept with
/// it ([`Gpu::kernel_in`]).
pub fn kernel<Args>(gpu: &Gpu, entry: Entry<Args>) -> Result<Kernel<'_, Args>> {
    if entry.info().package == LESSON_PACKAGE {
        gpu.kernel_in(LESSON_PTX, entry)
    } else {
        gpu.kernel(entry)
    }
}

/// [`kernel`] for an entry point known by its declaration only, for attribute and occupancy
/// queries.
pub fn kernel_info<'g>(gpu: &'g Gpu, entry: &'static EntryInfo) -> Result<Kernel<'g, Untyped>> {
    if entry.package == LESSON_PACKAGE {
        gpu.kernel_info_in(LESSON_PTX, entry)
    } else {
        gpu.kernel_info(entry)
    }
}

/// Every entry point of both modules, the library's and the lessons', sorted by symbol.
pub fn all_entry_points() -> Vec<&'static EntryInfo> {
    let mut all = ferrocuda::runtime::kernel::entry_points();
    all.extend(entry_points());
    all.sort_by_key(|e| e.symbol);
    all
}

/// Every entry point of the lessons' PTX, as declared, sorted by symbol.
pub fn entry_points() -> Vec<&'static EntryInfo> {
    ferrocuda::kernels::entry::entry_points_of(LESSON_PACKAGE)
}
