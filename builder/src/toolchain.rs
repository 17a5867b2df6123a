//! The Rust side of the kernel build: the pinned nightly, its components, and the
//! `llvm-bitcode-linker` borrowed from a stable toolchain.
//!
//! Three facts shape this module (verified on the project's machines):
//! - the `nvptx64-nvidia-cuda` standard library is not served, so `core` is built from source
//!   with `-Zbuild-std`, which needs the nightly's `rust-src`;
//! - `llvm-bitcode-linker` is not served for the pinned nightly, only for stable releases,
//!   so it comes from [`LINKER_TOOLCHAIN`];
//! - that linker runs `llvm-link`, `opt` and `llc` from the *calling* toolchain's sysroot
//!   (component `llvm-tools`) and, when they are missing, silently falls back to whatever `llc`
//!   is on `PATH` — on Debian 12 an LLVM 14 one. So their presence is checked up front.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Context, Result, bail};

use crate::cmd;

/// The stable release whose `llvm-bitcode-linker` component links the kernels.
pub const LINKER_TOOLCHAIN: &str = "1.95.0";

/// The LLVM tools `llvm-bitcode-linker` runs, in the order it runs them.
pub const LLVM_TOOLS: [&str; 3] = ["llvm-link", "opt", "llc"];

/// The nightly that compiles kernels: `-Zbuild-std` and the `ptx-kernel` ABI need one, and this
/// is the one whose LLVM (22) and PTX output the project verified. A kernel crate is built with
/// it whatever toolchain builds the host (the workspace's `rust-toolchain.toml` pins the same;
/// `tests/tests/tidy.rs` checks that the two agree).
pub const NIGHTLY: &str = "nightly-2026-05-20";

/// The `rustup` command that installs [`NIGHTLY`] with what kernels need.
pub fn nightly_fix() -> String {
    format!(
        "rustup toolchain install {NIGHTLY} --profile minimal --component rust-src --component llvm-tools"
    )
}

/// A `rustup run <toolchain> <program>` command: runs a program of that toolchain whatever the
/// caller's toolchain or `PATH`, and never installs one as a side effect.
pub fn rustup_run(toolchain: &str, program: &str) -> Command {
    let mut command = Command::new("rustup");
    command
        .args(["run", toolchain, program])
        .env("RUSTUP_AUTO_INSTALL", "0")
        .env_remove("RUSTUP_TOOLCHAIN");
    command
}

/// The toolchain that builds the kernels: [`NIGHTLY`], as rustup has it.
pub struct Toolchain {
    /// [`NIGHTLY`], for the fix commands in messages.
    pub channel: String,
    /// `rustc --version`.
    pub version: String,
    /// The host triple, e.g. `x86_64-unknown-linux-gnu`.
    pub host: String,
    pub sysroot: PathBuf,
}

impl Toolchain {
    /// Finds [`NIGHTLY`]; fails, naming the install command, when rustup does not have it.
    pub fn detect() -> Result<Self> {
        let channel = NIGHTLY.to_owned();
        let verbose = cmd::read(rustup_run(NIGHTLY, "rustc").arg("-vV")).with_context(|| {
            format!(
                "the kernels' toolchain {NIGHTLY} is not usable; run `{}`",
                nightly_fix()
            )
        })?;
        let version = verbose.lines().next().unwrap_or_default().to_owned();
        let host = verbose
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .context("`rustc -vV` printed no `host:` line")?
            .to_owned();
        let sysroot = PathBuf::from(
            cmd::read(rustup_run(NIGHTLY, "rustc").args(["--print", "sysroot"]))?.trim(),
        );
        Ok(Self {
            channel,
            version,
            host,
            sysroot,
        })
    }

    /// [`Self::detect`], after installing through rustup whatever is missing of [`NIGHTLY`],
    /// `rust-src` and `llvm-tools` (with `install` false, fails naming the command instead).
    pub fn ensure(install: bool) -> Result<Self> {
        let toolchain = match Self::detect() {
            Ok(toolchain) => toolchain,
            Err(_) if install => {
                let mut rustup = Command::new("rustup");
                rustup.args(["toolchain", "install", NIGHTLY, "--profile", "minimal"]);
                rustup.args(["--component", "rust-src", "--component", "llvm-tools"]);
                cmd::run(&mut rustup).context("installing the kernels' toolchain")?;
                Self::detect()?
            }
            Err(err) => return Err(err),
        };
        if install && (!toolchain.has_rust_src() || !toolchain.missing_llvm_tools().is_empty()) {
            let mut rustup = Command::new("rustup");
            rustup.args([
                "component",
                "add",
                "rust-src",
                "llvm-tools",
                "--toolchain",
                NIGHTLY,
            ]);
            cmd::run(&mut rustup).context("adding rust-src and llvm-tools")?;
        }
        toolchain.require_kernel_components()?;
        Ok(toolchain)
    }

    /// Where the `llvm-tools` component puts `llc` and friends.
    pub fn llvm_bin_dir(&self) -> PathBuf {
        self.sysroot
            .join("lib/rustlib")
            .join(&self.host)
            .join("bin")
    }

    pub fn has_rust_src(&self) -> bool {
        self.sysroot
            .join("lib/rustlib/src/rust/library/core/Cargo.toml")
            .is_file()
    }

    /// The [`LLVM_TOOLS`] missing from [`Self::llvm_bin_dir`].
    pub fn missing_llvm_tools(&self) -> Vec<&'static str> {
        let dir = self.llvm_bin_dir();
        LLVM_TOOLS
            .into_iter()
            .filter(|tool| !cmd::is_executable(&dir.join(tool)))
            .collect()
    }

    /// The command that adds `component` to this toolchain.
    pub fn add_component_command(&self, component: &str) -> String {
        format!(
            "rustup component add {component} --toolchain {}",
            self.channel
        )
    }

    /// Fails, naming the rustup command to run, unless `rust-src` and the LLVM tools are there.
    pub fn require_kernel_components(&self) -> Result<()> {
        if !self.has_rust_src() {
            bail!(
                "{} has no `rust-src`, which `-Zbuild-std=core` needs; run `{}`",
                self.version,
                self.add_component_command("rust-src")
            );
        }
        let missing = self.missing_llvm_tools();
        if !missing.is_empty() {
            bail!(
                "{} lacks {} in {} (llvm-bitcode-linker would silently use the LLVM 14 `llc` on \
                 PATH instead); run `{}`",
                self.version,
                missing.join(", "),
                self.llvm_bin_dir().display(),
                self.add_component_command("llvm-tools")
            );
        }
        Ok(())
    }
}

/// The command that installs the linker.
pub fn linker_fix() -> String {
    format!("rustup component add llvm-bitcode-linker --toolchain {LINKER_TOOLCHAIN}")
}

/// The installed `llvm-bitcode-linker` of [`LINKER_TOOLCHAIN`], if any.
pub fn find_bitcode_linker(host: &str) -> Option<PathBuf> {
    let sysroot = cmd::read(
        Command::new("rustc")
            .arg(format!("+{LINKER_TOOLCHAIN}"))
            .args(["--print", "sysroot"])
            // Asking must not install a whole toolchain as a side effect.
            .env("RUSTUP_AUTO_INSTALL", "0"),
    )
    .ok()?;
    let linker = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/self-contained/llvm-bitcode-linker");
    cmd::is_executable(&linker).then_some(linker)
}

/// The `llvm-bitcode-linker`, installed through rustup first if it is missing.
pub fn ensure_bitcode_linker(host: &str, install: bool) -> Result<PathBuf> {
    if let Some(linker) = find_bitcode_linker(host) {
        return Ok(linker);
    }
    if !install {
        bail!(
            "llvm-bitcode-linker, which links PTX, is missing; run `{}`",
            linker_fix()
        );
    }
    let installed = cmd::read(Command::new("rustup").args(["toolchain", "list"]))
        .context("llvm-bitcode-linker is missing and rustup, which installs it, is not usable")?
        .lines()
        .any(|line| line.starts_with(&format!("{LINKER_TOOLCHAIN}-")));
    let mut rustup = Command::new("rustup");
    if installed {
        rustup.args([
            "component",
            "add",
            "llvm-bitcode-linker",
            "--toolchain",
            LINKER_TOOLCHAIN,
        ]);
    } else {
        rustup.args([
            "toolchain",
            "install",
            LINKER_TOOLCHAIN,
            "--profile",
            "minimal",
        ]);
        rustup.args(["--component", "llvm-bitcode-linker"]);
    }
    cmd::run(&mut rustup).context("installing llvm-bitcode-linker")?;
    find_bitcode_linker(host)
        .with_context(|| format!("llvm-bitcode-linker still missing; try `{}`", linker_fix()))
}
