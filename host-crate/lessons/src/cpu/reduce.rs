//! The reduction as the CPU computes it: what each operation means and what a GPU result must be.
use super::check::{Check, compensated_parts, compensated_sum};
use ferrocuda::reduce::ReduceOp;
use ferrocuda::runtime::element::Element;

/// What a reduction of some input must produce, computed on the CPU.
#[derive(Clone, Debug)]
pub struct ReduceReference<A> {
    /// The exact expected value where the result is exact: integer sums (wrapping), `min`,
    /// `max`, and float sums of integer values whose `sum(|x|)` is at most `2^EXACT_INT_BITS` (every
    /// partial sum in any order is then exact: see [`exact`](super::exact)). `None` for other
    /// float sums, checked against `sum` with a rounding bound instead.
    pub exact: Option<A>,
    /// The sum in `f64` (compensated).
    pub sum: f64,
    /// `sum(|x|)`, the scale of a float sum's rounding error.
    pub abs_sum: f64,
    /// `exact` is a float sum: compared by value, so that `-0` and `+0` (the sum of zeros in
    /// different orders) both pass. `min` and `max` keep the same bits.
    float_sum: bool,
}

impl<A: Element> ReduceReference<A> {
    /// The reference for `op` over `x`, accumulating into `A` (the same type, or `i64` for the
    /// widening sum of `i32`). Runs on all the host's cores ([`Split`](super::parallel::Split)):
    /// each thread reduces one stretch. Integer sums, `min` and `max` combine exactly; the
    /// float sums combine each stretch's running sum and compensation in one more compensated
    /// sum, so they can differ from a one-pass sum in the last bits.
    pub fn of<T: Element>(op: ReduceOp, x: &[T], widen: impl Fn(T) -> A + Sync) -> Self {
        let parts = super::parallel::Split::host().map(x, 1, |part| {
            let integral = op == ReduceOp::Sum
                && A::TYPE.is_float()
                && part.iter().all(|v| {
                    let v = v.to_f64();
                    v.is_finite() && v.fract() == 0.0
                });
            let exact = match op {
                ReduceOp::Sum if A::TYPE.is_float() => None,
                ReduceOp::Sum => Some(part.iter().fold(A::default(), |a, &v| a.add(widen(v)))),
                ReduceOp::Min => part.iter().map(|&v| widen(v)).reduce(A::min_of),
                ReduceOp::Max => part.iter().map(|&v| widen(v)).reduce(A::max_of),
            };
            (
                exact,
                compensated_parts(part.iter().map(|v| v.to_f64())),
                compensated_parts(part.iter().map(|v| v.to_f64().abs())),
                integral,
            )
        });
        let combine = match op {
            ReduceOp::Sum => A::add,
            ReduceOp::Min => A::min_of,
            ReduceOp::Max => A::max_of,
        };
        let sum = compensated_sum(parts.iter().flat_map(|p| [p.1.0, p.1.1]));
        let abs_sum = compensated_sum(parts.iter().flat_map(|p| [p.2.0, p.2.1]));
        let exact_float_sum = op == ReduceOp::Sum
            && parts.iter().all(|p| p.3)
            && abs_sum <= (1u64 << A::EXACT_INT_BITS) as f64;
        Self {
            // `map` gives at least one part (an empty input is one empty part, whose integer
            // sum is 0), so an empty input needs no case of its own.
            exact: if exact_float_sum {
                // An integer of at most 2^EXACT_INT_BITS: `sum` holds it exactly, and so does `A`.
                Some(A::from_f64(sum))
            } else {
                parts.iter().filter_map(|p| p.0).reduce(combine)
            },
            sum,
            abs_sum,
            float_sum: exact_float_sum,
        }
    }

    /// Checks `got`: equal to `exact` when there is one (bit for bit; for float sums `-0 == +0`,
    /// and NaN, the poison included, equals nothing); otherwise a finite float sum within
    /// `(depth + 2) * eps * sum(|x|)` of the compensated `f64` sum, where `depth` bounds the
    /// roundings on any element's path to the result (see [`rounding_depth`](crate::reduce::rounding_depth)).
    pub fn check(&self, got: A, depth: f64) -> Check {
        match self.exact {
            Some(want)
                if got.same_bits(want) || (self.float_sum && got.to_f64() == want.to_f64()) =>
            {
                Check {
                    passed: true,
                    detail: "exact".into(),
                }
            }
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

/// The CPU reference of a [`ReduceOp`].
pub trait ReduceOpCpu {
    /// The result of this operation over `x` on the CPU (`None` for `min`/`max` of nothing).
    fn cpu<T: Element>(self, x: &[T]) -> Option<T>;
}

impl ReduceOpCpu for ReduceOp {
    fn cpu<T: Element>(self, x: &[T]) -> Option<T> {
        match self {
            Self::Sum => Some(x.iter().fold(T::default(), |a, &b| a.add(b))),
            Self::Min => x.iter().copied().reduce(T::min_of),
            Self::Max => x.iter().copied().reduce(T::max_of),
        }
    }
}
