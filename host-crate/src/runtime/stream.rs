//! A CUDA stream (流) of a [`Gpu`](crate::Gpu)'s context, as the library hands it out.
//!
//! A stream is a handle shared by its owner and by the library's record of which streams used
//! which buffers (`runtime::track`): the driver's stream is destroyed when the last of them lets
//! go, so that a buffer's later user can still make the stream it was used on wait-able (an
//! event recorded there) after the program dropped its `Stream`.
use std::sync::Arc;

use cust::context::Context;

use crate::runtime::current::Current;
use crate::runtime::error::{Result, check_raw};

/// The driver's stream and the context it lives in.
pub(crate) struct StreamHandle {
    raw: cust::sys::CUstream,
    /// Made by ferrocuda, and destroyed with the last handle; `false` for a stream adopted from
    /// another library ([`Stream::adopt`]), which its owner destroys.
    owned: bool,
    /// An adopted stream handed back to its owner: everything on it had finished then, and the
    /// driver's handle may be gone; a wait for it is a wait for nothing.
    released: std::sync::atomic::AtomicBool,
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

    /// Whether ferrocuda made it (and destroys it), rather than adopted it.
    pub(crate) fn is_owned(&self) -> bool {
        self.owned
    }

    /// Whether it is an adopted stream handed back: nothing of ferrocuda's is left on it.
    pub(crate) fn is_released(&self) -> bool {
        self.released.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Makes the stream's context current for as long as the guard lives.
    pub(crate) fn enter(&self) -> Result<Current> {
        Current::enter(self.context.as_raw())
    }
}

impl Drop for StreamHandle {
    /// Destroys the stream in its own context (the dropping thread may never have used it);
    /// work still on it completes (`cuStreamDestroy` does not wait, nor cancel).
    fn drop(&mut self) {
        if self.owned
            && let Ok(_current) = self.enter()
        {
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
        Ok(Self(Arc::new(StreamHandle {
            raw,
            owned: true,
            released: std::sync::atomic::AtomicBool::new(false),
            context,
        })))
    }

    /// A stream another library made, `raw`, of `context`; never destroyed by ferrocuda.
    ///
    /// # Safety
    /// As [`Gpu::adopt_stream`](crate::Gpu::adopt_stream).
    pub(crate) unsafe fn adopt(context: Context, raw: cust::sys::CUstream) -> Self {
        Self(Arc::new(StreamHandle {
            raw,
            owned: false,
            released: std::sync::atomic::AtomicBool::new(false),
            context,
        }))
    }

    /// Hands an adopted stream back: waits for everything on it, then marks every handle of
    /// it released, so that a run that launched on it finds nothing to wait for. The record of
    /// buffers' uses forgets it next (the drop of an adopted `GpuStream`).
    pub(crate) fn release(&self) -> Result<()> {
        let _current = self.0.enter()?;
        // SAFETY: a live stream (the adoption's contract holds until this returns); its
        // context is current.
        let status = unsafe { cust::sys::cuStreamSynchronize(self.0.raw) };
        self.0
            .released
            .store(true, std::sync::atomic::Ordering::Release);
        check_raw("cuStreamSynchronize", status)
    }

    /// Whether this is an adopted stream handed back ([`release`](Self::release)d).
    pub(crate) fn is_released(&self) -> bool {
        self.0.is_released()
    }

    /// The driver's handle.
    pub(crate) fn raw(&self) -> cust::sys::CUstream {
        self.0.raw
    }

    /// The driver's handle (a `CUstream`, the runtime API's `cudaStream_t`), lent to another
    /// library so that its work goes on this stream, in order with ferrocuda's there (cuBLAS's
    /// `cublasSetStream`, PyTorch's `torch.cuda.ExternalStream`, a raw driver call). It stays
    /// this stream's: valid while any handle of it lives. What that library's work on it
    /// writes or reads of ferrocuda's buffers, declare with
    /// [`Gpu::uses_on`](crate::Gpu::uses_on) right before enqueueing it: the stream then waits
    /// for the other streams' conflicting work, and the library's later calls on other streams
    /// and the buffers' drops wait for it.
    #[must_use]
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.0.raw.cast()
    }

    /// Whether the driver's stream was made by ferrocuda (and is destroyed by it), not adopted
    /// from another library.
    #[must_use]
    pub fn is_owned(&self) -> bool {
        self.0.is_owned()
    }

    /// Whether `other` is a handle of the same stream record (not merely of a stream that came
    /// to have the same address).
    pub(crate) fn same_stream(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
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
        if self.is_released() {
            return Ok(());
        }
        let _current = self.0.enter()?;
        // SAFETY: a live stream handle; its context is current.
        check_raw("cuStreamSynchronize", unsafe {
            cust::sys::cuStreamSynchronize(self.0.raw)
        })
    }

    /// Whether everything enqueued on this stream so far has finished (`cuStreamQuery`),
    /// without waiting; an error of that work is returned.
    pub fn query(&self) -> Result<bool> {
        if self.is_released() {
            return Ok(true);
        }
        let _current = self.0.enter()?;
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
        f.debug_struct("Stream")
            .field("raw", &self.raw())
            .field("owned", &self.0.owned)
            .finish()
    }
}
