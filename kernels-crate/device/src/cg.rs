//! Cooperative groups (协作组), in the style of `cooperative_groups::this_thread_block()` and
//! `tiled_partition<N>()`.
//!
//! A group names a set of threads and gives them `sync`, a rank and (for tiles) warp
//! collectives that only involve the tile's lanes. The `reduce_cp` of 樊哲勇第10章 finishes a
//! reduction with `g.shfl_down(y, i)` on a `thread_block_tile<32>`; [`TiledPartition`] is
//! that tile for any power-of-two size up to 32.
use super::{sync, thread, warp};

/// A 3D index, as `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

/// `thread_block`: all threads of this block.
#[derive(Clone, Copy)]
pub struct ThreadBlock {
    _private: (),
}

/// `this_thread_block()`.
#[inline(always)]
pub fn this_thread_block() -> ThreadBlock {
    ThreadBlock { _private: () }
}

impl ThreadBlock {
    /// `block.sync()`: [`syncthreads`](sync::syncthreads).
    ///
    /// # Safety
    /// As [`syncthreads`](sync::syncthreads): every thread of the block must reach it.
    #[inline(always)]
    pub unsafe fn sync(&self) {
        // SAFETY: forwarded to the caller.
        unsafe { sync::syncthreads() }
    }

    /// `block.thread_rank()`: the linear index of this thread in the block (x fastest).
    #[inline(always)]
    pub fn thread_rank(&self) -> u32 {
        (thread::thread_idx_z() * thread::block_dim_y() + thread::thread_idx_y())
            * thread::block_dim_x()
            + thread::thread_idx_x()
    }

    /// `block.size()`: threads in the block.
    #[inline(always)]
    pub fn size(&self) -> u32 {
        thread::block_dim_x() * thread::block_dim_y() * thread::block_dim_z()
    }

    /// `block.group_index()`: `blockIdx`.
    #[inline(always)]
    pub fn group_index(&self) -> Dim3 {
        Dim3 {
            x: thread::block_idx_x(),
            y: thread::block_idx_y(),
            z: thread::block_idx_z(),
        }
    }

    /// `block.thread_index()`: `threadIdx`.
    #[inline(always)]
    pub fn thread_index(&self) -> Dim3 {
        Dim3 {
            x: thread::thread_idx_x(),
            y: thread::thread_idx_y(),
            z: thread::thread_idx_z(),
        }
    }
}

/// `thread_block_tile<N>`: consecutive groups of `N` threads of a block (`N` a power of two,
/// at most [`WARP_SIZE`](warp::WARP_SIZE)); each tile lies inside one warp.
#[derive(Clone, Copy)]
pub struct TiledPartition<const N: u32> {
    /// The lanes of this tile that exist (the last tile of a partial warp may be short).
    mask: u32,
    rank: u32,
}

/// `tiled_partition<N>(block)`.
#[inline(always)]
pub fn tiled_partition<const N: u32>(block: &ThreadBlock) -> TiledPartition<N> {
    const {
        assert!(
            N.is_power_of_two() && N <= warp::WARP_SIZE,
            "tile size must be 1, 2, 4, 8, 16 or 32"
        )
    };
    let rank = block.thread_rank();
    let lane = rank % warp::WARP_SIZE;
    let tile_bits = if N == warp::WARP_SIZE {
        u32::MAX
    } else {
        ((1u32 << N) - 1) << (lane / N * N)
    };
    let warp_bits = crate::config::warp_mask_for_threads(block.size(), rank);
    TiledPartition {
        mask: tile_bits & warp_bits,
        rank,
    }
}

impl<const N: u32> TiledPartition<N> {
    /// The warp lanes of this tile (only those that exist).
    #[inline(always)]
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// `tile.sync()`: [`syncwarp`](sync::syncwarp) over the tile's lanes.
    ///
    /// # Safety
    /// Every thread of the tile must call it, at the same `sync` (as for `__syncwarp`, a call
    /// from only part of the tile is undefined behaviour).
    #[inline(always)]
    pub unsafe fn sync(&self) {
        // SAFETY: the mask names exactly the lanes of this tile, all of which exist; the caller
        // guarantees they all call it together.
        unsafe { sync::syncwarp(self.mask) }
    }

    /// `tile.thread_rank()`: `0..N`.
    #[inline(always)]
    pub fn thread_rank(&self) -> u32 {
        self.rank % N
    }

    /// `tile.size()`: `N`.
    #[inline(always)]
    pub const fn size(&self) -> u32 {
        N
    }

    /// `tile.meta_group_rank()`: the index of this tile within the block.
    #[inline(always)]
    pub fn meta_group_rank(&self) -> u32 {
        self.rank / N
    }

    /// `tile.shfl(var, src_rank)`: the value of `var` in tile rank `src_rank`.
    ///
    /// # Safety
    /// Every thread of the tile must call it; `src_rank` must name a thread that exists.
    #[inline(always)]
    pub unsafe fn shfl<T: warp::Shuffle>(&self, var: T, src_rank: u32) -> T {
        // SAFETY: forwarded to the caller.
        unsafe { warp::shfl_sync(self.mask, var, src_rank, N) }
    }

    /// `tile.shfl_down(var, delta)`.
    ///
    /// # Safety
    /// Every thread of the tile must call it; the source ranks must exist.
    #[inline(always)]
    pub unsafe fn shfl_down<T: warp::Shuffle>(&self, var: T, delta: u32) -> T {
        // SAFETY: forwarded to the caller.
        unsafe { warp::shfl_down_sync(self.mask, var, delta, N) }
    }

    /// `tile.shfl_up(var, delta)`.
    ///
    /// # Safety
    /// As [`shfl_down`](Self::shfl_down).
    #[inline(always)]
    pub unsafe fn shfl_up<T: warp::Shuffle>(&self, var: T, delta: u32) -> T {
        // SAFETY: forwarded to the caller.
        unsafe { warp::shfl_up_sync(self.mask, var, delta, N) }
    }

    /// `tile.shfl_xor(var, lane_mask)`.
    ///
    /// # Safety
    /// As [`shfl_down`](Self::shfl_down).
    #[inline(always)]
    pub unsafe fn shfl_xor<T: warp::Shuffle>(&self, var: T, lane_mask: u32) -> T {
        // SAFETY: forwarded to the caller.
        unsafe { warp::shfl_xor_sync(self.mask, var, lane_mask, N) }
    }

    /// `tile.ballot(predicate)`: bit `r` set when tile rank `r` passed `true`.
    ///
    /// # Safety
    /// Every thread of the tile must call it, at the same `ballot` (a vote that names a lane
    /// which does not take part is undefined behaviour, as for `__ballot_sync`).
    #[inline(always)]
    pub unsafe fn ballot(&self, predicate: bool) -> u32 {
        // SAFETY: the mask names exactly this tile's existing lanes; the caller guarantees they
        // all take part.
        let bits = unsafe { warp::ballot_sync(self.mask, predicate) };
        let first_lane = (self.rank % warp::WARP_SIZE) / N * N;
        let tile_bits = if N == warp::WARP_SIZE {
            u32::MAX
        } else {
            (1u32 << N) - 1
        };
        (bits >> first_lane) & tile_bits
    }

    /// `tile.any(predicate)`.
    ///
    /// # Safety
    /// As [`ballot`](Self::ballot).
    #[inline(always)]
    pub unsafe fn any(&self, predicate: bool) -> bool {
        // SAFETY: as `ballot`.
        unsafe { warp::any_sync(self.mask, predicate) }
    }

    /// `tile.all(predicate)`.
    ///
    /// # Safety
    /// As [`ballot`](Self::ballot).
    #[inline(always)]
    pub unsafe fn all(&self, predicate: bool) -> bool {
        // SAFETY: as `ballot`.
        unsafe { warp::all_sync(self.mask, predicate) }
    }
}
