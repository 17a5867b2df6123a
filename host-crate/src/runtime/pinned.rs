//! Page-locked (pinned, 锁页) host memory: what asynchronous copies between host and device
//! need (a copy from pageable memory goes through a staging buffer, and waits for it).
//!
//! A [`PinnedBuffer`] remembers the copies in flight that use it: an event recorded on the
//! copy's stream right after it. Reaching its elements from the host waits for the copies that
//! conflict ([`as_slice`](PinnedBuffer::as_slice) for the copies that write it,
//! [`as_mut_slice`](PinnedBuffer::as_mut_slice) for every one), and so does its drop: no safe
//! code can read host memory a copy is still writing, write memory a copy is still reading,
//! or free memory a copy uses, however long the copy runs and whatever the program does with
//! the borrows in between. (A buffer that is leaked is never freed, so a copy into it is
//! harmless.)
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::runtime::pointer::DeviceCopy;

use crate::runtime::error::{Error, Result, check_raw};
use crate::runtime::event::Marker;
use crate::runtime::gpu::Gpu;
use crate::runtime::memory::DeviceSlice;
use crate::runtime::stream::{Stream, StreamHandle};
use crate::runtime::track::Access;

/// A copy in flight that uses a pinned buffer: the event after it, and whether it writes the
/// buffer (a download) or reads it (an upload).
struct InFlight {
    /// The stream (held: a handle is never mistaken for a later stream's at the same address).
    stream: Arc<StreamHandle>,
    done: Marker,
    writes: bool,
}

/// `len` elements of `T` in page-locked host memory, from [`Gpu::alloc_pinned`] or
/// [`Gpu::pin`]: the host side of [`Gpu::upload_async_on`] and [`Gpu::download_async_on`].
pub struct PinnedBuffer<T: DeviceCopy> {
    /// The memory, or a dangling pointer when nothing was allocated (no bytes).
    ptr: NonNull<T>,
    /// Whether `ptr` came from `cuMemHostAlloc`.
    allocated: bool,
    len: usize,
    in_flight: Mutex<Vec<InFlight>>,
    gpu: Gpu,
    element: PhantomData<T>,
}

// SAFETY: it owns its elements as a `Vec<T>` does; the copies in flight are driver handles that
// any thread may wait for.
unsafe impl<T: DeviceCopy + Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access reads the elements (`as_slice`, after the copies writing them) or
// enqueues copies that read them, as `&Vec<T>` may be read from several threads.
unsafe impl<T: DeviceCopy + Sync> Sync for PinnedBuffer<T> {}

impl<T: DeviceCopy> PinnedBuffer<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waits for the copies in flight that `writes_only` selects (those writing the buffer),
    /// or for all of them.
    fn settle(&self, writes_only: bool) -> Result<()> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if in_flight.iter().all(|c| writes_only && !c.writes) {
            return Ok(());
        }
        let _current = self.gpu.enter()?;
        let mut first_error = None;
        in_flight.retain(|c| {
            if writes_only && !c.writes {
                return true;
            }
            let (call, status) = c.done.wait(self.gpu.wait_policy());
            if let Err(e) = check_raw(call, status) {
                first_error.get_or_insert(e);
            }
            false
        });
        first_error.map_or(Ok(()), Err)
    }

    /// The elements, once every copy writing them has finished (a download in flight).
    pub fn as_slice(&self) -> Result<&[T]> {
        self.settle(true)?;
        if self.len == 0 {
            return Ok(&[]);
        }
        // SAFETY: `len` initialised elements (written when made, and by finished copies of
        // `T`s), not written by any copy in flight (waited for above; a new one needs `&mut`).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The elements for writing, once every copy using them has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.settle(false)?;
        if self.len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as in `as_slice`, and no copy reads them any more (waited for above).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }

    /// Makes `stream` wait (no host wait) for the copies in flight on other streams that write
    /// the buffer.
    fn order_after_writes(&self, stream: &Stream) -> Result<()> {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for c in in_flight
            .iter()
            .filter(|c| c.writes && !Arc::ptr_eq(&c.stream, stream.handle()))
        {
            c.done.wait_on(stream)?;
        }
        Ok(())
    }

    /// Remembers a copy just enqueued on `stream` that reads or `writes` the buffer.
    fn enter(&self, stream: &Stream, writes: bool) -> Result<()> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // An earlier copy on the same stream is covered by an event recorded after this one.
        if let Some(c) = in_flight
            .iter_mut()
            .find(|c| Arc::ptr_eq(&c.stream, stream.handle()))
        {
            c.done.record(stream)?;
            c.writes |= writes;
            return Ok(());
        }
        let done = Marker::new()?;
        done.record(stream)?;
        in_flight.push(InFlight {
            stream: stream.handle().clone(),
            done,
            writes,
        });
        Ok(())
    }
}

impl<T: DeviceCopy> Drop for PinnedBuffer<T> {
    /// Waits for every copy using the memory, then frees it (`cuMemFreeHost`).
    fn drop(&mut self) {
        if self.settle(false).is_err() {
            // A copy failed: the context may be unusable; wait for all of it before freeing.
            let _current = self.gpu.enter();
            // SAFETY: the context is current (or this fails harmlessly).
            let _ = unsafe { cust::sys::cuCtxSynchronize() };
        }
        if self.allocated {
            let _current = self.gpu.enter();
            // SAFETY: allocated by `cuMemHostAlloc`, freed once, here, after every copy.
            let _ = unsafe { cust::sys::cuMemFreeHost(self.ptr.as_ptr().cast()) };
        }
    }
}

impl<T: DeviceCopy> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// `CU_MEMHOSTALLOC_PORTABLE`: pinned for every context, not only the current one.
const PORTABLE: u32 = 1;

impl Gpu {
    /// `len` elements of page-locked host memory, every byte zero (`T` is an integer or a float
    /// of the library's, or any `DeviceCopy` type for which zero bytes are a value: use
    /// [`pin`](Self::pin) otherwise).
    pub fn alloc_pinned<T: crate::runtime::element::Element>(
        &self,
        len: usize,
    ) -> Result<PinnedBuffer<T>> {
        // SAFETY: zero bytes are a valid `Element` (an integer or a float).
        unsafe { self.alloc_pinned_zeroed(len) }
    }

    /// A page-locked copy of `data`.
    pub fn pin<T: DeviceCopy>(&self, data: &[T]) -> Result<PinnedBuffer<T>> {
        // SAFETY: every element is overwritten below, before the buffer is returned; a `T` of
        // zero bytes is never read as a `T` before then.
        let buffer = unsafe { self.alloc_pinned_zeroed::<T>(data.len())? };
        if !data.is_empty() {
            // SAFETY: `len` elements, not aliased (just made), not in any copy.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), buffer.ptr.as_ptr(), data.len())
            };
        }
        Ok(buffer)
    }

    /// # Safety
    /// Zero bytes must be a valid `T`, or every element must be written before it is read.
    unsafe fn alloc_pinned_zeroed<T: DeviceCopy>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::InvalidArgument {
                what: format!(
                    "alloc_pinned: {len} elements of {} bytes overflow",
                    size_of::<T>()
                ),
            })?;
        let mut ptr = NonNull::<T>::dangling();
        if bytes > 0 {
            let _current = self.enter()?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: a writable pointer; the context is current.
            check_raw("cuMemHostAlloc", unsafe {
                cust::sys::cuMemHostAlloc(&mut raw, bytes, PORTABLE)
            })?;
            ptr = NonNull::new(raw.cast()).ok_or_else(|| Error::InvalidArgument {
                what: format!("cuMemHostAlloc returned no memory for {bytes} bytes"),
            })?;
            // SAFETY: `bytes` writable bytes just allocated.
            unsafe { std::ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, bytes) };
        }
        Ok(PinnedBuffer {
            ptr,
            allocated: bytes > 0,
            len,
            in_flight: Mutex::new(Vec::new()),
            gpu: self.clone(),
            element: PhantomData,
        })
    }

    /// Copies `src` (page-locked host memory) into `dst` on `stream` without waiting
    /// (`cuMemcpyHtoDAsync`): ordered after the work on `dst` of other streams as every safe call
    /// is; `src` cannot be written from the host, nor freed, until the copy is done (its
    /// [`as_mut_slice`](PinnedBuffer::as_mut_slice) and its drop wait for it).
    pub fn upload_async_on<T: DeviceCopy>(
        &self,
        stream: &Stream,
        src: &PinnedBuffer<T>,
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        check_lengths("upload_async_on", src.len(), dst.len())?;
        if dst.is_empty() || size_of::<T>() == 0 {
            return Ok(());
        }
        self.check_owned(dst)?;
        self.ordered(stream, &[Access::write(dst)], || {
            // A download into `src` still in flight on another stream must land first.
            src.order_after_writes(stream)?;
            // SAFETY: `dst` holds `len` elements and is held mutably; `src` holds `len`
            // elements, which no host code writes until the copy is done (entered below), and
            // no copy in flight writes (waited for above).
            check_raw("cuMemcpyHtoDAsync", unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(
                    dst.as_device_ptr().as_raw(),
                    src.ptr.as_ptr().cast(),
                    src.len * size_of::<T>(),
                    stream.raw(),
                )
            })?;
            src.enter(stream, false).inspect_err(|_| {
                // The copy cannot be remembered: the host waits for it here instead.
                let _ = stream.synchronize();
            })
        })
    }

    /// Copies `src` into `dst` (page-locked host memory) on `stream` without waiting
    /// (`cuMemcpyDtoHAsync`): ordered after the work of other streams that wrote `src`; `dst`'s
    /// elements cannot be reached from the host until the copy is done
    /// ([`as_slice`](PinnedBuffer::as_slice) waits for it).
    pub fn download_async_on<T: DeviceCopy>(
        &self,
        stream: &Stream,
        src: &DeviceSlice<T>,
        dst: &mut PinnedBuffer<T>,
    ) -> Result<()> {
        check_lengths("download_async_on", src.len(), dst.len())?;
        if src.is_empty() || size_of::<T>() == 0 {
            return Ok(());
        }
        self.check_owned(src)?;
        // A copy already reading `dst` (an upload in flight) must finish before this one
        // overwrites it: the host waits, as `as_mut_slice` would.
        dst.settle(false)?;
        self.ordered(stream, &[Access::read(src)], || {
            // SAFETY: `src` holds `len` elements; `dst` is held mutably, no copy uses it (waited
            // for above), and it is entered below so that the host waits for this one.
            check_raw("cuMemcpyDtoHAsync", unsafe {
                cust::sys::cuMemcpyDtoHAsync_v2(
                    dst.ptr.as_ptr().cast(),
                    src.as_device_ptr().as_raw(),
                    dst.len * size_of::<T>(),
                    stream.raw(),
                )
            })?;
            dst.enter(stream, true).inspect_err(|_| {
                // The copy cannot be remembered: the host waits for it here instead.
                let _ = stream.synchronize();
            })
        })
    }
}

fn check_lengths(call: &str, host: usize, device: usize) -> Result<()> {
    if host == device {
        return Ok(());
    }
    Err(Error::LengthMismatch {
        expected: device,
        found: host,
        what: format!("{call}: {host} pinned host elements and a device slice of {device}"),
    })
}
