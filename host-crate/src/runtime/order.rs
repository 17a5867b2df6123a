//! How work that a safe call enqueues on a caller's stream stays ordered with everything else a
//! safe program can do to the same memory.
//!
//! A safe program touches device memory in three ways: ferrocuda's calls on the `Gpu`'s own
//! stream, ferrocuda's calls on a stream of its own (`_on` methods), and the synchronous copies
//! of `Gpu::upload_into` and `Gpu::download`, which run on the legacy default stream. The `Gpu`'s stream
//! is a blocking stream, so CUDA orders it with the legacy stream both ways. A caller's stream
//! is ordered with neither when it is non-blocking, and with the `Gpu`'s stream not at all
//! (two blocking streams only meet at the legacy stream): a kernel there could still read an
//! input that a synchronous copy overwrites, write an output that a download has already read,
//! or race a reduction on the `Gpu`'s stream that reads its result.
//!
//! So a launch on a caller's stream is bracketed through the `Gpu`'s own stream: the caller's
//! stream first waits for what the `Gpu`'s stream holds so far, and the `Gpu`'s stream then
//! waits for the launch (`cuStreamWaitEvent` both ways, no host wait). Every safe call on any
//! stream, and every synchronous copy, is then ordered after the launch, and the launch after
//! everything before it. Two safe calls on two caller streams are therefore ordered whenever
//! Rust's borrows order them: a call that writes a buffer holds it mutably until it returns,
//! and its launch is joined to the `Gpu`'s stream before then, so any later call on the buffer
//! waits for it. Calls made at the same time from two threads (which can only share buffers
//! they both read) may overlap on the device. Serialising through one stream is the price of a
//! safe API that does not track each buffer (cudarc records events per buffer instead). Work a
//! caller enqueues on its streams with `unsafe` code is the caller's to order.
use std::sync::Mutex;

use crate::runtime::stream::Stream;

use crate::runtime::error::Result;
use crate::runtime::event::Marker;

/// The two events of the bracket, made on first use (in the `Gpu`'s context) and reused: a
/// `cuStreamWaitEvent` waits for the record before it, so one pair serves every call, under a
/// lock held only while a record and its wait are enqueued.
#[derive(Default)]
pub(crate) struct StreamOrder(Mutex<Option<(Marker, Marker)>>);

impl StreamOrder {
    fn with_markers(&self, f: impl FnOnce(&Marker, &Marker) -> Result<()>) -> Result<()> {
        let mut markers = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if markers.is_none() {
            *markers = Some((Marker::new()?, Marker::new()?));
        }
        let (before, after) = markers.as_ref().expect("made above");
        f(before, after)
    }

    /// Runs `enqueue`, which puts work on `stream`, ordered with `own` (the `Gpu`'s stream) as
    /// the module says. The context must be current.
    pub(crate) fn around<R>(
        &self,
        own: &Stream,
        stream: &Stream,
        enqueue: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if stream.as_inner() == own.as_inner() {
            return enqueue();
        }
        // The lock is held for each record and its wait, not across `enqueue`, which may itself
        // enqueue ordered work (a memset before a launch).
        self.with_markers(|before, _| {
            before.record(own)?;
            before.wait_on(stream)
        })?;
        let out = enqueue();
        // Also after a failed enqueue: part of it may be on the stream.
        let joined = self.with_markers(|_, after| {
            after.record(stream)?;
            after.wait_on(own)
        });
        if joined.is_err() {
            // The `Gpu`'s stream cannot wait for the launch: the host does, so that nothing the
            // caller does after the error races it.
            let _ = stream.cust().synchronize();
        }
        joined?;
        out
    }
}
