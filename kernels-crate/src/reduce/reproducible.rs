//! The reproducible sum: the same bits on every GPU (and on the CPU), at memory speed.
//!
//! The summation order depends on `n` alone. The input is cut into chunks of
//! [`reduce_repro_chunk`] elements (32 KiB). Elements past `n` in the last chunk count as
//! `+0.0`. Each chunk is summed in one fixed order:
//!
//! 1. thread `t` (of [`REDUCE_REPRO_BLOCK`]) takes, for `k` in `0..LOADS`, the 16-byte vector
//!    `k * BLOCK + t` of the chunk, and sums its lanes by halving (`[a, b, c, d]` ->
//!    `(a + c) + (b + d)`);
//! 2. the thread halves its `LOADS` vector sums the same way;
//! 3. the block combines its threads with [`block::block_sum`]: an XOR butterfly in each warp,
//!    then warp 0's butterfly over the warp results padded with `+0.0`.
//!
//! A launch writes one result per chunk. The host launches again on those results, chunked the
//! same way, until one value is left. Which block sums which chunk does not matter, so the
//! grid can be anything. The CPU reference
//! (`ferrocuda_lessons::cpu::reproducible::sum_reproducible`) follows the same steps. IEEE
//! addition is commutative, so the operand order within a pair does not matter. A NaN result is
//! a NaN; its payload is the device's.
//!
//! Launch: block exactly [`REDUCE_REPRO_BLOCK`]; any grid (at most the chunk count is useful).
use super::Element;
use crate::config::{REDUCE_REPRO_BLOCK, REDUCE_REPRO_LOADS, reduce_repro_chunk};
use crate::device::block;
use crate::device::thread::{block_idx_x, grid_dim_x, thread_idx_x};
use crate::shared_array;

shared_array!(
    /// One slot per warp (up to 32, of up to 8 bytes).
    fn reduce_repro_scratch() -> [u64; 32]
);

/// Halving sum of `a[..m]` (`m` a power of two): `a[i] += a[i + m/2]`, then again on the
/// first half, down to `a[0]`.
#[inline(always)]
fn halve<T: Element, const N: usize>(mut a: [T; N], m: usize) -> T {
    let mut width = m;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            a[i] = a[i].add(a[i + width]);
        }
    }
    a[0]
}

/// The sum of the chunks of `x[..n]`, one per block in turn, into `out[chunk]`.
///
/// # Safety
/// `x` holds `n` elements, `out` `n.div_ceil(reduce_repro_chunk(size_of::<T>()))`; the block
/// is [`REDUCE_REPRO_BLOCK`] threads.
#[inline(always)]
pub unsafe fn chunk_sums<T: Element>(x: *const T, n: usize, out: *mut T) {
    let lanes = 16 / size_of::<T>();
    let chunk = reduce_repro_chunk(size_of::<T>());
    let chunks = n.div_ceil(chunk);
    let block = REDUCE_REPRO_BLOCK as usize;
    let tid = thread_idx_x() as usize;
    let scratch = reduce_repro_scratch().cast::<T>();
    // Vector loads need 16-byte alignment. Otherwise (a misaligned slice) every chunk takes the
    // scalar path, which reads the same elements into the same order.
    let aligned = (x as usize) % 16 == 0;
    let mut c = block_idx_x() as usize;
    while c < chunks {
        let base = c * chunk;
        let mut sums = [T::ZERO; REDUCE_REPRO_LOADS];
        // SAFETY: a full chunk lies inside `x[..n]` and starts 16-byte aligned when `x` does
        // (`chunk * size` is a multiple of 16); the scalar path reads only indices below `n`.
        unsafe {
            if aligned && base + chunk <= n {
                let v = x.add(base).cast::<T::V>();
                let loaded: [T::V; REDUCE_REPRO_LOADS] =
                    core::array::from_fn(|k| T::load_nc(v.add(k * block + tid)));
                for k in 0..REDUCE_REPRO_LOADS {
                    sums[k] =
                        halve::<T, 4>(core::array::from_fn(|j| lane(loaded[k], j, lanes)), lanes);
                }
            } else {
                for k in 0..REDUCE_REPRO_LOADS {
                    let first = base + (k * block + tid) * lanes;
                    let e = |j: usize| {
                        if j < lanes && first + j < n {
                            *x.add(first + j)
                        } else {
                            T::ZERO
                        }
                    };
                    sums[k] = halve::<T, 4>(core::array::from_fn(e), lanes);
                }
            }
        }
        let v = halve(sums, REDUCE_REPRO_LOADS);
        // SAFETY: every thread of the block runs the same number of chunks (`c` is uniform) and
        // reaches the barriers; `scratch` has 32 slots; `out` has a slot per chunk.
        unsafe {
            let total = block::block_sum(v, scratch);
            if tid == 0 {
                *out.add(c) = total;
            }
        }
        c += grid_dim_x() as usize;
    }
}

/// Lane `j` of `v`, or zero past its `lanes` lanes (so that `halve` over 4 slots sees only the
/// vector's own lanes).
#[inline(always)]
fn lane<T: Element>(v: T::V, j: usize, lanes: usize) -> T {
    if j < lanes { T::lane(v, j) } else { T::ZERO }
}

/// [`chunk_sums`] of `f32` over `x` widened to `f32`: chunks of `reduce_repro_chunk(4)`
/// elements, thread `t` taking the 4 elements of `f32`-vector `k * BLOCK + t` of the chunk (one
/// 8-byte load of four 16-bit elements when aligned), the same halvings and block sum. The
/// result of every chunk has the bits `chunk_sums::<f32>` gives for the widened chunk.
///
/// # Safety
/// `x` holds `n` elements, `out` `n.div_ceil(reduce_repro_chunk(4))`; the block is
/// [`REDUCE_REPRO_BLOCK`] threads.
#[inline(always)]
pub unsafe fn chunk_sums_widened<T: Element + super::fast::Widen<f32>>(
    x: *const T,
    n: usize,
    out: *mut f32,
) {
    const LANES: usize = 4;
    let chunk = reduce_repro_chunk(size_of::<f32>());
    let chunks = n.div_ceil(chunk);
    let block = REDUCE_REPRO_BLOCK as usize;
    let tid = thread_idx_x() as usize;
    let scratch = reduce_repro_scratch().cast::<f32>();
    // Four 16-bit elements are 8 bytes: one load when `x` is 8-byte aligned (a chunk's groups
    // then all are), else the scalar path, which reads the same elements into the same order.
    let aligned = (x as usize) % 8 == 0 && size_of::<T>() == 2;
    let mut c = block_idx_x() as usize;
    while c < chunks {
        let base = c * chunk;
        let mut sums = [0.0f32; REDUCE_REPRO_LOADS];
        // SAFETY: a full chunk lies inside `x[..n]`; the scalar path reads only indices below
        // `n`; an aligned group of four 16-bit elements is one aligned 8-byte word.
        unsafe {
            if aligned && base + chunk <= n {
                let loaded: [[T; LANES]; REDUCE_REPRO_LOADS] = core::array::from_fn(|k| {
                    let word = *x.add(base + (k * block + tid) * LANES).cast::<u64>();
                    core::mem::transmute_copy::<u64, [T; LANES]>(&word)
                });
                for k in 0..REDUCE_REPRO_LOADS {
                    sums[k] = halve::<f32, 4>(loaded[k].map(|e| e.widen()), LANES);
                }
            } else {
                for k in 0..REDUCE_REPRO_LOADS {
                    let first = base + (k * block + tid) * LANES;
                    let e = |j: usize| {
                        if first + j < n {
                            (*x.add(first + j)).widen()
                        } else {
                            0.0
                        }
                    };
                    sums[k] = halve::<f32, 4>(core::array::from_fn(e), LANES);
                }
            }
        }
        let v = halve(sums, REDUCE_REPRO_LOADS);
        // SAFETY: as in `chunk_sums`.
        unsafe {
            let total = block::block_sum(v, scratch);
            if tid == 0 {
                *out.add(c) = total;
            }
        }
        c += grid_dim_x() as usize;
    }
}
