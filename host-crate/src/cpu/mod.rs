//! CPU references (oracles) for every kernel, in one place. The GPU tests and the CLI's checks
//! compare against these.

/// `out[i] = a * x[i] + y[i]`, rounded as the kernel rounds (a multiply then an add, not fused).
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a * x + y).collect()
}

use crate::runtime::element::{Element, signed_unit};

pub mod check;
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
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

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
/// `ferrocuda reduce`, `stencil` and `bench`.
pub fn book_input<T: Element>(n: usize, seed: u64) -> Vec<T> {
    generate(n, seed, T::book_sample)
}

/// `n` values spread over `T`'s range ([`Element::from_random_bits`]) from `seed`.
pub fn random_vec<T: Element>(n: usize, seed: u64) -> Vec<T> {
    generate(n, seed, T::from_random_bits)
}

/// `sample` of the `n` first outputs of `SplitMix64::new(seed)`, on all the host's cores. The
/// generator's state after `i` steps is `seed + i * GAMMA`, so each thread starts its stretch
/// where the one before it ends: the same values as one sequential pass.
fn generate<T: Element>(n: usize, seed: u64, sample: fn(u64) -> T) -> Vec<T> {
    let mut out = vec![T::default(); n];
    par_chunks_mut(&mut out, |start, part| {
        let mut rng = SplitMix64::new(seed.wrapping_add((start as u64).wrapping_mul(GAMMA)));
        for v in part {
            *v = sample(rng.next_u64());
        }
    });
    out
}

/// The stretch one thread of [`par_chunks_mut`] and [`par_map_chunks`] takes: the input split
/// over the host's cores, at least 2^16 elements each.
fn stretch(len: usize) -> usize {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    len.div_ceil(threads).max(1 << 16)
}

/// Runs `f(start, part)` on consecutive parts of `x`, one thread each (one part for a short
/// slice).
pub(crate) fn par_chunks_mut<T: Send>(x: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    let size = stretch(x.len());
    std::thread::scope(|s| {
        for (k, part) in x.chunks_mut(size).enumerate() {
            let f = &f;
            s.spawn(move || f(k * size, part));
        }
    });
}

/// `f` of consecutive parts of `x` (each a multiple of `align` long, but the last), one thread
/// each, in order.
pub(crate) fn par_map_chunks<T: Sync, R: Send>(
    x: &[T],
    align: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let size = stretch(x.len()).next_multiple_of(align.max(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = x
            .chunks(size)
            .map(|part| {
                let f = &f;
                s.spawn(move || f(part))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a CPU reference thread"))
            .collect()
    })
}
