//! A CUDA stream (流) of a [`Gpu`](crate::Gpu)'s context, as the library hands it out.
//!
//! A stream is a handle shared by its owner and by the library's record of which streams used
//! which buffers (`runtime::track`): the driver's stream is destroyed when the last of them lets
//! go, so that a buffer's later user can still make the stream it was used on wait-able (an
//! event recorded there) after the program dropped its `Stream`.
use std::sync::Arc;

use cust::context::Context;

use crate::runtime::error::{Result, check_raw};

/// The driver's stream and the context it lives in.
pub(crate) struct StreamHandle {
    raw: cust::sys::CUstream,
    /// A retain of the device's primary context, released after the stream is destroyed.
    context: Context,
}

// SAFETY: a stream handle may be used from any thread with its context current (every use
// below makes it current first, or is a call the driver allows from any thread).
unsafe impl Send for StreamHandle {}
// SAFETY: as above; the handle itself is never written after creation.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    pub(crate) fn raw(&self) -> cust::sys::CUstream {
        self.raw
    }

    pub(crate) fn make_current(&self) -> Result<()> {
        use crate::runtime::error::CudaContext;
        cust::context::CurrentContext::set_current(&self.context).call("cuCtxSetCurrent")
    }
}

impl Drop for StreamHandle {
    /// Destroys the stream in its own context (the dropping thread may never have used it);
    /// work still on it completes (`cuStreamDestroy` does not wait, nor cancel).
    fn drop(&mut self) {
        if self.make_current().is_ok() {
            // SAFETY: made by `cuStreamCreate*`, destroyed once, here.
            let _ = unsafe { cust::sys::cuStreamDestroy_v2(self.raw) };
        }
    }
}

/// A stream of a GPU's context: the `_on` methods' argument. From [`Gpu::stream`] (the GPU's
/// own) or [`Gpu::new_stream`] (a new non-blocking one).
///
/// [`Gpu::stream`]: crate::Gpu::stream
/// [`Gpu::new_stream`]: crate::Gpu::new_stream
pub struct Stream(Arc<StreamHandle>);

impl Stream {
    /// A new stream of `context` (current on this thread) with the driver's `flags` and, when
    /// given, `priority`.
    pub(crate) fn create(context: Context, flags: u32, priority: Option<i32>) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: a writable handle; the context is current (the caller's contract).
        let status = unsafe {
            match priority {
                Some(p) => cust::sys::cuStreamCreateWithPriority(&mut raw, flags, p),
                None => cust::sys::cuStreamCreate(&mut raw, flags),
            }
        };
        check_raw("cuStreamCreate", status)?;
        Ok(Self(Arc::new(StreamHandle { raw, context })))
    }

    /// The driver's handle (`CUstream`), for driver calls the library does not wrap.
    pub fn as_inner(&self) -> cust::sys::CUstream {
        self.0.raw
    }

    /// Another handle of the same stream (the driver's stream lives until both are dropped).
    pub(crate) fn share(&self) -> Stream {
        Stream(self.0.clone())
    }

    /// The shared handle, for the record of which stream used which buffer.
    pub(crate) fn handle(&self) -> &Arc<StreamHandle> {
        &self.0
    }

    /// Blocks the host until everything enqueued on this stream so far has finished; an error
    /// of that work is returned (and names `cuStreamSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        self.0.make_current()?;
        // SAFETY: a live stream handle; its context is current.
        check_raw("cuStreamSynchronize", unsafe {
            cust::sys::cuStreamSynchronize(self.0.raw)
        })
    }

    /// Whether everything enqueued on this stream so far has finished (`cuStreamQuery`),
    /// without waiting; an error of that work is returned.
    pub fn query(&self) -> Result<bool> {
        self.0.make_current()?;
        // SAFETY: a live stream handle; its context is current.
        let status = unsafe { cust::sys::cuStreamQuery(self.0.raw) };
        if status == cust::sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check_raw("cuStreamQuery", status).map(|()| true)
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Stream").field(&self.as_inner()).finish()
    }
}
