//! Reductions on the GPU: [`sum`], [`min`], [`max`], [`sum_i32_to_i64`], [`sum_to_f32`] (16-bit
//! floats summed in `f32`), a [`ReducePlan`] built once and run on many inputs, and the
//! reproducible float sum ([`sum_reproducible`]).
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
    sum_reproducible_to_device, sum_reproducible_to_f32, sum_reproducible_to_f32_device,
};

/// The sum of `input` (0 when empty; integers wrap). Deterministic: the same input on the same
/// device gives the same bits every run. A 16-bit float input ([`F16`], [`Bf16`]) is summed in
/// `f32` and the sum rounded once to its type ([`sum_to_f32`] keeps the `f32`).
///
/// [`F16`]: crate::runtime::element::F16
/// [`Bf16`]: crate::runtime::element::Bf16
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
    same_type(gpu, ReduceOp::Sum, input)
}

/// The minimum of `input`; an error when it is empty. Deterministic. A 16-bit float input is
/// compared in `f32`. NaN elements are ignored, as PTX `min` (IEEE 754 `minNum`) ignores them:
/// the result is the least of the other elements, and for an input of NaNs only it is the
/// identity, `+inf`, which is not an element.
pub fn min<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    same_type(gpu, ReduceOp::Min, input)
}

/// The maximum of `input`; an error when it is empty. Deterministic. As [`min`] for 16-bit
/// floats and NaNs (an input of NaNs only gives `-inf`).
pub fn max<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    same_type(gpu, ReduceOp::Max, input)
}

/// The sum of 16-bit floats ([`F16`], [`Bf16`]) in `f32`, as PyTorch sums `Half` and
/// `BFloat16`: every element widened exactly, the sum in `f32` (0 when empty). Deterministic.
/// An error for other element types.
///
/// # Example
/// ```no_run
/// # fn main() -> ferrocuda::Result<()> {
/// use ferrocuda::runtime::element::Bf16;
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let data: Vec<Bf16> = (0..1_000_000).map(|i| Bf16::from_f32((i % 10) as f32)).collect();
/// let device = gpu.upload(&data, "data")?;
/// assert_eq!(ferrocuda::reduce::sum_to_f32(&gpu, &device)?, 4_500_000.0);
/// # Ok(()) }
/// ```
///
/// [`F16`]: crate::runtime::element::F16
/// [`Bf16`]: crate::runtime::element::Bf16
pub fn sum_to_f32<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<f32> {
    if !T::TYPE.is_half() {
        return Err(crate::Error::Unsupported {
            what: format!(
                "sum_to_f32 of {}: only f16 and bf16 are summed into f32 (reduce::sum keeps {0})",
                T::TYPE
            ),
        });
    }
    fast::<T, f32>(gpu, ReduceOp::Sum, input)
}

/// `op` over `input` with the result in its own type: through `f32` for a 16-bit float (the
/// sum rounded once at the end; a minimum or maximum is an element, narrowed exactly).
fn same_type<T: Element>(gpu: &Gpu, op: ReduceOp, input: &DeviceSlice<T>) -> Result<T> {
    if T::TYPE.is_half() {
        let wide = fast::<T, f32>(gpu, op, input)?;
        return Ok(T::from_f64(wide as f64));
    }
    fast::<T, T>(gpu, op, input)
}

/// The sum of `i32` values in `i64`, so that it does not overflow (exact below 2^63).
pub fn sum_i32_to_i64(gpu: &Gpu, input: &DeviceSlice<i32>) -> Result<i64> {
    fast::<i32, i64>(gpu, ReduceOp::Sum, input)
}

fn fast<T: Element, A: Element>(gpu: &Gpu, op: ReduceOp, input: &DeviceSlice<T>) -> Result<A> {
    plan::cached::<T, A>(gpu, op, input)
}
