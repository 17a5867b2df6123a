//! An array cut into one shard per rank of a [`Team`], and its reductions.
//!
//! Each process holds the shards of the ranks it drives ([`Team::local_ranks`]): all of them
//! on virtual ranks or with one process for several GPUs, one with a process per GPU. What a
//! reduction must bring together travels through the team's transport: one value per rank for
//! `sum`/`min`/`max`, the chunk sums for the reproducible sum, combined in rank order on every
//! rank, so every rank returns the same bits.

use crate::reduce::{self, ReduceOp, Reproducible};
use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::memory::{DeviceBuffer, DeviceSlice};

use super::shard::Shards;
use super::team::{Shape, Team};

/// The shards of a 1D array that this process's ranks hold, one device buffer each, on that
/// rank's GPU.
pub struct ShardedArray<'t, T: Element> {
    team: &'t Team,
    shards: Shards,
    /// One per local rank, in the team's member order.
    parts: Vec<DeviceBuffer<T>>,
}

impl<'t, T: Element> ShardedArray<'t, T> {
    /// Copies this process's shards of `data` (the whole array, the same on every process) to
    /// their ranks' GPUs, cut as `shards` says (`shards.n()` must be `data.len()`, and
    /// `shards.ranks()` the team's size).
    pub fn scatter(team: &'t Team, data: &[T], shards: Shards) -> Result<Self> {
        if shards.n() != data.len() || shards.ranks() != team.size() {
            return Err(Error::InvalidArgument {
                what: format!(
                    "scatter: the shards cut {} elements over {} ranks, but the data has {} and \
                     the team {} ranks",
                    shards.n(),
                    shards.ranks(),
                    data.len(),
                    team.size()
                ),
            });
        }
        let parts = team
            .members()
            .iter()
            .map(|m| {
                m.gpu.upload(
                    &data[shards.range(m.rank)],
                    "sharded array: one rank's shard",
                )
            })
            .collect::<Result<_>>()?;
        Ok(Self::from_parts(team, shards, parts))
    }

    /// An array made of buffers already on the devices: `parts[i]` is the shard of the team's
    /// `i`-th local rank, on that rank's GPU. The shards' lengths are shared between the ranks
    /// (with several processes, through the transport), so every process knows the whole cut.
    pub fn from_buffers(team: &'t Team, parts: Vec<DeviceBuffer<T>>) -> Result<Self> {
        let members = team.members();
        if parts.len() != members.len() {
            return Err(Error::LengthMismatch {
                expected: members.len(),
                found: parts.len(),
                what: format!(
                    "sharded array: {} buffers given for the {} ranks this process drives",
                    parts.len(),
                    members.len()
                ),
            });
        }
        for (m, part) in members.iter().zip(&parts) {
            m.gpu
                .check_owned(part)
                .map_err(|e| Error::InvalidArgument {
                    what: format!("sharded array: rank {}'s buffer: {e}", m.rank),
                })?;
            // The team's work starts from each GPU's own stream (`Team::enter`): it waits there
            // for the streams that wrote the shard.
            m.gpu
                .uses_on(m.gpu.stream(), &[crate::runtime::track::Access::read(part)])?;
        }
        let lens: Vec<Option<u64>> = {
            let _serial = team.serial();
            all_values(team, |i| Ok(Some(parts[i].len() as u64)))?
        };
        let mut bounds = vec![0usize];
        for (r, len) in lens.into_iter().enumerate() {
            let end = usize::try_from(len.unwrap_or(0))
                .ok()
                .and_then(|len| bounds[r].checked_add(len))
                .ok_or_else(|| Error::InvalidArgument {
                    what: format!("sharded array: the shards' lengths overflow at rank {r}"),
                })?;
            bounds.push(end);
        }
        Ok(Self::from_parts(team, Shards::from_bounds(bounds), parts))
    }

    /// An array of `parts` cut as `shards` (the lengths agree: the caller made them so).
    pub(crate) fn from_parts(team: &'t Team, shards: Shards, parts: Vec<DeviceBuffer<T>>) -> Self {
        debug_assert!(
            team.members()
                .iter()
                .zip(&parts)
                .all(|(m, p)| p.len() == shards.len(m.rank))
        );
        Self {
            team,
            shards,
            parts,
        }
    }

    /// The team the array is spread over.
    pub fn team(&self) -> &'t Team {
        self.team
    }

    /// How the array is cut.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// Rank `r`'s shard, if this process drives rank `r`.
    pub fn part(&self, r: usize) -> Option<&DeviceSlice<T>> {
        let i = self.team.members().iter().position(|m| m.rank == r)?;
        Some(&self.parts[i])
    }

    /// The local shards, in the team's member order.
    pub(crate) fn parts(&self) -> &[DeviceBuffer<T>] {
        &self.parts
    }

    /// The whole array on the host, the shards in rank order (with several processes, every
    /// process gets all of it).
    pub fn gather(&self) -> Result<Vec<T>> {
        let _serial = self.team.serial();
        let n = self.shards.n();
        let mut gathered = Vec::new();
        let local = (|| {
            if n > 0 {
                gathered = gathered_buffers::<T>(self.team, n, "sharded array: gathered")?;
                for (i, (m, part)) in self.team.members().iter().zip(&self.parts).enumerate() {
                    let range = self.shards.range(m.rank);
                    let place = &mut gathered[self.team.gathered_of(i)];
                    m.gpu.copy_on_device(part, &mut place.index_mut(range))?;
                }
            }
            Ok(())
        })();
        self.team.agree(&self.shape("gather", 0), local)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        self.team.share(
            &mut gathered,
            self.shards.bounds(),
            "gather (ncclBroadcast)",
        )?;
        self.team.members()[0].gpu.download(&gathered[0])
    }

    /// The shape of collective `op` over this array, for [`Team::agree`].
    pub(crate) fn shape<'a>(&'a self, op: &'a str, extra: u64) -> Shape<'a> {
        Shape {
            op,
            ty: T::TYPE,
            bounds: self.shards.bounds(),
            extra,
        }
    }

    /// The sum: each rank's fast sum, then the partials added in rank order on every rank
    /// (integers wrap; a float sum depends on the number of ranks: see [`sum_reproducible`]
    /// for one that does not).
    pub fn sum(&self) -> Result<T> {
        let partials = self.partials(ReduceOp::Sum)?;
        Ok(partials.into_iter().flatten().fold(T::default(), T::add))
    }

    /// The minimum over every shard; an error when the array is empty.
    pub fn min(&self) -> Result<T> {
        self.extreme("min", ReduceOp::Min, T::min_of)
    }

    /// The maximum over every shard; an error when the array is empty.
    pub fn max(&self) -> Result<T> {
        self.extreme("max", ReduceOp::Max, T::max_of)
    }

    /// Every rank's `op` of its shard (`None` for an empty shard), in rank order; on several
    /// GPUs, the local ranks' reductions all launched before any is waited for
    /// ([`reduce::cached_many`]; virtual ranks, on one GPU, in turn).
    fn partials(&self, op: ReduceOp) -> Result<Vec<Option<T>>> {
        let _serial = self.team.serial();
        let members = self.team.members();
        let inputs: Vec<(&Gpu, &DeviceSlice<T>)> = members
            .iter()
            .zip(&self.parts)
            .filter(|(_, part)| !part.is_empty())
            .map(|(m, part)| (&m.gpu, &**part))
            .collect();
        let mut reduced = vec![T::default(); inputs.len()];
        let local = reduce::cached_many::<T, T>(op, &inputs, &mut reduced);
        let name = format!("sharded array's {op:?} (each rank's, then every rank's)");
        self.team.agree(&self.shape(&name, 0), local)?;
        let mut values = reduced.into_iter();
        all_values(self.team, |i| {
            Ok((!self.parts[i].is_empty())
                .then(|| values.next().expect("a value per non-empty shard")))
        })
    }

    fn extreme(&self, what: &str, op: ReduceOp, combine: fn(T, T) -> T) -> Result<T> {
        self.partials(op)?
            .into_iter()
            .flatten()
            .reduce(combine)
            .ok_or_else(|| Error::InvalidArgument {
                what: format!("{what} of an empty sharded array is undefined"),
            })
    }
}

/// Gathered buffers of `n` elements, one per [`Team::gathered_of`] (on that member's GPU).
fn gathered_buffers<T: Element>(team: &Team, n: usize, what: &str) -> Result<Vec<DeviceBuffer<T>>> {
    (0..team.gathered_count())
        // SAFETY: `T` is an `Element`, valid for every byte pattern; the callers write every
        // element (each rank its piece, the transport the others) before reading.
        .map(|i| unsafe { team.members()[i].gpu.alloc_uninit::<T>(n, what) })
        .collect()
}

/// One value per rank, in rank order, on every process: `local(i)` of each local member `i`
/// (`None` for a rank with nothing to give), the others through the transport.
fn all_values<T: Element>(
    team: &Team,
    mut local: impl FnMut(usize) -> Result<Option<T>>,
) -> Result<Vec<Option<T>>> {
    let size = team.size();
    let mut values = vec![None; size];
    for (i, m) in team.members().iter().enumerate() {
        values[m.rank] = local(i)?;
    }
    if team.members().len() == size {
        return Ok(values);
    }
    // Each rank's value and whether it has one, as two elements of `T` (a flag of 0 or 1).
    let mut gathered = gathered_buffers::<T>(team, 2 * size, "partials of every rank")?;
    for (i, m) in team.members().iter().enumerate() {
        let v = values[m.rank];
        let pair = [
            v.unwrap_or_default(),
            T::from_f64(f64::from(u8::from(v.is_some()))),
        ];
        let place = &mut gathered[team.gathered_of(i)];
        m.gpu
            .upload_into(&mut place.index_mut(2 * m.rank..2 * m.rank + 2), &pair)?;
    }
    let bounds: Vec<usize> = (0..=size).map(|r| 2 * r).collect();
    team.share(
        &mut gathered,
        &bounds,
        "partials of every rank (ncclBroadcast)",
    )?;
    let host = team.members()[0].gpu.download(&gathered[0])?;
    Ok((0..size)
        .map(|r| (host[2 * r + 1].to_f64() != 0.0).then_some(host[2 * r]))
        .collect())
}

/// The reproducible sum of a sharded array: the bits of [`reduce::sum_reproducible`] of the
/// whole array on one GPU, and of the CPU order, for any number of ranks and on every rank.
/// Each rank sums its chunks ([`reduce::chunk_sums_to_device`]) into its place in a buffer of
/// every chunk sum; the transport fills in the other ranks' places (an all-gather of unequal
/// pieces: one `ncclBroadcast` per rank, in one group); the order's remaining levels finish on
/// that buffer, the same on every rank. The shards must start on chunk boundaries
/// ([`Shards::aligned`] with [`reduce::reproducible_chunk`]); otherwise the error says so.
pub fn sum_reproducible<T: Reproducible>(array: &ShardedArray<'_, T>) -> Result<T> {
    let chunk = reduce::reproducible_chunk::<T>();
    let shards = array.shards();
    let misaligned = (0..shards.ranks())
        .find(|&r| !shards.range(r).start.is_multiple_of(chunk) && shards.len(r) > 0);
    let local = match misaligned {
        Some(r) => Err(Error::InvalidArgument {
            what: format!(
                "reproducible sum of a sharded array: rank {r}'s shard starts at element {}, not \
                 on a chunk boundary (a multiple of {chunk}); cut it with Shards::aligned(n, \
                 ranks, reduce::reproducible_chunk::<{}>())",
                shards.range(r).start,
                T::TYPE
            ),
        }),
        None => Ok(()),
    };
    let team = array.team();
    let _serial = team.serial();
    team.agree(&array.shape("reproducible sum", 0), local)?;
    let chunks = shards.n().div_ceil(chunk);
    if chunks == 0 {
        return Ok(T::default());
    }
    let mut all = gathered_buffers::<T>(team, chunks, "sharded reproducible sum: chunk sums")?;
    for (k, buf) in all.iter_mut().enumerate() {
        // Poisoned first (a NaN): a chunk sum no rank wrote cannot pass for one.
        team.members()[k].gpu.poison_async(buf)?;
    }
    for (i, (m, part)) in team.members().iter().zip(array.parts()).enumerate() {
        let range = shards.range(m.rank);
        if range.is_empty() {
            continue;
        }
        let first = range.start / chunk;
        let place = &mut all[team.gathered_of(i)];
        let mut place = place.index_mut(first..first + range.len().div_ceil(chunk));
        reduce::chunk_sums_to_device(&m.gpu, part, &mut place)?;
    }
    // Rank r's chunk sums start at its shard's start over the chunk, rounded up: exact for a
    // non-empty shard (it starts on a chunk), and the next holder's start for an empty one.
    let bounds: Vec<usize> = shards.bounds().iter().map(|b| b.div_ceil(chunk)).collect();
    team.share(
        &mut all,
        &bounds,
        "reproducible sum: chunk sums (ncclBroadcast)",
    )?;
    let gpu = &team.members()[0].gpu;
    if chunks == 1 {
        // One chunk: its sum is the whole order's last level, as on one GPU.
        return Ok(gpu.download(&all[0])?[0]);
    }
    reduce::sum_reproducible(gpu, &all[0])
}
