//! The safe allocation zeroes its buffer, so it takes element types only: zero bytes are not a
//! valid value of every `DeviceCopy` type (a `NonZeroU32`, a reference-free enum).
use ferrocuda::{DeviceBuffer, Gpu};

fn ids(gpu: &Gpu) -> ferrocuda::Result<DeviceBuffer<std::num::NonZeroU32>> {
    gpu.alloc::<std::num::NonZeroU32>(16, "ids")
}

fn main() {}
