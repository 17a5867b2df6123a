//! The reduction variants of the notes and the library, by name, with the typed handles of the
//! kernels each one launches.
use ferrocuda::kernels::entry::{DeviceGlobal, Entry};
use ferrocuda::kernels::grid::GridBarrier;

use ferrocuda::reduce::ReduceOp;
use ferrocuda::runtime::element::{ElemType, Element};

/// Every reduction kernel family, by the name the CLI and the reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceVariant {
    /// `reduceNeighbored` (《CUDA C编程权威指南》3.4).
    Neighbored,
    /// `reduceNeighboredLess`.
    NeighboredLess,
    /// `reduceInterleaved`.
    Interleaved,
    /// `reduceUnrolling2`.
    Unrolling2,
    /// `reduceUnrolling4`.
    Unrolling4,
    /// `reduceUnrolling8`.
    Unrolling8,
    /// `reduceUnrollWarps8`.
    UnrollWarps8,
    /// `reduceCompleteUnrollWarps8`.
    CompleteUnrollWarps8,
    /// `reduceCompleteUnroll<iBlockSize>` (one entry point per block size).
    CompleteUnroll,
    /// `reduce_syncwarp` (樊哲勇《CUDA编程基础与实践》第10章), atomic finish.
    Syncwarp,
    /// `reduce_shfl`, atomic finish.
    Shfl,
    /// `reduce_cp` (cooperative-group tile), atomic finish.
    Cg,
    /// `reduce1parallelism`: grid-stride, two passes.
    Reduce1Parallelism,
    /// `reduce2static`: as above, partials in a static device array.
    Reduce2Static,
    /// The cooperative-groups sum with 16-byte loads (沐曦 MXMACA 教材第5章), atomic finish.
    CgVector4,
    /// The library's fast path.
    Fast,
    /// The fast path in thread block clusters: the blocks of a cluster combine through
    /// distributed shared memory, one partial and one ticket per cluster. sm_90.
    FastCluster,
    /// One cooperative launch: per-block partials, `grid.sync()`, block 0 adds them (the grid-wide
    /// synchronisation of 樊哲勇《CUDA编程基础与实践》第10章 and 沐曦 MXMACA 教材第5章).
    GridSync,
}

pub(super) use ReduceVariant as V;

impl ReduceVariant {
    /// All of them, in the order of the notes.
    pub const ALL: [ReduceVariant; 18] = [
        V::Neighbored,
        V::NeighboredLess,
        V::Interleaved,
        V::Unrolling2,
        V::Unrolling4,
        V::Unrolling8,
        V::UnrollWarps8,
        V::CompleteUnrollWarps8,
        V::CompleteUnroll,
        V::Syncwarp,
        V::Shfl,
        V::Cg,
        V::Reduce1Parallelism,
        V::Reduce2Static,
        V::CgVector4,
        V::Fast,
        V::FastCluster,
        V::GridSync,
    ];

    /// The CLI name; also the kernel symbol stem (`reduce_<name>_<type>`), except for the two
    /// grid-stride variants whose symbols keep the notes' names.
    pub fn name(self) -> &'static str {
        match self {
            V::Neighbored => "neighbored",
            V::NeighboredLess => "neighbored_less",
            V::Interleaved => "interleaved",
            V::Unrolling2 => "unrolling2",
            V::Unrolling4 => "unrolling4",
            V::Unrolling8 => "unrolling8",
            V::UnrollWarps8 => "unroll_warps8",
            V::CompleteUnrollWarps8 => "complete_unroll_warps8",
            V::CompleteUnroll => "complete_unroll",
            V::Syncwarp => "syncwarp",
            V::Shfl => "shfl",
            V::Cg => "cg",
            V::Reduce1Parallelism => "reduce1_parallelism",
            V::Reduce2Static => "reduce2_static",
            V::CgVector4 => "cg_vector4",
            V::Fast => "fast",
            V::FastCluster => "fast_cluster",
            V::GridSync => "grid_sync",
        }
    }

    /// The oldest architecture that runs the variant (as `sm_XY`'s number): 90 for the cluster
    /// kernel, 0 for the others.
    pub fn min_arch(self) -> u32 {
        match self {
            V::FastCluster => 90,
            _ => 0,
        }
    }

    /// Whether the GPU of `props` runs the variant (its compute capability reaches
    /// [`min_arch`](Self::min_arch)).
    pub fn runs_on(self, props: &ferrocuda::DeviceProps) -> bool {
        props.reaches_arch(self.min_arch())
    }

    /// From its CLI name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The textbook, in-place family of "Professional CUDA C".
    pub fn is_textbook(self) -> bool {
        matches!(
            self,
            V::Neighbored
                | V::NeighboredLess
                | V::Interleaved
                | V::Unrolling2
                | V::Unrolling4
                | V::Unrolling8
                | V::UnrollWarps8
                | V::CompleteUnrollWarps8
                | V::CompleteUnroll
        )
    }

    /// Whether one `atomic_add` per block finishes the sum (float results then depend on the
    /// order blocks arrive in).
    pub fn is_atomic_finish(self) -> bool {
        matches!(self, V::Syncwarp | V::Shfl | V::Cg | V::CgVector4)
    }

    /// The same input gives the same bits every run.
    pub fn is_deterministic(self, ty: ElemType) -> bool {
        !(self.is_atomic_finish() && ty.is_float())
    }

    /// Input elements each thread combines before the block tree (the book's unrolling).
    pub fn unroll(self) -> usize {
        match self {
            V::Unrolling2 => 2,
            V::Unrolling4 => 4,
            V::Unrolling8 | V::UnrollWarps8 | V::CompleteUnrollWarps8 | V::CompleteUnroll => 8,
            _ => 1,
        }
    }

    /// Element types with an entry point (from the kernels' declarations).
    pub fn supports_type(self, ty: ElemType) -> bool {
        ferrocuda::with_elem_type!(ty, T => Entries::<T, T>::of(self, ReduceOp::Sum, self.default_block()).is_some())
    }

    /// Operations with an entry point (from the kernels' declarations): only the fast path has
    /// min and max.
    pub fn supports_op(self, op: ReduceOp) -> bool {
        ElemType::ALL.into_iter().any(|ty| {
            ferrocuda::with_elem_type!(ty, T => Entries::<T, T>::of(self, op, self.default_block()).is_some())
        })
    }

    /// The block size the notes use (and the fast path's tuned one).
    pub fn default_block(self) -> u32 {
        match self {
            _ if self.is_textbook() => 512,
            V::CgVector4 | V::GridSync => 256,
            V::Fast | V::FastCluster => ferrocuda::reduce::FAST_BLOCK,
            _ => 128,
        }
    }

    /// Why `block` cannot be used with this variant, if it cannot.
    pub fn block_error(self, block: u32) -> Option<String> {
        let (min, rule) = match self {
            V::Fast | V::FastCluster | V::GridSync => (32, "a multiple of 32"),
            V::CgVector4 => (32, "a power of two"),
            _ => (64, "a power of two"),
        };
        let shape_ok = if matches!(self, V::Fast | V::FastCluster | V::GridSync) {
            block.is_multiple_of(32)
        } else {
            block.is_power_of_two()
        };
        (!(shape_ok && (min..=1024).contains(&block))).then(|| {
            format!("reduce variant `{}` needs a block size that is {rule} from {min} to 1024, not {block}", self.name())
        })
    }

    /// One line on what limits this variant's speed.
    pub fn limiter(self) -> &'static str {
        match self {
            V::Neighbored => {
                "divergent warps (tid % (2*stride)) and a 32-bit modulo in every step; strided in-place global traffic"
            }
            V::NeighboredLess => {
                "no divergence until < 32 active threads, but global-memory accesses of a step are strided (2*stride*tid)"
            }
            V::Interleaved => {
                "coalesced tree, but each thread loads one element: half the threads idle after the first step"
            }
            V::Unrolling2 => {
                "2 loads in flight per thread; the in-place tree still round-trips global memory"
            }
            V::Unrolling4 => "4 loads in flight per thread; tree in global memory",
            V::Unrolling8 => "8 loads in flight per thread; the tree's barriers now dominate",
            V::UnrollWarps8 => "last 6 tree steps without block barriers (syncwarp)",
            V::CompleteUnrollWarps8 => {
                "loop overhead of the tree removed; global in-place tree remains"
            }
            V::CompleteUnroll => {
                "block size a compile-time constant: dead steps and index math folded"
            }
            V::Syncwarp => "one element per thread into shared memory, one float atomic per block",
            V::Shfl => "as syncwarp, the last 5 steps in registers (shuffles)",
            V::Cg => "as shfl through the tile API (same instructions)",
            V::Reduce1Parallelism => {
                "grid-stride loop, 4-byte loads, one register accumulator: latency-bound per thread"
            }
            V::Reduce2Static => "as reduce1_parallelism; no partials allocation",
            V::CgVector4 => {
                "16-byte loads, grid sized for n/4, shared tree with two syncs per step"
            }
            V::Fast => {
                "16-byte loads, 4 in flight per thread, grid = occupancy x SMs, shuffle tree, one launch"
            }
            V::FastCluster => {
                "as fast; the blocks of a cluster of 8 combine through distributed shared memory: 8x fewer partials and tickets"
            }
            V::GridSync => {
                "grid-stride 4-byte loads, one partial per block, a grid-wide barrier, block 0 finishes"
            }
        }
    }
}

/// Block sizes of `reduce_complete_unroll` (the `BLOCK` instances its declaration has).
pub fn complete_unroll_blocks() -> Vec<u32> {
    (0..=10)
        .map(|e| 1u32 << e)
        .filter(|&b| ferrocuda_lesson_kernels::reduce::reduce_complete_unroll::<i32>(b).is_some())
        .collect()
}

/// The typed handles of the kernels one variant launches, before any GPU is involved: `None`
/// from [`Entries::of`] when the variant has no kernel for `T`, `A`, `op` or `block`.
pub(super) enum Entries<T, A> {
    /// In place on a scratch copy, one partial per block (the textbook family).
    InPlace(Entry<(*mut T, *mut A, usize)>),
    /// One launch, one atomic add per block into the result (the trees of 樊哲勇第10章).
    AtomicFinish(Entry<(*const T, *mut A, usize)>),
    /// The cooperative-groups vector sum of 沐曦 MXMACA 教材第5章 (arguments `sum, x, n`).
    CgVector(Entry<(*mut A, *const T, usize)>),
    /// Grid-stride partials into a buffer, then the same kernel over the partials.
    GridStride(
        Entry<(*const T, usize, *mut A)>,
        Entry<(*const A, usize, *mut A)>,
    ),
    /// As [`Entries::GridStride`], the partials in a static device array.
    GridStrideStatic(
        Entry<(*const T, usize)>,
        Entry<(*const A, usize, *mut A)>,
        DeviceGlobal<A>,
    ),
    /// The fast path.
    Fast(Entry<(*const T, usize, *mut A, *mut u32, *mut A)>),
    /// The grid-synchronised sum (a cooperative launch).
    GridSync(Entry<(*const T, usize, *mut A, GridBarrier, *mut A)>),
}

impl<T: Element, A: Element> Entries<T, A> {
    pub(super) fn of(variant: ReduceVariant, op: ReduceOp, block: u32) -> Option<Self> {
        use ferrocuda_lesson_kernels::reduce as k;
        if op != ReduceOp::Sum && !matches!(variant, V::Fast | V::FastCluster) {
            return None;
        }
        let in_place =
            |e: Option<Entry<(*mut T, *mut T, usize)>>| Some(Self::InPlace(e?.retype()?));
        match variant {
            V::Neighbored => in_place(k::reduce_neighbored::<T>()),
            V::NeighboredLess => in_place(k::reduce_neighbored_less::<T>()),
            V::Interleaved => in_place(k::reduce_interleaved::<T>()),
            V::Unrolling2 => in_place(k::reduce_unrolling2::<T>()),
            V::Unrolling4 => in_place(k::reduce_unrolling4::<T>()),
            V::Unrolling8 => in_place(k::reduce_unrolling8::<T>()),
            V::UnrollWarps8 => in_place(k::reduce_unroll_warps8::<T>()),
            V::CompleteUnrollWarps8 => in_place(k::reduce_complete_unroll_warps8::<T>()),
            V::CompleteUnroll => in_place(k::reduce_complete_unroll::<T>(block)),
            V::Syncwarp => Some(Self::AtomicFinish(k::reduce_syncwarp::<T>()?.retype()?)),
            V::Shfl => Some(Self::AtomicFinish(k::reduce_shfl::<T>()?.retype()?)),
            V::Cg => Some(Self::AtomicFinish(k::reduce_cg::<T>()?.retype()?)),
            V::CgVector4 => Some(Self::CgVector(k::reduce_cg_vector4::<T>()?.retype()?)),
            V::Reduce1Parallelism => Some(Self::GridStride(
                k::reduce1_parallelism::<T>()?.retype()?,
                k::reduce1_parallelism::<A>()?,
            )),
            V::Reduce2Static => Some(Self::GridStrideStatic(
                k::reduce2_static::<T>()?,
                k::reduce1_parallelism::<A>()?,
                k::reduce2_static_partials::<A>()?,
            )),
            V::GridSync => Some(Self::GridSync(k::reduce_grid_sync::<T>()?.retype()?)),
            V::Fast => Some(Self::Fast(ferrocuda::reduce::fast_entry::<T, A>(op)?)),
            V::FastCluster => Some(Self::Fast(fast_cluster_entry::<T, A>(op)?)),
        }
    }
}

/// The cluster form of the fast path for `op` (same parameters as the fast path's).
fn fast_cluster_entry<T: Element, A: Element>(
    op: ReduceOp,
) -> Option<Entry<ferrocuda::reduce::FastArgs<T, A>>> {
    use ferrocuda::kernels::reduce as k;
    let same = match op {
        ReduceOp::Sum => k::reduce_fast_cluster::<k::Sum, T>(),
        ReduceOp::Min => k::reduce_fast_cluster::<k::Min, T>(),
        ReduceOp::Max => k::reduce_fast_cluster::<k::Max, T>(),
    };
    same?.retype()
}
