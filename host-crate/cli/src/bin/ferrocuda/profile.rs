//! `ferrocuda profile` and its hidden case runner `profile-cases`.
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use ferrocuda::Gpu;
use ferrocuda_cli::profile;
use ferrocuda_lessons::cpu::book_input;
use ferrocuda_lessons::reduce::{ReduceOp, ReduceRun, ReduceVariant};
use ferrocuda_lessons::stencil::{Boundary, StencilRun, StencilVariant, Taps};

/// `ferrocuda profile`.
#[derive(Args)]
pub struct ProfileArgs {
    /// Nsight Compute's `ncu` (default: found like `compute-sanitizer`, on PATH or in the CUDA
    /// toolkit).
    #[arg(long)]
    ncu: Option<PathBuf>,
    /// Where `ncu.txt` (the raw report) and `profile.md` (the table) go.
    #[arg(long, default_value = "target/ferrocuda/profile")]
    out: PathBuf,
    /// Print the table of an `ncu` report saved earlier (an `ncu.txt` of this command) instead
    /// of profiling: needs no GPU.
    #[arg(long, conflicts_with_all = ["ncu", "out"])]
    report: Option<PathBuf>,
}

/// Runs every profiled kernel once: the textbook ladder (the setup of
/// 《CUDA C编程权威指南》3.4: 16 Mi `i32`, block 512), the divergence kernels, and the stencils (R = 3, 16 Mi `f32`).
pub fn cases(gpu: &Gpu) -> Result<()> {
    let n = 1 << 24;
    let host: Vec<i32> = book_input(n, 1);
    let input = gpu.upload(&host, "profile input")?;
    for v in ReduceVariant::ALL.into_iter().filter(|v| v.is_textbook()) {
        let mut run = ReduceRun::<i32>::new(gpu, v, ReduceOp::Sum, &input, 512)?;
        run.run()?;
    }
    ferrocuda_lessons::lab::divergence(gpu, 1 << 20, 128, 64, 1)?;
    let x: Vec<f32> = book_input(n, 2);
    let x = gpu.upload(&x, "profile stencil input")?;
    let mut y = gpu.alloc::<f32>(n, "profile stencil output")?;
    let taps = Taps::<f32>::Sum { radius: 3 };
    for v in StencilVariant::ALL {
        if !v.supports_type(ferrocuda::runtime::element::ElemType::F32)
            || v.error(&taps, v.default_block()).is_some()
        {
            continue;
        }
        let mut run =
            StencilRun::new(gpu, v, &taps, Boundary::Zero, &x, &mut y, v.default_block())?;
        run.run()?;
    }
    Ok(())
}

/// Runs `profile-cases` under `ncu`, writes the raw report and the table, prints the table
/// (or, with `--report`, prints the table of a saved report).
pub fn profile(device: u32, a: &ProfileArgs) -> Result<()> {
    if a.report.is_none() && ferrocuda::runtime::driver::cpu::selected() {
        bail!(
            "profile needs an NVIDIA GPU and ncu: the CPU device has no hardware counters \
             (`--report FILE` prints a saved report without either)"
        );
    }
    if let Some(path) = &a.report {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the ncu report {}", path.display()))?;
        let Some(table) = profile::table(&profile::parse_report(&text)) else {
            bail!("{} holds no ncu launch of a profiled case", path.display());
        };
        print!("{table}");
        return Ok(());
    }
    let ncu = match &a.ncu {
        Some(p) => p.clone(),
        None => ferrocuda_cli::toolkit::find_tool("ncu")
            .map(|t| t.path)
            .context(
                "ncu (Nsight Compute) not found; it comes with the CUDA toolkit; pass --ncu PATH",
            )?,
    };
    let me = std::env::current_exe().context("locating this executable")?;
    let out = std::process::Command::new(&ncu)
        // Base units (seconds as nanoseconds, bytes/second, percent, counts): no prefixes to
        // guess at.
        .args([
            "--print-units",
            "base",
            "--metrics",
            &profile::metrics_argument(),
        ])
        .arg(&me)
        .args(["--device", &device.to_string(), "profile-cases"])
        .output()
        .with_context(|| format!("running {}", ncu.display()))?;
    let text = ferrocuda_cli::toolkit::output_text(&out);
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    std::fs::write(a.out.join("ncu.txt"), &text)?;
    let table = profile::table(&profile::parse_report(&text)).filter(|_| out.status.success());
    let Some(table) = table else {
        bail!(
            "ncu did not profile the cases ({}); its last lines:\n{}",
            out.status,
            ferrocuda_cli::toolkit::last_lines(&text, 8).join("\n")
        );
    };
    std::fs::write(a.out.join("profile.md"), &table)?;
    print!("{table}");
    println!("raw report: {}", a.out.join("ncu.txt").display());
    Ok(())
}
