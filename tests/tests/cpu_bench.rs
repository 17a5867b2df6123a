//! The benchmark's outputs, checked without a GPU on a synthetic report: JSON round-trips,
//! CSV has one line per row, the charts have one line per variant plus the copy ceiling, and
//! two runs compare row by row.
use ferrocuda_cli::bench::chart::bandwidth_chart;
use ferrocuda_cli::bench::{
    Baseline, BaselineCheck, Report, Row, baseline_failures, compare, markdown, utc_date,
};

fn row(family: &str, variant: &str, n: u64, gbs: f64) -> Row {
    Row {
        family: family.into(),
        variant: variant.into(),
        ty: "f32".into(),
        n,
        block: 256,
        grid: "528".into(),
        bytes: 4 * n,
        median_us: 4.0 * n as f64 / gbs / 1e3,
        min_us: 1.0,
        max_us: 2.0,
        gbs,
        pct_copy: 90.5,
        passed: true,
        check: "|err| = 1e-6 <= 1e-3".into(),
        baselines: vec![Baseline {
            name: "cub".into(),
            median_us: Some(2.5),
            speedup: Some(1.07),
            check: BaselineCheck::Passed("exact".into()),
        }],
    }
}

fn report() -> Report {
    let mut rows = Vec::new();
    for n in [1u64 << 20, 1 << 24, 1 << 28] {
        rows.push(row("copy", "cuMemcpyDtoD", n, 3900.0));
        rows.push(row("reduce", "fast", n, 4400.0));
        rows.push(row("reduce", "interleaved", n, 700.0));
        rows.push(row("stencil", "fast_r3", n, 3700.0));
    }
    Report {
        device: "NVIDIA H200".into(),
        compute_capability: "9.0".into(),
        driver_cuda: "13.0".into(),
        ptx_arch: "sm_90".into(),
        date: "2026-11-21".into(),
        reps: 20,
        rounds: 3,
        baselines: "CUDA C and CUB".into(),
        api_baselines: String::new(),
        transfer_baselines: String::new(),
        peak_gbs: 4800.0,
        rows,
    }
}

#[test]
fn json_round_trips_exactly() {
    let r = report();
    let text = r.to_json();
    assert_eq!(Report::from_json(&text).expect("parses"), r);
    assert!(Report::from_json("{\"device\": 1}").is_err());
}

#[test]
fn json_without_rounds_reads_as_one_round() {
    let text = report().to_json().replace("\"rounds\": 3,", "");
    assert!(!text.contains("rounds"));
    assert_eq!(Report::from_json(&text).expect("parses").rounds, 1);
}

#[test]
fn json_without_baseline_checks_reads_as_not_checked() {
    // A report written before baselines were checked: a number for each speedup, no `check`.
    let text = include_str!("../fixtures/bench-results-unchecked-baselines.json");
    assert!(!text.contains("\"outcome\""));
    let r = Report::from_json(text).expect("the committed results parse");
    let baselines: Vec<&Baseline> = r.rows.iter().flat_map(|row| &row.baselines).collect();
    assert!(!baselines.is_empty());
    for b in baselines {
        assert_eq!(b.check, BaselineCheck::NotChecked, "{}", b.name);
        assert!(b.median_us.is_some() && b.speedup.is_some(), "{}", b.name);
    }
}

/// The report with the interleaved rows' CUB baseline failed and the fast rows' missing.
fn report_with_bad_baselines() -> Report {
    let mut r = report();
    for row in &mut r.rows {
        if row.variant == "interleaved" {
            row.baselines = vec![Baseline::measured(
                "cub",
                2.5,
                row.median_us,
                BaselineCheck::Failed("got 3.5, want 4".into()),
            )];
        } else if row.variant == "fast" {
            row.baselines = vec![Baseline::missing(
                "cub",
                "printed no line (exit status: 1)".into(),
            )];
        }
    }
    r
}

#[test]
fn a_failed_or_missing_baseline_has_no_speedup_and_says_so_everywhere() {
    let r = report_with_bad_baselines();
    let interleaved = &r.rows[2];
    assert_eq!(interleaved.speedup_over("cub"), None);
    assert_eq!(interleaved.baseline_cell("cub", "x"), "FAIL");
    assert_eq!(r.rows[1].baseline_cell("cub", "x"), "miss");
    assert_eq!(r.rows[3].baseline_cell("cub", "x"), "1.07x");
    assert_eq!(r.rows[1].baseline_cell("cuda-c", "x"), "-");

    let csv = r.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[2].ends_with(",true,,miss,,,"), "{}", lines[2]);
    assert!(lines[3].ends_with(",true,,FAIL,,,"), "{}", lines[3]);

    let md = markdown(&r, &[]);
    assert!(md.contains("| - | FAIL | PASS |"), "{md}");
    assert!(md.contains("| - | miss | PASS |"), "{md}");
    assert!(md.contains("reduce interleaved f32 2^20 block 256: cub FAIL: got 3.5, want 4"));
    assert!(md.contains("reduce fast f32 2^28 block 256: cub miss: printed no line"));

    let failures = baseline_failures(&r);
    assert_eq!(failures.len(), 6, "{failures:?}");
    assert_eq!(Report::from_json(&r.to_json()).expect("parses"), r);
}

#[test]
fn compare_matches_rows_and_tests_each_median_against_the_other_spread() {
    // Synthetic rows with a +-1 % spread around their medians.
    let mut first = report();
    for r in &mut first.rows {
        r.min_us = r.median_us * 0.99;
        r.max_us = r.median_us * 1.01;
    }
    let same = compare(&first, &first);
    assert_eq!(same.rows.len(), first.rows.len());
    assert!(same.unmatched.is_empty());
    assert!(same.rows.iter().all(|a| a.holds() && a.change_pct() == 0.0));

    let mut second = first.clone();
    // Inside the spread: agrees.
    second.rows[1].median_us *= 1.005;
    // 2 % slower, outside the first run's max: disagrees.
    second.rows[2].median_us *= 1.02;
    second.rows[2].min_us = second.rows[2].median_us * 0.99;
    second.rows[2].max_us = second.rows[2].median_us * 1.01;
    // A row of the second run only.
    let mut extra = second.rows[3].clone();
    extra.block = 1024;
    second.rows.push(extra);
    second.rows.remove(0);
    let c = compare(&first, &second);
    assert_eq!(c.rows.len(), first.rows.len() - 1);
    let by_row = |v: &str| c.rows.iter().find(|a| a.row == v).expect("matched");
    assert!(by_row("reduce fast f32 2^20 block 256").holds());
    let moved = by_row("reduce interleaved f32 2^20 block 256");
    assert!(!moved.holds());
    assert!(
        (moved.change_pct() - 2.0).abs() < 1e-9,
        "{}",
        moved.change_pct()
    );
    assert_eq!(
        c.unmatched,
        vec![
            "copy cuMemcpyDtoD f32 2^20 block 256 (first run only)".to_string(),
            "stencil fast_r3 f32 2^20 block 1024 (second run only)".to_string(),
        ]
    );
}

#[test]
fn csv_has_a_header_and_one_line_per_row() {
    let r = report();
    let csv = r.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + r.rows.len());
    assert!(lines[0].starts_with("family,variant,type,n,block"));
    assert!(
        lines[2].starts_with("reduce,fast,f32,1048576,256,528,"),
        "{}",
        lines[2]
    );
    // cuda_c, cub, then the api columns (kernel, cupy, torch), empty for a kernel row.
    assert!(lines[2].ends_with(",true,,1.070,,,"), "{}", lines[2]);
}

#[test]
fn chart_draws_every_variant_and_the_copy_ceiling() {
    let svg = bandwidth_chart(&report(), "reduce", "f32");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in [
        "copy (ceiling)",
        "device peak (4800 GB/s)",
        "fast",
        "interleaved",
        "2^20",
        "2^28",
    ] {
        assert!(svg.contains(label), "the chart lacks {label}");
    }
}

#[test]
fn markdown_has_a_table_per_family_and_links_the_charts() {
    let md = markdown(&report(), &["reduce-f32.svg".into()]);
    assert!(
        md.contains("## reduce f32") && md.contains("## stencil f32") && md.contains("## copy")
    );
    assert!(md.contains("| fast | 2^24 |"));
    assert!(md.contains("![reduce-f32.svg](reduce-f32.svg)"));
}

/// A 16-bit row is set beside the f32 row of the same family, variant, size and block, and no
/// other; a 16-bit row without one is left out of that table.
#[test]
fn markdown_sets_the_16_bit_rows_beside_f32() {
    let mut r = report();
    let mut half = row("reduce", "fast", 1 << 24, 2200.0);
    half.ty = "bf16".into();
    r.rows.push(half.clone());
    // Another block: no f32 row to compare with.
    half.block = 512;
    half.gbs = 1.0;
    r.rows.push(half);
    let md = markdown(&r, &[]);
    assert!(md.contains("## 16-bit floats against f32"), "{md}");
    assert!(
        md.contains("| reduce | fast | bf16 | 2^24 | 2200 | 4400 | 50.0% |"),
        "{md}"
    );
    assert_eq!(md.matches("| reduce | fast | bf16 |").count(), 1, "{md}");
    assert!(!markdown(&report(), &[]).contains("16-bit floats against f32"));
}

/// The api table names each row's type, and the 16-bit sums' plain `x.sum()` baselines get
/// their own table, a failed one without a speedup.
#[test]
fn markdown_lists_the_16_bit_api_rows_and_their_native_sums() {
    let mut r = report();
    let mut api = row(
        "api",
        ferrocuda_cli::bench::api::API_HALF_SUM,
        1 << 20,
        100.0,
    );
    api.ty = "f16".into();
    api.median_us = 10.0;
    api.baselines = vec![
        Baseline::measured(
            "torch x.sum()",
            30.0,
            10.0,
            BaselineCheck::Passed("exact".into()),
        ),
        Baseline::measured(
            "cupy x.sum()",
            40.0,
            10.0,
            BaselineCheck::Failed("got inf".into()),
        ),
    ];
    r.rows.push(api);
    let md = markdown(&r, &[]);
    assert!(md.contains("| reduce::sum_to_f32 | f16 | 2^20 |"), "{md}");
    assert!(
        md.contains("| f16 | 2^20 | 10.0 | 40.0 | FAIL | 30.0 | 3.00x |"),
        "{md}"
    );
}

#[test]
fn utc_date_is_an_iso_date() {
    let d = utc_date();
    assert_eq!(d.len(), 10);
    assert!(d.starts_with("20") && &d[4..5] == "-" && &d[7..8] == "-");
}

/// What `ferrocuda bench` counts before allocating anything (the check that refuses a run
/// whose buffers cannot all fit): each group's inputs and outputs in rotation, plus the
/// textbook reductions' scratch copies for one round.
#[test]
fn a_groups_device_memory_is_its_rotated_inputs_and_outputs() {
    use ferrocuda::runtime::element::ElemType;
    use ferrocuda_cli::bench::{BenchConfig, group_bytes, rotation};
    let l2 = 60 << 20; // an H200's
    let gib = 1u128 << 30;
    let mut cfg = BenchConfig::default_run();
    // 1 GiB of f32: one input and one output, and one scratch copy.
    assert_eq!(
        group_bytes(l2, &cfg, ElemType::F32, 1 << 28),
        (2 * gib, gib)
    );
    // 64 MiB: four inputs (256 MiB > 4 x L2), two outputs.
    assert_eq!(rotation(l2, 64 << 20), 4);
    assert_eq!(
        group_bytes(l2, &cfg, ElemType::F32, 1 << 24),
        (6 * (64 << 20), 4 * (64 << 20))
    );
    // 16 GiB of f32 with the fast path alone: no scratch copy.
    cfg.reduce_variants = vec![ferrocuda_lessons::reduce::ReduceVariant::Fast];
    cfg.stencil_variants.clear();
    assert_eq!(
        group_bytes(l2, &cfg, ElemType::F32, (1 << 32) + 3),
        (2 * ((1u128 << 34) + 12), 0)
    );
    // Absurd sizes count in full (no wrap-around that would let them through).
    assert_eq!(
        group_bytes(l2, &cfg, ElemType::F64, usize::MAX),
        (2 * 8 * usize::MAX as u128, 0)
    );
}
