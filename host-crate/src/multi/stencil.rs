//! The 1D stencil over a sharded array, iterated, several steps per pass (时间分块), with
//! halo exchanges overlapped with the interior, as NVIDIA's multi-GPU Jacobi (`nccl_overlap`)
//! does.
//!
//! Each rank keeps its shard between halos of `H = k R` cells on each side (two such buffers,
//! ping-pong), `k` the steps of one pass. A pass of `k` steps, on every rank:
//! 1. on the low-priority stream, the iterated stencil's `k` steps over the whole shard, the
//!    array's boundary rule at the shard's ends: right where the shard ends the array, wrong
//!    within `H` of a cut (redone in 2);
//! 2. on the high-priority stream, for each cut, the same `k` steps over the `3H` cells around
//!    it (the halo, and `2H` of the shard): its middle `H` outputs read only real cells, so
//!    they are right. They are sent to the neighbour, whose next halo they are (`ncclSend` /
//!    `ncclRecv` in one group; device copies on virtual ranks), while 1 runs;
//! 3. once 1 is done, those outputs copied over its own.
//!
//! So a rank exchanges every `k` steps, `H` cells a side, and its shard is read and written once
//! per `k` steps. The result is the one-GPU stencil applied `steps` times to the whole array,
//! bit for bit: every step of every output reads the same `2R + 1` values in the same order,
//! and each shard sits in its buffers at its place in the array modulo a 16-byte vector (the
//! 16-bit floats' sums order their adds by an output's lane).

use crate::runtime::element::Element;
use crate::runtime::error::{Error, Result};
use crate::runtime::gpu::{Gpu, copy_bytes_async};
use crate::runtime::graph::{GraphExec, begin_capture, end_capture};
use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use crate::runtime::pointer::DevicePointer;
use crate::runtime::stream::Stream;
use crate::stencil::{Boundary, StepsPass, Taps, lanes};

use super::sharded::ShardedArray;
use super::team::{Shape, Transfer, fingerprint};

/// The cells `start .. start + len` of `buf`, as a kernel's pointer.
fn at<T: Element>(buf: &DeviceBuffer<T>, start: usize) -> DevicePointer<T> {
    DevicePointer::from_raw(buf.as_device_ptr().as_raw() + (start * size_of::<T>()) as u64)
}

/// A local rank's buffers: its shard between halos (two, ping-pong), and the outputs of the
/// `3H`-cell windows around its two cuts.
struct Local<'t, T: Element> {
    member: usize,
    len: usize,
    /// Where the shard starts in `ext`: at least `H`, and at the shard's place in the array
    /// modulo a vector.
    s: usize,
    ext: [DeviceBuffer<T>; 2],
    /// Whether the shard has a neighbour on its left, and on its right.
    cuts: (bool, bool),
    /// The windows around the left and the right cut, and their outputs.
    left: Window<T>,
    right: Window<T>,
    pass: StepsPass<'t, T>,
}

/// The cells of `ext` around a cut that a pass's kernel steps on the edge stream, and its
/// outputs: `3H` cells, the cut's halo and `2H` of the shard, or fewer where the shard's other
/// end is the array's (a window may not read a halo that nothing fills; the kernel applies the
/// boundary rule there, right for the array's end).
struct Window<T: Element> {
    /// The window in `ext`.
    start: usize,
    n: usize,
    /// The outputs, from `out[pad]` (the window's place modulo a vector).
    out: DeviceBuffer<T>,
    pad: usize,
    /// Where the shard's `H` cells at the cut are among the window's outputs.
    take: usize,
}

impl<T: Element> Window<T> {
    fn new(gpu: &Gpu, start: usize, end: usize, take: usize, lanes: usize) -> Result<Self> {
        let pad = start % lanes;
        // SAFETY: `T` is an `Element`; the kernel writes every output before one is read.
        let out = unsafe { gpu.alloc_uninit::<T>(pad + end - start, "sharded stencil: a cut")? };
        Ok(Self {
            start,
            n: end - start,
            out,
            pad,
            take: take - start,
        })
    }

    /// The outputs that are the shard's `h` cells at the cut, as a device address.
    fn taken(&self, h: usize) -> (u64, std::ops::Range<usize>) {
        let first = self.pad + self.take;
        (
            self.out.as_device_ptr().as_raw() + (first * size_of::<T>()) as u64,
            first..first + h,
        )
    }
}

/// Where one pass's work ran on one rank's GPU, in microseconds from the pass's first time
/// stamp there (its edge stream, before anything of the pass): the interior on the
/// low-priority stream, the windows around the cuts and then the halo exchange on the
/// high-priority stream, and the end of the join (the windows' outputs copied over the
/// interior's). From [`ShardedStencil::step_traced`]: the timeline of the overlap.
#[derive(Clone, Debug, PartialEq)]
pub struct PassTrace {
    /// The rank.
    pub rank: usize,
    /// The interior's kernel: start and end.
    pub interior: (f64, f64),
    /// The windows' kernels around the cuts: start and end (equal when the shard has no cut).
    pub cuts: (f64, f64),
    /// The halo exchange (`ncclSend`/`ncclRecv`, or device copies): start and end.
    pub exchange: (f64, f64),
    /// The end of the pass on this rank.
    pub joined: f64,
}

impl PassTrace {
    /// Microseconds of the cuts and the exchange that ran after the interior ended: what the
    /// overlap failed to hide (0 when all of it ran beside the interior).
    pub fn exposed(&self) -> f64 {
        (self.joined - self.interior.1).max(0.0)
    }
}

/// The timing events of one traced pass on one rank, in stream order.
struct Stamps {
    start: crate::runtime::event::Event,
    interior: [crate::runtime::event::Event; 2],
    cuts: crate::runtime::event::Event,
    exchanged: crate::runtime::event::Event,
    joined: crate::runtime::event::Event,
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
    r: usize,
    /// The steps of a pass (`k`), and the most the shards and the kernel allow.
    per_pass: usize,
    most: usize,
    /// The ranks that hold elements, in order.
    holders: Vec<usize>,
    periodic: bool,
    locals: Vec<Local<'t, T>>,
    /// Which of `ext` holds the current state.
    cur: usize,
    /// A step failed: the state is lost (some ranks may have stepped, others not).
    failed: bool,
    /// Graphs asked for, or not (`None`: by the shard's length).
    graph_policy: Option<bool>,
    /// The captured graphs of two passes, one per local rank, or why the capture failed;
    /// `None` before a capture.
    graphs: Option<std::result::Result<Vec<GraphExec>, String>>,
}

/// Shards up to this long step through CUDA graphs by default: there a pass's kernels take
/// about as long as the host takes to launch them.
const GRAPH_MAX_SHARD: usize = 1 << 22;

impl<'t, T: Element> ShardedStencil<'t, T> {
    /// Copies `array` into the plan's buffers and fills the first halos. Refuses what
    /// [`apply_sharded`] refuses. With ranks in several processes, every rank first checks
    /// that all agree on the array's type and cut, the taps, the boundary and the steps a
    /// pass, and all fail together if not, or if one failed before.
    pub fn new(array: &ShardedArray<'t, T>, taps: &Taps<T>, boundary: Boundary) -> Result<Self> {
        let (plan, local) = match Self::build(array, taps, boundary) {
            Ok(plan) => (Some(plan), Ok(())),
            Err(e) => (None, Err(e)),
        };
        let key = plan.as_ref().map_or(0, |p| {
            let weights = match taps {
                Taps::Sum { .. } => Vec::new(),
                Taps::Weighted(w) => w.iter().map(|c| c.to_f64().to_bits()).collect(),
            };
            fingerprint(
                [p.r as u64, boundary.code() as u64, p.most as u64]
                    .into_iter()
                    .chain(weights),
            )
        });
        let team = array.team();
        let _serial = team.serial();
        team.agree(&array.shape("sharded stencil plan", key), local)?;
        let mut plan = plan.expect("built: `agree` returns this rank's own error first");
        if plan.holders.len() > 1 {
            let primed = team.enter().and_then(|()| plan.prime_halos());
            let finished = team.finish("sharded stencil: first halos");
            primed.and(finished)?;
        } else {
            team.finish("sharded stencil: copy in")?;
        }
        Ok(plan)
    }

    /// The plan's buffers, the shards copied in; no communication.
    fn build(array: &ShardedArray<'t, T>, taps: &Taps<T>, boundary: Boundary) -> Result<Self> {
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
        let periodic = boundary == Boundary::Periodic;
        let mut locals = Vec::new();
        let mut most = usize::MAX;
        for (i, m) in members.iter().enumerate() {
            let len = shards.len(m.rank);
            if len == 0 {
                continue;
            }
            let pass = StepsPass::new(&m.gpu, taps, boundary, || {
                format!(
                    "sharded stencil (R = {r}, {}), rank {} of {} elements",
                    T::TYPE,
                    m.rank,
                    len
                )
            })?;
            let h = holders.iter().position(|&k| k == m.rank).expect("a holder");
            let many = holders.len() > 1;
            let cuts = (
                many && (h > 0 || periodic),
                many && (h + 1 < holders.len() || periodic),
            );
            locals.push((i, len, cuts, pass));
        }
        // The kernel's most for the radius and type (the same on every rank, whether it holds
        // elements or not); a halo of `k R` cells comes from one neighbour: every holder holds
        // `k R` at least.
        most = most.min(
            ferrocuda_kernels::config::stencil_steps_per_pass(r as u32, lanes::<T>()) as usize,
        );
        if holders.len() > 1 {
            let shortest = holders.iter().map(|&k| shards.len(k)).min().unwrap_or(r);
            most = most.min(shortest / r);
        }
        let most = most.max(1);
        let mut plan = Self {
            team,
            shards: shards.clone(),
            r,
            per_pass: most,
            most,
            holders,
            periodic,
            locals: Vec::new(),
            cur: 0,
            failed: false,
            graph_policy: None,
            graphs: None,
        };
        let h = plan.halo();
        let l = lanes::<T>() as usize;
        for (i, len, cuts, pass) in locals {
            let m = &members[i];
            let offset = shards.range(m.rank).start;
            let s = h + (offset + l - h % l) % l;
            // SAFETY (all four): `T` is an `Element`. Every cell read is written before: the
            // shard of `ext[0]` by the copy below, of `ext[1]` by a pass's kernels, the halos by
            // the exchange, the windows' outputs by their kernels.
            let mut ext = unsafe {
                [
                    m.gpu
                        .alloc_uninit::<T>(s + len + h, "sharded stencil: shard and halos")?,
                    m.gpu
                        .alloc_uninit::<T>(s + len + h, "sharded stencil: shard and halos")?,
                ]
            };
            m.gpu
                .copy_on_device(&array.parts()[i], &mut ext[0].index_mut(s..s + len))?;
            // Around the left cut: the halo and 2H of the shard, less where the shard ends the
            // array on its right; around the right cut, mirrored.
            let end = s + len;
            let left = Window::new(
                &m.gpu,
                s - h,
                if cuts.1 {
                    s + 2 * h
                } else {
                    end.min(s + 2 * h)
                },
                s,
                l,
            )?;
            let right = Window::new(
                &m.gpu,
                if cuts.0 {
                    end - 2 * h
                } else {
                    s.max(end - 2 * h)
                },
                end + h,
                end - h,
                l,
            )?;
            plan.locals.push(Local {
                member: i,
                len,
                s,
                ext,
                cuts,
                left,
                right,
                pass,
            });
        }
        Ok(plan)
    }

    /// The depth of a halo, `H = k R`, for the most steps a pass (0 with one holder: no cuts).
    fn halo(&self) -> usize {
        if self.holders.len() > 1 {
            self.most * self.r
        } else {
            0
        }
    }

    /// At most `per_pass` steps a pass (1 up to [`steps_per_pass`](Self::steps_per_pass)'s
    /// first value): to measure what the depth buys. The halos keep their depth.
    pub fn with_steps_per_pass(mut self, per_pass: usize) -> Result<Self> {
        if !(1..=self.most).contains(&per_pass) {
            return Err(Error::InvalidArgument {
                what: format!(
                    "sharded stencil (R = {}, {}): {per_pass} steps a pass; it applies 1 to {} \
                     (the kernel's most, and the shortest shard over the radius)",
                    self.r,
                    T::TYPE,
                    self.most
                ),
            });
        }
        self.per_pass = per_pass;
        self.graphs = None;
        Ok(self)
    }

    /// The most steps a pass applies: the kernel's most for the radius and type, at most the
    /// shortest shard over the radius when there are cuts.
    pub fn steps_per_pass(&self) -> usize {
        self.per_pass
    }

    /// Applies one pass (`steps_per_pass` steps) with GPU time stamps on every local rank, waits
    /// for it, and returns where its work ran: whether the exchange hid behind the interior
    /// ([`PassTrace::exposed`]). The stamps cost a few event records; the state advances as
    /// by `step(steps_per_pass())`, and the ranks agree on it as on that call.
    pub fn step_traced(&mut self) -> Result<Vec<PassTrace>> {
        let team = self.team;
        let k = self.per_pass;
        let shape = self.step_shape(k);
        let members = team.members();
        let _serial = team.serial();
        let stamps = self
            .locals
            .iter()
            .map(|l| {
                let gpu = &members[l.member].gpu;
                Ok(Stamps {
                    start: gpu.new_event(true)?,
                    interior: [gpu.new_event(true)?, gpu.new_event(true)?],
                    cuts: gpu.new_event(true)?,
                    exchanged: gpu.new_event(true)?,
                    joined: gpu.new_event(true)?,
                })
            })
            .collect::<Result<Vec<_>>>();
        let (stamps, local) = match stamps {
            Ok(s) => (s, self.check_intact()),
            Err(e) => (Vec::new(), Err(e)),
        };
        team.agree(&shape, local)?;
        let stepped = team.enter().and_then(|()| self.one_pass(k as u32, &stamps));
        let finished = team.finish("sharded stencil: a traced pass");
        let result = stepped.and(finished);
        self.failed = result.is_err();
        result?;
        self.cur = 1 - self.cur;
        self.locals
            .iter()
            .zip(&stamps)
            .map(|(l, t)| {
                let at = |e: &crate::runtime::event::Event| {
                    t.start.elapsed_ms(e).map(|ms| f64::from(ms) * 1e3)
                };
                Ok(PassTrace {
                    rank: members[l.member].rank,
                    interior: (at(&t.interior[0])?, at(&t.interior[1])?),
                    cuts: (at(&t.start)?, at(&t.cuts)?),
                    exchange: (at(&t.cuts)?, at(&t.exchanged)?),
                    joined: at(&t.joined)?,
                })
            })
            .collect()
    }

    /// Applies the stencil `steps` more times, and waits for it. The host keeps at most two
    /// passes in flight, and on an NCCL team each of its waits (one per local rank and pass)
    /// has the time limit: a peer that stops gives [`Error::Timeout`](crate::Error::Timeout)
    /// after a limit or a few, not after the whole call's work, and never a hang. After a
    /// failed step the plan refuses to go on: its ranks may no longer be at the same step.
    ///
    /// With ranks in several processes, the ranks first check that they agree on `steps` and
    /// the steps a pass (every rank's plan posts one exchange a pass).
    pub fn step(&mut self, steps: usize) -> Result<()> {
        let team = self.team;
        let shape = self.step_shape(steps);
        team.agree(&shape, self.check_intact())?;
        if steps == 0 {
            return Ok(());
        }
        let k = self.per_pass;
        let _serial = team.serial();
        let stepped = team.enter().and_then(|()| {
            // Passes of `k` steps, then one of the rest: the same passes on every rank, graphs
            // or not (a rank's pass reads the halos its neighbours wrote at the same step).
            let mut left = steps;
            let mut launch = 0;
            if self.graph_wanted(steps) {
                // The graph starts from `ext[0]`.
                if self.cur == 1 {
                    self.pass_on_streams(k as u32, launch)?;
                    left -= k;
                    launch += 1;
                }
                if self.graphs.is_none() && left >= 2 * k {
                    self.graphs = Some(self.capture_agreed());
                }
                if let Some(Ok(_)) = &self.graphs {
                    while left >= 2 * k {
                        self.launch_graphs(launch)?;
                        left -= 2 * k;
                        launch += 1;
                    }
                }
            }
            while left > 0 {
                let now = left.min(k);
                self.pass_on_streams(now as u32, launch)?;
                left -= now;
                launch += 1;
            }
            Ok(())
        });
        // Waits even after an error: nothing may still run when the buffers are freed.
        let finished = team.finish("sharded stencil (halo exchange)");
        let result = stepped.and(finished);
        self.failed = result.is_err();
        result
    }

    /// One pass of `steps` on the streams, the `launch`-th of a call: the host first waits
    /// for the one two launches back (at most two in flight).
    fn pass_on_streams(&mut self, steps: u32, launch: usize) -> Result<()> {
        self.wait_for_launch(launch)?;
        self.one_pass(steps, &[])?;
        self.cur = 1 - self.cur;
        self.mark_launch(launch)
    }

    /// Waits for the launch two before `launch` (each local rank's marker, within the limit).
    fn wait_for_launch(&self, launch: usize) -> Result<()> {
        let team = self.team;
        if launch >= 2 {
            for l in &self.locals {
                let m = &team.members()[l.member];
                team.wait_marker(l.member, &m.done[launch % 2], "sharded stencil: a pass")?;
            }
        }
        Ok(())
    }

    fn mark_launch(&self, launch: usize) -> Result<()> {
        for l in &self.locals {
            let m = &self.team.members()[l.member];
            let _current = m.gpu.enter()?;
            m.done[launch % 2].record(&m.edge)?;
        }
        Ok(())
    }

    /// Whether `steps` more steps go through the captured graphs, the same on every rank (from
    /// the cut and the arguments): a process that drives one NCCL rank, or a team of one
    /// (virtual ranks' exchanges join streams of different ranks, which one rank's
    /// capture cannot hold; and one thread capturing several GPUs' NCCL group was refused by
    /// the driver on an H200 pair, `CUDA_ERROR_INVALID_VALUE` from a stream's event wait),
    /// shards short enough that launches take the time (or graphs asked for), two passes at
    /// least, and no capture that failed.
    fn graph_wanted(&self, steps: usize) -> bool {
        let short = (0..self.shards.ranks()).all(|r| self.shards.len(r) <= GRAPH_MAX_SHARD);
        let team = self.team;
        team.members().len() == 1
            && (team.transport() == crate::multi::Transport::Nccl || team.size() == 1)
            && self.graph_policy.unwrap_or(short)
            && steps >= 2 * self.per_pass
            && !matches!(self.graphs, Some(Err(_)))
    }

    /// Records two passes of `per_pass` steps, from `ext[0]` back into it, as one graph per
    /// local rank (each rank's edge stream captured, its bulk stream joining through the
    /// pass's events, the exchange's NCCL calls inside). Nothing runs; the state is unchanged.
    fn capture(&mut self) -> Result<Vec<GraphExec>> {
        debug_assert_eq!(self.cur, 0);
        let members = self.team.members();
        let k = self.per_pass as u32;
        let mut begun = Vec::new();
        let recorded = (|| {
            for l in &self.locals {
                let m = &members[l.member];
                let _current = m.gpu.enter()?;
                // SAFETY: the edge stream of the current context; nothing waits on the host
                // for it until the capture ends below.
                unsafe { begin_capture(&m.edge)? };
                begun.push(l.member);
                m.ready.record(&m.edge)?;
            }
            self.one_pass(k, &[])?;
            self.cur = 1;
            self.one_pass(k, &[])
        })();
        self.cur = 0;
        let mut graphs = Vec::new();
        let mut first = recorded.err();
        for &i in &begun {
            let m = &members[i];
            // SAFETY: the stream whose capture began above, its context current.
            let ended = m
                .gpu
                .enter()
                .and_then(|_current| unsafe { end_capture(&m.edge) });
            match ended {
                Ok(g) => graphs.push(g),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(graphs), Err)
    }

    /// [`capture`](Self::capture), then every rank learns whether every other's capture
    /// worked: all use their graphs, or none does (a graph and a stream pass post the same
    /// NCCL calls, but a failed capture may have left NCCL's count of them behind). The
    /// events the capture recorded are recorded again outside it.
    fn capture_agreed(&mut self) -> std::result::Result<Vec<GraphExec>, String> {
        let captured = self.capture();
        let reentered = self.team.enter();
        let local = match (&captured, reentered) {
            (Ok(_), Ok(())) => Ok(()),
            (Err(e), _) => Err(Error::InvalidArgument {
                what: e.to_string(),
            }),
            (_, Err(e)) => Err(e),
        };
        let shape = self.shape(
            "sharded stencil: step graphs captured",
            self.per_pass as u64,
        );
        match self.team.agree(&shape, local) {
            Ok(()) => captured.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Launches the captured graphs (two passes) on every local rank, the `launch`-th launch.
    fn launch_graphs(&mut self, launch: usize) -> Result<()> {
        self.wait_for_launch(launch)?;
        let members = self.team.members();
        if let Some(Ok(graphs)) = &self.graphs {
            for (l, g) in self.locals.iter().zip(graphs) {
                let m = &members[l.member];
                let _current = m.gpu.enter()?;
                // SAFETY: the graph of this rank's edge stream, captured from its buffers, which
                // the plan owns; the graph runs after what the edge stream holds, and `ready`
                // recorded after it orders the next pass's bulk work.
                unsafe { g.launch(&m.edge)? };
                m.ready.record(&m.edge)?;
            }
        }
        self.mark_launch(launch)
    }

    /// Whether [`step`](Self::step) launches CUDA graphs (two passes each, captured on the
    /// first call that steps far enough) rather than each pass's kernels and exchange:
    /// `Some(true)` forces them, `Some(false)` never, `None` (the default) when every local
    /// shard holds at most 2^22 elements, where launches take the time. Only in a process that
    /// drives one NCCL rank (as `torchrun` or `srun` start them); elsewhere the passes run on
    /// the streams.
    pub fn with_graphs(mut self, graphs: Option<bool>) -> Self {
        self.graph_policy = graphs;
        self.graphs = None;
        self
    }

    /// Why the capture of the step graphs failed, if it did (the steps then run on the
    /// streams, with the same results).
    pub fn graph_error(&self) -> Option<&str> {
        match &self.graphs {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether steps have gone through captured graphs.
    pub fn uses_graphs(&self) -> bool {
        matches!(self.graphs, Some(Ok(_)))
    }

    /// The shape of collective `op` over this plan's array, for [`Team::agree`](super::Team).
    fn shape(&self, op: &'static str, extra: u64) -> Shape<'_> {
        Shape {
            op,
            ty: T::TYPE,
            bounds: self.shards.bounds(),
            extra,
        }
    }

    /// The shape of a `step(steps)` call (a traced pass is `step(per_pass)`).
    fn step_shape(&self, steps: usize) -> Shape<'_> {
        self.shape(
            "sharded stencil step",
            fingerprint([steps as u64, self.per_pass as u64]),
        )
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
        let _serial = self.team.serial();
        let members = self.team.members();
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
            gpu.copy_on_device(
                &l.ext[self.cur].index(l.s..l.s + l.len),
                &mut parts[l.member],
            )?;
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
/// `H` cells to its right neighbour's left halo, then every rank's first `H` cells to its left
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
    if count < 2 {
        return transfers;
    }
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

impl<T: Element> Drop for ShardedStencil<'_, T> {
    /// Waits for whatever a failed call left on the ranks' streams before the buffers go.
    fn drop(&mut self) {
        let _serial = self.team.serial();
        let _ = self.team.finish("sharded stencil: dropped");
    }
}

impl<T: Element> ShardedStencil<'_, T> {
    /// The transfers of one exchange into the halos of every local rank's `ext[into]`, each
    /// rank sending the `H` cells at `src(its buffers, rightward)`.
    fn halo_plan(&self, into: usize, src: impl Fn(&Local<T>, bool) -> u64) -> Vec<Transfer> {
        let members = self.team.members();
        let (h, size) = (self.halo(), size_of::<T>() as u64);
        let local = |k: usize| {
            self.locals
                .iter()
                .find(|l| members[l.member].rank == self.holders[k])
        };
        halo_transfers(
            &self.holders,
            self.periodic,
            h * size_of::<T>(),
            |k, rightward| local(k).map_or(0, |l| src(l, rightward)),
            |k, rightward| {
                local(k).map_or(0, |l| {
                    let base = l.ext[into].as_device_ptr().as_raw();
                    if rightward {
                        base + (l.s - h) as u64 * size
                    } else {
                        base + (l.s + l.len) as u64 * size
                    }
                })
            },
        )
    }

    /// Fills the halos of every local rank's `ext[0]` before the first pass: the neighbours'
    /// end cells through the exchange (an array's ends need none: the kernels apply the
    /// boundary rule there).
    fn prime_halos(&mut self) -> Result<()> {
        let members = self.team.members();
        let h = self.halo();
        let size = size_of::<T>() as u64;
        // Rightward: the last H cells of the shard; leftward: the first H.
        let transfers = self.halo_plan(0, |l, rightward| {
            let base = l.ext[0].as_device_ptr().as_raw();
            if rightward {
                base + (l.s + l.len - h) as u64 * size
            } else {
                base + l.s as u64 * size
            }
        });
        // SAFETY: each address is inside a local rank's `ext[0]` (H cells), which only the edge
        // streams touch until the first pass waits for them.
        unsafe {
            self.team.exchange(
                &transfers,
                "sharded stencil: first halos (ncclSend/ncclRecv)",
            )?
        };
        for l in &self.locals {
            let m = &members[l.member];
            let _current = m.gpu.enter()?;
            m.ready.record(&m.edge)?;
        }
        Ok(())
    }

    /// One pass of `steps` on every local rank, from `ext[cur]` into `ext[1 - cur]`, with time
    /// stamps when `stamps` has one per local rank.
    fn one_pass(&mut self, steps: u32, stamps: &[Stamps]) -> Result<()> {
        let stamp = |i: usize| stamps.get(i);
        let (team, cur, h) = (self.team, self.cur, self.halo());
        let nxt = 1 - cur;
        let members = team.members();
        // 1 and 2: the interior on the bulk stream, the windows around the cuts on the edge
        // stream.
        for (i, l) in self.locals.iter().enumerate() {
            let m = &members[l.member];
            let (s, len) = (l.s, l.len);
            let (input, output) = (&l.ext[cur], &l.ext[nxt]);
            let _current = m.gpu.enter()?;
            if let Some(t) = stamp(i) {
                t.start.record(&m.edge)?;
            }
            m.ready.wait_on(&m.bulk)?;
            if let Some(t) = stamp(i) {
                t.interior[0].record(&m.bulk)?;
            }
            // SAFETY (the three launches): the bulk stream waited for the last pass's edge work
            // (`ready`); the edge stream holds it; `finish` waits for both before any buffer is
            // freed. The interior writes `output[s..s + len]`, the windows write their own
            // buffers, and the halos of `output` are written by the exchange below: nothing
            // overlaps. Each window `[start, start + 3H)` lies inside `input` (`s >= H`,
            // `len >= H`).
            unsafe {
                l.pass
                    .enqueue(&m.bulk, at(input, s), at(output, s), len, steps)?;
                for (cut, w) in [(l.cuts.0, &l.left), (l.cuts.1, &l.right)] {
                    if cut {
                        l.pass.enqueue(
                            &m.edge,
                            at(input, w.start),
                            at(&w.out, w.pad),
                            w.n,
                            steps,
                        )?;
                    }
                }
            }
            if let Some(t) = stamp(i) {
                t.interior[1].record(&m.bulk)?;
                t.cuts.record(&m.edge)?;
            }
            m.bulk_done.record(&m.bulk)?;
        }
        // 2: the exchange, into the next buffer's halos: the middle H outputs of each window.
        let transfers = self.halo_plan(nxt, |l, rightward| {
            let w = if rightward { &l.right } else { &l.left };
            w.taken(h).0
        });
        if !transfers.is_empty() {
            // SAFETY: sources are the middle `H` outputs of the windows, written on the edge
            // stream before; destinations the halos of the next buffers, which no kernel of
            // this pass touches.
            unsafe {
                team.exchange(
                    &transfers,
                    "sharded stencil: halo exchange (ncclSend/ncclRecv)",
                )?
            };
        }
        // 3: the windows' outputs over the interior's.
        for (i, l) in self.locals.iter_mut().enumerate() {
            let m = &members[l.member];
            let (s, len) = (l.s, l.len);
            let _current = m.gpu.enter()?;
            if let Some(t) = stamp(i) {
                t.exchanged.record(&m.edge)?;
            }
            m.bulk_done.wait_on(&m.edge)?;
            let out = &mut l.ext[nxt];
            // SAFETY: the edge stream waited for the interior (`bulk_done`); `out[s..s + H]`
            // and `out[s + len - H..s + len]` are inside the shard (len >= H).
            unsafe {
                if l.cuts.0 {
                    let (_, taken) = l.left.taken(h);
                    raw_copy(
                        &m.gpu,
                        &m.edge,
                        &mut out.index_mut(s..s + h),
                        &l.left.out.index(taken),
                    )?;
                }
                if l.cuts.1 {
                    let (_, taken) = l.right.taken(h);
                    raw_copy(
                        &m.gpu,
                        &m.edge,
                        &mut out.index_mut(s + len - h..s + len),
                        &l.right.out.index(taken),
                    )?;
                }
            }
            if let Some(t) = stamp(i) {
                t.joined.record(&m.edge)?;
            }
            m.ready.record(&m.edge)?;
        }
        Ok(())
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
