//! The 1D stencil of the 《CUDA C/C++ Basics》学习笔记 with ferrocuda's fast path: a radius-3 sum and a
//! weighted 5-point stencil, each with its boundary, checked element by element against the CPU.
//!
//! ```sh
//! cargo run --release --example stencil -- [N]
//! ```
use ferrocuda::Gpu;
use ferrocuda::stencil::{self, Boundary, Taps};
use ferrocuda_lessons::cpu::check_stencil;

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
        None => (1 << 22) + 5,
    };
    let host: Vec<f32> = (0..n).map(|i| ((i * 13) % 17) as f32 * 0.25).collect();

    let gpu = Gpu::new(0)?;
    let input = gpu.upload(&host, "input")?;
    let cases = [
        (
            "sum, radius 3, zero outside",
            Taps::Sum { radius: 3 },
            Boundary::Zero,
        ),
        (
            "weighted 1 4 6 4 1 / 16, periodic",
            Taps::Weighted([1.0, 4.0, 6.0, 4.0, 1.0].map(|w: f32| w / 16.0).to_vec()),
            Boundary::Periodic,
        ),
    ];
    let mut failed = 0;
    for (what, taps, boundary) in cases {
        // The output stays on the device (it could feed the next kernel); bring it back to check.
        let output = stencil::apply(&gpu, &input, &taps, boundary)?;
        let check = check_stencil(&host, &taps, boundary, &gpu.download(&output)?);
        failed += usize::from(!check.passed);
        let verdict = if check.passed { "PASS" } else { "FAIL" };
        println!(
            "{what:>34} of {n} f32 on {}: {verdict} ({})",
            gpu.props().name,
            check.detail
        );
    }
    if failed > 0 {
        return Err(format!("{failed} stencil(s) differ from the CPU").into());
    }
    Ok(())
}
