//! The `warp`, `divergence` and `occupancy` subcommands: the execution-model lab.
use anyhow::{Result, bail};
use clap::Args;
use ferrocuda::Gpu;
use ferrocuda::kernels::entry::entry_point;
use ferrocuda::kernels::reduce::{Sum, reduce_fast};
use ferrocuda_lessons::all_entry_points as entry_points;
use ferrocuda_lessons::as_printed;
use ferrocuda_lessons::cpu::SplitMix64;
use ferrocuda_lessons::kernels::lab::print_thread_indices;
use ferrocuda_lessons::lab::{self, WARP_DEMO_COLUMNS, WarpDemo};
use ferrocuda_lessons::occupancy::{self, Occupancy};
use ferrocuda_lessons::reduce::{ReduceOp, ReduceRun};
use ferrocuda_lessons::timing::time_on_stream;

/// `ferrocuda streams`.
#[derive(Args)]
pub struct StreamsArgs {
    /// Elements (f32) copied, and elements of the stencil's input.
    #[arg(long, default_value = "2^26", value_parser = ferrocuda_cli::args::parse_count)]
    pub(crate) n: usize,
    /// Stencil launches in the kernel part (enough to last about as long as the copy).
    #[arg(long, default_value_t = 20)]
    kernels: usize,
    /// Timed repetitions of each arrangement (after one warm-up).
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

impl StreamsArgs {
    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        if self.n == 0 || self.reps == 0 || self.kernels == 0 {
            bail!("streams needs --n, --kernels and --reps of at least 1");
        }
        Ok(())
    }
}

/// Runs [`lab::stream_overlap`] and prints its table.
pub fn streams(gpu: &Gpu, a: &StreamsArgs) -> Result<()> {
    let r = lab::stream_overlap(gpu, a.n, a.kernels, a.reps)?;
    let mib = r.copy_bytes as f64 / (1u64 << 20) as f64;
    let size = if mib >= 1.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{:.0} KiB", r.copy_bytes as f64 / 1024.0)
    };
    println!(
        "streams on {}: copy {size} page-locked host -> device; {} launches of the \
         stencil R = 3 over {} f32; medians of {} event-timed runs",
        gpu.props().name,
        r.kernels,
        r.n,
        a.reps
    );
    let rows = [
        ("copy alone", r.copy_s),
        ("kernels alone", r.kernel_s),
        ("copy then kernels, one stream", r.serial_s),
        ("two streams, copy enqueued first", r.concurrent_s),
        (
            "two streams, kernels enqueued first",
            r.concurrent_kernels_first_s,
        ),
    ];
    println!("{:<38}{:>10}", "arrangement", "ms");
    for (what, s) in rows {
        println!("{what:<38}{:>10.3}", s * 1e3);
    }
    println!(
        "copy: {:.1} GB/s; overlap: {:.0} % of the shorter part hidden behind the longer (the \
         better of the two orders); results {}",
        r.copy_bytes as f64 / r.copy_s / 1e9,
        100.0 * r.hidden(),
        if r.correct { "PASS" } else { "FAIL" }
    );
    if !r.correct {
        bail!("the copy or the stencil output differs from the CPU");
    }
    Ok(())
}

/// `ferrocuda print-indices`.
#[derive(Args)]
pub struct PrintIndicesArgs {
    /// Blocks.
    #[arg(long, default_value_t = 2)]
    grid: u32,
    /// Threads per block.
    #[arg(long, default_value_t = 8)]
    block: u32,
    /// A number every line carries, to tell runs apart.
    #[arg(long, default_value_t = 0)]
    tag: u32,
}

/// Lines `print-indices` allows: the device's printf buffer (1 MiB by default) holds about
/// 20 000 of these, and what does not fit is lost.
const PRINT_MAX_LINES: u64 = 4096;

impl PrintIndicesArgs {
    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        if self.grid == 0 || self.block == 0 || self.block > 1024 {
            bail!(
                "print-indices needs a grid of at least 1 block and 1 to 1024 threads per block, not grid {} block {}",
                self.grid,
                self.block
            );
        }
        let lines = self.grid as u64 * self.block as u64;
        if lines > PRINT_MAX_LINES {
            bail!(
                "print-indices: {} x {} = {lines} lines; at most {PRINT_MAX_LINES} (the device's printf buffer drops what does not fit)",
                self.grid,
                self.block
            );
        }
        Ok(())
    }
}

/// Launches `print_thread_indices` and waits: the driver prints the device's lines to standard
/// output at the wait, in the order the warps ran.
pub fn print_indices(gpu: &Gpu, a: &PrintIndicesArgs) -> Result<()> {
    use std::io::Write as _;
    println!(
        "print_thread_indices<<<{}, {}>>> on {}: one line per thread, printed by the device",
        a.grid,
        a.block,
        gpu.props().name
    );
    std::io::stdout().flush()?;
    let kernel = ferrocuda_lessons::kernel(gpu, print_thread_indices())?;
    // SAFETY: the kernel touches no memory.
    unsafe { kernel.launch_and_wait(kernel.config(a.grid, a.block), (a.tag,))? };
    Ok(())
}

/// `ferrocuda warp`.
#[derive(Args)]
pub struct WarpArgs {
    /// Threads in the block (one warp at most); the notes use 16.
    #[arg(long, default_value_t = WarpDemo::NOTES.block)]
    block: u32,
    /// Segment width w of the shuffles: 1, 2, 4, 8, 16 or 32.
    #[arg(long, default_value_t = WarpDemo::NOTES.width)]
    width: u32,
    /// Source lane of the broadcast `shfl_sync`.
    #[arg(long, default_value_t = WarpDemo::NOTES.src_lane)]
    src_lane: u32,
    /// Delta of `shfl_up_sync`/`shfl_down_sync`, lane mask of `shfl_xor_sync`.
    #[arg(long, default_value_t = WarpDemo::NOTES.offset)]
    offset: u32,
    /// Draw what the kernels do, from a run (画出核函数实际做了什么).
    #[arg(long, conflicts_with_all = ["src_lane"])]
    pub(crate) draw: bool,
    /// With --draw: also write the pictures as SVG files into this folder.
    #[arg(long, requires = "draw")]
    pub(crate) svg: Option<std::path::PathBuf>,
}

impl WarpArgs {
    fn demo(&self) -> WarpDemo {
        WarpDemo {
            block: self.block,
            width: self.width,
            src_lane: self.src_lane,
            offset: self.offset,
        }
    }

    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        Ok(self.demo().validate()?)
    }
}

/// Runs the warp-function demo and prints every lane, each column checked against the model.
pub fn warp(gpu: &Gpu, a: &WarpArgs) -> Result<()> {
    let demo = a.demo();
    if a.draw {
        if demo.offset >= demo.width {
            bail!(
                "{}",
                ferrocuda_lessons::tf!(
                    "warp --draw reads each source lane from its value, the lane within its segment, so it needs --offset below --width (got {} and {}); run `warp` without --draw to see those shuffles",
                    "warp --draw 根据每个线程读到的值（段内编号）推出源线程，所以要求 --offset 小于 --width（现在是 {} 和 {}）；去掉 --draw 运行 `warp` 可以看到这些洗牌的结果",
                    demo.offset,
                    demo.width
                )
            );
        }
        return draw(gpu, Picture::Shuffles(demo), a.svg.as_deref());
    }
    let got = demo.run(gpu)?;
    let want = demo.expected();
    println!(
        "{}<<<1, {}>>> on {}: width {}, shfl from lane {}, offset {}",
        ferrocuda_lessons::kernels::lab::warp_functions_demo().symbol(),
        demo.block,
        gpu.props().name,
        demo.width,
        demo.src_lane,
        demo.offset
    );
    println!(
        "{}",
        ferrocuda_lessons::tf!(
            "mask = {:#010x}: only the {} lanes that exist. The notes pass FULL_MASK = 0xffffffff with 16 threads, \
             which names lanes that do not exist: the programming guide only covers masks of threads that exist.",
            "mask = {:#010x}：只含实际存在的 {} 个线程（lane）。笔记用 16 个线程却传入 FULL_MASK = 0xffffffff，\
             点名了并不存在的线程：编程指南只说明了掩码中的线程都存在时的行为。",
            demo.mask(),
            demo.block
        )
    );
    println!(
        "{}",
        ferrocuda_lessons::lang::tr(
            "y = lane within the segment (t & (w - 1)); votes on t != 0; `-` = lane not in that vote's mask",
            "y = 段内编号（t & (w - 1)）；表决的条件是 t != 0；`-` 表示该线程不在这次表决的掩码中"
        )
    );
    let header: Vec<String> = WARP_DEMO_COLUMNS
        .iter()
        .map(|c| format!("{c:>13}"))
        .collect();
    println!("{}", header.join(""));
    let mut bad = Vec::new();
    for (t, (g, w)) in got.iter().zip(&want).enumerate() {
        let cells: Vec<String> = g
            .iter()
            .zip(w)
            .enumerate()
            .map(|(c, (&v, &e))| {
                let ok = e.is_none_or(|e| e == v);
                if !ok {
                    bad.push(format!(
                        "lane {t} {}: got {v}, model {e:?}",
                        WARP_DEMO_COLUMNS[c]
                    ));
                }
                let text = match (c, v) {
                    (2 | 3, v) => format!("{v:#010x}"),
                    (_, u32::MAX) => "-".to_string(),
                    (_, v) => v.to_string(),
                };
                format!("{:>12}{}", text, if ok { " " } else { "!" })
            })
            .collect();
        println!("{}", cells.join(""));
    }
    if bad.is_empty() {
        println!(
            "{}",
            ferrocuda_lessons::lang::tr(
                "PASS: every column of every lane equals the CPU warp model (cpu::warp)",
                "PASS：每个线程的每一列都与 CPU 的线程束模型（cpu::warp）一致"
            )
        );
        Ok(())
    } else {
        bail!(
            "{} cells differ from the CPU warp model: {}",
            bad.len(),
            bad.join("; ")
        )
    }
}

/// `ferrocuda divergence`.
#[derive(Args)]
pub struct DivergenceArgs {
    /// Elements (enough to fill the GPU).
    #[arg(long, default_value = "2^24", value_parser = ferrocuda_cli::args::parse_count)]
    pub(crate) n: usize,
    /// Threads per block.
    #[arg(long, default_value_t = 128)]
    block: u32,
    /// Steps of arithmetic on each side of the branch.
    #[arg(long, default_value_t = 64)]
    work: u32,
    /// Timed repetitions.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Run the book's `mathKernel4` as printed (its precedence bug) beside the corrected one
    /// (按原样运行书中有错的 mathKernel4). At its own size.
    #[arg(long, conflicts_with_all = ["draw", "n", "block", "work", "reps"])]
    pub(crate) as_printed: bool,
    /// Draw what the kernels do, from a run (画出核函数实际做了什么).
    #[arg(long, conflicts_with_all = ["n", "block", "work", "reps"])]
    pub(crate) draw: bool,
    /// With --draw: also write the pictures as SVG files into this folder.
    #[arg(long, requires = "draw")]
    pub(crate) svg: Option<std::path::PathBuf>,
}

impl DivergenceArgs {
    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        for (entry, _) in lab::divergence_kernels() {
            let config = ferrocuda::LaunchConfig::per_element(self.n.max(1), self.block, 0)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "`{}`: cannot cover n = {} with blocks of {}",
                        entry.symbol(),
                        self.n,
                        self.block
                    )
                })?;
            if let Some(reason) = config.architectural_violation() {
                bail!(
                    "invalid launch of kernel `{}` {config}: {reason}",
                    entry.symbol()
                );
            }
        }
        if self.reps == 0 {
            bail!("--reps must be at least 1");
        }
        Ok(())
    }
}

/// Times the four `simpleDivergence` kernels and checks their results.
pub fn divergence(gpu: &Gpu, a: &DivergenceArgs) -> Result<()> {
    if a.as_printed {
        return as_printed(gpu, as_printed::Chapter::Divergence);
    }
    if a.draw {
        return draw(gpu, Picture::Divergence, a.svg.as_deref());
    }
    let rows = lab::divergence(gpu, a.n, a.block, a.work, a.reps)?;
    println!(
        "simpleDivergence on {}: n = {}, block {}, {} steps per branch side, median of {} event-timed runs",
        gpu.props().name,
        a.n,
        a.block,
        a.work,
        a.reps
    );
    println!(
        "{:<14}{:>12}{:>10}  {:<8}branch",
        "kernel", "median us", "vs k2", "check"
    );
    let base = rows[1].stats.median_s;
    let mut failed = 0;
    for r in &rows {
        failed += (r.mismatches > 0) as usize;
        println!(
            "{:<14}{:>12.2}{:>9.2}x  {:<8}{}",
            r.kernel,
            r.stats.median_s * 1e6,
            r.stats.median_s / base,
            if r.mismatches == 0 { "PASS" } else { "FAIL" },
            r.branch
        );
    }
    if failed > 0 {
        bail!("{failed} divergence kernels wrote values that differ from the CPU");
    }
    Ok(())
}

/// `ferrocuda occupancy`.
#[derive(Args)]
pub struct OccupancyArgs {
    /// A kernel symbol, or `all`.
    #[arg(long, default_value = "all")]
    kernel: String,
    /// Threads per block (default: 32, 64, 128, 256, 512, 1024).
    #[arg(long)]
    block: Option<u32>,
    /// Instead: time the fast reduction over block sizes and blocks per SM (Little's law).
    #[arg(long)]
    sweep: bool,
}

impl OccupancyArgs {
    /// Checks the arguments that need no GPU.
    pub fn validate(&self) -> Result<()> {
        if let Some(b) = self.block
            && !(1..=1024).contains(&b)
        {
            bail!("--block must be 1..=1024 threads, not {b}");
        }
        if self.kernel != "all" && entry_point(&self.kernel).is_none() {
            bail!(
                "unknown kernel `{}`; `ferrocuda occupancy` with `--kernel all` lists every one",
                self.kernel
            );
        }
        Ok(())
    }
}

fn print_occupancy(o: &Occupancy) {
    println!(
        "{:<36}{:>6}{:>6}{:>8}{:>8}{:>8}{:>9}{:>8.0}%  {:<14}{:>6}",
        o.kernel,
        o.block,
        o.registers,
        o.static_shared,
        o.dynamic_shared,
        o.active_blocks,
        o.computed_blocks,
        100.0 * o.occupancy,
        o.limiter.name(),
        o.suggested_block
    );
    if let Some((blocks, resident)) = o.clusters {
        println!(
            "{:<36}clusters of {blocks} blocks: {resident} resident on the GPU at once ({} blocks; cuOccupancyMaxActiveClusters)",
            "",
            resident * blocks
        );
    }
}

/// Prints the occupancy table, or runs the sweep.
pub fn occupancy(gpu: &Gpu, a: &OccupancyArgs) -> Result<()> {
    if a.sweep {
        return sweep(gpu);
    }
    let kernels: Vec<_> = if a.kernel == "all" {
        // A kernel built only for newer GPUs (clusters, bulk copies) is not in this GPU's PTX.
        entry_points()
            .into_iter()
            .filter(|e| e.built_for(gpu.ptx_arch()))
            .collect()
    } else {
        entry_point(&a.kernel).into_iter().collect()
    };
    let blocks = a
        .block
        .map_or(vec![32, 64, 128, 256, 512, 1024], |b| vec![b]);
    let p = gpu.props();
    println!(
        "occupancy on {} (cc {}.{}): {} threads, {} blocks, {} registers, {} KiB shared memory per SM",
        p.name,
        p.compute_capability.0,
        p.compute_capability.1,
        p.max_threads_per_sm,
        p.max_blocks_per_sm,
        p.regs_per_sm,
        p.shared_mem_per_sm / 1024
    );
    println!(
        "{:<36}{:>6}{:>6}{:>8}{:>8}{:>8}{:>9}{:>9}  {:<14}{:>6}",
        "kernel",
        "block",
        "regs",
        "smem",
        "dynsmem",
        "blk/SM",
        "computed",
        "occup.",
        "limited by",
        "sugg."
    );
    let mut mismatches = 0;
    for k in &kernels {
        for &b in &blocks {
            let o = occupancy::occupancy(gpu, k, b)?;
            mismatches += (o.active_blocks != o.computed_blocks) as usize;
            print_occupancy(&o);
        }
    }
    if mismatches > 0 {
        bail!("{mismatches} rows where the driver and the host-side calculation disagree");
    }
    println!(
        "every row: driver's active blocks per SM == host-side calculation from the device limits"
    );
    Ok(())
}

/// Latency hiding made visible: the fast f32 sum over 2^26 elements with `k` blocks per SM.
fn sweep(gpu: &Gpu) -> Result<()> {
    let n = 1usize << 26;
    let mut rng = SplitMix64::new(3);
    let host: Vec<f32> = (0..n).map(|_| rng.next_f64_signed() as f32).collect();
    let input = gpu.upload(&host, "sweep input")?;
    let sms = gpu.props().sm_count;
    let max_warps = gpu.props().max_threads_per_sm / 32;
    println!(
        "fast f32 sum, n = 2^26 ({} MiB), grid = blocks/SM x {} SMs; achieved bandwidth vs theoretical occupancy",
        (n * 4) >> 20,
        sms
    );
    println!(
        "{:>6}{:>8}{:>8}{:>10}{:>10}",
        "block", "blk/SM", "warps", "occup.", "GB/s"
    );
    let fast_sum_f32 = reduce_fast::<Sum, f32>().expect("the fast sum has an f32 instance");
    for block in [64u32, 128, 256, 512, 1024] {
        let max = occupancy::occupancy(gpu, fast_sum_f32.info(), block)?.active_blocks;
        let mut k = 1;
        while k <= max {
            let mut run =
                ReduceRun::<f32>::fast_with_grid(gpu, ReduceOp::Sum, &input, block, k * sms)?;
            let stats = time_on_stream(gpu, 2, 10, |_| Ok(()), |_| run.launch())?;
            let warps = k * block / 32;
            println!(
                "{:>6}{:>8}{:>8}{:>9.0}%{:>10.0}",
                block,
                k,
                warps,
                100.0 * warps as f64 / max_warps as f64,
                stats.gbs(run.bytes())
            );
            k *= 2;
        }
    }
    Ok(())
}

/// `ferrocuda waves`.
#[derive(Args)]
pub struct WavesArgs {
    /// Threads in the block (1 to 1024); the notes use 200.
    #[arg(long, default_value_t = ferrocuda_lessons::waves::NOTES_BLOCK)]
    block: u32,
}

impl WavesArgs {
    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        if self.block == 0 || self.block > 1024 {
            bail!(
                "waves needs 1 to 1024 threads per block, not {}",
                self.block
            );
        }
        Ok(())
    }
}

/// Runs the waves lesson and prints each part.
pub fn waves(gpu: &Gpu, a: &WavesArgs) -> Result<()> {
    let w = ferrocuda_lessons::waves::run(gpu, a.block)?;
    println!(
        "{} threads on {}: warpSize = {}",
        w.block,
        gpu.props().name,
        w.width
    );
    println!("\nwave  threads    lanes  ballot(lane < 32)");
    for (i, &(first, last, lanes)) in w.waves.iter().enumerate() {
        let ballot = w.first_half[i];
        let split = if ballot == 0 || ballot.count_ones() == lanes {
            "one side: no divergence"
        } else {
            "both sides: divergent, run one after the other"
        };
        println!("{i:>4}  {first:>3}-{last:<3}    {lanes:>5}  {ballot:#018x}  {split}");
    }
    println!(
        "\nsyncwave(mask) then read the next lane's slot: {}",
        if w.rotate_ok {
            "every lane read its neighbour's value"
        } else {
            "WRONG"
        }
    );
    println!(
        "\nkernel        block  waves/block  blocks/SM  waves/SM  occupancy  (driver == calculation)"
    );
    for o in &w.occupancy {
        let waves = o.block.div_ceil(w.width);
        println!(
            "{:<12}  {:>5}  {:>11}  {:>9}  {:>8}  {:>8.0}%  {}",
            "wave_layout",
            o.block,
            waves,
            o.active_blocks,
            o.active_blocks * waves,
            100.0 * o.occupancy,
            if o.active_blocks == o.computed_blocks {
                "yes"
            } else {
                "NO"
            }
        );
    }
    if !w.mismatches.is_empty() {
        bail!(
            "the waves lesson differs from what a wave of {} implies:\n  {}",
            w.width,
            w.mismatches.join("\n  ")
        );
    }
    println!(
        "\nPASS: every thread's wave and lane, the syncwave exchange, the ballots and the occupancy match a wave of {} lanes",
        w.width
    );
    Ok(())
}

/// `--as-printed`: the chapter's wrong listings of the notes, each run as printed beside its
/// corrected kernel and the CPU, and what caught it. Fails when a listing went uncaught or a
/// corrected kernel is wrong.
pub fn as_printed(gpu: &Gpu, chapter: as_printed::Chapter) -> Result<()> {
    use ferrocuda_lessons::lang::tr;
    println!(
        "{}",
        ferrocuda_lessons::tf!(
            "The notes' listings as printed, beside the corrected kernels, on {}:",
            "笔记中有错的代码按原样运行，与修正后的核函数对照，设备：{}",
            gpu.props().name
        )
    );
    let mut uncaught = Vec::new();
    let mut cpu_run: Option<String> = None;
    for listing in as_printed::listings(chapter) {
        let o = as_printed::run(gpu, &listing)?;
        println!();
        println!("{} ({})", listing.name, listing.source);
        println!("  {} {}", tr("printed:   ", "原文：    "), listing.printed);
        println!(
            "  {} {}",
            tr("corrected: ", "修正：    "),
            listing.corrected
        );
        println!("  n = {}", o.n);
        let mark = |ok: bool| if ok { "PASS" } else { "WRONG" };
        println!(
            "  {}{}  [{}]",
            pad(tr("as printed", "原样运行"), 14),
            o.as_printed,
            if o.launch_error.is_some() {
                "FAILED"
            } else {
                mark(!o.wrong)
            }
        );
        println!(
            "  {}{}  [{}]",
            pad(tr("corrected", "修正后"), 14),
            o.corrected,
            mark(o.corrected_ok)
        );
        println!("  {}{}", pad(tr("CPU", "CPU 参考"), 14), o.expected);
        let (why_en, why_zh) = listing.why;
        println!("  {} {}", tr("why:", "原因："), tr(why_en, why_zh));
        match (&o.hazards, o.wrong) {
            (Some(h), _) if !h.is_empty() => {
                println!(
                    "  {}",
                    ferrocuda_lessons::tf!(
                        "caught by: the CPU device's racecheck on this launch, hazards at {} shared addresses; the first:",
                        "发现者：CPU 设备对这次启动运行的 racecheck，{} 个共享内存地址上有竞争；第一处：",
                        o.hazard_addresses()
                    )
                );
                println!("    {}", h[0]);
                if o.wrong {
                    println!(
                        "  {}",
                        tr(
                            "and by the oracle: the answer differs from the CPU's",
                            "同时也被结果检查发现：答案与 CPU 的不同"
                        )
                    );
                }
            }
            (_, true) => println!(
                "  {}",
                tr(
                    "caught by: the oracle, the answer differs from the CPU's",
                    "发现者：结果检查（与 CPU 的答案不同）"
                )
            ),
            (_, false) if o.launch_error.is_some() => println!(
                "  {}",
                tr(
                    "caught by: the device, which stopped the launch (the error above)",
                    "发现者：设备本身，它中止了这次启动（见上面的错误）"
                )
            ),
            (_, false) if listing.catch == as_printed::Catch::Racecheck && !gpu.is_cpu() => {
                match cpu_hazards(chapter, listing.name, &mut cpu_run) {
                    Some(addresses) => println!(
                        "  {}",
                        ferrocuda_lessons::tf!(
                            "caught by: the race checker, not by this answer (this GPU ran the lanes in step, so the sum is right by chance): the CPU device's racecheck on the same kernel (`ferrocuda --device cpu {} --as-printed`) reports hazards at {} shared addresses",
                            "发现者：竞争检查，而不是这次的答案（这块 GPU 上各线程恰好同步前进，结果碰巧正确）：CPU 设备的 racecheck 对同一个核函数（`ferrocuda --device cpu {} --as-printed`）报告 {} 个共享内存地址上有竞争",
                            chapter_lesson(chapter),
                            addresses
                        )
                    ),
                    None => {
                        println!("  {}", tr("NOT CAUGHT on this run", "这次运行没有发现错误"));
                        uncaught.push(listing.name);
                    }
                }
            }
            _ => {
                println!("  {}", tr("NOT CAUGHT on this run", "这次运行没有发现错误"));
                uncaught.push(listing.name);
            }
        }
        if !o.corrected_ok {
            bail!(
                "{}",
                ferrocuda_lessons::tf!(
                    "the corrected kernel of {} gave {}, the CPU {}",
                    "{} 的修正核函数得到 {}，CPU 得到 {}",
                    listing.name,
                    o.corrected,
                    o.expected
                )
            );
        }
    }
    println!();
    ferrocuda_lessons::lang::look_at(
        "each listing's `as printed` line against the `CPU` line, and `caught by`: a wrong \
         answer is caught by comparing with the CPU; a race may give the right answer and is \
         caught by the race checker",
        "每段代码的“原样运行”一行与“CPU 参考”一行的差别，以及“发现者”：答案错误靠与 CPU 对照发现；\
         竞争可能碰巧得到正确答案，要靠竞争检查（racecheck）发现",
    );
    if !uncaught.is_empty() {
        bail!(
            "{}",
            ferrocuda_lessons::tf!(
                "not caught on this run: {}",
                "这次运行没有发现的错误：{}",
                uncaught.join(", ")
            )
        );
    }
    Ok(())
}

/// Which lesson's pictures `--draw` shows.
#[derive(Clone, Copy)]
pub enum Picture {
    /// The reduction trees.
    Trees,
    /// The divergent warps' lane masks.
    Divergence,
    /// The stencil's tiles and halos.
    Tiles,
    /// The warp demo's shuffles.
    Shuffles(WarpDemo),
}

/// `--draw [--svg DIR]`: the lesson's pictures, drawn from a run, as text; with `--svg`, the
/// same pictures as SVG files in `DIR`. Fails when a picture differs from the CPU's model of
/// what the kernel does.
pub fn draw(gpu: &Gpu, picture: Picture, svg_dir: Option<&std::path::Path>) -> Result<()> {
    use ferrocuda_lessons::draw;
    if gpu.props().warp_size != 32 {
        bail!(
            "{}",
            ferrocuda_lessons::tf!(
                "--draw draws warps of 32 threads; this device's waves are {} wide (run it without `:64`)",
                "--draw 画的是 32 个线程的线程束；这个设备的 wave 宽 {} 个线程（去掉 `:64` 再运行）",
                gpu.props().warp_size
            )
        );
    }
    let mut files: Vec<(String, String)> = Vec::new();
    let mut wrong = Vec::new();
    match picture {
        Picture::Trees => {
            for (k, t) in draw::reduce_trees(gpu, 64)?.into_iter().enumerate() {
                print!("{}", draw::tree_text(&t));
                println!();
                if t != draw::tree_model(k, 64) {
                    wrong.push(t.kernel.to_string());
                }
                files.push((format!("reduce-tree-{}.svg", t.kernel), draw::tree_svg(&t)));
            }
        }
        Picture::Divergence => {
            let d = draw::divergence_masks(gpu, 64)?;
            print!("{}", draw::divergence_text(&d));
            for (ki, k) in d.iter().enumerate() {
                let if_value = lab::divergence_side(100.0, 4).to_bits();
                let expected: Vec<bool> = (0..64)
                    .map(|tid| lab::divergence_expected(ki, tid, 4).to_bits() == if_value)
                    .collect();
                if k.if_side != expected {
                    wrong.push(k.kernel.to_string());
                }
            }
            files.push(("divergence-masks.svg".into(), draw::divergence_svg(&d)));
        }
        Picture::Tiles => {
            let t = draw::stencil_tiles(gpu, 20, 8)?;
            print!("{}", draw::tiles_text(&t));
            if t != draw::tiles_model(20, 8) {
                wrong.push("stencil_1d_shared".into());
            }
            files.push(("stencil-tiles.svg".into(), draw::tiles_svg(&t)));
        }
        Picture::Shuffles(demo) => {
            let s = draw::shuffles(gpu, demo)?;
            print!("{}", draw::shuffles_text(&s));
            for sh in &s {
                if sh.source != draw::shuffle_model(sh.name, demo.block, demo.width, demo.offset) {
                    wrong.push(sh.name.to_string());
                }
            }
            files.push(("warp-shuffles.svg".into(), draw::shuffles_svg(&s)));
        }
    }
    if let Some(dir) = svg_dir {
        std::fs::create_dir_all(dir)?;
        for (name, text) in &files {
            std::fs::write(dir.join(name), text)?;
            eprintln!(
                "{}",
                ferrocuda_lessons::tf!("wrote {}", "已写入 {}", dir.join(name).display())
            );
        }
    }
    if !wrong.is_empty() {
        bail!(
            "{}",
            ferrocuda_lessons::tf!(
                "the pictures of {} differ from the CPU's model of what the kernel does",
                "{} 的图与 CPU 模型推算出的结果不同",
                wrong.join(", ")
            )
        );
    }
    Ok(())
}

/// The lesson whose `--as-printed` runs `chapter`'s listings.
fn chapter_lesson(chapter: as_printed::Chapter) -> &'static str {
    match chapter {
        as_printed::Chapter::Divergence => "divergence",
        as_printed::Chapter::Reduce => "reduce",
        as_printed::Chapter::Stencil => "stencil",
    }
}

/// On a GPU, where a racy listing can give the right answer: the shared addresses with hazards
/// that the CPU device's racecheck finds in `listing`, from `ferrocuda --device cpu <lesson>
/// --as-printed` run once per chapter (`run` keeps its output).
fn cpu_hazards(
    chapter: as_printed::Chapter,
    listing: &str,
    run: &mut Option<String>,
) -> Option<usize> {
    if run.is_none() {
        let exe = std::env::current_exe().ok()?;
        let o = std::process::Command::new(exe)
            .args([
                "--device",
                "cpu",
                "--lang",
                "en",
                chapter_lesson(chapter),
                "--as-printed",
            ])
            .output()
            .ok()?;
        *run = Some(String::from_utf8_lossy(&o.stdout).into_owned());
    }
    let text = run.as_deref()?;
    let block = text
        .split("\n\n")
        .find(|b| b.starts_with(&format!("{listing} (")))?;
    let line = block.lines().find(|l| l.contains("hazards at "))?;
    let count = line.split("hazards at ").nth(1)?.split(' ').next()?;
    count.parse().ok().filter(|&n| n > 0)
}

/// `text` padded with spaces to `width` terminal columns (a Chinese character takes two).
fn pad(text: &str, width: usize) -> String {
    let columns: usize = text
        .chars()
        .map(|c| {
            if ('\u{2e80}'..='\u{9fff}').contains(&c) || ('\u{ff00}'..='\u{ffef}').contains(&c) {
                2
            } else {
                1
            }
        })
        .sum();
    format!("{text}{}", " ".repeat(width.saturating_sub(columns)))
}
