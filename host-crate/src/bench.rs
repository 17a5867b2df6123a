//! `ferrocuda bench`: every kernel family over a range of sizes, each row checked against the
//! CPU, timed against the device-to-device copy of the same run, compared with the same
//! algorithms in CUDA C and with CUB where `nvcc` is available, written as a Markdown report,
//! JSON, CSV and one SVG chart per family.
//!
//! Method, for every row: inputs are rotated over as many identical buffers as it takes to
//! exceed four times the L2 cache, so that small sizes are measured from device memory and
//! not from L2; three warm-up runs; `reps` event-timed runs with the blocking kernel of
//! [`timing`](crate::timing) (GPU time only); median, min and max. The result of the first run
//! and of the last timed run are both checked against the CPU.
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cust::memory::{AsyncCopyDestination, DeviceBuffer};
use serde::{Deserialize, Serialize};

use crate::cpu::{Check, ReduceReference, SplitMix64, check_stencil};
use crate::element::{ElemType, Element};
use crate::error::{CudaContext, Error, Result};
use crate::gpu::Gpu;
use crate::reduce::{ReduceOp, ReduceRun, ReduceVariant};
use crate::stencil::{Boundary, StencilRun, StencilVariant, Taps};
use crate::timing::{Stats, time_on_stream};

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
    /// Block sizes to try per variant (each variant's default when empty).
    pub blocks: Vec<u32>,
    /// Stencil radius.
    pub radius: u32,
    /// Timed repetitions.
    pub reps: usize,
    /// Where the report goes.
    pub out: PathBuf,
    /// Run the CUDA C and CUB baselines when `nvcc` is found.
    pub baselines: bool,
}

impl BenchConfig {
    /// The default run of `cargo xtask bench`.
    pub fn default_run() -> Self {
        Self {
            sizes: vec![1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28],
            types: vec![ElemType::F32, ElemType::I32],
            reduce_variants: ReduceVariant::ALL.to_vec(),
            stencil_variants: StencilVariant::ALL.to_vec(),
            blocks: Vec::new(),
            radius: crate::stencil::STENCIL_DEFAULT_RADIUS,
            reps: 20,
            out: PathBuf::from("target/ferrocuda/report"),
            baselines: true,
        }
    }
}

/// A comparison with another implementation measured in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `cuda-c` (the same algorithm compiled by nvcc) or `cub`.
    pub name: String,
    /// Its median time.
    pub median_us: f64,
    /// Its time over ours: above 1 means ours is faster.
    pub speedup: f64,
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
    /// Timed repetitions per row.
    pub reps: usize,
    /// What the baselines were, or why there were none.
    pub baselines: String,
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
            .filter(|r| r.family != "copy")
            .map(|r| (r.family.clone(), r.ty.clone()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "family,variant,type,n,block,grid,bytes,median_us,min_us,max_us,gbs,pct_copy,passed,cuda_c_speedup,cub_speedup\n",
        );
        for r in &self.rows {
            let speedup = |name: &str| {
                r.baselines
                    .iter()
                    .find(|b| b.name == name)
                    .map_or(String::new(), |b| format!("{:.3}", b.speedup))
            };
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.1},{:.1},{},{},{}",
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
                speedup("cub")
            );
        }
        s
    }
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

/// How many buffers of `bytes` it takes to exceed four L2 caches (1 to 64).
pub fn rotation(gpu: &Gpu, bytes: usize) -> usize {
    (4 * gpu.props().l2_bytes as usize)
        .div_ceil(bytes.max(1))
        .clamp(1, 64)
}

#[allow(clippy::too_many_arguments)]
fn stats_row(
    family: &str,
    variant: &str,
    ty: ElemType,
    n: usize,
    block: u32,
    grid: String,
    bytes: u64,
    stats: Stats,
    copy_gbs: f64,
    check: Check,
) -> Row {
    let gbs = stats.gbs(bytes);
    Row {
        family: family.into(),
        variant: variant.into(),
        ty: ty.name().into(),
        n: n as u64,
        block,
        grid,
        bytes,
        median_us: stats.median_s * 1e6,
        min_us: stats.min_s * 1e6,
        max_us: stats.max_s * 1e6,
        gbs,
        pct_copy: 100.0 * gbs / copy_gbs,
        passed: check.passed,
        check: check.detail,
        baselines: Vec::new(),
    }
}

/// The device-to-device copy of `bytes` (rotated like everything else): the ceiling.
fn copy_row(gpu: &Gpu, bytes: usize, reps: usize) -> Result<Row> {
    let words = bytes.div_ceil(4).max(1);
    let k = rotation(gpu, 2 * bytes);
    let src: Vec<DeviceBuffer<u32>> = (0..k)
        .map(|_| gpu.upload(&vec![0x3f80_0000u32; words], "copy source"))
        .collect::<Result<_>>()?;
    let mut dst: Vec<DeviceBuffer<u32>> = (0..k)
        .map(|_| gpu.alloc(words, "copy destination"))
        .collect::<Result<_>>()?;
    let stats = time_on_stream(
        gpu,
        3,
        reps,
        |_| Ok(()),
        |i| {
            // SAFETY: both buffers hold `words` words and nothing else uses them.
            unsafe { dst[i % k].async_copy_from(&src[i % k], gpu.stream()) }
                .call("cuMemcpyDtoDAsync")
        },
    )?;
    let last = gpu.download(&dst[(reps.max(1) - 1) % k])?;
    let check = if last.iter().all(|&w| w == 0x3f80_0000) {
        Check {
            passed: true,
            detail: "every word copied".into(),
        }
    } else {
        Check {
            passed: false,
            detail: "destination differs from the source".into(),
        }
    };
    let moved = 2 * 4 * words as u64;
    let mut row = stats_row(
        "copy",
        "cuMemcpyDtoD",
        ElemType::U32,
        words,
        0,
        "-".into(),
        moved,
        stats,
        1.0,
        check,
    );
    row.pct_copy = 100.0;
    Ok(row)
}

/// Input values: integers like the book's `rand() & 0xFF`, floats uniform in [-1, 1).
pub trait Sample: Element {
    /// One value.
    fn sample(rng: &mut SplitMix64) -> Self;
}
macro_rules! sample {
    (int: $($t:ty),*; float: $($f:ty),*) => {
        $(impl Sample for $t { fn sample(rng: &mut SplitMix64) -> Self { (rng.next_u64() & 0xFF) as $t } })*
        $(impl Sample for $f { fn sample(rng: &mut SplitMix64) -> Self { rng.next_f64_signed() as $f } })*
    };
}
sample!(int: i32, u32, i64, u64; float: f32, f64);

fn blocks_for(cfg: &BenchConfig, default: u32, ok: impl Fn(u32) -> bool) -> Vec<u32> {
    if cfg.blocks.is_empty() {
        vec![default]
    } else {
        cfg.blocks.iter().copied().filter(|&b| ok(b)).collect()
    }
}

fn reduce_rows<T: Sample>(
    gpu: &Gpu,
    cfg: &BenchConfig,
    n: usize,
    copy_gbs: f64,
    progress: &mut Progress,
) -> Result<Vec<Row>> {
    let mut rng = SplitMix64::new(n as u64);
    let host: Vec<T> = (0..n).map(|_| T::sample(&mut rng)).collect();
    let reference = ReduceReference::of(ReduceOp::Sum, &host, |v| v);
    let k = rotation(gpu, n * size_of::<T>());
    let inputs: Vec<DeviceBuffer<T>> = (0..k)
        .map(|_| gpu.upload(&host, "bench input"))
        .collect::<Result<_>>()?;
    let mut rows = Vec::new();
    for &v in cfg
        .reduce_variants
        .iter()
        .filter(|v| v.supports_type(T::TYPE))
    {
        for block in blocks_for(cfg, v.default_block(), |b| v.block_error(b).is_none()) {
            progress.step(&format!(
                "reduce {} {} n={n} block {block}",
                v.name(),
                T::TYPE
            ));
            let mut runs: Vec<ReduceRun<T>> = inputs
                .iter()
                .map(|b| ReduceRun::new(gpu, v, ReduceOp::Sum, b, block))
                .collect::<Result<_>>()?;
            let first = reference.check(runs[0].run()?, runs[0].rounding_depth());
            let runs = RefCell::new(runs);
            let stats = time_on_stream(
                gpu,
                3,
                cfg.reps,
                |i| runs.borrow_mut()[i % k].setup(),
                |i| runs.borrow_mut()[i % k].launch(),
            )?;
            let runs = runs.into_inner();
            let lastrun = &runs[(cfg.reps.max(1) - 1) % k];
            let last = reference.check(lastrun.finish()?, lastrun.rounding_depth());
            let check = Check::first_then_last(first, last);
            let grid = lastrun
                .launches()
                .iter()
                .map(|(_, c)| c.grid[0].to_string())
                .collect::<Vec<_>>()
                .join("+");
            rows.push(stats_row(
                "reduce",
                v.name(),
                T::TYPE,
                n,
                block,
                grid,
                lastrun.bytes(),
                stats,
                copy_gbs,
                check,
            ));
        }
    }
    Ok(rows)
}

fn stencil_rows<T: Sample>(
    gpu: &Gpu,
    cfg: &BenchConfig,
    n: usize,
    copy_gbs: f64,
    progress: &mut Progress,
) -> Result<Vec<Row>> {
    let mut rng = SplitMix64::new(n as u64 + 1);
    let host: Vec<T> = (0..n).map(|_| T::sample(&mut rng)).collect();
    let taps = Taps::<T>::Sum { radius: cfg.radius };
    let boundary = Boundary::Zero;
    let k = rotation(gpu, 2 * n * size_of::<T>());
    let inputs: Vec<DeviceBuffer<T>> = (0..k)
        .map(|_| gpu.upload(&host, "bench stencil input"))
        .collect::<Result<_>>()?;
    let mut outputs: Vec<DeviceBuffer<T>> = (0..k)
        .map(|_| gpu.alloc(n, "bench stencil output"))
        .collect::<Result<_>>()?;
    let mut rows = Vec::new();
    for &v in cfg
        .stencil_variants
        .iter()
        .filter(|v| v.supports_type(T::TYPE))
    {
        for block in blocks_for(cfg, v.default_block(), |b| v.error(&taps, b).is_none()) {
            progress.step(&format!(
                "stencil {} r{} {} n={n} block {block}",
                v.name(),
                cfg.radius,
                T::TYPE
            ));
            for o in outputs.iter_mut() {
                crate::stencil::poison(gpu, o)?;
            }
            let mut runs: Vec<StencilRun<T>> = inputs
                .iter()
                .zip(outputs.iter_mut())
                .map(|(i, o)| StencilRun::new(gpu, v, &taps, boundary, i, o, block))
                .collect::<Result<_>>()?;
            runs[0].run()?;
            let (grid, bytes) = (runs[0].config().grid[0].to_string(), runs[0].bytes());
            let runs = RefCell::new(runs);
            let stats = time_on_stream(
                gpu,
                3,
                cfg.reps,
                |_| Ok(()),
                |i| runs.borrow_mut()[i % k].launch(),
            )?;
            runs.borrow()[0].finish()?;
            drop(runs);
            // Every buffer pair ran at least once (warm-up and timed runs cycle through all of
            // them); the first and the last one used are checked.
            let first = check_stencil(&host, &taps, boundary, &gpu.download(&outputs[0])?);
            let last = check_stencil(
                &host,
                &taps,
                boundary,
                &gpu.download(&outputs[(cfg.reps.max(1) - 1) % k])?,
            );
            let check = Check::first_then_last(first, last);
            let name = format!("{}_r{}", v.name(), cfg.radius);
            rows.push(stats_row(
                "stencil",
                &name,
                T::TYPE,
                n,
                block,
                grid,
                bytes,
                stats,
                copy_gbs,
                check,
            ));
        }
    }
    Ok(rows)
}

/// A progress line on stderr.
struct Progress {
    done: usize,
    total: usize,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.done += 1;
        let width = 30;
        let filled = width * self.done / self.total.max(1);
        eprint!(
            "\r[{}{}] {:>3}/{} {:<60}",
            "#".repeat(filled),
            ".".repeat(width - filled.min(width)),
            self.done,
            self.total,
            what
        );
        if self.done >= self.total {
            eprintln!();
        }
    }
}

fn count_steps(cfg: &BenchConfig) -> usize {
    let taps = Taps::<f32>::Sum { radius: cfg.radius };
    let mut per_size = 0;
    for &ty in &cfg.types {
        for v in cfg.reduce_variants.iter().filter(|v| v.supports_type(ty)) {
            per_size += blocks_for(cfg, v.default_block(), |b| v.block_error(b).is_none()).len();
        }
        if matches!(ty, ElemType::F32 | ElemType::F64 | ElemType::I32) {
            for v in cfg.stencil_variants.iter().filter(|v| v.supports_type(ty)) {
                per_size +=
                    blocks_for(cfg, v.default_block(), |b| v.error(&taps, b).is_none()).len();
            }
        }
    }
    per_size * cfg.sizes.len()
}

/// Runs the benchmark.
pub fn run(gpu: &Gpu, cfg: &BenchConfig) -> Result<Report> {
    let p = gpu.props();
    let mut progress = Progress {
        done: 0,
        total: count_steps(cfg),
    };
    let baselines = if cfg.baselines {
        Baselines::prepare(gpu, &cfg.out.join("baselines"))
    } else {
        Err("disabled with --no-baselines".into())
    };
    let mut rows = Vec::new();
    for &n in &cfg.sizes {
        for &ty in &cfg.types {
            let copy = copy_row(gpu, n * ty.size(), cfg.reps)?;
            let copy_gbs = copy.gbs;
            rows.push(Row {
                ty: ty.name().into(),
                ..copy
            });
            let mut new = crate::with_elem_type!(ty, T => reduce_rows::<T>(gpu, cfg, n, copy_gbs, &mut progress))?;
            // A stencil reads n elements and writes n, as the copy of n elements does.
            if matches!(ty, ElemType::F32 | ElemType::F64 | ElemType::I32)
                && !cfg.stencil_variants.is_empty()
            {
                new.extend(crate::with_elem_type!(ty, T => stencil_rows::<T>(gpu, cfg, n, copy_gbs, &mut progress))?);
            }
            if let Ok(b) = &baselines {
                b.attach(cfg, ty, n, &mut new);
            }
            rows.extend(new);
        }
    }
    Ok(Report {
        device: p.name.clone(),
        compute_capability: format!("{}.{}", p.compute_capability.0, p.compute_capability.1),
        driver_cuda: format!(
            "{}.{}",
            p.driver_version / 1000,
            p.driver_version % 1000 / 10
        ),
        ptx_arch: gpu.ptx_arch().into(),
        date: utc_date(),
        reps: cfg.reps,
        baselines: match &baselines {
            Ok(b) => format!(
                "CUDA C (same algorithms) and CUB, compiled by `{}`",
                b.nvcc_version
            ),
            Err(why) => format!("none: {why}"),
        },
        rows,
    })
}

/// The CUDA C and CUB programs, compiled with nvcc for this device.
struct Baselines {
    textbook: PathBuf,
    cub: PathBuf,
    nvcc_version: String,
}

const TEXTBOOK_CU: &str = include_str!("../baselines/textbook.cu");
const CUB_CU: &str = include_str!("../baselines/cub_reduce.cu");

impl Baselines {
    fn prepare(gpu: &Gpu, dir: &Path) -> std::result::Result<Self, String> {
        let nvcc = ["nvcc", "/usr/local/cuda/bin/nvcc"]
            .into_iter()
            .find(|c| {
                Command::new(c)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .ok_or("nvcc not found (the baselines need the CUDA toolkit)")?;
        let version = Command::new(nvcc)
            .arg("--version")
            .output()
            .map_err(|e| e.to_string())?;
        let nvcc_version = String::from_utf8_lossy(&version.stdout)
            .lines()
            .last()
            .unwrap_or("nvcc")
            .trim()
            .to_string();
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let (major, minor) = gpu.props().compute_capability;
        let arch = format!("-arch=sm_{major}{minor}");
        let build = |name: &str, source: &str| -> std::result::Result<PathBuf, String> {
            let src = dir.join(format!("{name}.cu"));
            let exe = dir.join(name);
            std::fs::write(&src, source).map_err(|e| format!("writing {}: {e}", src.display()))?;
            let out = Command::new(nvcc)
                .args(["-O3", "-std=c++17", &arch, "-o"])
                .arg(&exe)
                .arg(&src)
                .output()
                .map_err(|e| format!("running nvcc: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "nvcc failed on {name}.cu: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(exe)
        };
        Ok(Self {
            textbook: build("textbook", TEXTBOOK_CU)?,
            cub: build("cub_reduce", CUB_CU)?,
            nvcc_version,
        })
    }

    /// Runs the baselines for the rows of one (type, n) and attaches their times.
    fn attach(&self, cfg: &BenchConfig, ty: ElemType, n: usize, rows: &mut [Row]) {
        let reps = cfg.reps.to_string();
        let specs = |family: &str, names: &[&str]| -> Vec<String> {
            rows.iter()
                .filter(|r| r.family == family && names.iter().any(|n| r.variant == *n))
                .map(|r| {
                    format!(
                        "{}:{}",
                        r.variant.trim_end_matches(&format!("_r{}", cfg.radius)),
                        r.block
                    )
                })
                .collect()
        };
        let textbook_reduce: Vec<&str> = ReduceVariant::ALL
            .iter()
            .filter(|v| **v != ReduceVariant::Fast)
            .map(|v| v.name())
            .collect();
        let reduce_specs = specs("reduce", &textbook_reduce);
        let mut times = BTreeMap::new();
        if !reduce_specs.is_empty() {
            let mut c = Command::new(&self.textbook);
            c.args(["reduce", ty.name(), &n.to_string(), &reps])
                .args(&reduce_specs);
            parse_baseline(&mut c, "reduce", &mut times);
        }
        if matches!(ty, ElemType::F32 | ElemType::F64 | ElemType::I32) {
            let stencil_names: Vec<String> = ["naive", "shared"]
                .iter()
                .map(|v| format!("{v}_r{}", cfg.radius))
                .collect();
            let names: Vec<&str> = stencil_names.iter().map(String::as_str).collect();
            let stencil_specs = specs("stencil", &names);
            if !stencil_specs.is_empty() {
                let mut c = Command::new(&self.textbook);
                c.args([
                    "stencil",
                    ty.name(),
                    &n.to_string(),
                    &cfg.radius.to_string(),
                    &reps,
                ])
                .args(&stencil_specs);
                parse_baseline(&mut c, "stencil", &mut times);
            }
        }
        for r in rows.iter_mut() {
            let key = (
                r.family.clone(),
                r.variant
                    .trim_end_matches(&format!("_r{}", cfg.radius))
                    .to_string(),
                r.block,
            );
            if let Some(&us) = times.get(&key) {
                r.baselines.push(Baseline {
                    name: "cuda-c".into(),
                    median_us: us,
                    speedup: us / r.median_us,
                });
            }
        }
        if let Some(fast) = rows
            .iter_mut()
            .find(|r| r.family == "reduce" && r.variant == "fast")
        {
            let out = Command::new(&self.cub)
                .args(["sum", ty.name(), &n.to_string(), &reps])
                .output();
            if let Some(us) = out
                .ok()
                .and_then(|o| median_of(&String::from_utf8_lossy(&o.stdout)))
            {
                fast.baselines.push(Baseline {
                    name: "cub".into(),
                    median_us: us,
                    speedup: us / fast.median_us,
                });
            }
        }
    }
}

fn median_of(line: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("median_us="))
        .and_then(|v| v.parse().ok())
}

/// Runs a baseline command and records `(family, variant, block) -> median us` per line.
fn parse_baseline(c: &mut Command, family: &str, times: &mut BTreeMap<(String, String, u32), f64>) {
    let Ok(out) = c.output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((spec, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((variant, block)) = spec.split_once(':') else {
            continue;
        };
        if let (Ok(block), Some(us)) = (block.parse(), median_of(rest)) {
            times.insert((family.to_string(), variant.to_string(), block), us);
        }
    }
}

/// Writes `report.md`, `results.json`, `results.csv` and the SVG charts into `dir`; returns the
/// files written.
pub fn write_report(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |e: std::io::Error, p: &Path| Error::InvalidArgument {
        what: format!("writing {}: {e}", p.display()),
    };
    std::fs::create_dir_all(dir).map_err(|e| io(e, dir))?;
    let mut files = Vec::new();
    let mut write = |name: &str, text: String| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| io(e, &p))?;
        files.push(p);
        Ok(())
    };
    write("results.json", report.to_json())?;
    write("results.csv", report.to_csv())?;
    let mut charts = Vec::new();
    for (family, ty) in &report.families() {
        let name = format!("{family}-{ty}.svg");
        write(&name, crate::chart::bandwidth_chart(report, family, ty))?;
        charts.push(name);
    }
    write("report.md", markdown(report, &charts))?;
    Ok(files)
}

/// The Markdown report: one table per family and type, the charts, the method.
pub fn markdown(report: &Report, charts: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# ferrocuda bench: {} ({} , driver CUDA {}), {}\n",
        report.device, report.ptx_arch, report.driver_cuda, report.date
    );
    let _ = writeln!(
        s,
        "Each row: median of {} event-timed runs (GPU time: a blocking kernel hides the host's launch overhead), \
         inputs rotated over buffers larger than 4x L2, checked against the CPU on the first and the last timed run. \
         GB/s counts the bytes the operation must move (reduction: input read once; stencil: input read + output \
         written; copy: read + write). `%copy` compares with the device-to-device copy of the same size in this run. \
         Baselines: {}; `xC` = baseline time / ferrocuda time (above 1: ferrocuda is faster).\n",
        report.reps, report.baselines
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
            let b = |name: &str| {
                r.baselines
                    .iter()
                    .find(|b| b.name == name)
                    .map_or("-".to_string(), |b| format!("{:.2}x", b.speedup))
            };
            let _ = writeln!(
                s,
                "| {} | 2^{} | {} | {} | {:.2} | {:.2}..{:.2} | {:.0} | {:.0}% | {} | {} | {} |",
                r.variant,
                (r.n as f64).log2().round(),
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
    let _ = writeln!(
        s,
        "## copy (the ceiling)\n\n| type | bytes | median us | GB/s (read + write) |\n|---|---:|---:|---:|"
    );
    for r in report.rows.iter().filter(|r| r.family == "copy") {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {:.0} |",
            r.ty,
            r.bytes / 2,
            r.median_us,
            r.gbs
        );
    }
    for c in charts {
        let _ = writeln!(s, "\n![{c}]({c})");
    }
    s
}
