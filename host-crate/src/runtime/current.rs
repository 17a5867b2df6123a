//! The calling thread's current context (当前上下文) while a library call runs.
//!
//! Every driver call the library makes needs the device's context current on the calling
//! thread. The thread may have another one current: another library's context
//! (`cuCtxCreate`), another device's primary context (the CUDA runtime's `cudaSetDevice`, a
//! second [`Gpu`](crate::Gpu)). A call makes its context current for as long as it runs and
//! then puts the thread's previous one back, so that the program's next runtime or library call
//! finds the device it chose. A thread with no context current keeps the device's primary
//! context afterwards, as the CUDA runtime's first call on a thread leaves it (and the next call
//! then costs no switch).
//!
//! The public [`Gpu::make_current`](crate::Gpu::make_current) is the other thing: it makes the
//! context current and leaves it so, as `cudaSetDevice` does, for driver calls a program makes
//! itself.
use cust::sys::CUcontext;

use crate::runtime::error::{Result, check_raw};

/// The context a library call made current, and the one to put back when it ends: dropped, it
/// makes the thread's previous context current again (unless that was none, or this one).
/// Bound to its thread (`!Send`): a current context is per thread.
#[must_use = "the context is current only while this lives"]
pub(crate) struct Current {
    /// The context current before, to restore; null when nothing is to be restored.
    previous: CUcontext,
}

impl Current {
    /// Makes `context` current on the calling thread, unless it already is (then only one
    /// `cuCtxGetCurrent`, a read of the driver's thread-local state).
    pub(crate) fn enter(context: CUcontext) -> Result<Self> {
        let kept = Self::preserve()?;
        if kept.previous == context {
            return Ok(kept.unless(context));
        }
        // SAFETY: `context` is a live context (its owner holds a retain of it).
        check_raw("cuCtxSetCurrent", unsafe {
            cust::sys::cuCtxSetCurrent(context)
        })?;
        Ok(kept)
    }

    /// Remembers the thread's current context, to put back when dropped: around a call into
    /// another library (NCCL) that may make another context current.
    pub(crate) fn preserve() -> Result<Self> {
        let mut previous = std::ptr::null_mut();
        // SAFETY: a writable handle.
        check_raw("cuCtxGetCurrent", unsafe {
            cust::sys::cuCtxGetCurrent(&mut previous)
        })?;
        Ok(Self { previous })
    }

    /// Nothing to put back when the context to restore is `context`.
    fn unless(mut self, context: CUcontext) -> Self {
        if self.previous == context {
            self.previous = std::ptr::null_mut();
        }
        self
    }

    /// Ends the guard without putting anything back yet: the context to restore, for a
    /// [`RestoreLater`] that outlives the guard's scope (null: nothing).
    pub(crate) fn defer(self) -> CUcontext {
        std::mem::ManuallyDrop::new(self).previous
    }
}

/// The context a [`Current::defer`] left to restore, put back when this drops: the last field
/// of a struct whose other fields' drops (a module unload, frees) need the struct's context
/// current. Shared between threads, as its struct is; stored once, by the struct's own drop.
#[derive(Default)]
pub(crate) struct RestoreLater(std::sync::atomic::AtomicPtr<std::ffi::c_void>);

impl RestoreLater {
    pub(crate) fn set(&self, previous: CUcontext) {
        self.0
            .store(previous.cast(), std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for RestoreLater {
    fn drop(&mut self) {
        drop(Current {
            previous: self.0.get_mut().cast(),
        });
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        if !self.previous.is_null() {
            // SAFETY: the context that was current on this thread when the call began. The
            // program keeps it alive while a ferrocuda call runs on a thread where it is
            // current (`docs/library.md`, "Working with other libraries"): a context destroyed
            // meanwhile by another thread would leave this handle dangling.
            let _ = unsafe { cust::sys::cuCtxSetCurrent(self.previous) };
        }
    }
}

/// A retain of `device`'s primary context (cust's `Context::new`, which also makes it current),
/// with the thread's previous context put back as [`Current`] does.
pub(crate) fn retain_primary(device: cust::device::Device) -> Result<cust::context::Context> {
    use crate::runtime::error::CudaContext;
    let kept = Current::preserve()?;
    let context = cust::context::Context::new(device).call("cuDevicePrimaryCtxRetain")?;
    drop(kept.unless(context.as_raw()));
    Ok(context)
}
