//! The reproducible sum: the same bits as the CPU order (`cpu::reproducible`) for every size,
//! alignment and kind of input, so the same bits on every GPU. The bits of a fixed set of
//! inputs are printed (`reproducible-bits:` lines) so that runs on two GPUs can be compared.
use std::process::ExitCode;

use anyhow::{Context, ensure};
// `same`: bit equality, with any NaN equal to any NaN (the payload is the device's).
use ferrocuda::DeviceSlice;
use ferrocuda::reduce;
use ferrocuda::{Error, Gpu};
use ferrocuda_lessons::cpu::reproducible::{
    Reproducible, same_sum as same, sum_reproducible as cpu_sum,
};
use ferrocuda_tests::{TestResult, gpu_test, random_vec, run_gpu_suite, scaled};

fn main() -> ExitCode {
    run_gpu_suite(vec![
        gpu_test(
            "reproducible_sum_has_the_cpu_orders_bits_at_every_size",
            every_size,
        ),
        gpu_test(
            "reproducible_sum_has_the_cpu_orders_bits_for_adversarial_values",
            adversarial,
        ),
        gpu_test(
            "reproducible_sum_of_a_misaligned_slice_has_the_bits_of_the_same_elements_aligned",
            misaligned,
        ),
        gpu_test(
            "reproducible_sum_to_the_device_has_the_bits_of_the_host_form",
            to_device,
        ),
        gpu_test(
            "reproducible_sum_of_2p30_f32_has_the_cpu_orders_bits_and_prints_them",
            large_and_printed,
        ),
    ])
}

/// Every level count and ragged edge: one chunk and its neighbours (8192 `f32`, 4096 `f64`),
/// two levels, three levels (above 2^26 `f32`).
const SIZES: [usize; 14] = [
    0,
    1,
    31,
    33,
    4095,
    4097,
    8191,
    8192,
    8193,
    (1 << 16) + 1,
    (1 << 20) - 1,
    (1 << 24) + 3,
    (8192 * 8192) + 5,
    (1 << 22) + 4096 * 3 + 1,
];

/// The GPU's reproducible sum of `host` against the CPU order; returns the sum.
fn check<T: Reproducible>(gpu: &Gpu, host: &[T], what: &str) -> anyhow::Result<T> {
    let x = gpu.upload(host, "reproducible input")?;
    let got = reduce::sum_reproducible(gpu, &x).with_context(|| what.to_string())?;
    let want = cpu_sum(host);
    ensure!(
        same(got, want),
        "{what}: {} n = {}: GPU {got} vs CPU order {want} (as f64 bits {:#x} vs {:#x})",
        T::TYPE,
        host.len(),
        got.to_f64().to_bits(),
        want.to_f64().to_bits()
    );
    // Twice on the same input: the same bits (the workspace is reused).
    let again = reduce::sum_reproducible(gpu, &x)?;
    ensure!(same(got, again), "{what}: a second run differs");
    Ok(got)
}

fn every_size(gpu: &Gpu) -> TestResult {
    for (i, n) in SIZES.iter().map(|&n| scaled(n)).enumerate() {
        check(gpu, &random_vec::<f32>(n, i as u64), "random f32")?;
        check(gpu, &random_vec::<f64>(n, i as u64), "random f64")?;
    }
    // Sizes going down after going up: the cached workspace keeps its larger buffers.
    check(gpu, &random_vec::<f32>(100, 99), "random f32 after larger")?;
    Ok(())
}

/// Values where the order changes the result: cancellation of large values, magnitudes 2^±100
/// mixed, subnormals, negative zeros, infinities.
fn adversarial(gpu: &Gpu) -> TestResult {
    let n = scaled((1 << 20) + 77);
    let mut rng = ferrocuda_lessons::cpu::SplitMix64::new(7);
    let cancel: Vec<f32> = (0..n)
        .map(|i| match i % 3 {
            0 => 1e30,
            1 => -1e30,
            _ => (rng.next_u64() % 1000) as f32 * 1e-3,
        })
        .collect();
    check(gpu, &cancel, "cancellation f32")?;
    let mixed: Vec<f64> = (0..n)
        .map(|_| {
            let r = rng.next_u64();
            let scale = 2f64.powi((r % 201) as i32 - 100);
            if r & (1 << 40) != 0 { scale } else { -scale }
        })
        .collect();
    check(gpu, &mixed, "magnitudes 2^-100..2^100 f64")?;
    let subnormal: Vec<f32> = (0..n)
        .map(|i| f32::from_bits((i as u32 % 0x7f_ffff) + 1) * if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    check(gpu, &subnormal, "subnormals f32")?;
    check(gpu, &vec![-0.0f32; 9000], "negative zeros f32")?;
    check(gpu, &[-0.0f64; 3], "negative zeros f64 (one chunk)")?;
    let mut inf = random_vec::<f64>(n, 3);
    inf[n / 85] = f64::INFINITY;
    check(gpu, &inf, "one infinity f64")?;
    inf[n - 1] = f64::NEG_INFINITY;
    check(gpu, &inf, "+inf and -inf f64 (a NaN)")?;
    Ok(())
}

/// The elements `[offset..]` of a buffer, which are not 16-byte aligned for `offset` 1..3.
fn misaligned(gpu: &Gpu) -> TestResult {
    let host = random_vec::<f32>(scaled((1 << 20) + 9), 11);
    let buffer = gpu.upload(&host, "reproducible input")?;
    for offset in 1..4 {
        let slice: &DeviceSlice<f32> = &buffer.index(offset..);
        let got = reduce::sum_reproducible(gpu, slice)?;
        let want = cpu_sum(&host[offset..]);
        ensure!(
            same(got, want),
            "offset {offset}: GPU {got:e} vs CPU order {want:e}"
        );
    }
    Ok(())
}

fn to_device(gpu: &Gpu) -> TestResult {
    let host = random_vec::<f64>(scaled((1 << 22) + 1), 5);
    let x = gpu.upload(&host, "reproducible input")?;
    let mut result = gpu.alloc::<f64>(1, "result")?;
    reduce::sum_reproducible_to_device(gpu, &x, &mut result)?;
    let on_device = gpu.download(&result)?[0];
    let on_host = reduce::sum_reproducible(gpu, &x)?;
    ensure!(same(on_device, on_host), "{on_device:e} vs {on_host:e}");
    let mut empty = gpu.alloc::<f64>(0, "empty result")?;
    match reduce::sum_reproducible_to_device(gpu, &x, &mut empty) {
        Err(Error::LengthMismatch {
            expected: 1,
            found: 0,
            ..
        }) => Ok(()),
        other => anyhow::bail!("an empty result buffer was not refused: {other:?}"),
    }
}

/// 2^30 `f32` (4 GiB), three levels; then the bits of a fixed set of inputs, printed for the
/// comparison across GPUs.
fn large_and_printed(gpu: &Gpu) -> TestResult {
    let large = check(
        gpu,
        &random_vec::<f32>(scaled(1 << 30), 30),
        "random f32 2^30",
    )?;
    println!(
        "reproducible-bits: seed 30 n {} f32 {:#010x} ({})",
        scaled(1 << 30),
        large.to_bits(),
        gpu.props().name
    );
    for (seed, n) in [
        (1u64, 1000usize),
        (2, (1 << 20) + 3),
        (3, (1 << 24) + 1),
        (4, 1 << 26),
    ]
    .map(|(seed, n)| (seed, scaled(n)))
    {
        let h32 = random_vec::<f32>(n, seed);
        let h64 = random_vec::<f64>(n, seed);
        let (x32, x64) = (gpu.upload(&h32, "x")?, gpu.upload(&h64, "x")?);
        let g32 = reduce::sum_reproducible(gpu, &x32)?;
        let g64 = reduce::sum_reproducible(gpu, &x64)?;
        ensure!(
            same(g32, cpu_sum(&h32)) && same(g64, cpu_sum(&h64)),
            "n = {n}"
        );
        println!(
            "reproducible-bits: seed {seed} n {n} f32 {:#010x} f64 {:#018x} ({})",
            g32.to_bits(),
            g64.to_bits(),
            gpu.props().name
        );
    }
    Ok(())
}
