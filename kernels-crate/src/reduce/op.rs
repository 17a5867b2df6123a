//! What the reductions combine: the element types and the operators (sum, min, max).
use crate::device::warp::Shuffle;


/// An element type the reductions support.
pub trait Element: Shuffle + Copy + PartialOrd {
    /// The additive identity.
    const ZERO: Self;
    /// The identity of `min`: the largest value (`+inf` for floats).
    const MIN_IDENTITY: Self;
    /// The identity of `max`: the smallest value (`-inf` for floats).
    const MAX_IDENTITY: Self;
    /// `self + other`, wrapping for integers (exact modulo 2^bits).
    fn add(self, other: Self) -> Self;
    /// The smaller value (for floats, a NaN operand is ignored, as PTX `min` does).
    fn min(self, other: Self) -> Self;
    /// The larger value (for floats, a NaN operand is ignored, as PTX `max` does).
    fn max(self, other: Self) -> Self;
}

macro_rules! element_int {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const ZERO: Self = 0;
            const MIN_IDENTITY: Self = <$t>::MAX;
            const MAX_IDENTITY: Self = <$t>::MIN;
            #[inline(always)]
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { Ord::min(self, other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { Ord::max(self, other) }
        }
    )*};
}
element_int!(i32, u32, i64, u64);

macro_rules! element_float {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const ZERO: Self = 0.0;
            const MIN_IDENTITY: Self = <$t>::INFINITY;
            const MAX_IDENTITY: Self = <$t>::NEG_INFINITY;
            #[inline(always)]
            fn add(self, other: Self) -> Self { self + other }
            #[inline(always)]
            fn min(self, other: Self) -> Self { <$t>::min(self, other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { <$t>::max(self, other) }
        }
    )*};
}
element_float!(f32, f64);

/// A reduction operator: an associative combine and its identity.
pub trait Op {
    /// The identity element for `T`.
    fn identity<T: Element>() -> T;
    /// Combines two values.
    fn combine<T: Element>(a: T, b: T) -> T;
}

/// `+` (wrapping for integers).
pub struct Sum;
/// `min`.
pub struct Min;
/// `max`.
pub struct Max;

impl Op for Sum {
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::ZERO
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.add(b)
    }
}

impl Op for Min {
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::MIN_IDENTITY
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.min(b)
    }
}

impl Op for Max {
    #[inline(always)]
    fn identity<T: Element>() -> T {
        T::MAX_IDENTITY
    }
    #[inline(always)]
    fn combine<T: Element>(a: T, b: T) -> T {
        a.max(b)
    }
}
