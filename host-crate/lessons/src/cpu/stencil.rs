//! The 1D stencil as the CPU computes it: the boundary rule, the taps, and every output.
use ferrocuda::stencil::{Boundary, Taps};
use ferrocuda_lesson_kernels::config::STENCIL_MAX_TAPS;

use super::check::{Check, compensated_sum};
use ferrocuda::runtime::element::{ElemType, Element};

/// Where input index `j` of a stencil over `n` elements reads under `boundary`, or `None` when
/// it reads as zero (written apart from the kernels' own rule, as an oracle should be).
pub fn stencil_source(j: i64, n: usize, boundary: Boundary) -> Option<usize> {
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
pub fn stencil_point<T: Element>(
    x: &[T],
    taps: &Taps<T>,
    boundary: Boundary,
    i: usize,
) -> StencilPoint {
    let r = taps.radius() as i64;
    // The terms once, into a buffer as long as the widest window.
    let mut terms = [0.0f64; STENCIL_MAX_TAPS];
    let terms = &mut terms[..=2 * r as usize];
    let first = i as i64 - r;
    if first >= 0 && first + 2 * r < x.len() as i64 {
        // The whole window inside the array: every boundary rule reads the element itself.
        for (k, t) in terms.iter_mut().enumerate() {
            *t = taps.coefficient(k) * x[first as usize + k].to_f64();
        }
    } else {
        for (k, t) in terms.iter_mut().enumerate() {
            *t = stencil_source(first + k as i64, x.len(), boundary)
                .map_or(0.0, |s| taps.coefficient(k) * x[s].to_f64());
        }
    }
    if terms.iter().any(|t| !t.is_finite()) {
        // An infinity or a NaN among the terms: the plain sum is what every order gives (NaN
        // for a NaN or for infinities of both signs, else the infinity), where the compensated
        // sum would turn `inf - inf` in its correction into a NaN.
        return StencilPoint {
            value: terms.iter().sum(),
            scale: f64::INFINITY,
        };
    }
    // A sum of zeros is -0 only when every term is -0 (as an IEEE sum in any order rounds it);
    // the compensated sum starts from +0.
    let negative_zero = terms.iter().all(|t| t.to_bits() == (-0.0f64).to_bits());
    StencilPoint {
        value: if negative_zero {
            -0.0
        } else {
            compensated_sum(terms.iter().copied())
        },
        scale: terms.iter().map(|t| t.abs()).sum(),
    }
}

/// Output `i` of the 1D stencil of `x` on the CPU: for integers the wrapping sum, as the
/// kernels compute it; for floats [`stencil_point`]'s value rounded once.
///
/// # Panics
/// For weighted integer taps, which no kernel computes.
pub fn stencil_at<T: Element>(x: &[T], taps: &Taps<T>, boundary: Boundary, i: usize) -> T {
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
pub fn stencil<T: Element>(x: &[T], taps: &Taps<T>, boundary: Boundary) -> Vec<T> {
    (0..x.len())
        .map(|i| stencil_at(x, taps, boundary, i))
        .collect()
}

/// How far a float output of a stencil of radius `radius` may lie from `p.value`, the exact
/// output ([`stencil_point`]).
///
/// The kernels compute an output from its `2R + 1` terms with at most `2R + 1` roundings in
/// the arithmetic type (a chain of fused multiply-adds, `2R` adds for a sum, or for sums of
/// 16-bit floats two chains that the outputs of a vector share, joined by one add; every such
/// order has the same bound): at most `(2R + 1) * eps / 2 * scale` off the exact value,
/// `scale` being `sum |c_k * x|`, as long as no partial sum overflows. The reference itself
/// is within `2.5 * eps_f64 * scale` (`f64` products, compensated sum). Both together stay
/// under `(2R + 3) * eps * scale` for every `R >= 1`, plus `f32::MIN_POSITIVE` for underflow.
///
/// The 16-bit floats add in `f32` and round once to their type, so their bound is that of
/// `f32`, `a` (with `2R + 3` times `f32`'s smallest subnormal for the roundings below its
/// normal range), plus the one rounding: half the spacing of the 16-bit values at `|value| +
/// a` (at least half its smallest subnormal). That is half a unit in the last place of the
/// output plus a few `f32` roundings, as tight as the `f32` check: an output one unit off
/// fails.
pub fn stencil_tolerance<T: Element>(radius: u32, p: &StencilPoint) -> f64 {
    let taps = (2 * radius + 3) as f64;
    if T::TYPE.is_half() {
        // `f32` keeps its subnormals (PTX `add.rn.f32` has no `.ftz`): each rounding below its
        // normal range is off by at most half of `f32`'s smallest subnormal.
        let a = taps * f64::from(f32::EPSILON) * p.scale + taps * f64::from(f32::from_bits(1));
        a + half_ulp::<T>(p.value.abs() + a)
    } else {
        taps * T::EPSILON * p.scale + f64::from(f32::MIN_POSITIVE)
    }
}

/// Half the spacing of the values of the float type `T` at `y >= 0`: the most that rounding a
/// value of at most `y` to `T` moves it.
fn half_ulp<T: Element>(y: f64) -> f64 {
    // `EPSILON` is the spacing in [1, 2); in [2^e, 2^(e+1)) it is `EPSILON * 2^e`.
    let binade = if y > 0.0 {
        2f64.powi(y.log2().floor() as i32)
    } else {
        0.0
    };
    (T::EPSILON * binade).max(T::MIN_SUBNORMAL) / 2.0
}

/// The largest finite value of the type the kernels add `T` in (`f32` for `f32` and the 16-bit
/// floats, `f64` for `f64`).
fn accumulator_max<T: Element>() -> f64 {
    if T::TYPE == ElemType::F64 {
        f64::MAX
    } else {
        f64::from(f32::MAX)
    }
}

/// Whether `got` is a right float output of a stencil of radius `radius` whose exact output is
/// `p`: within [`stencil_tolerance`] of a finite value, with the sign of a `-0` one (a sum of
/// `-0` terms only); the same infinity for an infinite one; a NaN for a NaN one; an infinity
/// for a finite value only where a value within the bound rounds to that infinity (a sum that
/// overflows the type); never the poison pattern, unless the value rounds to it.
///
/// Where `scale` exceeds the largest value of the type the kernels add in, a partial sum may
/// overflow it and the order of the adds decides between an infinity and a NaN (`+M + M - M -
/// M` is `inf - inf` in pairs, `inf` in a chain); there any infinity or NaN is taken, and a
/// finite output must still be within the bound.
pub fn stencil_output_ok<T: Element>(got: T, p: &StencilPoint, radius: u32) -> bool {
    output_within::<T>(got, p, stencil_tolerance::<T>(radius, p))
}

/// [`stencil_output_ok`] with its bound, `stencil_tolerance::<T>(radius, p)`, given.
fn output_within<T: Element>(got: T, p: &StencilPoint, bound: f64) -> bool {
    if got.same_bits(T::poison()) && !T::from_f64(p.value).same_bits(T::poison()) {
        return false;
    }
    let g = got.to_f64();
    if p.value.is_nan() {
        return g.is_nan();
    }
    if p.value.is_infinite() {
        return g == p.value;
    }
    if !g.is_finite() && p.scale > accumulator_max::<T>() * (1.0 - 1e-6) {
        return true;
    }
    if g.is_infinite() {
        return T::from_f64(p.value + bound.copysign(g)).to_f64() == g;
    }
    if p.value == 0.0 && p.value.is_sign_negative() && g == 0.0 {
        return g.is_sign_negative();
    }
    approx::abs_diff_eq!(g, p.value, epsilon = bound)
}

/// Checks every output of a stencil of `x` (the GPU's `got`): bit-exact for integers, within
/// [`stencil_tolerance`] for floats; an output still holding the poison pattern fails unless
/// the reference rounds to it. Runs on all the host's cores.
///
/// # Panics
/// For weighted integer taps, which no kernel computes.
pub fn check_stencil<T: Element>(x: &[T], taps: &Taps<T>, boundary: Boundary, got: &[T]) -> Check {
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
                let bound = stencil_tolerance::<T>(taps.radius(), &p);
                if p.value.is_finite() && g.to_f64().is_finite() {
                    t.worst = t.worst.max((g.to_f64() - p.value).abs() / bound);
                }
                (!output_within(g, &p, bound)).then(|| format!("{} (± {bound:.1e})", p.value))
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
                "all {} within their bounds (worst {:.0}% of its bound)",
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
