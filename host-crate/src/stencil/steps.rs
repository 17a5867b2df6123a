//! The iterated stencil (迭代模板): `steps` applications of the stencil, several per pass over
//! memory (时间分块, temporal blocking).
//!
//! A heat equation, a wave or a smoothing filter applies the same stencil many times:
//! `x_{t+1} = S(x_t)`. Each application of the fast stencil is one pass over memory and already
//! runs at the copy speed, so the number of passes is the cost. The kernel `stencil_1d_steps`
//! loads each tile once with a halo of `k * R`, applies `k` steps on chip and stores the last:
//! `k` steps per pass, `k` chosen by [`Iteration`] from the radius
//! (`stencil_steps_per_pass`). The result is bit for bit that of [`apply_into`](super::apply_into)
//! repeated `steps` times, through arrays with the 16-byte alignment of the caller's (for every
//! type and taps but the 16-bit floats' sums, whose adds are ordered by an output's lane in
//! its 16-byte vector, the alignment changes nothing).
use crate::runtime::config::LaunchConfig;
use crate::runtime::element::Element;
use crate::runtime::error::{Error, KernelLaunch, Result};
use crate::runtime::gpu::{Gpu, copy_bytes_async};
use crate::runtime::kernel::{Kernel, KernelFunction};
use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use crate::runtime::pointer::DevicePointer;
use crate::runtime::stream::Stream;
use crate::runtime::track::Access;
use ferrocuda_kernels::config::{
    STENCIL_STEPS_VECTORS_PER_THREAD, stencil_fast_tiles, stencil_steps_per_pass,
};

use super::taps::{Boundary, Taps, coefficients};
use ferrocuda_kernels::stencil::Coefficients;

/// Threads per block of the iterated stencil.
pub const STEPS_BLOCK: u32 = 256;

/// The parameters of `stencil_1d_steps`: `input, out, n, boundary, steps`.
pub type StepsArgs<T> = (*const T, *mut T, usize, u32, u32);
/// The parameters of `stencil_1d_steps_weighted`: `input, out, n, boundary, steps, weights`.
pub type WeightedStepsArgs<T> = (*const T, *mut T, usize, u32, u32, Coefficients<T>);

enum StepsKernel<'g, T> {
    Sum(Kernel<'g, StepsArgs<T>>),
    Weighted(Kernel<'g, WeightedStepsArgs<T>>, Coefficients<T>),
}

impl<'g, T> StepsKernel<'g, T> {
    fn function(&self) -> &KernelFunction<'g> {
        match self {
            Self::Sum(k) => k,
            Self::Weighted(k, _) => k,
        }
    }
}

/// The steps kernel of one taps and boundary, looked up and its launch checked, for passes of
/// any length: what [`Iteration`] and the sharded stencil's interior and ends launch.
pub(crate) struct StepsPass<'g, T: Element> {
    gpu: &'g Gpu,
    kernel: StepsKernel<'g, T>,
    boundary: Boundary,
    radius: u32,
    shared: u32,
}

impl<'g, T: Element> StepsPass<'g, T> {
    /// Looks up the kernel of `taps` and checks its launch; `what` names the caller in errors.
    pub(crate) fn new(
        gpu: &'g Gpu,
        taps: &Taps<T>,
        boundary: Boundary,
        what: impl Fn() -> String,
    ) -> Result<Self> {
        use ferrocuda_kernels::stencil as k;
        let radius = taps.radius();
        if let Some(e) = taps.error() {
            return Err(Error::Unsupported {
                what: format!("{}: {e}", what()),
            });
        }
        let none = || Error::Unsupported {
            what: format!("{}: no kernel for {}", what(), T::TYPE),
        };
        let r = radius as usize;
        let kernel = match coefficients(taps)? {
            None => StepsKernel::Sum(gpu.kernel(k::stencil_1d_steps::<T>(r).ok_or_else(none)?)?),
            Some(c) => StepsKernel::Weighted(
                gpu.kernel(k::stencil_1d_steps_weighted::<T>(r).ok_or_else(none)?)?,
                c,
            ),
        };
        let function = kernel.function();
        let shared = function.entry().dynamic_shared_bytes(STEPS_BLOCK);
        function.validate(LaunchConfig::linear(1, STEPS_BLOCK, shared))?;
        Ok(Self {
            gpu,
            kernel,
            boundary,
            radius,
            shared,
        })
    }

    /// The most steps one pass applies.
    pub(crate) fn most(&self) -> u32 {
        stencil_steps_per_pass(self.radius, lanes::<T>())
    }

    /// The PTX entry point.
    pub(crate) fn symbol(&self) -> &'static str {
        self.kernel.function().symbol()
    }

    /// The launch of one pass over `n` elements writing `out`: one block per tile of the
    /// output's vector grid.
    pub(crate) fn config(&self, out: DevicePointer<T>, n: usize) -> LaunchConfig {
        let lanes = lanes::<T>() as usize;
        let tile = STEPS_BLOCK as usize * STENCIL_STEPS_VECTORS_PER_THREAD * lanes;
        let out_offset = (out.as_raw() as usize / size_of::<T>()) % lanes;
        let tiles = stencil_fast_tiles(n, out_offset, lanes, tile);
        LaunchConfig::linear(
            tiles.min(i32::MAX as usize) as u32,
            STEPS_BLOCK,
            self.shared,
        )
    }

    /// Enqueues one pass of `steps` over `n` elements from `input` to `out`, the boundary rule
    /// at both ends of the `n`.
    ///
    /// # Safety
    /// The context is current and `stream` of it; `input` and `out` are `n`-element arrays of
    /// this GPU that do not overlap, ordered on `stream` with every other use; `1 <= steps <=
    /// most()`.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: &Stream,
        input: DevicePointer<T>,
        out: DevicePointer<T>,
        n: usize,
        steps: u32,
    ) -> Result<()> {
        debug_assert!((1..=self.most()).contains(&steps));
        let (boundary, config) = (self.boundary.code(), self.config(out, n));
        // SAFETY: the caller's contract.
        unsafe {
            match &self.kernel {
                StepsKernel::Sum(k) => {
                    k.launch_prepared(stream, config, (input, out, n, boundary, steps))
                }
                StepsKernel::Weighted(k, w) => {
                    k.launch_prepared(stream, config, (input, out, n, boundary, steps, *w))
                }
            }
        }
    }

    pub(crate) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }
}

/// A prepared iterated stencil over arrays of `n` elements: the kernel looked up, its launch
/// checked, and a scratch array of `n` that the passes ping-pong with.
/// [`run`](Self::run) enqueues `steps` applications on an array of the caller's, in place.
///
/// # Example
/// ```no_run
/// use ferrocuda::stencil::{Boundary, Iteration, Taps};
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let mut heat = gpu.upload(&vec![1.0f32; 1 << 20], "heat")?;
/// let weights = Taps::Weighted(vec![0.25, 0.5, 0.25]);
/// let mut iteration = Iteration::new(&gpu, &weights, Boundary::Periodic, heat.len())?;
/// iteration.run(&mut heat, 1000)?; // 1000 steps in 64 passes over memory
/// assert_eq!(gpu.download(&heat)?[0], 1.0);
/// # Ok(()) }
/// ```
pub struct Iteration<'g, T: Element> {
    pass: StepsPass<'g, T>,
    n: usize,
    per_pass: u32,
    scratch: DeviceBuffer<T>,
    last: Option<(Stream, LaunchConfig)>,
}

impl<'g, T: Element> Iteration<'g, T> {
    /// Prepares `taps` with `boundary` for arrays of `n` elements: looks the kernel up, checks
    /// its launch and allocates the scratch array (`n` elements).
    pub fn new(gpu: &'g Gpu, taps: &Taps<T>, boundary: Boundary, n: usize) -> Result<Self> {
        let radius = taps.radius();
        let pass = StepsPass::new(gpu, taps, boundary, || {
            format!("iterated stencil (R = {radius}, {}), n = {n}", T::TYPE)
        })?;
        // SAFETY: `T` is an `Element`, valid for every byte pattern; a pass writes every
        // element of the scratch array it uses before one is read. `LANES - 1` more, so that
        // the array can start at the caller's alignment.
        let spare = if n == 0 { 0 } else { lanes::<T>() as usize - 1 };
        let scratch = unsafe { gpu.alloc_uninit::<T>(n + spare, "iterated stencil scratch")? };
        Ok(Self {
            per_pass: pass.most(),
            pass,
            n,
            scratch,
            last: None,
        })
    }

    /// At most `per_pass` steps a pass (1 up to the kernel's most, `stencil_steps_per_pass`):
    /// to measure what the depth buys, or to make several passes of few steps.
    pub fn with_steps_per_pass(mut self, per_pass: u32) -> Result<Self> {
        let most = self.pass.most();
        if !(1..=most).contains(&per_pass) {
            return Err(Error::InvalidArgument {
                what: format!(
                    "`{}`: {per_pass} steps a pass; it applies 1 to {most} (R = {}, {})",
                    self.symbol(),
                    self.pass.radius,
                    T::TYPE
                ),
            });
        }
        self.per_pass = per_pass;
        Ok(self)
    }

    /// The most steps a pass applies.
    pub fn steps_per_pass(&self) -> u32 {
        self.per_pass
    }

    /// The PTX entry point.
    pub fn symbol(&self) -> &'static str {
        self.pass.symbol()
    }

    /// The steps of each pass for `steps` in all: as few passes as `steps_per_pass` allows,
    /// made even when that costs no more (an odd count ends in the scratch array and needs
    /// a copy back), the steps spread evenly, the larger passes first.
    pub fn passes(&self, steps: usize) -> Vec<u32> {
        if steps == 0 {
            return Vec::new();
        }
        let mut passes = steps.div_ceil(self.per_pass as usize);
        if passes % 2 == 1 && passes < steps {
            passes += 1;
        }
        let (base, extra) = (steps / passes, steps % passes);
        (0..passes)
            .map(|p| (base + usize::from(p < extra)) as u32)
            .collect()
    }

    /// Bytes the passes of `steps` must move: one read and one write of the array each (and a
    /// copy back after an odd number of passes).
    pub fn bytes(&self, steps: usize) -> u64 {
        let passes = self.passes(steps).len();
        2 * (passes + passes % 2) as u64 * (self.n * size_of::<T>()) as u64
    }

    /// Enqueues `steps` applications to `state` (of the `n` elements this was prepared for) on
    /// the GPU's stream, in place: asynchronous, as a kernel launch.
    pub fn run(&mut self, state: &mut DeviceSlice<T>, steps: usize) -> Result<()> {
        let stream = self.pass.gpu().stream();
        self.run_on(stream, state, steps)
    }

    /// [`run`](Self::run) on the caller's `stream` (of this GPU's context).
    pub fn run_on(
        &mut self,
        stream: &Stream,
        state: &mut DeviceSlice<T>,
        steps: usize,
    ) -> Result<()> {
        let n = self.n;
        if state.len() != n {
            return Err(Error::LengthMismatch {
                what: format!(
                    "`{}`: prepared for {n} elements, given {}",
                    self.symbol(),
                    state.len()
                ),
                expected: n,
                found: state.len(),
            });
        }
        let gpu = self.pass.gpu();
        gpu.check_owned(state)?;
        let passes = self.passes(steps);
        if n == 0 || passes.is_empty() {
            return Ok(());
        }
        // The scratch array at `state`'s alignment: every pass writes on the same vector grid.
        let a = state.as_device_ptr();
        let lanes = lanes::<T>() as u64;
        let skip = a.as_raw() / size_of::<T>() as u64 % lanes;
        let b = DevicePointer::from_raw(
            self.scratch.as_device_ptr().as_raw() + skip * size_of::<T>() as u64,
        );
        let accesses = [Access::write(state), Access::write(&mut self.scratch)];
        let config = self.pass.config(b, n);
        self.last = Some((stream.share(), config));
        let pass = &self.pass;
        gpu.ordered(stream, &accesses, || {
            for (p, &steps) in passes.iter().enumerate() {
                let (src, dst) = if p % 2 == 0 { (a, b) } else { (b, a) };
                // SAFETY: `state` and the scratch array are `n`-element arrays of this GPU, the
                // one borrowed mutably and the other owned, so they do not overlap; `steps` is
                // within the kernel's most; `ordered` made the context current and orders the
                // stream with every other use of both.
                unsafe { pass.enqueue(stream, src, dst, n, steps)? };
            }
            if passes.len() % 2 == 1 {
                // SAFETY: as above; the copy brings the last pass's result back to `state`.
                unsafe { copy_bytes_async(a.as_raw(), b.as_raw(), n * size_of::<T>(), stream)? };
            }
            Ok(())
        })
    }

    /// Waits for the last [`run`](Self::run); an execution error names the kernel and its
    /// configuration.
    pub fn finish(&self) -> Result<()> {
        match &self.last {
            Some((stream, config)) => {
                let launch = KernelLaunch {
                    kernel: self.symbol().to_string(),
                    config: *config,
                };
                self.pass.gpu().synchronize_stream_launch(stream, &launch)
            }
            None => Ok(()),
        }
    }
}

/// Elements of `T` per 16-byte vector.
pub(crate) fn lanes<T>() -> u32 {
    (16 / size_of::<T>()) as u32
}

/// `steps` applications of the stencil to `state`, in place, several per pass over memory;
/// waits for them. Allocates a scratch array of the same length on every call: a program that
/// iterates repeatedly should keep an [`Iteration`].
///
/// # Example
/// ```no_run
/// use ferrocuda::stencil::{self, Boundary, Taps};
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let mut x = gpu.upload(&vec![1i32; 1 << 20], "x")?;
/// stencil::iterate(&gpu, &mut x, &Taps::Sum { radius: 1 }, Boundary::Periodic, 4)?;
/// assert_eq!(gpu.download(&x)?[0], 81); // 3^4
/// # Ok(()) }
/// ```
pub fn iterate<T: Element>(
    gpu: &Gpu,
    state: &mut DeviceSlice<T>,
    taps: &Taps<T>,
    boundary: Boundary,
    steps: usize,
) -> Result<()> {
    let mut iteration = Iteration::new(gpu, taps, boundary, state.len())?;
    iteration.run(state, steps)?;
    iteration.finish()
}
