//! The race checkers bite: `racecheck` reports hazards on both broken-on-purpose kernels
//! (the stencil without `syncthreads`, the `volatile` warp unrolling without `syncwarp`).
//! On a GPU, NVIDIA's compute-sanitizer (needs the `ferrocuda` binary: `FERROCUDA_BIN`, set by
//! the GPU bundle, or the one next to this test's build); on the CPU device, its own
//! racecheck, which must also find every library kernel clean.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, ensure};
use ferrocuda_cli::sanitize::{
    ToolReport, broken_cases, broken_kernels, library_cases, library_kernels, parse_report,
    sanitizer_command,
};
use ferrocuda_tests::{TestResult, gpu_test, run_gpu_suite};

fn ferrocuda_bin() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("FERROCUDA_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("ferrocuda"))
        .context("no build directory")?;
    ensure!(
        bin.is_file(),
        "set FERROCUDA_BIN: {} does not exist",
        bin.display()
    );
    Ok(bin)
}

/// compute-sanitizer's output of `tool` over the sanitizer's cases (the broken kernels with
/// `broken`, else every library kernel), parsed with every kernel's name.
fn sanitizer_report(tool: &str, broken: bool) -> anyhow::Result<(ToolReport, String)> {
    let sanitizer = ferrocuda_cli::toolkit::find_tool("compute-sanitizer")
        .context(
            "compute-sanitizer not found: this test needs the CUDA toolkit on the GPU machine",
        )?
        .path;
    let device = std::env::var("FERROCUDA_DEVICE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let out =
        sanitizer_command(sanitizer.as_ref(), tool, &ferrocuda_bin()?, device, broken).output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = broken_kernels()
        .into_iter()
        .chain(library_kernels())
        .map(|k| k.symbol.to_string())
        .collect();
    Ok((parse_report(&text, &names), text))
}

/// Why a report is not clean: its total, and the kernels it names with errors.
fn not_clean(report: &ToolReport) -> Option<String> {
    let named: Vec<String> = report
        .per_kernel
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k}: {n}"))
        .collect();
    (report.total > 0 || !named.is_empty())
        .then(|| format!("{} in all; {}", report.total, named.join(", ")))
}

/// On a GPU: compute-sanitizer's racecheck flags each broken kernel (and so is seen not to be
/// clean by the same check that follows), and its racecheck and memcheck report nothing at
/// all over every library kernel's cases.
fn sanitizer_flags_the_broken_kernels_and_nothing_else(_gpu: &ferrocuda::Gpu) -> TestResult {
    let (report, text) = sanitizer_report("racecheck", true)?;
    for k in broken_kernels().map(|k| k.symbol) {
        ensure!(
            report.per_kernel.get(k).copied().unwrap_or(0) > 0,
            "racecheck did not flag {k}:\n{text}"
        );
    }
    ensure!(
        not_clean(&report).is_some(),
        "the broken kernels' racecheck report passed for clean: the check below cannot fail"
    );
    for tool in ["racecheck", "memcheck"] {
        let (report, text) = sanitizer_report(tool, false)?;
        if let Some(why) = not_clean(&report) {
            anyhow::bail!("{tool} over the library kernels: {why}\n{text}");
        }
        ensure!(
            report.total == 0,
            "{tool}: {} errors over the library kernels",
            report.total
        );
    }
    Ok(())
}

/// Runs `f` on the CPU device, its findings not failing the launches (under racecheck when
/// `racecheck`); returns what it returned and the findings.
fn cpu_findings<R>(
    racecheck: bool,
    f: impl FnOnce() -> ferrocuda::runtime::error::Result<R>,
) -> anyhow::Result<(R, Vec<ferrocuda::runtime::driver::cpu::Finding>)> {
    use ferrocuda::runtime::driver::cpu;
    cpu::take_findings();
    cpu::racecheck(racecheck);
    cpu::fail_on_findings(false);
    let r = f();
    cpu::racecheck(false);
    cpu::fail_on_findings(true);
    Ok((r?, cpu::take_findings()))
}

/// The CPU device's racecheck flags each broken kernel, by name, and only them.
fn cpu_racecheck_flags_both_broken_kernels(gpu: &ferrocuda::Gpu) -> TestResult {
    if !gpu.is_cpu() {
        return sanitizer_flags_the_broken_kernels_and_nothing_else(gpu);
    }
    let ((), findings) = cpu_findings(true, || broken_cases(gpu))?;
    let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
    for k in broken_kernels().map(|k| k.symbol) {
        ensure!(
            text.iter()
                .any(|f| f.starts_with("racecheck: ") && f.contains(&format!("{k}<<<"))),
            "the CPU device's racecheck did not flag {k}:\n{}",
            text.join("\n")
        );
    }
    Ok(())
}

/// Every library kernel on the sanitizer's cases: each result right, and on the CPU device no
/// synccheck finding. The hazards are checked by the sanitizer itself, on the same cases: on a
/// GPU `ferrocuda sanitize` under compute-sanitizer, and without one the lessons page's
/// `ferrocuda --device cpu sanitize --tools racecheck`, which fails unless every library kernel
/// is clean and both broken ones are flagged (its test, `every_command_on_the_lessons_page_runs`,
/// requires it to pass). Racecheck stops at every shared access, so the sweep runs under it
/// once.
fn library_kernels_right_and_race_free(gpu: &ferrocuda::Gpu) -> TestResult {
    let (results, findings) = if gpu.is_cpu() {
        cpu_findings(false, || library_cases(gpu))?
    } else {
        (library_cases(gpu)?, Vec::new())
    };
    let failed: Vec<&String> = results
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(k, _)| k)
        .collect();
    ensure!(
        failed.is_empty(),
        "wrong results under racecheck: {failed:?}"
    );
    ensure!(
        findings.is_empty(),
        "{} findings on library kernels:\n{}",
        findings.len(),
        findings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let missing: Vec<&str> = library_kernels()
        .iter()
        .map(|e| e.symbol)
        .filter(|k| !results.contains_key(*k))
        .collect();
    ensure!(
        missing.is_empty(),
        "kernels the cases did not run: {missing:?}"
    );
    Ok(())
}

fn main() -> ExitCode {
    run_gpu_suite(vec![
        gpu_test(
            "racecheck_reports_hazards_on_both_broken_kernels_and_none_on_the_library",
            cpu_racecheck_flags_both_broken_kernels,
        ),
        gpu_test(
            "every_library_kernel_is_right_on_the_sanitizer_cases",
            library_kernels_right_and_race_free,
        ),
    ])
}
