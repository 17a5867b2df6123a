//! `ferrocuda bench`: every kernel family over a range of sizes, each row checked against the
//! CPU, timed against the device-to-device copy of the same run, compared with the same
//! algorithms in CUDA C and with CUB where `nvcc` is available, written as a Markdown report,
//! JSON, CSV and one SVG chart per family.
//!
//! Method, for every row: inputs are rotated over as many identical buffers as it takes to
//! exceed four times the L2 cache, so that small sizes are measured from device memory and
//! not from L2 (the in-place reductions, which copy their input to a scratch buffer first,
//! also flush L2 after that copy); `rounds` rounds, each of three warm-up runs and `reps`
//! event-timed runs with the blocking kernel of [`timing`](crate::timing) (GPU time only);
//! median, min and max over all rounds. The first round of each size and type runs as its
//! buffers are set up, the later rounds take every row of the whole run in turn, so a row's
//! min..max covers the GPU's drift over the run. (All sizes' buffers stay allocated until
//! the last round: about 8 GiB for the default run on an H200.)
//! The result of the first run and of the last timed run are both checked against the CPU.
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cust::memory::{AsyncCopyDestination, DeviceBuffer};
use serde::{Deserialize, Serialize};

use crate::cpu::{Check, ReduceReference, Sample, book_input, check_stencil};
use crate::element::ElemType;
use crate::error::{CudaContext, Error, Result};
use crate::gpu::Gpu;
use crate::reduce::{ReduceOp, ReduceRun, ReduceVariant};
use crate::stencil::{Boundary, StencilRun, StencilVariant, Taps};
use crate::timing::{L2Flush, Stats, time_samples};

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
    /// Timed repetitions per round.
    pub reps: usize,
    /// Rounds: every row of the run is timed in turn, `rounds` times.
    pub rounds: usize,
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
            rounds: 3,
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

impl Row {
    /// The size as printed: `2^24` (the nearest power of two).
    pub fn size(&self) -> String {
        format!("2^{}", (self.n as f64).log2().round())
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

/// How many buffers of `bytes` it takes to exceed four L2 caches (1 to 64).
pub fn rotation(gpu: &Gpu, bytes: usize) -> usize {
    (4 * gpu.props().l2_bytes as usize)
        .div_ceil(bytes.max(1))
        .clamp(1, 64)
}

fn blocks_for(cfg: &BenchConfig, default: u32, ok: impl Fn(u32) -> bool) -> Vec<u32> {
    if cfg.blocks.is_empty() {
        vec![default]
    } else {
        cfg.blocks.iter().copied().filter(|&b| ok(b)).collect()
    }
}

/// What one row measures.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// `cuMemcpyDtoD` of the group's input: the ceiling.
    Copy,
    Reduce(ReduceVariant, u32),
    Stencil(StencilVariant, u32),
}

/// The rows of one (size, type) group, in the order they are measured and reported.
fn jobs(cfg: &BenchConfig, ty: ElemType) -> Vec<Job> {
    let mut jobs = vec![Job::Copy];
    for &v in cfg.reduce_variants.iter().filter(|v| v.supports_type(ty)) {
        for b in blocks_for(cfg, v.default_block(), |b| v.block_error(b).is_none()) {
            jobs.push(Job::Reduce(v, b));
        }
    }
    let taps = Taps::<f32>::Sum { radius: cfg.radius };
    for &v in cfg.stencil_variants.iter().filter(|v| v.supports_type(ty)) {
        for b in blocks_for(cfg, v.default_block(), |b| v.error(&taps, b).is_none()) {
            jobs.push(Job::Stencil(v, b));
        }
    }
    jobs
}

/// One round of one row: its repetition times and, in the first and the last round, the CPU
/// checks of its output, in the order they ran.
struct Round {
    samples: Vec<f64>,
    checks: Vec<Check>,
    grid: String,
    bytes: u64,
}

/// The buffers of one (size, type) group, shared by all its rows: the host input, its copies
/// on the device (as many as it takes to exceed 4x L2, used in turn), one output per input for
/// the stencil and the copy.
struct Group<'g, T: Sample> {
    gpu: &'g Gpu,
    host: Vec<T>,
    reference: ReduceReference<T>,
    inputs: Vec<DeviceBuffer<T>>,
    outputs: Vec<DeviceBuffer<T>>,
    reps: usize,
    radius: u32,
}

impl<'g, T: Sample> Group<'g, T> {
    fn new(gpu: &'g Gpu, cfg: &BenchConfig, n: usize) -> Result<Self> {
        let host: Vec<T> = book_input(n, n as u64);
        let reference = ReduceReference::of(ReduceOp::Sum, &host, |v| v);
        let inputs = (0..rotation(gpu, n * size_of::<T>()))
            .map(|_| gpu.upload(&host, "bench input"))
            .collect::<Result<_>>()?;
        // The stencil and the copy read one buffer and write another.
        let outputs = (0..rotation(gpu, 2 * n * size_of::<T>()))
            .map(|_| gpu.alloc(n, "bench output"))
            .collect::<Result<_>>()?;
        Ok(Self {
            gpu,
            host,
            reference,
            inputs,
            outputs,
            reps: cfg.reps,
            radius: cfg.radius,
        })
    }

    /// The buffer the last timed repetition used, out of `k` in rotation.
    fn last_used(&self, k: usize) -> usize {
        (self.reps.max(1) - 1) % k
    }

    fn poison_outputs(&mut self) -> Result<()> {
        for o in self.outputs.iter_mut() {
            crate::stencil::poison(self.gpu, o)?;
        }
        Ok(())
    }

    /// Measures one round of `job`; `first` and `last` say whether to check the output.
    fn round(&mut self, job: Job, first: bool, last: bool, flush: &mut L2Flush) -> Result<Round> {
        match job {
            Job::Copy => self.copy_round(first || last),
            Job::Reduce(v, block) => self.reduce_round(v, block, first, last, flush),
            Job::Stencil(v, block) => self.stencil_round(v, block, first, last),
        }
    }

    fn copy_round(&mut self, check: bool) -> Result<Round> {
        let (gpu, k) = (self.gpu, self.outputs.len());
        if check {
            self.poison_outputs()?;
        }
        let (inputs, outputs) = (&self.inputs, &mut self.outputs);
        let samples = time_samples(
            gpu,
            3,
            self.reps,
            |_| Ok(()),
            |i| {
                // SAFETY: both buffers hold n elements and nothing else uses them.
                unsafe { outputs[i % k].async_copy_from(&inputs[i % k], gpu.stream()) }
                    .call("cuMemcpyDtoDAsync")
            },
        )?;
        let checks = if check {
            let got = gpu.download(&self.outputs[self.last_used(k)])?;
            let same = got.len() == self.host.len()
                && got.iter().zip(&self.host).all(|(a, b)| a.same_bits(*b));
            vec![Check {
                passed: same,
                detail: if same {
                    "every element copied".into()
                } else {
                    "destination differs from the source".into()
                },
            }]
        } else {
            gpu.synchronize()?;
            Vec::new()
        };
        Ok(Round {
            samples,
            checks,
            grid: "-".into(),
            bytes: 2 * (self.host.len() * size_of::<T>()) as u64,
        })
    }

    fn reduce_round(
        &mut self,
        v: ReduceVariant,
        block: u32,
        first: bool,
        last: bool,
        flush: &mut L2Flush,
    ) -> Result<Round> {
        let (gpu, k) = (self.gpu, self.inputs.len());
        let mut runs: Vec<ReduceRun<T>> = self
            .inputs
            .iter()
            .map(|b| ReduceRun::new(gpu, v, ReduceOp::Sum, b, block))
            .collect::<Result<_>>()?;
        let first_check = if first {
            Some(
                self.reference
                    .check(runs[0].run()?, runs[0].rounding_depth()),
            )
        } else {
            None
        };
        // The in-place variants copy their input into a scratch buffer before each run; the
        // flush keeps that copy from leaving the input in L2 for the timed kernel.
        let in_place = v.is_textbook();
        let runs = RefCell::new(runs);
        let samples = time_samples(
            gpu,
            3,
            self.reps,
            |i| {
                runs.borrow_mut()[i % k].setup()?;
                if in_place { flush.flush(gpu) } else { Ok(()) }
            },
            |i| runs.borrow_mut()[i % k].launch(),
        )?;
        let runs = runs.into_inner();
        let lastrun = &runs[self.last_used(k)];
        let result = lastrun.finish()?;
        let last_check = last.then(|| self.reference.check(result, lastrun.rounding_depth()));
        Ok(Round {
            samples,
            checks: first_check.into_iter().chain(last_check).collect(),
            grid: lastrun
                .launches()
                .iter()
                .map(|(_, c)| c.grid[0].to_string())
                .collect::<Vec<_>>()
                .join("+"),
            bytes: lastrun.bytes(),
        })
    }

    fn stencil_round(
        &mut self,
        v: StencilVariant,
        block: u32,
        first: bool,
        last: bool,
    ) -> Result<Round> {
        let (gpu, k) = (self.gpu, self.outputs.len());
        let taps = Taps::<T>::Sum {
            radius: self.radius,
        };
        let boundary = Boundary::Zero;
        let check = |host: &[T], out: &DeviceBuffer<T>| -> Result<Check> {
            Ok(check_stencil(host, &taps, boundary, &gpu.download(out)?))
        };
        if first || last {
            self.poison_outputs()?;
        }
        let mut first_check = None;
        if first {
            StencilRun::new(
                gpu,
                v,
                &taps,
                boundary,
                &self.inputs[0],
                &mut self.outputs[0],
                block,
            )?
            .run()?;
            first_check = Some(check(&self.host, &self.outputs[0])?);
        }
        let mut runs: Vec<StencilRun<T>> = self
            .inputs
            .iter()
            .zip(self.outputs.iter_mut())
            .map(|(i, o)| StencilRun::new(gpu, v, &taps, boundary, i, o, block))
            .collect::<Result<_>>()?;
        let (grid, bytes) = (runs[0].config().grid[0].to_string(), runs[0].bytes());
        let samples = time_samples(gpu, 3, self.reps, |_| Ok(()), |i| runs[i % k].launch())?;
        runs[0].finish()?;
        drop(runs);
        let last_check = if last {
            Some(check(&self.host, &self.outputs[self.last_used(k)])?)
        } else {
            None
        };
        Ok(Round {
            samples,
            checks: first_check.into_iter().chain(last_check).collect(),
            grid,
            bytes,
        })
    }
}

/// A group's measurements as they accumulate over the rounds.
struct Pending<'g> {
    ty: ElemType,
    n: usize,
    jobs: Vec<Job>,
    group: Box<dyn Rounds + 'g>,
    samples: Vec<Vec<f64>>,
    checks: Vec<Option<Check>>,
    shapes: Vec<(String, u64)>,
}

/// [`Group::round`] for any element type.
trait Rounds {
    fn round(&mut self, job: Job, first: bool, last: bool, flush: &mut L2Flush) -> Result<Round>;
}

impl<T: Sample> Rounds for Group<'_, T> {
    fn round(&mut self, job: Job, first: bool, last: bool, flush: &mut L2Flush) -> Result<Round> {
        Group::round(self, job, first, last, flush)
    }
}

impl<'g> Pending<'g> {
    fn new(gpu: &'g Gpu, cfg: &BenchConfig, ty: ElemType, n: usize) -> Result<Self> {
        let jobs = jobs(cfg, ty);
        let group: Box<dyn Rounds + 'g> =
            crate::with_elem_type!(ty, T => Box::new(Group::<T>::new(gpu, cfg, n)?));
        Ok(Self {
            ty,
            n,
            samples: vec![Vec::new(); jobs.len()],
            checks: vec![None; jobs.len()],
            shapes: vec![(String::new(), 0); jobs.len()],
            jobs,
            group,
        })
    }

    /// Times every row once more (`round` of `rounds`, from 0); the first and the last round
    /// also check every row against the CPU.
    fn round(
        &mut self,
        round: usize,
        rounds: usize,
        cfg: &BenchConfig,
        progress: &mut Progress,
        flush: &mut L2Flush,
    ) -> Result<()> {
        for (j, &job) in self.jobs.iter().enumerate() {
            if !matches!(job, Job::Copy) {
                progress.step(&format!(
                    "round {}/{rounds} {} {} n=2^{}",
                    round + 1,
                    job_name(job, cfg.radius),
                    self.ty,
                    self.n.ilog2()
                ));
            }
            let r = self
                .group
                .round(job, round == 0, round + 1 == rounds, flush)?;
            self.samples[j].extend(r.samples);
            for c in r.checks {
                self.checks[j] = Some(match self.checks[j].take() {
                    Some(first) => Check::first_then_last(first, c),
                    None => c,
                });
            }
            self.shapes[j] = (r.grid, r.bytes);
        }
        Ok(())
    }

    /// The rows, each over all its rounds; frees the group's buffers.
    fn rows(self, cfg: &BenchConfig) -> Vec<Row> {
        let mut rows: Vec<Row> = Vec::with_capacity(self.jobs.len());
        let parts = self
            .jobs
            .into_iter()
            .zip(self.samples)
            .zip(self.checks)
            .zip(self.shapes);
        for (((job, samples), check), (grid, bytes)) in parts {
            let stats = Stats::from_samples(samples);
            let check = check.expect("the first round checks every row");
            let gbs = stats.gbs(bytes);
            // The copy comes first in every group: the ceiling of the rows after it.
            let copy_gbs = rows.first().map_or(gbs, |c| c.gbs);
            rows.push(Row {
                family: job_family(job).into(),
                variant: job_name(job, cfg.radius),
                ty: self.ty.name().into(),
                n: self.n as u64,
                block: match job {
                    Job::Copy => 0,
                    Job::Reduce(_, b) | Job::Stencil(_, b) => b,
                },
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
            });
        }
        rows
    }
}

fn job_family(job: Job) -> &'static str {
    match job {
        Job::Copy => "copy",
        Job::Reduce(..) => "reduce",
        Job::Stencil(..) => "stencil",
    }
}

fn job_name(job: Job, radius: u32) -> String {
    match job {
        Job::Copy => "cuMemcpyDtoD".into(),
        Job::Reduce(v, _) => v.name().into(),
        Job::Stencil(v, _) => format!("{}_r{radius}", v.name()),
    }
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
            "\r[{}{}] {:>4}/{} {:<60}",
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

/// Runs the benchmark.
pub fn run(gpu: &Gpu, cfg: &BenchConfig) -> Result<Report> {
    let p = gpu.props();
    let steps: usize = cfg.types.iter().map(|&ty| jobs(cfg, ty).len() - 1).sum();
    let mut progress = Progress {
        done: 0,
        total: steps * cfg.sizes.len() * cfg.rounds.max(1),
    };
    let baselines = if cfg.baselines {
        Baselines::prepare(gpu, &cfg.out.join("baselines"))
    } else {
        Err("disabled with --no-baselines".into())
    };
    // Every group's buffers are allocated and its first round measured as the run goes; the
    // later rounds then take every group in turn, so that each row's samples span the whole
    // run (its cool start and its warm end alike), not one burst.
    let rounds = cfg.rounds.max(1);
    // One flush buffer serves every row.
    let mut flush = L2Flush::new(gpu)?;
    let mut pending = Vec::new();
    for &n in &cfg.sizes {
        for &ty in &cfg.types {
            let mut p = Pending::new(gpu, cfg, ty, n)?;
            p.round(0, rounds, cfg, &mut progress, &mut flush)?;
            pending.push(p);
        }
    }
    for round in 1..rounds {
        for p in &mut pending {
            p.round(round, rounds, cfg, &mut progress, &mut flush)?;
        }
    }
    // All buffers are freed before the baselines allocate theirs.
    let groups: Vec<(ElemType, usize, Vec<Row>)> = pending
        .into_iter()
        .map(|p| (p.ty, p.n, p.rows(cfg)))
        .collect();
    let mut rows = Vec::new();
    for (ty, n, mut new) in groups {
        if let Ok(b) = &baselines {
            b.attach(cfg, ty, n, &mut new);
        }
        rows.extend(new);
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
        rounds: cfg.rounds.max(1),
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

const COMMON_CUH: &str = include_str!("../baselines/common.cuh");
const TEXTBOOK_CU: &str = include_str!("../baselines/textbook.cu");
const CUB_CU: &str = include_str!("../baselines/cub_reduce.cu");

impl Baselines {
    fn prepare(gpu: &Gpu, dir: &Path) -> std::result::Result<Self, String> {
        let nvcc = crate::toolkit::find_tool("nvcc")
            .ok_or("nvcc not found (the baselines need the CUDA toolkit)")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let (major, minor) = gpu.props().compute_capability;
        let arch = format!("-arch=sm_{major}{minor}");
        let common = dir.join("common.cuh");
        std::fs::write(&common, COMMON_CUH)
            .map_err(|e| format!("writing {}: {e}", common.display()))?;
        let build = |name: &str, source: &str| -> std::result::Result<PathBuf, String> {
            let src = dir.join(format!("{name}.cu"));
            let exe = dir.join(name);
            std::fs::write(&src, source).map_err(|e| format!("writing {}: {e}", src.display()))?;
            let out = Command::new(&nvcc.path)
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
            nvcc_version: nvcc.version,
        })
    }

    /// Runs the baselines for the rows of one (type, n) and attaches their times.
    fn attach(&self, cfg: &BenchConfig, ty: ElemType, n: usize, rows: &mut [Row]) {
        // As many timed runs as each ferrocuda row gets over its rounds.
        let reps = (cfg.reps * cfg.rounds.max(1)).to_string();
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
         Baselines: {}; `xC` = baseline time / ferrocuda time (above 1: ferrocuda is faster).\n",
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
            let b = |name: &str| {
                r.baselines
                    .iter()
                    .find(|b| b.name == name)
                    .map_or("-".to_string(), |b| format!("{:.2}x", b.speedup))
            };
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
