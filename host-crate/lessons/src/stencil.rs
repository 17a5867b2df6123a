//! The 1D stencil (一维模板) of the notes beside the library's fast path: every kernel family
//! ([`StencilVariant`], run with [`StencilRun`]) and its measurement. The library's stencil
//! itself (`apply`, `apply_into`, [`Taps`], [`Boundary`]) is re-exported from
//! `ferrocuda::stencil`.
use std::ops::{Deref, DerefMut};

use ferrocuda::DeviceSlice;
use ferrocuda::kernels::entry::Entry;
pub use ferrocuda::stencil::*;

use crate::cpu::{Check, check_stencil};
use crate::timing::{Stats, time_on_stream};
use ferrocuda::runtime::config::LaunchConfig;
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::error::{Error, Result};
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda::runtime::kernel::Kernel;

/// Every 1D stencil kernel family, by the name the CLI and the reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StencilVariant {
    /// `stencil_1d_naive`: one output per thread, every input read from global memory.
    Naive,
    /// `stencil_1d_shared`: the notes' shared tile of `block + 2R` with halos (sums only).
    Shared,
    /// `stencil_1d_weighted`: the shared tile with coefficients passed by value (floats).
    Weighted,
    /// The library's fast path: 16-byte accesses, several outputs per thread, a block per tile.
    Fast,
    /// `stencil_1d_cluster`: the notes' shared tile in thread block clusters, halos read from
    /// the neighbouring blocks' shared memory (distributed shared memory). sm_90.
    Cluster,
    /// `stencil_1d_bulk`: the fast path with its tiles loaded by bulk copies (TMA) into
    /// pipelined stages. sm_90.
    Bulk,
}

use StencilVariant as V;

impl StencilVariant {
    /// All six: the notes' three, the cluster tile, the fast path and its bulk-copy form.
    pub const ALL: [StencilVariant; 6] = [
        V::Naive,
        V::Shared,
        V::Weighted,
        V::Cluster,
        V::Fast,
        V::Bulk,
    ];

    /// `naive`, `shared`, `weighted`, `cluster`, `fast`, `bulk`.
    pub fn name(self) -> &'static str {
        match self {
            V::Naive => "naive",
            V::Shared => "shared",
            V::Weighted => "weighted",
            V::Cluster => "cluster",
            V::Fast => "fast",
            V::Bulk => "bulk",
        }
    }

    /// The oldest architecture that runs the variant (as `sm_XY`'s number): 90 for the
    /// cluster and bulk-copy kernels, 0 for the others.
    pub fn min_arch(self) -> u32 {
        match self {
            V::Cluster | V::Bulk => 90,
            _ => 0,
        }
    }

    /// Whether the GPU of `props` runs the variant (its compute capability reaches
    /// [`min_arch`](Self::min_arch)).
    pub fn runs_on(self, props: &ferrocuda::DeviceProps) -> bool {
        props.reaches_arch(self.min_arch())
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Element types with an entry point (from the kernels' declarations).
    pub fn supports_type(self, ty: ElemType) -> bool {
        ferrocuda::with_elem_type!(ty, T => Entries::<T>::of(self, STENCIL_DEFAULT_RADIUS, self == V::Weighted).is_some())
    }

    /// Whether the variant can apply given coefficients (the others compute sums only).
    pub fn supports_weights(self) -> bool {
        matches!(self, V::Weighted | V::Fast)
    }

    /// Whether the variant loads its inputs into a shared tile of `block + 2R` elements, so that
    /// the threads below `R` must be able to load both halos.
    pub fn needs_block_of_radius(self) -> bool {
        matches!(self, V::Shared | V::Weighted)
    }

    /// The block size used when none is given.
    pub fn default_block(self) -> u32 {
        match self {
            V::Fast | V::Bulk => ferrocuda::stencil::FAST_BLOCK,
            _ => 256,
        }
    }

    /// Why `block` cannot be used with this variant and `radius`, if it cannot.
    pub fn block_error(self, block: u32, radius: u32) -> Option<String> {
        let name = self.name();
        match self {
            V::Fast | V::Bulk | V::Cluster
                if !block.is_multiple_of(32) || !(32..=1024).contains(&block) =>
            {
                Some(format!(
                    "stencil variant `{name}` needs a block size that is a multiple of 32 from 32 to 1024, not {block}"
                ))
            }
            _ if !(1..=1024).contains(&block) => Some(format!(
                "stencil variant `{name}` needs a block size from 1 to 1024, not {block}"
            )),
            _ if self.needs_block_of_radius() && block < radius => Some(format!(
                "stencil variant `{name}` needs a block of at least the radius ({radius}) threads, so that the threads below R can load both halos, not {block}"
            )),
            _ => None,
        }
    }

    /// Why this variant cannot run `taps` on `ty` with `block`, if it cannot.
    pub fn error<T: Element>(self, taps: &Taps<T>, block: u32) -> Option<String> {
        let name = self.name();
        if !self.supports_type(T::TYPE) {
            return Some(format!(
                "stencil variant `{name}` has no {} version",
                T::TYPE
            ));
        }
        if taps.is_weighted() && !self.supports_weights() {
            return Some(format!(
                "stencil variant `{name}` computes sums only; coefficients need `weighted` or `fast`"
            ));
        }
        taps.error()
            .or_else(|| self.block_error(block, taps.radius()))
            .or_else(|| {
                Entries::<T>::of(self, taps.radius(), taps.is_weighted())
                    .is_none()
                    .then(|| {
                        format!(
                            "stencil variant `{name}` has no {} kernel for R = {}",
                            T::TYPE,
                            taps.radius()
                        )
                    })
            })
    }
}

/// The typed handles of the kernel one variant launches for `T`, a radius and whether the
/// taps are weighted; `None` from [`Entries::of`] when there is no such kernel.
enum Entries<T> {
    /// `(input, out, n, boundary)`: every coefficient 1.
    Sum(Entry<SumArgs<T>>),
    /// `(input, out, n, boundary, weights)`.
    Weighted(Entry<WeightedArgs<T>>),
}

impl<T: Element> Entries<T> {
    fn of(variant: StencilVariant, radius: u32, weighted: bool) -> Option<Self> {
        use ferrocuda::kernels::stencil as fast;
        use ferrocuda_lesson_kernels::stencil as k;
        let r = radius as usize;
        match (variant, weighted) {
            (V::Naive, false) => Some(Self::Sum(k::stencil_1d_naive::<T>(r)?)),
            (V::Shared, false) => Some(Self::Sum(k::stencil_1d_shared::<T>(r)?)),
            (V::Naive | V::Shared, true) => None,
            (V::Weighted, _) => Some(Self::Weighted(k::stencil_1d_weighted::<T>(r)?)),
            (V::Fast, false) => Some(Self::Sum(fast::stencil_1d_fast::<T>(r)?)),
            (V::Fast, true) => Some(Self::Weighted(fast::stencil_1d_fast_weighted::<T>(r)?)),
            (V::Bulk, false) => Some(Self::Sum(fast::stencil_1d_bulk::<T>(r)?)),
            (V::Cluster, false) => Some(Self::Sum(fast::stencil_1d_cluster::<T>(r)?)),
            (V::Bulk | V::Cluster, true) => None,
        }
    }
}

/// One prepared stencil of one variant: the library's [`ferrocuda::stencil::StencilRun`] (it
/// dereferences to it: `launch`, `finish`, `run`, `symbol`, `config`, `bytes`) with the variant
/// that chose its kernel.
pub struct StencilRun<'g, 'a, T: Element> {
    run: ferrocuda::stencil::StencilRun<'g, 'a, T>,
    variant: StencilVariant,
}

impl<'g, 'a, T: Element> Deref for StencilRun<'g, 'a, T> {
    type Target = ferrocuda::stencil::StencilRun<'g, 'a, T>;

    fn deref(&self) -> &Self::Target {
        &self.run
    }
}

impl<T: Element> DerefMut for StencilRun<'_, '_, T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.run
    }
}

impl<'g, 'a, T: Element> StencilRun<'g, 'a, T> {
    /// Prepares `variant` computing `taps` over `input` into `output` (the same length, not
    /// overlapping) with `block` threads per block.
    pub fn new(
        gpu: &'g Gpu,
        variant: StencilVariant,
        taps: &Taps<T>,
        boundary: Boundary,
        input: &'a DeviceSlice<T>,
        output: &'a mut DeviceSlice<T>,
        block: u32,
    ) -> Result<Self> {
        // The run's launches go to the GPU's stream: after the work of other streams on the
        // input and output, which the run then holds until it is dropped.
        gpu.uses_on(
            gpu.stream(),
            &[
                ferrocuda::Access::read(input),
                ferrocuda::Access::write(output),
            ],
        )?;
        let n = input.len();
        let radius = taps.radius();
        let weights = kernel_weights(taps, variant);
        let entries = Entries::<T>::of(variant, radius, weights.is_some());
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        let symbol = || match &entries {
            Some(Entries::Sum(e)) => format!("`{}`", e.symbol()),
            Some(Entries::Weighted(e)) => format!("`{}`", e.symbol()),
            None => format!(
                "stencil variant `{}` (R = {radius}, {})",
                variant.name(),
                T::TYPE
            ),
        };
        if let Some(e) = variant.error(taps, block) {
            return invalid(format!("{} with block {block}, n = {n}: {e}", symbol()));
        }
        let Some(entries) = entries else {
            return invalid(format!("{}: no kernel for these taps", symbol()));
        };
        let kernel = match entries {
            Entries::Sum(e) => StencilKernel::Sum(load(gpu, variant, e)?),
            Entries::Weighted(e) => {
                let w = weights.expect("a weighted kernel is chosen for weights only");
                let c = coefficients(&Taps::Weighted(w))?.expect("weighted taps give coefficients");
                StencilKernel::Weighted(load(gpu, variant, e)?, c)
            }
        };
        let grid = match variant {
            V::Fast => StencilGrid::Tiles,
            V::Bulk => StencilGrid::ResidentTiles,
            V::Cluster => StencilGrid::Clusters,
            V::Naive | V::Shared | V::Weighted => StencilGrid::PerElement,
        };
        // SAFETY: `kernel` is `variant`'s entry point for these taps, and `variant.error`
        // accepted `block` for it: every variant's kernel keeps the stencil contract (reads
        // within `input[..n]` through the boundary rule, one writer per output element) for
        // the blocks its rule admits, with the grid its variant uses.
        let run = unsafe {
            ferrocuda::stencil::StencilRun::with_kernel(
                gpu, kernel, grid, boundary, input, output, block,
            )?
        };
        Ok(Self { run, variant })
    }

    /// The variant.
    pub fn variant(&self) -> StencilVariant {
        self.variant
    }
}

/// The kernel of `entry`: the library's for the fast path, the lessons' for the others.
fn load<Args>(gpu: &Gpu, variant: StencilVariant, entry: Entry<Args>) -> Result<Kernel<'_, Args>> {
    match variant {
        V::Fast | V::Bulk | V::Cluster => gpu.kernel(entry),
        V::Naive | V::Shared | V::Weighted => crate::kernel(gpu, entry),
    }
}

/// One variant measured: its launch, event-timed repetitions, and the CPU check of its output
/// (first run and last timed run).
#[derive(Clone, Debug)]
pub struct Measurement {
    /// The variant.
    pub variant: StencilVariant,
    /// The kernel.
    pub symbol: String,
    /// Its launch configuration.
    pub config: LaunchConfig,
    /// Timing of the kernel alone.
    pub stats: Stats,
    /// Bytes moved: input read once plus output written once.
    pub bytes: u64,
    /// The check against the CPU.
    pub check: Check,
}

/// Runs `variant` once on a poisoned output and checks every element against the CPU stencil
/// of `host_input` (the same data as `input`), then times `reps` launches (after `warmup`)
/// and checks the last output again.
#[allow(clippy::too_many_arguments)]
pub fn measure<T: Element>(
    gpu: &Gpu,
    variant: StencilVariant,
    taps: &Taps<T>,
    boundary: Boundary,
    input: &DeviceSlice<T>,
    host_input: &[T],
    block: u32,
    warmup: usize,
    reps: usize,
) -> Result<Measurement> {
    // SAFETY: `T` is an `Element`, valid for every byte pattern; poisoned right away.
    let mut output = unsafe { gpu.alloc_uninit::<T>(input.len(), "stencil output")? };
    gpu.poison_async(&mut output)?;
    let mut run = StencilRun::new(gpu, variant, taps, boundary, input, &mut output, block)?;
    let (symbol, config, bytes) = (run.symbol().to_string(), run.config(), run.bytes());
    run.run()?;
    let first = check_stencil(host_input, taps, boundary, &gpu.download(&output)?);
    let mut run = StencilRun::new(gpu, variant, taps, boundary, input, &mut output, block)?;
    let stats = time_on_stream(gpu, warmup, reps, |_| Ok(()), |_| run.launch())?;
    run.finish()?;
    let last = check_stencil(host_input, taps, boundary, &gpu.download(&output)?);
    let check = Check::first_then_last(first, last);
    Ok(Measurement {
        variant,
        symbol,
        config,
        stats,
        bytes,
        check,
    })
}

/// The coefficients the kernels of `variant` receive by value, if they take any: the given
/// ones, or all 1 for the weighted kernel running a sum.
fn kernel_weights<T: Element>(taps: &Taps<T>, variant: StencilVariant) -> Option<Vec<T>> {
    match (taps, variant) {
        (Taps::Weighted(w), _) => Some(w.clone()),
        (Taps::Sum { radius }, StencilVariant::Weighted) => {
            Some(vec![T::from_f64(1.0); 2 * *radius as usize + 1])
        }
        (Taps::Sum { .. }, _) => None,
    }
}
