//! The 1D stencil over a sharded array, iterated: each rank keeps its shard between `R` halo
//! cells on each side, fills them from its neighbours' shards (or by the boundary rule at the
//! array's ends) before every step, and applies the one-GPU stencil to its extended shard. The
//! result is the one-GPU stencil applied `steps` times to the whole array, bit for bit: every
//! output reads the same `2R + 1` inputs in the same order.
//!
//! With a rank per GPU the halo fill is the exchange NVIDIA's multi-GPU Jacobi makes with
//! `ncclSend`/`ncclRecv`; on virtual ranks it is a device copy.

use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::memory::{DeviceBuffer, DeviceSlice, ViewMut};
use crate::stencil::{self, Boundary, Taps};

use super::sharded::ShardedArray;

/// One rank's extended shard: `R` halo cells, the shard, `R` halo cells; two of them for
/// ping-pong.
struct Extended<T: Element> {
    len: usize,
    buffers: [DeviceBuffer<T>; 2],
}

/// `taps` applied `steps` times to the whole of `array`, with `boundary` at its ends, computed
/// shard by shard with halo exchanges; a new array cut as `array` is. With two or more
/// non-empty shards, each must hold at least `R` elements (a halo comes from one neighbour);
/// otherwise the error names the shorter rank. An array held by one rank is the one-GPU stencil
/// itself, any length. Zero steps copy the array.
pub fn apply_sharded<T: Element>(
    array: &ShardedArray<T>,
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> Result<ShardedArray<T>> {
    if let Some(e) = taps.error() {
        return Err(Error::InvalidArgument { what: e });
    }
    let gpu = array.gpu();
    let shards = array.shards();
    let r = taps.radius() as usize;
    let holders: Vec<usize> = (0..shards.ranks()).filter(|&k| shards.len(k) > 0).collect();
    if holders.len() > 1
        && steps > 0
        && let Some(&short) = holders.iter().find(|&&k| shards.len(k) < r)
    {
        return Err(Error::InvalidArgument {
            what: format!(
                "sharded stencil of radius {r}: rank {short} holds {} elements, fewer than the \
                 radius, so a neighbour's halo would span more than one shard; cut the {} \
                 elements over fewer ranks",
                shards.len(short),
                shards.n()
            ),
        });
    }
    // Every rank's result, written below before the array is handed out.
    let mut parts = (0..shards.ranks())
        // SAFETY: `T` is an `Element`, valid for every byte pattern; each part is written by a
        // copy below (empty parts need none).
        .map(|k| unsafe { gpu.alloc_uninit::<T>(shards.len(k), "sharded stencil: output") })
        .collect::<Result<Vec<_>>>()?;
    if holders.len() == 1 || steps == 0 {
        // One holder has the whole array: its boundary is the array's, the one-GPU stencil's.
        for &k in &holders {
            let last = whole_steps(gpu, array.part(k), taps, boundary, steps)?;
            gpu.copy_on_device(&last, &mut parts[k])?;
        }
    } else {
        let mut ext = holders
            .iter()
            .map(|&k| extend(gpu, array, k, r))
            .collect::<Result<Vec<_>>>()?;
        for step in 0..steps {
            let cur = step % 2;
            fill_halos(gpu, &mut ext, r, boundary, cur)?;
            for e in &mut ext {
                let [a, b] = &mut e.buffers;
                let (input, output) = if cur == 0 { (&*a, b) } else { (&*b, a) };
                stencil::apply_into(gpu, input, output, taps, boundary)?;
            }
        }
        for (e, &k) in ext.iter().zip(&holders) {
            gpu.copy_on_device(&e.buffers[steps % 2].index(r..r + e.len), &mut parts[k])?;
        }
    }
    gpu.synchronize()?;
    Ok(ShardedArray::from_parts(gpu, shards.clone(), parts))
}

/// The one-GPU stencil applied `steps` times to `input` (ping-pong), the last result returned.
fn whole_steps<T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> Result<DeviceBuffer<T>> {
    // SAFETY (both): `T` is an `Element`; `a` is written by the copy, `b` by the kernel before
    // either is read.
    let mut a = unsafe { gpu.alloc_uninit::<T>(input.len(), "sharded stencil: steps")? };
    gpu.copy_on_device(input, &mut a)?;
    let mut b = unsafe { gpu.alloc_uninit::<T>(input.len(), "sharded stencil: steps")? };
    for _ in 0..steps {
        stencil::apply_into(gpu, &a, &mut b, taps, boundary)?;
        std::mem::swap(&mut a, &mut b);
    }
    Ok(a)
}

/// Rank `k`'s shard between two halos of `r` cells (filled before each step).
fn extend<T: Element>(
    gpu: &Gpu,
    array: &ShardedArray<T>,
    k: usize,
    r: usize,
) -> Result<Extended<T>> {
    let len = array.shards().len(k);
    // SAFETY: `T` is an `Element`. Every cell is written before it is read: the middle by the
    // copy below (buffer 0) or a step's kernel, the halos before every step.
    let mut buffers = unsafe {
        [
            gpu.alloc_uninit::<T>(len + 2 * r, "sharded stencil: extended shard")?,
            gpu.alloc_uninit::<T>(len + 2 * r, "sharded stencil: extended shard")?,
        ]
    };
    gpu.copy_on_device(array.part(k), &mut buffers[0].index_mut(r..r + len))?;
    Ok(Extended { len, buffers })
}

/// Fills the halos of every extended shard's buffer `cur` (two or more shards, each of at least
/// `r` cells): from the neighbouring shards' cells, copied straight into the halo, or by
/// `boundary` at the array's ends (zeros, or the end cell repeated; periodic arrays have a
/// neighbour at both ends).
fn fill_halos<T: Element>(
    gpu: &Gpu,
    ext: &mut [Extended<T>],
    r: usize,
    boundary: Boundary,
    cur: usize,
) -> Result<()> {
    let count = ext.len();
    let periodic = boundary == Boundary::Periodic;
    for i in 0..count {
        let left = if i > 0 {
            Some(i - 1)
        } else {
            periodic.then(|| count - 1)
        };
        let right = if i + 1 < count {
            Some(i + 1)
        } else {
            periodic.then_some(0)
        };
        // Left halo: the last `r` cells of the shard before.
        match left {
            Some(j) => {
                let (src, dst) = pair(ext, j, i);
                let from = src.buffers[cur].index(src.len..src.len + r);
                gpu.copy_on_device(&from, &mut dst.buffers[cur].index_mut(0..r))?;
            }
            None => {
                let (halo, rest) = ext[i].buffers[cur].split_at_mut(r);
                end_halo(gpu, halo, &rest.index(0..1), boundary)?;
            }
        }
        // Right halo: the first `r` cells of the shard after.
        let len = ext[i].len;
        match right {
            Some(j) => {
                let (src, dst) = pair(ext, j, i);
                let from = src.buffers[cur].index(r..2 * r);
                gpu.copy_on_device(&from, &mut dst.buffers[cur].index_mut(r + len..r + len + r))?;
            }
            None => {
                let (rest, halo) = ext[i].buffers[cur].split_at_mut(r + len);
                end_halo(gpu, halo, &rest.index(r + len - 1..r + len), boundary)?;
            }
        }
    }
    Ok(())
}

/// `ext[src]` shared and `ext[dst]` mutable (`src != dst`: two or more shards).
fn pair<T: Element>(
    ext: &mut [Extended<T>],
    src: usize,
    dst: usize,
) -> (&Extended<T>, &mut Extended<T>) {
    if src < dst {
        let (a, b) = ext.split_at_mut(dst);
        (&a[src], &mut b[0])
    } else {
        let (a, b) = ext.split_at_mut(src);
        (&b[0], &mut a[dst])
    }
}

/// A halo at an end of the whole array: zeros, or `edge` (the end cell) in every cell.
fn end_halo<T: Element>(
    gpu: &Gpu,
    mut halo: ViewMut<'_, T>,
    edge: &DeviceSlice<T>,
    boundary: Boundary,
) -> Result<()> {
    match boundary {
        Boundary::Zero => gpu.memset_d8_async(&mut halo, 0),
        Boundary::Clamp | Boundary::Periodic => {
            for at in 0..halo.len() {
                gpu.copy_on_device(edge, &mut halo.index_mut(at..at + 1))?;
            }
            Ok(())
        }
    }
}
