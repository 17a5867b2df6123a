//! GPU tests of the 1D stencil (一维模板): every [`StencilVariant`] against the CPU
//! stencil of `ferrocuda_lessons::cpu`.
//!
//! - One trial per element type x taps (the sum; coefficients for `f32` and `f64`) x radius
//!   (1, 2, 3, 4, 8, 16) x boundary (zero, clamp, periodic). Each runs every variant that
//!   supports the type and taps on the sizes 1, R, 2R, 2R + 1, 31, 33, block - 1, block and
//!   block + 1 with every block size the variant accepts of 32, 100, 128, 256 and 1024 (`fast`
//!   takes multiples of 32 only), and on 2^20 + 3 and 2^24 with one of those block sizes per
//!   variant, rotating with radius and boundary so that every block size meets the large inputs
//!   across the trials (one launch of 2^24 costs more than all the small ones together).
//! - An empty input (no launch, empty output), `apply` on inputs shorter than the radius, and
//!   the errors for what a variant does not support.
//! - Inputs with NaNs, infinities, subnormals, zeros of both signs and (for `f16`) sums that
//!   overflow the type, for every radius and boundary (`f32`, `f16`, `bf16`).
//! - The fast kernel on a fixed grid of 4 blocks instead of the library's block per tile, so
//!   every block loops over tiles a grid apart, loading its next tile ahead (`i32`, `f32`,
//!   `f64`) or each tile as it reaches it (`f16`, `bf16`) (the path the single-GPU grid
//!   reaches only past 2^31 tiles), for every type, radius, boundary and input shift.
//!
//! The oracle is [`cpu::stencil_point`]: each output in `f64` (products in `f64`, compensated
//! sum) and its error scale `sum |c_k * x[i + k - R]|`. Integer outputs (`i32`, wrapping sums)
//! must equal the CPU's bit for bit. A float output must be within
//! `(2R + 3) * eps * sum |c_k * x[i + k - R]| + f32::MIN_POSITIVE` of the `f64` value
//! ([`cpu::stencil_tolerance`]; `eps` of the output type): the kernels' `2R` roundings are
//! within `(2R + 1) * eps / 2` of that scale, and the reference within `2.5 * eps_f64`. A
//! 16-bit output, added in `f32` and rounded once, must be within that bound for `f32` plus
//! half a unit in its own last place. An infinite or NaN exact output must be matched exactly
//! (a NaN by any NaN). Checked with `approx::abs_diff_eq!` ([`cpu::stencil_output_ok`]).
//!
//! Every launch writes into a slice of an output pool that is poisoned first (every byte
//! `0xA5`), from 8 elements before the slice to 8 after it: every output must have been
//! written (an output still holding poison fails unless the reference rounds to the poison
//! value), and the guard elements must still hold poison (nothing written outside the output).
//!
//! Inputs: one buffer of 2^24 + 4096 random elements per element type (full-range `i32`, so
//! sums wrap; floats uniform in `[-1, 1)`) is uploaded once per test thread; each size reads a
//! sub-slice at a random offset, so it sees fresh data, and the input and output offsets are
//! random modulo 4 elements, so the fast path meets every relative alignment of input and
//! output. Coefficients are random in `[-1, 1)`. A failure names variant, kernel, size, block,
//! offsets, the element and the expected value.
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::{Context, bail, ensure};
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::{DeviceBuffer, DeviceSlice, ViewMut};
use ferrocuda::{Error, Gpu, with_elem_type};
use ferrocuda_lessons::cpu::{self, SplitMix64, StencilPoint};
use ferrocuda_lessons::kernels::config::{STENCIL_FAST_VECTORS_PER_THREAD, STENCIL_RADII};
use ferrocuda_lessons::stencil::{self, Boundary, StencilRun, StencilVariant, Taps};
use ferrocuda_tests::{TestResult, arch_allows, gpu_test, random_vec, run_gpu_suite, scaled};

fn main() -> ExitCode {
    let mut trials = Vec::new();
    for ty in stencil::STENCIL_TYPES {
        // Coefficients are f32 and f64 only.
        for weighted in [false, true]
            .into_iter()
            .filter(|&w| !w || (ty.is_float() && !ty.is_half()))
        {
            for (r, &radius) in STENCIL_RADII.iter().enumerate() {
                for (b, boundary) in Boundary::ALL.into_iter().enumerate() {
                    let taps = if weighted { "weighted" } else { "sum" };
                    let rotation = 3 * r + b;
                    trials.push(with_elem_type!(ty, T => gpu_test(
                        &format!(
                            "stencil_{taps}_{ty}_r{radius}_{}_matches_cpu_for_every_variant_size_and_block",
                            boundary.name()
                        ),
                        move |gpu| sweep::<T>(gpu, weighted, radius, boundary, rotation),
                    )));
                }
            }
        }
    }
    trials.extend([
        gpu_test(
            "stencil_of_an_empty_input_is_empty_for_every_variant",
            empty_input,
        ),
        gpu_test(
            "stencil_apply_matches_cpu_on_inputs_shorter_than_the_radius",
            shorter_than_radius,
        ),
        gpu_test(
            "stencil_run_rejects_unsupported_radius_type_block_weights_and_slices",
            rejects_unsupported,
        ),
        gpu_test(
            "fast_stencil_i32_on_a_fixed_grid_of_looping_blocks_matches_cpu",
            fast_on_a_fixed_grid::<i32>,
        ),
        gpu_test(
            "fast_stencil_f32_on_a_fixed_grid_of_looping_blocks_matches_cpu",
            fast_on_a_fixed_grid::<f32>,
        ),
        gpu_test(
            "fast_stencil_f64_on_a_fixed_grid_of_looping_blocks_matches_cpu",
            fast_on_a_fixed_grid::<f64>,
        ),
        gpu_test(
            "fast_stencil_f16_on_a_fixed_grid_of_looping_blocks_matches_cpu",
            fast_on_a_fixed_grid::<ferrocuda::runtime::element::F16>,
        ),
        gpu_test(
            "fast_stencil_bf16_on_a_fixed_grid_of_looping_blocks_matches_cpu",
            fast_on_a_fixed_grid::<ferrocuda::runtime::element::Bf16>,
        ),
        gpu_test(
            "stencil_f32_with_infinities_nans_subnormals_and_zeros_matches_cpu",
            special_values::<f32>,
        ),
        gpu_test(
            "stencil_f16_with_infinities_nans_subnormals_zeros_and_overflow_matches_cpu",
            special_values::<ferrocuda::runtime::element::F16>,
        ),
        gpu_test(
            "stencil_bf16_with_infinities_nans_subnormals_and_zeros_matches_cpu",
            special_values::<ferrocuda::runtime::element::Bf16>,
        ),
        gpu_test(
            "fast_stencil_launches_one_block_per_tile_of_the_output_and_no_more",
            one_block_per_tile::<f32>,
        ),
        gpu_test(
            "fast_stencil_bf16_launches_one_block_per_tile_of_the_output_and_no_more",
            one_block_per_tile::<ferrocuda::runtime::element::Bf16>,
        ),
    ]);
    run_gpu_suite(trials)
}

/// The library's grid is the kernel's tiles, exactly: `k` tiles of output at a 16-byte boundary
/// are `k` blocks, and one element more, or the same output one element off the boundary, one
/// block more; each such launch matches the CPU (a grid one block short would leave outputs
/// unwritten).
fn one_block_per_tile<T: Element>(gpu: &Gpu) -> TestResult {
    use ferrocuda::stencil::StencilGrid;
    let pool = pool::<T>(gpu)?;
    let lanes = 16 / size_of::<T>();
    let taps = Taps::Sum { radius: 3 };
    let block = ferrocuda::stencil::FAST_BLOCK as usize;
    let tile = block * STENCIL_FAST_VECTORS_PER_THREAD * lanes;
    // (n, output offset in elements from a 16-byte boundary, blocks)
    for (n, shift, blocks) in [
        (5 * tile, 0, 5),
        (5 * tile - lanes, 0, 5),
        (5 * tile + 1, 0, 6),
        (5 * tile, 1, 6),
        (5 * tile - lanes, lanes - 1, 5),
        (1, 0, 1),
    ] {
        let out_offset = GUARD + lanes + shift;
        let want = reference(&pool.host[..n], &taps, Boundary::Zero);
        let input = pool.input.index(..n);
        let mut out = pool.output.borrow_mut();
        let region = out_offset - GUARD..out_offset + n + GUARD;
        gpu.poison_async(&mut out.index_mut(region.clone()))?;
        let mut output = out.index_mut(out_offset..out_offset + n);
        let mut run = ferrocuda::stencil::StencilRun::with_grid(
            gpu,
            &taps,
            Boundary::Zero,
            &input,
            &mut output,
            StencilGrid::Tiles,
        )?;
        let what = format!("{}, n = {n}, output offset {shift}", run.symbol());
        ensure!(
            run.config().grid[0] as usize == blocks,
            "{what}: grid {}, want {blocks} blocks of {block}",
            run.config()
        );
        run.run().context(what.clone())?;
        drop(run);
        drop(output);
        let got = gpu.download(&out.index(region))?;
        if let Some(why) = compare(&got, &want, 3) {
            bail!("{what}: {why}");
        }
    }
    Ok(())
}

/// Bitwise equality (floats by bit pattern).
fn same<T: Element>(a: T, b: T) -> bool {
    Element::same_bits(a, b)
}

/// The largest input.
const LARGEST: usize = 1 << 24;
/// Poisoned elements checked on each side of an output slice.
const GUARD: usize = 8;
/// Elements in each output pool: the largest output, the guards, and room to move it.
const OUT_POOL_LEN: usize = LARGEST + 64 + 2 * GUARD;
/// Block sizes tried, where a variant accepts them.
const BLOCKS: [u32; 5] = [32, 100, 128, 256, 1024];
/// Sizes above which a variant runs with one block size per trial.
const LARGE: usize = 1 << 20;

/// A random input on the host and on the device, and an output buffer.
struct Pool<T: Element> {
    host: Vec<T>,
    input: DeviceBuffer<T>,
    /// Borrowed mutably by one case at a time.
    output: RefCell<DeviceBuffer<T>>,
}

thread_local! {
    /// One pool per element type for the test thread (and its GPU context), leaked so that it
    /// lives as long as the context.
    static POOLS: RefCell<HashMap<ElemType, &'static dyn Any>> = RefCell::new(HashMap::new());
}

fn pool<T: Element>(gpu: &Gpu) -> anyhow::Result<&'static Pool<T>> {
    if let Some(pool) = POOLS.with_borrow(|pools| pools.get(&T::TYPE).copied()) {
        return Ok(pool
            .downcast_ref()
            .expect("pools are keyed by their element type"));
    }
    // The largest input (of the sweeps, scaled on the CPU device, or of the fixed-grid test,
    // never scaled) plus room to start it at 4096 offsets.
    let len = scaled(LARGEST).max(FIXED_GRID_LARGEST) + 4096;
    let host: Vec<T> = random_vec(len, 0x57e9 + T::TYPE as u64);
    let input = gpu.upload(&host, &format!("{} stencil input pool", T::TYPE))?;
    let output = gpu.alloc(OUT_POOL_LEN, &format!("{} stencil output pool", T::TYPE))?;
    let pool: &'static Pool<T> = Box::leak(Box::new(Pool {
        host,
        input,
        output: RefCell::new(output),
    }));
    POOLS.with_borrow_mut(|pools| pools.insert(T::TYPE, pool));
    Ok(pool)
}

/// What every output of one input must be.
enum Reference<T> {
    /// Integers: the wrapping sums.
    Exact(Vec<T>),
    /// Floats: the `f64` values and their error scales.
    Float(Vec<StencilPoint>),
}

/// `f` over the chunks of `0..n`, on all the host's cores, in order.
fn parallel_chunks<R: Send>(n: usize, f: impl Fn(std::ops::Range<usize>) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let chunk = n.div_ceil(threads).max(1 << 14);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|start| s.spawn(move || f(start..(start + chunk).min(n))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("stencil test thread"))
            .collect()
    })
}

/// `f(i)` for every `i` in `0..n`, on all the host's cores.
fn parallel_map<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    parallel_chunks(n, |r| r.map(&f).collect::<Vec<_>>())
        .into_iter()
        .flatten()
        .collect()
}

fn reference<T: Element>(x: &[T], taps: &Taps<T>, boundary: Boundary) -> Reference<T> {
    if T::TYPE.is_float() {
        Reference::Float(parallel_map(x.len(), |i| {
            cpu::stencil_point(x, taps, boundary, i)
        }))
    } else {
        Reference::Exact(parallel_map(x.len(), |i| {
            cpu::stencil_at(x, taps, boundary, i)
        }))
    }
}

/// Why `got` (the output, with `GUARD` elements on each side) is wrong, if it is.
fn compare<T: Element>(got: &[T], want: &Reference<T>, radius: u32) -> Option<String> {
    let n = got.len() - 2 * GUARD;
    let poison = T::poison();
    for (k, g) in got[..GUARD].iter().chain(&got[GUARD + n..]).enumerate() {
        if !same(*g, poison) {
            let at = if k < GUARD {
                format!("{} before", GUARD - k)
            } else {
                format!("{} after", k - GUARD + 1)
            };
            return Some(format!("wrote {g} at the guard element {at} the output"));
        }
    }
    let out = &got[GUARD..GUARD + n];
    let ok = |i: usize| {
        let g = out[i];
        match want {
            Reference::Exact(w) => same(g, w[i]),
            Reference::Float(p) => cpu::stencil_output_ok(g, &p[i], radius),
        }
    };
    let tallies = parallel_chunks(n, |r| {
        let mut bad = r.filter(|&i| !ok(i));
        let first = bad.next();
        (first, first.map_or(0, |_| 1 + bad.count()))
    });
    let first = tallies.iter().find_map(|t| t.0)?;
    let count: usize = tallies.iter().map(|t| t.1).sum();
    let want = match want {
        Reference::Exact(w) => w[first].to_string(),
        Reference::Float(p) => format!(
            "{} ± {:.2e}",
            p[first].value,
            cpu::stencil_tolerance::<T>(radius, &p[first])
        ),
    };
    Some(format!(
        "{count} of {n} outputs wrong; first at {first}: got {}{}, want {want}",
        out[first],
        if same(out[first], poison) {
            " (poison: never written)"
        } else {
            ""
        }
    ))
}

/// Runs `variant` on the `n` inputs at `in_offset` into the output pool at `out_offset` (past
/// the leading guard), and compares.
#[allow(clippy::too_many_arguments)]
fn run_case<T: Element>(
    gpu: &Gpu,
    pool: &Pool<T>,
    variant: StencilVariant,
    taps: &Taps<T>,
    boundary: Boundary,
    (n, in_offset, out_offset): (usize, usize, usize),
    block: u32,
    want: &Reference<T>,
) -> TestResult {
    let input = pool.input.index(in_offset..in_offset + n);
    let mut out = pool.output.borrow_mut();
    let region = out_offset - GUARD..out_offset + n + GUARD;
    gpu.poison_async(&mut out.index_mut(region.clone()))?;
    let mut output = out.index_mut(out_offset..out_offset + n);
    let mut run = match StencilRun::new(gpu, variant, taps, boundary, &input, &mut output, block) {
        // On sm_70 the fast kernels of `i32`, `f32` and `f64` use more registers than a block
        // of 1024 threads may (the launch is refused, naming the kernel and its limit, as it
        // must be); from sm_80 every fast kernel takes 1024.
        Err(Error::InvalidLaunch { reason, .. })
            if gpu.props().compute_capability.0 < 8
                && reason.contains("this kernel allows at most") =>
        {
            return Ok(());
        }
        run => run?,
    };
    let symbol = run.symbol().to_string();
    let what = || {
        format!(
            "{} ({symbol}), {} boundary: n = {n}, block {block}, input offset {in_offset}, output offset {out_offset}",
            variant.name(),
            boundary.name()
        )
    };
    run.run().with_context(what)?;
    drop(run);
    drop(output);
    let got = gpu.download(&out.index(region))?;
    if let Some(why) = compare(&got, want, taps.radius()) {
        bail!("{}: {why}", what());
    }
    Ok(())
}

/// The block sizes of `BLOCKS` that `variant` accepts with `radius`.
fn blocks_for(variant: StencilVariant, radius: u32) -> Vec<u32> {
    BLOCKS
        .into_iter()
        .filter(|&b| variant.block_error(b, radius).is_none())
        .collect()
}

fn sweep<T: Element>(
    gpu: &Gpu,
    weighted: bool,
    radius: u32,
    boundary: Boundary,
    rotation: usize,
) -> TestResult {
    let pool = pool::<T>(gpu)?;
    let mut rng = SplitMix64::new(0x5e3d ^ ((rotation as u64) << 8) ^ T::TYPE as u64);
    let taps = if weighted {
        Taps::Weighted(random_vec(2 * radius as usize + 1, rng.next_u64()))
    } else {
        Taps::Sum { radius }
    };
    let variants: Vec<StencilVariant> = StencilVariant::ALL
        .into_iter()
        .filter(|v| v.supports_type(T::TYPE) && (v.supports_weights() || !weighted))
        .filter(|v| arch_allows(gpu, v.name(), v.min_arch()))
        .collect();
    let r = radius as usize;
    let mut sizes = vec![1, r, 2 * r, 2 * r + 1, 31, 33];
    sizes.extend(
        BLOCKS
            .iter()
            .flat_map(|&b| [b as usize - 1, b as usize, b as usize + 1]),
    );
    sizes.extend([scaled(LARGE + 3), scaled(LARGEST)]);
    sizes.sort_unstable();
    sizes.dedup();
    let mut launches = 0;
    for n in sizes {
        let in_offset = (rng.next_u64() % (scaled(LARGEST) + 4096 - n + 1) as u64) as usize;
        let out_offset = GUARD + (rng.next_u64() % 64) as usize;
        let want = reference(&pool.host[in_offset..in_offset + n], &taps, boundary);
        for (v, &variant) in variants.iter().enumerate() {
            let blocks = blocks_for(variant, radius);
            let blocks = if n > scaled(LARGE) {
                vec![blocks[(rotation + v) % blocks.len()]]
            } else {
                blocks
            };
            for block in blocks {
                run_case(
                    gpu,
                    pool,
                    variant,
                    &taps,
                    boundary,
                    (n, in_offset, out_offset),
                    block,
                    &want,
                )?;
                launches += 1;
            }
        }
    }
    ensure!(launches > 50, "only {launches} launches ran");
    Ok(())
}

fn empty_input(gpu: &Gpu) -> TestResult {
    let input: DeviceBuffer<f32> = gpu.alloc(0, "empty input")?;
    for variant in StencilVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        let mut output: DeviceBuffer<f32> = gpu.alloc(0, "empty output")?;
        let mut run = StencilRun::new(
            gpu,
            variant,
            &Taps::Sum { radius: 3 },
            Boundary::Periodic,
            &input,
            &mut output,
            variant.default_block(),
        )?;
        ensure!(
            run.config().grid[0] <= 1,
            "{}: {}",
            variant.name(),
            run.config()
        );
        run.run()?;
    }
    let out = stencil::apply(gpu, &input, &Taps::Weighted(vec![1.0; 33]), Boundary::Zero)?;
    ensure!(
        out.is_empty(),
        "apply of nothing gave {} elements",
        out.len()
    );
    Ok(())
}

fn shorter_than_radius(gpu: &Gpu) -> TestResult {
    for n in [1usize, 2, 3, 5, 15] {
        for boundary in Boundary::ALL {
            let x: Vec<f64> = random_vec(n, n as u64);
            let input = gpu.upload(&x, "short input")?;
            let taps = Taps::Weighted(random_vec(33, 7 + n as u64));
            let got = gpu.download(&*stencil::apply(gpu, &input, &taps, boundary)?)?;
            for (i, g) in got.iter().enumerate() {
                let p = cpu::stencil_point(&x, &taps, boundary, i);
                ensure!(
                    cpu::stencil_output_ok(*g, &p, 16),
                    "apply R = 16, {} boundary, n = {n}: output {i} is {g}, want {}",
                    boundary.name(),
                    p.value
                );
            }
            let ints: Vec<i32> = random_vec(n, 100 + n as u64);
            let input = gpu.upload(&ints, "short input")?;
            let taps = Taps::Sum { radius: 8 };
            let got = gpu.download(&*stencil::apply(gpu, &input, &taps, boundary)?)?;
            let want = cpu::stencil(&ints, &taps, boundary);
            ensure!(
                got == want,
                "apply i32 R = 8, {} boundary, n = {n}: got {got:?}, want {want:?}",
                boundary.name()
            );
        }
    }
    Ok(())
}

/// `StencilRun::new` of `variant` is refused before anything is enqueued (an argument it does
/// not take, a kernel it does not have, or lengths that disagree) with a message that contains
/// `needles`.
fn expect_invalid<T: Element>(
    gpu: &Gpu,
    variant: StencilVariant,
    taps: &Taps<T>,
    (input, output): (&DeviceSlice<T>, &mut DeviceSlice<T>),
    block: u32,
    needles: &[&str],
) -> TestResult {
    match StencilRun::new(gpu, variant, taps, Boundary::Zero, input, output, block) {
        Err(
            Error::InvalidArgument { what }
            | Error::Unsupported { what }
            | Error::LengthMismatch { what, .. },
        ) => {
            ensure!(
                needles.iter().all(|n| what.contains(n)),
                "message lacks {needles:?}: {what}"
            );
            Ok(())
        }
        Err(e) => bail!("{}: expected a refusal, got {e}", variant.name()),
        Ok(_) => bail!("{}: accepted, expected {needles:?}", variant.name()),
    }
}

fn rejects_unsupported(gpu: &Gpu) -> TestResult {
    use StencilVariant::{Fast, Naive, Shared, Weighted};
    let mut f = gpu.alloc::<f32>(300, "f32 buffer")?;
    let base = f.as_device_ptr();
    let (input, mut tail) = f.split_at_mut(100);
    let mut output = tail.index_mut(..100);
    let sum = |radius| Taps::<f32>::Sum { radius };
    for variant in StencilVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        let s = (&*input, &mut *output);
        expect_invalid(
            gpu,
            variant,
            &sum(5),
            s,
            256,
            &["radius", "5", "(R = 5, f32)"],
        )?;
        let s = (&*input, &mut *output);
        expect_invalid(gpu, variant, &sum(3), s, 2048, &["_r3_f32", "2048"])?;
    }
    for variant in [Shared, Weighted] {
        let s = (&*input, &mut *output);
        expect_invalid(gpu, variant, &sum(16), s, 8, &["radius", "8", "halos"])?;
    }
    let s = (&*input, &mut *output);
    expect_invalid(gpu, Fast, &sum(3), s, 100, &["multiple of 32", "100"])?;
    for variant in [Naive, Shared] {
        let taps = Taps::Weighted(vec![0.5f32; 7]);
        let s = (&*input, &mut *output);
        expect_invalid(gpu, variant, &taps, s, 256, &["sums only"])?;
    }
    let even = Taps::Weighted(vec![0.5f32; 6]);
    let s = (&*input, &mut *output);
    expect_invalid(gpu, Fast, &even, s, 256, &["2R + 1", "6"])?;
    let mut short = tail.index_mut(100..150);
    match StencilRun::new(gpu, Fast, &sum(3), Boundary::Zero, &input, &mut short, 256) {
        Err(Error::LengthMismatch {
            expected: 100,
            found: 50,
            ..
        }) => {}
        other => bail!("an output of 50 for an input of 100: {:?}", other.err()),
    }
    expect_invalid(
        gpu,
        Fast,
        &sum(3),
        (&*input, &mut *short),
        256,
        &["100", "50"],
    )?;
    // SAFETY: `base + 50 .. base + 150` lies inside `f`; the call refuses the overlap before
    // anything is enqueued, so nothing reads or writes through the view.
    let mut shifted = unsafe { ViewMut::from_raw_parts(base.wrapping_add(50), 100) };
    expect_invalid(
        gpu,
        Fast,
        &sum(3),
        (&*input, &mut *shifted),
        256,
        &["overlaps"],
    )?;
    let mut ints = gpu.alloc::<i32>(200, "i32 buffer")?;
    let (i_in, mut i_out) = ints.split_at_mut(100);
    let taps = Taps::Weighted(vec![1i32; 7]);
    let s = (&*i_in, &mut *i_out);
    expect_invalid(gpu, Fast, &taps, s, 256, &["f32 and f64"])?;
    let s = (&*i_in, &mut *i_out);
    expect_invalid(
        gpu,
        Weighted,
        &Taps::Sum { radius: 3 },
        s,
        256,
        &["weighted", "i32"],
    )?;
    let mut u = gpu.alloc::<u32>(200, "u32 buffer")?;
    let (u_in, mut u_out) = u.split_at_mut(100);
    for variant in StencilVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        let s = (&*u_in, &mut *u_out);
        expect_invalid(gpu, variant, &Taps::Sum { radius: 3 }, s, 256, &["u32"])?;
    }
    Ok(())
}

/// The longest input of [`fast_on_a_fixed_grid`]: 12 tiles of 256 threads' vectors on each
/// of 4 blocks, 16-byte vectors of 2-byte elements, and 5 more.
const FIXED_GRID_LARGEST: usize = 12 * 4 * 256 * STENCIL_FAST_VECTORS_PER_THREAD * 8 + 5;

/// The fast kernel on a fixed grid of 4 blocks (`StencilGrid::Blocks`): each block loops over
/// a dozen tiles a grid apart, loading the next one into registers ahead (the 16-bit floats:
/// each one as they reach it), the path the single-GPU grid of one block per tile does not
/// take. Every radius, boundary, block size of
/// 128 and 256, and every input shift (the input offset runs over a whole vector of lanes
/// against a fixed output offset); the sum, and coefficients for the float types.
fn fast_on_a_fixed_grid<T: Element>(gpu: &Gpu) -> TestResult {
    use ferrocuda::stencil::StencilGrid;
    use ferrocuda_lessons::kernels::config::STENCIL_FAST_VECTORS_PER_THREAD;
    let pool = pool::<T>(gpu)?;
    let mut rng = SplitMix64::new(0xf457 ^ T::TYPE as u64);
    let lanes = 16 / size_of::<T>();
    let mut launches = 0;
    for &radius in &STENCIL_RADII {
        let mut tapses = vec![Taps::Sum { radius }];
        if T::TYPE.is_float() && !T::TYPE.is_half() {
            tapses.push(Taps::Weighted(random_vec(
                2 * radius as usize + 1,
                rng.next_u64(),
            )));
        }
        for taps in tapses {
            for boundary in Boundary::ALL {
                for block in [128u32, 256] {
                    let tile = block as usize * STENCIL_FAST_VECTORS_PER_THREAD * lanes;
                    let n = 12 * 4 * tile + 5;
                    for in_offset in 0..lanes {
                        let out_offset = GUARD + lanes;
                        let want = reference(&pool.host[in_offset..in_offset + n], &taps, boundary);
                        let input = pool.input.index(in_offset..in_offset + n);
                        let mut out = pool.output.borrow_mut();
                        let region = out_offset - GUARD..out_offset + n + GUARD;
                        gpu.poison_async(&mut out.index_mut(region.clone()))?;
                        let mut output = out.index_mut(out_offset..out_offset + n);
                        let mut run = ferrocuda::stencil::StencilRun::with_grid(
                            gpu,
                            &taps,
                            boundary,
                            &input,
                            &mut output,
                            StencilGrid::Blocks(4),
                        )?;
                        let what = format!(
                            "{} on 4 blocks, {} boundary, n = {n}, offsets {in_offset} and {out_offset}",
                            run.symbol(),
                            boundary.name()
                        );
                        ensure!(run.config().grid[0] == 4, "{what}: {}", run.config());
                        run.run().context(what.clone())?;
                        drop(run);
                        drop(output);
                        let got = gpu.download(&out.index(region))?;
                        if let Some(why) = compare(&got, &want, radius) {
                            bail!("{what}: {why}");
                        }
                        launches += 1;
                    }
                }
            }
        }
    }
    ensure!(launches >= 3 * 3 * 2 * lanes, "{launches} launches");
    Ok(())
}

/// The library's stencil (`apply`) of every radius and boundary on inputs where, among uniform
/// values, about one element in 256 each is a NaN, `+inf` and `-inf`, and about one in 30 a
/// large value, one in 9 a subnormal (of at most 100 units) and one in 13 a zero of either sign; and, every 1021
/// elements (so at every lane of a vector), a run of 40 tiny values (subnormals of at most 3
/// units and zeros), a run of 40 `-0`, and a run of three large values of one sign. Every
/// output matches the CPU ([`cpu::stencil_output_ok`]), and at every radius some outputs are
/// NaN, infinite, `-0` and (of the runs of tiny values) subnormal, and for `f16` some overflow:
/// the large values are 30000 for `f16`, so that three of them exceed its largest value,
/// 65504; `1e37` for `f32` and `bf16`, whose `f32` sums of up to 33 do not overflow.
fn special_values<T: Element>(gpu: &Gpu) -> TestResult {
    let big = if T::TYPE == ElemType::F16 {
        30000.0
    } else {
        1e37
    };
    let mut rng = SplitMix64::new(0x5bec + T::TYPE as u64);
    let n = 16 * 1021 + 5;
    let x: Vec<T> = (0..n)
        .map(|i| {
            let r = rng.next_u64();
            let sign = if r >> 63 == 1 { -1.0 } else { 1.0 };
            let v = match (i % 1021, r % 256) {
                (0..40, _) => sign * T::MIN_SUBNORMAL * ((r >> 8) % 4) as f64,
                (100..140, _) => -0.0,
                (200..203, _) => big,
                (300..303, _) => -big,
                (_, 0) => f64::NAN,
                (_, 1) => f64::INFINITY,
                (_, 2) => f64::NEG_INFINITY,
                (_, 3..=10) => sign * big,
                (_, 11..=40) => sign * T::MIN_SUBNORMAL * ((r >> 8) % 100 + 1) as f64,
                (_, 41..=60) => sign * 0.0,
                _ => ((r >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0,
            };
            T::from_f64(v)
        })
        .collect();
    let input = gpu.upload(&x, "special-value input")?;
    // Only `f16`'s large values overflow the type.
    let overflows = T::TYPE == ElemType::F16;
    for radius in STENCIL_RADII {
        for boundary in Boundary::ALL {
            let taps = Taps::Sum { radius };
            let got = gpu.download(&*stencil::apply(gpu, &input, &taps, boundary)?)?;
            let check = cpu::check_stencil(&x, &taps, boundary, &got);
            let what = format!("{} R = {radius}, {} boundary", T::TYPE, boundary.name());
            ensure!(check.passed, "{what}: {}", check.detail);
            // The inputs reach the paths they are for, at this radius.
            let count = |f: &dyn Fn(f64) -> bool| got.iter().filter(|g| f(g.to_f64())).count();
            let counts = [
                ("NaN", count(&|g| g.is_nan())),
                ("infinite", count(&|g| g.is_infinite())),
                ("-0", count(&|g| g == 0.0 && g.is_sign_negative())),
                (
                    "subnormal",
                    count(&|g| {
                        g != 0.0
                            && g.abs() < T::MIN_SUBNORMAL * 2f64.powi(T::EXACT_INT_BITS as i32 - 1)
                    }),
                ),
                (
                    "overflowing",
                    count(&|g| g.is_infinite())
                        - (0..n)
                            .filter(|&i| {
                                cpu::stencil_point(&x, &taps, boundary, i)
                                    .value
                                    .is_infinite()
                            })
                            .count(),
                ),
            ];
            for (name, c) in counts {
                if name != "overflowing" || overflows {
                    ensure!(c > 0, "{what}: no {name} output; {counts:?}");
                }
            }
        }
    }
    Ok(())
}
