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

/// Input values like the book's: integers `rand() & 0xFF`, floats uniform in [-1, 1).
pub trait Sample: crate::element::Element {
    /// One value.
    fn sample(rng: &mut SplitMix64) -> Self;
}
macro_rules! sample {
    (int: $($t:ty),*; float: $($f:ty),*) => {
        $(impl Sample for $t { fn sample(rng: &mut SplitMix64) -> Self { (rng.next_u64() & 0xFF) as $t } })*
        $(impl Sample for $f { fn sample(rng: &mut SplitMix64) -> Self { rng.next_f64_signed() as $f } })*
    };
}
sample!(int: i32, u32, i64, u64; float: f32, f64);

/// `n` values of [`Sample`] from `seed`: the input of `ferrocuda reduce`, `stencil` and `bench`.
pub fn book_input<T: Sample>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| T::sample(&mut rng)).collect()
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

impl Check {
    /// The verdict over a first run and a last timed run: the first one when both pass, else
    /// the first failure, saying which run it came from (a result that moves between runs of
    /// the same input is a race).
    pub fn first_then_last(first: Check, last: Check) -> Check {
        match (first.passed, last.passed) {
            (true, true) => first,
            (false, _) => Check {
                passed: false,
                detail: format!("first run: {}", first.detail),
            },
            (true, false) => Check {
                passed: false,
                detail: format!("last timed run: {}", last.detail),
            },
        }
    }
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

/// Where input index `j` of a stencil over `n` elements reads under `boundary`, or `None` when
/// it reads as zero (written apart from the kernels' own rule, as an oracle should be).
pub fn stencil_source(j: i64, n: usize, boundary: crate::stencil::Boundary) -> Option<usize> {
    use crate::stencil::Boundary;
    let len = n as i64;
    if (0..len).contains(&j) {
        return Some(j as usize);
    }
    match boundary {
        _ if n == 0 => None,
        Boundary::Zero => None,
        Boundary::Clamp => Some(j.clamp(0, len - 1) as usize),
        Boundary::Periodic => Some(j.rem_euclid(len) as usize),
    }
}

/// One output of the 1D stencil in `f64`: its value and the scale of its rounding error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StencilPoint {
    /// `sum c_k * x[i + k - R]`: products in `f64`, summed with [`compensated_sum`].
    pub value: f64,
    /// `sum |c_k * x[i + k - R]|`.
    pub scale: f64,
}

/// Output `i` of the stencil of `x` in `f64`.
pub fn stencil_point<T: crate::element::Element>(
    x: &[T],
    taps: &crate::stencil::Taps<T>,
    boundary: crate::stencil::Boundary,
    i: usize,
) -> StencilPoint {
    let r = taps.radius() as i64;
    let terms = (0..=2 * r).map(|k| {
        stencil_source(i as i64 + k - r, x.len(), boundary)
            .map_or(0.0, |s| taps.coefficient(k as usize) * x[s].to_f64())
    });
    StencilPoint {
        value: compensated_sum(terms.clone()),
        scale: terms.map(f64::abs).sum(),
    }
}

/// Output `i` of the 1D stencil of `x` on the CPU: for integers the wrapping sum, as the
/// kernels compute it; for floats [`stencil_point`]'s value rounded once.
///
/// # Panics
/// For weighted integer taps, which no kernel computes.
pub fn stencil_at<T: crate::element::Element>(
    x: &[T],
    taps: &crate::stencil::Taps<T>,
    boundary: crate::stencil::Boundary,
    i: usize,
) -> T {
    if T::TYPE.is_float() {
        return T::from_f64(stencil_point(x, taps, boundary, i).value);
    }
    assert!(!taps.is_weighted(), "integer stencils are sums only");
    let r = taps.radius() as i64;
    (0..=2 * r)
        .filter_map(|k| stencil_source(i as i64 + k - r, x.len(), boundary))
        .fold(T::default(), |acc, s| acc.add(x[s]))
}

/// The 1D stencil of `x` on the CPU: [`stencil_at`] for every output.
///
/// # Panics
/// For weighted integer taps, which no kernel computes.
pub fn stencil<T: crate::element::Element>(
    x: &[T],
    taps: &crate::stencil::Taps<T>,
    boundary: crate::stencil::Boundary,
) -> Vec<T> {
    (0..x.len())
        .map(|i| stencil_at(x, taps, boundary, i))
        .collect()
}

/// How far a float output of a stencil of radius `radius` may lie from [`stencil_point`]'s
/// `value`: `(2R + 3) * eps * scale` plus `f32::MIN_POSITIVE` for underflow.
///
/// The kernels add `2R + 1` terms one after the other, each step one rounding (a fused
/// multiply-add, or an add for sums): at most `(2R + 1) * eps / 2 * scale` off the exact
/// value. The reference itself is within `2.5 * eps_f64 * scale` (`f64` products, compensated
/// sum). Both together stay under `(2R + 3) * eps * scale` for every `R >= 1`.
pub fn stencil_tolerance<T: crate::element::Element>(radius: u32, scale: f64) -> f64 {
    (2 * radius + 3) as f64 * T::EPSILON * scale + f64::from(f32::MIN_POSITIVE)
}

/// Checks every output of a stencil of `x` (the GPU's `got`): bit-exact for integers, within
/// [`stencil_tolerance`] for floats; an output still holding the poison pattern fails unless
/// the reference rounds to it. Runs on all the host's cores.
///
/// # Panics
/// For weighted integer taps, which no kernel computes.
pub fn check_stencil<T: crate::element::Element>(
    x: &[T],
    taps: &crate::stencil::Taps<T>,
    boundary: crate::stencil::Boundary,
    got: &[T],
) -> Check {
    if got.len() != x.len() {
        return Check {
            passed: false,
            detail: format!("{} outputs for {} inputs", got.len(), x.len()),
        };
    }
    /// Failures, the first of them, and the largest error as a fraction of its bound.
    struct Tally {
        failures: usize,
        first: Option<String>,
        worst: f64,
    }
    let check_range = |range: std::ops::Range<usize>| {
        let mut t = Tally {
            failures: 0,
            first: None,
            worst: 0.0,
        };
        for i in range {
            let g = got[i];
            // The expected value is formatted only for a failure: formatting every element made
            // checking 2^28 outputs take minutes.
            let failure = if T::TYPE.is_float() {
                let p = stencil_point(x, taps, boundary, i);
                let bound = stencil_tolerance::<T>(taps.radius(), p.scale);
                let err = (g.to_f64() - p.value).abs();
                let rounded = T::from_f64(p.value);
                let unwritten = g.same_bits(T::poison()) && !rounded.same_bits(T::poison());
                t.worst = t.worst.max(err / bound);
                (err > bound || unwritten).then(|| format!("{} (± {bound:.1e})", p.value))
            } else {
                let w = stencil_at(x, taps, boundary, i);
                (!g.same_bits(w)).then(|| w.to_string())
            };
            if let Some(want) = failure {
                t.failures += 1;
                t.first
                    .get_or_insert_with(|| format!("first at {i}: got {g}, want {want}"));
            }
        }
        t
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let chunk = x.len().div_ceil(threads).max(1 << 16);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..x.len())
            .step_by(chunk)
            .map(|start| s.spawn(move || check_range(start..(start + chunk).min(x.len()))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("stencil check thread"))
            .collect()
    });
    let failures: usize = tallies.iter().map(|t| t.failures).sum();
    let worst = tallies.iter().map(|t| t.worst).fold(0.0, f64::max);
    match tallies.into_iter().find_map(|t| t.first) {
        Some(first) => Check {
            passed: false,
            detail: format!("{failures} of {} outputs wrong; {first}", x.len()),
        },
        None if T::TYPE.is_float() => Check {
            passed: true,
            detail: format!(
                "all {} within (2R + 3) eps sum|c x| (worst {:.0}% of its bound)",
                x.len(),
                100.0 * worst
            ),
        },
        None => Check {
            passed: true,
            detail: format!("all {} exact", x.len()),
        },
    }
}
