//! Shared memory (共享内存): on-chip memory that the threads of one block share.
//!
//! Two kinds, as in CUDA C:
//! - **dynamic** (`extern __shared__ T s[];`): sized by the host at launch (the third launch
//!   parameter). [`dynamic_shared`] returns its base.
//! - **fixed-size** (`__shared__ T s[N];`): declared with [`shared_array!`](crate::shared_array),
//!   which emits a `.shared` PTX variable and a function returning a pointer to it.
//!
//! Both pointers are derived from the launch-sized base, which LLVM knows lives in the shared
//! address space, so every access compiles to `ld.shared`/`st.shared` rather than a generic
//! `ld`/`st` (the PTX test in `tests/` checks this).

/// `extern __shared__ T s[];`: the base of the dynamic shared memory given at launch.
///
/// Every call in a kernel returns the same address. Reading or writing past the byte count the
/// host passed at launch is out of bounds.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// The shared-window address of a pointer into shared memory.
#[doc(hidden)]
#[inline(always)]
pub fn shared_window_address<T>(p: *mut T) -> u32 {
    let a: u64;
    // SAFETY: `cvta.to.shared` only converts an address; it accesses no memory.
    unsafe {
        core::arch::asm!("cvta.to.shared.u64 {a}, {p};", a = out(reg64) a, p = in(reg64) p,
            options(pure, nomem, nostack));
    }
    a as u32
}

/// Declares a fixed-size shared array (`__shared__ T NAME[N];`) and a function `NAME()` that
/// returns a `*mut T` to its first element.
///
/// ```ignore
/// shared_array!(fn stencil_tile() -> [i32; 256 + 2 * 16]);
/// let tile = stencil_tile();
/// ```
/// The name becomes a PTX symbol and must be unique in the crate. The size must be a plain
/// constant expression (not depend on a const generic parameter).
#[macro_export]
macro_rules! shared_array {
    ($(#[$meta:meta])* $vis:vis fn $name:ident() -> [$t:ty; $n:expr]) => {
        core::arch::global_asm!(
            concat!(".shared .align {align} .b8 ", stringify!($name), "[{bytes}];"),
            align = const if core::mem::align_of::<$t>() > 16 { core::mem::align_of::<$t>() } else { 16 },
            bytes = const core::mem::size_of::<$t>() * ($n),
        );
        $(#[$meta])*
        #[inline(always)]
        $vis fn $name() -> *mut $t {
            let base = $crate::shared::dynamic_shared::<u8>();
            let sym: u32;
            // SAFETY: `mov` of a symbol's address accesses no memory.
            unsafe {
                core::arch::asm!(concat!("mov.u32 {s}, ", stringify!($name), ";"), s = out(reg32) sym,
                    options(pure, nomem, nostack));
            }
            let offset = sym as isize - $crate::shared::shared_window_address(base) as isize;
            base.wrapping_offset(offset).cast::<$t>()
        }
    };
}
