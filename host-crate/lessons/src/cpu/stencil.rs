//! The 1D stencil as the CPU computes it: the boundary rule, the taps, and every output.
use ferrocuda::stencil::{Boundary, Taps};
use ferrocuda_lesson_kernels::config::STENCIL_MAX_TAPS;

use super::check::{Check, compensated_sum};
use ferrocuda::runtime::element::Element;

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
    StencilPoint {
        value: compensated_sum(terms.iter().copied()),
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

/// How far a float output of a stencil of radius `radius` may lie from [`stencil_point`]'s
/// `value`: `(2R + 3) * eps * scale` plus `f32::MIN_POSITIVE` for underflow.
///
/// The kernels add `2R + 1` terms one after the other, each step one rounding (a fused
/// multiply-add, or an add for sums): at most `(2R + 1) * eps / 2 * scale` off the exact
/// value. The reference itself is within `2.5 * eps_f64 * scale` (`f64` products, compensated
/// sum). Both together stay under `(2R + 3) * eps * scale` for every `R >= 1`.
pub fn stencil_tolerance<T: Element>(radius: u32, scale: f64) -> f64 {
    (2 * radius + 3) as f64 * T::EPSILON * scale + f64::from(f32::MIN_POSITIVE)
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
