//! A device slice is reached only through a borrow of its buffer: it cannot be copied out of
//! one, so no copy outlives the buffer (freed at the end of the statement) or aliases it.
use ferrocuda::{DeviceSlice, Gpu};

fn stale(gpu: &Gpu) -> ferrocuda::Result<DeviceSlice<f32>> {
    Ok(*gpu.alloc::<f32>(16, "freed at once")?)
}

fn main() {}
