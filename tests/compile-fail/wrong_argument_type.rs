//! `smoke_saxpy(n: usize, a: f32, x: *const f32, y: *const f32, out: *mut f32)` given `n` as a
//! `u32`: the launch does not compile.
use ferrocuda::Gpu;
use ferrocuda_lessons::kernels::smoke::smoke_saxpy;
use ferrocuda::LaunchConfig;
use ferrocuda::DevicePointer;

fn launch(gpu: &Gpu, x: DevicePointer<f32>, out: DevicePointer<f32>, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel(smoke_saxpy())?;
    unsafe { kernel.launch(LaunchConfig::linear(1, 256, 0), (n as u32, 2.0f32, x, x, out)) }
}

fn main() {}
