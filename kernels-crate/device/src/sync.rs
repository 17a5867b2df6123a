//! Barriers and memory fences.
//!
//! `__syncthreads()` ([`syncthreads`]) makes every thread of the block wait until all of them
//! reached it, and makes their shared- and global-memory writes before it visible to the block
//! after it. The 《CUDA C/C++ Basics》学习笔记 show the race it prevents: without it,
//! thread 15 of the stencil may read a shared slot before thread 0 has written it.
//!
//! `__syncwarp(mask)` ([`syncwarp`]) is the same for the lanes of one warp named in `mask`.
//! Since Volta, the lanes of a warp are scheduled independently (独立线程调度): code that
//! relied on a warp executing in lock-step (the book's `volatile` last-warp unrolling) must
//! now say where lanes meet.
//!
//! Fences order one thread's memory operations as seen by others at block, GPU or system scope
//! without waiting for anyone.

#[cfg(not(target_arch = "nvptx64"))]
use crate::cpu::intrinsics::{bar_warp_sync, barrier0_and, barrier0_or, barrier0_popc, nvptx};
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "llvm.nvvm.barrier0.popc"]
    fn barrier0_popc(predicate: i32) -> i32;
    #[link_name = "llvm.nvvm.barrier0.and"]
    fn barrier0_and(predicate: i32) -> i32;
    #[link_name = "llvm.nvvm.barrier0.or"]
    fn barrier0_or(predicate: i32) -> i32;
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    fn bar_warp_sync(mask: u32);
}

/// `__syncthreads()`: block-wide barrier.
///
/// # Safety
/// Every thread of the block must reach the same barrier (it must not sit in a branch that
/// only some threads take, e.g. after an early `return`), otherwise the behaviour is undefined
/// (a hang or silent corruption).
#[doc(alias = "__syncthreads")]
#[inline(always)]
pub unsafe fn syncthreads() {
    // SAFETY: forwarded to the caller.
    unsafe { nvptx::_syncthreads() }
}

/// `__syncthreads_count(predicate)`: barrier that returns how many threads passed `true`.
///
/// # Safety
/// As [`syncthreads`].
#[doc(alias = "__syncthreads_count")]
#[inline(always)]
pub unsafe fn syncthreads_count(predicate: bool) -> u32 {
    // SAFETY: forwarded to the caller.
    unsafe { barrier0_popc(predicate as i32) as u32 }
}

/// `__syncthreads_and(predicate)`: barrier that returns whether every thread passed `true`.
///
/// # Safety
/// As [`syncthreads`].
#[doc(alias = "__syncthreads_and")]
#[inline(always)]
pub unsafe fn syncthreads_and(predicate: bool) -> bool {
    // SAFETY: forwarded to the caller.
    unsafe { barrier0_and(predicate as i32) != 0 }
}

/// `__syncthreads_or(predicate)`: barrier that returns whether any thread passed `true`.
///
/// # Safety
/// As [`syncthreads`].
#[doc(alias = "__syncthreads_or")]
#[inline(always)]
pub unsafe fn syncthreads_or(predicate: bool) -> bool {
    // SAFETY: forwarded to the caller.
    unsafe { barrier0_or(predicate as i32) != 0 }
}

/// `__syncwarp(mask)`: the lanes named in `mask` wait for each other, and their memory
/// operations before it are visible to each other after it.
///
/// # Safety
/// Every lane in `mask` must execute a `syncwarp` with the same mask, the calling lane must be
/// in `mask`, and every lane in `mask` must exist (a mask of 32 lanes in a block of 16 threads
/// is undefined).
#[doc(alias = "__syncwarp")]
#[inline(always)]
pub unsafe fn syncwarp(mask: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { bar_warp_sync(mask) }
}

/// `__threadfence()`: orders this thread's memory operations as seen by the whole GPU.
#[doc(alias = "__threadfence")]
#[inline(always)]
pub fn threadfence() {
    // SAFETY: a fence has no preconditions.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!("fence.acq_rel.gpu;")
    }
    #[cfg(not(target_arch = "nvptx64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// `__threadfence_system()`: orders this thread's memory operations as seen by the host and
/// other devices too.
#[doc(alias = "__threadfence_system")]
#[inline(always)]
pub fn threadfence_system() {
    // SAFETY: a fence has no preconditions.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!("fence.acq_rel.sys;")
    }
    #[cfg(not(target_arch = "nvptx64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
