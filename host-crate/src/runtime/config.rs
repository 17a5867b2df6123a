//! A launch configuration (`<<<grid, block, shared>>>`) and the limits every supported GPU
//! shares, checked without a device.
use std::fmt;

/// Threads per block on every compute capability from 7.0.
pub const ARCH_MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Block dimensions on every compute capability from 7.0.
pub const ARCH_MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Grid dimensions on every compute capability from 7.0.
pub const ARCH_MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
/// The largest shared memory any supported GPU gives one block (227 KiB on sm_90 after
/// opting in).
pub const ARCH_MAX_SHARED_BYTES_PER_BLOCK: u32 = 227 * 1024;

/// Grid, block and dynamic shared memory of one launch (`<<<grid, block, shared>>>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1D launch.
    pub const fn linear(grid: u32, block: u32, dynamic_shared_bytes: u32) -> Self {
        Self {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dynamic_shared_bytes,
        }
    }

    /// One thread per element: `ceil(n / block)` blocks of `block` threads. `None` when that
    /// grid does not fit in `u32` or `block` is 0.
    pub fn per_element(n: usize, block: u32, dynamic_shared_bytes: u32) -> Option<Self> {
        let blocks = n.checked_add(block as usize)?.checked_sub(1)? / block.max(1) as usize;
        (block > 0).then_some(())?;
        Some(Self::linear(
            u32::try_from(blocks).ok()?,
            block,
            dynamic_shared_bytes,
        ))
    }

    /// Why this configuration cannot run on any GPU ferrocuda supports (compute capability 7.0
    /// and newer share these limits), or `None`. Checked without a device, so that the CLI
    /// rejects impossible launches even on a machine with no GPU.
    pub fn architectural_violation(&self) -> Option<String> {
        let threads = self.block_threads();
        if threads == 0 || self.grid_blocks() == 0 {
            return Some("grid and block dimensions must all be at least 1".into());
        }
        if threads > ARCH_MAX_THREADS_PER_BLOCK as u64 {
            return Some(format!(
                "{threads} threads per block; CUDA allows at most {ARCH_MAX_THREADS_PER_BLOCK}"
            ));
        }
        for (axis, (&b, &max)) in ["x", "y", "z"]
            .iter()
            .zip(self.block.iter().zip(&ARCH_MAX_BLOCK_DIM))
        {
            if b > max {
                return Some(format!("block {axis} = {b}; CUDA allows at most {max}"));
            }
        }
        for (axis, (&g, &max)) in ["x", "y", "z"]
            .iter()
            .zip(self.grid.iter().zip(&ARCH_MAX_GRID_DIM))
        {
            if g > max {
                return Some(format!("grid {axis} = {g}; CUDA allows at most {max}"));
            }
        }
        if self.dynamic_shared_bytes > ARCH_MAX_SHARED_BYTES_PER_BLOCK {
            return Some(format!(
                "{} B of dynamic shared memory; no supported GPU gives a block more than {ARCH_MAX_SHARED_BYTES_PER_BLOCK} B",
                self.dynamic_shared_bytes
            ));
        }
        None
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.iter().map(|&d| d as u64).product()
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }
}

impl fmt::Display for LaunchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims = |d: [u32; 3]| match d {
            [x, 1, 1] => x.to_string(),
            [x, y, 1] => format!("({x}, {y})"),
            [x, y, z] => format!("({x}, {y}, {z})"),
        };
        write!(
            f,
            "<<<grid {}, block {}, {} B dynamic shared>>>",
            dims(self.grid),
            dims(self.block),
            self.dynamic_shared_bytes
        )
    }
}
