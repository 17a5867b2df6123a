//! The element types the kernels support, as the host sees them.
use std::fmt::{Debug, Display};

pub use ferrocuda_kernels::half::{Bf16, F16};

use crate::runtime::pointer::DeviceCopy;
use ferrocuda_kernels::entry::ByValue;

/// The element types, by name (`i32`, ..., `f64`, `f16`, `bf16`): the suffix of kernel symbols.
/// [`ALL`](Self::ALL) are the six with every kernel; [`HALF`](Self::HALF) the two 16-bit floats,
/// which the reductions read and sum in `f32` (`reduce::sum_to_f32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// [`F16`], IEEE 754 binary16 (`half::f16`).
    F16,
    /// [`Bf16`], bfloat16 (`half::bf16`).
    Bf16,
}

impl ElemType {
    /// All six.
    pub const ALL: [ElemType; 6] = [
        Self::I32,
        Self::U32,
        Self::I64,
        Self::U64,
        Self::F32,
        Self::F64,
    ];

    /// The two 16-bit floats.
    pub const HALF: [ElemType; 2] = [Self::F16, Self::Bf16];

    /// The Rust name, as in kernel symbols.
    pub fn name(self) -> &'static str {
        match self {
            Self::I32 => "i32",
            Self::U32 => "u32",
            Self::I64 => "i64",
            Self::U64 => "u64",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F16 | Self::Bf16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }

    /// Whether it is a float (`f32`, `f64`, `f16`, `bf16`).
    pub fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64 | Self::F16 | Self::Bf16)
    }

    /// Whether it is `f16` or `bf16`.
    pub fn is_half(self) -> bool {
        matches!(self, Self::F16 | Self::Bf16)
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::HALF)
            .find(|t| t.name() == name)
    }
}

// The 16-bit floats are `#[repr(transparent)]` over `u16`: plain data on both sides.
crate::runtime::pointer::device_copy!(F16, Bf16);

impl Display for ElemType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Implemented by the six element types only: [`Element`] promises that every byte pattern
/// is a valid value of at most 8 bytes (what [`Element::poison`], [`Gpu::alloc`] and
/// [`Gpu::memset_d8_async`] rely on), which a type outside this crate could not be held to.
///
/// [`Gpu::alloc`]: crate::Gpu::alloc
/// [`Gpu::memset_d8_async`]: crate::Gpu::memset_d8_async
mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
    impl Sealed for i64 {}
    impl Sealed for u64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// A host type that matches a kernel element type, with the arithmetic the CPU references
/// need: `i32`, `u32`, `i64`, `u64`, `f32`, `f64`, [`F16`], [`Bf16`]. Sealed: every byte pattern of an `Element`
/// is a valid value, which safe functions such as [`Gpu::alloc`](crate::Gpu::alloc) rely on.
pub trait Element:
    sealed::Sealed
    + DeviceCopy
    + ByValue
    + Copy
    + Default
    + PartialEq
    + PartialOrd
    + Debug
    + Display
    + Send
    + Sync
    + 'static
{
    /// Which one.
    const TYPE: ElemType;
    /// `self + other`, wrapping for integers (what the kernels compute).
    fn add(self, other: Self) -> Self;
    /// The smaller (floats: a NaN operand is ignored, as PTX `min` does).
    fn min_of(self, other: Self) -> Self;
    /// The larger (floats: a NaN operand is ignored).
    fn max_of(self, other: Self) -> Self;
    /// As `f64` (exact for floats and for integers below 2^53).
    fn to_f64(self) -> f64;
    /// `v as Self`: the nearest value for floats, truncated and saturated for integers.
    fn from_f64(v: f64) -> Self;
    /// Machine epsilon of the type (0 for integers: their sums are exact).
    const EPSILON: f64;
    /// The smallest positive value of a float type, a subnormal (0 for integers): rounding
    /// below the normal range is off by at most half of it.
    const MIN_SUBNORMAL: f64;
    /// Integers up to `2^EXACT_INT_BITS` are exact in the type: the significand bits of a float
    /// type (24, 53; not `f32::DIGITS`, its decimal digits), the width of an integer type.
    const EXACT_INT_BITS: u32;
    /// Bitwise equality (floats: by bit pattern).
    fn same_bits(self, other: Self) -> bool;
    /// The byte [`poison`](Self::poison) repeats: `0xA5` for integers; `0xFF` for floats, a NaN
    /// with every bit set that no correct result equals (a float result is finite, or the GPU's
    /// canonical NaN, `0x7FFFFFFF` in `f32`, with the sign bit clear) and that every float
    /// check rejects.
    const POISON_BYTE: u8;
    /// A value no kernel produces by chance ([`POISON_BYTE`](Self::POISON_BYTE) in every byte),
    /// written to outputs before a kernel runs so that an output it failed to write is caught.
    fn poison() -> Self {
        let bytes = [Self::POISON_BYTE; 8];
        // SAFETY: every `Element` is an integer or float of at most 8 bytes (the 16-bit floats
        // are `#[repr(transparent)]` over `u16`), valid for every bit pattern.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Self>()) }
    }
}

macro_rules! element_int {
    ($($t:ty => $e:ident),*) => {$(
        impl Element for $t {
            const TYPE: ElemType = ElemType::$e;
            const EPSILON: f64 = 0.0;
            const MIN_SUBNORMAL: f64 = 0.0;
            const EXACT_INT_BITS: u32 = <$t>::BITS;
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            fn min_of(self, other: Self) -> Self { Ord::min(self, other) }
            fn max_of(self, other: Self) -> Self { Ord::max(self, other) }
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn same_bits(self, other: Self) -> bool { self == other }
            const POISON_BYTE: u8 = 0xA5;
        }
    )*};
}
element_int!(i32 => I32, u32 => U32, i64 => I64, u64 => U64);

macro_rules! element_float {
    ($($t:ty => $e:ident),*) => {$(
        impl Element for $t {
            const TYPE: ElemType = ElemType::$e;
            const EPSILON: f64 = <$t>::EPSILON as f64;
            const MIN_SUBNORMAL: f64 = <$t>::from_bits(1) as f64;
            const EXACT_INT_BITS: u32 = <$t>::MANTISSA_DIGITS;
            fn add(self, other: Self) -> Self { self + other }
            fn min_of(self, other: Self) -> Self { <$t>::min(self, other) }
            fn max_of(self, other: Self) -> Self { <$t>::max(self, other) }
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn same_bits(self, other: Self) -> bool { self.to_bits() == other.to_bits() }
            const POISON_BYTE: u8 = 0xFF;
        }
    )*};
}
element_float!(f32 => F32, f64 => F64);

/// The 16-bit floats: each operation in `f32`, rounded back to nearest, ties to even (as the
/// GPU rounds); `min` and `max` return an operand, ignoring a NaN one.
macro_rules! element_half {
    ($($t:ident: $eps_bits:literal, $digits:literal, $min_exp:literal),*) => {$(
        impl Element for $t {
            const TYPE: ElemType = ElemType::$t;
            const EPSILON: f64 = 1.0 / (1u64 << $eps_bits) as f64;
            const MIN_SUBNORMAL: f64 = f64::from_bits(((1023 + $min_exp) as u64) << 52);
            const EXACT_INT_BITS: u32 = $digits;
            fn add(self, other: Self) -> Self { Self::from_f32(self.to_f32() + other.to_f32()) }
            fn min_of(self, other: Self) -> Self {
                let (a, b) = (self.to_f32(), other.to_f32());
                if b < a || a.is_nan() { other } else { self }
            }
            fn max_of(self, other: Self) -> Self {
                let (a, b) = (self.to_f32(), other.to_f32());
                if b > a || a.is_nan() { other } else { self }
            }
            fn to_f64(self) -> f64 { $t::to_f64(self) }
            fn from_f64(v: f64) -> Self { $t::from_f64(v) }
            fn same_bits(self, other: Self) -> bool { self.0 == other.0 }
            const POISON_BYTE: u8 = 0xFF;
        }
    )*};
}
element_half!(F16: 10, 11, -24, Bf16: 7, 8, -133);

/// Evaluates `$body` with `$t` bound to the Rust type of an [`ElemType`] value: the bridge from
/// a type chosen at run time (a CLI flag) to the generic functions.
///
/// ```
/// use ferrocuda::runtime::element::{ElemType, Element};
/// let size = ferrocuda::with_elem_type!(ElemType::F64, T => size_of::<T>());
/// assert_eq!(size, 8);
/// ```
#[macro_export]
macro_rules! with_elem_type {
    ($ty:expr, $t:ident => $body:expr) => {
        match $ty {
            $crate::runtime::element::ElemType::I32 => {
                type $t = i32;
                $body
            }
            $crate::runtime::element::ElemType::U32 => {
                type $t = u32;
                $body
            }
            $crate::runtime::element::ElemType::I64 => {
                type $t = i64;
                $body
            }
            $crate::runtime::element::ElemType::U64 => {
                type $t = u64;
                $body
            }
            $crate::runtime::element::ElemType::F32 => {
                type $t = f32;
                $body
            }
            $crate::runtime::element::ElemType::F64 => {
                type $t = f64;
                $body
            }
            $crate::runtime::element::ElemType::F16 => {
                type $t = $crate::runtime::element::F16;
                $body
            }
            $crate::runtime::element::ElemType::Bf16 => {
                type $t = $crate::runtime::element::Bf16;
                $body
            }
        }
    };
}
