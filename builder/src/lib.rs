//! # ferrocuda-builder
//!
//! Compiles a kernel crate to PTX, one file per GPU architecture: ferrocuda's answer to
//! rust-cuda's `cuda_builder`, for rustc's own `nvptx64-nvidia-cuda` target. Call it from the
//! host crate's `build.rs`; ferrocuda's own `build.rs` and `cargo xtask build-ptx` do the same.
//!
//! ```no_run
//! // build.rs of a host crate whose kernels live in ../kernels (a crate that depends on
//! // `ferrocuda-device`):
//! fn main() {
//!     ferrocuda_builder::PtxBuilder::new("../kernels")
//!         .build_script()
//!         .unwrap_or_else(|err| {
//!             eprintln!("error: {err}");
//!             std::process::exit(1)
//!         });
//! }
//! ```
//! and in the host crate: `static KERNELS: &[ferrocuda::EmbeddedPtx] =
//! ferrocuda::include_ptx!("kernels");` (the kernel crate's library name), then
//! `gpu.load_module(KERNELS)?`.
//!
//! What a build does:
//! - runs a nested `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core --crate-type
//!   cdylib --release` per architecture, with the pinned nightly ([`toolchain::NIGHTLY`], through
//!   `rustup run`, whatever toolchain builds the host), its own target directory (a nested cargo
//!   on the outer one's directory deadlocks on its lock) and an environment scrubbed of the
//!   outer build's flags and wrappers ([`SCRUBBED_ENV`]);
//! - links with `llvm-bitcode-linker` (from a stable toolchain: it is not served for the
//!   nightly) and makes sure that it runs the nightly's own LLVM tools, never a system `llc`;
//! - installs what is missing through rustup (the nightly with `rust-src` and `llvm-tools`, the
//!   linker), unless `FERROCUDA_BUILDER_NO_INSTALL=1`, in which case it fails naming the command;
//! - in a build script, prints `cargo:rerun-if-changed` for every source file the PTX was built
//!   from (read from the nested build's dep-info) and the kernel crate's `src/` and
//!   `Cargo.toml`, so an unchanged kernel crate costs nothing on the next build, and writes
//!   `$OUT_DIR/<lib>_ptx.rs`, the table that `ferrocuda::include_ptx!` embeds.
// The example is a whole build.rs, `fn main` included.
#![allow(clippy::needless_doctest_main)]

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

pub mod cmd;
mod error;
pub mod toolchain;

use error::{Context, bail};
pub use error::{Error, Result};
use toolchain::Toolchain;

/// The GPU architectures PTX is built for by default, lowest first. The host loads the highest
/// one that is not above the device's compute capability (PTX for `sm_90` does not load on an
/// `sm_80` device), so this list reaches back to Volta.
pub const ARCHS: &[&str] = &["sm_70", "sm_80", "sm_90"];

/// The rustc target that emits PTX.
pub const PTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// Set to `1` to make a missing toolchain piece an error (naming the rustup command) instead
/// of installing it.
pub const NO_INSTALL_ENV: &str = "FERROCUDA_BUILDER_NO_INSTALL";

/// A directory (absolute) the nested builds share: when set, the default target directory of a
/// kernel crate is `<this>/<lib>` instead of one inside the outer build's target directory. Builds of the
/// same kernels from several workspaces, profiles or `cargo check`s (a dependent crate, a
/// compile-fail test's scratch project) then compile `core` and the kernels once per
/// architecture, not once each. The nested cargo's lock keeps concurrent builds apart.
pub const TARGET_DIR_ENV: &str = "FERROCUDA_BUILDER_TARGET_DIR";

/// Variables the nested cargo must not inherit.
pub const SCRUBBED_ENV: &[&str] = &[
    // Host flags (`-C target-cpu=native`, a linker choice) are wrong for nvptx and for `core`.
    "RUSTFLAGS",
    // The same flags in the encoded form cargo hands to build scripts and nested cargos.
    "CARGO_ENCODED_RUSTFLAGS",
    // A compiler wrapper (sccache, …) is set up for host builds; the PTX build stays plain.
    "RUSTC_WRAPPER",
    // Set by `cargo clippy` and similar: their driver does not emit PTX.
    "RUSTC_WORKSPACE_WRAPPER",
    // The build needs its own directory, else it deadlocks on the outer cargo's lock.
    "CARGO_TARGET_DIR",
    // The target is nvptx64-nvidia-cuda, passed explicitly.
    "CARGO_BUILD_TARGET",
    // The outer build's compiler and rustdoc may not be the nightly `-Zbuild-std` needs.
    "RUSTC",
    "RUSTDOC",
    // `rustup run` picks the nightly; an inherited override would win over it.
    "RUSTUP_TOOLCHAIN",
    // The outer cargo, for build scripts; the nested build runs the nightly's own.
    "CARGO",
    // `RUSTFLAGS` in the form of cargo's configuration environment.
    "CARGO_BUILD_RUSTFLAGS",
];

/// One architecture's PTX, as built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ptx {
    /// `sm_XY`.
    pub arch: String,
    /// The PTX file.
    pub path: PathBuf,
}

impl Ptx {
    /// `(major, minor)` of [`Self::arch`]: `sm_90` -> (9, 0), `sm_100f` -> (10, 0).
    pub fn compute_capability(&self) -> (u32, u32) {
        let number: u32 = arch_number(&self.arch);
        (number / 10, number % 10)
    }
}

/// The PTX ISA version an architecture is built with, when it needs a newer one than LLVM's
/// default for it: sm_90 and newer get PTX 8.0 (`.version 8.0`, CUDA 12.0 drivers and newer), the
/// first with bulk copies (`cp.async.bulk`, `ferrocuda_device::bulk`). A kernel crate sees it
/// as `cfg(target_feature = "ptx80")`.
pub fn ptx_version_for(arch: &str) -> Option<&'static str> {
    (arch_number(arch) >= 90).then_some("ptx80")
}

fn arch_number(arch: &str) -> u32 {
    arch.trim_start_matches("sm_")
        .trim_end_matches(['a', 'f'])
        .parse()
        .unwrap_or(0)
}

/// Whether `arch` looks like a PTX architecture: `sm_` and two or more digits, optionally
/// followed by `a` or `f` (`sm_90`, `sm_90a`, `sm_100f`).
pub fn is_arch(arch: &str) -> bool {
    let Some(rest) = arch.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
    digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Builds one kernel crate to PTX. See the crate documentation.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    crate_dir: PathBuf,
    archs: Vec<String>,
    target_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    install: bool,
}

impl PtxBuilder {
    /// A builder for the kernel crate in `crate_dir` (relative paths are taken from the
    /// calling package's `CARGO_MANIFEST_DIR` in a build script, else from the current
    /// directory), for every one of [`ARCHS`].
    pub fn new(crate_dir: impl Into<PathBuf>) -> Self {
        Self {
            crate_dir: crate_dir.into(),
            archs: ARCHS.iter().map(|arch| arch.to_string()).collect(),
            target_dir: None,
            out_dir: None,
            install: env::var(NO_INSTALL_ENV).map_or(true, |value| value != "1"),
        }
    }

    /// Builds for these architectures instead of [`ARCHS`].
    pub fn archs<S: AsRef<str>>(mut self, archs: &[S]) -> Self {
        self.archs = archs.iter().map(|arch| arch.as_ref().to_owned()).collect();
        self
    }

    /// The nested cargo's target directory (one subdirectory per architecture). Default:
    /// `<lib>` in [`TARGET_DIR_ENV`] when that is set; else, in a build script,
    /// `ferrocuda-builder/<lib>` in the outer build's target directory; else
    /// `target/ferrocuda-builder/<lib>` next to the kernel crate's `Cargo.toml`.
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Where the PTX files go (`<lib>.<arch>.ptx`). Default: `$OUT_DIR` in a build script,
    /// else the target directory.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to install missing toolchain pieces through rustup (default: yes, unless
    /// [`NO_INSTALL_ENV`] is `1`).
    pub fn install_missing(mut self, install: bool) -> Self {
        self.install = install;
        self
    }

    fn crate_dir(&self) -> PathBuf {
        if self.crate_dir.is_absolute() {
            return self.crate_dir.clone();
        }
        match env::var_os("CARGO_MANIFEST_DIR") {
            Some(manifest_dir) => PathBuf::from(manifest_dir).join(&self.crate_dir),
            None => self.crate_dir.clone(),
        }
    }

    /// The kernel crate's library name: `[lib] name`, else the package name with `-` -> `_`.
    pub fn lib_name(&self) -> Result<String> {
        let manifest = self.crate_dir().join("Cargo.toml");
        let text = fs::read_to_string(&manifest)
            .with_context(|| format!("reading the kernel crate's {}", manifest.display()))?;
        lib_name_of(&text).with_context(|| format!("{} names no package", manifest.display()))
    }

    /// The kernel crate's package name (what its `#[kernel]` entries record as their package).
    pub fn package_name(&self) -> Result<String> {
        let manifest = self.crate_dir().join("Cargo.toml");
        let text = fs::read_to_string(&manifest)
            .with_context(|| format!("reading the kernel crate's {}", manifest.display()))?;
        names_of(&text)
            .0
            .with_context(|| format!("{} has no [package] name", manifest.display()))
    }

    fn default_target_dir(&self, lib: &str) -> Result<PathBuf> {
        if let Some(dir) = shared_target_dir(env::var_os(TARGET_DIR_ENV), lib)? {
            return Ok(dir);
        }
        // OUT_DIR is <target-dir>[/<triple>]/<profile>/build/<package>-<hash>/out.
        let outer = env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .and_then(|out| out.ancestors().nth(4).map(Path::to_path_buf));
        Ok(outer
            .unwrap_or_else(|| self.crate_dir().join("target"))
            .join("ferrocuda-builder")
            .join(lib))
    }

    /// Builds every architecture; returns the PTX files, lowest architecture first.
    pub fn build(&self) -> Result<Vec<Ptx>> {
        Ok(self.build_with_sources()?.0)
    }

    /// [`Self::build`], plus the source files the PTX was built from (from dep-info).
    fn build_with_sources(&self) -> Result<(Vec<Ptx>, Vec<PathBuf>)> {
        for arch in &self.archs {
            if !is_arch(arch) {
                bail!("`{arch}` is not a PTX architecture (expected sm_XY, e.g. sm_90)");
            }
        }
        let crate_dir = self.crate_dir();
        let lib = self.lib_name()?;
        let toolchain = Toolchain::ensure(self.install)?;
        let linker = toolchain::ensure_bitcode_linker(&toolchain.host, self.install)?;
        let target_dir = match &self.target_dir {
            Some(dir) => dir.clone(),
            None => self.default_target_dir(&lib)?,
        };
        let out_dir = match (&self.out_dir, env::var_os("OUT_DIR")) {
            (Some(dir), _) => dir.clone(),
            (None, Some(dir)) => PathBuf::from(dir),
            (None, None) => target_dir.clone(),
        };
        fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;

        let mut archs = self.archs.clone();
        archs.sort_by_key(|arch| arch_number(arch));
        archs.dedup();
        let mut built = Vec::new();
        let mut sources = Vec::new();
        for arch in &archs {
            let arch_dir = target_dir.join(arch);
            let (ptx, deps) = build_arch(&crate_dir, &toolchain, &linker, arch, &arch_dir, &lib)?;
            let dest = out_dir.join(format!("{lib}.{arch}.ptx"));
            write_atomically(&dest, &fs::read(&ptx).context(ptx.display())?)?;
            built.push(Ptx {
                arch: arch.clone(),
                path: dest,
            });
            for dep in deps {
                if !dep.starts_with(&toolchain.sysroot) && !sources.contains(&dep) {
                    sources.push(dep);
                }
            }
        }
        Ok((built, sources))
    }

    /// For a host crate's `build.rs`: builds, prints the `cargo:rerun-if-changed` lines that
    /// make an unchanged kernel crate cost nothing next time, and writes `$OUT_DIR/<lib>_ptx.rs`
    /// for `ferrocuda::include_ptx!("<lib>")`. Returns that file. On docs.rs (`DOCS_RS` set),
    /// builds nothing and embeds an empty table.
    pub fn build_script(&self) -> Result<PathBuf> {
        let out_dir = PathBuf::from(
            env::var_os("OUT_DIR").context("`build_script` runs in a build script (no OUT_DIR)")?,
        );
        let crate_dir = self.crate_dir();
        let lib = self.lib_name()?;
        let package = self.package_name()?;
        println!(
            "cargo:rerun-if-changed={}",
            crate_dir.join("Cargo.toml").display()
        );
        println!("cargo:rerun-if-changed={}", crate_dir.join("src").display());
        println!("cargo:rerun-if-env-changed={NO_INSTALL_ENV}");
        println!("cargo:rerun-if-env-changed={TARGET_DIR_ENV}");
        println!("cargo:rerun-if-env-changed=DOCS_RS");
        let table = out_dir.join(format!("{lib}_ptx.rs"));
        if env::var_os("DOCS_RS").is_some() {
            write_atomically(&table, embed_table(&[], &package)?.as_bytes())?;
            return Ok(table);
        }
        let (ptx, sources) = self.build_with_sources()?;
        for source in sources {
            println!("cargo:rerun-if-changed={}", source.display());
        }
        write_atomically(&table, embed_table(&ptx, &package)?.as_bytes())?;
        Ok(table)
    }
}

/// The Rust expression `ferrocuda::include_ptx!` includes: a `&[::ferrocuda::EmbeddedPtx]`,
/// lowest architecture first, each PTX embedded with `include_str!` and marked as the PTX of
/// the kernel crate `package`.
pub fn embed_table(ptx: &[Ptx], package: &str) -> Result<String> {
    let mut table = String::from("&[\n");
    for one in ptx {
        let (major, minor) = one.compute_capability();
        let path = one
            .path
            .canonicalize()
            .with_context(|| format!("resolving {}", one.path.display()))?;
        writeln!(
            table,
            "    ::ferrocuda::EmbeddedPtx {{ package: {package:?}, arch: {:?}, compute_capability: ({major}, {minor}), source: include_str!({:?}) }},",
            one.arch,
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    table.push(']');
    Ok(table)
}

/// `[lib] name`, else `[package] name` with `-` -> `_`, from a `Cargo.toml`'s text.
fn lib_name_of(manifest: &str) -> Option<String> {
    let (package, lib) = names_of(manifest);
    lib.or(package).map(|name| name.replace('-', "_"))
}

/// `[package] name` and `[lib] name`, as written in a `Cargo.toml`'s text.
fn names_of(manifest: &str) -> (Option<String>, Option<String>) {
    let mut section = "";
    let (mut package, mut lib) = (None, None);
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let Some(value) = line
            .strip_prefix("name")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('='))
            .map(|value| value.trim().trim_matches('"').to_owned())
        else {
            continue;
        };
        match section {
            "[package]" => package = Some(value),
            "[lib]" => lib = Some(value),
            _ => {}
        }
    }
    (package, lib)
}

/// Runs the nested cargo for one architecture; returns the PTX it produced and the files it
/// was built from.
fn build_arch(
    crate_dir: &Path,
    toolchain: &Toolchain,
    linker: &Path,
    arch: &str,
    target_dir: &Path,
    lib: &str,
) -> Result<(PathBuf, Vec<PathBuf>)> {
    let mut build = toolchain::rustup_run(toolchain::NIGHTLY, "cargo");
    build.current_dir(crate_dir);
    build.args(["rustc", "--manifest-path"]);
    build.arg(crate_dir.join("Cargo.toml"));
    build.args([
        "--target",
        PTX_TARGET,
        "-Zbuild-std=core",
        "--crate-type",
        "cdylib",
    ]);
    build.args(["--release", "--target-dir"]).arg(target_dir);
    build
        .args(["--", "-C"])
        .arg(format!("linker={}", linker.display()));
    build.args(["-A", "linker_messages"]);
    for name in SCRUBBED_ENV {
        build.env_remove(name);
    }
    // The architecture (and its PTX version) goes to every crate of the build, `core` and the
    // device layer included, not only to the kernel crate: the device layer's sm_90 modules
    // (`cluster`, `bulk`) exist only where `cfg(target_feature = "sm_90")` holds, so a kernel
    // that uses them on an older architecture fails to compile, naming the feature.
    let mut flags = vec![format!("-Ctarget-cpu={arch}")];
    if let Some(ptx) = ptx_version_for(arch) {
        flags.push(format!("-Ctarget-feature=+{ptx}"));
    }
    build.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    // llvm-bitcode-linker looks for llc next to the calling rustc, then on PATH: putting the
    // nightly's LLVM tools first keeps a system llc (Debian's is LLVM 14) out of the build.
    let mut path = vec![toolchain.llvm_bin_dir()];
    path.extend(env::split_paths(&env::var_os("PATH").unwrap_or_default()));
    build.env(
        "PATH",
        env::join_paths(path).context("PATH contains a `:` inside a directory")?,
    );
    cmd::run(&mut build).with_context(|| {
        format!(
            "building the kernel crate {} for {arch}",
            crate_dir.display()
        )
    })?;
    let release = target_dir.join(PTX_TARGET).join("release");
    let ptx = release.join(format!("{lib}.ptx"));
    if !ptx.is_file() {
        bail!("cargo succeeded but produced no PTX at {}", ptx.display());
    }
    let dep_info = release.join(format!("{lib}.d"));
    let deps = fs::read_to_string(&dep_info)
        .map(|text| parse_dep_info(&text))
        .unwrap_or_default();
    Ok((ptx, deps))
}

/// The prerequisites of a Makefile-style dep-info file (`target: a b\ c`).
fn parse_dep_info(text: &str) -> Vec<PathBuf> {
    let mut deps = Vec::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(": ") else {
            continue;
        };
        let mut word = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => word.extend(chars.next()),
                ' ' => {
                    if !word.is_empty() {
                        deps.push(PathBuf::from(std::mem::take(&mut word)));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            deps.push(PathBuf::from(word));
        }
    }
    deps
}

/// Writes `path` through a temporary file and a rename, so that a reader sees the old
/// contents or the new, never half of one.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    fs::write(&partial, contents).with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// The target directory of kernel library `lib` under the shared directory `value` of
/// [`TARGET_DIR_ENV`], if that is set and not empty. A build script runs in its package's
/// directory, so a relative path would name another directory for every package: refused.
fn shared_target_dir(value: Option<std::ffi::OsString>, lib: &str) -> Result<Option<PathBuf>> {
    let Some(dir) = value.filter(|dir| !dir.is_empty()).map(PathBuf::from) else {
        return Ok(None);
    };
    if dir.is_relative() {
        bail!(
            "{TARGET_DIR_ENV} must be an absolute path, not `{}`",
            dir.display()
        );
    }
    Ok(Some(dir.join(lib)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_target_dir_is_absolute_or_refused() {
        let at = |v: &str| shared_target_dir(Some(v.into()), "k").map_err(|e| e.to_string());
        assert_eq!(shared_target_dir(None, "k").unwrap(), None);
        assert_eq!(at("").unwrap(), None);
        assert_eq!(at("/b").unwrap(), Some(PathBuf::from("/b/k")));
        let refused = at("b").unwrap_err();
        assert!(
            refused.contains(TARGET_DIR_ENV) && refused.contains("`b`"),
            "{refused}"
        );
    }

    #[test]
    fn is_arch_accepts_sm_numbers_only() {
        for arch in ["sm_70", "sm_90", "sm_90a", "sm_100f"] {
            assert!(is_arch(arch), "{arch}");
        }
        for arch in [
            "sm_",
            "sm_a",
            "sm_8",
            "compute_90",
            "sm90",
            "sm_9x0",
            "sm_90aa",
        ] {
            assert!(!is_arch(arch), "{arch}");
        }
    }

    #[test]
    fn compute_capability_of_an_arch() {
        let cc = |arch: &str| {
            Ptx {
                arch: arch.into(),
                path: PathBuf::new(),
            }
            .compute_capability()
        };
        assert_eq!(cc("sm_70"), (7, 0));
        assert_eq!(cc("sm_90a"), (9, 0));
        assert_eq!(cc("sm_100f"), (10, 0));
    }

    #[test]
    fn lib_name_prefers_the_lib_section() {
        let package = "[package]\nname = \"my-kernels\"\nversion = \"0.1.0\"\n";
        assert_eq!(lib_name_of(package).as_deref(), Some("my_kernels"));
        let lib = format!("{package}\n[lib]\nname = \"dot\"\n[dependencies]\nname = \"x\"\n");
        assert_eq!(lib_name_of(&lib).as_deref(), Some("dot"));
        assert_eq!(lib_name_of("[workspace]\n"), None);
    }

    #[test]
    fn dep_info_prerequisites_with_escaped_spaces() {
        let text = "/t/k.ptx: /src/lib.rs /my\\ dir/a.rs\n\n/src/lib.rs:\n";
        assert_eq!(
            parse_dep_info(text),
            [PathBuf::from("/src/lib.rs"), PathBuf::from("/my dir/a.rs")]
        );
    }
}
