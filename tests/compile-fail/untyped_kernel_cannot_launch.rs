//! A kernel known only from the list of entry points answers queries but cannot launch.
use ferrocuda::Gpu;
use ferrocuda::runtime::kernel::entry_points;
use ferrocuda::LaunchConfig;

fn launch(gpu: &Gpu, n: usize) -> ferrocuda::Result<()> {
    let kernel = gpu.kernel_info(entry_points()[0])?;
    unsafe { kernel.launch(LaunchConfig::linear(1, 256, 0), (n,)) }
}

fn main() {}
