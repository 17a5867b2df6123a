//! Occupancy (占有率): how many blocks of a kernel fit on one SM at once, which resource stops
//! more from fitting, and what that means for latency hiding (延迟隐藏).
//!
//! The calculation of the MetaX book, ch. 5 (沐曦 MXMACA 教材第5章): active blocks per SM
//! (the driver's `cuOccupancyMaxActiveBlocksPerMultiprocessor`) times warps per block, over the SM's maximum
//! warps, is the theoretical occupancy. [`theoretical`] does the same computation from the
//! device limits alone, so the two can be checked against each other.
use ferrocuda_kernels::entry::EntryInfo;

use ferrocuda::runtime::error::Result;
use ferrocuda::runtime::gpu::{DeviceProps, Gpu};

/// The resource that bounds the number of resident blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    /// The SM's maximum resident blocks.
    Blocks,
    /// The SM's maximum resident warps (threads).
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
}

impl Limiter {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Blocks => "blocks/SM",
            Self::Warps => "warps/SM",
            Self::Registers => "registers",
            Self::SharedMemory => "shared memory",
        }
    }
}

/// Register allocation unit per warp (registers), compute capability 7.0 and newer.
const REG_ALLOC_UNIT: u32 = 256;
/// Warps are given registers in groups of this many.
const WARP_ALLOC_GRANULARITY: u32 = 4;

/// Shared memory the driver reserves per block (1 KiB from compute capability 8.0).
fn reserved_shared_per_block(props: &DeviceProps) -> u32 {
    if props.compute_capability.0 >= 8 {
        1024
    } else {
        0
    }
}

/// Shared memory allocation granularity.
fn shared_alloc_unit(props: &DeviceProps) -> u32 {
    if props.compute_capability.0 >= 8 {
        128
    } else {
        256
    }
}

/// Resident blocks per SM of a kernel using `registers` per thread and `shared_bytes`
/// (static + dynamic) per block, launched with `block` threads, computed from the device
/// limits alone (the CUDA occupancy calculator's rules); and what limits it.
pub fn theoretical(
    props: &DeviceProps,
    registers: u32,
    shared_bytes: u32,
    block: u32,
) -> (u32, Limiter) {
    let warp = props.warp_size;
    let warps_per_block = block.div_ceil(warp).max(1);
    let max_warps = props.max_threads_per_sm / warp;
    let by_blocks = props.max_blocks_per_sm;
    let by_warps = max_warps / warps_per_block;
    let by_regs = if registers == 0 {
        u32::MAX
    } else {
        let regs_per_warp = (registers * warp).div_ceil(REG_ALLOC_UNIT) * REG_ALLOC_UNIT;
        if regs_per_warp * warps_per_block > props.regs_per_block {
            0
        } else {
            let warps =
                props.regs_per_sm / regs_per_warp / WARP_ALLOC_GRANULARITY * WARP_ALLOC_GRANULARITY;
            warps / warps_per_block
        }
    };
    let by_shared = if shared_bytes == 0 {
        u32::MAX
    } else {
        let unit = shared_alloc_unit(props);
        let per_block = (shared_bytes + reserved_shared_per_block(props)).div_ceil(unit) * unit;
        props.shared_mem_per_sm / per_block
    };
    [
        (by_blocks, Limiter::Blocks),
        (by_warps, Limiter::Warps),
        (by_regs, Limiter::Registers),
        (by_shared, Limiter::SharedMemory),
    ]
    .into_iter()
    .min_by_key(|&(n, _)| n)
    .expect("four limits")
}

/// One kernel at one block size.
#[derive(Clone, Debug, PartialEq)]
pub struct Occupancy {
    /// PTX symbol.
    pub kernel: String,
    /// Threads per block.
    pub block: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory per block the library launches it with, bytes.
    pub dynamic_shared: u32,
    /// Resident blocks per SM, from the driver.
    pub active_blocks: u32,
    /// Resident blocks per SM, from [`theoretical`].
    pub computed_blocks: u32,
    /// What limits them.
    pub limiter: Limiter,
    /// Active warps / maximum warps per SM.
    pub occupancy: f64,
    /// The driver's suggested block size (`cuOccupancyMaxPotentialBlockSize`, with the
    /// dynamic shared memory the kernel declares for each block size it tries).
    pub suggested_block: u32,
    /// For a kernel launched in thread block clusters: blocks per cluster, and the clusters
    /// resident on the whole GPU at once (`cuOccupancyMaxActiveClusters`).
    pub clusters: Option<(u32, u32)>,
}

/// The occupancy of kernel `entry` at `block` threads, with the dynamic shared memory its
/// declaration asks for at that block.
pub fn occupancy(gpu: &Gpu, entry: &'static EntryInfo, block: u32) -> Result<Occupancy> {
    let kernel = crate::kernel_info(gpu, entry)?;
    let a = kernel.attributes();
    let props = gpu.props();
    let dynamic_shared = entry.dynamic_shared_bytes(block);
    let active_blocks = kernel.max_active_blocks_per_sm(block, dynamic_shared)?;
    let (computed_blocks, limiter) = theoretical(
        props,
        a.registers,
        a.static_shared_bytes + dynamic_shared,
        block,
    );
    let max_warps = props.max_threads_per_sm / props.warp_size;
    let occupancy = (active_blocks * block.div_ceil(props.warp_size)) as f64 / max_warps as f64;
    // The suggestion tries every block size, each with the dynamic shared memory the kernel
    // declares for it (a stencil's tile grows with its block).
    let (_, suggested_block) = kernel.suggested_block_size_declared()?;
    let clusters = match kernel.cluster_blocks() {
        0 => None,
        c => Some((c, kernel.max_active_clusters(block, dynamic_shared)?)),
    };
    Ok(Occupancy {
        kernel: entry.symbol.to_string(),
        block,
        registers: a.registers,
        static_shared: a.static_shared_bytes,
        dynamic_shared,
        active_blocks,
        computed_blocks,
        limiter,
        occupancy,
        suggested_block,
        clusters,
    })
}
