//! How an array of `n` elements is cut into one contiguous shard per rank.
//!
//! Two cuts: [`Shards::even`], where the shards differ in length by at most one element, and
//! [`Shards::aligned`], where every non-empty shard starts on a multiple of a granule (the
//! reproducible sum's chunk, so that each rank's chunk sums are the whole array's). Every size
//! is cut, `n = 0` and `n` below the rank count included: a shard may be empty.

use crate::runtime::error::{Error, Result};

/// The bounds of one contiguous shard per rank: rank `r` holds `bounds[r]..bounds[r + 1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shards {
    bounds: Vec<usize>,
}

impl Shards {
    /// `n` elements over `ranks` shards whose lengths differ by at most one, the longer ones
    /// first.
    pub fn even(n: usize, ranks: usize) -> Result<Self> {
        check_ranks(ranks)?;
        let (base, extra) = (n / ranks, n % ranks);
        let bounds = (0..=ranks).map(|r| r * base + r.min(extra)).collect();
        Ok(Self { bounds })
    }

    /// `n` elements over `ranks` shards, each non-empty one starting on a multiple of `granule`:
    /// the `n.div_ceil(granule)` granules are cut [`even`](Self::even)ly, and the last granule
    /// may be short. A shard of a rank past the last granule is empty.
    pub fn aligned(n: usize, ranks: usize, granule: usize) -> Result<Self> {
        check_ranks(ranks)?;
        if granule == 0 {
            return Err(Error::InvalidArgument {
                what: "shards: the granule must be at least one element, not 0".into(),
            });
        }
        let granules = Self::even(n.div_ceil(granule), ranks)?;
        let bounds = granules
            .bounds
            .iter()
            .map(|&g| g.saturating_mul(granule).min(n))
            .collect();
        Ok(Self { bounds })
    }

    /// Where each shard starts, and the end: `bounds()[r]..bounds()[r + 1]` is rank `r`'s.
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// Shards with the given bounds: `bounds[0] = 0`, non-decreasing, one more than the ranks.
    pub(crate) fn from_bounds(bounds: Vec<usize>) -> Self {
        debug_assert!(bounds.len() >= 2 && bounds[0] == 0 && bounds.is_sorted());
        Self { bounds }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The number of elements over all shards.
    pub fn n(&self) -> usize {
        self.bounds[self.ranks()]
    }

    /// Rank `r`'s elements, as indices of the whole array.
    ///
    /// # Panics
    /// When `r` is not below [`ranks`](Self::ranks), as slice indexing does.
    pub fn range(&self, r: usize) -> std::ops::Range<usize> {
        self.bounds[r]..self.bounds[r + 1]
    }

    /// Rank `r`'s number of elements.
    pub fn len(&self, r: usize) -> usize {
        self.range(r).len()
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.n() == 0
    }
}

/// More ranks than any machine or job has: a count above it is a mistake, refused before the
/// bounds are allocated.
const MAX_RANKS: usize = 1 << 20;

fn check_ranks(ranks: usize) -> Result<()> {
    if ranks == 0 || ranks > MAX_RANKS {
        return Err(Error::InvalidArgument {
            what: format!("shards: the number of ranks must be 1 to {MAX_RANKS}, not {ranks}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shards cover `0..n` in order, without gap or overlap.
    fn assert_covers(s: &Shards, n: usize, ranks: usize) {
        assert_eq!((s.n(), s.ranks()), (n, ranks));
        let mut next = 0;
        for r in 0..ranks {
            assert_eq!(s.range(r).start, next, "{s:?}");
            next = s.range(r).end;
        }
        assert_eq!(next, n);
    }

    #[test]
    fn even_shards_cover_every_size_and_differ_by_at_most_one() {
        for ranks in 1..=9 {
            for n in [0, 1, 2, 7, 8, 9, 31, 33, 1000, 1 << 20, (1 << 20) + 3] {
                let s = Shards::even(n, ranks).unwrap();
                assert_covers(&s, n, ranks);
                let lens: Vec<usize> = (0..ranks).map(|r| s.len(r)).collect();
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "{lens:?}");
                assert!(
                    lens.windows(2).all(|w| w[0] >= w[1]),
                    "longer first: {lens:?}"
                );
            }
        }
        assert_eq!(Shards::even(3, 5).unwrap().bounds, [0, 1, 2, 3, 3, 3]);
    }

    #[test]
    fn aligned_shards_start_on_a_granule_and_cover_every_size() {
        for ranks in 1..=9 {
            for granule in [1, 3, 8192] {
                for n in [
                    0,
                    1,
                    granule - 1,
                    granule,
                    granule + 1,
                    5 * granule + 7,
                    1 << 20,
                ] {
                    let s = Shards::aligned(n, ranks, granule).unwrap();
                    assert_covers(&s, n, ranks);
                    for r in 0..ranks {
                        let start = s.range(r).start;
                        assert!(start % granule == 0 || start == n, "{s:?}");
                    }
                }
            }
        }
        assert_eq!(Shards::aligned(10, 3, 4).unwrap().bounds, [0, 4, 8, 10]);
        assert_eq!(Shards::aligned(5, 4, 4).unwrap().bounds, [0, 4, 5, 5, 5]);
    }

    #[test]
    fn zero_ranks_and_a_zero_granule_are_refused() {
        assert!(Shards::even(10, 0).is_err());
        assert!(Shards::even(1, usize::MAX).is_err());
        assert!(Shards::aligned(10, 0, 4).is_err());
        let e = Shards::aligned(10, 2, 0).unwrap_err().to_string();
        assert!(e.contains("granule"), "{e}");
    }
}
