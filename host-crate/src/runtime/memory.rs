//! Device memory (显存) owned and borrowed the way Rust owns and borrows host memory.
//!
//! cust's `DeviceSlice` is `Copy` and has no lifetime: a copy outlives the buffer it came from
//! and aliases it mutably, so a safe function taking one cannot know the memory is alive or
//! unshared. ferrocuda's [`DeviceBuffer`] owns its allocation (and a share of its
//! [`Gpu`](crate::Gpu), so that the context outlives it and is current when it is freed); a
//! [`DeviceSlice`] is only ever reached
//! through a borrow of a buffer, or through a [`View`] / [`ViewMut`] that carries that borrow's
//! lifetime, as cudarc's `CudaView` does. The library's functions take `&DeviceSlice<T>` (read)
//! and `&mut DeviceSlice<T>` (written), so the borrow checker rules out a buffer freed or
//! written elsewhere while a call uses it.
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};

use std::sync::Arc;

use cust::memory::{DeviceCopy, DevicePointer};

/// What keeps an allocation's context alive and makes it current: the shared state of the
/// [`Gpu`](crate::Gpu) that allocated it.
pub(crate) trait ContextKeeper: Send + Sync {
    /// Makes the context current on the calling thread (errors ignored: used on the way out).
    fn make_current(&self);
}

/// `len` elements of `T` in device memory, owned: freed when dropped, with its GPU's context
/// made current first (the buffer holds a share of its [`Gpu`](crate::Gpu)'s state, so the
/// context outlives it). It dereferences to a [`DeviceSlice`].
pub struct DeviceBuffer<T: DeviceCopy> {
    // Fields drop in declaration order: the memory before the share of the `Gpu`, which may be
    // the last one holding the context.
    buffer: cust::memory::DeviceBuffer<T>,
    keeper: Arc<dyn ContextKeeper>,
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Takes `buffer`, allocated in the context `keeper` keeps.
    pub(crate) fn new(
        buffer: cust::memory::DeviceBuffer<T>,
        keeper: Arc<dyn ContextKeeper>,
    ) -> Self {
        Self { buffer, keeper }
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    /// Makes the context current on the dropping thread, for `cuMemFree`.
    fn drop(&mut self) {
        self.keeper.make_current();
    }
}

impl<T: DeviceCopy> Deref for DeviceBuffer<T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        DeviceSlice::from_cust(&self.buffer)
    }
}

impl<T: DeviceCopy> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        DeviceSlice::from_cust_mut(&mut self.buffer)
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Elements of device memory that some buffer owns, reached through a borrow: `&DeviceSlice`
/// to read them, `&mut DeviceSlice` to write them. Neither `Copy` nor `Clone`, so no copy of it
/// outlives the borrow.
#[repr(transparent)]
pub struct DeviceSlice<T: DeviceCopy>(cust::memory::DeviceSlice<T>);

impl<T: DeviceCopy> DeviceSlice<T> {
    fn from_cust(slice: &cust::memory::DeviceSlice<T>) -> &Self {
        // SAFETY: `Self` is a transparent wrapper of cust's slice.
        unsafe { &*std::ptr::from_ref(slice).cast::<Self>() }
    }

    fn from_cust_mut(slice: &mut cust::memory::DeviceSlice<T>) -> &mut Self {
        // SAFETY: as above.
        unsafe { &mut *std::ptr::from_mut(slice).cast::<Self>() }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The device address of the first element (a plain value: using it in a kernel is what
    /// `unsafe` launches answer for).
    pub fn as_device_ptr(&self) -> DevicePointer<T> {
        self.0.as_device_ptr()
    }

    /// The elements in `range`, borrowed for reading. Panics, as slice indexing does, if the
    /// range is not within `0..len`.
    pub fn index(&self, range: impl RangeBounds<usize>) -> View<'_, T> {
        let (start, end) = self.bounds(range);
        // SAFETY: `start..end` lies within this slice, borrowed for the view's lifetime.
        unsafe { View::from_raw_parts(self.as_device_ptr().add(start), end - start) }
    }

    /// The elements in `range`, borrowed for writing. Panics as [`index`](Self::index) does.
    pub fn index_mut(&mut self, range: impl RangeBounds<usize>) -> ViewMut<'_, T> {
        let (start, end) = self.bounds(range);
        // SAFETY: `start..end` lies within this slice, borrowed mutably for the view's lifetime.
        unsafe { ViewMut::from_raw_parts(self.as_device_ptr().add(start), end - start) }
    }

    /// The elements before `mid` and from `mid` on, both borrowed for reading. Panics if `mid`
    /// is past the end.
    pub fn split_at(&self, mid: usize) -> (View<'_, T>, View<'_, T>) {
        (self.index(..mid), self.index(mid..))
    }

    /// The elements before `mid` and from `mid` on, each borrowed for writing on its own (the
    /// two do not overlap). Panics if `mid` is past the end.
    pub fn split_at_mut(&mut self, mid: usize) -> (ViewMut<'_, T>, ViewMut<'_, T>) {
        let (_, end) = self.bounds(..mid);
        let ptr = self.as_device_ptr();
        // SAFETY: `0..mid` and `mid..len` lie within this slice, borrowed mutably for both
        // views' lifetime, and do not overlap.
        unsafe {
            (
                ViewMut::from_raw_parts(ptr, end),
                ViewMut::from_raw_parts(ptr.add(end), self.len() - end),
            )
        }
    }

    fn bounds(&self, range: impl RangeBounds<usize>) -> (usize, usize) {
        let len = self.len();
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1).expect("range start overflows"),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1).expect("range end overflows"),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => len,
        };
        assert!(
            start <= end && end <= len,
            "device slice range {start}..{end} out of bounds for length {len}"
        );
        (start, end)
    }

    /// cust's slice of the same memory, for cust's own calls (`async_copy_from`, events).
    ///
    /// # Safety
    /// cust's `DeviceSlice` is `Copy` and carries no lifetime: the caller must not use it, or
    /// a copy of it, after this borrow ends (the buffer may be freed), nor write through it
    /// while it is borrowed for reading only; and must order its asynchronous use with the
    /// GPU's work on the memory, as any `unsafe` cust call requires.
    pub unsafe fn as_cust(&self) -> &cust::memory::DeviceSlice<T> {
        &self.0
    }

    /// [`as_cust`](Self::as_cust), for cust's calls that write.
    ///
    /// # Safety
    /// As for [`as_cust`](Self::as_cust).
    pub unsafe fn as_cust_mut(&mut self) -> &mut cust::memory::DeviceSlice<T> {
        &mut self.0
    }

    /// The slice for the library's own cust calls, which keep the rules of
    /// [`as_cust`](Self::as_cust).
    pub(crate) fn cust(&self) -> &cust::memory::DeviceSlice<T> {
        &self.0
    }

    /// [`cust`](Self::cust), for writing.
    pub(crate) fn cust_mut(&mut self) -> &mut cust::memory::DeviceSlice<T> {
        &mut self.0
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSlice")
            .field("ptr", &self.as_device_ptr().as_raw())
            .field("len", &self.len())
            .finish()
    }
}

/// Part of a buffer borrowed for reading, for `'a`: dereferences to a [`DeviceSlice`].
pub struct View<'a, T: DeviceCopy> {
    slice: DeviceSlice<T>,
    borrow: PhantomData<&'a DeviceSlice<T>>,
}

impl<T: DeviceCopy> View<'_, T> {
    /// `len` elements at `ptr`.
    ///
    /// # Safety
    /// The `len` elements at `ptr` must be allocated device memory of this context for the
    /// view's whole lifetime, and not written by anyone else meanwhile.
    pub unsafe fn from_raw_parts(ptr: DevicePointer<T>, len: usize) -> Self {
        Self {
            // SAFETY: forwarded to the caller.
            slice: DeviceSlice(unsafe { cust::memory::DeviceSlice::from_raw_parts(ptr, len) }),
            borrow: PhantomData,
        }
    }
}

impl<T: DeviceCopy> Deref for View<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        &self.slice
    }
}

/// Part of a buffer borrowed for writing, for `'a`: dereferences to a [`DeviceSlice`].
pub struct ViewMut<'a, T: DeviceCopy> {
    slice: DeviceSlice<T>,
    borrow: PhantomData<&'a mut DeviceSlice<T>>,
}

impl<T: DeviceCopy> ViewMut<'_, T> {
    /// `len` elements at `ptr`.
    ///
    /// # Safety
    /// The `len` elements at `ptr` must be allocated device memory of this context for the
    /// view's whole lifetime, and reached by no one else meanwhile.
    pub unsafe fn from_raw_parts(ptr: DevicePointer<T>, len: usize) -> Self {
        Self {
            // SAFETY: forwarded to the caller.
            slice: DeviceSlice(unsafe { cust::memory::DeviceSlice::from_raw_parts_mut(ptr, len) }),
            borrow: PhantomData,
        }
    }
}

impl<T: DeviceCopy> Deref for ViewMut<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        &self.slice
    }
}

impl<T: DeviceCopy> DerefMut for ViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        &mut self.slice
    }
}
