//! `ferrocuda sanitize`: every library kernel under NVIDIA's `compute-sanitizer`
//! (`memcheck`, `racecheck`, `synccheck`, `initcheck`), and the two broken-on-purpose kernels
//! of `kernels-crate/lessons/src/broken.rs` to show that the checkers bite.
//!
//! The driver re-runs this binary (`ferrocuda sanitize-cases`) once per tool under
//! `compute-sanitizer`, and attributes every reported error to the kernel it names.
use std::collections::BTreeMap;

use ferrocuda::DeviceBuffer;
use ferrocuda::kernels::entry::EntryInfo;
use ferrocuda::kernels::reduce::{reduce_fast_sum_i32_to_i64, reduce_reproducible};
use ferrocuda_lessons::kernels::broken::{
    broken_reduce_volatile_warp_i32, broken_stencil_1d_no_sync_f32,
};
use ferrocuda_lessons::kernels::config::STENCIL_RADII;
use ferrocuda_lessons::kernels::config::{REDUCE_FAST_ITEMS, reduce_repro_chunk};
use ferrocuda_lessons::kernels::lab::{
    print_thread_indices, warp_functions_demo, wave_halves, wave_layout, wave_rotate,
};
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda_lessons::kernels::timing::timing_spin;
use ferrocuda_lessons::kernels::traced::{reduce_tree_traced_i32, stencil_1d_shared_traced_f32};

use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::error::Result;
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lessons::all_entry_points as entry_points;
use ferrocuda_lessons::cpu::reproducible::Reproducible;
use ferrocuda_lessons::cpu::{ReduceReference, SplitMix64, check_stencil};
use ferrocuda_lessons::reduce::{ReduceOp, ReduceRun, ReduceVariant};
use ferrocuda_lessons::stencil::{Boundary, StencilGrid, StencilRun, StencilVariant, Taps};

/// The sanitizer tools, in the order of the table.
pub const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];

/// The notes' racy listings as printed that the race checkers must flag, compute-sanitizer's
/// and the CPU device's. (The racy `v` loop is flagged by the CPU device's racecheck only;
/// `--as-printed` shows it. The other listings of `broken`, wrong answers rather than races,
/// are caught by `--as-printed`'s oracle.)
pub fn broken_kernels() -> [&'static EntryInfo; 2] {
    [
        broken_stencil_1d_no_sync_f32().info(),
        broken_reduce_volatile_warp_i32().info(),
    ]
}

/// The kernels [`library_cases`] must run: every declared entry point of the embedded PTX but
/// the device layer's self-tests (run by the GPU test suite) and the broken kernels.
pub fn library_kernels() -> Vec<&'static EntryInfo> {
    let broken = broken_kernels();
    entry_points()
        .into_iter()
        .filter(|e| {
            !e.module.ends_with("::selftest")
                && !e.module.ends_with("::broken")
                && !broken.iter().any(|b| b.symbol == e.symbol)
        })
        .collect()
}

/// Sizes with tails: one past a warp, and a non-multiple of every block and vector width
/// (small, because the tools slow every launch down by orders of magnitude).
pub const CASE_SIZES: [usize; 2] = [33, 4099];

/// [`CASE_SIZES`] on `gpu`; on the CPU device, whose racecheck stops at every shared memory
/// access, the second is `1024 + 3` (still several blocks, still a tail for every width).
pub fn case_sizes(gpu: &Gpu) -> [usize; 2] {
    if gpu.is_cpu() {
        [CASE_SIZES[0], 1024 + 3]
    } else {
        CASE_SIZES
    }
}

/// The fast reduction's extra sizes, in tiles of its block (a tile is `block * ITEMS` 16-byte
/// vectors): `3 tiles + 5` runs several blocks, so the ticket path and the last block's combine;
/// `resident blocks * tiles + 1 tile + 7` makes a block loop over two tiles. Both have a ragged
/// tail, and run at offset 1 too (the scalar head).
fn fast_path_sizes<T: Element>(gpu: &Gpu) -> Result<[usize; 2]> {
    let plan = ferrocuda_lessons::reduce::ReducePlan::<T>::new(gpu, ReduceOp::Sum)?;
    let tile = plan.block() as usize * REDUCE_FAST_ITEMS * (16 / size_of::<T>());
    let resident = plan.grid(usize::MAX) as usize;
    Ok([3 * tile + 5, resident * tile + tile + 7])
}

/// Runs every library kernel on small inputs with tails, checking each result; returns
/// `(symbol, passed)` per kernel (a kernel that ran several cases passes if all did).
pub fn library_cases(gpu: &Gpu) -> Result<BTreeMap<String, bool>> {
    let mut results = BTreeMap::new();
    let mut record = |symbol: &str, ok: bool| {
        *results.entry(symbol.to_string()).or_insert(true) &= ok;
    };
    for n in case_sizes(gpu) {
        let r = ferrocuda_lessons::smoke::run(gpu, n, 100, 0, n as u64)?;
        record(smoke_saxpy().symbol(), r.mismatches == 0);
    }
    for ty in ElemType::ALL {
        ferrocuda::with_elem_type!(ty, T => reduce_cases::<T>(gpu, &mut record))?;
        if matches!(ty, ElemType::I32 | ElemType::F32 | ElemType::F64) {
            ferrocuda::with_elem_type!(ty, T => stencil_cases::<T>(gpu, &mut record))?;
        }
    }
    reproducible_cases::<f32>(gpu, &mut record)?;
    reproducible_cases::<f64>(gpu, &mut record)?;
    half_cases::<ferrocuda::runtime::element::F16>(gpu, &mut record)?;
    half_cases::<ferrocuda::runtime::element::Bf16>(gpu, &mut record)?;
    stencil_cases::<ferrocuda::runtime::element::F16>(gpu, &mut record)?;
    stencil_cases::<ferrocuda::runtime::element::Bf16>(gpu, &mut record)?;
    for ty in ferrocuda::stencil::STENCIL_TYPES {
        ferrocuda::with_elem_type!(ty, T => steps_cases::<T>(gpu, &mut record))?;
    }
    copy_cases(gpu, &mut record)?;
    let wide: Vec<i32> = (0..4099).map(|i| i32::MAX - i).collect();
    let d = gpu.upload(&wide, "widening input")?;
    let want: i64 = wide.iter().map(|&v| v as i64).sum();
    record(
        reduce_fast_sum_i32_to_i64().symbol(),
        ferrocuda_lessons::reduce::sum_i32_to_i64(gpu, &d)? == want,
    );
    let demo = ferrocuda_lessons::lab::WarpDemo::NOTES;
    let rows = demo.run(gpu)?;
    let ok = rows
        .iter()
        .zip(demo.expected())
        .all(|(g, w)| g.iter().zip(w).all(|(&g, w)| w.is_none_or(|w| w == g)));
    record(warp_functions_demo().symbol(), ok);
    let waves = ferrocuda_lessons::waves::run(gpu, ferrocuda_lessons::waves::NOTES_BLOCK)?;
    for k in [wave_layout(), wave_rotate()] {
        record(k.symbol(), waves.mismatches.is_empty());
    }
    record(wave_halves().symbol(), waves.mismatches.is_empty());
    // The pictures' traced kernels: each tree and the tiles against the notes' account.
    use ferrocuda_lessons::draw;
    for k in 0..draw::TREES.len() {
        record(
            reduce_tree_traced_i32().symbol(),
            draw::reduce_tree(gpu, k, 64)? == draw::tree_model(k, 64),
        );
    }
    for (n, block) in [(20, 8), (33, 32)] {
        record(
            stencil_1d_shared_traced_f32().symbol(),
            draw::stencil_tiles(gpu, n, block)? == draw::tiles_model(n, block),
        );
    }
    for row in ferrocuda_lessons::lab::divergence(gpu, 1000, 128, 4, 1)? {
        record(row.kernel, row.mismatches == 0);
    }
    // Device printf: two warps print a line each thread (the output goes to this process's
    // stdout, where the `kernel ...` lines are parsed; these lines start otherwise).
    let print = ferrocuda_lessons::kernel(gpu, print_thread_indices())?;
    // SAFETY: the kernel touches no memory.
    let printed = unsafe { print.launch_and_wait(print.config(1, 64), (0u32,)) };
    record(print_thread_indices().symbol(), printed.is_ok());
    record(
        timing_spin().symbol(),
        ferrocuda_lessons::timing::spin_holds_the_gpu(gpu)?,
    );
    Ok(results)
}

/// The reproducible sum at one chunk ragged, two levels, and a misaligned start (every chunk
/// then on the scalar path), checked bit for bit against the CPU order.
fn reproducible_cases<T: Reproducible>(
    gpu: &Gpu,
    record: &mut impl FnMut(&str, bool),
) -> Result<()> {
    let chunk = reduce_repro_chunk(size_of::<T>());
    let mut rng = SplitMix64::new(11);
    let host: Vec<T> = (0..3 * chunk + 6)
        .map(|_| ferrocuda_lessons::cpu::from_random_bits::<T>(rng.next_u64()))
        .collect();
    let input = gpu.upload(&host, "sanitize reproducible input")?;
    for (lo, hi) in [
        (0, case_sizes(gpu)[1]),
        (0, 3 * chunk + 5),
        (1, 3 * chunk + 6),
    ] {
        let got = ferrocuda_lessons::reduce::sum_reproducible(gpu, &input.index(lo..hi))?;
        let want = ferrocuda_lessons::cpu::reproducible::sum_reproducible(&host[lo..hi]);
        record(
            reduce_reproducible::<T>().map_or("reduce_reproducible", |e| e.symbol()),
            got.same_bits(want),
        );
    }
    Ok(())
}

/// The 16-bit floats' kernels: the sum in `f32`, `min` and `max` at the fast path's sizes from
/// offset 1 (the scalar head), on zeros and ones (so the sum is exact in any order) with one
/// extreme each; the reproducible sum's first level aligned (8-byte loads) and not, against the
/// CPU's `f32` order on the widened input.
fn half_cases<T: Element>(gpu: &Gpu, record: &mut impl FnMut(&str, bool)) -> Result<()> {
    use ferrocuda::kernels::reduce as k;
    use ferrocuda::reduce as lib;
    let symbol = |op: ReduceOp| {
        let e = match op {
            ReduceOp::Sum => k::reduce_fast_half::<k::Sum, T>(),
            ReduceOp::Min => k::reduce_fast_half::<k::Min, T>(),
            ReduceOp::Max => k::reduce_fast_half::<k::Max, T>(),
        };
        e.map_or("reduce_fast_half", |e| e.symbol())
    };
    let tile = ferrocuda::reduce::FAST_BLOCK as usize * REDUCE_FAST_ITEMS * 8;
    let resident = lib::ReducePlan::<T, f32>::new(gpu, ReduceOp::Sum)?.grid(usize::MAX) as usize;
    let mut rng = SplitMix64::new(13);
    let longest = resident * tile + tile + 8;
    let mut host: Vec<T> = (0..longest)
        .map(|_| T::from_f64((rng.next_u64() % 2) as f64))
        .collect();
    host[longest / 2] = T::from_f64(-3.0);
    host[longest / 3] = T::from_f64(5.0);
    let input = gpu.upload(&host, "sanitize half-precision input")?;
    for n in [
        case_sizes(gpu)[0],
        case_sizes(gpu)[1],
        3 * tile + 5,
        resident * tile + tile + 7,
    ] {
        let (x, slice) = (&host[1..n + 1], input.index(1..n + 1));
        let exact = x.iter().map(|v| v.to_f64()).sum::<f64>();
        record(
            symbol(ReduceOp::Sum),
            lib::sum_to_f32(gpu, &slice)? as f64 == exact,
        );
        let fold = |max: bool| {
            x.iter()
                .copied()
                .reduce(|a, b| if max { a.max_of(b) } else { a.min_of(b) })
        };
        record(
            symbol(ReduceOp::Min),
            Some(lib::min(gpu, &slice)?) == fold(false),
        );
        record(
            symbol(ReduceOp::Max),
            Some(lib::max(gpu, &slice)?) == fold(true),
        );
    }
    let chunk = reduce_repro_chunk(size_of::<f32>());
    let repro =
        k::reduce_reproducible_half::<T>().map_or("reduce_reproducible_half", |e| e.symbol());
    for (lo, hi) in [
        (0, case_sizes(gpu)[1]),
        (4, 3 * chunk + 9),
        (1, 3 * chunk + 6),
    ] {
        let widened: Vec<f32> = host[lo..hi].iter().map(|v| v.to_f64() as f32).collect();
        let want = ferrocuda_lessons::cpu::reproducible::sum_reproducible(&widened);
        let got = lib::sum_reproducible_to_f32(gpu, &input.index(lo..hi))?;
        record(repro, got.to_bits() == want.to_bits());
    }
    Ok(())
}

fn reduce_cases<T: Element>(gpu: &Gpu, record: &mut impl FnMut(&str, bool)) -> Result<()> {
    let mut rng = SplitMix64::new(7);
    let fast_sizes = fast_path_sizes::<T>(gpu)?;
    let cases = case_sizes(gpu);
    let host: Vec<T> = (0..fast_sizes[1] + 1)
        .map(|_| ferrocuda_lessons::cpu::from_random_bits::<T>(rng.next_u64()))
        .collect();
    let input = gpu.upload(&host, "sanitize reduce input")?;
    for v in ReduceVariant::ALL
        .into_iter()
        .filter(|v| v.supports_type(T::TYPE) && v.runs_on(gpu.props()))
    {
        let fast = matches!(v, ReduceVariant::Fast | ReduceVariant::FastCluster);
        let blocks: Vec<u32> = if v == ReduceVariant::CompleteUnroll {
            ferrocuda_lessons::reduce::complete_unroll_blocks()
        } else {
            vec![v.default_block()]
        };
        for op in ReduceOp::ALL.into_iter().filter(|&o| v.supports_op(o)) {
            for &block in &blocks {
                let sizes: &[usize] = if fast {
                    &[cases[0], cases[1], fast_sizes[0], fast_sizes[1]]
                } else {
                    &cases
                };
                for &n in sizes {
                    // Offset 1: an odd start, so the vector paths take their scalar head.
                    let (lo, hi) = if fast { (1, n + 1) } else { (0, n) };
                    let slice = input.index(lo..hi);
                    let mut run = ReduceRun::<T>::new(gpu, v, op, &slice, block)?;
                    let got = run.run()?;
                    let reference = ReduceReference::of(op, &host[lo..hi], |x| x);
                    let ok = reference.check(got, run.rounding_depth()).passed;
                    for (symbol, _) in run.launches() {
                        record(symbol, ok);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The iterated stencil (`stencil_1d_steps_*`) for every radius and taps, zero and periodic
/// boundaries: 3 steps in two passes (2 + 1), against the one-step stencil 3 times (bits).
fn steps_cases<T: Element>(gpu: &Gpu, record: &mut impl FnMut(&str, bool)) -> Result<()> {
    use ferrocuda::stencil::{Iteration, apply_into};
    for n in case_sizes(gpu) {
        let host: Vec<T> = (0..n)
            .map(|i| ferrocuda_lessons::cpu::from_random_bits::<T>(i as u64 * 0x9E37 & 0xFF))
            .collect();
        for radius in STENCIL_RADII {
            let mut taps_list = vec![Taps::<T>::Sum { radius }];
            if T::TYPE.is_float() && !T::TYPE.is_half() {
                taps_list.push(Taps::Weighted(
                    (0..=2 * radius)
                        .map(|k| T::from_f64(0.25 + k as f64 / 64.0))
                        .collect(),
                ));
            }
            for taps in &taps_list {
                for boundary in [Boundary::Zero, Boundary::Periodic] {
                    let mut iteration =
                        Iteration::new(gpu, taps, boundary, n)?.with_steps_per_pass(2)?;
                    let mut state = gpu.upload(&host, "sanitize steps state")?;
                    iteration.run(&mut state, 3)?;
                    iteration.finish()?;
                    let mut a = gpu.upload(&host, "sanitize steps a")?;
                    let mut b = gpu.alloc::<T>(n, "sanitize steps b")?;
                    for _ in 0..3 {
                        apply_into(gpu, &a, &mut b, taps, boundary)?;
                        std::mem::swap(&mut a, &mut b);
                    }
                    let (got, want) = (gpu.download(&state)?, gpu.download(&a)?);
                    let ok = got.iter().zip(&want).all(|(g, w)| g.same_bits(*w));
                    record(iteration.symbol(), ok);
                }
            }
        }
    }
    Ok(())
}

fn stencil_cases<T: Element>(gpu: &Gpu, record: &mut impl FnMut(&str, bool)) -> Result<()> {
    let mut rng = SplitMix64::new(9);
    let n_max = case_sizes(gpu)[1];
    let host: Vec<T> = (0..n_max)
        .map(|_| ferrocuda_lessons::cpu::from_random_bits::<T>(rng.next_u64() & 0xFF))
        .collect();
    for v in StencilVariant::ALL
        .into_iter()
        .filter(|v| v.supports_type(T::TYPE) && v.runs_on(gpu.props()))
    {
        // Every radius with an entry point: each is its own kernel.
        for radius in STENCIL_RADII {
            let mut taps_list = vec![Taps::<T>::Sum { radius }];
            if T::TYPE.is_float() && !T::TYPE.is_half() && v.supports_weights() {
                taps_list.push(Taps::Weighted(
                    (0..=2 * radius)
                        .map(|k| T::from_f64(0.5 + k as f64 / 8.0))
                        .collect(),
                ));
            }
            for taps in &taps_list {
                if v.error(taps, v.default_block()).is_some() {
                    continue;
                }
                // The bulk-copy stencil reuses each stage only past `STAGES` tiles per block:
                // one size with more tiles than three per resident block (R = 3, f32).
                let mut sizes = case_sizes(gpu).to_vec();
                if v == StencilVariant::Bulk && T::TYPE == ElemType::F32 && radius == 3 {
                    sizes.push(bulk_stage_reuse_size(gpu));
                }
                for boundary in Boundary::ALL {
                    for &n in &sizes {
                        let host = stencil_input::<T>(&host, n);
                        let input = gpu.upload(&host[..n], "sanitize stencil input")?;
                        let mut output: DeviceBuffer<T> =
                            gpu.alloc(n, "sanitize stencil output")?;
                        gpu.poison_async(&mut output)?;
                        let mut run = StencilRun::new(
                            gpu,
                            v,
                            taps,
                            boundary,
                            &input,
                            &mut output,
                            v.default_block(),
                        )?;
                        run.run()?;
                        let symbol = run.symbol().to_string();
                        let ok = check_stencil(&host[..n], taps, boundary, &gpu.download(&output)?)
                            .passed;
                        record(&symbol, ok);
                        // The fast kernel on two blocks that loop over the tiles, where `f32`,
                        // `f64` and `i32` load the next tile ahead and the 16-bit floats load
                        // each tile as they reach it (the library's grid has one tile a block).
                        if v == StencilVariant::Fast && n == case_sizes(gpu)[1] {
                            gpu.poison_async(&mut output)?;
                            let mut run = ferrocuda::stencil::StencilRun::with_grid(
                                gpu,
                                taps,
                                boundary,
                                &input,
                                &mut output,
                                StencilGrid::Blocks(2),
                            )?;
                            run.run()?;
                            let symbol = run.symbol();
                            let got = gpu.download(&output)?;
                            record(
                                symbol,
                                check_stencil(&host[..n], taps, boundary, &got).passed,
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// A stencil size past three tiles of the bulk-copy stencil per resident block (tiles of 1024
/// `f32`, at most 16 blocks an SM), with a ragged tail: `2^23 + 5` on GPUs of up to 144 SMs,
/// and as many tiles as the SMs need on a device with more (or, like the CPU device, fewer).
fn bulk_stage_reuse_size(gpu: &Gpu) -> usize {
    let sms = gpu.props().sm_count as usize;
    if sms <= 144 && !gpu.is_cpu() {
        (1 << 23) + 5
    } else {
        (sms * 16 * 3 + 1) * 1024 + 5
    }
}

/// `n` elements of input: `host` when long enough, else `host` repeated.
fn stencil_input<T: Element>(host: &[T], n: usize) -> std::borrow::Cow<'_, [T]> {
    if n <= host.len() {
        std::borrow::Cow::Borrowed(host)
    } else {
        std::borrow::Cow::Owned(host.iter().copied().cycle().take(n).collect())
    }
}

/// The bulk copy (sm_90): an aligned and a misaligned pair (the threads' head and tail) at the
/// case sizes on the library's grid, and one past `STAGES` tiles per resident block on the
/// resident blocks, so every stage is reused.
fn copy_cases(gpu: &Gpu, record: &mut impl FnMut(&str, bool)) -> Result<()> {
    use ferrocuda::copy::CopyRun;
    use ferrocuda_lessons::kernels::config::{
        COPY_BULK_BLOCK, COPY_BULK_STAGES, COPY_BULK_TILE_BYTES,
    };
    if !gpu
        .props()
        .reaches_arch(ferrocuda::kernels::copy::copy_bulk().info().min_arch)
    {
        return Ok(());
    }
    let tile = (COPY_BULK_TILE_BYTES / 4) as usize;
    // The resident blocks, the grid of the large case: past `STAGES` tiles each, every block
    // refills its stages after their stores have read them.
    let grid = gpu
        .kernel(ferrocuda::kernels::copy::copy_bulk())?
        .resident_blocks(COPY_BULK_BLOCK, COPY_BULK_STAGES * COPY_BULK_TILE_BYTES)?
        as usize;
    let big = (COPY_BULK_STAGES as usize + 1) * grid * tile + tile + 7;
    // 5 tiles and a ragged end at offset 1: the library's grid with several blocks, block 0
    // copying the head and the tail while the others issue their bulk copies.
    for (n, offset) in [
        (case_sizes(gpu)[0], 0),
        (case_sizes(gpu)[1], 0),
        (case_sizes(gpu)[1], 3),
        (5 * tile + 3, 1),
        (big, 1),
    ] {
        let host: Vec<f32> = (0..n + offset).map(|i| i as f32).collect();
        let src = gpu.upload(&host, "sanitize copy source")?;
        let mut dst = gpu.alloc::<f32>(n + offset, "sanitize copy destination")?;
        gpu.poison_async(&mut dst)?;
        {
            let (from, mut to) = (src.index(offset..), dst.index_mut(offset..));
            // The large case on the resident blocks, each cycling its stages; the others on
            // the library's grid, a block per tile.
            let blocks = (n == big).then_some(grid as u32);
            let mut run = CopyRun::with_grid(gpu, &from, &mut to, blocks)?;
            run.launch()?;
            run.finish()?;
        }
        let got = gpu.download(&dst)?;
        let ok = got[offset..]
            .iter()
            .zip(&host[offset..])
            .all(|(a, b)| a.to_bits() == b.to_bits());
        record(ferrocuda::kernels::copy::copy_bulk().info().symbol, ok);
    }
    Ok(())
}

/// Launches the two broken kernels once each (results not checked: they are wrong by design).
pub fn broken_cases(gpu: &Gpu) -> Result<()> {
    let n = 4099usize;
    let block = 128u32;
    let grid = n.div_ceil(block as usize) as u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let d = gpu.upload(&x, "broken stencil input")?;
    let out = gpu.alloc::<f32>(n, "broken stencil output")?;
    let k = ferrocuda_lessons::kernel(gpu, broken_stencil_1d_no_sync_f32())?;
    // SAFETY: `n` floats each way.
    unsafe {
        k.launch_and_wait(
            k.config(grid, block),
            (d.as_device_ptr(), out.as_device_ptr(), n),
        )?
    };
    let xi: Vec<i32> = (0..n as i32).collect();
    let di = gpu.upload(&xi, "broken reduce input")?;
    let partials = gpu.alloc::<i32>(grid as usize, "broken reduce partials")?;
    let k = ferrocuda_lessons::kernel(gpu, broken_reduce_volatile_warp_i32())?;
    // SAFETY: `n` ints in, one partial per block out.
    unsafe {
        k.launch_and_wait(
            k.config(grid, block),
            (di.as_device_ptr(), partials.as_device_ptr(), n),
        )?
    };
    Ok(())
}

/// The command that runs `ferrocuda_bin sanitize-cases` (with `--broken`: the broken kernels)
/// under `compute-sanitizer --tool tool`, printing every error (the default print limit cuts
/// the report short after the first kernel's hazards).
pub fn sanitizer_command(
    sanitizer: &std::path::Path,
    tool: &str,
    ferrocuda_bin: &std::path::Path,
    device: u32,
    broken: bool,
) -> std::process::Command {
    let mut c = std::process::Command::new(sanitizer);
    c.args(["--tool", tool, "--print-limit", "100000"]);
    if tool == "racecheck" {
        c.args(["--racecheck-report", "hazard"]);
    }
    c.arg(ferrocuda_bin)
        .args(["--device", &device.to_string(), "sanitize-cases"]);
    if broken {
        c.arg("--broken");
    }
    c
}

/// What one sanitizer tool reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolReport {
    /// The total of the tool's summary line (`ERROR SUMMARY: N errors`, or racecheck's hazards).
    pub total: usize,
    /// Errors attributed to each kernel named in them.
    pub per_kernel: BTreeMap<String, usize>,
}

/// Parses compute-sanitizer's output: the summary total, and each error block (a line
/// `========= <text>` that is not indented further) attributed to the first of `kernels`
/// named in the block.
pub fn parse_report(text: &str, kernels: &[String]) -> ToolReport {
    let mut report = ToolReport::default();
    let mut open = false;
    for line in text.lines() {
        let Some(body) = line.strip_prefix("=========") else {
            continue;
        };
        // `ERROR SUMMARY: N errors`, or racecheck's `RACECHECK SUMMARY: N hazards displayed`.
        let summary = ["ERROR SUMMARY:", "RACECHECK SUMMARY:"]
            .iter()
            .find_map(|p| body.trim().strip_prefix(p));
        if let Some(rest) = summary {
            let n = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            report.total = report.total.max(n);
            continue;
        }
        let header = body.starts_with(' ') && !body.starts_with("  ") && !body.trim().is_empty();
        if header {
            open = true;
        }
        if open {
            // The longest name first: `reduce_cg_f32` must not claim `reduce_cg_vector4_f32`.
            if let Some(k) = kernels
                .iter()
                .filter(|k| mentions(body, k))
                .max_by_key(|k| k.len())
            {
                *report.per_kernel.entry(k.clone()).or_insert(0) += 1;
                open = false;
            }
        }
    }
    report
}

/// Whether `line` names `kernel` as a whole word.
fn mentions(line: &str, kernel: &str) -> bool {
    line.match_indices(kernel).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + kernel.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}
