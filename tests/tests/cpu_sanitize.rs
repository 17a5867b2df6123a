//! The parser of compute-sanitizer's reports, on text in the formats the tools print.
use ferrocuda_cli::sanitize::parse_report;
use ferrocuda_lessons::kernels::{broken, reduce};

/// Two kernels whose names share a prefix, and a broken one: `(cg, cg_vector4, broken)`.
fn names() -> (&'static str, &'static str, &'static str) {
    (
        reduce::reduce_cg::<f32>().unwrap().symbol(),
        reduce::reduce_cg_vector4::<f32>().unwrap().symbol(),
        broken::broken_stencil_1d_no_sync_f32().symbol(),
    )
}

fn kernels() -> Vec<String> {
    let (cg, cg_vector4, broken) = names();
    [cg, cg_vector4, broken].map(String::from).to_vec()
}

#[test]
fn a_clean_run_has_no_errors() {
    let (cg, _, _) = names();
    let text = format!(
        "========= COMPUTE-SANITIZER\nkernel {cg} PASS\n========= ERROR SUMMARY: 0 errors\n"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 0);
    assert!(r.per_kernel.is_empty());
}

#[test]
fn memcheck_errors_are_attributed_to_the_kernel_they_name() {
    let (cg, cg_vector4, _) = names();
    let text = format!(
        "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at {cg_vector4}+0x1f0
=========     by thread (3,0,0) in block (0,0,0)
========= Invalid __global__ read of size 4 bytes
=========     at 0x70 in {cg}
=========     by thread (1,0,0) in block (2,0,0)
========= ERROR SUMMARY: 2 errors
"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(
        r.per_kernel.get(cg_vector4),
        Some(&1),
        "the longer name wins"
    );
    assert_eq!(r.per_kernel.get(cg), Some(&1));
}

#[test]
fn racecheck_hazards_count_once_each() {
    let (_, _, broken) = names();
    let text = format!(
        "\
========= Error: Race reported between Write access at {broken}+0x1a0
=========     and Read access at {broken}+0x2c0 [128 hazards]
========= Error: Race reported between Write access at {broken}+0x1b0
=========     and Read access at {broken}+0x2c0 [64 hazards]
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"
    );
    let r = parse_report(&text, &kernels());
    assert_eq!(r.total, 2);
    assert_eq!(r.per_kernel.get(broken), Some(&2));
}

/// `ferrocuda profile`'s parser on a real `ncu` report (committed from an H200 run of the
/// divergence kernels): every launch, its shape, its metrics in base units, and the derived
/// branch efficiency.
mod profile_report {
    use ferrocuda_cli::profile::{METRICS, NOT_CASES, NOTES, notes_row, parse_report, table};

    const REPORT: &str = include_str!("../fixtures/divergence-ncu.txt");

    #[test]
    fn every_launch_and_metric_of_a_real_ncu_report_is_read() {
        let launches = parse_report(REPORT);
        assert_eq!(launches.len(), 12, "3 launches of each of the 4 kernels");
        let first = &launches[0];
        assert_eq!(first.kernel, "math_kernel1");
        assert_eq!(first.shape, "(8192, 1, 1)x(128, 1, 1)");
        let time = first.get("gpu__time_duration.sum").unwrap();
        assert!((time - 16.70e-6).abs() < 1e-9, "{time}");
        assert_eq!(first.get("smsp__sass_branch_targets.sum"), Some(491_520.0));
        assert_eq!(
            first.get("smsp__sass_branch_targets_threads_divergent.sum"),
            Some(32_768.0)
        );
        let efficiency = first.branch_efficiency().unwrap();
        assert!((efficiency - 100.0 * (491_520.0 - 32_768.0) / 491_520.0).abs() < 1e-9);
        // math_kernel2 keeps whole warps on one side: no divergent branch.
        let second = launches
            .iter()
            .find(|l| l.kernel == "math_kernel2")
            .unwrap();
        assert_eq!(second.branch_efficiency(), Some(100.0));
        assert_eq!(first.inst_per_warp(), None, "not collected in this report");
    }

    #[test]
    fn the_notes_rows_match_our_kernel_symbols() {
        assert_eq!(
            notes_row("reduce_neighbored_i32").unwrap().gld_efficiency,
            25.02
        );
        assert_eq!(
            notes_row("reduce_neighbored_less_i32")
                .unwrap()
                .inst_per_warp,
            145.5625
        );
        assert_eq!(
            notes_row("reduce_interleaved_i32").unwrap().gld_efficiency,
            96.15
        );
        assert_eq!(
            notes_row("reduce_complete_unroll_warps8_i32")
                .unwrap()
                .variant,
            "complete_unroll_warps8"
        );
        assert_eq!(
            notes_row("reduce_complete_unroll_b512_i32")
                .unwrap()
                .variant,
            "complete_unroll"
        );
        assert!(notes_row("stencil_1d_fast_r3_f32").is_none());
    }

    /// A `ferrocuda profile` run on the H100 (`tests/fixtures/profile-h100-ncu.txt`; its table is
    /// curated in `docs/results/h100/profile.md`).
    const FULL_REPORT: &str = include_str!("../fixtures/profile-h100-ncu.txt");

    #[test]
    fn the_committed_profile_run_has_every_rung_with_every_metric() {
        let launches = parse_report(FULL_REPORT);
        assert_eq!(launches.len(), 29, "every launch of profile-cases");
        for rung in NOTES {
            let l = launches
                .iter()
                .find(|l| notes_row(&l.kernel).map(|r| r.variant) == Some(rung.variant))
                .unwrap_or_else(|| panic!("no launch of {}", rung.variant));
            for (metric, _) in METRICS {
                assert!(l.get(metric).is_some(), "{}: no {metric}", l.kernel);
            }
            assert!(l.inst_per_warp().is_some() && l.branch_efficiency().is_some());
        }
        // The notes' finding, read from our run: neighbored's loads use a quarter of each
        // sector, interleaved's almost all of it.
        let efficiency = |k: &str| {
            launches
                .iter()
                .find(|l| l.kernel == k)
                .and_then(|l| {
                    l.get("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
                })
                .unwrap()
        };
        assert!((efficiency("reduce_neighbored_i32") - 25.0).abs() < 0.1);
        assert!((efficiency("reduce_interleaved_i32") - 96.2).abs() < 0.1);
    }

    #[test]
    fn the_table_has_one_row_per_case_and_marks_kernels_without_loads() {
        let t = table(&parse_report(FULL_REPORT)).expect("the report holds cases");
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert_eq!(
            rows.len(),
            9 + 4 + 4,
            "9 rungs, 4 divergence kernels, 4 stencils"
        );
        for k in NOT_CASES {
            assert!(!t.contains(k), "{k} is not a case");
        }
        let math = rows
            .iter()
            .find(|r| r.starts_with("| math_kernel1 "))
            .unwrap();
        let cells: Vec<&str> = math.split('|').map(str::trim).collect();
        assert_eq!((cells[5], cells[6]), ("-", "-"), "no global load: {math}");
        assert_eq!(cells[8], "-", "no shared memory: {math}");
        let shared = rows
            .iter()
            .find(|r| r.starts_with("| stencil_1d_shared_r3_f32 "))
            .unwrap();
        let cells: Vec<&str> = shared.split('|').map(str::trim).collect();
        let shared_efficiency: f64 = cells[8].parse().expect("the tile's shared efficiency");
        assert!(
            shared_efficiency > 0.0 && shared_efficiency <= 100.0,
            "{shared}"
        );
        assert!(
            cells[7].parse::<f64>().unwrap() > 0.0,
            "the stencil stores: {shared}"
        );
        let rung = rows
            .iter()
            .find(|r| r.starts_with("| reduce_interleaved_i32 "))
            .unwrap();
        assert!(
            rung.ends_with("| 91.6 | 96.15 | 117.8 |"),
            "the notes' figures: {rung}"
        );
    }
}
