//! The notes' argument order matters: `smoke_saxpy(n, a, x, y, out)` with `a` and `n` swapped
//! does not compile.
use ferrocuda::Gpu;
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda::LaunchConfig;
use ferrocuda::DevicePointer;

fn launch(gpu: &Gpu, x: DevicePointer<f32>, out: DevicePointer<f32>, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel(smoke_saxpy())?;
    unsafe { kernel.launch(LaunchConfig::linear(1, 256, 0), (2.0f32, n, x, x, out)) }
}

fn main() {}
