//! The `bench` subcommand.
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use ferrocuda::Gpu;
use ferrocuda::runtime::element::ElemType;
use ferrocuda_cli::args::parse_count;
use ferrocuda_cli::bench::COPY_BULK;
use ferrocuda_cli::bench::reproducible::REPRODUCIBLE;
use ferrocuda_cli::bench::{self, BenchConfig};
use ferrocuda_lessons::reduce::ReduceVariant;
use ferrocuda_lessons::stencil::StencilVariant;

/// `ferrocuda bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Element counts, comma-separated (2^20,2^24,...).
    #[arg(long, default_value = "2^20,2^22,2^24,2^26,2^28")]
    sizes: String,
    /// Element types, comma-separated: i32, u32, i64, u64, f32, f64, and the 16-bit floats f16
    /// and bf16 (their fast sum and reproducible sum in f32, and the fast stencil); each
    /// variant runs on the types it has.
    #[arg(long, default_value = "f32,i32")]
    types: String,
    /// Variants, comma-separated names of reduce or stencil variants, `reproducible`,
    /// `copy_bulk` (the copy kernel beside the driver's), or `all`.
    #[arg(long, default_value = "all")]
    variants: String,
    /// Block sizes to try, comma-separated (default: each variant's own).
    #[arg(long)]
    blocks: Option<String>,
    /// Stencil radius.
    #[arg(long, default_value_t = ferrocuda_lessons::stencil::STENCIL_DEFAULT_RADIUS)]
    radius: u32,
    /// Timed repetitions per round.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Rounds: every row of the run is timed in turn, this many times; a row's median and
    /// min..max are over all its rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Where the report, JSON, CSV and charts go.
    #[arg(long, default_value = "target/ferrocuda/report")]
    out: PathBuf,
    /// Print the JSON report on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Print CSV on stdout instead of the table.
    #[arg(long)]
    csv: bool,
    /// Skip the baselines: CUDA C and CUB (nvcc), CuPy and PyTorch (python3).
    #[arg(long)]
    no_baselines: bool,
    /// Sizes of the `api` family (the wall-clock cost of one library call), comma-separated,
    /// or `none`.
    #[arg(long, default_value = "2^10,2^16,2^20,2^24,2^28")]
    api_sizes: String,
    /// Timed calls per `api` row.
    #[arg(long, default_value_t = 300)]
    api_calls: usize,
    /// Radii of the `steps` family (the iterated stencil against the one-step stencil
    /// repeated), comma-separated, or `none`.
    #[arg(long, default_value = "1,3,8")]
    steps_radii: String,
    /// Elements of the `steps` family's array.
    #[arg(long, default_value = "2^28")]
    steps_size: String,
    /// Time steps of each `steps` row.
    #[arg(long, default_value_t = 96)]
    steps: usize,
    /// Steps a pass to time besides the plan's, comma-separated (each 1 up to the kernel's
    /// most for the radius).
    #[arg(long, default_value = "")]
    steps_per_pass: String,
}

impl BenchArgs {
    /// The defaults on the CPU device, which runs every thread in turn and whose times are not
    /// GPU times: sizes 1024 times smaller than a GPU's smallest (`2^10` to `2^18`), 3 timed
    /// repetitions, one round, 20 calls an `api` row. What `is_default` says was not given keeps
    /// its default; what was given is kept.
    pub fn cpu_defaults(&mut self, is_default: impl Fn(&str) -> bool) {
        let set = |id: &str, apply: &mut dyn FnMut()| {
            if is_default(id) {
                apply();
            }
        };
        set("sizes", &mut || self.sizes = "2^10,2^14,2^16+3".into());
        set("api_sizes", &mut || self.api_sizes = "2^10,2^14".into());
        set("reps", &mut || self.reps = 3);
        set("rounds", &mut || self.rounds = 1);
        set("api_calls", &mut || self.api_calls = 20);
        set("steps_size", &mut || self.steps_size = "2^16+3".into());
        set("steps", &mut || self.steps = 12);
    }

    /// Parses and checks everything that needs no GPU.
    pub fn config(&self) -> Result<BenchConfig> {
        let list = |s: &str| {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let sizes = list(&self.sizes)
            .iter()
            .map(|s| parse_count(s).map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        if sizes.is_empty() || sizes.contains(&0) {
            bail!("--sizes needs at least one size, none of them 0");
        }
        let types = list(&self.types)
            .iter()
            .map(|t| {
                ElemType::from_name(t).with_context(|| {
                    format!("unknown type `{t}` (i32, u32, i64, u64, f32, f64, f16, bf16)")
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (mut reduce_variants, mut stencil_variants) = (Vec::new(), Vec::new());
        let (mut reproducible, mut copy_bulk) = (false, false);
        if self.variants == "all" {
            reduce_variants = ReduceVariant::ALL.to_vec();
            stencil_variants = StencilVariant::ALL.to_vec();
            (reproducible, copy_bulk) = (true, true);
        } else {
            for v in list(&self.variants) {
                match (ReduceVariant::from_name(&v), StencilVariant::from_name(&v)) {
                    (None, None) if v == REPRODUCIBLE => reproducible = true,
                    (None, None) if v == COPY_BULK => copy_bulk = true,
                    (None, None) => {
                        bail!(
                            "unknown variant `{v}` (a reduce or stencil variant name, \
                             {REPRODUCIBLE}, {COPY_BULK}, or all)"
                        )
                    }
                    (r, s) => {
                        reduce_variants.extend(r);
                        stencil_variants.extend(s);
                    }
                }
            }
        }
        let blocks = match &self.blocks {
            None => Vec::new(),
            Some(b) => list(b)
                .iter()
                .map(|x| {
                    x.parse::<u32>()
                        .with_context(|| format!("--blocks: `{x}` is not a block size"))
                })
                .collect::<Result<_>>()?,
        };
        if let Some(e) = ferrocuda_lessons::stencil::radius_error(self.radius) {
            bail!("{e}");
        }
        if self.reps == 0 {
            bail!("--reps must be at least 1");
        }
        if self.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if self.json && self.csv {
            bail!("--json and --csv both want stdout; pick one");
        }
        let api_sizes = if self.api_sizes.trim() == "none" {
            Vec::new()
        } else {
            list(&self.api_sizes)
                .iter()
                .map(|s| parse_count(s).map_err(anyhow::Error::msg))
                .collect::<Result<Vec<_>>>()
                .context("--api-sizes")?
        };
        if api_sizes.contains(&0) {
            bail!("--api-sizes: 0 is not a size (use `none` to skip the api family)");
        }
        if self.api_calls == 0 {
            bail!("--api-calls must be at least 1");
        }
        let steps_radii = if self.steps_radii.trim() == "none" {
            Vec::new()
        } else {
            list(&self.steps_radii)
                .iter()
                .map(|s| {
                    s.parse::<u32>()
                        .with_context(|| format!("--steps-radii: `{s}`"))
                })
                .collect::<Result<Vec<_>>>()?
        };
        if let Some(e) = steps_radii
            .iter()
            .find_map(|&r| ferrocuda_lessons::stencil::radius_error(r))
        {
            bail!("--steps-radii: {e}");
        }
        let steps_per_pass = list(&self.steps_per_pass)
            .iter()
            .map(|s| {
                s.parse::<u32>()
                    .with_context(|| format!("--steps-per-pass: `{s}`"))
            })
            .collect::<Result<Vec<_>>>()?;
        let steps_size = parse_count(&self.steps_size)
            .map_err(anyhow::Error::msg)
            .context("--steps-size")?;
        if self.steps == 0 || steps_size == 0 {
            bail!("--steps and --steps-size must be at least 1 (use --steps-radii none to skip)");
        }
        let cfg = BenchConfig {
            sizes,
            types,
            reduce_variants,
            stencil_variants,
            reproducible,
            copy_bulk,
            blocks,
            radius: self.radius,
            reps: self.reps,
            rounds: self.rounds,
            out: self.out.clone(),
            baselines: !self.no_baselines,
            api_sizes,
            api_calls: self.api_calls,
            steps: bench::steps::StepsConfig {
                radii: steps_radii,
                n: steps_size,
                steps: self.steps,
                per_pass: steps_per_pass,
            },
        };
        if let Some(ty) = bench::types_without_rows(&cfg).first() {
            bail!(
                "no variant of --variants `{}` runs on {ty}{}",
                self.variants,
                if ty.is_half() {
                    " (the 16-bit floats run fast, reproducible, copy_bulk and the fast stencil)"
                } else {
                    ""
                }
            );
        }
        Ok(cfg)
    }
}

/// `ferrocuda report`.
#[derive(Args)]
pub struct ReportArgs {
    /// `results.json` of a run.
    results: PathBuf,
    /// Where report.md, results.json, results.csv and the charts go.
    #[arg(long, default_value = "target/ferrocuda/report")]
    out: PathBuf,
}

/// Re-renders a run's report from its results.json.
pub fn report(a: &ReportArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.results)
        .with_context(|| format!("reading {}", a.results.display()))?;
    let report = bench::Report::from_json(&text).with_context(|| {
        format!(
            "{} is not a ferrocuda bench results.json",
            a.results.display()
        )
    })?;
    for file in bench::write_report(&report, &a.out)? {
        println!("wrote {}", file.display());
    }
    Ok(())
}

/// `ferrocuda compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// `results.json` of the first run.
    first: PathBuf,
    /// `results.json` of the second run.
    second: PathBuf,
}

/// Prints every row of two runs side by side; fails when a median falls outside the other
/// run's min..max (or the runs have no row in common).
pub fn compare(a: &CompareArgs) -> Result<()> {
    let read = |p: &PathBuf| -> Result<bench::Report> {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        bench::Report::from_json(&text)
            .with_context(|| format!("{} is not a ferrocuda bench results.json", p.display()))
    };
    let (first, second) = (read(&a.first)?, read(&a.second)?);
    let c = bench::compare(&first, &second);
    println!(
        "first:  {} ({}), {}, {} rounds x {} reps: {}",
        first.device,
        first.ptx_arch,
        first.date,
        first.rounds,
        first.reps,
        a.first.display()
    );
    println!(
        "second: {} ({}), {}, {} rounds x {} reps: {}",
        second.device,
        second.ptx_arch,
        second.date,
        second.rounds,
        second.reps,
        a.second.display()
    );
    println!(
        "{:<52}{:>12}{:>21}{:>12}{:>21}{:>9}  agree",
        "row", "median 1", "min..max 1", "median 2", "min..max 2", "change"
    );
    for r in &c.rows {
        println!(
            "{:<52}{:>12.2}{:>21}{:>12.2}{:>21}{:>8.2}%  {}",
            r.row,
            r.first[0],
            format!("{:.2}..{:.2}", r.first[1], r.first[2]),
            r.second[0],
            format!("{:.2}..{:.2}", r.second[1], r.second[2]),
            r.change_pct(),
            if r.holds() { "yes" } else { "NO" }
        );
    }
    for u in &c.unmatched {
        println!("unmatched: {u}");
    }
    let held = c.rows.iter().filter(|r| r.holds()).count();
    let worst = c
        .rows
        .iter()
        .max_by(|x, y| x.change_pct().abs().total_cmp(&y.change_pct().abs()));
    println!(
        "{held} of {} rows: each median inside the other run's min..max{}",
        c.rows.len(),
        worst.map_or(String::new(), |w| format!(
            "; largest change {:+.2}% ({})",
            w.change_pct(),
            w.row
        ))
    );
    if c.rows.is_empty() {
        bail!("the two runs have no row in common");
    }
    if held < c.rows.len() {
        bail!(
            "{} of {} rows moved outside the other run's min..max",
            c.rows.len() - held,
            c.rows.len()
        );
    }
    Ok(())
}

/// Runs the benchmark and writes the report.
pub fn bench(gpu: &Gpu, a: &BenchArgs, cfg: &BenchConfig) -> Result<()> {
    let report = bench::run(gpu, cfg)?;
    let files = bench::write_report(&report, &cfg.out)?;
    if a.json {
        println!("{}", report.to_json());
    } else if a.csv {
        print!("{}", report.to_csv());
    } else {
        println!(
            "ferrocuda bench on {} ({}), driver CUDA {}, {}; baselines: {}",
            report.device, report.ptx_arch, report.driver_cuda, report.date, report.baselines
        );
        println!(
            "{:<9}{:<26} {:>4}{:>7}{:>6}{:>12}{:>19}{:>8}{:>7}{:>8}{:>7}  check",
            "family",
            "variant",
            "ty",
            "n",
            "block",
            "median us",
            "min..max us",
            "GB/s",
            "%copy",
            "xCUDAC",
            "xCUB"
        );
        for r in &report.rows {
            let b = |name: &str| r.baseline_cell(name, "");
            println!(
                "{:<9}{:<26} {:>4}{:>7}{:>6}{:>12.2}{:>19}{:>8.0}{:>6.0}%{:>8}{:>7}  {}",
                r.family,
                r.variant,
                r.ty,
                r.size(),
                r.block,
                r.median_us,
                format!("{:.2}..{:.2}", r.min_us, r.max_us),
                r.gbs,
                r.pct_copy,
                b("cuda-c"),
                b("cub"),
                if r.passed { "PASS" } else { "FAIL" }
            );
        }
        for f in bench::baseline_failures(&report) {
            println!("baseline {f}");
        }
        for f in &files {
            println!("wrote {}", f.display());
        }
    }
    // The rows are ours and decide the exit status; a baseline without a valid result only
    // loses its speedup, loudly.
    let baseline_failures = bench::baseline_failures(&report).len();
    if baseline_failures > 0 {
        eprintln!(
            "bench: {baseline_failures} baseline results differ from the CPU or are missing \
             (FAIL / miss in the table; no speedup for them)"
        );
    }
    let failed = report.rows.iter().filter(|r| !r.passed).count();
    if failed > 0 {
        bail!("{failed} benchmark rows differ from the CPU");
    }
    Ok(())
}
