//! Several time steps per pass over memory (时间分块, temporal blocking): the iterated stencil.
//!
//! One application of the fast stencil reads each input once and writes each output once; it
//! already runs at the copy speed, so repeating it `k` times costs `k` passes over memory. Here a
//! block loads its tile once with a halo of `k * R` on each side, applies the stencil `k` times
//! in shared memory, and stores only the last step: the region that is still right shrinks by
//! `R` on each side per step (overlapped tiling: neighbouring tiles recompute the same halo
//! outputs), so after `k` steps exactly the tile's own outputs are left. One pass does `k`
//! steps for the price of one read, one write and `2 * k * R` extra elements a tile.
//!
//! The steps ping-pong between two shared buffers: step `s` reads one and writes the other,
//! then one barrier, and the next step reads what it wrote. Each step's output vectors are the
//! fast stencil's (`fast::output_vector`: the same window, the same adds in the same order, a
//! 16-bit result rounded to its type), so `k` fused steps give the bits of `k` applications of
//! the fast stencil.
//!
//! Geometry. Step `s` of a pass of `steps` starts at position
//! `origin(s) = first_out - (steps - s) * (R + later)`, and the loaded input `R + SHIFT` before
//! step 1, at the input's vector boundary. The window of an output vector starts `R` before it:
//! `SHIFT` elements into the vectors it reads for the first step, `later` for the others. For
//! most stencils `later` is 0 (each step starts `R` before the next, at a vector boundary). The
//! 16-bit sums order their adds by an output's lane in its 16-byte vector (`sums::window_sum`),
//! so there every step's vectors lie on the output's 16-byte grid, as the one-step stencil's
//! outputs do, and each position is computed in the same lane in every step: `later` is
//! `LANES - R mod LANES` (mod `LANES`). The vector counts are laid from the last step down: the
//! last holds the tile's outputs, and each step before holds the vectors the windows of the next
//! step's vectors read, so every element a step reads was written by the step before, from
//! values that are all that step's true values.
//!
//! Boundaries. Every step of the iterated stencil reads its input through the boundary rule,
//! so a position outside `0..n` holds, after each step, what the rule makes of that step's
//! array: 0 (zero), the step's value at the nearest end (clamp), or at the wrapped position
//! (periodic). Periodic needs nothing: the tile is loaded through the rule, and a stencil of
//! a periodic array is periodic, so the wrapped positions are computed like any other. For zero
//! and clamp the (at most two) edge tiles fix their outside positions after each step, after a
//! barrier (clamp copies the value at position `0` or `n - 1`, which the tile always holds when
//! it holds a position beyond it). Interior tiles, whose whole input lies inside `0..n`, do
//! nothing more than the steps.
use super::fast::{output_vector, store_output};
use super::{Element, Taps, fetch};
use crate::config::{
    STENCIL_BOUNDARY_CLAMP, STENCIL_BOUNDARY_PERIODIC, STENCIL_STEPS_VECTORS_PER_THREAD as V,
    stencil_fast_tiles, stencil_steps_tile_vectors,
};
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::device::vector::Access16;

/// One tile of a pass: its first output, its outputs (a multiple of `LANES`), `steps`, the
/// first step's input shift and the later steps' (`later`), from which every step's origin and
/// vectors follow.
#[derive(Clone, Copy)]
struct Tile {
    first_out: isize,
    outputs: usize,
    steps: usize,
    shift: usize,
    later: usize,
}

impl Tile {
    /// The input shift of every step after the first. Where an output's lane decides the order
    /// of its adds (the 16-bit sums), every step's vectors lie on the output's vector grid and
    /// the window of a vector starts `R` before it: `LANES - R mod LANES` (mod `LANES`) into the
    /// vectors it reads. Elsewhere each step starts `R` before the next, and its windows at a
    /// vector boundary.
    #[inline(always)]
    fn later_shift<T: Element, P: Taps<T::Acc>, const R: usize>() -> usize {
        if P::ONES && T::LANES == 8 {
            (T::LANES - R % T::LANES) % T::LANES
        } else {
            0
        }
    }

    /// Vectors of step `s` (`0` is the loaded input, `steps` the outputs).
    #[inline(always)]
    fn vectors<T: Element, const R: usize>(&self, s: usize) -> usize {
        let reach = (self.later + 2 * R).div_ceil(T::LANES);
        let first = self.outputs / T::LANES + (self.steps - 1) * reach;
        if s == 0 {
            first + (self.shift + 2 * R).div_ceil(T::LANES)
        } else {
            first - (s - 1) * reach
        }
    }

    /// The position of element 0 of step `s` (the loaded input, step 0, starts at the input's
    /// vector boundary).
    #[inline(always)]
    fn origin<const R: usize>(&self, s: usize) -> isize {
        let back = |s: usize| ((self.steps - s) * (R + self.later)) as isize;
        if s == 0 {
            self.first_out - back(1) - (R + self.shift) as isize
        } else {
            self.first_out - back(s)
        }
    }
}

/// Step `s` of a tile, from `src` to `dst` (or to `out` for the last step): the fast
/// stencil's window for each output vector, with the input shift of the first step.
///
/// The steps are bound by instruction issue (docs/tuning-notes.md, "Several steps per pass"),
/// so the loop is shaped for few instructions per output: 32-bit counters, the last step's
/// stores to global memory in a loop of their own, and two output vectors a round in the others
/// (a thread's two vectors `block` apart, so a warp's loads and stores stay contiguous), which
/// shares the round's counters, compares and coefficient loads between them. Each output
/// vector is still `output_vector`: the same adds in the same order.
///
/// # Safety
/// `src` holds the tile's step `s - 1`, `dst` room for `tile.vectors(s)` vectors; `out` holds `n`
/// writable elements.
#[inline(always)]
unsafe fn step<T: Element, P: Taps<T::Acc>, const R: usize, const SHIFT: usize>(
    src: *const T::V,
    dst: *mut T::V,
    out: *mut T,
    n: usize,
    tile: Tile,
    s: usize,
    taps: &P,
) {
    let (tid, block) = (thread_idx_x(), block_dim_x());
    // A tile's vectors fit in shared memory, far below 2^32.
    let vectors = tile.vectors::<T, R>(s) as u32;
    let mut g = tid;
    // SAFETY: the window of vector `g` lies in step `s - 1`'s vectors (the module
    // documentation's geometry); output vector `g` of the last step is a tile output.
    unsafe {
        if s == tile.steps {
            while g < vectors {
                let y = output_vector::<T, P, R, SHIFT>(src, g as usize, taps);
                store_output(out, n, tile.first_out + (g as usize * T::LANES) as isize, y);
                g += block;
            }
            return;
        }
        while g + block < vectors {
            let y0 = output_vector::<T, P, R, SHIFT>(src, g as usize, taps);
            let y1 = output_vector::<T, P, R, SHIFT>(src, (g + block) as usize, taps);
            Access16::store(&mut *dst.add(g as usize), y0);
            Access16::store(&mut *dst.add((g + block) as usize), y1);
            g += 2 * block;
        }
        if g < vectors {
            let y = output_vector::<T, P, R, SHIFT>(src, g as usize, taps);
            Access16::store(&mut *dst.add(g as usize), y);
        }
    }
}

/// Step `s`'s input shift as a constant: the loaded tile's for the first step, 0 after.
///
/// # Safety
/// As [`step`].
#[inline(always)]
unsafe fn step_shifted<T: Element, P: Taps<T::Acc>, const R: usize>(
    src: *const T::V,
    dst: *mut T::V,
    out: *mut T,
    n: usize,
    tile: Tile,
    s: usize,
    taps: &P,
) {
    let shift = if s == 1 { tile.shift } else { tile.later };
    // SAFETY: forwarded; `shift < LANES`.
    unsafe {
        match shift {
            0 => step::<T, P, R, 0>(src, dst, out, n, tile, s, taps),
            1 => step::<T, P, R, 1>(src, dst, out, n, tile, s, taps),
            2 if T::LANES > 2 => step::<T, P, R, 2>(src, dst, out, n, tile, s, taps),
            3 if T::LANES > 2 => step::<T, P, R, 3>(src, dst, out, n, tile, s, taps),
            4 if T::LANES == 8 => step::<T, P, R, 4>(src, dst, out, n, tile, s, taps),
            5 if T::LANES == 8 => step::<T, P, R, 5>(src, dst, out, n, tile, s, taps),
            6 if T::LANES == 8 => step::<T, P, R, 6>(src, dst, out, n, tile, s, taps),
            _ if T::LANES == 8 => step::<T, P, R, 7>(src, dst, out, n, tile, s, taps),
            _ => step::<T, P, R, 1>(src, dst, out, n, tile, s, taps),
        }
    }
}

/// After step `s` of an edge tile: its positions outside `0..n` set to what the boundary rule
/// reads there (zero or clamp; periodic positions are already right).
///
/// # Safety
/// `buffer` holds the tile's step `s`; `n > 0`.
#[inline(always)]
unsafe fn fix_outside<T: Element, const R: usize>(
    buffer: *mut T,
    n: usize,
    mode: u32,
    tile: Tile,
    s: usize,
) {
    let (origin, elements) = (tile.origin::<R>(s), tile.vectors::<T, R>(s) * T::LANES);
    let mut e = thread_idx_x() as usize;
    while e < elements {
        let p = origin + e as isize;
        if p < 0 || p as usize >= n {
            // SAFETY: positions 0 and n - 1 are in the buffer whenever a position beyond them
            // is (the module documentation); neither is written here.
            unsafe {
                *buffer.add(e) = if mode == STENCIL_BOUNDARY_CLAMP {
                    let end = if p < 0 { 0 } else { n as isize - 1 };
                    *buffer.add((end - origin) as usize)
                } else {
                    T::ZERO
                };
            }
        }
        e += block_dim_x() as usize;
    }
}

/// `steps` applications of the stencil, `steps` at most the pass's maximum; see the module
/// documentation.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`, both aligned to
/// their element size; `1 <= steps`; `blockDim.x` is a multiple of 32; the dynamic shared memory
/// holds twice `stencil_steps_tile_vectors(blockDim.x, R, LANES, steps)` 16-byte vectors.
#[inline(always)]
pub unsafe fn steps<T: Element, P: Taps<T::Acc>, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    steps: usize,
    taps: P,
) {
    let lanes = T::LANES;
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let in_offset = input as usize / size_of::<T>() % lanes;
    let out_offset = out as usize / size_of::<T>() % lanes;
    // The first step's input shift: its outputs start `(steps - 1) * (R + later)` before the
    // tile's, and the loaded tile at the input's vector boundary `R + shift` before that.
    let later = Tile::later_shift::<T, P, R>();
    let ahead = (steps - 1) * (R + later) + R;
    let shift = (in_offset + lanes - out_offset + (lanes - 1) * ahead) % lanes;
    let tile_len = block * V * lanes;
    let body = crate::config::stencil_fast_body(n, out_offset, lanes);
    let tiles = stencil_fast_tiles(n, out_offset, lanes, tile_len);
    let half = stencil_steps_tile_vectors(block as u32, R as u32, lanes as u32, steps as u32);
    let a = dynamic_shared::<T::V>();
    let b = a.wrapping_add(half as usize);
    let mut t = block_idx_x() as usize;
    // SAFETY: every step's vectors fit in `half` (`stencil_steps_tile_vectors` is the first
    // step's count at its largest); interior tiles start at an input vector boundary and lie in
    // `0..n`; `t` is uniform per block, so every thread runs the same iterations and reaches
    // every barrier.
    unsafe {
        while t < tiles {
            let tile = Tile {
                first_out: (t * tile_len) as isize - out_offset as isize,
                outputs: (body - t * tile_len).min(tile_len),
                steps,
                shift,
                later,
            };
            let (origin, loaded) = (tile.origin::<R>(0), tile.vectors::<T, R>(0));
            let interior = origin >= 0 && origin as usize + loaded * lanes <= n;
            if interior {
                let mut v = tid;
                while v < loaded {
                    let p = input.add(origin as usize + v * lanes).cast::<T::V>();
                    Access16::store(&mut *a.add(v), Access16::load(&*p));
                    v += block;
                }
            } else {
                let mut e = tid;
                while e < loaded * lanes {
                    *a.cast::<T>().add(e) = fetch(input, n, origin + e as isize, mode);
                    e += block;
                }
            }
            syncthreads();
            for s in 1..=steps {
                let (src, dst) = if s % 2 == 1 { (a, b) } else { (b, a) };
                step_shifted::<T, P, R>(src, dst, out, n, tile, s, &taps);
                if s < steps {
                    syncthreads();
                    if !interior && mode != STENCIL_BOUNDARY_PERIODIC {
                        fix_outside::<T, R>(dst.cast::<T>(), n, mode, tile, s);
                        syncthreads();
                    }
                }
            }
            // The next tile's load overwrites buffer `a`, which the last step may still read.
            syncthreads();
            t += grid_dim_x() as usize;
        }
    }
}
