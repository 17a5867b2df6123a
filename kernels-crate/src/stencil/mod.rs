//! The 1D stencil (一维模板, 《CUDA C/C++ Basics》学习笔记): `out[i] = sum over k in 0..=2R of c_k * in[i + k - R]`.
//!
//! A stencil slides a window of width `2R + 1` along the input; `R` is its radius (半径), the
//! inputs on each side of the centre. The notes' stencil has `R = 3` (width 7) and every
//! coefficient 1: each output is the sum of seven neighbours.
//!
//! Neighbouring outputs share all but one of their inputs, so a kernel that reads its `2R + 1`
//! inputs straight from global memory (`textbook::naive`) loads every element `2R + 1` times
//! (the caches absorb part of it). The notes' slide has each block load its `blockDim.x`
//! inputs once into shared memory (共享内存), plus a halo (边界层) of `R` elements on each side
//! that belongs to the neighbouring blocks: a tile of `blockDim.x + 2R`. Threads below `R` load
//! the halos. Then `__syncthreads()` (`syncthreads`):
//! without it thread 15 may read a slot that thread 0 has not written yet (the slide's worst
//! case). After it, every output reads its window from the tile (`textbook::shared_tile`).
//!
//! The slide's traps, and what these kernels do instead:
//! - block 0 reads `in[gindex - RADIUS]` and the last block `in[gindex + BLOCK_SIZE]`, outside
//!   the array (the slide relies on a padded array). Here every input index outside `0..n` goes
//!   through an explicit boundary rule (`source_index`): zero, clamp or periodic.
//! - the slide needs `n % BLOCK_SIZE == 0`. Here threads past `n` still load their tile slot
//!   (through the boundary rule) and reach the barrier; only their output store is skipped.
//! - `BLOCK_SIZE` is a macro; here the tile is dynamic shared memory sized by the host from
//!   the real block size, and the halo store uses `blockDim.x`.
//!
//! The fast path (`fast`) keeps the tile but moves 16 bytes per load and store, computes
//! several outputs per thread from registers, and runs one block per tile (any grid works: a
//! block with several tiles loops over them).
//!
//! Element types: `i32` (the notes' type; sums wrap), `f32` and `f64`, and in the fast stencil
//! the 16-bit floats `F16` and `Bf16`, computed in `f32`. Float outputs are computed as a chain
//! of `2R + 1` fused multiply-adds (plain adds when every coefficient is 1), leftmost tap first,
//! except the 16-bit floats' sums, whose eight outputs of a vector share partial sums
//! (`sums::window_sum`): either way each output is its `2R + 1` terms with at most `2R + 1`
//! roundings (`2R` for a sum), and the error is at most `(2R + 1) * eps / 2 * sum |c_k * x|`
//! while no partial sum overflows, in the arithmetic type; a 16-bit output adds its one
//! rounding to the type.
//!
//! This file is the family's table of entry points, one `#[kernel]` declaration each; the
//! algorithm is in `fast`, the window it shares with the notes' kernels (`naive`,
//! `shared_tile`, in `ferrocuda-lesson-kernels`) in `window`.
use crate::config::STENCIL_MAX_TAPS;
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use crate::entry::kernel;
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use ferrocuda_device::half::{Bf16, F16};

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod bulk;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cluster;
pub mod fast;
pub mod steps;
mod sums;
mod window;

pub use crate::device::element::{Element, Float};
use sums::window_sum;
pub use window::{Ones, Taps, fetch, point, source_index};

/// The coefficients a weighted stencil takes by value: `c_0 ..= c_2R`, leftmost first, in the
/// first `2R + 1` slots (the rest are not read). One `#[repr(C)]` type for every radius, so
/// that a kernel's parameter list does not depend on `R`: 132 bytes of `f32` (264 of `f64`),
/// well inside the 4 KiB a launch may pass.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients<T>(pub [T; STENCIL_MAX_TAPS]);

// SAFETY: `#[repr(C)]` array of a by-value primitive, the same on both sides.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl<T: crate::entry::ByValue> crate::entry::ByValue for Coefficients<T> {}

entry_points! {
/// The library's 1D stencil: the notes' shared tile with 16-byte loads and stores, several
/// outputs per thread, a block per tile (grid-stride over any rest). The 16-bit floats (`F16`,
/// `Bf16`) are computed in `f32`: the `2R + 1` inputs widened exactly, added in `f32`, each
/// output rounded once to the type.
///
/// # Launch
/// any grid (the host launches one block per tile), block a
/// multiple of 32 up to 1024 (on sm_70 the `i32`, `f32` and `f64` instances use 67-72
/// registers a thread, and the driver refuses a block of 1024 there, naming the limit), dynamic shared memory
/// `16 * stencil_fast_tile_vectors(block, R, 16 / size_of::<T>())` bytes.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode; the launch is as above.
#[kernel(
    T in [i32, f32, f64, F16, Bf16],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = 16 * crate::config::stencil_fast_tile_vectors(
        block as u32,
        R as u32,
        (16 / size_of::<T>()) as u32
    ) as usize
)]
pub unsafe fn stencil_1d_fast<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
) {
    unsafe { fast::fast::<T, Ones, R>(input, out, n, boundary, Ones) }
}

/// The library's weighted 1D stencil: as [`stencil_1d_fast`], with coefficients
/// `weights.0[0 ..= 2R]` passed by value.
///
/// # Launch
/// As [`stencil_1d_fast`].
///
/// # Safety
/// As [`stencil_1d_fast`].
#[kernel(
    T in [f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = 16 * crate::config::stencil_fast_tile_vectors(
        block as u32,
        R as u32,
        (16 / size_of::<T>()) as u32
    ) as usize
)]
pub unsafe fn stencil_1d_fast_weighted<T: Float, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
    weights: Coefficients<T>,
) {
    unsafe { fast::fast::<T, _, R>(input, out, n, boundary, weights) }
}

/// The iterated stencil, several steps per pass (时间分块): `steps` applications of
/// [`stencil_1d_fast`] (at most `stencil_steps_per_pass(R, LANES)`), each tile loaded once with
/// a halo of `steps * R`, the steps applied in shared memory, the last one stored. Bit for bit
/// the fast stencil applied `steps` times, each application's input read through the boundary
/// rule.
///
/// # Launch
/// any grid (the host launches one block per tile of `block * STENCIL_STEPS_VECTORS_PER_THREAD`
/// vectors), block a multiple of 32 up to 1024, dynamic shared memory
/// `stencil_steps_shared_bytes(block, R, LANES)`.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode; `1 <= steps <= stencil_steps_per_pass(R, LANES)`; the launch is
/// as above.
#[kernel(
    T in [i32, f32, f64, F16, Bf16],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = crate::config::stencil_steps_shared_bytes(
        block as u32,
        R as u32,
        (16 / size_of::<T>()) as u32
    )
)]
pub unsafe fn stencil_1d_steps<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
    steps: u32,
) {
    unsafe { steps::steps::<T, Ones, R>(input, out, n, boundary, steps as usize, Ones) }
}

/// The weighted iterated stencil: as [`stencil_1d_steps`], with coefficients
/// `weights.0[0 ..= 2R]` passed by value (those of [`stencil_1d_fast_weighted`]).
///
/// # Launch
/// As [`stencil_1d_steps`].
///
/// # Safety
/// As [`stencil_1d_steps`].
#[kernel(
    T in [f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    dynamic_shared = crate::config::stencil_steps_shared_bytes(
        block as u32,
        R as u32,
        (16 / size_of::<T>()) as u32
    )
)]
pub unsafe fn stencil_1d_steps_weighted<T: Float, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
    steps: u32,
    weights: Coefficients<T>,
) {
    unsafe { steps::steps::<T, _, R>(input, out, n, boundary, steps as usize, weights) }
}

/// The fast stencil fed by bulk copies (TMA): [`stencil_1d_fast`]'s tiles, each loaded with one
/// `cp.async.bulk` into one of `STENCIL_BULK_STAGES` pipelined shared stages. sm_90 and newer.
///
/// # Launch
/// As [`stencil_1d_fast`], with `STENCIL_BULK_STAGES` times its dynamic shared memory.
///
/// # Safety
/// As [`stencil_1d_fast`].
#[kernel(
    T in [i32, f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    arch = 90,
    dynamic_shared = crate::config::STENCIL_BULK_STAGES as usize * 16 * crate::config::stencil_fast_tile_vectors(
        block as u32,
        R as u32,
        (16 / size_of::<T>()) as u32
    ) as usize
)]
pub unsafe fn stencil_1d_bulk<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
) {
    unsafe { bulk::bulk::<T, Ones, R>(input, out, n, boundary, Ones) }
}

/// The notes' shared-tile stencil in thread block clusters of `STENCIL_CLUSTER_BLOCKS`: each
/// block loads its own inputs, and its halos come from the neighbouring blocks' shared memory
/// (distributed shared memory); only the cluster's outer edges read global memory. One output
/// per thread. sm_90 and newer.
///
/// # Launch
/// clusters of `STENCIL_CLUSTER_BLOCKS` blocks along x: grid a multiple of it, at least
/// `ceil(n / block)` blocks; block a multiple of 32 up to 1024; dynamic shared memory
/// `(block + 2R) * size_of::<T>()` bytes.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`; `boundary` is
/// a `STENCIL_BOUNDARY_*` mode; the launch is as above.
#[kernel(
    T in [i32, f32, f64],
    R in [1, 2, 3, 4, 8, 16],
    cluster = crate::config::STENCIL_CLUSTER_BLOCKS,
    dynamic_shared = (block + 2 * R) * size_of::<T>()
)]
pub unsafe fn stencil_1d_cluster<T: Element, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    boundary: u32,
) {
    unsafe { cluster::cluster_tile::<T, Ones, R>(input, out, n, boundary, Ones) }
}
}
