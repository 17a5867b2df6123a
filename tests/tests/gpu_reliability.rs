//! Reliability on the GPU: one `Gpu` shared by two host threads, and property tests of every
//! family on random sizes, block sizes and values (proptest, a bounded number of cases from a
//! fixed seed; a failure prints the seed and the minimal case).
use std::process::ExitCode;

use anyhow::{anyhow, ensure};
use ferrocuda::Gpu;
use ferrocuda_lessons::cpu::SplitMix64;
use ferrocuda_lessons::cpu::{ReduceReference, check_stencil};
use ferrocuda_lessons::reduce::{self, ReduceOp, ReduceRun, ReduceVariant};
use ferrocuda_lessons::stencil::{self, Boundary, StencilVariant, Taps};
use ferrocuda_tests::{TestResult, exact_sum_input, gpu_test, random_vec, run_gpu_suite};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// The seed of every property test here, printed when one fails.
const SEED: [u8; 32] = *b"ferrocuda-gpu-property-tests-v1!";

fn runner(cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &SEED),
    )
}

fn main() -> ExitCode {
    run_gpu_suite(vec![
        gpu_test("two_host_threads_share_one_gpu", two_threads),
        gpu_test(
            "property_fast_reduction_matches_cpu_on_random_sizes_blocks_and_values",
            property_fast_reduce,
        ),
        gpu_test(
            "property_textbook_reduction_matches_cpu_on_random_sizes_and_blocks",
            property_textbook_reduce,
        ),
        gpu_test(
            "property_stencil_matches_cpu_on_random_sizes_radii_boundaries_and_blocks",
            property_stencil,
        ),
    ])
}

/// The decision: a `Gpu` is `Sync`; every library call makes its context current on the
/// calling thread, and both threads' work goes to the one stream.
fn two_threads(gpu: &Gpu) -> TestResult {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                s.spawn(move || -> TestResult {
                    // Same type and operator on both threads: the same cached workspace.
                    for round in 0..100u64 {
                        let n = 1000 + (t * 7919 + round * 104_729) as usize % 300_000;
                        let x: Vec<i64> = random_vec(n, t * 1000 + round);
                        let d = gpu.upload(&x, "thread input")?;
                        let want = x.iter().fold(0i64, |a, &b| a.wrapping_add(b));
                        let got = reduce::sum(gpu, &d)?;
                        ensure!(got == want, "thread {t} round {round}: sum {got} != {want}");
                        let m = *x.iter().max().expect("n >= 1000");
                        ensure!(reduce::max(gpu, &d)? == m, "thread {t} round {round}: max");
                        let y: Vec<i32> = random_vec::<i32>(n, round)
                            .iter()
                            .map(|v| v % 1000)
                            .collect();
                        let dy = gpu.upload(&y, "thread stencil input")?;
                        let taps = Taps::Sum { radius: 3 };
                        let out =
                            gpu.download(&*stencil::apply(gpu, &dy, &taps, Boundary::Periodic)?)?;
                        ensure!(
                            out == ferrocuda_lessons::cpu::stencil(&y, &taps, Boundary::Periodic),
                            "thread {t} round {round}: stencil differs"
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| anyhow!("a thread panicked"))?)
    })
}

/// Runs `check` over generated cases; a failure reports the seed and the minimal case.
fn run_property<S: Strategy>(
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> TestResult,
) -> TestResult
where
    S::Value: std::fmt::Debug,
{
    runner(cases)
        .run(&strategy, |case| {
            check(case).map_err(|e| TestCaseError::fail(format!("{e:#}")))
        })
        .map_err(|e| {
            anyhow!(
                "property failed (seed {:?}): {e}",
                std::str::from_utf8(&SEED).unwrap()
            )
        })
}

fn property_fast_reduce(gpu: &Gpu) -> TestResult {
    let strategy = (
        1usize..200_000,
        0usize..4,
        1u32..=32,
        0usize..3,
        any::<u64>(),
        0usize..2,
    );
    run_property(48, strategy, |(n, offset, warps, op, seed, float)| {
        let op = ReduceOp::ALL[op];
        let block = warps * 32;
        if float == 1 {
            let x: Vec<f32> = exact_sum_input(n + offset, seed);
            let d = gpu.upload(&x, "property input")?;
            let slice = d.index(offset..);
            let mut run = ReduceRun::<f32>::new(gpu, ReduceVariant::Fast, op, &slice, block)?;
            let check = ReduceReference::of(op, &x[offset..], |v| v)
                .check(run.run()?, run.rounding_depth());
            ensure!(
                check.passed,
                "f32 {op:?} n {n} offset {offset} block {block}: {}",
                check.detail
            );
        } else {
            let x: Vec<i32> = random_vec(n + offset, seed);
            let d = gpu.upload(&x, "property input")?;
            let slice = d.index(offset..);
            let mut run = ReduceRun::<i32>::new(gpu, ReduceVariant::Fast, op, &slice, block)?;
            let check = ReduceReference::of(op, &x[offset..], |v| v)
                .check(run.run()?, run.rounding_depth());
            ensure!(
                check.passed,
                "i32 {op:?} n {n} offset {offset} block {block}: {}",
                check.detail
            );
        }
        Ok(())
    })
}

fn property_textbook_reduce(gpu: &Gpu) -> TestResult {
    let textbook: Vec<ReduceVariant> = ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.is_textbook())
        .collect();
    let strategy = (
        1usize..100_000,
        0usize..textbook.len(),
        6u32..=10,
        any::<u64>(),
    );
    run_property(48, strategy, |(n, v, block_log, seed)| {
        let (variant, block) = (textbook[v], 1u32 << block_log);
        let x: Vec<u32> = random_vec(n, seed);
        let d = gpu.upload(&x, "property input")?;
        let mut run = ReduceRun::<u32>::new(gpu, variant, ReduceOp::Sum, &d, block)?;
        let check =
            ReduceReference::of(ReduceOp::Sum, &x, |v| v).check(run.run()?, run.rounding_depth());
        ensure!(
            check.passed,
            "{} n {n} block {block}: {}",
            variant.name(),
            check.detail
        );
        Ok(())
    })
}

fn property_stencil(gpu: &Gpu) -> TestResult {
    let strategy = (
        1usize..50_000,
        0usize..4,
        0usize..6,
        0usize..3,
        1u32..=32,
        any::<u64>(),
    );
    run_property(48, strategy, |(n, v, r, b, warps, seed)| {
        let (variant, radius, boundary, block) = (
            StencilVariant::ALL[v],
            [1u32, 2, 3, 4, 8, 16][r],
            Boundary::ALL[b],
            warps * 32,
        );
        let taps = Taps::<f32>::Sum { radius };
        if variant.error(&taps, block).is_some() || !variant.runs_on(gpu.props()) {
            return Ok(());
        }
        let mut rng = SplitMix64::new(seed);
        let x: Vec<f32> = (0..n).map(|_| rng.next_f64_signed() as f32).collect();
        let d = gpu.upload(&x, "property stencil input")?;
        let mut out = gpu.alloc::<f32>(n, "property stencil output")?;
        gpu.poison_async(&mut out)?;
        stencil::StencilRun::new(gpu, variant, &taps, boundary, &d, &mut out, block)?.run()?;
        let check = check_stencil(&x, &taps, boundary, &gpu.download(&out)?);
        ensure!(
            check.passed,
            "{} r{radius} {} n {n} block {block}: {}",
            variant.name(),
            boundary.name(),
            check.detail
        );
        Ok(())
    })
}
