//! `smoke_saxpy` takes five arguments; four do not compile.
use ferrocuda::Gpu;
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda::LaunchConfig;
use ferrocuda::DevicePointer;

fn launch(gpu: &Gpu, x: DevicePointer<f32>, out: DevicePointer<f32>, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel(smoke_saxpy())?;
    unsafe { kernel.launch(LaunchConfig::linear(1, 256, 0), (n, 2.0f32, x, out)) }
}

fn main() {}
