//! Uninitialised device memory is `unsafe` to ask for: read back as a `bool` before a kernel
//! wrote it, it would be undefined behaviour.
use ferrocuda::{DeviceBuffer, Gpu};

fn flags(gpu: &Gpu) -> ferrocuda::Result<DeviceBuffer<bool>> {
    gpu.alloc_uninit::<bool>(16, "flags")
}

fn main() {}
