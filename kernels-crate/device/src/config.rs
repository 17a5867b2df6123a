//! Constants shared by the device layer and the host (defined once, compiled for both).

/// Threads per warp the PTX is built for. The host refuses a device that reports another
/// warp size (沐曦 MXMACA 教材第5章 describes a GPU with 64-wide waves).
pub const WARP_SIZE: u32 = 32;

/// The mask of the lanes that exist in the warp of thread `thread_rank` of a block of
/// `block_threads` threads: all 32, except in the last warp of a block whose size is not a
/// multiple of 32.
#[inline(always)]
pub const fn warp_mask_for_threads(block_threads: u32, thread_rank: u32) -> u32 {
    let warp_start = thread_rank / WARP_SIZE * WARP_SIZE;
    let lanes = block_threads - warp_start;
    if lanes >= WARP_SIZE {
        u32::MAX
    } else {
        (1u32 << lanes) - 1
    }
}
