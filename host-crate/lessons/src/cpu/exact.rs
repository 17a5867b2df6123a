//! Float inputs whose every partial sum is exact, so that a float sum can be checked bit for bit
//! whatever order the GPU adds in.
//!
//! A float sum of non-negative integers is exact as long as every partial sum stays below
//! `2^digits` (24 for `f32`, 53 for `f64`): then each partial sum is an integer the type holds,
//! and no addition rounds. Every partial sum of non-negative values is at most the total, so one
//! condition covers every order, every tree and every atomic interleaving: **the total is at most
//! `2^digits`**. The inputs below keep to it by construction, for any `n`, and put a non-zero
//! value in every aligned group of a few elements, so that every block of every kernel
//! contributes: a block missing or counted twice changes the result.
//!
//! The values are a pure function of `(n, seed, i)`, built on [`splitmix_at`], so the CUDA C and
//! CUB baselines of the benchmark generate the same input (`baselines/input.h` mirrors this
//! file line for line).
//!
//! Layout, for `k = ceil(n / 4)` groups of four elements:
//! - **dense** (`s = min(1020, 2^digits / k) >= 1`): each group sums to exactly `s`. Three cut
//!   points from the group's random bits split `t` into four parts; with `s >= 4` every element
//!   gets `1 +` its part of `t = s - 4` (no zeros), else its part of `t = s`.
//! - **sparse** (`n > 4 * 2^digits`, e.g. `f32` beyond 2^26): groups of `g` elements, `g` the
//!   smallest power of two with `ceil(n / g) <= 2^digits`; each holds one `1` at a random place.

/// SplitMix64's increment.
pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Output `i` (from 0) of [`SplitMix64::new(seed)`](super::SplitMix64), without the outputs
/// before it.
pub fn splitmix_at(seed: u64, i: u64) -> u64 {
    mix(seed.wrapping_add(i.wrapping_add(1).wrapping_mul(GAMMA)))
}

/// The largest group sum of the dense layout.
const MAX_GROUP_SUM: u64 = 1020;

/// How [`exact_value`] lays out `n` elements of a float type with `digits` significand bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExactLayout {
    /// Groups of four elements, each summing to `group_sum`.
    Dense {
        /// `s`.
        group_sum: u64,
    },
    /// Groups of `group` elements holding one `1` each.
    Sparse {
        /// `g`, a power of two.
        group: u64,
    },
}

impl ExactLayout {
    /// The layout of `n` elements with `digits` significand bits.
    pub fn of(n: usize, digits: u32) -> Self {
        Self::capped(n, digits, MAX_GROUP_SUM)
    }

    /// [`of`](Self::of) with groups summing to at most `max_group_sum` (so that every element,
    /// at most that, is exact in a narrower type than the one summed in).
    pub fn capped(n: usize, digits: u32, max_group_sum: u64) -> Self {
        let budget = 1u64 << digits;
        let groups = (n as u64).div_ceil(4).max(1);
        let group_sum = (budget / groups).min(max_group_sum);
        if group_sum >= 1 {
            return Self::Dense { group_sum };
        }
        let mut group = 8u64;
        while (n as u64).div_ceil(group) > budget {
            group *= 2;
        }
        Self::Sparse { group }
    }

    /// The most the values of `n` elements can sum to: at most `2^digits`.
    pub fn max_total(self, n: usize) -> u64 {
        match self {
            Self::Dense { group_sum } => (n as u64).div_ceil(4) * group_sum,
            Self::Sparse { group } => (n as u64).div_ceil(group),
        }
    }

    /// Element `i`'s value.
    pub fn value(self, seed: u64, i: u64) -> u64 {
        match self {
            Self::Dense { group_sum } => {
                let bits = splitmix_at(seed, i / 4);
                let (base, t) = if group_sum >= 4 {
                    (1, group_sum - 4)
                } else {
                    (0, group_sum)
                };
                let mut cuts = [0u64; 3];
                for (k, c) in cuts.iter_mut().enumerate() {
                    *c = (((bits >> (16 * k)) & 0xFFFF) * (t + 1)) >> 16;
                }
                cuts.sort_unstable();
                let part = match i % 4 {
                    0 => cuts[0],
                    1 => cuts[1] - cuts[0],
                    2 => cuts[2] - cuts[1],
                    _ => t - cuts[2],
                };
                base + part
            }
            Self::Sparse { group } => {
                let place = splitmix_at(seed, i / group) % group;
                u64::from(i % group == place)
            }
        }
    }
}

/// The layout of the exactly summable input of `n` elements of `T`: its total within
/// `2^digits` of the type it is summed in (`T`, or `f32` for the 16-bit floats, which
/// accumulate in `f32`), each element an integer `T` holds exactly (at most 1020, and at most
/// 256 for `bf16`).
pub fn layout_of<T: ferrocuda::runtime::element::Element>(n: usize) -> ExactLayout {
    if T::TYPE.is_half() {
        let cap = MAX_GROUP_SUM.min(1 << T::EXACT_INT_BITS);
        ExactLayout::capped(n, f32::MANTISSA_DIGITS, cap)
    } else {
        ExactLayout::of(n, T::EXACT_INT_BITS)
    }
}

/// Element `i` of the exactly summable input of `n` elements with `digits` significand bits.
pub fn exact_value(n: usize, seed: u64, digits: u32, i: usize) -> u64 {
    ExactLayout::of(n, digits).value(seed, i as u64)
}
