//! CPU-only checks of the 1D stencil (一维模板): the CPU reference on hand-computed cases for
//! every boundary rule (also with inputs shorter than the radius), its check and tolerance,
//! and the host's variant table (names, symbols, what each variant accepts). No GPU needed.
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda_lessons::cpu::{self, StencilPoint};
use ferrocuda_lessons::kernels::config::STENCIL_RADII;
use ferrocuda_lessons::stencil::{self, Boundary, StencilVariant, Taps};

fn sum<T: Element>(x: &[T], radius: u32, boundary: Boundary) -> Vec<T> {
    cpu::stencil(x, &Taps::Sum { radius }, boundary)
}

/// The sum stencil of the 《CUDA C/C++ Basics》学习笔记 (all coefficients 1).
#[test]
fn basics_notes_sum_of_radius_1_at_each_boundary() {
    let x = [1, 2, 3, 4, 5];
    assert_eq!(sum(&x, 1, Boundary::Zero), [3, 6, 9, 12, 9]);
    assert_eq!(sum(&x, 1, Boundary::Clamp), [4, 6, 9, 12, 14]);
    assert_eq!(sum(&x, 1, Boundary::Periodic), [8, 6, 9, 12, 10]);
}

/// The notes' stencil: radius 3, width 7.
#[test]
fn basics_notes_width_7_sum_away_from_the_ends_is_the_window() {
    let x: Vec<i32> = (0..20).collect();
    let out = sum(&x, 3, Boundary::Zero);
    for (i, &o) in out.iter().enumerate().take(17).skip(3) {
        assert_eq!(o, 7 * i as i32, "output {i}");
    }
    assert_eq!(out[0], 1 + 2 + 3);
    assert_eq!(out[19], 16 + 17 + 18 + 19);
}

#[test]
fn radius_2_over_3_elements_wraps_and_clamps_more_than_once() {
    let x = [1, 2, 3];
    assert_eq!(sum(&x, 2, Boundary::Zero), [6, 6, 6]);
    assert_eq!(sum(&x, 2, Boundary::Clamp), [8, 10, 12]);
    assert_eq!(sum(&x, 2, Boundary::Periodic), [11, 10, 9]);
}

#[test]
fn inputs_shorter_than_the_radius() {
    for boundary in Boundary::ALL {
        let want = if boundary == Boundary::Zero { 5 } else { 35 };
        assert_eq!(sum(&[5], 3, boundary), [want], "{boundary:?}");
    }
    // Periodic, n = 2, R = 3: indices -3..=3 read x[1], x[0], x[1], x[0], x[1], x[0], x[1].
    assert_eq!(sum(&[1, 10], 3, Boundary::Periodic), [43, 34]);
    assert_eq!(sum(&[1, 10], 3, Boundary::Clamp), [4 + 30, 3 + 40]);
    assert_eq!(sum(&[1, 10], 3, Boundary::Zero), [11, 11]);
    assert!(sum::<i32>(&[], 3, Boundary::Periodic).is_empty());
}

#[test]
fn i32_sums_wrap_as_the_kernels_compute_them() {
    let x = [i32::MAX, 1];
    assert_eq!(sum(&x, 1, Boundary::Zero), [i32::MIN, i32::MIN]);
}

#[test]
fn weighted_taps_apply_leftmost_coefficient_to_leftmost_input() {
    let x = [1.0f64, 2.0, 3.0, 4.0];
    let taps = Taps::Weighted(vec![0.5, 1.0, -1.0]);
    assert_eq!(
        cpu::stencil(&x, &taps, Boundary::Zero),
        [-1.0, -0.5, 0.0, 5.5]
    );
    assert_eq!(
        cpu::stencil(&x, &taps, Boundary::Clamp),
        [-0.5, -0.5, 0.0, 1.5]
    );
    assert_eq!(
        cpu::stencil(&x, &taps, Boundary::Periodic),
        [2.0 + 1.0 - 2.0, -0.5, 0.0, 1.5 + 4.0 - 1.0]
    );
    let p = cpu::stencil_point(&x, &taps, Boundary::Zero, 1);
    assert_eq!(
        p,
        StencilPoint {
            value: -0.5,
            scale: 0.5 + 2.0 + 3.0
        }
    );
}

#[test]
fn float_reference_rounds_the_f64_value_once() {
    let x = [0.1f32; 3];
    let got = cpu::stencil(&x, &Taps::Sum { radius: 1 }, Boundary::Periodic);
    let exact = 3.0 * f64::from(0.1f32);
    assert_eq!(got, [exact as f32; 3]);
}

#[test]
fn source_index_follows_each_boundary_rule() {
    use Boundary::*;
    assert_eq!(cpu::stencil_source(2, 5, Zero), Some(2));
    assert_eq!(cpu::stencil_source(-1, 5, Zero), None);
    assert_eq!(cpu::stencil_source(5, 5, Zero), None);
    assert_eq!(cpu::stencil_source(-7, 5, Clamp), Some(0));
    assert_eq!(cpu::stencil_source(9, 5, Clamp), Some(4));
    assert_eq!(cpu::stencil_source(-1, 5, Periodic), Some(4));
    assert_eq!(cpu::stencil_source(-11, 5, Periodic), Some(4));
    assert_eq!(cpu::stencil_source(12, 5, Periodic), Some(2));
    assert_eq!(cpu::stencil_source(-16, 1, Periodic), Some(0));
    for b in Boundary::ALL {
        assert_eq!(cpu::stencil_source(0, 0, b), None, "{b:?}");
    }
}

#[test]
fn tolerance_grows_with_the_radius_and_the_scale() {
    let p = StencilPoint {
        value: 1.0,
        scale: 2.0,
    };
    let t = cpu::stencil_tolerance::<f32>(3, &p);
    assert_eq!(
        t,
        9.0 * f64::from(f32::EPSILON) * 2.0 + f64::from(f32::MIN_POSITIVE)
    );
    assert!(cpu::stencil_tolerance::<f64>(3, &p) < t);
    assert!(cpu::stencil_tolerance::<f32>(16, &p) > t);
}

/// The 16-bit stencils add in `f32` and round once: their bound is half a unit in the last
/// place of the output plus the `f32` chain's, so the nearest 16-bit value passes and its
/// neighbours fail, for normal and subnormal outputs alike.
#[test]
fn the_16_bit_bound_is_half_an_ulp_of_the_output_plus_the_f32_chain() {
    fn check<T: Element>(step_of: impl Fn(T) -> T, values: &[f64]) {
        let taps = Taps::Sum { radius: 3 };
        for &v in values {
            // Seven equal inputs whose exact sum is `7 v`.
            let x = vec![T::from_f64(v); 7];
            let p = cpu::stencil_point(&x, &taps, Boundary::Zero, 3);
            let nearest = T::from_f64(p.value);
            assert!(
                cpu::stencil_output_ok(nearest, &p, 3),
                "{} {v}: nearest",
                T::TYPE
            );
            let next = step_of(nearest);
            assert!(
                !cpu::stencil_output_ok(next, &p, 3),
                "{} {v}: {next} one unit from the exact {} passes",
                T::TYPE,
                p.value
            );
            let bound = cpu::stencil_tolerance::<T>(3, &p);
            let ulp = (next.to_f64() - nearest.to_f64()).abs();
            assert!(
                bound < ulp,
                "{} {v}: bound {bound:e}, a unit {ulp:e}",
                T::TYPE
            );
        }
    }
    use ferrocuda::runtime::element::{Bf16, F16};
    // The next value away from zero: the bits one up, the sign kept.
    check::<F16>(
        |h| F16(h.0 + 1),
        &[1.0, 0.3, -1234.5, 1e-6, 3e-8, 1.99, 0.0312],
    );
    check::<Bf16>(|h| Bf16(h.0 + 1), &[1.0, 0.3, -1234.5, 1e-30, 1e-39, 1.99]);

    // At the top of a binade, where `eps / 2 * |value|` would be nearly a whole unit: the exact
    // sum 1.9375 + 2^-12 + 2^-13 + 2^-14 lies 0.44 of a unit (2^-10) above 1.9375, so 1.9375
    // is the nearest `f16` and 1.9375 + 2^-10, 0.56 of a unit away, is not.
    let two = |e: i32| 2f64.powi(e);
    let x: Vec<F16> = [1.9375, two(-12), two(-13), two(-14), 0.0, 0.0, 0.0]
        .into_iter()
        .map(F16::from_f64)
        .collect();
    let p = cpu::stencil_point(&x, &Taps::Sum { radius: 3 }, Boundary::Zero, 3);
    assert!(cpu::stencil_output_ok(F16::from_f64(1.9375), &p, 3));
    assert!(!cpu::stencil_output_ok(
        F16::from_f64(1.9375 + two(-10)),
        &p,
        3
    ));
    assert!(!cpu::stencil_output_ok(
        F16::from_f64(1.9375 - two(-10)),
        &p,
        3
    ));
}

/// A sum of `-0` terms is `-0`, as every IEEE order of adds gives it; a `+0` there fails. Where
/// a term is `+0`, or the terms cancel, either zero passes.
#[test]
fn check_of_the_sign_of_zero() {
    let taps = Taps::Sum { radius: 1 };
    let x = [-0.0f32, -0.0, -0.0, 0.0, -0.0, 1.0, -1.0];
    let p = |i| cpu::stencil_point(&x, &taps, Boundary::Clamp, i);
    assert!(p(1).value.is_sign_negative() && p(1).value == 0.0);
    assert!(cpu::stencil_output_ok(-0.0f32, &p(1), 1));
    assert!(!cpu::stencil_output_ok(0.0f32, &p(1), 1));
    // Output 3: -0 + 0 + -0 = +0 in any order.
    assert!(cpu::stencil_output_ok(0.0f32, &p(3), 1) && cpu::stencil_output_ok(-0.0f32, &p(3), 1));
    // Output 5: -0 + 1 - 1 = 0.
    assert!(cpu::stencil_output_ok(0.0f32, &p(5), 1));
}

/// `bf16` adds in `f32`, whose largest value is `bf16`'s too: a window of `+M, +M, -M` (`M` the
/// largest) is `M` exactly, but its partial sums overflow, to `inf` in a chain and to
/// `inf - inf = NaN` in two chains joined. Past the `f32` range the check takes any infinity or
/// NaN; within it, none.
#[test]
fn check_where_partial_sums_overflow_the_accumulator() {
    use ferrocuda::runtime::element::Bf16;
    let m = Bf16(0x7F7F).to_f64();
    let x: Vec<Bf16> = [m, m, -m, 1.0, 2.0, 3.0]
        .into_iter()
        .map(Bf16::from_f64)
        .collect();
    let taps = Taps::Sum { radius: 1 };
    let p = |i| cpu::stencil_point(&x, &taps, Boundary::Zero, i);
    assert_eq!(p(1).value, m);
    for g in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, m] {
        assert!(cpu::stencil_output_ok(Bf16::from_f64(g), &p(1), 1), "{g}");
    }
    assert!(!cpu::stencil_output_ok(Bf16::from_f64(1.0), &p(1), 1));
    // Output 4: 1 + 2 + 3, far inside the range: an infinity or a NaN fails.
    for g in [f64::INFINITY, f64::NAN] {
        assert!(!cpu::stencil_output_ok(Bf16::from_f64(g), &p(4), 1), "{g}");
    }
}

/// Infinities and NaNs: the same infinity where the exact output is one, a NaN where it is a
/// NaN (a NaN input, or infinities of both signs), an overflow only where the sum overflows.
#[test]
fn check_of_infinities_nans_and_overflow() {
    use ferrocuda::runtime::element::F16;
    let taps = Taps::Sum { radius: 1 };
    let h = |v: f64| F16::from_f64(v);
    let x = vec![
        h(1.0),
        h(f64::INFINITY),
        h(2.0),
        h(f64::NEG_INFINITY),
        h(3.0),
        h(f64::NAN),
        h(60000.0),
        h(60000.0),
        h(-1.0),
    ];
    let p = |i| cpu::stencil_point(&x, &taps, Boundary::Zero, i);
    let ok = |g: F16, i| cpu::stencil_output_ok(g, &p(i), 1);
    let inf = h(f64::INFINITY);
    // Output 0: 1 + inf = inf.
    assert!(
        ok(inf, 0) && !ok(h(f64::NEG_INFINITY), 0) && !ok(h(65504.0), 0) && !ok(h(f64::NAN), 0)
    );
    // Output 2: inf + 2 - inf = NaN.
    assert!(p(2).value.is_nan());
    assert!(ok(h(f64::NAN), 2) && !ok(inf, 2) && !ok(h(2.0), 2));
    // Output 5: 3 + NaN + 60000 = NaN.
    assert!(ok(h(f64::NAN), 5) && !ok(h(60003.0), 5));
    // Output 7: 60000 + 60000 - 1 overflows f16 (its largest is 65504): the infinity passes,
    // the largest finite value does not.
    assert!(ok(inf, 7) && !ok(h(65504.0), 7) && !ok(h(f64::NEG_INFINITY), 7));
    // The poison pattern is never an output, not even where a NaN is due.
    assert!(!ok(F16::poison(), 2));
    // Finite outputs stay finite: 60000 - 1 + 0 is no infinity.
    assert!(ok(h(59999.0), 8) && !ok(inf, 8));
    let want = cpu::stencil(&x, &taps, Boundary::Zero);
    assert!(cpu::check_stencil(&x, &taps, Boundary::Zero, &want).passed);
    let mut wrong = want.clone();
    wrong[2] = h(0.0);
    let check = cpu::check_stencil(&x, &taps, Boundary::Zero, &wrong);
    assert!(
        !check.passed && check.detail.contains("first at 2"),
        "{}",
        check.detail
    );
}

#[test]
fn check_accepts_the_reference_and_catches_errors_and_poison() {
    let x: Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin()).collect();
    let taps = Taps::Weighted(vec![0.25, -0.5, 1.0, 0.125, 2.0]);
    let want = cpu::stencil(&x, &taps, Boundary::Clamp);
    let check = cpu::check_stencil(&x, &taps, Boundary::Clamp, &want);
    assert!(check.passed, "{}", check.detail);

    let mut off = want.clone();
    off[42] += 1e-3;
    let check = cpu::check_stencil(&x, &taps, Boundary::Clamp, &off);
    assert!(
        !check.passed && check.detail.contains("first at 42"),
        "{}",
        check.detail
    );

    let mut unwritten = want.clone();
    unwritten[7] = f32::poison();
    let check = cpu::check_stencil(&x, &taps, Boundary::Clamp, &unwritten);
    assert!(
        !check.passed && check.detail.contains("first at 7"),
        "{}",
        check.detail
    );

    let ints: Vec<i32> = (0..50).collect();
    let taps = Taps::Sum { radius: 2 };
    let mut got = cpu::stencil(&ints, &taps, Boundary::Periodic);
    assert!(cpu::check_stencil(&ints, &taps, Boundary::Periodic, &got).passed);
    got[49] += 1;
    let check = cpu::check_stencil(&ints, &taps, Boundary::Periodic, &got);
    assert!(
        !check.passed && check.detail.contains("1 of 50"),
        "{}",
        check.detail
    );
    assert!(!cpu::check_stencil(&ints, &taps, Boundary::Periodic, &got[1..]).passed);
}

#[test]
fn boundary_names_and_kernel_codes_round_trip() {
    for b in Boundary::ALL {
        assert_eq!(Boundary::from_name(b.name()), Some(b));
    }
    let codes: Vec<u32> = Boundary::ALL.iter().map(|b| b.code()).collect();
    assert_eq!(codes, [0, 1, 2]);
    assert_eq!(Boundary::from_name("wrap"), None);
}

#[test]
fn every_radius_has_an_instance_of_every_variant_and_no_other_does() {
    for v in StencilVariant::ALL {
        assert_eq!(StencilVariant::from_name(v.name()), Some(v));
    }
    let radii = |kernel: fn(usize) -> bool| (0..=64).filter(|&r| kernel(r)).collect::<Vec<_>>();
    let want: Vec<usize> = STENCIL_RADII.iter().map(|&r| r as usize).collect();
    use ferrocuda::kernels::stencil as k;
    use ferrocuda_lessons::kernels::stencil as lesson;
    assert_eq!(
        radii(|r| lesson::stencil_1d_naive::<i32>(r).is_some()),
        want
    );
    assert_eq!(
        radii(|r| lesson::stencil_1d_shared::<f64>(r).is_some()),
        want
    );
    assert_eq!(
        radii(|r| lesson::stencil_1d_weighted::<f32>(r).is_some()),
        want
    );
    assert_eq!(radii(|r| k::stencil_1d_fast::<f32>(r).is_some()), want);
    assert_eq!(
        radii(|r| k::stencil_1d_fast_weighted::<f64>(r).is_some()),
        want
    );
}

#[test]
fn variants_accept_what_they_have_kernels_for() {
    use StencilVariant::*;
    let sum = |radius| Taps::<f32>::Sum { radius };
    for v in StencilVariant::ALL {
        for r in STENCIL_RADII {
            assert_eq!(v.error(&sum(r), 256), None, "{v:?} R = {r}");
        }
        let e = v.error(&sum(5), 256).unwrap();
        assert!(e.contains("radius") && e.contains('5'), "{e}");
        assert!(!v.supports_type(ElemType::U32));
    }
    assert!(
        Weighted
            .error(&Taps::<i32>::Sum { radius: 3 }, 256)
            .is_some()
    );
    assert!(Fast.error(&Taps::<i32>::Sum { radius: 3 }, 256).is_none());
    let weights = Taps::Weighted(vec![1.0f32; 7]);
    assert!(Naive.error(&weights, 256).unwrap().contains("sums only"));
    assert!(Shared.error(&weights, 256).unwrap().contains("sums only"));
    assert!(Weighted.error(&weights, 256).is_none() && Fast.error(&weights, 256).is_none());
    assert!(Fast.error(&Taps::Weighted(vec![1i32; 7]), 256).is_some());
    assert!(
        Fast.error(&Taps::Weighted(vec![1.0f64; 4]), 256)
            .unwrap()
            .contains("2R + 1")
    );
}

#[test]
fn block_rules_per_variant() {
    use StencilVariant::*;
    assert!(Naive.block_error(1, 16).is_none() && Naive.block_error(1025, 1).is_some());
    assert!(Shared.block_error(16, 16).is_none());
    assert!(Shared.block_error(15, 16).unwrap().contains("halos"));
    assert!(Weighted.block_error(3, 3).is_none() && Weighted.block_error(2, 3).is_some());
    assert!(Fast.block_error(32, 16).is_none() && Fast.block_error(1024, 16).is_none());
    assert!(Fast.block_error(100, 1).unwrap().contains("multiple of 32"));
    assert!(Fast.block_error(0, 1).is_some());
}

#[test]
fn taps_radius_and_coefficients() {
    let w = Taps::Weighted(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(w.radius(), 2);
    assert_eq!(w.coefficient(4), 5.0);
    assert!(w.is_weighted());
    let s = Taps::<f32>::Sum { radius: 8 };
    assert_eq!(
        (s.radius(), s.coefficient(16), s.is_weighted()),
        (8, 1.0, false)
    );
    assert!(stencil::radius_error(3).is_none() && stencil::radius_error(0).is_some());
}

/// `stencil_point` reads a window inside the array directly and goes through
/// `stencil_source` only near the ends: both give the value and scale of the plain definition
/// (every term through `stencil_source`), for every radius, boundary and position.
#[test]
fn stencil_point_equals_the_definition_inside_and_at_the_ends() {
    use ferrocuda_lessons::cpu::{
        Boundary, Taps, compensated_sum, random_vec, stencil_point, stencil_source,
    };
    use ferrocuda_lessons::kernels::config::STENCIL_RADII;
    for n in [1usize, 2, 7, 40, 100] {
        let x: Vec<f64> = random_vec(n, n as u64);
        for radius in STENCIL_RADII {
            let weights: Vec<f64> = (0..=2 * radius).map(|k| 0.5 + f64::from(k)).collect();
            for taps in [Taps::Sum { radius }, Taps::Weighted(weights.clone())] {
                for boundary in Boundary::ALL {
                    for i in 0..n {
                        let terms: Vec<f64> = (0..=2 * i64::from(radius))
                            .map(|k| {
                                stencil_source(i as i64 + k - i64::from(radius), n, boundary)
                                    .map_or(0.0, |s| taps.coefficient(k as usize) * x[s])
                            })
                            .collect();
                        let p = stencil_point(&x, &taps, boundary, i);
                        assert_eq!(
                            p.value.to_bits(),
                            compensated_sum(terms.iter().copied()).to_bits()
                        );
                        assert_eq!(
                            p.scale.to_bits(),
                            terms.iter().map(|t| t.abs()).sum::<f64>().to_bits()
                        );
                    }
                }
            }
        }
    }
}

/// The fast stencil's tile count (`stencil_fast_tiles`, which the host's grid and the kernels'
/// loop share) is the fewest tiles, laid from the output's 16-byte boundary, that cover every
/// output, each tile holding at least one: counted here tile by tile.
#[test]
fn the_fast_stencils_tiles_cover_every_output_and_none_is_empty() {
    use ferrocuda_lessons::kernels::config::stencil_fast_tiles;
    for lanes in [2usize, 4, 8] {
        for tile in [lanes, 2 * lanes, 64, 96, 2048] {
            for out_offset in 0..lanes {
                for n in 0..300usize {
                    // Tile t covers outputs t * tile - out_offset .. (t + 1) * tile - out_offset.
                    let mut counted = 0;
                    while n > 0 && (counted * tile) < out_offset + n {
                        counted += 1;
                    }
                    let tiles = stencil_fast_tiles(n, out_offset, lanes, tile);
                    let what =
                        format!("n = {n}, out_offset {out_offset}, lanes {lanes}, tile {tile}");
                    assert_eq!(tiles, counted, "{what}");
                    if tiles > 0 {
                        // The last tile starts before the last output.
                        assert!((tiles - 1) * tile < out_offset + n, "{what}");
                    }
                }
            }
        }
    }
}
