//! `cargo xtask bench`, `cargo xtask sanitize` and `cargo xtask profile`: build and check
//! everything, then run `ferrocuda bench` (or `sanitize`, or `profile`) on the GPU.
//!
//! Everything up to running is done on any machine, so a machine without a GPU still learns
//! whether the benchmark would build; the run itself needs a device and says so in one line.

use std::path::Path;
use std::process::Command;

use anyhow::{Result, bail};

use crate::cuda::{self, Cuda};
use crate::{build_ptx, cargo, cmd, ptx_check};

pub fn run(root: &Path, subcommand: &str, bench_args: &[String]) -> Result<()> {
    let cuda = Cuda::provision(root)?;
    let archs = build_ptx::run(root, &build_ptx::Options::default())?;
    ptx_check::check_built(root, &cuda.ptxas()?)?;
    let ferrocuda = cargo::build_ferrocuda(root)?;

    // `profile --report FILE` re-renders a saved report: no device needed.
    let needs_gpu = !(subcommand == "profile" && bench_args.iter().any(|a| a == "--report"));
    if needs_gpu && let Err(reason) = cuda::gpu(cuda.driver.as_deref()) {
        bail!(
            "a CUDA device is required for `ferrocuda {subcommand}` ({reason}); PTX built and checked for {}",
            archs.join(", ")
        );
    }
    let mut bench = Command::new(&ferrocuda.executable);
    bench.arg(subcommand).args(bench_args).current_dir(root);
    Ok(cmd::run(&mut bench)?)
}
