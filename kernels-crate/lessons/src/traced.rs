//! The kernels the pictures of `--draw` are drawn from: the textbook trees and the shared
//! stencil, the same code as the kernels the lessons time, with a [`Trace`] probe instead of
//! [`NoProbe`](crate::probe::NoProbe) (`crate::probe`).
use crate::entry::kernel;
use crate::probe::Trace;
use ferrocuda_kernels::stencil::Ones;

/// The three trees of `reduce` (`reduce_neighbored`, `reduce_neighbored_less`, `reduce_interleaved`) with a [`Trace`] probe, for the pictures of `ferrocuda reduce
/// --draw`: `trace` is a `steps x blockDim.x` table of `u32`, and block 0 writes 1 at
/// `(step, tid)` for each thread that adds in that step. `tree` picks the kernel: 0
/// `neighbored`, 1 `neighbored_less`, 2 `interleaved`.
///
/// # Launch
/// As the kernel `tree` picks.
///
/// # Safety
/// As that kernel, and `trace` holds `steps * blockDim.x` writable `u32`.
#[kernel]
pub unsafe fn reduce_tree_traced_i32(
    g_idata: *mut i32,
    g_odata: *mut i32,
    n: usize,
    tree: u32,
    trace: *mut u32,
    steps: usize,
) {
    // SAFETY: `trace` holds `steps * blockDim.x` words (the caller's contract); each cell is
    // written by its own thread.
    let probe = unsafe {
        Trace::new(
            trace,
            steps,
            crate::device::thread::block_dim_x() as usize,
            true,
        )
    };
    // SAFETY: forwarded to the caller.
    unsafe {
        match tree {
            0 => crate::reduce::textbook::neighbored(g_idata, g_odata, n, probe),
            1 => crate::reduce::textbook::neighbored_less(g_idata, g_odata, n, probe),
            _ => crate::reduce::textbook::interleaved(g_idata, g_odata, n, probe),
        }
    }
}

/// `stencil_1d_shared` (R = 3, `f32`) with a [`Trace`] probe, for the picture of `ferrocuda
/// stencil --draw`: `trace` is a `gridDim.x x (blockDim.x + 6)` table of `u32`, and block `b`
/// writes `i + STAGED_BIAS` at `(b, slot)` for each slot of its tile it stages from input cell
/// `i` (outside `0..n` for a halo past either end).
///
/// # Launch
/// As `stencil_1d_shared`.
///
/// # Safety
/// As `stencil_1d_shared`, and `trace` holds `gridDim.x * (blockDim.x + 6)` writable `u32`.
#[kernel(dynamic_shared = crate::config::stencil_shared_tile_len(block as u32, 3) as usize
    * size_of::<f32>())]
pub unsafe fn stencil_1d_shared_traced_f32(
    input: *const f32,
    out: *mut f32,
    n: usize,
    boundary: u32,
    trace: *mut u32,
) {
    // SAFETY: `trace` holds `gridDim.x * (blockDim.x + 6)` words (the caller's contract); a
    // tile slot is staged by one thread of its block.
    let probe = unsafe {
        Trace::new(
            trace,
            crate::device::thread::grid_dim_x() as usize,
            crate::device::thread::block_dim_x() as usize + 6,
            false,
        )
    };
    // SAFETY: forwarded to the caller.
    unsafe {
        crate::stencil::textbook::shared_tile::<f32, Ones, 3, Trace>(
            input, out, n, boundary, Ones, probe,
        )
    }
}
