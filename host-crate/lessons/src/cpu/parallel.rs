//! How the CPU references share their work over the host's cores: consecutive stretches of the
//! input, at least 2^16 elements each, one thread per stretch, results kept in input order. A
//! reference computed this way has the value it would have in one pass wherever its parts
//! combine exactly (generated inputs, integer sums, min, max, the reproducible order's chunks).

/// A split of the input over `threads` threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    threads: usize,
}

/// The fewest elements a thread gets: below that, starting a thread costs more than it saves.
const MIN_STRETCH: usize = 1 << 16;

impl Split {
    /// One thread per core of this host.
    pub fn host() -> Self {
        Self::with_threads(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// `threads` threads (at least one).
    pub fn with_threads(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
        }
    }

    /// The length of each part of `len` elements: a multiple of `align`, the last part shorter.
    fn stretch(self, len: usize, align: usize) -> usize {
        len.div_ceil(self.threads)
            .max(MIN_STRETCH)
            .next_multiple_of(align.max(1))
    }

    /// `f` of each part of `x` (each a multiple of `align` long but the last), in order. One part
    /// runs on the calling thread; a panic in a part is resumed on the caller.
    pub fn map<T: Sync, R: Send>(
        self,
        x: &[T],
        align: usize,
        f: impl Fn(&[T]) -> R + Sync,
    ) -> Vec<R> {
        let size = self.stretch(x.len(), align);
        if x.len() <= size {
            return vec![f(x)];
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = x
                .chunks(size)
                .map(|part| {
                    let f = &f;
                    s.spawn(move || f(part))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }

    /// `f(start, part)` on each part of `x`, `start` being the part's first index.
    pub fn for_each_mut<T: Send>(self, x: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
        let size = self.stretch(x.len(), 1);
        if x.len() <= size {
            return f(0, x);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = x
                .chunks_mut(size)
                .enumerate()
                .map(|(k, part)| {
                    let f = &f;
                    s.spawn(move || f(k * size, part))
                })
                .collect();
            for h in handles {
                h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            }
        });
    }
}
