//! compute-sanitizer bites: `racecheck` reports hazards on both broken-on-purpose kernels
//! (the stencil without `syncthreads`, the `volatile` warp unrolling without `syncwarp`).
//! Needs the `ferrocuda` binary (`FERROCUDA_BIN`, set by the GPU bundle, or the one next to
//! this test's build) and `compute-sanitizer` on the GPU machine.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, ensure};
use ferrocuda_cli::sanitize::{broken_kernels, parse_report, sanitizer_command};
use ferrocuda_tests::{TestResult, hardware_test, run_gpu_suite};

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

fn main() -> ExitCode {
    run_gpu_suite(vec![hardware_test(
        "racecheck_reports_hazards_on_both_broken_kernels",
        "compute-sanitizer",
        racecheck_flags_both_broken_kernels,
    )])
}
