//! `cargo xtask bench`, `cargo xtask sanitize` and `cargo xtask profile`: build and check
//! everything, then run `ferrocuda bench` (or `sanitize`, or `profile`) on the GPU.
//!
//! Everything up to running is done on any machine. Without an NVIDIA GPU, `bench` and
//! `sanitize` run on the CPU device (`--device cpu`: the same kernels on the host, at its
//! smaller default sizes, every row checked; its times are not GPU times), and `profile`,
//! which needs NVIDIA's hardware counters, says so in one line.

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
    let mut bench = Command::new(&ferrocuda.executable);
    if needs_gpu && let Err(reason) = cuda::gpu(cuda.driver.as_deref()) {
        if subcommand == "profile" {
            bail!(
                "an NVIDIA GPU is required for `ferrocuda profile` ({reason}); PTX built and checked for {}",
                archs.join(", ")
            );
        }
        eprintln!(
            "xtask: no NVIDIA GPU ({reason}): `ferrocuda {subcommand}` runs on the CPU device; \
             its times are not GPU times"
        );
        bench.args(["--device", "cpu"]);
    }
    bench.arg(subcommand).args(bench_args).current_dir(root);
    Ok(cmd::run(&mut bench)?)
}
