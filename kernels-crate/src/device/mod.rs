//! The device layer: our `cuda_std`.
//!
//! Each module wraps one CUDA concept with the CUDA spelling in snake case
//! (`__syncthreads` -> [`sync::syncthreads`], `__shfl_down_sync` -> [`warp::shfl_down_sync`]).
//! Everything here is `#[inline(always)]`: a kernel compiles to the same PTX it would have had
//! with the intrinsic written inline.
pub mod atomic;
pub mod cg;
pub mod clock;
pub mod element;
pub mod shared;
pub mod sync;
pub mod thread;
pub mod vector;
pub mod warp;
