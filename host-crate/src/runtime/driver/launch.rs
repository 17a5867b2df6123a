//! The CUDA 12 launch structures (`CUlaunchConfig`, `CUlaunchAttribute`) and attribute numbers
//! that `cust`'s bindings predate, laid out as `cuda.h` lays them out; used by the NVIDIA
//! driver's calls (`cuda12`) and by the CPU device's (`cpu`).
use std::ffi::{c_int, c_uint};

use cust::sys::CUstream;

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
pub const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: c_uint = 4;

/// `CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`: whether the device launches thread block clusters.
pub const DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: c_int = 120;

/// `CUlaunchAttribute`: an id, padding to 8 bytes, and a 64-byte value (here the cluster's
/// dimensions in its first 12 bytes). The C value is a union holding pointers and `size_t`,
/// so the struct is 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    pub id: c_uint,
    pub pad: [u8; 4],
    pub value: [c_uint; 16],
}

/// `CUlaunchConfig`.
#[repr(C)]
pub struct LaunchConfig {
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub stream: CUstream,
    pub attrs: *mut LaunchAttribute,
    pub num_attrs: c_uint,
}
