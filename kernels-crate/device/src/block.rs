//! Block-wide reduction (线程块内归约), the combine of ferrocuda's fast reduction offered to
//! any kernel: each warp combines with butterfly shuffles (`shfl_xor_sync`, no shared-memory
//! tree), writes its result to one shared slot, and warp 0 combines the slots.
//!
//! The combine must be associative and commutative (lanes are paired by XOR, not in index
//! order). For a given block size the order of the combines is fixed, so the result is
//! deterministic.
use crate::element::Element;
use crate::sync::syncthreads;
use crate::thread::{block_dim_x, thread_idx_x};
use crate::warp::{FULL_MASK, WARP_SIZE, lane_id, shfl_xor_sync};

/// Butterfly combine over a full warp: every lane ends with the warp's result.
///
/// # Safety
/// All 32 lanes of the warp must exist and reach this call (it shuffles with [`FULL_MASK`]).
#[inline(always)]
pub unsafe fn warp_reduce<T: Element>(mut v: T, combine: impl Fn(T, T) -> T) -> T {
    let mut lane_mask = WARP_SIZE / 2;
    while lane_mask > 0 {
        // SAFETY: forwarded to the caller.
        v = combine(v, unsafe {
            shfl_xor_sync(FULL_MASK, v, lane_mask, WARP_SIZE)
        });
        lane_mask >>= 1;
    }
    v
}

/// The block's combine of every thread's `v`, in every lane of warp 0 (thread 0 included);
/// other threads get an unspecified value.
///
/// Warp 0 reads `scratch` after the last barrier of the call, so when the call returns in
/// another warp, warp 0 may still be reading it. Another call of `block_reduce` on the same
/// `scratch` may follow at once (each call passes a barrier before it writes `scratch`); any
/// other write to `scratch` must come after a [`syncthreads`].
///
/// # Safety
/// Every thread of the block calls it (it has barriers); the block is a multiple of 32
/// threads, at most 1024; `scratch` points to 32 elements of shared memory that nothing else
/// touches during the call, nor after it until every thread has passed a barrier (except a
/// following `block_reduce`); `identity` is the identity of `combine`.
#[inline(always)]
pub unsafe fn block_reduce<T: Element>(
    v: T,
    scratch: *mut T,
    identity: T,
    combine: impl Fn(T, T) -> T + Copy,
) -> T {
    let (tid, warps) = (thread_idx_x(), block_dim_x() / WARP_SIZE);
    let (lane, warp) = (lane_id(), thread_idx_x() / WARP_SIZE);
    // SAFETY: every warp is whole (block a multiple of 32) and all its lanes are here.
    let v = unsafe { warp_reduce(v, combine) };
    // SAFETY: `scratch` has 32 slots and there are at most 32 warps; all threads reach the
    // barriers.
    unsafe {
        syncthreads();
        if lane == 0 {
            *scratch.add(warp as usize) = v;
        }
        syncthreads();
        let mut r = identity;
        if tid < WARP_SIZE {
            if lane < warps {
                r = *scratch.add(lane as usize);
            }
            r = warp_reduce(r, combine);
        }
        r
    }
}

/// [`block_reduce`] with `+` (integers wrap): the block's sum, in thread 0.
///
/// # Safety
/// As for [`block_reduce`].
#[inline(always)]
pub unsafe fn block_sum<T: Element>(v: T, scratch: *mut T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { block_reduce(v, scratch, T::ZERO, T::add) }
}
