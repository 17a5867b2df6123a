//! The window of one output: the taps, the boundary rule, and an output computed straight
//! from global memory.
use crate::config::{STENCIL_BOUNDARY_CLAMP, STENCIL_BOUNDARY_PERIODIC};
use crate::device::element::{Element, Float};

/// The coefficients of a stencil, applied one tap at a time.
pub trait Taps<T>: Copy {
    /// Every coefficient is 1: the output is the window's sum, which may be added in any order.
    const ONES: bool = false;
    /// `acc + c_k * x`: tap `k` (`0..=2R`, leftmost first) applied to input `x`.
    fn accumulate(&self, acc: T, k: usize, x: T) -> T;
}

/// Every coefficient 1: the sum of the window, as in the 《CUDA C/C++ Basics》学习笔记.
#[derive(Clone, Copy)]
pub struct Ones;

impl<T: Element> Taps<T> for Ones {
    const ONES: bool = true;
    #[inline(always)]
    fn accumulate(&self, acc: T, _k: usize, x: T) -> T {
        acc.add(x)
    }
}

impl<T: Float> Taps<T> for super::Coefficients<T> {
    #[inline(always)]
    fn accumulate(&self, acc: T, k: usize, x: T) -> T {
        x.mul_add(self.0[k], acc)
    }
}

/// The element that input index `j` (which may lie outside `0..n`) stands for under the
/// boundary rule `mode` (`STENCIL_BOUNDARY_*`), or `None` when it reads as zero.
///
/// Inside `0..n` that is `j` itself. Outside: zero mode reads 0; clamp reads the nearest end;
/// periodic wraps modulo `n` (several times when `n < R`). An empty array has no elements.
#[inline(always)]
pub fn source_index(j: isize, n: usize, mode: u32) -> Option<usize> {
    // A negative `j` wraps to a huge `usize`, so one compare tests both ends.
    if (j as usize) < n {
        return Some(j as usize);
    }
    if n == 0 {
        return None;
    }
    match mode {
        STENCIL_BOUNDARY_CLAMP => Some(if j < 0 { 0 } else { n - 1 }),
        STENCIL_BOUNDARY_PERIODIC => {
            // The kernels ask for indices less than `R + 2 * LANES` outside the array, so this
            // takes one step unless `n` is tiny; a 64-bit remainder would cost far more
            // registers.
            let (mut j, n) = (j, n as isize);
            while j < 0 {
                j += n;
            }
            while j >= n {
                j -= n;
            }
            Some(j as usize)
        }
        _ => None,
    }
}

/// Input `j` of `x` under the boundary rule `mode`.
///
/// # Safety
/// `x` must point to `n` readable elements.
#[inline(always)]
pub unsafe fn fetch<T: Element>(x: *const T, n: usize, j: isize, mode: u32) -> T {
    match source_index(j, n, mode) {
        // SAFETY: `source_index` returns an index below `n`.
        Some(i) => unsafe { *x.add(i) },
        None => T::ZERO,
    }
}

/// Output `i` computed straight from global memory: `2R + 1` reads through the boundary rule.
///
/// # Safety
/// `x` must point to `n` readable elements.
#[inline(always)]
pub unsafe fn point<T: Element, P: Taps<T>, const R: usize>(
    x: *const T,
    n: usize,
    i: usize,
    mode: u32,
    taps: &P,
) -> T {
    let mut acc = T::ADD_IDENTITY;
    for k in 0..2 * R + 1 {
        // SAFETY: forwarded to the caller.
        let v = unsafe { fetch(x, n, i as isize + k as isize - R as isize, mode) };
        acc = taps.accumulate(acc, k, v);
    }
    acc
}
