//! A device address and the bound of what may be copied to the device: ferrocuda's own, so that
//! its public API names no type of the driver crate it is built on.
use std::fmt;
use std::marker::PhantomData;

/// A type whose values may be copied to and from device memory byte for byte: plain data with
/// no pointers into host memory and no `Drop` (CUDA's "trivially copyable").
///
/// # Safety
/// Every bit pattern the device may write into a `T` that a program then reads must be a
/// valid `T` for the kernels it passes it to, and a copy of its bytes must be a copy of the
/// value (no host pointers, references or handles). Implement it for a `#[repr(C)]` struct of
/// `DeviceCopy` fields.
pub unsafe trait DeviceCopy: Copy + 'static {}

/// Implements [`DeviceCopy`] for plain-data types (`F16` and `Bf16` get theirs in
/// `runtime::element`).
macro_rules! device_copy {
    ($($t:ty),* $(,)?) => { $(
        // SAFETY: plain data, the same bytes on the host and the device.
        unsafe impl DeviceCopy for $t {}
    )* };
}

device_copy!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    u128,
    i128,
    usize,
    isize,
    f32,
    f64,
    bool,
    char,
    (),
    std::num::NonZeroU8,
    std::num::NonZeroU16,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroI8,
    std::num::NonZeroI16,
    std::num::NonZeroI32,
    std::num::NonZeroI64,
    std::num::NonZeroUsize,
    std::num::NonZeroIsize,
);

// SAFETY: an array of device-copyable elements is their bytes in order.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}
// SAFETY: a device address is a plain 64-bit value.
unsafe impl<T: 'static> DeviceCopy for DevicePointer<T> {}
// SAFETY: `PhantomData` has no bytes.
unsafe impl<T: 'static> DeviceCopy for PhantomData<T> {}

/// The address of a `T` in device memory: a plain 64-bit value (`CUdeviceptr`), what a kernel
/// parameter `*const T` or `*mut T` holds. Making one is safe; only a kernel or a copy that
/// dereferences it can go wrong, and those are `unsafe`.
///
/// `Send` and `Sync`: it is a number, valid in its context from any thread.
#[repr(transparent)]
pub struct DevicePointer<T> {
    address: u64,
    element: PhantomData<fn() -> T>,
}

impl<T> DevicePointer<T> {
    /// The pointer at `address`.
    #[must_use]
    pub const fn from_raw(address: u64) -> Self {
        Self {
            address,
            element: PhantomData,
        }
    }

    /// The null device pointer.
    #[must_use]
    pub const fn null() -> Self {
        Self::from_raw(0)
    }

    /// The address, as the driver API takes it (`CUdeviceptr`).
    #[must_use]
    pub const fn as_raw(self) -> u64 {
        self.address
    }

    /// Whether this is the null pointer.
    #[must_use]
    pub const fn is_null(self) -> bool {
        self.address == 0
    }

    /// The same address as a pointer to `U`.
    #[must_use]
    pub const fn cast<U>(self) -> DevicePointer<U> {
        DevicePointer::from_raw(self.address)
    }

    /// The address `count` elements further on (wrapping, like `pointer::wrapping_add`):
    /// computing it is safe, using it is the caller's business.
    #[must_use]
    pub const fn wrapping_add(self, count: usize) -> Self {
        Self::from_raw(
            self.address
                .wrapping_add((count as u64).wrapping_mul(size_of::<T>() as u64)),
        )
    }
}

impl<T> Clone for DevicePointer<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DevicePointer<T> {}

impl<T> PartialEq for DevicePointer<T> {
    fn eq(&self, other: &Self) -> bool {
        self.address == other.address
    }
}

impl<T> Eq for DevicePointer<T> {}

impl<T> std::hash::Hash for DevicePointer<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.address.hash(state);
    }
}

impl<T> fmt::Debug for DevicePointer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePointer({:#x})", self.address)
    }
}

impl<T> fmt::Pointer for DevicePointer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.address)
    }
}

pub(crate) use device_copy;
