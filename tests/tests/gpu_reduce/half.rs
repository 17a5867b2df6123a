//! The 16-bit floats (`F16`, `Bf16`): the fast sum in `f32` (`reduce::sum_to_f32`, and
//! `reduce::sum` rounded once to the type), `min` and `max`, and the reproducible sum in `f32`,
//! against the CPU.
//!
//! - Sums: every element is 1, 2 or 3 (exact in both types), so every order of addition gives
//!   the exact total while it stays below 2^24 (`f32`'s exact integers), and a lane, a vector,
//!   a block or the tail missing or counted twice changes it. Sizes around a 16-byte vector (8
//!   elements), a tile, the reproducible sum's chunk (8192) and 2^22 - 5, at every offset from
//!   a 16-byte boundary; the result must equal the exact total bit for bit.
//! - Subnormals: sums of the smallest subnormals times 1, 2 or 3, exact in `f32`.
//! - `min` and `max` over values spanning the type's range with infinities and NaNs among them
//!   (a NaN operand is ignored, as PTX `min` does): one of the elements, bit for bit; over
//!   zeros of both signs: a zero.
//! - The reproducible sum: the bits of the CPU's `f32` reproducible sum of the input widened
//!   (uniform `[-1, 1)`), at 8-byte aligned offsets (the kernel's 8-byte loads) and not.
use anyhow::{Context, ensure};
use ferrocuda::DeviceSlice;
use ferrocuda::Gpu;
use ferrocuda::runtime::element::{Bf16, Element, F16};
use ferrocuda_lessons::cpu::SplitMix64;
use ferrocuda_tests::{TestResult, scaled};

/// The two types, for the generic tests: a value from its 16 bits, and as an `f32` (exact).
pub trait HalfFloat: Element {
    fn from_bits(bits: u16) -> Self;
    fn of(v: f32) -> Self {
        Self::from_f64(v as f64)
    }
    fn wide(self) -> f32 {
        self.to_f64() as f32
    }
}

impl HalfFloat for F16 {
    fn from_bits(bits: u16) -> Self {
        F16(bits)
    }
}

impl HalfFloat for Bf16 {
    fn from_bits(bits: u16) -> Self {
        Bf16(bits)
    }
}

const SIZES: [usize; 17] = [
    1,
    7,
    8,
    9,
    31,
    33,
    1000,
    4095,
    4097,
    8191,
    8192,
    8193,
    3 * 8192 + 5,
    65_537,
    1 << 20,
    (1 << 20) + 3,
    (1 << 22) - 5,
];

/// Uploads `host` with `offset` elements before it (so it starts `offset * 2` bytes past the
/// allocation's 256-byte boundary) and runs `f` on the slice.
fn at_offset<T: Element, R>(
    gpu: &Gpu,
    host: &[T],
    offset: usize,
    f: impl FnOnce(&DeviceSlice<T>) -> anyhow::Result<R>,
) -> anyhow::Result<R> {
    let mut padded = vec![T::poison(); offset];
    padded.extend_from_slice(host);
    let buffer = gpu.upload(&padded, "half-precision input")?;
    f(&buffer.index(offset..))
}

/// Exact sums at every size and offset, through `sum_to_f32` and `sum`; the empty sum is 0.
pub fn sums_are_exact<T: HalfFloat>(gpu: &Gpu) -> TestResult {
    let mut rng = SplitMix64::new(0x4a1f ^ T::TYPE as u64);
    let empty = gpu.alloc::<T>(0, "empty")?;
    ensure!(
        ferrocuda::reduce::sum_to_f32(gpu, &empty)? == 0.0,
        "empty sum"
    );
    let mut cases = 0;
    for (i, n) in SIZES.iter().map(|&n| scaled(n)).enumerate() {
        let host: Vec<T> = (0..n)
            .map(|_| T::of((1 + rng.next_u64() % 3) as f32))
            .collect();
        let exact: u64 = host.iter().map(|x| x.wide() as u64).sum();
        ensure!(
            exact < 1 << 24,
            "the test's total {exact} is not exact in f32"
        );
        for offset in [i % 8, (i + 3) % 8] {
            let (wide, narrow) = at_offset(gpu, &host, offset, |x| {
                Ok((
                    ferrocuda::reduce::sum_to_f32(gpu, x)?,
                    ferrocuda::reduce::sum(gpu, x)?,
                ))
            })?;
            let what = format!("sum of {n} {} at offset {offset}", T::TYPE);
            ensure!(
                wide.to_bits() == (exact as f32).to_bits(),
                "{what}: sum_to_f32 gave {wide}, the exact sum is {exact}"
            );
            let rounded = T::from_f64(exact as f64);
            ensure!(
                narrow.same_bits(rounded),
                "{what}: sum gave {narrow}, the exact sum rounded once is {rounded}"
            );
            cases += 1;
        }
    }
    // Subnormals: the smallest one times k in 1..=3, exact in f32.
    let n = 1000;
    let ks: Vec<u64> = (0..n).map(|_| 1 + rng.next_u64() % 3).collect();
    let smallest = T::from_bits(1).wide();
    let host: Vec<T> = ks.iter().map(|&k| T::of(smallest * k as f32)).collect();
    ensure!(
        host.iter()
            .zip(&ks)
            .all(|(x, &k)| x.wide() == smallest * k as f32),
        "the subnormal inputs are not exact"
    );
    let want = smallest * ks.iter().sum::<u64>() as f32;
    let got = at_offset(gpu, &host, 3, |x| {
        Ok(ferrocuda::reduce::sum_to_f32(gpu, x)?)
    })?;
    ensure!(
        got.to_bits() == want.to_bits(),
        "sum of {n} subnormal {}: {got:e}, want {want:e}",
        T::TYPE
    );
    ensure!(cases == 2 * SIZES.len(), "{cases} cases ran");
    Ok(())
}

/// The CPU's min or max, a NaN operand ignored (every element of the input is a candidate).
fn fold<T: HalfFloat>(x: &[T], max: bool) -> T {
    let mut acc: Option<T> = None;
    for &v in x {
        if v.wide().is_nan() {
            continue;
        }
        acc = Some(match acc {
            None => v,
            Some(a) if max && v.wide() > a.wide() => v,
            Some(a) if !max && v.wide() < a.wide() => v,
            Some(a) => a,
        });
    }
    acc.unwrap_or(T::of(f32::NAN))
}

/// `min` and `max` at every size and offset over values across the type's range, with
/// infinities and NaNs among them; and over zeros of both signs.
pub fn min_max_match_cpu<T: HalfFloat>(gpu: &Gpu) -> TestResult {
    let mut rng = SplitMix64::new(0x3c1d ^ T::TYPE as u64);
    let mut cases = 0;
    for (i, n) in SIZES.iter().map(|&n| scaled(n)).enumerate() {
        let mut host: Vec<T> = (0..n)
            // Any bit pattern of the type: NaNs, infinities, subnormals, zeros included.
            .map(|_| T::from_bits(rng.next_u64() as u16))
            .collect();
        // Every other case: the extremes sit at the two ends (the scalar head and tail).
        if i % 2 == 1 && n > 2 {
            let (lo, hi) = (T::of(-60000.0), T::of(60000.0));
            host[0] = hi;
            host[n - 1] = lo;
        }
        let want = (fold(&host, false), fold(&host, true));
        for offset in [i % 8, (i + 5) % 8] {
            let got = at_offset(gpu, &host, offset, |x| {
                Ok((
                    ferrocuda::reduce::min(gpu, x)?,
                    ferrocuda::reduce::max(gpu, x)?,
                ))
            })?;
            let what = format!("{n} {} at offset {offset}", T::TYPE);
            ensure!(
                got.0.same_bits(want.0) || (got.0.wide() == 0.0 && want.0.wide() == 0.0),
                "min of {what}: {} ({:?}), want {} ({:?})",
                got.0,
                got.0,
                want.0,
                want.0
            );
            ensure!(
                got.1.same_bits(want.1) || (got.1.wide() == 0.0 && want.1.wide() == 0.0),
                "max of {what}: {}, want {}",
                got.1,
                want.1
            );
            cases += 1;
        }
    }
    let zeros: Vec<T> = (0..4099)
        .map(|i| T::of(if i % 3 == 0 { -0.0 } else { 0.0 }))
        .collect();
    let (lo, hi) = at_offset(gpu, &zeros, 1, |x| {
        Ok((
            ferrocuda::reduce::min(gpu, x)?,
            ferrocuda::reduce::max(gpu, x)?,
        ))
    })?;
    ensure!(
        lo.wide() == 0.0 && hi.wide() == 0.0,
        "min and max of signed zeros: {lo} and {hi}"
    );
    ensure!(cases == 2 * SIZES.len(), "{cases} cases ran");
    Ok(())
}

/// The reproducible sum in `f32` has the bits of the CPU's `f32` reproducible sum of the
/// widened input, at 8-byte aligned offsets and not.
pub fn reproducible_matches_cpu<T: HalfFloat>(gpu: &Gpu) -> TestResult {
    let mut rng = SplitMix64::new(0x7e5 ^ T::TYPE as u64);
    let empty = gpu.alloc::<T>(0, "empty")?;
    ensure!(
        ferrocuda::reduce::sum_reproducible_to_f32(gpu, &empty)? == 0.0,
        "empty reproducible sum"
    );
    for (i, n) in SIZES.iter().map(|&n| scaled(n)).enumerate() {
        let host: Vec<T> = (0..n)
            .map(|_| T::of((rng.next_u64() >> 11) as f32 / (1u64 << 52) as f32 * 2.0 - 1.0))
            .collect();
        let widened: Vec<f32> = host.iter().map(|x| x.wide()).collect();
        let want = ferrocuda_lessons::cpu::reproducible::sum_reproducible(&widened);
        // The f32 sum of the widened input, on the device: the same order and the same cached
        // workspace, run between the 16-bit calls.
        let widened_device = gpu.upload(&widened, "widened input")?;
        for offset in [0, 4, 1 + i % 3] {
            let (got, on_device, f32_sum) = at_offset(gpu, &host, offset, |x| {
                let got = ferrocuda::reduce::sum_reproducible_to_f32(gpu, x)
                    .context("reproducible sum")?;
                let f32_sum = ferrocuda::reduce::sum_reproducible(gpu, &widened_device)?;
                let mut result = gpu.alloc::<f32>(1, "device result")?;
                gpu.poison_async(&mut result)?;
                ferrocuda::reduce::sum_reproducible_to_f32_device(gpu, x, &mut result)?;
                Ok((got, gpu.download(&result)?[0], f32_sum))
            })?;
            for (call, got) in [
                ("sum_reproducible_to_f32", got),
                ("sum_reproducible_to_f32_device", on_device),
                ("sum_reproducible::<f32> of the widened input", f32_sum),
            ] {
                ensure!(
                    got.to_bits() == want.to_bits(),
                    "{call}: {n} {} at offset {offset}: {got:e} ({:#x}), the CPU's {want:e} ({:#x})",
                    T::TYPE,
                    got.to_bits(),
                    want.to_bits()
                );
            }
        }
    }
    let mut result = gpu.alloc::<f32>(1, "device result")?;
    gpu.poison_async(&mut result)?;
    ferrocuda::reduce::sum_reproducible_to_f32_device(gpu, &empty, &mut result)?;
    let zero = gpu.download(&result)?[0];
    ensure!(
        zero.to_bits() == 0,
        "empty reproducible sum on the device: {zero:e}"
    );
    let wrong = ferrocuda::reduce::sum_reproducible_to_f32_device(
        gpu,
        &gpu.alloc::<f32>(4, "f32")?,
        &mut result,
    );
    ensure!(
        matches!(&wrong, Err(ferrocuda::Error::Unsupported { what }) if what.contains("f32")),
        "sum_reproducible_to_f32_device of f32: {wrong:?}"
    );
    let wrong = ferrocuda::reduce::sum_to_f32(gpu, &gpu.alloc::<f32>(4, "f32")?);
    ensure!(
        matches!(&wrong, Err(ferrocuda::Error::Unsupported { what }) if what.contains("f32")),
        "sum_to_f32 of f32: {wrong:?}"
    );
    Ok(())
}
