//! Thread, block and grid indices (`threadIdx`, `blockIdx`, `blockDim`, `gridDim`).
//!
//! A kernel launch is a grid of blocks of threads. Every thread runs the same kernel and tells
//! itself apart by its indices. In 1D, the global index of a thread is
//! `blockIdx.x * blockDim.x + threadIdx.x` ([`index_1d`]); a kernel that must cover more
//! elements than it has threads walks the input with a stride of the whole grid
//! ([`grid_stride_1d`]), which lets the host size the grid for the GPU instead of for the data.
//!
//! The index readers are safe: reading a special register has no preconditions.
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

#[cfg(not(target_arch = "nvptx64"))]
use crate::cpu::intrinsics::nvptx;

macro_rules! special_register {
    ($(#[doc = $doc:literal] #[doc(alias = $alias:literal)] $name:ident => $intrinsic:ident;)*) => {$(
        #[doc = $doc]
        #[doc(alias = $alias)]
        #[inline(always)]
        pub fn $name() -> u32 {
            // SAFETY: reading a special register is always defined inside a kernel.
            unsafe { nvptx::$intrinsic() }
        }
    )*};
}

special_register! {
    /// `threadIdx.x`: this thread's index within its block, x dimension.
    #[doc(alias = "threadIdx.x")] thread_idx_x => _thread_idx_x;
    /// `threadIdx.y`.
    #[doc(alias = "threadIdx.y")] thread_idx_y => _thread_idx_y;
    /// `threadIdx.z`.
    #[doc(alias = "threadIdx.z")] thread_idx_z => _thread_idx_z;
    /// `blockIdx.x`: this block's index within the grid, x dimension.
    #[doc(alias = "blockIdx.x")] block_idx_x => _block_idx_x;
    /// `blockIdx.y`.
    #[doc(alias = "blockIdx.y")] block_idx_y => _block_idx_y;
    /// `blockIdx.z`.
    #[doc(alias = "blockIdx.z")] block_idx_z => _block_idx_z;
    /// `blockDim.x`: threads per block, x dimension.
    #[doc(alias = "blockDim.x")] block_dim_x => _block_dim_x;
    /// `blockDim.y`.
    #[doc(alias = "blockDim.y")] block_dim_y => _block_dim_y;
    /// `blockDim.z`.
    #[doc(alias = "blockDim.z")] block_dim_z => _block_dim_z;
    /// `gridDim.x`: blocks in the grid, x dimension.
    #[doc(alias = "gridDim.x")] grid_dim_x => _grid_dim_x;
    /// `gridDim.y`.
    #[doc(alias = "gridDim.y")] grid_dim_y => _grid_dim_y;
    /// `gridDim.z`.
    #[doc(alias = "gridDim.z")] grid_dim_z => _grid_dim_z;
}

/// `blockIdx.x * blockDim.x + threadIdx.x` as a `usize`, so that it never overflows `u32`
/// for grids of more than 2^32 threads.
#[inline(always)]
pub fn index_1d() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// `gridDim.x * blockDim.x`: the number of threads in a 1D grid.
#[inline(always)]
pub fn grid_size_1d() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// The indices `index_1d(), index_1d() + grid_size_1d(), ...` below `n`: a grid-stride loop.
///
/// ```ignore
/// for i in grid_stride_1d(n) { sum += unsafe { *x.add(i) }; }
/// ```
#[inline(always)]
pub fn grid_stride_1d(n: usize) -> GridStride {
    GridStride {
        next: index_1d(),
        stride: grid_size_1d(),
        end: n,
    }
}

/// Iterator returned by [`grid_stride_1d`].
#[derive(Clone, Copy)]
pub struct GridStride {
    next: usize,
    stride: usize,
    end: usize,
}

impl Iterator for GridStride {
    type Item = usize;
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.next < self.end {
            let i = self.next;
            self.next += self.stride;
            Some(i)
        } else {
            None
        }
    }
}
