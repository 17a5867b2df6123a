//! A stencil run with a caller's kernel is `unsafe` to prepare: the library checks the lengths,
//! the overlap and the launch configuration, but not what the kernel does with its pointers.
use ferrocuda::stencil::{Boundary, StencilGrid, StencilKernel, StencilRun};
use ferrocuda::{DeviceSlice, Gpu};

fn prepare<'g, 'a>(
    gpu: &'g Gpu,
    kernel: StencilKernel<'g, f32>,
    input: &'a DeviceSlice<f32>,
    output: &'a mut DeviceSlice<f32>,
) -> ferrocuda::Result<StencilRun<'g, 'a, f32>> {
    StencilRun::with_kernel(gpu, kernel, StencilGrid::PerElement, Boundary::Zero, input, output, 256)
}

fn main() {}
