//! A benchmark run as data: its rows, the Markdown report, and the comparison of two runs.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use ferrocuda::runtime::element::ElemType;
use ferrocuda_lessons::reduce::ReduceVariant;
use ferrocuda_lessons::stencil::StencilVariant;

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Element counts.
    pub sizes: Vec<usize>,
    /// Element types of the reductions (the stencil runs on the `f32`/`f64`/`i32` among them).
    pub types: Vec<ElemType>,
    /// Reduction variants.
    pub reduce_variants: Vec<ReduceVariant>,
    /// Stencil variants.
    pub stencil_variants: Vec<StencilVariant>,
    /// Whether the reduce family has the reproducible sum's row (for `f32` and `f64`).
    pub reproducible: bool,
    /// Whether each group has the bulk-copy kernel's row (`copy_bulk`) beside the driver's
    /// copy (sm_90 and newer).
    pub copy_bulk: bool,
    /// Block sizes to try per variant (each variant's default when empty).
    pub blocks: Vec<u32>,
    /// Stencil radius.
    pub radius: u32,
    /// Timed repetitions per round.
    pub reps: usize,
    /// Rounds: every row of the run is timed in turn, `rounds` times.
    pub rounds: usize,
    /// Where the report goes.
    pub out: PathBuf,
    /// Run the CUDA C and CUB baselines when `nvcc` is found, and the CuPy / PyTorch ones of
    /// the `api` family when `python3` has them.
    pub baselines: bool,
    /// Sizes of the `api` family (per-call cost of library calls); empty: no `api` rows.
    pub api_sizes: Vec<usize>,
    /// Timed calls per `api` row.
    pub api_calls: usize,
    /// The `steps` family (the iterated stencil); no radii: no rows.
    pub steps: super::steps::StepsConfig,
}

impl BenchConfig {
    /// This run on the GPU of `props`: without the variants it cannot run (the cluster and
    /// bulk-copy kernels before sm_90), and the names of those left out.
    pub fn on_device(&self, props: &ferrocuda::DeviceProps) -> (Self, Vec<&'static str>) {
        let mut cfg = self.clone();
        let mut left_out = Vec::new();
        cfg.reduce_variants.retain(|v| {
            v.runs_on(props) || {
                left_out.push(v.name());
                false
            }
        });
        cfg.stencil_variants.retain(|v| {
            v.runs_on(props) || {
                left_out.push(v.name());
                false
            }
        });
        let copy_bulk_arch = ferrocuda::kernels::copy::copy_bulk().info().min_arch;
        if cfg.copy_bulk && !props.reaches_arch(copy_bulk_arch) {
            cfg.copy_bulk = false;
            left_out.push(super::COPY_BULK);
        }
        (cfg, left_out)
    }

    /// The default run of `cargo xtask bench`.
    pub fn default_run() -> Self {
        Self {
            sizes: vec![1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28],
            types: vec![ElemType::F32, ElemType::I32],
            reduce_variants: ReduceVariant::ALL.to_vec(),
            stencil_variants: StencilVariant::ALL.to_vec(),
            reproducible: true,
            copy_bulk: true,
            blocks: Vec::new(),
            radius: ferrocuda_lessons::stencil::STENCIL_DEFAULT_RADIUS,
            reps: 20,
            rounds: 3,
            out: PathBuf::from("target/ferrocuda/report"),
            baselines: true,
            api_sizes: vec![1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 28],
            api_calls: 300,
            steps: super::steps::StepsConfig {
                radii: vec![1, 3, 8],
                n: 1 << 28,
                steps: 96,
                per_pass: Vec::new(),
            },
        }
    }
}

/// A comparison with another implementation measured in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `cuda-c` (the same algorithm compiled by nvcc), `cub`, or in the `api` family `kernel`,
    /// `cupy`, `torch`.
    pub name: String,
    /// Its median time; `None` when it did not run.
    pub median_us: Option<f64>,
    /// Its time over ours (above 1 means ours is faster); `None` when its result failed the
    /// check or it did not run: a ratio to a wrong or absent result means nothing.
    pub speedup: Option<f64>,
    /// Whether its result equals the CPU reference of the row.
    #[serde(default)]
    pub check: BaselineCheck,
}

impl Baseline {
    /// A baseline that ran in `median_us` against our `ours_us`, its result judged by `check`.
    pub fn measured(name: &str, median_us: f64, ours_us: f64, check: BaselineCheck) -> Self {
        let speedup = (!check.is_failure()).then(|| median_us / ours_us);
        Self {
            name: name.into(),
            median_us: Some(median_us),
            speedup,
            check,
        }
    }

    /// A requested baseline that produced no result; `why` says what happened.
    pub fn missing(name: &str, why: String) -> Self {
        Self {
            name: name.into(),
            median_us: None,
            speedup: None,
            check: BaselineCheck::Missing(why),
        }
    }

    /// Its table cell: the speedup (`1.07` and `suffix`), `FAIL` or `miss`.
    pub fn cell(&self, suffix: &str) -> String {
        match (&self.check, self.speedup) {
            (BaselineCheck::Failed(_), _) => "FAIL".into(),
            (BaselineCheck::Missing(_), _) => "miss".into(),
            (_, Some(x)) => format!("{x:.2}{suffix}"),
            (_, None) => "-".into(),
        }
    }
}

/// A baseline's result against the CPU reference of its row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "detail")]
pub enum BaselineCheck {
    /// Nothing to check: the `api` family's timings (which the rows' own checks cover) and
    /// reports written before baseline results were checked.
    #[default]
    NotChecked,
    /// The result equals the reference (the detail says how it was compared).
    Passed(String),
    /// The result differs from the reference: got and want.
    Failed(String),
    /// The program ran for this row but printed no result for it: exit status, stderr's tail.
    Missing(String),
}

impl BaselineCheck {
    /// Failed or missing: no speedup to report.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_) | Self::Missing(_))
    }

    /// The detail, if any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::NotChecked => None,
            Self::Passed(d) | Self::Failed(d) | Self::Missing(d) => Some(d),
        }
    }
}

/// One measured row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `reduce`, `stencil` or `copy`.
    pub family: String,
    /// The variant (`fast`, `interleaved`, `cuMemcpyDtoD`, ...).
    pub variant: String,
    /// Element type.
    pub ty: String,
    /// Elements.
    pub n: u64,
    /// Threads per block (0 for the copy).
    pub block: u32,
    /// Blocks of each launch, `+`-separated.
    pub grid: String,
    /// Bytes the operation must move (inputs read once, outputs written once).
    pub bytes: u64,
    /// Median, fastest and slowest repetition, microseconds.
    pub median_us: f64,
    /// Fastest repetition.
    pub min_us: f64,
    /// Slowest repetition.
    pub max_us: f64,
    /// `bytes / median`, GB/s.
    pub gbs: f64,
    /// `gbs` over the copy bandwidth of the same size in this run, percent.
    pub pct_copy: f64,
    /// Whether the result equals the CPU's (first run and last timed run).
    pub passed: bool,
    /// The check's detail.
    pub check: String,
    /// Comparisons measured in the same run.
    pub baselines: Vec<Baseline>,
}

impl Row {
    /// The size as printed: `2^24` (the nearest power of two).
    pub fn size(&self) -> String {
        format!("2^{}", (self.n as f64).log2().round())
    }

    /// The speedup over the baseline `name` (`cuda-c`, `cub`), if it ran for this row and its
    /// result did not fail the check.
    pub fn speedup_over(&self, name: &str) -> Option<f64> {
        self.baseline(name).and_then(|b| b.speedup)
    }

    /// The baseline `name`, if it was requested for this row.
    pub fn baseline(&self, name: &str) -> Option<&Baseline> {
        self.baselines.iter().find(|b| b.name == name)
    }

    /// The table cell of the baseline `name`: [`Baseline::cell`], `-` when it was not requested.
    pub fn baseline_cell(&self, name: &str, suffix: &str) -> String {
        self.baseline(name).map_or("-".into(), |b| b.cell(suffix))
    }
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Device name.
    pub device: String,
    /// Compute capability, `9.0`.
    pub compute_capability: String,
    /// The driver's CUDA version.
    pub driver_cuda: String,
    /// PTX loaded.
    pub ptx_arch: String,
    /// UTC date of the run, `YYYY-MM-DD`.
    pub date: String,
    /// Timed repetitions per round.
    pub reps: usize,
    /// Rounds per row (1 in reports written before rounds existed).
    #[serde(default = "one")]
    pub rounds: usize,
    /// What the baselines were, or why there were none.
    pub baselines: String,
    /// What the `api` family was compared with (CuPy, PyTorch versions), or why nothing.
    #[serde(default)]
    pub api_baselines: String,
    /// What the `transfer` family was compared with (the PCIe link, CuPy), or why nothing.
    #[serde(default)]
    pub transfer_baselines: String,
    /// The device's datasheet memory bandwidth, GB/s (0 in reports written before it).
    #[serde(default)]
    pub peak_gbs: f64,
    /// Every row.
    pub rows: Vec<Row>,
}

impl Report {
    /// JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serialises")
    }

    /// Parses [`to_json`](Self::to_json)'s output.
    pub fn from_json(text: &str) -> std::result::Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The (family, type) pairs measured, copy excluded, sorted: one table and one chart each.
    pub fn families(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .rows
            .iter()
            .filter(|r| !["copy", "api", "transfer", "steps"].contains(&r.family.as_str()))
            .map(|r| (r.family.clone(), r.ty.clone()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "family,variant,type,n,block,grid,bytes,median_us,min_us,max_us,gbs,pct_copy,passed,cuda_c_speedup,cub_speedup,kernel_us,cupy_speedup,torch_speedup\n",
        );
        for r in &self.rows {
            // A failed or missing baseline says so in its column (`FAIL`, `miss`).
            let speedup = |name: &str| match r.baseline(name) {
                Some(b) if b.check.is_failure() => b.cell(""),
                Some(b) => b.speedup.map_or(String::new(), |x| format!("{x:.3}")),
                None => String::new(),
            };
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.1},{:.1},{},{},{},{},{},{}",
                r.family,
                r.variant,
                r.ty,
                r.n,
                r.block,
                r.grid,
                r.bytes,
                r.median_us,
                r.min_us,
                r.max_us,
                r.gbs,
                r.pct_copy,
                r.passed,
                speedup("cuda-c"),
                speedup("cub"),
                r.baseline("kernel")
                    .and_then(|b| b.median_us)
                    .map_or(String::new(), |us| format!("{us:.3}")),
                speedup("cupy"),
                speedup("torch")
            );
        }
        s
    }
}

fn one() -> usize {
    1
}

/// Today's UTC date (`YYYY-MM-DD`), from the system clock.
pub fn utc_date() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

/// The Markdown report: one table per family and type, the charts, the method.
pub fn markdown(report: &Report, charts: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# ferrocuda bench: {} ({}, driver CUDA {}), {}\n",
        report.device, report.ptx_arch, report.driver_cuda, report.date
    );
    let _ = writeln!(
        s,
        "Each row: median, min and max of {} rounds x {} event-timed runs (GPU time: a blocking kernel hides the \
         host's launch overhead; the rounds take every row of the run in turn, so min..max covers the GPU's \
         drift over the whole run), inputs rotated over buffers larger than 4x L2 (and L2 flushed after the \
         scratch copy of the in-place reductions), checked against the CPU on the first and the last timed run. \
         GB/s counts the bytes the operation must move (reduction: input read once; stencil: input read + output \
         written; copy: read + write). `%copy` compares with the device-to-device copy of the same size in this run. \
         Baselines: {}, on the same input, each result checked against the row's CPU reference; `xC` = \
         baseline time / ferrocuda time (above 1: ferrocuda is faster), `FAIL` where the baseline's result \
         differs, `miss` where it gave none.\n",
        report.rounds, report.reps, report.baselines
    );
    for (family, ty) in report.families() {
        let _ = writeln!(s, "## {family} {ty}\n");
        let _ = writeln!(
            s,
            "| variant | n | block | grid | median us | min..max us | GB/s | %copy | vs CUDA C | vs CUB | check |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for r in report
            .rows
            .iter()
            .filter(|r| r.family == family && r.ty == ty)
        {
            let b = |name: &str| r.baseline_cell(name, "x");
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | {:.2}..{:.2} | {:.0} | {:.0}% | {} | {} | {} |",
                r.variant,
                r.size(),
                r.block,
                r.grid,
                r.median_us,
                r.min_us,
                r.max_us,
                r.gbs,
                r.pct_copy,
                b("cuda-c"),
                b("cub"),
                if r.passed { "PASS" } else { "FAIL" }
            );
        }
        let _ = writeln!(s);
    }
    steps_markdown(report, &mut s);
    half_markdown(report, &mut s);
    baseline_failures_markdown(report, &mut s);
    let _ = writeln!(
        s,
        "## copy (the ceiling)\n\n| copy | type | bytes | median us | GB/s (read + write) | % of cuMemcpyDtoD |\n|---|---|---:|---:|---:|---:|"
    );
    for r in report.rows.iter().filter(|r| r.family == "copy") {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.0} | {:.1}% |",
            r.variant,
            r.ty,
            r.bytes / 2,
            r.median_us,
            r.gbs,
            r.pct_copy
        );
    }
    api_markdown(report, &mut s);
    transfer_markdown(report, &mut s);
    for c in charts {
        let _ = writeln!(s, "\n![{c}]({c})");
    }
    s
}

/// Every baseline that failed its check or gave no result, with why: its row shows `FAIL` or
/// `miss` in place of a speedup, and this says what it got.
pub fn baseline_failures(report: &Report) -> Vec<String> {
    report
        .rows
        .iter()
        .flat_map(|r| {
            r.baselines
                .iter()
                .filter(|b| b.check.is_failure())
                .map(|b| {
                    format!(
                        "{} {} {} {} block {}: {} {}: {}",
                        r.family,
                        r.variant,
                        r.ty,
                        r.size(),
                        r.block,
                        b.name,
                        if matches!(b.check, BaselineCheck::Failed(_)) {
                            "FAIL"
                        } else {
                            "miss"
                        },
                        b.check.detail().unwrap_or_default()
                    )
                })
        })
        .collect()
}

fn baseline_failures_markdown(report: &Report, s: &mut String) {
    let failures = baseline_failures(report);
    if failures.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## baselines without a valid result\n\nThese baselines' results differ from the CPU \
         reference of their row (`FAIL`) or never came (`miss`); they have no speedup.\n"
    );
    for f in failures {
        let _ = writeln!(s, "- {f}");
    }
    let _ = writeln!(s);
}

/// The `api` family's table: the wall-clock cost of one library call against its kernel, CuPy
/// and PyTorch in the same run.
fn api_markdown(report: &Report, s: &mut String) {
    let rows: Vec<_> = report.rows.iter().filter(|r| r.family == "api").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## api: one library call, wall clock\n\nPer call, from a Rust program, f32 input already on the \
         device: `reduce::sum` (result on the host) and `reduce::sum_to_f32` (the same values as f16 and \
         bf16, summed in f32) one call at a time; `ReducePlan::run_to_device` (result left \
         on the device) and `stencil::apply_into` (R = 3; returns without waiting) back to back with one wait, \
         divided by the calls. Median, min and max over the timed calls (over 5 batches for the back-to-back \
         ones). `kernel`: the same kernel alone, event-timed. One input per size, not rotated: an input that fits \
         in L2 is read from L2 by every call after the first, ours and Python's alike. CuPy (`float(x.sum())`) and PyTorch \
         (`t.sum().item()`; `conv1d` back to back with one synchronize for the stencil) per call from Python in \
         the same run: {}. `xCuPy` / `xTorch` = their time / ours (above 1: ferrocuda is faster).\n",
        if report.api_baselines.is_empty() {
            "not run"
        } else {
            &report.api_baselines
        }
    );
    let _ = writeln!(
        s,
        "| call | type | n | median us | min..max us | kernel us | overhead us | CuPy us | xCuPy | Torch us | xTorch | check |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for &r in &rows {
        let base = |name: &str| r.baselines.iter().find(|b| b.name == name);
        let us = |name: &str| {
            base(name)
                .and_then(|b| b.median_us)
                .map_or("-".into(), |us| format!("{us:.1}"))
        };
        let x = |name: &str| r.baseline_cell(name, "x");
        let overhead = base("kernel")
            .and_then(|b| b.median_us)
            .map_or("-".into(), |us| format!("{:.1}", r.median_us - us));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1}..{:.1} | {} | {} | {} | {} | {} | {} | {} |",
            r.variant,
            r.ty,
            r.size(),
            r.median_us,
            r.min_us,
            r.max_us,
            us("kernel"),
            overhead,
            us("cupy"),
            x("cupy"),
            us("torch"),
            x("torch"),
            if r.passed { "PASS" } else { "FAIL" }
        );
    }
    api_native_markdown(&rows, s);
}

/// The `transfer` family's table: pinned copies both ways against the link and CuPy, and a copy
/// overlapped with kernels on two streams.
/// The `steps` family: the iterated stencil against the one-step stencil repeated.
fn steps_markdown(report: &Report, s: &mut String) {
    let rows: Vec<_> = report.rows.iter().filter(|r| r.family == "steps").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## steps: several time steps per pass\n\nThe same number of time steps of one stencil, \
         periodic, timed in turn both ways: `stencil::Iteration` (k steps a pass, `kN` in the variant) and \
         `stencil::apply_into` once a step (`one-step`). `x one-step` = the one-step time / the iterated \
         time, the ratio of time steps per second. GB/s counts the iteration's passes (read + write \
         each). The check: the two results have the same bits.\n"
    );
    let _ = writeln!(
        s,
        "| variant | type | n | steps, passes | median us | one-step us | x one-step | steps/s | GB/s | check |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in rows {
        let one = r.baselines.iter().find(|b| b.name == "one-step");
        // `grid` is "S steps, P passes".
        let per_s = (r.grid.split(' ').next())
            .and_then(|t| t.parse::<f64>().ok())
            .map_or("-".into(), |t| format!("{:.0}", t / (r.median_us * 1e-6)));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {:.0} | {} |",
            r.variant,
            r.ty,
            r.size(),
            r.grid,
            r.median_us,
            one.and_then(|b| b.median_us)
                .map_or("-".into(), |us| format!("{us:.1}")),
            r.baseline_cell("one-step", "x"),
            per_s,
            r.gbs,
            if r.passed { "PASS" } else { "FAIL" }
        );
    }
    let _ = writeln!(s);
}

fn transfer_markdown(report: &Report, s: &mut String) {
    let rows: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.family == "transfer")
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## transfer: host and device, and streams\n\nCopies between page-locked host memory \
         (`PinnedBuffer`) and the device on the GPU's stream, event-timed ({}). `xlink` = the time the \
         link's rate takes for the bytes / ours (the share of the link reached); `xCuPy` = CuPy's pinned \
         copy on a stream / ours. The last row: an upload on one stream beside stencils on another, its \
         best median against the two on one stream (`serial`).\n",
        if report.transfer_baselines.is_empty() {
            "no baselines"
        } else {
            &report.transfer_baselines
        }
    );
    let _ = writeln!(
        s,
        "| call | n | bytes | median us | GB/s | link us | xlink | CuPy us | xCuPy | serial us | check |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for &r in &rows {
        let us = |name: &str| {
            r.baselines
                .iter()
                .find(|b| b.name == name)
                .and_then(|b| b.median_us)
                .map_or("-".into(), |us| format!("{us:.1}"))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {}: {} |",
            r.variant,
            r.size(),
            r.bytes,
            r.median_us,
            r.gbs,
            us("link"),
            r.baseline_cell("link", "x"),
            us("cupy"),
            r.baseline_cell("cupy", "x"),
            us("serial"),
            if r.passed { "PASS" } else { "FAIL" },
            r.check
        );
    }
}

/// The 16-bit sums' other Python baselines: the libraries' plain `x.sum()`, whose result is in
/// the 16-bit type (the rows' CuPy and Torch columns are their sums with `dtype=float32`).
fn api_native_markdown(rows: &[&Row], s: &mut String) {
    let native = super::api::NATIVE_SUFFIX;
    let rows: Vec<&&Row> = rows
        .iter()
        .filter(|r| r.baselines.iter().any(|b| b.name.ends_with(native)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n`{}` of f16 and bf16: the CuPy and Torch columns above are `x.sum(dtype=float32)`, the same \
         work as ours; below, the libraries' plain `x.sum()` of the 16-bit tensor (its result in the \
         16-bit type, checked against the exact total rounded once to it). CuPy has no bf16.\n",
        super::api::API_HALF_SUM
    );
    let _ = writeln!(
        s,
        "| type | n | ours us | CuPy x.sum() us | xCuPy | Torch x.sum() us | xTorch |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let cell = |lib: &str| {
            let name = format!("{lib}{native}");
            let us = r
                .baselines
                .iter()
                .find(|b| b.name == name)
                .and_then(|b| b.median_us)
                .map_or("-".into(), |us| format!("{us:.1}"));
            (us, r.baseline_cell(&name, "x"))
        };
        let (cupy, xcupy) = cell("cupy");
        let (torch, xtorch) = cell("torch");
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {cupy} | {xcupy} | {torch} | {xtorch} |",
            r.ty,
            r.size(),
            r.median_us
        );
    }
}

/// The 16-bit float rows beside the `f32` row of the same family, variant, size and block: the
/// bytes per second of each, and their ratio (the 16-bit types move half the bytes per element).
fn half_markdown(report: &Report, s: &mut String) {
    let pairs: Vec<(&Row, &Row)> = report
        .rows
        .iter()
        .filter(|r| (r.ty == "f16" || r.ty == "bf16") && r.family != "api")
        .filter_map(|h| {
            report
                .rows
                .iter()
                .find(|f| {
                    f.ty == "f32"
                        && f.family == h.family
                        && f.variant == h.variant
                        && f.n == h.n
                        && f.block == h.block
                })
                .map(|f| (h, f))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## 16-bit floats against f32\n\nThe same row for a 16-bit type and for `f32` in this run: \
         bytes per second of each (the 16-bit rows move half the bytes per element) and the ratio.\n"
    );
    let _ = writeln!(
        s,
        "| family | variant | type | n | GB/s | f32 GB/s | of f32 | %copy | f32 %copy |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (h, f) in pairs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.1}% | {:.0}% | {:.0}% |",
            h.family,
            h.variant,
            h.ty,
            h.size(),
            h.gbs,
            f.gbs,
            100.0 * h.gbs / f.gbs,
            h.pct_copy,
            f.pct_copy
        );
    }
    let _ = writeln!(s);
}

/// The same row in two runs: whether each run's median lies inside the other's min..max.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    /// `family variant type 2^k block b`.
    pub row: String,
    /// Median, min and max of the first run, microseconds.
    pub first: [f64; 3],
    /// Median, min and max of the second run, microseconds.
    pub second: [f64; 3],
}

impl Agreement {
    /// Both medians inside the other run's min..max.
    pub fn holds(&self) -> bool {
        let inside = |m: f64, r: &[f64; 3]| r[1] <= m && m <= r[2];
        inside(self.second[0], &self.first) && inside(self.first[0], &self.second)
    }

    /// The second median over the first, minus one, percent.
    pub fn change_pct(&self) -> f64 {
        100.0 * (self.second[0] / self.first[0] - 1.0)
    }
}

/// Two runs compared row by row (rows are matched by family, variant, type, size and block).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Rows present in both, in the first run's order.
    pub rows: Vec<Agreement>,
    /// Rows of one run only.
    pub unmatched: Vec<String>,
}

/// Compares two reports: is each median reproduced within the spread the other run printed?
pub fn compare(first: &Report, second: &Report) -> Comparison {
    let key = |r: &Row| {
        format!(
            "{} {} {} {} block {}",
            r.family,
            r.variant,
            r.ty,
            r.size(),
            r.block
        )
    };
    let spread = |r: &Row| [r.median_us, r.min_us, r.max_us];
    let second_rows: BTreeMap<String, &Row> = second.rows.iter().map(|r| (key(r), r)).collect();
    let mut out = Comparison::default();
    for r in &first.rows {
        match second_rows.get(&key(r)) {
            Some(s) => out.rows.push(Agreement {
                row: key(r),
                first: spread(r),
                second: spread(s),
            }),
            None => out.unmatched.push(format!("{} (first run only)", key(r))),
        }
    }
    let first_keys: std::collections::BTreeSet<String> = first.rows.iter().map(key).collect();
    out.unmatched.extend(
        second
            .rows
            .iter()
            .map(key)
            .filter(|k| !first_keys.contains(k))
            .map(|k| format!("{k} (second run only)")),
    );
    out
}
