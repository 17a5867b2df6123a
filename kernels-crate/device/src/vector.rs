//! 16-byte vector loads and stores of global memory (`float4`, `int4`, `double2`).
//!
//! One `ld.global.v4.b32` moves 16 bytes per thread in one instruction: fewer instructions in
//! flight per byte, which is what lets a memory-bound kernel approach the bandwidth limit.
//! The address must be 16-byte aligned.

/// 16 bytes, 16-byte aligned: `N` lanes of `T` with `N * size_of::<T>() == 16`.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Vector16<T: Copy, const N: usize>(pub [T; N]);

/// Reads 16 bytes at `p` with one vector load (`ld.global.v4.b32` / `.v2.b64`); see
/// [`Element::load_nc`](super::element::Element::load_nc) for the read-only (`.nc`) path.
///
/// # Safety
/// `p` must be 16-byte aligned, point to `N` valid elements of global memory, and nothing may
/// write them during the kernel (the read-only cache is not coherent with writes).
#[inline(always)]
pub unsafe fn load_16<T: Copy, const N: usize>(p: *const Vector16<T, N>) -> Vector16<T, N>
where
    Vector16<T, N>: Access16,
{
    // SAFETY: forwarded to the caller.
    unsafe { Access16::load(&*p) }
}

/// Writes 16 bytes at `p` with one vector store (`st.global.v4.b32` / `.v2.b64`).
///
/// # Safety
/// `p` must be 16-byte aligned and point to `N` writable elements of global memory.
#[inline(always)]
pub unsafe fn store_16<T: Copy, const N: usize>(p: *mut Vector16<T, N>, v: Vector16<T, N>)
where
    Vector16<T, N>: Access16,
{
    // SAFETY: forwarded to the caller.
    unsafe { Access16::store(&mut *p, v) }
}

/// Lane-by-lane access: LLVM turns lane-wise reads of an aligned 16-byte value into one vector
/// instruction, while a whole-value copy becomes two 8-byte ones.
pub trait Access16: Copy {
    /// Reads every lane of `v`.
    fn load(v: &Self) -> Self;
    /// Writes every lane of `v` to `dst`.
    fn store(dst: &mut Self, v: Self);
}

impl<T: Copy> Access16 for Vector16<T, 4> {
    #[inline(always)]
    fn load(v: &Self) -> Self {
        Vector16([v.0[0], v.0[1], v.0[2], v.0[3]])
    }
    #[inline(always)]
    fn store(dst: &mut Self, v: Self) {
        dst.0[0] = v.0[0];
        dst.0[1] = v.0[1];
        dst.0[2] = v.0[2];
        dst.0[3] = v.0[3];
    }
}

impl<T: Copy> Access16 for Vector16<T, 2> {
    #[inline(always)]
    fn load(v: &Self) -> Self {
        Vector16([v.0[0], v.0[1]])
    }
    #[inline(always)]
    fn store(dst: &mut Self, v: Self) {
        dst.0[0] = v.0[0];
        dst.0[1] = v.0[1];
    }
}

/// Eight 2-byte lanes (the 16-bit floats) move as four 4-byte words (lane by lane they would
/// be eight 2-byte accesses), split and joined with shifts in registers.
macro_rules! access16_half {
    ($($t:path),*) => {$(
        impl Access16 for Vector16<$t, 8> {
            #[inline(always)]
            fn load(v: &Self) -> Self {
                // SAFETY: the same 16 bytes at the same 16-byte aligned address, as words.
                let w = Access16::load(unsafe { &*(v as *const Self).cast::<Vector16<u32, 4>>() });
                Self::from_words(w)
            }
            #[inline(always)]
            fn store(dst: &mut Self, v: Self) {
                // SAFETY: as in `load`; the caller's `&mut` covers the 16 bytes written.
                let dst = unsafe { &mut *(dst as *mut Self).cast::<Vector16<u32, 4>>() };
                Access16::store(dst, v.to_words());
            }
        }

        impl Vector16<$t, 8> {
            /// The lanes of four little-endian words, lane 0 in the low half of word 0.
            #[inline(always)]
            pub fn from_words(w: Vector16<u32, 4>) -> Self {
                Vector16(core::array::from_fn(|i| $t((w.0[i / 2] >> (16 * (i % 2))) as u16)))
            }
            /// The four words of the lanes, as memory holds them.
            #[inline(always)]
            pub fn to_words(self) -> Vector16<u32, 4> {
                Vector16(core::array::from_fn(|k| {
                    self.0[2 * k].0 as u32 | (self.0[2 * k + 1].0 as u32) << 16
                }))
            }
        }
    )*};
}
access16_half!(crate::half::F16, crate::half::Bf16);

/// `ld.global.nc.v4.b32` of four 4-byte lanes.
#[inline(always)]
pub(super) unsafe fn load_nc_v4<T: Copy>(p: *const Vector16<u32, 4>) -> Vector16<T, 4> {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller guarantees a 16-byte aligned address of 16 readable bytes.
    return unsafe { core::mem::transmute_copy(&*p) };
    #[cfg(target_arch = "nvptx64")]
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees a 16-byte aligned global address of 16 readable bytes.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.v4.b32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            options(pure, readonly, nostack),
        );
        core::mem::transmute_copy(&Vector16([a, b, c, d]))
    }
}

/// `ld.global.nc.v2.b64` of two 8-byte lanes.
#[inline(always)]
pub(super) unsafe fn load_nc_v2<T: Copy>(p: *const Vector16<u64, 2>) -> Vector16<T, 2> {
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller guarantees a 16-byte aligned address of 16 readable bytes.
    return unsafe { core::mem::transmute_copy(&*p) };
    #[cfg(target_arch = "nvptx64")]
    let (a, b): (u64, u64);
    // SAFETY: the caller guarantees a 16-byte aligned global address of 16 readable bytes.
    #[cfg(target_arch = "nvptx64")]
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.v2.b64 {{{a}, {b}}}, [g]; }}",
            p = in(reg64) p, a = out(reg64) a, b = out(reg64) b,
            options(pure, readonly, nostack),
        );
        core::mem::transmute_copy(&Vector16([a, b]))
    }
}

/// How a slice of `n` elements of `T` starting at `x` splits into a scalar head (up to the
/// first 16-byte boundary), whole 16-byte vectors, and a scalar tail. Requires `x` to be
/// aligned to `size_of::<T>()`, as any valid slice is.
#[derive(Clone, Copy)]
pub struct VectorSplit {
    /// Scalars before the first vector.
    pub head: usize,
    /// Whole vectors after the head.
    pub vectors: usize,
    /// Index of the first tail scalar (`head + vectors * LANES`); the tail runs to `n`.
    pub tail_start: usize,
}

impl VectorSplit {
    /// The split of `n` elements at `x`.
    #[inline(always)]
    pub fn of<T: super::element::Element>(x: *const T, n: usize) -> Self {
        let misalign = x as usize % 16;
        let head = if misalign == 0 {
            0
        } else {
            ((16 - misalign) / size_of::<T>()).min(n)
        };
        let vectors = (n - head) / T::LANES;
        Self {
            head,
            vectors,
            tail_start: head + vectors * T::LANES,
        }
    }
}
