//! The dot product of two vectors with a kernel of our own (`dot-kernels`), launched typed
//! through ferrocuda and checked against the CPU.
//!
//! ```sh
//! cargo run --release -p dot-product -- [N]
//! ```
use dot_kernels::{DOT_BLOCK, dot};
use ferrocuda::{EmbeddedPtx, Gpu, LaunchConfig};

/// The PTX of ./kernels, built by `build.rs`.
static DOT_KERNELS: &[EmbeddedPtx] = ferrocuda::include_ptx!("dot_kernels");

fn main() {
    if let Err(err) = run() {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|_| format!("N must be a count, not {arg:?}"))?,
        None => (1 << 24) + 3,
    };
    let x: Vec<f64> = (0..n)
        .map(|i| ((i % 1000) as f64 - 500.0) / 256.0)
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| ((i * 7 % 1001) as f64 - 500.0) / 128.0)
        .collect();

    let gpu = Gpu::new(0)?;
    let module = gpu.load_module(DOT_KERNELS)?;
    // Typed: `dot` takes (*const f64, *const f64, *mut f64, usize), so the launch below takes
    // exactly (DevicePointer<f64>, DevicePointer<f64>, DevicePointer<f64>, usize).
    let kernel = module.kernel(dot::<f64>().ok_or("dot has no f64 instance")?)?;
    let (dx, dy) = (gpu.upload(&x, "x")?, gpu.upload(&y, "y")?);
    let grid = (n.div_ceil(DOT_BLOCK as usize) as u32).clamp(1, 4 * gpu.props().sm_count);
    let partials = gpu.alloc::<f64>(grid as usize, "partials")?;
    let config: LaunchConfig = kernel.config(grid, DOT_BLOCK);
    // SAFETY: x and y hold n elements, partials holds `grid` (the kernel's `# Safety`).
    unsafe {
        kernel.launch_and_wait(
            config,
            (
                dx.as_device_ptr(),
                dy.as_device_ptr(),
                partials.as_device_ptr(),
                n,
            ),
        )?
    };
    let got: f64 = gpu.download(&partials)?.iter().sum();

    let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    let tolerance = 1e-10 * x.iter().zip(&y).map(|(a, b)| (a * b).abs()).sum::<f64>();
    let ok = (got - want).abs() <= tolerance;
    println!(
        "dot product of {n} f64 on {} ({} PTX, {grid} blocks of {DOT_BLOCK}): GPU {got:.6}, CPU {want:.6}, |diff| {:.3e} <= {tolerance:.3e}: {}",
        gpu.props().name,
        module.arch(),
        (got - want).abs(),
        if ok { "PASS" } else { "FAIL" }
    );
    if !ok {
        return Err("the GPU's dot product differs from the CPU's".into());
    }
    Ok(())
}
