//! The `sanitize` and `sanitize-cases` subcommands.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use ferrocuda::Gpu;
use ferrocuda_cli::sanitize::{self, TOOLS, ToolReport, broken_kernels};

/// `ferrocuda sanitize`.
#[derive(Args)]
pub struct SanitizeArgs {
    /// The compute-sanitizer executable (default: from PATH, then /usr/local/cuda/bin).
    #[arg(long)]
    sanitizer: Option<PathBuf>,
    /// Tools to run, comma-separated.
    #[arg(long, default_value = "memcheck,racecheck,synccheck,initcheck")]
    tools: String,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `ferrocuda sanitize-cases` (what `sanitize` runs under each tool).
#[derive(Args)]
pub struct CasesArgs {
    /// Launch the two broken-on-purpose kernels instead of the library's.
    #[arg(long)]
    broken: bool,
}

/// Runs the cases in this process: one `kernel <symbol> PASS|FAIL` line per library kernel.
pub fn cases(gpu: &Gpu, a: &CasesArgs) -> Result<()> {
    if a.broken {
        sanitize::broken_cases(gpu)?;
        for k in broken_kernels() {
            println!("kernel {} LAUNCHED", k.symbol);
        }
        return Ok(());
    }
    let results = sanitize::library_cases(gpu)?;
    // A kernel built only for newer GPUs (clusters, bulk copies) is not in this GPU's PTX.
    let missed: Vec<&str> = sanitize::library_kernels()
        .into_iter()
        .filter(|e| e.built_for(gpu.ptx_arch()))
        .map(|e| e.symbol)
        .filter(|s| !results.contains_key(*s))
        .collect();
    if !missed.is_empty() {
        bail!(
            "{} declared kernels have no sanitizer case: {missed:?}",
            missed.len()
        );
    }
    let failed: Vec<&String> = results
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(k, _)| k)
        .collect();
    for (k, ok) in &results {
        println!("kernel {k} {}", if *ok { "PASS" } else { "FAIL" });
    }
    if !failed.is_empty() {
        bail!(
            "{} kernels gave results that differ from the CPU: {failed:?}",
            failed.len()
        );
    }
    Ok(())
}

fn find_sanitizer(explicit: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.clone());
    }
    ferrocuda_cli::toolkit::find_tool("compute-sanitizer")
        .map(|t| t.path)
        .context(
            "compute-sanitizer not found (it comes with the CUDA toolkit); pass --sanitizer PATH",
        )
}

fn run_tool(
    sanitizer: &Path,
    tool: &str,
    device: u32,
    broken: bool,
) -> Result<(String, Vec<String>, bool)> {
    let me = std::env::current_exe().context("locating this executable")?;
    let mut c = sanitize::sanitizer_command(sanitizer, tool, &me, device, broken);
    let out = c
        .output()
        .with_context(|| format!("running {} --tool {tool}", sanitizer.display()))?;
    let text = ferrocuda_cli::toolkit::output_text(&out);
    let kernels: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("kernel "))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect();
    // The case run itself must have finished: a run that stopped early reports no kernel and
    // would otherwise read as clean.
    let results_ok = out.status.success()
        && !kernels.is_empty()
        && !text
            .lines()
            .any(|l| l.starts_with("kernel ") && l.ends_with(" FAIL"));
    if !results_ok {
        // Say why, not only that: the case run's own error is in its last lines.
        eprintln!(
            "{tool}: the case run did not finish cleanly ({}); its last lines:",
            out.status
        );
        for line in ferrocuda_cli::toolkit::last_lines(&text, 6) {
            eprintln!("  {line}");
        }
    }
    Ok((text, kernels, results_ok))
}

/// The tools the CPU device has of its own.
const CPU_TOOLS: [&str; 2] = ["racecheck", "synccheck"];

/// Findings per kernel and tool: a finding's message starts with the kernel's launch,
/// `symbol<<<...>>>`.
fn count_findings(
    findings: &[ferrocuda::runtime::driver::cpu::Finding],
) -> std::collections::BTreeMap<(String, &'static str), usize> {
    let mut counts = std::collections::BTreeMap::new();
    for f in findings {
        let kernel = f.message.split("<<<").next().unwrap_or("").to_string();
        *counts.entry((kernel, f.tool)).or_insert(0) += 1;
    }
    counts
}

/// `sanitize` on the CPU device: its own racecheck and synccheck, in this process, over the
/// same cases (memcheck and initcheck are compute-sanitizer's only: skipped, by name).
fn sanitize_cpu(gpu: &Gpu, tools: &[&str], a: &SanitizeArgs) -> Result<()> {
    use ferrocuda::runtime::driver::cpu;
    for t in tools.iter().filter(|t| !CPU_TOOLS.contains(t)) {
        println!(
            "SKIPPED {t}: compute-sanitizer's tool; the CPU device has racecheck and synccheck"
        );
    }
    let tools: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| CPU_TOOLS.contains(t))
        .collect();
    if tools.is_empty() {
        bail!(
            "none of the tools asked for runs on the CPU device ({})",
            CPU_TOOLS.join(", ")
        );
    }
    eprintln!(
        "CPU device {}: every library kernel, then the broken-on-purpose ones ...",
        tools.join(", ")
    );
    cpu::take_findings();
    cpu::fail_on_findings(false);
    cpu::racecheck(tools.contains(&"racecheck"));
    let results = sanitize::library_cases(gpu);
    let library = cpu::take_findings();
    let broken = sanitize::broken_cases(gpu);
    let broken_findings = cpu::take_findings();
    cpu::racecheck(false);
    let (results, ()) = (results?, broken?);
    for f in &library {
        eprintln!("{f}");
    }
    let counts = count_findings(&library);
    let broken_counts = count_findings(&broken_findings);
    let mut md = format!(
        "| kernel | result | {} |\n|---|---|{}\n",
        tools.join(" | "),
        "---:|".repeat(tools.len())
    );
    let mut dirty = 0;
    let mut wrong = Vec::new();
    for (k, ok) in &results {
        let c: Vec<usize> = tools
            .iter()
            .map(|t| counts.get(&(k.clone(), *t)).copied().unwrap_or(0))
            .collect();
        dirty += usize::from(c.iter().any(|&c| c > 0));
        if !ok {
            wrong.push(k.as_str());
        }
        let c: Vec<String> = c.iter().map(usize::to_string).collect();
        md.push_str(&format!(
            "| {k} | {} | {} |\n",
            if *ok { "PASS" } else { "FAIL" },
            c.join(" | ")
        ));
    }
    md.push_str(&format!(
        "\nLibrary kernels: {} checked on the CPU device, {dirty} with findings.\n",
        results.len()
    ));
    md.push_str(
        "\nBroken on purpose (must be flagged):\n\n| kernel | tool | findings |\n|---|---|---:|\n",
    );
    let mut unflagged = Vec::new();
    for k in broken_kernels().map(|k| k.symbol) {
        let mut any = false;
        for t in &tools {
            let c = broken_counts
                .get(&(k.to_string(), *t))
                .copied()
                .unwrap_or(0);
            any |= c > 0;
            md.push_str(&format!("| {k} | {t} | {c} |\n"));
        }
        if !any {
            unflagged.push(k);
        }
    }
    print!("{md}");
    if let Some(path) = &a.out {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    if dirty > 0 || !wrong.is_empty() || !unflagged.is_empty() {
        bail!(
            "sanitize failed: {dirty} library kernels with findings; wrong results {wrong:?}; \
             broken kernels not flagged {unflagged:?}"
        );
    }
    println!(
        "PASS: no finding on any library kernel under the CPU device's {}; both broken kernels flagged",
        tools.join(" and ")
    );
    Ok(())
}

/// Runs every tool over the library's kernels and the broken ones; prints the table.
pub fn sanitize(device: u32, a: &SanitizeArgs) -> Result<()> {
    let tools: Vec<&str> = a.tools.split(',').map(str::trim).collect();
    if let Some(t) = tools.iter().find(|t| !TOOLS.contains(t)) {
        bail!("unknown tool `{t}` ({})", TOOLS.join(", "));
    }
    if ferrocuda::runtime::driver::cpu::selected() {
        let gpu = Gpu::new(device).context("opening the CPU device")?;
        return sanitize_cpu(&gpu, &tools, a);
    }
    if let Err(e) = ferrocuda::runtime::driver::load() {
        bail!(
            "{e}. compute-sanitizer needs an NVIDIA GPU; `ferrocuda --device cpu sanitize` \
             runs the CPU device's racecheck and synccheck"
        );
    }
    let sanitizer = find_sanitizer(&a.sanitizer)?;
    // The tools run side by side (one process each) and the broken cases after them.
    eprintln!(
        "compute-sanitizer --tool {{{}}}: every library kernel, then the broken-on-purpose ones ...",
        tools.join(",")
    );
    let sanitizer = &sanitizer;
    let runs: Vec<Result<(String, Vec<String>, bool)>> = std::thread::scope(|s| {
        let handles: Vec<_> = tools
            .iter()
            .map(|&tool| s.spawn(move || run_tool(sanitizer, tool, device, false)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sanitizer thread"))
            .collect()
    });
    let mut kernels: Vec<String> = Vec::new();
    let mut texts = Vec::new();
    for r in runs {
        let (text, names, ok) = r?;
        for n in names {
            if !kernels.contains(&n) {
                kernels.push(n);
            }
        }
        texts.push((text, ok));
    }
    let all: Vec<String> = kernels
        .iter()
        .cloned()
        .chain(broken_kernels().map(|k| k.symbol.to_string()))
        .collect();
    let reports: Vec<(String, ToolReport, bool)> = tools
        .iter()
        .zip(texts)
        .map(|(t, (text, ok))| (t.to_string(), sanitize::parse_report(&text, &all), ok))
        .collect();
    let broken_tools: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| *t == "racecheck" || *t == "synccheck")
        .collect();
    let mut broken_reports = Vec::new();
    for &tool in &broken_tools {
        let (text, _, _) = run_tool(sanitizer, tool, device, true)?;
        let names: Vec<String> = broken_kernels().map(|k| k.symbol.to_string()).to_vec();
        broken_reports.push((tool.to_string(), sanitize::parse_report(&text, &names)));
    }

    let mut md = String::new();
    let header = format!("| kernel | {} |", tools.join(" | "));
    md.push_str(&format!("{header}\n|---|{}\n", "---:|".repeat(tools.len())));
    let mut dirty = 0;
    for k in &kernels {
        let counts: Vec<usize> = reports
            .iter()
            .map(|(_, r, _)| r.per_kernel.get(k).copied().unwrap_or(0))
            .collect();
        dirty += counts.iter().any(|&c| c > 0) as usize;
        md.push_str(&format!(
            "| {k} | {} |\n",
            counts
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    let totals: Vec<String> = reports
        .iter()
        .map(|(t, r, _)| format!("{t}: {} errors", r.total))
        .collect();
    md.push_str(&format!(
        "\nLibrary kernels: {} checked, {} with errors; totals: {}.\n",
        kernels.len(),
        dirty,
        totals.join(", ")
    ));
    md.push_str("\nBroken on purpose (must be flagged):\n\n| kernel | tool | errors reported |\n|---|---|---:|\n");
    let mut unflagged = Vec::new();
    for k in broken_kernels().map(|k| k.symbol) {
        let flagged: Vec<(String, usize)> = broken_reports
            .iter()
            .map(|(t, r)| (t.clone(), r.per_kernel.get(k).copied().unwrap_or(0)))
            .collect();
        for (t, c) in &flagged {
            md.push_str(&format!("| {k} | {t} | {c} |\n"));
        }
        if !broken_reports.is_empty() && flagged.iter().all(|(_, c)| *c == 0) {
            unflagged.push(k);
        }
    }
    print!("{md}");
    if let Some(path) = &a.out {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    let results_failed: Vec<&str> = reports
        .iter()
        .filter(|(_, _, ok)| !ok)
        .map(|(t, _, _)| t.as_str())
        .collect();
    let totals_nonzero: Vec<&str> = reports
        .iter()
        .filter(|(_, r, _)| r.total > 0)
        .map(|(t, _, _)| t.as_str())
        .collect();
    if dirty > 0
        || !totals_nonzero.is_empty()
        || !results_failed.is_empty()
        || !unflagged.is_empty()
    {
        bail!(
            "sanitize failed: {dirty} library kernels with errors; tools with non-zero totals {totals_nonzero:?}; \
             wrong results under {results_failed:?}; broken kernels not flagged {unflagged:?}"
        );
    }
    println!(
        "PASS: zero errors on every library kernel under {}; both broken kernels flagged",
        tools.join(", ")
    );
    Ok(())
}
