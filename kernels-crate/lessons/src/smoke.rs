//! `smoke_saxpy`: the smallest useful kernel, run by `ferrocuda smoke`.
use crate::entry::kernel;

/// `out[i] = a * x[i] + y[i]` for `i < n`, one element per thread.
///
/// # Launch
/// grid `ceil(n / block)`, any block size, no dynamic shared memory.
///
/// # Safety
/// `x`, `y` and `out` must each point to `n` valid `f32` in device memory.
#[kernel]
pub unsafe fn smoke_saxpy(n: usize, a: f32, x: *const f32, y: *const f32, out: *mut f32) {
    let i = crate::device::thread::index_1d();
    if i < n {
        // SAFETY: `i < n` and the caller guarantees `n` elements behind each pointer.
        unsafe { *out.add(i) = a * *x.add(i) + *y.add(i) };
    }
}
