//! `cargo xtask gpu-bundle`: everything a GPU machine needs to test ferrocuda, in one folder.
//!
//! The GPU machines have a driver but no Rust toolchain, and binaries built here run there
//! unchanged (see `shared/TOOLCHAIN.md`). So the bundle holds the release `ferrocuda` binary,
//! every test executable of the workspace under a stable name, the PTX for reference, and a
//! `run.sh` that runs them all and closes with `ferrocuda-gpu: N passed, N failed, N skipped`.
//!
//! Test executables are named `<package>-<test target>` for integration tests,
//! `<package>-lib` for a library's unit tests and `<package>-<kind>-<target>` for other unit
//! tests (`ferrocuda-bin-ferrocuda`): cargo's `-<hash>` suffix changes with every build, and a
//! lib and a bin of one package share a crate name.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cargo::{self, Artifact};
use crate::cuda::Cuda;
use crate::{build_ptx, ptx_check};

/// Where the bundle goes unless `--out` says otherwise (ignored by git).
pub const DEFAULT_OUT: &str = ".gpu";

pub fn run(root: &Path, out: &Path) -> Result<()> {
    let env = Cuda::provision(root)?.env()?;
    build_ptx::run(root, &build_ptx::Options::all_release())?;
    ptx_check::check_built(root, &env.ptxas)?;
    let ferrocuda = cargo::build_ferrocuda(root, &env)?;
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
    env.apply(&mut build_tests);
    let tests: Vec<Artifact> = cargo::executables(root, &mut build_tests)?
        .into_iter()
        .filter(|artifact| artifact.libtest || artifact.kinds.iter().any(|kind| kind == "test"))
        .collect();

    let bin = out.join("bin");
    let ptx = out.join("ptx");
    for dir in [&bin, &ptx] {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    copy(&ferrocuda.executable, &bin.join("ferrocuda"))?;
    let mut steps = Vec::new();
    for test in &tests {
        let name = bundle_name(test);
        if steps.iter().any(|(existing, _)| *existing == name) {
            bail!("two test executables would both be called bin/{name}");
        }
        copy(&test.executable, &bin.join(&name))?;
        steps.push((name, test.libtest));
    }
    let ptx_dir = build_ptx::ptx_dir(root);
    for entry in fs::read_dir(&ptx_dir).with_context(|| format!("listing {}", ptx_dir.display()))? {
        let path = entry?.path();
        if path
            .extension()
            .is_some_and(|ext| ext == "ptx" || ext == "txt")
        {
            copy(&path, &ptx.join(path.file_name().expect("has a name")))?;
        }
    }
    let script = out.join("run.sh");
    fs::write(&script, run_script(&steps))
        .with_context(|| format!("writing {}", script.display()))?;
    make_executable(&script)?;

    let (files, bytes) = tally(out)?;
    println!(
        "gpu-bundle: {} ({} test executables, {files} files, {:.1} MiB); copy it to a GPU \
         machine and run `./run.sh [LOG_DIR]` there",
        out.display(),
        steps.len(),
        bytes as f64 / (1024.0 * 1024.0),
    );
    Ok(())
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

/// `run.sh`, running `ferrocuda info`, `ferrocuda smoke`, then each `(name, libtest)`
/// executable (libtest harnesses with `--test-threads=1`: tests share one GPU and their
/// timings should not interfere), then `$EXTRA`.
fn run_script(tests: &[(String, bool)]) -> String {
    let mut steps = String::new();
    for (name, libtest) in tests {
        let args = if *libtest { " --test-threads=1" } else { "" };
        steps += &format!("step '{name}' 'bin/{name}'{args}\n");
    }
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
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

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
            libtest: true,
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
    fn run_script_passes_test_threads_to_libtest_harnesses_only() {
        let script = run_script(&[("a-lib".into(), true), ("a-custom".into(), false)]);
        assert!(script.contains(
            "step 'a-lib' 'bin/a-lib' --test-threads=1\nstep 'a-custom' 'bin/a-custom'\nif "
        ));
        assert!(!script.contains("@STEPS@"));
    }
}
