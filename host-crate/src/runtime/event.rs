//! A timing-free CUDA event (事件) marking a point in a stream: what a later stream waits for
//! (`cuStreamWaitEvent`), what the host asks or blocks on. cust's `Event` cannot make a stream
//! wait without giving the event up, so this one is the raw handle.
use crate::runtime::stream::Stream;

use crate::runtime::error::{Result, check_raw};
use crate::runtime::wait::Wait;

/// An event created with `CU_EVENT_DISABLE_TIMING`; each `record` moves it to the end of what
/// a stream holds so far.
pub struct Marker(cust::sys::CUevent);

// SAFETY: an event handle may be used from any thread with its context current.
unsafe impl Send for Marker {}

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
            cust::sys::cuEventRecord(self.0, stream.as_inner())
        })
    }

    /// Makes `stream` wait for the last record.
    pub fn wait_on(&self, stream: &Stream) -> Result<()> {
        // SAFETY: live handles.
        check_raw("cuStreamWaitEvent", unsafe {
            cust::sys::cuStreamWaitEvent(stream.as_inner(), self.0, 0)
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
