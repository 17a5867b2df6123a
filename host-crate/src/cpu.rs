//! CPU references (oracles) for every kernel, in one place. The GPU tests and the CLI's checks
//! compare against these.

/// `out[i] = a * x[i] + y[i]`, rounded as the kernel rounds (a multiply then an add, not fused).
pub fn saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a * x + y).collect()
}

/// A model of one warp executing the PTX `shfl.sync` and `vote.sync` instructions, lane by
/// lane, exactly as the PTX ISA specifies them (including widths and deltas past a segment).
pub mod warp {
    /// Lanes per warp.
    pub const WARP_SIZE: u32 = ferrocuda_kernels::config::WARP_SIZE;

    /// The four shuffle modes (numbered as the `selftest_shfl_*` kernels expect).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ShflMode {
        /// `__shfl_sync`: read lane `b` of the segment.
        Idx = 0,
        /// `__shfl_up_sync`: read lane `lane - b`.
        Up = 1,
        /// `__shfl_down_sync`: read lane `lane + b`.
        Down = 2,
        /// `__shfl_xor_sync`: read lane `lane ^ b`.
        Xor = 3,
    }

    impl ShflMode {
        /// All four.
        pub const ALL: [ShflMode; 4] = [ShflMode::Idx, ShflMode::Up, ShflMode::Down, ShflMode::Xor];
    }

    /// The lane whose value `lane` receives from a shuffle of `mode` with operand `b` within
    /// segments of `width` lanes (PTX ISA, `shfl.sync`: a source outside the allowed range
    /// yields the lane's own value).
    pub fn shfl_source(mode: ShflMode, lane: u32, b: u32, width: u32) -> u32 {
        assert!(width.is_power_of_two() && width <= WARP_SIZE && lane < WARP_SIZE);
        let segmask = (WARP_SIZE - width) & 0x1f;
        let cval = if mode == ShflMode::Up { 0 } else { 0x1f };
        let max_lane = ((lane & segmask) | (cval & !segmask)) as i64;
        let min_lane = (lane & segmask) as i64;
        let (lane, b) = (lane as i64, (b & 0x1f) as i64);
        let (j, ok) = match mode {
            ShflMode::Up => (lane - b, lane - b >= max_lane),
            ShflMode::Down => (lane + b, lane + b <= max_lane),
            ShflMode::Xor => (lane ^ b, (lane ^ b) <= max_lane),
            ShflMode::Idx => (
                min_lane | (b & !(segmask as i64)),
                (min_lane | (b & !(segmask as i64))) <= max_lane,
            ),
        };
        if ok { j as u32 } else { lane as u32 }
    }

    /// A whole-warp shuffle: the value each lane in `mask` receives, or `None` for lanes
    /// outside `mask` and lanes whose source lane is outside `mask` (undefined in CUDA).
    pub fn shfl<T: Copy>(
        mode: ShflMode,
        values: &[T],
        mask: u32,
        b: u32,
        width: u32,
    ) -> Vec<Option<T>> {
        (0..values.len() as u32)
            .map(|lane| {
                if mask & (1 << lane) == 0 {
                    return None;
                }
                let src = shfl_source(mode, lane, b, width);
                (mask & (1 << src) != 0 && (src as usize) < values.len())
                    .then(|| values[src as usize])
            })
            .collect()
    }

    /// `__ballot_sync`: bit `i` set when lane `i` is in `mask` and its predicate holds.
    pub fn ballot(predicates: &[bool], mask: u32) -> u32 {
        predicates
            .iter()
            .enumerate()
            .filter(|&(i, &p)| p && mask & (1 << i) != 0)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// `__any_sync`.
    pub fn any(predicates: &[bool], mask: u32) -> bool {
        ballot(predicates, mask) != 0
    }

    /// `__all_sync`: every lane in `mask` (that exists) holds its predicate.
    pub fn all(predicates: &[bool], mask: u32) -> bool {
        let existing = if predicates.len() >= 32 {
            u32::MAX
        } else {
            (1u32 << predicates.len()) - 1
        };
        ballot(predicates, mask) == mask & existing
    }
}

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
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_f64_signed(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// The sum of `x` in `f64` with Neumaier compensation: within `2 * f64::EPSILON * sum(|x|)` of
/// the exact sum, the reference float reductions are checked against.
pub fn compensated_sum(x: impl IntoIterator<Item = f64>) -> f64 {
    let (mut sum, mut c) = (0.0f64, 0.0f64);
    for v in x {
        let t = sum + v;
        c += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
    }
    sum + c
}

/// What a reduction of some input must produce, computed on the CPU.
#[derive(Clone, Debug)]
pub struct ReduceReference<A> {
    /// The exact expected value where the result is exact: integer sums (wrapping), `min`,
    /// `max`. `None` for float sums, checked against `sum` instead.
    pub exact: Option<A>,
    /// The sum in `f64` (compensated).
    pub sum: f64,
    /// `sum(|x|)`, the scale of a float sum's rounding error.
    pub abs_sum: f64,
}

/// Whether a GPU result agrees with the CPU, and by how much it differs.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Within the stated bound (or exactly equal, for exact results).
    pub passed: bool,
    /// `exact` or `|err| = .. <= bound ..`, or what differs.
    pub detail: String,
}

impl<A: crate::element::Element> ReduceReference<A> {
    /// The reference for `op` over `x`, accumulating into `A` (the same type, or `i64` for the
    /// widening sum of `i32`).
    pub fn of<T: crate::element::Element>(
        op: crate::reduce::ReduceOp,
        x: &[T],
        widen: impl Fn(T) -> A,
    ) -> Self {
        use crate::reduce::ReduceOp;
        let exact = match op {
            ReduceOp::Sum if A::TYPE.is_float() => None,
            ReduceOp::Sum => Some(x.iter().fold(A::default(), |a, &v| a.add(widen(v)))),
            ReduceOp::Min => x.iter().map(|&v| widen(v)).reduce(A::min_of),
            ReduceOp::Max => x.iter().map(|&v| widen(v)).reduce(A::max_of),
        };
        Self {
            exact,
            sum: compensated_sum(x.iter().map(|v| v.to_f64())),
            abs_sum: compensated_sum(x.iter().map(|v| v.to_f64().abs())),
        }
    }

    /// Checks `got`: bit-equal to `exact` when there is one; otherwise a float sum within
    /// `(depth + 2) * eps * sum(|x|)` of the compensated `f64` sum, where `depth` bounds the
    /// roundings on any element's path to the result (see `ReduceRun::rounding_depth`).
    pub fn check(&self, got: A, depth: f64) -> Check {
        match self.exact {
            Some(want) if got.same_bits(want) => Check {
                passed: true,
                detail: "exact".into(),
            },
            Some(want) => Check {
                passed: false,
                detail: format!("got {got}, want {want}"),
            },
            None => {
                let err = (got.to_f64() - self.sum).abs();
                let bound =
                    (depth + 2.0) * A::EPSILON * self.abs_sum + f64::from(f32::MIN_POSITIVE);
                let passed = err <= bound && got.to_f64().is_finite();
                Check {
                    passed,
                    detail: format!(
                        "|err| = {err:.2e} {} {bound:.2e}",
                        if passed { "<=" } else { ">" }
                    ),
                }
            }
        }
    }
}
