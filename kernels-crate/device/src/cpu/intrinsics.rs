//! The GPU's special registers and instructions, on the CPU device: the functions the device
//! layer calls where the GPU build calls `core::arch::nvptx` or an `llvm.nvvm` intrinsic, with
//! the same names and signatures, so that each module of the device layer is written once.
use super::{WarpOp, current};

/// `core::arch::nvptx`'s special registers and barrier, on the CPU device.
pub mod nvptx {
    use super::current;

    macro_rules! sreg {
        ($($name:ident => $field:ident[$d:literal];)*) => {$(
            #[inline]
            pub unsafe fn $name() -> u32 {
                current().$field()[$d]
            }
        )*};
    }
    sreg! {
        _thread_idx_x => thread_idx[0];
        _thread_idx_y => thread_idx[1];
        _thread_idx_z => thread_idx[2];
        _block_idx_x => block_idx[0];
        _block_idx_y => block_idx[1];
        _block_idx_z => block_idx[2];
        _block_dim_x => block_dim[0];
        _block_dim_y => block_dim[1];
        _block_dim_z => block_dim[2];
        _grid_dim_x => grid_dim[0];
        _grid_dim_y => grid_dim[1];
        _grid_dim_z => grid_dim[2];
    }

    /// `bar.sync 0`.
    #[inline]
    #[track_caller]
    pub unsafe fn _syncthreads() {
        current().syncthreads(true);
    }

    /// `trap`: the thread stops and the launch fails.
    pub unsafe fn trap() -> ! {
        panic!("trap")
    }
}

/// `%laneid`.
#[inline]
pub unsafe fn read_laneid() -> u32 {
    let c = current();
    c.require_32_lanes("lane_id");
    c.lane_id()
}

macro_rules! shuffle {
    ($($name:ident => $op:ident;)*) => {$(
        /// The shuffle, with PTX's `c` operand.
        #[inline]
        #[track_caller]
        pub unsafe fn $name(mask: u32, v: u32, b: u32, c: u32) -> u32 {
            let ctx = current();
            ctx.require_32_lanes(stringify!($name));
            ctx.warp(WarpOp::$op, u64::from(mask), u64::from(v), b, c) as u32
        }
    )*};
}
shuffle! {
    shfl_idx_i32 => ShflIdx;
    shfl_up_i32 => ShflUp;
    shfl_down_i32 => ShflDown;
    shfl_bfly_i32 => ShflXor;
}

/// `vote.ballot.sync`.
#[inline]
#[track_caller]
pub unsafe fn vote_ballot_sync(mask: u32, predicate: bool) -> u32 {
    current().require_32_lanes("ballot_sync");
    current().warp(WarpOp::Ballot, u64::from(mask), u64::from(predicate), 0, 0) as u32
}

/// `vote.any.sync`.
#[inline]
#[track_caller]
pub unsafe fn vote_any_sync(mask: u32, predicate: bool) -> bool {
    current().require_32_lanes("any_sync");
    current().warp(WarpOp::Any, u64::from(mask), u64::from(predicate), 0, 0) != 0
}

/// `vote.all.sync`.
#[inline]
#[track_caller]
pub unsafe fn vote_all_sync(mask: u32, predicate: bool) -> bool {
    current().require_32_lanes("all_sync");
    current().warp(WarpOp::All, u64::from(mask), u64::from(predicate), 0, 0) != 0
}

/// `bar.warp.sync`.
#[inline]
#[track_caller]
pub unsafe fn bar_warp_sync(mask: u32) {
    current().require_32_lanes("syncwarp");
    current().warp(WarpOp::Sync, u64::from(mask), 0, 0, 0);
}

/// `bar.red.popc`.
#[inline]
#[track_caller]
pub unsafe fn barrier0_popc(predicate: i32) -> i32 {
    current().syncthreads(predicate != 0) as i32
}

/// `bar.red.and`.
#[inline]
#[track_caller]
pub unsafe fn barrier0_and(predicate: i32) -> i32 {
    let ctx = current();
    let [x, y, z] = ctx.block_dim();
    i32::from(ctx.syncthreads(predicate != 0) == x * y * z)
}

/// `bar.red.or`.
#[inline]
#[track_caller]
pub unsafe fn barrier0_or(predicate: i32) -> i32 {
    i32::from(current().syncthreads(predicate != 0) != 0)
}

macro_rules! atomic_float_add {
    ($($name:ident: $t:ty => $bits:ty;)*) => {$(
        #[doc = concat!("`atom.add.", stringify!($t), "`: a compare-and-swap loop on the bits; other threads may run after it.")]
        #[inline]
        pub unsafe fn $name(address: *mut $t, val: $t) -> $t {
            use core::sync::atomic::Ordering::SeqCst;
            // SAFETY: the caller's contract: a valid, aligned address.
            let cell = unsafe { <$bits>::from_ptr(address.cast()) };
            let old = cell
                .fetch_update(SeqCst, SeqCst, |b| Some((<$t>::from_bits(b) + val).to_bits()))
                .unwrap_or_else(|b| b);
            interleave();
            <$t>::from_bits(old)
        }
    )*};
}
atomic_float_add! {
    atomic_load_add_f32: f32 => core::sync::atomic::AtomicU32;
    atomic_load_add_f64: f64 => core::sync::atomic::AtomicU64;
}

/// A point where other threads may run: after an atomic, in a spin loop.
#[inline]
pub fn interleave() {
    if super::in_kernel() {
        current().interleave();
    }
}

/// `%globaltimer`: nanoseconds of the host's monotonic clock.
pub fn globaltimer() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
