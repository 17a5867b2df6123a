//! An array cut into one shard per rank, and its reductions.
//!
//! The ranks here are **virtual**: every shard lives on the one [`Gpu`] the array was made on,
//! in its own buffer, and what a collective would move between GPUs is a device copy (or, for a
//! partial of one value, a read on the host). It is the transport the decomposition is tested
//! with on one GPU, since NCCL refuses two ranks on one device; the arithmetic (where a shard
//! starts, which chunk sums go where, in which order the partials are combined) is the one a
//! rank per GPU uses.

use crate::reduce::{self, Reproducible};
use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::memory::{DeviceBuffer, DeviceSlice};

use super::shard::Shards;

/// One device buffer per rank, holding that rank's shard of a 1D array.
pub struct ShardedArray<T: Element> {
    gpu: Gpu,
    shards: Shards,
    parts: Vec<DeviceBuffer<T>>,
}

impl<T: Element> ShardedArray<T> {
    /// Copies `data` to the device, cut as `shards` says (`shards.n()` must be `data.len()`).
    pub fn scatter(gpu: &Gpu, data: &[T], shards: Shards) -> Result<Self> {
        if shards.n() != data.len() {
            return Err(Error::InvalidArgument {
                what: format!(
                    "scatter: the shards cover {} elements, but the data has {}",
                    shards.n(),
                    data.len()
                ),
            });
        }
        let parts = (0..shards.ranks())
            .map(|r| gpu.upload(&data[shards.range(r)], "sharded array: one rank's shard"))
            .collect::<Result<_>>()?;
        Ok(Self::from_parts(gpu, shards, parts))
    }

    /// An array made of buffers already on the device, rank `r` holding `parts[r]`, in order.
    pub fn from_buffers(gpu: &Gpu, parts: Vec<DeviceBuffer<T>>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::InvalidArgument {
                what: "sharded array: at least one rank's buffer is needed, got none".into(),
            });
        }
        let mut bounds = vec![0];
        for (r, part) in parts.iter().enumerate() {
            gpu.check_owned(part).map_err(|e| Error::InvalidArgument {
                what: format!("sharded array: rank {r}'s buffer: {e}"),
            })?;
            bounds.push(bounds.last().unwrap() + part.len());
        }
        Ok(Self::from_parts(gpu, Shards::from_bounds(bounds), parts))
    }

    /// An array of `parts` cut as `shards` (the lengths agree: the caller made them so).
    pub(crate) fn from_parts(gpu: &Gpu, shards: Shards, parts: Vec<DeviceBuffer<T>>) -> Self {
        debug_assert!((0..shards.ranks()).all(|r| parts[r].len() == shards.len(r)));
        Self {
            gpu: gpu.clone(),
            shards,
            parts,
        }
    }

    /// The GPU the shards live on.
    pub(crate) fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// How the array is cut.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// Rank `r`'s shard.
    ///
    /// # Panics
    /// When `r` is not below the number of ranks.
    pub fn part(&self, r: usize) -> &DeviceSlice<T> {
        &self.parts[r]
    }

    /// The whole array on the host, the shards in rank order.
    pub fn gather(&self) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.shards.n());
        for part in &self.parts {
            out.extend(self.gpu.download(part)?);
        }
        Ok(out)
    }

    /// The sum: each rank's fast sum, then the partials added in rank order (integers wrap; a
    /// float sum depends on the number of ranks, as an NCCL all-reduce does: see
    /// [`sum_reproducible`] for one that does not).
    pub fn sum(&self) -> Result<T> {
        let mut total = T::default();
        for part in self.parts.iter().filter(|p| !p.is_empty()) {
            total = total.add(reduce::sum(&self.gpu, part)?);
        }
        Ok(total)
    }

    /// The minimum over every shard; an error when the array is empty.
    pub fn min(&self) -> Result<T> {
        self.extreme("min", reduce::min, T::min_of)
    }

    /// The maximum over every shard; an error when the array is empty.
    pub fn max(&self) -> Result<T> {
        self.extreme("max", reduce::max, T::max_of)
    }

    fn extreme(
        &self,
        what: &str,
        reduce: fn(&Gpu, &DeviceSlice<T>) -> Result<T>,
        combine: fn(T, T) -> T,
    ) -> Result<T> {
        let mut partials = self.parts.iter().filter(|p| !p.is_empty());
        let Some(first) = partials.next() else {
            return Err(Error::InvalidArgument {
                what: format!("{what} of an empty sharded array is undefined"),
            });
        };
        let mut acc = reduce(&self.gpu, first)?;
        for part in partials {
            acc = combine(acc, reduce(&self.gpu, part)?);
        }
        Ok(acc)
    }
}

/// The reproducible sum of a sharded array: the bits of
/// [`reduce::sum_reproducible`] of the whole array on one GPU, and of the CPU order, for any
/// number of ranks. Each rank sums its chunks ([`reduce::chunk_sums_to_device`]) into its place
/// in one buffer of every chunk sum (with a rank per GPU, an all-gather); the order's remaining
/// levels finish on that buffer. The shards must start on chunk boundaries
/// ([`Shards::aligned`] with [`reduce::reproducible_chunk`]); otherwise the error says so.
pub fn sum_reproducible<T: Reproducible>(array: &ShardedArray<T>) -> Result<T> {
    let chunk = reduce::reproducible_chunk::<T>();
    let shards = array.shards();
    let misaligned =
        (0..shards.ranks()).find(|&r| shards.range(r).start % chunk != 0 && shards.len(r) > 0);
    if let Some(r) = misaligned {
        return Err(Error::InvalidArgument {
            what: format!(
                "reproducible sum of a sharded array: rank {r}'s shard starts at element {}, not \
                 on a chunk boundary (a multiple of {chunk}); cut it with Shards::aligned(n, \
                 ranks, reduce::reproducible_chunk::<{}>())",
                shards.range(r).start,
                T::TYPE
            ),
        });
    }
    let gpu = &array.gpu;
    let chunks = shards.n().div_ceil(chunk);
    if chunks == 0 {
        return Ok(T::default());
    }
    // SAFETY: `T` is an `Element`, valid for every byte pattern; every chunk sum is written
    // below (each rank writes its chunks' range) before the buffer is read.
    let mut all = unsafe { gpu.alloc_uninit::<T>(chunks, "sharded reproducible sum: chunk sums")? };
    // Poisoned first (a NaN): a chunk sum no rank wrote cannot pass for one.
    gpu.poison_async(&mut all)?;
    for r in 0..shards.ranks() {
        let range = shards.range(r);
        if range.is_empty() {
            continue;
        }
        let first = range.start / chunk;
        let mut place = all.index_mut(first..first + range.len().div_ceil(chunk));
        reduce::chunk_sums_to_device(gpu, array.part(r), &mut place)?;
    }
    if chunks == 1 {
        // One chunk: its sum is the whole order's last level, as on one GPU.
        return Ok(gpu.download(&all)?[0]);
    }
    reduce::sum_reproducible(gpu, &all)
}
