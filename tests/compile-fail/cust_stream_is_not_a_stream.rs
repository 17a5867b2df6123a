//! The `_on` methods take ferrocuda's streams, from a `Gpu`: a cust stream (of any context, with
//! cust's callbacks) does not type-check.
use ferrocuda::Gpu;
use ferrocuda::reduce::{ReduceOp, ReducePlan};

fn sum_on(gpu: &Gpu, stream: &cust::stream::Stream) -> ferrocuda::Result<f32> {
    let x = gpu.upload(&[1.0f32; 64], "x")?;
    ReducePlan::<f32>::new(gpu, ReduceOp::Sum)?.run_on(stream, &x)
}

fn main() {}
