//! The 1D stencil (一维模板, seed 001) on the GPU: the library's fast path ([`apply`]) and
//! the notes' kernels ([`StencilVariant`], run with [`StencilRun`]).
//!
//! `out[i] = sum over k in 0..=2R of c_k * in[i + k - R]`, for every `i` in `0..n`, where an
//! input index outside `0..n` follows the [`Boundary`] rule (zero, clamp or periodic), and the
//! coefficients are [`Taps`]: all 1 (seed 001's sum) or given. `R` is one of
//! `STENCIL_RADII`. Element types: `i32` (sums only; they wrap), `f32` and `f64`.
//!
//! An empty input gives an empty output and launches nothing; an input shorter than the
//! radius works (periodic then wraps several times).
use std::marker::PhantomData;

use cust::memory::{DeviceBuffer, DevicePointer, DeviceSlice};
use cust::stream::Stream;
use ferrocuda_kernels::config::{STENCIL_FAST_VECTORS_PER_THREAD, STENCIL_MAX_TAPS};
use ferrocuda_kernels::entry::Entry;
use ferrocuda_kernels::stencil::Coefficients;

pub use ferrocuda_kernels::config::STENCIL_DEFAULT_RADIUS;

use crate::cpu::{Check, check_stencil};
use crate::runtime::config::LaunchConfig;
use crate::runtime::element::{ElemType, Element};
use crate::runtime::error::{Error, KernelLaunch, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::kernel::{Kernel, KernelFunction};
use crate::runtime::timing::{Stats, time_on_stream};

pub use crate::cpu::stencil::{Boundary, Taps};

pub use crate::cpu::stencil::radius_error;

/// Every 1D stencil kernel family, by the name the CLI and the reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StencilVariant {
    /// `stencil_1d_naive`: one output per thread, every input read from global memory.
    Naive,
    /// `stencil_1d_shared`: seed 001's shared tile of `block + 2R` with halos (sums only).
    Shared,
    /// `stencil_1d_weighted`: the shared tile with coefficients passed by value (floats).
    Weighted,
    /// The library's fast path: 16-byte accesses, several outputs per thread, grid-stride.
    Fast,
}

use StencilVariant as V;

impl StencilVariant {
    /// All four, slowest first.
    pub const ALL: [StencilVariant; 4] = [V::Naive, V::Shared, V::Weighted, V::Fast];

    /// `naive`, `shared`, `weighted`, `fast`.
    pub fn name(self) -> &'static str {
        match self {
            V::Naive => "naive",
            V::Shared => "shared",
            V::Weighted => "weighted",
            V::Fast => "fast",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == name)
    }

    /// Element types with an entry point (from the kernels' declarations).
    pub fn supports_type(self, ty: ElemType) -> bool {
        crate::with_elem_type!(ty, T => Entries::<T>::of(self, STENCIL_DEFAULT_RADIUS, self == V::Weighted).is_some())
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
        // Measured on an H200, f32, R = 3, n = 2^28: the fast path at 128 / 256 / 512 / 1024
        // threads reached 3889 / 3781 / 3797 / 3612 GB/s (smaller blocks: more of them per SM,
        // so the tail of one block's tile overlaps the loads of another's).
        match self {
            V::Fast => 128,
            _ => 256,
        }
    }

    /// Why `block` cannot be used with this variant and `radius`, if it cannot.
    pub fn block_error(self, block: u32, radius: u32) -> Option<String> {
        let name = self.name();
        match self {
            V::Fast if !block.is_multiple_of(32) || !(32..=1024).contains(&block) => Some(format!(
                "stencil variant `{name}` needs a block size that is a multiple of 32 from 32 to 1024, not {block}"
            )),
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
    }
}

/// The typed handles of the kernel one variant launches for `T`, a radius and whether the
/// taps are weighted; `None` from [`Entries::of`] when there is no such kernel.
enum Entries<T> {
    /// `(input, out, n, boundary)`: every coefficient 1.
    Sum(Entry<(*const T, *mut T, usize, u32)>),
    /// `(input, out, n, boundary, weights)`.
    Weighted(Entry<(*const T, *mut T, usize, u32, Coefficients<T>)>),
}

impl<T: Element> Entries<T> {
    fn of(variant: StencilVariant, radius: u32, weighted: bool) -> Option<Self> {
        use ferrocuda_kernels::stencil as k;
        let r = radius as usize;
        match (variant, weighted) {
            (V::Naive, false) => Some(Self::Sum(k::stencil_1d_naive::<T>(r)?)),
            (V::Shared, false) => Some(Self::Sum(k::stencil_1d_shared::<T>(r)?)),
            (V::Naive | V::Shared, true) => None,
            (V::Weighted, _) => Some(Self::Weighted(k::stencil_1d_weighted::<T>(r)?)),
            (V::Fast, false) => Some(Self::Sum(k::stencil_1d_fast::<T>(r)?)),
            (V::Fast, true) => Some(Self::Weighted(k::stencil_1d_fast_weighted::<T>(r)?)),
        }
    }
}

/// The kernel of a prepared stencil, with the coefficients it takes by value.
enum StencilKernel<'g, T> {
    Sum(Kernel<'g, (*const T, *mut T, usize, u32)>),
    Weighted(
        Kernel<'g, (*const T, *mut T, usize, u32, Coefficients<T>)>,
        Coefficients<T>,
    ),
}

impl<'g, T> StencilKernel<'g, T> {
    fn function(&self) -> &KernelFunction<'g> {
        match self {
            Self::Sum(k) => k,
            Self::Weighted(k, _) => k,
        }
    }
}

/// One prepared stencil: kernel looked up, configuration validated. [`launch`](Self::launch)
/// enqueues the kernel (what the benchmark times), [`finish`](Self::finish) waits for it.
pub struct StencilRun<'g, 'a, T: Element> {
    gpu: &'g Gpu,
    variant: StencilVariant,
    boundary: Boundary,
    n: usize,
    input: DevicePointer<T>,
    output: DevicePointer<T>,
    kernel: StencilKernel<'g, T>,
    config: LaunchConfig,
    _slices: PhantomData<(&'a DeviceSlice<T>, &'a mut DeviceSlice<T>)>,
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
        let n = input.len();
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        let radius = taps.radius();
        let weights = kernel_weights(taps, variant);
        let entries = Entries::<T>::of(variant, radius, weights.is_some());
        // The kernel that would run, or what was asked for when there is none; formatted only
        // for an error (this runs on every `apply_into`).
        let kernel_symbol = entries.as_ref().map(|e| match e {
            Entries::Sum(e) => e.symbol(),
            Entries::Weighted(e) => e.symbol(),
        });
        let symbol = || match kernel_symbol {
            Some(symbol) => format!("`{symbol}`"),
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
        if output.len() != n {
            return invalid(format!(
                "{}: the input has {n} elements but the output {}",
                symbol(),
                output.len()
            ));
        }
        let bytes = (n * size_of::<T>()) as u64;
        let (a, b) = (
            input.as_device_ptr().as_raw(),
            output.as_device_ptr().as_raw(),
        );
        if n > 0 && a < b + bytes && b < a + bytes {
            return invalid(format!(
                "{}: the output overlaps the input (the stencil cannot run in place)",
                symbol()
            ));
        }
        let kernel = match entries {
            Entries::Sum(e) => StencilKernel::Sum(gpu.kernel(e)?),
            Entries::Weighted(e) => {
                let w = weights.expect("a weighted kernel is chosen for weights only");
                let mut c = Coefficients([T::default(); STENCIL_MAX_TAPS]);
                c.0[..w.len()].copy_from_slice(&w);
                StencilKernel::Weighted(gpu.kernel(e)?, c)
            }
        };
        let function = kernel.function();
        let shared = function.entry().dynamic_shared_bytes(block);
        let too_large = || Error::InvalidArgument {
            what: format!(
                "{}: n = {n} needs more than 2^32 blocks of {block}",
                symbol()
            ),
        };
        let config = match variant {
            V::Naive | V::Shared | V::Weighted => {
                LaunchConfig::per_element(n, block, shared).ok_or_else(too_large)?
            }
            V::Fast => {
                let lanes = 16 / size_of::<T>();
                let tile = block as usize * STENCIL_FAST_VECTORS_PER_THREAD * lanes;
                let tiles = (n + 2 * lanes).div_ceil(tile);
                let resident = function.resident_blocks(block, shared)?;
                let grid = tiles.min(resident.max(1) as usize) as u32;
                LaunchConfig::linear(grid, block, shared)
            }
        };
        // An empty input launches nothing; its configuration must still be one that could run.
        let check = LaunchConfig {
            grid: [config.grid[0].max(1), 1, 1],
            ..config
        };
        function.validate(check)?;
        Ok(Self {
            gpu,
            variant,
            boundary,
            n,
            input: input.as_device_ptr(),
            output: output.as_device_ptr(),
            kernel,
            config,
            _slices: PhantomData,
        })
    }

    /// The variant.
    pub fn variant(&self) -> StencilVariant {
        self.variant
    }

    /// The PTX entry point.
    pub fn symbol(&self) -> &str {
        self.kernel.function().symbol()
    }

    /// The launch configuration (grid 0 for an empty input, which launches nothing).
    pub fn config(&self) -> LaunchConfig {
        self.config
    }

    /// Bytes the stencil must move: the input read once and the output written once.
    pub fn bytes(&self) -> u64 {
        2 * (self.n * size_of::<T>()) as u64
    }

    /// Enqueues the kernel (asynchronous). An empty input launches nothing.
    pub fn launch(&mut self) -> Result<()> {
        self.launch_on(self.gpu.stream())
    }

    /// [`launch`](Self::launch) on the caller's `stream` (of this GPU's context).
    pub fn launch_on(&mut self, stream: &Stream) -> Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let (input, output, n, boundary) = (self.input, self.output, self.n, self.boundary.code());
        // SAFETY: `input` and `output` are `n`-element device slices that do not overlap (see
        // `new`), and the configuration was validated for this kernel.
        self.gpu.ordered(stream, || unsafe {
            match &self.kernel {
                StencilKernel::Sum(k) => {
                    k.launch_on(stream, self.config, (input, output, n, boundary))
                }
                StencilKernel::Weighted(k, w) => {
                    k.launch_on(stream, self.config, (input, output, n, boundary, *w))
                }
            }
        })
    }

    /// Waits for the kernel; an execution error names it and its configuration.
    pub fn finish(&self) -> Result<()> {
        self.gpu.make_current()?;
        self.gpu.wait_for_stream(
            self.gpu.stream(),
            Some(&KernelLaunch {
                kernel: self.kernel.function().symbol().to_string(),
                config: self.config,
            }),
        )
    }

    /// `launch`, then `finish`.
    pub fn run(&mut self) -> Result<()> {
        self.launch()?;
        self.finish()
    }
}

/// The stencil of `input` on the GPU with the fast path into `output`, a buffer the caller owns
/// (and reuses: nothing is allocated), of the same length and not overlapping `input`.
/// Enqueues the kernel on the GPU's stream and returns without waiting, as a kernel launch
/// does: the result stays on the device for the next kernel, [`Gpu::download`] (which waits
/// for the stream) or [`Gpu::synchronize`] bring it or its errors to the host. Checks of the
/// arguments fail here, before anything is enqueued. An empty input launches nothing.
///
/// # Example
/// ```no_run
/// use ferrocuda::stencil::{self, Boundary, Taps};
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let input = gpu.upload(&vec![1.0f32; 1 << 20], "input")?;
/// let mut output = gpu.alloc::<f32>(1 << 20, "output")?;
/// for _ in 0..100 {
///     stencil::apply_into(&gpu, &input, &mut output, &Taps::Sum { radius: 3 }, Boundary::Periodic)?;
/// }
/// assert_eq!(gpu.download(&output)?[0], 7.0);
/// # Ok(()) }
/// ```
pub fn apply_into<T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    output: &mut DeviceSlice<T>,
    taps: &Taps<T>,
    boundary: Boundary,
) -> Result<()> {
    apply_into_on(gpu, gpu.stream(), input, output, taps, boundary)
}

/// [`apply_into`] on the caller's `stream` (of this GPU's context): ordered with the caller's
/// copies and kernels on that stream.
pub fn apply_into_on<T: Element>(
    gpu: &Gpu,
    stream: &Stream,
    input: &DeviceSlice<T>,
    output: &mut DeviceSlice<T>,
    taps: &Taps<T>,
    boundary: Boundary,
) -> Result<()> {
    let mut run = StencilRun::new(
        gpu,
        V::Fast,
        taps,
        boundary,
        input,
        output,
        V::Fast.default_block(),
    )?;
    run.launch_on(stream)
}

/// The stencil of `input` on the GPU with the fast path, into a new device buffer (left on
/// the device, so that it can feed the next kernel; [`Gpu::download`] brings it to the host).
/// An empty input gives an empty buffer without launching anything. It allocates the output on
/// every call (1 GiB for 2^28 `f32`, and the allocation costs more than the kernel at small
/// sizes): a program that calls it repeatedly should own its output and use [`apply_into`].
///
/// # Example
/// ```no_run
/// use ferrocuda::stencil::{self, Boundary, Taps};
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let input = gpu.upload(&vec![1.0f32; 1 << 20], "input")?;
/// // Seed 001's stencil: the sum of the 7 inputs around each output, zero outside the array.
/// let out = stencil::apply(&gpu, &input, &Taps::Sum { radius: 3 }, Boundary::Zero)?;
/// let host = gpu.download(&out)?;
/// assert_eq!((host[0], host[3], host[1 << 19]), (4.0, 7.0, 7.0));
/// # Ok(()) }
/// ```
pub fn apply<T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    taps: &Taps<T>,
    boundary: Boundary,
) -> Result<DeviceBuffer<T>> {
    // SAFETY: `T` is an `Element`, valid for every byte pattern; the kernel writes every
    // element (a failed run drops the buffer).
    let mut output = unsafe { gpu.alloc_uninit::<T>(input.len(), "stencil output")? };
    StencilRun::new(
        gpu,
        V::Fast,
        taps,
        boundary,
        input,
        &mut output,
        V::Fast.default_block(),
    )?
    .run()?;
    Ok(output)
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
