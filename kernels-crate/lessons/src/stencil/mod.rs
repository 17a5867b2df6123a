//! The notes' 1D stencil (一维模板): the kernel that reads every input from global memory
//! (`textbook::naive`) and the shared-memory tile with halos (`textbook::shared_tile`), with the
//! sum of the window or given coefficients. The window itself (boundary rules, taps) is the
//! library's, `ferrocuda_kernels::stencil`, so the lessons and the fast path compute the same
//! outputs; the library's module documentation walks through the notes' slide.
use crate::entry::kernel;
use crate::probe::NoProbe;
use ferrocuda_kernels::stencil::Coefficients;

pub mod textbook;

pub use ferrocuda_kernels::stencil::{Element, Float, Ones};

/// The notes' 1D stencil (一维模板), every input read from global memory: the baseline the
/// shared tile improves on.
///
/// # Launch
/// grid `ceil(n / block)`, any block size, no dynamic shared memory.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode.
#[kernel(T in [i32, f32, f64], R in [1, 2, 3, 4, 8, 16])]
pub unsafe fn stencil_1d_naive<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
) {
    unsafe { textbook::naive::<T, R>(input, out, n, boundary) }
}

/// The notes' shared-memory 1D stencil: the `blockDim + 2R` tile with halos,
/// `__syncthreads()`, the sum of the window.
///
/// # Launch
/// grid `ceil(n / block)`, block at least `R`, dynamic shared memory
/// `(block + 2R) * size_of::<T>()` bytes.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode; the launch is as above.
#[kernel(
    T in [i32, f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = crate::config::stencil_shared_tile_len(block as u32, R as u32) as usize
        * size_of::<T>()
)]
pub unsafe fn stencil_1d_shared<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
) {
    unsafe { textbook::shared_tile::<T, Ones, R, NoProbe>(input, out, n, boundary, Ones, NoProbe) }
}

/// The notes' shared-memory 1D stencil with arbitrary coefficients `weights.0[0 ..= 2R]`
/// (leftmost first), passed by value.
///
/// # Launch
/// grid `ceil(n / block)`, block at least `R`, dynamic shared memory
/// `(block + 2R) * size_of::<T>()` bytes.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode; the launch is as above.
#[kernel(
    T in [f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = crate::config::stencil_shared_tile_len(block as u32, R as u32) as usize
        * size_of::<T>()
)]
pub unsafe fn stencil_1d_weighted<T: Float, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
    weights: Coefficients<T>,
) {
    unsafe { textbook::shared_tile::<T, _, R, NoProbe>(input, out, n, boundary, weights, NoProbe) }
}
