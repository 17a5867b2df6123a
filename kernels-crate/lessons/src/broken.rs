//! Broken on purpose. These two kernels reproduce the notes' classic mistakes so that
//! `ferrocuda sanitize` can show `compute-sanitizer` catching them. The library never launches
//! them; nothing else may.
//!
//! - [`broken_stencil_1d_no_sync_f32`]: the shared-memory stencil of the
//!   《CUDA C/C++ Basics》学习笔记 without the
//!   `__syncthreads()` between filling the tile and reading it: thread 15 may read a halo slot
//!   before thread 0 has written it. `racecheck` reports the hazard.
//! - [`broken_reduce_volatile_warp_i32`]: the book's last-warp unrolling through a `volatile`
//!   shared array with every lane adding at every step and no `__syncwarp()`. Correct only when
//!   a warp runs in lock-step, which Volta's independent thread scheduling no longer
//!   guarantees; `racecheck` reports the intra-warp hazards.
use crate::device::{
    shared::dynamic_shared,
    sync::syncthreads,
    thread::{block_dim_x, block_idx_x, index_1d, thread_idx_x},
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
