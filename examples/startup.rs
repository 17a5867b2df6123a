//! What opening a GPU costs a program: the kernels in the library's module and the time of
//! `Gpu::new` (driver start, context, loading the module: the driver compiles its PTX for the
//! device unless its compute cache holds the result). Run with `CUDA_CACHE_DISABLE=1` to see
//! the compilation every time.
//!
//! `cargo run --release --example startup`
use std::time::{Duration, Instant};

fn open() -> Duration {
    let start = Instant::now();
    match ferrocuda::Gpu::new(0) {
        Ok(gpu) => {
            let took = start.elapsed();
            drop(gpu);
            took
        }
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}

fn main() {
    let entry_points = ferrocuda::runtime::kernel::entry_points().len();
    let first = open();
    // Each later `Gpu::new` makes the context and loads the module again (the last `Gpu`
    // released the device's primary context); the driver is already started.
    let mut again: Vec<Duration> = (0..7).map(|_| open()).collect();
    again.sort();
    println!(
        "library entry points: {entry_points}; first Gpu::new: {:.1} ms; again (median of 7): {:.1} ms",
        first.as_secs_f64() * 1e3,
        again[3].as_secs_f64() * 1e3
    );
}
