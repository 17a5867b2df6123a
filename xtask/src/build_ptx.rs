//! `cargo xtask build-ptx`: compiles the kernel crates (the library's, `kernels-crate/`, and
//! the lessons', `kernels-crate/lessons/`) to one PTX file per GPU architecture each, with
//! `ferrocuda-builder` (the same builder the host crates' `build.rs` run, sharing their nested
//! target directories, so whichever runs second finds the work done).
//!
//! Results land in `target/ptx/<arch>.ptx` (the library's) and `target/ptx/lessons/<arch>.ptx`,
//! for `ptx-check` and `gpu-bundle`, each directory described by its `manifest.txt`, one line
//! per architecture with its file, relative to the manifest:
//!
//! ```text
//! arch sm_70 sm_70.ptx
//! arch sm_90 sm_90.ptx
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ferrocuda_builder::{ARCHS, PtxBuilder, write_atomically};

/// The kernel crates, relative to the workspace root, each with the directory its PTX goes to
/// under [`ptx_dir`].
const KERNEL_CRATES: [(&str, &str); 2] =
    [("kernels-crate", ""), ("kernels-crate/lessons", "lessons")];

/// What `build-ptx` builds; the default is every architecture, release.
#[derive(Default)]
pub struct Options {
    /// Architectures such as `sm_90`; empty means all of [`ARCHS`].
    pub archs: Vec<String>,
}

pub use ferrocuda_builder::is_arch;

/// Where `build-ptx` leaves its results: the library's PTX, with the lessons' in a
/// subdirectory (see [`ptx_dirs`]).
pub fn ptx_dir(root: &Path) -> PathBuf {
    root.join("target/ptx")
}

/// The directory of each kernel crate's PTX: the library's, then the lessons'.
pub fn ptx_dirs(root: &Path) -> Vec<PathBuf> {
    KERNEL_CRATES
        .iter()
        .map(|(_, sub)| ptx_dir(root).join(sub))
        .collect()
}

/// Builds the PTX of every kernel crate and writes their manifests; returns the architectures
/// built.
pub fn run(root: &Path, options: &Options) -> Result<Vec<String>> {
    let archs: Vec<String> = if options.archs.is_empty() {
        ARCHS.iter().map(|arch| arch.to_string()).collect()
    } else {
        options.archs.clone()
    };
    let mut built = Vec::new();
    for (crate_dir, sub) in KERNEL_CRATES {
        built = build_crate(root, crate_dir, &ptx_dir(root).join(sub), &archs)?;
    }
    Ok(built)
}

/// Builds the PTX of the kernel crate in `crate_dir` into `out_dir` and writes its manifest.
fn build_crate(
    root: &Path,
    crate_dir: &str,
    out_dir: &Path,
    archs: &[String],
) -> Result<Vec<String>> {
    let out_dir = out_dir.to_path_buf();
    fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // Until the new manifest is written there is none: a build that fails halfway leaves
    // nothing that `ptx-check` or `gpu-bundle` would trust.
    let manifest = Manifest::path(&out_dir);
    if manifest.exists() {
        fs::remove_file(&manifest).with_context(|| format!("removing {}", manifest.display()))?;
    }
    let builder = PtxBuilder::new(root.join(crate_dir));
    let lib = builder.lib_name()?;
    let built = builder
        .archs(archs)
        .target_dir(root.join("target/ferrocuda-builder").join(&lib))
        .build()
        .with_context(|| format!("building the PTX of {crate_dir}"))?;
    let mut listed = BTreeMap::new();
    for ptx in &built {
        let dest = out_dir.join(format!("{}.ptx", ptx.arch));
        write_atomically(&dest, &fs::read(&ptx.path)?)?;
        eprintln!(
            "build-ptx: {} -> {}",
            ptx.arch,
            dest.strip_prefix(root).unwrap_or(&dest).display()
        );
        listed.insert(ArchKey::new(&ptx.arch), format!("{}.ptx", ptx.arch));
    }
    remove_unlisted(&out_dir, &listed)?;
    Manifest { archs: listed }.write(&out_dir)?;
    Ok(built.into_iter().map(|ptx| ptx.arch).collect())
}

/// Deletes every PTX file in `ptx_dir` that the new manifest does not list (an architecture
/// of an earlier build, or a build that failed halfway).
fn remove_unlisted(ptx_dir: &Path, listed: &BTreeMap<ArchKey, String>) -> Result<()> {
    for entry in fs::read_dir(ptx_dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".ptx") && !listed.values().any(|file| *file == name) {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            eprintln!("build-ptx: removed {name}, not built this time");
        }
    }
    Ok(())
}

/// The parsed `target/ptx/manifest.txt`.
pub struct Manifest {
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
        let mut archs = BTreeMap::new();
        for line in text.lines() {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["arch", arch, file] => {
                    archs.insert(ArchKey::new(arch), file.to_string());
                }
                _ => bail!("{}: unexpected line {line:?}", path.display()),
            }
        }
        Ok(Self { archs })
    }

    fn write(&self, ptx_dir: &Path) -> Result<()> {
        let mut text = String::new();
        for (ArchKey(_, arch), file) in &self.archs {
            text += &format!("arch {arch} {file}\n");
        }
        Ok(write_atomically(&Self::path(ptx_dir), text.as_bytes())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_orders_archs_numerically() {
        let dir = std::env::temp_dir().join(format!("xtask-manifest-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let archs =
            ["sm_100", "sm_90", "sm_80"].map(|arch| (ArchKey::new(arch), format!("{arch}.ptx")));
        Manifest {
            archs: archs.into_iter().collect(),
        }
        .write(&dir)
        .unwrap();
        let text = fs::read_to_string(Manifest::path(&dir)).unwrap();
        let manifest = Manifest::read(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();

        assert_eq!(
            text,
            "arch sm_80 sm_80.ptx\narch sm_90 sm_90.ptx\narch sm_100 sm_100.ptx\n"
        );
        assert_eq!(manifest.archs.len(), 3);
    }
}
