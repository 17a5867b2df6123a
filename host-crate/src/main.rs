//! The `ferrocuda` command line.
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use ferrocuda::gpu::{EMBEDDED_PTX, Gpu};
use ferrocuda::{smoke, timing};

#[derive(Parser)]
#[command(name = "ferrocuda", version, about = "GPU kernels in pure Rust: run, check and measure them")]
struct Cli {
    /// CUDA device ordinal.
    #[arg(long, global = true, default_value_t = 0)]
    device: u32,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info { bandwidth } => info(cli.device, bandwidth),
        Command::Smoke { n, block, dynamic_shared, seed } => {
            smoke::launch_config(n, block, dynamic_shared)?;
            let gpu = open(cli.device)?;
            let r = smoke::run(&gpu, n, block, dynamic_shared, seed)?;
            println!("smoke_saxpy on {} ({}): n = {}, {}", gpu.props().name, gpu.ptx_arch(), r.n, r.config);
            if r.mismatches > 0 {
                bail!("smoke_saxpy: {} of {} elements differ from the CPU", r.mismatches, r.n);
            }
            println!("PASS: all {} elements equal the CPU result bit for bit", r.n);
            Ok(())
        }
    }
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
        ("compute capability", format!("{}.{}", p.compute_capability.0, p.compute_capability.1)),
        ("PTX loaded", format!("{} (embedded: {})", gpu.ptx_arch(), EMBEDDED_PTX.iter().map(|x| x.arch).collect::<Vec<_>>().join(", "))),
        ("driver", format!("CUDA {}.{}", p.driver_version / 1000, p.driver_version % 1000 / 10)),
        ("multiprocessors", p.sm_count.to_string()),
        ("warp size", p.warp_size.to_string()),
        ("max threads / block", p.max_threads_per_block.to_string()),
        ("max block dims", format!("{:?}", p.max_block_dim)),
        ("max grid dims", format!("{:?}", p.max_grid_dim)),
        ("max threads / SM", p.max_threads_per_sm.to_string()),
        ("max blocks / SM", p.max_blocks_per_sm.to_string()),
        ("shared memory / block", format!("{} (opt-in {})", kib(p.shared_mem_per_block), kib(p.shared_mem_per_block_optin))),
        ("shared memory / SM", kib(p.shared_mem_per_sm)),
        ("registers / block", p.regs_per_block.to_string()),
        ("registers / SM", p.regs_per_sm.to_string()),
        ("L2 cache", format!("{} MiB", p.l2_bytes as f64 / (1 << 20) as f64)),
        ("memory", format!("{:.1} GiB", p.total_memory as f64 / (1u64 << 30) as f64)),
        ("memory bus", format!("{} bit at {} MHz", p.memory_bus_width_bits, p.memory_clock_khz / 1000)),
        ("theoretical bandwidth", format!("{:.0} GB/s", p.theoretical_bandwidth_gbs())),
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
