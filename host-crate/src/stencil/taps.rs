//! What a stencil computes: its coefficients ([`Taps`]) and what it reads outside the array
//! ([`Boundary`]), shared by the one-step stencil and the iterated one.
use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use ferrocuda_kernels::config::{
    STENCIL_BOUNDARY_CLAMP, STENCIL_BOUNDARY_PERIODIC, STENCIL_BOUNDARY_ZERO, STENCIL_MAX_TAPS,
    STENCIL_RADII,
};
use ferrocuda_kernels::stencil::Coefficients;

/// What an input index outside `0..n` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// Zero.
    Zero,
    /// The nearest end: element 0 below the array, element `n - 1` above it.
    Clamp,
    /// Wraps around: index `j` reads element `j mod n` (the array is a ring).
    Periodic,
}

impl Boundary {
    /// All three.
    pub const ALL: [Boundary; 3] = [Self::Zero, Self::Clamp, Self::Periodic];

    /// `zero`, `clamp`, `periodic`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Zero => "zero",
            Self::Clamp => "clamp",
            Self::Periodic => "periodic",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The kernels' `boundary` argument (`STENCIL_BOUNDARY_*`).
    pub fn code(self) -> u32 {
        match self {
            Self::Zero => STENCIL_BOUNDARY_ZERO,
            Self::Clamp => STENCIL_BOUNDARY_CLAMP,
            Self::Periodic => STENCIL_BOUNDARY_PERIODIC,
        }
    }
}

/// The coefficients of a stencil (the "weights or radius" of `stencil::apply`).
#[derive(Clone, Debug, PartialEq)]
pub enum Taps<T> {
    /// Every coefficient 1: the notes' sum of the `2 * radius + 1` inputs around each output.
    Sum {
        /// `R`.
        radius: u32,
    },
    /// The coefficients `c_0 ..= c_2R`, leftmost first: `2R + 1` of them (floats only).
    Weighted(Vec<T>),
}

impl<T: Element> Taps<T> {
    /// `R`: the inputs on each side of the centre.
    pub fn radius(&self) -> u32 {
        match self {
            Self::Sum { radius } => *radius,
            Self::Weighted(w) => (w.len() / 2) as u32,
        }
    }

    /// Whether the coefficients are given (rather than all 1).
    pub fn is_weighted(&self) -> bool {
        matches!(self, Self::Weighted(_))
    }

    /// Coefficient `k` (`0..=2R`) as `f64`.
    pub fn coefficient(&self, k: usize) -> f64 {
        match self {
            Self::Sum { .. } => 1.0,
            Self::Weighted(w) => w[k].to_f64(),
        }
    }

    /// Why these taps cannot be used, if they cannot: a radius without an entry point, an even
    /// number of coefficients, or coefficients for an integer or 16-bit float type.
    pub fn error(&self) -> Option<String> {
        if let Self::Weighted(w) = self {
            if !T::TYPE.is_float() || T::TYPE.is_half() {
                return Some(format!(
                    "weighted stencils are f32 and f64 only, not {}",
                    T::TYPE
                ));
            }
            if w.len() % 2 == 0 {
                return Some(format!(
                    "a weighted stencil needs 2R + 1 coefficients (an odd number), not {}",
                    w.len()
                ));
            }
        }
        radius_error(self.radius())
    }
}

/// Why `radius` has no entry point, if it has none.
pub fn radius_error(radius: u32) -> Option<String> {
    (!STENCIL_RADII.contains(&radius))
        .then(|| format!("the stencil radius must be one of {STENCIL_RADII:?}, not {radius}"))
}

/// The coefficients a kernel receives by value for `taps` (`None` for a sum), or why `taps`
/// cannot be used ([`Taps::error`]: more than [`STENCIL_MAX_TAPS`] coefficients among others).
pub fn coefficients<T: Element>(taps: &Taps<T>) -> Result<Option<Coefficients<T>>> {
    if let Some(what) = taps.error() {
        return Err(Error::Unsupported { what });
    }
    let Taps::Weighted(w) = taps else {
        return Ok(None);
    };
    let mut c = Coefficients([T::default(); STENCIL_MAX_TAPS]);
    c.0[..w.len()].copy_from_slice(w);
    Ok(Some(c))
}
