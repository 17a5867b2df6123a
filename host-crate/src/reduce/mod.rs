//! Reductions on the GPU: [`sum`], [`min`], [`max`], [`sum_i32_to_i64`], a [`ReducePlan`] built
//! once and run on many inputs, and the reproducible float sum ([`sum_reproducible`]).
//!
//! Empty input: `sum` returns 0 without launching anything; `min` and `max` of nothing are
//! undefined and return [`Error::InvalidArgument`](crate::Error::InvalidArgument). Integer sums
//! wrap (they are exact modulo 2^bits, as the kernels compute them).
//!
//! The notes' textbook variants, run one by one and measured, are lessons: the
//! `ferrocuda-lessons` crate, which the `ferrocuda` command line and the tests use.
use crate::runtime::memory::DeviceSlice;

use crate::runtime::element::Element;
use crate::runtime::error::Result;
use crate::runtime::gpu::Gpu;

mod kernel;
mod plan;
mod reproducible;
pub use kernel::{FAST_BLOCK, FastArgs, ReduceOp, fast_entry};
pub use plan::ReducePlan;
pub(crate) use plan::cached_many;
pub use reproducible::{
    Reproducible, chunk_sums_to_device, chunks_per_level, reproducible_chunk, sum_reproducible,
    sum_reproducible_to_device,
};

/// The sum of `input` (0 when empty; integers wrap). Deterministic: the same input on the same
/// device gives the same bits every run.
///
/// # Example
/// ```no_run
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let data: Vec<f32> = (0..1_000_000).map(|i| (i % 10) as f32).collect();
/// let device = gpu.upload(&data, "data")?; // or any kernel's output, already on the device
/// assert_eq!(ferrocuda::reduce::sum(&gpu, &device)?, 4_500_000.0);
/// assert_eq!(ferrocuda::reduce::max(&gpu, &device)?, 9.0);
/// # Ok(()) }
/// ```
pub fn sum<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Sum, input)
}

/// The minimum of `input`; an error when it is empty. Deterministic.
pub fn min<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Min, input)
}

/// The maximum of `input`; an error when it is empty. Deterministic.
pub fn max<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Max, input)
}

/// The sum of `i32` values in `i64`, so that it does not overflow (exact below 2^63).
pub fn sum_i32_to_i64(gpu: &Gpu, input: &DeviceSlice<i32>) -> Result<i64> {
    fast::<i32, i64>(gpu, ReduceOp::Sum, input)
}

fn fast<T: Element, A: Element>(gpu: &Gpu, op: ReduceOp, input: &DeviceSlice<T>) -> Result<A> {
    plan::cached::<T, A>(gpu, op, input)
}
