//! The sum of one window of a vector's outputs, written so that neighbouring windows share
//! their adds.
//!
//! A vector of `lanes` outputs of a sum stencil of width `w = 2R + 1` reads `lanes + w - 1`
//! inputs. One chain of adds a window costs `lanes * (w - 1)` adds: 48 for the notes' `R = 3`
//! and the eight lanes of a 16-byte vector of 16-bit floats, which is what keeps their kernels
//! waiting on instruction issue, not on memory. Neighbouring windows share all but one of their
//! inputs; van Herk and Gil-Werman's running sums (for a sliding maximum, here for a sum) share
//! the adds too.

/// The sum of the window `x(c) + ... + x(c + w - 1)`, with `add` as the addition, in an order
/// that the other windows of the vector share.
///
/// The positions are cut into blocks of `w` (`0 .. w`, `w .. 2w`, ...), so a window is either
/// one whole block or the end of one block and the start of the next. The end of a block is
/// added right to left from the block's last element, the start of the next left to right from
/// its first, and the two joined by one add. Window `c`'s right-to-left part is the one of
/// window `c + 1` with one more add, and its left-to-right part the one of window `c - 1` with
/// one more (a whole block past the first is added left to right, extending the start of the
/// window before it), so once the compiler has merged the identical adds of the `lanes`
/// windows (inlined, every loop unrolled), a vector costs at most `3 * lanes + w` adds at every
/// width: for eight lanes 18 against 48 for `w = 7`, 45 against 256 for `w = 33`.
///
/// Each window is still the sum of exactly its `w` terms, each added once, with `w - 1`
/// roundings, so the error bound of one chain, `(w - 1) * eps / 2 * sum |x|` to first order,
/// holds for it.
#[inline(always)]
pub fn window_sum<A: Copy>(
    x: impl Fn(usize) -> A,
    c: usize,
    w: usize,
    add: impl Fn(A, A) -> A,
) -> A {
    let first = c / w * w; // the first position of the block that holds `c`
    if c == first && c > 0 {
        // A whole block past the first, left to right: the next block's start of the windows
        // before it, one add longer.
        let mut head = x(c);
        for j in c + 1..c + w {
            head = add(head, x(j));
        }
        return head;
    }
    // The end of the block that holds `c`, right to left down to `c`.
    let end = first + w - 1;
    let mut tail = x(end);
    let mut i = end;
    while i > c {
        i -= 1;
        tail = add(x(i), tail);
    }
    if c == first {
        return tail; // the first block, whole
    }
    // The next block's first element, left to right up to the window's last.
    let mut head = x(end + 1);
    for j in end + 2..c + w {
        head = add(head, x(j));
    }
    add(tail, head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashSet;

    /// Input `i` as a count of each input: a sum shows how often it holds every input.
    fn input(i: usize) -> [u8; 48] {
        let mut v = [0; 48];
        v[i] = 1;
        v
    }

    fn add(a: [u8; 48], b: [u8; 48]) -> [u8; 48] {
        core::array::from_fn(|k| a[k] + b[k])
    }

    #[test]
    fn every_window_sums_exactly_its_own_inputs_once() {
        for lanes in [1, 2, 4, 8] {
            for w in [1, 3, 5, 7, 9, 17, 33] {
                for c in 0..lanes {
                    let got = window_sum(input, c, w, add);
                    let want: [u8; 48] =
                        core::array::from_fn(|k| u8::from((c..c + w).contains(&k)));
                    assert_eq!(got, want, "lanes {lanes}, width {w}, window {c}");
                }
            }
        }
    }

    /// The adds left once identical ones (the same operands) are merged, as the compiler does:
    /// the reason the order exists.
    fn shared_adds(lanes: usize, w: usize) -> usize {
        let adds = RefCell::new(HashSet::new());
        for c in 0..lanes {
            window_sum(input, c, w, |a, b| {
                adds.borrow_mut().insert((a, b));
                add(a, b)
            });
        }
        adds.into_inner().len()
    }

    #[test]
    fn the_windows_of_a_vector_share_their_adds() {
        // Eight lanes, against one chain a window: 13 of 16 (R = 1), 18 of 48 (the notes'
        // R = 3), 45 of 256 (R = 16).
        assert_eq!(shared_adds(8, 3), 13);
        assert_eq!(shared_adds(8, 7), 18);
        assert_eq!(shared_adds(8, 33), 45);
        for lanes in [2, 4, 8] {
            for w in [3, 5, 7, 9, 17, 33] {
                let (shared, chains) = (shared_adds(lanes, w), lanes * (w - 1));
                assert!(
                    shared <= chains,
                    "lanes {lanes}, width {w}: {shared} > {chains}"
                );
                assert!(
                    shared <= 3 * lanes + w,
                    "lanes {lanes}, width {w}: {shared} adds"
                );
            }
        }
    }
}
