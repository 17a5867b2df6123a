//! The reproducible sum as `ferrocuda bench` (its `reproducible` row of the reduce family) and
//! `ferrocuda reduce --variant reproducible` time and check it: every level's kernel
//! event-timed as one operation (`sum_reproducible_to_device`, no host wait inside), the
//! result checked bit for bit against the CPU order.
use ferrocuda::reduce::{sum_reproducible_to_device, sum_reproducible_to_f32_device};
use ferrocuda::runtime::element::Element;
use ferrocuda::{DeviceBuffer, DeviceSlice, Gpu, Result};
use ferrocuda_lessons::cpu::Check;
use ferrocuda_lessons::cpu::reproducible::{Reproducible, same_sum};
use ferrocuda_lessons::timing::time_samples;

/// The variant name of the reproducible sum, in the bench and the CLI.
pub const REPRODUCIBLE: &str = "reproducible";

/// Timed runs of the reproducible sum and the check of the last one.
pub struct Measured<T> {
    /// Event-timed seconds per run.
    pub samples: Vec<f64>,
    /// The last run's result.
    pub got: T,
    /// Whether `got` has the bits of the CPU order's result (any NaN matches any NaN).
    pub check: Check,
}

/// Times `reps` runs over `inputs` in turn (after 3 warm-up runs) and checks the last one's
/// result against `want`, the CPU order's sum of the inputs' common content.
pub fn measure<T: Reproducible>(
    gpu: &Gpu,
    inputs: &[DeviceBuffer<T>],
    want: T,
    reps: usize,
) -> Result<Measured<T>> {
    measure_with(gpu, inputs, want, reps, sum_reproducible_to_device::<T>)
}

/// [`measure`] for the reproducible sum of 16-bit floats in `f32`
/// (`sum_reproducible_to_f32_device`); `want` is the CPU's `f32` order over the widened input.
pub fn measure_half<H: Element>(
    gpu: &Gpu,
    inputs: &[DeviceBuffer<H>],
    want: f32,
    reps: usize,
) -> Result<Measured<f32>> {
    measure_with(gpu, inputs, want, reps, sum_reproducible_to_f32_device::<H>)
}

fn measure_with<S: Element, R: Element + std::fmt::Debug>(
    gpu: &Gpu,
    inputs: &[DeviceBuffer<S>],
    want: R,
    reps: usize,
    enqueue: impl Fn(&Gpu, &DeviceSlice<S>, &mut DeviceSlice<R>) -> Result<()>,
) -> Result<Measured<R>> {
    let k = inputs.len();
    let mut results = (0..k)
        .map(|_| gpu.alloc::<R>(1, "reproducible sum result"))
        .collect::<Result<Vec<_>>>()?;
    for r in results.iter_mut() {
        gpu.poison_async(r)?;
    }
    let samples = time_samples(
        gpu,
        3,
        reps,
        |_| Ok(()),
        |i| enqueue(gpu, &inputs[i % k], &mut results[i % k]),
    )?;
    let got = gpu.download(&results[(reps.max(1) - 1) % k])?[0];
    // `{:?}` prints the shortest text that reads back to the same bits.
    let same = same_sum(got, want);
    let check = Check {
        passed: same,
        detail: if same {
            format!("the CPU order's bits ({got:?})")
        } else {
            format!("got {got:?}, the CPU order gives {want:?}")
        },
    };
    Ok(Measured {
        samples,
        got,
        check,
    })
}
