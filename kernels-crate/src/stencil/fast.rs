//! The fast path: the shared tile of the 《CUDA C/C++ Basics》学习笔记, moved 16 bytes at a time.
//!
//! A stencil reads each input once and writes each output once, so its speed limit is the
//! copy bandwidth. To get there:
//! - **16-byte loads and stores** (`device::vector`): a tile of `block * V` vectors
//!   (`V = STENCIL_FAST_VECTORS_PER_THREAD`) plus its halos goes from global to shared memory as
//!   whole vectors, and each thread writes its outputs as whole vectors.
//! - **several outputs per thread, from registers**: a thread reads the few shared vectors that
//!   cover the window of one output vector (`LANES + 2R` elements) into registers once, then
//!   computes all `LANES` outputs from them, instead of `2R + 1` shared reads per output.
//! - **one block per tile**, the grid the host launches: the block scheduler gives the next
//!   tile to whichever SM has room. On an H100 this runs at the driver's copy speed from 2^26
//!   elements, where a grid of the resident blocks looping over tiles a grid apart (the first
//!   form of this kernel) stayed 7-11 % short (docs/tuning-notes.md, "The grid, not the
//!   pipeline", with the likely reasons). The kernel still takes any grid: a block with
//!   several tiles loops over them, the next tile's loads issued into registers before the
//!   current tile is computed (not for the 16-bit floats, whose registers decide how many
//!   blocks an SM holds: see `tiles`).
//!
//! Alignment. Tiles are laid on the output's 16-byte grid: output vector `v` covers outputs
//! `v * LANES - out_offset ..`, where `out_offset` is the output's element offset from a
//! 16-byte boundary, so the first and last vectors may stick out of `0..n`; those are stored
//! lane by lane (the scalar head and tail), every other one with one 16-byte store. The input
//! may be aligned differently (a slice at any element offset): a tile's input then starts at
//! the input's vector boundary at or below its left halo, `SHIFT` elements early. `SHIFT` is
//! the same for every tile, so it is a constant of the loop (`tiles` is instantiated for each
//! value), and the window of an output vector starts `SHIFT` elements into the vectors it reads.
//!
//! Boundaries. A tile whose input lies wholly inside `0..n` is loaded as 16-byte vectors; the
//! (at most two) tiles at the ends are loaded element by element through the boundary rule,
//! straight into shared memory. Every thread of a block runs the same loop iterations, so all
//! reach every barrier.
use super::{Element, Taps, fetch, window_sum};
use crate::config::{STENCIL_FAST_VECTORS_PER_THREAD as V, stencil_fast_body, stencil_fast_tiles};
use crate::device::shared::dynamic_shared;
use crate::device::sync::syncthreads;
use crate::device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::device::vector::Access16;

/// Elements of the register window of one output vector, for every radius, type and shift:
/// `ceil((SHIFT + LANES + 2R) / LANES) * LANES` is at most 48 (a 16-bit float, `R = 16`,
/// `SHIFT = 7`; 40 for `f32`). Only the elements a window uses are ever touched.
const WINDOW: usize = 48;

/// The vectors of one tile a thread loads: rounds `0..=V` of `tid + round * blockDim.x`
/// (round `V` only for the few extra halo vectors).
type TileRegs<T> = [<T as Element>::V; V + 1];

/// Where tile `t` is: its first output (negative when the output's first vector starts before
/// element 0), its outputs (a multiple of `LANES`), its first input (a vector boundary of the
/// input, `R + SHIFT` before the first output), its vectors of input, and whether they all lie
/// inside `0..n`.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub(super) first_out: isize,
    pub(super) outputs: usize,
    pub(super) first_in: isize,
    pub(super) vectors: usize,
    pub(super) interior: bool,
}

/// The tiles of one launch: `tile_len` outputs each over the `body` outputs of the output's
/// vector grid, which starts `out_offset` elements before element 0.
#[derive(Clone, Copy)]
pub(super) struct Tiling {
    pub(super) n: usize,
    out_offset: usize,
    pub(super) body: usize,
    tile_len: usize,
    lanes: usize,
}

impl Tiling {
    /// The tiling of a launch over `input` and `out` (`n` elements each) with the block's
    /// tiles, and the input shift `SHIFT` of its tiles:
    /// `(input offset - out_offset - R) mod LANES` (element offsets from a 16-byte boundary).
    #[inline(always)]
    pub(super) fn of<T: Element, const R: usize>(
        input: *const T,
        out: *mut T,
        n: usize,
    ) -> (Self, usize) {
        let (lanes, size) = (T::LANES, size_of::<T>());
        let in_offset = input as usize / size % lanes;
        let out_offset = out as usize / size % lanes;
        let tiling = Tiling {
            n,
            out_offset,
            body: stencil_fast_body(n, out_offset, lanes),
            tile_len: block_dim_x() as usize * V * lanes,
            lanes,
        };
        (
            tiling,
            (in_offset + lanes - out_offset + (lanes - 1) * R) % lanes,
        )
    }

    /// Tiles of the launch (the host's grid has one block each).
    #[inline(always)]
    pub(super) fn tiles(&self) -> usize {
        stencil_fast_tiles(self.n, self.out_offset, self.lanes, self.tile_len)
    }

    #[inline(always)]
    pub(super) fn tile<T: Element, const R: usize, const SHIFT: usize>(&self, t: usize) -> Tile {
        let outputs = (self.body - t * self.tile_len).min(self.tile_len);
        let first_out = (t * self.tile_len) as isize - self.out_offset as isize;
        let first_in = first_out - (R + SHIFT) as isize;
        let vectors = (outputs + 2 * R + SHIFT).div_ceil(T::LANES);
        Tile {
            first_out,
            outputs,
            first_in,
            vectors,
            interior: first_in >= 0 && first_in as usize + vectors * T::LANES <= self.n,
        }
    }
}

/// This thread's vectors of an interior tile, into registers (16-byte loads).
///
/// # Safety
/// `input` holds `n` elements; `tile` is interior and starts at a vector boundary of the input.
#[inline(always)]
unsafe fn load_tile<T: Element>(input: *const T, tile: Tile) -> TileRegs<T> {
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut regs = [T::vector(|_| T::ZERO); V + 1];
    for (round, r) in regs.iter_mut().enumerate() {
        let v = tid + round * block;
        if v < tile.vectors {
            let a = tile.first_in as usize + v * T::LANES;
            // SAFETY: the vector lies inside the interior tile, at a vector boundary.
            *r = unsafe { Access16::load(&*input.add(a).cast::<T::V>()) };
        }
    }
    regs
}

/// Writes an edge tile's input to shared memory `s` element by element, through the boundary
/// rule.
///
/// # Safety
/// `input` holds `n` elements; `s` holds `tile.vectors` vectors.
#[inline(always)]
pub(super) unsafe fn fill_edge_tile<T: Element>(
    s: *mut T,
    input: *const T,
    n: usize,
    mode: u32,
    tile: Tile,
) {
    let (mut e, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    while e < tile.vectors * T::LANES {
        // SAFETY: `e` is inside the tile; `fetch` reads below `n`.
        unsafe { *s.add(e) = fetch(input, n, tile.first_in + e as isize, mode) };
        e += block;
    }
}

/// Output vector `g` of the tile in shared memory `s`: the `LANES + 2R` window starting at
/// element `g * LANES + SHIFT` of the tile, read as whole vectors into registers.
///
/// # Safety
/// `s` holds the tile's vectors `g ..= g + ceil((SHIFT + LANES + 2R) / LANES) - 1`.
#[inline(always)]
pub(super) unsafe fn output_vector<
    T: Element,
    P: Taps<T::Acc>,
    const R: usize,
    const SHIFT: usize,
>(
    s: *const T::V,
    g: usize,
    taps: &P,
) -> T::V {
    let lanes = T::LANES;
    let window_vectors = (SHIFT + lanes + 2 * R).div_ceil(lanes);
    const { assert!((SHIFT + T::LANES + 2 * R).div_ceil(T::LANES) * T::LANES <= WINDOW) };
    let mut win = [T::ZERO; WINDOW];
    for v in 0..window_vectors {
        // SAFETY: vector `g + v` is one of those the caller guarantees.
        let vector = unsafe { Access16::load(&*s.add(g + v)) };
        for e in 0..lanes {
            win[v * lanes + e] = T::lane(vector, e);
        }
    }
    if P::ONES && T::LANES == 8 {
        // The 16-bit floats' sums (issue-bound, where the others wait on memory): the windows
        // share their adds (`window_sum`), each output rounded once to the type.
        let x = |i: usize| win[SHIFT + i].to_acc();
        return T::vector_from_acc(|c| window_sum(x, c, 2 * R + 1, <T::Acc as Element>::add));
    }
    // In `T::Acc`: `T` itself, or `f32` for the 16-bit floats, rounded once at the end.
    T::vector_from_acc(|c| {
        let mut acc = <T::Acc as Element>::ADD_IDENTITY;
        for k in 0..2 * R + 1 {
            acc = taps.accumulate(acc, k, win[SHIFT + c + k].to_acc());
        }
        acc
    })
}

/// Stores the output vector `y` of outputs `o .. o + LANES`: one 16-byte store when all lie
/// inside `0..n`, else lane by lane those that do.
///
/// # Safety
/// `out` holds `n` writable elements; `out + o` is 16-byte aligned.
#[inline(always)]
pub(super) unsafe fn store_output<T: Element>(out: *mut T, n: usize, o: isize, y: T::V) {
    // SAFETY: every index written is inside `0..n`; a whole vector is aligned (caller).
    unsafe {
        if o >= 0 && o as usize + T::LANES <= n {
            Access16::store(&mut *out.add(o as usize).cast::<T::V>(), y);
        } else {
            for c in 0..T::LANES {
                let i = o + c as isize;
                if i >= 0 && (i as usize) < n {
                    *out.add(i as usize) = T::lane(y, c);
                }
            }
        }
    }
}

/// The grid-stride loop over the tiles, for one input shift.
///
/// # Safety
/// As [`fast`]; `SHIFT` is `(input offset - out_offset - R) mod LANES` (element offsets from a
/// 16-byte boundary).
#[inline(always)]
unsafe fn tiles<T: Element, P: Taps<T::Acc>, const R: usize, const SHIFT: usize>(
    input: *const T,
    out: *mut T,
    mode: u32,
    taps: &P,
    tiling: Tiling,
) {
    let (tid, block) = (thread_idx_x() as usize, block_dim_x() as usize);
    let n = tiling.n;
    let tiles = tiling.tiles();
    let s = dynamic_shared::<T::V>();
    let mut t = block_idx_x() as usize;
    // The next tile's loads, issued before this tile is computed, keep `V + 1` vectors and
    // their addresses live through the computation: 48 registers a thread allocated for `f32`
    // on sm_90 (10 blocks an SM, enough to keep the copy speed), 62 for the 16-bit floats (8
    // blocks), whose stencil also issues more instructions per byte and needs the blocks more.
    // Those load each tile when they reach it: 40 registers, 12 blocks an SM
    // (docs/tuning-notes.md, "The 16-bit stencil: no loads across the computation"). On the
    // single-GPU grid (`StencilGrid::Tiles`, one block per tile) no block has a next tile;
    // the resident grid (`StencilGrid::ResidentTiles`) loops.
    let prefetch = T::LANES != 8;
    let mut regs = [T::vector(|_| T::ZERO); V + 1];
    // SAFETY: tiles start at input vector boundaries (SHIFT) and output vector boundaries; the
    // shared memory holds `stencil_fast_tile_vectors` vectors, at least `tile.vectors`; `t` is
    // uniform per block, so every thread of the block runs the same iterations and reaches
    // both barriers.
    unsafe {
        if prefetch && t < tiles && tiling.tile::<T, R, SHIFT>(t).interior {
            regs = load_tile(input, tiling.tile::<T, R, SHIFT>(t));
        }
        while t < tiles {
            let tile = tiling.tile::<T, R, SHIFT>(t);
            if tile.interior {
                if !prefetch {
                    regs = load_tile(input, tile);
                }
                for (round, r) in regs.iter().enumerate() {
                    let v = tid + round * block;
                    if v < tile.vectors {
                        Access16::store(&mut *s.add(v), *r);
                    }
                }
            } else {
                fill_edge_tile(s.cast::<T>(), input, n, mode, tile);
            }
            syncthreads();
            let next = t + grid_dim_x() as usize;
            if prefetch && next < tiles {
                let following = tiling.tile::<T, R, SHIFT>(next);
                if following.interior {
                    regs = load_tile(input, following);
                }
            }
            for round in 0..V {
                let g = tid + round * block;
                if g * T::LANES < tile.outputs {
                    let y = output_vector::<T, P, R, SHIFT>(s, g, taps);
                    store_output(out, n, tile.first_out + (g * T::LANES) as isize, y);
                }
            }
            syncthreads();
            t = next;
        }
    }
}

/// The whole fast stencil; see the module documentation.
///
/// # Safety
/// `input` holds `n` elements, `out` `n` writable ones, not overlapping `input`, both aligned
/// to their element size; `blockDim.x` is a multiple of 32; the dynamic shared memory holds
/// `stencil_fast_tile_vectors(blockDim.x, R, LANES)` 16-byte vectors.
#[inline(always)]
pub unsafe fn fast<T: Element, P: Taps<T::Acc>, const R: usize>(
    input: *const T,
    out: *mut T,
    n: usize,
    mode: u32,
    taps: P,
) {
    let (tiling, shift) = Tiling::of::<T, R>(input, out, n);
    // SAFETY: `shift` is the input shift `tiles` requires; the rest is the caller's.
    unsafe {
        match shift {
            0 => tiles::<T, P, R, 0>(input, out, mode, &taps, tiling),
            1 => tiles::<T, P, R, 1>(input, out, mode, &taps, tiling),
            2 => tiles::<T, P, R, 2>(input, out, mode, &taps, tiling),
            3 => tiles::<T, P, R, 3>(input, out, mode, &taps, tiling),
            // Eight lanes (the 16-bit floats) only; `T::LANES` is a constant, so the other
            // types compile without these.
            4 if T::LANES == 8 => tiles::<T, P, R, 4>(input, out, mode, &taps, tiling),
            5 if T::LANES == 8 => tiles::<T, P, R, 5>(input, out, mode, &taps, tiling),
            6 if T::LANES == 8 => tiles::<T, P, R, 6>(input, out, mode, &taps, tiling),
            _ if T::LANES == 8 => tiles::<T, P, R, 7>(input, out, mode, &taps, tiling),
            _ => tiles::<T, P, R, 3>(input, out, mode, &taps, tiling),
        }
    }
}
