//! `ferrocuda bench`: every kernel family over a range of sizes, each row checked against the
//! CPU, timed against the device-to-device copy of the same run, compared with the same
//! algorithms in CUDA C and with CUB where `nvcc` is available, written as a Markdown report,
//! JSON, CSV and one SVG chart per family.
//!
//! Method, for every row: inputs are rotated over as many identical buffers as it takes to
//! exceed four times the L2 cache, so that small sizes are measured from device memory and
//! not from L2 (the in-place reductions, which copy their input to a scratch buffer first,
//! also flush L2 after that copy); `rounds` rounds, each of three warm-up runs and `reps`
//! event-timed runs with the blocking kernel of [`timing`](ferrocuda_lessons::timing) (GPU time only);
//! median, min and max over all rounds. The first round of each size and type runs as its
//! buffers are set up, the later rounds take every row of the whole run in turn, so a row's
//! min..max covers the GPU's drift over the run. (All sizes' buffers stay allocated until
//! the last round: about 8 GiB for the default run on an H200; a run whose buffers cannot all
//! fit is refused before anything is allocated, with what each size takes.)
//! The result of the first run and of the last timed run are both checked against the CPU.
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use ferrocuda::DeviceBuffer;

use ferrocuda::copy::CopyRun;
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::error::{Error, Result};
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lessons::cpu::reproducible::{self as cpu_reproducible, Reproducible};
use ferrocuda_lessons::cpu::{Check, ReduceReference, book_input, check_stencil};
use ferrocuda_lessons::reduce::{ReduceOp, ReduceRun, ReduceVariant};
use ferrocuda_lessons::stencil::{Boundary, StencilRun, StencilVariant, Taps};
use ferrocuda_lessons::timing::{L2Flush, Stats, time_samples};

pub mod api;
mod baselines;
pub mod chart;
pub mod report;
pub mod reproducible;
pub mod steps;
pub mod transfer;

use baselines::{Baselines, Expected, ResultBits};
pub use report::{
    Agreement, Baseline, BaselineCheck, BenchConfig, Comparison, Report, Row, baseline_failures,
    compare, markdown, utc_date,
};

/// The seed of the input of `n` elements ([`book_input`]): the rows and the baselines, which
/// generate it themselves, must agree on it.
pub(crate) fn input_seed(n: usize) -> u64 {
    n as u64
}

/// The row of the bulk-copy kernel in the `copy` family (and its name for `--variants`).
pub const COPY_BULK: &str = "copy_bulk";

/// How many buffers of `bytes` it takes to exceed four L2 caches of `l2_bytes` (1 to 64).
pub fn rotation(l2_bytes: usize, bytes: usize) -> usize {
    (4 * l2_bytes).div_ceil(bytes.max(1)).clamp(1, 64)
}

/// The blocks a variant's rows run with: `--blocks` (default: the variant's own), those `ok`
/// accepts.
fn blocks_for(
    cfg: &BenchConfig,
    default: u32,
    error: impl Fn(u32) -> Option<String>,
    dropped: &mut Vec<String>,
) -> Vec<u32> {
    let asked = if cfg.blocks.is_empty() {
        vec![default]
    } else {
        cfg.blocks.clone()
    };
    asked
        .into_iter()
        .filter(|&b| match error(b) {
            None => true,
            Some(why) => {
                dropped.push(why);
                false
            }
        })
        .collect()
}

/// What one row measures.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// `cuMemcpyDtoD` of the group's input: the ceiling.
    Copy,
    /// The same copy by `copy_bulk`, a Rust kernel of bulk copies (sm_90).
    CopyBulk,
    Reduce(ReduceVariant, u32),
    Stencil(StencilVariant, u32),
    /// `reduce::sum_reproducible` (f32, f64; `sum_reproducible_to_f32` for f16 and bf16): every
    /// level, event-timed as one operation.
    Reproducible,
    /// The fast sum of a 16-bit float type in `f32` (`reduce::sum_to_f32`'s kernel).
    HalfSum(u32),
}

/// The rows of one (size, type) group, in the order they are measured and reported.
fn jobs(cfg: &BenchConfig, ty: ElemType) -> Vec<Job> {
    plan(cfg, ty).0
}

/// [`jobs`], and why each row asked for but not planned (a block size a variant refuses, a
/// radius without a kernel of the type) is left out.
fn plan(cfg: &BenchConfig, ty: ElemType) -> (Vec<Job>, Vec<String>) {
    let mut dropped = Vec::new();
    // Names the variants of `family` asked for that have no version of `ty`.
    let mut without = |family: &str, names: Vec<&str>| {
        if !names.is_empty() {
            let names = names.join(", ");
            dropped.push(format!("{family} variants without a {ty} version: {names}"));
        }
    };
    // The 16-bit floats are summed in f32 by the fast path alone (`Job::HalfSum`).
    let fast = ReduceVariant::Fast;
    let (reduce, reduce_without): (Vec<ReduceVariant>, _) = cfg
        .reduce_variants
        .iter()
        .partition(|v| v.supports_type(ty));
    let (stencil, stencil_without): (Vec<StencilVariant>, _) = cfg
        .stencil_variants
        .iter()
        .partition(|v| v.supports_type(ty));
    let reduce_without = reduce_without
        .into_iter()
        .filter(|&v| !(ty.is_half() && v == fast));
    without("reduce", reduce_without.map(|v| v.name()).collect());
    without(
        "stencil",
        stencil_without.iter().map(|v| v.name()).collect(),
    );
    let mut jobs = vec![Job::Copy];
    if cfg.copy_bulk {
        jobs.push(Job::CopyBulk);
    }
    for v in reduce {
        for b in blocks_for(cfg, v.default_block(), |b| v.block_error(b), &mut dropped) {
            jobs.push(Job::Reduce(v, b));
        }
    }
    if ty.is_half() && cfg.reduce_variants.contains(&fast) {
        let error = |b| fast.block_error(b);
        for b in blocks_for(cfg, fast.default_block(), error, &mut dropped) {
            jobs.push(Job::HalfSum(b));
        }
    }
    if cfg.reproducible && ty.is_float() {
        jobs.push(Job::Reproducible);
    }
    // Each stencil row needs a kernel of this type for this radius and block.
    let radius = cfg.radius;
    let error = |v: StencilVariant, b: u32| ferrocuda::with_elem_type!(ty, T => v.error(&Taps::<T>::Sum { radius }, b));
    for v in stencil {
        for b in blocks_for(cfg, v.default_block(), |b| error(v, b), &mut dropped) {
            jobs.push(Job::Stencil(v, b));
        }
    }
    dropped.sort();
    dropped.dedup();
    (jobs, dropped)
}

/// The types of `cfg` that none of its variants runs on (each group would hold only the
/// driver's copy):
/// a run that asks for one is refused before it starts.
pub fn types_without_rows(cfg: &BenchConfig) -> Vec<ElemType> {
    cfg.types
        .iter()
        .copied()
        .filter(|&ty| jobs(cfg, ty).iter().all(|j| matches!(j, Job::Copy)))
        .collect()
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
struct Group<'g, T: Element> {
    gpu: &'g Gpu,
    host: Vec<T>,
    sums: Sums<T>,
    inputs: Vec<DeviceBuffer<T>>,
    outputs: Vec<DeviceBuffer<T>>,
    reps: usize,
    radius: u32,
    /// The reproducible sum of this type and the CPU order's result over `host`, for `f32`
    /// and `f64` (a function pointer: `Group` is generic over every element type).
    reproducible: Option<ReproducibleSum<T>>,
}

/// What a group's sums must give.
enum Sums<T> {
    /// Sums in the group's own type.
    Native(ReduceReference<T>),
    /// `f16` and `bf16`: sums in `f32`.
    Half(HalfSums),
}

/// The references of a 16-bit float group's sums, which are `f32`.
struct HalfSums {
    /// The exact sum (the input is exactly summable in `f32`): the fast sum's reference.
    reference: ReduceReference<f32>,
    /// The CPU's `f32` reproducible order over the widened input: the reproducible row's bits,
    /// computed the first time that row runs (a group without it never needs them).
    reproducible: std::cell::OnceCell<f32>,
}

/// [`reproducible::measure`] for one type.
type MeasureReproducible<T> =
    fn(&Gpu, &[DeviceBuffer<T>], T, usize) -> Result<reproducible::Measured<T>>;

/// See [`Group::reproducible`].
struct ReproducibleSum<T: Element> {
    measure: MeasureReproducible<T>,
    want: T,
    /// The chunks of each level of the order for this size.
    levels: Vec<usize>,
}

impl<'g, T: Element> Group<'g, T> {
    fn new(gpu: &'g Gpu, cfg: &BenchConfig, n: usize) -> Result<Self> {
        let host: Vec<T> = book_input(n, input_seed(n));
        let sums = if T::TYPE.is_half() {
            Sums::Half(HalfSums {
                reference: ReduceReference::of(ReduceOp::Sum, &host, |v| v.to_f64() as f32),
                reproducible: std::cell::OnceCell::new(),
            })
        } else {
            Sums::Native(ReduceReference::of(ReduceOp::Sum, &host, |v| v))
        };
        let (inputs, outputs) = buffer_counts(
            gpu.props().l2_bytes as usize,
            n as u128 * size_of::<T>() as u128,
        );
        let inputs = (0..inputs)
            .map(|_| gpu.upload(&host, "bench input"))
            .collect::<Result<_>>()?;
        // The stencil and the copy read one buffer and write another.
        let outputs = (0..outputs)
            .map(|_| gpu.alloc(n, "bench output"))
            .collect::<Result<_>>()?;
        Ok(Self {
            gpu,
            host,
            sums,
            inputs,
            outputs,
            reps: cfg.reps,
            radius: cfg.radius,
            reproducible: None,
        })
    }

    /// With the reproducible sum's row ([`Job::Reproducible`]) measurable.
    fn with_reproducible(mut self) -> Self
    where
        T: Reproducible,
    {
        self.reproducible = Some(ReproducibleSum {
            measure: reproducible::measure::<T>,
            want: cpu_reproducible::sum_reproducible(&self.host),
            levels: cpu_reproducible::chunks_per_level::<T>(self.host.len()),
        });
        self
    }

    /// The buffer the last timed repetition used, out of `k` in rotation.
    fn last_used(&self, k: usize) -> usize {
        (self.reps.max(1) - 1) % k
    }

    fn poison_outputs(&mut self) -> Result<()> {
        for o in self.outputs.iter_mut() {
            self.gpu.poison_async(o)?;
        }
        Ok(())
    }

    /// Measures one round of `job`; `first` and `last` say whether to check the output.
    fn round(&mut self, job: Job, first: bool, last: bool, flush: &mut L2Flush) -> Result<Round> {
        match job {
            Job::Copy => self.copy_round(first || last),
            Job::CopyBulk => self.copy_bulk_round(first || last),
            Job::Reduce(v, block) => {
                let Sums::Native(reference) = &self.sums else {
                    return Err(Error::InvalidArgument {
                        what: format!("{} is summed in f32 by the fast path alone", T::TYPE),
                    });
                };
                let reference = reference.clone();
                self.reduce_round::<T>(v, block, first, last, flush, &reference)
            }
            Job::Stencil(v, block) => self.stencil_round(v, block, first, last),
            Job::Reproducible if matches!(self.sums, Sums::Half(_)) => {
                self.half_reproducible_round(first || last)
            }
            Job::Reproducible => self.reproducible_round(first || last),
            Job::HalfSum(block) => {
                let reference = match &self.sums {
                    Sums::Half(h) => h.reference.clone(),
                    Sums::Native(_) => {
                        return Err(Error::InvalidArgument {
                            what: format!("the sum in f32 takes f16 and bf16, not {}", T::TYPE),
                        });
                    }
                };
                self.reduce_round::<f32>(ReduceVariant::Fast, block, first, last, flush, &reference)
            }
        }
    }

    /// The reproducible sum of a 16-bit float type in `f32`, checked against the CPU's `f32`
    /// order over the widened input.
    fn half_reproducible_round(&mut self, check: bool) -> Result<Round> {
        let want = match &self.sums {
            Sums::Half(h) => *h
                .reproducible
                .get_or_init(|| cpu_reproducible::sum_reproducible_widened(&self.host)),
            Sums::Native(_) => f32::NAN,
        };
        let m = reproducible::measure_half(self.gpu, &self.inputs, want, self.reps)?;
        let n = self.host.len();
        Ok(Round {
            samples: m.samples,
            checks: if check { vec![m.check] } else { Vec::new() },
            grid: levels_label(&cpu_reproducible::chunks_per_level::<f32>(n)),
            bytes: (n * size_of::<T>()) as u64,
        })
    }

    fn reproducible_round(&mut self, check: bool) -> Result<Round> {
        let sum = self
            .reproducible
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument {
                what: format!("the reproducible sum has no {} version", T::TYPE),
            })?;
        let m = (sum.measure)(self.gpu, &self.inputs, sum.want, self.reps)?;
        let n = self.host.len();
        Ok(Round {
            samples: m.samples,
            checks: if check { vec![m.check] } else { Vec::new() },
            // The chunks of each level (each level's grid is at most the resident block count).
            grid: levels_label(&sum.levels),
            bytes: (n * size_of::<T>()) as u64,
        })
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
            |i| gpu.copy_on_device(&inputs[i % k], &mut outputs[i % k]),
        )?;
        self.copied(samples, check, "-".into())
    }

    /// The same copy by the bulk-copy kernel, its configurations prepared before the timing.
    fn copy_bulk_round(&mut self, check: bool) -> Result<Round> {
        let (gpu, k, last) = (
            self.gpu,
            self.outputs.len(),
            self.last_used(self.outputs.len()),
        );
        if check {
            self.poison_outputs()?;
        }
        let mut runs: Vec<CopyRun> = self
            .inputs
            .iter()
            .zip(self.outputs.iter_mut())
            .map(|(i, o)| CopyRun::new(gpu, i, o))
            .collect::<Result<_>>()?;
        let grid = runs[0].config().grid[0].to_string();
        let runs_cell = RefCell::new(&mut runs);
        let samples = time_samples(
            gpu,
            3,
            self.reps,
            |_| Ok(()),
            |i| runs_cell.borrow_mut()[i % k].launch(),
        )?;
        runs[last].finish()?;
        drop(runs);
        self.copied(samples, check, grid)
    }

    /// A copy row's round: in a checked round, the destination the last repetition wrote must
    /// hold the source's bits.
    fn copied(&mut self, samples: Vec<f64>, check: bool, grid: String) -> Result<Round> {
        let k = self.outputs.len();
        let checks = if check {
            let got = self.gpu.download(&self.outputs[self.last_used(k)])?;
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
            self.gpu.synchronize()?;
            Vec::new()
        };
        Ok(Round {
            samples,
            checks,
            grid,
            bytes: 2 * (self.host.len() * size_of::<T>()) as u64,
        })
    }

    /// A reduction row's round, its result in `A` (`T`, or `f32` for a 16-bit float type)
    /// checked against `reference`.
    fn reduce_round<A: Element>(
        &mut self,
        v: ReduceVariant,
        block: u32,
        first: bool,
        last: bool,
        flush: &mut L2Flush,
        reference: &ReduceReference<A>,
    ) -> Result<Round> {
        let (gpu, k) = (self.gpu, self.inputs.len());
        let mut runs: Vec<ReduceRun<T, A>> = self
            .inputs
            .iter()
            .map(|b| ReduceRun::new(gpu, v, ReduceOp::Sum, b, block))
            .collect::<Result<_>>()?;
        let first_check = if first {
            Some(reference.check(runs[0].run()?, runs[0].rounding_depth()))
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
        let last_check = last.then(|| reference.check(result, lastrun.rounding_depth()));
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

    /// What the baselines must produce on this group's input: its rows' references.
    fn expected(&self, stencil: bool) -> Expected;
}

impl<T: ResultBits> Rounds for Group<'_, T> {
    fn round(&mut self, job: Job, first: bool, last: bool, flush: &mut L2Flush) -> Result<Round> {
        Group::round(self, job, first, last, flush)
    }

    fn expected(&self, stencil: bool) -> Expected {
        match &self.sums {
            // The sums of a 16-bit float type are f32: CUB's into `float`, as ours.
            Sums::Half(h) => Expected::of_sum(&h.reference, self.host.len() as f64),
            Sums::Native(reference) => {
                Expected::of(&self.host, reference, stencil.then_some(self.radius))
            }
        }
    }
}

impl<'g> Pending<'g> {
    fn new(gpu: &'g Gpu, cfg: &BenchConfig, ty: ElemType, n: usize) -> Result<Self> {
        let jobs = jobs(cfg, ty);
        let repro = jobs.iter().any(|j| matches!(j, Job::Reproducible));
        let group: Box<dyn Rounds + 'g> = match ty {
            ElemType::F32 if repro => Box::new(Group::<f32>::new(gpu, cfg, n)?.with_reproducible()),
            ElemType::F64 if repro => Box::new(Group::<f64>::new(gpu, cfg, n)?.with_reproducible()),
            _ => ferrocuda::with_elem_type!(ty, T => Box::new(Group::<T>::new(gpu, cfg, n)?)),
        };
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

    /// What the baselines must produce for this group (the stencil's hash only where a
    /// textbook stencil runs).
    fn expected(&self) -> Expected {
        let stencil = self.jobs.iter().any(
            |j| matches!(j, Job::Stencil(v, _) if baselines::has_textbook_stencil(self.ty, *v)),
        );
        self.group.expected(stencil)
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
                    Job::CopyBulk => ferrocuda::kernels::config::COPY_BULK_BLOCK,
                    Job::Reduce(_, b) | Job::Stencil(_, b) | Job::HalfSum(b) => b,
                    Job::Reproducible => ferrocuda_lessons::kernels::config::REDUCE_REPRO_BLOCK,
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
        Job::Copy | Job::CopyBulk => "copy",
        Job::Reduce(..) | Job::Reproducible | Job::HalfSum(_) => "reduce",
        Job::Stencil(..) => "stencil",
    }
}

fn job_name(job: Job, radius: u32) -> String {
    match job {
        Job::Copy => "cuMemcpyDtoD".into(),
        Job::CopyBulk => COPY_BULK.into(),
        Job::Reduce(v, _) => v.name().into(),
        Job::HalfSum(_) => ReduceVariant::Fast.name().into(),
        Job::Stencil(v, _) => format!("{}_r{radius}", v.name()),
        Job::Reproducible => reproducible::REPRODUCIBLE.into(),
    }
}

/// The progress bar on stderr (`indicatif`): drawn only when stderr is a terminal, so a
/// redirected run's log holds no progress lines.
struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(total: usize) -> Self {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "[{bar:30}] {pos:>4}/{len} {elapsed_precise} {msg}",
            )
            .expect("a valid template")
            .progress_chars("#>."),
        );
        Self(bar)
    }

    fn step(&mut self, what: &str) {
        self.0.set_message(what.to_string());
        self.0.inc(1);
        if self.0.position() >= self.0.length().unwrap_or(0) {
            self.0.finish();
        }
    }
}

/// The chunks of each level of a reproducible sum, as its row's grid.
fn levels_label(levels: &[usize]) -> String {
    let levels: Vec<String> = levels.iter().map(|c| c.to_string()).collect();
    format!("chunks {}", levels.join("+"))
}

/// How many input and output buffers of `bytes` each a group keeps ([`rotation`]; the
/// outputs, written as the inputs are read, count twice the bytes).
fn buffer_counts(l2_bytes: usize, bytes: u128) -> (usize, usize) {
    let count = |b: u128| rotation(l2_bytes, usize::try_from(b).unwrap_or(usize::MAX));
    (count(bytes), count(2 * bytes))
}

/// The device memory one (size, type) group holds from its first round to the end of the run
/// (its inputs and outputs in rotation), and what its rows allocate for one round on top of
/// that (the textbook reductions' scratch copies, one per input). Small buffers (partials,
/// results, workspaces) are left out.
pub fn group_bytes(l2_bytes: usize, cfg: &BenchConfig, ty: ElemType, n: usize) -> (u128, u128) {
    let bytes = n as u128 * ty.size() as u128;
    let (inputs, outputs) = buffer_counts(l2_bytes, bytes);
    let textbook = jobs(cfg, ty)
        .iter()
        .any(|j| matches!(j, Job::Reduce(v, _) if v.is_textbook()));
    let round = if textbook { inputs as u128 * bytes } else { 0 };
    ((inputs + outputs) as u128 * bytes, round)
}

/// `2^k`, `2^k+d` for a small `d`, or the number.
fn count_label(n: usize) -> String {
    match n.checked_ilog2() {
        Some(k) if n == 1 << k => format!("2^{k}"),
        Some(k) if n - (1 << k) <= 4096 => format!("2^{k}+{}", n - (1 << k)),
        _ => n.to_string(),
    }
}

/// Refuses a run whose buffers cannot all be on the device at once (every group's stay
/// allocated until the last round), before anything is allocated: the error says what each
/// size takes, so the caller can split the run.
fn check_fits(gpu: &Gpu, cfg: &BenchConfig) -> Result<()> {
    let (free, total) = gpu.memory_info()?;
    let l2 = gpu.props().l2_bytes as usize;
    let flush = 2 * l2 as u128;
    let (mut kept, mut round, mut largest) = (0u128, 0u128, 0u128);
    let mut parts = Vec::new();
    for &n in &cfg.sizes {
        for &ty in &cfg.types {
            let (k, r) = group_bytes(l2, cfg, ty, n);
            kept += k;
            round = round.max(r);
            largest = largest.max(k + r);
            parts.push(format!(
                "{ty} {}: {:.2} GiB",
                count_label(n),
                k as f64 / GIB
            ));
        }
    }
    let need = kept + round + flush;
    if need <= free as u128 {
        return Ok(());
    }
    let hint = if largest + flush > free as u128 {
        "one size alone does not fit: drop it, or leave out the textbook reductions \
         (--variants), whose scratch copies double the input"
    } else {
        "run fewer sizes per `ferrocuda bench`"
    };
    Err(Error::InvalidArgument {
        what: format!(
            "bench: this run needs {:.2} GiB of device memory at once and {:.2} of {:.2} GiB \
             are free. Every size's inputs and outputs stay allocated until the last round \
             ({}), plus {:.2} GiB of scratch copies for one round and {:.2} GiB to flush L2; \
             {hint}",
            need as f64 / GIB,
            free as f64 / GIB,
            total as f64 / GIB,
            parts.join(", "),
            round as f64 / GIB,
            flush as f64 / GIB,
        ),
    })
}

const GIB: f64 = (1u64 << 30) as f64;

/// Runs the benchmark.
pub fn run(gpu: &Gpu, cfg: &BenchConfig) -> Result<Report> {
    let p = gpu.props();
    let (cfg, left_out) = cfg.on_device(p);
    let cfg = &cfg;
    if !left_out.is_empty() {
        eprintln!(
            "bench: {} (compute capability {}.{}) does not run {}: left out",
            p.name,
            p.compute_capability.0,
            p.compute_capability.1,
            left_out.join(", ")
        );
    }
    for &ty in &cfg.types {
        for why in plan(cfg, ty).1 {
            eprintln!("bench: {ty}: a row left out: {why}");
        }
    }
    check_fits(gpu, cfg)?;
    let steps: usize = cfg.types.iter().map(|&ty| jobs(cfg, ty).len() - 1).sum();
    let mut progress = Progress::new(steps * cfg.sizes.len() * cfg.rounds.max(1));
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
    // All buffers are freed before the baselines allocate theirs; what the baselines must
    // produce is taken from each group's references first.
    let groups: Vec<(ElemType, usize, Option<Expected>, Vec<Row>)> = pending
        .into_iter()
        .map(|p| {
            let expected = baselines.is_ok().then(|| p.expected());
            (p.ty, p.n, expected, p.rows(cfg))
        })
        .collect();
    let mut rows = Vec::new();
    for (ty, n, expected, mut new) in groups {
        if let (Ok(b), Some(expected)) = (&baselines, &expected) {
            b.attach(cfg, ty, n, expected, &mut new);
        }
        rows.extend(new);
    }
    if !cfg.steps.radii.is_empty() {
        eprintln!(
            "bench: steps: the iterated stencil, {} steps at n = {}, against the one-step stencil",
            cfg.steps.steps, cfg.steps.n
        );
        rows.extend(steps::measure(gpu, &cfg.steps, &cfg.types, cfg.reps)?);
    }
    let mut api_baselines = String::new();
    let mut transfer_baselines = String::new();
    if !cfg.api_sizes.is_empty() {
        eprintln!(
            "bench: api: per-call cost of library calls at {} sizes",
            cfg.api_sizes.len()
        );
        let halves: Vec<ElemType> = cfg.types.iter().copied().filter(|t| t.is_half()).collect();
        let mut api = api::measure(gpu, &cfg.api_sizes, cfg.api_calls, &halves)?;
        api_baselines = if cfg.baselines {
            match api::attach_python(&mut api, &cfg.api_sizes, cfg.api_calls) {
                Ok(ran) => ran,
                Err(why) => format!("none: {why}"),
            }
        } else {
            "none: disabled with --no-baselines".into()
        };
        rows.extend(api);
        eprintln!("bench: transfer: pinned copies both ways, and a copy beside kernels");
        let mut transfer = transfer::measure(gpu, &cfg.api_sizes, cfg.reps)?;
        let link = transfer::attach_link(gpu, &mut transfer);
        let cupy = if cfg.baselines {
            match transfer::attach_python(&mut transfer, &cfg.api_sizes) {
                Ok(ran) => ran,
                Err(why) => format!("none: {why}"),
            }
        } else {
            "none: disabled with --no-baselines".into()
        };
        transfer_baselines = format!("{link}; {cupy}");
        rows.extend(transfer);
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
        api_baselines,
        transfer_baselines,
        peak_gbs: p.theoretical_bandwidth_gbs(),
        rows,
    })
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
        write(&name, chart::bandwidth_chart(report, family, ty))?;
        charts.push(name);
    }
    if report.rows.iter().any(|r| r.family == "api") {
        write("api-f32.svg", chart::per_call_chart(report))?;
        charts.push("api-f32.svg".into());
    }
    write("report.md", markdown(report, &charts))?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(types: &[ElemType], radius: u32) -> BenchConfig {
        BenchConfig {
            sizes: vec![1 << 20],
            types: types.to_vec(),
            reduce_variants: vec![ReduceVariant::Fast],
            stencil_variants: vec![StencilVariant::Fast],
            reproducible: true,
            copy_bulk: false,
            blocks: Vec::new(),
            radius,
            reps: 1,
            rounds: 1,
            out: PathBuf::new(),
            baselines: false,
            api_sizes: Vec::new(),
            api_calls: 1,
            steps: steps::StepsConfig {
                radii: Vec::new(),
                n: 0,
                steps: 0,
                per_pass: Vec::new(),
            },
        }
    }

    /// A row is planned only where its kernel exists (a row planned without a kernel would end
    /// the run at its first round), and a row left out says why.
    #[test]
    fn rows_are_planned_for_the_kernels_that_exist() {
        let stencils = |ty, radius| {
            jobs(&config(&[ty], radius), ty)
                .iter()
                .filter(|j| matches!(j, Job::Stencil(..)))
                .count()
        };
        let default = ferrocuda_lessons::stencil::STENCIL_DEFAULT_RADIUS;
        for ty in [
            ElemType::I32,
            ElemType::F32,
            ElemType::F64,
            ElemType::F16,
            ElemType::Bf16,
        ] {
            for radius in ferrocuda_lessons::kernels::config::STENCIL_RADII {
                assert_eq!(stencils(ty, radius), 1, "{ty} at R = {radius}");
            }
            assert_eq!(stencils(ty, default), 1, "{ty} at the default radius");
            assert_eq!(stencils(ty, 5), 0, "{ty} at R = 5");
            let (_, dropped) = plan(&config(&[ty], 5), ty);
            assert_eq!(dropped.len(), 1, "{ty}: {dropped:?}");
            assert!(dropped[0].contains("radius"), "{}", dropped[0]);
        }
        let half = jobs(&config(&[ElemType::Bf16], 5), ElemType::Bf16);
        assert!(half.iter().any(|j| matches!(j, Job::HalfSum(_))));
        assert!(half.iter().any(|j| matches!(j, Job::Reproducible)));
        assert!(types_without_rows(&config(&[ElemType::F16], 5)).is_empty());
        // A block the stencil refuses is named, the sums' default blocks kept.
        let mut odd = config(&[ElemType::F32], 3);
        odd.blocks = vec![48, 256];
        let (planned, dropped) = plan(&odd, ElemType::F32);
        assert!(dropped.iter().any(|d| d.contains("48")), "{dropped:?}");
        assert!(planned.iter().any(|j| matches!(j, Job::Stencil(_, 256))));
        assert!(!planned.iter().any(|j| matches!(j, Job::Stencil(_, 48))));
        // The 16-bit sum's refused block, and the variants with no 16-bit version, are named.
        let mut half = config(&[ElemType::F16], 3);
        half.blocks = vec![48, 512];
        half.stencil_variants = StencilVariant::ALL.to_vec();
        let (planned, dropped) = plan(&half, ElemType::F16);
        assert!(planned.iter().any(|j| matches!(j, Job::HalfSum(512))));
        assert!(!planned.iter().any(|j| matches!(j, Job::HalfSum(48))));
        assert!(
            dropped
                .iter()
                .any(|d| d.contains("reduce variant `fast`") && d.contains("48")),
            "{dropped:?}"
        );
        let without = dropped
            .iter()
            .find(|d| d.starts_with("stencil variants without a f16 version"))
            .unwrap_or_else(|| panic!("{dropped:?}"));
        for v in StencilVariant::ALL
            .iter()
            .filter(|v| !v.supports_type(ElemType::F16))
        {
            assert!(without.contains(v.name()), "{without}");
        }
        assert!(
            !dropped
                .iter()
                .any(|d| d.starts_with("reduce variants without")),
            "{dropped:?}"
        );
        // Every variant of the default run keeps its row at its own block.
        let mut all = config(&[ElemType::F32], 3);
        all.reduce_variants = ReduceVariant::ALL.to_vec();
        all.stencil_variants = StencilVariant::ALL.to_vec();
        let planned = jobs(&all, ElemType::F32);
        let reduce = ReduceVariant::ALL
            .iter()
            .filter(|v| v.supports_type(ElemType::F32));
        let stencil = StencilVariant::ALL
            .iter()
            .filter(|v| v.supports_type(ElemType::F32));
        assert_eq!(
            planned
                .iter()
                .filter(|j| matches!(j, Job::Reduce(..)))
                .count(),
            reduce.count()
        );
        assert_eq!(
            planned
                .iter()
                .filter(|j| matches!(j, Job::Stencil(..)))
                .count(),
            stencil.count()
        );
    }
}
