//! # ferrocuda
//!
//! GPU kernels written in pure Rust (the `ferrocuda-kernels` crate, compiled to PTX by
//! `cargo xtask build-ptx`), launched from Rust with `cust`, checked against the CPU and
//! measured against the memory speed limit.
//!
//! - [`gpu::Gpu`] opens a device and loads the newest embedded PTX it supports;
//! - [`launch`] validates and launches kernels, with errors naming kernel and configuration;
//! - [`timing`] times work with events and measures the copy-bandwidth ceiling;
//! - [`cpu`] holds the CPU references every GPU result is checked against.
pub mod args;
pub mod bench;
pub mod chart;
pub mod cpu;
pub mod element;
pub mod error;
pub mod gpu;
pub mod lab;
pub mod launch;
pub mod occupancy;
pub mod reduce;
pub mod sanitize;
pub mod smoke;
pub mod stencil;
pub mod timing;
pub mod toolkit;

pub use error::{Error, Result};
pub use gpu::{DeviceProps, Gpu};
pub use launch::{Kernel, LaunchConfig};

/// Every kernel symbol the library launches (the PTX test checks each is an entry point of
/// every embedded PTX).
pub fn library_symbols() -> Vec<String> {
    let mut v = vec![smoke::SYMBOL.to_string(), timing::SPIN_SYMBOL.to_string()];
    v.push(lab::WARP_DEMO_SYMBOL.to_string());
    v.extend(lab::DIVERGENCE_KERNELS.iter().map(|(k, _)| k.to_string()));
    v.extend(reduce::symbols());
    v.extend(stencil::symbols());
    v
}
