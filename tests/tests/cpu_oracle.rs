//! The reduction oracle rejects wrong answers, for every configuration the GPU suite
//! (`gpu_reduce`) and the default benchmark check: a sum with one block missing, one block
//! counted twice, zero and twice the sum must each FAIL [`ReduceReference::check`] wherever they
//! differ from the right answer — and for the exactly summable inputs they always differ.
//!
//! "One block" is the smallest contribution any block of that launch makes to the sum: a
//! contiguous chunk of `block * unroll` elements for the textbook family, `block` for the
//! atomic finish, the lightest block's share of the grid-stride tiles for the fast path, the
//! grid-synchronised sum and the notes' two-pass sums. Where the grid depends on the GPU's
//! occupancy (the fast path, the grid-synchronised sum), every grid from a range of resident
//! block counts is tried.
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::with_elem_type;
use ferrocuda_cli::bench::api::api_input;
use ferrocuda_cli::bench::report::BenchConfig;
use ferrocuda_lessons::cpu::exact::ExactLayout;
use ferrocuda_lessons::cpu::{ReduceReference, book_input};
use ferrocuda_lessons::kernels::config::{REDUCE_FAST_ITEMS, REDUCE_STATIC_GRID};
use ferrocuda_lessons::reduce::{ReduceOp, ReduceVariant, rounding_depth};
use ferrocuda_tests::exact_sum_input;
use ferrocuda_tests::reduce_suite::{
    PATTERN_SIZES, POOL_LEN, alternating_pool, blocks, constant_pool, exact_pool_seed, sizes,
};

/// Offsets into the pool each configuration is tried at (every residue modulo 4, as the GPU
/// suite's random offsets cover).
const OFFSETS: [usize; 4] = [0, 1, 2, 4095];

/// The grids a launch of `variant` over `n` elements with `block` threads can have: one for a
/// grid fixed by `n`, several for a grid capped by the GPU's resident blocks.
fn grids(variant: ReduceVariant, elem_size: usize, n: usize, block: u32) -> Vec<u32> {
    let b = block as usize;
    let by = |per_block: usize| n.div_ceil(per_block).max(1) as u32;
    if variant.is_textbook() {
        return vec![by(b * variant.unroll())];
    }
    match variant {
        ReduceVariant::CgVector4 => vec![by(b * 16 / elem_size)],
        _ if variant.is_atomic_finish() => vec![by(b)],
        ReduceVariant::Reduce1Parallelism | ReduceVariant::Reduce2Static => {
            vec![REDUCE_STATIC_GRID]
        }
        _ => {
            let wanted = if variant == ReduceVariant::Fast {
                by(b * 16 / elem_size * REDUCE_FAST_ITEMS)
            } else {
                by(b)
            };
            // Resident blocks of GPUs with 1 to 144 SMs at 1 to 16 blocks each.
            let mut out: Vec<u32> = [1, 8, 80, 108, 132, 144]
                .into_iter()
                .flat_map(|sms| [1, 2, 4, 8, 16].map(|per_sm| (sms * per_sm).min(wanted)))
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        }
    }
}

/// One input with what every configuration over it needs: the reference, and prefix sums so
/// that a block's share costs one subtraction per chunk.
struct Input<T: Element> {
    reference: ReduceReference<T>,
    prefix: Vec<f64>,
}

impl<T: Element> Input<T> {
    fn new(x: &[T]) -> Self {
        let mut prefix = Vec::with_capacity(x.len() + 1);
        prefix.push(0.0);
        let mut acc = 0.0;
        for v in x {
            acc += v.to_f64();
            prefix.push(acc);
        }
        Self {
            reference: ReduceReference::of(ReduceOp::Sum, x, |v| v),
            prefix,
        }
    }

    fn len(&self) -> usize {
        self.prefix.len() - 1
    }

    /// The smallest non-zero contribution of one block holding at least one whole tile (a
    /// block that only holds the input's ragged end is a few elements, not a block): blocks
    /// hold contiguous tiles, or under a grid-stride loop every `grid`-th tile. An input
    /// shorter than one tile is one block.
    fn lightest_block(&self, tile: usize, grid: usize, strided: bool) -> f64 {
        let n = self.len();
        let whole = n / tile.max(1);
        if whole == 0 {
            return self.prefix[n];
        }
        let tiles: Vec<f64> = (0..whole)
            .map(|c| self.prefix[(c + 1) * tile] - self.prefix[c * tile])
            .collect();
        let per_block: Vec<f64> = if strided {
            (0..grid.min(whole))
                .map(|b| tiles.iter().skip(b).step_by(grid).sum())
                .collect()
        } else {
            tiles
        };
        per_block
            .into_iter()
            .filter(|&c| c != 0.0)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The elements one block takes per tile, and whether it strides over the grid.
fn tile(variant: ReduceVariant, elem_size: usize, block: u32) -> (usize, bool) {
    let b = block as usize;
    if variant.is_textbook() {
        return (b * variant.unroll(), false);
    }
    match variant {
        ReduceVariant::CgVector4 => (b * 16 / elem_size, false),
        _ if variant.is_atomic_finish() => (b, false),
        ReduceVariant::Fast => (b * 16 / elem_size * REDUCE_FAST_ITEMS, true),
        _ => (b, true),
    }
}

/// One configuration's verdict: the wrong answers the check accepted, and how many of the four
/// equal the right answer (and so are not wrong).
struct Verdict {
    accepted: Vec<String>,
    coincide: usize,
}

fn judge<T: Element>(variant: ReduceVariant, input: &Input<T>, block: u32) -> Verdict {
    let reference = &input.reference;
    let mut verdict = Verdict {
        accepted: Vec::new(),
        coincide: 0,
    };
    let right = match reference.exact {
        Some(v) => v.to_f64(),
        None => reference.sum,
    };
    let (tile, strided) = tile(variant, size_of::<T>(), block);
    for grid in grids(variant, size_of::<T>(), input.len(), block) {
        let depth = rounding_depth(variant, T::TYPE, input.len(), grid, block);
        let one_block = input.lightest_block(tile, grid as usize, strided);
        let wrong = [
            ("one block missing", right - one_block),
            ("one block twice", right + one_block),
            ("zero", 0.0),
            ("double", 2.0 * right),
        ];
        for (what, value) in wrong {
            let got = T::from_f64(value);
            if got.to_f64() == right {
                verdict.coincide += 1;
            } else if reference.check(got, depth).passed {
                verdict.accepted.push(format!(
                    "{what}: {got} accepted for {right} (grid {grid}, depth {depth})"
                ));
            }
        }
    }
    verdict
}

/// Every wrong answer of the configurations `cases` yields is rejected; where `all_distinct`,
/// none of them may coincide with the right answer either.
fn assert_rejects(label: &str, verdict: Verdict, all_distinct: bool) {
    assert!(
        verdict.accepted.is_empty(),
        "{label}: the oracle accepts wrong answers:\n{}",
        verdict.accepted.join("\n")
    );
    assert!(
        !all_distinct || verdict.coincide == 0,
        "{label}: {} wrong answers equal the right one: the input cannot tell them apart",
        verdict.coincide
    );
}

fn float_types(variant: ReduceVariant) -> Vec<ElemType> {
    [ElemType::F32, ElemType::F64]
        .into_iter()
        .filter(|&t| variant.supports_type(t))
        .collect()
}

#[test]
fn oracle_rejects_wrong_sums_for_every_configuration_of_the_gpu_sweep() {
    let mut configurations = 0;
    for ty in [ElemType::F32, ElemType::F64] {
        with_elem_type!(ty, T => {
            let pool: Vec<T> = exact_sum_input(POOL_LEN, exact_pool_seed(ty.name()));
            let mut inputs = std::collections::HashMap::new();
            for variant in ReduceVariant::ALL.into_iter().filter(|v| v.supports_type(ty)) {
                for block in blocks(variant) {
                    for n in sizes(block) {
                        for offset in OFFSETS {
                            let input = inputs
                                .entry((n, offset))
                                .or_insert_with(|| Input::new(&pool[offset..offset + n]));
                            assert!(input.reference.exact.is_some(), "the pool is exactly summable");
                            let label = format!(
                                "{} {ty} n = {n} block {block} offset {offset}",
                                variant.name()
                            );
                            // From 64 elements on, every block of every variant holds a
                            // non-zero group of the exactly summable input.
                            assert_rejects(&label, judge(variant, input, block), n >= 64);
                            configurations += 1;
                        }
                    }
                }
            }
        });
    }
    assert!(
        configurations > 3000,
        "only {configurations} configurations"
    );
}

#[test]
fn oracle_rejects_wrong_sums_of_the_constant_input_within_its_rounding_bound() {
    for variant in ReduceVariant::ALL {
        if variant.is_atomic_finish() {
            // Checked on exactly summable inputs only (gpu_reduce's `float_patterns`).
            continue;
        }
        for ty in float_types(variant) {
            with_elem_type!(ty, T => {
                let pool: Vec<T> = constant_pool();
                for n in PATTERN_SIZES {
                    let label = format!("{} {ty} constant n = {n}", variant.name());
                    let input = Input::new(&pool[1..1 + n]);
                    let verdict = judge(variant, &input, variant.default_block());
                    assert_rejects(&label, verdict, true);
                }
            });
        }
    }
}

#[test]
fn oracle_rejects_wrong_sums_of_the_alternating_sign_input() {
    for variant in ReduceVariant::ALL {
        for ty in float_types(variant) {
            with_elem_type!(ty, T => {
                let pool: Vec<T> = alternating_pool();
                for n in PATTERN_SIZES {
                    for offset in OFFSETS {
                        let input = Input::new(&pool[offset..offset + n]);
                        assert!(input.reference.exact.is_some(), "{ty} n = {n}: not exact");
                        let label = format!("{} {ty} alternating n = {n} offset {offset}", variant.name());
                        let verdict = judge(variant, &input, variant.default_block());
                        assert_rejects(&label, verdict, true);
                    }
                }
            });
        }
    }
}

#[test]
fn oracle_rejects_wrong_sums_for_every_api_row_of_the_default_bench() {
    for n in BenchConfig::default_run().api_sizes {
        if n > 1 << 24 {
            // Too large to enumerate here: a non-zero value in every 32 elements, far fewer
            // than a block's tile, and a total of at most n / 16 (every order exact).
            assert!(n / 16 <= 1 << 24, "api n = {n}: the total may pass 2^24");
            continue;
        }
        let input = Input::new(&api_input(n));
        assert!(input.reference.exact.is_some(), "api n = {n}: not exact");
        let verdict = judge(
            ReduceVariant::Fast,
            &input,
            ReduceVariant::Fast.default_block(),
        );
        assert_rejects(&format!("api n = {n}"), verdict, true);
    }
}

#[test]
fn oracle_rejects_wrong_sums_for_every_row_of_the_default_bench() {
    let config = BenchConfig::default_run();
    for &ty in &config.types {
        for &n in &config.sizes {
            for &variant in &config.reduce_variants {
                if !variant.supports_type(ty) {
                    continue;
                }
                let block = variant.default_block();
                let label = format!("bench {} {ty} n = {n}", variant.name());
                if n <= 1 << 24 {
                    with_elem_type!(ty, T => {
                        let x: Vec<T> = book_input(n, n as u64);
                        let input = Input::new(&x);
                        assert_rejects(&label, judge(variant, &input, block), ty.is_float());
                    });
                } else if ty.is_float() {
                    // Too large to enumerate here: its layout proves what enumeration shows
                    // for the smaller sizes. The total stays within 2^EXACT_INT_BITS (every order
                    // exact), and every aligned group holds a non-zero value, with groups no
                    // longer than the smallest tile any block takes.
                    let digits = with_elem_type!(ty, T => <T as Element>::EXACT_INT_BITS);
                    let layout = ExactLayout::of(n, digits);
                    assert!(layout.max_total(n) <= 1 << digits, "{label}: {layout:?}");
                    let group = match layout {
                        ExactLayout::Dense { group_sum } => {
                            assert!(group_sum >= 1, "{label}");
                            4
                        }
                        ExactLayout::Sparse { group } => group as usize,
                    };
                    assert!(
                        group <= tile(variant, ty.size(), block).0,
                        "{label}: groups of {group} elements, longer than a block's tile"
                    );
                }
            }
        }
    }
}

/// The generator's layout keeps its promise on its own: every partial sum exact, a non-zero
/// value in every group, for dense and sparse sizes.
#[test]
fn exactly_summable_inputs_keep_their_total_within_2_to_the_digits() {
    for n in [
        1,
        2,
        3,
        4,
        5,
        1000,
        (1 << 20) + 3,
        (1 << 22) + 1,
        1 << 24,
        POOL_LEN,
        (1 << 25) + 7,
    ] {
        let x: Vec<f32> = exact_sum_input(n, 42);
        let layout = ExactLayout::of(n, 24);
        let total: u64 = x.iter().map(|&v| v as u64).sum();
        assert!(
            total <= 1 << 24 && total <= layout.max_total(n),
            "n = {n}: {total}"
        );
        assert!(x.iter().all(|v| v.fract() == 0.0 && *v >= 0.0), "n = {n}");
        let group = match layout {
            ExactLayout::Dense { .. } => 4,
            ExactLayout::Sparse { group } => group as usize,
        };
        for (k, g) in x.chunks_exact(group).enumerate() {
            assert!(
                g.iter().any(|&v| v != 0.0),
                "n = {n}: group {k} is all zero"
            );
        }
        if let ExactLayout::Dense { group_sum } = layout
            && group_sum >= 4
        {
            assert!(
                x.iter().all(|&v| v >= 1.0),
                "n = {n}: a zero in a dense layout of sum {group_sum}"
            );
        }
        let doubles: Vec<f64> = exact_sum_input(n, 42);
        assert!(doubles.iter().all(|&v| v >= 1.0), "f64 n = {n} has a zero");
    }
}
