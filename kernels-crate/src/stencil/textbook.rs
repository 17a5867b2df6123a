//! Seed 001's two kernels, one output per thread: the naive stencil that reads every input from
//! global memory, and the slide's shared-memory tile (also with arbitrary coefficients).
//!
//! Launch (all three): grid `ceil(n / block)`, one thread per output. `stencil_1d_shared_*` and
//! `stencil_1d_weighted_*` need `block >= R` (the threads below `R` load the halos) and
//! `(block + 2R) * size_of::<T>()` bytes of dynamic shared memory
//! ([`stencil_shared_tile_len`](crate::config::stencil_shared_tile_len)).
use super::{Element, Ones, Taps, Weights, fetch, point};
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, index_1d, thread_idx_x};

/// `stencil_1d` without shared memory: every thread reads its `2R + 1` inputs from global
/// memory, through the boundary rule.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`.
#[inline(always)]
pub unsafe fn naive<T: Element, const R: usize>(input: *const T, out: *mut T, n: usize, mode: u32) {
    let i = index_1d();
    if i < n {
        // SAFETY: `i < n`; `input` holds `n` elements.
        unsafe { *out.add(i) = point::<T, Ones, R>(input, n, i, mode, &Ones) };
    }
}

/// The slide's `stencil_1d`: the block's inputs and both halos go to the shared tile `temp`
/// (`blockDim.x + 2R` elements), threads below `R` also load the halos, `__syncthreads()`, then
/// each thread applies the taps to its window of the tile.
///
/// Every thread loads its slot and reaches the barrier, also past `n` (its slot may be the right
/// halo of the last real output); only the store is bounded by `n`.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`;
/// `blockDim.x >= R`; the dynamic shared memory holds `blockDim.x + 2R` elements.
#[inline(always)]
pub unsafe fn shared_tile<T: Element, P: Taps<T>, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    taps: P,
) {
    let temp = dynamic_shared::<T>();
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let gindex = block_idx_x() as usize * block + tid;
    let lindex = tid + R;
    let (g, r, b) = (gindex as isize, R as isize, block as isize);
    // SAFETY: the tile slots written are below `block + 2R` (and `tid < R` covers both halos
    // because `block >= R`); `fetch` only reads below `n`; every thread reaches the barrier.
    unsafe {
        *temp.add(lindex) = fetch(input, n, g, mode);
        if tid < R {
            *temp.add(lindex - R) = fetch(input, n, g - r, mode);
            *temp.add(lindex + block) = fetch(input, n, g + b, mode);
        }
        syncthreads();
        if gindex < n {
            let mut result = T::ADD_IDENTITY;
            for offset in 0..2 * R + 1 {
                result = taps.accumulate(result, offset, *temp.add(tid + offset));
            }
            *out.add(gindex) = result;
        }
    }
}

/// Declares `stencil_1d_naive_r<R>_<type>`.
macro_rules! naive_entries {
    ($($r:literal => $($name:ident: $t:ty),*;)*) => {$($(
        #[doc = concat!("Seed 001's 1D stencil (一维模板) of radius ", stringify!($r), " on `",
            stringify!($t), "`, every input read from global memory: the baseline the shared tile improves on.")]
        ///
        /// # Launch
        /// grid `ceil(n / block)`, any block size, no dynamic shared memory.
        ///
        /// # Safety
        /// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`;
        /// `boundary` is a `STENCIL_BOUNDARY_*` mode.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(input: *const $t, out: *mut $t, n: usize, boundary: u32) {
            // SAFETY: forwarded to the launcher.
            unsafe { naive::<$t, $r>(input, out, n, boundary) }
        }
    )*)*};
}

naive_entries! {
    1 => stencil_1d_naive_r1_i32: i32, stencil_1d_naive_r1_f32: f32, stencil_1d_naive_r1_f64: f64;
    2 => stencil_1d_naive_r2_i32: i32, stencil_1d_naive_r2_f32: f32, stencil_1d_naive_r2_f64: f64;
    3 => stencil_1d_naive_r3_i32: i32, stencil_1d_naive_r3_f32: f32, stencil_1d_naive_r3_f64: f64;
    4 => stencil_1d_naive_r4_i32: i32, stencil_1d_naive_r4_f32: f32, stencil_1d_naive_r4_f64: f64;
    8 => stencil_1d_naive_r8_i32: i32, stencil_1d_naive_r8_f32: f32, stencil_1d_naive_r8_f64: f64;
    16 => stencil_1d_naive_r16_i32: i32, stencil_1d_naive_r16_f32: f32, stencil_1d_naive_r16_f64: f64;
}

/// Declares `stencil_1d_shared_r<R>_<type>`.
macro_rules! shared_entries {
    ($($r:literal => $($name:ident: $t:ty),*;)*) => {$($(
        #[doc = concat!("Seed 001's shared-memory 1D stencil (一维模板) of radius ", stringify!($r),
            " on `", stringify!($t), "`: the `blockDim + 2R` tile with halos, `__syncthreads()`, the sum of the window.")]
        ///
        /// # Launch
        /// grid `ceil(n / block)`, block at least `R`, dynamic shared memory
        /// `(block + 2R) * size_of::<T>()` bytes.
        ///
        /// # Safety
        /// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`;
        /// `boundary` is a `STENCIL_BOUNDARY_*` mode; the launch is as above.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(input: *const $t, out: *mut $t, n: usize, boundary: u32) {
            // SAFETY: forwarded to the launcher.
            unsafe { shared_tile::<$t, Ones, $r>(input, out, n, boundary, Ones) }
        }
    )*)*};
}

shared_entries! {
    1 => stencil_1d_shared_r1_i32: i32, stencil_1d_shared_r1_f32: f32, stencil_1d_shared_r1_f64: f64;
    2 => stencil_1d_shared_r2_i32: i32, stencil_1d_shared_r2_f32: f32, stencil_1d_shared_r2_f64: f64;
    3 => stencil_1d_shared_r3_i32: i32, stencil_1d_shared_r3_f32: f32, stencil_1d_shared_r3_f64: f64;
    4 => stencil_1d_shared_r4_i32: i32, stencil_1d_shared_r4_f32: f32, stencil_1d_shared_r4_f64: f64;
    8 => stencil_1d_shared_r8_i32: i32, stencil_1d_shared_r8_f32: f32, stencil_1d_shared_r8_f64: f64;
    16 => stencil_1d_shared_r16_i32: i32, stencil_1d_shared_r16_f32: f32, stencil_1d_shared_r16_f64: f64;
}

/// Declares `stencil_1d_weighted_r<R>_<type>`.
macro_rules! weighted_entries {
    ($($r:literal => $($name:ident: $t:ty),*;)*) => {$($(
        #[doc = concat!("Seed 001's shared-memory 1D stencil (一维模板) of radius ", stringify!($r),
            " on `", stringify!($t), "` with arbitrary coefficients `weights[0] ..= weights[2R]` (leftmost first), passed by value.")]
        ///
        /// # Launch
        /// grid `ceil(n / block)`, block at least `R`, dynamic shared memory
        /// `(block + 2R) * size_of::<T>()` bytes.
        ///
        /// # Safety
        /// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`;
        /// `boundary` is a `STENCIL_BOUNDARY_*` mode; the launch is as above.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(input: *const $t, out: *mut $t, n: usize, boundary: u32,
            weights: Weights<$t, { 2 * $r + 1 }>) {
            // SAFETY: forwarded to the launcher.
            unsafe { shared_tile::<$t, _, $r>(input, out, n, boundary, weights) }
        }
    )*)*};
}

weighted_entries! {
    1 => stencil_1d_weighted_r1_f32: f32, stencil_1d_weighted_r1_f64: f64;
    2 => stencil_1d_weighted_r2_f32: f32, stencil_1d_weighted_r2_f64: f64;
    3 => stencil_1d_weighted_r3_f32: f32, stencil_1d_weighted_r3_f64: f64;
    4 => stencil_1d_weighted_r4_f32: f32, stencil_1d_weighted_r4_f64: f64;
    8 => stencil_1d_weighted_r8_f32: f32, stencil_1d_weighted_r8_f64: f64;
    16 => stencil_1d_weighted_r16_f32: f32, stencil_1d_weighted_r16_f64: f64;
}
