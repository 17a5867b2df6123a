//! `Element` is sealed: safe functions rely on every byte pattern of an element being a valid
//! value, which a user's type cannot promise to them, however many other traits it implements.
use ferrocuda::kernels::entry::ByValue;
use ferrocuda::runtime::element::{ElemType, Element};

#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, PartialOrd, Debug)]
struct Meters(f32);

impl std::fmt::Display for Meters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} m", self.0)
    }
}

unsafe impl ferrocuda::DeviceCopy for Meters {}
unsafe impl ByValue for Meters {}

impl Element for Meters {
    const TYPE: ElemType = ElemType::F32;
    const EPSILON: f64 = f32::EPSILON as f64;
    const MIN_SUBNORMAL: f64 = 0.0;
    const EXACT_INT_BITS: u32 = f32::MANTISSA_DIGITS;
    const POISON_BYTE: u8 = 0xFF;
    fn add(self, other: Self) -> Self {
        Meters(self.0 + other.0)
    }
    fn min_of(self, other: Self) -> Self {
        Meters(self.0.min(other.0))
    }
    fn max_of(self, other: Self) -> Self {
        Meters(self.0.max(other.0))
    }
    fn to_f64(self) -> f64 {
        self.0 as f64
    }
    fn from_f64(v: f64) -> Self {
        Meters(v as f32)
    }
    fn same_bits(self, other: Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

fn main() {}
