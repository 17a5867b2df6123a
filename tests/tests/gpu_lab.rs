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
    ])
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
