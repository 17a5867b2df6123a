//! "Professional CUDA C Programming" §3.4 (《CUDA C编程权威指南》3.4, `reduceInteger.cu`) and
//! the execution-model notes (《CUDA执行模型》).
//!
//! Every kernel reduces in place in global memory: block `b` owns a chunk of the input (after
//! unrolling, `U` block-sized pieces of it), combines it with a tree, and writes one partial
//! sum to `g_odata[b]`; the host adds the partials. The input is destroyed, so the host runs
//! these on a scratch copy.
//!
//! The book's traps, and what these versions do instead:
//! - `if (idx >= n) return;` before the `__syncthreads()` loop leaves threads out of a barrier
//!   (undefined unless `n` is a multiple of the block). Here every thread reaches every
//!   barrier; bounds are checked on the element reads instead (`tid + stride < len`).
//! - `if (idx + 7 * blockDim.x < n)` plus a grid of `n / (8 * block)` drops the tail. Here the
//!   grid is `ceil(n / (U * block))` and each of the `U` loads is checked on its own.
//! - The `volatile` last-warp unrolling relied on a warp running in lock-step; since Volta
//!   (independent thread scheduling, 樊哲勇第10章) lanes may interleave differently, so one lane
//!   can read `vmem[tid + 16]` before the lane that owns it has added into it: a race. Here the
//!   last warp does each step under `if tid < offset` followed by `syncwarp`, the fix of 樊哲勇第10章.
//!
//! Block sizes: a power of two from 64 to 1024 (the host checks), as the halving trees and the
//! last-warp step (`tid + 32`) assume.
use super::Element;
use crate::device::sync::{syncthreads, syncwarp};
use crate::device::thread::{block_dim_x, block_idx_x, thread_idx_x};
use crate::device::warp::FULL_MASK;
use crate::probe::{NoProbe, Probe};

/// The elements of a chunk of `chunk` starting at `start` that exist in an input of `n`.
#[inline(always)]
fn valid_len(n: usize, start: usize, chunk: usize) -> u32 {
    n.saturating_sub(start).min(chunk) as u32
}

/// `idata[tid] += idata[tid + stride]` when both exist.
#[inline(always)]
unsafe fn combine_pair<T: Element>(idata: *mut T, tid: u32, stride: u32, len: u32) {
    if tid + stride < len {
        // SAFETY: both indices are below `len`, inside this block's chunk.
        unsafe {
            *idata.add(tid as usize) =
                (*idata.add(tid as usize)).add(*idata.add((tid + stride) as usize))
        };
    }
}

/// Writes the block's partial (slot 0 of its chunk) to `g_odata[blockIdx.x]`.
#[inline(always)]
unsafe fn write_partial<T: Element>(idata: *const T, g_odata: *mut T) {
    if thread_idx_x() == 0 {
        // SAFETY: slot 0 of the chunk exists (the grid never has empty blocks); `g_odata` holds
        // `gridDim.x` elements.
        unsafe { *g_odata.add(block_idx_x() as usize) = *idata };
    }
}

/// `reduceNeighbored`: stride 1, 2, 4, ...; the thread with `tid % (2 * stride) == 0` adds
/// its neighbour. Active threads are scattered over every warp: divergence in every step.
///
/// `probe` marks `(step, tid)` for each thread that adds in a step.
#[inline(always)]
pub unsafe fn neighbored<T: Element, P: Probe>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
    probe: P,
) {
    let (tid, bd) = (thread_idx_x(), block_dim_x());
    let start = block_idx_x() as usize * bd as usize;
    let len = valid_len(n, start, bd as usize);
    let idata = g_idata.wrapping_add(start);
    let mut stride = 1;
    let mut step = 0;
    while stride < bd {
        if tid % (2 * stride) == 0 {
            probe.mark(step, tid as usize, 1);
            // SAFETY: see `combine_pair`.
            unsafe { combine_pair(idata, tid, stride, len) };
        }
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { syncthreads() };
        stride *= 2;
        step += 1;
    }
    // SAFETY: as documented on `write_partial`.
    unsafe { write_partial(idata, g_odata) };
}

/// `reduceNeighboredLess`: the same pairs, but thread `tid` handles pair `index = 2 * stride *
/// tid`, so the active threads are the first ones and whole warps retire together.
///
/// `probe` marks `(step, tid)` for each thread that adds in a step.
#[inline(always)]
pub unsafe fn neighbored_less<T: Element, P: Probe>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
    probe: P,
) {
    let (tid, bd) = (thread_idx_x(), block_dim_x());
    let start = block_idx_x() as usize * bd as usize;
    let len = valid_len(n, start, bd as usize);
    let idata = g_idata.wrapping_add(start);
    let mut stride = 1;
    let mut step = 0;
    while stride < bd {
        let index = 2 * stride * tid;
        if index < bd {
            probe.mark(step, tid as usize, 1);
            // SAFETY: see `combine_pair`.
            unsafe { combine_pair(idata, index, stride, len) };
        }
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { syncthreads() };
        stride *= 2;
        step += 1;
    }
    // SAFETY: as documented on `write_partial`.
    unsafe { write_partial(idata, g_odata) };
}

/// The interleaved tree over the first `len` slots of `idata`, strides `from`, `from / 2`, ...
/// down to (excluding) `until`, with a barrier after each step.
///
/// `probe` marks `(step, tid)` for each thread that adds in a step.
#[inline(always)]
unsafe fn interleaved_tree<T: Element, P: Probe>(
    idata: *mut T,
    tid: u32,
    len: u32,
    from: u32,
    until: u32,
    probe: P,
) {
    let mut stride = from;
    let mut step = 0;
    while stride > until {
        if tid < stride {
            probe.mark(step, tid as usize, 1);
            // SAFETY: see `combine_pair`.
            unsafe { combine_pair(idata, tid, stride, len) };
        }
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { syncthreads() };
        stride >>= 1;
        step += 1;
    }
}

/// `reduceInterleaved`: stride `blockDim / 2` halving; thread `tid` adds `tid + stride`.
/// Active threads are contiguous and the accesses of a warp are coalesced.
///
/// `probe` marks `(step, tid)` for each thread that adds in a step.
#[inline(always)]
pub unsafe fn interleaved<T: Element, P: Probe>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
    probe: P,
) {
    let (tid, bd) = (thread_idx_x(), block_dim_x());
    let start = block_idx_x() as usize * bd as usize;
    let idata = g_idata.wrapping_add(start);
    // SAFETY: the tree stays inside this block's chunk; all threads reach its barriers.
    unsafe {
        interleaved_tree(
            idata,
            tid,
            valid_len(n, start, bd as usize),
            bd / 2,
            0,
            probe,
        );
        write_partial(idata, g_odata);
    }
}

/// Each thread first adds its `U` elements `idx, idx + blockDim, ...` and stores the sum in
/// place at `idx`; returns the block's chunk and how many sums exist. Ends with a barrier.
///
/// A thread whose `U` elements all lie below `n` loads them all before the first add, as the
/// notes' `if (idx + 7 * blockDim.x < n) { a1 = ...; ...; a8 = ...; }` does: `U` independent
/// loads in flight per thread is what makes unrolling fast. The notes then drop the partial
/// chunk at the end of the array; here a thread of that chunk checks each load against `n`.
/// Both paths add in the same order, `((0 + a1) + a2) + ...`.
#[inline(always)]
unsafe fn unroll_into_place<T: Element, const U: usize>(
    g_idata: *mut T,
    n: usize,
) -> (*mut T, u32) {
    let (tid, bd) = (thread_idx_x() as usize, block_dim_x() as usize);
    let start = block_idx_x() as usize * bd * U;
    let idx = start + tid;
    let mut sum = T::ZERO;
    if idx + (U - 1) * bd < n {
        let mut a = [T::ZERO; U];
        for (k, slot) in a.iter_mut().enumerate() {
            // SAFETY: `idx + k * bd <= idx + (U - 1) * bd < n`.
            *slot = unsafe { *g_idata.add(idx + k * bd) };
        }
        for v in a {
            sum = sum.add(v);
        }
    } else {
        for k in 0..U {
            let i = idx + k * bd;
            if i < n {
                // SAFETY: `i < n`.
                sum = sum.add(unsafe { *g_idata.add(i) });
            }
        }
    }
    if idx < n {
        // SAFETY: `idx < n`; no other thread reads this slot before the barrier.
        unsafe { *g_idata.add(idx) = sum };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { syncthreads() };
    (g_idata.wrapping_add(start), valid_len(n, start, bd))
}

/// `reduceUnrolling2/4/8`: `U` blocks' worth of data per block, then the interleaved tree.
#[inline(always)]
pub unsafe fn unrolling<T: Element, const U: usize>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    // SAFETY: all threads reach every barrier; accesses are bounded by `n` and the chunk.
    unsafe {
        let (idata, len) = unroll_into_place::<T, U>(g_idata, n);
        interleaved_tree(idata, thread_idx_x(), len, block_dim_x() / 2, 0, NoProbe);
        write_partial(idata, g_odata);
    }
}

/// The last 64 -> 1 steps inside warp 0, each under `tid < offset` and followed by `syncwarp`:
/// the race-free form of the book's `volatile` unrolling (樊哲勇第10章).
#[inline(always)]
unsafe fn last_warp<T: Element>(idata: *mut T, tid: u32, len: u32) {
    if tid < 32 {
        let mut offset = 32;
        while offset > 0 {
            if tid < offset {
                // SAFETY: see `combine_pair`.
                unsafe { combine_pair(idata, tid, offset, len) };
            }
            // SAFETY: warp 0 is complete (blocks have at least 64 threads) and all its lanes
            // reach this `syncwarp`.
            unsafe { syncwarp(FULL_MASK) };
            offset >>= 1;
        }
    }
}

/// `reduceUnrollWarps8`: unroll 8, tree down to 64 elements, then the last warp unrolled.
#[inline(always)]
pub unsafe fn unroll_warps8<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    let tid = thread_idx_x();
    // SAFETY: all threads reach every barrier; accesses are bounded by `n` and the chunk.
    unsafe {
        let (idata, len) = unroll_into_place::<T, 8>(g_idata, n);
        interleaved_tree(idata, tid, len, block_dim_x() / 2, 32, NoProbe);
        last_warp(idata, tid, len);
        write_partial(idata, g_odata);
    }
}

/// The tree from `block` down to 64 elements written out step by step: with a constant
/// `block` the untaken steps fold away, with `blockDim.x` they are cheap uniform branches.
#[inline(always)]
unsafe fn complete_tree<T: Element>(idata: *mut T, tid: u32, len: u32, block: u32) {
    for half in [512, 256, 128, 64] {
        if block >= 2 * half && tid < half {
            // SAFETY: see `combine_pair`.
            unsafe { combine_pair(idata, tid, half, len) };
        }
        if block >= 2 * half {
            // SAFETY: `block` is uniform, so every thread takes this barrier or none does.
            unsafe { syncthreads() };
        }
    }
}

/// `reduceCompleteUnrollWarps8`: unroll 8, the tree written out for block sizes up to 1024,
/// then the last warp.
#[inline(always)]
pub unsafe fn complete_unroll_warps8<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    let tid = thread_idx_x();
    // SAFETY: all threads reach every barrier; accesses are bounded by `n` and the chunk.
    unsafe {
        let (idata, len) = unroll_into_place::<T, 8>(g_idata, n);
        complete_tree(idata, tid, len, block_dim_x());
        last_warp(idata, tid, len);
        write_partial(idata, g_odata);
    }
}

/// `reduceCompleteUnroll<iBlockSize>`: as `complete_unroll_warps8`, with the block size a
/// compile-time constant; the host launches it with exactly `BLOCK` threads.
#[inline(always)]
pub unsafe fn complete_unroll<T: Element, const BLOCK: u32>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
) {
    let tid = thread_idx_x();
    // SAFETY: all threads reach every barrier; accesses are bounded by `n` and the chunk.
    unsafe {
        let (idata, len) = unroll_into_place::<T, 8>(g_idata, n);
        complete_tree(idata, tid, len, BLOCK);
        last_warp(idata, tid, len);
        write_partial(idata, g_odata);
    }
}
