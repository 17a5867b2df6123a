//! The Rust side of the kernel build: the pinned nightly, its components, and the
//! `llvm-bitcode-linker` borrowed from a stable toolchain.
//!
//! Three facts shape this module (see `shared/TOOLCHAIN.md`):
//! - the `nvptx64-nvidia-cuda` standard library is not served, so `core` is built from source
//!   with `-Zbuild-std`, which needs the nightly's `rust-src`;
//! - `llvm-bitcode-linker` is not served for the pinned nightly, only for stable releases,
//!   so it comes from [`LINKER_TOOLCHAIN`];
//! - that linker runs `llvm-link`, `opt` and `llc` from the *calling* toolchain's sysroot
//!   (component `llvm-tools`) and, when they are missing, silently falls back to whatever `llc`
//!   is on `PATH` — on Debian 12 an LLVM 14 one. So their presence is checked up front.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// The stable release whose `llvm-bitcode-linker` component links the kernels.
pub const LINKER_TOOLCHAIN: &str = "1.95.0";

/// The LLVM tools `llvm-bitcode-linker` runs, in the order it runs them.
pub const LLVM_TOOLS: [&str; 3] = ["llvm-link", "opt", "llc"];

/// The toolchain that builds the kernels: the one rustup resolves in the workspace root (the
/// pin in `rust-toolchain.toml`, unless `RUSTUP_TOOLCHAIN` overrides it).
pub struct Toolchain {
    /// The channel pinned in `rust-toolchain.toml`, for the fix commands in messages.
    pub channel: String,
    /// `rustc --version`.
    pub version: String,
    /// The host triple, e.g. `x86_64-unknown-linux-gnu`.
    pub host: String,
    pub sysroot: PathBuf,
}

impl Toolchain {
    pub fn detect(root: &Path) -> Result<Self> {
        let channel = pinned_channel(root)?;
        let rustc = || {
            let mut rustc = Command::new("rustc");
            rustc.current_dir(root).env_remove("RUSTC");
            rustc
        };
        let fix = format!("rustup toolchain install {channel}");
        let verbose = cmd::read(rustc().arg("-vV"))
            .with_context(|| format!("no working rustc in {}; try `{fix}`", root.display()))?;
        let version = verbose.lines().next().unwrap_or_default().to_owned();
        if !version.contains("nightly") {
            bail!(
                "`rustc` in {} is `{version}`, not a nightly; try `{fix}`",
                root.display()
            );
        }
        let host = verbose
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .context("`rustc -vV` printed no `host:` line")?
            .to_owned();
        let sysroot = PathBuf::from(cmd::read(rustc().args(["--print", "sysroot"]))?.trim());
        Ok(Self {
            channel,
            version,
            host,
            sysroot,
        })
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

/// The `channel` of `rust-toolchain.toml`.
fn pinned_channel(root: &Path) -> Result<String> {
    let path = root.join("rust-toolchain.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_owned())
        .next()
        .with_context(|| format!("{} names no `channel`", path.display()))
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
pub fn ensure_bitcode_linker(host: &str) -> Result<PathBuf> {
    if let Some(linker) = find_bitcode_linker(host) {
        return Ok(linker);
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
