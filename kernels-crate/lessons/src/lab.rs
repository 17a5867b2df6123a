//! The warp and execution-model lab (樊哲勇《CUDA编程基础与实践》第10章, 学习笔记《CUDA执行模型》,
//! 沐曦 MXMACA 教材第5章): the notes' warp-function program and the `simpleDivergence` kernels
//! of "Professional CUDA C".
use crate::device::{
    thread::{index_1d, thread_idx_x},
    warp::{self, WARP_SIZE},
};
use crate::entry::kernel;

/// Words each lane of [`warp_functions_demo`] writes.
pub const DEMO_WORDS: usize = crate::config::WARP_DEMO_WORDS;

/// Written for a vote a lane does not take part in.
const NOT_IN_MASK: u32 = u32::MAX;

/// The notes' `warp.cu` (`<<<1, 16>>>`, width `w = 8`), with masks that name only lanes that
/// exist: lane `t` writes, at `out[12 t..]`, `t`, its lane in the width segment
/// (`t % w`), `ballot(t > 0)`, `ballot(t == 0)`, `all(t != 0)` over every lane,
/// `all(t != 0)` over the lanes of `ballot(t > 0)`, `any(t != 0)` over every lane,
/// `any(t != 0)` over the lanes of `ballot(t == 0)`, and, with `y` = the lane in the segment,
/// `shfl(y, src_lane, w)`, `shfl_up(y, offset, w)`, `shfl_down(y, offset, w)`,
/// `shfl_xor(y, offset, w)`. A lane outside a vote's mask does not vote and writes `u32::MAX`
/// for it (the notes call `__all_sync(mask1, tid)` from thread 0, which `mask1` excludes:
/// undefined behaviour).
///
/// # Launch
/// `<<<1, B>>>`, `1 <= B <= 32`, no shared memory; `width` a power of two up to 32.
///
/// # Safety
/// `out` holds `12 * B` words.
#[kernel]
pub unsafe fn warp_functions_demo(out: *mut u32, width: u32, src_lane: u32, offset: u32) {
    let t = thread_idx_x();
    // `t & (w - 1)` is `t % w` for a power-of-two `w` (the notes' bitwise form), and has no
    // division by zero to guard against.
    let lane = t & width.wrapping_sub(1);
    let all_lanes = warp::mask_for_lanes(crate::device::thread::block_dim_x());
    // SAFETY: every mask below names existing lanes only, and only lanes in a mask call the
    // collective with it; `out` holds 12 words per lane.
    unsafe {
        let ballot_pos = warp::ballot_sync(all_lanes, t > 0);
        let ballot_zero = warp::ballot_sync(all_lanes, t == 0);
        let in_mask = |mask: u32| mask & (1 << t) != 0;
        let vote_in = |mask: u32, f: unsafe fn(u32, bool) -> bool| {
            if in_mask(mask) {
                f(mask, t != 0) as u32
            } else {
                NOT_IN_MASK
            }
        };
        let words = [
            t,
            lane,
            ballot_pos,
            ballot_zero,
            warp::all_sync(all_lanes, t != 0) as u32,
            vote_in(ballot_pos, warp::all_sync),
            warp::any_sync(all_lanes, t != 0) as u32,
            vote_in(ballot_zero, warp::any_sync),
            warp::shfl_sync(all_lanes, lane, src_lane, width),
            warp::shfl_up_sync(all_lanes, lane, offset, width),
            warp::shfl_down_sync(all_lanes, lane, offset, width),
            warp::shfl_xor_sync(all_lanes, lane, offset, width),
        ];
        for (k, w) in words.into_iter().enumerate() {
            *out.add(DEMO_WORDS * t as usize + k) = w;
        }
    }
}

/// The two sides of every divergence kernel: `work` steps of a recurrence that LLVM cannot
/// turn into a select (with the book's one-assignment bodies the branch disappears into
/// predication and there is no divergence left to see).
#[inline(always)]
pub(crate) fn side(seed: f32, work: u32) -> f32 {
    let mut v = seed;
    for _ in 0..work {
        v = v * 0.999 + 1.0;
    }
    v
}

/// Writes `ia + ib` to `c[tid]`, as the book does.
#[inline(always)]
unsafe fn store(c: *mut f32, n: usize, tid: usize, ia: f32, ib: f32) {
    if tid < n {
        // SAFETY: `tid < n`, and `c` holds `n` elements.
        unsafe { *c.add(tid) = ia + ib };
    }
}

/// `mathKernel1`: branches on `tid % 2`; even and odd lanes of every warp take different
/// sides, so each warp runs both one after the other (分支发散, branch divergence).
///
/// # Launch
/// grid `ceil(n / block)`, any block; no shared memory.
///
/// # Safety
/// `c` holds `n` elements.
#[kernel]
pub unsafe fn math_kernel1(c: *mut f32, n: usize, work: u32) {
    let tid = index_1d();
    let (mut ia, mut ib) = (0.0, 0.0);
    if tid % 2 == 0 {
        ia = side(100.0, work);
    } else {
        ib = side(200.0, work);
    }
    // SAFETY: forwarded to the launcher.
    unsafe { store(c, n, tid, ia, ib) };
}

/// `mathKernel2`: branches on `(tid / warpSize) % 2`; whole warps take one side, no warp
/// diverges.
///
/// # Launch
/// As [`math_kernel1`].
///
/// # Safety
/// `c` holds `n` elements.
#[kernel]
pub unsafe fn math_kernel2(c: *mut f32, n: usize, work: u32) {
    let tid = index_1d();
    let (mut ia, mut ib) = (0.0, 0.0);
    if (tid / WARP_SIZE as usize) % 2 == 0 {
        ia = side(100.0, work);
    } else {
        ib = side(200.0, work);
    }
    // SAFETY: forwarded to the launcher.
    unsafe { store(c, n, tid, ia, ib) };
}

/// `mathKernel3`: the same split as `math_kernel1` written as two independent `if`s on a
/// predicate; still divergent.
///
/// # Launch
/// As [`math_kernel1`].
///
/// # Safety
/// `c` holds `n` elements.
#[kernel]
pub unsafe fn math_kernel3(c: *mut f32, n: usize, work: u32) {
    let tid = index_1d();
    let (mut ia, mut ib) = (0.0, 0.0);
    let ipred = tid % 2 == 0;
    if ipred {
        ia = side(100.0, work);
    }
    if !ipred {
        ib = side(200.0, work);
    }
    // SAFETY: forwarded to the launcher.
    unsafe { store(c, n, tid, ia, ib) };
}

/// `mathKernel4`, fixed: the book writes `if (itid & 0x01 == 0)`, which C parses as
/// `itid & (0x01 == 0)`, i.e. `itid & 0`: always false, so every thread took the `else` side.
/// Here `(itid & 1) == 0` with `itid = tid >> 5`: warp-uniform like `math_kernel2`.
///
/// # Launch
/// As [`math_kernel1`].
///
/// # Safety
/// `c` holds `n` elements.
#[kernel]
pub unsafe fn math_kernel4(c: *mut f32, n: usize, work: u32) {
    let tid = index_1d();
    let itid = tid >> 5;
    let (mut ia, mut ib) = (0.0, 0.0);
    if (itid & 1) == 0 {
        ia = side(100.0, work);
    } else {
        ib = side(200.0, work);
    }
    // SAFETY: forwarded to the launcher.
    unsafe { store(c, n, tid, ia, ib) };
}

/// The exercise of 沐曦 MXMACA 教材第5章: every thread prints its `threadIdx.x` and `blockIdx.x` with device
/// `printf` ("are they printed in order? why?": lines of one warp come out together, but the
/// order of warps and blocks is whatever order they ran in). `tag` tells runs apart.
///
/// # Launch
/// Any 1D grid and block; the output appears at the host's next synchronisation.
///
/// # Safety
/// None beyond a valid launch (it touches no memory).
#[kernel]
pub unsafe fn print_thread_indices(tag: u32) {
    use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x};
    // The lesson's own run (tag 0) prints the indices alone; a tagged run says which it is.
    if tag == 0 {
        crate::device::println!(
            "threadIdx.x = %u of %u, blockIdx.x = %u of %u",
            thread_idx_x(),
            block_dim_x(),
            block_idx_x(),
            grid_dim_x()
        );
    } else {
        crate::device::println!(
            "tag %u: threadIdx.x = %u of %u, blockIdx.x = %u of %u",
            tag,
            thread_idx_x(),
            block_dim_x(),
            block_idx_x(),
            grid_dim_x()
        );
    }
}

/// The most threads a block of the wave lessons has (each thread one slot of shared memory).
pub const WAVE_LESSON_MAX_BLOCK: usize = 1024;

crate::shared_array!(
    /// The slots of [`wave_rotate`]: one per thread of the block.
    fn wave_rotate_slots() -> [u32; WAVE_LESSON_MAX_BLOCK]
);

/// 沐曦 MXMACA 教材第5章: how a block is cut into waves. Thread `t` writes
/// `wave_id << 16 | wave_lane` at `out[t]`, and lane 0 of each wave writes the wave's lane
/// count (the population of its mask) at `out[blockDim.x + wave_id]`. 200 threads on a device
/// of 64-wide waves are waves of 64, 64, 64 and 8 lanes; on NVIDIA's 32-wide warps, six of 32
/// and one of 8.
///
/// # Launch
/// `<<<1, B>>>`, `1 <= B <= 1024`, no dynamic shared memory.
///
/// # Safety
/// `out` holds `B + ceil(B / 32)` words.
#[kernel]
pub unsafe fn wave_layout(out: *mut u32) {
    use crate::device::wave;
    let t = thread_idx_x();
    let b = crate::device::thread::block_dim_x();
    let (id, lane) = (wave::wave_id(), wave::wave_lane());
    // SAFETY: `out` holds `B` words and then one per wave of at least 32 lanes.
    unsafe {
        *out.add(t as usize) = id << 16 | lane;
        if lane == 0 {
            *out.add((b + id) as usize) = wave::wave_mask_for_lanes(b).count_ones();
        }
    }
}

/// `__syncwave` with a 64-bit mask (沐曦 MXMACA 教材第5章): each thread writes `3 t + 1` to its
/// slot of shared memory, the lanes of its wave meet at `syncwave(mask)`, and each reads the
/// slot of the next lane of its wave (the last lane wraps to the first): `out[t]` is
/// `3 t' + 1` for that lane `t'`. Without the `syncwave` a lane could read a slot its neighbour
/// has not written yet.
///
/// # Launch
/// `<<<1, B>>>`, `1 <= B <= 1024`, no dynamic shared memory.
///
/// # Safety
/// `out` holds `B` words.
#[kernel]
pub unsafe fn wave_rotate(out: *mut u32) {
    use crate::device::wave;
    let t = thread_idx_x();
    let slots = wave_rotate_slots();
    let mask = wave::wave_mask_for_lanes(crate::device::thread::block_dim_x());
    let lanes = mask.count_ones();
    let first = wave::wave_id() * wave::wave_size();
    let next = first + (wave::wave_lane() + 1) % lanes;
    // SAFETY: `t` and `next` are threads of the block (at most 1024 slots); `mask` names the
    // lanes of this wave that exist, and each of them calls `syncwave` with it.
    unsafe {
        *slots.add(t as usize) = 3 * t + 1;
        wave::syncwave(mask);
        *out.add(t as usize) = *slots.add(next as usize);
    }
}

/// Divergence inside one wave (沐曦 MXMACA 教材第5章 线程束分化): lanes `0..32` take one
/// branch and lanes `32..` the other. On NVIDIA's 32-wide warps that split follows the warps
/// (no warp diverges); on a 64-wide wave both sides are in one wave, which runs them one after
/// the other. Lane 0 of each wave writes the ballot of `lane < 32` at `out[wave_id]`: a mask
/// that is neither 0 nor all the lanes is a divergent wave. Thread `t` writes its side's result
/// (`t + 1000` on the first side, `2 t` on the other) at `c[t]`.
///
/// # Launch
/// `<<<1, B>>>`, `1 <= B <= 1024`, no dynamic shared memory.
///
/// # Safety
/// `out` holds `ceil(B / 32)` words, `c` holds `B`.
#[kernel]
pub unsafe fn wave_halves(out: *mut u64, c: *mut u32) {
    use crate::device::wave;
    let t = thread_idx_x();
    let lane = wave::wave_lane();
    let mask = wave::wave_mask_for_lanes(crate::device::thread::block_dim_x());
    // SAFETY: `mask` names the existing lanes of this wave, each calling the ballot with it;
    // `out` and `c` hold what the launch section says.
    unsafe {
        let first_half = wave::ballot_wave(mask, lane < 32);
        *c.add(t as usize) = if lane < 32 { t + 1000 } else { 2 * t };
        if lane == 0 {
            *out.add(wave::wave_id() as usize) = first_half;
        }
    }
}
