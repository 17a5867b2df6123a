//! The order in which the CPU device runs blocks and threads.

/// The order in which the CPU device resumes threads and runs blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Blocks in order of their index; in each round, threads in order of their rank.
    #[default]
    InOrder,
    /// Blocks in a random order, and each round's threads shuffled, from this seed: the same
    /// seed gives the same run.
    Random(u64),
}

impl Schedule {
    /// Parses `in-order` or `random:SEED` (the value of `FERROCUDA_CPU_SCHEDULE`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text == "in-order" {
            return Ok(Schedule::InOrder);
        }
        if let Some(seed) = text.strip_prefix("random:") {
            return seed
                .parse()
                .map(Schedule::Random)
                .map_err(|_| format!("`{text}`: the seed after `random:` is not a u64"));
        }
        if text == "random" {
            return Ok(Schedule::Random(1));
        }
        Err(format!(
            "`{text}` is not a schedule: say `in-order` or `random:SEED`"
        ))
    }

    pub(super) fn order_groups<T>(&self, groups: &mut [T]) {
        if let Schedule::Random(seed) = *self {
            Rng(seed ^ 0x9E37_79B9_7F4A_7C15).shuffle(groups);
        }
    }

    /// The shuffler of the threads of the group whose first block is `first`.
    pub(super) fn rng(&self, first: [u32; 3]) -> Option<Rng> {
        match *self {
            Schedule::InOrder => None,
            Schedule::Random(seed) => Some(Rng(seed
                ^ (u64::from(first[0]) << 1)
                ^ (u64::from(first[1]) << 22)
                ^ (u64::from(first[2]) << 43))),
        }
    }
}

/// SplitMix64: small, and the same sequence on every platform.
pub(super) struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher-Yates.
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}
