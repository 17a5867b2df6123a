//! Kernels that exercise each device-layer primitive on its own, so that the GPU test suite can
//! compare it with the CPU model (the warp emulator in `ferrocuda_lessons::cpu`). They are not
//! part of the library's algorithms; their names all start with `selftest_`.
use crate::device::{
    atomic::{AtomicAdd, AtomicOrd, atomic_add, atomic_cas, atomic_max, atomic_min},
    cg::{this_thread_block, tiled_partition},
    shared::dynamic_shared,
    sync::{self, syncthreads, syncthreads_and, syncthreads_count, syncthreads_or},
    thread::*,
    vector::{Vector16, load_16, store_16},
    warp::{self, Shuffle},
};
use crate::entry::kernel;
use crate::shared_array;

/// Shuffle modes, numbered as `ferrocuda_lessons::cpu::warp::ShflMode`.
const MODE_IDX: u32 = 0;
const MODE_UP: u32 = 1;
const MODE_DOWN: u32 = 2;

/// One shuffle per lane named in `mask`: `out[t] = shfl_*(mask, input[t], b, width)`.
/// Lanes outside `mask` write nothing.
#[inline(always)]
unsafe fn shuffle_once<T: Shuffle>(
    mode: u32,
    input: *const T,
    out: *mut T,
    mask: u32,
    b: u32,
    width: u32,
) {
    let t = thread_idx_x() as usize;
    if mask & (1 << warp::lane_id()) == 0 {
        return;
    }
    // SAFETY: the host passes `block_dim_x()` elements behind each pointer, and every lane in
    // `mask` exists and reaches the same shuffle (mode and width are uniform arguments).
    unsafe {
        let v = *input.add(t);
        let r = match mode {
            MODE_IDX => warp::shfl_sync(mask, v, b, width),
            MODE_UP => warp::shfl_up_sync(mask, v, b, width),
            MODE_DOWN => warp::shfl_down_sync(mask, v, b, width),
            _ => warp::shfl_xor_sync(mask, v, b, width),
        };
        *out.add(t) = r;
    }
}

/// `<<<1, warp lanes>>>`: one shuffle of `mode` (0 idx, 1 up, 2 down, 3 xor).
///
/// # Safety
/// `input` and `out` hold `blockDim.x <= 32` elements; `mask` names existing lanes.
#[kernel(T in [u32, i32, f32, u64, i64, f64])]
pub unsafe fn selftest_shfl<T: Shuffle>(
    mode: u32,
    input: *const T,
    out: *mut T,
    mask: u32,
    b: u32,
    width: u32,
) {
    unsafe { shuffle_once(mode, input, out, mask, b, width) }
}

/// `<<<1, warp lanes>>>`: `out[4t..4t+4] = [ballot, any, all, lane_id]` of `pred[t] != 0` over
/// `mask`. Lanes outside `mask` write nothing.
///
/// # Safety
/// `pred` holds `blockDim.x <= 32` elements, `out` four times that; `mask` names existing lanes.
#[kernel]
pub unsafe fn selftest_vote(pred: *const u32, mask: u32, out: *mut u32) {
    let t = thread_idx_x() as usize;
    let lane = warp::lane_id();
    if mask & (1 << lane) == 0 {
        return;
    }
    // SAFETY: bounds as documented; every lane in `mask` reaches the votes.
    unsafe {
        let p = *pred.add(t) != 0;
        *out.add(4 * t) = warp::ballot_sync(mask, p);
        *out.add(4 * t + 1) = warp::any_sync(mask, p) as u32;
        *out.add(4 * t + 2) = warp::all_sync(mask, p) as u32;
        *out.add(4 * t + 3) = lane;
    }
}

#[inline(always)]
unsafe fn accumulate<T: AtomicAdd>(values: *const T, n: usize, acc: *mut T) {
    for i in grid_stride_1d(n) {
        // SAFETY: `i < n`; `acc` is one element only touched atomically.
        unsafe { atomic_add(acc, *values.add(i)) };
    }
}

#[inline(always)]
unsafe fn min_max<T: AtomicOrd>(values: *const T, n: usize, out: *mut T) {
    for i in grid_stride_1d(n) {
        // SAFETY: `i < n`; `out` holds two elements only touched atomically.
        unsafe {
            atomic_min(out, *values.add(i));
            atomic_max(out.add(1), *values.add(i));
        }
    }
}

/// Any grid: every thread adds its grid-stride share of `values` into `*acc` with
/// `atomic_add` (all threads hit one address: maximal contention).
///
/// # Safety
/// `values` holds `n` elements; `acc` one, initialised by the host.
#[kernel(T in [i32, u32, i64, u64, f32, f64])]
pub unsafe fn selftest_atomic_add<T: AtomicAdd>(values: *const T, n: usize, acc: *mut T) {
    unsafe { accumulate(values, n, acc) }
}

/// Any grid: `out[0] = min(out[0], values..)`, `out[1] = max(out[1], values..)` with
/// `atomic_min` / `atomic_max`.
///
/// # Safety
/// `values` holds `n` elements; `out` two, initialised by the host.
#[kernel(T in [i32, u32, i64, u64])]
pub unsafe fn selftest_atomic_min_max<T: AtomicOrd>(values: *const T, n: usize, out: *mut T) {
    unsafe { min_max(values, n, out) }
}

/// Any grid: every thread increments `*counter` once with an `atomic_cas` retry loop, so the
/// final value is the number of threads launched.
///
/// # Safety
/// `counter` is one `u64`, initialised by the host.
#[kernel]
pub unsafe fn selftest_atomic_cas_counter(counter: *mut u64) {
    // SAFETY: `counter` is only touched atomically.
    unsafe {
        let mut seen = atomic_add(counter, 0);
        loop {
            let old = atomic_cas(counter, seen, seen + 1);
            if old == seen {
                break;
            }
            seen = old;
        }
    }
}

const SHARED_STATIC_BLOCK: usize = crate::config::SELFTEST_SHARED_BLOCK as usize;
shared_array!(
    /// The tile of `selftest_shared_static`: one slot per thread.
    fn selftest_reverse_tile() -> [u32; SHARED_STATIC_BLOCK]
);

/// Reverses each block-sized chunk of `input` into `out` through shared memory. Threads past
/// `n` still reach the barrier (no early return before `syncthreads`).
#[inline(always)]
unsafe fn reverse_chunks(tile: *mut u32, input: *const u32, out: *mut u32, n: usize) {
    let t = thread_idx_x() as usize;
    let block = block_dim_x() as usize;
    let start = block_idx_x() as usize * block;
    let len = n.saturating_sub(start).min(block);
    // SAFETY: `tile` holds `block` elements; global indices are below `n`.
    unsafe {
        if t < len {
            *tile.add(t) = *input.add(start + t);
        }
        syncthreads();
        if t < len {
            *out.add(start + t) = *tile.add(len - 1 - t);
        }
    }
}

/// `<<<ceil(n / 256), 256>>>`, static shared memory: reverses each 256-element chunk.
///
/// # Safety
/// `input` and `out` hold `n` elements; the block size must be `SELFTEST_SHARED_BLOCK`.
#[kernel]
pub unsafe fn selftest_shared_static(input: *const u32, out: *mut u32, n: usize) {
    // SAFETY: forwarded to the launcher.
    unsafe { reverse_chunks(selftest_reverse_tile(), input, out, n) }
}

/// `<<<ceil(n / B), B>>>`, dynamic shared memory `4 * B` bytes: reverses each `B`-element chunk.
///
/// # Safety
/// `input` and `out` hold `n` elements; dynamic shared memory holds `blockDim.x` `u32`.
#[kernel(dynamic_shared = block * size_of::<u32>())]
pub unsafe fn selftest_shared_dynamic(input: *const u32, out: *mut u32, n: usize) {
    // SAFETY: forwarded to the launcher.
    unsafe { reverse_chunks(dynamic_shared::<u32>(), input, out, n) }
}

/// Any grid: per block, `out[3b..3b+3] = [syncthreads_count, syncthreads_and, syncthreads_or]` of
/// `pred[global index] != 0`.
///
/// # Safety
/// `pred` holds `gridDim.x * blockDim.x` elements, `out` `3 * gridDim.x`.
#[kernel]
pub unsafe fn selftest_sync_predicates(pred: *const u32, out: *mut u32) {
    // SAFETY: bounds as documented; every thread reaches the three barriers.
    unsafe {
        let p = *pred.add(index_1d()) != 0;
        let count = syncthreads_count(p);
        let all = syncthreads_and(p);
        let any = syncthreads_or(p);
        if thread_idx_x() == 0 {
            let b = 3 * block_idx_x() as usize;
            *out.add(b) = count;
            *out.add(b + 1) = all as u32;
            *out.add(b + 2) = any as u32;
        }
    }
}

/// Per thread, ten words: rank, size, meta-group rank, `shfl(v, 0)`, `shfl_down(v, 1)`,
/// `shfl_up(v, 1)`, `shfl_xor(v, 1)`, `ballot(v odd)`, `any(v % 3 == 0)`, `all(v != 0)`.
#[inline(always)]
unsafe fn tile_report<const N: u32>(input: *const u32, out: *mut u32) {
    let block = this_thread_block();
    let tile = tiled_partition::<N>(&block);
    let r = block.thread_rank() as usize;
    // SAFETY: the host passes `block.size()` inputs and ten times as many outputs; every thread
    // of every tile calls the same collectives.
    unsafe {
        let v = *input.add(r);
        let words = [
            tile.thread_rank(),
            tile.size(),
            tile.meta_group_rank(),
            tile.shfl(v, 0),
            tile.shfl_down(v, 1),
            tile.shfl_up(v, 1),
            tile.shfl_xor(v, 1),
            tile.ballot(v % 2 == 1),
            tile.any(v % 3 == 0) as u32,
            tile.all(v != 0) as u32,
        ];
        tile.sync();
        for (k, w) in words.into_iter().enumerate() {
            *out.add(10 * r + k) = w;
        }
    }
}

/// `<<<1, B>>>`: the `TiledPartition` API for tiles of `N` threads (see `tile_report`).
///
/// # Safety
/// `input` holds `B` elements, `out` `10 * B`.
#[kernel(N in [1, 2, 4, 8, 16, 32])]
pub unsafe fn selftest_tile<const N: u32>(input: *const u32, out: *mut u32) {
    unsafe { tile_report::<N>(input, out) }
}

/// Any 3D grid and block: thread `g` (linear over the whole grid, x fastest) writes twelve words:
/// threadIdx, blockIdx, blockDim, gridDim (x, y, z each).
///
/// # Safety
/// `out` holds `12 *` (threads in the grid) elements.
#[kernel]
pub unsafe fn selftest_indices_3d(out: *mut u32) {
    let block = this_thread_block();
    let b = block.group_index();
    let block_linear = (b.z * grid_dim_y() + b.y) * grid_dim_x() + b.x;
    let g = block_linear as usize * block.size() as usize + block.thread_rank() as usize;
    let t = block.thread_index();
    let words = [
        t.x,
        t.y,
        t.z,
        b.x,
        b.y,
        b.z,
        block_dim_x(),
        block_dim_y(),
        block_dim_z(),
        grid_dim_x(),
        grid_dim_y(),
        grid_dim_z(),
    ];
    for (k, w) in words.into_iter().enumerate() {
        // SAFETY: bounds as documented.
        unsafe { *out.add(12 * g + k) = w };
    }
}

/// Any grid: `out[i] = input[i]` with a grid-stride loop.
///
/// # Safety
/// `input` and `out` hold `n` elements.
#[kernel]
pub unsafe fn selftest_grid_stride_copy(input: *const u32, out: *mut u32, n: usize) {
    for i in grid_stride_1d(n) {
        // SAFETY: `i < n`.
        unsafe { *out.add(i) = *input.add(i) };
    }
}

/// Any grid: copies `n_vectors` 16-byte vectors with `load_16` / `store_16`.
///
/// # Safety
/// `input` and `out` are 16-byte aligned and hold `4 * n_vectors` `f32`.
#[kernel]
pub unsafe fn selftest_vector_copy_f32(input: *const f32, out: *mut f32, n_vectors: usize) {
    let (input, out) = (
        input.cast::<Vector16<f32, 4>>(),
        out.cast::<Vector16<f32, 4>>(),
    );
    for i in grid_stride_1d(n_vectors) {
        // SAFETY: `i < n_vectors`, alignment by the caller.
        unsafe { store_16(out.add(i), load_16(input.add(i))) };
    }
}

/// `<<<G, B>>>`, dynamic shared `4 * (B + 1)` bytes, `B` a power of two: each block sums its
/// chunk, publishes the partial, fences (`scope` 0: GPU, otherwise system), and counts itself
/// done with `atomic_add`; the block that arrives last sums the partials into `*out` (the
/// "last block" / atomic-finish pattern).
///
/// # Safety
/// `input` holds `n` elements, `partials` `gridDim.x`, `counter` one (zeroed by the host).
#[kernel(dynamic_shared = (block + 1) * size_of::<u32>())]
pub unsafe fn selftest_last_block_sum(
    input: *const u32,
    n: usize,
    partials: *mut u32,
    counter: *mut u32,
    out: *mut u32,
    scope: u32,
) {
    let s = dynamic_shared::<u32>();
    let t = thread_idx_x();
    let block = block_dim_x();
    // SAFETY: bounds as documented; all threads reach every barrier.
    unsafe {
        let mut sum = 0u32;
        let i = index_1d();
        if i < n {
            sum = *input.add(i);
        }
        let sum = block_tree_sum(s, sum, t, block);
        let is_last = s.add(block as usize);
        if t == 0 {
            *partials.add(block_idx_x() as usize) = sum;
            if scope == 0 {
                sync::threadfence();
            } else {
                sync::threadfence_system();
            }
            let done = atomic_add(counter, 1);
            *is_last = (done == grid_dim_x() - 1) as u32;
        }
        syncthreads();
        if *is_last != 0 {
            sync::threadfence();
            let mut total = 0u32;
            let mut b = t;
            while b < grid_dim_x() {
                total = total.wrapping_add(core::ptr::read_volatile(partials.add(b as usize)));
                b += block;
            }
            let total = block_tree_sum(s, total, t, block);
            if t == 0 {
                *out = total;
            }
        }
    }
}

/// Sums one value per thread over a power-of-two block through shared memory `s` (`block`
/// slots); the result is valid in thread 0. Ends with a barrier so `s` can be reused.
#[inline(always)]
unsafe fn block_tree_sum(s: *mut u32, v: u32, t: u32, block: u32) -> u32 {
    // SAFETY: `s` holds `block` slots; every thread calls this.
    unsafe {
        *s.add(t as usize) = v;
        syncthreads();
        let mut stride = block / 2;
        while stride > 0 {
            if t < stride {
                *s.add(t as usize) =
                    (*s.add(t as usize)).wrapping_add(*s.add((t + stride) as usize));
            }
            syncthreads();
            stride /= 2;
        }
        let r = *s;
        syncthreads();
        r
    }
}
