//! A launch is `unsafe`: the types are checked, the pointers' lengths are the caller's promise.
use ferrocuda::Gpu;
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda::LaunchConfig;
use ferrocuda::DevicePointer;

fn launch(gpu: &Gpu, x: DevicePointer<f32>, out: DevicePointer<f32>, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel(smoke_saxpy())?;
    kernel.launch(LaunchConfig::linear(1, 256, 0), (n, 2.0f32, x, x, out))
}

fn main() {}
