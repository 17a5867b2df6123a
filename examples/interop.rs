//! A buffer made outside ferrocuda, reduced by ferrocuda, and the result handed back. The other
//! library here is cust (a Rust binding of the driver API), standing for any that owns device
//! memory and a stream: cuBLAS, PyTorch (`tensor.data_ptr()`, `torch.cuda.current_stream()
//! .cuda_stream`), CuPy, cudarc. It makes the input, the result slot and the stream; ferrocuda
//! adopts the stream, borrows the two allocations as views, and sums on that stream, in order
//! with the other library's work there; the other library then reads its own result buffer.
//!
//! ```sh
//! cargo run --release --example interop -- [N]
//! ```
use cust::memory::{CopyDestination, DeviceBuffer as TheirBuffer};
use cust::stream::{Stream as TheirStream, StreamFlags};
use ferrocuda::reduce::{ReduceOp, ReducePlan};
use ferrocuda::{DevicePointer, Gpu, View, ViewMut};

#[allow(dead_code)] // The test suite includes this file for `interop` alone.
fn main() {
    let n = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 1 << 24,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("error: N must be a count");
            std::process::exit(2);
        }
    };
    match Gpu::new(0)
        .map_err(Into::into)
        .and_then(|gpu| interop(&gpu, n))
    {
        Ok(sum) => println!("the other library's {n} elements summed by ferrocuda: {sum}"),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}

/// The other library uploads `i % 7` for `i` below `n` into a buffer of its own, ferrocuda
/// sums it on the other library's stream into the other library's one-element buffer, and the
/// other library reads the result back. Returns it (`n / 7 * 21` plus the tail's).
pub fn interop(gpu: &Gpu, n: usize) -> Result<u64, Box<dyn std::error::Error>> {
    // The other library's: its stream, its input, its result slot, in the device's primary
    // context (the one the CUDA runtime, PyTorch and CuPy use), current on this thread for its
    // driver calls.
    gpu.make_current()?;
    let their_stream = TheirStream::new(StreamFlags::NON_BLOCKING, None)?;
    let values: Vec<u64> = (0..n as u64).map(|i| i % 7).collect();
    let their_input = TheirBuffer::from_slice(&values)?;
    let their_result = TheirBuffer::from_slice(&[u64::MAX])?;

    let sum = {
        // SAFETY: `their_stream` is a live stream of this device's primary context and outlives
        // `stream` (dropped at the end of this block, which waits for it).
        let stream = unsafe { gpu.adopt_stream(their_stream.as_inner().cast())? };
        // SAFETY: `n` elements of `their_input` and one of `their_result`, allocated for the
        // views' whole life (this block) and not used by anyone else meanwhile; the other
        // library's copies into them were synchronous, so nothing of theirs is in flight.
        let input = unsafe {
            View::from_raw_parts(
                DevicePointer::from_raw(their_input.as_device_ptr().as_raw()),
                n,
            )
        };
        let mut result = unsafe {
            ViewMut::from_raw_parts(
                DevicePointer::from_raw(their_result.as_device_ptr().as_raw()),
                1,
            )
        };
        let mut plan = ReducePlan::<u64>::new(gpu, ReduceOp::Sum)?;
        // Enqueued on their stream, after whatever they put there before; returns at once.
        plan.run_to_device_on(&stream, &input, &mut result)?;
        // Handed back: dropping `stream` waits for it and ferrocuda forgets it.
        drop(stream);
        // The other library reads its own buffer, after its own stream.
        their_stream.synchronize()?;
        let mut host = [0u64];
        their_result.copy_to(&mut host[..])?;
        host[0]
    };
    Ok(sum)
}
