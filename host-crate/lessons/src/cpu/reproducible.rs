//! The reproducible sum's order on the CPU: the same additions, in the same order, as the
//! kernel (`kernels-crate/src/reduce/reproducible.rs`), so the same bits for every input whose
//! sum is not a NaN.
use ferrocuda_lesson_kernels::config::{
    REDUCE_REPRO_BLOCK, REDUCE_REPRO_LOADS, WARP_SIZE, reduce_repro_chunk,
};

pub use ferrocuda::reduce::{Reproducible, chunks_per_level};
use ferrocuda::runtime::element::Element;

/// The sum of `x` in the reproducible order: chunk sums, then chunk sums of those, until one
/// value is left; `+0.0` for an empty input.
pub fn sum_reproducible<T: Reproducible>(x: &[T]) -> T {
    if x.is_empty() {
        return T::default();
    }
    let mut sums = chunk_sums(x);
    while sums.len() > 1 {
        sums = chunk_sums(&sums);
    }
    sums[0]
}

/// The reproducible sum in `f32` of 16-bit floats (`reduce::sum_reproducible_to_f32`): the
/// `f32` order over the input widened to `f32`, each chunk widened as it is summed, so that no
/// `f32` copy of the whole input is made (2^30 elements would be 4 GiB). `NaN` for other
/// element types (which do not widen to `f32` exactly).
pub fn sum_reproducible_widened<H: Element>(x: &[H]) -> f32 {
    if !H::TYPE.is_half() {
        return f32::NAN;
    }
    if x.is_empty() {
        return 0.0;
    }
    let chunk = reduce_repro_chunk(size_of::<f32>());
    let sums = super::parallel::Split::host()
        .map(x, chunk, |part| {
            part.chunks(chunk)
                .map(|c| {
                    let wide: Vec<f32> = c.iter().map(|v| v.to_f64() as f32).collect();
                    chunk_sum(&wide)
                })
                .collect::<Vec<_>>()
        })
        .concat();
    if sums.len() == 1 {
        sums[0]
    } else {
        sum_reproducible(&sums)
    }
}

/// Whether two results of the reproducible sum agree: the same bits, or both a NaN (a NaN's
/// payload is the device's).
pub fn same_sum<T: Element>(a: T, b: T) -> bool {
    a.same_bits(b) || (a.to_f64().is_nan() && b.to_f64().is_nan())
}

/// One pass: the sum of each chunk of `x` (what one round of launches writes). The chunks are
/// shared out over the host's cores; each chunk's sum is the same wherever it is computed.
pub fn chunk_sums<T: Reproducible>(x: &[T]) -> Vec<T> {
    let chunk = reduce_repro_chunk(size_of::<T>());
    super::parallel::Split::host()
        .map(x, chunk, |part| {
            part.chunks(chunk).map(chunk_sum).collect::<Vec<_>>()
        })
        .concat()
}

/// `a[i] += a[i + m/2]` down to `a[0]` (`m` a power of two).
fn halve<T: Element>(a: &mut [T]) -> T {
    let mut width = a.len();
    while width > 1 {
        width /= 2;
        for i in 0..width {
            a[i] = a[i].add(a[i + width]);
        }
    }
    a[0]
}

/// The XOR butterfly of a warp's 32 values, as lane 0 ends with it (every lane ends with the
/// same bits: IEEE addition commutes).
fn butterfly<T: Element>(v: &mut [T; 32]) -> T {
    let mut mask = WARP_SIZE as usize / 2;
    while mask > 0 {
        let old = *v;
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = old[i].add(old[i ^ mask]);
        }
        mask /= 2;
    }
    v[0]
}

/// One chunk, elements past its end as `+0.0`.
fn chunk_sum<T: Element>(chunk: &[T]) -> T {
    let lanes = 16 / size_of::<T>();
    let block = REDUCE_REPRO_BLOCK as usize;
    let warp = WARP_SIZE as usize;
    let element = |i: usize| chunk.get(i).copied().unwrap_or_default();
    let mut warp_sums = [T::default(); 32];
    for (w, warp_sum) in warp_sums.iter_mut().enumerate().take(block / warp) {
        let mut threads = [T::default(); 32];
        for (lane, thread) in threads.iter_mut().enumerate() {
            let t = w * warp + lane;
            let mut sums = [T::default(); REDUCE_REPRO_LOADS];
            for (k, sum) in sums.iter_mut().enumerate() {
                let first = (k * block + t) * lanes;
                let mut v = [T::default(); 4];
                for (j, e) in v.iter_mut().enumerate().take(lanes) {
                    *e = element(first + j);
                }
                *sum = halve(&mut v[..lanes]);
            }
            *thread = halve(&mut sums);
        }
        *warp_sum = butterfly(&mut threads);
    }
    // Warp 0 over the warp sums, the unused lanes `+0.0`.
    butterfly(&mut warp_sums)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda::runtime::element::{Bf16, F16};

    /// Widening chunk by chunk gives the bits of the `f32` order over the widened copy, on one
    /// chunk, on a chunk and one more element, and over three levels' worth of chunks.
    #[test]
    fn the_widened_sum_is_the_f32_order_of_the_widened_input() {
        let chunk = reduce_repro_chunk(size_of::<f32>());
        let mut state = 0x5eed_u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 1000.0
        };
        for n in [
            0,
            1,
            31,
            chunk - 1,
            chunk,
            chunk + 1,
            3 * chunk + 17,
            chunk * 70 + 5,
        ] {
            let h: Vec<F16> = (0..n).map(|_| F16::from_f64(next())).collect();
            let b: Vec<Bf16> = (0..n).map(|_| Bf16::from_f64(next())).collect();
            let wide = |x: &[f64]| x.iter().map(|&v| v as f32).collect::<Vec<f32>>();
            let hw = wide(&h.iter().map(|v| v.to_f64()).collect::<Vec<_>>());
            let bw = wide(&b.iter().map(|v| v.to_f64()).collect::<Vec<_>>());
            assert_eq!(
                sum_reproducible_widened(&h).to_bits(),
                sum_reproducible(&hw).to_bits(),
                "f16, n = {n}"
            );
            assert_eq!(
                sum_reproducible_widened(&b).to_bits(),
                sum_reproducible(&bw).to_bits(),
                "bf16, n = {n}"
            );
        }
    }
}
