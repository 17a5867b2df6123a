//! The 1D stencil over a sharded array, iterated, with halo exchanges overlapped with the
//! interior, as NVIDIA's multi-GPU Jacobi (`nccl_overlap`) does.
//!
//! Each rank keeps its shard between `R` halo cells on each side (two such buffers,
//! ping-pong). A step, on every rank:
//! 1. on the low-priority stream, the whole shard from the current buffer (its first and last
//!    `R` outputs, which need the halos, are redone in 3);
//! 2. on the high-priority stream, the first and last `R` outputs alone (a stencil over `3R`
//!    cells each), then sent to the neighbours, whose next halos they are (`ncclSend` /
//!    `ncclRecv` in one group; device copies on virtual ranks), while 1 runs;
//! 3. once 1 is done, those `2R` outputs copied over its own, and the array's end halos filled
//!    by the boundary rule (zeros, or the end cell; periodic arrays wrap the last rank to the
//!    first).
//!
//! The result is the one-GPU stencil applied `steps` times to the whole array, bit for bit:
//! every output reads the same `2R + 1` inputs in the same order.

use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::{Gpu, copy_bytes_async, memset_bytes_async};
use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use crate::runtime::stream::Stream;
use crate::stencil::{self, Boundary, StencilGrid, StencilRun, Taps};

use super::sharded::ShardedArray;
use super::team::Transfer;

/// A local rank's buffers: its shard between halos (two, ping-pong), and the `3R`-cell outputs
/// of its two ends.
struct Local<T: Element> {
    member: usize,
    len: usize,
    ext: [DeviceBuffer<T>; 2],
    left: DeviceBuffer<T>,
    right: DeviceBuffer<T>,
}

/// `taps` applied `steps` times to the whole of `array`, with `boundary` at its ends, computed
/// shard by shard with halo exchanges; a new array cut as `array` is, on the same team. With
/// two or more non-empty shards, each must hold at least `R` elements (a halo comes from one
/// neighbour); otherwise the error names the shorter rank. An array held by one rank gets the
/// one-GPU stencil's result at any length. Zero steps copy the array. A program that steps
/// the same array again and again keeps a [`ShardedStencil`] instead (this makes one, steps it
/// and copies its state out: three device allocations and two copies of the array per call).
pub fn apply_sharded<'t, T: Element>(
    array: &ShardedArray<'t, T>,
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> Result<ShardedArray<'t, T>> {
    let mut plan = ShardedStencil::new(array, taps, boundary)?;
    plan.step(steps)?;
    plan.to_array()
}

/// An iterated 1D stencil over a sharded array that keeps its state on the devices between
/// calls, as a simulation's time loop does: each local rank's shard between its halos, in two
/// buffers that alternate. [`step`](Self::step) advances it, [`to_array`](Self::to_array)
/// copies the current state out.
pub struct ShardedStencil<'t, T: Element> {
    team: &'t crate::multi::Team,
    shards: crate::multi::Shards,
    taps: Taps<T>,
    boundary: Boundary,
    r: usize,
    /// The ranks that hold elements, in order.
    holders: Vec<usize>,
    /// With halos (`r` cells each side), or without (`halos == false`: the array is on one
    /// rank, shorter than the radius, and steps are the one-GPU stencil's).
    halos: bool,
    locals: Vec<Local<T>>,
    /// Which of `ext` holds the current state.
    cur: usize,
    /// A step failed: the state is lost (some ranks may have stepped, others not).
    failed: bool,
}

impl<'t, T: Element> ShardedStencil<'t, T> {
    /// Copies `array` into the plan's buffers and fills the first halos. Refuses what
    /// [`apply_sharded`] refuses.
    pub fn new(array: &ShardedArray<'t, T>, taps: &Taps<T>, boundary: Boundary) -> Result<Self> {
        if let Some(e) = taps.error() {
            return Err(Error::InvalidArgument { what: e });
        }
        let team = array.team();
        let members = team.members();
        let shards = array.shards();
        let r = taps.radius() as usize;
        let holders: Vec<usize> = (0..shards.ranks()).filter(|&k| shards.len(k) > 0).collect();
        if holders.len() > 1
            && let Some(&short) = holders.iter().find(|&&k| shards.len(k) < r)
        {
            return Err(Error::InvalidArgument {
                what: format!(
                    "sharded stencil of radius {r}: rank {short} holds {} elements, fewer than \
                     the radius, so a neighbour's halo would span more than one shard; cut the \
                     {} elements over fewer ranks",
                    shards.len(short),
                    shards.n()
                ),
            });
        }
        // One holder shorter than the radius: the one-GPU stencil (its boundary is the
        // array's). A longer single holder exchanges with itself when the array is periodic.
        let halos = !(holders.len() == 1 && shards.len(holders[0]) < r);
        let h = if halos { r } else { 0 };
        let mut locals = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let len = shards.len(m.rank);
            if len == 0 {
                continue;
            }
            // SAFETY (all four): `T` is an `Element`. Every cell is written before it is read:
            // the middle of `ext[0]` by the copy below, of `ext[1]` by a step's kernels, the
            // halos before every step, the end outputs by their kernels.
            let mut ext = unsafe {
                [
                    m.gpu
                        .alloc_uninit::<T>(len + 2 * h, "sharded stencil: shard and halos")?,
                    m.gpu
                        .alloc_uninit::<T>(len + 2 * h, "sharded stencil: shard and halos")?,
                ]
            };
            m.gpu
                .copy_on_device(&array.parts()[i], &mut ext[0].index_mut(h..h + len))?;
            let (left, right) = unsafe {
                (
                    m.gpu
                        .alloc_uninit::<T>(3 * h, "sharded stencil: first outputs")?,
                    m.gpu
                        .alloc_uninit::<T>(3 * h, "sharded stencil: last outputs")?,
                )
            };
            locals.push(Local {
                member: i,
                len,
                ext,
                left,
                right,
            });
        }
        let mut plan = Self {
            team,
            shards: shards.clone(),
            taps: taps.clone(),
            boundary,
            r,
            holders,
            halos,
            locals,
            cur: 0,
            failed: false,
        };
        if plan.halos {
            let primed = team.enter().and_then(|()| plan.prime_halos());
            let finished = team.finish("sharded stencil: first halos");
            primed.and(finished)?;
        }
        Ok(plan)
    }

    /// Applies the stencil `steps` more times, and waits for it. The host keeps at most two
    /// steps in flight, and on an NCCL team each of its waits (one per local rank and step)
    /// has the time limit: a peer that stops gives [`Error::Timeout`](crate::Error::Timeout)
    /// after a limit or a few, not after the whole call's work, and never a hang. After a failed step the plan refuses to go on: its
    /// ranks may no longer be at the same step.
    pub fn step(&mut self, steps: usize) -> Result<()> {
        self.check_intact()?;
        if steps == 0 {
            return Ok(());
        }
        let team = self.team;
        let stepped = if self.halos {
            team.enter().and_then(|()| {
                for k in 0..steps {
                    if k >= 2 {
                        for l in &self.locals {
                            let m = &team.members()[l.member];
                            team.wait_marker(l.member, &m.done[k % 2], "sharded stencil: a step")?;
                        }
                    }
                    self.one_step()?;
                    for l in &self.locals {
                        let m = &team.members()[l.member];
                        let _current = m.gpu.enter()?;
                        m.done[k % 2].record(&m.edge)?;
                    }
                    self.cur = 1 - self.cur;
                }
                Ok(())
            })
        } else {
            (|| {
                for l in &mut self.locals {
                    let gpu = &team.members()[l.member].gpu;
                    let mut cur = self.cur;
                    for _ in 0..steps {
                        let [a, b] = &mut l.ext;
                        let (input, output) = if cur == 0 { (&*a, b) } else { (&*b, a) };
                        stencil::apply_into(gpu, input, output, &self.taps, self.boundary)?;
                        cur = 1 - cur;
                    }
                }
                self.cur = (self.cur + steps) % 2;
                Ok(())
            })()
        };
        // Waits even after an error: nothing may still run when the buffers are freed.
        let finished = team.finish("sharded stencil (halo exchange)");
        let result = stepped.and(finished);
        self.failed = result.is_err();
        result
    }

    fn check_intact(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument {
                what: "sharded stencil: an earlier step failed, so the ranks' states may differ; \
                       make a new plan from the array"
                    .into(),
            });
        }
        Ok(())
    }

    /// The current state as a new array cut as the original.
    pub fn to_array(&self) -> Result<ShardedArray<'t, T>> {
        self.check_intact()?;
        let members = self.team.members();
        let h = if self.halos { self.r } else { 0 };
        let mut parts = members
            .iter()
            // SAFETY: `T` is an `Element`, valid for every byte pattern; each non-empty part is
            // written by the copy below.
            .map(|m| unsafe {
                m.gpu
                    .alloc_uninit::<T>(self.shards.len(m.rank), "sharded stencil: output")
            })
            .collect::<Result<Vec<_>>>()?;
        for l in &self.locals {
            let gpu = &members[l.member].gpu;
            gpu.copy_on_device(&l.ext[self.cur].index(h..h + l.len), &mut parts[l.member])?;
        }
        self.team.finish("sharded stencil: copy out")?;
        Ok(ShardedArray::from_parts(
            self.team,
            self.shards.clone(),
            parts,
        ))
    }
}

/// The neighbours of holder `h` (an index into `holders`): left and right, wrapping when
/// `periodic`, `None` at an end of the array.
fn neighbours(h: usize, count: usize, periodic: bool) -> (Option<usize>, Option<usize>) {
    let left = if h > 0 {
        Some(h - 1)
    } else {
        periodic.then(|| count - 1)
    };
    let right = if h + 1 < count {
        Some(h + 1)
    } else {
        periodic.then_some(0)
    };
    (left, right)
}

/// The transfers of one exchange, in the order every rank posts them: first every rank's last
/// `R` cells to its right neighbour's left halo, then every rank's first `R` cells to its left
/// neighbour's right halo (so that two ranks that are each other's both neighbours match each
/// send with the right receive). `src(h, rightward)` and `dst(h, rightward)` give the local
/// addresses (0 for a rank not driven here).
fn halo_transfers(
    holders: &[usize],
    periodic: bool,
    bytes: usize,
    src: impl Fn(usize, bool) -> u64,
    dst: impl Fn(usize, bool) -> u64,
) -> Vec<Transfer> {
    let count = holders.len();
    let mut transfers = Vec::with_capacity(2 * count);
    for rightward in [true, false] {
        for h in 0..count {
            let (left, right) = neighbours(h, count, periodic);
            let to = if rightward { right } else { left };
            if let Some(to) = to {
                transfers.push(Transfer {
                    from: holders[h],
                    src: src(h, rightward),
                    to: holders[to],
                    dst: dst(to, rightward),
                    bytes,
                });
            }
        }
    }
    transfers
}

/// Whether rank `rank` holds the array's left end, and its right end (not with periodic
/// arrays).
fn ends(holders: &[usize], rank: usize, boundary: Boundary) -> (bool, bool) {
    let periodic = boundary == Boundary::Periodic;
    (
        !periodic && holders.first() == Some(&rank),
        !periodic && holders.last() == Some(&rank),
    )
}

impl<T: Element> Drop for ShardedStencil<'_, T> {
    /// Waits for whatever a failed call left on the ranks' streams before the buffers go.
    fn drop(&mut self) {
        let _ = self.team.finish("sharded stencil: dropped");
    }
}

impl<T: Element> ShardedStencil<'_, T> {
    /// The transfers of one exchange into the halos of every local rank's `ext[into]`, each
    /// rank sending the `R` cells at `src(its buffers, rightward)`.
    fn halo_plan(&self, into: usize, src: impl Fn(&Local<T>, bool) -> u64) -> Vec<Transfer> {
        let members = self.team.members();
        let (r, size) = (self.r, size_of::<T>() as u64);
        let local = |h: usize| {
            self.locals
                .iter()
                .find(|l| members[l.member].rank == self.holders[h])
        };
        halo_transfers(
            &self.holders,
            self.boundary == Boundary::Periodic,
            self.r * size_of::<T>(),
            |h, rightward| local(h).map_or(0, |l| src(l, rightward)),
            |h, rightward| {
                local(h).map_or(0, |l| {
                    let base = l.ext[into].as_device_ptr().as_raw();
                    if rightward {
                        base
                    } else {
                        base + (r + l.len) as u64 * size
                    }
                })
            },
        )
    }

    /// Fills the halos of every local rank's `ext[0]` before the first step: the neighbours' end
    /// cells through the exchange, the array's ends by the boundary rule.
    fn prime_halos(&mut self) -> Result<()> {
        let (team, r, boundary) = (self.team, self.r, self.boundary);
        let members = team.members();
        let size = size_of::<T>() as u64;
        // Rightward: the last R cells of the shard; leftward: the first R.
        let transfers = self.halo_plan(0, |l, rightward| {
            let base = l.ext[0].as_device_ptr().as_raw();
            if rightward {
                base + l.len as u64 * size
            } else {
                base + r as u64 * size
            }
        });
        let locals = &mut self.locals;
        // SAFETY: each address is inside a local rank's `ext[0]` (R cells), which only the edge
        // streams touch until the first step waits for them.
        unsafe {
            team.exchange(
                &transfers,
                "sharded stencil: first halos (ncclSend/ncclRecv)",
            )?
        };
        for l in locals.iter_mut() {
            let m = &members[l.member];
            let at_ends = ends(&self.holders, m.rank, boundary);
            let len = l.len;
            let _current = m.gpu.enter()?;
            fill_ends(&m.gpu, &m.edge, &mut l.ext[0], r, len, at_ends, boundary)?;
            m.ready.record(&m.edge)?;
        }
        Ok(())
    }

    /// One step on every local rank, from `ext[cur]` into `ext[1 - cur]`.
    fn one_step(&mut self) -> Result<()> {
        let (team, holders, taps) = (self.team, &self.holders, &self.taps);
        let (r, boundary, cur) = (self.r, self.boundary, self.cur);
        let locals = &mut self.locals;
        let members = team.members();
        // 1 and 2: the interior on the bulk stream, the two ends on the edge stream.
        for l in locals.iter_mut() {
            let m = &members[l.member];
            let len = l.len;
            let [a, b] = &mut l.ext;
            let (input, output) = if cur == 0 { (&*a, b) } else { (&*b, a) };
            let _current = m.gpu.enter()?;
            m.ready.wait_on(&m.bulk)?;
            // SAFETY (the three launches): the bulk stream waited for the last step's edge work
            // (`ready`); the edge stream holds it; `finish` waits for both before any buffer is
            // freed. The interior writes `output[r..r + len]`, the ends write scratch buffers, and
            // the halos of `output` are written by the exchange below: nothing overlaps.
            // The interior on the resident blocks: the grid its overlap with the edges was
            // measured on (docs/multi-gpu.md).
            unsafe {
                StencilRun::with_grid(
                    &m.gpu,
                    taps,
                    boundary,
                    &input.index(r..r + len),
                    &mut output.index_mut(r..r + len),
                    StencilGrid::ResidentTiles,
                )?
                .launch_unordered(&m.bulk)?;
                StencilRun::new(&m.gpu, taps, boundary, &input.index(0..3 * r), &mut l.left)?
                    .launch_unordered(&m.edge)?;
                StencilRun::new(
                    &m.gpu,
                    taps,
                    boundary,
                    &input.index(len - r..len + 2 * r),
                    &mut l.right,
                )?
                .launch_unordered(&m.edge)?;
            }
            m.bulk_done.record(&m.bulk)?;
        }
        // 2: the exchange, into the next buffer's halos.
        let nxt = 1 - cur;
        let size = size_of::<T>() as u64;
        let transfers = self.halo_plan(nxt, |l, rightward| {
            let out = if rightward { &l.right } else { &l.left };
            out.as_device_ptr().as_raw() + r as u64 * size
        });
        let locals = &mut self.locals;
        // SAFETY: sources are the middle `R` outputs of the end buffers, written on the edge
        // stream before; destinations the halos of the next buffers, which no kernel of this step
        // touches.
        unsafe {
            team.exchange(
                &transfers,
                "sharded stencil: halo exchange (ncclSend/ncclRecv)",
            )?
        };
        // 3: the ends over the interior's, and the array's end halos.
        for l in locals.iter_mut() {
            let m = &members[l.member];
            let len = l.len;
            let _current = m.gpu.enter()?;
            m.bulk_done.wait_on(&m.edge)?;
            let (left_end, right_end) = ends(holders, m.rank, boundary);
            let out = &mut l.ext[nxt];
            // SAFETY: the edge stream waited for the interior (`bulk_done`); `out[r..2r]` and
            // `out[len..len + r]` are inside the shard (len >= r).
            unsafe {
                raw_copy(
                    &m.gpu,
                    &m.edge,
                    &mut out.index_mut(r..2 * r),
                    &l.left.index(r..2 * r),
                )?;
                raw_copy(
                    &m.gpu,
                    &m.edge,
                    &mut out.index_mut(len..len + r),
                    &l.right.index(r..2 * r),
                )?;
            }
            fill_ends(
                &m.gpu,
                &m.edge,
                out,
                r,
                len,
                (left_end, right_end),
                boundary,
            )?;
            m.ready.record(&m.edge)?;
        }
        Ok(())
    }
}

/// The halos of `buf` (`r` cells, a shard of `len`, `r` cells) at the array's ends, the left
/// and/or the right as `at_ends` says, by the boundary rule.
fn fill_ends<T: Element>(
    gpu: &Gpu,
    stream: &Stream,
    buf: &mut DeviceBuffer<T>,
    r: usize,
    len: usize,
    at_ends: (bool, bool),
    boundary: Boundary,
) -> Result<()> {
    if at_ends.0 {
        fill_end(gpu, stream, buf, 0..r, r, boundary)?;
    }
    if at_ends.1 {
        fill_end(
            gpu,
            stream,
            buf,
            r + len..2 * r + len,
            r + len - 1,
            boundary,
        )?;
    }
    Ok(())
}

/// An end halo `halo` of `buf` by the boundary rule: zeros, or cell `edge` of `buf` repeated.
fn fill_end<T: Element>(
    gpu: &Gpu,
    stream: &Stream,
    buf: &mut DeviceBuffer<T>,
    halo: std::ops::Range<usize>,
    edge: usize,
    boundary: Boundary,
) -> Result<()> {
    let _current = gpu.enter()?;
    let base = buf.as_device_ptr().as_raw();
    let size = size_of::<T>();
    match boundary {
        Boundary::Zero => {
            // SAFETY: the halo lies inside `buf`, held mutably; ordered on the edge stream.
            unsafe {
                memset_bytes_async(
                    base + (halo.start * size) as u64,
                    0,
                    halo.len() * size,
                    stream,
                )
            }
        }
        Boundary::Clamp | Boundary::Periodic => {
            for at in halo {
                // SAFETY: both cells lie inside `buf` and differ (the edge is not in a halo).
                unsafe {
                    copy_bytes_async(
                        base + (at * size) as u64,
                        base + (edge * size) as u64,
                        size,
                        stream,
                    )?
                };
            }
            Ok(())
        }
    }
}

/// `src` into `dst` (the same length) on `stream`, without the record of which stream used
/// which buffer.
///
/// # Safety
/// The caller orders `stream` with every other use of both (events) and waits for it before
/// either is freed.
unsafe fn raw_copy<T: Element>(
    gpu: &Gpu,
    stream: &Stream,
    dst: &mut DeviceSlice<T>,
    src: &DeviceSlice<T>,
) -> Result<()> {
    debug_assert_eq!(dst.len(), src.len());
    if src.is_empty() {
        return Ok(());
    }
    let _current = gpu.enter()?;
    // SAFETY: the caller's contract; `len` elements each, one borrowed mutably.
    unsafe {
        copy_bytes_async(
            dst.as_device_ptr().as_raw(),
            src.as_device_ptr().as_raw(),
            src.len() * size_of::<T>(),
            stream,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(holders: &[usize], periodic: bool) -> Vec<(usize, usize, bool)> {
        halo_transfers(holders, periodic, 4, |_, r| u64::from(r), |_, _| 0)
            .iter()
            .map(|t| (t.from, t.to, t.src == 1))
            .collect()
    }

    #[test]
    fn halos_go_right_first_then_left_and_wrap_only_when_periodic() {
        // Ranks 1, 2, 4 hold data (0 and 3 are empty).
        assert_eq!(
            pairs(&[1, 2, 4], false),
            [(1, 2, true), (2, 4, true), (2, 1, false), (4, 2, false)]
        );
        assert_eq!(
            pairs(&[1, 2, 4], true),
            [
                (1, 2, true),
                (2, 4, true),
                (4, 1, true),
                (1, 4, false),
                (2, 1, false),
                (4, 2, false)
            ]
        );
        // Two ranks, periodic: each is the other's both neighbours; the rightward send comes
        // first on both, so it meets the left-halo receive.
        assert_eq!(
            pairs(&[0, 1], true),
            [(0, 1, true), (1, 0, true), (0, 1, false), (1, 0, false)]
        );
        assert_eq!(pairs(&[3], false), []);
    }
}
