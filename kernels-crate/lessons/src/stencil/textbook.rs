//! The notes' two kernels, one output per thread: the naive stencil that reads every input from
//! global memory, and the slide's shared-memory tile (also with arbitrary coefficients).
//!
//! Launch (all three): grid `ceil(n / block)`, one thread per output. `stencil_1d_shared_*` and
//! `stencil_1d_weighted_*` need `block >= R` (the threads below `R` load the halos) and
//! `(block + 2R) * size_of::<T>()` bytes of dynamic shared memory
//! ([`stencil_shared_tile_len`](crate::config::stencil_shared_tile_len)).
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, index_1d, thread_idx_x};
use crate::probe::Probe;
use ferrocuda_kernels::stencil::{Element, Ones, Taps, fetch, point};

/// Added to a staged cell's index in a probe's mark, so that the cells past the left end (down
/// to `-R`) are positive and `0` stays "nothing staged".
pub const STAGED_BIAS: isize = 1024;

/// `stencil_1d` without shared memory: every thread reads its `2R + 1` inputs from global
/// memory, through the boundary rule.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`.
#[inline(always)]
pub unsafe fn naive<T: Element, const R: usize>(input: *const T, out: *mut T, n: usize, mode: u32) {
    let i = index_1d();
    if i < n {
        // SAFETY: `i < n`; `input` holds `n` elements.
        unsafe { *out.add(i) = point::<T, Ones, R>(input, n, i, mode, &Ones) };
    }
}

/// The slide's `stencil_1d`: the block's inputs and both halos go to the shared tile `temp`
/// (`blockDim.x + 2R` elements), threads below `R` also load the halos, `__syncthreads()`, then
/// each thread applies the taps to its window of the tile.
///
/// Every thread loads its slot and reaches the barrier, also past `n` (its slot may be the right
/// halo of the last real output); only the store is bounded by `n`.
///
/// `probe` marks `(blockIdx.x, slot)` with `i + STAGED_BIAS` for each tile slot a thread
/// stages from input cell `i` (`i` is negative, or `n` and past, for a halo beyond an end).
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`;
/// `blockDim.x >= R`; the dynamic shared memory holds `blockDim.x + 2R` elements.
#[inline(always)]
pub unsafe fn shared_tile<T: Element, P: Taps<T>, const R: usize, Q: Probe>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    taps: P,
    probe: Q,
) {
    let temp = dynamic_shared::<T>();
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let gindex = block_idx_x() as usize * block + tid;
    let lindex = tid + R;
    let (g, r, b) = (gindex as isize, R as isize, block as isize);
    // SAFETY: the tile slots written are below `block + 2R` (and `tid < R` covers both halos
    // because `block >= R`); `fetch` only reads below `n`; every thread reaches the barrier.
    unsafe {
        *temp.add(lindex) = fetch(input, n, g, mode);
        let bid = block_idx_x() as usize;
        probe.mark(bid, lindex, (g + STAGED_BIAS) as u32);
        if tid < R {
            *temp.add(lindex - R) = fetch(input, n, g - r, mode);
            *temp.add(lindex + block) = fetch(input, n, g + b, mode);
            probe.mark(bid, lindex - R, (g - r + STAGED_BIAS) as u32);
            probe.mark(bid, lindex + block, (g + b + STAGED_BIAS) as u32);
        }
        syncthreads();
        if gindex < n {
            let mut result = T::ADD_IDENTITY;
            for offset in 0..2 * R + 1 {
                result = taps.accumulate(result, offset, *temp.add(tid + offset));
            }
            *out.add(gindex) = result;
        }
    }
}
