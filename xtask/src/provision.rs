//! `cargo xtask provision`: fetches whatever this machine lacks to build and test the project.
//!
//! The kernels' linker comes through rustup; the CUDA pieces (`ptxas`, `cuda.h`, `libcuda`)
//! come from the machine when it has them and from PyPI and Debian otherwise (see
//! [`crate::cuda`]). Everything is idempotent: a second run only looks at a few files.

use std::path::Path;

use anyhow::Result;

use crate::cuda::{Cuda, CudaEnv, Found};
use crate::toolchain::{self, Toolchain};

pub fn run(root: &Path) -> Result<()> {
    let toolchain = Toolchain::detect(root)?;
    let linker = toolchain::ensure_bitcode_linker(&toolchain.host)?;
    let cuda = Cuda::provision(root)?;
    let env = cuda.env()?;

    let show = |found: &Option<Found>| match found {
        Some(found) => format!("{} ({})", found.path.display(), found.origin),
        None => "missing".to_owned(),
    };
    println!("llvm-bitcode-linker  {}", linker.display());
    println!("ptxas                {}", show(&cuda.ptxas));
    println!("cuda.h               {}", show(&cuda.header));
    println!("libcuda to link      {}", show(&cuda.link_lib));
    match &cuda.driver {
        Some(driver) => println!("libcuda to load      the NVIDIA driver's ({driver})"),
        None => println!(
            "libcuda to load      {}; no driver here, so the tests load this one",
            show(&cuda.runtime_lib)
        ),
    }
    print_env(&env);
    toolchain.require_kernel_components()?;
    Ok(())
}

/// How the host crate gets built and run with these pieces, for doing it by hand.
fn print_env(env: &CudaEnv) {
    println!(
        "environment          CUDA_LIBRARY_PATH={}",
        env.link_root.display()
    );
    if let Some(dir) = &env.runtime_dir {
        println!(
            "                     LD_LIBRARY_PATH={} (tests only)",
            dir.display()
        );
    }
}
