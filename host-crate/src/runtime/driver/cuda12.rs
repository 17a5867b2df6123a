//! Driver functions newer than `cust`'s bindings (CUDA 12: thread block clusters), declared
//! here from `cuda.h` and resolved from the same `libcuda.so.1` as the rest, on first use.
//! They are ordinary Rust functions, not `#[no_mangle]` trampolines: nothing in `cust` calls
//! them.
use std::ffi::{CStr, c_int, c_void};

use cust::sys::{CUdevice, CUfunction, CUresult};

use super::Slot;

pub use super::launch::{
    DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, LaunchAttribute,
    LaunchConfig,
};

/// The attribute that launches in clusters of `x` blocks along x.
pub fn cluster_dimension(x: u32) -> LaunchAttribute {
    let mut value = [0; 16];
    value[..3].copy_from_slice(&[x, 1, 1]);
    LaunchAttribute {
        id: LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    }
}

/// The driver's `name`, resolved once into `slot`, as a function of type `F`.
///
/// # Safety
/// `F` is the C signature of `name` in `cuda.h`.
unsafe fn entry<F: Copy>(slot: &Slot, name: &CStr) -> Result<F, CUresult> {
    let found = slot.resolve(name)?;
    // SAFETY: a function pointer of the caller's signature (the caller's contract).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&found) })
}

/// `cuLaunchKernelEx`.
///
/// # Safety
/// As the driver function: a valid function, configuration and argument array.
pub unsafe fn launch_kernel_ex(
    config: &LaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
) -> CUresult {
    type Fn = unsafe extern "C" fn(
        *const LaunchConfig,
        CUfunction,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CUresult;
    static SLOT: Slot = Slot::new();
    // SAFETY: the signature of `cuda.h`.
    match unsafe { entry::<Fn>(&SLOT, c"cuLaunchKernelEx") } {
        // SAFETY: forwarded to the caller.
        Ok(launch) => unsafe { launch(config, f, params, std::ptr::null_mut()) },
        Err(status) => status,
    }
}

/// `cuOccupancyMaxActiveClusters`: clusters of the launch `config` that can be resident at
/// once.
///
/// # Safety
/// As the driver function.
pub unsafe fn occupancy_max_active_clusters(
    clusters: &mut c_int,
    f: CUfunction,
    config: &LaunchConfig,
) -> CUresult {
    type Fn = unsafe extern "C" fn(*mut c_int, CUfunction, *const LaunchConfig) -> CUresult;
    static SLOT: Slot = Slot::new();
    // SAFETY: the signature of `cuda.h`.
    match unsafe { entry::<Fn>(&SLOT, c"cuOccupancyMaxActiveClusters") } {
        // SAFETY: forwarded to the caller.
        Ok(query) => unsafe { query(clusters, f, config) },
        Err(status) => status,
    }
}

/// `cuDeviceGetAttribute` by the attribute's number, for attributes `cust`'s enum lacks.
///
/// # Safety
/// None beyond a valid device ordinal (the driver checks it).
pub unsafe fn device_attribute(value: &mut c_int, attribute: c_int, device: CUdevice) -> CUresult {
    type Fn = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    static SLOT: Slot = Slot::new();
    // SAFETY: the signature of `cuda.h` (the enum is an `int`).
    match unsafe { entry::<Fn>(&SLOT, c"cuDeviceGetAttribute") } {
        // SAFETY: forwarded to the caller.
        Ok(query) => unsafe { query(value, attribute, device) },
        Err(status) => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_structures_have_cuda_h_layout() {
        // cuda.h (12.x): CUlaunchAttribute is 72 bytes (id, 4 of padding, a 64-byte union);
        // CUlaunchConfig is 7 unsigned ints, then the stream, the attributes and their count.
        assert_eq!(size_of::<LaunchAttribute>(), 72);
        assert_eq!(std::mem::offset_of!(LaunchAttribute, value), 8);
        assert_eq!(std::mem::offset_of!(LaunchConfig, stream), 32);
        assert_eq!(std::mem::offset_of!(LaunchConfig, attrs), 40);
        assert_eq!(std::mem::offset_of!(LaunchConfig, num_attrs), 48);
        assert_eq!(size_of::<LaunchConfig>(), 56);
        assert_eq!(std::mem::align_of::<LaunchAttribute>(), 8);
        assert_eq!(std::mem::align_of::<LaunchConfig>(), 8);
        assert_eq!(cluster_dimension(4).value[..4], [4, 1, 1, 0]);
    }
}
