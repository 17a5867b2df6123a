//! The grid-synchronised sum (全局同步 of 樊哲勇第10章 and 沐曦 MXMACA 教材第5章): one launch, no ticket. Every
//! block sums its grid-stride share and writes its partial; `grid.sync()`; block 0 adds the
//! partials in index order. Deterministic for a given grid (the host sizes it to the resident
//! block count, as a cooperative launch requires).
use super::Element;
use crate::device::block;
use crate::device::grid::{GridBarrier, this_grid};
use crate::device::thread::{
    block_dim_x, block_idx_x, grid_dim_x, grid_size_1d, index_1d, thread_idx_x,
};
use crate::shared_array;

shared_array!(
    /// One slot per warp (up to 32, of up to 8 bytes).
    fn reduce_grid_sync_scratch() -> [u64; 32]
);

/// See the module documentation.
///
/// # Safety
/// `x` holds `n` elements, `partials` one per block, `out` one; every block resident at once
/// (a cooperative launch with `barrier`).
#[inline(always)]
pub unsafe fn sum<T: Element>(
    x: *const T,
    n: usize,
    partials: *mut T,
    barrier: GridBarrier,
    out: *mut T,
) {
    let scratch = reduce_grid_sync_scratch().cast::<T>();
    let tid = thread_idx_x();
    // SAFETY: indices below `n`; `partials` has a slot per block; every thread of every block
    // reaches both block reductions' barriers and the grid barrier (uniform control flow).
    unsafe {
        let mut v = T::ZERO;
        let mut i = index_1d();
        while i < n {
            v = v.add(*x.add(i));
            i += grid_size_1d();
        }
        let block_value = block::block_sum(v, scratch);
        if tid == 0 {
            *partials.add(block_idx_x() as usize) = block_value;
        }
        this_grid(barrier).sync();
        if block_idx_x() == 0 {
            let mut v = T::ZERO;
            let mut b = tid;
            while b < grid_dim_x() {
                v = v.add(core::ptr::read_volatile(partials.add(b as usize)));
                b += block_dim_x();
            }
            let total = block::block_sum(v, scratch);
            if tid == 0 {
                *out = total;
            }
        }
    }
}
