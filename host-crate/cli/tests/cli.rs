//! The `ferrocuda` command line on bad input: a clear message and a non-zero exit, never a
//! panic or a backtrace. These run with or without a GPU; each case states what it expects in
//! both situations.
use ferrocuda_lessons::kernels::lab::{math_kernel1, warp_functions_demo};
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use std::process::{Command, Output};

/// The binary under test: `FERROCUDA_BIN` when set (the GPU bundle runs tests away from the
/// build tree), else the one cargo built.
fn ferrocuda(args: &[&str]) -> Output {
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env_remove("LANG")
        .output()
        .expect("runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_clean_failure(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "panic: {err}"
    );
    assert!(
        needles.iter().all(|n| err.contains(n)),
        "stderr lacks {needles:?}: {err}"
    );
}

#[test]
fn smoke_block_0_is_rejected_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--block", "0"]),
        &[smoke_saxpy().symbol(), "block"],
    );
}

#[test]
fn smoke_block_2048_is_rejected_naming_kernel_and_configuration() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--block", "2048"]),
        &[smoke_saxpy().symbol(), "block 2048", "at most 1024"],
    );
}

#[test]
fn smoke_shared_memory_over_every_gpu_limit_is_rejected() {
    assert_clean_failure(
        &ferrocuda(&["smoke", "--dynamic-shared", "1000000"]),
        &[smoke_saxpy().symbol(), "shared memory"],
    );
}

#[test]
fn unknown_subcommand_exits_2_with_usage() {
    let o = ferrocuda(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage"));
}

#[test]
fn non_numeric_n_is_rejected() {
    let o = ferrocuda(&["smoke", "--n", "many"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--n"));
}

/// Without a GPU: one line saying there is no CUDA device. With one: device 7 does not exist
/// (the GPU machines have fewer than 8 devices).
#[test]
fn device_7_or_no_device_is_a_clear_error() {
    let o = ferrocuda(&["--device", "7", "info"]);
    let err = stderr(&o);
    assert_clean_failure(&o, &["device 7"]);
    assert!(
        err.contains("no CUDA device")
            || err.contains("no NVIDIA driver")
            || err.contains("does not exist"),
        "{err}"
    );
}

/// `--n 0` is valid: no launch, exit 0 on a GPU; without one, the only error is the missing
/// device.
#[test]
fn smoke_n_0_is_valid() {
    let o = ferrocuda(&["smoke", "--n", "0"]);
    if !o.status.success() {
        assert_clean_failure(&o, &["CUDA device 0"]);
        let err = stderr(&o);
        assert!(
            err.contains("no CUDA device") || err.contains("no NVIDIA driver"),
            "{err}"
        );
    }
}

/// Runs the binary as if the machine had no NVIDIA driver: `FERROCUDA_LIBCUDA` names a library
/// that does not exist, so loading the driver fails exactly as it does without one.
fn ferrocuda_without_driver(args: &[&str]) -> Output {
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    Command::new(bin)
        .args(args)
        .env("FERROCUDA_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env_remove("LANG")
        .output()
        .expect("runs")
}

/// Whether this machine has the driver's `libcuda.so.1`, as the binary would load it.
fn machine_has_driver() -> bool {
    ferrocuda::runtime::driver::load().is_ok()
}

/// The binary needs no `libcuda` to start: it loads the driver when a command first needs it.
/// `--help` and `compare` (no GPU needed) work without one; `info` fails with one line naming
/// what is missing. Checked with the driver hidden (on every machine) and, on a machine that
/// really has none (CI), as it is.
#[test]
fn without_the_driver_help_and_compare_work_and_info_says_what_is_missing_in_one_line() {
    let dir = std::env::temp_dir().join(format!("ferrocuda-nodriver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = dir.join("run.json");
    std::fs::write(&run, report_json(10.0)).unwrap();
    let run = run.to_str().unwrap();

    type Runner = fn(&[&str]) -> Output;
    let mut runs: Vec<(&str, Runner)> = vec![("driver hidden", ferrocuda_without_driver)];
    if !machine_has_driver() {
        runs.push(("no driver on this machine", ferrocuda));
    }
    for (how, ferrocuda) in runs {
        let help = ferrocuda(&["--help"]);
        assert!(
            help.status.success(),
            "{how}: --help failed: {}",
            stderr(&help)
        );
        assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: ferrocuda"));

        let compare = ferrocuda(&["compare", run, run]);
        assert!(
            compare.status.success(),
            "{how}: compare failed: {}",
            stderr(&compare)
        );

        let info = ferrocuda(&["info"]);
        let err = stderr(&info);
        assert!(
            !info.status.success(),
            "{how}: info succeeded without a driver"
        );
        assert_eq!(err.lines().count(), 1, "{how}: not one line: {err}");
        assert!(
            err.starts_with("error: ")
                && err.contains("no NVIDIA driver")
                && err.contains("libcuda.so.1"),
            "{how}: {err}"
        );
        assert!(!err.contains("panicked"), "{how}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn warp_width_3_is_rejected_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["warp", "--width", "3"]),
        &[warp_functions_demo().symbol(), "power of two", "not 3"],
    );
}

#[test]
fn warp_block_0_and_4096_are_rejected() {
    for b in ["0", "4096"] {
        assert_clean_failure(
            &ferrocuda(&["warp", "--block", b]),
            &[warp_functions_demo().symbol(), "block must be 1..=32"],
        );
    }
}

#[test]
fn occupancy_unknown_kernel_and_block_0_are_rejected() {
    assert_clean_failure(
        &ferrocuda(&["occupancy", "--kernel", "no_such_kernel"]),
        &["unknown kernel `no_such_kernel`"],
    );
    assert_clean_failure(
        &ferrocuda(&["occupancy", "--block", "0"]),
        &["--block must be 1..=1024"],
    );
    assert_clean_failure(
        &ferrocuda(&["occupancy", "--block", "4096"]),
        &["--block must be 1..=1024"],
    );
}

#[test]
fn stencil_radius_5_is_rejected_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["stencil", "--radius", "5"]),
        &["radius", "[1, 2, 3, 4, 8, 16]", "not 5"],
    );
}

#[test]
fn stencil_weights_on_i32_and_sum_only_variants_are_rejected() {
    assert_clean_failure(
        &ferrocuda(&["stencil", "--type", "i32", "--weights", "1,2,1"]),
        &["f32 and f64"],
    );
    assert_clean_failure(
        &ferrocuda(&["stencil", "--variant", "shared", "--weights", "1,2,1"]),
        &["shared", "sums only"],
    );
    assert_clean_failure(
        &ferrocuda(&["stencil", "--radius", "3", "--weights", "1,2,1"]),
        &["--radius 3", "7 coefficients"],
    );
}

#[test]
fn stencil_block_below_the_radius_or_off_the_warp_grid_is_rejected() {
    assert_clean_failure(
        &ferrocuda(&[
            "stencil",
            "--variant",
            "shared",
            "--radius",
            "16",
            "--block",
            "8",
        ]),
        &["shared", "halos", "not 8"],
    );
    assert_clean_failure(
        &ferrocuda(&["stencil", "--variant", "fast", "--block", "100"]),
        &["fast", "multiple of 32", "not 100"],
    );
}

#[test]
fn bench_rejects_bad_sizes_variants_and_output_flags_before_touching_the_gpu() {
    assert_clean_failure(&ferrocuda(&["bench", "--sizes", "0"]), &["--sizes"]);
    assert_clean_failure(&ferrocuda(&["bench", "--sizes", "lots"]), &["not a count"]);
    assert_clean_failure(
        &ferrocuda(&["bench", "--variants", "warp_speed"]),
        &["unknown variant `warp_speed`"],
    );
    assert_clean_failure(&ferrocuda(&["bench", "--json", "--csv"]), &["pick one"]);
    assert_clean_failure(&ferrocuda(&["bench", "--radius", "5"]), &["radius"]);
    assert_clean_failure(&ferrocuda(&["bench", "--rounds", "0"]), &["--rounds"]);
    assert_clean_failure(&ferrocuda(&["bench", "--reps", "0"]), &["--reps"]);
}

#[test]
fn half_precision_arguments_are_checked_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["reduce", "--type", "f8"]),
        &["unknown type `f8`", "f16, bf16"],
    );
    assert_clean_failure(
        &ferrocuda(&["reduce", "--type", "f16", "--variant", "shfl"]),
        &["f16 is reduced by the library only", "`shfl`"],
    );
    assert_clean_failure(
        &ferrocuda(&[
            "reduce",
            "--type",
            "bf16",
            "--variant",
            "reproducible",
            "--op",
            "max",
        ]),
        &["the reproducible sum is a sum", "bf16"],
    );
    assert_clean_failure(
        &ferrocuda(&["reduce", "--type", "bf16", "--block", "256"]),
        &["picks its own block"],
    );
    assert_clean_failure(
        &ferrocuda(&["bench", "--types", "f8"]),
        &["unknown type `f8`", "f16, bf16"],
    );
    assert_clean_failure(
        &ferrocuda(&["bench", "--types", "f32,bf16", "--variants", "shfl"]),
        &[
            "no variant of --variants `shfl` runs on bf16",
            "fast, reproducible",
        ],
    );
}

/// A two-row report whose rows have a +-1 % spread around their medians.
fn report_json(fast_median_us: f64) -> String {
    use ferrocuda_cli::bench::{Report, Row};
    let row = |variant: &str, median_us: f64| Row {
        family: "reduce".into(),
        variant: variant.into(),
        ty: "f32".into(),
        n: 1 << 24,
        block: 512,
        grid: "16384".into(),
        bytes: 4 << 24,
        median_us,
        min_us: median_us * 0.99,
        max_us: median_us * 1.01,
        gbs: 1.0,
        pct_copy: 1.0,
        passed: true,
        check: "bit-exact".into(),
        baselines: Vec::new(),
    };
    Report {
        device: "NVIDIA H200".into(),
        compute_capability: "9.0".into(),
        driver_cuda: "13.0".into(),
        ptx_arch: "sm_90".into(),
        date: "2026-11-21".into(),
        reps: 20,
        rounds: 3,
        baselines: "none".into(),
        api_baselines: String::new(),
        transfer_baselines: String::new(),
        peak_gbs: 4800.0,
        rows: vec![row("fast", fast_median_us), row("interleaved", 100.0)],
    }
    .to_json()
}

#[test]
fn compare_passes_on_agreeing_runs_and_fails_naming_the_rows_that_moved() {
    let dir = std::env::temp_dir().join(format!("ferrocuda-cli-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("writes");
        p.to_string_lossy().into_owned()
    };
    let a = write("a.json", &report_json(20.0));
    let same = write("b.json", &report_json(20.1));
    let moved = write("c.json", &report_json(21.0));
    let junk = write("junk.json", "not json");

    let ok = ferrocuda(&["compare", &a, &same]);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{out}{}", stderr(&ok));
    assert!(out.contains("2 of 2 rows"), "{out}");
    assert!(out.contains("reduce fast f32 2^24 block 512"), "{out}");

    let bad = ferrocuda(&["compare", &a, &moved]);
    assert_clean_failure(&bad, &["1 of 2 rows moved outside"]);
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(
        out.contains("1 of 2 rows") && out.contains("+5.00%"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.contains("fast") && l.ends_with("NO")),
        "{out}"
    );

    assert_clean_failure(
        &ferrocuda(&["compare", &a, &junk]),
        &["junk.json", "not a ferrocuda bench results.json"],
    );
    assert_clean_failure(
        &ferrocuda(&["compare", &a, "/nonexistent/results.json"]),
        &["reading /nonexistent/results.json"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn divergence_block_0_and_2048_are_rejected_before_touching_the_gpu() {
    assert_clean_failure(
        &ferrocuda(&["divergence", "--block", "0"]),
        &[math_kernel1().symbol(), "block"],
    );
    assert_clean_failure(
        &ferrocuda(&["divergence", "--block", "2048"]),
        &[math_kernel1().symbol(), "at most 1024"],
    );
}

#[test]
fn unknown_reduce_and_stencil_variants_are_rejected_with_the_list() {
    assert_clean_failure(
        &ferrocuda(&["reduce", "--variant", "quantum"]),
        &["unknown reduce variant `quantum`", "interleaved"],
    );
    assert_clean_failure(
        &ferrocuda(&["stencil", "--variant", "quantum"]),
        &["unknown stencil variant `quantum`", "shared"],
    );
}

#[test]
fn the_reproducible_sum_is_refused_for_integers_and_other_operators() {
    assert_clean_failure(
        &ferrocuda(&["reduce", "--variant", "reproducible", "--type", "i32"]),
        &["reproducible sum is a sum of f32 or f64", "sum of i32"],
    );
    assert_clean_failure(
        &ferrocuda(&[
            "reduce",
            "--variant",
            "reproducible",
            "--type",
            "f32",
            "--op",
            "max",
        ]),
        &["reproducible sum is a sum of f32 or f64", "max of f32"],
    );
    // The bench knows the name (it fails later, on opening the GPU, not on the name).
    let o = ferrocuda(&["bench", "--variants", "reproducible,quantum"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("reproducible, copy_bulk, or all"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Device printf (the exercise of 沐曦 MXMACA 教材第5章): on a GPU, exactly one line per
/// thread with its own indices (in any order: warps print in the order they ran). Without a GPU the command fails
/// cleanly and the test says loudly that it skipped the check (a failure where
/// `FERROCUDA_REQUIRE_GPU=1`, as on the GPU machine).
#[test]
fn print_indices_prints_every_threads_indices_from_the_device() {
    let o = ferrocuda(&[
        "print-indices",
        "--grid",
        "3",
        "--block",
        "40",
        "--tag",
        "42",
    ]);
    if !o.status.success() {
        let err = stderr(&o);
        let no_gpu = err.contains("no CUDA device") || err.contains("no NVIDIA driver");
        assert!(
            no_gpu && std::env::var("FERROCUDA_REQUIRE_GPU").as_deref() != Ok("1"),
            "print-indices failed: {err}"
        );
        assert_clean_failure(&o, &["CUDA device 0"]);
        eprintln!("SKIPPED (no GPU): device printf not checked: {err}");
        return;
    }
    let out = String::from_utf8_lossy(&o.stdout);
    let mut got: Vec<&str> = out.lines().filter(|l| l.starts_with("tag 42:")).collect();
    got.sort_unstable();
    let mut want: Vec<String> = (0..3)
        .flat_map(|b| {
            (0..40).map(move |t| format!("tag 42: threadIdx.x = {t} of 40, blockIdx.x = {b} of 3"))
        })
        .collect();
    want.sort_unstable();
    assert_eq!(got, want, "stdout:\n{out}");
}

#[test]
fn print_indices_refuses_more_lines_than_the_printf_buffer_keeps() {
    assert_clean_failure(
        &ferrocuda(&["print-indices", "--grid", "100", "--block", "100"]),
        &["10000 lines", "at most 4096"],
    );
    assert_clean_failure(&ferrocuda(&["print-indices", "--block", "0"]), &["block 0"]);
    assert_clean_failure(&ferrocuda(&["streams", "--n", "0"]), &["at least 1"]);
    assert_clean_failure(
        &ferrocuda(&["profile", "--ncu", "/nonexistent/ncu"]),
        &["running /nonexistent/ncu"],
    );
}

/// `ferrocuda report` draws a run again from its results.json, without a GPU.
#[test]
fn report_rerenders_a_run_from_its_results_json() {
    let dir = std::env::temp_dir().join(format!("ferrocuda-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("in.json");
    std::fs::write(&json, report_json(10.0)).unwrap();
    let out = dir.join("out");
    let o = ferrocuda(&[
        "report",
        json.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| fast |"), "{md}");
    let svg = std::fs::read_to_string(out.join("reduce-f32.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("fast"), "{svg}");
    assert_clean_failure(
        &ferrocuda(&["report", "/nonexistent.json"]),
        &["/nonexistent.json"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `profile --report` prints the table of a saved `ncu` report with no GPU and no `ncu`; a
/// missing or empty report is a clean failure.
#[test]
fn profile_prints_the_table_of_a_saved_report() {
    let dir = std::env::temp_dir().join(format!("ferrocuda-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("ncu.txt");
    std::fs::write(
        &report,
        include_str!("../../../tests/fixtures/profile-h100-ncu.txt"),
    )
    .unwrap();
    let o = ferrocuda(&["profile", "--report", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains(
            "| reduce_neighbored_i32 | (32768, 1, 1)x(512, 1, 1) | 150.53 | 91.7 | 25.0 | 3560 | 1783 | - |"
        ),
        "{table}"
    );
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "==PROF== nothing\n").unwrap();
    assert_clean_failure(
        &ferrocuda(&["profile", "--report", empty.to_str().unwrap()]),
        &["holds no ncu launch of a profiled case"],
    );
    assert_clean_failure(
        &ferrocuda(&["profile", "--report", "/nonexistent/ncu.txt"]),
        &["/nonexistent/ncu.txt"],
    );
    assert_clean_failure(
        &ferrocuda(&["profile", "--report", empty.to_str().unwrap(), "--out", "x"]),
        &["--out"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The lessons pages, Chinese and English, read when the test is built so that the GPU bundle
/// carries them.
const LESSONS_PAGE_ZH: &str = include_str!("../../../docs/lessons.md");
const LESSONS_PAGE: &str = include_str!("../../../docs/en/lessons.md");

/// The lessons page's commands, `cargo run --release -p ferrocuda-cli -- ARGS`, as ARGS.
fn lesson_commands(page: &str) -> Vec<Vec<String>> {
    page.lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("cargo run --release -p ferrocuda-cli -- ")
        })
        .filter(|args| !args.starts_with('<'))
        .map(|args| args.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn the_lessons_page_has_every_lesson_in_the_notes_order() {
    let lessons: Vec<String> = lesson_commands(LESSONS_PAGE)
        .iter()
        .map(|args| args.join(" "))
        .collect();
    // The subcommand, after a `--device X` that comes first.
    let subcommands: Vec<&str> = lessons
        .iter()
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            if words[0] == "--device" {
                words[2]
            } else {
                words[0]
            }
        })
        .collect();
    assert_eq!(
        subcommands,
        [
            "print-indices",
            "divergence",
            "divergence",
            "divergence",
            "waves",
            "warp",
            "warp",
            "stencil",
            "stencil",
            "stencil",
            "sanitize",
            "reduce",
            "reduce",
            "reduce",
            "reduce",
            "reduce",
            "occupancy",
            "profile",
            "streams"
        ],
        "{lessons:#?}"
    );
    assert_eq!(
        lesson_commands(LESSONS_PAGE_ZH),
        lesson_commands(LESSONS_PAGE),
        "the Chinese and English lessons pages run the same commands"
    );
}

/// Every command on the lessons pages runs, in both languages: the English page's as written,
/// the Chinese page's (`docs/lessons.md`) with `--lang zh`. On a GPU (`FERROCUDA_REQUIRE_GPU=1`, as in the
/// bundle) each must succeed, and its output is saved under `FERROCUDA_LESSONS_OUT` when that
/// is set. Without a GPU each must stop for want of the device or of the CUDA tool it drives,
/// never on its arguments; the test says loudly what it could not run.
#[test]
fn every_command_on_the_lessons_page_runs() {
    let require_gpu = std::env::var("FERROCUDA_REQUIRE_GPU").as_deref() == Ok("1");
    let save = std::env::var_os("FERROCUDA_LESSONS_OUT").map(std::path::PathBuf::from);
    let mut commands: Vec<(Vec<String>, &str)> = Vec::new();
    for (page, lang) in [(LESSONS_PAGE, "en"), (LESSONS_PAGE_ZH, "zh")] {
        for args in lesson_commands(page) {
            let lead: Vec<String> = if lang == "zh" {
                vec!["--lang".into(), "zh".into()]
            } else {
                Vec::new()
            };
            commands.push((lead.into_iter().chain(args).collect(), lang));
        }
    }
    assert!(commands.len() >= 2 * 9, "{commands:?}");
    // Each command, and the CPU device's run of it where there is no NVIDIA GPU. On the CPU
    // device (no GPU: CI) two run at a time, one per core; on a GPU one at a time, so that
    // the saved outputs' timings are each command's alone.
    let run = |args: &[String]| -> (String, Output, bool) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = ferrocuda(&args);
        let err = stderr(&o);
        // Without an NVIDIA GPU, the same command on the CPU device, which must pass.
        if !o.status.success()
            && !require_gpu
            && (err.contains("no CUDA device") || err.contains("no NVIDIA driver"))
        {
            let cpu: Vec<&str> = ["--device", "cpu"]
                .into_iter()
                .chain(args.iter().copied())
                .collect();
            return (cpu.join(" "), ferrocuda(&cpu), true);
        }
        (args.join(" "), o, false)
    };
    let workers = if require_gpu || machine_has_driver() {
        1
    } else {
        2
    };
    let mut outputs: Vec<Option<(String, Output, bool)>> =
        (0..commands.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (commands, run) = (&commands, &run);
                s.spawn(move || {
                    (w..commands.len())
                        .step_by(workers)
                        .map(|i| (i, run(&commands[i].0)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().unwrap() {
                outputs[i] = Some(r);
            }
        }
    });
    let mut on_cpu = 0;
    let mut skipped = Vec::new();
    for (i, ((args, lang), out)) in commands.iter().zip(outputs).enumerate() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (line, o, cpu) = out.expect("every command ran");
        on_cpu += usize::from(cpu);
        if o.status.success() {
            if let Some(dir) = &save {
                std::fs::create_dir_all(dir).unwrap();
                let text = format!("$ ferrocuda {line}\n{}", String::from_utf8_lossy(&o.stdout));
                let lesson = args
                    .iter()
                    .find(|a| !a.starts_with('-') && !["zh", "cpu", "cpu:64"].contains(a))
                    .unwrap_or(&args[0]);
                std::fs::write(dir.join(format!("{i:02}-{lang}-{lesson}.txt")), text).unwrap();
            }
            continue;
        }
        let err = stderr(&o);
        // What needs NVIDIA's hardware counters or tools, named.
        let hardware_only = err.contains("the CPU device has no hardware counters")
            || err.contains("ncu (Nsight Compute) not found")
            || err.contains("compute-sanitizer not found");
        assert!(
            hardware_only && !require_gpu,
            "`ferrocuda {line}` failed:\nstdout:\n{}\nstderr:\n{err}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_clean_failure(&o, &[]);
        skipped.push(format!("`ferrocuda {line}`: {}", err.trim()));
    }
    if on_cpu > 0 {
        eprintln!(
            "{on_cpu} of {} lesson commands ran on the CPU device (no NVIDIA GPU)",
            commands.len()
        );
    }
    if !skipped.is_empty() {
        eprintln!(
            "SKIPPED (needs an NVIDIA GPU's counters or CUDA tool): {} of {} lesson commands:\n  {}",
            skipped.len(),
            commands.len(),
            skipped.join("\n  ")
        );
    }
}

/// Every lesson's `--help` says which chapter of which book it reproduces, in English and in
/// Chinese ("Reproduces" / "复现"), and names the docs chapter that explains it. No GPU needed.
#[test]
fn every_lesson_help_names_the_book_chapter_it_reproduces() {
    const FAN: &str = "樊哲勇《CUDA编程基础与实践》第10章";
    const BASICS: &str = "《CUDA C/C++ Basics》学习笔记";
    const PRO: &str = "《CUDA C编程权威指南》3.4";
    const EXEC: &str = "《CUDA执行模型》";
    const MXMACA: &str = "沐曦 MXMACA 教材第5章";
    let lessons: [(&str, &[&str], &[&str]); 10] = [
        ("waves", &[MXMACA], &["docs/cpu-device.md"]),
        (
            "reduce",
            &[PRO, EXEC, FAN, MXMACA],
            &["docs/reduction.md", "docs/cooperative-groups.md"],
        ),
        ("divergence", &[EXEC, MXMACA], &["docs/divergence.md"]),
        ("warp", &[FAN], &["docs/warp.md"]),
        ("stencil", &[BASICS], &["docs/stencil.md"]),
        (
            "sanitize",
            &[BASICS, FAN],
            &["docs/stencil.md", "docs/reliability.md"],
        ),
        ("occupancy", &[EXEC, MXMACA], &["docs/occupancy.md"]),
        ("profile", &[PRO, EXEC], &["docs/profiling.md"]),
        ("print-indices", &[MXMACA], &["docs/device-layer.md"]),
        ("streams", &[MXMACA], &["docs/streams.md"]),
    ];
    for (lesson, books, chapters) in lessons {
        let o = ferrocuda(&[lesson, "--help"]);
        assert!(
            o.status.success(),
            "`ferrocuda {lesson} --help` failed: {}",
            stderr(&o)
        );
        let help = String::from_utf8_lossy(&o.stdout);
        for needle in books.iter().chain(chapters).chain(&["Reproduces", "复现"]) {
            assert!(
                help.contains(needle),
                "`ferrocuda {lesson} --help` does not name {needle}:\n{help}"
            );
        }
    }
    // Every lesson on the lessons page is one of those checked above.
    for args in lesson_commands(LESSONS_PAGE) {
        // The subcommand, after a `--device X` that comes first.
        let lesson = if args[0] == "--device" {
            &args[2]
        } else {
            &args[0]
        };
        assert!(
            lessons.iter().any(|(l, ..)| l == lesson),
            "the lessons page runs `{lesson}`, whose --help is not checked here"
        );
    }
}

/// The notes checklist, read when the test is built.
const NOTES_CHECKLIST: &str = include_str!("../../../docs/notes-checklist.md");

/// Every `ferrocuda ...` command of the notes checklist is accepted: run on a device that does
/// not exist (`--device 99`), each stops only for want of that device (or, where there is no
/// GPU at all, of any), or is one of the refusals the checklist shows on purpose, refused
/// cleanly. The commands that drive `ncu` and `compute-sanitizer` are on the lessons page,
/// whose test runs them.
#[test]
fn every_command_of_the_notes_checklist_is_accepted() {
    const REFUSED: [&str; 3] = [
        "smoke --block 0",
        "stencil --variant shared --radius 16 --block 8",
        "warp --width 6",
    ];
    let mut commands: Vec<&str> = NOTES_CHECKLIST
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| code.strip_prefix("ferrocuda "))
        .filter(|args| !args.starts_with('<'))
        .collect();
    commands.sort_unstable();
    commands.dedup();
    assert!(commands.len() >= 40, "{commands:?}");
    let mut run = 0;
    for line in commands {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        if matches!(args[0], "profile" | "sanitize") {
            continue;
        }
        args.extend(["--device", "99"]);
        let o = ferrocuda(&args);
        let err = stderr(&o);
        let no_device = err.contains("device 99")
            || err.contains("no CUDA device")
            || err.contains("no NVIDIA driver");
        if REFUSED.contains(&line) {
            assert_clean_failure(&o, &[]);
            assert!(
                !no_device,
                "`ferrocuda {line}` must be refused before the GPU: {err}"
            );
        } else {
            assert_clean_failure(&o, &[]);
            assert!(
                no_device,
                "`ferrocuda {line}` failed on its arguments: {err}"
            );
        }
        run += 1;
    }
    assert!(run >= 40, "{run} commands");
}

/// `ferrocuda multi` without NCCL, without the launcher's variables, or with a bad argument:
/// one line each, saying what is missing, before any GPU is needed (no panic, no hang).
#[test]
fn multi_says_in_one_line_what_is_missing() {
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(&bin);
        c.arg("multi").args(args);
        for v in [
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "FERROCUDA_RENDEZVOUS",
            "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_RESTART_COUNT",
        ] {
            c.env_remove(v);
        }
        c.envs(env.iter().copied()).output().expect("runs")
    };
    let o = run(&[], &[("FERROCUDA_LIBNCCL", "/nonexistent/libnccl.so.2")]);
    assert_clean_failure(
        &o,
        &["no NCCL", "/nonexistent/libnccl.so.2", "FERROCUDA_LIBNCCL"],
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let o = run(&["--transport", "env"], &[]);
    assert_clean_failure(
        &o,
        &[
            "needs a launcher's rank variables",
            "SLURM_PROCID",
            "OMPI_COMM_WORLD_RANK",
        ],
    );
    let o = run(
        &["--transport", "env"],
        &[("RANK", "0"), ("WORLD_SIZE", "2")],
    );
    assert_clean_failure(&o, &["needs a meeting place: MASTER_ADDR and MASTER_PORT"]);
    let o = run(
        &["--transport", "env"],
        &[("RANK", "two"), ("WORLD_SIZE", "2")],
    );
    assert_clean_failure(&o, &["RANK=\"two\" is not a rank number"]);
    let o = run(
        &["--transport", "env"],
        &[
            ("RANK", "2"),
            ("WORLD_SIZE", "2"),
            ("FERROCUDA_RENDEZVOUS", "file:///nonexistent/x"),
        ],
    );
    assert_clean_failure(&o, &["RANK=2 is not below WORLD_SIZE=2"]);
    let o = run(&["--transport", "carrier-pigeon"], &[]);
    assert_clean_failure(&o, &["--transport must be nccl, env or virtual"]);
    let o = run(&["--radius", "5"], &[]);
    assert_clean_failure(&o, &["radius must be one of"]);
    let o = run(&["--boundary", "mirror"], &[]);
    assert_clean_failure(&o, &["--boundary must be zero, clamp or periodic"]);
    let o = run(&["--only", "sum"], &[]);
    assert_clean_failure(
        &o,
        &["invalid value 'sum' for '--only <ONLY>'", "sums, stencil"],
    );
    // `--elements` is `--n` under a name torchrun does not take for one of its own options.
    let o = run(&["--elements", "2^10", "--n", "2^11"], &[]);
    assert_clean_failure(&o, &["--n", "cannot be used multiple times"]);
}

/// The waves lesson on the CPU device with 64-wide waves (沐曦 MXMACA 教材第5章): 200 threads as
/// waves of 64, 64, 64 and 8, each full wave divergent on `lane < 32`, the syncwave exchange and
/// the occupancy checked. Runs with or without a GPU.
#[test]
fn waves_on_64_wide_waves_cut_200_threads_as_the_chapter_says() {
    let o = ferrocuda(&["--device", "cpu:64", "waves"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() > 3 && w[0].parse::<u32>().is_ok() && w[1].contains('-'))
        .collect();
    let lanes: Vec<&str> = rows.iter().map(|w| w[2]).collect();
    assert_eq!(lanes, ["64", "64", "64", "8"], "{out}");
    assert!(
        rows[..3]
            .iter()
            .all(|w| w[3] == "0x00000000ffffffff" && w[4] == "both"),
        "{out}"
    );
    assert!(
        out.contains("warpSize = 64") && out.contains("PASS"),
        "{out}"
    );
}

/// A kernel written for 32 lanes (its warp functions take 32-bit masks) is refused on 64-wide
/// waves, naming the kernel, its launch and the function.
#[test]
fn a_32_lane_kernel_is_refused_by_name_on_64_wide_waves() {
    assert_clean_failure(
        &ferrocuda(&["--device", "cpu:64", "warp"]),
        &[
            warp_functions_demo().symbol(),
            "<<<(1, 1, 1), (16, 1, 1), 0>>>",
            "ballot_sync",
            "64 lanes wide",
        ],
    );
}

/// Whether `text` holds Chinese characters beyond the words that head every error (`错误`,
/// `（英文原文）`, `（原文）`, `参数错误`).
fn explains_in_chinese(text: &str) -> bool {
    ["参数错误", "错误", "（英文原文）", "（原文）"]
        .iter()
        .fold(text.to_string(), |t, w| t.replace(w, ""))
        .chars()
        .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

/// With `--lang zh` (or `LANG=zh_CN.UTF-8`), every error a learner can meet on a lesson's
/// arguments is explained in Chinese, with the English message (which names the kernel and
/// launch configuration) beneath it; without, the message is English only.
#[test]
fn the_errors_a_learner_meets_are_explained_in_chinese() {
    // Each case and a phrase of the Chinese explanation it must get (the right one, not just any).
    let cases: &[(&[&str], &str)] = &[
        (&["--device", "cpu", "smoke", "--block", "0"], "无法覆盖"),
        (
            &["--device", "cpu", "smoke", "--block", "2048"],
            "最多 1024 个线程",
        ),
        (
            &["--device", "cpu", "divergence", "--block", "0"],
            "无法覆盖",
        ),
        (
            &["--device", "cpu", "divergence", "--block", "2048"],
            "最多 1024 个线程",
        ),
        (&["--device", "cpu", "warp", "--width", "3"], "2 的幂"),
        (&["--device", "cpu", "warp", "--block", "0"], "1 到 32"),
        (
            &["--device", "cpu", "occupancy", "--kernel", "nope"],
            "没有这个核函数",
        ),
        (
            &["--device", "cpu", "occupancy", "--block", "0"],
            "`--block`",
        ),
        (&["--device", "cpu", "stencil", "--radius", "5"], "半径"),
        (
            &["--device", "cpu", "stencil", "--block", "48"],
            "32 的倍数",
        ),
        (
            &[
                "--device",
                "cpu",
                "stencil",
                "--variant",
                "shared",
                "--radius",
                "16",
                "--block",
                "8",
            ],
            "光环",
        ),
        (
            &[
                "--device",
                "cpu",
                "stencil",
                "--type",
                "i32",
                "--weights",
                "1,2,1",
            ],
            "加权模板",
        ),
        (
            &["--device", "cpu", "reduce", "--variant", "nope"],
            "归约变体",
        ),
        (&["--device", "cpu", "reduce", "--block", "48"], "2 的幂"),
        (&["--device", "cpu", "reduce", "--type", "i33"], "元素类型"),
        (&["--device", "cpu", "reduce", "--op", "mean"], "运算"),
        (&["--device", "cpu", "reduce", "--reps", "0"], "`--reps`"),
        (
            &[
                "--device",
                "cpu",
                "reduce",
                "--type",
                "i32",
                "--variant",
                "reproducible",
            ],
            "可复现求和",
        ),
        (&["--device", "cpu", "streams", "--n", "0"], "streams"),
        (
            &["--device", "cpu", "print-indices", "--grid", "0"],
            "print-indices",
        ),
        (
            &[
                "--device",
                "cpu",
                "print-indices",
                "--grid",
                "100000",
                "--block",
                "1024",
            ],
            "printf",
        ),
        (&["--device", "cpu:64", "warp"], "wave"),
        (&["--device", "cpu:64", "divergence", "--draw"], "wave"),
        (
            &["--device", "cpu", "warp", "--draw", "--offset", "8"],
            "--offset",
        ),
        (&["--device", "7", "warp"], "设备"),
        (&["warp", "--bogus"], "参数错误"),
        (&["reduce", "--n", "many"], "参数错误"),
    ];
    let mut unexplained = Vec::new();
    for (args, phrase) in cases {
        let zh: Vec<&str> = ["--lang", "zh"]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let o = ferrocuda(&zh);
        assert_clean_failure(&o, &["错误"]);
        let err = stderr(&o);
        if !explains_in_chinese(&err) || !err.contains(phrase) {
            unexplained.push(format!(
                "ferrocuda {} (wants `{phrase}`): {err}",
                zh.join(" ")
            ));
        }
        let en = ferrocuda(args);
        assert_clean_failure(&en, &[]);
        assert!(
            !explains_in_chinese(&stderr(&en)) && !stderr(&en).contains("错误"),
            "English by default: {}",
            stderr(&en)
        );
    }
    assert!(
        unexplained.is_empty(),
        "errors without their Chinese explanation:\n{}",
        unexplained.join("\n")
    );
    // The environment chooses Chinese too.
    let bin =
        std::env::var("FERROCUDA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrocuda").into());
    let o = Command::new(bin)
        .args(["--device", "cpu", "reduce", "--variant", "nope"])
        .env_remove("LC_ALL")
        .env_remove("LC_MESSAGES")
        .env("LANG", "zh_CN.UTF-8")
        .output()
        .expect("runs");
    assert!(explains_in_chinese(&stderr(&o)), "{}", stderr(&o));
}

/// The pictures in `docs/pictures/` are what `--draw --svg` draws from a run today: each
/// lesson's pictures are drawn again (on the GPU, or on the CPU device without one) and must
/// equal the committed files byte for byte; the command fails when a picture differs from the
/// notes' account of the kernel.
#[test]
fn the_docs_pictures_are_drawn_by_the_lessons_from_runs() {
    // Read when the test is built, so that the GPU bundle carries them.
    const PICTURES: [(&str, &str); 6] = [
        (
            "divergence-masks.svg",
            include_str!("../../../docs/pictures/divergence-masks.svg"),
        ),
        (
            "reduce-tree-interleaved.svg",
            include_str!("../../../docs/pictures/reduce-tree-interleaved.svg"),
        ),
        (
            "reduce-tree-neighbored.svg",
            include_str!("../../../docs/pictures/reduce-tree-neighbored.svg"),
        ),
        (
            "reduce-tree-neighbored_less.svg",
            include_str!("../../../docs/pictures/reduce-tree-neighbored_less.svg"),
        ),
        (
            "stencil-tiles.svg",
            include_str!("../../../docs/pictures/stencil-tiles.svg"),
        ),
        (
            "warp-shuffles.svg",
            include_str!("../../../docs/pictures/warp-shuffles.svg"),
        ),
    ];
    let mut seen = 0;
    let out = std::env::temp_dir().join(format!("ferrocuda-pictures-{}", std::process::id()));
    let device = if machine_has_driver() { "0" } else { "cpu" };
    for lesson in ["reduce", "divergence", "stencil", "warp"] {
        let dir = out.join(lesson);
        let o = ferrocuda(&[
            "--device",
            device,
            lesson,
            "--draw",
            "--svg",
            dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{lesson} --draw: {}", stderr(&o));
        let drawn: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(!drawn.is_empty(), "{lesson} --draw --svg wrote nothing");
        for path in drawn {
            let name = path.file_name().unwrap();
            let committed = PICTURES
                .iter()
                .find(|(n, _)| *n == name.to_string_lossy())
                .unwrap_or_else(|| panic!("docs/pictures/{} is missing", name.to_string_lossy()))
                .1;
            seen += 1;
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                committed,
                "docs/pictures/{} is not what `ferrocuda {lesson} --draw --svg` draws",
                name.to_string_lossy()
            );
        }
    }
    assert_eq!(
        seen,
        PICTURES.len(),
        "a picture of docs/pictures/ is no longer drawn"
    );
    std::fs::remove_dir_all(&out).unwrap();
}
