//! `cargo xtask test`: the whole check, as CI runs it.
//!
//! Provision, build the PTX for every architecture, check it with `ptxas`, then run
//! `cargo test --workspace --release` (release: the GPU tests move real amounts of data, and
//! on a GPU machine they should not wait on unoptimised host code). Without a GPU the tests
//! that need one skip themselves. The output is passed through while the `test result:` lines
//! are added up into one closing line, `ferrocuda: N passed, N failed, N skipped`
//! (ignored tests count as skipped). Then `cargo doc` of the workspace, warnings denied.
//!
//! A GPU test binary (`tests/tests/gpu_*.rs`) that reports no test at all fails the run even
//! when cargo is content: such a binary is almost always one whose `[[test]]` entry lacks
//! `harness = false`, so that libtest ran its zero `#[test]` functions and never called
//! `run_gpu_suite`. Each binary's share of the output starts at cargo's
//! `Running tests/gpu_x.rs (target/release/deps/gpu_x-HASH)` line and is closed by its
//! `test result:` line (libtest-mimic prints the same line as libtest; `run_gpu_suite` then adds
//! `SKIPPED: N GPU tests did not run …` when N > 0, which is already in the ignored count).

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::cuda::Cuda;
use crate::{AlreadyReported, build_ptx, cargo, cmd, ptx_check};

pub fn run(root: &Path, cargo_args: &[String]) -> Result<()> {
    let ptxas = Cuda::provision(root)?.ptxas()?;
    build_ptx::run(root, &build_ptx::Options::default())?;
    ptx_check::check_built(root, &ptxas)?;

    let mut test = cargo::cargo(root);
    test.args(["test", "--workspace", "--release"])
        .args(cargo_args);
    eprintln!("$ {}", cmd::display(&test));

    // One pipe for both streams keeps cargo's and the tests' lines in their real order.
    let (reader, writer) = io::pipe().context("creating a pipe")?;
    test.stdout(writer.try_clone()?).stderr(writer);
    let mut child = test
        .spawn()
        .with_context(|| format!("could not start `{}`", cmd::display(&test)))?;
    // The command holds copies of the pipe's write end; without dropping it, reading never ends.
    drop(test);

    let mut totals = Counts::default();
    let mut gpu_binaries = GpuBinaries::default();
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut stdout = io::stdout();
    while reader.read_until(b'\n', &mut line)? > 0 {
        stdout.write_all(&line)?;
        stdout.flush()?;
        let text = String::from_utf8_lossy(&line);
        if let Some(counts) = Counts::parse(&text) {
            totals.add(&counts);
        }
        gpu_binaries.read(&text);
        line.clear();
    }
    let status = child.wait()?;

    if !status.success() {
        eprintln!("error: cargo test failed ({status})");
    }
    let empty = gpu_binaries.without_tests();
    for problem in &empty {
        eprintln!("error: {problem}");
    }
    let docs = if status.success() {
        check_docs(root)
    } else {
        Ok(())
    };
    println!(
        "ferrocuda: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.ignored
    );
    if !status.success() || totals.failed > 0 || !empty.is_empty() {
        return Err(AlreadyReported.into());
    }
    docs
}

/// `cargo doc` of every package of the workspace, with any rustdoc warning (a broken link, an
/// unclosed tag) an error.
fn check_docs(root: &Path) -> Result<()> {
    let mut doc = cargo::cargo(root);
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    cmd::run(&mut doc).context("the documentation has warnings")?;
    Ok(())
}

/// The GPU test binaries cargo ran, each with the counts of its `test result:` line.
#[derive(Debug, Default)]
struct GpuBinaries {
    /// In the order cargo ran them; `None` until the binary's result line is read.
    seen: Vec<(String, Option<Counts>)>,
    /// The index in `seen` of the binary whose output is being read, if it is a GPU binary.
    current: Option<usize>,
}

impl GpuBinaries {
    /// Takes one line of the combined output of cargo and the test binaries.
    fn read(&mut self, line: &str) {
        let line = &without_ansi_escapes(line);
        if let Some(target) = running_target(line) {
            self.current = target.starts_with("gpu_").then(|| {
                self.seen.push((target, None));
                self.seen.len() - 1
            });
        } else if line.trim_start().starts_with("Doc-tests ") {
            self.current = None;
        } else if let Some(counts) = Counts::parse(line)
            && let Some(i) = self.current.take()
        {
            self.seen[i].1 = Some(counts);
        }
    }

    /// One message for each GPU binary that ran no test and skipped none (tests left out by a
    /// filter on the command line do not count as missing).
    fn without_tests(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter_map(|(name, counts)| match counts {
                None => Some(format!(
                    "GPU test binary `{name}` ended without a `test result:` line, so it is not \
                     known to have run any test"
                )),
                Some(c) if c.passed + c.failed + c.ignored + c.filtered_out == 0 => Some(format!(
                    "GPU test binary `{name}` ran 0 tests and skipped 0; does its [[test]] entry \
                     in tests/Cargo.toml say `harness = false`?"
                )),
                Some(_) => None,
            })
            .collect()
    }
}

/// The test target whose output a cargo `Running` line announces: `gpu_reduce` for
/// `     Running tests/gpu_reduce.rs (target/release/deps/gpu_reduce-0123abcd)` (and for the
/// older `     Running target/release/deps/gpu_reduce-0123abcd`).
fn running_target(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("Running ")?;
    let exe = match rest.rsplit_once(" (") {
        Some((_, exe)) => exe.strip_suffix(')')?,
        None => rest,
    };
    let file = exe.rsplit(['/', '\\']).next()?;
    let file = file.strip_suffix(".exe").unwrap_or(file);
    let (name, _hash) = file.rsplit_once('-')?;
    Some(name.to_string())
}

/// `line` without terminal colour codes (`ESC [ … letter`), which cargo writes around
/// `Running` under `CARGO_TERM_COLOR=always`.
fn without_ansi_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

/// The numbers of one `test result:` line, or their sum.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    passed: u64,
    failed: u64,
    ignored: u64,
    filtered_out: u64,
}

impl Counts {
    /// Reads `test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; …`.
    fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix("test result: ")?;
        let mut counts = Self::default();
        for item in rest.split(';') {
            // `ok. 12 passed`, `0 filtered out`: the first word that is a number, then the label.
            let mut words = item.split_whitespace();
            let Some(number) = words.find_map(|w| w.parse().ok()) else {
                continue;
            };
            match words.collect::<Vec<_>>().join(" ").as_str() {
                "passed" => counts.passed = number,
                "failed" => counts.failed = number,
                "ignored" => counts.ignored = number,
                "filtered out" => counts.filtered_out = number,
                _ => {}
            }
        }
        Some(counts)
    }

    fn add(&mut self, other: &Self) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
        self.filtered_out += other.filtered_out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_reads_ok_and_failed_results() {
        let ok = "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 5 filtered out; finished in 0.01s";
        assert_eq!(
            Counts::parse(ok),
            Some(Counts {
                passed: 12,
                failed: 0,
                ignored: 3,
                filtered_out: 5,
            })
        );
        let failed =
            "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out";
        assert_eq!(
            Counts::parse(failed),
            Some(Counts {
                passed: 1,
                failed: 2,
                ignored: 0,
                filtered_out: 0,
            })
        );
        assert_eq!(Counts::parse("running 3 tests"), None);
    }

    #[test]
    fn running_target_names_the_test_target() {
        let target = running_target;
        assert_eq!(
            target("     Running tests/gpu_reduce.rs (target/release/deps/gpu_reduce-0123abcd)"),
            Some("gpu_reduce".into())
        );
        assert_eq!(
            target("     Running unittests src/lib.rs (target/release/deps/ferrocuda-99ff)"),
            Some("ferrocuda".into())
        );
        assert_eq!(
            target("     Running target/release/deps/gpu_lab-77aa"),
            Some("gpu_lab".into())
        );
        assert_eq!(
            target(r"     Running tests\gpu_lab.rs (target\release\deps\gpu_lab-77aa.exe)"),
            Some("gpu_lab".into())
        );
        assert_eq!(
            running_target(&without_ansi_escapes(
                "\x1b[1m\x1b[92m     Running\x1b[0m tests/gpu_lab.rs (target/release/deps/gpu_lab-77aa)"
            )),
            Some("gpu_lab".into())
        );
        assert_eq!(target("running 3 tests"), None);
        assert_eq!(target("test gpu_reduce::sum ... ok"), None);
    }

    /// What [`GpuBinaries`] finds in `output`, the combined output of `cargo test`.
    fn problems(output: &str) -> Vec<String> {
        let mut binaries = GpuBinaries::default();
        for line in output.lines() {
            binaries.read(line);
        }
        binaries.without_tests()
    }

    #[test]
    fn a_gpu_binary_that_runs_or_skips_its_tests_passes() {
        let output = "\
     Running tests/cpu.rs (target/release/deps/cpu-1111)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/gpu_reduce.rs (target/release/deps/gpu_reduce-2222)

running 2 tests
SKIPPED (no CUDA device: no CUDA-capable device is detected) reduce_sum_f32
test reduce_sum_f32 ... ignored, no CUDA device: no CUDA-capable device is detected
test reduce_sum_f64 ... ok

test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

SKIPPED: 1 GPU tests did not run (no CUDA device); this is NOT a GPU pass
     Running tests/gpu_lab.rs (target/release/deps/gpu_lab-3333)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 7 filtered out; finished in 0.00s

   Doc-tests ferrocuda

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
        // A CPU binary and the doc tests may be empty; a filter may leave a GPU binary empty.
        assert_eq!(problems(output), Vec::<String>::new());
    }

    #[test]
    fn a_gpu_binary_with_zero_tests_is_named() {
        let output = "\
     Running tests/gpu_stencil.rs (target/release/deps/gpu_stencil-4444)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/gpu_sanitize.rs (target/release/deps/gpu_sanitize-5555)

running 3 tests
";
        let found = problems(output);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].contains("`gpu_stencil` ran 0 tests") && found[0].contains("harness = false"),
            "{}",
            found[0]
        );
        assert!(
            found[1].contains("`gpu_sanitize` ended without a `test result:` line"),
            "{}",
            found[1]
        );
    }
}
