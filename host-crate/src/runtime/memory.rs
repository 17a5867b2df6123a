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

use std::sync::{Arc, Weak};

use crate::runtime::pointer::{DeviceCopy, DevicePointer};

/// What keeps an allocation's context alive and frees it: the shared state of the
/// [`Gpu`](crate::Gpu) that allocated it.
pub(crate) trait ContextKeeper: Send + Sync {
    /// Frees the allocation at `address` in stream order, after every stream that used it
    /// (errors ignored: used on the way out).
    fn free(&self, address: u64);
}

/// Who keeps a buffer's context.
enum Keeper {
    /// A buffer of the program's: it holds a share of its `Gpu`, so the context outlives it.
    Owner(Arc<dyn ContextKeeper>),
    /// A buffer the `Gpu` (or a plan holding the `Gpu`) keeps itself: a strong share would be a
    /// cycle that never frees the `Gpu`. When the `Gpu` is gone, it is being dropped, and has
    /// drained its stream and made its context current already.
    Workspace(Weak<dyn ContextKeeper>),
}

/// `len` elements of `T` in device memory, owned: freed when dropped, in stream order after
/// the work of every stream that used it (no host wait), with its context current (the buffer
/// holds a share of its [`Gpu`](crate::Gpu)'s state, so the context outlives it). It
/// dereferences to a [`DeviceSlice`].
pub struct DeviceBuffer<T: DeviceCopy> {
    /// The device address (0 for an empty buffer, which owns no allocation).
    address: u64,
    len: usize,
    keeper: Keeper,
    element: PhantomData<T>,
}

// SAFETY: a buffer owns device memory, which any thread may use through the driver; `T` values
// move between threads with it, as a `Vec<T>`'s do.
unsafe impl<T: DeviceCopy + Send> Send for DeviceBuffer<T> {}
// SAFETY: shared access gives `&DeviceSlice<T>` only, as `&Vec<T>` gives `&[T]`.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceBuffer<T> {}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Takes the allocation of `len` elements at `address` (0 when `len` is 0), made in the
    /// context `keeper` keeps, which frees it.
    pub(crate) fn new(address: u64, len: usize, keeper: Arc<dyn ContextKeeper>) -> Self {
        Self {
            address,
            len,
            keeper: Keeper::Owner(keeper),
            element: PhantomData,
        }
    }

    /// This buffer as part of the `Gpu`'s own state (a workspace), which must not keep the
    /// `Gpu` alive.
    pub(crate) fn into_workspace(mut self) -> Self {
        if let Keeper::Owner(keeper) = &self.keeper {
            self.keeper = Keeper::Workspace(Arc::downgrade(keeper));
        }
        self
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    /// Frees the memory in stream order (`cuMemFreeAsync` on the GPU's stream, after every
    /// stream that used it): the host does not wait.
    fn drop(&mut self) {
        if self.address == 0 {
            return;
        }
        match &self.keeper {
            Keeper::Owner(keeper) => keeper.free(self.address),
            Keeper::Workspace(keeper) => match keeper.upgrade() {
                Some(keeper) => keeper.free(self.address),
                // The `Gpu` is being dropped: its stream is drained, its context current.
                // SAFETY: this buffer's allocation, freed once, here; nothing uses it any more.
                None => unsafe {
                    let _ = cust::sys::cuMemFreeAsync(self.address, std::ptr::null_mut());
                },
            },
        }
    }
}

impl<T: DeviceCopy> Deref for DeviceBuffer<T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: the buffer's memory, borrowed with the buffer.
        unsafe { DeviceSlice::from_raw(DevicePointer::from_raw(self.address), self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: the buffer's memory, borrowed mutably with the buffer.
        unsafe { DeviceSlice::from_raw_mut(DevicePointer::from_raw(self.address), self.len) }
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Elements of device memory that some buffer owns, reached through a borrow: `&DeviceSlice`
/// to read them, `&mut DeviceSlice` to write them.
///
/// It is unsized, as `[T]` is: a reference to it carries the device address and the length
/// (the pointer and the metadata of a `[()]`, which spans zero host bytes), so there is no
/// `DeviceSlice` value to copy out of a borrow, or to swap or replace behind a `&mut` (which,
/// with a sized slice, would rewrite the address a buffer frees).
pub struct DeviceSlice<T: DeviceCopy> {
    element: PhantomData<T>,
    /// Address: the device address (or 1 for the null address of an empty buffer: a
    /// reference is never null); length: the element count.
    units: [()],
}

/// The address a reference to an empty buffer's null device address carries instead (no
/// allocation starts at 1).
const NULL_STAND_IN: usize = 1;

// A device address is 64 bits; the host's `usize` carries it whole.
const _: () = assert!(usize::BITS == 64, "ferrocuda needs a 64-bit host");

impl<T: DeviceCopy> DeviceSlice<T> {
    /// `&DeviceSlice` of `len` elements at `ptr`, for as long as the caller says.
    ///
    /// # Safety
    /// The memory must be borrowed as the returned lifetime says (see [`View::from_raw_parts`]).
    unsafe fn from_raw<'a>(ptr: DevicePointer<T>, len: usize) -> &'a Self {
        let units = std::ptr::slice_from_raw_parts(
            std::ptr::without_provenance::<()>(Self::referenced_address(ptr)),
            len,
        );
        // SAFETY: a `[()]` spans zero bytes, so a non-null pointer is valid for it whatever
        // its provenance; `Self` is a `[()]` with a zero-sized field before it.
        unsafe { &*(units as *const Self) }
    }

    /// `&mut DeviceSlice`, as [`from_raw`](Self::from_raw).
    ///
    /// # Safety
    /// As for [`from_raw`](Self::from_raw), mutably.
    unsafe fn from_raw_mut<'a>(ptr: DevicePointer<T>, len: usize) -> &'a mut Self {
        let units = std::ptr::slice_from_raw_parts_mut(
            std::ptr::without_provenance_mut::<()>(Self::referenced_address(ptr)),
            len,
        );
        // SAFETY: as in `from_raw`.
        unsafe { &mut *(units as *mut Self) }
    }

    /// The address a reference to the memory at `ptr` carries: `ptr`, or [`NULL_STAND_IN`]
    /// for the null address (a reference is never null); [`as_device_ptr`](Self::as_device_ptr)
    /// maps it back.
    fn referenced_address(ptr: DevicePointer<T>) -> usize {
        match ptr.as_raw() as usize {
            0 => NULL_STAND_IN,
            address => address,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// The device address of the first element (a plain value: using it in a kernel is what
    /// `unsafe` launches answer for).
    pub fn as_device_ptr(&self) -> DevicePointer<T> {
        let address = self.units.as_ptr().addr();
        let raw = if address == NULL_STAND_IN { 0 } else { address };
        DevicePointer::from_raw(raw as u64)
    }

    /// The elements in `range`, borrowed for reading. Panics, as slice indexing does, if the
    /// range is not within `0..len`.
    pub fn index(&self, range: impl RangeBounds<usize>) -> View<'_, T> {
        let (start, end) = self.bounds(range);
        // SAFETY: `start..end` lies within this slice, borrowed for the view's lifetime.
        unsafe { View::from_raw_parts(self.element_ptr(start), end - start) }
    }

    /// The elements in `range`, borrowed for writing. Panics as [`index`](Self::index) does.
    pub fn index_mut(&mut self, range: impl RangeBounds<usize>) -> ViewMut<'_, T> {
        let (start, end) = self.bounds(range);
        // SAFETY: `start..end` lies within this slice, borrowed mutably for the view's lifetime.
        unsafe { ViewMut::from_raw_parts(self.element_ptr(start), end - start) }
    }

    /// The elements before `mid` and from `mid` on, both borrowed for reading. Panics if `mid`
    /// is past the end.
    pub fn split_at(&self, mid: usize) -> (View<'_, T>, View<'_, T>) {
        (self.index(..mid), self.index(mid..))
    }

    /// The elements before `mid` and from `mid` on, each borrowed for writing on its own (the
    /// two do not overlap). Panics if `mid` is past the end.
    pub fn split_at_mut(&mut self, mid: usize) -> (ViewMut<'_, T>, ViewMut<'_, T>) {
        let (_, mid) = self.bounds(..mid);
        let len = self.len();
        // SAFETY: `0..mid` and `mid..len` lie within this slice, borrowed mutably for both
        // views' lifetime, and do not overlap.
        unsafe {
            (
                ViewMut::from_raw_parts(self.element_ptr(0), mid),
                ViewMut::from_raw_parts(self.element_ptr(mid), len - mid),
            )
        }
    }

    /// The address of element `i` (`i <= len`).
    fn element_ptr(&self, i: usize) -> DevicePointer<T> {
        let base = self.as_device_ptr();
        if i == 0 {
            return base;
        }
        DevicePointer::from_raw(base.as_raw() + (i * size_of::<T>()) as u64)
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
    ptr: DevicePointer<T>,
    len: usize,
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
            ptr,
            len,
            borrow: PhantomData,
        }
    }
}

// SAFETY: a `View` is a shared borrow of device memory, as `&DeviceSlice<T>` is.
unsafe impl<T: DeviceCopy + Sync> Send for View<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceCopy + Sync> Sync for View<'_, T> {}

impl<T: DeviceCopy> Deref for View<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: the view's memory, as its constructor promised, borrowed with the view.
        unsafe { DeviceSlice::from_raw(self.ptr, self.len) }
    }
}

/// Part of a buffer borrowed for writing, for `'a`: dereferences to a [`DeviceSlice`].
pub struct ViewMut<'a, T: DeviceCopy> {
    ptr: DevicePointer<T>,
    len: usize,
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
            ptr,
            len,
            borrow: PhantomData,
        }
    }
}

// SAFETY: a `ViewMut` is an exclusive borrow of device memory, as `&mut DeviceSlice<T>` is.
unsafe impl<T: DeviceCopy + Send> Send for ViewMut<'_, T> {}
// SAFETY: as above: shared access to it gives `&DeviceSlice<T>` only.
unsafe impl<T: DeviceCopy + Sync> Sync for ViewMut<'_, T> {}

impl<T: DeviceCopy> Deref for ViewMut<'_, T> {
    type Target = DeviceSlice<T>;

    fn deref(&self) -> &DeviceSlice<T> {
        // SAFETY: as for `View`.
        unsafe { DeviceSlice::from_raw(self.ptr, self.len) }
    }
}

impl<T: DeviceCopy> DerefMut for ViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut DeviceSlice<T> {
        // SAFETY: the view's memory, borrowed mutably with the view.
        unsafe { DeviceSlice::from_raw_mut(self.ptr, self.len) }
    }
}
