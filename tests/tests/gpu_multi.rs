//! Arrays cut into one shard per rank, on virtual ranks of one GPU: scatter and gather, the
//! sums, minima and maxima against the CPU, and the reproducible sum with the bits of the whole
//! array on one GPU and of the CPU order, for 1 to 8 ranks and every size that cuts a shard
//! short, empty or off a chunk.
use std::process::ExitCode;

use anyhow::ensure;
use ferrocuda::multi::{ShardedArray, Shards, sum_reproducible};
use ferrocuda::reduce::{self, Reproducible};
use ferrocuda::{Error, Gpu};
use ferrocuda_lessons::cpu::reproducible::{same_sum, sum_reproducible as cpu_sum};
use ferrocuda_tests::{TestResult, gpu_test, random_vec, run_gpu_suite};

fn main() -> ExitCode {
    run_gpu_suite(vec![
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
    ])
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
    for ranks in 1..=8 {
        for n in sizes(8192) {
            let data = random_vec::<i32>(n, n as u64);
            for shards in [Shards::even(n, ranks)?, Shards::aligned(n, ranks, 8192)?] {
                let a = ShardedArray::scatter(gpu, &data, shards.clone())?;
                ensure!(a.gather()? == data, "{ranks} ranks, n = {n}, {shards:?}");
                for r in 0..ranks {
                    ensure!(a.part(r).len() == shards.len(r), "rank {r}: {shards:?}");
                }
            }
        }
    }
    Ok(())
}

fn integers(gpu: &Gpu) -> TestResult {
    for ranks in 1..=8 {
        for n in sizes(8192) {
            let data = random_vec::<i32>(n, 1000 + n as u64);
            let a = ShardedArray::scatter(gpu, &data, Shards::even(n, ranks)?)?;
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
        for ranks in 1..=8 {
            let a = ShardedArray::scatter(gpu, &data, Shards::aligned(n, ranks, chunk)?)?;
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

fn refuses_misaligned(gpu: &Gpu) -> TestResult {
    let data = random_vec::<f32>(20_000, 5);
    let a = ShardedArray::scatter(gpu, &data, Shards::even(data.len(), 3)?)?;
    match sum_reproducible(&a) {
        Err(Error::InvalidArgument { what }) => {
            ensure!(what.contains("chunk boundary"), "{what}");
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
    let a = ShardedArray::from_buffers(gpu, buffers)?;
    ensure!(a.shards().ranks() == 3 && a.shards().n() == 5);
    ensure!(a.shards().range(2) == (3..5), "{:?}", a.shards());
    ensure!(a.gather()? == [1, 2, 3, 40, 50]);
    ensure!(a.sum()? == 96 && a.min()? == 1 && a.max()? == 50);
    ensure!(ShardedArray::<i64>::from_buffers(gpu, Vec::new()).is_err());
    Ok(())
}
