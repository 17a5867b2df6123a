//! `cargo xtask ptx-check`: assembles PTX with `ptxas` and reports each kernel's resources.
//!
//! Without a GPU this is the closest thing to loading the module: `ptxas` is the assembler the
//! driver's JIT runs, so PTX it rejects would not load. Its `-v` report gives, per kernel,
//! registers and static shared memory, and also stack frames and spills. Those two fail the
//! check: both mean per-thread local memory (DRAM behind the caches) in kernels written to
//! stay in registers, usually a bounds check, a slice argument or an array indexed at run time
//! that the optimiser could not remove. One exception: a kernel that calls device `printf`
//! (`vprintf`) may have a stack frame, the buffer its arguments are packed into (nvcc's
//! `printf` has the same); spills are never allowed.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::build_ptx::{self, Manifest};
use crate::cmd;
use crate::cuda::{Cuda, PROVISION_FIX};

/// What `ptx-check` checks.
#[derive(Default)]
pub struct Options {
    /// PTX files to check; empty means those listed in `target/ptx/manifest.txt` and
    /// `target/ptx/lessons/manifest.txt`.
    pub files: Vec<PathBuf>,
    /// The architecture to assemble `files` for; by default each file's `.target`.
    pub arch: Option<String>,
}

pub fn run(root: &Path, options: &Options) -> Result<()> {
    let ptxas = Cuda::locate(root)
        .ptxas
        .with_context(|| {
            format!("no ptxas on PATH, in a CUDA toolkit or in the cache; run `{PROVISION_FIX}`")
        })?
        .path;
    if options.files.is_empty() {
        return check_built(root, &ptxas);
    }
    let mut jobs = Vec::new();
    for file in &options.files {
        let arch = match &options.arch {
            Some(arch) => arch.clone(),
            None => declared_target(file)?,
        };
        jobs.push((arch, file.clone()));
    }
    check(&ptxas, &jobs)
}

/// Checks every architecture `build-ptx` recorded in the manifests, of every kernel crate.
pub fn check_built(root: &Path, ptxas: &Path) -> Result<()> {
    for dir in build_ptx::ptx_dirs(root) {
        let manifest = Manifest::read(&dir)?;
        let jobs: Vec<_> = manifest
            .archs
            .into_iter()
            .map(|(arch, file)| (arch.1, dir.join(file)))
            .collect();
        if jobs.is_empty() {
            bail!(
                "{} lists no PTX; run `cargo xtask build-ptx`",
                Manifest::path(&dir).display()
            );
        }
        check(ptxas, &jobs)?;
    }
    Ok(())
}

/// The architecture in a PTX file's `.target` directive.
fn declared_target(file: &Path) -> Result<String> {
    let text = fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix(".target"))
        .and_then(|rest| rest.split([',', ' ', '\t']).find(|word| !word.is_empty()))
        .map(str::to_owned)
        .with_context(|| format!("{} has no `.target` line; pass --arch", file.display()))
}

/// The entry points of a PTX text that call `vprintf` (device `printf`).
fn printing_kernels(ptx: &str) -> Vec<String> {
    let mut printing = Vec::new();
    let mut current: Option<String> = None;
    for line in ptx.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            current = rest.split(['(', ' ']).next().map(str::to_owned);
        } else if line.contains("call")
            && line.contains("vprintf")
            && let Some(name) = current.take()
        {
            printing.push(name);
        }
    }
    printing
}

/// Assembles each `(arch, file)`, prints the resource table, and fails on assembly errors,
/// spills and stack frames (but the stack frame of a kernel that prints).
fn check(ptxas: &Path, jobs: &[(String, PathBuf)]) -> Result<()> {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (arch, file) in jobs {
        let mut assemble = Command::new(ptxas);
        assemble
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg(file)
            .args(["-o", "/dev/null"]);
        let output = assemble
            .output()
            .with_context(|| format!("could not start `{}`", cmd::display(&assemble)))?;
        // ptxas writes its report to stdout or stderr depending on the version.
        let report =
            String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            problems.push(format!(
                "{arch}: ptxas rejected {} ({}):\n{}",
                file.display(),
                output.status,
                report.trim()
            ));
            continue;
        }
        for warning in report
            .lines()
            .filter(|line| line.starts_with("ptxas warning"))
        {
            eprintln!("{arch}: {warning}");
        }
        let printing = printing_kernels(&fs::read_to_string(file).unwrap_or_default());
        for function in parse_report(&report) {
            let stack = if printing.contains(&function.name) {
                0
            } else {
                function.stack
            };
            for (bytes, what) in [
                (stack, "stack frame"),
                (function.spill_stores, "spill stores"),
                (function.spill_loads, "spill loads"),
            ] {
                if bytes > 0 {
                    problems.push(format!("{arch} {}: {bytes} bytes {what}", function.name));
                }
            }
            rows.push((arch.as_str(), function));
        }
    }
    if !rows.is_empty() {
        print!("{}", table(&rows));
    }
    if !problems.is_empty() {
        bail!("ptx-check failed:\n  {}", problems.join("\n  "));
    }
    let files = if jobs.len() == 1 { "file" } else { "files" };
    println!(
        "ptx-check: {} functions in {} PTX {files}, no spills, no stack frames",
        rows.len(),
        jobs.len()
    );
    Ok(())
}

/// One function of a `ptxas -v` report.
#[derive(Debug, Default, PartialEq)]
struct Function {
    name: String,
    /// A kernel (`.entry`) rather than a device function ptxas kept separate.
    entry: bool,
    registers: u64,
    smem: u64,
    stack: u64,
    spill_stores: u64,
    spill_loads: u64,
}

/// Reads the per-function lines of a `ptxas -v` report:
///
/// ```text
/// ptxas info    : Compiling entry function 'smoke_saxpy' for 'sm_90'
/// ptxas info    : Function properties for smoke_saxpy
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 12 registers, used 0 barriers, 1024 bytes smem
/// ```
fn parse_report(report: &str) -> Vec<Function> {
    let mut functions: Vec<Function> = Vec::new();
    let mut current = None;
    for line in report.lines() {
        let info = line.split_once(": ").map_or("", |(_, rest)| rest.trim());
        let (name, entry) = if let Some(rest) = info.strip_prefix("Compiling entry function '") {
            (rest.split('\'').next().unwrap_or(rest), true)
        } else if let Some(rest) = info.strip_prefix("Function properties for ") {
            (rest.trim(), false)
        } else {
            let counts = if let Some(rest) = info.strip_prefix("Used ") {
                rest
            } else if line.contains("bytes stack frame") {
                line.trim()
            } else {
                continue;
            };
            if let Some(function) = current.and_then(|index: usize| functions.get_mut(index)) {
                for (number, label) in counted_items(counts) {
                    match label {
                        "registers" => function.registers = number,
                        "bytes smem" => function.smem = number,
                        "bytes stack frame" => function.stack = number,
                        "bytes spill stores" => function.spill_stores = number,
                        "bytes spill loads" => function.spill_loads = number,
                        _ => {}
                    }
                }
            }
            continue;
        };
        let index = match functions.iter().position(|function| function.name == name) {
            Some(index) => index,
            None => {
                functions.push(Function {
                    name: name.to_owned(),
                    ..Function::default()
                });
                functions.len() - 1
            }
        };
        functions[index].entry |= entry;
        current = Some(index);
    }
    functions
}

/// `"Used 12 registers, used 0 barriers, 1024 bytes smem"` (without `Used `) as
/// `(12, "registers"), (0, "barriers"), (1024, "bytes smem")`.
fn counted_items(list: &str) -> impl Iterator<Item = (u64, &str)> {
    list.split(',').filter_map(|item| {
        let item = item.trim();
        let start = item.find(|c: char| c.is_ascii_digit())?;
        let (number, label) = item[start..].split_once(' ')?;
        Some((number.parse().ok()?, label.trim()))
    })
}

fn table(rows: &[(&str, Function)]) -> String {
    let header = [
        "arch",
        "kernel",
        "registers",
        "smem",
        "stack",
        "spill stores",
        "spill loads",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|(arch, f)| {
            let name = if f.entry {
                f.name.clone()
            } else {
                format!("{} (device fn)", f.name)
            };
            [
                arch.to_string(),
                name,
                f.registers.to_string(),
                f.smem.to_string(),
                f.stack.to_string(),
                f.spill_stores.to_string(),
                f.spill_loads.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 7]| {
        let mut text = String::new();
        for (column, (cell, width)) in cells.iter().zip(widths).enumerate() {
            // Names left-aligned, numbers right-aligned.
            let _ = if column < 2 {
                write!(text, "{cell:<width$}  ")
            } else {
                write!(text, "{cell:>width$}  ")
            };
        }
        out += text.trim_end();
        out.push('\n');
    };
    line(header);
    for row in &cells {
        line(row.each_ref().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_kernels_that_call_vprintf_may_have_a_stack_frame() {
        let ptx = ".visible .entry quiet(\n\tret;\n}\n.visible .entry loud(\n\t.local .align 4 .b8 d[8];\n\tcall.uni (retval0), vprintf, (param0, param1);\n}\n.visible .entry after(\n\tret;\n}\n";
        assert_eq!(printing_kernels(ptx), ["loud"]);
    }
    use super::*;

    const REPORT: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'smoke_saxpy' for 'sm_90'
ptxas info    : Function properties for smoke_saxpy
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
ptxas info    : Compile time = 5.971 ms
ptxas info    : Compiling entry function 'selftest_shared_static' for 'sm_90'
ptxas info    : Function properties for selftest_shared_static
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
";

    #[test]
    fn parse_report_reads_entries_and_device_functions() {
        let functions = parse_report(REPORT);
        assert_eq!(
            functions,
            [
                Function {
                    name: "helper".into(),
                    stack: 16,
                    spill_stores: 4,
                    spill_loads: 8,
                    ..Function::default()
                },
                Function {
                    name: "smoke_saxpy".into(),
                    entry: true,
                    registers: 12,
                    ..Function::default()
                },
                Function {
                    name: "selftest_shared_static".into(),
                    entry: true,
                    registers: 10,
                    smem: 1024,
                    ..Function::default()
                },
            ]
        );
    }

    #[test]
    fn table_aligns_columns() {
        let rows = [(
            "sm_90",
            Function {
                name: "k".into(),
                entry: true,
                registers: 12,
                ..Function::default()
            },
        )];
        assert_eq!(
            table(&rows),
            "arch   kernel  registers  smem  stack  spill stores  spill loads\n\
             sm_90  k              12     0      0             0            0\n"
        );
    }
}
