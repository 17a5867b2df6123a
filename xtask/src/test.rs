//! `cargo xtask test`: the whole check, as CI runs it.
//!
//! Provision, build the PTX for every architecture, check it with `ptxas`, then run
//! `cargo test --workspace --release` (release: the GPU tests move real amounts of data, and
//! on a GPU machine they should not wait on unoptimised host code). Without a GPU the tests
//! that need one skip themselves. The output is passed through while the `test result:` lines
//! are added up into one closing line, `ferrocuda: N passed, N failed, N skipped`
//! (ignored tests count as skipped).

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::cuda::Cuda;
use crate::{AlreadyReported, build_ptx, cargo, cmd, ptx_check};

pub fn run(root: &Path, cargo_args: &[String]) -> Result<()> {
    let env = Cuda::provision(root)?.env()?;
    build_ptx::run(root, &build_ptx::Options::default())?;
    ptx_check::check_built(root, &env.ptxas)?;

    let mut test = cargo::cargo(root);
    test.args(["test", "--workspace", "--release"])
        .args(cargo_args);
    env.link_and_load(&mut test);
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
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut stdout = io::stdout();
    while reader.read_until(b'\n', &mut line)? > 0 {
        stdout.write_all(&line)?;
        stdout.flush()?;
        if let Some(counts) = Counts::parse(&String::from_utf8_lossy(&line)) {
            totals.add(&counts);
        }
        line.clear();
    }
    let status = child.wait()?;

    if !status.success() {
        eprintln!("error: cargo test failed ({status})");
    }
    println!(
        "ferrocuda: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.ignored
    );
    if !status.success() || totals.failed > 0 {
        return Err(AlreadyReported.into());
    }
    Ok(())
}

/// The numbers of one `test result:` line, or their sum.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Counts {
    /// Reads `test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; …`.
    fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix("test result: ")?;
        let mut counts = Self::default();
        for item in rest.split(';') {
            let mut words = item.split_whitespace().rev();
            let (Some(label), Some(number)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(number) = number.parse() else { continue };
            match label {
                "passed" => counts.passed = number,
                "failed" => counts.failed = number,
                "ignored" => counts.ignored = number,
                _ => {}
            }
        }
        Some(counts)
    }

    fn add(&mut self, other: &Self) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_reads_ok_and_failed_results() {
        let ok = "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.01s";
        assert_eq!(
            Counts::parse(ok),
            Some(Counts {
                passed: 12,
                failed: 0,
                ignored: 3
            })
        );
        let failed =
            "test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out";
        assert_eq!(
            Counts::parse(failed),
            Some(Counts {
                passed: 1,
                failed: 2,
                ignored: 0
            })
        );
        assert_eq!(Counts::parse("running 3 tests"), None);
    }
}
