//! Parallel reduction (归约): the kernels of the library's reductions.
//!
//! - `fast`: one launch, 16-byte loads, a grid sized for the GPU, deterministic.
//! - `reproducible`: the float sum whose bits depend on `n` alone, the same on every GPU.
//!
//! The notes' textbook variants (neighbored and interleaved pairing, unrolling, warp-level
//! finishes, the cooperative-groups and grid-synchronised sums) are lessons, in the
//! `ferrocuda-lesson-kernels` crate.
//!
//! This file is the family's table of entry points: one `#[kernel]` declaration per kernel, its
//! `# Launch` and `# Safety` contract, and a call into the algorithm. The host gets each one's
//! typed handle from the same declaration (`reduce_fast::<Sum, f32>()`).
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use crate::entry::kernel;

pub mod fast;
mod op;
pub mod reproducible;

pub use crate::device::element::Element;
pub use op::Op;

/// `+` (wrapping for integers): the operator of `reduce_fast` that gives `reduce_fast_sum_*`.
pub struct Sum;
/// `min`: `reduce_fast_min_*`.
pub struct Min;
/// `max`: `reduce_fast_max_*`.
pub struct Max;
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use fast::Widen;
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use ferrocuda_device::half::{Bf16, F16};

entry_points! {
// ---------------------------------------------------------------------------------------------
// The library's fast path: one launch, deterministic (see `fast`). Launch for all of them: block
// a multiple of 32 up to 1024, grid at most the length of `partials`, no dynamic shared memory;
// `*ticket` 0 (the kernel leaves it 0). Safety: `x` holds `n` elements aligned to their size,
// `partials` at least `gridDim.x`, `ticket` and `out` one each.
// ---------------------------------------------------------------------------------------------

/// Fast deterministic reduction with operator `O`: `reduce_fast_sum_f32`, `reduce_fast_min_i64`,
/// ... (sums wrap for integers; `min` and `max` ignore a NaN operand, as PTX does).
///
/// # Launch
/// block a multiple of 32 up to 1024, grid at most the length of `partials`; no dynamic shared
/// memory. `*ticket` must be 0 (the kernel leaves it 0).
///
/// # Safety
/// `x` holds `n` elements aligned to their size; `partials` at least `gridDim.x`; `ticket` and
/// `out` one each.
#[kernel(O in [Sum, Min, Max], T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_fast<O: Op, T: Element + Widen<T>>(
    x: *const T,
    n: usize,
    partials: *mut T,
    ticket: *mut u32,
    out: *mut T,
) {
    unsafe {
        fast::fast::<T, T, O, { crate::config::REDUCE_FAST_ITEMS }>(x, n, partials, ticket, out)
    }
}

/// Fast deterministic sum of `i32` in `i64`, which does not overflow below 2^63.
///
/// # Launch
/// As [`reduce_fast`].
///
/// # Safety
/// As [`reduce_fast`].
#[kernel]
pub unsafe fn reduce_fast_sum_i32_to_i64(
    x: *const i32,
    n: usize,
    partials: *mut i64,
    ticket: *mut u32,
    out: *mut i64,
) {
    unsafe {
        fast::fast::<i32, i64, Sum, { crate::config::REDUCE_FAST_ITEMS }>(
            x, n, partials, ticket, out,
        )
    }
}

/// Fast deterministic reduction of 16-bit floats (`F16`, `Bf16`) in `f32`: each element widened
/// exactly, summed (or compared) in `f32` as PyTorch sums `Half` and `BFloat16`, the result an
/// `f32` (`reduce_fast_half_sum_f16`, ...). A `min` or `max` is one of the inputs (or the
/// identity, an infinity), so the host narrows it back exactly.
///
/// # Launch
/// As [`reduce_fast`].
///
/// # Safety
/// As [`reduce_fast`], with `partials` and `out` of `f32`.
#[kernel(O in [Sum, Min, Max], T in [F16, Bf16])]
pub unsafe fn reduce_fast_half<O: Op, T: Element + Widen<f32>>(
    x: *const T,
    n: usize,
    partials: *mut f32,
    ticket: *mut u32,
    out: *mut f32,
) {
    unsafe {
        fast::fast::<T, f32, O, { crate::config::REDUCE_FAST_ITEMS }>(x, n, partials, ticket, out)
    }
}

/// The first level of the reproducible sum of 16-bit floats: [`reduce_reproducible`] of `f32`
/// on the input widened to `f32` (the same chunks of `reduce_repro_chunk(4)` elements, the same
/// order), so its result has the bits of the `f32` reproducible sum of the widened input, on
/// every GPU and on the CPU. The host goes on with `reduce_reproducible_f32`.
///
/// # Launch
/// As [`reduce_reproducible`].
///
/// # Safety
/// `x` holds `n` elements; `out` holds `n.div_ceil(reduce_repro_chunk(4))`.
#[kernel(T in [F16, Bf16])]
pub unsafe fn reduce_reproducible_half<T: Element + Widen<f32>>(x: *const T, n: usize, out: *mut f32) {
    unsafe { reproducible::chunk_sums_widened(x, n, out) }
}

/// One level of the reproducible float sum: the sum of each chunk of
/// `reduce_repro_chunk(size_of::<T>())` elements of `x[..n]` into `out[chunk]`, in the order
/// `reproducible` documents. The host launches it again on `out` until one value is left.
///
/// # Launch
/// block exactly `REDUCE_REPRO_BLOCK` (256), any grid, no dynamic shared memory.
///
/// # Safety
/// `x` holds `n` elements; `out` holds `n.div_ceil(reduce_repro_chunk(size_of::<T>()))`.
#[kernel(T in [f32, f64])]
pub unsafe fn reduce_reproducible<T: Element>(x: *const T, n: usize, out: *mut T) {
    unsafe { reproducible::chunk_sums(x, n, out) }
}

/// [`reduce_fast`] in thread block clusters of `REDUCE_CLUSTER_BLOCKS`: the blocks of a cluster
/// combine their values through distributed shared memory, so one partial and one ticket per
/// cluster instead of per block. sm_90 and newer.
///
/// # Launch
/// clusters of `REDUCE_CLUSTER_BLOCKS` blocks along x (grid a multiple of it), block a multiple
/// of 32 up to 1024, no dynamic shared memory. `*ticket` must be 0 (the kernel leaves it 0).
///
/// # Safety
/// As [`reduce_fast`], with `partials` holding at least `gridDim.x / REDUCE_CLUSTER_BLOCKS`.
#[kernel(
    O in [Sum, Min, Max],
    T in [i32, u32, i64, u64, f32, f64],
    cluster = crate::config::REDUCE_CLUSTER_BLOCKS
)]
pub unsafe fn reduce_fast_cluster<O: Op, T: Element + Widen<T>>(
    x: *const T,
    n: usize,
    partials: *mut T,
    ticket: *mut u32,
    out: *mut T,
) {
    unsafe {
        fast::fast_cluster::<T, T, O, { crate::config::REDUCE_FAST_ITEMS }>(
            x, n, partials, ticket, out,
        )
    }
}
}
