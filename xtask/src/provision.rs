//! `cargo xtask provision`: fetches whatever this machine lacks to build and test the project.
//!
//! The kernels' toolchain and linker come through rustup (`ferrocuda-builder` installs them the
//! same way when a host build needs them); `ptxas`, which only the PTX checks need, comes from
//! the machine when it has one and from PyPI otherwise (see [`crate::cuda`]). Everything is
//! idempotent: a second run only looks at a few files.

use std::path::Path;

use anyhow::Result;

use crate::cuda::{Cuda, Found};
use crate::toolchain::{self, Toolchain};

pub fn run(root: &Path) -> Result<()> {
    let toolchain = Toolchain::ensure(true)?;
    let linker = toolchain::ensure_bitcode_linker(&toolchain.host, true)?;
    let cuda = Cuda::provision(root)?;

    let show = |found: &Option<Found>| match found {
        Some(found) => format!("{} ({})", found.path.display(), found.origin),
        None => "missing".to_owned(),
    };
    println!("kernels' toolchain   {}", toolchain.version);
    println!("llvm-bitcode-linker  {}", linker.display());
    println!("ptxas                {}", show(&cuda.ptxas));
    match &cuda.driver {
        Some(driver) => println!("NVIDIA driver        {driver}"),
        None => println!(
            "NVIDIA driver        none: GPU tests report themselves skipped, GPU commands fail \
             with one line"
        ),
    }
    Ok(())
}
