//! Reduce a buffer that already lives on the GPU: sum, min and max with ferrocuda's fast path,
//! checked against the CPU.
//!
//! ```sh
//! cargo run --release --example reduce_device_buffer -- [N]
//! ```
use ferrocuda::{Gpu, reduce};

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
        None => (1 << 24) + 1,
    };
    // Small integers in f32: every partial sum is exact, so the GPU must match the CPU exactly.
    let host: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
    let ints: Vec<i32> = (0..n).map(|i| (i as i32).wrapping_mul(2_654_435)).collect();

    let gpu = Gpu::new(0)?;
    let device = gpu.upload(&host, "input")?; // a DeviceBuffer<f32>, e.g. another kernel's output
    let device_ints = gpu.upload(&ints, "ints")?;

    let checks = [
        (
            "sum f32",
            reduce::sum(&gpu, &device)? as f64,
            host.iter().map(|&v| v as f64).sum(),
        ),
        (
            "min f32",
            reduce::min(&gpu, &device)? as f64,
            host.iter().copied().fold(f32::INFINITY, f32::min) as f64,
        ),
        (
            "max f32",
            reduce::max(&gpu, &device)? as f64,
            host.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64,
        ),
        (
            "sum i32 -> i64",
            reduce::sum_i32_to_i64(&gpu, &device_ints)? as f64,
            ints.iter().map(|&v| v as i64).sum::<i64>() as f64,
        ),
    ];
    let mut failed = 0;
    for (what, got, want) in checks {
        let ok = got == want;
        failed += usize::from(!ok);
        println!(
            "{what:>15} of {n} on {}: GPU {got}, CPU {want}: {}",
            gpu.props().name,
            if ok { "PASS" } else { "FAIL" }
        );
    }
    if failed > 0 {
        return Err(format!("{failed} reduction(s) differ from the CPU").into());
    }
    Ok(())
}
