//! Device-to-device copy by a kernel of ours: `copy_bulk`, Hopper's bulk copies (TMA) driven
//! from Rust, beside the driver's own copy ([`Gpu::copy_on_device`], `cuMemcpyDtoDAsync`).
//!
//! The driver's copy is the ceiling every memory-bound kernel of the benchmark is measured
//! against; `copy_bulk` shows that a kernel written in Rust reaches it too, and what it takes:
//! one thread per block issuing 32 KiB `cp.async.bulk` loads and stores through two stages of
//! shared memory (64 KiB a block, past the 48 KiB default: the launch opts in), and a grid of
//! one block per tile. On an H100 the grid mattered more than the pipeline: with one block per
//! tile the copy runs at the driver's speed; as many blocks as the GPU holds at once, each
//! cycling its stages over a tile a grid apart, stayed a few percent short
//! ([`CopyRun::with_grid`] launches that form; docs/tuning-notes.md, "The grid, not the
//! pipeline", for the measurements and the likely reasons). See `kernels-crate/src/copy.rs`.
//!
//! A bulk copy needs 16-byte aligned addresses on both sides, so the source and the destination
//! must sit at the same offset from a 16-byte boundary (the bytes before the first boundary and
//! after the last are copied by the threads); a pair that does not is refused, naming
//! [`Gpu::copy_on_device`], which copies any pair.
use std::marker::PhantomData;

use crate::runtime::pointer::DevicePointer;
use ferrocuda_kernels::config::{COPY_BULK_BLOCK, COPY_BULK_STAGES, COPY_BULK_TILE_BYTES};

use crate::runtime::element::Element;
use crate::runtime::error::{Error, KernelLaunch, Result};
use crate::runtime::memory::DeviceSlice;
use crate::runtime::stream::Stream;
use crate::runtime::track::Access;
use crate::{Gpu, Kernel, LaunchConfig};

/// One prepared bulk copy: kernel looked up, configuration validated, for `src` into `dst`.
/// [`launch`](Self::launch) enqueues it as often as wanted.
pub struct CopyRun<'g, 'a> {
    gpu: &'g Gpu,
    src: DevicePointer<u8>,
    dst: DevicePointer<u8>,
    bytes: usize,
    kernel: Kernel<'g, (*const u8, *mut u8, usize)>,
    config: LaunchConfig,
    /// The stream of the last launch, which `finish` waits for (the GPU's own until then).
    last: Option<Stream>,
    _slices: PhantomData<(&'a [u8], &'a mut [u8])>,
}

impl<'g, 'a> CopyRun<'g, 'a> {
    /// Prepares the copy of `src` into `dst` (the same length; a shared and a mutable borrow,
    /// so they cannot overlap). Refused on a GPU older than sm_90 (no bulk copies) and for a
    /// pair at different offsets from a 16-byte boundary.
    pub fn new<T: Element>(
        gpu: &'g Gpu,
        src: &'a DeviceSlice<T>,
        dst: &'a mut DeviceSlice<T>,
    ) -> Result<Self> {
        Self::with_grid(gpu, src, dst, None)
    }

    /// [`new`](Self::new) with `blocks` blocks (`None`: one per 32 KiB tile, at most
    /// `2^31 - 1`). A grid smaller than the tiles has each block cycle its stages over the tiles
    /// a grid apart, the kernel's pipeline; any grid copies every byte.
    pub fn with_grid<T: Element>(
        gpu: &'g Gpu,
        src: &'a DeviceSlice<T>,
        dst: &'a mut DeviceSlice<T>,
        blocks: Option<u32>,
    ) -> Result<Self> {
        let invalid = |what: String| Err(Error::InvalidArgument { what });
        if src.len() != dst.len() {
            return Err(Error::LengthMismatch {
                what: format!(
                    "`copy_bulk`: the source has {} elements, the destination {}",
                    src.len(),
                    dst.len()
                ),
                expected: src.len(),
                found: dst.len(),
            });
        }
        gpu.check_owned(src)?;
        gpu.check_owned(dst)?;
        let (s, d) = (src.as_device_ptr().as_raw(), dst.as_device_ptr().as_raw());
        if !src.is_empty() && s % 16 != d % 16 {
            return invalid(format!(
                "`copy_bulk`: the source is {} bytes past a 16-byte boundary and the destination \
                 {}: bulk copies need both at the same offset (Gpu::copy_on_device copies any pair)",
                s % 16,
                d % 16
            ));
        }
        let kernel = gpu.kernel(ferrocuda_kernels::copy::copy_bulk())?;
        let bytes = src.len() * size_of::<T>();
        let shared = COPY_BULK_STAGES * COPY_BULK_TILE_BYTES;
        let tiles = bytes.div_ceil(COPY_BULK_TILE_BYTES as usize).max(1);
        let grid = blocks.unwrap_or(tiles.min(i32::MAX as usize) as u32);
        let config = LaunchConfig::linear(grid, COPY_BULK_BLOCK, shared);
        kernel.validate(config)?;
        Ok(Self {
            gpu,
            src: DevicePointer::from_raw(s),
            dst: DevicePointer::from_raw(d),
            bytes,
            kernel,
            config,
            last: None,
            _slices: PhantomData,
        })
    }

    /// The launch configuration.
    pub fn config(&self) -> LaunchConfig {
        self.config
    }

    /// Enqueues the copy on the GPU's stream (asynchronous). An empty copy launches nothing.
    pub fn launch(&mut self) -> Result<()> {
        self.launch_on(self.gpu.stream())
    }

    /// [`launch`](Self::launch) on the caller's `stream` (of this GPU's context).
    pub fn launch_on(&mut self, stream: &Stream) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        let args = (self.src, self.dst, self.bytes);
        // SAFETY: `ordered` made the context current, checked the stream and orders it with
        // every other use of the two slices; they hold `bytes` bytes each, do not overlap
        // (a shared and a mutable borrow) and sit at the same offset from a 16-byte boundary;
        // the configuration was validated.
        let accesses = [
            Access::raw(self.src.as_raw(), false),
            Access::raw(self.dst.as_raw(), true),
        ];
        self.last = Some(stream.share());
        self.gpu.ordered(stream, &accesses, || unsafe {
            self.kernel.launch_prepared(stream, self.config, args)
        })
    }

    /// Waits for the copy (on the stream it was last launched on); an execution error names
    /// the kernel and its configuration.
    pub fn finish(&self) -> Result<()> {
        let launch = KernelLaunch {
            kernel: self.kernel.symbol().to_string(),
            config: self.config,
        };
        match &self.last {
            Some(stream) => self.gpu.synchronize_stream_launch(stream, &launch),
            None => self.gpu.synchronize_launch(&launch),
        }
    }
}

/// Copies `src` into `dst` with `copy_bulk` on the GPU's stream, without waiting (as
/// [`Gpu::copy_on_device`]); see [`CopyRun::new`] for what is refused.
///
/// # Example
/// ```no_run
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let src = gpu.upload(&vec![1.5f32; 1 << 20], "source")?;
/// let mut dst = gpu.alloc::<f32>(1 << 20, "destination")?;
/// ferrocuda::copy::copy_bulk(&gpu, &src, &mut dst)?;
/// assert_eq!(gpu.download(&dst)?[12345], 1.5);
/// # Ok(()) }
/// ```
pub fn copy_bulk<T: Element>(
    gpu: &Gpu,
    src: &DeviceSlice<T>,
    dst: &mut DeviceSlice<T>,
) -> Result<()> {
    CopyRun::new(gpu, src, dst)?.launch()
}
