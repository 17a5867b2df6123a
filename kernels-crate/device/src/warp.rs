//! Warp-level primitives: lane identity, shuffles (线程洗牌函数) and votes (线程表决函数).
//!
//! A warp (线程束) is [`WARP_SIZE`] threads that the SM issues together. Shuffles let a lane read
//! a register of another lane of its warp without going through shared memory; votes combine
//! one predicate per lane into a mask or a boolean.
//!
//! Every `*_sync` function takes a `mask` naming the lanes that take part. Each lane in the
//! mask must call the same function with the same mask, and **every lane named must exist**:
//! the notes launch `<<<1, 16>>>` with `FULL_MASK = 0xffffffff`, which names 16 lanes that do
//! not exist and is undefined behaviour. Use `mask_for_lanes(block_dim)`.
//!
//! The `width` argument splits the warp into segments of `width` lanes (a power of two from 1
//! to 32); lane indices and deltas are taken within the segment, and a source lane outside the
//! segment leaves the value unchanged. In PTX this is the `c` operand:
//! `((32 - width) << 8) | 0x1f` for idx/down/bfly and `(32 - width) << 8` for up.
//!
//! Shuffles move 32-bit words; 64-bit values travel as two shuffles of their halves.

/// `warpSize` on every NVIDIA GPU this crate is built for. The host checks the device's warp
/// size against it before launching anything.
#[doc(alias = "warpSize")]
pub const WARP_SIZE: u32 = crate::config::WARP_SIZE;

/// All 32 lanes. Only valid when all 32 lanes of the warp exist and take part.
pub const FULL_MASK: u32 = u32::MAX;

#[cfg(not(target_arch = "nvptx64"))]
use crate::cpu::intrinsics::{
    read_laneid, shfl_bfly_i32, shfl_down_i32, shfl_idx_i32, shfl_up_i32, vote_all_sync,
    vote_any_sync, vote_ballot_sync,
};

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    #[link_name = "llvm.nvvm.read.ptx.sreg.laneid"]
    fn read_laneid() -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn shfl_idx_i32(mask: u32, v: u32, lane: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
    fn shfl_up_i32(mask: u32, v: u32, delta: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    fn shfl_down_i32(mask: u32, v: u32, delta: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.bfly.i32"]
    fn shfl_bfly_i32(mask: u32, v: u32, lane_mask: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.vote.ballot.sync"]
    fn vote_ballot_sync(mask: u32, predicate: bool) -> u32;
    #[link_name = "llvm.nvvm.vote.any.sync"]
    fn vote_any_sync(mask: u32, predicate: bool) -> bool;
    #[link_name = "llvm.nvvm.vote.all.sync"]
    fn vote_all_sync(mask: u32, predicate: bool) -> bool;
}

/// `%laneid`: this thread's lane within its warp, `0..WARP_SIZE`.
#[inline(always)]
pub fn lane_id() -> u32 {
    // SAFETY: reading a special register is always defined.
    unsafe { read_laneid() }
}

/// The mask of the lanes of this warp that exist in a block of `block_threads` threads (the
/// last warp of a block whose size is not a multiple of 32 is partial).
#[inline(always)]
pub fn mask_for_lanes(block_threads: u32) -> u32 {
    crate::config::warp_mask_for_threads(block_threads, crate::thread::thread_idx_x())
}

/// A value that can be moved between lanes by the shuffle instructions.
pub trait Shuffle: Copy {
    /// Whether the value needs two 32-bit shuffles.
    const WIDE: bool;
    /// The low and high 32-bit words of the value (high is 0 for 32-bit types).
    fn to_words(self) -> (u32, u32);
    /// The value back from its words.
    fn from_words(lo: u32, hi: u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty: |$v:ident| $to:expr, |$w:ident| $from:expr;)*) => {$(
        impl Shuffle for $t {
            const WIDE: bool = false;
            #[inline(always)]
            fn to_words(self) -> (u32, u32) { let $v = self; ($to, 0) }
            #[inline(always)]
            fn from_words(lo: u32, _hi: u32) -> Self { let $w = lo; $from }
        }
    )*};
}
shuffle_32! {
    crate::half::F16: |v| v.0 as u32, |w| crate::half::F16(w as u16);
    crate::half::Bf16: |v| v.0 as u32, |w| crate::half::Bf16(w as u16);
    u32: |v| v, |w| w;
    i32: |v| v as u32, |w| w as i32;
    f32: |v| v.to_bits(), |w| f32::from_bits(w);
}

macro_rules! shuffle_64 {
    ($($t:ty: |$v:ident| $to:expr, |$w:ident| $from:expr;)*) => {$(
        impl Shuffle for $t {
            const WIDE: bool = true;
            #[inline(always)]
            fn to_words(self) -> (u32, u32) { let $v = self; let b: u64 = $to; (b as u32, (b >> 32) as u32) }
            #[inline(always)]
            fn from_words(lo: u32, hi: u32) -> Self { let $w = (hi as u64) << 32 | lo as u64; $from }
        }
    )*};
}
shuffle_64! {
    u64: |v| v, |w| w;
    i64: |v| v as u64, |w| w as i64;
    f64: |v| v.to_bits(), |w| f64::from_bits(w);
}

/// The PTX `c` operand for idx, down and bfly shuffles within segments of `width` lanes.
#[inline(always)]
const fn clamp_segment(width: u32) -> u32 {
    ((WARP_SIZE - width) << 8) | 0x1f
}

const IDX: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;
const BFLY: u8 = 3;

/// One 32-bit shuffle; `MODE` is a constant so the `match` folds to one instruction (LLVM
/// intrinsics cannot be passed around as function pointers).
#[inline(always)]
unsafe fn shuffle_word<const MODE: u8>(mask: u32, v: u32, b: u32, c: u32) -> u32 {
    // SAFETY: forwarded to the caller of the public shuffle.
    unsafe {
        match MODE {
            IDX => shfl_idx_i32(mask, v, b, c),
            UP => shfl_up_i32(mask, v, b, c),
            DOWN => shfl_down_i32(mask, v, b, c),
            _ => shfl_bfly_i32(mask, v, b, c),
        }
    }
}

#[inline(always)]
unsafe fn shuffle_words<T: Shuffle, const MODE: u8>(var: T, mask: u32, b: u32, c: u32) -> T {
    let (lo, hi) = var.to_words();
    // SAFETY: forwarded to the caller of the public shuffle.
    unsafe {
        let lo = shuffle_word::<MODE>(mask, lo, b, c);
        let hi = if T::WIDE {
            shuffle_word::<MODE>(mask, hi, b, c)
        } else {
            hi
        };
        T::from_words(lo, hi)
    }
}

/// `__shfl_sync(mask, var, src_lane, width)`: the value of `var` in lane `src_lane` of this
/// lane's segment of `width` lanes (a broadcast when every lane names the same source).
///
/// # Safety
/// Every lane in `mask` must exist and call this with the same `mask` and `width`; the calling
/// lane and the source lane must be in `mask`; `width` must be a power of two in `1..=32`.
#[doc(alias = "__shfl_sync")]
#[inline(always)]
pub unsafe fn shfl_sync<T: Shuffle>(mask: u32, var: T, src_lane: u32, width: u32) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { shuffle_words::<T, IDX>(var, mask, src_lane, clamp_segment(width)) }
}

/// `__shfl_up_sync(mask, var, delta, width)`: the value of `var` in lane `lane - delta` of
/// the same segment; lanes whose source would fall below the segment keep their own value.
///
/// # Safety
/// As [`shfl_sync`].
#[doc(alias = "__shfl_up_sync")]
#[inline(always)]
pub unsafe fn shfl_up_sync<T: Shuffle>(mask: u32, var: T, delta: u32, width: u32) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { shuffle_words::<T, UP>(var, mask, delta, (WARP_SIZE - width) << 8) }
}

/// `__shfl_down_sync(mask, var, delta, width)`: the value of `var` in lane `lane + delta` of
/// the same segment; lanes whose source would fall past the segment keep their own value.
///
/// # Safety
/// As [`shfl_sync`].
#[doc(alias = "__shfl_down_sync")]
#[inline(always)]
pub unsafe fn shfl_down_sync<T: Shuffle>(mask: u32, var: T, delta: u32, width: u32) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { shuffle_words::<T, DOWN>(var, mask, delta, clamp_segment(width)) }
}

/// `__shfl_xor_sync(mask, var, lane_mask, width)`: the value of `var` in lane
/// `lane ^ lane_mask` (a butterfly); a source outside the segment keeps the own value.
///
/// # Safety
/// As [`shfl_sync`].
#[doc(alias = "__shfl_xor_sync")]
#[inline(always)]
pub unsafe fn shfl_xor_sync<T: Shuffle>(mask: u32, var: T, lane_mask: u32, width: u32) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { shuffle_words::<T, BFLY>(var, mask, lane_mask, clamp_segment(width)) }
}

/// `__ballot_sync(mask, predicate)`: bit `i` is set when lane `i` is in `mask` and passed
/// `true`.
///
/// # Safety
/// Every lane in `mask` must exist and call this with the same `mask`.
#[doc(alias = "__ballot_sync")]
#[inline(always)]
pub unsafe fn ballot_sync(mask: u32, predicate: bool) -> u32 {
    // SAFETY: forwarded to the caller.
    unsafe { vote_ballot_sync(mask, predicate) }
}

/// `__any_sync(mask, predicate)`: whether any lane in `mask` passed `true`.
///
/// # Safety
/// As [`ballot_sync`].
#[doc(alias = "__any_sync")]
#[inline(always)]
pub unsafe fn any_sync(mask: u32, predicate: bool) -> bool {
    // SAFETY: forwarded to the caller.
    unsafe { vote_any_sync(mask, predicate) }
}

/// `__all_sync(mask, predicate)`: whether every lane in `mask` passed `true`.
///
/// # Safety
/// As [`ballot_sync`].
#[doc(alias = "__all_sync")]
#[inline(always)]
pub unsafe fn all_sync(mask: u32, predicate: bool) -> bool {
    // SAFETY: forwarded to the caller.
    unsafe { vote_all_sync(mask, predicate) }
}
