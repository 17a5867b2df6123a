//! `cargo xtask`: ferrocuda's build and test automation, as a Rust program.
//!
//! The kernels are built by a nested cargo with flags no `Cargo.toml` can express, checked
//! with a CUDA assembler fetched from PyPI, and tested against a driver library unpacked from
//! Debian. Shell scripts for that would drift apart between CI, developers and the GPU
//! machines; one Rust binary that runs wherever cargo does keeps it in one place (the xtask
//! pattern, as in rust-analyzer). Each task is one module. Arguments are parsed by hand and
//! `anyhow` is the only dependency. That is our own choice, not a rule taken over: the xtask of
//! rust-analyzer has more than a dozen dependencies, and its `Cargo.toml` only asks that no
//! more be added. Our reason: every dependency is compiled before the first `cargo xtask` of a
//! fresh checkout, a CI job or a `cargo clean` can start, so a little hand-written code (the
//! argument parser, `json.rs`) is the cheaper side.

mod bench;
mod build_ptx;
mod cargo;
use ferrocuda_builder::cmd;
mod cuda;
mod doctor;
mod gpu_bundle;
mod json;
mod provision;
mod ptx_check;
mod test;
use ferrocuda_builder::toolchain;

use std::collections::VecDeque;
use std::env;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

const HELP: &str = "\
cargo xtask TASK [OPTIONS]

Tasks:
  build-ptx [--arch sm_XX]...
      Compile the kernels crate with ferrocuda-builder to target/ptx/<arch>.ptx for each
      architecture (default: all of sm_70, sm_80, sm_90) and write target/ptx/manifest.txt.
      The host crate's build.rs builds the same PTX itself; this is for ptx-check and
      gpu-bundle.
  ptx-check [FILE.ptx]... [--arch sm_XX]
      Assemble PTX with ptxas and print registers, shared memory, stack and spills per kernel;
      fail on an assembly error, a spill or a stack frame. Default: the files build-ptx made.
      A FILE is assembled for --arch, else for its own .target.
  doctor
      Report each prerequisite as ok or missing, with the command that fixes it.
  provision
      Fetch what this machine lacks: llvm-bitcode-linker (rustup), ptxas and cuda.h (PyPI),
      libcuda (Debian), into .cache/ferrocuda/.
  test [-- CARGO_TEST_ARGS...]
      provision, build-ptx, ptx-check, then `cargo test --workspace --release`; ends with
      `ferrocuda: N passed, N failed, N skipped`.
  bench [-- BENCH_ARGS...]
      provision, build-ptx, ptx-check, build ferrocuda, then run `ferrocuda bench` (needs a GPU).
  sanitize [-- SANITIZE_ARGS...]
      As bench, then run `ferrocuda sanitize`: every library kernel under compute-sanitizer
      (memcheck, racecheck, synccheck, initcheck) and the broken-on-purpose kernels (needs a
      GPU and compute-sanitizer).
  profile [-- PROFILE_ARGS...]
      As bench, then run `ferrocuda profile`: the notes' metrics (achieved occupancy, load
      efficiency, load throughput, instructions per warp, branch efficiency) from Nsight
      Compute for the reduction ladder, the divergence kernels and the stencils (needs a GPU
      and ncu).
  gpu-bundle [--out DIR]
      Put the release ferrocuda binary, every test executable, the PTX and a run.sh into DIR
      (default .gpu), for a GPU machine without a Rust toolchain.
  help
      Print this help.
";

/// A parsed command line.
enum Task {
    BuildPtx(build_ptx::Options),
    PtxCheck(ptx_check::Options),
    Doctor,
    Provision,
    Test { cargo_args: Vec<String> },
    Bench { bench_args: Vec<String> },
    Sanitize { args: Vec<String> },
    Profile { args: Vec<String> },
    GpuBundle { out: PathBuf },
}

/// An error whose message is already on the terminal: `main` only sets the exit status.
#[derive(Debug)]
pub struct AlreadyReported;

impl fmt::Display for AlreadyReported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the failure is reported above")
    }
}

impl std::error::Error for AlreadyReported {}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<AlreadyReported>() => ExitCode::FAILURE,
        Err(err) => {
            // Not `{err:?}`: with RUST_BACKTRACE set that adds a backtrace of the xtask itself.
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let Some(task) = parse(env::args().skip(1).collect())? else {
        print!("{HELP}");
        return Ok(());
    };
    let root = project_root()?;
    match task {
        Task::BuildPtx(options) => build_ptx::run(&root, &options).map(drop),
        Task::PtxCheck(options) => ptx_check::run(&root, &options),
        Task::Doctor => doctor::run(&root),
        Task::Provision => provision::run(&root),
        Task::Test { cargo_args } => test::run(&root, &cargo_args),
        Task::Bench { bench_args } => bench::run(&root, "bench", &bench_args),
        Task::Sanitize { args } => bench::run(&root, "sanitize", &args),
        Task::Profile { args } => bench::run(&root, "profile", &args),
        Task::GpuBundle { out } => gpu_bundle::run(&root, &out),
    }
}

/// The workspace root: the parent of this crate's directory.
fn project_root() -> Result<PathBuf> {
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let root = manifest_dir
        .parent()
        .context("xtask has no parent directory")?;
    std::path::absolute(root).context("resolving the workspace root")
}

/// The task for `args`, or `None` for help.
fn parse(args: Vec<String>) -> Result<Option<Task>> {
    let mut words = Words::new(args);
    let Some(name) = words.next() else {
        return Ok(None);
    };
    let task = match name.as_str() {
        "help" | "-h" | "--help" => return Ok(None),
        "build-ptx" => {
            let mut options = build_ptx::Options::default();
            while let Some(word) = words.next() {
                match word.as_str() {
                    "--arch" => options.archs.push(words.arch()?),
                    _ => return Err(unexpected(&name, &word)),
                }
            }
            Task::BuildPtx(options)
        }
        "ptx-check" => {
            let mut options = ptx_check::Options::default();
            while let Some(word) = words.next() {
                match word.as_str() {
                    "--arch" => options.arch = Some(words.arch()?),
                    _ if !word.starts_with('-') => options.files.push(std::path::absolute(&word)?),
                    _ => return Err(unexpected(&name, &word)),
                }
            }
            Task::PtxCheck(options)
        }
        "doctor" => words.finish(&name, Task::Doctor)?,
        "provision" => words.finish(&name, Task::Provision)?,
        "test" => Task::Test {
            cargo_args: words.rest_after_dashes(&name)?,
        },
        "bench" => Task::Bench {
            bench_args: words.rest_after_dashes(&name)?,
        },
        "sanitize" => Task::Sanitize {
            args: words.rest_after_dashes(&name)?,
        },
        "profile" => Task::Profile {
            args: words.rest_after_dashes(&name)?,
        },
        "gpu-bundle" => {
            let mut out = None;
            while let Some(word) = words.next() {
                match word.as_str() {
                    "--out" => out = Some(std::path::absolute(words.value("--out")?)?),
                    _ => return Err(unexpected(&name, &word)),
                }
            }
            let out = match out {
                Some(out) => out,
                None => project_root()?.join(gpu_bundle::DEFAULT_OUT),
            };
            Task::GpuBundle { out }
        }
        _ => bail!("unknown task `{name}`; run `cargo xtask` for the list"),
    };
    Ok(Some(task))
}

fn unexpected(task: &str, word: &str) -> anyhow::Error {
    anyhow::anyhow!("unexpected `{word}` for `cargo xtask {task}`; run `cargo xtask` for usage")
}

/// The command line's words, read one at a time. `--flag=value` reads as `--flag value`
/// (up to a `--`, after which words pass through untouched).
struct Words(VecDeque<String>);

impl Words {
    fn new(args: Vec<String>) -> Self {
        let mut words = VecDeque::new();
        let mut args = args.into_iter();
        for arg in args.by_ref() {
            if arg == "--" {
                words.push_back(arg);
                break;
            }
            match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => {
                    words.push_back(flag.to_owned());
                    words.push_back(value.to_owned());
                }
                _ => words.push_back(arg),
            }
        }
        words.extend(args);
        Self(words)
    }

    fn next(&mut self) -> Option<String> {
        self.0.pop_front()
    }

    fn value(&mut self, flag: &str) -> Result<String> {
        self.next()
            .with_context(|| format!("`{flag}` needs a value"))
    }

    /// The value of `--arch`, checked to look like `sm_90`.
    fn arch(&mut self) -> Result<String> {
        let arch = self.value("--arch")?;
        if !build_ptx::is_arch(&arch) {
            bail!("`--arch {arch}`: expected an architecture like sm_90");
        }
        Ok(arch)
    }

    /// `task` if nothing follows it.
    fn finish(mut self, name: &str, task: Task) -> Result<Task> {
        match self.next() {
            Some(word) => Err(unexpected(name, &word)),
            None => Ok(task),
        }
    }

    /// The words after a leading `--`, for tasks that pass them on.
    fn rest_after_dashes(mut self, name: &str) -> Result<Vec<String>> {
        match self.next() {
            None => Ok(Vec::new()),
            Some(word) if word == "--" => Ok(self.0.into()),
            Some(word) => Err(unexpected(name, &word)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(line: &str) -> Result<Option<Task>> {
        parse(line.split_whitespace().map(str::to_owned).collect())
    }

    #[test]
    fn parse_reads_repeated_arch_flags_in_both_spellings() {
        let Some(Task::BuildPtx(options)) =
            parse_words("build-ptx --arch sm_80 --arch=sm_90").unwrap()
        else {
            panic!("not build-ptx");
        };
        assert_eq!(options.archs, ["sm_80", "sm_90"]);
    }

    #[test]
    fn parse_passes_words_after_dashes_through_untouched() {
        let Some(Task::Test { cargo_args }) =
            parse_words("test -- -p ferrocuda -- --nocapture --x=y").unwrap()
        else {
            panic!("not test");
        };
        assert_eq!(
            cargo_args,
            ["-p", "ferrocuda", "--", "--nocapture", "--x=y"]
        );
    }

    #[test]
    fn parse_rejects_unknown_words_and_bad_archs() {
        assert!(parse_words("build-ptx --arch compute_90").is_err());
        assert!(parse_words("doctor --verbose").is_err());
        assert!(parse_words("test --nocapture").is_err());
        assert!(parse_words("frobnicate").is_err());
        assert!(parse_words("").unwrap().is_none());
    }

    #[test]
    fn root_holds_the_workspace() {
        let root = project_root().unwrap();
        assert!(root.join("rust-toolchain.toml").is_file());
        assert!(root.join("builder/src/lib.rs").is_file());
    }
}
