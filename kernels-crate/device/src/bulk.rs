//! Bulk copies (Hopper's TMA, 张量内存加速器, in its one-dimensional form) and the
//! transaction barriers they complete on, sm_90 and PTX 8.0 and newer.
//!
//! A kernel of the notes moves data from global to shared memory one load per thread: every
//! thread spends an instruction and a register per element, and keeps loads in flight only as
//! far as its registers reach. A bulk copy is one instruction, issued by one thread, for a
//! whole tile (up to the shared memory's size, in multiples of 16 bytes): the copy engine of
//! the SM moves it while the threads do something else, and tells a barrier in shared memory
//! when the bytes have landed.
//!
//! | CUDA C++ (`cuda::ptx` / `cuda::barrier`) | here |
//! |---|---|
//! | `mbarrier.init` | [`Mbarrier::init`] |
//! | `mbarrier.arrive.expect_tx` | [`Mbarrier::arrive_expect_tx`] |
//! | `mbarrier.try_wait.parity` | [`Mbarrier::wait_parity`] |
//! | `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes` | [`load`] |
//! | `cp.async.bulk.global.shared::cta.bulk_group` + `commit_group` | [`store`], [`commit_group`] |
//! | `cp.async.bulk.wait_group.read N` | [`wait_group_read`] |
//! | `fence.proxy.async.shared::cta` | [`fence_proxy_async`] |
//!
//! How a tile travels: one thread announces the bytes a phase of the barrier will receive
//! (`arrive_expect_tx`) and issues the copy; every thread that needs the tile waits for the
//! phase to complete (`wait_parity`, the phase's parity bit), after which the bytes are
//! visible to it. A barrier counts its phases, so a stage buffer reused for tile after tile
//! waits for parity 0, 1, 0, 1, ...
//!
//! Two proxies: bulk copies run in the *async proxy*, ordinary loads and stores in the
//! *generic proxy*. Shared memory written by threads and then read by a bulk store needs
//! [`fence_proxy_async`] between the two (after the barrier that ordered the writes).
#[cfg(target_arch = "nvptx64")]
pub use gpu::*;

#[cfg(not(target_arch = "nvptx64"))]
pub use cpu::*;

#[cfg(target_arch = "nvptx64")]
mod gpu {
    use crate::shared::shared_window_address;

    /// A transaction barrier (`mbarrier`, 8 bytes, 8-byte aligned) in shared memory.
    #[derive(Clone, Copy)]
    pub struct Mbarrier {
        address: u32,
    }

    impl Mbarrier {
        /// The barrier at `p`, a `u64` of this block's shared memory.
        #[inline(always)]
        pub fn at(p: *mut u64) -> Self {
            Self {
                address: shared_window_address(p),
            }
        }

        /// `mbarrier.init`: a barrier whose phases complete after `count` arrivals (and the bytes
        /// they announce). Follow it with [`fence_mbarrier_init`] and a block barrier before any
        /// other thread or a bulk copy uses it.
        ///
        /// # Safety
        /// One thread initialises it, while no one uses it.
        #[inline(always)]
        pub unsafe fn init(self, count: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                core::arch::asm!("mbarrier.init.shared::cta.b64 [{a}], {c};", a = in(reg32) self.address,
                c = in(reg32) count, options(nostack));
            }
        }

        /// `mbarrier.arrive.expect_tx`: one arrival, announcing `bytes` that bulk copies will
        /// deliver to this phase (0 for an arrival without a copy).
        ///
        /// # Safety
        /// The barrier is initialised; the phase expects another arrival.
        #[inline(always)]
        pub unsafe fn arrive_expect_tx(self, bytes: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                core::arch::asm!(
                "{{ .reg .b64 state; mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 state, [{a}], {b}; }}",
                a = in(reg32) self.address, b = in(reg32) bytes, options(nostack));
            }
        }

        /// `mbarrier.try_wait.parity` until the phase with parity `parity` has completed. The
        /// bytes its bulk copies delivered are visible to this thread afterwards.
        ///
        /// # Safety
        /// The barrier is initialised; the phase will complete (its arrivals and bytes come).
        #[inline(always)]
        pub unsafe fn wait_parity(self, parity: u32) {
            loop {
                let done: u32;
                // SAFETY: forwarded to the caller. `try_wait` returns after a time the hardware
                // chooses, done or not.
                unsafe {
                    core::arch::asm!(
                    "{{ .reg .pred p;",
                    "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [{a}], {q};",
                    "selp.u32 {d}, 1, 0, p; }}",
                    a = in(reg32) self.address, q = in(reg32) parity, d = out(reg32) done,
                    options(nostack));
                }
                if done != 0 {
                    break;
                }
            }
        }
    }

    /// `fence.mbarrier_init.release.cluster`: makes barrier initialisations visible to the async
    /// proxy (the bulk copies) and, after a barrier, to the other threads.
    ///
    /// # Safety
    /// None beyond executing on sm_90.
    #[inline(always)]
    pub unsafe fn fence_mbarrier_init() {
        // SAFETY: a fence.
        unsafe { core::arch::asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
    }

    /// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy accesses of shared
    /// memory before its later async-proxy ones (a bulk store of what threads wrote, a bulk load
    /// over what threads read).
    ///
    /// # Safety
    /// None beyond executing on sm_90.
    #[inline(always)]
    pub unsafe fn fence_proxy_async() {
        // SAFETY: a fence.
        unsafe { core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack)) }
    }

    /// Bulk load: `bytes` from global `src` into shared `dst`, completing on `barrier`'s current
    /// phase (which must announce them with [`Mbarrier::arrive_expect_tx`]).
    ///
    /// # Safety
    /// `src` and `dst` are 16-byte aligned, `bytes` a multiple of 16; `src .. src + bytes` is
    /// readable global memory and `dst .. dst + bytes` this block's shared memory, neither touched
    /// by anyone else until the phase completes.
    #[inline(always)]
    pub unsafe fn load<T>(dst: *mut T, src: *const T, bytes: u32, barrier: Mbarrier) {
        let d = shared_window_address(dst);
        // SAFETY: forwarded to the caller.
        unsafe {
            core::arch::asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
            d = in(reg32) d, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) barrier.address,
            options(nostack));
        }
    }

    /// Bulk store: `bytes` from shared `src` to global `dst`, in the current bulk group (close it
    /// with [`commit_group`]).
    ///
    /// # Safety
    /// `src` and `dst` are 16-byte aligned, `bytes` a multiple of 16; `dst .. dst + bytes` is
    /// writable global memory that nothing else touches until the kernel ends; the shared bytes
    /// are not written again until [`wait_group_read`] says the store has read them.
    #[inline(always)]
    pub unsafe fn store<T>(dst: *mut T, src: *const T, bytes: u32) {
        let s = shared_window_address(src.cast_mut());
        // SAFETY: forwarded to the caller.
        unsafe {
            core::arch::asm!(
            "cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
            d = in(reg64) dst, s = in(reg32) s, n = in(reg32) bytes, options(nostack));
        }
    }

    /// `cp.async.bulk.commit_group`: closes the bulk stores issued since the last commit into one
    /// group.
    ///
    /// # Safety
    /// None beyond executing on sm_90.
    #[inline(always)]
    pub unsafe fn commit_group() {
        // SAFETY: bookkeeping of this thread's bulk stores.
        unsafe { core::arch::asm!("cp.async.bulk.commit_group;", options(nostack)) }
    }

    /// `cp.async.bulk.wait_group.read PENDING`: waits until at most `PENDING` of this thread's
    /// committed groups have not yet read their shared source (their shared memory may then be
    /// written again).
    ///
    /// # Safety
    /// None beyond executing on sm_90.
    #[inline(always)]
    pub unsafe fn wait_group_read<const PENDING: u32>() {
        // SAFETY: waits on this thread's bulk stores.
        unsafe {
            core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const PENDING, options(nostack))
        }
    }

    /// `cp.async.bulk.wait_group 0`: waits until every committed bulk store of this thread has
    /// completed (its writes are done, as seen by this thread).
    ///
    /// # Safety
    /// None beyond executing on sm_90.
    #[inline(always)]
    pub unsafe fn wait_all() {
        // SAFETY: waits on this thread's bulk stores.
        unsafe { core::arch::asm!("cp.async.bulk.wait_group 0;", options(nostack)) }
    }
}

/// Bulk copies on the CPU device: a copy is done when it is issued, and delivers its bytes to
/// its barrier at once; a wait lets the other threads run until its phase has completed.
#[cfg(not(target_arch = "nvptx64"))]
mod cpu {
    use crate::cpu::current;
    use crate::cpu::intrinsics::interleave;

    /// A transaction barrier (`mbarrier`) in shared memory, named by its address.
    #[derive(Clone, Copy)]
    pub struct Mbarrier {
        address: usize,
    }

    impl Mbarrier {
        /// The barrier at `p`.
        pub fn at(p: *mut u64) -> Self {
            Self {
                address: p as usize,
            }
        }

        /// `mbarrier.init`.
        ///
        /// # Safety
        /// As on the GPU.
        pub unsafe fn init(self, count: u32) {
            current().mbarrier_init(self.address, count);
        }

        /// `mbarrier.arrive.expect_tx`.
        ///
        /// # Safety
        /// As on the GPU.
        pub unsafe fn arrive_expect_tx(self, bytes: u32) {
            current().mbarrier_update(self.address, 1, i64::from(bytes));
        }

        /// `mbarrier.try_wait.parity` until the phase with parity `parity` has completed.
        ///
        /// # Safety
        /// As on the GPU.
        pub unsafe fn wait_parity(self, parity: u32) {
            while current().mbarrier_phase(self.address) & 1 == parity {
                interleave();
            }
        }
    }

    /// `fence.mbarrier_init`: nothing to order on the CPU device.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn fence_mbarrier_init() {}

    /// `fence.proxy.async`: nothing to order on the CPU device.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn fence_proxy_async() {}

    /// Bulk load, done at once; its bytes complete on `barrier`.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn load<T>(dst: *mut T, src: *const T, bytes: u32, barrier: Mbarrier) {
        // SAFETY: the caller's contract: both ranges valid, not overlapping. The copy is the
        // device's, not an access of the issuing thread.
        crate::cpu::racecheck::unwatched(|| unsafe {
            core::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), bytes as usize)
        });
        current().mbarrier_update(barrier.address, 0, -i64::from(bytes));
    }

    /// Bulk store, done at once.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn store<T>(dst: *mut T, src: *const T, bytes: u32) {
        // SAFETY: the caller's contract: both ranges valid, not overlapping. The copy is the
        // device's, not an access of the issuing thread.
        crate::cpu::racecheck::unwatched(|| unsafe {
            core::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), bytes as usize)
        });
    }

    /// `cp.async.bulk.commit_group`: the stores are already done.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn commit_group() {}

    /// `cp.async.bulk.wait_group.read`: the stores are already done.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn wait_group_read<const PENDING: u32>() {}

    /// `cp.async.bulk.wait_group 0`: the stores are already done.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn wait_all() {}
}
