//! A CUDA stream (流) of a [`Gpu`](crate::Gpu)'s context, as the library hands it out.
//!
//! cust's `Stream` has safe methods that are not sound: `add_callback` takes a closure with no
//! `'static` bound (the driver may run it after what it borrows is gone), and cust's
//! `DeviceBuffer::drop_async` frees memory on any stream. ferrocuda's `Stream` wraps it and
//! gives cust's only to `unsafe` code.

/// A stream of a GPU's context: the `_on` methods' argument. From [`Gpu::stream`] (the GPU's
/// own) or [`Gpu::new_stream`] (a new non-blocking one).
///
/// [`Gpu::stream`]: crate::Gpu::stream
/// [`Gpu::new_stream`]: crate::Gpu::new_stream
#[repr(transparent)]
pub struct Stream(cust::stream::Stream);

impl Stream {
    pub(crate) fn new(stream: cust::stream::Stream) -> Self {
        Self(stream)
    }

    /// The driver's handle (`CUstream`), for driver calls the library does not wrap.
    pub fn as_inner(&self) -> cust::sys::CUstream {
        self.0.as_inner()
    }

    /// cust's stream, for cust's calls (event records and waits, asynchronous copies).
    ///
    /// # Safety
    /// cust's `Stream::add_callback` must not be given a closure that borrows anything the
    /// program may drop before the stream reaches the callback, and work enqueued through it
    /// (copies, `drop_async`) is the caller's to order with the GPU's work on the same memory.
    pub unsafe fn as_cust(&self) -> &cust::stream::Stream {
        &self.0
    }

    /// cust's stream, for the library's own calls, which keep the rules of
    /// [`as_cust`](Self::as_cust).
    pub(crate) fn cust(&self) -> &cust::stream::Stream {
        &self.0
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Stream").field(&self.as_inner()).finish()
    }
}
