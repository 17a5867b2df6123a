//! CPU-only checks of what the reduction suite stands on: element counts from the command line,
//! the variants' metadata (names, supported types, operations and block sizes), the
//! reference check with its stated float bound, and the compensated sum behind it.
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda_cli::args::parse_count;
use ferrocuda_lessons::cpu::{ReduceReference, SplitMix64, compensated_sum};
use ferrocuda_lessons::reduce::{ReduceOp, ReduceVariant as V, complete_unroll_blocks};

#[test]
fn parse_count_reads_plain_numbers_powers_shifts_and_offsets() {
    assert_eq!(parse_count("1000"), Ok(1000));
    assert_eq!(parse_count("2^24"), Ok(1 << 24));
    assert_eq!(parse_count("2^24+3"), Ok((1 << 24) + 3));
    assert_eq!(parse_count("2^20-1"), Ok((1 << 20) - 1));
    assert_eq!(parse_count("1<<20"), Ok(1 << 20));
    assert_eq!(parse_count("1<<20+5"), Ok((1 << 20) + 5));
    assert_eq!(parse_count("2^0"), Ok(1));
}

#[test]
fn parse_count_rejects_non_counts_overflow_and_negative_results() {
    for bad in [
        "x",
        "2^99",
        "2^64",
        "2^3-9",
        "18446744073709551615+1",
        "",
        "2^",
        "-5",
        "1.5",
    ] {
        let err = parse_count(bad).expect_err(bad);
        assert!(
            err.contains(&format!("`{bad}`")),
            "the error for {bad:?} does not quote it: {err}"
        );
    }
}

#[test]
fn variant_and_op_names_round_trip_and_are_unique() {
    for v in V::ALL {
        assert_eq!(V::from_name(v.name()), Some(v));
    }
    let mut names: Vec<&str> = V::ALL.iter().map(|v| v.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), V::ALL.len());
    assert_eq!(V::from_name("reduceInterleaved"), None);
    for op in ReduceOp::ALL {
        assert_eq!(ReduceOp::from_name(op.name()), Some(op));
    }
    assert_eq!(ReduceOp::from_name("product"), None);
}

#[test]
fn complete_unroll_has_an_instance_per_block_of_the_notes_host_switch() {
    assert_eq!(complete_unroll_blocks(), [64, 128, 256, 512, 1024]);
}

#[test]
fn supported_types_and_ops_match_the_entry_points() {
    for v in V::ALL {
        let types: Vec<ElemType> = ElemType::ALL
            .into_iter()
            .filter(|&t| v.supports_type(t))
            .collect();
        let want = match v {
            V::Syncwarp | V::Shfl | V::Cg | V::Reduce1Parallelism | V::Reduce2Static => {
                vec![ElemType::F32, ElemType::F64]
            }
            V::CgVector4 => vec![ElemType::I32, ElemType::F32],
            _ => ElemType::ALL.to_vec(),
        };
        assert_eq!(types, want, "{v:?}");
        assert!(v.supports_op(ReduceOp::Sum));
        let fast = matches!(v, V::Fast | V::FastCluster);
        assert_eq!(v.supports_op(ReduceOp::Min), fast, "{v:?}");
        assert_eq!(v.supports_op(ReduceOp::Max), fast, "{v:?}");
    }
}

/// What `unroll()` must satisfy, rather than its table again: a name that states a factor
/// (`unrolling4`, `unroll_warps8`) agrees with it; only the in-place textbook family, the one
/// whose grid is `n / (block * unroll)`, unrolls at all, each step of the book keeping at least
/// the previous step's factor; and the factor is a power of two, so `block * unroll` stays one.
/// (That such a grid covers a ragged `n` needs the planned launch, which only a `Gpu` makes:
/// `gpu_reduce` runs each variant on ragged sizes up to just past `8 * block`.)
#[test]
fn the_textbook_family_is_the_first_nine_and_the_only_one_that_unrolls() {
    let mut previous = 1;
    for (i, v) in V::ALL.into_iter().enumerate() {
        assert_eq!(v.is_textbook(), i < 9, "{v:?}");
        let unroll = v.unroll();
        assert!(unroll.is_power_of_two(), "{v:?} unrolls {unroll}");
        if v.name().contains("unroll") {
            let digits = v.name().trim_start_matches(|c: char| !c.is_ascii_digit());
            if let Ok(stated) = digits.parse::<usize>() {
                assert_eq!(unroll, stated, "{v:?} is named for {stated}");
            }
        }
        if v.is_textbook() {
            assert!(
                unroll >= previous,
                "{v:?} unrolls less than the step before"
            );
            previous = unroll;
        } else {
            assert_eq!(unroll, 1, "{v:?} sizes its own grid and has no unrolling");
        }
    }
    assert!(previous > 1, "no textbook variant unrolls");
}

#[test]
fn only_float_sums_with_an_atomic_finish_are_nondeterministic() {
    for v in V::ALL {
        let atomic = matches!(v, V::Syncwarp | V::Shfl | V::Cg | V::CgVector4);
        assert_eq!(v.is_atomic_finish(), atomic, "{v:?}");
        for ty in ElemType::ALL {
            assert_eq!(
                v.is_deterministic(ty),
                !(atomic && ty.is_float()),
                "{v:?} {ty}"
            );
        }
    }
}

#[test]
fn block_error_allows_exactly_the_documented_block_sizes() {
    let allowed =
        |v: V| -> Vec<u32> { (0..=4096).filter(|&b| v.block_error(b).is_none()).collect() };
    let powers_of_two_from =
        |min: u32| -> Vec<u32> { (0..=10).map(|e| 1 << e).filter(|&b| b >= min).collect() };
    for v in V::ALL {
        let want = match v {
            V::Fast | V::FastCluster | V::GridSync => (1..=32).map(|k| 32 * k).collect(),
            V::CgVector4 => powers_of_two_from(32),
            _ => powers_of_two_from(64),
        };
        assert_eq!(allowed(v), want, "{v:?}");
        assert!(v.block_error(v.default_block()).is_none(), "{v:?}");
    }
    assert_eq!(allowed(V::CompleteUnroll), complete_unroll_blocks());
    // The notes' block sizes; the fast path's default is a tuning choice, only checked above.
    for v in V::ALL
        .into_iter()
        .filter(|&v| !matches!(v, V::Fast | V::FastCluster))
    {
        let want = match v {
            _ if v.is_textbook() => 512,
            V::CgVector4 | V::GridSync => 256,
            _ => 128,
        };
        assert_eq!(v.default_block(), want, "{v:?}");
    }
    let e = V::Interleaved.block_error(96).unwrap();
    assert!(
        e.contains("`interleaved`") && e.contains("96") && e.contains("power of two"),
        "{e}"
    );
    let e = V::Fast.block_error(100).unwrap();
    assert!(
        e.contains("`fast`") && e.contains("100") && e.contains("multiple of 32"),
        "{e}"
    );
    let e = V::CgVector4.block_error(2048).unwrap();
    assert!(e.contains("`cg_vector4`") && e.contains("2048"), "{e}");
}

#[test]
fn reference_check_is_exact_for_integer_sums_min_and_max() {
    let r = ReduceReference::of(ReduceOp::Sum, &[1i32, 2, 3], |v| v);
    assert_eq!(r.exact, Some(6));
    assert!(r.check(6, 0.0).passed);
    let wrong = r.check(7, 1e9);
    assert!(
        !wrong.passed,
        "a depth bound does not loosen an exact check"
    );
    assert!(wrong.detail.contains("got 7, want 6"), "{}", wrong.detail);

    let wraps = ReduceReference::of(ReduceOp::Sum, &[i32::MAX, 1], |v| v);
    assert_eq!(wraps.exact, Some(i32::MIN));
    let widened = ReduceReference::of(ReduceOp::Sum, &[i32::MAX, 1], i64::from);
    assert_eq!(widened.exact, Some(1i64 << 31));
    let unsigned = ReduceReference::of(ReduceOp::Sum, &[u64::MAX, 2], |v| v);
    assert_eq!(unsigned.exact, Some(1));

    let x = [3.5f32, -1.25, 2.0];
    let min = ReduceReference::of(ReduceOp::Min, &x, |v| v);
    assert!(min.check(-1.25, 0.0).passed);
    assert!(!min.check(-1.250_000_1, 1e6).passed);
    let max = ReduceReference::of(ReduceOp::Max, &x, |v| v);
    assert!(max.check(3.5, 0.0).passed);
    assert!(!max.check(2.0, 0.0).passed);
    let zero = ReduceReference::of(ReduceOp::Max, &[0.0f32], |v| v);
    assert!(!zero.check(-0.0, 0.0).passed, "exact means the same bits");
    let ints = ReduceReference::of(ReduceOp::Min, &[5u32, 9, 1, 7], |v| v);
    assert!(ints.check(1, 0.0).passed && !ints.check(5, 0.0).passed);
}

#[test]
fn float_sums_of_integers_within_2_to_the_digits_are_checked_for_equality() {
    let ones = ReduceReference::of(ReduceOp::Sum, &[1.0f32; 1000], |v| v);
    assert_eq!(ones.exact, Some(1000.0));
    assert!(ones.check(1000.0, 1e9).passed);
    for wrong in [999.0, 1001.0, 0.0, 2000.0, f32::poison()] {
        assert!(!ones.check(wrong, 1e9).passed, "{wrong} accepted");
    }
    let zeros = ReduceReference::of(ReduceOp::Sum, &[0.0f32, -0.0], |v| v);
    assert!(zeros.check(0.0, 0.0).passed && zeros.check(-0.0, 0.0).passed);
    // sum|x| = 2^24 is still exact in f32; one more and some order may round.
    let at_limit = vec![1.0f32; 1 << 24];
    assert!(
        ReduceReference::of(ReduceOp::Sum, &at_limit, |v| v)
            .exact
            .is_some()
    );
    let past = [&at_limit[..], &[1.0]].concat();
    assert_eq!(ReduceReference::of(ReduceOp::Sum, &past, |v| v).exact, None);
    let big = ReduceReference::of(ReduceOp::Sum, &[1.0e30f64, -1.0e30], |v| v);
    assert_eq!(big.exact, None, "integers, but beyond 2^53");
}

#[test]
fn reference_check_accepts_float_sums_within_the_stated_bound_only() {
    let r = ReduceReference::of(ReduceOp::Sum, &[0.5f32; 1000], |v| v);
    assert_eq!(
        r.exact, None,
        "halves are not integers: a bound, not equality"
    );
    assert_eq!((r.sum, r.abs_sum), (500.0, 500.0));
    let depth = 10.0;
    // (depth + 2) * eps * sum|x|: about 23 f32 ulps of 500.
    let bound = (depth + 2.0) * f64::from(f32::EPSILON) * r.abs_sum;
    let off_by = |k: f64| (500.0 + k * bound) as f32;
    assert!(r.check(500.0, depth).passed);
    assert!(r.check(off_by(0.9), depth).passed);
    assert!(r.check(off_by(-0.9), depth).passed);
    assert!(!r.check(off_by(1.1), depth).passed);
    assert!(!r.check(off_by(-1.1), depth).passed);
    assert!(
        r.check(off_by(1.1), 2.0 * depth).passed,
        "a deeper tree is allowed more"
    );
    assert!(r.check(off_by(0.9), depth).detail.contains("<="));
    assert!(r.check(off_by(1.1), depth).detail.contains(">"));
    assert!(!r.check(f32::NAN, 1e30).passed);
    assert!(!r.check(f32::INFINITY, 1e30).passed);
    assert!(!r.check(f32::poison(), 1e30).passed, "the poison is a NaN");

    // The bound scales with sum|x|, not with the (here cancelled) sum.
    let r = ReduceReference::of(ReduceOp::Sum, &[1.0e8f64, 0.5, -1.0e8], |v| v);
    assert_eq!((r.sum, r.abs_sum), (0.5, 2.0e8 + 0.5));
    assert!(r.check(0.5 + 1e-8, 1.0).passed);
    assert!(!r.check(0.5 + 1e-6, 1.0).passed);

    let empty = ReduceReference::of(ReduceOp::Sum, &[] as &[f64], |v| v);
    assert!(empty.check(0.0, 1.0).passed);
    assert!(!empty.check(1.0, 1.0).passed);
}

#[test]
fn compensated_sum_recovers_what_naive_summation_loses() {
    let x = [1e16, 1.0, -1e16];
    assert_ne!(x.iter().sum::<f64>(), 1.0, "naive summation is wrong here");
    assert_eq!(compensated_sum(x), 1.0);
    assert_eq!(compensated_sum([1.0, 1e100, 1.0, -1e100]), 2.0);
    assert_eq!(compensated_sum([]), 0.0);
}

/// Values `k * 2^e` (`|k| < 2^20`, `e` in `-30..=30`) between `2^80` and `-2^80` add exactly in
/// `i128` units of `2^-30`, which gives the exact sum; naive summation loses every bit of it
/// below `2^28` while the big term is in the running sum.
#[test]
fn compensated_sum_is_within_rounding_of_the_exact_sum_where_naive_summation_is_not() {
    let mut rng = SplitMix64::new(2024);
    let mut terms: Vec<(i64, i32)> = vec![(1, 80)];
    terms.extend((0..100_000).map(|_| {
        let k = (rng.next_u64() % (1 << 21)) as i64 - (1 << 20);
        let e = (rng.next_u64() % 61) as i32 - 30;
        (k, e)
    }));
    terms.push((-1, 80));
    let x: Vec<f64> = terms
        .iter()
        .map(|&(k, e)| k as f64 * 2f64.powi(e))
        .collect();
    let exact_units: i128 = terms.iter().map(|&(k, e)| i128::from(k) << (e + 30)).sum();
    let exact = exact_units as f64 * 2f64.powi(-30);
    let tolerance = f64::EPSILON * exact.abs();
    let got = compensated_sum(x.iter().copied());
    assert!(
        (got - exact).abs() <= tolerance,
        "compensated {got}, exact {exact}"
    );
    let naive: f64 = x.iter().sum();
    assert!(
        (naive - exact).abs() > tolerance,
        "naive {naive}, exact {exact}: the case does not need compensation"
    );
}

mod reproducible_order {
    use ferrocuda_lessons::cpu::SplitMix64;
    use ferrocuda_lessons::cpu::reproducible::{chunk_sums, sum_reproducible};
    use ferrocuda_lessons::kernels::config::reduce_repro_chunk;

    fn random_f32(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect()
    }

    #[test]
    fn small_integers_sum_exactly_whatever_the_order() {
        for n in [1, 31, 8191, 8192, 8193, 3 * 8192 + 77, 200_000] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
            let exact: i64 = (0..n).map(|i| ((i * 37) % 101) as i64 - 50).sum();
            assert_eq!(sum_reproducible(&x), exact as f32, "n = {n}");
        }
    }

    #[test]
    fn the_empty_sum_and_a_sum_of_negative_zeros_are_positive_zero() {
        assert_eq!(sum_reproducible::<f32>(&[]).to_bits(), 0);
        // The padding of a ragged chunk adds +0.0, so -0.0 + +0.0 = +0.0: documented.
        assert_eq!(sum_reproducible(&[-0.0f64; 5]).to_bits(), 0);
    }

    #[test]
    fn a_sum_is_the_sum_of_its_chunk_sums_level_by_level() {
        for (n, seed) in [(8192 * 5 + 3, 1), (8192 * 8192 + 1, 2)] {
            let x = random_f32(n, seed);
            let level1 = chunk_sums(&x);
            assert_eq!(level1.len(), n.div_ceil(reduce_repro_chunk(4)));
            assert_eq!(
                sum_reproducible(&x).to_bits(),
                sum_reproducible(&level1).to_bits()
            );
        }
    }

    #[test]
    fn the_order_is_not_the_sequential_one_and_rounds_like_a_tree() {
        // 8191 values of 1 after one 2^24: sequentially every +1 is lost (2^24 + 1 rounds back
        // to 2^24); the tree adds the ones among themselves first and keeps them.
        let mut x = vec![1.0f32; 8192];
        x[0] = 16_777_216.0;
        let sequential: f32 = x.iter().sum();
        assert_eq!(sequential, 16_777_216.0);
        let exact = 16_777_216.0 + 8191.0;
        let got = sum_reproducible(&x) as f64;
        // Only the few additions that meet 2^24 round (to a spacing of 2).
        assert!((got - exact).abs() <= 2.0, "{got} vs {exact}");
    }

    #[test]
    fn its_error_is_within_the_bound_of_a_tree_of_depth_log2_n() {
        let x = random_f32(1_000_003, 9);
        let exact: f64 = ferrocuda_lessons::cpu::compensated_sum(x.iter().map(|&v| v as f64));
        let abs: f64 = x.iter().map(|v| v.abs() as f64).sum();
        let got = sum_reproducible(&x) as f64;
        assert!(
            (got - exact).abs() <= 22.0 * f32::EPSILON as f64 * abs,
            "{got} vs {exact}"
        );
    }
}

/// The inputs are generated and the references computed on all the host's cores
/// (`cpu::parallel::Split`): for 1 to 7 threads, the parts cover the input in order, aligned
/// as asked, and the generator gives the values of one sequential pass; on this host, the
/// references equal one pass where their parts combine exactly.
#[test]
fn parallel_inputs_and_references_equal_one_sequential_pass() {
    use ferrocuda_lessons::cpu::parallel::Split;
    use ferrocuda_lessons::cpu::reproducible::chunk_sums;
    use ferrocuda_lessons::cpu::{generate, random_vec};
    let n = 5 * (1 << 16) + 3;
    let mut rng = SplitMix64::new(7);
    let bits: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
    let idx: Vec<u32> = (0..n as u32).collect();
    let chunk = ferrocuda_lessons::kernels::config::reduce_repro_chunk(4);
    let mut part_counts = Vec::new();
    for threads in 1..=7 {
        let split = Split::with_threads(threads);
        let parts = split.map(&idx, chunk, |p| p.to_vec());
        assert_eq!(parts.concat(), idx, "{threads} threads");
        let (last, full) = parts.split_last().unwrap();
        assert!(!last.is_empty() && full.iter().all(|p| p.len() % chunk == 0));
        part_counts.push(parts.len());
        let got = generate(split, n, 7, ferrocuda_lessons::cpu::from_random_bits::<f32>);
        assert!(
            got.iter().zip(&bits).all(|(g, &b)| g.to_bits()
                == ferrocuda_lessons::cpu::from_random_bits::<f32>(b).to_bits()),
            "{threads} threads"
        );
        let mut starts = vec![0u32; n];
        split.for_each_mut(&mut starts, |start, part| part.fill(start as u32));
        // Each element holds its part's first index: parts in order, each starting there.
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            starts
                .iter()
                .enumerate()
                .all(|(i, &s)| s as usize <= i && starts[s as usize] == s)
        );
    }
    assert!(
        part_counts[0] == 1 && part_counts.iter().any(|&k| k > 2),
        "{part_counts:?}"
    );

    let x: Vec<i64> = random_vec(n, 8);
    let sequential = |op: ReduceOp| match op {
        ReduceOp::Sum => x.iter().fold(0i64, |a, &v| a.wrapping_add(v)),
        ReduceOp::Min => *x.iter().min().unwrap(),
        ReduceOp::Max => *x.iter().max().unwrap(),
    };
    for op in ReduceOp::ALL {
        assert_eq!(
            ReduceReference::of(op, &x, |v| v).exact,
            Some(sequential(op)),
            "{op:?}"
        );
    }
    let empty: &[i64] = &[];
    assert_eq!(
        ReduceReference::of(ReduceOp::Sum, empty, |v| v).exact,
        Some(0)
    );
    assert_eq!(ReduceReference::of(ReduceOp::Min, empty, |v| v).exact, None);
    assert_eq!(ReduceReference::of(ReduceOp::Max, empty, |v| v).exact, None);

    let f: Vec<f32> = random_vec(n, 9);
    let one_by_one: Vec<u32> = f
        .chunks(chunk)
        .map(|c| chunk_sums(c)[0].to_bits())
        .collect();
    let all: Vec<u32> = chunk_sums(&f).iter().map(|v| v.to_bits()).collect();
    assert_eq!(all, one_by_one);
    let r = ReduceReference::of(ReduceOp::Sum, &f, |v| v);
    assert_eq!(r.exact, None, "a float sum has no exact value");
    let one_pass = compensated_sum(f.iter().map(|&v| f64::from(v)));
    let abs = compensated_sum(f.iter().map(|&v| f64::from(v).abs()));
    assert!(
        (r.sum - one_pass).abs() <= 4.0 * f64::EPSILON * abs,
        "{} vs {one_pass}",
        r.sum
    );
    assert!((r.abs_sum - abs).abs() <= 4.0 * f64::EPSILON * abs);
}

/// The levels of the reproducible order, as the bench labels them (`chunks 32768+4+1`).
#[test]
fn the_reproducible_order_has_one_level_per_launch() {
    use ferrocuda_lessons::cpu::reproducible::chunks_per_level;
    assert_eq!(chunks_per_level::<f32>(0), Vec::<usize>::new());
    assert_eq!(chunks_per_level::<f32>(1), vec![1]);
    assert_eq!(chunks_per_level::<f32>(8192), vec![1]);
    assert_eq!(chunks_per_level::<f32>(1 << 20), vec![128, 1]);
    assert_eq!(chunks_per_level::<f32>(1 << 28), vec![32768, 4, 1]);
    assert_eq!(chunks_per_level::<f64>(1 << 28), vec![65536, 16, 1]);
}

/// The decomposition of the sharded reproducible sum, on the CPU: shards cut on chunk
/// boundaries, each rank's chunk sums concatenated in rank order, then the order's remaining
/// levels, give the bits of the whole array's order, for 1 to 8 ranks; a cut off a chunk
/// boundary would not (the check can fail).
#[test]
fn reproducible_order_of_chunk_aligned_shards_is_the_whole_arrays_order() {
    use ferrocuda::multi::Shards;
    use ferrocuda_lessons::cpu::reproducible::{chunk_sums, same_sum, sum_reproducible};
    let chunk = ferrocuda::reduce::reproducible_chunk::<f32>();
    let finish = |sums: Vec<f32>| {
        if sums.len() == 1 {
            sums[0]
        } else {
            sum_reproducible(&sums)
        }
    };
    for n in [
        1,
        chunk - 1,
        chunk,
        chunk + 1,
        5 * chunk + 3,
        9 * chunk + 17,
    ] {
        let x = ferrocuda_lessons::cpu::random_vec::<f32>(n, n as u64);
        let whole = sum_reproducible(&x);
        for ranks in 1..=8 {
            let shards = Shards::aligned(n, ranks, chunk).unwrap();
            let sums: Vec<f32> = (0..ranks)
                .flat_map(|r| chunk_sums(&x[shards.range(r)]))
                .collect();
            assert!(same_sum(finish(sums), whole), "n = {n}, {ranks} ranks");
        }
    }
    // Cut off the chunk boundaries, the order changes and so do the bits.
    let n = 9 * chunk + 17;
    let x = ferrocuda_lessons::cpu::random_vec::<f32>(n, 3);
    let shards = Shards::even(n, 3).unwrap();
    let sums: Vec<f32> = (0..3)
        .flat_map(|r| chunk_sums(&x[shards.range(r)]))
        .collect();
    assert!(!same_sum(finish(sums), sum_reproducible(&x)));
}
