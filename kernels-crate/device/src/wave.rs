//! Waves (波): a warp of whatever width the device has. NVIDIA's GPUs run warps of 32 threads;
//! 沐曦 MXMACA's GPUs run waves of 64 (沐曦 MXMACA 教材第5章: `warpSize` is 64, `__syncwave`
//! takes a 64-bit mask). The functions here work for both widths: the masks are 64-bit, and the
//! width is read from the device ([`wave_size`]) instead of assumed.
//!
//! The [`warp`](crate::warp) functions (32-bit masks, `WARP_SIZE` lanes) are written for 32
//! lanes: on a device with 64-wide waves (the CPU device's `cpu:64`) a kernel that calls one is
//! refused, by name, at the call, as a 64-wide GPU refuses code built for 32 lanes.
//!
//! On an NVIDIA GPU a mask naming a lane past 31 names a lane that does not exist: the kernel
//! traps.
#[cfg(target_arch = "nvptx64")]
use crate::warp::WARP_SIZE;

/// `warpSize`: the lanes of this device's wave (32 on NVIDIA's GPUs, 64 on 沐曦's).
#[doc(alias = "warpSize")]
#[inline(always)]
pub fn wave_size() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    return WARP_SIZE;
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::current().warp_size()
}

/// This thread's rank in its block (`x + y * blockDim.x + z * blockDim.x * blockDim.y`): the
/// order in which the threads are cut into waves.
#[inline(always)]
pub fn thread_rank() -> u32 {
    use crate::thread::{block_dim_x, block_dim_y, thread_idx_x, thread_idx_y, thread_idx_z};
    thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z())
}

/// Which wave of its block this thread is in.
#[inline(always)]
pub fn wave_id() -> u32 {
    thread_rank() / wave_size()
}

/// This thread's lane in its wave, `0..wave_size()`.
#[inline(always)]
pub fn wave_lane() -> u32 {
    thread_rank() % wave_size()
}

/// The lanes of this thread's wave that exist in a block of `block_threads` threads: every
/// lane but in the last wave of a block whose size is not a multiple of the width.
#[inline(always)]
pub fn wave_mask_for_lanes(block_threads: u32) -> u64 {
    let ws = wave_size();
    let first = wave_id() * ws;
    let lanes = block_threads.saturating_sub(first).min(ws);
    if lanes >= 64 {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
}

/// `__syncwave(mask)` (沐曦; `__syncwarp` on NVIDIA): the lanes in `mask` wait for each other,
/// and their memory operations before it are visible to each other after it.
///
/// # Safety
/// As [`syncwarp`](crate::sync::syncwarp): every lane in `mask` executes it with the same
/// mask, the calling lane is in `mask`, and every lane in `mask` exists.
#[doc(alias = "__syncwave")]
#[inline(always)]
#[track_caller]
pub unsafe fn syncwave(mask: u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        if mask >> WARP_SIZE != 0 {
            // SAFETY: `trap` ends the kernel; the mask names lanes a warp does not have.
            unsafe { core::arch::nvptx::trap() }
        }
        // SAFETY: forwarded to the caller.
        unsafe { crate::sync::syncwarp(mask as u32) }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::current().warp(crate::cpu::WarpOp::Sync, mask, 0, 0, 0);
}

/// `__ballot_sync(mask, predicate)` over a wave: bit `l` set when lane `l` of `mask` passed
/// `true`.
///
/// # Safety
/// As [`syncwave`].
#[inline(always)]
#[track_caller]
pub unsafe fn ballot_wave(mask: u64, predicate: bool) -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        if mask >> WARP_SIZE != 0 {
            // SAFETY: as in `syncwave`.
            unsafe { core::arch::nvptx::trap() }
        }
        // SAFETY: forwarded to the caller.
        u64::from(unsafe { crate::warp::ballot_sync(mask as u32, predicate) })
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::current().warp(crate::cpu::WarpOp::Ballot, mask, u64::from(predicate), 0, 0)
}
