//! Constants and launch arithmetic of the lessons, shared by their kernels and the host
//! (defined once here); the library's are in `ferrocuda_kernels::config`, re-exported here.

pub use ferrocuda_kernels::config::*;

/// Threads per block of the smoke kernel.
pub const SMOKE_BLOCK: u32 = 256;

/// Threads per block of `selftest_shared_static` (its static shared array holds one `u32` each).
pub const SELFTEST_SHARED_BLOCK: u32 = 256;

/// Blocks of the notes' grid-stride reduction (`GRID_SIZE = 10240`), and the length of the
/// static partials arrays of `reduce2_static_*`.
pub const REDUCE_STATIC_GRID: u32 = 10240;

/// Elements of the shared tile of `stencil_1d_shared_*` / `stencil_1d_weighted_*`: the block's
/// own inputs plus a halo of `radius` on each side (the slide's `BLOCK_SIZE + 2 * RADIUS`).
pub const fn stencil_shared_tile_len(block: u32, radius: u32) -> u32 {
    block + 2 * radius
}

/// Words per lane written by `warp_functions_demo`.
pub const WARP_DEMO_WORDS: usize = 12;
