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
use crate::runtime::memory::DeviceBuffer;
use crate::stencil::{self, Boundary, Taps};

use super::shard::Shards;
use super::sharded::ShardedArray;

/// One rank's extended shard: `R` halo cells, the shard, `R` halo cells; two of them for
/// ping-pong.
struct Extended<T: Element> {
    len: usize,
    buffers: [DeviceBuffer<T>; 2],
}

/// `taps` applied `steps` times to the whole of `array`, with `boundary` at its ends, computed
/// shard by shard with halo exchanges; a new array cut as `array` is. Every non-empty shard
/// must hold at least `R` elements (a halo comes from one neighbour); otherwise the error says
/// which shard is too short. Zero steps copy the array.
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
    if let Some(&short) = holders.iter().find(|&&k| shards.len(k) < r) {
        return Err(Error::InvalidArgument {
            what: format!(
                "sharded stencil of radius {r}: rank {short} holds {} elements, fewer than the \
                 radius, so its neighbours' halos would span more than one shard; cut the {} \
                 elements over fewer ranks",
                shards.len(short),
                shards.n()
            ),
        });
    }
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
    let last = steps % 2;
    let mut parts = Vec::with_capacity(shards.ranks());
    let mut held = ext.iter();
    for k in 0..shards.ranks() {
        // SAFETY: `T` is an `Element`, valid for every byte pattern; the copy below writes
        // every element before the array is handed out.
        let mut part = unsafe { gpu.alloc_uninit::<T>(shards.len(k), "sharded stencil: output")? };
        if shards.len(k) > 0 {
            let e = held.next().expect("one extended shard per non-empty rank");
            gpu.copy_on_device(&e.buffers[last].index(r..r + e.len), &mut part)?;
        }
        parts.push(part);
    }
    gpu.synchronize()?;
    ShardedArray::from_parts(gpu, Shards::clone(shards), parts)
}

/// Rank `k`'s shard between two halos of `r` cells (filled before each step).
fn extend<T: Element>(
    gpu: &Gpu,
    array: &ShardedArray<T>,
    k: usize,
    r: usize,
) -> Result<Extended<T>> {
    let len = array.shards().len(k);
    let mut buffers = [
        gpu.alloc::<T>(len + 2 * r, "sharded stencil: extended shard")?,
        gpu.alloc::<T>(len + 2 * r, "sharded stencil: extended shard")?,
    ];
    gpu.copy_on_device(array.part(k), &mut buffers[0].index_mut(r..r + len))?;
    Ok(Extended { len, buffers })
}

/// Fills the halos of every extended shard's buffer `cur`: from the neighbouring shard's cells
/// inside the array, by `boundary` at its ends (zeros, the end element repeated, or the other
/// end of the array).
fn fill_halos<T: Element>(
    gpu: &Gpu,
    ext: &mut [Extended<T>],
    r: usize,
    boundary: Boundary,
    cur: usize,
) -> Result<()> {
    if r == 0 {
        return Ok(());
    }
    let count = ext.len();
    for i in 0..count {
        let (left, right) = (
            (i > 0)
                .then(|| i - 1)
                .or((boundary == Boundary::Periodic).then(|| count - 1)),
            (i + 1 < count)
                .then(|| i + 1)
                .or((boundary == Boundary::Periodic).then_some(0)),
        );
        // Left halo: the last `r` cells of the shard before.
        match left {
            Some(j) => {
                let src_len = ext[j].len;
                let src = copy_out(gpu, &ext[j].buffers[cur], src_len, r)?;
                gpu.copy_on_device(&src, &mut ext[i].buffers[cur].index_mut(0..r))?;
            }
            None => end_halo(gpu, &mut ext[i].buffers[cur], 0..r, r, boundary)?,
        }
        // Right halo: the first `r` cells of the shard after.
        let len = ext[i].len;
        match right {
            Some(j) => {
                let src = copy_out(gpu, &ext[j].buffers[cur], r, r)?;
                gpu.copy_on_device(
                    &src,
                    &mut ext[i].buffers[cur].index_mut(r + len..r + len + r),
                )?;
            }
            None => end_halo(
                gpu,
                &mut ext[i].buffers[cur],
                r + len..r + len + r,
                r + len - 1,
                boundary,
            )?,
        }
    }
    Ok(())
}

/// `count` cells of `buffer` from `start`, into a new buffer (so that a shard may be its own
/// neighbour, as the only shard of a periodic array is).
fn copy_out<T: Element>(
    gpu: &Gpu,
    buffer: &DeviceBuffer<T>,
    start: usize,
    count: usize,
) -> Result<DeviceBuffer<T>> {
    // SAFETY: `T` is an `Element`; the copy writes every element before it is read.
    let mut out = unsafe { gpu.alloc_uninit::<T>(count, "sharded stencil: halo")? };
    gpu.copy_on_device(&buffer.index(start..start + count), &mut out)?;
    Ok(out)
}

/// A halo at an end of the whole array: zeros, or `edge` (the end cell) repeated.
fn end_halo<T: Element>(
    gpu: &Gpu,
    buffer: &mut DeviceBuffer<T>,
    halo: std::ops::Range<usize>,
    edge: usize,
    boundary: Boundary,
) -> Result<()> {
    match boundary {
        Boundary::Zero => gpu.memset_d8_async(&mut buffer.index_mut(halo), 0),
        Boundary::Clamp => {
            let cell = copy_out(gpu, buffer, edge, 1)?;
            for at in halo {
                gpu.copy_on_device(&cell, &mut buffer.index_mut(at..at + 1))?;
            }
            Ok(())
        }
        Boundary::Periodic => unreachable!("a periodic array has a neighbour at both ends"),
    }
}
