//! The race checkers bite: `racecheck` reports hazards on both broken-on-purpose kernels
//! (the stencil without `syncthreads`, the `volatile` warp unrolling without `syncwarp`).
//! On a GPU, NVIDIA's compute-sanitizer (needs the `ferrocuda` binary: `FERROCUDA_BIN`, set by
//! the GPU bundle, or the one next to this test's build); on the CPU device, its own
//! racecheck, which must also find every library kernel clean.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, ensure};
use ferrocuda_cli::sanitize::{
    broken_cases, broken_kernels, library_cases, library_kernels, parse_report, sanitizer_command,
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

fn racecheck_flags_both_broken_kernels(_gpu: &ferrocuda::Gpu) -> TestResult {
    let sanitizer = ferrocuda_cli::toolkit::find_tool("compute-sanitizer")
        .context(
            "compute-sanitizer not found: this test needs the CUDA toolkit on the GPU machine",
        )?
        .path;
    let device = std::env::var("FERROCUDA_DEVICE")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let out = sanitizer_command(
        sanitizer.as_ref(),
        "racecheck",
        &ferrocuda_bin()?,
        device,
        true,
    )
    .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = parse_report(&text, &broken_kernels().map(|k| k.symbol.to_string()));
    for k in broken_kernels().map(|k| k.symbol) {
        ensure!(
            report.per_kernel.get(k).copied().unwrap_or(0) > 0,
            "racecheck did not flag {k}:\n{text}"
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
        return racecheck_flags_both_broken_kernels(gpu);
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
            "racecheck_reports_hazards_on_both_broken_kernels",
            cpu_racecheck_flags_both_broken_kernels,
        ),
        gpu_test(
            "every_library_kernel_is_right_on_the_sanitizer_cases",
            library_kernels_right_and_race_free,
        ),
    ])
}
