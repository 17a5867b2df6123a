//! `cargo xtask build-ptx`: compiles the kernels crate to one PTX file per GPU architecture.
//!
//! rustc's own `nvptx64-nvidia-cuda` target does the compiling; `core` is built from source
//! (`-Zbuild-std=core`, the target's standard library is not served) and the
//! `llvm-bitcode-linker` of a stable toolchain links (it is not served for the nightly). Each
//! architecture gets its own target directory because `-C target-cpu` changes every unit,
//! `core` included: sharing one directory would rebuild everything on each switch.
//!
//! Results land in `target/ptx/<arch>.ptx`, described by `target/ptx/manifest.txt`:
//!
//! ```text
//! fingerprint 3f2a9c0d11e4b7a8
//! arch sm_70 sm_70.ptx
//! arch sm_90 sm_90.ptx
//! ```
//!
//! `fingerprint` is [`crate::fingerprint::kernels_fingerprint`] of the sources the PTX was
//! built from, and each `arch` line names an architecture and its file, relative to the
//! manifest. The host crate's build script reads this file.

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::fingerprint::{ARCHS, kernels_fingerprint};
use crate::toolchain::{self, Toolchain};
use crate::{cargo, cmd};

/// The kernels crate's package name; its PTX file is named after the crate
/// (`ferrocuda_kernels.ptx`).
const KERNELS_PACKAGE: &str = "ferrocuda-kernels";

const PTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// Variables the nested cargo must not inherit, each with the reason.
const SCRUBBED_ENV: &[&str] = &[
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
    // An outer rustc may not be the pinned nightly that `-Zbuild-std` needs.
    "RUSTC",
    // Likewise for rustdoc, which must match that rustc.
    "RUSTDOC",
];

/// What `build-ptx` builds; the default is every architecture, release.
#[derive(Default)]
pub struct Options {
    /// Architectures such as `sm_90`; empty means all of [`ARCHS`].
    pub archs: Vec<String>,
    /// Build without `--release` (the dev profile).
    pub debug: bool,
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

/// Where `build-ptx` leaves its results.
pub fn ptx_dir(root: &Path) -> PathBuf {
    root.join("target/ptx")
}

/// Builds the PTX and writes the manifest; returns the architectures built.
pub fn run(root: &Path, options: &Options) -> Result<Vec<String>> {
    let archs: Vec<String> = if options.archs.is_empty() {
        ARCHS.iter().map(|arch| arch.to_string()).collect()
    } else {
        options.archs.clone()
    };
    let toolchain = Toolchain::detect(root)?;
    toolchain.require_kernel_components()?;
    let linker = toolchain::ensure_bitcode_linker(&toolchain.host)?;
    // Taken before building: an edit made during the build leaves a fingerprint that no longer
    // matches, so the PTX counts as stale rather than wrongly as fresh.
    let fingerprint = kernels_fingerprint(root).context("fingerprinting the kernel sources")?;

    let out_dir = ptx_dir(root);
    fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // Until the new manifest is written, there is none: a build that fails halfway must not
    // leave new PTX under an old fingerprint that a host build would trust.
    let previous = Manifest::read(&out_dir).ok();
    let manifest = Manifest::path(&out_dir);
    if manifest.exists() {
        fs::remove_file(&manifest).with_context(|| format!("removing {}", manifest.display()))?;
    }
    for arch in &archs {
        let ptx = build_arch(root, &toolchain, &linker, arch, options.debug)?;
        let dest = out_dir.join(format!("{arch}.ptx"));
        write_atomically(&dest, &fs::read(&ptx)?)?;
        eprintln!(
            "build-ptx: {arch} -> {}",
            dest.strip_prefix(root).unwrap_or(&dest).display()
        );
    }
    update_manifest(&out_dir, previous, fingerprint, &archs)?;
    if options.debug {
        eprintln!(
            "build-ptx: note: target/ptx now holds unoptimised PTX, which host builds embed and \
             ptx-check rejects (stack frames); run `cargo xtask build-ptx` to go back"
        );
    }
    Ok(archs)
}

/// Runs the nested cargo for one architecture; returns the PTX it produced.
fn build_arch(
    root: &Path,
    toolchain: &Toolchain,
    linker: &Path,
    arch: &str,
    debug: bool,
) -> Result<PathBuf> {
    let target_dir = root.join("target/ptx-build").join(arch);
    let mut build = cargo::cargo(root);
    build.args([
        "rustc",
        "--package",
        KERNELS_PACKAGE,
        "--target",
        PTX_TARGET,
        "-Zbuild-std=core",
    ]);
    build
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(&target_dir);
    if !debug {
        build.arg("--release");
    }
    build.args(["--", "-C"]).arg(format!("target-cpu={arch}"));
    build.arg("-C").arg(format!("linker={}", linker.display()));
    build.args(["-A", "linker_messages"]);
    for name in SCRUBBED_ENV {
        build.env_remove(name);
    }
    // llvm-bitcode-linker looks for llc next to the calling rustc, then on PATH: putting the
    // nightly's LLVM tools first keeps a system llc (Debian's is LLVM 14) out of the build.
    let mut path = vec![toolchain.llvm_bin_dir()];
    path.extend(env::split_paths(&env::var_os("PATH").unwrap_or_default()));
    build.env(
        "PATH",
        env::join_paths(path).context("PATH contains a `:` inside a directory")?,
    );

    let profile = if debug { "debug" } else { "release" };
    cmd::run(&mut build).with_context(|| {
        let hint = if debug {
            "; the dev profile may not work for nvptx, try without --debug"
        } else {
            ""
        };
        format!("building the kernels for {arch} ({profile}){hint}")
    })?;
    let ptx = target_dir
        .join(PTX_TARGET)
        .join(profile)
        .join(format!("{}.ptx", KERNELS_PACKAGE.replace('-', "_")));
    if !ptx.is_file() {
        bail!("cargo succeeded but produced no PTX at {}", ptx.display());
    }
    Ok(ptx)
}

/// Writes `path` through a temporary file and a rename, so that a host build running at the
/// same time reads the old contents or the new, never half of one.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    fs::write(&partial, contents).with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))
}

/// The parsed `target/ptx/manifest.txt`.
pub struct Manifest {
    pub fingerprint: u64,
    /// Architecture to file name (relative to the manifest), lowest architecture first.
    pub archs: BTreeMap<ArchKey, String>,
}

/// Orders architectures by number (`sm_100` after `sm_90`).
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone)]
pub struct ArchKey(u32, pub String);

impl ArchKey {
    fn new(arch: &str) -> Self {
        let number = arch
            .trim_start_matches("sm_")
            .trim_end_matches(['a', 'f'])
            .parse()
            .unwrap_or(0);
        Self(number, arch.to_owned())
    }
}

impl Manifest {
    pub fn path(ptx_dir: &Path) -> PathBuf {
        ptx_dir.join("manifest.txt")
    }

    pub fn read(ptx_dir: &Path) -> Result<Self> {
        let path = Self::path(ptx_dir);
        let text = fs::read_to_string(&path)
            .with_context(|| format!("reading {}; run `cargo xtask build-ptx`", path.display()))?;
        let mut fingerprint = None;
        let mut archs = BTreeMap::new();
        for line in text.lines() {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["fingerprint", hex] => fingerprint = u64::from_str_radix(hex, 16).ok(),
                ["arch", arch, file] => {
                    archs.insert(ArchKey::new(arch), file.to_string());
                }
                _ => bail!("{}: unexpected line {line:?}", path.display()),
            }
        }
        let fingerprint =
            fingerprint.with_context(|| format!("{} has no fingerprint", path.display()))?;
        Ok(Self { fingerprint, archs })
    }

    fn write(&self, ptx_dir: &Path) -> Result<()> {
        let mut text = format!("fingerprint {:016x}\n", self.fingerprint);
        for (ArchKey(_, arch), file) in &self.archs {
            text += &format!("arch {arch} {file}\n");
        }
        write_atomically(&Self::path(ptx_dir), text.as_bytes())
    }
}

/// Records `built` under `fingerprint`. Architectures built earlier from the same sources stay
/// listed; any other PTX file in the directory (from other sources, or from a build that
/// failed halfway) is deleted, because a host build must not find it.
fn update_manifest(
    ptx_dir: &Path,
    previous: Option<Manifest>,
    fingerprint: u64,
    built: &[String],
) -> Result<()> {
    let mut archs = BTreeMap::new();
    if let Some(previous) = previous.filter(|previous| previous.fingerprint == fingerprint) {
        for (key, file) in previous.archs {
            if !built.contains(&key.1) && ptx_dir.join(&file).is_file() {
                archs.insert(key, file);
            }
        }
    }
    for arch in built {
        archs.insert(ArchKey::new(arch), format!("{arch}.ptx"));
    }
    for entry in fs::read_dir(ptx_dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".ptx") && !archs.values().any(|file| *file == name) {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            eprintln!("build-ptx: removed stale {name}");
        }
    }
    Manifest { fingerprint, archs }.write(ptx_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn manifest_round_trips_and_orders_archs_numerically() {
        let dir = std::env::temp_dir().join(format!("xtask-manifest-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let archs =
            ["sm_100", "sm_90", "sm_80"].map(|arch| (ArchKey::new(arch), format!("{arch}.ptx")));
        Manifest {
            fingerprint: 0xabc,
            archs: archs.into_iter().collect(),
        }
        .write(&dir)
        .unwrap();
        let text = fs::read_to_string(Manifest::path(&dir)).unwrap();
        let manifest = Manifest::read(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();

        assert_eq!(
            text,
            "fingerprint 0000000000000abc\narch sm_80 sm_80.ptx\narch sm_90 sm_90.ptx\narch sm_100 sm_100.ptx\n"
        );
        assert_eq!(manifest.fingerprint, 0xabc);
        assert_eq!(manifest.archs.len(), 3);
    }

    #[test]
    fn update_manifest_keeps_archs_of_the_same_sources_and_deletes_the_rest() {
        let dir = std::env::temp_dir().join(format!("xtask-update-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let listed = |manifest: &Manifest| -> Vec<String> {
            manifest.archs.keys().map(|key| key.1.clone()).collect()
        };
        for arch in ["sm_70", "sm_80", "sm_90"] {
            fs::write(dir.join(format!("{arch}.ptx")), arch).unwrap();
        }
        let previous = |fingerprint| Manifest {
            fingerprint,
            archs: [ArchKey::new("sm_70")]
                .into_iter()
                .map(|key| (key, "sm_70.ptx".into()))
                .collect(),
        };

        update_manifest(&dir, Some(previous(1)), 1, &["sm_90".into()]).unwrap();
        let same_sources = Manifest::read(&dir).unwrap();
        let sm_80_left = dir.join("sm_80.ptx").exists();
        update_manifest(&dir, Some(previous(1)), 2, &["sm_90".into()]).unwrap();
        let other_sources = Manifest::read(&dir).unwrap();
        let sm_70_left = dir.join("sm_70.ptx").exists();
        fs::remove_dir_all(&dir).unwrap();

        assert_eq!(listed(&same_sources), ["sm_70", "sm_90"]);
        assert!(!sm_80_left, "an unlisted PTX file survived");
        assert_eq!(listed(&other_sources), ["sm_90"]);
        assert!(!sm_70_left, "PTX of other sources survived");
    }
}
