//! The `steps` family of `ferrocuda bench`: the iterated stencil (`stencil::Iteration`, several
//! steps per pass over memory) against the one-step stencil applied as many times
//! (`stencil::apply_into`, ping-ponging two arrays), in the same run.
//!
//! A row times `steps` applications of the stencil of one radius and type (a box filter for
//! `f32` and `f64`, the sum for the others), both ways, in
//! turn (each sample of one is followed by a sample of the other, so that both see the same
//! clocks and temperature). Its `one-step` baseline is the repeated stencil: its speedup is the
//! ratio of time steps per second. `bytes` counts the passes over memory the iteration makes
//! (one read and one write each), so `gbs` is what it moves, and the time steps per second are
//! `steps / median`. The check: both results have the same bits, element for element.
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::stencil::{self, Boundary, Iteration, Taps};
use ferrocuda::{Gpu, Result, with_elem_type};
use ferrocuda_lessons::cpu::random_vec;
use ferrocuda_lessons::kernels::config::stencil_steps_per_pass;
use ferrocuda_lessons::timing::{Stats, time_samples};

use super::report::{Baseline, BaselineCheck, Row};

/// What the `steps` family measures.
#[derive(Clone, Debug)]
pub struct StepsConfig {
    /// Radii of the rows (empty: no rows).
    pub radii: Vec<u32>,
    /// Elements of the array.
    pub n: usize,
    /// Time steps a row applies.
    pub steps: usize,
    /// Steps a pass to time besides the plan's (each at most the kernel's most).
    pub per_pass: Vec<u32>,
}

/// The rows of `cfg` for every type of `types` the stencil has, `reps` samples each.
pub fn measure(gpu: &Gpu, cfg: &StepsConfig, types: &[ElemType], reps: usize) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &ty in types
        .iter()
        .filter(|t| ferrocuda::stencil::STENCIL_TYPES.contains(t))
    {
        for &radius in &cfg.radii {
            with_elem_type!(ty, T => rows.extend(measure_one::<T>(gpu, cfg, radius, reps)?));
        }
    }
    Ok(rows)
}

/// Whether the rows of `T` use the weighted kernel (f32 and f64).
fn ty_is_weighted<T: Element>() -> bool {
    T::TYPE.is_float() && !T::TYPE.is_half()
}

fn measure_one<T: Element>(
    gpu: &Gpu,
    cfg: &StepsConfig,
    radius: u32,
    reps: usize,
) -> Result<Vec<Row>> {
    let (n, steps) = (cfg.n, cfg.steps);
    // A box filter (every coefficient `1 / (2R + 1)`) for f32 and f64, whose values stay in
    // `[-1, 1)` however many steps, so that the check compares ordinary numbers; the sum for
    // the others (i32 wraps; the 16-bit floats have no weighted kernel).
    let (taps, name) = if ty_is_weighted::<T>() {
        let c = T::from_f64(1.0 / f64::from(2 * radius + 1));
        (Taps::Weighted(vec![c; 2 * radius as usize + 1]), "box")
    } else {
        (Taps::<T>::Sum { radius }, "sum")
    };
    let boundary = Boundary::Periodic;
    let host = random_vec::<T>(n, 0x57e9 ^ u64::from(radius));
    let input = gpu.upload(&host, "steps input")?;
    let mut state = gpu.alloc::<T>(n, "steps state")?;
    let (mut a, mut b) = (
        gpu.alloc::<T>(n, "one-step a")?,
        gpu.alloc::<T>(n, "one-step b")?,
    );
    // The plan's depth, then the others asked for that the kernel applies (a depth past its
    // most for this radius is left out, said on stderr).
    let most = stencil_steps_per_pass(radius, (16 / size_of::<T>()) as u32);
    let mut depths = vec![most];
    for &k in &cfg.per_pass {
        if k > most {
            eprintln!(
                "bench: steps: R = {radius}, {}: {k} steps a pass is past the kernel's {most}; left out",
                T::TYPE
            );
        } else if !depths.contains(&k) {
            depths.push(k);
        }
    }
    let mut rows = Vec::new();
    for k in depths {
        let mut iteration = Iteration::new(gpu, &taps, boundary, n)?.with_steps_per_pass(k)?;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for rep in 0..reps.max(1) + 1 {
            gpu.copy_on_device(&input, &mut a)?;
            let one = time_samples(
                gpu,
                0,
                1,
                |_| Ok(()),
                |_| {
                    for _ in 0..steps {
                        stencil::apply_into(gpu, &a, &mut b, &taps, boundary)?;
                        std::mem::swap(&mut a, &mut b);
                    }
                    Ok(())
                },
            )?;
            gpu.copy_on_device(&input, &mut state)?;
            let fused = time_samples(gpu, 0, 1, |_| Ok(()), |_| iteration.run(&mut state, steps))?;
            // The first sample of each is a warm-up.
            if rep > 0 {
                theirs.extend(one);
                ours.extend(fused);
            }
        }
        iteration.finish()?;
        let (got, want) = (gpu.download(&state)?, gpu.download(&a)?);
        let differ = (0..n).find(|&i| !got[i].same_bits(want[i]));
        let check = match differ {
            None => format!("{n} elements, the same bits as {steps} one-step stencils"),
            Some(i) => format!(
                "element {i}: {:?}, the one-step stencil {:?} ({steps} steps)",
                got[i], want[i]
            ),
        };
        let (s, o) = (
            Stats::from_samples(ours.clone()),
            Stats::from_samples(theirs),
        );
        let median_us = s.median_s * 1e6;
        let bytes = iteration.bytes(steps);
        rows.push(Row {
            family: "steps".into(),
            variant: format!("iterate {name} r{radius} k{k}"),
            ty: T::TYPE.name().into(),
            n: n as u64,
            block: stencil::STEPS_BLOCK,
            grid: format!("{steps} steps, {} passes", iteration.passes(steps).len()),
            bytes,
            median_us,
            min_us: s.min_s * 1e6,
            max_us: s.max_s * 1e6,
            gbs: bytes as f64 / (median_us * 1e3),
            pct_copy: 0.0,
            passed: differ.is_none(),
            check: check.clone(),
            baselines: vec![Baseline::measured(
                "one-step",
                o.median_s * 1e6,
                median_us,
                if differ.is_none() {
                    BaselineCheck::Passed(check)
                } else {
                    BaselineCheck::Failed(check)
                },
            )],
        });
    }
    Ok(rows)
}
