//! The cooperative-groups sum of 沐曦 MXMACA 教材第5章 (NVIDIA's `sum_kernel_block`): each thread sums its
//! grid-stride share of the input with 16-byte loads (`int4`), the block combines with
//! `reduce_sum(g, temp, val)` (two `g.sync()` per step), and one `atomic_add` per block
//! finishes.
//!
//! The sample's traps, fixed: the `n % 4` tail was dropped (here a scalar tail), the input had
//! to be 16-byte aligned (here a scalar head up to the first 16-byte boundary, so any slice
//! start works), and the grid was sized for `n` rather than `n / 4` (the host sizes it for the
//! vectors).
use super::Element;
use crate::device::atomic::{AtomicAdd, atomic_add};
use crate::device::cg::{ThreadBlock, this_thread_block};
use crate::device::shared::dynamic_shared;
use crate::device::thread::{grid_size_1d, index_1d};
use crate::device::vector::VectorSplit;

/// `thread_sum`: head scalars, then 16-byte vectors with a grid-stride loop, then tail scalars.
#[inline(always)]
unsafe fn thread_sum<T: Element>(x: *const T, n: usize) -> T {
    let split = VectorSplit::of(x, n);
    let (g, stride) = (index_1d(), grid_size_1d());
    let mut sum = T::ZERO;
    // SAFETY: every index is below `n`; the vectors start 16-byte aligned after the head.
    unsafe {
        if g < split.head {
            sum = sum.add(*x.add(g));
        }
        let v = x.add(split.head).cast::<T::V>();
        let mut i = g;
        while i < split.vectors {
            sum = T::fold(T::load(v.add(i)), sum, <T as Element>::add);
            i += stride;
        }
        if split.tail_start + g < n {
            sum = sum.add(*x.add(split.tail_start + g));
        }
    }
    sum
}

/// `reduce_sum(g, temp, val)`: the block tree with two `g.sync()` per step; the block's sum in
/// rank 0.
#[inline(always)]
unsafe fn reduce_sum<T: Element>(g: &ThreadBlock, temp: *mut T, mut val: T) -> T {
    let lane = g.thread_rank() as usize;
    let mut i = g.size() as usize / 2;
    // SAFETY: `temp` holds `g.size()` elements; every thread reaches every `sync`.
    unsafe {
        while i > 0 {
            *temp.add(lane) = val;
            g.sync();
            if lane < i {
                val = val.add(*temp.add(lane + i));
            }
            g.sync();
            i /= 2;
        }
    }
    val
}

/// `sum_kernel_block`.
#[inline(always)]
pub unsafe fn sum_kernel_block<T: Element + AtomicAdd>(sum: *mut T, x: *const T, n: usize) {
    let block = this_thread_block();
    // SAFETY: forwarded to the launcher.
    unsafe {
        let my_sum = thread_sum(x, n);
        let block_sum = reduce_sum(&block, dynamic_shared::<T>(), my_sum);
        if block.thread_rank() == 0 {
            atomic_add(sum, block_sum);
        }
    }
}
