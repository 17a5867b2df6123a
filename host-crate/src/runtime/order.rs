//! How work that a safe call enqueues on a caller's stream stays ordered with everything else a
//! safe program can do to the same memory.
//!
//! A safe program touches device memory in three ways: ferrocuda's calls on the `Gpu`'s own
//! stream, ferrocuda's calls on a stream of its own (`_on` methods), and cust's synchronous
//! copies (`copy_from`, `copy_to`), which run on the legacy default stream. The `Gpu`'s stream
//! is a blocking stream, so CUDA orders it with the legacy stream both ways. A caller's
//! **non-blocking** stream is ordered with neither: a kernel there could still read an input
//! that a synchronous copy overwrites, or write an output that a download has already read.
//!
//! So a launch on a non-blocking stream is bracketed through the legacy stream: the stream
//! first waits for what the legacy stream (and with it every blocking stream) holds so far, and
//! the legacy stream then waits for the launch (`cuStreamWaitEvent` both ways, no host wait).
//! Everything enqueued later by a safe call, on any stream, and every synchronous copy is
//! ordered after the launch; the launch is ordered after everything before it. Two launches on
//! two non-blocking streams therefore run one after the other, never at once: the price of a
//! safe API that does not track each buffer (cudarc records events per buffer instead). Work a
//! caller enqueues on such a stream with `unsafe` code is the caller's to order.
use std::sync::Mutex;

use cust::stream::Stream;

use crate::runtime::error::{Result, check_raw};
use crate::runtime::event::Marker;

/// The legacy default stream's handle in the driver API.
const LEGACY_STREAM: cust::sys::CUstream = 1 as cust::sys::CUstream;

/// The two events of the bracket, made on first use (in the `Gpu`'s context) and reused: a
/// `cuStreamWaitEvent` waits for the record before it, so one pair serves every call, under a
/// lock held only while the four calls are enqueued.
#[derive(Default)]
pub(crate) struct LegacyOrder(Mutex<Option<(Marker, Marker)>>);

/// Whether `stream` was created with `CU_STREAM_NON_BLOCKING`.
fn is_non_blocking(stream: &Stream) -> Result<bool> {
    let mut flags = 0;
    // SAFETY: a live stream handle and a writable flags word.
    check_raw("cuStreamGetFlags", unsafe {
        cust::sys::cuStreamGetFlags(stream.as_inner(), &mut flags)
    })?;
    Ok(flags & cust::sys::CUstream_flags_enum::CU_STREAM_NON_BLOCKING as u32 != 0)
}

impl LegacyOrder {
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

    /// Runs `enqueue`, which puts work on `stream`, ordered as the module says. The context must
    /// be current.
    pub(crate) fn around<R>(
        &self,
        stream: &Stream,
        enqueue: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if !is_non_blocking(stream)? {
            return enqueue();
        }
        // The lock is held for each pair of calls, not across `enqueue`, which may itself enqueue
        // ordered work (a memset before a launch).
        self.with_markers(|before, _| {
            before.record_raw(LEGACY_STREAM)?;
            before.wait_on(stream)
        })?;
        let out = enqueue();
        // Also after a failed enqueue: part of it may be on the stream.
        self.with_markers(|_, after| {
            after.record(stream)?;
            after.wait_on_raw(LEGACY_STREAM)
        })?;
        out
    }
}
