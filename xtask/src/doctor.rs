//! `cargo xtask doctor`: is this machine set up to build, check and run the kernels?
//!
//! One line per prerequisite, each missing one with the command that fixes it. It changes
//! nothing and exits 0 even when something is missing: it answers a question, and `provision`,
//! `build-ptx` and `test` install what they need themselves.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::cmd;
use crate::cuda::{self, Cuda, PROVISION_FIX};
use crate::toolchain::{self, LLVM_TOOLS, Toolchain};

/// One prerequisite and its state.
struct Check {
    name: &'static str,
    /// Optional prerequisites only serve some tasks (benchmark baselines, sanitizing).
    optional: bool,
    /// `Ok(where or what)` or `Err(the fix)`.
    status: Result<String, String>,
}

impl Check {
    fn required(name: &'static str, status: Result<String, String>) -> Self {
        Self {
            name,
            optional: false,
            status,
        }
    }

    fn optional(name: &'static str, status: Result<String, String>) -> Self {
        Self {
            name,
            optional: true,
            status,
        }
    }
}

pub fn run(root: &Path) -> Result<()> {
    let checks = checks(root);
    let width = checks
        .iter()
        .map(|check| check.name.len())
        .max()
        .unwrap_or(0);
    for check in &checks {
        let (state, detail) = match &check.status {
            Ok(detail) => ("ok", detail.clone()),
            Err(fix) if check.optional => ("optional", format!("missing; {fix}")),
            Err(fix) => ("MISSING", format!("fix: {fix}")),
        };
        println!("{state:<8}  {:<width$}  {detail}", check.name);
    }
    let missing = |optional: bool| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.optional == optional && c.status.is_err())
            .map(|c| c.name)
            .collect()
    };
    let (required, optional) = (missing(false), missing(true));
    let ok = checks.len() - required.len() - optional.len();
    let mut summary = format!("doctor: {ok} of {} ok", checks.len());
    if !required.is_empty() {
        summary += &format!("; missing: {}", required.join(", "));
    }
    if !optional.is_empty() {
        summary += &format!("; optional, missing: {}", optional.join(", "));
    }
    println!("{summary}");
    Ok(())
}

fn checks(root: &Path) -> Vec<Check> {
    let mut checks = Vec::new();
    match Toolchain::detect() {
        Ok(toolchain) => {
            checks.push(Check::required(
                "nightly toolchain",
                Ok(toolchain.version.clone()),
            ));
            let rust_src = if toolchain.has_rust_src() {
                Ok("present (for -Zbuild-std=core)".to_owned())
            } else {
                Err(toolchain.add_component_command("rust-src"))
            };
            checks.push(Check::required("rust-src", rust_src));
            let missing = toolchain.missing_llvm_tools();
            let llvm_tools = if missing.is_empty() {
                Ok(format!(
                    "{} in {}",
                    LLVM_TOOLS.join(", "),
                    toolchain.llvm_bin_dir().display()
                ))
            } else {
                Err(format!(
                    "{} (lacks {})",
                    toolchain.add_component_command("llvm-tools"),
                    missing.join(", ")
                ))
            };
            checks.push(Check::required("llvm-tools", llvm_tools));
            let linker = toolchain::find_bitcode_linker(&toolchain.host)
                .map(|path| path.display().to_string())
                .ok_or_else(toolchain::linker_fix);
            checks.push(Check::required("llvm-bitcode-linker", linker));
        }
        Err(err) => {
            let fix = format!("{err:#}");
            for name in [
                "nightly toolchain",
                "rust-src",
                "llvm-tools",
                "llvm-bitcode-linker",
            ] {
                checks.push(Check::required(name, Err(fix.clone())));
            }
        }
    }

    let cuda = Cuda::locate(root);
    let found = |found: &Option<cuda::Found>| match found {
        Some(found) => Ok(format!("{} ({})", found.path.display(), found.origin)),
        None => Err(PROVISION_FIX.to_owned()),
    };
    checks.push(Check::required("ptxas", found(&cuda.ptxas)));
    if cuda.ptxas.is_none() {
        let pip = cmd::read(Command::new("python3").args(["-m", "pip", "--version"]))
            .map(|version| {
                version
                    .split(" from ")
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .map_err(|_| {
                "apt-get install python3-pip (provision fetches ptxas with it)".to_owned()
            });
        checks.push(Check::required("python3 -m pip", pip));
    }

    let gpu = cuda::gpu(cuda.driver.as_deref()).map_err(|reason| {
        format!("{reason}; run on a GPU machine, e.g. via `cargo xtask gpu-bundle`")
    });
    checks.push(Check::required("GPU and driver", gpu));
    let tool = |name: &str, purpose: &str| {
        cuda::find_tool(cuda.toolkit.as_deref(), name)
            .map(|path| path.display().to_string())
            .ok_or_else(|| format!("install the CUDA toolkit ({purpose})"))
    };
    checks.push(Check::optional(
        "nvcc",
        tool("nvcc", "CUDA C++ baselines for benchmarks"),
    ));
    checks.push(Check::optional(
        "compute-sanitizer",
        tool("compute-sanitizer", "race and memory checks"),
    ));
    checks
}
