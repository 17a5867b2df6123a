//! The CUDA runtime layer, in cudarc's order: errors, a launch configuration, the device with
//! its context, stream and modules, typed kernel launches. Nothing here knows a kernel
//! family; the families are built on it.
pub mod config;
pub mod driver;
pub mod element;
pub mod error;
pub(crate) mod event;
pub mod gpu;
pub mod kernel;
pub mod memory;
pub(crate) mod order;
pub mod stream;
pub mod wait;
pub(crate) mod workspace;
