//! Shared memory (共享内存): on-chip memory that the threads of one block share.
//!
//! Two kinds, as in CUDA C:
//! - **dynamic** (`extern __shared__ T s[];`): sized by the host at launch (the third launch
//!   parameter). [`dynamic_shared`] returns its base.
//! - **fixed-size** (`__shared__ T s[N];`): declared with [`shared_array!`](crate::shared_array),
//!   which emits a `.shared` PTX variable and a function returning a pointer to it.
//!
//! Every access through either pointer compiles to `ld.shared`/`st.shared` rather than a
//! generic `ld`/`st` (the PTX test in `tests/` checks this): LLVM knows that the launch-sized
//! base lives in the shared address space, and the address of a fixed-size array is computed
//! from that base in a way LLVM's address-space inference follows.
//!
//! # Provenance
//!
//! The dynamic base comes from the compiler (`gpu_launch_sized_workgroup_mem`), and its
//! provenance covers the bytes given at launch. A fixed-size array is a separate `.shared`
//! variable, declared in PTX and placed in the block's shared memory by the CUDA runtime: the
//! Rust abstract machine did not allocate it, so a pointer to it must not carry the dynamic
//! base's provenance (reaching it with `base.wrapping_offset(distance)` and dereferencing would
//! be undefined behaviour, even though the address is right). Rust treats memory outside its
//! control as having exposed provenance, so `shared_array!` makes the array's pointer with
//! [`core::ptr::with_exposed_provenance_mut`] from its address, the sanctioned way to point at
//! such memory. How that address is computed keeps the accesses in the shared state space; the
//! documentation of `shared_symbol_ptr` (the function the macro calls) says why.

/// `extern __shared__ T s[];`: the base of the dynamic shared memory given at launch.
///
/// Every call in a kernel returns the same address. Reading or writing past the byte count the
/// host passed at launch is out of bounds.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    return core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>();
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::current().dynamic_shared().cast()
}

/// The shared-window address of a pointer into shared memory.
#[cfg(target_arch = "nvptx64")]
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

/// A pointer to the `.shared` PTX variable whose shared-window address is `window_address`
/// (`mov.u32 r, symbol;`), with the provenance of that variable.
///
/// The generic address of the variable is the generic address of the launch-sized base plus the
/// distance between the two in the shared window. It is computed with `wrapping_offset` on the
/// base, which only does address arithmetic (the result is never dereferenced), and only its
/// integer value is kept: the pointer returned is [`core::ptr::with_exposed_provenance_mut`] of
/// that integer, which takes the provenance of the variable, memory the Rust abstract machine did
/// not allocate and so treats as exposed. It does not take the base's provenance, which covers
/// only the dynamic shared memory given at launch.
///
/// Keeping the arithmetic on the shared-space base, rather than on integers, is what keeps the
/// accesses in the shared state space: LLVM sees `inttoptr (ptrtoint p)` of a pointer `p` it
/// knows to be shared, a round trip that its address-space inference (and instruction
/// combining) looks through. An address built as an integer (`cvta.shared` of the symbol in
/// asm, or the base's address plus the distance) is opaque to LLVM and gives generic `ld`/`st`.
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
#[inline(always)]
pub fn shared_symbol_ptr<T>(window_address: u32) -> *mut T {
    let base = dynamic_shared::<u8>();
    let distance = window_address as isize - shared_window_address(base) as isize;
    core::ptr::with_exposed_provenance_mut(base.wrapping_offset(distance).addr())
}

/// Declares a fixed-size shared array (`__shared__ T NAME[N];`) and a function `NAME()` that
/// returns a `*mut T` to its first element.
///
/// ```ignore
/// shared_array!(fn stencil_tile() -> [i32; 256 + 2 * 16]);
/// let tile = stencil_tile();
/// ```
/// The name becomes a PTX symbol of the module and must be unique among every kernel crate
/// linked into one PTX: the crate and the crates it uses (a duplicate is a `ptxas` error, and
/// a used crate's arrays are declared in the user's PTX even when no kernel there touches them,
/// at no cost: a kernel gets shared memory only for the arrays it reaches). The size must be a plain
/// constant expression (not depend on a const generic parameter). The array is aligned to
/// `max(align_of::<T>(), 16)` bytes, and every call in a block returns the same pointer.
///
/// # Safety
///
/// Calling `NAME()` is safe; dereferencing the pointer is what needs care. The pointer is valid
/// for reads and writes of the `N` elements of the array (its provenance is that of the `.shared`
/// variable, see [the module documentation](crate::shared#provenance)), for the duration of the
/// kernel, and is shared by all threads of the block. As in CUDA, the array starts uninitialised
/// in every block: write an element before reading it, and order the writes of one thread before
/// the reads of another with a barrier (`syncthreads`); unsynchronised conflicting accesses are
/// a data race.
#[cfg(target_arch = "nvptx64")]
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
            let sym: u32;
            // SAFETY: `mov` of a symbol's address accesses no memory.
            unsafe {
                core::arch::asm!(concat!("mov.u32 {s}, ", stringify!($name), ";"), s = out(reg32) sym,
                    options(pure, nomem, nostack));
            }
            $crate::shared::shared_symbol_ptr::<$t>(sym)
        }
    };
}

/// `shared_array!` on the CPU device: the array is placed in the block's shared memory, after
/// the dynamic part, the first time a thread of the block reaches it.
#[cfg(not(target_arch = "nvptx64"))]
#[macro_export]
macro_rules! shared_array {
    ($(#[$meta:meta])* $vis:vis fn $name:ident() -> [$t:ty; $n:expr]) => {
        $(#[$meta])*
        #[inline(always)]
        $vis fn $name() -> *mut $t {
            // The address of this static names the array: one per declaration.
            static KEY: u8 = 0;
            let align = if core::mem::align_of::<$t>() > 16 { core::mem::align_of::<$t>() } else { 16 };
            $crate::cpu::current()
                .static_shared(&KEY as *const u8 as usize, core::mem::size_of::<$t>() * ($n), align)
                .cast::<$t>()
        }
    };
}
