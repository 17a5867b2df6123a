//! The 1D stencil (一维模板) on the GPU: [`apply`], [`apply_into`] and the prepared
//! [`StencilRun`] behind them; [`iterate`] and the prepared [`Iteration`] apply it many times,
//! several steps per pass over memory.
//!
//! `out[i] = sum over k in 0..=2R of c_k * in[i + k - R]`, for every `i` in `0..n`, where an
//! input index outside `0..n` follows the [`Boundary`] rule (zero, clamp or periodic), and the
//! coefficients are [`Taps`]: all 1 (the notes' sum) or given. `R` is one of
//! `STENCIL_RADII`. Element types: `i32` (sums only; they wrap), `f32` and `f64`, and the
//! 16-bit floats `F16` and `Bf16` (sums only, computed in `f32`, each output rounded once).
//!
//! An empty input gives an empty output and launches nothing; an input shorter than the
//! radius works (periodic then wraps several times).
//!
//! The notes' own kernels (every input from global memory, the shared tile with halos) are
//! lessons, in `ferrocuda-lessons`; they launch through [`StencilRun::with_kernel`], with the
//! same checks as the fast path.
use std::marker::PhantomData;

mod steps;
mod taps;
pub use steps::{Iteration, STEPS_BLOCK, StepsArgs, WeightedStepsArgs, iterate};
pub(crate) use steps::{StepsPass, lanes};
pub use taps::{Boundary, Taps, coefficients, radius_error};

use crate::runtime::pointer::DevicePointer;

use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use crate::runtime::stream::Stream;
use crate::runtime::track::Access;
use ferrocuda_kernels::config::{STENCIL_FAST_VECTORS_PER_THREAD, stencil_fast_tiles};
pub use ferrocuda_kernels::stencil::Coefficients;

pub use ferrocuda_kernels::config::STENCIL_DEFAULT_RADIUS;

/// The element types the stencils (one step, several steps a pass, sharded) have kernels for;
/// weighted taps for the 32- and 64-bit floats of them.
pub const STENCIL_TYPES: [crate::runtime::element::ElemType; 5] = {
    use crate::runtime::element::ElemType;
    [
        ElemType::I32,
        ElemType::F32,
        ElemType::F64,
        ElemType::F16,
        ElemType::Bf16,
    ]
};

use crate::runtime::config::LaunchConfig;
use crate::runtime::element::Element;
use crate::runtime::error::{Error, KernelLaunch, Result};
use crate::runtime::gpu::Gpu;
use crate::runtime::kernel::{Kernel, KernelFunction};

/// Threads per block of the fast stencil.
///
/// Measured on an H200, f32, R = 3, n = 2^28: the fast path at 128 / 256 / 512 / 1024 threads
/// reached 3889 / 3781 / 3797 / 3612 GB/s (smaller blocks: more of them per SM, so the tail of
/// one block's tile overlaps the loads of another's).
pub const FAST_BLOCK: u32 = 128;

/// The parameters of a stencil kernel that sums its window: `input, out, n, boundary`.
pub type SumArgs<T> = (*const T, *mut T, usize, u32);
/// The parameters of a weighted stencil kernel: `input, out, n, boundary, weights`.
pub type WeightedArgs<T> = (*const T, *mut T, usize, u32, Coefficients<T>);

/// A stencil kernel ready to launch, with the coefficients it takes by value.
pub enum StencilKernel<'g, T> {
    /// A kernel that sums its window.
    Sum(Kernel<'g, SumArgs<T>>),
    /// A weighted kernel and its coefficients.
    Weighted(Kernel<'g, WeightedArgs<T>>, Coefficients<T>),
}

impl<'g, T> StencilKernel<'g, T> {
    /// The kernel, whatever its parameters.
    pub fn function(&self) -> &KernelFunction<'g> {
        match self {
            Self::Sum(k) => k,
            Self::Weighted(k, _) => k,
        }
    }
}

/// How a [`StencilRun`] sizes its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StencilGrid {
    /// One thread per output: `ceil(n / block)` blocks.
    PerElement,
    /// The fast path's tiles of `block * STENCIL_FAST_VECTORS_PER_THREAD` vectors, one block
    /// each (at most `2^31 - 1` blocks; the kernel's grid-stride loop takes any rest). On an
    /// H100 this grid runs the fast stencil at the driver's copy speed from 2^26 elements,
    /// where the resident grid stays several percent short (docs/tuning-notes.md, "The grid,
    /// not the pipeline": measured, with an explanation that is likely but not measured).
    Tiles,
    /// The same tiles over at most the blocks the GPU holds at once, each block looping over
    /// several (the bulk-copy stencil's pipeline, and the sharded stencil's interior, whose
    /// overlap with the edges was measured on this grid).
    ResidentTiles,
    /// The same tiles over exactly this many blocks (at least 1), each looping over the tiles
    /// a grid apart: what tests use to make every block loop on small inputs.
    Blocks(u32),
    /// One thread per output in thread block clusters: `ceil(n / block)` blocks rounded up to
    /// a whole number of the kernel's clusters.
    Clusters,
}

/// One prepared stencil: kernel looked up, configuration validated. [`launch`](Self::launch)
/// enqueues the kernel (what the benchmark times), [`finish`](Self::finish) waits for it.
pub struct StencilRun<'g, 'a, T: Element> {
    gpu: &'g Gpu,
    boundary: Boundary,
    n: usize,
    input: DevicePointer<T>,
    output: DevicePointer<T>,
    kernel: StencilKernel<'g, T>,
    config: LaunchConfig,
    /// The stream of the last launch, which `finish` waits for (the GPU's own until then).
    last: Option<Stream>,
    _slices: PhantomData<(&'a DeviceSlice<T>, &'a mut DeviceSlice<T>)>,
}

impl<'g, 'a, T: Element> StencilRun<'g, 'a, T> {
    /// Prepares the fast stencil computing `taps` over `input` into `output` (the same length,
    /// not overlapping), [`FAST_BLOCK`] threads per block.
    pub fn new(
        gpu: &'g Gpu,
        taps: &Taps<T>,
        boundary: Boundary,
        input: &'a DeviceSlice<T>,
        output: &'a mut DeviceSlice<T>,
    ) -> Result<Self> {
        Self::with_grid(gpu, taps, boundary, input, output, StencilGrid::Tiles)
    }

    /// [`new`](Self::new) on the grid `grid`: [`StencilGrid::Tiles`] (the library's),
    /// [`StencilGrid::ResidentTiles`] or [`StencilGrid::Blocks`]; the fast kernels are correct
    /// on any of them. The per-element and cluster grids are for other kernels, and refused.
    pub fn with_grid(
        gpu: &'g Gpu,
        taps: &Taps<T>,
        boundary: Boundary,
        input: &'a DeviceSlice<T>,
        output: &'a mut DeviceSlice<T>,
        grid: StencilGrid,
    ) -> Result<Self> {
        use ferrocuda_kernels::stencil as k;
        let invalid = |what: String| Error::InvalidArgument { what };
        let radius = taps.radius();
        if let Some(e) = taps.error() {
            return Err(Error::Unsupported {
                what: format!(
                    "fast stencil (R = {radius}, {}), n = {}: {e}",
                    T::TYPE,
                    input.len()
                ),
            });
        }
        let r = radius as usize;
        let none = || Error::Unsupported {
            what: format!("the fast stencil has no {} kernel", T::TYPE),
        };
        let kernel = match coefficients(taps)? {
            None => StencilKernel::Sum(gpu.kernel(k::stencil_1d_fast::<T>(r).ok_or_else(none)?)?),
            Some(c) => StencilKernel::Weighted(
                gpu.kernel(k::stencil_1d_fast_weighted::<T>(r).ok_or_else(none)?)?,
                c,
            ),
        };
        if matches!(grid, StencilGrid::PerElement | StencilGrid::Clusters) {
            return Err(invalid(format!(
                "fast stencil (R = {radius}, {}): the {grid:?} grid is not one of the fast \
                 kernels' (Tiles, ResidentTiles, Blocks)",
                T::TYPE
            )));
        }
        // SAFETY: the fast kernels keep the contract for any block and grid: each output
        // element is written by the thread (or tile) that owns it, and reads go through the
        // boundary rule, never outside `input[..n]`.
        unsafe { Self::with_kernel(gpu, kernel, grid, boundary, input, output, FAST_BLOCK) }
    }

    /// Prepares `kernel` (a kernel with the stencil's parameters, ferrocuda's or one's own)
    /// over `input` into `output` (the same length, not overlapping) with `block` threads per
    /// block and the grid `grid` says. The lengths, the overlap, the boundary and the launch
    /// configuration are checked here; what the kernel does with its pointers cannot be.
    ///
    /// # Safety
    /// Launched with `block` threads per block and the grid `grid` gives for `n =
    /// input.len()`, `kernel` must read no element outside `input[..n]`, write none outside
    /// `output[..n]`, and write each output element from one thread only (as ferrocuda's
    /// stencil kernels do for the block sizes their entry declares).
    pub unsafe fn with_kernel(
        gpu: &'g Gpu,
        kernel: StencilKernel<'g, T>,
        grid: StencilGrid,
        boundary: Boundary,
        input: &'a DeviceSlice<T>,
        output: &'a mut DeviceSlice<T>,
        block: u32,
    ) -> Result<Self> {
        let n = input.len();
        let function = kernel.function();
        let symbol = function.symbol();
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        gpu.check_owned(input)?;
        gpu.check_owned(output)?;
        if output.len() != n {
            return Err(Error::LengthMismatch {
                what: format!(
                    "`{symbol}`: the input has {n} elements but the output {}",
                    output.len()
                ),
                expected: n,
                found: output.len(),
            });
        }
        let bytes = (n * size_of::<T>()) as u64;
        let (a, b) = (
            input.as_device_ptr().as_raw(),
            output.as_device_ptr().as_raw(),
        );
        if n > 0 && a < b + bytes && b < a + bytes {
            return invalid(format!(
                "`{symbol}`: the output overlaps the input (the stencil cannot run in place)"
            ));
        }
        let shared = function.entry().dynamic_shared_bytes(block);
        let too_large = || Error::Unsupported {
            what: format!("`{symbol}`: n = {n} needs more than 2^32 blocks of {block}"),
        };
        let config = match grid {
            StencilGrid::PerElement => {
                LaunchConfig::per_element(n, block, shared).ok_or_else(too_large)?
            }
            StencilGrid::Clusters => {
                let cluster = function.cluster_blocks().max(1) as usize;
                let blocks = n.div_ceil(block.max(1) as usize).next_multiple_of(cluster);
                let grid = u32::try_from(blocks).map_err(|_| too_large())?;
                LaunchConfig::linear(grid, block, shared)
            }
            StencilGrid::Tiles | StencilGrid::ResidentTiles | StencilGrid::Blocks(_) => {
                let lanes = 16 / size_of::<T>();
                let tile = block as usize * STENCIL_FAST_VECTORS_PER_THREAD * lanes;
                // The kernel's own count (a grid one short would leave outputs unwritten).
                let out_offset = (b as usize / size_of::<T>()) % lanes;
                let tiles = stencil_fast_tiles(n, out_offset, lanes, tile);
                let blocks = match grid {
                    StencilGrid::Blocks(b) => b as usize,
                    StencilGrid::ResidentTiles => {
                        tiles.min(function.resident_blocks(block, shared)?.max(1) as usize)
                    }
                    _ => tiles.min(i32::MAX as usize),
                };
                LaunchConfig::linear(blocks as u32, block, shared)
            }
        };
        // An empty input launches nothing; its configuration must still be one that could run.
        let check = LaunchConfig {
            grid: [config.grid[0].max(function.cluster_blocks().max(1)), 1, 1],
            ..config
        };
        function.validate(check)?;
        Ok(Self {
            gpu,
            boundary,
            n,
            input: input.as_device_ptr(),
            output: output.as_device_ptr(),
            kernel,
            config,
            last: None,
            _slices: PhantomData,
        })
    }

    /// The PTX entry point.
    pub fn symbol(&self) -> &'static str {
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
        let accesses = [
            Access::raw(self.input.as_raw(), false),
            Access::raw(self.output.as_raw(), true),
        ];
        self.last = Some(stream.share());
        // SAFETY: `ordered` made the context current, checked the stream and orders it.
        self.gpu
            .ordered(stream, &accesses, || unsafe { self.enqueue(stream) })
    }

    /// Enqueues the kernel on `stream`.
    ///
    /// # Safety
    /// The context is current, `stream` is of it, and the stream is ordered with every other
    /// use of the input and output. `input` and `output` are `n`-element device slices that do
    /// not overlap (see `with_kernel`), and the configuration was validated for this kernel.
    unsafe fn enqueue(&self, stream: &Stream) -> Result<()> {
        let (input, output, n, boundary) = (self.input, self.output, self.n, self.boundary.code());
        // SAFETY: the caller's contract.
        unsafe {
            match &self.kernel {
                StencilKernel::Sum(k) => {
                    k.launch_prepared(stream, self.config, (input, output, n, boundary))
                }
                StencilKernel::Weighted(k, w) => {
                    k.launch_prepared(stream, self.config, (input, output, n, boundary, *w))
                }
            }
        }
    }

    /// Waits for the kernel (on the stream it was last launched on); an execution error names
    /// it and its configuration.
    pub fn finish(&self) -> Result<()> {
        let launch = KernelLaunch {
            kernel: self.symbol().to_string(),
            config: self.config,
        };
        match &self.last {
            Some(stream) => self.gpu.synchronize_stream_launch(stream, &launch),
            None => self.gpu.synchronize_launch(&launch),
        }
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
    StencilRun::new(gpu, taps, boundary, input, output)?.launch_on(stream)
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
/// // The notes' stencil: the sum of the 7 inputs around each output, zero outside the array.
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
    StencilRun::new(gpu, taps, boundary, input, &mut output)?.run()?;
    Ok(output)
}
