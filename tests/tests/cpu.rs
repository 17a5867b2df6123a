//! CPU-only checks: the warp emulator against the notes' table and the PTX ISA rules, launch
//! arithmetic, statistics, PTX selection. These need no GPU.
use ferrocuda::LaunchConfig;
use ferrocuda::runtime::gpu::{EMBEDDED_PTX, best_ptx_for};
use ferrocuda_lessons::cpu::warp::{self, ShflMode};
use ferrocuda_lessons::kernels::config::warp_mask_for_threads;
use ferrocuda_lessons::timing::Stats;

/// The table of 樊哲勇第10章: 16 threads, width 8, y = lane within the segment, offset 4.
#[test]
fn warp_emulator_reproduces_the_notes_table() {
    let y: Vec<u32> = (0..16).map(|t| t % 8).collect();
    let mask = 0xffff;
    let got = |mode, b| -> Vec<u32> {
        warp::shfl(mode, &y, mask, b, 8)
            .into_iter()
            .map(Option::unwrap)
            .collect()
    };
    assert_eq!(got(ShflMode::Down, 4)[..8], [4, 5, 6, 7, 4, 5, 6, 7]);
    assert_eq!(got(ShflMode::Xor, 4)[..8], [4, 5, 6, 7, 0, 1, 2, 3]);
    assert_eq!(got(ShflMode::Up, 4)[..8], [0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(got(ShflMode::Idx, 2)[..8], [2; 8]);
}

#[test]
fn shfl_source_keeps_own_value_past_the_segment() {
    for width in [1, 2, 4, 8, 16, 32] {
        for lane in 0..32 {
            let seg = lane / width * width;
            assert_eq!(warp::shfl_source(ShflMode::Down, lane, width, width), lane);
            assert_eq!(warp::shfl_source(ShflMode::Up, lane, width, width), lane);
            assert_eq!(
                warp::shfl_source(ShflMode::Idx, lane, width + 1, width),
                seg + 1 % width
            );
            assert_eq!(
                warp::shfl_source(ShflMode::Down, lane, 1, width),
                if lane + 1 < seg + width {
                    lane + 1
                } else {
                    lane
                }
            );
            assert_eq!(
                warp::shfl_source(ShflMode::Up, lane, 1, width),
                if lane > seg { lane - 1 } else { lane }
            );
        }
    }
}

/// CUDA: with width < 32, xor may read *earlier* segments but not later ones.
#[test]
fn shfl_xor_past_the_segment_reads_earlier_segments_only() {
    assert_eq!(warp::shfl_source(ShflMode::Xor, 13, 8, 8), 5);
    assert_eq!(warp::shfl_source(ShflMode::Xor, 5, 8, 8), 5);
}

#[test]
fn votes_follow_the_mask() {
    let p = [true, false, true, true];
    assert_eq!(warp::ballot(&p, 0b1111), 0b1101);
    assert_eq!(warp::ballot(&p, 0b0110), 0b0100);
    assert!(warp::all(&p, 0b1101) && !warp::all(&p, 0b1111));
    assert!(warp::any(&p, 0b0010 | 0b0100) && !warp::any(&p, 0b0010));
}

#[test]
fn warp_masks_cover_partial_last_warps() {
    assert_eq!(warp_mask_for_threads(32, 0), u32::MAX);
    assert_eq!(warp_mask_for_threads(16, 3), 0xffff);
    assert_eq!(warp_mask_for_threads(48, 40), 0xffff);
    assert_eq!(warp_mask_for_threads(48, 10), u32::MAX);
    assert_eq!(warp_mask_for_threads(1, 0), 1);
}

#[test]
fn per_element_launch_rounds_up_and_rejects_block_0() {
    assert_eq!(
        LaunchConfig::per_element(0, 256, 0).unwrap().grid,
        [0, 1, 1]
    );
    assert_eq!(
        LaunchConfig::per_element(257, 256, 0).unwrap().grid,
        [2, 1, 1]
    );
    assert_eq!(
        LaunchConfig::per_element(256, 256, 0).unwrap().grid,
        [1, 1, 1]
    );
    assert!(LaunchConfig::per_element(10, 0, 0).is_none());
    assert!(LaunchConfig::per_element(usize::MAX, 1, 0).is_none());
}

#[test]
fn architectural_limits_name_the_broken_limit() {
    assert!(
        LaunchConfig::linear(1, 1024, 0)
            .architectural_violation()
            .is_none()
    );
    assert!(
        LaunchConfig::linear(1, 1025, 0)
            .architectural_violation()
            .unwrap()
            .contains("1025")
    );
    assert!(
        LaunchConfig::linear(0, 32, 0)
            .architectural_violation()
            .is_some()
    );
    assert!(
        LaunchConfig::linear(1, 32, 228 * 1024)
            .architectural_violation()
            .unwrap()
            .contains("shared")
    );
    let c = LaunchConfig {
        grid: [1, 70000, 1],
        block: [32, 1, 1],
        dynamic_shared_bytes: 0,
    };
    assert!(c.architectural_violation().unwrap().contains("grid y"));
}

#[test]
fn stats_median_min_max() {
    let s = Stats::from_samples(vec![3.0, 1.0, 2.0, 10.0]);
    assert_eq!((s.median_s, s.min_s, s.max_s, s.reps), (2.5, 1.0, 10.0, 4));
    assert_eq!(Stats::from_samples(vec![2.0]).gbs(4_000_000_000), 2.0);
}

#[test]
fn best_ptx_is_the_newest_not_above_the_device() {
    let archs: Vec<&str> = EMBEDDED_PTX.iter().map(|p| p.arch).collect();
    assert_eq!(archs, ["sm_70", "sm_80", "sm_90"]);
    assert_eq!(best_ptx_for((9, 0)).unwrap().arch, "sm_90");
    assert_eq!(best_ptx_for((10, 0)).unwrap().arch, "sm_90");
    assert_eq!(best_ptx_for((8, 9)).unwrap().arch, "sm_80");
    assert_eq!(best_ptx_for((8, 6)).unwrap().arch, "sm_80");
    assert_eq!(best_ptx_for((7, 5)).unwrap().arch, "sm_70");
    assert!(best_ptx_for((6, 1)).is_none());
}

/// The alternating-sign reduction input has no zero element, so that a reduction that drops one
/// element (or counts one twice) always gets another sum, and every group of four adds 2 within
/// the type's exact range over the largest input.
#[test]
fn the_alternating_pool_has_no_zero_and_stays_exact() {
    use ferrocuda::runtime::element::{Bf16, Element, F16};
    use ferrocuda_tests::reduce_suite::{LARGEST, alternating_pool};
    fn check<T: Element>() {
        let pool: Vec<T> = alternating_pool();
        let values: Vec<f64> = pool.iter().map(|v| v.to_f64()).collect();
        let zeros = values.iter().filter(|v| **v == 0.0).count();
        assert_eq!(
            zeros,
            0,
            "{}: {zeros} zeros in the alternating pool",
            T::TYPE
        );
        for group in values.chunks_exact(4).take(1000) {
            assert_eq!(group.iter().sum::<f64>(), 2.0, "{}: {group:?}", T::TYPE);
        }
        let abs: f64 = values[..LARGEST].iter().map(|v| v.abs()).sum();
        let budget = 2f64.powi(T::EXACT_INT_BITS.min(53).max(24) as i32);
        assert!(abs <= budget, "{}: sum |x| = {abs} over {budget}", T::TYPE);
    }
    check::<f32>();
    check::<f64>();
    check::<F16>();
    check::<Bf16>();
}
