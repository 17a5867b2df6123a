//! 樊哲勇《CUDA编程基础与实践》第10章 (`reduce.cu`): the block's values go to shared
//! memory, a tree brings them down to one warp, and the last 32 -> 1 steps use the warp:
//! `__syncwarp` between shared-memory steps, `__shfl_down_sync`, or a `thread_block_tile<32>`.
//!
//! The first three finish with one `atomic_add` per block into `*d_y` (the host zeroes it), so
//! the float result depends on the order blocks arrive in: not reproducible bit for bit. The
//! grid-stride pair (`reduce1_parallelism`, `reduce2_static`) writes one partial per block and
//! reduces the partials with a second launch of one block: deterministic.
//!
//! Launch: block a power of two from 64 to 1024, dynamic shared memory `block * size_of::<T>()`.
use super::Element;
use crate::device::atomic::{AtomicAdd, atomic_add};
use crate::device::cg::{this_thread_block, tiled_partition};
use crate::device::shared::dynamic_shared;
use crate::device::sync::{syncthreads, syncwarp};
use crate::device::thread::{block_dim_x, block_idx_x, grid_stride_1d, index_1d, thread_idx_x};
use crate::device::warp::{FULL_MASK, WARP_SIZE, shfl_down_sync};

/// Stores `y` in `s[tid]` and runs the shared-memory tree down to 32 values (offsets
/// `blockDim / 2 ..= 32`), with a barrier after each step.
#[inline(always)]
unsafe fn tree_to_one_warp<T: Element>(s: *mut T, y: T, tid: u32) {
    // SAFETY: `s` holds `blockDim.x` elements (the launch's dynamic shared memory); every
    // thread reaches every barrier.
    unsafe {
        *s.add(tid as usize) = y;
        syncthreads();
        let mut offset = block_dim_x() >> 1;
        while offset >= WARP_SIZE {
            if tid < offset {
                *s.add(tid as usize) = (*s.add(tid as usize)).add(*s.add((tid + offset) as usize));
            }
            syncthreads();
            offset >>= 1;
        }
    }
}

/// `x[index_1d()]`, or zero past `n`.
///
/// # Safety
/// `x` points to `n` readable elements.
#[inline(always)]
unsafe fn load_or_zero<T: Element>(x: *const T, n: usize) -> T {
    let i = index_1d();
    // SAFETY: `i < n` and `x` holds `n` elements (the caller's contract).
    if i < n { unsafe { *x.add(i) } } else { T::ZERO }
}

/// `reduce_syncwarp`: the last five steps in shared memory under `if tid < offset`, each
/// followed by `__syncwarp()` (樊哲勇第10章 explains why dropping the `if` races).
#[inline(always)]
pub unsafe fn syncwarp_atomic<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    let tid = thread_idx_x();
    let s = dynamic_shared::<T>();
    // SAFETY: as `tree_to_one_warp`; warp 0 is complete, so FULL_MASK names existing lanes.
    unsafe {
        tree_to_one_warp(s, load_or_zero(x, n), tid);
        if tid < WARP_SIZE {
            let mut offset = 16;
            while offset > 0 {
                if tid < offset {
                    *s.add(tid as usize) =
                        (*s.add(tid as usize)).add(*s.add((tid + offset) as usize));
                }
                syncwarp(FULL_MASK);
                offset >>= 1;
            }
        }
        if tid == 0 {
            atomic_add(d_y, *s);
        }
    }
}

/// `reduce_shfl`: the last five steps with `y += __shfl_down_sync(FULL_MASK, y, offset)`.
#[inline(always)]
pub unsafe fn shfl_atomic<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    let tid = thread_idx_x();
    let s = dynamic_shared::<T>();
    // SAFETY: as `syncwarp_atomic`.
    unsafe {
        tree_to_one_warp(s, load_or_zero(x, n), tid);
        if tid < WARP_SIZE {
            let mut y = *s.add(tid as usize);
            let mut offset = 16;
            while offset > 0 {
                y = y.add(shfl_down_sync(FULL_MASK, y, offset, WARP_SIZE));
                offset >>= 1;
            }
            if tid == 0 {
                atomic_add(d_y, y);
            }
        }
    }
}

/// The warp-0 finish with a `thread_block_tile<32>`: `y += g.shfl_down(y, offset)`. Returns
/// the block's sum in thread 0.
#[inline(always)]
unsafe fn tile_finish<T: Element>(s: *const T, tid: u32) -> T {
    let block = this_thread_block();
    let g = tiled_partition::<32>(&block);
    // SAFETY: `s` holds at least 32 reduced values; only warp 0 (complete) shuffles.
    unsafe {
        let mut y = *s.add(tid as usize);
        if tid < WARP_SIZE {
            let mut offset = g.size() >> 1;
            while offset > 0 {
                y = y.add(g.shfl_down(y, offset));
                offset >>= 1;
            }
        }
        y
    }
}

/// `reduce_cp`: the last five steps with the cooperative-groups tile API.
#[inline(always)]
pub unsafe fn cg_atomic<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    let tid = thread_idx_x();
    let s = dynamic_shared::<T>();
    // SAFETY: as `syncwarp_atomic`.
    unsafe {
        tree_to_one_warp(s, load_or_zero(x, n), tid);
        let y = tile_finish(s, tid);
        if tid == 0 {
            atomic_add(d_y, y);
        }
    }
}

/// Grid-stride sum of `x` into a register, then the block tree and tile finish; the block's sum
/// in thread 0.
#[inline(always)]
unsafe fn grid_stride_block_sum<T: Element>(x: *const T, n: usize) -> T {
    let tid = thread_idx_x();
    let s = dynamic_shared::<T>();
    let mut y = T::ZERO;
    for i in grid_stride_1d(n) {
        // SAFETY: `i < n`.
        y = y.add(unsafe { *x.add(i) });
    }
    // SAFETY: as `syncwarp_atomic`.
    unsafe {
        tree_to_one_warp(s, y, tid);
        tile_finish(s, tid)
    }
}

/// `reduce` of `reduce1parallelism.cu`: a fixed grid (10240 x 128 by default) sweeps the input
/// with a grid-stride loop, and block `b` writes its sum to `d_y[b]`. Launched a second time
/// as `<<<1, 1024>>>(d_y, grid, d_out)` it reduces the partials.
#[inline(always)]
pub unsafe fn parallelism<T: Element>(x: *const T, n: usize, d_y: *mut T) {
    // SAFETY: forwarded; `d_y` holds `gridDim.x` elements.
    unsafe {
        let y = grid_stride_block_sum(x, n);
        if thread_idx_x() == 0 {
            *d_y.add(block_idx_x() as usize) = y;
        }
    }
}

/// An element type with a static partials array for `reduce2_static` (the
/// `__device__ real static_y[GRID_SIZE]` of 樊哲勇第10章, declared with the kernel in `reduce`).
pub trait StaticPartials: Sized {
    /// The first of `REDUCE_STATIC_GRID` elements of the array.
    fn static_partials() -> *mut Self;
}

impl StaticPartials for f32 {
    #[inline(always)]
    fn static_partials() -> *mut f32 {
        (&raw mut super::REDUCE2_STATIC_PARTIALS_F32).cast()
    }
}

impl StaticPartials for f64 {
    #[inline(always)]
    fn static_partials() -> *mut f64 {
        (&raw mut super::REDUCE2_STATIC_PARTIALS_F64).cast()
    }
}
