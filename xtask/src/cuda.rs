//! The CUDA pieces a build and test run need, and where each one comes from.
//!
//! The host crate needs none at build time (the driver is loaded at run time, see
//! `host-crate/src/runtime/driver`), so what is left is checking the PTX: `ptxas`, taken from
//! the machine when it has one (on `PATH`, or in a toolkit named by `CUDA_PATH` or at
//! `/usr/local/cuda`) and otherwise fetched once from PyPI (wheel `nvidia-cuda-nvcc-cu12`) into
//! `.cache/ferrocuda/cuda/bin/ptxas`, with a stamp naming its source, so a second run only
//! checks a file and a changed pin here fetches again. The driver and the optional tools
//! (`nvcc`, `compute-sanitizer`) are only looked for.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::cmd;

/// A file taken out of a PyPI wheel.
struct Wheel {
    name: &'static str,
    version: &'static str,
    /// The file's path inside the wheel.
    member: &'static str,
}

impl Wheel {
    fn requirement(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }
}

const PTXAS_WHEEL: Wheel = Wheel {
    name: "nvidia-cuda-nvcc-cu12",
    version: "12.9.86",
    member: "nvidia/cuda_nvcc/bin/ptxas",
};

/// The command that fills in whatever is missing.
pub const PROVISION_FIX: &str = "cargo xtask provision";

/// `<workspace>/.cache/ferrocuda`: everything xtask downloads lives here.
fn cache_dir(root: &Path) -> PathBuf {
    root.join(".cache/ferrocuda")
}

/// Where a piece was found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// On `PATH`.
    System,
    /// In the CUDA toolkit.
    Toolkit,
    /// Fetched by an earlier run.
    Cache,
    /// Fetched just now.
    Fetched,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::System => "on PATH",
            Origin::Toolkit => "CUDA toolkit",
            Origin::Cache => "cached",
            Origin::Fetched => "fetched",
        })
    }
}

pub struct Found {
    pub path: PathBuf,
    pub origin: Origin,
}

impl Found {
    fn new(path: PathBuf, origin: Origin) -> Self {
        Self { path, origin }
    }
}

/// What this machine offers, before or after provisioning.
pub struct Cuda {
    /// Evidence of an NVIDIA driver: the first line of `/proc/driver/nvidia/version`, or the
    /// `libcuda.so.1` that `ldconfig` knows.
    pub driver: Option<String>,
    /// A CUDA toolkit root (with `include/cuda.h`), where `nvcc` and friends may live.
    pub toolkit: Option<PathBuf>,
    pub ptxas: Option<Found>,
    cache: PathBuf,
}

impl Cuda {
    /// Looks, changing nothing.
    pub fn locate(root: &Path) -> Self {
        let cache = cache_dir(root).join("cuda");
        let toolkit = find_toolkit();
        let ptxas = cmd::which("ptxas")
            .map(|path| Found::new(path, Origin::System))
            .or_else(|| {
                let path = toolkit.as_ref()?.join("bin/ptxas");
                path.exists().then(|| Found::new(path, Origin::Toolkit))
            })
            .or_else(|| {
                Piece::Ptxas
                    .cached(&cache)
                    .map(|path| Found::new(path, Origin::Cache))
            });
        Self {
            driver: driver(),
            toolkit,
            ptxas,
            cache,
        }
    }

    /// Fills in every missing piece, printing what it fetches.
    pub fn provision(root: &Path) -> Result<Self> {
        let mut cuda = Self::locate(root);
        if cuda.ptxas.is_none() {
            let cache = cuda.cache.clone();
            fetch_wheel_member(root, &PTXAS_WHEEL, &cache, Piece::Ptxas)?;
            cuda.ptxas = Some(Found::new(Piece::Ptxas.path(&cache), Origin::Fetched));
        }
        Ok(cuda)
    }

    /// `ptxas`; fails, naming the fix, when it is missing.
    pub fn ptxas(&self) -> Result<PathBuf> {
        self.ptxas
            .as_ref()
            .map(|found| found.path.clone())
            .context(format!("no ptxas; run `{PROVISION_FIX}`"))
    }
}

/// A file of the cache's CUDA tree, with a stamp naming where it came from.
#[derive(Clone, Copy)]
enum Piece {
    Ptxas,
}

impl Piece {
    fn relative(self) -> &'static str {
        match self {
            Piece::Ptxas => "bin/ptxas",
        }
    }

    fn path(self, cache: &Path) -> PathBuf {
        cache.join(self.relative())
    }

    fn stamp_path(self, cache: &Path) -> PathBuf {
        let name = self.relative().rsplit('/').next().unwrap_or_default();
        cache.join(".stamps").join(name)
    }

    fn stamp(self, cache: &Path) -> Option<String> {
        fs::read_to_string(self.stamp_path(cache)).ok()
    }

    fn write_stamp(self, cache: &Path, source: &str) -> Result<()> {
        let path = self.stamp_path(cache);
        fs::create_dir_all(path.parent().expect("stamp has a parent"))?;
        fs::write(&path, source).with_context(|| format!("writing {}", path.display()))
    }

    /// The cached file, if it exists (following links) and its stamp says it is current.
    fn cached(self, cache: &Path) -> Option<PathBuf> {
        let current = match self {
            Piece::Ptxas => self.stamp(cache)? == PTXAS_WHEEL.requirement(),
        };
        let path = self.path(cache);
        (current && path.exists()).then_some(path)
    }
}

/// Evidence of an NVIDIA driver on this machine.
fn driver() -> Option<String> {
    if let Ok(version) = fs::read_to_string("/proc/driver/nvidia/version") {
        return Some(
            version
                .lines()
                .next()
                .unwrap_or("NVIDIA driver")
                .trim()
                .to_owned(),
        );
    }
    driver_libcuda().map(|lib| format!("{} (listed by ldconfig)", lib.display()))
}

/// The driver's `libcuda.so.1` as `ldconfig -p` lists it.
fn driver_libcuda() -> Option<PathBuf> {
    let listing = ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .into_iter()
        .find_map(|ldconfig| cmd::read(Command::new(ldconfig).arg("-p")).ok())?;
    let entries: Vec<_> = listing
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("libcuda.so.1 "))
        .filter_map(|line| Some((line, line.split_once(" => ")?.1)))
        .collect();
    let native = entries
        .iter()
        .find(|(line, _)| !cfg!(target_arch = "x86_64") || line.contains("x86-64"));
    native
        .or(entries.first())
        .map(|(_, path)| PathBuf::from(path))
}

/// A GPU this machine can run on, described, or why there is none.
pub fn gpu(driver: Option<&str>) -> Result<String, String> {
    let Some(driver) = driver else {
        return Err(
            "no NVIDIA driver: /proc/driver/nvidia/version is absent and ldconfig \
                    lists no libcuda.so.1"
                .to_owned(),
        );
    };
    let Some(smi) = cmd::which("nvidia-smi") else {
        return Ok(format!("{driver} (nvidia-smi not found to list GPUs)"));
    };
    match cmd::read(Command::new(smi).arg("-L")) {
        Ok(list) => match list.lines().find(|line| line.starts_with("GPU ")) {
            Some(first) => Ok(first.trim().to_owned()),
            None => Err("nvidia-smi -L lists no GPU".to_owned()),
        },
        Err(err) => Err(format!("{err:#}")),
    }
}

/// The first CUDA toolkit root among `CUDA_PATH`, `CUDA_ROOT`, `CUDA_TOOLKIT_ROOT_DIR`,
/// `/usr/local/cuda` and `/opt/cuda` with `include/cuda.h`.
fn find_toolkit() -> Option<PathBuf> {
    let from_env = ["CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from);
    let defaults = ["/usr/local/cuda", "/opt/cuda"]
        .into_iter()
        .map(PathBuf::from);
    from_env
        .chain(defaults)
        .find(|root| root.join("include/cuda.h").is_file())
}

/// An optional CUDA tool (`nvcc`, `compute-sanitizer`) on `PATH` or in the toolkit.
pub fn find_tool(toolkit: Option<&Path>, name: &str) -> Option<PathBuf> {
    cmd::which(name).or_else(|| {
        let toolkit = toolkit?;
        [
            toolkit.join("bin").join(name),
            toolkit.join(name).join(name),
        ]
        .into_iter()
        .find(|path| cmd::is_executable(path))
    })
}

/// A fresh scratch directory for one download, under the cache.
fn scratch_dir(root: &Path, name: &str) -> Result<PathBuf> {
    let dir = cache_dir(root).join("downloads").join(name);
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Removes a scratch directory, and `downloads/` with it once it is empty.
fn remove_scratch_dir(dir: &Path) -> Result<()> {
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    if let Some(downloads) = dir.parent() {
        // Fails, as it should, while another download is in progress.
        let _ = fs::remove_dir(downloads);
    }
    Ok(())
}

/// Downloads `wheel` from PyPI and copies its `member` to `piece`'s place in the cache.
fn fetch_wheel_member(root: &Path, wheel: &Wheel, cache: &Path, piece: Piece) -> Result<()> {
    let requirement = wheel.requirement();
    eprintln!(
        "provision: fetching {} from PyPI ({requirement})",
        piece.relative()
    );
    let scratch = scratch_dir(root, wheel.name)?;
    cmd::run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .arg("--dest")
            .arg(&scratch)
            .arg(&requirement)
            .env("PIP_ROOT_USER_ACTION", "ignore"),
    )
    .with_context(|| {
        format!(
            "downloading {requirement} (needs python3 with pip, e.g. `apt-get install \
             python3-pip`, and access to PyPI)"
        )
    })?;
    let wheel_file = fs::read_dir(&scratch)?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .with_context(|| format!("pip downloaded no wheel into {}", scratch.display()))?;

    let dest = piece.path(cache);
    fs::create_dir_all(dest.parent().expect("piece has a parent"))?;
    let partial = dest.with_extension("partial");
    // A wheel is a zip file; Python is already needed for pip, so its zipfile module unpacks.
    cmd::read(
        Command::new("python3")
            .arg("-c")
            .arg("import sys, zipfile; open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))")
            .arg(&wheel_file)
            .arg(wheel.member)
            .arg(&partial),
    )
    .with_context(|| format!("extracting {} from {}", wheel.member, wheel_file.display()))?;
    if matches!(piece, Piece::Ptxas) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&partial, fs::Permissions::from_mode(0o755))?;
    }
    fs::rename(&partial, &dest)?;
    piece.write_stamp(cache, &requirement)?;
    remove_scratch_dir(&scratch)?;
    eprintln!("provision: {} ready", dest.display());
    Ok(())
}
