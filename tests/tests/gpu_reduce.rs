//! GPU tests of the reductions: every variant of the notes and the library's fast path,
//! against the CPU references of `ferrocuda_lessons::cpu`.
//!
//! - Every [`ReduceVariant`] x every element type it supports x the sizes 1, 2, 31, 32, 33,
//!   1000, block - 1, block, block + 1, 8 * block + 5, 2^20 + 3 and 2^24 x the block sizes 64,
//!   128, 256, 512 and 1024 that the variant accepts (`complete_unroll` has exactly those five
//!   entry points); the fast path's `min` and `max` and the widening `i32 -> i64` sum on the
//!   same grid, plus the library functions `reduce::{sum, min, max, sum_i32_to_i64}`.
//! - Empty inputs, constant and alternating-sign float inputs, `i32` sums that overflow,
//!   bit-for-bit reproducibility, and the errors for what a variant does not support.
//! - The 16-bit floats (`half`): sums in `f32`, `min`/`max`, the reproducible sum.
//!
//! The oracle is [`ReduceReference::check`]. Integer sums (wrapping, as the kernels compute
//! them), `min` and `max` must equal the CPU's bit for bit. So must every float sum of the
//! sweep: its floats are exactly summable (`ferrocuda_lessons::cpu::exact`: non-negative integers whose
//! total stays within `2^EXACT_INT_BITS`, a non-zero value in every aligned group of four), so every
//! order of addition gives the exact sum, and a block missing or counted twice, a zero or a
//! doubled sum all differ from it. Only the constant `0.1` input and the reproducibility tests'
//! uniform `[-1, 1)` input are checked against a rounding bound, `(depth + 2) * eps * sum(|x|)`
//! with `depth` from [`ferrocuda_lessons::reduce::rounding_depth`], counted from the variant's actual
//! order; the atomic-finish variants, whose bound is too loose to catch a missing block, get no
//! such input. `cpu_oracle`'s oracle-rejection test proves, for every configuration here, that
//! the check rejects the four wrong answers.
//!
//! The outputs the kernels must write (per-block partials and the result) start poisoned with
//! `Element::poison()` (a NaN for floats, every byte `0xA5` for integers), so a result the
//! kernels never wrote fails. Every case below uses a fresh `ReduceRun`.
//!
//! Inputs: one exactly summable buffer of 2^24 + 4096 elements per element type (full-range
//! integers, so `i32` sums wrap) is uploaded once per test thread. Every case reads a sub-slice
//! of it at a random offset, so it sees fresh data, and the offsets cycle through every residue
//! modulo 4 elements, so inputs start at every position relative to a 16-byte boundary (what
//! the vector-load variants must handle with a scalar head). The CPU reference is computed from
//! the matching host sub-slice. A failure names the variant, type, size, block, offset, and the
//! result against the expected value.
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail, ensure};
use ferrocuda::runtime::element::{Bf16, F16};
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::{DeviceBuffer, DeviceSlice, View};
use ferrocuda::{Error, Gpu, with_elem_type};
use ferrocuda_lessons::cpu::{ReduceReference, SplitMix64};
use ferrocuda_lessons::reduce::{self, ReduceOp, ReduceRun, ReduceVariant};
use ferrocuda_tests::reduce_suite::{
    LARGEST, PATTERN_SIZES, alternating_pool, blocks, constant_pool, exact_pool_seed, pool_len,
    seed, sizes,
};
use ferrocuda_tests::{
    TestResult, arch_allows, exact_sum_input, gpu_test, random_vec, run_gpu_suite, scaled,
};
use libtest_mimic::Trial;

#[path = "gpu_reduce/half.rs"]
mod half;

fn main() -> ExitCode {
    let mut trials = Vec::new();
    for variant in ReduceVariant::ALL {
        for ty in ElemType::ALL
            .into_iter()
            .filter(|&t| variant.supports_type(t))
        {
            trials.push(same_type_sweep_trial(variant, ReduceOp::Sum, ty));
        }
    }
    for op in [ReduceOp::Min, ReduceOp::Max] {
        for ty in ElemType::ALL {
            for variant in [ReduceVariant::Fast, ReduceVariant::FastCluster] {
                trials.push(same_type_sweep_trial(variant, op, ty));
            }
        }
    }
    trials.push(sweep_trial(Reduction::<i32, i64> {
        variant: ReduceVariant::Fast,
        op: ReduceOp::Sum,
        widen: i64::from,
        library: Some(("sum_i32_to_i64", reduce::sum_i32_to_i64)),
    }));
    trials.push(gpu_test(
        "sum_i32_to_i64_is_exact_where_the_i32_sum_wraps",
        widening_sum_is_exact_where_the_i32_sum_wraps,
    ));
    for ty in ElemType::ALL {
        trials.extend(with_elem_type!(ty, T => [
            gpu_test(
                &format!("sum_of_an_empty_{ty}_input_is_zero_for_every_variant"),
                empty_sum_is_zero::<T>,
            ),
            gpu_test(
                &format!("min_and_max_of_an_empty_{ty}_input_are_invalid_arguments"),
                empty_min_max_are_invalid::<T>,
            ),
        ]));
    }
    for variant in ReduceVariant::ALL {
        if variant.supports_type(ElemType::F32) {
            trials.push(float_patterns_trial::<f32>(variant));
        }
        if variant.supports_type(ElemType::F64) {
            trials.push(float_patterns_trial::<f64>(variant));
        }
    }
    trials.extend([
        gpu_test("sum_f32_gives_one_bit_pattern_in_100_runs", |gpu| {
            library_function_is_reproducible::<f32>(gpu, ReduceOp::Sum)
        }),
        gpu_test("sum_f64_gives_one_bit_pattern_in_100_runs", |gpu| {
            library_function_is_reproducible::<f64>(gpu, ReduceOp::Sum)
        }),
        gpu_test("min_f32_gives_one_bit_pattern_in_100_runs", |gpu| {
            library_function_is_reproducible::<f32>(gpu, ReduceOp::Min)
        }),
    ]);
    for variant in ReduceVariant::ALL {
        let deterministic = ElemType::ALL
            .into_iter()
            .any(|t| variant.supports_type(t) && variant.is_deterministic(t));
        if deterministic {
            trials.push(gpu_test(
                &format!(
                    "reduce_{}_gives_identical_bits_in_3_runs_for_every_deterministic_type",
                    variant.name()
                ),
                move |gpu| variant_is_reproducible(gpu, variant),
            ));
        }
    }
    trials.extend([
        gpu_test(
            "sum_of_f16_in_f32_is_exact_at_every_size_and_offset",
            half::sums_are_exact::<F16>,
        ),
        gpu_test(
            "sum_of_bf16_in_f32_is_exact_at_every_size_and_offset",
            half::sums_are_exact::<Bf16>,
        ),
        gpu_test(
            "min_max_of_f16_match_cpu_with_nan_inf_and_subnormals",
            half::min_max_match_cpu::<F16>,
        ),
        gpu_test(
            "min_max_of_bf16_match_cpu_with_nan_inf_and_subnormals",
            half::min_max_match_cpu::<Bf16>,
        ),
        gpu_test(
            "reproducible_sum_of_f16_has_the_cpu_f32_bits",
            half::reproducible_matches_cpu::<F16>,
        ),
        gpu_test(
            "reproducible_sum_of_bf16_has_the_cpu_f32_bits",
            half::reproducible_matches_cpu::<Bf16>,
        ),
    ]);
    trials.extend([
        gpu_test(
            "reduce_variants_reject_unsupported_types_naming_the_variant",
            unsupported_types_are_invalid,
        ),
        gpu_test(
            "reduce_variants_other_than_fast_reject_min_and_max_naming_the_variant",
            unsupported_ops_are_invalid,
        ),
        gpu_test(
            "reduce_variants_reject_unsupported_block_sizes_naming_the_variant",
            unsupported_blocks_are_invalid,
        ),
        gpu_test(
            "reduce_variants_reject_widening_except_the_fast_i32_sum",
            unsupported_widening_is_invalid,
        ),
    ]);
    run_gpu_suite(trials)
}

/// A random start for `n` pool elements, congruent to `case` modulo 4: over a sweep, inputs
/// start at every position relative to a 16-byte boundary (the pool itself is 256-byte
/// aligned, as `cuMemAlloc` returns it).
fn random_offset(rng: &mut SplitMix64, n: usize, case: usize) -> usize {
    let room = pool_len() - n;
    assert!(room >= 3, "n = {n} leaves no room in the pool");
    (rng.next_u64() as usize % ((room - 3) / 4 + 1)) * 4 + case % 4
}

/// What a pool holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pattern {
    /// Full-range integers; floats exactly summable (`cpu::exact`): every float sum of it has
    /// an exact reference.
    Exact,
    /// Full-range integers, floats uniform in `[-1, 1)`: for the tests of bit-for-bit
    /// reproducibility, which an exactly summable input would pass whatever the order.
    Random,
    /// `0.1` everywhere: a float sum checked against its rounding bound.
    Constant,
    /// Integers `+v, -v, 1, 1` in every group of four (`reduce_suite::alternating_pool`): exact,
    /// with cancellation.
    Alternating,
}

/// A pattern of `pool_len()` elements on the host and on the device.
struct Pool<T: Element> {
    pattern: Pattern,
    host: Vec<T>,
    device: DeviceBuffer<T>,
}

impl<T: Element> Pool<T> {
    /// The `n` elements at `offset`, on the device.
    fn input(&self, offset: usize, n: usize) -> View<'_, T> {
        self.device.index(offset..offset + n)
    }

    /// The same elements on the host.
    fn host(&self, offset: usize, n: usize) -> &[T] {
        &self.host[offset..offset + n]
    }
}

thread_local! {
    /// This test thread's pools, in its `Gpu`'s context. Leaked like the `Gpu` itself: they
    /// live as long as the thread, and each is generated and uploaded once.
    static POOLS: RefCell<HashMap<(ElemType, Pattern), &'static dyn Any>> =
        RefCell::new(HashMap::new());
}

fn pool<T: Element>(
    gpu: &Gpu,
    pattern: Pattern,
    make: impl FnOnce() -> Vec<T>,
) -> anyhow::Result<&'static Pool<T>> {
    let key = (T::TYPE, pattern);
    if let Some(pool) = POOLS.with_borrow(|pools| pools.get(&key).copied()) {
        return Ok(pool
            .downcast_ref()
            .expect("pools are keyed by their element type"));
    }
    let host = make();
    assert_eq!(host.len(), pool_len());
    // `upload` returns once the copy has landed.
    let device = gpu.upload(&host, &format!("{pattern:?} {} pool", T::TYPE))?;
    let pool: &'static Pool<T> = Box::leak(Box::new(Pool {
        pattern,
        host,
        device,
    }));
    POOLS.with_borrow_mut(|pools| pools.insert(key, pool));
    Ok(pool)
}

fn exact_pool<T: Element>(gpu: &Gpu) -> anyhow::Result<&'static Pool<T>> {
    pool(gpu, Pattern::Exact, || {
        exact_sum_input(pool_len(), exact_pool_seed(T::TYPE.name()))
    })
}

fn random_pool<T: Element>(gpu: &Gpu) -> anyhow::Result<&'static Pool<T>> {
    pool(gpu, Pattern::Random, || {
        random_vec(pool_len(), seed(&format!("{} pool", T::TYPE)))
    })
}

fn float_pool<T: Element>(gpu: &Gpu, pattern: Pattern) -> anyhow::Result<&'static Pool<T>> {
    match pattern {
        Pattern::Exact => exact_pool(gpu),
        Pattern::Random => random_pool(gpu),
        Pattern::Constant => pool(gpu, pattern, constant_pool),
        Pattern::Alternating => pool(gpu, pattern, alternating_pool),
    }
}

/// A library function reducing a whole slice (`reduce::sum`, `min`, `max`, `sum_i32_to_i64`).
type LibraryFn<T, A> = fn(&Gpu, &DeviceSlice<T>) -> ferrocuda::Result<A>;

/// A reduction under test: `op` over `T` by `variant`, accumulated in `A`.
struct Reduction<T: Element, A: Element> {
    variant: ReduceVariant,
    op: ReduceOp,
    /// An input element as the accumulator (the identity, or `i32 -> i64`).
    widen: fn(T) -> A,
    /// The library function that computes the same with the default block (the fast path's).
    library: Option<(&'static str, LibraryFn<T, A>)>,
}

impl<T: Element> Reduction<T, T> {
    fn same_type(variant: ReduceVariant, op: ReduceOp) -> Self {
        let library: Option<(&'static str, LibraryFn<T, T>)> = match op {
            _ if variant != ReduceVariant::Fast => None,
            ReduceOp::Sum => Some(("sum", reduce::sum::<T>)),
            ReduceOp::Min => Some(("min", reduce::min::<T>)),
            ReduceOp::Max => Some(("max", reduce::max::<T>)),
        };
        Self {
            variant,
            op,
            widen: |v| v,
            library,
        }
    }
}

impl<T: Element, A: Element> Reduction<T, A> {
    /// `interleaved sum f32`, `fast sum i32 -> i64`.
    fn label(&self) -> String {
        let into = if A::TYPE == T::TYPE {
            String::new()
        } else {
            format!(" -> {}", A::TYPE)
        };
        format!(
            "{} {} {}{into}",
            self.variant.name(),
            self.op.name(),
            T::TYPE
        )
    }
}

/// How a case is run.
#[derive(Clone, Copy)]
enum Via<T: Element, A: Element> {
    /// `ReduceRun` with this block size.
    Run(u32),
    /// The library function.
    Library(&'static str, LibraryFn<T, A>),
}

/// One input of a trial: the `n` elements at `offset` of a pool, reduced `via`.
struct Case<T: Element, A: Element> {
    pool: &'static Pool<T>,
    n: usize,
    offset: usize,
    via: Via<T, A>,
}

impl<T: Element, A: Element> Case<T, A> {
    fn new(pool: &'static Pool<T>, n: usize, offset: usize, via: Via<T, A>) -> Self {
        Self {
            pool,
            n,
            offset,
            via,
        }
    }

    /// `interleaved sum f32: n = 33, block 64, offset 1285` (and the pattern, unless random).
    fn describe(&self, r: &Reduction<T, A>) -> String {
        let how = match self.via {
            Via::Run(block) => format!("block {block}"),
            Via::Library(name, _) => format!("`reduce::{name}`"),
        };
        let input = match self.pool.pattern {
            Pattern::Exact => String::new(),
            pattern => format!(", {pattern:?} input"),
        };
        format!(
            "{}: n = {}, {how}, offset {}{input}",
            r.label(),
            self.n,
            self.offset
        )
    }

    /// The GPU's result, and the rounding depth of the launch that computed it.
    fn run(&self, gpu: &Gpu, r: &Reduction<T, A>) -> anyhow::Result<(A, f64)> {
        let input = self.pool.input(self.offset, self.n);
        let prepare = |block| ReduceRun::<T, A>::new(gpu, r.variant, r.op, &input, block);
        Ok(match self.via {
            Via::Run(block) => {
                let mut run = prepare(block)?;
                (run.run()?, run.rounding_depth())
            }
            Via::Library(_, f) => {
                // The library function launches the variant's default block.
                let depth = prepare(r.variant.default_block())?.rounding_depth();
                (f(gpu, &input)?, depth)
            }
        })
    }
}

/// `items.iter().map(f)`, spread over every CPU core.
fn par_map<I: Sync, R: Send>(items: &[I], f: impl Fn(&I) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return out;
                        };
                        out.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a CPU reference panicked"))
            .collect()
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Runs every case on the GPU and checks each against its CPU reference; fails listing every
/// case that disagrees. The references are computed on all cores while the GPU runs: at 2^24
/// elements they, not the GPU, take most of the suite's time.
fn all_pass<T: Element, A: Element>(
    gpu: &Gpu,
    r: &Reduction<T, A>,
    cases: &[Case<T, A>],
) -> TestResult {
    ensure!(!cases.is_empty(), "{}: no case to run", r.label());
    let (results, references) = std::thread::scope(|s| {
        let references = s.spawn(|| {
            par_map(cases, |case| {
                ReduceReference::of(r.op, case.pool.host(case.offset, case.n), r.widen)
            })
        });
        let results = cases
            .iter()
            .map(|case| case.run(gpu, r).with_context(|| case.describe(r)))
            .collect::<anyhow::Result<Vec<_>>>();
        (
            results,
            references.join().expect("a CPU reference panicked"),
        )
    });
    let results = results?;
    let failures: Vec<String> = cases
        .iter()
        .zip(results)
        .zip(references)
        .filter_map(|((case, (got, depth)), reference)| {
            let check = reference.check(got, depth);
            (!check.passed).then(|| {
                let want = match reference.exact {
                    Some(want) => want.to_string(),
                    None => format!("{} (compensated f64 sum)", reference.sum),
                };
                let case = case.describe(r);
                format!("{case}: got {got}, want {want} ({})", check.detail)
            })
        })
        .collect();
    ensure!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Ok(())
}

fn same_type_sweep_trial(variant: ReduceVariant, op: ReduceOp, ty: ElemType) -> Trial {
    with_elem_type!(ty, T => sweep_trial(Reduction::<T, T>::same_type(variant, op)))
}

fn sweep_trial<T: Element, A: Element>(r: Reduction<T, A>) -> Trial {
    let op = match r.op {
        ReduceOp::Sum if A::TYPE == T::TYPE => String::new(),
        op => format!("{}_", op.name()),
    };
    let into = if A::TYPE == T::TYPE {
        String::new()
    } else {
        format!("_to_{}", A::TYPE)
    };
    let name = format!(
        "reduce_{}_{op}{}{into}_matches_cpu_on_every_size_and_block",
        r.variant.name(),
        T::TYPE
    );
    gpu_test(&name, move |gpu| {
        if !arch_allows(gpu, r.variant.name(), r.variant.min_arch()) {
            return Ok(());
        }
        matches_cpu_on_every_size_and_block(gpu, &r)
    })
}

fn matches_cpu_on_every_size_and_block<T: Element, A: Element>(
    gpu: &Gpu,
    r: &Reduction<T, A>,
) -> TestResult {
    let pool = exact_pool::<T>(gpu)?;
    let mut rng = SplitMix64::new(seed(&r.label()));
    let mut cases = Vec::new();
    for block in blocks(r.variant) {
        for n in sizes(block) {
            let offset = random_offset(&mut rng, n, cases.len());
            let via = Via::Run(block);
            cases.push(Case::new(pool, n, offset, via));
        }
    }
    if let Some((name, f)) = r.library {
        for n in sizes(r.variant.default_block()) {
            let offset = random_offset(&mut rng, n, cases.len());
            let via = Via::Library(name, f);
            cases.push(Case::new(pool, n, offset, via));
        }
    }
    all_pass(gpu, r, &cases)
}

fn widening_sum_is_exact_where_the_i32_sum_wraps(gpu: &Gpu) -> TestResult {
    let n = scaled((1 << 20) + 3);
    let mut rng = SplitMix64::new(seed("widening"));
    let near_max: Vec<i32> = (0..n)
        .map(|_| i32::MAX - (rng.next_u64() % 1024) as i32)
        .collect();
    let near_min: Vec<i32> = (0..n)
        .map(|_| i32::MIN + (rng.next_u64() % 1024) as i32)
        .collect();
    for (label, values) in [("near i32::MAX", near_max), ("near i32::MIN", near_min)] {
        let device = gpu.upload(&values, label)?;
        // From the buffer's start and from one element in (not 16-byte aligned).
        for offset in [0, 1] {
            let (input, host) = (device.index(offset..), &values[offset..]);
            let exact: i64 = host.iter().map(|&v| i64::from(v)).sum();
            let wrapped = host.iter().fold(0i32, |a, &v| a.wrapping_add(v));
            ensure!(
                i64::from(wrapped) != exact,
                "premise: the i32 sum of {n} values {label} overflows"
            );
            let case = format!("{label}, n = {}, offset {offset}", host.len());
            let widened = reduce::sum_i32_to_i64(gpu, &input).context(case.clone())?;
            ensure!(
                widened == exact,
                "sum_i32_to_i64 {case}: got {widened}, want {exact}"
            );
            let narrow = reduce::sum::<i32>(gpu, &input).context(case.clone())?;
            ensure!(
                narrow == wrapped,
                "sum::<i32> {case}: got {narrow}, want the wrapping sum {wrapped}"
            );
        }
    }
    Ok(())
}

fn empty_sum_is_zero<T: Element>(gpu: &Gpu) -> TestResult {
    let ty = T::TYPE;
    let unallocated = gpu.upload::<T>(&[], "empty input")?;
    let values = gpu.upload(&random_vec::<T>(8, 8), "input to take an empty slice of")?;
    let inside = values.index(3..3);
    for (empty, what) in [(&*unallocated, "empty buffer"), (&inside, "empty slice")] {
        let got = reduce::sum(gpu, empty)?;
        ensure!(
            Element::same_bits(got, T::default()),
            "reduce::sum of an {what} of {ty}: got {got}, want 0"
        );
        let mut variants = 0;
        for variant in ReduceVariant::ALL
            .into_iter()
            .filter(|v| v.supports_type(ty) && v.runs_on(gpu.props()))
        {
            let block = variant.default_block();
            let case = format!("{} sum of an {what} of {ty}, block {block}", variant.name());
            let got = ReduceRun::<T, T>::new(gpu, variant, ReduceOp::Sum, empty, block)
                .and_then(|mut run| run.run())
                .context(case.clone())?;
            ensure!(
                Element::same_bits(got, T::default()),
                "{case}: got {got}, want 0"
            );
            variants += 1;
        }
        ensure!(variants > 0, "no variant supports {ty}");
    }
    if ty == ElemType::I32 {
        let empty = gpu.upload::<i32>(&[], "empty input")?;
        let got = reduce::sum_i32_to_i64(gpu, &empty)?;
        ensure!(
            got == 0,
            "sum_i32_to_i64 of an empty input: got {got}, want 0"
        );
    }
    Ok(())
}

fn empty_min_max_are_invalid<T: Element>(gpu: &Gpu) -> TestResult {
    let empty = gpu.upload::<T>(&[], "empty input")?;
    for (op, result) in [
        ("min", reduce::min(gpu, &empty)),
        ("max", reduce::max(gpu, &empty)),
    ] {
        match result {
            Err(Error::InvalidArgument { what }) => ensure!(
                what.contains("empty"),
                "{op} of an empty {} input: the message does not say the input is empty: {what}",
                T::TYPE
            ),
            Err(e) => bail!(
                "{op} of an empty {} input: expected InvalidArgument, got {e}",
                T::TYPE
            ),
            Ok(v) => bail!(
                "{op} of an empty {} input: expected InvalidArgument, got the value {v}",
                T::TYPE
            ),
        }
    }
    Ok(())
}

fn float_patterns_trial<T: Element>(variant: ReduceVariant) -> Trial {
    gpu_test(
        &format!(
            "reduce_{}_{}_is_right_on_constant_and_alternating_sign_inputs",
            variant.name(),
            T::TYPE
        ),
        move |gpu| {
            if !arch_allows(gpu, variant.name(), variant.min_arch()) {
                return Ok(());
            }
            within_bound_on_constant_and_alternating::<T>(gpu, variant)
        },
    )
}

fn within_bound_on_constant_and_alternating<T: Element>(
    gpu: &Gpu,
    variant: ReduceVariant,
) -> TestResult {
    let r = Reduction::<T, T>::same_type(variant, ReduceOp::Sum);
    let via = Via::Run(variant.default_block());
    let mut rng = SplitMix64::new(seed(&format!("patterns {}", r.label())));
    let mut cases = Vec::new();
    for pattern in float_patterns(variant) {
        let pool = float_pool::<T>(gpu, pattern)?;
        for n in PATTERN_SIZES.map(scaled) {
            let offset = random_offset(&mut rng, n, cases.len());
            cases.push(Case::new(pool, n, offset, via));
        }
    }
    all_pass(gpu, &r, &cases)
}

/// The patterns `variant` is checked on. An atomic finish adds the blocks' partials in an
/// unknown order, whose a-priori bound is too loose to catch a block missing: it gets only
/// exactly summable inputs.
fn float_patterns(variant: ReduceVariant) -> Vec<Pattern> {
    if variant.is_atomic_finish() {
        vec![Pattern::Alternating]
    } else {
        vec![Pattern::Constant, Pattern::Alternating]
    }
}

fn library_function_is_reproducible<T: Element>(gpu: &Gpu, op: ReduceOp) -> TestResult {
    let r = Reduction::<T, T>::same_type(ReduceVariant::Fast, op);
    let (name, f) = r.library.expect("the fast path has library functions");
    // Stability on the uniform input, where a different order would give different bits;
    // rightness on the exactly summable one, where the check is equality.
    let (pool, exact) = (random_pool::<T>(gpu)?, exact_pool::<T>(gpu)?);
    let mut rng = SplitMix64::new(seed(&format!("reproducible {}", r.label())));
    for (i, n) in [scaled(LARGEST + 3), 1000].into_iter().enumerate() {
        let offset = random_offset(&mut rng, n, i);
        let via = Via::Library(name, f);
        all_pass(gpu, &r, &[Case::new(exact, n, offset, via)])?;
        let input = pool.input(offset, n);
        let first = f(gpu, &input)?;
        for run in 2..=100 {
            let again = f(gpu, &input)?;
            ensure!(
                Element::same_bits(again, first),
                "reduce::{name}::<{}> n = {n}, offset {offset}: run {run} gave {again:?}, run 1 gave {first:?}",
                T::TYPE
            );
        }
    }
    Ok(())
}

fn variant_is_reproducible(gpu: &Gpu, variant: ReduceVariant) -> TestResult {
    if !arch_allows(gpu, variant.name(), variant.min_arch()) {
        return Ok(());
    }
    let mut types = 0;
    for ty in ElemType::ALL {
        if variant.supports_type(ty) && variant.is_deterministic(ty) {
            with_elem_type!(ty, T => three_runs_agree::<T>(gpu, variant))?;
            types += 1;
        }
    }
    ensure!(types > 0, "{}: no deterministic type", variant.name());
    Ok(())
}

/// Two runs of one `ReduceRun` (its setup must reset what the kernels consumed) and one of a
/// fresh `ReduceRun` give the same bits on the uniform input, and the result is right on the
/// exactly summable one.
fn three_runs_agree<T: Element>(gpu: &Gpu, variant: ReduceVariant) -> TestResult {
    let r = Reduction::<T, T>::same_type(variant, ReduceOp::Sum);
    let (n, block) = (scaled(LARGEST + 3), variant.default_block());
    let (pool, exact) = (random_pool::<T>(gpu)?, exact_pool::<T>(gpu)?);
    let mut rng = SplitMix64::new(seed(&format!("reproducible {}", r.label())));
    let offset = random_offset(&mut rng, n, 1);
    all_pass(gpu, &r, &[Case::new(exact, n, offset, Via::Run(block))])?;
    let case = Case::new(pool, n, offset, Via::Run(block));
    let input = pool.input(offset, n);
    let mut run = ReduceRun::<T, T>::new(gpu, variant, ReduceOp::Sum, &input, block)?;
    let results = [
        run.run()?,
        run.run()?,
        ReduceRun::<T, T>::new(gpu, variant, ReduceOp::Sum, &input, block)?.run()?,
    ];
    ensure!(
        results.iter().all(|&v| Element::same_bits(v, results[0])),
        "{}: the runs gave {results:?}",
        case.describe(&r)
    );
    Ok(())
}

/// Checks that `result` is `Error::InvalidArgument` whose message names `variant` and
/// contains every item of `also`.
fn expect_invalid<R>(
    result: ferrocuda::Result<R>,
    variant: ReduceVariant,
    also: &[&str],
    case: &str,
) -> TestResult {
    let name = format!("`{}`", variant.name());
    match result {
        Err(Error::InvalidArgument { what }) => {
            let missing: Vec<&str> = std::iter::once(name.as_str())
                .chain(also.iter().copied())
                .filter(|s| !what.contains(s))
                .collect();
            ensure!(
                missing.is_empty(),
                "{case}: the message lacks {missing:?}: {what}"
            );
            Ok(())
        }
        Err(e) => bail!("{case}: expected InvalidArgument naming {name}, got: {e}"),
        Ok(_) => bail!("{case}: accepted"),
    }
}

fn unsupported_types_are_invalid(gpu: &Gpu) -> TestResult {
    let mut cases = 0;
    for variant in ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        for ty in ElemType::ALL
            .into_iter()
            .filter(|&t| !variant.supports_type(t))
        {
            let case = format!("{} sum of {ty}", variant.name());
            with_elem_type!(ty, T => {
                let input = gpu.upload(&random_vec::<T>(100, 1), "input")?;
                let run = ReduceRun::<T, T>::new(
                    gpu,
                    variant,
                    ReduceOp::Sum,
                    &input,
                    variant.default_block(),
                );
                expect_invalid(run, variant, &[ty.name()], &case)?;
            });
            cases += 1;
        }
    }
    ensure!(cases > 0, "every variant supports every type");
    Ok(())
}

fn unsupported_ops_are_invalid(gpu: &Gpu) -> TestResult {
    let input = gpu.upload(&random_vec::<f32>(100, 2), "input")?;
    let mut cases = 0;
    for variant in ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        for op in ReduceOp::ALL
            .into_iter()
            .filter(|&o| !variant.supports_op(o))
        {
            let run = ReduceRun::<f32, f32>::new(gpu, variant, op, &input, variant.default_block());
            let case = format!("{} {} of f32", variant.name(), op.name());
            expect_invalid(run, variant, &[op.name()], &case)?;
            cases += 1;
        }
    }
    ensure!(cases > 0, "every variant supports every operation");
    Ok(())
}

fn unsupported_blocks_are_invalid(gpu: &Gpu) -> TestResult {
    let input = gpu.upload(&random_vec::<f32>(100, 3), "input")?;
    let mut cases = 0;
    for variant in ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        for block in [0u32, 1, 16, 31, 33, 48, 96, 100, 2048] {
            if variant.block_error(block).is_none() {
                continue;
            }
            let run = ReduceRun::<f32, f32>::new(gpu, variant, ReduceOp::Sum, &input, block);
            let case = format!("{} sum of f32, block {block}", variant.name());
            expect_invalid(run, variant, &[&block.to_string()], &case)?;
            cases += 1;
        }
    }
    ensure!(cases > 0, "every block size is accepted");
    Ok(())
}

fn unsupported_widening_is_invalid(gpu: &Gpu) -> TestResult {
    let i32_input = gpu.upload(&random_vec::<i32>(100, 4), "input")?;
    for variant in ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.runs_on(gpu.props()))
    {
        if variant == ReduceVariant::Fast {
            continue;
        }
        let block = variant.default_block();
        let run = ReduceRun::<i32, i64>::new(gpu, variant, ReduceOp::Sum, &i32_input, block);
        let case = format!("{} sum of i32 into i64", variant.name());
        expect_invalid(run, variant, &["i32", "i64"], &case)?;
    }
    let fast = ReduceVariant::Fast;
    let block = fast.default_block();
    for op in [ReduceOp::Min, ReduceOp::Max] {
        let run = ReduceRun::<i32, i64>::new(gpu, fast, op, &i32_input, block);
        expect_invalid(
            run,
            fast,
            &["i64"],
            &format!("fast {} of i32 into i64", op.name()),
        )?;
    }
    let u32_input = gpu.upload(&random_vec::<u32>(100, 5), "input")?;
    let run = ReduceRun::<u32, u64>::new(gpu, fast, ReduceOp::Sum, &u32_input, block);
    expect_invalid(run, fast, &["u32", "u64"], "fast sum of u32 into u64")?;
    let f32_input = gpu.upload(&random_vec::<f32>(100, 6), "input")?;
    let run = ReduceRun::<f32, f64>::new(gpu, fast, ReduceOp::Sum, &f32_input, block);
    expect_invalid(run, fast, &["f32", "f64"], "fast sum of f32 into f64")
}
