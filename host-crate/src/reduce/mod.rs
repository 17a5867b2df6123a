//! Reductions on the GPU: the library's fast path ([`sum`], [`min`], [`max`],
//! [`sum_i32_to_i64`]) and every textbook variant of the notes ([`ReduceVariant`], run with
//! [`ReduceRun`]).
//!
//! Empty input: `sum` returns 0 without launching anything; `min` and `max` of nothing are
//! undefined and return [`Error::InvalidArgument`]. Integer sums wrap (they are exact modulo
//! 2^bits, as the kernels compute them).
use std::marker::PhantomData;

use cust::memory::{AsyncCopyDestination, DeviceBuffer, DevicePointer, DeviceSlice};
use ferrocuda_kernels::config::{REDUCE_FAST_ITEMS, REDUCE_STATIC_GRID};

use crate::cpu::{Check, ReduceReference};
use ferrocuda_kernels::entry::{DeviceGlobal, Entry};

use crate::runtime::config::{ARCH_MAX_THREADS_PER_BLOCK, LaunchConfig};
use crate::runtime::element::{ElemType, Element};
use crate::runtime::error::{CudaContext, Error, KernelLaunch, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::kernel::{Kernel, KernelFunction};
use crate::runtime::timing::{Stats, time_on_stream};

pub use crate::cpu::reduce::ReduceOp;

mod plan;
pub use plan::ReducePlan;

/// Every reduction kernel family, by the name the CLI and the reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceVariant {
    /// `reduceNeighbored` (seed 002).
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
    /// `reduce_syncwarp` (seed 000), atomic finish.
    Syncwarp,
    /// `reduce_shfl`, atomic finish.
    Shfl,
    /// `reduce_cp` (cooperative-group tile), atomic finish.
    Cg,
    /// `reduce1parallelism`: grid-stride, two passes.
    Reduce1Parallelism,
    /// `reduce2static`: as above, partials in a static device array.
    Reduce2Static,
    /// The cooperative-groups sum with 16-byte loads (seed 004), atomic finish.
    CgVector4,
    /// The library's fast path.
    Fast,
}

use ReduceVariant as V;

impl ReduceVariant {
    /// All of them, in the order of the notes.
    pub const ALL: [ReduceVariant; 16] = [
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
        }
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
        crate::with_elem_type!(ty, T => Entries::<T, T>::of(self, ReduceOp::Sum, self.default_block()).is_some())
    }

    /// Operations with an entry point (from the kernels' declarations): only the fast path has
    /// min and max.
    pub fn supports_op(self, op: ReduceOp) -> bool {
        ElemType::ALL.into_iter().any(|ty| {
            crate::with_elem_type!(ty, T => Entries::<T, T>::of(self, op, self.default_block()).is_some())
        })
    }

    /// The block size the notes use (and the fast path's tuned one).
    pub fn default_block(self) -> u32 {
        match self {
            _ if self.is_textbook() => 512,
            V::CgVector4 => 256,
            V::Fast => 512,
            _ => 128,
        }
    }

    /// Why `block` cannot be used with this variant, if it cannot.
    pub fn block_error(self, block: u32) -> Option<String> {
        let (min, rule) = match self {
            V::Fast => (32, "a multiple of 32"),
            V::CgVector4 => (32, "a power of two"),
            _ => (64, "a power of two"),
        };
        let shape_ok = if self == V::Fast {
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
        }
    }
}

/// Block sizes of `reduce_complete_unroll` (the `BLOCK` instances its declaration has).
pub fn complete_unroll_blocks() -> Vec<u32> {
    (0..=10)
        .map(|e| 1u32 << e)
        .filter(|&b| ferrocuda_kernels::reduce::reduce_complete_unroll::<i32>(b).is_some())
        .collect()
}

/// The typed handles of the kernels one variant launches, before any GPU is involved: `None`
/// from [`Entries::of`] when the variant has no kernel for `T`, `A`, `op` or `block`.
enum Entries<T, A> {
    /// In place on a scratch copy, one partial per block (the textbook family).
    InPlace(Entry<(*mut T, *mut A, usize)>),
    /// One launch, one atomic add per block into the result (seed 000's trees).
    AtomicFinish(Entry<(*const T, *mut A, usize)>),
    /// Seed 004's cooperative-groups vector sum (arguments `sum, x, n`).
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
}

impl<T: Element, A: Element> Entries<T, A> {
    fn of(variant: ReduceVariant, op: ReduceOp, block: u32) -> Option<Self> {
        use ferrocuda_kernels::reduce as k;
        if op != ReduceOp::Sum && variant != V::Fast {
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
            V::Fast => {
                let widening = k::reduce_fast_sum_i32_to_i64().retype();
                let same = match op {
                    ReduceOp::Sum => k::reduce_fast::<k::Sum, T>(),
                    ReduceOp::Min => k::reduce_fast::<k::Min, T>(),
                    ReduceOp::Max => k::reduce_fast::<k::Max, T>(),
                };
                let entry = match (widening, op) {
                    (Some(e), ReduceOp::Sum) => e,
                    _ => same?.retype()?,
                };
                Some(Self::Fast(entry))
            }
        }
    }
}

/// The kernels of one prepared reduction with their launches and the buffers they own.
enum Plan<'g, T: Element, A: Element> {
    InPlace {
        kernel: Kernel<'g, (*mut T, *mut A, usize)>,
        config: LaunchConfig,
        unroll: usize,
        scratch: DeviceBuffer<T>,
        partials: DeviceBuffer<A>,
    },
    AtomicFinish {
        kernel: Kernel<'g, (*const T, *mut A, usize)>,
        config: LaunchConfig,
    },
    CgVector {
        kernel: Kernel<'g, (*mut A, *const T, usize)>,
        config: LaunchConfig,
    },
    GridStride {
        first: Kernel<'g, (*const T, usize, *mut A)>,
        finish: Kernel<'g, (*const A, usize, *mut A)>,
        configs: [LaunchConfig; 2],
        partials: DeviceBuffer<A>,
    },
    GridStrideStatic {
        first: Kernel<'g, (*const T, usize)>,
        finish: Kernel<'g, (*const A, usize, *mut A)>,
        configs: [LaunchConfig; 2],
        partials: DevicePointer<A>,
    },
    Fast {
        kernel: Kernel<'g, (*const T, usize, *mut A, *mut u32, *mut A)>,
        config: LaunchConfig,
        partials: DeviceBuffer<A>,
        ticket: DeviceBuffer<u32>,
    },
}

/// One prepared reduction: kernels looked up, configurations validated, buffers allocated.
/// [`setup`](Self::setup) resets what the kernels consume (the scratch copy of the input for
/// the in-place variants, the atomic accumulator), [`launch`](Self::launch) enqueues the
/// kernels (what the benchmark times), [`finish`](Self::finish) reads the result.
pub struct ReduceRun<'g, 'a, T: Element, A: Element = T> {
    gpu: &'g Gpu,
    n: usize,
    input: DevicePointer<T>,
    plan: Plan<'g, T, A>,
    out: DeviceBuffer<A>,
    _input: PhantomData<&'a DeviceSlice<T>>,
}

impl<'g, 'a, T: Element, A: Element> ReduceRun<'g, 'a, T, A> {
    /// Prepares `variant` over `input` with `block` threads per block.
    pub fn new(
        gpu: &'g Gpu,
        variant: ReduceVariant,
        op: ReduceOp,
        input: &'a DeviceSlice<T>,
        block: u32,
    ) -> Result<Self> {
        Self::build(gpu, variant, op, input, block, None)
    }

    /// The fast path with an explicit grid instead of the one sized from occupancy (for the
    /// latency-hiding sweep of `ferrocuda occupancy --sweep`).
    pub fn fast_with_grid(
        gpu: &'g Gpu,
        op: ReduceOp,
        input: &'a DeviceSlice<T>,
        block: u32,
        grid: u32,
    ) -> Result<Self> {
        if grid == 0 {
            return Err(Error::InvalidArgument {
                what: "reduce variant `fast`: the grid must have at least one block".into(),
            });
        }
        Self::build(gpu, V::Fast, op, input, block, Some(grid))
    }

    fn build(
        gpu: &'g Gpu,
        variant: ReduceVariant,
        op: ReduceOp,
        input: &'a DeviceSlice<T>,
        block: u32,
        fast_grid: Option<u32>,
    ) -> Result<Self> {
        let (ty, n) = (T::TYPE, input.len());
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        if let Some(e) = variant.block_error(block) {
            return invalid(e);
        }
        let Some(entries) = Entries::<T, A>::of(variant, op, block) else {
            let into = if A::TYPE == ty {
                String::new()
            } else {
                format!(" into {}", A::TYPE)
            };
            return invalid(format!(
                "reduce variant `{}` has no {} kernel for {ty}{into}",
                variant.name(),
                op.name()
            ));
        };
        if n == 0 && op != ReduceOp::Sum {
            return invalid(format!("the {} of an empty input is undefined", op.name()));
        }
        let blocks_for = |per_block: usize| {
            u32::try_from(n.div_ceil(per_block).max(1)).map_err(|_| Error::InvalidArgument {
                what: format!(
                    "reduce variant `{}`: n = {n} needs more than 2^32 blocks of {block}",
                    variant.name()
                ),
            })
        };
        let poisoned = |len: usize, what: &str| gpu.upload(&vec![A::poison(); len], what);
        let plan = match entries {
            Entries::InPlace(e) => {
                let kernel = gpu.kernel(e)?;
                let config = kernel.config(blocks_for(block as usize * variant.unroll())?, block);
                Plan::InPlace {
                    kernel,
                    config,
                    unroll: variant.unroll(),
                    scratch: gpu.alloc(n, "scratch copy of the input")?,
                    partials: poisoned(config.grid[0] as usize, "per-block partials")?,
                }
            }
            Entries::AtomicFinish(e) => {
                let kernel = gpu.kernel(e)?;
                let config = kernel.config(blocks_for(block as usize)?, block);
                Plan::AtomicFinish { kernel, config }
            }
            Entries::CgVector(e) => {
                let kernel = gpu.kernel(e)?;
                let config =
                    kernel.config(blocks_for(block as usize * 16 / size_of::<T>())?, block);
                Plan::CgVector { kernel, config }
            }
            Entries::GridStride(first, finish) => {
                let (first, finish) = (gpu.kernel(first)?, gpu.kernel(finish)?);
                let configs = grid_stride_configs(&first, &finish, block);
                Plan::GridStride {
                    first,
                    finish,
                    configs,
                    partials: poisoned(REDUCE_STATIC_GRID as usize, "per-block partials")?,
                }
            }
            Entries::GridStrideStatic(first, finish, partials) => {
                if partials.len != REDUCE_STATIC_GRID as usize {
                    return invalid(format!(
                        "device global `{}` has {} elements, the grid {REDUCE_STATIC_GRID} blocks",
                        partials.symbol, partials.len
                    ));
                }
                let (first, finish) = (gpu.kernel(first)?, gpu.kernel(finish)?);
                let configs = grid_stride_configs(&first, &finish, block);
                Plan::GridStrideStatic {
                    first,
                    finish,
                    configs,
                    partials: gpu.device_global(&partials)?,
                }
            }
            Entries::Fast(e) => {
                let kernel = gpu.kernel(e)?;
                let lanes = 16 / size_of::<T>();
                let wanted = blocks_for(block as usize * lanes * REDUCE_FAST_ITEMS)?;
                let resident = kernel.max_active_blocks_per_sm(block, 0)? * gpu.props().sm_count;
                let config = kernel.config(fast_grid.unwrap_or(wanted.min(resident.max(1))), block);
                Plan::Fast {
                    kernel,
                    config,
                    partials: poisoned(config.grid[0] as usize, "per-block partials")?,
                    ticket: gpu.upload(&[0u32], "reduction ticket")?,
                }
            }
        };
        let run = Self {
            gpu,
            n,
            input: input.as_device_ptr(),
            plan,
            out: gpu.upload(&[A::poison()], "reduction result")?,
            _input: PhantomData,
        };
        run.validate()?;
        Ok(run)
    }

    /// Each kernel of the plan with its launch, in order.
    fn steps(&self) -> Vec<(&KernelFunction<'g>, LaunchConfig)> {
        match &self.plan {
            Plan::InPlace { kernel, config, .. } => vec![(kernel, *config)],
            Plan::AtomicFinish { kernel, config } => vec![(kernel, *config)],
            Plan::CgVector { kernel, config } => vec![(kernel, *config)],
            Plan::GridStride {
                first,
                finish,
                configs,
                ..
            } => vec![(first, configs[0]), (finish, configs[1])],
            Plan::GridStrideStatic {
                first,
                finish,
                configs,
                ..
            } => vec![(first, configs[0]), (finish, configs[1])],
            Plan::Fast { kernel, config, .. } => vec![(kernel, *config)],
        }
    }

    fn validate(&self) -> Result<()> {
        self.steps()
            .into_iter()
            .try_for_each(|(kernel, config)| kernel.validate(config))
    }

    /// The kernels and their launches, in order.
    pub fn launches(&self) -> Vec<(&'static str, LaunchConfig)> {
        self.steps()
            .into_iter()
            .map(|(kernel, config)| (kernel.symbol(), config))
            .collect()
    }

    /// Bytes of input the reduction must read.
    pub fn bytes(&self) -> u64 {
        (self.n * size_of::<T>()) as u64
    }

    /// An a-priori bound on how many roundings any input element goes through on its way to
    /// the result (the depth of the summation tree): a float sum is within
    /// `depth * eps * sum(|x|)` of the exact one.
    pub fn rounding_depth(&self) -> f64 {
        let log2 = |x: f64| x.max(1.0).log2().ceil();
        let n = self.n as f64;
        let shape = |c: &LaunchConfig| (c.grid[0] as f64, c.block[0] as f64);
        let d = match &self.plan {
            // The host adds the partials in order.
            Plan::InPlace { config, unroll, .. } => {
                let (grid, block) = shape(config);
                *unroll as f64 + log2(block) + grid
            }
            Plan::AtomicFinish { config, .. } => {
                let (grid, block) = shape(config);
                log2(block) + grid
            }
            Plan::CgVector { config, .. } => {
                let (grid, block) = shape(config);
                4.0 + log2(block) + grid
            }
            Plan::GridStride { configs, .. } | Plan::GridStrideStatic { configs, .. } => {
                let (grid, block) = shape(&configs[0]);
                (n / (grid * block)).ceil() + log2(block) + (grid / 1024.0).ceil() + 10.0
            }
            Plan::Fast { config, .. } => {
                let (grid, block) = shape(config);
                (n / (grid * block)).ceil()
                    + 4.0
                    + 10.0
                    + grid.min(1024.0).log2().ceil()
                    + (grid / block).ceil()
            }
        };
        d + 1.0
    }

    /// Resets what the kernels consume: the scratch copy (in-place variants) and the result
    /// (atomic finish). Asynchronous; not part of the timed region.
    pub fn setup(&mut self) -> Result<()> {
        let gpu = self.gpu;
        let stream = gpu.stream();
        // Poison what the kernels must write, so that a run that stopped writing cannot pass
        // on an earlier run's result.
        match &mut self.plan {
            Plan::InPlace {
                scratch, partials, ..
            } => {
                if self.n > 0 {
                    // SAFETY: the scratch buffer was allocated with the input's length.
                    let input = unsafe { DeviceSlice::from_raw_parts(self.input, self.n) };
                    unsafe { scratch.async_copy_from(&input, stream) }.call("cuMemcpyDtoDAsync")?;
                }
                gpu.poison_async(partials)?;
            }
            Plan::GridStride { partials, .. } | Plan::Fast { partials, .. } => {
                gpu.poison_async(partials)?
            }
            Plan::AtomicFinish { .. } | Plan::CgVector { .. } | Plan::GridStrideStatic { .. } => {}
        }
        gpu.poison_async(&mut self.out)?;
        if matches!(self.plan, Plan::AtomicFinish { .. } | Plan::CgVector { .. }) {
            // SAFETY: `out` holds one element.
            unsafe { self.out.async_copy_from(&[A::default()][..], stream) }
                .call("cuMemcpyHtoDAsync")?;
        }
        Ok(())
    }

    /// Enqueues the kernels. An empty input launches nothing.
    pub fn launch(&mut self) -> Result<()> {
        let (n, input, out) = (self.n, self.input, self.out.as_device_ptr());
        if n == 0 {
            return Ok(());
        }
        // SAFETY: every buffer below holds what the kernel's `# Safety` section asks for: the
        // input `n` elements, the partials one per block of the grid (or the static array's
        // REDUCE_STATIC_GRID), `out` and the ticket one each; the configurations were validated.
        unsafe {
            match &self.plan {
                Plan::InPlace {
                    kernel,
                    config,
                    scratch,
                    partials,
                    ..
                } => kernel.launch(
                    *config,
                    (scratch.as_device_ptr(), partials.as_device_ptr(), n),
                ),
                Plan::AtomicFinish { kernel, config } => kernel.launch(*config, (input, out, n)),
                Plan::CgVector { kernel, config } => kernel.launch(*config, (out, input, n)),
                Plan::GridStride {
                    first,
                    finish,
                    configs,
                    partials,
                } => {
                    let partials = partials.as_device_ptr();
                    first.launch(configs[0], (input, n, partials))?;
                    finish.launch(configs[1], (partials, REDUCE_STATIC_GRID as usize, out))
                }
                Plan::GridStrideStatic {
                    first,
                    finish,
                    configs,
                    partials,
                } => {
                    first.launch(configs[0], (input, n))?;
                    finish.launch(configs[1], (*partials, REDUCE_STATIC_GRID as usize, out))
                }
                Plan::Fast {
                    kernel,
                    config,
                    partials,
                    ticket,
                } => kernel.launch(
                    *config,
                    (
                        input,
                        n,
                        partials.as_device_ptr(),
                        ticket.as_device_ptr(),
                        out,
                    ),
                ),
            }
        }
    }

    /// Waits for the kernels and returns the result (for the textbook family, the host adds
    /// the per-block partials in order, as the book does).
    pub fn finish(&self) -> Result<A> {
        let (kernel, config) = *self.launches().last().expect("one launch at least");
        self.gpu.stream().synchronize().launch(
            "cuStreamSynchronize",
            &KernelLaunch {
                kernel: kernel.into(),
                config,
            },
        )?;
        if self.n == 0 {
            return Ok(A::default());
        }
        if let Plan::InPlace { partials, .. } = &self.plan {
            return Ok(combine_partials(&self.gpu.download(partials)?));
        }
        Ok(self.gpu.download(&self.out)?[0])
    }

    /// `setup`, `launch`, `finish`.
    pub fn run(&mut self) -> Result<A> {
        self.setup()?;
        self.launch()?;
        self.finish()
    }
}

/// The launches of the notes' grid-stride reduction: `REDUCE_STATIC_GRID` blocks of `block`
/// threads, then one block of 1024 over the partials.
fn grid_stride_configs(
    first: &KernelFunction,
    finish: &KernelFunction,
    block: u32,
) -> [LaunchConfig; 2] {
    [
        first.config(REDUCE_STATIC_GRID, block),
        finish.config(1, ARCH_MAX_THREADS_PER_BLOCK),
    ]
}

/// The host's sum of per-block partials: in order, wrapping for integers; floats accumulate
/// in `f64` and round once.
fn combine_partials<A: Element>(partials: &[A]) -> A {
    if A::TYPE.is_float() {
        let s: f64 = partials.iter().map(|p| p.to_f64()).sum();
        let mut out = [A::default()];
        // SAFETY: `A` is f32 or f64 here; the cast goes through the matching width.
        unsafe {
            if A::TYPE == ElemType::F32 {
                *out.as_mut_ptr().cast::<f32>() = s as f32;
            } else {
                *out.as_mut_ptr().cast::<f64>() = s;
            }
        }
        out[0]
    } else {
        partials.iter().fold(A::default(), |a, &b| a.add(b))
    }
}

fn fast<T: Element, A: Element>(gpu: &Gpu, op: ReduceOp, input: &DeviceSlice<T>) -> Result<A> {
    plan::cached::<T, A>(gpu, op, input)
}

/// The sum of `input` (0 when empty; integers wrap). Deterministic: the same input on the same
/// device gives the same bits every run.
///
/// # Example
/// ```no_run
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let data: Vec<f32> = (0..1_000_000).map(|i| (i % 10) as f32).collect();
/// let device = gpu.upload(&data, "data")?; // or any kernel's output, already on the device
/// assert_eq!(ferrocuda::reduce::sum(&gpu, &device)?, 4_500_000.0);
/// assert_eq!(ferrocuda::reduce::max(&gpu, &device)?, 9.0);
/// # Ok(()) }
/// ```
pub fn sum<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Sum, input)
}

/// The minimum of `input`; an error when it is empty. Deterministic.
pub fn min<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Min, input)
}

/// The maximum of `input`; an error when it is empty. Deterministic.
pub fn max<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    fast::<T, T>(gpu, ReduceOp::Max, input)
}

/// The sum of `i32` values in `i64`, so that it does not overflow (exact below 2^63).
pub fn sum_i32_to_i64(gpu: &Gpu, input: &DeviceSlice<i32>) -> Result<i64> {
    fast::<i32, i64>(gpu, ReduceOp::Sum, input)
}

/// One variant measured: its launches, event-timed repetitions, and the CPU check of its
/// result (first run and last timed run).
#[derive(Clone, Debug)]
pub struct Measurement {
    /// The variant.
    pub variant: ReduceVariant,
    /// Kernels and launch configurations, in order.
    pub launches: Vec<(String, LaunchConfig)>,
    /// Timing of the kernels alone (scratch copies and resets excluded).
    pub stats: Stats,
    /// Input bytes read.
    pub bytes: u64,
    /// The check against the CPU.
    pub check: Check,
}

/// Runs `variant` once and checks it, then times `reps` launches (after `warmup`) and checks
/// the last result again (a race shows up as a result that moves).
#[allow(clippy::too_many_arguments)]
pub fn measure<T: Element>(
    gpu: &Gpu,
    variant: ReduceVariant,
    op: ReduceOp,
    input: &DeviceSlice<T>,
    reference: &ReduceReference<T>,
    block: u32,
    warmup: usize,
    reps: usize,
) -> Result<Measurement> {
    let mut run = ReduceRun::<T, T>::new(gpu, variant, op, input, block)?;
    let first = reference.check(run.run()?, run.rounding_depth());
    let run = std::cell::RefCell::new(run);
    let stats = time_on_stream(
        gpu,
        warmup,
        reps,
        |_| run.borrow_mut().setup(),
        |_| run.borrow_mut().launch(),
    )?;
    let run = run.into_inner();
    let last = reference.check(run.finish()?, run.rounding_depth());
    let check = Check::first_then_last(first, last);
    Ok(Measurement {
        variant,
        launches: run
            .launches()
            .into_iter()
            .map(|(k, c)| (k.to_string(), c))
            .collect(),
        stats,
        bytes: run.bytes(),
        check,
    })
}
