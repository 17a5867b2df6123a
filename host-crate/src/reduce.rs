//! Reductions on the GPU: the library's fast path ([`sum`], [`min`], [`max`],
//! [`sum_i32_to_i64`]) and every textbook variant of the notes ([`ReduceVariant`], run with
//! [`ReduceRun`]).
//!
//! Empty input: `sum` returns 0 without launching anything; `min` and `max` of nothing are
//! undefined and return [`Error::InvalidArgument`]. Integer sums wrap (they are exact modulo
//! 2^bits, as the kernels compute them).
use std::marker::PhantomData;

use cust::memory::{AsyncCopyDestination, DeviceBuffer, DevicePointer, DeviceSlice};
use ferrocuda_kernels::config::REDUCE_STATIC_GRID;

use crate::cpu::{Check, ReduceReference};
use crate::element::{ElemType, Element};
use crate::error::{CudaContext, Error, Result, check_raw};
use crate::gpu::Gpu;
use crate::kernel_args;
use crate::launch::{Kernel, LaunchConfig};
use crate::timing::{Stats, time_on_stream};

/// What a reduction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl ReduceOp {
    /// All three.
    pub const ALL: [ReduceOp; 3] = [Self::Sum, Self::Min, Self::Max];

    /// `sum`, `min`, `max`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The CPU reference of this operation over `x` (`None` for `min`/`max` of nothing).
    pub fn cpu<T: Element>(self, x: &[T]) -> Option<T> {
        match self {
            Self::Sum => Some(x.iter().fold(T::default(), |a, &b| a.add(b))),
            Self::Min => x.iter().copied().reduce(T::min_of),
            Self::Max => x.iter().copied().reduce(T::max_of),
        }
    }
}

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

    /// Element types with an entry point.
    pub fn supports_type(self, ty: ElemType) -> bool {
        match self {
            V::Syncwarp | V::Shfl | V::Cg | V::Reduce1Parallelism | V::Reduce2Static => {
                ty.is_float()
            }
            V::CgVector4 => matches!(ty, ElemType::I32 | ElemType::F32),
            _ => true,
        }
    }

    /// Operations with an entry point: only the fast path has min and max.
    pub fn supports_op(self, op: ReduceOp) -> bool {
        op == ReduceOp::Sum || self == V::Fast
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

    /// The PTX entry point for `ty`, `op` and `block`.
    pub fn symbol(self, ty: ElemType, op: ReduceOp, block: u32) -> String {
        match self {
            V::CompleteUnroll => format!("reduce_complete_unroll_b{block}_{ty}"),
            V::Reduce1Parallelism | V::Reduce2Static => format!("{}_{ty}", self.name()),
            V::Fast => format!("reduce_fast_{}_{ty}", op.name()),
            _ => format!("reduce_{}_{ty}", self.name()),
        }
    }

    /// Every entry point of this variant (for the PTX test).
    pub fn all_symbols(self) -> Vec<String> {
        let mut v = Vec::new();
        for ty in ElemType::ALL.into_iter().filter(|&t| self.supports_type(t)) {
            for op in ReduceOp::ALL.into_iter().filter(|&o| self.supports_op(o)) {
                if self == V::CompleteUnroll {
                    v.extend(
                        COMPLETE_UNROLL_BLOCKS
                            .iter()
                            .map(|&b| self.symbol(ty, op, b)),
                    );
                } else {
                    v.push(self.symbol(ty, op, 0));
                }
            }
        }
        if self == V::Fast {
            v.push(WIDENING_SUM_SYMBOL.into());
        }
        if self == V::Reduce2Static {
            v.extend(["f32", "f64"].map(|t| format!("reduce1_parallelism_{t}")));
        }
        v
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

/// Block sizes of `reduce_complete_unroll_b<B>_*`.
pub const COMPLETE_UNROLL_BLOCKS: [u32; 5] = [64, 128, 256, 512, 1024];

/// The widening fast sum.
pub const WIDENING_SUM_SYMBOL: &str = "reduce_fast_sum_i32_to_i64";

/// The dynamic shared memory the library launches reduction kernel `symbol` with at `block`
/// threads (0 for kernels that use none or are not reductions).
pub fn dynamic_shared_bytes(symbol: &str, block: u32) -> u32 {
    // One element per thread: the shared trees of seed 000 and (`reduce_cg_vector4_*`) the CG
    // tree of seed 004.
    let per_thread = [
        "reduce_syncwarp_",
        "reduce_shfl_",
        "reduce_cg_",
        "reduce1_parallelism_",
        "reduce2_static_",
    ];
    let elem = symbol
        .rsplit('_')
        .next()
        .and_then(ElemType::from_name)
        .map_or(0, |t| t.size() as u32);
    if per_thread.iter().any(|p| symbol.starts_with(p)) {
        block * elem
    } else {
        0
    }
}

/// Every reduction entry point the host knows.
pub fn symbols() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    // `reduce2_static` also lists the `reduce1_parallelism` kernels of its second pass.
    for s in ReduceVariant::ALL.iter().flat_map(|v| v.all_symbols()) {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
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
    steps: Vec<(Kernel<'g>, LaunchConfig)>,
    scratch: DeviceBuffer<T>,
    partials: DeviceBuffer<A>,
    static_partials: Option<u64>,
    out: DeviceBuffer<A>,
    ticket: DeviceBuffer<u32>,
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
        let widening = A::TYPE != T::TYPE;
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        if widening
            && !(variant == V::Fast
                && op == ReduceOp::Sum
                && ty == ElemType::I32
                && A::TYPE == ElemType::I64)
        {
            return invalid(format!(
                "no reduction from {ty} into {} for variant `{}`",
                A::TYPE,
                variant.name()
            ));
        }
        if !variant.supports_type(ty) {
            return invalid(format!(
                "reduce variant `{}` has no {ty} version",
                variant.name()
            ));
        }
        if !variant.supports_op(op) {
            return invalid(format!(
                "reduce variant `{}` computes only sums, not {}",
                variant.name(),
                op.name()
            ));
        }
        if let Some(e) = variant.block_error(block) {
            return invalid(e);
        }
        if n == 0 && op != ReduceOp::Sum {
            return invalid(format!("the {} of an empty input is undefined", op.name()));
        }
        let symbol = if widening {
            WIDENING_SUM_SYMBOL.to_string()
        } else {
            variant.symbol(ty, op, block)
        };
        let kernel = gpu.kernel(&symbol)?;
        let elem = size_of::<T>() as u32;
        let blocks_for = |per_block: usize| u32::try_from(n.div_ceil(per_block).max(1)).ok();
        let too_large = || Error::InvalidArgument {
            what: format!("`{symbol}`: n = {n} needs more than 2^32 blocks of {block}"),
        };
        let mut steps = Vec::new();
        let (mut scratch_len, mut partials_len, mut static_partials) = (0, 0, None);
        match variant {
            _ if variant.is_textbook() => {
                let grid = blocks_for(block as usize * variant.unroll()).ok_or_else(too_large)?;
                steps.push((kernel, LaunchConfig::linear(grid, block, 0)));
                (scratch_len, partials_len) = (n, grid as usize);
            }
            V::Syncwarp | V::Shfl | V::Cg => {
                let grid = blocks_for(block as usize).ok_or_else(too_large)?;
                steps.push((
                    kernel,
                    LaunchConfig::linear(grid, block, dynamic_shared_bytes(&symbol, block)),
                ));
            }
            V::CgVector4 => {
                let grid = blocks_for(block as usize * 16 / elem as usize).ok_or_else(too_large)?;
                steps.push((
                    kernel,
                    LaunchConfig::linear(grid, block, dynamic_shared_bytes(&symbol, block)),
                ));
            }
            V::Reduce1Parallelism | V::Reduce2Static => {
                let grid = REDUCE_STATIC_GRID;
                let finish_symbol = format!("reduce1_parallelism_{ty}");
                let finish = gpu.kernel(&finish_symbol)?;
                steps.push((
                    kernel,
                    LaunchConfig::linear(grid, block, dynamic_shared_bytes(&symbol, block)),
                ));
                steps.push((
                    finish,
                    LaunchConfig::linear(1, 1024, dynamic_shared_bytes(&finish_symbol, 1024)),
                ));
                if variant == V::Reduce2Static {
                    let symbol = format!("REDUCE2_STATIC_PARTIALS_{}", ty.name().to_uppercase());
                    let (ptr, bytes) = gpu.device_global(&symbol)?;
                    if bytes != grid as usize * elem as usize {
                        return invalid(format!(
                            "device global `{symbol}` has {bytes} bytes, expected {}",
                            grid * elem
                        ));
                    }
                    static_partials = Some(ptr);
                } else {
                    partials_len = grid as usize;
                }
            }
            V::Fast => {
                let lanes = 16 / elem as usize;
                let wanted = blocks_for(
                    block as usize * lanes * ferrocuda_kernels::config::REDUCE_FAST_ITEMS,
                )
                .ok_or_else(too_large)?;
                let resident = kernel.max_active_blocks_per_sm(block, 0)? * gpu.props().sm_count;
                let grid = fast_grid.unwrap_or(wanted.min(resident.max(1)));
                steps.push((kernel, LaunchConfig::linear(grid, block, 0)));
                partials_len = grid as usize;
            }
            _ => unreachable!("every variant is handled above"),
        }
        for (k, c) in &steps {
            k.validate(*c)?;
        }
        let ticket = gpu.upload(&[0u32], "reduction ticket")?;
        Ok(Self {
            gpu,
            variant,
            n,
            input: input.as_device_ptr(),
            scratch: gpu.alloc(scratch_len, "scratch copy of the input")?,
            partials: gpu.upload(&vec![A::poison(); partials_len], "per-block partials")?,
            static_partials,
            out: gpu.upload(&[A::poison()], "reduction result")?,
            ticket,
            steps,
            _input: PhantomData,
        })
    }

    /// The kernels and their launches, in order.
    pub fn launches(&self) -> Vec<(&str, LaunchConfig)> {
        self.steps.iter().map(|(k, c)| (k.symbol(), *c)).collect()
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
        let (grid, block) = (
            self.steps[0].1.grid[0] as f64,
            self.steps[0].1.block[0] as f64,
        );
        let n = self.n as f64;
        let d = match self.variant {
            v if v.is_textbook() => v.unroll() as f64 + log2(block) + grid, // host adds partials in order
            V::Syncwarp | V::Shfl | V::Cg => log2(block) + grid,
            V::CgVector4 => 4.0 + log2(block) + grid,
            V::Reduce1Parallelism | V::Reduce2Static => {
                (n / (grid * block)).ceil() + log2(block) + (grid / 1024.0).ceil() + 10.0
            }
            V::Fast => {
                (n / (grid * block)).ceil()
                    + 4.0
                    + 10.0
                    + grid.min(1024.0).log2().ceil()
                    + (grid / block).ceil()
            }
            _ => unreachable!(),
        };
        d + 1.0
    }

    /// Resets what the kernels consume: the scratch copy (in-place variants) and the result
    /// (atomic finish). Asynchronous; not part of the timed region.
    pub fn setup(&mut self) -> Result<()> {
        let stream = self.gpu.stream();
        if self.variant.is_textbook() && self.n > 0 {
            // SAFETY: the scratch buffer was allocated with the input's length.
            let input = unsafe { DeviceSlice::from_raw_parts(self.input, self.n) };
            unsafe { self.scratch.async_copy_from(&input, stream) }.call("cuMemcpyDtoDAsync")?;
        }
        // Poison what the kernels must write, so that a run that stopped writing cannot pass
        // on an earlier run's result.
        let poison = |ptr: u64, bytes: usize| {
            // SAFETY: `ptr` is a live allocation of at least `bytes` bytes.
            check_raw("cuMemsetD8Async", unsafe {
                cust::sys::cuMemsetD8Async(ptr, 0xA5, bytes, stream.as_inner())
            })
        };
        if !self.partials.is_empty() {
            poison(
                self.partials.as_device_ptr().as_raw(),
                self.partials.len() * size_of::<A>(),
            )?;
        }
        poison(self.out.as_device_ptr().as_raw(), size_of::<A>())?;
        if self.variant.is_atomic_finish() {
            // SAFETY: `out` holds one element.
            unsafe { self.out.async_copy_from(&[A::default()][..], stream) }
                .call("cuMemcpyHtoDAsync")?;
        }
        Ok(())
    }

    /// Enqueues the kernels. An empty input launches nothing.
    pub fn launch(&mut self) -> Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let (n, input) = (self.n, self.input);
        let (partials, out, ticket) = (
            self.partials.as_device_ptr(),
            self.out.as_device_ptr(),
            self.ticket.as_device_ptr(),
        );
        let partials_or_static = self
            .static_partials
            .map_or(partials, DevicePointer::from_raw);
        for (i, (kernel, config)) in self.steps.iter().enumerate() {
            let config = *config;
            // SAFETY: every pointer below is a live allocation of the size the kernel's
            // `# Safety` section asks for (see `new`); the configuration was validated.
            unsafe {
                match self.variant {
                    v if v.is_textbook() => kernel.launch(
                        config,
                        kernel_args![self.scratch.as_device_ptr(), partials, n],
                    )?,
                    V::Syncwarp | V::Shfl | V::Cg => {
                        kernel.launch(config, kernel_args![input, out, n])?
                    }
                    V::CgVector4 => kernel.launch(config, kernel_args![out, input, n])?,
                    V::Reduce1Parallelism | V::Reduce2Static if i == 0 => {
                        match self.static_partials {
                            Some(_) => kernel.launch(config, kernel_args![input, n])?,
                            None => kernel.launch(config, kernel_args![input, n, partials])?,
                        }
                    }
                    V::Reduce1Parallelism | V::Reduce2Static => kernel.launch(
                        config,
                        kernel_args![
                            partials_or_static.cast::<T>(),
                            REDUCE_STATIC_GRID as usize,
                            out
                        ],
                    )?,
                    _ => kernel.launch(config, kernel_args![input, n, partials, ticket, out])?,
                }
            }
        }
        Ok(())
    }

    /// Waits for the kernels and returns the result (for the textbook family, the host adds
    /// the per-block partials in order, as the book does).
    pub fn finish(&self) -> Result<A> {
        let (kernel, config) = self
            .steps
            .last()
            .map(|(k, c)| (k.symbol().to_string(), *c))
            .expect("one step at least");
        self.gpu.stream().synchronize().launch(
            "cuStreamSynchronize",
            &crate::error::KernelLaunch { kernel, config },
        )?;
        if self.n == 0 {
            return Ok(A::default());
        }
        if self.variant.is_textbook() {
            let partials = self.gpu.download(&self.partials)?;
            return Ok(combine_partials(&partials));
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
    ReduceRun::<T, A>::new(gpu, V::Fast, op, input, V::Fast.default_block())?.run()
}

/// The sum of `input` (0 when empty; integers wrap). Deterministic.
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
