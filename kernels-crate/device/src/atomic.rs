//! Atomic read-modify-write on global or shared memory (`atomicAdd`, `atomicMin`, ...).
//!
//! Each function returns the old value. The orderings are relaxed: an atomic is indivisible but
//! orders nothing else; pair it with a [`fence`](crate::sync) where other memory must be
//! seen (the atomic-finish reductions publish their partial with `threadfence` first). The one
//! exception, [`atomic_add_acq_rel`], is a release and an acquire in one instruction: the
//! counter of a "last block" election, without the two fences around it.
//!
//! Float `atomic_add` makes a sum depend on the order in which blocks arrive: the result is
//! not reproducible bit for bit. The library's deterministic paths never use it.
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

#[cfg(not(target_arch = "nvptx64"))]
use crate::cpu::intrinsics::{atomic_load_add_f32, atomic_load_add_f64};

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "llvm.nvvm.atomic.load.add.f32.p0"]
    fn atomic_load_add_f32(address: *mut f32, val: f32) -> f32;
    #[link_name = "llvm.nvvm.atomic.load.add.f64.p0"]
    fn atomic_load_add_f64(address: *mut f64, val: f64) -> f64;
}

/// Types with a hardware `atom.add`.
pub trait AtomicAdd: Copy {
    /// See [`atomic_add`].
    ///
    /// # Safety
    /// As [`atomic_add`].
    unsafe fn atomic_add(address: *mut Self, val: Self) -> Self;
}

/// Types with hardware `atom.min`, `atom.max` and `atom.cas`.
pub trait AtomicOrd: Copy {
    /// See [`atomic_min`].
    ///
    /// # Safety
    /// As [`atomic_add`].
    unsafe fn atomic_min(address: *mut Self, val: Self) -> Self;
    /// See [`atomic_max`].
    ///
    /// # Safety
    /// As [`atomic_add`].
    unsafe fn atomic_max(address: *mut Self, val: Self) -> Self;
    /// See [`atomic_cas`].
    ///
    /// # Safety
    /// As [`atomic_add`].
    unsafe fn atomic_cas(address: *mut Self, compare: Self, val: Self) -> Self;
}

/// `old`, after letting other threads run on the CPU device (an atomic is where the threads of
/// a kernel interleave); nothing on the GPU.
#[inline(always)]
fn interleaved<T>(old: T) -> T {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::intrinsics::interleave();
    old
}

macro_rules! atomic_int {
    ($($t:ty => $atomic:ty),*) => {$(
        impl AtomicAdd for $t {
            #[inline(always)]
            unsafe fn atomic_add(address: *mut Self, val: Self) -> Self {
                // SAFETY: forwarded to the caller.
                interleaved(unsafe { <$atomic>::from_ptr(address).fetch_add(val, Relaxed) })
            }
        }
        impl AtomicOrd for $t {
            #[inline(always)]
            unsafe fn atomic_min(address: *mut Self, val: Self) -> Self {
                // SAFETY: forwarded to the caller.
                interleaved(unsafe { <$atomic>::from_ptr(address).fetch_min(val, Relaxed) })
            }
            #[inline(always)]
            unsafe fn atomic_max(address: *mut Self, val: Self) -> Self {
                // SAFETY: forwarded to the caller.
                interleaved(unsafe { <$atomic>::from_ptr(address).fetch_max(val, Relaxed) })
            }
            #[inline(always)]
            unsafe fn atomic_cas(address: *mut Self, compare: Self, val: Self) -> Self {
                // SAFETY: forwarded to the caller.
                interleaved(match unsafe { <$atomic>::from_ptr(address) }
                    .compare_exchange(compare, val, Relaxed, Relaxed)
                {
                    Ok(old) | Err(old) => old,
                })
            }
        }
    )*};
}
atomic_int!(i32 => AtomicI32, u32 => AtomicU32, i64 => AtomicI64, u64 => AtomicU64);

impl AtomicAdd for f32 {
    #[inline(always)]
    unsafe fn atomic_add(address: *mut Self, val: Self) -> Self {
        // SAFETY: forwarded to the caller.
        unsafe { atomic_load_add_f32(address, val) }
    }
}

impl AtomicAdd for f64 {
    #[inline(always)]
    unsafe fn atomic_add(address: *mut Self, val: Self) -> Self {
        // SAFETY: forwarded to the caller.
        unsafe { atomic_load_add_f64(address, val) }
    }
}

/// `atomicAdd(address, val)`: `*address += val` as one indivisible step; returns the old value.
/// Integers wrap.
///
/// # Safety
/// `address` must be valid, aligned, and point to global or shared memory that every access
/// during the kernel reaches only atomically or after a barrier/fence.
#[doc(alias = "atomicAdd")]
#[inline(always)]
pub unsafe fn atomic_add<T: AtomicAdd>(address: *mut T, val: T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { T::atomic_add(address, val) }
}

/// `atomicMin(address, val)`; returns the old value.
///
/// # Safety
/// As [`atomic_add`].
#[doc(alias = "atomicMin")]
#[inline(always)]
pub unsafe fn atomic_min<T: AtomicOrd>(address: *mut T, val: T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { T::atomic_min(address, val) }
}

/// `atomicMax(address, val)`; returns the old value.
///
/// # Safety
/// As [`atomic_add`].
#[doc(alias = "atomicMax")]
#[inline(always)]
pub unsafe fn atomic_max<T: AtomicOrd>(address: *mut T, val: T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { T::atomic_max(address, val) }
}

/// `atomicCAS(address, compare, val)`: stores `val` if `*address == compare`; returns the old
/// value either way.
///
/// # Safety
/// As [`atomic_add`].
#[doc(alias = "atomicCAS")]
#[inline(always)]
pub unsafe fn atomic_cas<T: AtomicOrd>(address: *mut T, compare: T, val: T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { T::atomic_cas(address, compare, val) }
}

/// `cuda::atomic_ref<unsigned, cuda::thread_scope_device>(*address).fetch_add(val,
/// cuda::memory_order_acq_rel)`: `atomicAdd` that is also a release and an acquire at GPU scope
/// (`atom.acq_rel.gpu.add.u32`); returns the old value.
///
/// Release: this thread's memory operations before it are seen, by any thread whose acquire
/// reads this value or a later one, before their own later operations. Acquire: the same for
/// the releases this one reads. It replaces `threadfence(); atomicAdd(...)` on one side and
/// the reader's `threadfence()` on the other, and measured 0.25-0.5 us faster per launch than
/// that pair for the fast reduction's ticket (H200, `docs/tuning-notes.md`).
/// Threads of the same block that did not make the call see what it acquired after a
/// `syncthreads` (the barrier orders them after it).
///
/// Written in asm rather than with `AtomicU32::fetch_add(_, AcqRel)` like the relaxed atomics
/// above, so that the semantics and the scope in the PTX are the ones measured and reasoned
/// about (`.acq_rel.gpu`), not whatever LLVM's lowering of the ordering picks.
///
/// # Safety
/// As [`atomic_add`]; sm_70 or newer (every architecture the crate builds).
#[doc(alias = "fetch_add")]
#[inline(always)]
pub unsafe fn atomic_add_acq_rel(address: *mut u32, val: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let old: u32;
        // SAFETY: forwarded to the caller; a generic address of global or shared memory.
        unsafe {
            core::arch::asm!(
                "atom.acq_rel.gpu.add.u32 {old}, [{address}], {val};",
                old = out(reg32) old,
                address = in(reg64) address,
                val = in(reg32) val,
            );
        }
        old
    }
    // SAFETY: forwarded to the caller.
    #[cfg(not(target_arch = "nvptx64"))]
    interleaved(unsafe {
        AtomicU32::from_ptr(address).fetch_add(val, core::sync::atomic::Ordering::AcqRel)
    })
}
