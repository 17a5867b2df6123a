//! `cargo xtask gpu-bundle`: everything a GPU machine needs to test ferrocuda, in one folder.
//!
//! The GPU machines have a driver but no Rust toolchain, and binaries built here run there
//! unchanged: built against glibc 2.36, they ran on the GPU machines' Ubuntu 24.04 (glibc
//! 2.39) and load the driver's own `libcuda.so.1`. So the bundle holds the release `ferrocuda`
//! binary, every test executable of the workspace under a stable name, the PTX for reference,
//! and a `run.sh` that runs them all and closes with
//! `ferrocuda-gpu: N passed, N failed, N skipped`.
//!
//! Test executables are named `<package>-<test target>` for integration tests,
//! `<package>-lib` for a library's unit tests and `<package>-<kind>-<target>` for other unit
//! tests (`ferrocuda-bin-ferrocuda`): cargo's `-<hash>` suffix changes with every build, and a
//! lib and a bin of one package share a crate name.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::build_ptx::{self, Manifest};
use crate::cargo::{self, Artifact};
use crate::cuda::Cuda;
use crate::ptx_check;

/// Tests that read this checkout's sources or run cargo (the module graph, the compile-fail
/// cases): they check the code, not the GPU, and cannot run where there is no source tree.
const SOURCE_TREE_TESTS: [&str; 4] = ["tidy", "compile_fail", "dependent", "symbols"];

/// The packages whose examples and binaries the bundle runs (`examples/`).
const EXAMPLE_PACKAGES: [&str; 2] = ["ferrocuda-examples", "dot-product"];

/// Where the bundle goes unless `--out` says otherwise (ignored by git).
pub const DEFAULT_OUT: &str = ".gpu";

pub fn run(root: &Path, out: &Path) -> Result<()> {
    let ptxas = Cuda::provision(root)?.ptxas()?;
    build_ptx::run(root, &build_ptx::Options::default())?;
    ptx_check::check_built(root, &ptxas)?;
    let ferrocuda = cargo::build_ferrocuda(root)?;
    let mut build_tests = cargo::cargo(root);
    // The xtask's own tests check this machine's tooling, not the GPU.
    build_tests.args([
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        "--release",
        "--no-run",
    ]);
    let mut tests: Vec<(String, Artifact)> = cargo::executables(root, &mut build_tests)?
        .into_iter()
        .filter(|artifact| {
            artifact.test
                && !SOURCE_TREE_TESTS.contains(&artifact.target.as_str())
                // A proc-macro's tests link the toolchain's `libstd` dynamically.
                && !artifact.kinds.iter().any(|k| k == "proc-macro")
        })
        .map(|artifact| (bundle_name(&artifact), artifact))
        .collect();
    tests.sort_by(|(a, _), (b, _)| a.cmp(b));
    let mut build_examples = cargo::cargo(root);
    build_examples.args(["build", "--release", "--examples", "--bins"]);
    for package in EXAMPLE_PACKAGES {
        build_examples.args(["--package", package]);
    }
    let mut examples: Vec<Artifact> = cargo::executables(root, &mut build_examples)?
        .into_iter()
        .filter(|artifact| EXAMPLE_PACKAGES.contains(&artifact.package.as_str()))
        .collect();
    examples.sort_by(|a, b| a.target.cmp(&b.target));
    for pair in tests.windows(2) {
        if pair[0].0 == pair[1].0 {
            bail!(
                "two test executables would both be called bin/{}",
                pair[0].0
            );
        }
    }

    // Filled beside the old bundle and swapped in at the end, so a failed or concurrent run
    // never leaves a half-copied one behind.
    let staging = out.join(format!(".staging-{}", std::process::id()));
    if let Err(err) = stage(root, &staging, &ferrocuda, &tests, &examples) {
        let _ = fs::remove_dir_all(&staging);
        return Err(err);
    }
    for entry in ["bin", BIN_ARCHIVE, "ptx", "run.sh"] {
        let old = out.join(entry);
        if old.is_dir() {
            fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
        } else if old.exists() {
            fs::remove_file(&old).with_context(|| format!("removing {}", old.display()))?;
        }
        if staging.join(entry).exists() {
            fs::rename(staging.join(entry), &old)
                .with_context(|| format!("moving the new {entry} into {}", out.display()))?;
        }
    }
    fs::remove_dir(&staging).with_context(|| format!("removing {}", staging.display()))?;

    let (files, bytes) = tally(out)?;
    println!(
        "gpu-bundle: {} ({} test executables, {files} files, {:.1} MiB); copy it to a GPU \
         machine and run `./run.sh [LOG_DIR]` there",
        out.display(),
        tests.len(),
        bytes as f64 / (1024.0 * 1024.0),
    );
    Ok(())
}

/// The packed `bin/`, unpacked by `run.sh` on the GPU machine.
const BIN_ARCHIVE: &str = "bin.tar.xz";

/// Lays out `bin.tar.xz` (the executables), `ptx/` and `run.sh` in `dir`.
fn stage(
    root: &Path,
    dir: &Path,
    ferrocuda: &Artifact,
    tests: &[(String, Artifact)],
    examples: &[Artifact],
) -> Result<()> {
    let (bin, ptx) = (dir.join("bin"), dir.join("ptx"));
    for dir in [&bin, &ptx, &bin.join("examples")] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    copy(&ferrocuda.executable, &bin.join("ferrocuda"))?;
    for (name, test) in tests {
        copy(&test.executable, &bin.join(name))?;
    }
    for example in examples {
        copy(
            &example.executable,
            &bin.join("examples").join(&example.target),
        )?;
    }
    let top = build_ptx::ptx_dir(root);
    for ptx_dir in build_ptx::ptx_dirs(root) {
        let dest = ptx.join(ptx_dir.strip_prefix(&top).unwrap_or(Path::new("")));
        fs::create_dir_all(&dest).with_context(|| format!("creating {}", dest.display()))?;
        for file in Manifest::read(&ptx_dir)?.archs.into_values() {
            copy(&ptx_dir.join(&file), &dest.join(&file))?;
        }
        copy(&Manifest::path(&ptx_dir), &dest.join("manifest.txt"))?;
    }
    // Every executable embeds the PTX of all architectures and the same libraries, about 300
    // MiB in all; gzip's 32 KiB window packs each file alone (63 MiB, at the 64 MiB that
    // travels to the GPU machine), xz with a dictionary larger than the largest executable
    // finds each one in the one before it (about 8 MiB).
    let mut tar = std::process::Command::new("tar");
    tar.current_dir(dir)
        .env("XZ_OPT", "-6 -T2 --lzma2=dict=192MiB")
        .args(["cJf", BIN_ARCHIVE, "bin"]);
    crate::cmd::run(&mut tar).context("packing bin/ (is `tar` installed?)")?;
    fs::remove_dir_all(&bin).with_context(|| format!("removing {}", bin.display()))?;
    let script = dir.join("run.sh");
    let names: Vec<&str> = tests.iter().map(|(name, _)| name.as_str()).collect();
    let example_names: Vec<&str> = examples.iter().map(|e| e.target.as_str()).collect();
    fs::write(&script, run_script(&names, &example_names))
        .with_context(|| format!("writing {}", script.display()))?;
    make_executable(&script)
}

/// The stable name of a test executable in `bin/` (see the module docs).
fn bundle_name(test: &Artifact) -> String {
    let kind = test.kinds.first().map_or("test", String::as_str);
    match kind {
        "test" => format!("{}-{}", test.package, test.target),
        "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => {
            format!("{}-lib", test.package)
        }
        other => format!("{}-{other}-{}", test.package, test.target),
    }
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

/// Files and bytes under `dir`.
fn tally(dir: &Path) -> Result<(u64, u64)> {
    let mut pending: Vec<PathBuf> = vec![dir.to_path_buf()];
    let (mut files, mut bytes) = (0, 0);
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    Ok((files, bytes))
}

/// `run.sh`, running `ferrocuda info`, `ferrocuda smoke`, then each test executable with
/// `--test-threads=1` (the tests share one GPU, and timings must not disturb each other;
/// the `harness = false` suites use libtest-mimic, which takes the same flag), then `$EXTRA`.
fn run_script(tests: &[&str], examples: &[&str]) -> String {
    let steps: String = tests
        .iter()
        .map(|name| format!("step '{name}' 'bin/{name}' --test-threads=1\n"))
        .chain(
            examples
                .iter()
                .map(|name| format!("step 'example-{name}' 'bin/examples/{name}'\n")),
        )
        .collect();
    RUN_SCRIPT.replace("@STEPS@\n", &steps)
}

const RUN_SCRIPT: &str = r#"#!/usr/bin/env bash
# Runs ferrocuda's checks and tests on a machine with an NVIDIA GPU and driver; no Rust
# toolchain needed. Generated by `cargo xtask gpu-bundle`.
#
#   ./run.sh [LOG_DIR]                    logs go to LOG_DIR, else $OUT, else ./logs here
#   EXTRA='bin/ferrocuda bench' ./run.sh  also runs EXTRA (with bash, from this folder)
#
# LD_LIBRARY_PATH is left alone on purpose: the binaries must load the driver's libcuda.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-${OUT:-$here/logs}}"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 1
cd "$here" || exit 1
if [ ! -d bin ]; then tar xJf bin.tar.xz || exit 1; fi
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"
# The CLI tests run this binary; the path cargo compiled into them exists only where they were built.
export FERROCUDA_BIN="${FERROCUDA_BIN:-$here/bin/ferrocuda}"
# On the GPU machine a missing device is a failure, never a skip.
export FERROCUDA_REQUIRE_GPU="${FERROCUDA_REQUIRE_GPU:-1}"

passed=0 failed=0 skipped=0 broken=0
report=()

# step NAME COMMAND...: runs COMMAND with its output echoed and saved to $out/NAME.log, adds
# up its `test result:` lines and records whether it exited 0.
step() {
    local name="$1" log="$out/$1.log" rc n p f s counts
    shift
    echo "=== $name: $*"
    "$@" 2>&1 | tee "$log"
    rc="${PIPESTATUS[0]}"
    read -r n p f s < <(awk '/^test result:/ {
        n++
        for (i = 2; i <= NF; i++) {
            if ($i ~ /^passed/) p += $(i - 1)
            if ($i ~ /^failed/) f += $(i - 1)
            if ($i ~ /^ignored/) s += $(i - 1)
        }
    } END { print n + 0, p + 0, f + 0, s + 0 }' "$log")
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    counts=""
    if [ "$n" -gt 0 ]; then counts=" ($p passed, $f failed, $s skipped)"; fi
    if [ "$rc" -eq 0 ]; then
        report+=("ok      $name$counts")
    else
        broken=$((broken + 1))
        report+=("FAILED  $name$counts: exit status $rc, see $log")
    fi
}

step ferrocuda-info bin/ferrocuda info
step ferrocuda-smoke bin/ferrocuda smoke
@STEPS@
if [ -n "${EXTRA:-}" ]; then
    step extra bash -c "$EXTRA"
fi

echo
printf '%s\n' "${report[@]}"
echo "ferrocuda-gpu: $passed passed, $failed failed, $skipped skipped"
[ "$broken" -eq 0 ] && [ "$failed" -eq 0 ]
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(package: &str, target: &str, kind: &str) -> Artifact {
        Artifact {
            package: package.into(),
            target: target.into(),
            kinds: vec![kind.into()],
            test: true,
            executable: PathBuf::new(),
        }
    }

    #[test]
    fn bundle_names_tell_a_lib_from_a_bin_of_the_same_name() {
        assert_eq!(
            bundle_name(&artifact("ferrocuda", "ferrocuda", "lib")),
            "ferrocuda-lib"
        );
        assert_eq!(
            bundle_name(&artifact("ferrocuda", "ferrocuda", "bin")),
            "ferrocuda-bin-ferrocuda"
        );
        assert_eq!(
            bundle_name(&artifact("ferrocuda-tests", "reduce", "test")),
            "ferrocuda-tests-reduce"
        );
    }

    #[test]
    fn run_script_runs_each_test_executable_one_test_at_a_time() {
        let script = run_script(&["a-lib", "a-tests-gpu"], &["dot"]);
        assert!(script.contains(
            "step 'a-lib' 'bin/a-lib' --test-threads=1\nstep 'a-tests-gpu' 'bin/a-tests-gpu' --test-threads=1\nstep 'example-dot' 'bin/examples/dot'\nif "
        ));
        assert!(!script.contains("@STEPS@"));
    }
}
