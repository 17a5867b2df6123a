//! Broken on purpose: the notes' wrong listings as printed, so that `ferrocuda <lesson>
//! --as-printed` shows each going wrong beside the corrected kernel, and `ferrocuda sanitize`
//! shows the race checker catching the racy ones. The library never launches them.
//!
//! - [`broken_stencil_1d_no_sync_f32`]: the shared-memory stencil of the
//!   《CUDA C/C++ Basics》学习笔记 without the
//!   `__syncthreads()` between filling the tile and reading it: thread 15 may read a halo slot
//!   before thread 0 has written it. `racecheck` reports the hazard.
//! - [`broken_reduce_volatile_warp_i32`]: the book's last-warp unrolling through a `volatile`
//!   shared array with every lane adding at every step and no `__syncwarp()`. Correct only when
//!   a warp runs in lock-step, which Volta's independent thread scheduling no longer
//!   guarantees; `racecheck` reports the intra-warp hazards.
//! - [`broken_math_kernel4_precedence`]: `if (itid & 0x01 == 0)` of 《CUDA C编程权威指南》's
//!   `simpleDivergence.cu`: `==` binds tighter than `&`, so the test is `itid & 0`, never true.
//! - [`broken_reduce1_offset32_f32`]: `reduce1` of 樊哲勇《CUDA编程基础与实践》第10章的学习笔记,
//!   whose tile loop starts at `offset = 32` on a tile of 32 lanes: a shuffle takes the low 5
//!   bits of its offset, so `shfl_down` by 32 reads the lane's own value and each block's sum
//!   is doubled.
//! - [`broken_reduce_unrolling2_offset_i32`]: the unroll-by-2 step of 学习笔记《CUDA执行模型》,
//!   `g_idata[idx] += g_idata[idx + blockDim.x*2*stride]`, with `stride` (never defined before
//!   it) at its first value, 1: each block adds the next pair's first data block, which that
//!   pair's block updates in place at the same time (a race across blocks), not its own second
//!   one; the second data blocks are never summed, so the sum is wrong whatever the order.
//! - [`broken_reduce_neighbored_early_return_i32`]: `reduceNeighbored` of 《CUDA C编程权威指南》3.4
//!   as printed, `if (idx >= n) return;` before the barrier loop and `idata[tid + stride]`
//!   unchecked: with `n` not a multiple of the block the last block adds elements past `n`,
//!   and its threads past `n` never reach the barriers (which CUDA C++ does not allow; PTX's
//!   `bar.sync` on sm_70 and later waits only for threads that have not exited).
//! - [`broken_reduce_v_loop_f32`]: the "correct" last warp of 樊哲勇《CUDA编程基础与实践》第10章
//!   的学习笔记 (`v += s_y[tid + offset]; __syncwarp(); s_y[tid] += s_y[tid + offset];
//!   __syncwarp();`): every lane still writes `s_y[tid]` while another reads it between the
//!   same two barriers, a race; `v` is never used.
use crate::device::{
    cg::{this_thread_block, tiled_partition},
    shared::dynamic_shared,
    sync::{syncthreads, syncwarp},
    thread::{block_dim_x, block_idx_x, grid_dim_x, index_1d, thread_idx_x},
    warp::FULL_MASK,
};
use crate::entry::kernel;

/// The radius of the broken stencil (the slide's `RADIUS`).
const R: usize = 3;

/// WRONG (missing barrier). `<<<ceil(n / B), B>>>`, `B >= 3`, dynamic shared memory
/// `(B + 6) * 4` bytes.
///
/// # Safety
/// `input` and `out` hold `n` floats. The result is unreliable by design.
#[kernel(dynamic_shared = (block + 2 * 3) * size_of::<f32>())]
pub unsafe fn broken_stencil_1d_no_sync_f32(input: *const f32, out: *mut f32, n: usize) {
    let temp = dynamic_shared::<f32>();
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let g = index_1d();
    let load = |i: isize| {
        if i >= 0 && (i as usize) < n {
            unsafe { *input.add(i as usize) }
        } else {
            0.0
        }
    };
    // SAFETY: tile slots stay below `block + 2R`; loads are bounded by `n`.
    unsafe {
        *temp.add(tid + R) = load(g as isize);
        if tid < R {
            *temp.add(tid) = load(g as isize - R as isize);
            *temp.add(tid + block + R) = load((g + block) as isize);
        }
        // The lesson's missing `syncthreads()` belongs here.
        if g < n {
            let mut s = 0.0;
            for k in 0..=2 * R {
                s += *temp.add(tid + k);
            }
            *out.add(g) = s;
        }
    }
}

/// WRONG (warp-synchronous code without `__syncwarp`). `<<<ceil(n / B), B>>>`, `B` a power of
/// two from 64, dynamic shared memory `B * 4` bytes; one partial sum per block into `out`.
///
/// # Safety
/// `input` holds `n` ints, `out` one per block. The result is unreliable by design.
#[kernel(dynamic_shared = block * size_of::<i32>())]
pub unsafe fn broken_reduce_volatile_warp_i32(input: *const i32, out: *mut i32, n: usize) {
    let s = dynamic_shared::<i32>();
    let tid = thread_idx_x() as usize;
    let i = index_1d();
    // SAFETY: `s` holds `blockDim.x` ints; loads are bounded by `n`.
    unsafe {
        *s.add(tid) = if i < n { *input.add(i) } else { 0 };
        syncthreads();
        let mut stride = block_dim_x() as usize / 2;
        while stride > 32 {
            if tid < stride {
                *s.add(tid) = (*s.add(tid)).wrapping_add(*s.add(tid + stride));
            }
            syncthreads();
            stride /= 2;
        }
        if tid < 32 {
            for offset in [32, 16, 8, 4, 2, 1] {
                let v = core::ptr::read_volatile(s.add(tid))
                    .wrapping_add(core::ptr::read_volatile(s.add(tid + offset)));
                core::ptr::write_volatile(s.add(tid), v);
            }
        }
        if tid == 0 {
            *out.add(block_idx_x() as usize) = *s;
        }
    }
}

/// WRONG (operator precedence), as 《CUDA C编程权威指南》's `mathKernel4` prints it:
/// `itid = tid >> 5; if (itid & 0x01 == 0) ia = ...; else ib = ...;`. In C (and here, spelled
/// out) `0x01 == 0` is evaluated first, so the test is `itid & 0`: every thread takes the
/// `else` side. Same launch and values as `math_kernel4`.
///
/// # Safety
/// `c` holds `n` elements.
#[kernel]
pub unsafe fn broken_math_kernel4_precedence(c: *mut f32, n: usize, work: u32) {
    let tid = index_1d();
    let itid = tid >> 5;
    let (mut ia, mut ib) = (0.0, 0.0);
    // C's `itid & 0x01 == 0`, which parses as `itid & (0x01 == 0)`.
    #[allow(clippy::bad_bit_mask)]
    if (itid & usize::from(0x01 == 0)) != 0 {
        ia = crate::lab::side(100.0, work);
    } else {
        ib = crate::lab::side(200.0, work);
    }
    if tid < n {
        // SAFETY: `tid < n`, and `c` holds `n` elements.
        unsafe { *c.add(tid) = ia + ib };
    }
}

/// WRONG (tile loop from offset 32), `reduce1` of 樊哲勇《CUDA编程基础与实践》第10章的学习笔记 as
/// printed: a grid-stride sum into `temp`, the shared tree `for (offset = blockDim.x >> 1;
/// offset >= 32; ...)`, then `for (offset = 32; offset > 0; ...) temp += g.shfl_down(temp,
/// offset);` on a `thread_block_tile<32>`. Launched twice as the note does
/// (`<<<GRID, B>>>(d_x, d_y, N)`, then `<<<1, 1024>>>(d_y, d_y, GRID)`), the total is four
/// times the sum. Block a power of two from 64, dynamic shared memory `B * 4` bytes.
///
/// # Safety
/// `d_x` holds `n` floats, `d_y` one per block; `d_x == d_y` is allowed for the one-block
/// second launch (each thread reads its elements before the block's first barrier).
#[kernel(dynamic_shared = block * size_of::<f32>())]
pub unsafe fn broken_reduce1_offset32_f32(d_x: *const f32, d_y: *mut f32, n: usize) {
    let tid = thread_idx_x();
    let bid = block_idx_x();
    let stride = (block_dim_x() * grid_dim_x()) as usize;
    let s = dynamic_shared::<f32>();
    let mut temp = 0.0f32;
    let mut i = (bid * block_dim_x() + tid) as usize;
    while i < n {
        // SAFETY: `i < n`.
        temp += unsafe { *d_x.add(i) };
        i += stride;
    }
    // SAFETY: `s` holds `blockDim.x` floats; every thread reaches every barrier.
    unsafe {
        *s.add(tid as usize) = temp;
        syncthreads();
        let mut offset = block_dim_x() >> 1;
        while offset >= 32 {
            if tid < offset {
                *s.add(tid as usize) += *s.add((tid + offset) as usize);
            }
            syncthreads();
            offset >>= 1;
        }
        temp = *s.add(tid as usize);
        let block = this_thread_block();
        let g = tiled_partition::<32>(&block);
        // The note's loop: `offset = 32` is one step too many on a tile of 32.
        let mut offset = 32;
        while offset > 0 {
            temp += g.shfl_down(temp, offset);
            offset >>= 1;
        }
        if tid == 0 {
            *d_y.add(bid as usize) = temp;
        }
    }
}

/// WRONG (unroll-by-2 offset), the step of 学习笔记《CUDA执行模型》 "归约初步展开",
/// `g_idata[idx] += g_idata[idx + blockDim.x*2*stride]` with `stride = 1`, in the book's
/// `reduceUnrolling2` (each block owns two data blocks, then the interleaved tree over the
/// first). The bound is checked, so nothing is read past `n`; block `b` reads block `b + 1`'s
/// first data block while that block updates it (a race across blocks), so the exact sum
/// depends on the blocks' order, and it is wrong in every order (no block reads a pair's
/// second data block). Grid `ceil(n / 2B)`, block a power of two from 64.
///
/// # Safety
/// `g_idata` holds `n` ints (overwritten), `g_odata` one per block. The result is unreliable
/// by design.
#[kernel]
pub unsafe fn broken_reduce_unrolling2_offset_i32(g_idata: *mut i32, g_odata: *mut i32, n: usize) {
    let (tid, bd) = (thread_idx_x() as usize, block_dim_x() as usize);
    let idx = block_idx_x() as usize * bd * 2 + tid;
    let idata = g_idata.wrapping_add(block_idx_x() as usize * bd * 2);
    let stride = 1;
    // SAFETY: every index is checked against `n` (in bounds); every thread reaches every
    // barrier. The cross-block race on the next pair's first data block is the listing's bug.
    unsafe {
        if idx + bd * 2 * stride < n && idx < n {
            *g_idata.add(idx) =
                (*g_idata.add(idx)).wrapping_add(*g_idata.add(idx + bd * 2 * stride));
        }
        syncthreads();
        let len = n.saturating_sub(block_idx_x() as usize * bd * 2).min(bd);
        let mut s = bd / 2;
        while s > 0 {
            if tid < s && tid + s < len {
                *idata.add(tid) = (*idata.add(tid)).wrapping_add(*idata.add(tid + s));
            }
            syncthreads();
            s >>= 1;
        }
        if tid == 0 {
            *g_odata.add(block_idx_x() as usize) = if len > 0 { *idata } else { 0 };
        }
    }
}

/// WRONG (early return before the barriers), `reduceNeighbored` of 《CUDA C编程权威指南》3.4
/// as printed: `if (idx >= n) return;`, then `idata[tid] += idata[tid + stride]` with no bound.
/// With `n` a multiple of the block it is right; otherwise the last block's threads past `n`
/// leave before the barriers (not allowed by CUDA C++; on sm_70 and later `bar.sync` waits only
/// for threads that have not exited) and the ones below `n` add `idata[tid + stride]` past `n`. Grid `ceil(n / B)`, block a power of two from 64.
///
/// # Safety
/// `g_idata` holds `ceil(n / B) * B` ints (the last block reads its whole chunk), `g_odata`
/// one per block. The result is unreliable by design.
#[kernel]
pub unsafe fn broken_reduce_neighbored_early_return_i32(
    g_idata: *mut i32,
    g_odata: *mut i32,
    n: usize,
) {
    let tid = thread_idx_x() as usize;
    let idx = block_idx_x() as usize * block_dim_x() as usize + tid;
    let idata = g_idata.wrapping_add(block_idx_x() as usize * block_dim_x() as usize);
    if idx >= n {
        return;
    }
    let mut stride = 1;
    // SAFETY: indices stay inside the block's chunk (the caller's contract).
    unsafe {
        while stride < block_dim_x() as usize {
            if tid % (2 * stride) == 0 {
                *idata.add(tid) = (*idata.add(tid)).wrapping_add(*idata.add(tid + stride));
            }
            syncthreads();
            stride *= 2;
        }
        if tid == 0 {
            *g_odata.add(block_idx_x() as usize) = *idata;
        }
    }
}

/// WRONG (racy last warp), `reduce_syncwarp` with the last warp of 樊哲勇《CUDA编程基础与实践》
/// 第10章的学习笔记 as printed (its stray `/` after the `for` dropped):
/// `real v = 0; for (offset = 16; offset > 0; offset >>= 1) { v += s_y[tid + offset];
/// __syncwarp(); s_y[tid] += s_y[tid + offset]; __syncwarp(); }` for `tid < 32`. Lane 0
/// reads `s_y[16]` while lane 16 adds into it between the same two barriers. Block a power of
/// two from 64, dynamic shared memory `B * 4` bytes; one partial per block into `d_y`.
///
/// # Safety
/// `x` holds `n` floats, `d_y` one per block. The result is unreliable by design.
#[kernel(dynamic_shared = block * size_of::<f32>())]
pub unsafe fn broken_reduce_v_loop_f32(x: *const f32, d_y: *mut f32, n: usize) {
    let tid = thread_idx_x();
    let i = index_1d();
    let s_y = dynamic_shared::<f32>();
    // SAFETY: `s_y` holds `blockDim.x >= 64` floats; loads are bounded by `n`; every thread
    // reaches every block barrier, and warp 0 is complete for `syncwarp`.
    unsafe {
        *s_y.add(tid as usize) = if i < n { *x.add(i) } else { 0.0 };
        syncthreads();
        let mut offset = block_dim_x() >> 1;
        while offset >= 32 {
            if tid < offset {
                *s_y.add(tid as usize) += *s_y.add((tid + offset) as usize);
            }
            syncthreads();
            offset >>= 1;
        }
        if tid < 32 {
            let mut v = 0.0f32;
            let mut offset = 16;
            while offset > 0 {
                v += *s_y.add((tid + offset) as usize);
                syncwarp(FULL_MASK);
                *s_y.add(tid as usize) += *s_y.add((tid + offset) as usize);
                syncwarp(FULL_MASK);
                offset >>= 1;
            }
            let _ = v;
        }
        if tid == 0 {
            *d_y.add(block_idx_x() as usize) = *s_y;
        }
    }
}
