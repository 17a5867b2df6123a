//! GPU tests of every device-layer item, each against the CPU model: shuffles and votes against
//! the warp emulator (every width, deltas past the segment, partial masks), atomics under
//! contention, static and dynamic shared memory, barriers with predicates, the tile API,
//! indices, grid-stride loops, 16-byte vector access, fences in the last-block pattern, and the
//! smoke kernel. Plus the launch checks that need a device.
use std::process::ExitCode;

use anyhow::{Context, bail, ensure};
use ferrocuda::DeviceBuffer;
use ferrocuda::kernels::entry::Entry;
use ferrocuda::runtime::element::Element;
use ferrocuda::{Error, Gpu, LaunchConfig};
use ferrocuda_lessons::cpu::warp::{self, ShflMode};
use ferrocuda_lessons::cpu::{self, SplitMix64};
use ferrocuda_lessons::kernels::config::SELFTEST_SHARED_BLOCK;
use ferrocuda_lessons::kernels::selftest as k;
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda_lessons::smoke;
use ferrocuda_tests::{TestResult, gpu_test, random_vec, run_gpu_suite};
use libtest_mimic::Trial;

fn main() -> ExitCode {
    let mut trials = Vec::new();
    shuffle_trials::<u32>(&mut trials);
    shuffle_trials::<i32>(&mut trials);
    shuffle_trials::<f32>(&mut trials);
    shuffle_trials::<u64>(&mut trials);
    shuffle_trials::<i64>(&mut trials);
    shuffle_trials::<f64>(&mut trials);
    trials.extend([
        gpu_test(
            "vote_ballot_any_all_match_emulator_on_every_mask",
            vote_matches_emulator,
        ),
        gpu_test(
            "atomic_add_i32_is_exact_under_contention",
            atomic_add_exact::<i32>,
        ),
        gpu_test(
            "atomic_add_u32_is_exact_under_contention",
            atomic_add_exact::<u32>,
        ),
        gpu_test(
            "atomic_add_i64_is_exact_under_contention",
            atomic_add_exact::<i64>,
        ),
        gpu_test(
            "atomic_add_u64_is_exact_under_contention",
            atomic_add_exact::<u64>,
        ),
        gpu_test(
            "atomic_add_f32_is_exact_on_small_integers",
            atomic_add_exact::<f32>,
        ),
        gpu_test(
            "atomic_add_f64_is_exact_on_small_integers",
            atomic_add_exact::<f64>,
        ),
        gpu_test("atomic_min_max_i32_match_cpu", atomic_min_max::<i32>),
        gpu_test("atomic_min_max_u32_match_cpu", atomic_min_max::<u32>),
        gpu_test("atomic_min_max_i64_match_cpu", atomic_min_max::<i64>),
        gpu_test("atomic_min_max_u64_match_cpu", atomic_min_max::<u64>),
        gpu_test("atomic_cas_counter_counts_every_thread", atomic_cas_counter),
        gpu_test("shared_static_reverses_chunks_on_any_n", shared_static),
        gpu_test(
            "shared_dynamic_reverses_chunks_on_any_block_and_n",
            shared_dynamic,
        ),
        gpu_test("syncthreads_count_and_or_match_cpu", sync_predicates),
        gpu_test("indices_3d_cover_grid_and_block", indices_3d),
        gpu_test("grid_stride_loop_copies_every_element", grid_stride_copy),
        gpu_test("vector_16_byte_copy_is_exact", vector_copy),
        gpu_test("last_block_sum_with_gpu_and_system_fences", last_block_sum),
        gpu_test("smoke_saxpy_matches_cpu_bitwise_on_odd_sizes", smoke_sizes),
        gpu_test(
            "launch_rejects_block_0_and_2048_with_kernel_name",
            launch_rejects_bad_blocks,
        ),
        gpu_test(
            "launch_rejects_shared_memory_over_the_limit",
            launch_rejects_shared_over_limit,
        ),
        gpu_test("device_7_is_reported_as_missing", missing_device),
        gpu_test(
            "allocation_larger_than_memory_is_out_of_memory",
            allocation_too_large,
        ),
        gpu_test("device_properties_are_consistent", device_properties),
    ]);
    // Every tile size of `TiledPartition`; a size without a `selftest_tile` instance fails its
    // test instead of dropping it.
    for n in [1u32, 2, 4, 8, 16, 32] {
        trials.push(gpu_test(
            &format!("tile_{n}_api_matches_emulator"),
            move |gpu| tile_matches_emulator(gpu, n),
        ));
    }
    run_gpu_suite(trials)
}

fn poisoned<T: Element>(gpu: &Gpu, n: usize, what: &str) -> anyhow::Result<DeviceBuffer<T>> {
    Ok(gpu.upload(&vec![T::poison(); n], what)?)
}

fn shuffle_trials<T: Element>(trials: &mut Vec<Trial>) {
    for mode in ShflMode::ALL {
        trials.push(gpu_test(
            &format!(
                "shfl_{}_{}_matches_emulator_for_every_width_delta_and_mask",
                format!("{mode:?}").to_lowercase(),
                T::TYPE
            ),
            move |gpu| shuffle_matches_emulator::<T>(gpu, mode),
        ));
    }
}

/// Masks to try with a block of `lanes` threads: all existing lanes, a random subset, the lower
/// half, and one lane.
fn masks_for(lanes: u32, rng: &mut SplitMix64) -> Vec<u32> {
    let existing = if lanes == 32 {
        u32::MAX
    } else {
        (1 << lanes) - 1
    };
    let mut v = vec![
        existing,
        (rng.next_u64() as u32 | 1) & existing,
        existing & 0xffff,
        1,
    ];
    v.dedup();
    v
}

fn shuffle_matches_emulator<T: Element>(gpu: &Gpu, mode: ShflMode) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(
        gpu,
        k::selftest_shfl::<T>().context("no selftest_shfl instance")?,
    )?;
    let mut rng = SplitMix64::new(0x5f1 + mode as u64);
    let mut cases = 0;
    for lanes in [32u32, 16, 7] {
        for width in [1u32, 2, 4, 8, 16, 32] {
            for mask in masks_for(lanes, &mut rng) {
                for b in 0..=33u32 {
                    let input: Vec<T> = random_vec(lanes as usize, rng.next_u64());
                    let d_in = gpu.upload(&input, "shuffle input")?;
                    let out = poisoned::<T>(gpu, lanes as usize, "shuffle output")?;
                    let config = LaunchConfig::linear(1, lanes, 0);
                    // SAFETY: `lanes` elements in and out; `mask` names existing lanes only.
                    unsafe {
                        kernel.launch_and_wait(
                            config,
                            (
                                mode as u32,
                                d_in.as_device_ptr(),
                                out.as_device_ptr(),
                                mask,
                                b,
                                width,
                            ),
                        )?
                    };
                    let got = gpu.download(&out)?;
                    let want = warp::shfl(mode, &input, mask, b, width);
                    for lane in 0..lanes as usize {
                        let ok = match want[lane] {
                            Some(w) => got[lane].same_bits(w),
                            // Lanes outside the mask must not write; lanes reading a lane outside
                            // the mask get an undefined value, which is not checked.
                            None if mask & (1 << lane) == 0 => got[lane].same_bits(T::poison()),
                            None => true,
                        };
                        ensure!(
                            ok,
                            "{mode:?} {}: lanes {lanes}, width {width}, mask {mask:#010x}, b {b}: lane {lane} got {:?}, want {:?} (input {:?})",
                            T::TYPE,
                            got[lane],
                            want[lane],
                            input
                        );
                    }
                    cases += 1;
                }
            }
        }
    }
    ensure!(cases > 500, "only {cases} cases ran");
    Ok(())
}

fn vote_matches_emulator(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_vote())?;
    let mut rng = SplitMix64::new(77);
    for lanes in [32u32, 16, 5, 1] {
        for mask in masks_for(lanes, &mut rng) {
            for pattern in 0..6 {
                let preds: Vec<bool> = (0..lanes)
                    .map(|_| match pattern {
                        0 => true,
                        1 => false,
                        _ => rng.next_u64().is_multiple_of(2),
                    })
                    .collect();
                let p32: Vec<u32> = preds.iter().map(|&p| p as u32).collect();
                let d_pred = gpu.upload(&p32, "vote predicates")?;
                let out = poisoned::<u32>(gpu, 4 * lanes as usize, "vote output")?;
                // SAFETY: `lanes` predicates, `4 * lanes` outputs, mask within existing lanes.
                unsafe {
                    kernel.launch_and_wait(
                        LaunchConfig::linear(1, lanes, 0),
                        (d_pred.as_device_ptr(), mask, out.as_device_ptr()),
                    )?
                };
                let got = gpu.download(&out)?;
                for lane in 0..lanes as usize {
                    let g = &got[4 * lane..4 * lane + 4];
                    if mask & (1 << lane) == 0 {
                        ensure!(
                            g.iter().all(|&w| w == u32::poison()),
                            "lane {lane} outside mask {mask:#x} wrote {g:?}"
                        );
                        continue;
                    }
                    let want = [
                        warp::ballot(&preds, mask),
                        warp::any(&preds, mask) as u32,
                        warp::all(&preds, mask) as u32,
                        lane as u32,
                    ];
                    ensure!(
                        g == want,
                        "lanes {lanes}, mask {mask:#010x}, preds {preds:?}: lane {lane} got [ballot, any, all, lane] = {g:?}, want {want:?}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Values whose sum is exact in every type and every order: integers for the integer types
/// (wrapping), small integers for floats.
trait AtomicElement: Element {
    fn contention_value(rng: &mut SplitMix64) -> Self;
}
macro_rules! atomic_int {
    ($($t:ty),*) => {$(impl AtomicElement for $t {
        fn contention_value(rng: &mut SplitMix64) -> Self { rng.next_u64() as $t }
    })*};
}
atomic_int!(i32, u32, i64, u64);
macro_rules! atomic_float {
    ($($t:ty),*) => {$(impl AtomicElement for $t {
        fn contention_value(rng: &mut SplitMix64) -> Self { (rng.next_u64() % 16) as $t - 8.0 }
    })*};
}
atomic_float!(f32, f64);

fn atomic_add_exact<T: AtomicElement>(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(
        gpu,
        k::selftest_atomic_add::<T>().context("no selftest_atomic_add instance")?,
    )?;
    let n: usize = (1 << 20) + 3;
    let mut rng = SplitMix64::new(11);
    let values: Vec<T> = (0..n).map(|_| T::contention_value(&mut rng)).collect();
    let start = T::contention_value(&mut rng);
    let want = values.iter().fold(start, |a, &v| a.add(v));
    let d = gpu.upload(&values, "atomic inputs")?;
    let acc = gpu.upload(&[start], "atomic accumulator")?;
    // SAFETY: `n` inputs, one accumulator.
    unsafe {
        kernel.launch_and_wait(
            LaunchConfig::linear(264, 256, 0),
            (d.as_device_ptr(), n, acc.as_device_ptr()),
        )?
    };
    let got = gpu.download(&acc)?[0];
    ensure!(
        got.same_bits(want),
        "atomic_add {}: got {got:?}, want {want:?}",
        T::TYPE
    );
    Ok(())
}

fn atomic_min_max<T: Element + Ord>(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(
        gpu,
        k::selftest_atomic_min_max::<T>().context("no selftest_atomic_min_max instance")?,
    )?;
    for (n, seed) in [(1usize, 1u64), (33, 2), (1 << 20, 3)] {
        let values: Vec<T> = random_vec(n, seed);
        let init: Vec<T> = random_vec(2, seed + 100);
        let want = [
            values.iter().copied().fold(init[0], std::cmp::min),
            values.iter().copied().fold(init[1], std::cmp::max),
        ];
        let d = gpu.upload(&values, "min/max inputs")?;
        let out = gpu.upload(&init, "min/max outputs")?;
        // SAFETY: `n` inputs, two outputs.
        unsafe {
            kernel.launch_and_wait(
                LaunchConfig::linear(132, 128, 0),
                (d.as_device_ptr(), n, out.as_device_ptr()),
            )?
        };
        let got = gpu.download(&out)?;
        ensure!(
            got == want,
            "atomic min/max {} n = {n}: got {got:?}, want {want:?}",
            T::TYPE
        );
    }
    Ok(())
}

fn atomic_cas_counter(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_atomic_cas_counter())?;
    let counter = gpu.upload(&[5u64], "counter")?;
    let config = LaunchConfig::linear(133, 192, 0);
    // SAFETY: one counter.
    unsafe { kernel.launch_and_wait(config, (counter.as_device_ptr(),))? };
    let got = gpu.download(&counter)?[0];
    ensure!(
        got == 5 + 133 * 192,
        "CAS counter: got {got}, want {}",
        5 + 133 * 192
    );
    Ok(())
}

fn reverse_chunks_cpu(input: &[u32], block: usize) -> Vec<u32> {
    input
        .chunks(block)
        .flat_map(|c| c.iter().rev().copied())
        .collect()
}

fn run_reverse(
    gpu: &Gpu,
    entry: Entry<(*const u32, *mut u32, usize)>,
    n: usize,
    block: u32,
    dynamic_shared: u32,
) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, entry)?;
    let symbol = entry.symbol();
    let input: Vec<u32> = random_vec(n, n as u64 ^ block as u64);
    let d = gpu.upload(&input, "reverse input")?;
    let out = poisoned::<u32>(gpu, n, "reverse output")?;
    let config = LaunchConfig::per_element(n, block, dynamic_shared).context("grid")?;
    // SAFETY: `n` elements in and out; shared memory as the kernel requires.
    unsafe { kernel.launch_and_wait(config, (d.as_device_ptr(), out.as_device_ptr(), n))? };
    let got = gpu.download(&out)?;
    let want = reverse_chunks_cpu(&input, block as usize);
    ensure!(
        got == want,
        "{symbol}: n = {n}, block {block}: first difference at {:?}",
        got.iter().zip(&want).position(|(a, b)| a != b)
    );
    Ok(())
}

fn shared_static(gpu: &Gpu) -> TestResult {
    for n in [1, 255, 256, 257, 1000, 65536 + 3] {
        run_reverse(
            gpu,
            k::selftest_shared_static(),
            n,
            SELFTEST_SHARED_BLOCK,
            0,
        )?;
    }
    let attrs = ferrocuda_lessons::kernel(gpu, k::selftest_shared_static())?.attributes();
    ensure!(
        attrs.static_shared_bytes == 4 * SELFTEST_SHARED_BLOCK,
        "static shared bytes: {}",
        attrs.static_shared_bytes
    );
    Ok(())
}

fn shared_dynamic(gpu: &Gpu) -> TestResult {
    for block in [32u32, 100, 256, 1024] {
        for n in [
            1usize,
            block as usize - 1,
            block as usize + 1,
            3 * block as usize,
            100_003,
        ] {
            run_reverse(gpu, k::selftest_shared_dynamic(), n, block, 4 * block)?;
        }
    }
    Ok(())
}

fn sync_predicates(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_sync_predicates())?;
    let (grid, block) = (7usize, 96usize);
    let mut rng = SplitMix64::new(5);
    let preds: Vec<u32> = (0..grid * block)
        .map(|i| match i / block {
            0 => 1,
            1 => 0,
            _ => (rng.next_u64() % 2) as u32,
        })
        .collect();
    let d = gpu.upload(&preds, "predicates")?;
    let out = poisoned::<u32>(gpu, 3 * grid, "barrier results")?;
    // SAFETY: grid * block predicates, 3 * grid outputs.
    unsafe {
        kernel.launch_and_wait(
            LaunchConfig::linear(grid as u32, block as u32, 0),
            (d.as_device_ptr(), out.as_device_ptr()),
        )?
    };
    let got = gpu.download(&out)?;
    for (b, chunk) in preds.chunks(block).enumerate() {
        let count = chunk.iter().filter(|&&p| p != 0).count() as u32;
        let want = [count, (count == block as u32) as u32, (count > 0) as u32];
        ensure!(
            got[3 * b..3 * b + 3] == want,
            "block {b}: got {:?}, want {want:?}",
            &got[3 * b..3 * b + 3]
        );
    }
    Ok(())
}

fn tile_matches_emulator(gpu: &Gpu, n: u32) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(
        gpu,
        k::selftest_tile(n).context("no selftest_tile instance")?,
    )?;
    for block in [32u32, 64, 96, 48, 128, 1024] {
        let input: Vec<u32> = random_vec::<u32>(block as usize, (block * n) as u64)
            .iter()
            .map(|v| v % 1000 + 1)
            .collect();
        let d = gpu.upload(&input, "tile input")?;
        let out = poisoned::<u32>(gpu, 10 * block as usize, "tile output")?;
        // SAFETY: `block` inputs, `10 * block` outputs.
        unsafe {
            kernel.launch_and_wait(
                LaunchConfig::linear(1, block, 0),
                (d.as_device_ptr(), out.as_device_ptr()),
            )?
        };
        let got = gpu.download(&out)?;
        for r in 0..block {
            let lane = r % 32;
            let warp_start = r - lane;
            let lanes = (block - warp_start).min(32);
            let vals = &input[warp_start as usize..(warp_start + lanes) as usize];
            let tile_start = lane / n * n;
            let tile_mask = ((((1u64 << n) - 1) << tile_start) as u32)
                & if lanes == 32 {
                    u32::MAX
                } else {
                    (1 << lanes) - 1
                };
            // `None`: the source lane is outside the tile's existing lanes, where CUDA leaves
            // the result undefined (hardware returns another segment's value or 0).
            let shfl = |mode, b| warp::shfl(mode, vals, tile_mask, b, n)[lane as usize];
            let preds = |f: &dyn Fn(u32) -> bool| vals.iter().map(|&v| f(v)).collect::<Vec<_>>();
            let odd = preds(&|v| v % 2 == 1);
            let want = [
                Some(r % n),
                Some(n),
                Some(r / n),
                shfl(ShflMode::Idx, 0),
                shfl(ShflMode::Down, 1),
                shfl(ShflMode::Up, 1),
                shfl(ShflMode::Xor, 1),
                Some((warp::ballot(&odd, tile_mask) >> tile_start) & (((1u64 << n) - 1) as u32)),
                Some(warp::any(&preds(&|v| v % 3 == 0), tile_mask) as u32),
                Some(warp::all(&preds(&|v| v != 0), tile_mask) as u32),
            ];
            let g = &got[10 * r as usize..10 * r as usize + 10];
            let matches = g.iter().zip(&want).all(|(&g, w)| w.is_none_or(|w| w == g));
            ensure!(
                matches,
                "tile {n}, block {block}, thread {r}: got {g:?}, want {want:?}"
            );
        }
    }
    Ok(())
}

fn indices_3d(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_indices_3d())?;
    let config = LaunchConfig {
        grid: [2, 3, 2],
        block: [4, 2, 3],
        dynamic_shared_bytes: 0,
    };
    let threads = (config.grid_blocks() * config.block_threads()) as usize;
    let out = poisoned::<u32>(gpu, 12 * threads, "index output")?;
    // SAFETY: 12 words per thread.
    unsafe { kernel.launch_and_wait(config, (out.as_device_ptr(),))? };
    let got = gpu.download(&out)?;
    let mut g = 0;
    for bz in 0..2 {
        for by in 0..3 {
            for bx in 0..2 {
                for tz in 0..3 {
                    for ty in 0..2 {
                        for tx in 0..4 {
                            let want = [tx, ty, tz, bx, by, bz, 4, 2, 3, 2, 3, 2];
                            ensure!(
                                got[12 * g..12 * g + 12] == want,
                                "thread {g}: got {:?}, want {want:?}",
                                &got[12 * g..12 * g + 12]
                            );
                            g += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn grid_stride_copy(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_grid_stride_copy())?;
    for (n, grid, block) in [
        (0usize, 1u32, 32u32),
        (1, 3, 64),
        (1_000_003, 13, 128),
        (4096, 64, 64),
    ] {
        let input: Vec<u32> = random_vec(n, n as u64);
        let d = gpu.upload(&input, "copy input")?;
        let out = poisoned::<u32>(gpu, n, "copy output")?;
        // SAFETY: `n` elements each way.
        unsafe {
            kernel.launch_and_wait(
                LaunchConfig::linear(grid, block, 0),
                (d.as_device_ptr(), out.as_device_ptr(), n),
            )?
        };
        ensure!(
            gpu.download(&out)? == input,
            "grid-stride copy n = {n}, grid {grid}, block {block}"
        );
    }
    Ok(())
}

fn vector_copy(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_vector_copy_f32())?;
    let n_vectors = 250_001usize;
    let input: Vec<f32> = random_vec(4 * n_vectors, 9);
    let d = gpu.upload(&input, "vector input")?;
    let out = poisoned::<f32>(gpu, 4 * n_vectors, "vector output")?;
    // SAFETY: cuMemAlloc returns 256-byte aligned memory; 4 * n_vectors floats each way.
    unsafe {
        kernel.launch_and_wait(
            LaunchConfig::linear(100, 256, 0),
            (d.as_device_ptr(), out.as_device_ptr(), n_vectors),
        )?
    };
    let got = gpu.download(&out)?;
    ensure!(
        got.iter()
            .zip(&input)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "vector copy differs"
    );
    Ok(())
}

fn last_block_sum(gpu: &Gpu) -> TestResult {
    let kernel = ferrocuda_lessons::kernel(gpu, k::selftest_last_block_sum())?;
    for scope in [0u32, 1] {
        for n in [1usize, 256, 257, 1 << 20] {
            let block = 256u32;
            let grid = n.div_ceil(block as usize) as u32;
            let input: Vec<u32> = random_vec(n, n as u64 + scope as u64);
            let want = input.iter().fold(0u32, |a, &b| a.wrapping_add(b));
            let d = gpu.upload(&input, "input")?;
            let partials = poisoned::<u32>(gpu, grid as usize, "partials")?;
            let counter = gpu.upload(&[0u32], "counter")?;
            let out = poisoned::<u32>(gpu, 1, "sum")?;
            // SAFETY: sizes as the kernel documents; dynamic shared holds block + 1 words.
            unsafe {
                kernel.launch_and_wait(
                    LaunchConfig::linear(grid, block, 4 * (block + 1)),
                    (
                        d.as_device_ptr(),
                        n,
                        partials.as_device_ptr(),
                        counter.as_device_ptr(),
                        out.as_device_ptr(),
                        scope,
                    ),
                )?
            };
            let got = gpu.download(&out)?[0];
            ensure!(
                got == want,
                "last-block sum scope {scope} n = {n}: got {got}, want {want}"
            );
        }
    }
    Ok(())
}

fn smoke_sizes(gpu: &Gpu) -> TestResult {
    for n in [0usize, 1, 31, 33, 255, 257, (1 << 20) + 3] {
        for block in [32u32, 256, 1024, 100] {
            let r = smoke::run(gpu, n, block, 0, n as u64)?;
            ensure!(
                r.mismatches == 0,
                "smoke n = {n} block {block}: {} mismatches",
                r.mismatches
            );
        }
    }
    let x = [1.0f32, 2.0];
    let y = [0.5f32, -1.0];
    ensure!(smoke::saxpy(gpu, 3.0, &x, &y, 64, 0)? == cpu::saxpy(3.0, &x, &y));
    Ok(())
}

fn expect_invalid_launch(r: ferrocuda::Result<Vec<f32>>, needle: &str) -> TestResult {
    match r {
        Err(e @ Error::InvalidLaunch { .. }) => {
            let msg = e.to_string();
            ensure!(
                msg.contains(smoke_saxpy().symbol()) && msg.contains(needle),
                "message lacks kernel name or `{needle}`: {msg}"
            );
            Ok(())
        }
        other => bail!("expected InvalidLaunch, got {other:?}"),
    }
}

fn launch_rejects_bad_blocks(gpu: &Gpu) -> TestResult {
    let x = vec![1.0f32; 100];
    expect_invalid_launch(smoke::saxpy(gpu, 1.0, &x, &x, 2048, 0), "2048")?;
    match smoke::saxpy(gpu, 1.0, &x, &x, 0, 0) {
        Err(Error::InvalidArgument { what }) if what.contains(smoke_saxpy().symbol()) => Ok(()),
        other => bail!("block 0: expected InvalidArgument naming the kernel, got {other:?}"),
    }
}

/// Past the 48 KiB default a launch opts its kernel in (and runs); past the device's opt-in
/// limit it is refused before the driver sees it.
fn launch_rejects_shared_over_limit(gpu: &Gpu) -> TestResult {
    let x = vec![1.0f32; 100];
    let props = gpu.props();
    if props.shared_mem_per_block_optin > props.shared_mem_per_block {
        let past_default = props.shared_mem_per_block + 1;
        let y = smoke::saxpy(gpu, 1.0, &x, &x, 128, past_default)
            .with_context(|| format!("{past_default} B of dynamic shared memory (opt-in)"))?;
        ensure!(
            y.iter().all(|&v| v == 2.0),
            "saxpy with {past_default} B of shared memory"
        );
    }
    let over = props
        .shared_mem_per_block_optin
        .max(props.shared_mem_per_block)
        + 1;
    expect_invalid_launch(smoke::saxpy(gpu, 1.0, &x, &x, 128, over), "shared memory")
}

fn missing_device(_gpu: &Gpu) -> TestResult {
    match Gpu::new(7) {
        Err(Error::DeviceNotFound { ordinal: 7, count }) if count < 8 => Ok(()),
        Err(e) => bail!("expected DeviceNotFound, got {e}"),
        Ok(_) => bail!("device 7 opened (this test assumes fewer than 8 GPUs)"),
    }
}

fn allocation_too_large(gpu: &Gpu) -> TestResult {
    let n = gpu.props().total_memory; // n f32 is 4x the device memory
    match smoke::run(gpu, n, 256, 0, 1) {
        Err(e @ Error::OutOfMemory { .. }) => {
            ensure!(
                e.to_string().contains(smoke_saxpy().symbol()),
                "message lacks the kernel: {e}"
            );
            Ok(())
        }
        other => bail!("expected OutOfMemory, got {other:?}"),
    }
}

fn device_properties(gpu: &Gpu) -> TestResult {
    let p = gpu.props();
    ensure!(p.warp_size == 32 && p.sm_count > 0 && p.max_threads_per_block >= 1024);
    ensure!(
        p.shared_mem_per_block_optin >= p.shared_mem_per_block
            && p.shared_mem_per_sm >= p.shared_mem_per_block
    );
    ensure!(
        // The CPU device reports a nominal host memory; any GPU moves over 100 GB/s.
        p.theoretical_bandwidth_gbs() > if gpu.is_cpu() { 10.0 } else { 100.0 },
        "bandwidth {}",
        p.theoretical_bandwidth_gbs()
    );
    let cc = p.compute_capability.0 * 10 + p.compute_capability.1;
    ensure!(gpu.ptx_arch().trim_start_matches("sm_").parse::<u32>()? <= cc);
    Ok(())
}
