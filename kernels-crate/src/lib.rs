//! # ferrocuda-kernels
//!
//! The GPU side of ferrocuda: a small device layer in the spirit of rust-cuda's `cuda_std`
//! (the `device` module) and the kernels written with it. The crate is `no_std` when built for
//! `nvptx64-nvidia-cuda` (by `cargo xtask build-ptx`); every module but [`config`] exists only
//! there. On the host it compiles as an ordinary library holding [`config`], so that the host
//! crate shares its constants and launch arithmetic.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        link_llvm_intrinsics,
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod config;

pub mod entry;

// The code `#[kernel]` generates names this crate by its path, as in a user's kernel crate.
extern crate self as ferrocuda_kernels;

#[cfg(target_arch = "nvptx64")]
pub mod device;

pub mod broken;

pub mod lab;

pub mod reduce;

pub mod stencil;

pub mod smoke;

pub mod timing;

pub mod selftest;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees `CUDA_ERROR_ILLEGAL_INSTRUCTION`.
    unsafe { core::arch::nvptx::trap() }
}
