//! Device-to-device copy with bulk copies (TMA), the ceiling the stencil is measured against,
//! in Rust: the driver's `cuMemcpyDtoD` moves bytes with a copy kernel of its own; this one
//! moves them with Hopper's tensor memory accelerator (TMA), a tile at a time, the threads
//! doing nothing but issuing.
//!
//! Per block, one thread runs a pipeline of `COPY_BULK_STAGES` shared-memory stages of
//! `COPY_BULK_TILE_BYTES` each: a bulk load (global -> shared) of a tile completes on the
//! stage's transaction barrier; then a bulk store (shared -> global) writes it out, and once the
//! store has read the stage (`wait_group.read`), the stage takes the tile `STAGES` ahead. So
//! `STAGES` tiles of loads and stores are in flight per block, with a few blocks per SM
//! (64 KiB of shared memory each). Tiles go to blocks round-robin.
//!
//! The host launches one block per tile, so a block copies one tile and the block scheduler
//! does the rest, each SM taking the next tile as soon as it has room. On an H100 that reaches
//! the driver's copy speed; a grid of the resident blocks, each cycling its stages, stays a few
//! percent short (docs/tuning-notes.md, "The grid, not the pipeline", which gives the likely
//! reasons). On that grid a block uses one of its two stages.
//!
//! Bulk copies need 16-byte aligned addresses on both sides: the bytes before the source's
//! first 16-byte boundary (the head) and after its last (the tail) are copied by the block's
//! threads, one byte each. A source and destination at different offsets from a 16-byte
//! boundary cannot be bulk-copied: the host refuses them (`ferrocuda::copy::CopyRun::new`),
//! naming the driver's copy, which takes any pair.
#[cfg(any(not(target_arch = "nvptx64"), feature = "entry-points"))]
use crate::entry::kernel;

/// What `copy_bulk`'s body uses: it exists only in the sm_90 PTX.
#[cfg(any(
    not(target_arch = "nvptx64"),
    all(target_feature = "sm_90", feature = "entry-points")
))]
mod body {
    pub(super) use crate::config::{COPY_BULK_STAGES, COPY_BULK_TILE_BYTES};
    pub(super) use crate::device::bulk::{self, Mbarrier};
    pub(super) use crate::device::shared::dynamic_shared;
    pub(super) use crate::device::thread::{
        block_idx_x, grid_dim_x, grid_size_1d, index_1d, thread_idx_x,
    };

    crate::shared_array!(
        /// The transaction barrier of each stage of `copy_bulk`.
        pub(super) fn copy_bulk_barriers() -> [u64; 8]
    );
}
#[cfg(any(
    not(target_arch = "nvptx64"),
    all(target_feature = "sm_90", feature = "entry-points")
))]
use body::*;

entry_points! {
/// Copies `bytes` bytes from `src` to `dst` with bulk copies; see the module documentation.
///
/// # Launch
/// block `COPY_BULK_BLOCK` (32) threads or more, any grid (the host uses one block per tile),
/// dynamic shared memory `COPY_BULK_STAGES * COPY_BULK_TILE_BYTES` (64 KiB, past the 48
/// KiB default: the launch opts in). sm_90 and newer.
///
/// # Safety
/// `src` holds `bytes` readable bytes and `dst` `bytes` writable ones, not overlapping; `src`
/// and `dst` are at the same offset from a 16-byte boundary.
#[kernel(
    arch = 90,
    dynamic_shared = (crate::config::COPY_BULK_STAGES * crate::config::COPY_BULK_TILE_BYTES) as usize
)]
pub unsafe fn copy_bulk(src: *const u8, dst: *mut u8, bytes: usize) {
    let head = ((16 - src as usize % 16) % 16).min(bytes);
    let body = (bytes - head) / 16 * 16;
    let tail = head + body;
    // The ragged ends, a byte per thread over the grid.
    let (mut i, stride) = (index_1d(), grid_size_1d());
    while i < head + (bytes - tail) {
        let at = if i < head { i } else { tail + i - head };
        // SAFETY: `at < bytes`.
        unsafe { *dst.add(at) = *src.add(at) };
        i += stride;
    }
    if thread_idx_x() != 0 || body == 0 {
        return;
    }
    const { assert!(COPY_BULK_STAGES >= 2 && COPY_BULK_STAGES <= 8) };
    let tile = COPY_BULK_TILE_BYTES as usize;
    let stages = COPY_BULK_STAGES as usize;
    let tiles = body.div_ceil(tile);
    let (first, grid) = (block_idx_x() as usize, grid_dim_x() as usize);
    let stage = |j: usize| dynamic_shared::<u8>().wrapping_add(j % stages * tile);
    let barrier = |j: usize| Mbarrier::at(copy_bulk_barriers().wrapping_add(j % stages));
    // Tile `t` of the body: its offset in the source and its length.
    let part = |t: usize| (head + t * tile, (body - t * tile).min(tile) as u32);
    // This block's `j`-th tile, if it has one.
    let tile_of = |j: usize| Some(first + j * grid).filter(|&t| t < tiles);
    // SAFETY: one thread owns the barriers and the stages; every load lands in a stage no store
    // is still reading (`wait_group_read`); every address is 16-byte aligned inside the body.
    unsafe {
        for j in 0..stages {
            barrier(j).init(1);
        }
        bulk::fence_mbarrier_init();
        let issue = |j: usize| {
            if let Some(t) = tile_of(j) {
                let (at, len) = part(t);
                barrier(j).arrive_expect_tx(len);
                bulk::load(stage(j), src.add(at), len, barrier(j));
            }
        };
        for j in 0..stages {
            issue(j);
        }
        let mut j = 0;
        while let Some(t) = tile_of(j) {
            let (at, len) = part(t);
            barrier(j).wait_parity((j / stages) as u32 & 1);
            bulk::store(dst.add(at), stage(j), len);
            bulk::commit_group();
            if j >= 1 {
                // The store of tile `j - 1` has read its stage: it takes tile `j - 1 + STAGES`.
                bulk::wait_group_read::<1>();
                issue(j - 1 + stages);
            }
            j += 1;
        }
        // The shared stages must outlive the stores that read them.
        bulk::wait_all();
    }
}
}
