//! Arrays cut into one shard per rank: on virtual ranks of one GPU (1 to 8 ranks, each with its
//! own streams, exchanging by device copies), over NCCL with one rank on the GPU (its
//! broadcasts and its send/receive to itself), and, on a machine with several GPUs, over NCCL
//! with real ranks: every GPU in one process (one communicator each), and one process per GPU
//! (this binary started again as each rank). Scatter and gather, the sums, minima and maxima
//! against the CPU, the reproducible sum with the bits of the whole array on one GPU and of the
//! CPU order, the iterated stencil with the bits of the one-GPU stencil, for every size that
//! cuts a shard short, empty or off a chunk; a peer that never comes, or is killed mid-run, is
//! a time-out or an error on every other rank, not a hang.
use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use ferrocuda::multi::nccl::UniqueId;
use ferrocuda::multi::{
    ShardedArray, ShardedStencil, Shards, Team, Transport, apply_sharded, sum_reproducible,
};
use ferrocuda::reduce::{self, Reproducible};
use ferrocuda::runtime::element::Element;
use ferrocuda::stencil::{self, Boundary, Taps};
use ferrocuda::{Error, Gpu, with_elem_type};
use ferrocuda_lessons::cpu::reproducible::{same_sum, sum_reproducible as cpu_sum};
use ferrocuda_lessons::kernels::config::{STENCIL_RADII, stencil_steps_per_pass};
use ferrocuda_tests::{
    TestResult, gpu_test, hardware_test, multi_gpu_test, random_vec, run_gpu_suite,
};

/// Set in the environment of a rank process this binary starts: what the rank does
/// (`checks` or `steps`).
const RANK_ROLE: &str = "FERROCUDA_TEST_RANK_ROLE";

/// What a `steps` rank prints once its team formed and stepped.
const STEPPING: &str = "rank stepping";

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(RANK_ROLE) {
        return rank_process(&role);
    }
    let mut trials = vec![
        gpu_test(
            "sharded_array_gathers_what_was_scattered_for_every_size_and_rank_count",
            round_trip,
        ),
        gpu_test(
            "sharded_integer_sum_min_max_equal_the_cpu_for_1_to_8_ranks",
            integers,
        ),
        gpu_test(
            "sharded_reproducible_sum_has_the_bits_of_one_gpu_and_the_cpu_for_1_to_8_ranks",
            reproducible::<f32>,
        ),
        gpu_test(
            "sharded_reproducible_f64_sum_has_the_bits_of_one_gpu_and_the_cpu_for_1_to_8_ranks",
            reproducible::<f64>,
        ),
        gpu_test(
            "sharded_reproducible_sum_refuses_shards_off_a_chunk_boundary",
            refuses_misaligned,
        ),
        gpu_test(
            "sharded_array_from_buffers_takes_each_buffer_as_a_rank",
            from_buffers,
        ),
        gpu_test(
            "sharded_reproducible_sum_of_buffers_with_empty_ranks_has_the_bits_of_one_gpu",
            reproducible_from_buffers,
        ),
        gpu_test(
            "sharded_stencil_iterated_has_the_bits_of_one_gpu_for_every_boundary_and_rank_count",
            stencil_iterated,
        ),
        gpu_test(
            "sharded_stencil_refuses_a_shard_shorter_than_the_radius",
            stencil_short_shard,
        ),
        gpu_test(
            "sharded_stencil_steps_per_pass_are_the_kernels_most_or_the_shortest_shard_over_r",
            stencil_depth,
        ),
        hardware_test(
            "nccl_team_of_one_rank_sums_gathers_and_steps_the_stencil_through_nccl",
            "NCCL",
            nccl_one_rank,
        ),
        hardware_test("nccl_refuses_two_ranks_on_one_gpu", "NCCL", nccl_two_on_one),
        hardware_test(
            "nccl_rank_whose_peer_never_comes_times_out_instead_of_hanging",
            "NCCL",
            nccl_peer_never_comes,
        ),
        multi_gpu_test(
            "nccl_team_of_every_gpu_in_one_process_has_the_bits_of_one_gpu",
            2,
            nccl_every_gpu,
        ),
        multi_gpu_test(
            "nccl_one_process_per_gpu_has_the_bits_of_one_gpu",
            2,
            nccl_process_per_gpu,
        ),
        multi_gpu_test(
            "nccl_ranks_that_disagree_on_a_shape_or_fail_before_it_all_refuse_it_at_once",
            2,
            nccl_ranks_disagree,
        ),
        multi_gpu_test(
            "nccl_peer_killed_mid_run_is_an_error_on_every_other_rank_within_the_limit",
            2,
            nccl_peer_killed,
        ),
    ];
    for ty in stencil::STENCIL_TYPES {
        for weighted in [false, true]
            .into_iter()
            .filter(|&w| !w || (ty.is_float() && !ty.is_half()))
        {
            let taps = if weighted { "weighted" } else { "sum" };
            trials.push(with_elem_type!(ty, T => gpu_test(
                &format!(
                    "sharded_stencil_{taps}_{ty}_several_steps_a_pass_has_the_bits_of_one_gpu"
                ),
                move |gpu| stencil_deep::<T>(gpu, weighted),
            )));
        }
    }
    run_gpu_suite(trials)
}

/// Virtual teams of 1 to 8 ranks on `gpu`.
fn virtual_teams(gpu: &Gpu) -> anyhow::Result<Vec<Team>> {
    Ok((1..=8)
        .map(|r| Team::virtual_ranks(gpu, r))
        .collect::<ferrocuda::Result<_>>()?)
}

/// Sizes around the reproducible chunk (8192 `f32`, 4096 `f64`) and below the rank count.
fn sizes(chunk: usize) -> Vec<usize> {
    vec![
        0,
        1,
        3,
        7,
        31,
        33,
        chunk - 1,
        chunk,
        chunk + 1,
        3 * chunk + 5,
        9 * chunk,
        (1 << 20) + 3,
    ]
}

fn round_trip(gpu: &Gpu) -> TestResult {
    for team in virtual_teams(gpu)? {
        round_trip_on(&team)?;
    }
    Ok(())
}

fn round_trip_on(team: &Team) -> TestResult {
    let ranks = team.size();
    for n in sizes(8192) {
        let data = random_vec::<i32>(n, n as u64);
        for shards in [Shards::even(n, ranks)?, Shards::aligned(n, ranks, 8192)?] {
            let a = ShardedArray::scatter(team, &data, shards.clone())?;
            ensure!(a.gather()? == data, "{ranks} ranks, n = {n}, {shards:?}");
            let local = team.local_ranks();
            for r in 0..ranks {
                let want = local.contains(&r).then(|| shards.len(r));
                ensure!(
                    a.part(r).map(|p| p.len()) == want,
                    "rank {r} (this process drives {local:?}): {shards:?}"
                );
            }
        }
    }
    Ok(())
}

fn integers(gpu: &Gpu) -> TestResult {
    for team in virtual_teams(gpu)? {
        integers_on(&team)?;
    }
    Ok(())
}

fn integers_on(team: &Team) -> TestResult {
    let ranks = team.size();
    {
        for n in sizes(8192) {
            let data = random_vec::<i32>(n, 1000 + n as u64);
            let a = ShardedArray::scatter(team, &data, Shards::even(n, ranks)?)?;
            let sum = data.iter().fold(0i32, |s, &x| s.wrapping_add(x));
            ensure!(a.sum()? == sum, "sum, {ranks} ranks, n = {n}");
            if n == 0 {
                ensure!(a.min().is_err() && a.max().is_err(), "min/max of nothing");
                continue;
            }
            ensure!(
                a.min()? == *data.iter().min().unwrap(),
                "min, {ranks} ranks, n = {n}"
            );
            ensure!(
                a.max()? == *data.iter().max().unwrap(),
                "max, {ranks} ranks, n = {n}"
            );
        }
    }
    Ok(())
}

fn reproducible<T: Reproducible>(gpu: &Gpu) -> TestResult {
    reproducible_on::<T>(gpu, &virtual_teams(gpu)?)
}

fn reproducible_on<T: Reproducible>(gpu: &Gpu, teams: &[Team]) -> TestResult {
    let chunk = reduce::reproducible_chunk::<T>();
    for n in sizes(chunk) {
        let data = random_vec::<T>(n, 77 + n as u64);
        let whole = gpu.upload(&data, "whole")?;
        let one_gpu = reduce::sum_reproducible(gpu, &whole)?;
        let cpu = cpu_sum(&data);
        ensure!(
            same_sum(one_gpu, cpu),
            "n = {n}: one GPU {one_gpu} vs CPU {cpu}"
        );
        for team in teams {
            let ranks = team.size();
            let a = ShardedArray::scatter(team, &data, Shards::aligned(n, ranks, chunk)?)?;
            let got = sum_reproducible(&a)?;
            ensure!(
                same_sum(got, one_gpu),
                "{} n = {n}, {ranks} ranks: {got} vs one GPU {one_gpu} (bits {:#x} vs {:#x})",
                T::TYPE,
                got.to_f64().to_bits(),
                one_gpu.to_f64().to_bits()
            );
        }
    }
    Ok(())
}

/// Built from buffers: aligned parts with empty ones between give the bits of the whole.
fn reproducible_from_buffers(gpu: &Gpu) -> TestResult {
    let chunk = reduce::reproducible_chunk::<f32>();
    let data = random_vec::<f32>(3 * chunk + 5, 21);
    let cuts = [0, 0, chunk, chunk, 3 * chunk, data.len(), data.len()];
    let parts = cuts
        .windows(2)
        .map(|w| gpu.upload(&data[w[0]..w[1]], "part"))
        .collect::<ferrocuda::Result<Vec<_>>>()?;
    let team = Team::virtual_ranks(gpu, parts.len())?;
    let a = ShardedArray::from_buffers(&team, parts)?;
    let whole = reduce::sum_reproducible(gpu, &gpu.upload(&data, "whole")?)?;
    let got = sum_reproducible(&a)?;
    ensure!(same_sum(got, whole), "{got} vs one GPU {whole}");
    Ok(())
}

fn refuses_misaligned(gpu: &Gpu) -> TestResult {
    let data = random_vec::<f32>(20_000, 5);
    let team = Team::virtual_ranks(gpu, 3)?;
    let a = ShardedArray::scatter(&team, &data, Shards::even(data.len(), 3)?)?;
    match sum_reproducible(&a) {
        Err(Error::InvalidArgument { what }) => {
            ensure!(
                what.contains("chunk boundary") && what.contains("rank 1"),
                "{what}"
            );
            Ok(())
        }
        other => anyhow::bail!("expected a refusal, got {other:?}"),
    }
}

fn from_buffers(gpu: &Gpu) -> TestResult {
    let parts = [vec![1i64, 2, 3], vec![], vec![40, 50]];
    let buffers = parts
        .iter()
        .map(|p| gpu.upload(p, "part"))
        .collect::<ferrocuda::Result<Vec<_>>>()?;
    let team = Team::virtual_ranks(gpu, 3)?;
    let a = ShardedArray::from_buffers(&team, buffers)?;
    ensure!(a.shards().ranks() == 3 && a.shards().n() == 5);
    ensure!(a.shards().range(2) == (3..5), "{:?}", a.shards());
    ensure!(a.gather()? == [1, 2, 3, 40, 50]);
    ensure!(a.sum()? == 96 && a.min()? == 1 && a.max()? == 50);
    ensure!(ShardedArray::<i64>::from_buffers(&team, Vec::new()).is_err());
    Ok(())
}

/// The one-GPU stencil applied `steps` times (ping-pong), on the host.
fn one_gpu_steps<T: ferrocuda::runtime::element::Element>(
    gpu: &Gpu,
    data: &[T],
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> anyhow::Result<Vec<T>> {
    let mut a = gpu.upload(data, "a")?;
    let mut b = gpu.alloc::<T>(data.len(), "b")?;
    for _ in 0..steps {
        stencil::apply_into(gpu, &a, &mut b, taps, boundary)?;
        std::mem::swap(&mut a, &mut b);
    }
    Ok(gpu.download(&a)?)
}

fn stencil_iterated(gpu: &Gpu) -> TestResult {
    stencil_iterated_on(gpu, &virtual_teams(gpu)?)?;
    stencil_graphs_on(gpu, &Team::virtual_ranks(gpu, 3)?)?;
    // One rank: graphs on a GPU; on the CPU device a capture that fails, the fallback.
    stencil_graphs_on(gpu, &Team::virtual_ranks(gpu, 1)?)?;
    stencil_odd_cases(gpu)
}

fn stencil_iterated_on(gpu: &Gpu, teams: &[Team]) -> TestResult {
    let steps = 5;
    for boundary in Boundary::ALL {
        for radius in [1u32, 3, 16] {
            for n in [16usize, 100, 4099, (1 << 16) + 3] {
                let taps = Taps::Sum { radius };
                let ints = random_vec::<i32>(n, n as u64 + radius as u64);
                let floats = random_vec::<f32>(n, 7 * n as u64 + radius as u64);
                let want_i = one_gpu_steps(gpu, &ints, &taps, boundary, steps)?;
                let weights =
                    Taps::Weighted((0..=2 * radius).map(|k| 0.1 + k as f32 * 0.01).collect());
                let want_f = one_gpu_steps(gpu, &floats, &weights, boundary, steps)?;
                for team in teams {
                    let ranks = team.size();
                    let shards = Shards::even(n, ranks)?;
                    if (0..ranks).any(|k| shards.len(k) > 0 && shards.len(k) < radius as usize) {
                        continue;
                    }
                    let a = ShardedArray::scatter(team, &ints, shards.clone())?;
                    let got = apply_sharded(&a, &taps, boundary, steps)?.gather()?;
                    ensure!(
                        got == want_i,
                        "i32 {boundary:?} R = {radius} n = {n} {ranks} ranks"
                    );
                    // The same steps in two calls of a plan that keeps its state.
                    let mut plan = ShardedStencil::new(&a, &taps, boundary)?;
                    plan.step(2)?;
                    plan.step(steps - 2)?;
                    ensure!(
                        plan.to_array()?.gather()? == want_i,
                        "plan stepped 2 + {}: i32 {boundary:?} R = {radius} n = {n} {ranks} ranks",
                        steps - 2
                    );
                    let a = ShardedArray::scatter(team, &floats, shards)?;
                    let got = apply_sharded(&a, &weights, boundary, steps)?.gather()?;
                    let same = got
                        .iter()
                        .zip(&want_f)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    ensure!(
                        same,
                        "f32 {boundary:?} R = {radius} n = {n} {ranks} ranks: not the same bits"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Empty shards (n below the rank count), one holder shorter than the radius, shards built from
/// buffers with empty ones between, and zero steps, for every boundary.
fn stencil_odd_cases(gpu: &Gpu) -> TestResult {
    let steps = 5;
    for boundary in Boundary::ALL {
        for (n, ranks, radius) in [(3usize, 8usize, 1u32), (5, 8, 1), (2, 1, 3), (2, 5, 1)] {
            let data = random_vec::<i32>(n, n as u64 + ranks as u64);
            let taps = Taps::Sum { radius };
            let want = one_gpu_steps(gpu, &data, &taps, boundary, steps)?;
            let team = Team::virtual_ranks(gpu, ranks)?;
            let a = ShardedArray::scatter(&team, &data, Shards::even(n, ranks)?)?;
            let got = apply_sharded(&a, &taps, boundary, steps)?.gather()?;
            ensure!(
                got == want,
                "{boundary:?} n = {n}, {ranks} ranks, R = {radius}"
            );
        }
        let data = random_vec::<i32>(200, 9);
        let parts = [&data[..100], &[][..], &data[100..], &[][..]]
            .iter()
            .map(|p| gpu.upload(p, "part"))
            .collect::<ferrocuda::Result<Vec<_>>>()?;
        let team = Team::virtual_ranks(gpu, parts.len())?;
        let a = ShardedArray::from_buffers(&team, parts)?;
        let taps = Taps::Sum { radius: 16 };
        let want = one_gpu_steps(gpu, &data, &taps, boundary, steps)?;
        ensure!(
            apply_sharded(&a, &taps, boundary, steps)?.gather()? == want,
            "{boundary:?} from buffers"
        );
        ensure!(
            apply_sharded(&a, &taps, boundary, 0)?.gather()? == data,
            "{boundary:?} zero steps"
        );
    }
    Ok(())
}

/// Every radius and boundary of one type and taps, several steps a pass: shards between `H`
/// and `2H` long (`H = k R`, so a rank at an end of the array has a window that meets it) and
/// shards at every offset modulo a vector, on 2, 3 and 5 ranks; `k + 3` steps in one call, and
/// the same in calls of 2 and `k + 1` of a plan doing 3 steps a pass; against the one-step
/// stencil on one GPU, bit for bit.
fn stencil_deep<T: Element>(gpu: &Gpu, weighted: bool) -> TestResult {
    for &radius in &STENCIL_RADII {
        let taps = if weighted {
            Taps::Weighted(random_vec::<T>(2 * radius as usize + 1, u64::from(radius)))
        } else {
            Taps::Sum { radius }
        };
        let k = stencil_steps_per_pass(radius, (16 / size_of::<T>()) as u32) as usize;
        let h = k * radius as usize;
        let steps = k + 3;
        for boundary in Boundary::ALL {
            for n in [5 * h + 3, 3 * 1024 + 5 * h + 7] {
                let data = spread::<T>(n, n as u64 ^ u64::from(radius) << 20);
                let want = one_gpu_steps(gpu, &data, &taps, boundary, steps)?;
                for ranks in [2, 3, 5] {
                    let team = Team::virtual_ranks(gpu, ranks)?;
                    let a = ShardedArray::scatter(&team, &data, Shards::even(n, ranks)?)?;
                    let what = format!(
                        "{} {boundary:?} R = {radius} n = {n} on {ranks} ranks",
                        T::TYPE
                    );
                    let same = |got: &[T], how: &str| -> TestResult {
                        if let Some(i) = (0..n).find(|&i| !got[i].same_bits(want[i])) {
                            bail!(
                                "{what}, {how}: element {i} is {:?}, one GPU gives {:?}",
                                got[i],
                                want[i]
                            );
                        }
                        Ok(())
                    };
                    let plan = ShardedStencil::new(&a, &taps, boundary)?;
                    ensure!(
                        plan.steps_per_pass() == k,
                        "{what}: {} a pass",
                        plan.steps_per_pass()
                    );
                    drop(plan);
                    same(
                        &apply_sharded(&a, &taps, boundary, steps)?.gather()?,
                        "one call",
                    )?;
                    let mut plan =
                        ShardedStencil::new(&a, &taps, boundary)?.with_steps_per_pass(3.min(k))?;
                    plan.step(2)?;
                    plan.step(steps - 2)?;
                    same(&plan.to_array()?.gather()?, "3 a pass, 2 + k + 1 steps")?;
                }
            }
        }
    }
    Ok(())
}

/// `n` random values over many binades (floats: up to 2^24 times apart), so that a sum's
/// rounding depends on the order of its adds.
fn spread<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = ferrocuda_lessons::cpu::SplitMix64::new(seed);
    random_vec::<T>(n, seed)
        .into_iter()
        .map(|x| {
            if T::TYPE.is_float() {
                T::from_f64(x.to_f64() * f64::from(1u32 << (rng.next_u64() % 25)) / 4096.0)
            } else {
                x
            }
        })
        .collect()
}

/// The depth of a pass: the kernel's most, or fewer when a shard is shorter than that many
/// radii; a depth out of range is refused, naming the range.
fn stencil_depth(gpu: &Gpu) -> TestResult {
    let taps = Taps::<i32>::Sum { radius: 3 };
    let most = stencil_steps_per_pass(3, 4) as usize;
    let team = Team::virtual_ranks(gpu, 4)?;
    for (n, k) in [
        (4 * 3 * most, most),
        (4 * 3 * most - 1, most - 1),
        (4 * 3, 1),
    ] {
        let data = random_vec::<i32>(n, 3);
        let a = ShardedArray::scatter(&team, &data, Shards::even(n, 4)?)?;
        let plan = ShardedStencil::new(&a, &taps, Boundary::Zero)?;
        ensure!(
            plan.steps_per_pass() == k,
            "n = {n}: {} a pass, not {k}",
            plan.steps_per_pass()
        );
        let e = match plan.with_steps_per_pass(k + 1) {
            Err(e) => e,
            Ok(_) => bail!("n = {n}: {} steps a pass accepted", k + 1),
        };
        ensure!(e.to_string().contains(&format!("1 to {k}")), "{e}");
    }
    // One rank holds it all: no cuts, the kernel's most at any length.
    let one = Team::virtual_ranks(gpu, 1)?;
    let a = ShardedArray::scatter(&one, &[1, 2, 3], Shards::even(3, 1)?)?;
    ensure!(ShardedStencil::new(&a, &taps, Boundary::Periodic)?.steps_per_pass() == most);
    Ok(())
}

fn stencil_short_shard(gpu: &Gpu) -> TestResult {
    let data = random_vec::<f32>(20, 2);
    let team = Team::virtual_ranks(gpu, 8)?;
    let a = ShardedArray::scatter(&team, &data, Shards::even(20, 8)?)?;
    match apply_sharded(&a, &Taps::Sum { radius: 3 }, Boundary::Periodic, 1) {
        Err(Error::InvalidArgument { what }) => {
            ensure!(
                what.contains("fewer than the radius") && what.contains("rank 4 holds 2"),
                "{what}"
            );
            Ok(())
        }
        Err(e) => anyhow::bail!("expected a refusal, got {e}"),
        Ok(_) => anyhow::bail!("expected a refusal, got a result"),
    }
}

/// NCCL with one rank: every operation through the NCCL transport (the gathers and the
/// reproducible sum's chunk sums as broadcasts from rank 0 to itself, the periodic stencil's
/// halos as a send to itself and a receive from itself), against the same checks as the
/// virtual ranks.
fn nccl_one_rank(gpu: &Gpu) -> TestResult {
    let team = Team::nccl(std::slice::from_ref(gpu))?;
    ensure!(team.transport() == Transport::Nccl && team.size() == 1);
    ensure!(team.local_ranks() == [0]);
    round_trip_on(&team)?;
    integers_on(&team)?;
    let teams = [team];
    reproducible_on::<f32>(gpu, &teams)?;
    reproducible_on::<f64>(gpu, &teams)?;
    stencil_iterated_on(gpu, &teams)?;
    stencil_graphs_on(gpu, &teams[0])
}

fn nccl_two_on_one(gpu: &Gpu) -> TestResult {
    match Team::nccl(&[gpu.clone(), gpu.clone()]) {
        Err(Error::InvalidArgument { what }) => {
            ensure!(
                what.contains("ranks 0 and 1 are both on device") && what.contains("virtual"),
                "{what}"
            );
            Ok(())
        }
        other => anyhow::bail!("expected a refusal, got {other:?}"),
    }
}

/// Rank 0 of 2 alone: the communicator cannot form; the wait ends at the limit with a
/// time-out naming the rank, and the communicator is aborted.
fn nccl_peer_never_comes(gpu: &Gpu) -> TestResult {
    let limit = Duration::from_secs(3);
    let start = Instant::now();
    let got = Team::join(gpu, 0, 2, UniqueId::new()?, limit);
    let took = start.elapsed();
    match got {
        Err(e @ Error::Timeout { .. }) => {
            let text = e.to_string();
            ensure!(
                text.contains("rank 0 of 2") && text.contains("3 s"),
                "{text}"
            );
        }
        other => anyhow::bail!("expected a time-out, got {other:?}"),
    }
    ensure!(
        took >= limit && took < limit + Duration::from_secs(20),
        "the time-out came after {took:?} for a limit of {limit:?}"
    );
    Ok(())
}

/// Every check of the virtual ranks, on `team`, against `gpu`'s one-GPU results.
fn every_check_on(gpu: &Gpu, team: Team) -> TestResult {
    round_trip_on(&team)?;
    integers_on(&team)?;
    let teams = [team];
    reproducible_on::<f32>(gpu, &teams)?;
    reproducible_on::<f64>(gpu, &teams)?;
    stencil_iterated_on(gpu, &teams)?;
    stencil_graphs_on(gpu, &teams[0])
}

/// The steps through captured CUDA graphs (forced on, NCCL ranks): a first call of one step
/// (so the graph starts from the other buffer), then calls that replay the graph several
/// times with passes left over, against the one-GPU stencil, bit for bit; in a process that
/// drives one NCCL rank the graphs must have been used.
fn stencil_graphs_on(gpu: &Gpu, team: &Team) -> TestResult {
    for boundary in Boundary::ALL {
        for radius in [1u32, 3] {
            let taps = Taps::Sum { radius };
            let n = 3 * 1024 * team.size() + 5;
            let data = random_vec::<i32>(n, n as u64 + u64::from(radius));
            let a = ShardedArray::scatter(team, &data, Shards::even(n, team.size())?)?;
            let mut plan = ShardedStencil::new(&a, &taps, boundary)?.with_graphs(Some(true));
            let k = plan.steps_per_pass();
            let calls = [1, 5 * k + 2, 4 * k, 2 * k + 7];
            let mut done = 0;
            for steps in calls {
                plan.step(steps)?;
                done += steps;
                let want = one_gpu_steps(gpu, &data, &taps, boundary, done)?;
                ensure!(
                    plan.to_array()?.gather()? == want,
                    "graphs: {boundary:?} R = {radius} n = {n}, {} ranks, after {done} steps",
                    team.size()
                );
            }
            // A shallower depth after the capture: its graphs are dropped, not replayed.
            let mut shallow = plan.with_steps_per_pass(3.min(k))?;
            shallow.step(13)?;
            done += 13;
            let want = one_gpu_steps(gpu, &data, &taps, boundary, done)?;
            ensure!(
                shallow.to_array()?.gather()? == want,
                "graphs, then 3 a pass: {boundary:?} R = {radius} n = {n}, {} ranks",
                team.size()
            );
            let plan = shallow;
            // Graphs where a process drives one NCCL rank, or the team is one rank; the CPU
            // device cannot capture, and the steps above ran on the streams instead.
            let wanted = team.local_ranks().len() == 1
                && (team.transport() == Transport::Nccl || team.size() == 1);
            if gpu.is_cpu() {
                ensure!(
                    !plan.uses_graphs() && (plan.graph_error().is_some() == wanted),
                    "CPU device: graphs {}, error {:?}",
                    plan.uses_graphs(),
                    plan.graph_error()
                );
            } else {
                if let Some(e) = plan.graph_error() {
                    bail!("the step graphs were not captured: {e}");
                }
                ensure!(
                    plan.uses_graphs() == wanted,
                    "graphs used: {}",
                    plan.uses_graphs()
                );
            }
        }
    }
    Ok(())
}

/// One process, one NCCL communicator per GPU: teams of 2, 4, ... and all of the GPUs.
fn nccl_every_gpu(gpus: &[Gpu]) -> TestResult {
    let all = gpus.len();
    for k in (2..=all).filter(|&k| k.is_power_of_two() || k == all) {
        let team = Team::nccl(&gpus[..k])?;
        ensure!(team.transport() == Transport::Nccl && team.size() == k);
        ensure!(team.local_ranks() == (0..k).collect::<Vec<_>>());
        for (r, g) in gpus[..k].iter().enumerate() {
            ensure!(team.gpu_of(r).map(|t| t.props().ordinal) == Some(g.props().ordinal));
        }
        every_check_on(&gpus[0], team).map_err(|e| e.context(format!("{k} GPUs")))?;
    }
    Ok(())
}

/// A rank process this binary started (`RANK_ROLE` set): runs its role, says what failed on
/// stderr, and exits 0 only if the role succeeded.
fn rank_process(role: &str) -> ExitCode {
    // A rank lives no longer than the test that started it: its stdin is a pipe the test holds
    // open, so end of file means the test is gone (stopped by a time limit, say) and nobody will
    // stop this rank, which would otherwise go on stepping on its GPU.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(4);
    });
    let result = match role {
        "checks" => rank_checks(),
        "steps" => rank_steps_until_error(),
        "disagree" => rank_disagrees(),
        other => Err(anyhow::anyhow!(
            "{RANK_ROLE}={other}: not checks, steps or disagree"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    }
}

/// The `checks` role: this process is one rank (`Team::from_env`); every check of the
/// one-process teams, the same collectives in the same order on every rank.
fn rank_checks() -> TestResult {
    let team = Team::from_env()?;
    let rank = team.local_ranks()[0];
    let gpu = team.gpu_of(rank).expect("the rank's own GPU").clone();
    every_check_on(&gpu, team)
}

/// The `steps` role: a periodic stencil stepped until a step fails (its peer killed), which
/// is returned; five minutes without a failure is an error too.
fn rank_steps_until_error() -> TestResult {
    let team = Team::from_env()?;
    let n = (1 << 22) * team.size();
    let data = random_vec::<f32>(n, 5);
    let array = ShardedArray::scatter(&team, &data, Shards::even(n, team.size())?)?;
    let taps = Taps::Weighted(vec![1.0 / 7.0; 7]);
    let mut plan = ShardedStencil::new(&array, &taps, Boundary::Periodic)?;
    plan.step(10)?;
    println!("{STEPPING}");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(300) {
        plan.step(10)?;
    }
    bail!("stepped for {:?} without an error", start.elapsed())
}

/// What a `disagree` rank prints for each refusal it got: the step, and the error.
const REFUSED: &str = "refused";

/// The `disagree` role: collectives whose shapes differ by rank, each of which must fail on
/// every rank at once (well within the time limit of a wait), naming the rank that differs or
/// failed; then one that agrees, which must work.
fn rank_disagrees() -> TestResult {
    let team = Team::from_env()?;
    let rank = team.local_ranks()[0];
    let size = team.size();
    let limit = Duration::from_secs(5);
    let refused = |step: &str, op: &mut dyn FnMut() -> Result<(), Error>, want: &[&str]| {
        let start = Instant::now();
        let text = match op() {
            Ok(()) => bail!("{step}: accepted"),
            Err(e) => e.to_string(),
        };
        ensure!(
            start.elapsed() < limit,
            "{step}: took {:?}",
            start.elapsed()
        );
        for w in want {
            ensure!(text.contains(w), "{step}: `{text}` does not say `{w}`");
        }
        println!("{REFUSED} {step}: {text}");
        anyhow::Ok(())
    };
    // 1. A gather of arrays of different lengths (the last rank holds one more element).
    let n = 1000 + usize::from(rank == size - 1);
    let data = random_vec::<f32>(n, 1);
    let uneven = ShardedArray::scatter(&team, &data, Shards::even(n, size)?)?;
    let last = size - 1;
    refused(
        "gather",
        &mut || uneven.gather().map(|_| ()),
        &[
            "disagree",
            "rank 0 has 1000 f32",
            &format!("rank {last} has 1001 f32"),
        ],
    )?;
    // 2. The same cut, other taps on the last rank.
    let n = 4096;
    let data = random_vec::<f32>(n, 2);
    let array = ShardedArray::scatter(&team, &data, Shards::even(n, size)?)?;
    let radius = if rank == last { 2 } else { 1 };
    refused(
        "stencil plan",
        &mut || ShardedStencil::new(&array, &Taps::Sum { radius }, Boundary::Periodic).map(|_| ()),
        &["disagree", &format!("rank {last} has 4096 f32")],
    )?;
    // 3. One plan, different step counts.
    let taps = Taps::Sum { radius: 1 };
    let mut plan = ShardedStencil::new(&array, &taps, Boundary::Periodic)?;
    refused(
        "stencil step",
        &mut || plan.step(3 + usize::from(rank == last)),
        &["sharded stencil step", "disagree"],
    )?;
    // 4. The last rank fails on its own (taps of radius 0) before the plan's collective.
    let bad = if rank == last { 0 } else { 1 };
    let want = if rank == last {
        "radius".to_string()
    } else {
        format!("rank {last} of {size} failed before it")
    };
    refused(
        "a rank failed",
        &mut || ShardedStencil::new(&array, &Taps::Sum { radius: bad }, Boundary::Zero).map(|_| ()),
        &[&want],
    )?;
    // 5. Agreeing again: the team still works.
    ensure!(array.gather()? == data, "the gather after the refusals");
    let mut plan = ShardedStencil::new(&array, &taps, Boundary::Periodic)?;
    plan.step(5)?;
    println!("{REFUSED} done");
    Ok(())
}

/// A rank process of this binary: its stderr read whole by a thread (so that it never blocks on
/// a full pipe), and when it exited, once seen.
struct RankProcess {
    child: Child,
    /// The write end of the rank's stdin, held until the rank is dropped (see `rank_process`).
    _lifeline: Option<std::process::ChildStdin>,
    stderr: Option<std::thread::JoinHandle<String>>,
    said: String,
    exited: Option<(i32, Instant)>,
}

/// The rank processes of one test, meeting through a rendezvous file in a directory of their
/// own. Dropped, it kills every rank still running and removes the directory, on every path: a
/// failed test leaves no rank behind on the GPUs.
struct Ranks {
    procs: Vec<RankProcess>,
    dir: std::path::PathBuf,
    /// `(rank, line)` for each line a rank prints on stdout.
    lines: mpsc::Receiver<(usize, String)>,
}

impl Drop for Ranks {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RankProcess {
    /// Notes that the rank exited with `code` at `at`, and keeps what it said on stderr (whole
    /// now that its end of the pipe is closed).
    fn note_exit(&mut self, code: i32, at: Instant) {
        self.exited = Some((code, at));
        if let Some(reader) = self.stderr.take() {
            self.said = reader.join().unwrap_or_default();
        }
    }
}

impl Ranks {
    /// Starts `ranks` processes of this binary in `role`, rank `r` on device `r`, every wait
    /// bounded by `limit`.
    fn start(role: &str, ranks: usize, limit: Duration) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let run = format!(
            "ferrocuda-test-{role}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        );
        let dir = std::env::temp_dir().join(&run);
        std::fs::create_dir(&dir)?;
        // A port nothing listens on now, for the TCP rendezvous.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let (tx, lines) = mpsc::channel();
        let mut started = Self {
            procs: Vec::with_capacity(ranks),
            dir,
            lines,
        };
        for rank in 0..ranks {
            let mut command = Command::new(&exe);
            // The tests need no NVLink multicast (the exchanges are point to point, the gathers
            // broadcasts), and the owners of a shared machine may forbid it.
            if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
                command.env("NCCL_NVLS_ENABLE", "0");
            }
            if role == "checks" {
                // As torchrun starts ranks, meeting through a file.
                command
                    .env("RANK", rank.to_string())
                    .env("WORLD_SIZE", ranks.to_string())
                    .env("LOCAL_RANK", rank.to_string())
                    .env("FERROCUDA_RENDEZVOUS", started.dir.join("rendezvous"));
            } else {
                // As srun starts ranks, meeting over TCP on the loopback address.
                command
                    .env_remove("RANK")
                    .env_remove("FERROCUDA_RENDEZVOUS")
                    .env("SLURM_PROCID", rank.to_string())
                    .env("SLURM_NTASKS", ranks.to_string())
                    .env("SLURM_LOCALID", rank.to_string())
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", port.to_string());
            }
            let mut child = command
                .env(RANK_ROLE, role)
                .env("FERROCUDA_RUN_ID", &run)
                .env("FERROCUDA_NCCL_TIMEOUT", limit.as_secs_f64().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let lifeline = child.stdin.take();
            let stdout = child.stdout.take().expect("piped");
            let mut err = child.stderr.take().expect("piped");
            // Held by the guard before anything else can fail.
            started.procs.push(RankProcess {
                child,
                _lifeline: lifeline,
                stderr: None,
                said: String::new(),
                exited: None,
            });
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = tx.send((rank, line));
                }
            });
            started.procs[rank].stderr = Some(std::thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                text
            }));
        }
        Ok(started)
    }

    /// Notes every rank that has exited since the last look, with the time it was seen.
    fn poll(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            if p.exited.is_none()
                && let Some(status) = p.child.try_wait()?
            {
                p.note_exit(status.code().unwrap_or(-1), Instant::now());
            }
        }
        Ok(())
    }

    /// Looks every 10 ms until every rank has exited or `deadline` passed.
    fn wait_all(&mut self, deadline: Instant) -> anyhow::Result<()> {
        loop {
            self.poll()?;
            if self.procs.iter().all(|p| p.exited.is_some()) || Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills every rank still running and keeps what each said: a hung rank's stderr is the
    /// evidence of where it hung.
    fn stop(&mut self) {
        for p in &mut self.procs {
            if p.exited.is_none() {
                let _ = p.child.kill();
                let _ = p.child.wait();
                p.note_exit(-1, Instant::now());
            }
        }
    }

    /// Kills rank `rank` (`SIGKILL`) and waits for it; the time of the kill.
    fn kill(&mut self, rank: usize) -> anyhow::Result<Instant> {
        let p = &mut self.procs[rank];
        p.child.kill()?;
        let at = Instant::now();
        let status = p.child.wait()?;
        p.note_exit(status.code().unwrap_or(-1), at);
        Ok(at)
    }

    /// What each rank that exited with an error said, for a failure's message.
    fn failures(&self) -> String {
        self.procs
            .iter()
            .enumerate()
            .filter_map(|(r, p)| match p.exited {
                Some((0, _)) => None,
                Some((-1, _)) => Some(format!(
                    "rank {r}: killed (by a signal, or by the test at its deadline): {}",
                    p.said
                )),
                Some((code, _)) => Some(format!("rank {r}: exit {code}: {}", p.said)),
                None => Some(format!("rank {r}: still running")),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One process per GPU (`Team::from_env`, as `torchrun` starts ranks): every rank runs every
/// check of the one-process teams and must exit 0.
fn nccl_process_per_gpu(gpus: &[Gpu]) -> TestResult {
    let mut ranks = Ranks::start("checks", gpus.len(), Duration::from_secs(60))?;
    ranks.wait_all(Instant::now() + Duration::from_secs(600))?;
    ranks.stop();
    let failures = ranks.failures();
    ensure!(failures.is_empty(), "{failures}");
    Ok(())
}

/// One process per GPU (over TCP, as srun starts them), collectives whose shapes differ by
/// rank, or that one rank fails before: every rank must refuse each at once, naming the rank,
/// and go on working (the `disagree` role checks its own refusals; here, that every rank
/// printed all of them and exited 0 well within the limit).
fn nccl_ranks_disagree(gpus: &[Gpu]) -> TestResult {
    let limit = Duration::from_secs(30);
    let mut ranks = Ranks::start("disagree", gpus.len(), limit)?;
    ranks.wait_all(Instant::now() + Duration::from_secs(240))?;
    ranks.stop();
    let failures = ranks.failures();
    ensure!(failures.is_empty(), "{failures}");
    let mut said = vec![Vec::new(); gpus.len()];
    while let Ok((rank, line)) = ranks.lines.try_recv() {
        said[rank].push(line);
    }
    for (rank, lines) in said.iter().enumerate() {
        let refusals = lines.iter().filter(|l| l.starts_with(REFUSED)).count();
        ensure!(
            refusals == 5,
            "rank {rank} printed {refusals} of 5 refusal lines: {lines:#?}"
        );
    }
    Ok(())
}

/// One process per GPU (started as srun starts ranks, meeting over TCP on the loopback
/// address) stepping a periodic stencil; once every rank steps, the last is killed
/// (SIGKILL). Every other rank must exit with an error naming its rank, within the time limit
/// of a wait (5 s) and the time an abort and an exit take, never hang.
fn nccl_peer_killed(gpus: &[Gpu]) -> TestResult {
    let count = gpus.len();
    let victim = count - 1;
    let limit = Duration::from_secs(5);
    let slack = Duration::from_secs(10);
    let mut ranks = Ranks::start("steps", count, limit)?;
    let mut stepping = vec![false; count];
    let ready_by = Instant::now() + Duration::from_secs(120);
    while stepping.iter().any(|s| !s) {
        match ranks.lines.recv_timeout(Duration::from_millis(100)) {
            Ok((rank, line)) if line == STEPPING => stepping[rank] = true,
            _ => {}
        }
        ranks.poll()?;
        if ranks.procs.iter().any(|p| p.exited.is_some()) || Instant::now() >= ready_by {
            ranks.stop();
            bail!(
                "not every rank was stepping ({stepping:?}) when a rank exited or 120 s \
                 passed:\n{}",
                ranks.failures()
            );
        }
    }
    // Every rank is past its first step; the kill lands while steps are in flight.
    std::thread::sleep(Duration::from_millis(500));
    ranks.poll()?;
    ensure!(
        ranks.procs.iter().all(|p| p.exited.is_none()),
        "a rank exited before its peer was killed:\n{}",
        ranks.failures()
    );
    let killed = ranks.kill(victim)?;
    ranks.wait_all(killed + limit + slack)?;
    let hung: Vec<bool> = ranks.procs.iter().map(|p| p.exited.is_none()).collect();
    ranks.stop();
    let mut failures = Vec::new();
    for (rank, p) in ranks.procs.iter().enumerate().take(victim) {
        let said = p
            .said
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or("");
        match p.exited {
            _ if hung[rank] => failures.push(format!(
                "rank {rank}: still running {:?} after the kill (killed): {}",
                limit + slack,
                p.said
            )),
            None => unreachable!("every rank was stopped"),
            Some((0, _)) => failures.push(format!("rank {rank}: exit 0 after its peer was killed")),
            Some((code, at)) => {
                let took = at - killed;
                println!(
                    "rank {rank} of {count}: exit {code} {took:.2?} after rank {victim} was killed: {said}"
                );
                if took > limit + slack {
                    failures.push(format!(
                        "rank {rank}: exited {took:?} after the kill (limit {limit:?} + {slack:?})"
                    ));
                }
                let names_rank = said.contains(&format!("rank {rank} of {count}"));
                let is_transport =
                    said.contains("did not finish within") || said.contains("failed on rank");
                if !names_rank || !is_transport {
                    failures.push(format!(
                        "rank {rank}: not a time-out or NCCL error naming the rank: {}",
                        p.said
                    ));
                }
            }
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}
