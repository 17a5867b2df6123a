//! GPU tests of the execution-model lab: the warp-function demo against the CPU warp model,
//! the divergence kernels' results, and the occupancy of every library kernel at every block
//! size from 32 to 1024 against the host-side calculation from the device limits.
use std::process::ExitCode;

use anyhow::ensure;
use ferrocuda::Gpu;
use ferrocuda_lessons::lab::{self, WARP_DEMO_COLUMNS, WarpDemo};
use ferrocuda_lessons::occupancy;
use ferrocuda_tests::{TestResult, gpu_test, run_gpu_suite};

fn main() -> ExitCode {
    run_gpu_suite(vec![
        gpu_test("warp_demo_reproduces_the_notes_table", notes_table),
        gpu_test(
            "warp_demo_matches_the_model_for_every_width_block_and_offset",
            demo_everywhere,
        ),
        gpu_test(
            "divergence_kernels_write_the_cpu_values_on_odd_sizes",
            divergence_results,
        ),
        gpu_test(
            "occupancy_of_every_kernel_matches_the_host_calculation_at_blocks_32_to_1024",
            occupancy_everywhere,
        ),
        gpu_test(
            "the_pictures_drawn_from_runs_match_what_the_notes_say_each_kernel_does",
            pictures,
        ),
        gpu_test(
            "every_listing_as_printed_is_caught_and_its_corrected_kernel_is_right",
            listings_as_printed,
        ),
    ])
}

/// The pictures of `--draw`, each from a run of the kernel, equal the notes' account of it:
/// the trees of the three pairings at every block size, the lanes of each divergence kernel,
/// the stencil's tiles with their halos, the shuffles' sources.
fn pictures(gpu: &Gpu) -> TestResult {
    use ferrocuda_lessons::draw;
    for block in [64, 128, 256, 1024] {
        for k in 0..draw::TREES.len() {
            let got = draw::reduce_tree(gpu, k, block)?;
            ensure!(
                got == draw::tree_model(k, block),
                "{} at block {block}:\n{}",
                got.kernel,
                draw::tree_text(&got)
            );
        }
    }
    // What the trees teach, counted from the runs: neighbored has adding threads in both warps
    // of a 64-thread block until the second-to-last step; neighbored_less and interleaved keep
    // warp 1 out of every step.
    let trees = draw::reduce_trees(gpu, 64)?;
    let warps = |k: usize| {
        trees[k]
            .steps
            .iter()
            .map(|s| draw::step_counts(s).1)
            .collect::<Vec<_>>()
    };
    ensure!(warps(0) == [2, 2, 2, 2, 2, 1], "{:?}", warps(0));
    ensure!(warps(1) == [1, 1, 1, 1, 1, 1], "{:?}", warps(1));
    ensure!(warps(2) == [1, 1, 1, 1, 1, 1], "{:?}", warps(2));
    let d = draw::divergence_masks(gpu, 64)?;
    let divergent: Vec<usize> = d.iter().map(draw::Divergence::divergent_warps).collect();
    ensure!(divergent == [2, 0, 2, 0], "divergent warps {divergent:?}");
    ensure!(
        d[0].masks() == [0x5555_5555, 0x5555_5555],
        "{:x?}",
        d[0].masks()
    );
    for (n, block) in [(20, 8), (33, 32), (1, 3), (7, 7)] {
        let got = draw::stencil_tiles(gpu, n, block)?;
        ensure!(
            got == draw::tiles_model(n, block),
            "n = {n}, block {block}:\n{}",
            draw::tiles_text(&got)
        );
    }
    for demo in [
        WarpDemo::NOTES,
        WarpDemo {
            block: 32,
            width: 32,
            src_lane: 0,
            offset: 1,
        },
        WarpDemo {
            block: 32,
            width: 16,
            src_lane: 0,
            offset: 5,
        },
    ] {
        for sh in draw::shuffles(gpu, demo)? {
            let want = draw::shuffle_model(sh.name, demo.block, demo.width, demo.offset);
            ensure!(
                sh.source == want,
                "{demo:?} {}: {:?} != {want:?}",
                sh.name,
                sh.source
            );
        }
    }
    Ok(())
}

/// Each of the notes' wrong listings, run as printed: a wrong answer where the oracle is to
/// catch it; on the CPU device, racecheck hazards where a race is; the corrected kernel right.
fn listings_as_printed(gpu: &Gpu) -> TestResult {
    use ferrocuda_lessons::as_printed::{self, Catch};
    for listing in as_printed::LISTINGS {
        let o = as_printed::run(gpu, &listing)?;
        ensure!(
            o.corrected_ok,
            "{}: corrected {} != CPU {}",
            listing.name,
            o.corrected,
            o.expected
        );
        match listing.catch {
            // On the CPU device with `FERROCUDA_CPU_CHECK=fail` (as the suite runs it) a listing
            // whose threads exit before a barrier is stopped by synccheck instead.
            Catch::Oracle => ensure!(
                o.wrong
                    || (gpu.is_cpu()
                        && o.launch_error
                            .as_deref()
                            .is_some_and(|e| e.contains("synccheck"))),
                "{}: as printed gave the CPU's answer {}",
                listing.name,
                o.as_printed
            ),
            Catch::Racecheck if gpu.is_cpu() => ensure!(
                o.hazard_addresses() > 0,
                "{}: the CPU device's racecheck saw no hazard",
                listing.name
            ),
            // On a GPU the race checker is compute-sanitizer's (the sanitizer test).
            Catch::Racecheck => {}
        }
    }
    Ok(())
}

fn check_demo(gpu: &Gpu, demo: WarpDemo) -> TestResult {
    let got = demo.run(gpu)?;
    let want = demo.expected();
    ensure!(
        got.len() == demo.block as usize,
        "{} rows for {} lanes",
        got.len(),
        demo.block
    );
    for (t, (g, w)) in got.iter().zip(&want).enumerate() {
        for (c, (&v, e)) in g.iter().zip(w).enumerate() {
            ensure!(
                e.is_none_or(|e| e == v),
                "{demo:?}: lane {t} column {}: got {v}, model {e:?}",
                WARP_DEMO_COLUMNS[c]
            );
        }
    }
    Ok(())
}

/// The table of 樊哲勇第10章: y = 0..7, offset 4 -> down 4,5,6,7,4,5,6,7 and xor 4,5,6,7,0,1,2,3.
fn notes_table(gpu: &Gpu) -> TestResult {
    let rows = WarpDemo::NOTES.run(gpu)?;
    let column = |c: usize| rows[..8].iter().map(|r| r[c]).collect::<Vec<_>>();
    ensure!(column(1) == [0, 1, 2, 3, 4, 5, 6, 7], "y: {:?}", column(1));
    ensure!(
        column(10) == [4, 5, 6, 7, 4, 5, 6, 7],
        "shfl_down: {:?}",
        column(10)
    );
    ensure!(
        column(11) == [4, 5, 6, 7, 0, 1, 2, 3],
        "shfl_xor: {:?}",
        column(11)
    );
    ensure!(
        rows[0][2] == 0xfffe && rows[0][3] == 0x1,
        "ballots {:#x} {:#x}",
        rows[0][2],
        rows[0][3]
    );
    check_demo(gpu, WarpDemo::NOTES)
}

fn demo_everywhere(gpu: &Gpu) -> TestResult {
    let mut cases = 0;
    for width in [1, 2, 4, 8, 16, 32] {
        for block in [1, 5, 16, 31, 32] {
            // `width` itself (capped at 31, the largest delta) reaches past the segment.
            for offset in [0, 1, 4, width.min(31), 31] {
                for src_lane in [0, 2, width - 1, 31] {
                    check_demo(
                        gpu,
                        WarpDemo {
                            block,
                            width,
                            src_lane,
                            offset,
                        },
                    )?;
                    cases += 1;
                }
            }
        }
    }
    ensure!(cases == 600);
    Ok(())
}

fn divergence_results(gpu: &Gpu) -> TestResult {
    for (n, block) in [((1 << 20) + 3, 128), (1000, 100), (1, 32)] {
        let rows = lab::divergence(gpu, n, block, 8, 1)?;
        ensure!(rows.len() == 4);
        for r in rows {
            ensure!(
                r.mismatches == 0,
                "{}: n = {n}, block {block}: {} elements differ",
                r.kernel,
                r.mismatches
            );
        }
    }
    Ok(())
}

fn occupancy_everywhere(gpu: &Gpu) -> TestResult {
    let mut rows = 0;
    for kernel in ferrocuda_lessons::all_entry_points() {
        for block in (32..=1024).step_by(32) {
            let o = occupancy::occupancy(gpu, kernel, block)?;
            ensure!(
                o.active_blocks == o.computed_blocks,
                "{} at {block}: driver {} blocks/SM, host calculation {} ({} regs, {} + {} B shared, limiter {:?})",
                kernel.symbol,
                o.active_blocks,
                o.computed_blocks,
                o.registers,
                o.static_shared,
                o.dynamic_shared,
                o.limiter
            );
            rows += 1;
        }
    }
    ensure!(rows > 1000, "only {rows} rows");
    Ok(())
}
