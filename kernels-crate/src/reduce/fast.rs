//! The fast path: sum, min and max in one launch, deterministic.
//!
//! The input is cut into tiles: per block, `REDUCE_FAST_ITEMS` (4) 16-byte vectors per thread,
//! one contiguous stretch of memory (32 KiB for 512 threads). Tiles go to blocks round-robin;
//! a thread issues its four `ld.global.nc.v4` loads of a tile before using any of them, into
//! four independent accumulators (64 bytes in flight per thread instead of 4). Measured on an
//! H200 against the grid-stride form that spaces a thread's four loads a whole grid apart:
//! 278 us -> 242 us for 2^28 f32 (docs/tuning-notes.md).
//!
//! A block combines with warp shuffles (`shfl_xor_sync`, no shared-memory tree) and one shared
//! slot per warp. Each block writes its partial; the last block to finish combines the partials
//! in index order and resets the ticket for the next launch. The election is the classic
//! `threadfence` + atomic ticket with both fences folded into the ticket's atomic, a release
//! and an acquire in one (`atom.acq_rel.gpu`, the pattern of cooperative groups' grid sync):
//! measured 0.25-0.5 us faster per launch on an H200 than the two fences, out of a tail of
//! 1.5-2 us (docs/tuning-notes.md). A grid of one block skips all of that and
//! writes its value.
//!
//! Deterministic: the grid and block depend only on `n` and the device, every thread combines
//! its elements in a fixed order, and the partials are combined by index, never in arrival
//! order; so the same input on the same device gives the same bits every run. No float atomics.
//!
//! Launch: block a multiple of 32 up to 1024; any grid up to the length of `partials`.
use super::{Element, Op};
use crate::device::atomic::atomic_add_acq_rel;
use crate::device::block;
use crate::device::sync::syncthreads;
use crate::device::thread::{
    block_dim_x, block_idx_x, grid_dim_x, grid_size_1d, index_1d, thread_idx_x,
};
use crate::device::vector::VectorSplit;
use crate::shared_array;

/// Converts an input element to the accumulator type (the identity, i32 -> i64, or a 16-bit
/// float -> f32: each exact).
pub trait Widen<A> {
    /// The value as an accumulator.
    fn widen(self) -> A;
}

impl<T: Element> Widen<T> for T {
    #[inline(always)]
    fn widen(self) -> T {
        self
    }
}

impl Widen<f32> for crate::device::half::F16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        crate::device::half::Half::to_f32(self)
    }
}

impl Widen<f32> for crate::device::half::Bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        crate::device::half::Half::to_f32(self)
    }
}

impl Widen<i64> for i32 {
    #[inline(always)]
    fn widen(self) -> i64 {
        self as i64
    }
}

shared_array!(
    /// One slot per warp (32 warps of up to 8 bytes) plus the "last block" flag.
    fn reduce_fast_scratch() -> [u64; 33]
);

/// The block's result in every lane of warp 0 (the device layer's block reduction with `O`).
///
/// # Safety
/// As for [`block::block_reduce`].
#[inline(always)]
unsafe fn block_reduce<A: Element, O: Op>(v: A, scratch: *mut A) -> A {
    // SAFETY: forwarded to the caller.
    unsafe { block::block_reduce(v, scratch, O::identity(), O::combine) }
}

/// This thread's combine of its share: the input is cut into tiles of `ITEMS` vectors per
/// thread (one contiguous `ITEMS * blockDim * 16`-byte stretch per block), tiles are dealt to
/// blocks round-robin, and a thread loads its `ITEMS` vectors of a tile (`blockDim` apart, so a
/// warp's loads are contiguous) before combining them into `ITEMS` independent accumulators.
/// The ragged end (scalar head up to the first 16-byte boundary, the last partial tile, the
/// scalar tail) goes grid-stride.
#[inline(always)]
unsafe fn thread_partial<T, A, O, const ITEMS: usize>(x: *const T, n: usize) -> A
where
    T: Element + Widen<A>,
    A: Element,
    O: Op,
{
    let split = VectorSplit::of(x, n);
    let (g, stride) = (index_1d(), grid_size_1d());
    let (tid, bd) = (thread_idx_x() as usize, block_dim_x() as usize);
    let fold = |acc: A, v: T::V| T::fold(v, acc, |a, e| O::combine(a, e.widen()));
    // The input is read-only for the whole kernel: the non-coherent path is safe and skips L1
    // allocation pressure. SAFETY: forwarded from `load`'s callers below.
    let load = |p: *const T::V| unsafe { T::load_nc(p) };
    let mut acc = [O::identity::<A>(); ITEMS];
    // SAFETY: every index is below `n`; vectors start 16-byte aligned after the head.
    unsafe {
        if g < split.head {
            acc[0] = O::combine(acc[0], (*x.add(g)).widen());
        }
        let v = x.add(split.head).cast::<T::V>();
        let tile = ITEMS * bd;
        let tiles = split.vectors / tile;
        let mut t = block_idx_x() as usize;
        while t < tiles {
            let base = v.add(t * tile + tid);
            let loaded: [T::V; ITEMS] = core::array::from_fn(|k| load(base.add(k * bd)));
            for k in 0..ITEMS {
                acc[k] = fold(acc[k], loaded[k]);
            }
            t += grid_dim_x() as usize;
        }
        let mut i = tiles * tile + g;
        while i < split.vectors {
            acc[0] = fold(acc[0], load(v.add(i)));
            i += stride;
        }
        if split.tail_start + g < n {
            acc[1 % ITEMS] = O::combine(acc[1 % ITEMS], (*x.add(split.tail_start + g)).widen());
        }
    }
    let mut width = ITEMS;
    while width > 1 {
        width /= 2;
        for k in 0..width {
            acc[k] = O::combine(acc[k], acc[k + width]);
        }
    }
    acc[0]
}

/// The whole fast reduction; see the module documentation.
#[inline(always)]
pub unsafe fn fast<T, A, O, const ITEMS: usize>(
    x: *const T,
    n: usize,
    partials: *mut A,
    ticket: *mut u32,
    out: *mut A,
) where
    T: Element + Widen<A>,
    A: Element,
    O: Op,
{
    let scratch = reduce_fast_scratch();
    let is_last = scratch.wrapping_add(32).cast::<u32>();
    let scratch = scratch.cast::<A>();
    // SAFETY: `partials` holds `gridDim.x` elements and `ticket`/`out` one each (the host's
    // plan); every thread reaches every barrier; `is_last` is uniform after the barrier.
    unsafe {
        let block_value = block_reduce::<A, O>(thread_partial::<T, A, O, ITEMS>(x, n), scratch);
        finish::<A, O>(
            block_value,
            block_idx_x(),
            grid_dim_x(),
            partials,
            ticket,
            out,
            scratch,
            is_last,
        );
    }
}

/// The end of a one-launch reduction, shared by [`fast`] and [`fast_cluster`]: `value` (thread
/// 0's) is partial `slot` of `count`; the block that takes the last ticket combines the
/// partials in slot order into `*out` and resets the ticket. With `count == 1` the value is
/// the result: no partials, no fence, no ticket.
///
/// # Safety
/// `partials` holds `count` elements, `ticket` and `out` one each; `scratch` and `is_last` are
/// the block's shared scratch; `count` is uniform over the grid and `slot < count` unique per
/// calling block; every thread of the block calls it.
#[inline(always)]
unsafe fn finish<A: Element, O: Op>(
    value: A,
    slot: u32,
    count: u32,
    partials: *mut A,
    ticket: *mut u32,
    out: *mut A,
    scratch: *mut A,
    is_last: *mut u32,
) {
    let tid = thread_idx_x();
    // SAFETY: the caller's contract; every thread reaches the barrier (`count` is uniform, so
    // the early return is too); `is_last` is uniform after it.
    unsafe {
        if count == 1 {
            if tid == 0 {
                *out = value;
            }
            return;
        }
        if tid == 0 {
            *partials.add(slot as usize) = value;
            // Release: the partial above is seen before the ticket moves. Acquire: in the last
            // block, every partial the other blocks released is seen by thread 0, and by the
            // block's other threads after the barrier below.
            let arrived = atomic_add_acq_rel(ticket, 1);
            *is_last = (arrived == count - 1) as u32;
        }
        syncthreads();
        if *is_last != 0 {
            let mut v = O::identity::<A>();
            let mut b = tid;
            while b < count {
                v = O::combine(v, core::ptr::read_volatile(partials.add(b as usize)));
                b += block_dim_x();
            }
            let total = block_reduce::<A, O>(v, scratch);
            if tid == 0 {
                *out = total;
                *ticket = 0;
            }
        }
    }
}

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
shared_array!(
    /// The block's value, read by the cluster's first block through distributed shared memory.
    fn reduce_cluster_value() -> [u64; 1]
);

/// [`fast`] with the partials combined per thread block cluster first: the blocks of a cluster
/// (`REDUCE_CLUSTER_BLOCKS`) leave their values in shared memory, the cluster's first block
/// combines them in rank order through distributed shared memory, and only it writes a partial
/// and takes a ticket: `gridDim.x / cluster` partials and tickets instead of `gridDim.x`.
/// Deterministic as [`fast`] (rank order, then cluster order).
///
/// # Safety
/// As [`fast`], launched in clusters along x; `partials` holds `gridDim.x / cluster` elements.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[inline(always)]
pub unsafe fn fast_cluster<T, A, O, const ITEMS: usize>(
    x: *const T,
    n: usize,
    partials: *mut A,
    ticket: *mut u32,
    out: *mut A,
) where
    T: Element + Widen<A>,
    A: Element,
    O: Op,
{
    use crate::device::cluster;
    let scratch = reduce_fast_scratch();
    let is_last = scratch.wrapping_add(32).cast::<u32>();
    let scratch = scratch.cast::<A>();
    let value = reduce_cluster_value().cast::<A>();
    let tid = thread_idx_x();
    let (rank, blocks) = (cluster::block_rank(), cluster::num_blocks());
    let clusters = grid_dim_x() / blocks;
    // SAFETY: as in `fast`; remote reads address `value` of the blocks of this cluster, written
    // before the first cluster barrier and alive until the second; every thread of the cluster
    // reaches both cluster barriers; `rank` and `is_last` are uniform per block.
    unsafe {
        let block_value = block_reduce::<A, O>(thread_partial::<T, A, O, ITEMS>(x, n), scratch);
        if tid == 0 {
            *value = block_value;
        }
        cluster::cluster_sync();
        let mut combined = O::identity::<A>();
        if rank == 0 && tid == 0 {
            for r in 0..blocks {
                combined = O::combine(combined, cluster::map_shared_rank(value, r).read());
            }
        }
        // The other blocks' values stay alive until the first block has read them.
        cluster::cluster_sync();
        if rank != 0 {
            return;
        }
        let slot = cluster::cluster_idx_x();
        finish::<A, O>(
            combined, slot, clusters, partials, ticket, out, scratch, is_last,
        );
    }
}
