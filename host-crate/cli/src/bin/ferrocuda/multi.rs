//! `ferrocuda multi`: the sharded sums and the iterated stencil on a team of ranks (NCCL over
//! the GPUs it finds, one rank per process from a launcher, or virtual ranks on one GPU),
//! checked against one GPU and timed beside it.
use std::time::Instant;

use anyhow::{Context as _, Result, bail, ensure};
use ferrocuda::multi::{self, ShardedArray, Shards, Team, Transport};
use ferrocuda::reduce;
use ferrocuda::stencil::{self, Boundary, Taps};
use ferrocuda::{DeviceBuffer, Gpu};
use ferrocuda_cli::args::parse_count;
use ferrocuda_lessons::cpu::random_vec;
use ferrocuda_lessons::timing::Stats;

/// The arguments of `ferrocuda multi`.
#[derive(clap::Args)]
pub struct MultiArgs {
    /// The ranks: `nccl` (one per GPU of this process, `--gpus` of them), `env` (this process
    /// is one rank: RANK, WORLD_SIZE, LOCAL_RANK and FERROCUDA_RENDEZVOUS, as a launcher sets
    /// them) or `virtual` (`--ranks` on one GPU: the test transport, not a speed-up).
    #[arg(long, default_value = "nccl")]
    transport: String,
    /// GPUs for `--transport nccl` (0: every GPU the driver shows).
    #[arg(long, default_value_t = 0)]
    gpus: usize,
    /// Ranks for `--transport virtual`.
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    /// f32 elements in all (strong scaling), or per rank with `--per-rank` (weak scaling).
    /// `--elements` is the same (torchrun takes `--n` for an abbreviation of its own options).
    #[arg(long, visible_alias = "elements", default_value = "2^24", value_parser = parse_count)]
    n: usize,
    /// `--n` is per rank.
    #[arg(long)]
    per_rank: bool,
    /// Stencil radius.
    #[arg(long, default_value_t = 3)]
    radius: u32,
    /// Stencil boundary: zero, clamp or periodic.
    #[arg(long, default_value = "periodic")]
    boundary: String,
    /// Stencil time steps per call (the iterated stencil does up to 16 a pass).
    #[arg(long, default_value_t = 96)]
    steps: usize,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Seed of the random input.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only `sums` or only `stencil` (the stencil's plan takes two more arrays per GPU).
    #[arg(long, value_parser = ["sums", "stencil"])]
    only: Option<String>,
    /// Also time PyTorch's sum per call (local `x.sum()` and `torch.distributed.all_reduce` of
    /// the scalar over as many GPUs, one process each), with `python3`.
    #[arg(long)]
    baseline: bool,
}

impl MultiArgs {
    /// Refuses a bad argument before any GPU is opened.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            ["nccl", "env", "virtual"].contains(&self.transport.as_str()),
            "--transport must be nccl, env or virtual, not `{}`",
            self.transport
        );
        if let Some(e) = stencil::radius_error(self.radius) {
            bail!("{e}");
        }
        ensure!(
            Boundary::from_name(&self.boundary).is_some(),
            "--boundary must be zero, clamp or periodic, not `{}`",
            self.boundary
        );
        ensure!(self.reps > 0, "--reps must be at least 1");
        Ok(())
    }
}

fn team(device: u32, a: &MultiArgs) -> Result<Team> {
    Ok(match a.transport.as_str() {
        "virtual" => Team::virtual_ranks(&open(device)?, a.ranks)?,
        "env" => Team::from_env()?,
        _ => {
            // NCCL first: a machine without it says so before any GPU is touched.
            let (major, minor, patch) = multi::nccl::version()?;
            println!("NCCL {major}.{minor}.{patch}");
            let count = if a.gpus == 0 {
                Gpu::count()? as usize
            } else {
                a.gpus
            };
            let gpus = (0..count as u32).map(open).collect::<Result<Vec<_>>>()?;
            Team::nccl(&gpus)?
        }
    })
}

fn open(device: u32) -> Result<Gpu> {
    Gpu::new(device).with_context(|| format!("opening CUDA device {device}"))
}

/// `println!` on the process that drives rank 0 only: with one process per rank, one report.
macro_rules! say {
    ($lead:expr, $($arg:tt)*) => {
        if $lead {
            println!($($arg)*);
        }
    };
}

/// Median wall time of `op` (which waits for its own work), after one untimed run.
fn wall(reps: usize, mut op: impl FnMut() -> Result<()>) -> Result<Stats> {
    op()?;
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        op()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(Stats::from_samples(samples))
}

/// `taps` applied `steps` times on one GPU, ping-pong between `x` and `y`; the result in `x`.
fn one_gpu_steps(
    gpu: &Gpu,
    x: &mut DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
    taps: &Taps<f32>,
    boundary: Boundary,
    steps: usize,
) -> Result<()> {
    for _ in 0..steps {
        stencil::apply_into(gpu, x, y, taps, boundary)?;
        std::mem::swap(x, y);
    }
    Ok(())
}

/// The median time of one step of the one-GPU iterated stencil over `data` (`Iteration`, at
/// most `per_pass` steps a pass, calls of `steps` steps).
fn one_gpu_step(
    gpu: &Gpu,
    data: &[f32],
    taps: &Taps<f32>,
    boundary: Boundary,
    (steps, per_pass): (usize, usize),
    reps: usize,
) -> Result<f64> {
    let mut x = gpu.upload(data, "stencil state")?;
    let mut iteration = stencil::Iteration::new(gpu, taps, boundary, data.len())?
        .with_steps_per_pass(per_pass as u32)?;
    let t = wall(reps, || {
        iteration.run(&mut x, steps)?;
        iteration.finish().map_err(Into::into)
    })?;
    Ok(t.median_s / steps as f64)
}

/// Runs `ferrocuda multi`.
pub fn multi(device: u32, a: &MultiArgs) -> Result<()> {
    a.validate()?;
    let team = team(device, a)?;
    let size = team.size();
    let local = team.local_ranks();
    let n = if a.per_rank {
        a.n.checked_mul(size)
            .with_context(|| format!("{} elements per rank times {size} ranks", a.n))?
    } else {
        a.n
    };
    let first = team.gpu_of(local[0]).expect("a local rank").clone();
    let lead = local.contains(&0);
    let sums = a.only.as_deref() != Some("stencil");
    let stencil = a.only.as_deref() != Some("sums");
    let transport = match team.transport() {
        Transport::Virtual => "virtual ranks (device copies on one GPU; a test transport)",
        Transport::Nccl => "NCCL",
    };
    say!(
        lead,
        "team: {size} ranks over {transport}; this process drives {local:?} ({} ranks' GPUs: {})",
        local.len(),
        local
            .iter()
            .map(|&r| {
                let p = team.gpu_of(r).expect("local").props();
                format!("{} {}", p.ordinal, p.name)
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let chunk = reduce::reproducible_chunk::<f32>();
    let shards = Shards::aligned(n, size, chunk)?;
    say!(
        lead,
        "n = {n} f32 ({} per rank, cut on the reproducible sum's {chunk}-element chunks)",
        shards.len(0)
    );
    let data = random_vec::<f32>(n, a.seed);
    let array = ShardedArray::scatter(&team, &data, shards.clone())?;
    let bytes = (n * 4) as u64;
    // What rank `local[0]` would take alone: its shard on its GPU, no team.
    let own = array.part(local[0]).expect("a local rank's shard");

    // One GPU of the same run: the whole array on the first local GPU, if it fits.
    // Only where this process drives every rank: the one-GPU rows run collectives (the check's
    // gather) that every process must enter alike.
    let (free, _) = first.memory_info()?;
    let whole = if local.len() != size {
        say!(
            lead,
            "(one-GPU rows: only where one process drives every rank)"
        );
        None
    } else if 3 * bytes < free as u64 {
        Some(first.upload(&data, "whole array")?)
    } else {
        say!(
            lead,
            "(the whole array does not fit on one GPU: no one-GPU rows)"
        );
        None
    };

    if sums {
        let got = array.sum()?;
        let t_sum = wall(a.reps, || array.sum().map(|_| ()).map_err(Into::into))?;
        let repro = multi::sum_reproducible(&array)?;
        let t_repro = wall(a.reps, || {
            multi::sum_reproducible(&array)
                .map(|_| ())
                .map_err(Into::into)
        })?;
        let t_own = wall(a.reps, || {
            reduce::sum(&first, own).map(|_| ()).map_err(Into::into)
        })?;
        say!(
            lead,
            "{:<34} {:>12} {:>10} {:>10}",
            "",
            "result",
            "median us",
            "GB/s"
        );
        say!(
            lead,
            "{:<34} {:>12.6e} {:>10.1} {:>10.0}",
            "sum (ranks' fast sums)",
            got,
            t_sum.median_s * 1e6,
            t_sum.gbs(bytes)
        );
        say!(
            lead,
            "{:<34} {:>12.6e} {:>10.1} {:>10.0}",
            "sum (reproducible)",
            repro,
            t_repro.median_s * 1e6,
            t_repro.gbs(bytes)
        );
        say!(
            lead,
            "{:<34} {:>12} {:>10.1} {:>10.0}   {}",
            "one shard's fast sum alone, one GPU",
            "",
            t_own.median_s * 1e6,
            t_own.gbs(own.len() as u64 * 4),
            efficiency(
                &team,
                "efficiency T1(shard) / TN",
                t_own.median_s / t_sum.median_s
            )
        );
        if a.baseline && lead {
            torch_baseline(&team, &shards, &t_sum, a.reps.max(20));
        }
        let cpu = ferrocuda_lessons::cpu::reproducible::sum_reproducible(&data);
        ensure!(
            cpu.to_bits() == repro.to_bits(),
            "FAIL: the reproducible sum on {size} ranks ({:#010x}) differs from the CPU order's \
             ({:#010x})",
            repro.to_bits(),
            cpu.to_bits()
        );
        say!(
            lead,
            "reproducible sum's bits on {size} ranks: {:#010x}, the CPU order's: {:#010x}  PASS",
            repro.to_bits(),
            cpu.to_bits()
        );
        if let Some(w) = &whole {
            let one = reduce::sum_reproducible(&first, w)?;
            let t_one = wall(a.reps, || {
                reduce::sum_reproducible(&first, w)
                    .map(|_| ())
                    .map_err(Into::into)
            })?;
            say!(
                lead,
                "{:<34} {:>12.6e} {:>10.1} {:>10.0}",
                "sum (reproducible), one GPU",
                one,
                t_one.median_s * 1e6,
                t_one.gbs(bytes)
            );
            ensure!(
                one.to_bits() == repro.to_bits(),
                "FAIL: the reproducible sum on {size} ranks ({:#010x}) differs from one GPU's \
                 ({:#010x})",
                repro.to_bits(),
                one.to_bits()
            );
            say!(
                lead,
                "same bits on {size} ranks and one GPU: {:#010x}  PASS",
                repro.to_bits()
            );
        }
    }
    if stencil {
        stencil_rows(a, &array, &data, whole.as_ref(), &first, lead)?;
    }
    Ok(())
}

/// The iterated stencil's rows: the allocating call, the plan's step, one GPU's step over the
/// whole array (strong scaling: T1 / (N x TN)) and over one shard (weak scaling: T1 / TN), and
/// the bits against the one-GPU stencil.
fn stencil_rows(
    a: &MultiArgs,
    array: &ShardedArray<'_, f32>,
    data: &[f32],
    whole: Option<&DeviceBuffer<f32>>,
    first: &Gpu,
    lead: bool,
) -> Result<()> {
    let size = array.team().size();
    let n = data.len();
    let bytes = (n * 4) as u64;
    let boundary = Boundary::from_name(&a.boundary).expect("validated");
    let taps = Taps::<f32>::Sum { radius: a.radius };
    let steps = a.steps.max(1);
    let t_call = wall(a.reps, || {
        multi::apply_sharded(array, &taps, boundary, steps)
            .map(|_| ())
            .map_err(Into::into)
    })?;
    let mut plan = multi::ShardedStencil::new(array, &taps, boundary)?;
    let k = plan.steps_per_pass();
    let t_team = wall(a.reps, || plan.step(steps).map_err(Into::into))?;
    // The timeline of one pass on every rank this process drives: does the exchange hide?
    for t in plan.step_traced()? {
        println!(
            "timeline of one pass ({k} steps), rank {}, us from its start: interior {:.1}-{:.1} \
             (low-priority stream); cuts {:.1}-{:.1}, exchange {:.1}-{:.1}, joined at {:.1} \
             (high-priority stream); exposed after the interior: {:.1} us",
            t.rank,
            t.interior.0,
            t.interior.1,
            t.cuts.0,
            t.cuts.1,
            t.exchange.0,
            t.exchange.1,
            t.joined,
            t.exposed()
        );
    }
    let graphs = plan.uses_graphs();
    if let Some(e) = plan.graph_error() {
        say!(
            lead,
            "the step graphs could not be captured ({e}); the passes ran on streams"
        );
    }
    drop(plan);
    if graphs {
        let mut plan = multi::ShardedStencil::new(array, &taps, boundary)?.with_graphs(Some(false));
        let t_streams = wall(a.reps, || plan.step(steps).map_err(Into::into))?;
        say!(
            lead,
            "the steps as CUDA graphs (two passes a launch): {:.2} us per step; as each pass's \
             launches on the streams: {:.2} us per step ({:.2}x)",
            t_team.median_s / steps as f64 * 1e6,
            t_streams.median_s / steps as f64 * 1e6,
            t_streams.median_s / t_team.median_s
        );
    }
    let mut plan = multi::ShardedStencil::new(array, &taps, boundary)?.with_steps_per_pass(1)?;
    let t_one = wall(a.reps, || plan.step(steps).map_err(Into::into))?;
    drop(plan);
    let per_step = t_team.median_s / steps as f64;
    say!(
        lead,
        "apply_sharded, {steps} steps per call (allocating and copying the array in and out): \
         {:.1} us per step",
        t_call.median_s / steps as f64 * 1e6
    );
    say!(
        lead,
        "ShardedStencil::step, R = {} {}, {steps} steps per call, {k} a pass (halos of {} \
         cells, exchanged once a pass): {:.1} us per step on {size} ranks ({:.0} GB/s of \
         passes over the whole array); one step a pass: {:.1} us per step ({:.2}x)",
        a.radius,
        boundary.name(),
        k * a.radius as usize,
        per_step * 1e6,
        2.0 * bytes as f64 / (per_step * k as f64) / 1e9,
        t_one.median_s / steps as f64 * 1e6,
        t_one.median_s / t_team.median_s
    );
    if whole.is_some() {
        let one_step = one_gpu_step(first, data, &taps, boundary, (steps, k), a.reps)?;
        say!(
            lead,
            "one GPU, the same {n} elements (Iteration, {k} a pass): {:.1} us per step; {}",
            one_step * 1e6,
            efficiency(
                array.team(),
                "strong-scaling efficiency T1 / (N x TN)",
                one_step / (size as f64 * per_step)
            )
        );
        // The check: the team's result against the one-GPU stencil applied as often.
        let mut x = first.upload(data, "check ping")?;
        let mut y = first.alloc::<f32>(n, "check pong")?;
        one_gpu_steps(first, &mut x, &mut y, &taps, boundary, steps)?;
        let want = first.download(&x)?;
        drop((x, y));
        let got = multi::apply_sharded(array, &taps, boundary, steps)?.gather()?;
        let same = got
            .iter()
            .zip(&want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
        ensure!(
            same && got.len() == want.len(),
            "FAIL: the stencil on {size} ranks differs from one GPU's"
        );
        say!(
            lead,
            "same bits as the one-GPU stencil after {steps} steps: PASS"
        );
    }
    // One shard's stencil alone on one GPU: what a rank would take with no neighbours, so the
    // difference is the price of the ends and the exchange.
    let shard_n = array.shards().len(0);
    if shard_n > 0 {
        let shard_step =
            one_gpu_step(first, &data[..shard_n], &taps, boundary, (steps, k), a.reps)?;
        say!(
            lead,
            "one shard ({shard_n} elements) alone on one GPU (Iteration, {k} a pass): {:.1} us \
             per step; the cuts and the halo exchange add {:.1} us per step; {}",
            shard_step * 1e6,
            (per_step - shard_step) * 1e6,
            efficiency(
                array.team(),
                "weak-scaling efficiency T1(shard) / TN",
                shard_step / per_step
            )
        );
    }
    Ok(())
}

/// `ratio` as the scaling efficiency `label` names, or why there is none: virtual ranks run one
/// after another on one GPU.
fn efficiency(team: &Team, label: &str, ratio: f64) -> String {
    match team.transport() {
        Transport::Nccl => format!("{label} = {:.1} %", 100.0 * ratio),
        Transport::Virtual => "(virtual ranks share one GPU: no scaling efficiency)".into(),
    }
}

/// PyTorch's sum per call over as many GPUs as the team has (run only by a team that drives
/// all its ranks, with `python3` and torch present), beside the team's.
fn torch_baseline(team: &Team, shards: &Shards, ours: &Stats, calls: usize) {
    use std::io::Write as _;
    if team.local_ranks().len() != team.size() || team.transport() != Transport::Nccl {
        println!(
            "(PyTorch baseline: only with --transport nccl, where one process holds every rank)"
        );
        return;
    }
    let rendezvous = std::env::temp_dir().join(format!("ferrocuda-torch-{}", std::process::id()));
    let _ = std::fs::remove_file(&rendezvous);
    let child = std::process::Command::new("python3")
        .arg("-")
        .args([
            team.size().to_string(),
            shards.len(0).to_string(),
            calls.to_string(),
            rendezvous.display().to_string(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let output = child.and_then(|mut c| {
        c.stdin
            .take()
            .expect("piped")
            .write_all(include_str!("multi_baseline.py").as_bytes())?;
        c.wait_with_output()
    });
    let _ = std::fs::remove_file(&rendezvous);
    match output {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            for line in text.lines() {
                let w: Vec<&str> = line.split_whitespace().collect();
                match w.as_slice() {
                    ["torch", version, "nccl", nccl] => {
                        println!("PyTorch {version} (its NCCL {nccl})");
                    }
                    ["torch", "sum+all_reduce", _, _, us, _] => {
                        let us: f64 = us.parse().unwrap_or(f64::NAN);
                        let ratio = us / (ours.median_s * 1e6);
                        println!(
                            "{:<34} {:>12} {:>10.1} {:>10}   ferrocuda's sum per call: {:.2}x {}",
                            "PyTorch x.sum() + all_reduce",
                            "",
                            us,
                            "",
                            if ratio >= 1.0 { ratio } else { 1.0 / ratio },
                            if ratio >= 1.0 { "faster" } else { "slower" }
                        );
                    }
                    _ => {}
                }
            }
        }
        Ok(o) => println!(
            "(PyTorch baseline failed: {})",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("no output")
        ),
        Err(e) => println!("(PyTorch baseline not run: python3: {e})"),
    }
}
