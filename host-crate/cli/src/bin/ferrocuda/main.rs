//! The `ferrocuda` command line.
use std::process::ExitCode;

mod bench;
mod errors_zh;
mod lab;
mod lesson_text;
mod multi;
mod profile;
mod sanitize;

use anyhow::{Context as _, Result, bail};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ferrocuda::DeviceBuffer;
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::gpu::{EMBEDDED_PTX, Gpu};
use ferrocuda_cli::args::parse_count;
use ferrocuda_cli::bench::reproducible::{self, Measured, REPRODUCIBLE};
use ferrocuda_lessons::cpu::reproducible::Reproducible;
use ferrocuda_lessons::cpu::{ReduceReference, book_input};
use ferrocuda_lessons::lang::{self, Lang};
use ferrocuda_lessons::reduce::{self, ReduceOp, ReduceVariant};
use ferrocuda_lessons::smoke;
use ferrocuda_lessons::timing;

#[derive(Parser)]
#[command(
    name = "ferrocuda",
    version,
    about = "GPU kernels in pure Rust: run, check and measure them"
)]
struct Cli {
    /// CUDA device ordinal, or `cpu` for the CPU device (the kernels emulated on the host; its
    /// times are not GPU times), `cpu:64` for the CPU device with 64-wide waves (沐曦 MXMACA).
    #[arg(long, global = true, default_value = "0", value_parser = device_arg)]
    device: u32,
    /// The language of the lessons' output: `en` or `zh` (中文). Default: Chinese when `LANG`
    /// (or `LC_ALL`, `LC_MESSAGES`) starts with `zh`, English otherwise.
    /// 输出语言：`--lang zh` 为中文。
    #[arg(long, global = true, value_parser = lang_arg)]
    lang: Option<Lang>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the device's properties and the PTX chosen for it.
    Info {
        /// Also measure the device-to-device copy bandwidth (256 MiB copy).
        #[arg(long)]
        bandwidth: bool,
    },
    /// Run a tiny kernel (`smoke_saxpy`) and check it against the CPU.
    Smoke {
        /// Elements.
        #[arg(long, default_value_t = 1 << 20)]
        n: usize,
        /// Threads per block.
        #[arg(long, default_value_t = smoke::DEFAULT_BLOCK)]
        block: u32,
        /// Dynamic shared memory per block to request, bytes (the kernel does not use it; this
        /// exercises the launch checks).
        #[arg(long, default_value_t = 0)]
        dynamic_shared: u32,
        /// Seed of the random input.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run reduction variants, time them and check them against the CPU (the textbook ladder).
    ///
    /// Reproduces: Professional CUDA C Programming §3.4 (《CUDA C编程权威指南》3.4 避免分支分化),
    /// the unrolled reductions of the execution-model notes (学习笔记《CUDA执行模型》), the warp
    /// and cooperative-groups reductions of Fan Zheyong's book, ch. 10
    /// (樊哲勇《CUDA编程基础与实践》第10章) and the cooperative-groups vector sum of the MetaX
    /// book, ch. 5 (沐曦 MXMACA 教材第5章).
    ///
    /// 复现：《CUDA C编程权威指南》3.4 避免分支分化；学习笔记《CUDA执行模型》的循环展开归约；樊哲勇《CUDA编程基础与实践》第10章的线程束与协作组归约；沐曦 MXMACA 教材第5章的协作组向量求和。
    ///
    /// Explained in (讲解): docs/reduction.md, docs/cooperative-groups.md
    Reduce {
        /// A variant name, `reproducible` (the f32/f64 sum with the same bits on every GPU), or
        /// `all` (which includes `reproducible` for a float sum).
        #[arg(long, default_value = "all")]
        variant: String,
        /// Elements: 16777216, 2^24, 2^24+3, 1<<20.
        #[arg(long, default_value = "2^24", value_parser = parse_count)]
        n: usize,
        /// Threads per block (default: each variant's own, 512 for the book's kernels).
        #[arg(long)]
        block: Option<u32>,
        /// Element type: i32, u32, i64, u64, f32, f64, or the 16-bit floats f16 and bf16 (the
        /// library's sum in f32, min, max, and the reproducible sum).
        #[arg(long = "type", default_value = "i32")]
        ty: String,
        /// sum, min or max (min and max: the fast path only).
        #[arg(long, default_value = "sum")]
        op: String,
        /// Timed repetitions per variant (after 3 warm-up runs).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Seed of the random input.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run the notes' wrong reductions as printed beside the corrected kernels, at their own
        /// sizes (按原样运行笔记中有错的归约代码).
        #[arg(long, conflicts_with_all = ["draw", "variant", "n", "block", "ty", "op", "reps", "seed"])]
        as_printed: bool,
        /// Draw what the kernels do, from a run (画出核函数实际做了什么).
        #[arg(long, conflicts_with_all = ["variant", "n", "block", "ty", "op", "reps", "seed"])]
        draw: bool,
        /// With --draw: also write the pictures as SVG files into this folder.
        #[arg(long, requires = "draw")]
        svg: Option<std::path::PathBuf>,
    },
    /// Run 1D stencil variants, time them and check every output against the CPU.
    ///
    /// Reproduces: the 1D stencil with a shared-memory tile of the study notes on NVIDIA's
    /// "CUDA C/C++ Basics" slides (《CUDA C/C++ Basics》学习笔记, 一维模板).
    ///
    /// 复现：《CUDA C/C++ Basics》学习笔记中的一维模板（共享内存分块与边界层）。
    ///
    /// Explained in (讲解): docs/stencil.md
    Stencil {
        /// A variant name (naive, shared, weighted, cluster, fast, bulk; cluster and bulk need sm_90), or `all`.
        #[arg(long, default_value = "all")]
        variant: String,
        /// Radius R: 1, 2, 3, 4, 8 or 16 (default: 3, or the one --weights implies).
        #[arg(long)]
        radius: Option<u32>,
        /// Elements: 16777216, 2^24, 2^28, 2^20+3, 1<<20.
        #[arg(long, default_value = "2^24", value_parser = parse_count)]
        n: usize,
        /// Threads per block (default: 128 for the fast path, 256 for the others).
        #[arg(long)]
        block: Option<u32>,
        /// Element type: i32, f32, f64, or f16 and bf16 (the fast stencil, computed in f32).
        #[arg(long = "type", default_value = "f32")]
        ty: String,
        /// What inputs outside the array read: zero, clamp or periodic.
        #[arg(long, default_value = "zero")]
        boundary: String,
        /// Coefficients c_0,...,c_2R, comma-separated (floats only; default: all 1, the sum).
        #[arg(long)]
        weights: Option<String>,
        /// Timed repetitions per variant (after 3 warm-up runs).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Seed of the random input.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run the notes' stencil without `__syncthreads()` as printed beside the corrected one
        /// (按原样运行笔记中缺少 __syncthreads() 的模板). At its own size.
        #[arg(long, conflicts_with_all = ["draw", "variant", "radius", "n", "block", "ty", "boundary", "weights", "reps", "seed"])]
        as_printed: bool,
        /// Draw what the kernels do, from a run (画出核函数实际做了什么).
        #[arg(long, conflicts_with_all = ["variant", "radius", "n", "block", "ty", "boundary", "weights", "reps", "seed"])]
        draw: bool,
        /// With --draw: also write the pictures as SVG files into this folder.
        #[arg(long, requires = "draw")]
        svg: Option<std::path::PathBuf>,
    },
    /// The notes' warp-function program: vote and shuffle results per lane, checked.
    ///
    /// Reproduces: the warp functions of Fan Zheyong's book, ch. 10
    /// (樊哲勇《CUDA编程基础与实践》第10章 线程束基本函数和协作组).
    ///
    /// 复现：樊哲勇《CUDA编程基础与实践》第10章（线程束基本函数和协作组）的线程束表决与洗牌函数程序。
    ///
    /// Explained in (讲解): docs/warp.md
    Warp(lab::WarpArgs),
    /// The simpleDivergence kernels, timed and checked.
    ///
    /// Reproduces: branch divergence in the execution-model notes (学习笔记《CUDA执行模型》,
    /// 分支发散) and in the MetaX book, ch. 5 (沐曦 MXMACA 教材第5章, 线程束分化); the kernels
    /// are simpleDivergence.cu of Professional CUDA C Programming, ch. 3.
    ///
    /// 复现：学习笔记《CUDA执行模型》的分支发散与沐曦 MXMACA 教材第5章的线程束分化（核函数为《CUDA C编程权威指南》第3章的 simpleDivergence.cu）。
    ///
    /// Explained in (讲解): docs/divergence.md
    Divergence(lab::DivergenceArgs),
    /// Every thread prints its threadIdx.x and blockIdx.x (device printf).
    ///
    /// Reproduces: the device printf exercise of the MetaX book, ch. 5 (沐曦 MXMACA 教材第5章).
    ///
    /// 复现：沐曦 MXMACA 教材第5章的练习：每个线程用设备端 printf 打印 threadIdx.x 和 blockIdx.x。
    ///
    /// Explained in (讲解): docs/device-layer.md
    PrintIndices(lab::PrintIndicesArgs),
    /// Waves of the device's width: a block cut into waves, __syncwave with a 64-bit mask,
    /// divergence inside one wave, occupancy counted in waves (run it with `--device cpu:64`).
    ///
    /// Reproduces: the 64-wide waves of the MetaX book, ch. 5 (沐曦 MXMACA 教材第5章: 200 threads
    /// as 64/64/64/8, __syncwave, 线程束分化 with 32 and 32 lanes in one wave, the occupancy API).
    ///
    /// 复现：沐曦 MXMACA 教材第5章的 64 线程 wave：200 个线程分成 64/64/64/8，64 位掩码的 __syncwave，一个 wave 内 32 与 32 个 lane 的分化，以 wave 计的占用率 API。
    ///
    /// Explained in (讲解): docs/cpu-device.md
    Waves(lab::WavesArgs),
    /// Streams and events: a host-to-device copy and a kernel, alone, on one stream, on two.
    ///
    /// Reproduces: streams, events and system-level synchronisation in the MetaX book, ch. 5
    /// (沐曦 MXMACA 教材第5章).
    ///
    /// 复现：沐曦 MXMACA 教材第5章的流、事件与系统级同步。
    ///
    /// Explained in (讲解): docs/streams.md
    Streams(lab::StreamsArgs),
    /// Occupancy per kernel and block size, or (--sweep) bandwidth vs occupancy.
    ///
    /// Reproduces: occupancy, resource allocation and latency hiding in the execution-model
    /// notes (学习笔记《CUDA执行模型》) and the occupancy calculation and API of the MetaX
    /// book, ch. 5 (沐曦 MXMACA 教材第5章).
    ///
    /// 复现：学习笔记《CUDA执行模型》的资源分配、延迟隐藏与占用率；沐曦 MXMACA 教材第5章的占用率计算与占用率 API。
    ///
    /// Explained in (讲解): docs/occupancy.md
    Occupancy(lab::OccupancyArgs),
    /// Every kernel family over sizes and types, checked, compared and drawn (the main job).
    Bench(bench::BenchArgs),
    /// Two `bench` runs' results.json side by side: is every median inside the other run's
    /// min..max? (No GPU needed.)
    Compare(bench::CompareArgs),
    /// Writes a `bench` run's report.md, results.csv and charts again from its results.json
    /// (no GPU needed).
    Report(bench::ReportArgs),
    /// Every library kernel under compute-sanitizer (memcheck, racecheck, synccheck, initcheck),
    /// and the broken-on-purpose kernels to show the checkers bite.
    ///
    /// Reproduces the notes' races: the 1D stencil without __syncthreads() of the study notes on
    /// NVIDIA's "CUDA C/C++ Basics" slides (《CUDA C/C++ Basics》学习笔记), and the volatile
    /// last-warp unrolling of Professional CUDA C Programming (《CUDA C编程权威指南》) that Fan
    /// Zheyong's book, ch. 10 (樊哲勇《CUDA编程基础与实践》第10章) fixes with __syncwarp().
    ///
    /// 复现笔记中的竞争：《CUDA C/C++ Basics》学习笔记的一维模板去掉 __syncthreads()；《CUDA C编程权威指南》用 volatile 展开最后一个线程束（樊哲勇《CUDA编程基础与实践》第10章用 __syncwarp() 修正）。
    ///
    /// Explained in (讲解): docs/stencil.md, docs/reliability.md
    Sanitize(sanitize::SanitizeArgs),
    /// What `sanitize` runs under each tool (every library kernel on small inputs with tails).
    #[command(hide = true)]
    SanitizeCases(sanitize::CasesArgs),
    /// The notes' profiling metrics (achieved occupancy, global load efficiency and throughput,
    /// global store throughput, shared memory efficiency, instructions per warp, branch
    /// efficiency) under Nsight Compute, beside the notes' table.
    ///
    /// Reproduces: the nvprof metrics of Professional CUDA C Programming §3.4
    /// (《CUDA C编程权威指南》3.4 避免分支分化) and of the execution-model notes
    /// (学习笔记《CUDA执行模型》), collected with Nsight Compute.
    ///
    /// 复现：《CUDA C编程权威指南》3.4 与学习笔记《CUDA执行模型》中的 nvprof 指标，改用 Nsight Compute 采集。
    ///
    /// Explained in (讲解): docs/profiling.md
    Profile(profile::ProfileArgs),
    /// What `profile` runs under ncu.
    #[command(hide = true)]
    ProfileCases,
    /// Beyond one GPU: the sharded sums and the iterated 1D stencil on a team of ranks (NCCL
    /// over this machine's GPUs, one rank per process from a launcher, or virtual ranks on one
    /// GPU), checked bit for bit against one GPU and timed beside it (efficiency T1 / (N x TN)).
    ///
    /// The stencil lesson of the 《CUDA C/C++ Basics》学习笔记 one level up: halos between GPUs
    /// instead of between blocks' shared memories.
    ///
    /// 多 GPU：把数组按 rank 切分，做分片求和、可复现求和与迭代一维模板（GPU 之间交换 halo），逐位对照单 GPU 结果并计时。
    ///
    /// Explained in (讲解): docs/multi-gpu.md
    Multi(multi::MultiArgs),
}

fn lang_arg(s: &str) -> Result<Lang, String> {
    Lang::from_name(s).ok_or_else(|| format!("`{s}` is not a language: en or zh (中文)"))
}

/// `--lang X` or `--lang=X` among the arguments, read before clap parses them so that its
/// errors are explained in the chosen language too.
fn lang_of_args() -> Option<Lang> {
    // `args_os`: an argument that is not UTF-8 (a path) is clap's to report, not a panic here.
    let args: Vec<Option<String>> = std::env::args_os()
        .map(|a| a.to_str().map(String::from))
        .collect();
    args.iter().enumerate().find_map(|(i, a)| {
        let a = a.as_deref()?;
        if a == "--lang" {
            args.get(i + 1)?.as_deref().and_then(Lang::from_name)
        } else {
            a.strip_prefix("--lang=").and_then(Lang::from_name)
        }
    })
}

fn main() -> ExitCode {
    lang::set(lang_of_args().unwrap_or_else(Lang::from_env));
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            use clap::error::ErrorKind;
            if lang::chinese()
                && !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
            {
                eprintln!(
                    "参数错误：下面是英文原文；`ferrocuda --help` 与 `ferrocuda <课程> --help` 列出每个参数。"
                );
            }
            e.exit()
        }
    };
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Some(l) = cli.lang {
        lang::set(l);
    }
    if ferrocuda::runtime::driver::cpu::selected()
        && let Some((_, sub)) = matches.subcommand()
    {
        let is_default = |id: &str| {
            sub.try_get_raw(id).is_ok_and(|v| v.is_some())
                && sub.value_source(id) == Some(ValueSource::DefaultValue)
        };
        let own_sizes = matches!(
            lesson_of(&cli.command),
            Some((_, lesson_text::Mode::AsPrinted | lesson_text::Mode::Draw))
        );
        if is_default("n") && !own_sizes {
            scale_default_size(&mut cli.command);
        }
        if let Command::Bench(a) = &mut cli.command {
            a.cpu_defaults(is_default);
        }
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = format!("{e:#}");
            let chinese_already = message
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
            match (lang::chinese(), errors_zh::explain(&message)) {
                (true, _) if chinese_already => eprintln!("错误：{message}"),
                (true, Some(zh)) => eprintln!("错误：{zh}\n（原文）error: {message}"),
                (true, None) => eprintln!("错误（英文原文）：{message}"),
                (false, _) => eprintln!("error: {message}"),
            }
            ExitCode::FAILURE
        }
    }
}

/// A lesson's default size on the CPU device, which runs every thread one after another:
/// 1024 times smaller (`2^24` -> `2^14`), so that it finishes in seconds; a size given with
/// `--n` is kept.
fn cpu_default_size(n: &mut usize) {
    let was = *n;
    *n = (was >> 10).max(1);
    if lang::chinese() {
        eprintln!(
            "CPU 设备：n = {}（默认值 {was} 的 1/1024：CPU 设备逐个运行每个线程；它的时间不是 GPU 的时间）",
            *n
        );
    } else {
        eprintln!(
            "CPU device: n = {} (the default {was}, 1024 times smaller: the CPU device runs every \
             thread in turn; its times are not GPU times)",
            *n
        );
    }
}

fn scale_default_size(command: &mut Command) {
    match command {
        Command::Smoke { n, .. } | Command::Reduce { n, .. } | Command::Stencil { n, .. } => {
            cpu_default_size(n)
        }
        Command::Divergence(a) => cpu_default_size(&mut a.n),
        Command::Streams(a) => cpu_default_size(&mut a.n),
        _ => {}
    }
}

/// The lesson a command runs (its subcommand), and how: the lesson itself, the notes'
/// listings as printed, or its pictures.
fn lesson_of(command: &Command) -> Option<(&'static str, lesson_text::Mode)> {
    use lesson_text::Mode;
    let mode = |as_printed: bool, draw: bool| {
        if as_printed {
            Mode::AsPrinted
        } else if draw {
            Mode::Draw
        } else {
            Mode::Lesson
        }
    };
    Some(match command {
        Command::PrintIndices(_) => ("print-indices", Mode::Lesson),
        Command::Divergence(a) => ("divergence", mode(a.as_printed, a.draw)),
        Command::Waves(_) => ("waves", Mode::Lesson),
        Command::Warp(a) => ("warp", mode(false, a.draw)),
        Command::Stencil {
            as_printed, draw, ..
        } => ("stencil", mode(*as_printed, *draw)),
        Command::Reduce {
            as_printed, draw, ..
        } => ("reduce", mode(*as_printed, *draw)),
        Command::Occupancy(_) => ("occupancy", Mode::Lesson),
        Command::Streams(_) => ("streams", Mode::Lesson),
        Command::Sanitize(_) => ("sanitize", Mode::Lesson),
        Command::Profile(_) => ("profile", Mode::Lesson),
        _ => return None,
    })
}

fn run(cli: Cli) -> Result<()> {
    let lesson = lesson_of(&cli.command);
    if let Some((name, mode)) = lesson {
        lesson_text::intro(name, mode);
    }
    run_command(cli)?;
    if let Some((name, mode)) = lesson {
        lesson_text::look_at(name, mode);
    }
    Ok(())
}

fn run_command(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench(a) => {
            let cfg = a.config()?;
            bench::bench(&open(cli.device)?, &a, &cfg)
        }
        Command::Compare(a) => bench::compare(&a),
        Command::Report(a) => bench::report(&a),
        Command::Sanitize(a) => sanitize::sanitize(cli.device, &a),
        Command::SanitizeCases(a) => sanitize::cases(&open(cli.device)?, &a),
        Command::Profile(a) => profile::profile(cli.device, &a),
        Command::ProfileCases => profile::cases(&open(cli.device)?),
        Command::Warp(a) => {
            a.validate()?;
            lab::warp(&open(cli.device)?, &a)
        }
        Command::Divergence(a) => {
            a.validate()?;
            lab::divergence(&open(cli.device)?, &a)
        }
        Command::Streams(a) => {
            a.validate()?;
            lab::streams(&open(cli.device)?, &a)
        }
        Command::Waves(a) => {
            a.validate()?;
            lab::waves(&open(cli.device)?, &a)
        }
        Command::PrintIndices(a) => {
            a.validate()?;
            lab::print_indices(&open(cli.device)?, &a)
        }
        Command::Occupancy(a) => {
            a.validate()?;
            lab::occupancy(&open(cli.device)?, &a)
        }
        Command::Multi(a) => multi::multi(cli.device, &a),
        Command::Info { bandwidth } => info(cli.device, bandwidth),
        Command::Smoke {
            n,
            block,
            dynamic_shared,
            seed,
        } => {
            smoke::launch_config(n, block, dynamic_shared)?;
            let gpu = open(cli.device)?;
            let r = smoke::run(&gpu, n, block, dynamic_shared, seed)?;
            println!(
                "{} on {} ({}): n = {}, {}",
                r.kernel,
                gpu.props().name,
                gpu.ptx_arch(),
                r.n,
                r.config
            );
            if r.mismatches > 0 {
                bail!(
                    "{}: {} of {} elements differ from the CPU",
                    r.kernel,
                    r.mismatches,
                    r.n
                );
            }
            println!(
                "PASS: all {} elements equal the CPU result bit for bit",
                r.n
            );
            Ok(())
        }
        Command::Reduce {
            variant,
            n,
            block,
            ty,
            op,
            reps,
            seed,
            as_printed,
            draw,
            svg,
        } => {
            if as_printed {
                let gpu = open(cli.device)?;
                return lab::as_printed(&gpu, ferrocuda_lessons::as_printed::Chapter::Reduce);
            }
            if draw {
                return lab::draw(&open(cli.device)?, lab::Picture::Trees, svg.as_deref());
            }
            let (ty, args) = reduce_args(&variant, n, block, &ty, &op, reps, seed)?;
            let gpu = open(cli.device)?;
            let passed = match ty {
                ElemType::F16 => half_table::<ferrocuda::runtime::element::F16>(&gpu, &args),
                ElemType::Bf16 => half_table::<ferrocuda::runtime::element::Bf16>(&gpu, &args),
                ElemType::F32 => reduce_table::<f32>(&gpu, &args, Some(reproducible_row::<f32>)),
                ElemType::F64 => reduce_table::<f64>(&gpu, &args, Some(reproducible_row::<f64>)),
                _ => ferrocuda::with_elem_type!(ty, T => reduce_table::<T>(&gpu, &args, None)),
            }?;
            if !passed {
                bail!("some reduction results differ from the CPU (see the check column)");
            }
            Ok(())
        }
        // The listings as printed and the pictures run at their own sizes (clap refuses the
        // size arguments beside them).
        Command::Stencil {
            as_printed: true, ..
        } => lab::as_printed(
            &open(cli.device)?,
            ferrocuda_lessons::as_printed::Chapter::Stencil,
        ),
        Command::Stencil {
            draw: true, svg, ..
        } => lab::draw(&open(cli.device)?, lab::Picture::Tiles, svg.as_deref()),
        Command::Stencil {
            variant,
            radius,
            n,
            block,
            ty,
            boundary,
            weights,
            reps,
            seed,
            ..
        } => stencil(
            cli.device,
            &variant,
            radius,
            n,
            block,
            &ty,
            &boundary,
            weights.as_deref(),
            reps,
            seed,
        ),
    }
}

struct ReduceArgs {
    variants: Vec<ReduceVariant>,
    /// The reproducible sum's row too (`--variant reproducible`, or `all` for a float sum).
    reproducible: bool,
    n: usize,
    block: Option<u32>,
    op: ReduceOp,
    reps: usize,
    seed: u64,
}

fn reduce_args(
    variant: &str,
    n: usize,
    block: Option<u32>,
    ty: &str,
    op: &str,
    reps: usize,
    seed: u64,
) -> Result<(ElemType, ReduceArgs)> {
    let ty = ElemType::from_name(ty).with_context(|| {
        format!("unknown type `{ty}` (i32, u32, i64, u64, f32, f64, f16, bf16)")
    })?;
    let op =
        ReduceOp::from_name(op).with_context(|| format!("unknown op `{op}` (sum, min, max)"))?;
    if ty.is_half() {
        if variant != "all" && variant != "fast" && variant != REPRODUCIBLE {
            bail!(
                "{ty} is reduced by the library only: --variant all, fast or {REPRODUCIBLE}, not `{variant}`"
            );
        }
        if variant == REPRODUCIBLE && op != ReduceOp::Sum {
            bail!("the reproducible sum is a sum, not a {} of {ty}", op.name());
        }
        if block.is_some() {
            bail!("{ty} is reduced by the library, which picks its own block: drop --block");
        }
        if reps == 0 {
            bail!("--reps must be at least 1");
        }
        return Ok((
            ty,
            ReduceArgs {
                variants: Vec::new(),
                reproducible: op == ReduceOp::Sum && variant != "fast",
                n,
                block,
                op,
                reps,
                seed,
            },
        ));
    }
    let names = || ReduceVariant::ALL.map(|v| v.name()).join(", ");
    let float_sum = ty.is_float() && op == ReduceOp::Sum;
    let reproducible = (variant == "all" || variant == REPRODUCIBLE) && float_sum;
    if variant == REPRODUCIBLE && !float_sum {
        bail!(
            "the reproducible sum is a sum of f32 or f64 (integer sums are the same on every \
             GPU already), not a {} of {ty}",
            op.name()
        );
    }
    let variants = if variant == REPRODUCIBLE {
        Vec::new()
    } else if variant == "all" {
        ReduceVariant::ALL
            .into_iter()
            .filter(|v| v.supports_type(ty) && v.supports_op(op))
            .collect()
    } else {
        let v = ReduceVariant::from_name(variant).with_context(|| {
            format!(
                "unknown reduce variant `{variant}` (all, {REPRODUCIBLE}, {})",
                names()
            )
        })?;
        if !v.supports_type(ty) || !v.supports_op(op) {
            bail!(
                "reduce variant `{variant}` has no {} {ty} version",
                op.name()
            );
        }
        vec![v]
    };
    if let Some(b) = block {
        for v in &variants {
            if let Some(e) = v.block_error(b) {
                bail!("{e}");
            }
        }
    }
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    Ok((
        ty,
        ReduceArgs {
            variants,
            reproducible,
            n,
            block,
            op,
            reps,
            seed,
        },
    ))
}

/// The reproducible sum's timing and bit check on `input` (`host` on the device).
type ReproducibleRow<T> = fn(&Gpu, &DeviceBuffer<T>, &[T], usize) -> Result<Measured<T>>;

fn reproducible_row<T: Reproducible>(
    gpu: &Gpu,
    input: &DeviceBuffer<T>,
    host: &[T],
    reps: usize,
) -> Result<Measured<T>> {
    let want = ferrocuda_lessons::cpu::reproducible::sum_reproducible(host);
    Ok(reproducible::measure(
        gpu,
        std::slice::from_ref(input),
        want,
        reps,
    )?)
}

/// `ferrocuda reduce --type f16|bf16`: the library's 16-bit float reductions, each timed per
/// call (wall clock, launch and wait included: what a program pays) and checked against the CPU.
/// The sum's input is ones and zeros (ones with probability `min(1, 2^23 / n)`), so its exact
/// total stays below 2^24 and every order of `f32` addition gives it bit for bit; `min` and
/// `max` read random finite values, and the result must be the CPU's element.
fn half_table<T: Element>(gpu: &Gpu, a: &ReduceArgs) -> Result<bool> {
    use ferrocuda::reduce as lib;
    let bytes = a.n * size_of::<T>();
    let mut rng = ferrocuda_lessons::cpu::SplitMix64::new(a.seed);
    let host: Vec<T> = if a.op == ReduceOp::Sum {
        let ones = (1u64 << 23).min(a.n.max(1) as u64);
        (0..a.n)
            .map(|_| T::from_f64((rng.next_u64() % (a.n.max(1) as u64) < ones) as u8 as f64))
            .collect()
    } else {
        (0..a.n)
            .map(|_| T::from_f64(ferrocuda_lessons::cpu::signed_unit(rng.next_u64()) * 1e4))
            .collect()
    };
    let input = gpu.upload(&host, "reduce input")?;
    print_reduce_header::<T>(gpu, a, "calls each, median wall time per call");
    println!("{:<24}{:>14}{:>10}  check", "call", "median us", "GB/s");
    let time = |f: &dyn Fn() -> ferrocuda::Result<f64>| -> Result<(f64, f64)> {
        let mut samples = Vec::with_capacity(a.reps);
        let mut value = f()?;
        for _ in 0..a.reps {
            let start = std::time::Instant::now();
            value = f()?;
            samples.push(start.elapsed().as_secs_f64());
        }
        Ok((timing::Stats::from_samples(samples).median_s, value))
    };
    let mut rows: Vec<(&str, f64, f64, f64)> = Vec::new();
    match a.op {
        ReduceOp::Sum => {
            let exact = host.iter().map(|x| x.to_f64()).sum::<f64>();
            let (t, v) = time(&|| lib::sum_to_f32(gpu, &input).map(f64::from))?;
            rows.push(("sum_to_f32", t, v, exact));
            if a.reproducible {
                let (t, v) = time(&|| lib::sum_reproducible_to_f32(gpu, &input).map(f64::from))?;
                rows.push(("sum_reproducible_to_f32", t, v, exact));
            }
        }
        ReduceOp::Min | ReduceOp::Max => {
            let max = a.op == ReduceOp::Max;
            let want = host
                .iter()
                .copied()
                .reduce(|x, y| if max { x.max_of(y) } else { x.min_of(y) })
                .map_or(f64::NAN, |x| x.to_f64());
            let (t, v) = if max {
                time(&|| lib::max(gpu, &input).map(|x| x.to_f64()))?
            } else {
                time(&|| lib::min(gpu, &input).map(|x| x.to_f64()))?
            };
            rows.push((a.op.name(), t, v, want));
        }
    }
    let mut all_passed = true;
    for (name, t, got, want) in rows {
        let passed = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        all_passed &= passed;
        println!(
            "{name:<24}{:>14.2}{:>10.0}  {} (got {got}, the CPU's exact {want})",
            t * 1e6,
            bytes as f64 / t / 1e9,
            if passed { "PASS" } else { "FAIL" },
        );
    }
    Ok(all_passed)
}

/// The first line of a `ferrocuda reduce` table: what is reduced, where, and how it is timed.
fn print_reduce_header<T: Element>(gpu: &Gpu, a: &ReduceArgs, timing: &str) {
    println!(
        "reduce {} of n = {} {} ({:.1} MiB) on {} ({}), {} {timing}",
        a.op.name(),
        a.n,
        T::TYPE,
        (a.n * size_of::<T>()) as f64 / (1u64 << 20) as f64,
        gpu.props().name,
        gpu.ptx_arch(),
        a.reps
    );
}

fn reduce_table<T: Element>(
    gpu: &Gpu,
    a: &ReduceArgs,
    reproducible: Option<ReproducibleRow<T>>,
) -> Result<bool> {
    let bytes = (a.n * size_of::<T>()) as u128;
    let (free, total) = gpu.memory_info()?;
    if 2 * bytes + (64 << 20) > free as u128 {
        return Err(ferrocuda::Error::OutOfMemory {
            what: format!("reduce input and scratch copy, n = {} {}", a.n, T::TYPE),
            bytes: 2 * bytes,
            free,
            total,
        }
        .into());
    }
    let host = book_input::<T>(a.n, a.seed);
    let input = gpu.upload(&host, "reduce input")?;
    let reference = ReduceReference::of(a.op, &host, |v| v);
    let (copy, copy_bytes) = timing::copy_bandwidth(gpu, (a.n * size_of::<T>()).max(1), a.reps)?;
    let copy_gbs = copy.gbs(copy_bytes);
    print_reduce_header::<T>(gpu, a, "timed runs each, medians of event times");
    println!("device-to-device copy of the same bytes: {copy_gbs:.0} GB/s (read + write)");
    println!(
        "{:<24}{:>9}{:>7}{:>12}{:>10}{:>8}  check",
        "variant", "grid", "block", "median us", "GB/s", "%copy"
    );
    let mut all_passed = true;
    for &v in &a.variants {
        if a.variants.len() > 1 && !v.runs_on(gpu.props()) {
            println!(
                "{:<24}needs sm_{} or newer: not run on this GPU",
                v.name(),
                v.min_arch()
            );
            continue;
        }
        let block = a.block.unwrap_or(v.default_block());
        let m = reduce::measure(gpu, v, a.op, &input, &reference, block, 3, a.reps)?;
        let gbs = m.stats.gbs(m.bytes);
        let grid = m
            .launches
            .iter()
            .map(|(_, c)| c.grid[0].to_string())
            .collect::<Vec<_>>()
            .join("+");
        all_passed &= m.check.passed;
        println!(
            "{:<24}{:>9}{:>7}{:>12.2}{:>10.0}{:>7.0}%  {} ({})",
            v.name(),
            grid,
            block,
            m.stats.median_s * 1e6,
            gbs,
            100.0 * gbs / copy_gbs,
            if m.check.passed { "PASS" } else { "FAIL" },
            m.check.detail
        );
    }
    if let Some(row) = reproducible.filter(|_| a.reproducible) {
        let m = row(gpu, &input, &host, a.reps)?;
        let stats = ferrocuda_lessons::timing::Stats::from_samples(m.samples);
        let gbs = stats.gbs(bytes as u64);
        all_passed &= m.check.passed;
        println!(
            "{:<24}{:>9}{:>7}{:>12.2}{:>10.0}{:>7.0}%  {} (sum {}: {})",
            REPRODUCIBLE,
            "-",
            ferrocuda_lessons::kernels::config::REDUCE_REPRO_BLOCK,
            stats.median_s * 1e6,
            gbs,
            100.0 * gbs / copy_gbs,
            if m.check.passed { "PASS" } else { "FAIL" },
            m.got,
            m.check.detail
        );
    }
    Ok(all_passed)
}

/// `ferrocuda stencil`: one row per variant with the median time, the effective bandwidth
/// (input read once plus output written once), its share of the device-to-device copy
/// bandwidth measured in the same run, and the check of every output against the CPU.
/// Arguments are checked before the GPU is opened.
#[allow(clippy::too_many_arguments)]
fn stencil(
    device: u32,
    variant: &str,
    radius: Option<u32>,
    n: usize,
    block: Option<u32>,
    ty: &str,
    boundary: &str,
    weights: Option<&str>,
    reps: usize,
    seed: u64,
) -> Result<()> {
    use ferrocuda_lessons::stencil::{Boundary, STENCIL_DEFAULT_RADIUS, StencilVariant, Taps};

    #[allow(clippy::too_many_arguments)]
    fn table<T: Element>(
        gpu: &Gpu,
        variants: &[StencilVariant],
        taps: &Taps<T>,
        boundary: Boundary,
        n: usize,
        block: Option<u32>,
        reps: usize,
        seed: u64,
    ) -> Result<bool> {
        let bytes = (n * size_of::<T>()) as u128;
        let (free, total) = gpu.memory_info()?;
        if 4 * bytes + (64 << 20) > free as u128 {
            return Err(ferrocuda::Error::OutOfMemory {
                what: format!(
                    "stencil input and output and the copy benchmark's two buffers, n = {n} {}",
                    T::TYPE
                ),
                bytes: 4 * bytes,
                free,
                total,
            }
            .into());
        }
        let host = book_input::<T>(n, seed);
        let input = gpu.upload(&host, "stencil input")?;
        // A copy from pageable memory may return before its DMA lands, and the library's
        // stream does not wait for the legacy stream that copy ran on.
        cust::context::CurrentContext::synchronize()
            .context("cuCtxSynchronize after the upload")?;
        let (copy, copy_bytes) = timing::copy_bandwidth(gpu, (n * size_of::<T>()).max(1), reps)?;
        let copy_gbs = copy.gbs(copy_bytes);
        let what = match taps {
            Taps::Sum { .. } => "sum".to_string(),
            Taps::Weighted(w) => format!("weights {w:?}"),
        };
        println!(
            "1D stencil R = {} ({what}), {} boundary, n = {n} {} ({:.1} MiB) on {} ({}), {reps} timed runs each, medians of event times",
            taps.radius(),
            boundary.name(),
            T::TYPE,
            bytes as f64 / (1u64 << 20) as f64,
            gpu.props().name,
            gpu.ptx_arch(),
        );
        println!("device-to-device copy of the same bytes: {copy_gbs:.0} GB/s (read + write)");
        println!(
            "{:<10}{:>9}{:>7}{:>12}{:>10}{:>8}  check",
            "variant", "grid", "block", "median us", "GB/s", "%copy"
        );
        let mut all_passed = true;
        for &v in variants {
            if variants.len() > 1 && !v.runs_on(gpu.props()) {
                println!(
                    "{:<10}needs sm_{} or newer: not run on this GPU",
                    v.name(),
                    v.min_arch()
                );
                continue;
            }
            let block = block.unwrap_or(v.default_block());
            let m = ferrocuda_lessons::stencil::measure(
                gpu, v, taps, boundary, &input, &host, block, 3, reps,
            )?;
            let gbs = m.stats.gbs(m.bytes);
            all_passed &= m.check.passed;
            println!(
                "{:<10}{:>9}{:>7}{:>12.2}{:>10.0}{:>7.0}%  {} ({}: {})",
                v.name(),
                m.config.grid[0],
                block,
                m.stats.median_s * 1e6,
                gbs,
                100.0 * gbs / copy_gbs,
                if m.check.passed { "PASS" } else { "FAIL" },
                m.symbol,
                m.check.detail
            );
        }
        Ok(all_passed)
    }

    let ty = ElemType::from_name(ty)
        .with_context(|| format!("unknown type `{ty}` (i32, f32, f64, f16, bf16)"))?;
    let boundary = Boundary::from_name(boundary)
        .with_context(|| format!("unknown boundary `{boundary}` (zero, clamp, periodic)"))?;
    let coefficients = weights
        .map(|w| {
            w.split(',')
                .map(|c| {
                    c.trim()
                        .parse::<f64>()
                        .with_context(|| format!("--weights: `{c}` is not a number"))
                })
                .collect::<Result<Vec<f64>>>()
        })
        .transpose()?;
    let radius = match (&coefficients, radius) {
        (Some(c), Some(r)) if c.len() != 2 * r as usize + 1 => bail!(
            "--radius {r} needs 2R + 1 = {} coefficients, but --weights has {}",
            2 * r + 1,
            c.len()
        ),
        (Some(c), _) => (c.len() / 2) as u32,
        (None, r) => r.unwrap_or(STENCIL_DEFAULT_RADIUS),
    };
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    let names = || StencilVariant::ALL.map(|v| v.name()).join(", ");
    let passed = ferrocuda::with_elem_type!(ty, T => {
        let taps = match &coefficients {
            Some(c) => Taps::Weighted(c.iter().map(|&v| T::from_f64(v)).collect()),
            None => Taps::<T>::Sum { radius },
        };
        let variants: Vec<StencilVariant> = if variant == "all" {
            StencilVariant::ALL
                .into_iter()
                .filter(|v| v.supports_type(ty) && (v.supports_weights() || !taps.is_weighted()))
                .collect()
        } else {
            vec![StencilVariant::from_name(variant).with_context(|| {
                format!("unknown stencil variant `{variant}` (all, {})", names())
            })?]
        };
        if variants.is_empty() {
            bail!("no stencil variant has a {ty} version (i32, f32, f64; f16 and bf16: fast)");
        }
        for v in &variants {
            if let Some(e) = v.error(&taps, block.unwrap_or(v.default_block())) {
                bail!("{e}");
            }
        }
        let gpu = open(device)?;
        table::<T>(&gpu, &variants, &taps, boundary, n, block, reps, seed)?
    });
    if !passed {
        bail!("some stencil outputs differ from the CPU (see the check column)");
    }
    Ok(())
}

/// `--device`: an ordinal, or `cpu`, which chooses the CPU device for the process (as
/// `FERROCUDA_DEVICE=cpu` does) and is its ordinal 0.
fn device_arg(text: &str) -> std::result::Result<u32, String> {
    if let Some(width) = ferrocuda::runtime::driver::cpu::parse_choice(text) {
        if !ferrocuda::runtime::driver::cpu::select_with_waves(width) {
            return Err("the NVIDIA driver is already in use".to_owned());
        }
        return Ok(0);
    }
    text.parse()
        .map_err(|_| format!("`{text}` is not a device ordinal, `cpu` or `cpu:64`"))
}

fn open(device: u32) -> Result<Gpu> {
    Gpu::new(device).with_context(|| format!("opening CUDA device {device}"))
}

fn info(device: u32, bandwidth: bool) -> Result<()> {
    let gpu = open(device)?;
    let p = gpu.props();
    let kib = |b: u32| format!("{} KiB", b / 1024);
    let rows: Vec<(&str, String)> = vec![
        ("device", format!("{} (ordinal {})", p.name, p.ordinal)),
        (
            "compute capability",
            format!("{}.{}", p.compute_capability.0, p.compute_capability.1),
        ),
        (
            "PTX loaded",
            format!(
                "{} (embedded: {})",
                gpu.ptx_arch(),
                EMBEDDED_PTX
                    .iter()
                    .map(|x| x.arch)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (
            "driver",
            format!(
                "CUDA {}.{}",
                p.driver_version / 1000,
                p.driver_version % 1000 / 10
            ),
        ),
        ("multiprocessors", p.sm_count.to_string()),
        ("warp size", p.warp_size.to_string()),
        ("max threads / block", p.max_threads_per_block.to_string()),
        ("max block dims", format!("{:?}", p.max_block_dim)),
        ("max grid dims", format!("{:?}", p.max_grid_dim)),
        ("max threads / SM", p.max_threads_per_sm.to_string()),
        ("max blocks / SM", p.max_blocks_per_sm.to_string()),
        (
            "shared memory / block",
            format!(
                "{} (opt-in {})",
                kib(p.shared_mem_per_block),
                kib(p.shared_mem_per_block_optin)
            ),
        ),
        ("shared memory / SM", kib(p.shared_mem_per_sm)),
        ("registers / block", p.regs_per_block.to_string()),
        ("registers / SM", p.regs_per_sm.to_string()),
        (
            "L2 cache",
            format!("{} MiB", p.l2_bytes as f64 / (1 << 20) as f64),
        ),
        (
            "memory",
            format!("{:.1} GiB", p.total_memory as f64 / (1u64 << 30) as f64),
        ),
        (
            "memory bus",
            format!(
                "{} bit at {} MHz",
                p.memory_bus_width_bits,
                p.memory_clock_khz / 1000
            ),
        ),
        (
            "theoretical bandwidth",
            format!("{:.0} GB/s", p.theoretical_bandwidth_gbs()),
        ),
    ];
    for (k, v) in rows {
        println!("{k:<24}{v}");
    }
    if bandwidth {
        let (stats, bytes) = timing::copy_bandwidth(&gpu, 256 << 20, 20)?;
        println!(
            "{:<24}{:.0} GB/s (device-to-device copy of 256 MiB, read + write, median of {}; {:.0}% of theoretical)",
            "copy bandwidth",
            stats.gbs(bytes),
            stats.reps,
            100.0 * stats.gbs(bytes) / p.theoretical_bandwidth_gbs()
        );
    }
    Ok(())
}
