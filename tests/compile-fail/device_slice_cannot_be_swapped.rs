//! A device slice is unsized, as `[T]` is: swapping two of them behind `&mut` (which would
//! swap the addresses two buffers free, or give a buffer a view's address) does not compile.
use ferrocuda::Gpu;

fn swap(gpu: &Gpu) -> ferrocuda::Result<()> {
    let mut a = gpu.alloc::<f32>(100, "a")?;
    let mut b = gpu.alloc::<f32>(100, "b")?;
    let mut part = a.index_mut(10..20);
    std::mem::swap(&mut *part, &mut *b);
    Ok(())
}

fn main() {}
