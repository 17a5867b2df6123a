//! `ferrocuda smoke`: one tiny kernel (`smoke_saxpy`) run and checked against the CPU.
use ferrocuda_lesson_kernels::config::SMOKE_BLOCK;
use ferrocuda_lesson_kernels::smoke::smoke_saxpy;

use crate::cpu;
use ferrocuda::runtime::config::LaunchConfig;
use ferrocuda::runtime::error::{Error, KernelLaunch, Result};
use ferrocuda::runtime::gpu::Gpu;

/// Default threads per block.
pub const DEFAULT_BLOCK: u32 = SMOKE_BLOCK;

/// The launch `saxpy` uses for `n` elements, checked against the limits every supported GPU
/// shares (so it fails the same way with or without a device).
pub fn launch_config(n: usize, block: u32, dynamic_shared_bytes: u32) -> Result<LaunchConfig> {
    let config = LaunchConfig::per_element(n, block, dynamic_shared_bytes).ok_or_else(|| Error::InvalidArgument {
        what: format!("`{}`: cannot cover n = {n} with blocks of {block} threads (block must be at least 1 and the grid fit in u32)", smoke_saxpy().symbol()),
    })?;
    // An empty input launches nothing; its block size must still be one that could run.
    let checked = LaunchConfig {
        grid: [config.grid[0].max(1), 1, 1],
        ..config
    };
    match checked.architectural_violation() {
        Some(reason) => Err(Error::InvalidLaunch {
            launch: KernelLaunch {
                kernel: smoke_saxpy().symbol().into(),
                config,
            },
            reason,
        }),
        None => Ok(config),
    }
}

/// `a * x + y` on the GPU. An empty input launches nothing and returns an empty vector.
pub fn saxpy(
    gpu: &Gpu,
    a: f32,
    x: &[f32],
    y: &[f32],
    block: u32,
    dynamic_shared_bytes: u32,
) -> Result<Vec<f32>> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            expected: x.len(),
            found: y.len(),
            what: format!(
                "`{}`: x has {} elements but y has {}",
                smoke_saxpy().symbol(),
                x.len(),
                y.len()
            ),
        });
    }
    let n = x.len();
    let config = launch_config(n, block, dynamic_shared_bytes)?;
    let kernel = crate::kernel(gpu, smoke_saxpy())?;
    if n == 0 {
        kernel.validate(LaunchConfig {
            grid: [1, 1, 1],
            ..config
        })?; // block still checked
        return Ok(Vec::new());
    }
    let dx = gpu.upload(x, "smoke x")?;
    let dy = gpu.upload(y, "smoke y")?;
    let out = gpu.alloc::<f32>(n, "smoke output")?;
    // SAFETY: the three buffers hold `n` elements, as `smoke_saxpy` requires.
    unsafe {
        kernel.launch_and_wait(
            config,
            (
                n,
                a,
                dx.as_device_ptr(),
                dy.as_device_ptr(),
                out.as_device_ptr(),
            ),
        )?
    };
    gpu.download(&out)
}

/// The outcome of a smoke run.
#[derive(Clone, Debug)]
pub struct SmokeReport {
    /// The kernel's PTX symbol.
    pub kernel: &'static str,
    /// Elements.
    pub n: usize,
    /// The launch used.
    pub config: LaunchConfig,
    /// Elements that differ from the CPU (bitwise).
    pub mismatches: usize,
}

/// Runs `saxpy` on `n` random elements and compares bit for bit with [`cpu::saxpy`].
pub fn run(
    gpu: &Gpu,
    n: usize,
    block: u32,
    dynamic_shared_bytes: u32,
    seed: u64,
) -> Result<SmokeReport> {
    let config = launch_config(n, block, dynamic_shared_bytes)?;
    let bytes = n as u128 * 3 * 4;
    let (free, total) = gpu.memory_info()?;
    if bytes > free as u128 {
        return Err(Error::OutOfMemory {
            what: format!(
                "`{}` with n = {n} (x, y and output)",
                smoke_saxpy().symbol()
            ),
            bytes,
            free,
            total,
        });
    }
    let mut rng = cpu::SplitMix64::new(seed);
    let x: Vec<f32> = (0..n).map(|_| rng.next_f64_signed() as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.next_f64_signed() as f32).collect();
    let a = 2.5f32;
    let got = saxpy(gpu, a, &x, &y, block, dynamic_shared_bytes)?;
    let want = cpu::saxpy(a, &x, &y);
    let mismatches = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g.to_bits() != w.to_bits())
        .count();
    Ok(SmokeReport {
        kernel: smoke_saxpy().symbol(),
        n,
        config,
        mismatches,
    })
}
