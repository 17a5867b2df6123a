//! The element types of the kernels (`i32`, `u32`, `i64`, `u64`, `f32`, `f64`, and the 16-bit
//! floats `F16` and `Bf16`, computed in `f32`): one trait with
//! what the reductions, the stencils and the 16-byte vector paths need of a type, implemented
//! once per type.
use super::half::{Bf16, F16, Half};
use super::vector::{Access16, Vector16, load_16, load_nc_v2, load_nc_v4};
use super::warp::Shuffle;

/// An element type of the kernels.
///
/// # Safety
/// `V` must be 16 bytes holding `LANES` values of `Self` in order (`LANES * size_of::<Self>()
/// == 16`), and `load`/`load_nc` must read exactly those 16 bytes: the kernels split arrays into
/// vectors by `LANES` and read them through `V`, so a wrong implementation reads past an array.
pub unsafe trait Element: Shuffle + Copy + PartialOrd {
    /// Zero: the additive identity, and what an input outside a stencil's array reads in zero
    /// mode.
    const ZERO: Self;
    /// Where a stencil's sum starts: the exact identity of `+` (`-0.0` for floats, since
    /// `+0.0 + -0.0` is `+0.0`), so that adding the first tap to it folds away.
    const ADD_IDENTITY: Self;
    /// The identity of `min`: the largest value (`+inf` for floats).
    const MIN_IDENTITY: Self;
    /// The identity of `max`: the smallest value (`-inf` for floats).
    const MAX_IDENTITY: Self;
    /// Elements per 16-byte vector.
    const LANES: usize;
    /// The 16-byte vector of this type.
    type V: Access16;
    /// What a stencil computes in: the type itself, `f32` for the 16-bit floats.
    type Acc: Element;
    /// The value in [`Acc`](Self::Acc) (exact).
    fn to_acc(self) -> Self::Acc;
    /// An [`Acc`](Self::Acc) value rounded to this type (to nearest, ties to even).
    fn from_acc(a: Self::Acc) -> Self;
    /// The vector whose lane `i` is `f(i)` rounded to this type ([`from_acc`](Self::from_acc)
    /// of each lane; the 16-bit floats round two lanes per instruction from sm_80).
    #[inline(always)]
    fn vector_from_acc(mut f: impl FnMut(usize) -> Self::Acc) -> Self::V {
        Self::vector(|i| Self::from_acc(f(i)))
    }
    /// `self + other`, wrapping for integers (exact modulo 2^bits).
    fn add(self, other: Self) -> Self;
    /// The smaller value (for floats, a NaN operand is ignored, as PTX `min` does).
    fn min(self, other: Self) -> Self;
    /// The larger value (for floats, a NaN operand is ignored, as PTX `max` does).
    fn max(self, other: Self) -> Self;
    /// Lane `i` of `v`.
    fn lane(v: Self::V, i: usize) -> Self;
    /// The vector whose lane `i` is `f(i)`.
    fn vector(f: impl FnMut(usize) -> Self) -> Self::V;
    /// Folds the lanes of `v` into `init`, lane 0 first.
    fn fold<A>(v: Self::V, init: A, f: impl Fn(A, Self) -> A) -> A;
    /// [`load_16`] for this type's vector.
    ///
    /// # Safety
    /// As [`load_16`].
    unsafe fn load(p: *const Self::V) -> Self::V;
    /// Like [`load`](Self::load), through the non-coherent read-only path (`ld.global.nc`), for
    /// data that nothing writes during the kernel.
    ///
    /// # Safety
    /// As [`load_16`]; `p` must point to global memory.
    unsafe fn load_nc(p: *const Self::V) -> Self::V;
}

/// An element type with a fused multiply-add, for weighted stencils.
pub trait Float: Element<Acc = Self> {
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! element {
    ($($t:ty: $lanes:literal, $nc:ident, $zero:literal, $add_identity:literal,
        min/max $min_id:expr, $max_id:expr,
        |$a:ident, $b:ident| add $add:expr, min $min:expr, max $max:expr;)*) => {$(
        // SAFETY: `Vector16<$t, $lanes>` is 16 bytes of `$lanes` lanes, read by one 16-byte load.
        unsafe impl Element for $t {
            const ZERO: Self = $zero;
            const ADD_IDENTITY: Self = $add_identity;
            const MIN_IDENTITY: Self = $min_id;
            const MAX_IDENTITY: Self = $max_id;
            const LANES: usize = $lanes;
            type V = Vector16<$t, $lanes>;
            type Acc = $t;
            #[inline(always)]
            fn to_acc(self) -> Self { self }
            #[inline(always)]
            fn from_acc(a: Self) -> Self { a }
            #[inline(always)]
            fn add(self, other: Self) -> Self { let ($a, $b) = (self, other); $add }
            #[inline(always)]
            fn min(self, other: Self) -> Self { let ($a, $b) = (self, other); $min }
            #[inline(always)]
            fn max(self, other: Self) -> Self { let ($a, $b) = (self, other); $max }
            #[inline(always)]
            fn lane(v: Self::V, i: usize) -> Self { v.0[i] }
            #[inline(always)]
            fn vector(f: impl FnMut(usize) -> Self) -> Self::V { Vector16(core::array::from_fn(f)) }
            #[inline(always)]
            fn fold<A>(v: Self::V, init: A, f: impl Fn(A, Self) -> A) -> A {
                let mut acc = init;
                for i in 0..$lanes {
                    acc = f(acc, v.0[i]);
                }
                acc
            }
            #[inline(always)]
            unsafe fn load(p: *const Self::V) -> Self::V {
                // SAFETY: forwarded to the caller.
                unsafe { load_16(p) }
            }
            #[inline(always)]
            unsafe fn load_nc(p: *const Self::V) -> Self::V {
                // SAFETY: forwarded to the caller.
                unsafe { $nc(p.cast()) }
            }
        }
    )*};
}

element! {
    i32: 4, load_nc_v4, 0, 0, min/max i32::MAX, i32::MIN,
        |a, b| add a.wrapping_add(b), min Ord::min(a, b), max Ord::max(a, b);
    u32: 4, load_nc_v4, 0, 0, min/max u32::MAX, u32::MIN,
        |a, b| add a.wrapping_add(b), min Ord::min(a, b), max Ord::max(a, b);
    i64: 2, load_nc_v2, 0, 0, min/max i64::MAX, i64::MIN,
        |a, b| add a.wrapping_add(b), min Ord::min(a, b), max Ord::max(a, b);
    u64: 2, load_nc_v2, 0, 0, min/max u64::MAX, u64::MIN,
        |a, b| add a.wrapping_add(b), min Ord::min(a, b), max Ord::max(a, b);
    f32: 4, load_nc_v4, 0.0, -0.0, min/max f32::INFINITY, f32::NEG_INFINITY,
        |a, b| add a + b, min f32::min(a, b), max f32::max(a, b);
    f64: 2, load_nc_v2, 0.0, -0.0, min/max f64::INFINITY, f64::NEG_INFINITY,
        |a, b| add a + b, min f64::min(a, b), max f64::max(a, b);
}

impl Float for f32 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        #[cfg(target_arch = "nvptx64")]
        return core::intrinsics::fmaf32(self, a, b);
        #[cfg(not(target_arch = "nvptx64"))]
        f32::mul_add(self, a, b)
    }
}

impl Float for f64 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        #[cfg(target_arch = "nvptx64")]
        return core::intrinsics::fmaf64(self, a, b);
        #[cfg(not(target_arch = "nvptx64"))]
        f64::mul_add(self, a, b)
    }
}

/// The 16-bit floats: each operation widens to `f32`, computes there and rounds back (to
/// nearest, ties to even); `min` and `max` return one of their operands. The kernels that sum
/// them accumulate in `f32` instead (`Widen<f32>`), so these are for the odd element-wise use.
macro_rules! element_half {
    ($($t:ident),*) => {$(
        #[cfg(target_arch = "nvptx64")]
        impl PartialOrd for $t {
            #[inline(always)]
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }

        // SAFETY: `Vector16<$t, 8>` is 16 bytes of 8 lanes, read by one 16-byte load.
        unsafe impl Element for $t {
            const ZERO: Self = $t(0);
            const ADD_IDENTITY: Self = <$t as Half>::NEG_ZERO;
            const MIN_IDENTITY: Self = <$t as Half>::INFINITY;
            const MAX_IDENTITY: Self = <$t as Half>::NEG_INFINITY;
            const LANES: usize = 8;
            type V = Vector16<$t, 8>;
            type Acc = f32;
            #[inline(always)]
            fn to_acc(self) -> f32 { self.to_f32() }
            #[inline(always)]
            fn from_acc(a: f32) -> Self { Self::from_f32(a) }
            #[inline(always)]
            fn vector_from_acc(mut f: impl FnMut(usize) -> f32) -> Self::V {
                // Eight calls written out, not a loop: a loop over lanes whose body is a long
                // window (R >= 4) is left rolled by LLVM, and the window it indexes then lives
                // on the stack.
                let a: [f32; 8] = [f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)];
                Vector16::<$t, 8>::from_words(Vector16(core::array::from_fn(|k| {
                    <$t as Half>::pack2(a[2 * k], a[2 * k + 1])
                })))
            }
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                Self::from_f32(self.to_f32() + other.to_f32())
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                let (a, b) = (self.to_f32(), other.to_f32());
                if b < a || a.is_nan() { other } else { self }
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                let (a, b) = (self.to_f32(), other.to_f32());
                if b > a || a.is_nan() { other } else { self }
            }
            #[inline(always)]
            fn lane(v: Self::V, i: usize) -> Self { v.0[i] }
            #[inline(always)]
            fn vector(f: impl FnMut(usize) -> Self) -> Self::V { Vector16(core::array::from_fn(f)) }
            #[inline(always)]
            fn fold<A>(v: Self::V, init: A, f: impl Fn(A, Self) -> A) -> A {
                let mut acc = init;
                for i in 0..8 {
                    acc = f(acc, v.0[i]);
                }
                acc
            }
            #[inline(always)]
            unsafe fn load(p: *const Self::V) -> Self::V {
                // SAFETY: forwarded to the caller.
                unsafe { load_16(p) }
            }
            #[inline(always)]
            unsafe fn load_nc(p: *const Self::V) -> Self::V {
                // SAFETY: forwarded to the caller.
                Vector16::<$t, 8>::from_words(unsafe { load_nc_v4::<u32>(p.cast()) })
            }
        }
    )*};
}

element_half!(F16, Bf16);
