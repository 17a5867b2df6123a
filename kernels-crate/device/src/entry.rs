//! Entry points (核函数入口): what the host knows about a kernel, generated from its one
//! declaration by [`kernel`].
//!
//! A kernel is written once, as an `unsafe fn` with `#[kernel]`. On `nvptx64` that becomes the
//! `#[no_mangle] extern "ptx-kernel"` entry point(s) in the PTX; on the host the same name is a
//! function returning an [`Entry`], the kernel's typed handle: its PTX symbol, its dynamic
//! shared memory rule and, in its type, its parameter list. The host crate launches through
//! the handle with arguments of exactly those types (a device pointer for `*const T` /
//! `*mut T`, the value itself for a [`ByValue`] type), so a wrong count or type does not
//! compile, and no symbol string or argument order is written on the host.
//!
//! Every entry point is also listed in [`ENTRY_POINTS`], so that the PTX test, the sanitizer
//! and `ferrocuda occupancy` walk the declarations instead of lists typed by hand.
pub use ferrocuda_macros::kernel;

/// Declares a `#[no_mangle]` device array (`__device__ T name[len]`, zero-initialised) per
/// element type, and on the host a function returning its [`DeviceGlobal`] handle for `T`
/// (`None` for a type without one):
///
/// ```ignore
/// device_global! {
///     /// The partials of `reduce2_static`.
///     pub fn reduce2_static_partials<T>() -> [T; 10240] {
///         f32 => REDUCE2_STATIC_PARTIALS_F32,
///         f64 => REDUCE2_STATIC_PARTIALS_F64,
///     }
/// }
/// ```
#[macro_export]
macro_rules! device_global {
    ($(#[$meta:meta])* $vis:vis fn $name:ident<T>() -> [T; $len:expr] {
        $($t:ty => $symbol:ident),* $(,)?
    }) => {
        $(
            #[cfg(target_arch = "nvptx64")]
            #[doc = concat!("`", stringify!($name), "` for `", stringify!($t), "`.")]
            #[unsafe(no_mangle)]
            pub static mut $symbol: [$t; $len] = [0 as $t; $len];
        )*

        // On the host the same arrays exist for the CPU device, which finds them by name.
        $(
            #[cfg(not(target_arch = "nvptx64"))]
            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            pub static mut $symbol: [$t; $len] = [0 as $t; $len];

            #[cfg(not(target_arch = "nvptx64"))]
            const _: () = {
                #[$crate::entry::__private::linkme::distributed_slice($crate::entry::DEVICE_GLOBALS)]
                #[linkme(crate = $crate::entry::__private::linkme)]
                static GLOBAL: $crate::entry::GlobalInfo = $crate::entry::GlobalInfo {
                    symbol: stringify!($symbol),
                    address: || (&raw mut $symbol).cast::<u8>(),
                    bytes: core::mem::size_of::<[$t; $len]>(),
                };
            };
        )*

        #[cfg(not(target_arch = "nvptx64"))]
        $(#[$meta])*
        $vis fn $name<T: 'static>() -> Option<$crate::entry::DeviceGlobal<T>> {
            $(
                if core::any::TypeId::of::<T>() == core::any::TypeId::of::<$t>() {
                    return Some($crate::entry::DeviceGlobal {
                        symbol: stringify!($symbol),
                        len: $len,
                        element: core::marker::PhantomData,
                    });
                }
            )*
            None
        }
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use core::fmt;
    use core::marker::PhantomData;

    /// One entry point of a PTX module, as declared.
    #[derive(Clone, Copy)]
    pub struct EntryInfo {
        /// The Cargo package whose PTX holds the entry point.
        pub package: &'static str,
        /// The module that declares it (`ferrocuda_lesson_kernels::reduce`).
        pub module: &'static str,
        /// The Rust name of the kernel (`reduce_neighbored`).
        pub kernel: &'static str,
        /// The PTX symbol (`reduce_neighbored_f32`).
        pub symbol: &'static str,
        /// The values of the kernel's generic parameters in this instance (`[("T", "f32")]`).
        pub instance: &'static [(&'static str, &'static str)],
        /// The parameter types, as written after substitution (`["*mut f32", "usize"]`).
        pub params: &'static [&'static str],
        /// Whether it takes a `GridBarrier` (`grid.sync()`): it runs under a cooperative
        /// launch only.
        pub cooperative: bool,
        /// Dynamic shared memory, bytes, at a block of that many threads (if it uses any).
        pub dynamic_shared_bytes: Option<fn(u32) -> usize>,
        /// Blocks per thread block cluster along x (`#[kernel(cluster = N)]`), 0 for a kernel
        /// launched without clusters.
        pub cluster_blocks: u32,
        /// The oldest architecture whose PTX holds the entry point, as `sm_XY`'s number (90
        /// for clusters and bulk copies), 0 for every architecture.
        pub min_arch: u32,
        /// The same kernel compiled for the host, run by the CPU device.
        pub cpu: crate::cpu::CpuKernel,
    }

    impl EntryInfo {
        /// The dynamic shared memory a launch with `block` threads per block needs (0 for a
        /// kernel that declares none; `u32::MAX` if it does not fit in 32 bits).
        pub fn dynamic_shared_bytes(&self, block: u32) -> u32 {
            self.dynamic_shared_bytes
                .map_or(0, |f| u32::try_from(f(block)).unwrap_or(u32::MAX))
        }

        /// Whether the PTX built for `arch` (`"sm_80"`) holds the entry point.
        pub fn built_for(&self, arch: &str) -> bool {
            let number: u32 = arch
                .trim_start_matches("sm_")
                .trim_end_matches(['a', 'f'])
                .parse()
                .unwrap_or(0);
            number >= self.min_arch
        }

        /// The value of generic parameter `name` in this instance (`"f32"` for `"T"`).
        pub fn instance_value(&self, name: &str) -> Option<&'static str> {
            self.instance
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
        }
    }

    impl fmt::Debug for EntryInfo {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}({})", self.symbol, self.params.join(", "))
        }
    }

    /// Every entry point declared with [`kernel`](super::kernel) in the crates linked into
    /// this program, in no particular order.
    #[linkme::distributed_slice]
    pub static ENTRY_POINTS: [EntryInfo];

    /// A device global (`device_global!`) as the CPU device holds it: a host array of the
    /// same name and size.
    #[derive(Clone, Copy, Debug)]
    pub struct GlobalInfo {
        /// The PTX symbol.
        pub symbol: &'static str,
        /// Its address on the host.
        pub address: fn() -> *mut u8,
        /// Its size, bytes.
        pub bytes: usize,
    }

    /// Every device global declared in the crates linked into this program.
    #[linkme::distributed_slice]
    pub static DEVICE_GLOBALS: [GlobalInfo];

    /// The entry points of package `package` (`"ferrocuda-kernels"`), sorted by symbol.
    pub fn entry_points_of(package: &str) -> Vec<&'static EntryInfo> {
        let mut v: Vec<_> = ENTRY_POINTS
            .iter()
            .filter(|e| e.package == package)
            .collect();
        v.sort_by_key(|e| e.symbol);
        v
    }

    /// The entry point with PTX symbol `symbol`.
    pub fn entry_point(symbol: &str) -> Option<&'static EntryInfo> {
        ENTRY_POINTS.iter().find(|e| e.symbol == symbol)
    }

    /// A kernel's typed handle: `Args` is its parameter list as a tuple
    /// (`(*mut f32, *mut f32, usize)`).
    pub struct Entry<Args> {
        info: &'static EntryInfo,
        args: PhantomData<fn(Args)>,
    }

    impl<Args> Clone for Entry<Args> {
        fn clone(&self) -> Self {
            *self
        }
    }
    impl<Args> Copy for Entry<Args> {}

    impl<Args> fmt::Debug for Entry<Args> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.info.fmt(f)
        }
    }

    impl<Args> Entry<Args> {
        /// The handle of `info`, for code generated by [`kernel`](super::kernel).
        ///
        /// # Safety
        /// `Args` must be the parameter list of the entry point `info` describes.
        #[doc(hidden)]
        pub const unsafe fn from_info(info: &'static EntryInfo) -> Self {
            Self {
                info,
                args: PhantomData,
            }
        }

        /// What is declared about the entry point.
        pub fn info(&self) -> &'static EntryInfo {
            self.info
        }

        /// The PTX symbol.
        pub fn symbol(&self) -> &'static str {
            self.info.symbol
        }

        /// The dynamic shared memory a launch with `block` threads per block needs.
        pub fn dynamic_shared_bytes(&self, block: u32) -> u32 {
            self.info.dynamic_shared_bytes(block)
        }

        /// The same handle seen with parameter list `B`, if `B` is `Args` (for generic host code
        /// that knows two type parameters are equal only at run time).
        pub fn retype<B: 'static>(self) -> Option<Entry<B>>
        where
            Args: 'static,
        {
            (core::any::TypeId::of::<Args>() == core::any::TypeId::of::<B>()).then_some(Entry {
                info: self.info,
                args: PhantomData,
            })
        }
    }

    /// A `#[no_mangle]` device static (`__device__ T name[len]`, the notes' `static_y`), as the
    /// host looks it up: its symbol and its length in elements of `T`.
    pub struct DeviceGlobal<T> {
        /// The PTX symbol.
        pub symbol: &'static str,
        /// Elements of `T`.
        pub len: usize,
        #[doc(hidden)]
        pub element: PhantomData<fn() -> T>,
    }

    /// A type a kernel takes by value: an integer, a float, or a `#[repr(C)]` struct of them.
    ///
    /// # Safety
    /// The type must be `#[repr(C)]` (or a primitive) with no pointers or padding-dependent
    /// meaning, laid out the same on the host and on the device, so that its bytes copied into
    /// the kernel's parameter space are the value the kernel reads.
    pub unsafe trait ByValue: Copy + 'static {}

    macro_rules! by_value {
        ($($t:ty),*) => {$(
            // SAFETY: a primitive, laid out the same on both sides.
            unsafe impl ByValue for $t {}
        )*};
    }
    by_value!(i32, u32, i64, u64, usize, f32, f64);

    #[doc(hidden)]
    pub mod __private {
        pub use linkme;
    }
}
