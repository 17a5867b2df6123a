//! The notes' shared tile, one level up: thread block clusters and distributed shared memory.
//!
//! In the notes' stencil (`shared_tile`, 《CUDA C/C++ Basics》学习笔记) each block loads its
//! `blockDim.x` inputs into shared memory plus a halo of `R` on each side, and the halo
//! belongs to the neighbouring blocks: it is read from global memory twice, once by its owner
//! and once by its neighbour. In a cluster (线程块簇), the neighbouring block's shared memory is
//! reachable (分布式共享内存, `ld.shared::cluster`): a block loads only its own inputs, waits for
//! the cluster (`cluster.sync()`, the cluster's `__syncthreads`), then reads its halos from its
//! neighbours' tiles. Only the two outer edges of the cluster read their halo from global
//! memory (through the boundary rule). Before exiting, the cluster waits once more: a block's
//! shared memory disappears with it, and its neighbours may still be reading. That second
//! barrier is split: each thread arrives (with release, which orders its remote reads before
//! the arrive) as soon as it has its halo, and waits only before exiting.
//!
//! One output per thread, as in the notes; the tile is `blockDim.x + 2R` elements of dynamic
//! shared memory, the block a multiple of 32 (so at least `R`).
use super::{Element, Taps, fetch};
use crate::device::cluster::{arrive, block_rank, cluster_sync, map_shared_rank, num_blocks, wait};
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, thread_idx_x};

/// The whole cluster stencil; see the module documentation.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones; `blockDim.x >= R`; the dynamic shared
/// memory holds `blockDim.x + 2R` elements; launched in clusters along x; every thread of the
/// grid runs it (the cluster barriers wait for all of them).
#[inline(always)]
pub unsafe fn cluster_tile<T: Element, P: Taps<T>, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    taps: P,
) {
    let tile = dynamic_shared::<T>();
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let first = (block_idx_x() as usize * block) as isize;
    let (rank, blocks) = (block_rank(), num_blocks());
    // SAFETY: every index of `tile` is below `block + 2R`; remote reads address the middles
    // of neighbouring blocks of the cluster (`block >= R`), written before the first cluster
    // barrier and alive until the second; `fetch` reads below `n`; every thread reaches every
    // barrier.
    unsafe {
        *tile.add(R + tid) = fetch(input, n, first + tid as isize, mode);
        cluster_sync();
        let mut h = tid;
        while h < R {
            // Left halo: the last R inputs of the block before, its slots `block .. block + R`.
            *tile.add(h) = if rank > 0 {
                map_shared_rank(tile, rank - 1).add(block + h).read()
            } else {
                fetch(input, n, first - (R - h) as isize, mode)
            };
            // Right halo: the first R inputs of the block after, its slots `R .. 2R`.
            *tile.add(R + block + h) = if rank + 1 < blocks {
                map_shared_rank(tile, rank + 1).add(R + h).read()
            } else {
                fetch(input, n, first + (block + h) as isize, mode)
            };
            h += block;
        }
        // This thread is done with its neighbours' tiles (the values it read are in its own
        // tile): it says so now, its remote reads ordered before the arrive (release), and
        // waits for the others only before exiting, so the barrier's latency hides behind the
        // arithmetic and the store.
        arrive();
        syncthreads();
        let i = first as usize + tid;
        if i < n {
            let mut acc = T::ADD_IDENTITY;
            for k in 0..2 * R + 1 {
                acc = taps.accumulate(acc, k, *tile.add(tid + k));
            }
            *out.add(i) = acc;
        }
        // The neighbours may still read this block's tile.
        wait();
    }
}
