//! CPU references (oracles) for every kernel, in one place. The GPU tests and the CLI's checks
//! compare against these.

/// `out[i] = a * x[i] + y[i]`, rounded as the kernel rounds (a multiply then an add, not fused).
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a * x + y).collect()
}

use crate::runtime::element::{Element, signed_unit};

pub mod check;
pub mod parallel;
pub mod reduce;
pub mod reproducible;
pub mod stencil;
pub mod warp;

pub use check::{Check, compensated_sum};
pub use reduce::{ReduceOp, ReduceReference};
pub use stencil::{
    Boundary, StencilPoint, Taps, check_stencil, radius_error, stencil, stencil_at, stencil_point,
    stencil_source, stencil_tolerance,
};

/// SplitMix64's increment: the state after `i` steps is `seed + i * GAMMA`.
pub(crate) const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A small deterministic generator (SplitMix64) for inputs: the same seed gives the same data
/// on every machine, so a failing case can be replayed from its printed seed.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// From a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_f64_signed(&mut self) -> f64 {
        signed_unit(self.next_u64())
    }
}

/// `n` values like the book's ([`Element::book_sample`]) from `seed`: the input of
/// `ferrocuda reduce`, `stencil` and `bench`. Generated on all the host's cores, with the values
/// of one sequential pass ([`Split::generate`](parallel::Split::generate)).
pub fn book_input<T: Element>(n: usize, seed: u64) -> Vec<T> {
    parallel::Split::host().generate(n, seed, T::book_sample)
}

/// `n` values spread over `T`'s range ([`Element::from_random_bits`]) from `seed`, generated
/// like [`book_input`].
pub fn random_vec<T: Element>(n: usize, seed: u64) -> Vec<T> {
    parallel::Split::host().generate(n, seed, T::from_random_bits)
}
