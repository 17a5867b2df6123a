//! Thread block clusters (线程块簇) and distributed shared memory (分布式共享内存), sm_90 and newer.
//!
//! A cluster is a group of blocks that the hardware schedules at the same time on the SMs of
//! one GPC, so they can wait for each other and read and write each other's shared memory.
//! The memory hierarchy gains a level between a block's shared memory and global memory:
//! registers -> shared memory (one block) -> **distributed shared memory** (every block of the
//! cluster) -> global memory.
//!
//! | CUDA C++ (`cooperative_groups::this_cluster()`) | here |
//! |---|---|
//! | `cluster.block_rank()` (`%cluster_ctarank`) | [`block_rank`] |
//! | `cluster.num_blocks()` (`%cluster_nctarank`) | [`num_blocks`] |
//! | `clusterIdx.x` (`%clusterid.x`) | [`cluster_idx_x`] |
//! | `cluster.sync()` (`barrier.cluster.arrive` + `wait`) | [`cluster_sync`], or [`arrive`] and [`wait`] apart |
//! | `cluster.map_shared_rank(p, rank)` (`mapa`) | [`map_shared_rank`] (a [`RemoteShared`] address) |
//!
//! The cluster's size is chosen by the host at launch (`cuLaunchKernelEx` with the cluster
//! dimension; `#[kernel(cluster = N)]` declares it); every block of the cluster runs this code.
//!
//! Two rules make distributed shared memory safe to use:
//! - a block's shared memory exists only while the block runs: a block whose shared memory
//!   others read must not exit before they are done (end the kernel with [`cluster_sync`]);
//! - another block's writes are seen after a cluster barrier (`arrive.release` /
//!   `wait.acquire`), as a block's own writes after `__syncthreads`.
//!
//! Only built for sm_90 and newer (`cfg(target_feature = "sm_90")`): older GPUs have no
//! clusters, and a kernel that uses this module exists only in the sm_90 PTX.
#[cfg(target_arch = "nvptx64")]
pub use gpu::*;

#[cfg(not(target_arch = "nvptx64"))]
pub use cpu::*;

#[cfg(target_arch = "nvptx64")]
mod gpu {
    use crate::shared::shared_window_address;

    /// `cluster.block_rank()`: this block's rank in its cluster, `0 .. num_blocks()`.
    #[inline(always)]
    pub fn block_rank() -> u32 {
        let r: u32;
        // SAFETY: reads a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r,
            options(pure, nomem, nostack));
        }
        r
    }

    /// `cluster.num_blocks()`: the blocks of this cluster.
    #[inline(always)]
    pub fn num_blocks() -> u32 {
        let r: u32;
        // SAFETY: reads a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r,
            options(pure, nomem, nostack));
        }
        r
    }

    /// `clusterIdx.x`: this cluster's index in the grid of clusters along x.
    #[inline(always)]
    pub fn cluster_idx_x() -> u32 {
        let r: u32;
        // SAFETY: reads a special register.
        unsafe {
            core::arch::asm!("mov.u32 {r}, %clusterid.x;", r = out(reg32) r,
            options(pure, nomem, nostack));
        }
        r
    }

    /// `barrier.cluster.arrive.release`: this thread has arrived at the cluster barrier; its
    /// writes before it (to its own or another block's shared memory, and to global memory) are
    /// released to the threads that [`wait`].
    ///
    /// # Safety
    /// Every thread of every block of the cluster must arrive, then [`wait`], once per phase, from
    /// converged code (`.aligned`: all threads of a warp execute the same arrive).
    #[inline(always)]
    pub unsafe fn arrive() {
        // SAFETY: forwarded to the caller.
        unsafe { core::arch::asm!("barrier.cluster.arrive.release.aligned;", options(nostack)) }
    }

    /// `barrier.cluster.wait.acquire`: waits until every thread of the cluster has arrived; their
    /// released writes are visible after it.
    ///
    /// # Safety
    /// As [`arrive`]: after this thread's own arrive of the same phase.
    #[inline(always)]
    pub unsafe fn wait() {
        // SAFETY: forwarded to the caller.
        unsafe { core::arch::asm!("barrier.cluster.wait.acquire.aligned;", options(nostack)) }
    }

    /// `cluster.sync()`: the cluster's `__syncthreads` ([`arrive`] then [`wait`]).
    ///
    /// # Safety
    /// Every thread of every block of the cluster reaches it, from converged code.
    #[inline(always)]
    pub unsafe fn cluster_sync() {
        // SAFETY: forwarded to the caller.
        unsafe {
            arrive();
            wait();
        }
    }

    /// An address in the distributed shared memory of the cluster (the `.shared::cluster` window):
    /// a shared variable of block `rank`, as [`map_shared_rank`] returns it.
    #[derive(Clone, Copy)]
    pub struct RemoteShared<T> {
        address: u32,
        element: core::marker::PhantomData<*mut T>,
    }

    /// `cluster.map_shared_rank(p, rank)` (`mapa.shared::cluster`): the same shared variable as
    /// `p`, in block `rank` of the cluster.
    ///
    /// # Safety
    /// `p` points into this block's shared memory; `rank < num_blocks()`.
    #[inline(always)]
    pub unsafe fn map_shared_rank<T>(p: *mut T, rank: u32) -> RemoteShared<T> {
        let local = shared_window_address(p);
        let address: u32;
        // SAFETY: `mapa` only computes an address.
        unsafe {
            core::arch::asm!("mapa.shared::cluster.u32 {d}, {a}, {r};", d = out(reg32) address,
            a = in(reg32) local, r = in(reg32) rank, options(pure, nomem, nostack));
        }
        RemoteShared {
            address,
            element: core::marker::PhantomData,
        }
    }

    impl<T: Copy> RemoteShared<T> {
        /// The element `i` places further on.
        #[inline(always)]
        pub fn add(self, i: usize) -> Self {
            Self {
                address: self.address + (i * size_of::<T>()) as u32,
                element: core::marker::PhantomData,
            }
        }

        /// `ld.shared::cluster`: reads the element (4, 8 or 16 bytes, naturally aligned).
        ///
        /// # Safety
        /// The address is inside a shared variable of a block of the cluster that has not exited,
        /// holding an initialised `T`; its last write was ordered before this read by a cluster
        /// barrier (or by this thread).
        #[inline(always)]
        pub unsafe fn read(self) -> T {
            const { assert!(matches!(size_of::<T>(), 4 | 8 | 16)) };
            // SAFETY: forwarded to the caller; the sizes match the instruction's.
            unsafe {
                match size_of::<T>() {
                    4 => {
                        let v: u32;
                        core::arch::asm!("ld.shared::cluster.b32 {v}, [{a}];", v = out(reg32) v,
                        a = in(reg32) self.address, options(readonly, nostack));
                        core::mem::transmute_copy(&v)
                    }
                    8 => {
                        let v: u64;
                        core::arch::asm!("ld.shared::cluster.b64 {v}, [{a}];", v = out(reg64) v,
                        a = in(reg32) self.address, options(readonly, nostack));
                        core::mem::transmute_copy(&v)
                    }
                    _ => {
                        let (a, b, c, d): (u32, u32, u32, u32);
                        core::arch::asm!("ld.shared::cluster.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                        a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        p = in(reg32) self.address, options(readonly, nostack));
                        core::mem::transmute_copy(&[a, b, c, d])
                    }
                }
            }
        }

        /// `st.shared::cluster`: writes the element (4, 8 or 16 bytes, naturally aligned).
        ///
        /// # Safety
        /// The address is inside a shared variable of a block of the cluster that has not exited;
        /// no other thread reads or writes it until a cluster barrier orders them.
        #[inline(always)]
        pub unsafe fn write(self, value: T) {
            const { assert!(matches!(size_of::<T>(), 4 | 8 | 16)) };
            // SAFETY: forwarded to the caller; the sizes match the instruction's.
            unsafe {
                match size_of::<T>() {
                    4 => {
                        let v: u32 = core::mem::transmute_copy(&value);
                        core::arch::asm!("st.shared::cluster.b32 [{a}], {v};", v = in(reg32) v,
                        a = in(reg32) self.address, options(nostack));
                    }
                    8 => {
                        let v: u64 = core::mem::transmute_copy(&value);
                        core::arch::asm!("st.shared::cluster.b64 [{a}], {v};", v = in(reg64) v,
                        a = in(reg32) self.address, options(nostack));
                    }
                    _ => {
                        let [a, b, c, d]: [u32; 4] = core::mem::transmute_copy(&value);
                        core::arch::asm!("st.shared::cluster.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
                        a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, d = in(reg32) d,
                        p = in(reg32) self.address, options(nostack));
                    }
                }
            }
        }
    }
}

/// The same functions on the CPU device: the blocks of a cluster run together there, and a
/// remote address is a pointer into the other block's shared memory.
#[cfg(not(target_arch = "nvptx64"))]
mod cpu {
    use crate::cpu::current;

    /// `cluster.block_rank()`.
    pub fn block_rank() -> u32 {
        current().cluster_rank()
    }

    /// `cluster.num_blocks()`.
    pub fn num_blocks() -> u32 {
        current().cluster_blocks()
    }

    /// `clusterIdx.x`.
    pub fn cluster_idx_x() -> u32 {
        let ctx = current();
        ctx.block_idx()[0] / ctx.cluster_dim()[0]
    }

    /// `barrier.cluster.arrive.release`.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn arrive() {
        current().cluster_arrive();
    }

    /// `barrier.cluster.wait.acquire`.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn wait() {
        current().cluster_wait();
    }

    /// `cluster.sync()`.
    ///
    /// # Safety
    /// As on the GPU.
    pub unsafe fn cluster_sync() {
        // SAFETY: forwarded to the caller.
        unsafe {
            arrive();
            wait();
        }
    }

    /// An address in the distributed shared memory of the cluster.
    #[derive(Clone, Copy)]
    pub struct RemoteShared<T> {
        p: *mut T,
    }

    /// `cluster.map_shared_rank(p, rank)`.
    ///
    /// # Safety
    /// `p` points into this block's shared memory; `rank < num_blocks()`.
    pub unsafe fn map_shared_rank<T>(p: *mut T, rank: u32) -> RemoteShared<T> {
        RemoteShared {
            p: current().map_shared_rank(p.cast(), rank).cast(),
        }
    }

    impl<T: Copy> RemoteShared<T> {
        /// The element `i` places further on.
        pub fn add(self, i: usize) -> Self {
            Self {
                p: self.p.wrapping_add(i),
            }
        }

        /// `ld.shared::cluster`.
        ///
        /// # Safety
        /// As on the GPU.
        pub unsafe fn read(self) -> T {
            // SAFETY: forwarded to the caller.
            unsafe { self.p.read() }
        }

        /// `st.shared::cluster`.
        ///
        /// # Safety
        /// As on the GPU.
        pub unsafe fn write(self, value: T) {
            // SAFETY: forwarded to the caller.
            unsafe { self.p.write(value) }
        }
    }
}
