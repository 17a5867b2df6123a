//! Constants and launch arithmetic shared by the kernels and the host (defined once here).

pub use ferrocuda_device::config::{WARP_SIZE, warp_mask_for_threads};

/// 16-byte vectors each thread of the fast reduction loads per tile (bytes in flight per thread:
/// 16 times this).
pub const REDUCE_FAST_ITEMS: usize = 4;

/// Threads per block of the reproducible sum: part of its summation order, so fixed.
pub const REDUCE_REPRO_BLOCK: u32 = 256;

/// 16-byte vectors each thread of the reproducible sum loads per chunk: part of its order too.
pub const REDUCE_REPRO_LOADS: usize = 8;

/// Elements per chunk of the reproducible sum for an element of `size` bytes (8192 `f32`, 4096
/// `f64`: 32 KiB). The order is fixed by `n` and this alone, never by the grid or the device.
pub const fn reduce_repro_chunk(size: usize) -> usize {
    REDUCE_REPRO_BLOCK as usize * REDUCE_REPRO_LOADS * (16 / size)
}

/// The radii of the 1D stencil (一维模板) with an entry point: `R` inputs on each side of the
/// centre, `2R + 1` in all. The 《CUDA C/C++ Basics》学习笔记
/// use `R = 3` (width 7).
pub const STENCIL_RADII: [u32; 6] = [1, 2, 3, 4, 8, 16];

/// Slots of a weighted stencil's coefficients (`stencil::Coefficients`): `2R + 1` for the
/// largest radius.
pub const STENCIL_MAX_TAPS: usize = 2 * STENCIL_RADII[STENCIL_RADII.len() - 1] as usize + 1;

/// The radius of the stencil of the 《CUDA C/C++ Basics》学习笔记.
pub const STENCIL_DEFAULT_RADIUS: u32 = 3;

/// Boundary mode of the stencil kernels (their `boundary` argument): inputs outside `0..n` read
/// as zero.
pub const STENCIL_BOUNDARY_ZERO: u32 = 0;
/// Boundary mode: an input index below 0 reads element 0, one at `n` or beyond element `n - 1`.
pub const STENCIL_BOUNDARY_CLAMP: u32 = 1;
/// Boundary mode: input indices wrap around modulo `n` (a ring).
pub const STENCIL_BOUNDARY_PERIODIC: u32 = 2;

/// 16-byte vectors of outputs each thread of the fast stencil computes per tile.
pub const STENCIL_FAST_VECTORS_PER_THREAD: usize = 2;

/// 16-byte vectors of the shared tile of `stencil_1d_fast_*` for a block of `block` threads and
/// elements of `lanes` per vector: the tile's outputs plus both halos and up to `lanes - 1`
/// elements that align the left halo to a vector boundary.
pub const fn stencil_fast_tile_vectors(block: u32, radius: u32, lanes: u32) -> u32 {
    block * STENCIL_FAST_VECTORS_PER_THREAD as u32 + (2 * radius + lanes - 1).div_ceil(lanes)
}

/// 16-byte vectors of outputs each thread of the iterated stencil (`stencil_1d_steps_*`)
/// stores per tile: a large tile, so that the `2 * steps * R` halo a tile recomputes is a small
/// part of it.
pub const STENCIL_STEPS_VECTORS_PER_THREAD: usize = 4;

/// The most time steps the iterated stencil applies per pass over memory, for radius `radius`
/// and `lanes` elements per 16-byte vector: each tile is loaded with a halo of that many times
/// `radius` on each side. A step costs instructions (its `2R + 1` adds or multiply-adds an
/// output, and its shared loads: on an H200 the steps are issue-bound), a pass the memory
/// traffic of one read and one write; deeper passes pay off until the halo a tile recomputes,
/// `2 * steps * R` elements, grows too large (the tuning notes, "Several steps per pass").
pub const fn stencil_steps_per_pass(radius: u32, lanes: u32) -> u32 {
    let _ = lanes;
    match radius {
        1..=3 => 16,
        4 => 12,
        8 => 16,
        _ => 8,
    }
}

/// 16-byte vectors of each of the two shared buffers of `stencil_1d_steps_*` for a block of
/// `block` threads, elements of `lanes` per vector and a pass of `steps` steps: the tile's
/// outputs, then for each step before the last the vectors its windows reach past them (where
/// a step's vectors lie on the output's vector grid, a window starts up to `lanes - 1`
/// elements into its first vector; counted for every type), and the first step's window with
/// its alignment shift.
pub const fn stencil_steps_tile_vectors(block: u32, radius: u32, lanes: u32, steps: u32) -> u32 {
    let later_shift = (lanes - radius % lanes) % lanes;
    block * STENCIL_STEPS_VECTORS_PER_THREAD as u32
        + (steps - 1) * (later_shift + 2 * radius).div_ceil(lanes)
        + (2 * radius + lanes - 1).div_ceil(lanes)
}

/// Dynamic shared memory of `stencil_1d_steps_*` for a block of `block` threads: its two
/// buffers of [`stencil_steps_tile_vectors`] vectors for the kernel's deepest pass.
pub const fn stencil_steps_shared_bytes(block: u32, radius: u32, lanes: u32) -> usize {
    let steps = stencil_steps_per_pass(radius, lanes);
    2 * 16 * stencil_steps_tile_vectors(block, radius, lanes, steps) as usize
}

/// Outputs the fast stencil's tiles cover (`stencil_1d_fast_*`, `stencil_1d_bulk_*`) for `n`
/// outputs whose first lies `out_offset` elements past a 16-byte boundary (`out_offset <
/// lanes`): the output's vectors of `lanes` elements, from that boundary; none for an empty
/// output.
pub const fn stencil_fast_body(n: usize, out_offset: usize, lanes: usize) -> usize {
    if n == 0 {
        0
    } else {
        (out_offset + n).next_multiple_of(lanes)
    }
}

/// Tiles of the fast stencil: its body ([`stencil_fast_body`]) cut into tiles of `tile`
/// outputs. The kernels loop over exactly these; the host launches one block each.
pub const fn stencil_fast_tiles(n: usize, out_offset: usize, lanes: usize, tile: usize) -> usize {
    stencil_fast_body(n, out_offset, lanes).div_ceil(tile)
}

/// Bytes of one stage of the bulk-copy kernel (`copy_bulk`): one `cp.async.bulk` each way.
/// 32 KiB in 2 stages was the fastest of the tiles (4 to 32 KiB) and stages (2 to 8) tried on
/// the H100, by about 1 % over 16 KiB in 4 (the tuning notes, "The bulk copy").
pub const COPY_BULK_TILE_BYTES: u32 = 32 * 1024;

/// Stages of the bulk-copy kernel: tiles in flight per block (a load landing while the other
/// stage is stored). 2 x 32 KiB = 64 KiB of dynamic shared memory, past the 48 KiB default.
pub const COPY_BULK_STAGES: u32 = 2;

/// Threads per block of the bulk-copy kernel: one warp (one thread issues the copies; the
/// others copy the unaligned head and tail).
pub const COPY_BULK_BLOCK: u32 = 32;

/// Stages of the bulk-copy stencil (`stencil_1d_bulk`): tiles in flight per block.
pub const STENCIL_BULK_STAGES: u32 = 3;

/// Blocks per cluster of the distributed-shared-memory stencil (`stencil_1d_cluster`).
pub const STENCIL_CLUSTER_BLOCKS: u32 = 4;

/// Blocks per cluster of the cluster reduction (`reduce_fast_cluster`): the portable maximum.
pub const REDUCE_CLUSTER_BLOCKS: u32 = 8;
