//! A prepared launch borrows its input and output: neither can be freed, or written by the
//! host, while it may still launch.
use ferrocuda::Gpu;
use ferrocuda::stencil::{Boundary, StencilRun, Taps};

fn run(gpu: &Gpu) -> ferrocuda::Result<()> {
    let x = gpu.upload(&[1.0f32; 64], "x")?;
    let mut y = gpu.alloc::<f32>(64, "y")?;
    let mut stencil = StencilRun::new(gpu, &Taps::Sum { radius: 3 }, Boundary::Zero, &x, &mut y)?;
    drop(x);
    stencil.launch()
}

fn main() {}
