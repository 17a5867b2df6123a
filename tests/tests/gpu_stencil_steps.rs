//! GPU tests of the iterated stencil (迭代模板, several steps per pass): `Iteration::run` of
//! `steps` against the one-step stencil (`stencil::apply_into`) applied `steps` times, bit for
//! bit.
//!
//! One trial per element type x taps (the sum; random coefficients for `f32` and `f64`) x
//! radius x boundary. Each runs the sizes 0, 1, 31, a tile - 1, a tile, a tile + 1 and two tiles
//! and a half, with the array at a random element offset of its buffer (so the passes meet
//! every alignment of input and output), and the step counts 1, k - 1, k, k + 1 and 2k + 3
//! for the plan's k steps a pass and for 3 steps a pass (so every count is split over several
//! passes, unevenly, odd counts of passes included). The reference is the one-step stencil on
//! the same device, step after step, through arrays at the same offset (the 16-bit sums order
//! their adds by an output's lane in its 16-byte vector); every output element must have the
//! same bits. The step counts run the 16-bit sums past their range, so that a sum rounding to
//! the largest finite value or to infinity must round the same way in both.
//!
//! Also: an empty array, an array of the wrong length, and steps a pass out of range.
use std::process::ExitCode;

use anyhow::{Context, ensure};
use ferrocuda::runtime::element::Element;
use ferrocuda::stencil::{self, Boundary, Iteration, STEPS_BLOCK, Taps};
use ferrocuda::{DeviceBuffer, DeviceSlice, Error, Gpu, with_elem_type};
use ferrocuda_lessons::cpu::SplitMix64;
use ferrocuda_lessons::kernels::config::{
    STENCIL_RADII, STENCIL_STEPS_VECTORS_PER_THREAD, stencil_steps_per_pass,
};
use ferrocuda_tests::{TestResult, gpu_test, random_vec, run_gpu_suite};

fn main() -> ExitCode {
    let mut trials = Vec::new();
    for ty in stencil::STENCIL_TYPES {
        for weighted in [false, true]
            .into_iter()
            .filter(|&w| !w || (ty.is_float() && !ty.is_half()))
        {
            for &radius in &STENCIL_RADII {
                for boundary in Boundary::ALL {
                    let taps = if weighted { "weighted" } else { "sum" };
                    trials.push(with_elem_type!(ty, T => gpu_test(
                        &format!(
                            "steps_{taps}_{ty}_r{radius}_{}_equal_the_one_step_stencil_repeated",
                            boundary.name()
                        ),
                        move |gpu| sweep::<T>(gpu, weighted, radius, boundary),
                    )));
                }
            }
        }
    }
    trials.push(gpu_test(
        "steps_refuse_a_wrong_length_and_steps_a_pass_out_of_range",
        refusals,
    ));
    run_gpu_suite(trials)
}

/// Outputs of one tile of the iterated stencil for `T`.
fn tile<T>() -> usize {
    STEPS_BLOCK as usize * STENCIL_STEPS_VECTORS_PER_THREAD * (16 / size_of::<T>())
}

/// `x` after `steps` one-step stencils, ping-ponging with an array of its own, both `offset`
/// elements into their buffers (the iterated stencil's result is the one-step stencil's through
/// arrays of the caller's alignment).
fn one_steps<T: Element>(
    gpu: &Gpu,
    x: &DeviceSlice<T>,
    offset: usize,
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> anyhow::Result<Vec<T>> {
    let n = x.len();
    let mut a = gpu.alloc::<T>(n + offset, "reference a")?;
    let mut b = gpu.alloc::<T>(n + offset, "reference b")?;
    gpu.copy_on_device(x, &mut a.index_mut(offset..))?;
    for _ in 0..steps {
        stencil::apply_into(
            gpu,
            &a.index(offset..),
            &mut b.index_mut(offset..),
            taps,
            boundary,
        )?;
        std::mem::swap(&mut a, &mut b);
    }
    Ok(gpu.download(&a.index(offset..))?)
}

fn sweep<T: Element>(gpu: &Gpu, weighted: bool, radius: u32, boundary: Boundary) -> TestResult {
    let seed = 0x5eed ^ (u64::from(radius) << 8) ^ (boundary.code() as u64) ^ T::TYPE.size() as u64;
    let mut rng = SplitMix64::new(seed);
    let taps = if weighted {
        Taps::Weighted(random_vec::<T>(2 * radius as usize + 1, seed ^ 1))
    } else {
        Taps::Sum { radius }
    };
    let most = stencil_steps_per_pass(radius, (16 / size_of::<T>()) as u32) as usize;
    let t = tile::<T>();
    for n in [0, 1, 31, t - 1, t, t + 1, 2 * t + t / 2] {
        let offset = (rng.next_u64() % 8) as usize;
        let host = random_vec::<T>(n, seed ^ n as u64);
        let mut buffer: DeviceBuffer<T> = gpu.alloc::<T>(n + offset, "state")?;
        let input = gpu.upload(&host, "input")?;
        for per_pass in [most, 3.min(most)] {
            let mut iteration =
                Iteration::new(gpu, &taps, boundary, n)?.with_steps_per_pass(per_pass as u32)?;
            let mut counts = vec![1, per_pass.saturating_sub(1).max(1), per_pass, per_pass + 1];
            counts.push(2 * per_pass + 3);
            counts.dedup();
            for steps in counts {
                let passes = iteration.passes(steps);
                let what = || {
                    format!(
                        "{steps} steps of at most {per_pass} a pass, n = {n}, offset {offset}, \
                         passes {passes:?}"
                    )
                };
                let mut state = buffer.index_mut(offset..offset + n);
                gpu.copy_on_device(&input, &mut state)?;
                iteration.run(&mut state, steps).with_context(what)?;
                iteration.finish().with_context(what)?;
                let got = gpu.download(&buffer.index(offset..offset + n))?;
                let want = one_steps(gpu, &input, offset, &taps, boundary, steps)?;
                if let Some(i) = (0..n).find(|&i| !got[i].same_bits(want[i])) {
                    anyhow::bail!(
                        "`{}`, {}: element {i} is {:?}, the one-step stencil gives {:?}",
                        iteration.symbol(),
                        what(),
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }
    Ok(())
}

fn refusals(gpu: &Gpu) -> TestResult {
    let taps = Taps::<f32>::Sum { radius: 3 };
    let mut x = gpu.upload(&[1.0f32; 100], "x")?;
    let mut iteration = Iteration::new(gpu, &taps, Boundary::Zero, 99)?;
    let e = iteration.run(&mut x, 2).unwrap_err();
    ensure!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 99,
                found: 100,
                ..
            }
        ),
        "{e}"
    );
    ensure!(e.to_string().contains("stencil_1d_steps"), "{e}");
    let most = stencil_steps_per_pass(3, 4);
    for bad in [0, most + 1] {
        let e = match Iteration::new(gpu, &taps, Boundary::Zero, 100)?.with_steps_per_pass(bad) {
            Err(e) => e,
            Ok(_) => anyhow::bail!("{bad} steps a pass accepted"),
        };
        ensure!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        ensure!(e.to_string().contains(&format!("1 to {most}")), "{e}");
    }
    let mut empty = gpu.alloc::<f32>(0, "empty")?;
    stencil::iterate(gpu, &mut empty, &taps, Boundary::Periodic, 5)?;
    let mut ones = gpu.upload(&[1i32; 1000], "ones")?;
    stencil::iterate(
        gpu,
        &mut ones,
        &Taps::Sum { radius: 1 },
        Boundary::Periodic,
        4,
    )?;
    ensure!(
        gpu.download(&ones)?.iter().all(|&v| v == 81),
        "3^4 expected"
    );
    Ok(())
}
