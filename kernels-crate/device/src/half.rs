//! Half-precision element types (半精度): [`F16`] (IEEE 754 binary16) and [`Bf16`] (bfloat16),
//! each 16 bits, stored as they are in memory and converted to `f32` for arithmetic.
//!
//! - `F16`: 1 sign, 5 exponent and 10 significand bits; largest finite 65504, epsilon 2^-10.
//!   On the GPU `cvt.f32.f16` widens it exactly and `cvt.rn.f16.f32` rounds back to nearest,
//!   ties to even.
//! - `Bf16`: the high half of an `f32` (1 sign, 8 exponent, 7 significand bits): the range of
//!   `f32` with epsilon 2^-7. Widening is a shift; rounding back is to nearest, ties to even,
//!   with integer instructions (sm_70 has no bf16 conversion), a NaN kept a quiet NaN.
//! - `Half::pack2` (on the GPU) rounds two `f32` values into one word of two lanes: from sm_80 one
//!   `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32` (a NaN becomes the instruction's NaN), else two
//!   `from_f32`. The stencils store their outputs through it.
//!
//! Sums of half-precision data accumulate in `f32`, as PyTorch does for `Half` and `BFloat16`:
//! summing in 16 bits loses every addend below half an ulp of the running sum, which for `F16`
//! is a large part of the input after 2048 ones.
//!
//! The same two types are the host's element types (the kernels' parameter types are checked
//! by type identity between the two sides, so both use these): on the host they convert with
//! the `half` crate (`F16::from(half::f16)`, [`F16::to_f32`], [`F16::from_f32`]), which rounds
//! as the GPU does.

/// IEEE 754 binary16, as its 16 bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct F16(pub u16);

/// bfloat16 (the high 16 bits of an `f32`), as its 16 bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bf16(pub u16);

/// A 16-bit float stored in memory and computed in `f32`.
pub trait Half: Copy + 'static {
    /// Positive infinity.
    const INFINITY: Self;
    /// Negative infinity.
    const NEG_INFINITY: Self;
    /// Negative zero.
    const NEG_ZERO: Self;
    /// The value as an `f32` (exact).
    fn to_f32(self) -> f32;
    /// `v` rounded to the nearest value of this type, ties to even; out of range rounds to an
    /// infinity, a NaN stays a NaN.
    fn from_f32(v: f32) -> Self;
    /// `lo` and `hi` rounded as [`from_f32`](Self::from_f32), as one little-endian word (`lo`
    /// in the low half): one `cvt.rn.{f16,bf16}x2.f32` from sm_80.
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        pack2_each::<Self>(lo, hi)
    }
    /// The bits.
    fn bits(self) -> u16;
}

/// [`Half::pack2`] one lane at a time.
#[inline(always)]
fn pack2_each<H: Half>(lo: f32, hi: f32) -> u32 {
    H::from_f32(lo).bits() as u32 | (H::from_f32(hi).bits() as u32) << 16
}

/// `cvt.rn.{ty}x2.f32 d, hi, lo` (the first source goes to the upper half).
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
macro_rules! cvt_x2 {
    ($ty:literal, $lo:expr, $hi:expr) => {{
        let d: u32;
        // SAFETY: a register conversion, no memory.
        unsafe {
            core::arch::asm!(concat!("cvt.rn.", $ty, "x2.f32 {d}, {hi}, {lo};"),
                d = out(reg32) d, hi = in(reg32) $hi, lo = in(reg32) $lo,
                options(pure, nomem, nostack))
        };
        d
    }};
}

#[cfg(target_arch = "nvptx64")]
impl Half for F16 {
    const INFINITY: Self = F16(0x7C00);
    const NEG_INFINITY: Self = F16(0xFC00);
    const NEG_ZERO: Self = F16(0x8000);

    #[inline(always)]
    fn to_f32(self) -> f32 {
        let f: f32;
        // SAFETY: a register conversion, no memory.
        unsafe {
            core::arch::asm!("cvt.f32.f16 {f}, {h};", f = out(reg32) f, h = in(reg16) self.0,
                options(pure, nomem, nostack))
        };
        f
    }

    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        let h: u16;
        // SAFETY: a register conversion, no memory.
        unsafe {
            core::arch::asm!("cvt.rn.f16.f32 {h}, {f};", h = out(reg16) h, f = in(reg32) v,
                options(pure, nomem, nostack))
        };
        F16(h)
    }

    #[inline(always)]
    fn bits(self) -> u16 {
        self.0
    }

    #[cfg(target_feature = "sm_80")]
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        cvt_x2!("f16", lo, hi)
    }
}

impl Half for Bf16 {
    const INFINITY: Self = Bf16(0x7F80);
    const NEG_INFINITY: Self = Bf16(0xFF80);
    const NEG_ZERO: Self = Bf16(0x8000);

    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        let b = v.to_bits();
        if v.is_nan() {
            // Keep the sign and the high payload bits, and make sure it stays a NaN.
            return Bf16((b >> 16) as u16 | 0x0040);
        }
        // Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit, then truncate.
        Bf16(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16)
    }

    #[inline(always)]
    fn bits(self) -> u16 {
        self.0
    }

    #[cfg(target_feature = "sm_80")]
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        cvt_x2!("bf16", lo, hi)
    }
}

/// On the CPU device `F16` converts with the `half` crate, which rounds as `cvt.rn.f16.f32`.
#[cfg(not(target_arch = "nvptx64"))]
impl Half for F16 {
    const INFINITY: Self = F16(0x7C00);
    const NEG_INFINITY: Self = F16(0xFC00);
    const NEG_ZERO: Self = F16(0x8000);

    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }

    fn from_f32(v: f32) -> Self {
        F16::from_f32(v)
    }

    fn bits(self) -> u16 {
        self.0
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::{Bf16, F16};

    macro_rules! host_half {
        ($($t:ident: $h:ty),*) => {$(
            impl $t {
                /// The value as an `f32` (exact).
                pub fn to_f32(self) -> f32 {
                    <$h>::from_bits(self.0).to_f32()
                }
                /// `v` rounded to the nearest value, ties to even (as the GPU rounds).
                pub fn from_f32(v: f32) -> Self {
                    $t(<$h>::from_f32(v).to_bits())
                }
                /// The value as an `f64` (exact).
                pub fn to_f64(self) -> f64 {
                    self.to_f32() as f64
                }
                /// `v` rounded to the nearest value, ties to even, in one rounding.
                pub fn from_f64(v: f64) -> Self {
                    $t(<$h>::from_f64(v).to_bits())
                }
            }

            impl From<$h> for $t {
                fn from(v: $h) -> Self {
                    $t(v.to_bits())
                }
            }

            impl From<$t> for $h {
                fn from(v: $t) -> Self {
                    <$h>::from_bits(v.0)
                }
            }

            impl PartialOrd for $t {
                fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                    self.to_f32().partial_cmp(&other.to_f32())
                }
            }

            impl core::fmt::Display for $t {
                fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    core::fmt::Display::fmt(&<$h>::from_bits(self.0), f)
                }
            }

            // SAFETY: `#[repr(transparent)]` over `u16`, laid out the same on both sides.
            unsafe impl crate::entry::ByValue for $t {}
        )*};
    }

    host_half!(F16: half::f16, Bf16: half::bf16);
}
