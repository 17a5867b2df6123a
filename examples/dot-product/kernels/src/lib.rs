//! A kernel crate of one's own: the dot product of two vectors, with the device layer's block
//! reduction. On `nvptx64-nvidia-cuda` (built by `ferrocuda-builder` from the host crate's
//! `build.rs`) `#[kernel]` makes `dot_f32` / `dot_f64` PTX entry points; on the host the same
//! `dot::<T>()` is the typed handle the host launches with.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use ferrocuda_device::kernel;

/// Threads per block the host launches `dot` with (and the kernel's shared scratch is sized
/// for: one slot per warp).
pub const DOT_BLOCK: u32 = 256;

/// One partial dot product per block: `partials[blockIdx.x] = sum of x[i] * y[i]` over the
/// elements this block's threads visit (grid-stride), combined with
/// `ferrocuda_device::block::block_sum`. The host adds the partials.
///
/// # Launch
/// A block of 32..=1024 threads, a multiple of 32; `blockDim.x / 32` elements of dynamic shared
/// memory; any grid up to the length of `partials`.
///
/// # Safety
/// `x` and `y` hold `n` elements; `partials` holds `gridDim.x`.
#[kernel(T in [f32, f64], dynamic_shared = block / 32 * size_of::<T>())]
pub unsafe fn dot<T: ferrocuda_device::element::Float>(
    x: *const T,
    y: *const T,
    partials: *mut T,
    n: usize,
) {
    use ferrocuda_device::block::block_sum;
    use ferrocuda_device::shared::dynamic_shared;
    use ferrocuda_device::thread::{block_idx_x, grid_stride_1d, thread_idx_x};

    let mut acc = T::ZERO;
    for i in grid_stride_1d(n) {
        // SAFETY: i < n, and x and y hold n elements.
        acc = unsafe { (*x.add(i)).mul_add(*y.add(i), acc) };
    }
    // SAFETY: every thread gets here; the launch gives one shared slot per warp.
    let total = unsafe { block_sum(acc, dynamic_shared::<T>()) };
    if thread_idx_x() == 0 {
        // SAFETY: partials holds gridDim.x elements.
        unsafe { *partials.add(block_idx_x() as usize) = total };
    }
}
