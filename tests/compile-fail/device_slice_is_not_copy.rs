//! A device slice is reached only through a borrow of its buffer: it cannot be copied or moved
//! out of one, so nothing outlives the buffer (freed at the end of the statement) or aliases it.
use ferrocuda::Gpu;

fn stale(gpu: &Gpu) -> ferrocuda::Result<()> {
    let slice = *gpu.alloc::<f32>(16, "freed at once")?;
    let _ = slice.len();
    Ok(())
}

fn main() {}
