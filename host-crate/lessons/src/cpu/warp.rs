//! A model of one warp executing the PTX `shfl.sync` and `vote.sync` instructions, lane by
//! lane, exactly as the PTX ISA specifies them (including widths and deltas past a segment).
/// Lanes per warp.
pub const WARP_SIZE: u32 = ferrocuda_lesson_kernels::config::WARP_SIZE;

/// The four shuffle modes (numbered as the `selftest_shfl_*` kernels expect).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    /// `__shfl_sync`: read lane `b` of the segment.
    Idx = 0,
    /// `__shfl_up_sync`: read lane `lane - b`.
    Up = 1,
    /// `__shfl_down_sync`: read lane `lane + b`.
    Down = 2,
    /// `__shfl_xor_sync`: read lane `lane ^ b`.
    Xor = 3,
}

impl ShflMode {
    /// All four.
    pub const ALL: [ShflMode; 4] = [ShflMode::Idx, ShflMode::Up, ShflMode::Down, ShflMode::Xor];
}

/// The lane whose value `lane` receives from a shuffle of `mode` with operand `b` within
/// segments of `width` lanes (PTX ISA, `shfl.sync`: a source outside the allowed range
/// yields the lane's own value).
pub fn shfl_source(mode: ShflMode, lane: u32, b: u32, width: u32) -> u32 {
    assert!(width.is_power_of_two() && width <= WARP_SIZE && lane < WARP_SIZE);
    let segmask = (WARP_SIZE - width) & 0x1f;
    let cval = if mode == ShflMode::Up { 0 } else { 0x1f };
    let max_lane = ((lane & segmask) | (cval & !segmask)) as i64;
    let min_lane = (lane & segmask) as i64;
    let (lane, b) = (lane as i64, (b & 0x1f) as i64);
    let (j, ok) = match mode {
        ShflMode::Up => (lane - b, lane - b >= max_lane),
        ShflMode::Down => (lane + b, lane + b <= max_lane),
        ShflMode::Xor => (lane ^ b, (lane ^ b) <= max_lane),
        ShflMode::Idx => (
            min_lane | (b & !(segmask as i64)),
            (min_lane | (b & !(segmask as i64))) <= max_lane,
        ),
    };
    if ok { j as u32 } else { lane as u32 }
}

/// A whole-warp shuffle: the value each lane in `mask` receives, or `None` for lanes
/// outside `mask` and lanes whose source lane is outside `mask` (undefined in CUDA).
pub fn shfl<T: Copy>(
    mode: ShflMode,
    values: &[T],
    mask: u32,
    b: u32,
    width: u32,
) -> Vec<Option<T>> {
    (0..values.len() as u32)
        .map(|lane| {
            if mask & (1 << lane) == 0 {
                return None;
            }
            let src = shfl_source(mode, lane, b, width);
            (mask & (1 << src) != 0 && (src as usize) < values.len()).then(|| values[src as usize])
        })
        .collect()
}

/// `__ballot_sync`: bit `i` set when lane `i` is in `mask` and its predicate holds.
pub fn ballot(predicates: &[bool], mask: u32) -> u32 {
    predicates
        .iter()
        .enumerate()
        .filter(|&(i, &p)| p && mask & (1 << i) != 0)
        .fold(0, |m, (i, _)| m | 1 << i)
}

/// `__any_sync`.
pub fn any(predicates: &[bool], mask: u32) -> bool {
    ballot(predicates, mask) != 0
}

/// `__all_sync`: every lane in `mask` (that exists) holds its predicate.
pub fn all(predicates: &[bool], mask: u32) -> bool {
    let existing = if predicates.len() >= 32 {
        u32::MAX
    } else {
        (1u32 << predicates.len()) - 1
    };
    ballot(predicates, mask) == mask & existing
}
