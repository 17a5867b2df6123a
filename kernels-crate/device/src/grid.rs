//! Grid-wide synchronisation (跨整个线程网格的全局同步, 樊哲勇第10章 and
//! 沐曦 MXMACA 教材第5章): a `GridGroup` whose `sync` waits until every thread of every block
//! of the grid has reached it, as `cooperative_groups::this_grid().sync()` does.
//!
//! A grid barrier only works if every block of the grid is resident on the GPU at once;
//! otherwise the blocks already waiting keep the others from ever starting. CUDA enforces that
//! with a *cooperative launch* (`cuLaunchCooperativeKernel`), which fails rather than run a
//! grid that cannot be co-resident. Here the barrier's state is a kernel parameter of type
//! [`GridBarrier`]. Only the host's cooperative launch (`Kernel::launch_cooperative` in
//! `ferrocuda`) makes one: its constructor is `unsafe`, and an ordinary launch of a kernel that
//! takes a `GridBarrier` is refused.
//!
//! The barrier is CUDA's own algorithm: one `u32` in global memory. Block 0 adds
//! `0x8000_0000 - (blocks - 1)`, every other block adds 1, so each barrier adds `0x8000_0000`
//! in all: the top bit flips once per barrier and the counter never needs a reset. A block
//! waits until the top bit differs from the value it saw when it arrived.
//!
//! CUDA 12 removed the multi-device groups (`multi_grid_group`, `this_multi_grid()`), which the
//! notes still mention ("one or more GPUs"): a grid group spans one GPU.

/// The state of a grid barrier, passed to a kernel by value: the device address of one `u32`
/// that starts at 0 and that no other running kernel uses.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridBarrier {
    arrived: u64,
}

impl GridBarrier {
    /// A barrier over the `u32` at device address `arrived`.
    ///
    /// # Safety
    /// `arrived` is the device address of a `u32` that is 0, or was left by complete barriers
    /// (whose additions sum to multiples of `0x8000_0000`), and that no other kernel uses while
    /// this one runs; the kernel it is passed to runs under a cooperative launch, with every
    /// block resident at once.
    pub const unsafe fn from_raw(arrived: u64) -> Self {
        Self { arrived }
    }

    /// The device address of the counter.
    pub const fn as_raw(self) -> u64 {
        self.arrived
    }
}

// SAFETY: `#[repr(transparent)]` over a `u64`, the same bytes on both sides.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl crate::entry::ByValue for GridBarrier {}

pub use device::*;

mod device {
    use super::GridBarrier;
    use crate::atomic::atomic_add;
    use crate::sync::{syncthreads, threadfence};
    use crate::thread::{
        block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, grid_dim_x,
        grid_dim_y, grid_dim_z, thread_idx_x, thread_idx_y, thread_idx_z,
    };

    /// `grid_group`: every thread of the grid.
    #[derive(Clone, Copy)]
    pub struct GridGroup {
        barrier: GridBarrier,
    }

    /// `this_grid()`, over the barrier the cooperative launch passed.
    #[inline(always)]
    pub fn this_grid(barrier: GridBarrier) -> GridGroup {
        GridGroup { barrier }
    }

    impl GridGroup {
        /// `grid.sync()`: returns once every thread of the grid has called it; memory
        /// written before it by any thread of the grid is visible after it to every thread.
        ///
        /// # Safety
        /// Every thread of the grid must reach it (the same number of times); the kernel runs
        /// under the cooperative launch that made its [`GridBarrier`].
        #[inline(always)]
        pub unsafe fn sync(&self) {
            // SAFETY: forwarded to the caller: every thread reaches the barriers, and the
            // counter is the launch's own.
            unsafe {
                syncthreads();
                if thread_idx_x() == 0 && thread_idx_y() == 0 && thread_idx_z() == 0 {
                    let arrived = self.barrier.as_raw() as *mut u32;
                    let blocks = grid_dim_x() * grid_dim_y() * grid_dim_z();
                    let first = block_idx_x() == 0 && block_idx_y() == 0 && block_idx_z() == 0;
                    let add = if first { 0x8000_0000 - (blocks - 1) } else { 1 };
                    // Release this block's writes before it counts as arrived.
                    threadfence();
                    let old = atomic_add(arrived, add);
                    while (old ^ core::ptr::read_volatile(arrived)) & 0x8000_0000 == 0 {
                        // On the CPU device the other blocks run while this one spins.
                        #[cfg(not(target_arch = "nvptx64"))]
                        crate::cpu::intrinsics::interleave();
                    }
                    // Acquire the other blocks' writes.
                    threadfence();
                }
                syncthreads();
            }
        }

        /// Blocks in the grid.
        #[inline(always)]
        pub fn num_blocks(&self) -> u32 {
            grid_dim_x() * grid_dim_y() * grid_dim_z()
        }

        /// Threads in the grid.
        #[inline(always)]
        pub fn num_threads(&self) -> u64 {
            self.num_blocks() as u64 * (block_dim_x() * block_dim_y() * block_dim_z()) as u64
        }
    }
}
