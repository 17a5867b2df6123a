//! A [`Team`]: the ranks this process drives, each on a GPU with its own two streams, and how
//! the ranks talk — NCCL between GPUs, or device copies between **virtual ranks** of one GPU
//! (the test transport: NCCL refuses two ranks on one device).
//!
//! Three ways to make one, as NCCL's own documentation lays them out:
//! - [`Team::nccl`]: one process, several GPUs, one communicator per GPU (what
//!   `ncclCommInitAll` does, here non-blocking, in one group);
//! - [`Team::from_env`]: one rank per process, as a launcher starts them (`torchrun`, `mpirun`,
//!   a batch system): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, and a rendezvous file through which
//!   rank 0 hands out NCCL's unique id; [`Team::join`] when the caller shares the id itself;
//! - [`Team::virtual_ranks`]: every rank on one GPU, for tests.
//!
//! Every wait of an NCCL team is bounded ([`nccl::default_timeout`]): a peer that dies or never
//! comes gives [`Error::Timeout`] and an aborted communicator, never a hang.
use std::time::Duration;

use crate::runtime::element::{ElemType, Element};
use crate::runtime::error::{Error, Result, check_raw};
use crate::runtime::event::Marker;
use crate::runtime::gpu::{Gpu, GpuStream, copy_bytes_async};
use crate::runtime::memory::DeviceBuffer;

use super::nccl::{self, Communicator, UniqueId};
use super::rendezvous::{self, Launch, Place};

/// The most virtual ranks one GPU is given (each has two streams).
pub const MAX_VIRTUAL_RANKS: usize = 64;

/// How the ranks of a team reach each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Device copies between ranks of one GPU (tests only).
    Virtual,
    /// NCCL, one rank per GPU.
    Nccl,
}

/// One rank this process drives.
pub(crate) struct Member {
    pub(crate) rank: usize,
    pub(crate) gpu: Gpu,
    /// High priority: halo cells and exchanges, and every collective.
    pub(crate) edge: GpuStream,
    /// Low priority: the stencil's interior.
    pub(crate) bulk: GpuStream,
    /// The end of a step's work on `edge` (what `bulk` waits for next).
    pub(crate) ready: Marker,
    /// The end of a step's interior on `bulk`.
    pub(crate) bulk_done: Marker,
    /// The end of this rank's device-copy sends (virtual ranks).
    pub(crate) pushed: Marker,
    /// The ends of the last two stencil steps (the host keeps at most two in flight).
    pub(crate) done: [Marker; 2],
    comm: Option<Communicator>,
}

impl Member {
    fn new(rank: usize, gpu: &Gpu, comm: Option<Communicator>) -> Result<Self> {
        let edge = gpu.new_stream_of_priority(true)?;
        let bulk = gpu.new_stream_of_priority(false)?;
        let _current = gpu.enter()?;
        Ok(Self {
            rank,
            gpu: gpu.clone(),
            edge,
            bulk,
            ready: Marker::new()?,
            bulk_done: Marker::new()?,
            pushed: Marker::new()?,
            done: [Marker::new()?, Marker::new()?],
            comm,
        })
    }
}

/// One copy between ranks: `bytes` bytes from `src` (on rank `from`'s GPU; read only there)
/// to `dst` (on rank `to`'s GPU; written only there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transfer {
    pub(crate) from: usize,
    pub(crate) src: u64,
    pub(crate) to: usize,
    pub(crate) dst: u64,
    pub(crate) bytes: usize,
}

/// What the ranks must agree on before a collective: the operation, the element type, the cut
/// of the array (`bounds`, as [`Shards::bounds`](super::Shards::bounds)), and whatever else
/// the operation's sends and receives depend on (`extra`: a stencil's taps, a step count).
pub(crate) struct Shape<'a> {
    pub(crate) op: &'a str,
    pub(crate) ty: ElemType,
    pub(crate) bounds: &'a [usize],
    pub(crate) extra: u64,
}

/// The words of a rank's [`Shape`] in an agreement: the operation's name hashed, the type,
/// the element count, the rank count of the cut, the cut hashed, this rank's shard (start and
/// end), `extra`, and whether the rank failed before the collective.
const SHAPE_WORDS: usize = 9;

/// FNV-1a over `words`: one word for a name or a cut, the same on every rank and host.
pub(crate) fn fingerprint(words: impl IntoIterator<Item = u64>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Every element type, in the order an agreement numbers them.
fn shape_types() -> impl Iterator<Item = ElemType> {
    ElemType::ALL.into_iter().chain(ElemType::HALF)
}

impl Shape<'_> {
    fn words(&self, rank: usize, failed: bool) -> [u64; SHAPE_WORDS] {
        let bounds = self.bounds;
        let at = |i: usize| bounds.get(i).copied().unwrap_or(0) as u64;
        [
            fingerprint(self.op.bytes().map(u64::from)),
            shape_types()
                .position(|t| t == self.ty)
                .map_or(u64::MAX, |i| i as u64),
            bounds.last().copied().unwrap_or(0) as u64,
            bounds.len().saturating_sub(1) as u64,
            fingerprint(bounds.iter().map(|&b| b as u64)),
            at(rank),
            at(rank + 1),
            self.extra,
            u64::from(failed),
        ]
    }
}

/// One rank's words of an agreement, for an error's message.
fn describe(w: &[u64]) -> String {
    let ty = shape_types()
        .nth(w[1] as usize)
        .map_or("an unknown type", |t| t.name());
    format!(
        "{} {ty} elements cut over {} ranks (cut {:016x}, its shard {}..{}, parameters {:016x})",
        w[2], w[3], w[4], w[5], w[6], w[7]
    )
}

/// The ranks this process drives, out of [`size`](Self::size), and their transport.
pub struct Team {
    size: usize,
    members: Vec<Member>,
    transport: Transport,
    /// Held by each operation that posts work on the members' streams or communicators (a
    /// collective, a stencil step, a capture): two threads sharing a team take turns, so no
    /// NCCL call interleaves with another's and no capture records another thread's work.
    serial: std::sync::Mutex<()>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("size", &self.size)
            .field("local_ranks", &self.local_ranks())
            .field("transport", &self.transport)
            .finish()
    }
}

impl Drop for Team {
    /// Drops the communicators together (one thread each), before the streams and markers.
    fn drop(&mut self) {
        let comms: Vec<Communicator> = self
            .members
            .iter_mut()
            .filter_map(|m| m.comm.take())
            .collect();
        nccl::drop_all(comms);
    }
}

/// `1, 2 and 5`.
fn list(ranks: &[usize]) -> String {
    match ranks {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!(
            "{} and {last}",
            rest.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn invalid(what: String) -> Error {
    Error::InvalidArgument { what }
}

impl Team {
    /// `ranks` virtual ranks on `gpu`, each with its own streams and buffers, exchanging by
    /// device copies: the decomposition's test transport, not a way to use several GPUs.
    pub fn virtual_ranks(gpu: &Gpu, ranks: usize) -> Result<Self> {
        if ranks == 0 || ranks > MAX_VIRTUAL_RANKS {
            return Err(invalid(format!(
                "virtual ranks: {ranks} asked for; one GPU takes 1 to {MAX_VIRTUAL_RANKS}"
            )));
        }
        let members = (0..ranks)
            .map(|r| Member::new(r, gpu, None))
            .collect::<Result<_>>()?;
        Ok(Self {
            size: ranks,
            members,
            transport: Transport::Virtual,
            serial: std::sync::Mutex::new(()),
        })
    }

    /// One rank per GPU of `gpus` (rank `i` on `gpus[i]`), all in this process, over NCCL;
    /// every wait bounded by [`nccl::default_timeout`].
    pub fn nccl(gpus: &[Gpu]) -> Result<Self> {
        Self::nccl_with_timeout(gpus, nccl::default_timeout())
    }

    /// [`nccl`](Self::nccl) with its time limit.
    pub fn nccl_with_timeout(gpus: &[Gpu], timeout: Duration) -> Result<Self> {
        if gpus.is_empty() {
            return Err(invalid("NCCL team: no GPU given".into()));
        }
        for (i, g) in gpus.iter().enumerate() {
            let ordinal = g.props().ordinal;
            if let Some(j) = gpus[..i].iter().position(|h| h.props().ordinal == ordinal) {
                return Err(invalid(format!(
                    "NCCL team: ranks {j} and {i} are both on device {ordinal}; NCCL takes one \
                     rank per GPU (Team::virtual_ranks puts several on one, for tests)"
                )));
            }
        }
        nccl::load_nccl()?;
        let id = UniqueId::new()?;
        let ranks: Vec<(usize, Gpu)> = gpus.iter().cloned().enumerate().collect();
        let comms = Communicator::init(id, gpus.len(), &ranks, timeout)?;
        let members = comms
            .into_iter()
            .zip(gpus)
            .map(|(c, g)| Member::new(c.rank(), g, Some(c)))
            .collect::<Result<_>>()?;
        Ok(Self {
            size: gpus.len(),
            members,
            transport: Transport::Nccl,
            serial: std::sync::Mutex::new(()),
        })
    }

    /// Rank `rank` of `size`, on `gpu`, joining the communicator of `id` (made by one rank with
    /// [`UniqueId::new`] and shared by the caller), within `timeout`.
    pub fn join(
        gpu: &Gpu,
        rank: usize,
        size: usize,
        id: UniqueId,
        timeout: Duration,
    ) -> Result<Self> {
        if rank >= size {
            return Err(invalid(format!("NCCL team: rank {rank} of {size} ranks")));
        }
        let comms = Communicator::init(id, size, &[(rank, gpu.clone())], timeout)?;
        let comm = comms.into_iter().next();
        Ok(Self {
            size,
            members: vec![Member::new(rank, gpu, comm)?],
            transport: Transport::Nccl,
            serial: std::sync::Mutex::new(()),
        })
    }

    /// This process's rank as a launcher starts it ([`rendezvous`](super::rendezvous)): its
    /// rank, the run's size and its device from torchrun's, Slurm's or Open MPI's variables;
    /// NCCL's unique id from rank 0 through `FERROCUDA_RENDEZVOUS` (a file every rank sees,
    /// or `tcp://host:port`), else through `MASTER_ADDR:MASTER_PORT`. Use a fresh file or port
    /// for every run. Every wait is bounded by [`nccl::default_timeout`].
    pub fn from_env() -> Result<Self> {
        let launch = Launch::from_env()?;
        let place = Place::from_env()?;
        let (rank, local) = (launch.rank, launch.local);
        let timeout = nccl::default_timeout();
        let gpu = Gpu::new(u32::try_from(local).unwrap_or(u32::MAX)).map_err(|e| {
            invalid(format!(
                "rank {rank}: device {local} (the local rank) cannot be opened ({e}); one rank \
                 per GPU of the host, numbered as CUDA_VISIBLE_DEVICES shows them"
            ))
        })?;
        nccl::load_nccl()?;
        let token = rendezvous::run_token(rendezvous::env_var);
        let id = rendezvous::share_id(&place, &launch, &token, timeout, UniqueId::new)?;
        let team = Self::join(&gpu, rank, launch.size, id, timeout);
        if rank == 0
            && team.is_ok()
            && let Place::File(path) = &place
        {
            // Every rank has read the id once the communicator formed.
            let _ = std::fs::remove_file(path);
        }
        team
    }

    /// How many ranks the team has, in all processes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The ranks this process drives, in order.
    pub fn local_ranks(&self) -> Vec<usize> {
        self.members.iter().map(|m| m.rank).collect()
    }

    /// How the ranks reach each other.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The GPU of local rank `rank`, if this process drives it.
    pub fn gpu_of(&self, rank: usize) -> Option<&Gpu> {
        self.members.iter().find(|m| m.rank == rank).map(|m| &m.gpu)
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// The team's turn ([`Team`]'s `serial`): a poisoned lock is taken all the same (the
    /// operation that panicked left no work half-posted that a wait would not end).
    pub(crate) fn serial(&self) -> std::sync::MutexGuard<'_, ()> {
        self.serial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Where local member `i` finds a gathered buffer: one for all virtual ranks (one GPU),
    /// one per member otherwise.
    pub(crate) fn gathered_of(&self, i: usize) -> usize {
        match self.transport {
            Transport::Virtual => 0,
            Transport::Nccl => i,
        }
    }

    /// How many gathered buffers a gather needs ([`gathered_of`](Self::gathered_of)).
    pub(crate) fn gathered_count(&self) -> usize {
        match self.transport {
            Transport::Virtual => 1,
            Transport::Nccl => self.members.len(),
        }
    }

    /// Makes every member's streams wait for what its GPU's own stream holds (the safe calls
    /// that wrote the inputs).
    pub(crate) fn enter(&self) -> Result<()> {
        for m in &self.members {
            let _current = m.gpu.enter()?;
            m.ready.record(m.gpu.stream())?;
            m.ready.wait_on(&m.edge)?;
            m.ready.wait_on(&m.bulk)?;
        }
        Ok(())
    }

    /// Joins every member's streams back to its GPU's own stream (an event wait, no host wait),
    /// so that anything still on them is waited for by whatever waits for the GPU's stream
    /// (a buffer's drop among them), then waits for them: NCCL members within the time limit.
    /// On the first failure every local communicator is aborted (its siblings would wait for
    /// it a whole time limit each), and every stream is still waited for.
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        let mut first = None;
        for m in &self.members {
            let joined = m.gpu.enter().and_then(|_current| {
                m.ready.record(&m.edge)?;
                m.ready.wait_on(m.gpu.stream())?;
                m.bulk_done.record(&m.bulk)?;
                m.bulk_done.wait_on(m.gpu.stream())
            });
            if let Err(e) = joined {
                first.get_or_insert(self.in_context(m, what, e));
            }
        }
        for m in &self.members {
            if first.is_some() {
                break;
            }
            if let Some(c) = &m.comm
                && let Err(e) = c
                    .wait_stream(&m.edge, what)
                    .and_then(|()| c.wait_stream(&m.bulk, what))
            {
                first = Some(e);
            }
        }
        if first.is_some() {
            nccl::abort_all(&self.comms());
        }
        for m in &self.members {
            // Aborted communicators' kernels have stopped: nothing here waits for a peer.
            let waited = m.gpu.enter().and_then(|_current| {
                // SAFETY: live streams of the current context.
                check_raw("cuStreamSynchronize", unsafe {
                    cust::sys::cuStreamSynchronize(m.edge.raw())
                })?;
                check_raw("cuStreamSynchronize", unsafe {
                    cust::sys::cuStreamSynchronize(m.bulk.raw())
                })?;
                m.gpu.synchronize()
            });
            if let Err(e) = waited {
                first.get_or_insert(self.in_context(m, what, e));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Waits until member `i`'s `marker` has passed (an NCCL member within the time limit,
    /// aborting every local communicator if it does not).
    pub(crate) fn wait_marker(&self, i: usize, marker: &Marker, what: &str) -> Result<()> {
        let m = &self.members[i];
        let waited = match &m.comm {
            Some(c) => c.wait_marker(marker, what),
            None => m.gpu.enter().and_then(|_current| {
                let (call, status) = marker.wait(m.gpu.wait_policy());
                check_raw(call, status).map_err(|e| self.in_context(m, what, e))
            }),
        };
        if waited.is_err() {
            nccl::abort_all(&self.comms());
        }
        waited
    }

    /// The local communicators.
    fn comms(&self) -> Vec<&Communicator> {
        self.members
            .iter()
            .filter_map(|m| m.comm.as_ref())
            .collect()
    }

    /// `e`, from member `m`'s work on `what`: on an NCCL team, an error of that rank naming
    /// the operation ([`nccl::in_context`]); virtual ranks keep the driver's error as it is.
    pub(crate) fn in_context(&self, m: &Member, what: &str, e: Error) -> Error {
        if m.comm.is_none() {
            return e;
        }
        nccl::in_context(e, what, m.rank, self.size)
    }

    /// Fills every gathered buffer (one per [`gathered_of`](Self::gathered_of)) with every
    /// rank's piece: rank `r`'s elements `bounds[r]..bounds[r + 1]`, which rank `r` wrote into
    /// its own gathered buffer. Virtual ranks share one buffer, already whole; NCCL ranks
    /// broadcast their pieces in one group (an all-gather of unequal pieces). Enqueued on the
    /// members' edge streams, after their GPU streams.
    pub(crate) fn share<T: Element>(
        &self,
        gathered: &mut [DeviceBuffer<T>],
        bounds: &[usize],
        what: &str,
    ) -> Result<()> {
        if self.transport == Transport::Virtual {
            return Ok(());
        }
        debug_assert_eq!(gathered.len(), self.members.len());
        debug_assert_eq!(bounds.len(), self.size + 1);
        let comms: Vec<&Communicator> = self
            .members
            .iter()
            .filter_map(|m| m.comm.as_ref())
            .collect();
        let enqueued = self
            .enter()
            .and_then(|()| nccl::group(&comms, what, || self.broadcasts(gathered, bounds)));
        // Waited for even after a failure: a broadcast already enqueued may still run.
        let finished = self.finish(what);
        enqueued.and(finished)
    }

    /// Before a collective of several processes: every rank learns every other's [`Shape`] of
    /// it, and whether the rank failed on its own before it (`local` is this process's
    /// result so far). All ranks then fail together: a rank that failed gives its own error,
    /// the others an error naming it; ranks whose shapes differ from rank 0's are named with
    /// both shapes, on every rank. Nothing to exchange when this process drives every rank
    /// (they share one call's arguments): `local` is returned as it is.
    pub(crate) fn agree(&self, shape: &Shape, local: Result<()>) -> Result<()> {
        if self.members.len() == self.size {
            return local;
        }
        let what = format!("agreement on {} (ncclBroadcast)", shape.op);
        let failed = local.is_err();
        let shared = (|| {
            let mut gathered = (0..self.gathered_count())
                .map(|i| {
                    self.members[i]
                        .gpu
                        .alloc::<u64>(SHAPE_WORDS * self.size, &what)
                })
                .collect::<Result<Vec<_>>>()?;
            for (i, m) in self.members.iter().enumerate() {
                let words = shape.words(m.rank, failed);
                let at = SHAPE_WORDS * m.rank;
                m.gpu.upload_into(
                    &mut gathered[self.gathered_of(i)].index_mut(at..at + SHAPE_WORDS),
                    &words,
                )?;
            }
            let bounds: Vec<usize> = (0..=self.size).map(|r| SHAPE_WORDS * r).collect();
            self.share(&mut gathered, &bounds, &what)?;
            self.members[0].gpu.download(&gathered[0])
        })();
        // This rank's own failure comes first: its peers have been told.
        local?;
        let all = shared?;
        let words = |r: usize| &all[SHAPE_WORDS * r..SHAPE_WORDS * (r + 1)];
        let gone: Vec<usize> = (0..self.size)
            .filter(|&r| words(r)[SHAPE_WORDS - 1] != 0)
            .collect();
        if !gone.is_empty() {
            return Err(invalid(format!(
                "{}: rank {} of {} failed before it (its error is on its own process); every \
                 rank stops here",
                shape.op,
                list(&gone),
                self.size
            )));
        }
        // The shard bounds differ by rank by design: compare everything else with rank 0's.
        let key = |w: &[u64]| [w[0], w[1], w[2], w[3], w[4], w[7]];
        let differ: Vec<usize> = (1..self.size)
            .filter(|&r| key(words(r)) != key(words(0)))
            .collect();
        if !differ.is_empty() {
            let mut text = format!(
                "{}: the ranks disagree on its shape; rank 0 has {}",
                shape.op,
                describe(words(0))
            );
            for &r in differ.iter().take(8) {
                text += &format!("; rank {r} has {}", describe(words(r)));
            }
            if differ.len() > 8 {
                text += &format!("; {} more ranks differ", differ.len() - 8);
            }
            return Err(invalid(text));
        }
        Ok(())
    }

    /// The broadcasts of [`share`](Self::share), inside its group.
    fn broadcasts<T: Element>(
        &self,
        gathered: &mut [DeviceBuffer<T>],
        bounds: &[usize],
    ) -> Result<()> {
        {
            for (m, buf) in self.members.iter().zip(gathered.iter_mut()) {
                let comm = m.comm.as_ref().expect("an NCCL member has a communicator");
                m.gpu.check_owned(buf)?;
                let _current = m.gpu.enter()?;
                let base = buf.as_device_ptr().as_raw();
                for root in 0..self.size {
                    let (a, b) = (bounds[root], bounds[root + 1]);
                    if a == b {
                        continue;
                    }
                    // SAFETY: elements a..b lie inside `buf` (the caller sized it for
                    // `bounds`), held mutably by `share`, which waits for it (`finish`).
                    unsafe {
                        comm.broadcast(
                            base + (a * size_of::<T>()) as u64,
                            (b - a) * size_of::<T>(),
                            root,
                            &m.edge,
                        )?;
                    }
                }
            }
            Ok(())
        }
    }

    /// Moves `transfers` between ranks, in their order (for each pair of ranks, the receiver
    /// takes the sender's transfers in the order they are listed), on the members' edge
    /// streams: after what each stream held (a sender's data must be written there, or waited
    /// for there), and before what it is given next. A transfer whose source or destination
    /// rank is not driven here is posted only on the side that is.
    ///
    /// # Safety
    /// For each transfer, `src` holds `bytes` readable bytes on the sender's GPU and `dst`
    /// `bytes` writable bytes on the receiver's, which nothing else touches until the streams
    /// are waited for.
    pub(crate) unsafe fn exchange(&self, transfers: &[Transfer], what: &str) -> Result<()> {
        match self.transport {
            Transport::Virtual => {
                for m in &self.members {
                    let _current = m.gpu.enter()?;
                    for t in transfers.iter().filter(|t| t.from == m.rank && t.bytes > 0) {
                        // SAFETY: the caller's contract; one context for all virtual ranks.
                        unsafe { copy_bytes_async(t.dst, t.src, t.bytes, &m.edge)? };
                    }
                    m.pushed.record(&m.edge)?;
                }
                for m in &self.members {
                    let _current = m.gpu.enter()?;
                    for t in transfers.iter().filter(|t| t.to == m.rank && t.bytes > 0) {
                        self.members[t.from].pushed.wait_on(&m.edge)?;
                    }
                }
                Ok(())
            }
            Transport::Nccl => {
                let comms: Vec<&Communicator> = self
                    .members
                    .iter()
                    .filter_map(|m| m.comm.as_ref())
                    .collect();
                nccl::group(&comms, what, || {
                    for m in &self.members {
                        let comm = m.comm.as_ref().expect("an NCCL member has a communicator");
                        let _current = m.gpu.enter()?;
                        for t in transfers.iter().filter(|t| t.bytes > 0) {
                            // SAFETY (both): the caller's contract.
                            if t.from == m.rank {
                                unsafe { comm.send(t.src, t.bytes, t.to, &m.edge)? };
                            }
                            if t.to == m.rank {
                                unsafe { comm.recv(t.dst, t.bytes, t.from, &m.edge)? };
                            }
                        }
                    }
                    Ok(())
                })
            }
        }
    }
}
