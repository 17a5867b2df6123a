//! CUDA events (事件): a point in a stream that a later stream waits for (`cuStreamWaitEvent`),
//! that the host asks about or blocks on, and, with timing, a time stamp.
//!
//! [`Event`] is the public one (made by [`Gpu::new_event`](crate::Gpu::new_event)); `Marker`
//! is the library's own timing-free event, made in the current context.
use cust::context::Context;

use crate::runtime::current::Current;
use crate::runtime::error::Error;
use crate::runtime::stream::Stream;

use crate::runtime::error::{Result, check_raw};
use crate::runtime::wait::Wait;

/// An event created with `CU_EVENT_DISABLE_TIMING`; each `record` moves it to the end of what
/// a stream holds so far.
pub(crate) struct Marker(cust::sys::CUevent);

// SAFETY: an event handle may be used from any thread with its context current.
unsafe impl Send for Marker {}
// SAFETY: as above: the driver's event calls are thread-safe; the handle is never written.
unsafe impl Sync for Marker {}

impl Marker {
    /// A new event, in the current context.
    pub fn new() -> Result<Self> {
        let mut event = std::ptr::null_mut();
        // SAFETY: a writable handle; flag 2 is CU_EVENT_DISABLE_TIMING.
        let status = unsafe { cust::sys::cuEventCreate(&mut event, 2) };
        check_raw("cuEventCreate", status)?;
        Ok(Self(event))
    }

    /// Marks the end of what `stream` holds now.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: live handles.
        check_raw("cuEventRecord", unsafe {
            cust::sys::cuEventRecord(self.0, stream.raw())
        })
    }

    /// [`record`](Self::record) on a raw stream handle of this context.
    pub(crate) fn record_raw(&self, stream: cust::sys::CUstream) -> Result<()> {
        // SAFETY: live handles (the caller's).
        check_raw("cuEventRecord", unsafe {
            cust::sys::cuEventRecord(self.0, stream)
        })
    }

    /// [`wait_on`](Self::wait_on) for a raw stream handle of this context.
    pub(crate) fn wait_raw(&self, stream: cust::sys::CUstream) -> Result<()> {
        // SAFETY: live handles (the caller's).
        check_raw("cuStreamWaitEvent", unsafe {
            cust::sys::cuStreamWaitEvent(stream, self.0, 0)
        })
    }

    /// Makes `stream` wait for the last record.
    pub fn wait_on(&self, stream: &Stream) -> Result<()> {
        // SAFETY: live handles.
        check_raw("cuStreamWaitEvent", unsafe {
            cust::sys::cuStreamWaitEvent(stream.raw(), self.0, 0)
        })
    }

    /// `cuEventQuery`: `CUDA_SUCCESS` once the last record completed, `CUDA_ERROR_NOT_READY`
    /// before, or the error of the work it waits for.
    pub(crate) fn query(&self) -> cust::sys::CUresult {
        // SAFETY: a live event handle.
        unsafe { cust::sys::cuEventQuery(self.0) }
    }

    /// Waits, as `wait` says, until the last record completed; returns the call that answered
    /// and its status (the error of the work waited for, if it failed).
    pub(crate) fn wait(&self, wait: Wait) -> (&'static str, cust::sys::CUresult) {
        wait.until(
            ("cuEventQuery", &mut || self.query()),
            // SAFETY: a live event handle.
            ("cuEventSynchronize", &mut || unsafe {
                cust::sys::cuEventSynchronize(self.0)
            }),
        )
    }

    /// Blocks the host until the last record completed (errors ignored: used on the way out).
    pub(crate) fn synchronize(&self) {
        // SAFETY: a live event handle.
        let _ = unsafe { cust::sys::cuEventSynchronize(self.0) };
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        let _ = unsafe { cust::sys::cuEventDestroy_v2(self.0) };
    }
}

/// A CUDA event of a [`Gpu`](crate::Gpu)'s context, from
/// [`Gpu::new_event`](crate::Gpu::new_event): [`record`](Self::record) it on a stream, then make
/// another stream wait for it ([`Stream::wait_event`]), ask whether the work before it is done
/// ([`query`](Self::query)), block on it ([`synchronize`](Self::synchronize)), or, for two timing
/// events, read the GPU time between them ([`elapsed_ms`](Self::elapsed_ms)).
///
/// `Send + Sync`: the driver's event handles may be used from any thread. The event keeps its
/// context alive (a retain of the device's primary context).
pub struct Event {
    raw: cust::sys::CUevent,
    timing: bool,
    /// Released after the event is destroyed (fields drop after `drop`).
    context: Context,
}

// SAFETY: an event handle may be used from any thread, with its context current (every call
// below makes it current first).
unsafe impl Send for Event {}
// SAFETY: as above; the handle is never written after creation.
unsafe impl Sync for Event {}

impl Event {
    /// A new event in `context`, which is current on this thread; `timing` keeps time stamps
    /// (`CU_EVENT_DEFAULT`), else `CU_EVENT_DISABLE_TIMING` (cheaper to record and wait for).
    pub(crate) fn create(context: Context, timing: bool) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        let flags = if timing { 0 } else { 2 };
        // SAFETY: a writable handle; the context is current (the caller's contract).
        check_raw("cuEventCreate", unsafe {
            cust::sys::cuEventCreate(&mut raw, flags)
        })?;
        Ok(Self {
            raw,
            timing,
            context,
        })
    }

    /// Makes the event's context current for as long as the guard lives.
    fn enter(&self) -> Result<Current> {
        Current::enter(self.context.as_raw())
    }

    /// The driver's handle.
    pub(crate) fn raw(&self) -> cust::sys::CUevent {
        self.raw
    }

    /// The driver's handle (a `CUevent`, the runtime API's `cudaEvent_t`), lent for calls the
    /// library does not make (another library waiting for ferrocuda's work, `cuStreamWaitEvent`
    /// on a stream of its own). It stays this event's: valid while the `Event` lives, and
    /// destroyed by its drop.
    #[must_use]
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.raw.cast()
    }

    /// Whether it keeps time stamps.
    pub fn is_timing(&self) -> bool {
        self.timing
    }

    /// Moves the event to the end of what `stream` holds now (`cuEventRecord`). The stream
    /// must be of the event's context.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        let _current = self.enter()?;
        // SAFETY: live handles; the context is current.
        check_raw("cuEventRecord", unsafe {
            cust::sys::cuEventRecord(self.raw, stream.raw())
        })
    }

    /// Whether the work before the last record has finished (an event never recorded has);
    /// an error of that work is returned.
    pub fn query(&self) -> Result<bool> {
        let _current = self.enter()?;
        // SAFETY: a live event handle; its context is current.
        let status = unsafe { cust::sys::cuEventQuery(self.raw) };
        if status == cust::sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check_raw("cuEventQuery", status).map(|()| true)
    }

    /// Blocks the host until the work before the last record has finished.
    pub fn synchronize(&self) -> Result<()> {
        let _current = self.enter()?;
        // SAFETY: a live event handle; its context is current.
        check_raw("cuEventSynchronize", unsafe {
            cust::sys::cuEventSynchronize(self.raw)
        })
    }

    /// Milliseconds of GPU time from this event's last record to `end`'s
    /// (`cuEventElapsedTime`, about half a microsecond of resolution). Both must be timing
    /// events, recorded, and finished (else the driver answers `CUDA_ERROR_NOT_READY`).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            return Err(Error::InvalidArgument {
                what: "Event::elapsed_ms: both events must be made with timing \
                       (Gpu::new_event(true))"
                    .into(),
            });
        }
        let _current = self.enter()?;
        let mut ms = 0.0f32;
        // SAFETY: live handles; a writable float; the context is current.
        check_raw("cuEventElapsedTime", unsafe {
            cust::sys::cuEventElapsedTime(&mut ms, self.raw, end.raw)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if let Ok(_current) = self.enter() {
            // SAFETY: created by cuEventCreate, destroyed once, here.
            let _ = unsafe { cust::sys::cuEventDestroy_v2(self.raw) };
        }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("timing", &self.timing)
            .finish()
    }
}

impl Stream {
    /// Makes the work enqueued on this stream from now on wait until `event`'s last record has
    /// completed (`cuStreamWaitEvent`: the host does not wait). An event never recorded is
    /// complete.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let _current = self.handle().enter()?;
        // SAFETY: live handles; the context is current.
        check_raw("cuStreamWaitEvent", unsafe {
            cust::sys::cuStreamWaitEvent(self.raw(), event.raw(), 0)
        })
    }
}
