//! Parallel reduction (归约): every textbook variant of the notes.
//!
//! - `textbook`: 《CUDA C编程权威指南》第3章 (3.4, 3.5): neighbored and interleaved pairing
//!   (相邻配对 / 交错配对), unrolling (循环展开), warp unrolling, complete unrolling, template
//!   unrolling. In place on a scratch copy, one partial per block.
//! - `warp_level`: 樊哲勇《CUDA编程基础与实践》第10章: `__syncwarp`, shuffles,
//!   cooperative-group tiles, atomic finish, and the grid-stride two-pass version with a static
//!   device buffer.
//! - `cg_vector`: the cooperative-groups sum with 16-byte loads.
//! - `grid_sync`: the sum in one launch with a grid-wide barrier (a cooperative launch).
//!
//! The library's own reductions (the fast path, the reproducible sum) are in
//! `ferrocuda_kernels::reduce`.
//!
//! This file is the family's table of entry points: one `#[kernel]` declaration per kernel, its
//! `# Launch` and `# Safety` contract, and a call into the algorithm.
use crate::entry::kernel;
use crate::probe::NoProbe;
use ferrocuda_device::grid::GridBarrier;

pub mod cg_vector;
pub mod grid_sync;
pub mod textbook;
pub mod warp_level;

use ferrocuda_device::atomic::AtomicAdd;
pub use ferrocuda_device::element::Element;

// ---------------------------------------------------------------------------------------------
// 《CUDA C编程权威指南》3.4-3.5 ("Professional CUDA C Programming"): in place on a scratch copy, one
// partial per block, the host adds the partials. Launch for all of them: block a power of two in
// 64..=1024 (`reduce_complete_unroll`: exactly `BLOCK`), no dynamic shared memory; grid as
// stated. Safety for all of them: `g_idata` holds `n` elements (overwritten), `g_odata` one per
// block of the grid.
// ---------------------------------------------------------------------------------------------

/// `reduceNeighbored`: neighbored pairing (相邻配对), `tid % (2 * stride) == 0`.
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_neighbored<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::neighbored(g_idata, g_odata, n, NoProbe) }
}

/// `reduceNeighboredLess`: neighbored pairing with `index = 2 * stride * tid`.
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_neighbored_less<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::neighbored_less(g_idata, g_odata, n, NoProbe) }
}

/// `reduceInterleaved`: interleaved pairing (交错配对), the stride halving from `blockDim / 2`.
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_interleaved<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::interleaved(g_idata, g_odata, n, NoProbe) }
}

/// `reduceUnrolling2`: each thread first adds two blocks' worth (循环展开).
///
/// # Launch
/// grid `ceil(n / (2 * block))`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_unrolling2<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::unrolling::<T, 2>(g_idata, g_odata, n) }
}

/// `reduceUnrolling4`: four blocks' worth per thread.
///
/// # Launch
/// grid `ceil(n / (4 * block))`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_unrolling4<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::unrolling::<T, 4>(g_idata, g_odata, n) }
}

/// `reduceUnrolling8`: eight blocks' worth per thread.
///
/// # Launch
/// grid `ceil(n / (8 * block))`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_unrolling8<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::unrolling::<T, 8>(g_idata, g_odata, n) }
}

/// `reduceUnrollWarps8`: unrolling 8, the last warp's steps without block barriers.
///
/// # Launch
/// grid `ceil(n / (8 * block))`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_unroll_warps8<T: Element>(g_idata: *mut T, g_odata: *mut T, n: usize) {
    unsafe { textbook::unroll_warps8(g_idata, g_odata, n) }
}

/// `reduceCompleteUnrollWarps8`: the tree's loop unrolled for every block size up to 1024.
///
/// # Launch
/// grid `ceil(n / (8 * block))`, block a power of two in 64..=1024, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_complete_unroll_warps8<T: Element>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
) {
    unsafe { textbook::complete_unroll_warps8(g_idata, g_odata, n) }
}

/// `reduceCompleteUnroll<iBlockSize>`: the block size a compile-time constant (the book's
/// template), one entry point per size: `reduce_complete_unroll_b512_f32`.
///
/// # Launch
/// grid `ceil(n / (8 * BLOCK))`, block exactly `BLOCK`, no dynamic shared memory.
///
/// # Safety
/// `g_idata` holds `n` elements (overwritten), `g_odata` one per block.
#[kernel(T in [i32, u32, i64, u64, f32, f64], BLOCK in [64, 128, 256, 512, 1024])]
pub unsafe fn reduce_complete_unroll<T: Element, const BLOCK: u32>(
    g_idata: *mut T,
    g_odata: *mut T,
    n: usize,
) {
    unsafe { textbook::complete_unroll::<T, BLOCK>(g_idata, g_odata, n) }
}

// ---------------------------------------------------------------------------------------------
// 樊哲勇《CUDA编程基础与实践》第10章: a shared tree per block, finished by warp-level code.
// ---------------------------------------------------------------------------------------------

/// `reduce_syncwarp`: shared tree to 32, then `__syncwarp()` steps; one atomic add per block.
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, dynamic shared memory
/// `block * size_of::<T>()`; `*d_y` zeroed before the launch.
///
/// # Safety
/// `x` holds `n` elements; `d_y` one.
#[kernel(T in [f32, f64], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce_syncwarp<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    unsafe { warp_level::syncwarp_atomic(x, d_y, n) }
}

/// `reduce_shfl`: shared tree to 32, then `__shfl_down_sync`; one atomic add per block.
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, dynamic shared memory
/// `block * size_of::<T>()`; `*d_y` zeroed before the launch.
///
/// # Safety
/// `x` holds `n` elements; `d_y` one.
#[kernel(T in [f32, f64], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce_shfl<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    unsafe { warp_level::shfl_atomic(x, d_y, n) }
}

/// `reduce_cp`: as `reduce_shfl` through a cooperative-group tile (`g.shfl_down`).
///
/// # Launch
/// grid `ceil(n / block)`, block a power of two in 64..=1024, dynamic shared memory
/// `block * size_of::<T>()`; `*d_y` zeroed before the launch.
///
/// # Safety
/// `x` holds `n` elements; `d_y` one.
#[kernel(T in [f32, f64], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce_cg<T: Element + AtomicAdd>(x: *const T, d_y: *mut T, n: usize) {
    unsafe { warp_level::cg_atomic(x, d_y, n) }
}

/// `reduce1parallelism`: grid-stride partial sums, one per block into `d_y`; the second pass
/// is the same kernel launched `<<<1, 1024>>>` over the partials.
///
/// # Launch
/// any grid (10240 by default), block a power of two in 64..=1024, dynamic shared memory
/// `block * size_of::<T>()`.
///
/// # Safety
/// `x` holds `n` elements; `d_y` one per block.
#[kernel(T in [f32, f64], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce1_parallelism<T: Element>(x: *const T, n: usize, d_y: *mut T) {
    unsafe { warp_level::parallelism(x, n, d_y) }
}

/// `reduce2static`: as `reduce1_parallelism`, the partials in the static device array
/// [`reduce2_static_partials`] (`__device__ real static_y[GRID_SIZE]`): no allocation per call.
///
/// # Launch
/// grid at most `REDUCE_STATIC_GRID`, block a power of two in 64..=1024, dynamic shared memory
/// `block * size_of::<T>()`.
///
/// # Safety
/// `x` holds `n` elements; the grid is at most `REDUCE_STATIC_GRID` blocks.
#[kernel(T in [f32, f64], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce2_static<T: Element + warp_level::StaticPartials>(x: *const T, n: usize) {
    unsafe { warp_level::parallelism(x, n, T::static_partials()) }
}

crate::device_global! {
    /// The partials of [`reduce2_static`] (`static_y`), one per block.
    pub fn reduce2_static_partials<T>() -> [T; crate::config::REDUCE_STATIC_GRID as usize] {
        f32 => REDUCE2_STATIC_PARTIALS_F32,
        f64 => REDUCE2_STATIC_PARTIALS_F64,
    }
}

// ---------------------------------------------------------------------------------------------
// The cooperative-groups sum with 16-byte loads.
// ---------------------------------------------------------------------------------------------

/// The cooperative-groups vector-load sum (`sum_kernel_block`) with an atomic finish.
///
/// # Launch
/// grid `ceil(n / (LANES * block))` (at least 1), block a power of two in 32..=1024, dynamic
/// shared memory `block * size_of::<T>()`; `*sum` zeroed first.
///
/// # Safety
/// `x` holds `n` elements aligned to their size; `sum` one element.
#[kernel(T in [i32, f32], dynamic_shared = block * size_of::<T>())]
pub unsafe fn reduce_cg_vector4<T: Element + AtomicAdd>(sum: *mut T, x: *const T, n: usize) {
    unsafe { cg_vector::sum_kernel_block(sum, x, n) }
}

/// The grid-synchronised sum: per-block partials, `grid.sync()`, block 0 adds the partials in
/// index order into `out[0]` (integers wrap).
///
/// # Launch
/// Cooperative (`Kernel::launch_cooperative`): every block resident at once; block a multiple
/// of 32 up to 1024, no dynamic shared memory.
///
/// # Safety
/// `x` holds `n` elements, `partials` one per block, `out` one; `barrier` is the launch's own.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn reduce_grid_sync<T: Element>(
    x: *const T,
    n: usize,
    partials: *mut T,
    barrier: GridBarrier,
    out: *mut T,
) {
    unsafe { grid_sync::sum(x, n, partials, barrier, out) }
}
