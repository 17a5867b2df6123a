//! # ferrocuda-device
//!
//! The device layer of ferrocuda, our `cuda_std`: each module wraps one CUDA concept with the
//! CUDA spelling in snake case (`__syncthreads` -> `sync::syncthreads`, `__shfl_down_sync` ->
//! `warp::shfl_down_sync`), plus [`kernel`], which declares a kernel once: a PTX entry point on
//! `nvptx64-nvidia-cuda`, a typed launch handle ([`entry::Entry`]) on the host.
//!
//! A kernel crate depends on this crate only, so its PTX holds its own kernels and nothing of
//! ferrocuda's; `ferrocuda-builder` compiles it to PTX from the host crate's `build.rs`.
//! Everything here is `#[inline(always)]`: a kernel compiles to the same PTX it would have had
//! with the intrinsic written inline. The crate is `no_std` on the GPU; on the host only
//! [`config`] and [`entry`] exist (the device modules are GPU code).
//!
//! ```ignore
//! use ferrocuda_device::kernel;
//! use ferrocuda_device::thread::index_1d;
//!
//! /// `y[i] = a * x[i] + y[i]`.
//! ///
//! /// # Safety
//! /// `x` and `y` hold `n` elements.
//! #[kernel(T in [f32, f64])]
//! pub unsafe fn axpy<T: ferrocuda_device::element::Float>(a: T, x: *const T, y: *mut T, n: usize) {
//!     let i = index_1d();
//!     if i < n {
//!         unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
//!     }
//! }
//! ```
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        stdarch_nvptx,
        link_llvm_intrinsics,
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub use ferrocuda_macros::kernel;
pub use ferrocuda_macros::{printf, println};

pub mod config;
pub mod entry;
pub mod grid;
pub mod half;

pub mod atomic;
pub mod block;
#[cfg(any(
    not(target_arch = "nvptx64"),
    all(target_feature = "sm_90", target_feature = "ptx80")
))]
pub mod bulk;
pub mod cg;
pub mod clock;
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub mod cluster;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cpu;
pub mod element;
pub mod print;
pub mod shared;
pub mod sync;
pub mod thread;
pub mod vector;
pub mod warp;
pub mod wave;

/// A panic in a kernel (there are none in correct code: no bounds checks, no `unwrap`) traps:
/// the launch fails with `CUDA_ERROR_ILLEGAL_INSTRUCTION`. Defined here so that every kernel
/// crate gets it.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}
