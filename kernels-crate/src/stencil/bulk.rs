//! The fast stencil fed by bulk copies (TMA): the same tiles, window and stores as `fast`, but a
//! tile's input reaches shared memory with one `cp.async.bulk`, issued by one thread
//! `STENCIL_BULK_STAGES - 1` tiles ahead, instead of one 16-byte load per thread held in
//! registers across the barrier.
//!
//! Per block, `STAGES` shared stages, each with its transaction barrier. In iteration `j` the
//! block computes tile `j` from stage `j mod STAGES` (after waiting for its barrier's phase)
//! while the loads of tiles `j + 1 .. j + STAGES - 1` are in flight; thread 0 first refills the
//! stage tile `j - 1` used (every thread finished reading it at the barrier that ended
//! iteration `j - 1`), after `fence.proxy.async`, which orders the threads' reads of it before
//! the copy engine's writes. Edge tiles (the at most two whose input leaves `0..n`) are filled
//! by the threads through the boundary rule; their barrier phase still completes, with an
//! arrival of 0 bytes, so every stage's phases stay in step with its tiles.
use super::fast::{Tiling, fill_edge_tile, output_vector, store_output};
use super::{Element, Taps};
use crate::config::{
    STENCIL_BULK_STAGES, STENCIL_FAST_VECTORS_PER_THREAD as V, stencil_fast_tile_vectors,
};
use crate::device::bulk::{self, Mbarrier};
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

crate::shared_array!(
    /// The transaction barrier of each stage of `stencil_1d_bulk`.
    fn stencil_bulk_barriers() -> [u64; 4]
);

/// The pipelined loop over the tiles, for one input shift.
///
/// # Safety
/// As [`bulk`]; `SHIFT` is the tiling's input shift.
#[inline(always)]
unsafe fn tiles<T: Element, P: Taps<T::Acc>, const R: usize, const SHIFT: usize>(
    input: *const T,
    out: *mut T,
    mode: u32,
    taps: &P,
    tiling: Tiling,
) {
    const { assert!(STENCIL_BULK_STAGES >= 2 && STENCIL_BULK_STAGES <= 4) };
    let stages = STENCIL_BULK_STAGES as usize;
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let tiles = tiling.tiles();
    let stage_vectors = stencil_fast_tile_vectors(block as u32, R as u32, T::LANES as u32) as usize;
    let stage = |j: usize| dynamic_shared::<T::V>().wrapping_add(j % stages * stage_vectors);
    let barrier = |j: usize| Mbarrier::at(stencil_bulk_barriers().wrapping_add(j % stages));
    let (first, grid) = (block_idx_x() as usize, grid_dim_x() as usize);
    let tile_of = |j: usize| Some(first + j * grid).filter(|&t| t < tiles);
    // SAFETY: thread 0 alone arrives on the barriers and issues the copies, each into a stage no
    // thread reads until its phase completes and that every thread finished reading (the
    // barrier ending the previous iteration); interior tiles start at an input vector boundary
    // (16-byte aligned) and hold `vectors <= stage_vectors` vectors inside `0..n`; every thread
    // runs the same iterations (`t` is uniform per block) and reaches every barrier.
    unsafe {
        let issue = |j: usize| {
            if let Some(t) = tile_of(j) {
                let tile = tiling.tile::<T, R, SHIFT>(t);
                if tile.interior {
                    let bytes = (tile.vectors * 16) as u32;
                    barrier(j).arrive_expect_tx(bytes);
                    let src = input.add(tile.first_in as usize).cast::<T::V>();
                    bulk::load(stage(j), src, bytes, barrier(j));
                } else {
                    barrier(j).arrive_expect_tx(0);
                }
            }
        };
        if tid == 0 {
            for j in 0..stages {
                barrier(j).init(1);
            }
            bulk::fence_mbarrier_init();
        }
        syncthreads();
        if tid == 0 {
            for j in 0..stages - 1 {
                issue(j);
            }
        }
        let mut j = 0;
        while let Some(t) = tile_of(j) {
            if tid == 0 {
                bulk::fence_proxy_async();
                issue(j + stages - 1);
            }
            let tile = tiling.tile::<T, R, SHIFT>(t);
            barrier(j).wait_parity((j / stages) as u32 & 1);
            if !tile.interior {
                fill_edge_tile(stage(j).cast::<T>(), input, tiling.n, mode, tile);
                syncthreads();
            }
            for round in 0..V {
                let g = tid + round * block;
                if g * T::LANES < tile.outputs {
                    let y = output_vector::<T, P, R, SHIFT>(stage(j), g, taps);
                    store_output(out, tiling.n, tile.first_out + (g * T::LANES) as isize, y);
                }
            }
            syncthreads();
            j += 1;
        }
    }
}

/// The whole bulk-copy stencil; see the module documentation.
///
/// # Safety
/// As [`super::fast::fast`], with `STENCIL_BULK_STAGES` stages of
/// `stencil_fast_tile_vectors(blockDim.x, R, LANES)` vectors of dynamic shared memory; sm_90.
#[inline(always)]
pub unsafe fn bulk<T: Element, P: Taps<T::Acc>, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    taps: P,
) {
    let (tiling, shift) = Tiling::of::<T, R>(input, out, n);
    // SAFETY: `shift` is the input shift `tiles` requires; the rest is the caller's.
    unsafe {
        match shift {
            0 => tiles::<T, P, R, 0>(input, out, mode, &taps, tiling),
            1 => tiles::<T, P, R, 1>(input, out, mode, &taps, tiling),
            2 => tiles::<T, P, R, 2>(input, out, mode, &taps, tiling),
            _ => tiles::<T, P, R, 3>(input, out, mode, &taps, tiling),
        }
    }
}
