//! The CUDA runtime layer, in cudarc's order: errors, a launch configuration, the device with
//! its context, stream and modules, typed kernel launches. Nothing here knows a kernel
//! family; the families are built on it.
pub mod config;
pub(crate) mod current;
pub mod driver;
pub mod element;
pub mod error;
pub mod event;
pub mod gpu;
pub(crate) mod graph;
pub mod kernel;
pub mod memory;
pub mod pinned;
pub mod pointer;
pub mod stream;
pub mod track;
pub mod wait;
pub(crate) mod workspace;
