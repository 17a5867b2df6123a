//! How a GPU result is compared with the CPU's, and the exact-as-possible `f64` sum the
//! float references use.

/// The sum of `x` in `f64` with Neumaier compensation: within `2 * f64::EPSILON * sum(|x|)` of
/// the exact sum, the reference float reductions are checked against.
pub fn compensated_sum(x: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, c) = compensated_parts(x);
    sum + c
}

/// [`compensated_sum`] before its last step: the running sum and the accumulated compensation
/// apart, so that sums of parts can be combined without rounding each part first.
pub fn compensated_parts(x: impl IntoIterator<Item = f64>) -> (f64, f64) {
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
    (sum, c)
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
