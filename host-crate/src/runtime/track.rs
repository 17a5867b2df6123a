//! Which stream used which buffer: how safe calls on different streams overlap on the GPU and
//! still never race.
//!
//! Every allocation of a [`Gpu`](crate::Gpu) has an entry here: the streams whose work read or
//! wrote it and has not been waited for by a later user. A safe call on stream `S` declares
//! what it reads and writes ([`Access`]); before it enqueues anything, `S` is made to wait
//! (an event recorded on the other stream, then `cuStreamWaitEvent`; no host wait) for
//! - the other streams that *wrote* a buffer the call reads (read after write), and
//! - the other streams that *read or wrote* a buffer the call writes (write after read, write
//!   after write),
//!
//! and after it enqueued its work, the call is entered as the buffer's newest user on `S`. Reads
//! on two streams do not wait for each other, and calls on two streams over different buffers
//! do not wait at all: they overlap, as cudarc's per-buffer events let them. Freeing a buffer
//! (its drop) makes the GPU's own stream wait for every stream still entered for it, then frees
//! it in stream order (`cuMemFreeAsync`): a drop never waits on the host.
//!
//! A call on a caller's stream records one event after its work, which later users of its
//! buffers on other streams wait for: they wait for that call, not for what its stream took on
//! since (a pipeline that hands a buffer from one stream to the next keeps both busy). Calls on
//! the GPU's own stream record nothing: a program that keeps to one stream pays a map lookup
//! per buffer and no driver call. When another stream needs to wait for the GPU's stream, an
//! event is recorded there at that moment, which covers what it took on since, too: more
//! waiting than needed, never less, and never a cycle (an event only ever stands for work
//! already enqueued).
//!
//! A call is entered after its work is enqueued (an event recorded later covers it), also when
//! it fails or panics half-way (a guard's drop enters it). What it waited for is taken off the
//! buffer's list then, but not what other threads entered meanwhile: only calls over disjoint
//! views of one buffer can run at once (a writer holds its view mutably from before its waits
//! until it is entered), and both stay on the list for the next user.
//!
//! The granularity is the allocation: two views of one buffer written on two streams one after
//! the other are ordered, though they do not overlap. Work enqueued with `unsafe` code (a kernel
//! launch, a raw copy) is not seen unless the caller declares it with
//! [`Gpu::uses_on`](crate::Gpu::uses_on).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::runtime::error::Result;
use crate::runtime::event::Marker;
use crate::runtime::memory::DeviceSlice;
use crate::runtime::pointer::DeviceCopy;
use crate::runtime::stream::{Stream, StreamHandle};

/// What a call does to one buffer (or part of one): read it, or write it. Made from a borrow
/// of the slice, so that a write can only be declared by whoever holds it mutably.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    address: u64,
    write: bool,
}

impl Access {
    /// The call reads `slice`.
    pub fn read<T: DeviceCopy>(slice: &DeviceSlice<T>) -> Self {
        Self {
            address: slice.as_device_ptr().as_raw(),
            write: false,
        }
    }

    /// The call writes `slice` (and may read it).
    pub fn write<T: DeviceCopy>(slice: &mut DeviceSlice<T>) -> Self {
        Self {
            address: slice.as_device_ptr().as_raw(),
            write: true,
        }
    }

    /// An access to the memory at `address`, for the library's prepared runs, which keep raw
    /// addresses of slices they borrow (a write only of one they borrow mutably).
    pub(crate) fn raw(address: u64, write: bool) -> Self {
        Self { address, write }
    }

    /// Whether it is a write.
    pub fn is_write(self) -> bool {
        self.write
    }
}

/// One stream's not-yet-waited-for use of an allocation.
struct Use {
    stream: Arc<StreamHandle>,
    write: bool,
    /// When it was entered ([`State::entries`] then).
    seq: u64,
    /// The event recorded on the stream right after the call (none on the GPU's own stream,
    /// or if it could not be recorded: then a waiter records one when it waits).
    done: Option<Arc<Marker>>,
}

/// An allocation's end address and its users.
struct Allocation {
    end: u64,
    uses: Vec<Use>,
}

/// Above this many users of one allocation, the idle ones are dropped (a `cuStreamQuery` each).
const PRUNE_ABOVE: usize = 8;

#[derive(Default)]
struct State {
    /// By base address.
    allocations: BTreeMap<u64, Allocation>,
    /// The event recorded on a stream that another must wait for: a `cuStreamWaitEvent`
    /// waits for the record before it, so one event serves every wait (made on first use).
    marker: Option<Marker>,
    /// How many calls were entered so far.
    entries: u64,
    /// How many cross-stream waits were enqueued so far.
    joins: u64,
    /// Events no use holds any more, for the next calls to record.
    spare: Vec<Marker>,
}

/// At most this many spare events are kept.
const SPARE_EVENTS: usize = 64;

/// The record of one `Gpu`'s allocations and their users.
#[derive(Default)]
pub(crate) struct Tracker(Mutex<State>);

impl State {
    /// Makes `to` wait for what `from` holds now. The context is current.
    fn join(&mut self, from: &StreamHandle, to: &StreamHandle) -> Result<()> {
        if self.marker.is_none() {
            self.marker = Some(Marker::new()?);
        }
        let marker = self.marker.as_ref().expect("made above");
        marker.record_raw(from.raw())?;
        marker.wait_raw(to.raw())?;
        self.joins += 1;
        Ok(())
    }

    /// Makes `to` wait for a use of `from`: its event when it has one, else what `from` holds
    /// now (nothing, for an adopted stream handed back: its work had finished then).
    fn wait_for(
        &mut self,
        from: &StreamHandle,
        done: Option<&Arc<Marker>>,
        to: &StreamHandle,
    ) -> Result<()> {
        if done.is_none() && from.is_released() {
            return Ok(());
        }
        match done {
            Some(done) => {
                done.wait_raw(to.raw())?;
                self.joins += 1;
                Ok(())
            }
            None => self.join(from, to),
        }
    }

    /// Keeps an event no use holds any more for a later call.
    fn recycle(&mut self, done: Option<Arc<Marker>>) {
        if let Some(marker) = done.and_then(|d| Arc::try_unwrap(d).ok())
            && self.spare.len() < SPARE_EVENTS
        {
            self.spare.push(marker);
        }
    }

    /// An event recorded on `stream` now (`None` if that fails: the waiter records one).
    fn record_after(&mut self, stream: &StreamHandle) -> Option<Arc<Marker>> {
        let marker = match self.spare.pop() {
            Some(marker) => marker,
            None => Marker::new().ok()?,
        };
        marker.record_raw(stream.raw()).ok()?;
        Some(Arc::new(marker))
    }

    /// The allocation holding `address`, if it is one of this GPU's.
    fn find(&mut self, address: u64) -> Option<&mut Allocation> {
        let (_, allocation) = self.allocations.range_mut(..=address).next_back()?;
        (address < allocation.end).then_some(allocation)
    }
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Enters a new allocation of `bytes` bytes at `address` (not 0).
    pub(crate) fn insert(&self, address: u64, bytes: usize) {
        self.lock().allocations.insert(
            address,
            Allocation {
                end: address + bytes.max(1) as u64,
                uses: Vec::new(),
            },
        );
    }

    /// Removes the allocation at `address` and returns the stream to free it on: the stream of
    /// its latest use (the GPU's own when it has none), made to wait for every other stream
    /// still entered for it and for the GPU's stream (where `unsafe` launches that used it may
    /// be), so that a free enqueued there next runs after all of them. The other streams do not
    /// wait for anything: a drop adds no join between the program's streams. The context is
    /// current.
    pub(crate) fn remove(&self, address: u64, own: &Stream) -> Result<Arc<StreamHandle>> {
        let mut state = self.lock();
        let Some(allocation) = state.allocations.remove(&address) else {
            return Ok(own.handle().clone());
        };
        // Never a stream another library owns: it may be handed back and destroyed before the
        // free, enqueued after this returns, reaches it.
        let target = allocation
            .uses
            .iter()
            .max_by_key(|u| u.seq)
            .filter(|u| u.stream.is_owned())
            .map_or_else(|| own.handle().clone(), |u| u.stream.clone());
        if !Arc::ptr_eq(&target, own.handle()) {
            state.join(own.handle(), &target)?;
        }
        for (from, done) in
            latest_per_stream(&allocation.uses, |u| !Arc::ptr_eq(&u.stream, &target))
        {
            state.wait_for(&from, done.as_ref(), &target)?;
        }
        for u in allocation.uses {
            state.recycle(u.done);
        }
        Ok(target)
    }

    /// Makes `stream` wait, before a call on it enqueues work that makes `accesses`, for `own`
    /// (the GPU's stream, where `unsafe` launches and the synchronous copies go) when it is
    /// another stream, and for the other streams the accesses conflict with. Returns what
    /// [`end`](Self::end) takes. The context is current.
    pub(crate) fn begin(&self, own: &Stream, stream: &Stream, accesses: &[Access]) -> Result<u64> {
        let mut state = self.lock();
        let to = stream.handle();
        let mut joined: Vec<*const StreamHandle> = Vec::new();
        if !Arc::ptr_eq(to, own.handle()) {
            state.join(own.handle(), to)?;
            joined.push(Arc::as_ptr(own.handle()));
        }
        // Per stream, the latest conflicting use: its event covers the earlier ones there.
        let mut waits: Vec<(Arc<StreamHandle>, Option<Arc<Marker>>, u64)> = Vec::new();
        for access in accesses {
            let Some(allocation) = state.find(access.address) else {
                continue;
            };
            for u in allocation.uses.iter().filter(|u| {
                (access.write || u.write)
                    && !Arc::ptr_eq(&u.stream, to)
                    && !joined.contains(&Arc::as_ptr(&u.stream))
            }) {
                latest_of(&mut waits, u);
            }
        }
        for (from, done, _) in &waits {
            state.wait_for(from, done.as_ref(), to)?;
        }
        Ok(state.entries)
    }

    /// Enters `accesses` as `stream`'s, after the call that [`begin`](Self::begin) answered
    /// `seen` for enqueued its work: a write replaces every user entered by `seen` (each was
    /// waited for, or is `stream`), a read joins the readers.
    ///
    /// With `record` false (work the caller enqueues after this, `Gpu::uses_on`), no event is
    /// recorded: a later waiter records one on the stream when it waits, which covers that work.
    pub(crate) fn end(
        &self,
        own: &Stream,
        stream: &Stream,
        accesses: &[Access],
        seen: u64,
        record: bool,
    ) {
        let mut state = self.lock();
        state.entries += 1;
        let seq = state.entries;
        let to = stream.handle();
        let done = if record
            && !Arc::ptr_eq(to, own.handle())
            && accesses.iter().any(|a| state.find(a.address).is_some())
        {
            state.record_after(to)
        } else {
            None
        };
        // Events no use holds any more; no allocation unless one is retired (never on the
        // GPU's own stream, whose uses hold none).
        let mut retired: Vec<Arc<Marker>> = Vec::new();
        for access in accesses {
            let Some(allocation) = state.find(access.address) else {
                continue;
            };
            if access.write {
                allocation.uses.retain_mut(|u| {
                    let keep = u.seq > seen;
                    if !keep {
                        retired.extend(u.done.take());
                    }
                    keep
                });
            }
            match allocation
                .uses
                .iter_mut()
                .find(|u| Arc::ptr_eq(&u.stream, to) && u.write == access.write)
            {
                Some(u) => {
                    u.seq = seq;
                    retired.extend(std::mem::replace(&mut u.done, done.clone()));
                }
                None => allocation.uses.push(Use {
                    stream: to.clone(),
                    write: access.write,
                    seq,
                    done: done.clone(),
                }),
            }
            if allocation.uses.len() > PRUNE_ABOVE {
                allocation.uses.retain_mut(|u| {
                    let keep = u.seq == seq || !idle(&u.stream);
                    if !keep {
                        retired.extend(u.done.take());
                    }
                    keep
                });
            }
        }
        drop(done);
        for done in retired {
            state.recycle(Some(done));
        }
    }
}

/// Per stream among `uses` that `keep` selects, the event of its latest use (by `seq`), or
/// `None` when that use has none (the waiter records one on the stream then).
fn latest_per_stream<'a>(
    uses: impl IntoIterator<Item = &'a Use>,
    keep: impl Fn(&Use) -> bool,
) -> Vec<(Arc<StreamHandle>, Option<Arc<Marker>>)> {
    let mut latest = Vec::new();
    for u in uses.into_iter().filter(|u| keep(u)) {
        latest_of(&mut latest, u);
    }
    latest.into_iter().map(|(s, d, _)| (s, d)).collect()
}

/// Folds `u` into `latest`, which keeps one entry per stream: its latest use's event and seq.
fn latest_of(latest: &mut Vec<(Arc<StreamHandle>, Option<Arc<Marker>>, u64)>, u: &Use) {
    match latest.iter_mut().find(|l| Arc::ptr_eq(&l.0, &u.stream)) {
        Some(l) if u.seq > l.2 => {
            l.1 = u.done.clone();
            l.2 = u.seq;
        }
        Some(_) => {}
        None => latest.push((u.stream.clone(), u.done.clone(), u.seq)),
    }
}

impl Tracker {
    /// Forgets every use on `stream`, whose work has all finished (an adopted stream handed
    /// back): later calls wait for nothing there, and frees go on another stream.
    pub(crate) fn forget(&self, stream: &Arc<StreamHandle>) {
        let mut state = self.lock();
        let mut retired = Vec::new();
        for allocation in state.allocations.values_mut() {
            allocation.uses.retain_mut(|u| {
                let keep = !Arc::ptr_eq(&u.stream, stream);
                if !keep {
                    retired.extend(u.done.take());
                }
                keep
            });
        }
        for done in retired {
            state.recycle(Some(done));
        }
    }

    /// How many times a stream was made to wait for another so far.
    pub(crate) fn joins(&self) -> u64 {
        self.lock().joins
    }
}

/// Whether `stream` has finished everything enqueued on it (errors count as not idle: the entry
/// stays, and the next waiter meets the error).
fn idle(stream: &StreamHandle) -> bool {
    // SAFETY: a live stream handle (the `Arc` keeps it); the context is current.
    unsafe { cust::sys::cuStreamQuery(stream.raw()) == cust::sys::CUresult::CUDA_SUCCESS }
}
