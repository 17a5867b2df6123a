//! The `api` family: what one library call costs a Rust program, wall clock, against its
//! kernel alone and against the same work called from Python with CuPy and PyTorch in the same
//! run.
//!
//! Per size (f32, the input already on the device, as the table has it):
//! - `reduce::sum`: result brought to the host, one call at a time (`Instant` around each call,
//!   which returns only once the value is on the host);
//! - `ReducePlan::run_to_device`: the result left on the device, calls back to back with one
//!   synchronisation at the end, divided by the number of calls (what a pipeline of kernels
//!   pays per reduction);
//! - `stencil::apply_into`: R = 3, zero boundary, into a buffer the caller owns; it returns
//!   without waiting, so it is timed like `run_to_device`: back to back, one wait at the end.
//!
//! `kernel` is the kernel of the same call timed alone with events (GPU time). CuPy
//! (`float(x.sum())`) and PyTorch (`t.sum().item()`, and `conv1d` with 7 ones and zero padding
//! for the stencil, back to back with one `torch.cuda.synchronize()`) are timed per call with
//! `time.perf_counter` by `api_baselines.py`, run by `python3` when it is on `PATH` and has the
//! modules; without them the rows carry only the kernel comparison.
use std::process::{Command, Stdio};
use std::time::Instant;

use ferrocuda::runtime::element::{Bf16, ElemType, Element, F16};
use ferrocuda::runtime::error::Result;
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lessons::cpu::{Check, ReduceReference, check_stencil};
use ferrocuda_lessons::reduce::{self, ReduceOp, ReducePlan, ReduceRun, ReduceVariant};
use ferrocuda_lessons::stencil::{self, Boundary, StencilRun, StencilVariant, Taps};
use ferrocuda_lessons::timing::{Stats, time_samples};

use super::report::{Baseline, BaselineCheck, Row};

/// The Python side, embedded so that the binary carries it to the GPU machine.
const PYTHON_BASELINES: &str = include_str!("api_baselines.py");

/// The calls of the family, as the `variant` of their rows.
pub const API_SUM: &str = "reduce::sum";
/// See [`API_SUM`].
pub const API_SUM_DEVICE: &str = "ReducePlan::run_to_device";
/// See [`API_SUM`].
pub const API_STENCIL: &str = "stencil::apply_into";
/// See [`API_SUM`]: the sum of `f16` and `bf16` in `f32`.
pub const API_HALF_SUM: &str = "reduce::sum_to_f32";

/// The baselines of [`API_HALF_SUM`] that are the libraries' plain `x.sum()` of the 16-bit
/// tensor (its sum in the tensor's own type), beside their sums with `dtype=float32`.
pub const NATIVE_SUFFIX: &str = " x.sum()";

/// Per-call wall times of `call`, in microseconds: `warmup` untimed calls, then `calls` timed.
fn per_call(warmup: usize, calls: usize, mut call: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    for _ in 0..warmup {
        call()?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        call()?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(samples)
}

/// Per-call cost of a call that returns without waiting: 30 untimed calls, then 5 batches of
/// `calls` calls back to back with one wait each; a sample is a batch's time over `calls`.
fn back_to_back(gpu: &Gpu, calls: usize, mut call: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    for _ in 0..30 {
        call()?;
    }
    gpu.synchronize()?;
    let mut samples = Vec::with_capacity(5);
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..calls {
            call()?;
        }
        gpu.synchronize()?;
        samples.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    Ok(samples)
}

/// A row from per-call samples (microseconds).
fn row(
    variant: &str,
    ty: ElemType,
    n: usize,
    bytes: u64,
    samples: &[f64],
    check: Check,
    kernel_us: f64,
) -> Row {
    let stats = Stats::from_samples(samples.iter().map(|us| us / 1e6).collect());
    let median_us = stats.median_s * 1e6;
    Row {
        family: "api".into(),
        variant: variant.into(),
        ty: ty.name().into(),
        n: n as u64,
        block: 0,
        grid: "-".into(),
        bytes,
        median_us,
        min_us: stats.min_s * 1e6,
        max_us: stats.max_s * 1e6,
        gbs: bytes as f64 / (median_us * 1e3),
        pct_copy: 0.0,
        passed: check.passed,
        check: check.detail,
        baselines: vec![Baseline::measured(
            "kernel",
            kernel_us,
            median_us,
            BaselineCheck::NotChecked,
        )],
    }
}

fn median_us(samples_s: &[f64]) -> f64 {
    Stats::from_samples(samples_s.to_vec()).median_s * 1e6
}

/// The input of every `api` row, and of `api_baselines.py`'s: 1 or 2 at every 32nd element, 0
/// elsewhere. Its total is at most `n / 16`, within 2^24 up to 2^28 elements, so every float
/// sum of it is exact (`ReduceReference` checks for equality), and every tile of 32 elements
/// holds a non-zero value, so a block missing or counted twice changes the sum.
pub fn api_input(n: usize) -> Vec<f32> {
    (0..n).map(|i| api_value(i) as f32).collect()
}

/// Element `i` of [`api_input`].
fn api_value(i: usize) -> u64 {
    if i.is_multiple_of(32) {
        1 + (i / 32) as u64 % 2
    } else {
        0
    }
}

/// The checks of the `api` family's Python baselines: the sum, and the sum of the stencil's
/// outputs (`R = 3`, every coefficient 1, zero boundary), that each size must give. Computed
/// from the non-zero elements alone, without the input or the output in memory (at 2^28 they
/// would take 2 GiB): element `j` enters the outputs of every window that holds it, the
/// `min(j + R, n - 1) - max(j - R, 0) + 1` of them. `python_expected_matches_the_cpu_stencil`
/// pins it to `cpu::stencil`.
pub fn python_expected(n: usize) -> (f64, f64) {
    const R: usize = 3;
    let (mut sum, mut stencil) = (0u64, 0u64);
    for j in (0..n).step_by(32) {
        let windows = (j + R).min(n - 1) - j.saturating_sub(R) + 1;
        sum += api_value(j);
        stencil += api_value(j) * windows as u64;
    }
    (sum as f64, stencil as f64)
}

/// The check of one Python result against what the CPU says, as a baseline check.
pub fn python_check(got: Option<f64>, want: f64) -> BaselineCheck {
    if !want.is_finite() {
        // The exact total does not fit the result's type: an overflowed result has nothing left
        // to check (any wrong total that overflows too would match).
        return BaselineCheck::Missing(format!(
            "the exact total overflows the result's type (got {got:?}): nothing to check"
        ));
    }
    match got {
        Some(got) if got == want => BaselineCheck::Passed(format!("{got} exact")),
        Some(got) => BaselineCheck::Failed(format!("got {got}, want {want}")),
        None => BaselineCheck::Missing("no result printed".into()),
    }
}

/// Measures every call of the family at every size; `calls` timed calls per row; the
/// `sum_to_f32` rows for each 16-bit type of `halves`.
pub fn measure(gpu: &Gpu, sizes: &[usize], calls: usize, halves: &[ElemType]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let taps = Taps::<f32>::Sum { radius: 3 };
    for &n in sizes {
        let host = api_input(n);
        let input = gpu.upload(&host, "api input")?;
        let reference = ReduceReference::of(ReduceOp::Sum, &host, |v| v);
        let bytes = (n * size_of::<f32>()) as u64;

        let kernel = fast_sum_kernel_us::<f32, f32>(gpu, &input)?;

        let mut last = 0.0f32;
        let samples = per_call(30, calls, || {
            last = reduce::sum(gpu, &input)?;
            Ok(())
        })?;
        let check = reference.check(last, 1.0);
        rows.push(row(
            API_SUM,
            ElemType::F32,
            n,
            bytes,
            &samples,
            check,
            kernel,
        ));

        let mut plan = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
        let mut result = gpu.alloc::<f32>(1, "api device result")?;
        let totals = back_to_back(gpu, calls, || plan.run_to_device(&input, &mut result))?;
        let check = reference.check(gpu.download(&result)?[0], 1.0);
        rows.push(row(
            API_SUM_DEVICE,
            ElemType::F32,
            n,
            bytes,
            &totals,
            check,
            kernel,
        ));

        let mut output = gpu.alloc::<f32>(n, "api stencil output")?;
        let kernel = {
            let mut run = StencilRun::new(
                gpu,
                StencilVariant::Fast,
                &taps,
                Boundary::Zero,
                &input,
                &mut output,
                StencilVariant::Fast.default_block(),
            )?;
            median_us(&time_samples(gpu, 3, 20, |_| Ok(()), |_| run.launch())?)
        };
        // Timed like the device-result reduction: it returns without waiting too.
        let samples = back_to_back(gpu, calls, || {
            stencil::apply_into(gpu, &input, &mut output, &taps, Boundary::Zero)
        })?;
        let check = check_stencil(&host, &taps, Boundary::Zero, &gpu.download(&output)?);
        rows.push(row(
            API_STENCIL,
            ElemType::F32,
            n,
            2 * bytes,
            &samples,
            check,
            kernel,
        ));
        drop((input, output));
        if halves.contains(&ElemType::F16) {
            rows.push(half_sum_row::<F16>(gpu, &host, &reference, calls)?);
        }
        if halves.contains(&ElemType::Bf16) {
            rows.push(half_sum_row::<Bf16>(gpu, &host, &reference, calls)?);
        }
    }
    Ok(rows)
}

/// The fast sum's kernel alone over `input` into `A`, event-timed as the benchmark's other
/// families time it: the median of 20 runs, in microseconds.
fn fast_sum_kernel_us<T: Element, A: Element>(
    gpu: &Gpu,
    input: &ferrocuda::DeviceSlice<T>,
) -> Result<f64> {
    let run = std::cell::RefCell::new(ReduceRun::<T, A>::new(
        gpu,
        ReduceVariant::Fast,
        ReduceOp::Sum,
        input,
        ReduceVariant::Fast.default_block(),
    )?);
    Ok(median_us(&time_samples(
        gpu,
        3,
        20,
        |_| run.borrow_mut().setup(),
        |_| run.borrow_mut().launch(),
    )?))
}

/// The [`API_HALF_SUM`] row of `T` on `host` (the `f32` input, whose values the 16-bit types
/// hold exactly, so that its sum's `reference` is theirs): per call, the value on the host;
/// `kernel` the fast sum's kernel alone.
fn half_sum_row<T: Element>(
    gpu: &Gpu,
    host: &[f32],
    reference: &ReduceReference<f32>,
    calls: usize,
) -> Result<Row> {
    let n = host.len();
    let narrow: Vec<T> = host.iter().map(|&v| T::from_f64(f64::from(v))).collect();
    let input = gpu.upload(&narrow, "api 16-bit input")?;
    let kernel = fast_sum_kernel_us::<T, f32>(gpu, &input)?;
    let mut last = 0.0f32;
    let samples = per_call(30, calls, || {
        last = reduce::sum_to_f32(gpu, &input)?;
        Ok(())
    })?;
    let check = reference.check(last, 1.0);
    let bytes = (n * size_of::<T>()) as u64;
    Ok(row(
        API_HALF_SUM,
        T::TYPE,
        n,
        bytes,
        &samples,
        check,
        kernel,
    ))
}

/// Runs `api_baselines.py` for `sizes` and attaches its per-call medians to `rows` as `cupy` and
/// `torch` baselines. Returns what ran, or why nothing did.
pub fn attach_python(
    rows: &mut [Row],
    sizes: &[usize],
    calls: usize,
) -> std::result::Result<String, String> {
    let text = run_python(PYTHON_BASELINES, calls, sizes)?;
    let mut versions = Vec::new();
    let mut expected = std::collections::HashMap::new();
    // Lines: `version <lib> <version>` and `<lib> <call> <n> <median_us> <result>`.
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["version", lib, version] => versions.push(format!("{lib} {version}")),
            [lib, call, n, us, rest @ ..] => {
                let (Ok(n), Ok(us)) = (n.parse::<u64>(), us.parse::<f64>()) else {
                    continue;
                };
                let got = rest.first().and_then(|r| r.parse::<f64>().ok());
                let (sum, stencil) = *expected
                    .entry(n)
                    .or_insert_with(|| python_expected(n as usize));
                // `sum_f16` / `sum_bf16`: the sum of the 16-bit tensor with dtype=float32;
                // `native_f16` / `native_bf16`: its plain `x.sum()`, in the tensor's type, whose
                // right answer is the exact total rounded once to that type.
                let half = |name: &str| ElemType::from_name(name).filter(|t| t.is_half());
                let (variants, ty, name, check): (&[&str], _, String, _) = match *call {
                    "sum" => (
                        &[API_SUM, API_SUM_DEVICE],
                        ElemType::F32,
                        lib.to_string(),
                        python_check(got, sum),
                    ),
                    "stencil" => (
                        &[API_STENCIL],
                        ElemType::F32,
                        lib.to_string(),
                        python_check(got, stencil),
                    ),
                    c => match (
                        c.strip_prefix("sum_").and_then(half),
                        c.strip_prefix("native_").and_then(half),
                    ) {
                        (Some(t), _) => {
                            (&[API_HALF_SUM], t, lib.to_string(), python_check(got, sum))
                        }
                        (_, Some(t)) => (
                            &[API_HALF_SUM],
                            t,
                            format!("{lib}{NATIVE_SUFFIX}"),
                            python_check(got, rounded_to(t, sum)),
                        ),
                        _ => continue,
                    },
                };
                if check.is_failure() {
                    eprintln!("bench: the {lib} {call} baseline at n = {n}: {check:?}");
                }
                for row in rows.iter_mut().filter(|r| {
                    r.n == n && r.ty == ty.name() && variants.contains(&r.variant.as_str())
                }) {
                    row.baselines
                        .push(Baseline::measured(&name, us, row.median_us, check.clone()));
                }
            }
            _ => {}
        }
    }
    if versions.is_empty() {
        return Err("python3 has neither cupy nor torch".into());
    }
    Ok(versions.join(", "))
}

/// Feeds `script` to `python3 - COUNT SIZES...` and returns what it printed, or why it could
/// not run or failed.
pub fn run_python(
    script: &str,
    count: usize,
    sizes: &[usize],
) -> std::result::Result<String, String> {
    let sizes: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    let mut child = Command::new("python3")
        .args(["-", &count.to_string()])
        .args(&sizes)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| format!("feeding python3: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "python3 failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `v` rounded once to the 16-bit float type `ty` (to nearest, ties to even), as a sum in
/// `f32` rounded at the end gives it; `v` itself for other types.
pub fn rounded_to(ty: ElemType, v: f64) -> f64 {
    match ty {
        ElemType::F16 => F16::from_f64(v).to_f64(),
        ElemType::Bf16 => Bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A total the result's type cannot hold is not a check: an overflowed answer, right or
    /// wrong, gets no speedup; a finite total is compared exactly.
    #[test]
    fn an_overflowed_total_checks_nothing() {
        let total = (3 << 24) as f64 / 64.0;
        let want = rounded_to(ElemType::F16, total);
        assert!(want.is_infinite());
        assert!(python_check(Some(f64::INFINITY), want).is_failure());
        assert!(python_check(Some(2.0 * total), want).is_failure());
        assert!(matches!(
            python_check(Some(48.0), 48.0),
            BaselineCheck::Passed(_)
        ));
        assert!(python_check(Some(47.0), 48.0).is_failure());
        assert!(python_check(None, 48.0).is_failure());
    }

    #[test]
    fn python_expected_matches_the_cpu_stencil() {
        for n in [
            1,
            2,
            3,
            4,
            7,
            31,
            32,
            33,
            64,
            100,
            1000,
            4099,
            (1 << 16) + 5,
        ] {
            let x = api_input(n);
            let taps = Taps::Sum { radius: 3 };
            let stencil: f64 = ferrocuda_lessons::cpu::stencil(&x, &taps, Boundary::Zero)
                .iter()
                .map(|&v| f64::from(v))
                .sum();
            let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
            assert_eq!(python_expected(n), (sum, stencil), "n = {n}");
        }
    }
}
