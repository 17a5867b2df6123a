//! CPU references (oracles) for every kernel, in one place. The GPU tests and the CLI's checks
//! compare against these.

/// `out[i] = a * x[i] + y[i]`, rounded as the kernel rounds (a multiply then an add, not fused).
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a * x + y).collect()
}

use ferrocuda::runtime::element::Element;

pub mod check;
pub mod exact;
pub mod parallel;
pub mod reduce;
pub mod reproducible;
pub mod stencil;
pub mod warp;

pub use check::{Check, compensated_sum};
pub use ferrocuda::reduce::ReduceOp;
pub use ferrocuda::stencil::{Boundary, Taps, radius_error};
pub use parallel::Split;
pub use reduce::{ReduceOpCpu, ReduceReference};
pub use stencil::{
    StencilPoint, check_stencil, stencil, stencil_at, stencil_output_ok, stencil_point,
    stencil_source, stencil_tolerance,
};

use exact::{GAMMA, mix};

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
        mix(self.0)
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_f64_signed(&mut self) -> f64 {
        signed_unit(self.next_u64())
    }
}

/// The input of `ferrocuda reduce`, `stencil` and `bench`: integers like the book's
/// `rand() & 0xFF`; floats [exactly summable](exact), so that every
/// float sum of it is checked bit for bit. Generated on all the host's cores, with the values
/// of one sequential pass ([`generate`]).
pub fn book_input<T: Element>(n: usize, seed: u64) -> Vec<T> {
    if T::TYPE.is_float() {
        exact_floats(n, seed)
    } else {
        generate(Split::host(), n, seed, |bits| {
            from_random_bits::<T>(bits & 0xFF)
        })
    }
}

/// The input of the reduction tests: integers over their whole range (so that sums wrap),
/// floats [exactly summable](exact) (so that every float sum is checked bit for bit).
pub fn exact_sum_input<T: Element>(n: usize, seed: u64) -> Vec<T> {
    if T::TYPE.is_float() {
        exact_floats(n, seed)
    } else {
        random_vec(n, seed)
    }
}

/// The [exactly summable](exact) float input of `n` elements of `T` from `seed`.
fn exact_floats<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let layout = exact::layout_of::<T>(n);
    let mut out = vec![T::default(); n];
    Split::host().for_each_mut(&mut out, |start, part| {
        for (i, v) in part.iter_mut().enumerate() {
            *v = T::from_f64(layout.value(seed, (start + i) as u64) as f64);
        }
    });
    out
}

/// `n` values spread over `T`'s range ([`from_random_bits`]) from `seed`, generated
/// like [`book_input`].
pub fn random_vec<T: Element>(n: usize, seed: u64) -> Vec<T> {
    generate(Split::host(), n, seed, from_random_bits::<T>)
}

/// `bits` as a float uniform in `[-1, 1)` (53 random bits).
pub fn signed_unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// A value of `T` from 64 random bits spread over the type's range: every bit pattern for
/// integers (the low bits), uniform in `[-1, 1)` for floats (the tests' inputs).
pub fn from_random_bits<T: Element>(bits: u64) -> T {
    if T::TYPE.is_float() {
        return T::from_f64(signed_unit(bits));
    }
    const {
        assert!(
            size_of::<T>() <= size_of::<u64>(),
            "an Element wider than 64 bits"
        )
    };
    // The bytes of `bits as T`: the low ones, first on a little-endian host, last on a big one.
    let bytes = bits.to_ne_bytes();
    let low = if cfg!(target_endian = "little") {
        0
    } else {
        size_of::<u64>() - size_of::<T>()
    };
    // SAFETY: `T` is an integer `Element` (valid for every bit pattern) of at most 8 bytes
    // (asserted above), so `bytes[low..]` holds all of it; `read_unaligned` needs no alignment.
    unsafe { std::ptr::read_unaligned(bytes[low..].as_ptr().cast::<T>()) }
}

/// `sample` of the first `n` outputs of [`SplitMix64::new(seed)`](SplitMix64), the parts of
/// `split` on their own threads. The generator's state after `i` steps is `seed + i * GAMMA`,
/// so each part starts where the one before it ends: the values of one sequential pass, for any
/// split.
pub fn generate<T: Copy + Default + Send>(
    split: Split,
    n: usize,
    seed: u64,
    sample: fn(u64) -> T,
) -> Vec<T> {
    let mut out = vec![T::default(); n];
    split.for_each_mut(&mut out, |start, part| {
        let mut rng = SplitMix64::new(seed.wrapping_add((start as u64).wrapping_mul(GAMMA)));
        for v in part {
            *v = sample(rng.next_u64());
        }
    });
    out
}
