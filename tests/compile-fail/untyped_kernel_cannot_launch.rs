//! A kernel known only from the list of entry points answers queries but cannot launch.
use ferrocuda::Gpu;
use ferrocuda::runtime::kernel::entry_point;
use ferrocuda::LaunchConfig;

fn launch(gpu: &Gpu, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel_info(entry_point("smoke_saxpy").unwrap())?;
    unsafe { kernel.launch(LaunchConfig::linear(1, 256, 0), (n,)) }
}

fn main() {}
