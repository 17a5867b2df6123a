//! The reductions of the notes: every textbook variant ([`ReduceVariant`], run with
//! [`ReduceRun`]) beside the library's fast path, their rounding bounds, and their
//! measurement. The library's reductions themselves (`sum`, `min`, `max`, plans, the
//! reproducible sum) are re-exported from `ferrocuda::reduce`.
use std::marker::PhantomData;

use ferrocuda::DevicePointer;
use ferrocuda::{DeviceBuffer, DeviceSlice, View};
use ferrocuda_lesson_kernels::config::{REDUCE_FAST_ITEMS, REDUCE_STATIC_GRID};

use crate::cpu::{Check, ReduceReference};

use crate::timing::{Stats, time_on_stream};
use ferrocuda::kernels::grid::GridBarrier;
use ferrocuda::runtime::config::{ARCH_MAX_THREADS_PER_BLOCK, LaunchConfig};
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::error::{Error, KernelLaunch, Result};
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda::runtime::kernel::{Kernel, KernelFunction};

pub use ferrocuda::reduce::*;

mod variant;
use variant::{Entries, V};
pub use variant::{ReduceVariant, complete_unroll_blocks};

/// The kernels of one prepared reduction with their launches and the buffers they own.
enum Plan<'g, T: Element, A: Element> {
    InPlace {
        kernel: Kernel<'g, (*mut T, *mut A, usize)>,
        config: LaunchConfig,
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
    GridSync {
        kernel: Kernel<'g, (*const T, usize, *mut A, GridBarrier, *mut A)>,
        config: LaunchConfig,
        partials: DeviceBuffer<A>,
    },
}

/// One prepared reduction: kernels looked up, configurations validated, buffers allocated.
/// [`setup`](Self::setup) resets what the kernels consume (the scratch copy of the input for
/// the in-place variants, the atomic accumulator), [`launch`](Self::launch) enqueues the
/// kernels (what the benchmark times), [`finish`](Self::finish) reads the result.
pub struct ReduceRun<'g, 'a, T: Element, A: Element = T> {
    gpu: &'g Gpu,
    variant: ReduceVariant,
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
        // The run's launches go to the GPU's stream: after the work of other streams that wrote
        // the input, which the run then holds until it is dropped.
        gpu.uses_on(gpu.stream(), &[ferrocuda::Access::read(input)])?;
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
                let kernel = crate::kernel(gpu, e)?;
                let config = kernel.config(blocks_for(block as usize * variant.unroll())?, block);
                Plan::InPlace {
                    kernel,
                    config,
                    // SAFETY: `T` is an `Element`, valid for every byte pattern; `setup` copies
                    // the input into it before every run.
                    scratch: unsafe { gpu.alloc_uninit(n, "scratch copy of the input")? },
                    partials: poisoned(config.grid[0] as usize, "per-block partials")?,
                }
            }
            Entries::AtomicFinish(e) => {
                let kernel = crate::kernel(gpu, e)?;
                let config = kernel.config(blocks_for(block as usize)?, block);
                Plan::AtomicFinish { kernel, config }
            }
            Entries::CgVector(e) => {
                let kernel = crate::kernel(gpu, e)?;
                let config =
                    kernel.config(blocks_for(block as usize * 16 / size_of::<T>())?, block);
                Plan::CgVector { kernel, config }
            }
            Entries::GridStride(first, finish) => {
                let (first, finish) = (crate::kernel(gpu, first)?, crate::kernel(gpu, finish)?);
                let configs = grid_stride_configs(gpu, &first, &finish, block);
                Plan::GridStride {
                    first,
                    finish,
                    configs,
                    partials: poisoned(configs[0].grid[0] as usize, "per-block partials")?,
                }
            }
            Entries::GridStrideStatic(first, finish, partials) => {
                if partials.len != REDUCE_STATIC_GRID as usize {
                    return invalid(format!(
                        "device global `{}` has {} elements, the grid {REDUCE_STATIC_GRID} blocks",
                        partials.symbol, partials.len
                    ));
                }
                let (first, finish) = (crate::kernel(gpu, first)?, crate::kernel(gpu, finish)?);
                let configs = grid_stride_configs(gpu, &first, &finish, block);
                let partials = first.device_global(&partials)?;
                Plan::GridStrideStatic {
                    first,
                    finish,
                    configs,
                    partials,
                }
            }
            Entries::Fast(e) => {
                let kernel = gpu.kernel(e)?;
                let lanes = 16 / size_of::<T>();
                let wanted = blocks_for(block as usize * lanes * REDUCE_FAST_ITEMS)?;
                let resident = kernel.resident_blocks(block, 0)?;
                // A cluster kernel's grid is whole clusters, one partial each.
                let cluster = kernel.cluster_blocks().max(1);
                let grid = fast_grid.unwrap_or(wanted.min(resident.max(1)));
                let grid = grid.checked_next_multiple_of(cluster).ok_or_else(|| {
                    Error::InvalidArgument {
                        what: format!(
                            "`{}`: a grid of {grid} blocks cannot be rounded up to clusters of {cluster}",
                            kernel.symbol()
                        ),
                    }
                })?;
                let config = kernel.config(grid, block);
                Plan::Fast {
                    kernel,
                    config,
                    partials: poisoned((config.grid[0] / cluster) as usize, "per-block partials")?,
                    ticket: gpu.upload(&[0u32], "reduction ticket")?,
                }
            }
            Entries::GridSync(e) => {
                let kernel = crate::kernel(gpu, e)?;
                // Every block resident at once: at most the resident count, and no more blocks
                // than there are threads' worth of elements.
                let resident = kernel.resident_blocks(block, 0)?;
                let grid = blocks_for(block as usize)?.min(resident.max(1));
                let config = kernel.config(grid, block);
                Plan::GridSync {
                    kernel,
                    config,
                    partials: poisoned(grid as usize, "per-block partials")?,
                }
            }
        };
        let run = Self {
            gpu,
            variant,
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
            Plan::GridSync { kernel, config, .. } => vec![(kernel, *config)],
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

    /// [`rounding_depth`] of this launch.
    pub fn rounding_depth(&self) -> f64 {
        let first = self.steps()[0].1;
        rounding_depth(self.variant, A::TYPE, self.n, first.grid[0], first.block[0])
    }

    /// Resets what the kernels consume: the scratch copy (in-place variants) and the result
    /// (atomic finish). Asynchronous; not part of the timed region.
    pub fn setup(&mut self) -> Result<()> {
        let gpu = self.gpu;
        // Poison what the kernels must write, so that a run that stopped writing cannot pass
        // on an earlier run's result.
        match &mut self.plan {
            Plan::InPlace {
                scratch, partials, ..
            } => {
                if self.n > 0 {
                    // SAFETY: the scratch buffer was allocated with the input's length.
                    let input = unsafe { View::from_raw_parts(self.input, self.n) };
                    // Both hold `n` elements; the copy goes to the GPU's stream, as the kernels
                    // that use the scratch do.
                    gpu.copy_on_device(&input, scratch)?;
                }
                gpu.poison_async(partials)?;
            }
            Plan::GridStride { partials, .. }
            | Plan::Fast { partials, .. }
            | Plan::GridSync { partials, .. } => gpu.poison_async(partials)?,
            Plan::AtomicFinish { .. } | Plan::CgVector { .. } | Plan::GridStrideStatic { .. } => {}
        }
        gpu.poison_async(&mut self.out)?;
        if matches!(self.plan, Plan::AtomicFinish { .. } | Plan::CgVector { .. }) {
            gpu.upload_into(&mut self.out.index_mut(..1), &[A::default()])?;
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
                    finish.launch(configs[1], (partials, configs[0].grid[0] as usize, out))
                }
                Plan::GridStrideStatic {
                    first,
                    finish,
                    configs,
                    partials,
                } => {
                    first.launch(configs[0], (input, n))?;
                    finish.launch(configs[1], (*partials, configs[0].grid[0] as usize, out))
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
                Plan::GridSync {
                    kernel,
                    config,
                    partials,
                } => kernel.launch_cooperative(*config, |barrier| {
                    (input, n, partials.as_device_ptr(), barrier, out)
                }),
            }
        }
    }

    /// Waits for the kernels and returns the result (for the textbook family, the host adds
    /// the per-block partials in order, as the book does).
    pub fn finish(&self) -> Result<A> {
        let (kernel, config) = *self.launches().last().expect("one launch at least");
        self.gpu.synchronize_launch(&KernelLaunch {
            kernel: kernel.into(),
            config,
        })?;
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

/// An a-priori bound, in units of the accumulator's epsilon, on the roundings any input element
/// goes through on its way to the result when `variant` sums `n` elements into `acc` with a
/// first launch of `grid` blocks of `block` threads: a float sum is within
/// `depth * eps * sum(|x|)` of the exact one. Counted from the actual order: each thread's
/// sequential additions, then the tree of its block, then how the blocks' partials combine
/// (the host's `f64` sum of the textbook family counts as `grid` roundings of `f64`, plus one
/// rounding to `f32`; an atomic add per block, as `grid` roundings in an unknown order).
pub fn rounding_depth(
    variant: ReduceVariant,
    acc: ElemType,
    n: usize,
    grid: u32,
    block: u32,
) -> f64 {
    let log2 = |x: f64| x.max(1.0).log2().ceil();
    let (n, grid, block) = (n as f64, f64::from(grid), f64::from(block));
    let per_thread = (n / (grid * block)).ceil();
    let d = match variant {
        _ if variant.is_textbook() => {
            let host = if acc == ElemType::F32 {
                grid * f64::EPSILON / f64::from(f32::EPSILON) + 1.0
            } else {
                grid
            };
            variant.unroll() as f64 + log2(block) + host
        }
        V::CgVector4 => 4.0 + log2(block) + grid,
        _ if variant.is_atomic_finish() => log2(block) + grid,
        V::Reduce1Parallelism | V::Reduce2Static => {
            per_thread + log2(block) + (grid / 1024.0).ceil() + 10.0
        }
        V::GridSync => per_thread + 2.0 * log2(block) + (grid / block).ceil(),
        _ => per_thread + 4.0 + 10.0 + log2(grid.min(1024.0)) + (grid / block).ceil(),
    };
    d + 1.0
}

/// The launches of the notes' grid-stride reduction: [`static_grid`] blocks of `block` threads,
/// then one block of 1024 over the partials.
fn grid_stride_configs(
    gpu: &Gpu,
    first: &KernelFunction,
    finish: &KernelFunction,
    block: u32,
) -> [LaunchConfig; 2] {
    [
        first.config(static_grid(gpu), block),
        finish.config(1, ARCH_MAX_THREADS_PER_BLOCK),
    ]
}

/// The grid of the notes' grid-stride reduction (樊哲勇《CUDA编程基础与实践》第10章): a
/// fixed `REDUCE_STATIC_GRID` blocks, whatever the input's size. On the CPU device, which runs
/// every thread one after another, 1024 times fewer (10 blocks): a grid-stride loop covers any
/// input with any grid, and each of 10240 blocks would mostly find nothing to add.
pub fn static_grid(gpu: &Gpu) -> u32 {
    if gpu.is_cpu() {
        REDUCE_STATIC_GRID / 1024
    } else {
        REDUCE_STATIC_GRID
    }
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
