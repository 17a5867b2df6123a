//! A pipeline on two streams: the input goes up on one stream from page-locked memory, the
//! stencil and the sum run on another and wait (on the GPU) for that upload only, and the
//! output comes back into page-locked memory, while the host is free until it reads it.
//!
//! ```sh
//! cargo run --release --example pipeline -- [N]
//! ```
use ferrocuda::Gpu;
use ferrocuda::reduce::{ReduceOp, ReducePlan};
use ferrocuda::stencil::{self, Boundary, Taps};

#[allow(dead_code)] // The test suite includes this file for `pipeline` alone.
fn main() {
    let n = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 1 << 24,
        Some(Ok(n)) if n >= 7 => n,
        Some(_) => {
            eprintln!("error: N must be a count of at least 7");
            std::process::exit(2);
        }
    };
    let result = Gpu::new(0).and_then(|gpu| pipeline(&gpu, n));
    match result {
        Ok((first, total)) => println!("pipeline of {n} f32: output[0] = {first}, sum = {total}"),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}

/// Ones through a stencil of 7 ones (zero outside): `output[0]` is 4, and the sum of the
/// output is `7 n - 12` (each end loses 1 + 2 + 3). Returns both, as the GPU computed them.
pub fn pipeline(gpu: &Gpu, n: usize) -> ferrocuda::Result<(f32, f32)> {
    let (copy, compute) = (gpu.new_stream()?, gpu.new_stream()?);
    let host = gpu.pin(&vec![1.0f32; n])?;
    let mut back = gpu.alloc_pinned::<f32>(n)?;
    let mut input = gpu.alloc::<f32>(n, "input")?;
    let mut output = gpu.alloc::<f32>(n, "output")?;
    let mut total = gpu.alloc::<f32>(1, "total")?;
    let mut sum = ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?;
    let taps = Taps::Sum { radius: 3 };

    // Host to device on `copy`; returns at once.
    gpu.upload_async_on(&copy, &host, &mut input)?;
    // Reads `input`, written on `copy`: `compute` waits for that copy's event, on the GPU.
    stencil::apply_into_on(gpu, &compute, &input, &mut output, &taps, Boundary::Zero)?;
    // The same stream as the stencil: its order covers `output`.
    sum.run_to_device_on(&compute, &output, &mut total)?;
    // Device to host into page-locked memory; returns at once.
    gpu.download_async_on(&compute, &output, &mut back)?;

    // The host is free here. `back.as_slice()` waits for the download into it; `download` of
    // `total` makes the GPU's stream wait for `compute`'s sum, then copies it.
    let first = back.as_slice()?[0];
    let total = gpu.download(&total)?[0];
    Ok((first, total))
}
