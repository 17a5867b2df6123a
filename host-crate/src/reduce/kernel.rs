//! The fast reduction's operators and kernels, by type: what the plans and the one-call
//! functions launch.
use ferrocuda_kernels::entry::Entry;

use crate::runtime::element::Element;

/// Threads per block of the fast reduction (tuned; any multiple of 32 up to 1024 is correct).
pub const FAST_BLOCK: u32 = 512;

/// The parameters of a fast reduction kernel of `T` into `A`: input, length, per-block
/// partials, ticket, result.
pub type FastArgs<T, A> = (*const T, usize, *mut A, *mut u32, *mut A);

/// The fast reduction kernel of `op` over `T` into `A` (`reduce_fast_<op>_<T>`,
/// `reduce_fast_sum_i32_to_i64`, or `reduce_fast_half_<op>_<T>` of a 16-bit float into `f32`),
/// `None` where there is none.
pub fn fast_entry<T: Element, A: Element>(op: ReduceOp) -> Option<Entry<FastArgs<T, A>>> {
    use ferrocuda_kernels::reduce as k;
    if let (Some(e), ReduceOp::Sum) = (k::reduce_fast_sum_i32_to_i64().retype(), op) {
        return Some(e);
    }
    let half = match op {
        ReduceOp::Sum => k::reduce_fast_half::<k::Sum, T>(),
        ReduceOp::Min => k::reduce_fast_half::<k::Min, T>(),
        ReduceOp::Max => k::reduce_fast_half::<k::Max, T>(),
    };
    if let Some(e) = half.and_then(|e| e.retype()) {
        return Some(e);
    }
    let same = match op {
        ReduceOp::Sum => k::reduce_fast::<k::Sum, T>(),
        ReduceOp::Min => k::reduce_fast::<k::Min, T>(),
        ReduceOp::Max => k::reduce_fast::<k::Max, T>(),
    };
    same?.retype()
}

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl ReduceOp {
    /// All three.
    pub const ALL: [ReduceOp; 3] = [Self::Sum, Self::Min, Self::Max];

    /// `sum`, `min`, `max`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }
}
