//! The reproducible sum: `f32` / `f64` sums whose bits depend on the input alone, the same on
//! every GPU and on the CPU (the lessons' CPU reference, `ferrocuda_lessons::cpu::reproducible`,
//! follows the same order). The order: chunks of [`reduce_repro_chunk`] elements, each summed in one fixed tree,
//! then the chunk sums chunked and summed the same way until one value is left (see
//! `docs/beyond-the-notes.md`).
//!
//! A call is one launch per level: one for `n` up to a chunk (8192 `f32`), two up to 2^26
//! `f32`, three up to 2^39. The last level writes into a page-locked mapped slot, as
//! [`ReducePlan::run`](super::ReducePlan::run) does, and the call waits for the value there.
use crate::runtime::pointer::DevicePointer;

use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use ferrocuda_kernels::config::{REDUCE_REPRO_BLOCK, reduce_repro_chunk};
use ferrocuda_kernels::entry::Entry;

use super::plan::MappedSlot;
use crate::runtime::config::LaunchConfig;
use crate::runtime::element::Element;
use crate::runtime::error::{Error, KernelLaunch, Result};
use crate::runtime::event::Marker;
use crate::runtime::gpu::{Gpu, WorkspaceKey};
use crate::runtime::kernel::Kernel;
use crate::runtime::track::Access;

/// The element types of the reproducible sum: `f32` and `f64` (integers are reproducible in
/// any order; `reduce::sum` is already the same on every GPU for them).
pub trait Reproducible: Element + private::Sealed {}
impl Reproducible for f32 {}
impl Reproducible for f64 {}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// How many chunks each level of the order has for `n` elements of `T` (one launch per level;
/// the last level has one chunk): `[]` for an empty input.
pub fn chunks_per_level<T: Reproducible>(n: usize) -> Vec<usize> {
    let chunk = reduce_repro_chunk(size_of::<T>());
    let mut levels = Vec::new();
    let mut len = n;
    while len > 0 && levels.last() != Some(&1) {
        len = len.div_ceil(chunk);
        levels.push(len);
    }
    levels
}

/// The kernel's parameter list: `x, n, out`.
type ReproArgs<T> = (*const T, usize, *mut T);

/// The kernel for `T` (an `f32` or `f64` instance of `reduce_reproducible`).
fn entry<T: Reproducible>() -> Result<Entry<ReproArgs<T>>> {
    ferrocuda_kernels::reduce::reduce_reproducible::<T>().ok_or_else(|| Error::Unsupported {
        what: format!("no reproducible sum kernel for {}", T::TYPE),
    })
}

/// What the `Gpu` caches per type: the grid limit, two ping-pong buffers for the chunk sums,
/// and the result slot.
struct ReproState<T: Reproducible> {
    /// The grid limit of `T`'s kernel: its resident blocks.
    max_grid: u32,
    /// The grid limits of the first-level kernels used so far (`T`'s, and the 16-bit ones that
    /// feed `f32`'s order), by symbol.
    first_grids: Vec<(&'static str, u32)>,
    levels: [DeviceBuffer<T>; 2],
    result: MappedSlot<T>,
    /// Recorded after each call's last launch: what the wait asks, and what growing the
    /// levels or dropping the state waits for.
    done: Marker,
}

impl<T: Reproducible> ReproState<T> {
    fn new(gpu: &Gpu) -> Result<Self> {
        let kernel = gpu.kernel(entry::<T>()?)?;
        let resident = kernel.resident_blocks(REDUCE_REPRO_BLOCK, 0)?;
        let _current = gpu.enter()?;
        Ok(Self {
            max_grid: resident.max(1),
            first_grids: Vec::new(),
            levels: [Self::chunk_sums(gpu, 1)?, Self::chunk_sums(gpu, 1)?],
            result: MappedSlot::new(gpu)?,
            done: Marker::new()?,
        })
    }

    /// Grows `levels[i]` to hold `len` elements (never shrinks: the workspace is reused).
    fn reserve(&mut self, gpu: &Gpu, i: usize, len: usize) -> Result<()> {
        if self.levels[i].len() < len {
            // An earlier call's kernels may still use the old buffer. An execution error of
            // theirs is sticky: this call's own wait reports it.
            let _ = self.done.wait(gpu.wait_policy());
            self.levels[i] = Self::chunk_sums(gpu, len)?;
        }
        Ok(())
    }

    /// A buffer for `len` chunk sums, left as allocated: a level's kernel writes every chunk
    /// sum before the next level reads it.
    fn chunk_sums(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: `T` is an `Element`, valid for every byte pattern.
        unsafe { gpu.alloc_uninit(len, "reproducible sum: chunk sums") }
            .map(DeviceBuffer::into_workspace)
    }

    /// Enqueues every level on the GPU's stream, the last one writing into `result`; returns
    /// the last launch, for error messages. `input` is not empty. The first level is `first`'s
    /// (the `T` kernel itself, or the 16-bit kernel that reads its input in `T`'s chunks and
    /// writes `T` sums); the levels above are `T`'s.
    fn enqueue<S: Element>(
        &mut self,
        gpu: &Gpu,
        first: &Kernel<'_, (*const S, usize, *mut T)>,
        input: &DeviceSlice<S>,
        result: DevicePointer<T>,
    ) -> Result<LastLevel> {
        let n = input.len();
        gpu.check_owned(input)?;
        // The levels go to the GPU's stream: after the work of other streams that wrote the
        // input.
        gpu.uses_on(gpu.stream(), &[Access::read(input)])?;
        let chunk = reduce_repro_chunk(size_of::<T>());
        let chunks = n.div_ceil(chunk);
        if chunks > 1 {
            self.reserve(gpu, 0, chunks)?;
            self.reserve(gpu, 1, chunks.div_ceil(chunk))?;
        }
        let dst = if chunks == 1 {
            result
        } else {
            self.levels[0].as_device_ptr()
        };
        let first_grid = self.grid_of(first)?;
        // SAFETY: `input` holds `n` elements of this GPU's (checked above); `dst` holds
        // `chunks` (levels[0] was reserved for them; `result` holds one).
        let grid = unsafe { Self::level(gpu, first, first_grid, input.as_device_ptr(), n, dst)? };
        if chunks == 1 {
            self.done.record(gpu.stream())?;
            return Ok(LastLevel {
                symbol: first.symbol(),
                grid,
                len: n,
            });
        }
        let kernel = gpu.kernel(entry::<T>()?)?;
        let (mut src, mut len, mut level) = (dst, chunks, 1);
        loop {
            let chunks = len.div_ceil(chunk);
            let dst = if chunks == 1 {
                result
            } else {
                self.levels[level % 2].as_device_ptr()
            };
            // SAFETY: `src` holds `len` elements (the previous level's sums); `dst` holds
            // `chunks` (the levels were reserved for the first two levels and later ones are
            // smaller; `result` holds one). Launches on one stream run in order, so a level
            // reads what the one before wrote.
            let grid = unsafe { Self::level(gpu, &kernel, self.max_grid, src, len, dst)? };
            if chunks == 1 {
                self.done.record(gpu.stream())?;
                return Ok(LastLevel {
                    symbol: kernel.symbol(),
                    grid,
                    len,
                });
            }
            (src, len, level) = (dst, chunks, level + 1);
        }
    }

    /// The grid limit of a first-level kernel: its resident blocks, read once per kernel.
    fn grid_of<S: Element>(
        &mut self,
        kernel: &Kernel<'_, (*const S, usize, *mut T)>,
    ) -> Result<u32> {
        let symbol = kernel.symbol();
        if let Some(&(_, g)) = self.first_grids.iter().find(|(s, _)| *s == symbol) {
            return Ok(g);
        }
        let g = kernel.resident_blocks(REDUCE_REPRO_BLOCK, 0)?.max(1);
        self.first_grids.push((symbol, g));
        Ok(g)
    }

    /// Enqueues one level of the order on the GPU's stream: the sums of the chunks of `T`'s
    /// size of the `len` elements at `src` into `dst`, on at most `max_grid` blocks; returns
    /// its grid.
    ///
    /// # Safety
    /// `src` holds `len` elements and `dst` `len.div_ceil(chunk)`, both this GPU's memory.
    unsafe fn level<S: Element>(
        gpu: &Gpu,
        kernel: &Kernel<'_, (*const S, usize, *mut T)>,
        max_grid: u32,
        src: DevicePointer<S>,
        len: usize,
        dst: DevicePointer<T>,
    ) -> Result<u32> {
        let grid = len
            .div_ceil(reduce_repro_chunk(size_of::<T>()))
            .min(max_grid as usize) as u32;
        // SAFETY: the sizes are the caller's promise; the block is REDUCE_REPRO_BLOCK, the
        // kernel's own.
        unsafe {
            kernel.launch_on(
                gpu.stream(),
                kernel.config(grid, REDUCE_REPRO_BLOCK),
                (src, len, dst),
            )?
        };
        Ok(grid)
    }

    /// The sum of `input` read by the first-level kernel `first`, brought to the host.
    fn run<S: Element>(
        &mut self,
        gpu: &Gpu,
        first: &Kernel<'_, (*const S, usize, *mut T)>,
        input: &DeviceSlice<S>,
    ) -> Result<T> {
        if input.is_empty() {
            return Ok(T::default());
        }
        // Poison first: the wait watches the slot change from it.
        self.result.write(T::poison());
        let enqueued = self.enqueue(gpu, first, input, self.result.device_ptr());
        self.result
            .collect(gpu, enqueued, &self.done, gpu.stream(), LastLevel::launch)
    }
}

impl<T: Reproducible> Drop for ReproState<T> {
    fn drop(&mut self) {
        // The last call's kernels may still be retiring; let them finish before the buffers go.
        self.done.synchronize();
    }
}

/// The last launch of a call, described only when an error needs it.
struct LastLevel {
    symbol: &'static str,
    grid: u32,
    len: usize,
}

impl LastLevel {
    fn launch(&self) -> KernelLaunch {
        KernelLaunch {
            kernel: format!("{} (last level, {} elements)", self.symbol, self.len),
            config: LaunchConfig::linear(self.grid, REDUCE_REPRO_BLOCK, 0),
        }
    }
}

/// The workspace the `Gpu` caches for `T`.
fn with_state<T: Reproducible, R>(
    gpu: &Gpu,
    f: impl FnOnce(&mut ReproState<T>) -> Result<R>,
) -> Result<R> {
    let key = WorkspaceKey {
        family: "reduce::reproducible",
        types: (std::any::TypeId::of::<T>(), std::any::TypeId::of::<T>()),
        variant: "sum",
    };
    // The state's events are recorded and waited for in the GPU's context.
    let _current = gpu.enter()?;
    gpu.with_workspace(key, || ReproState::<T>::new(gpu), f)
}

/// The sum of `input` in the reproducible order: the same bits on every GPU and as
/// a CPU that adds in the same order (`ferrocuda_lessons::cpu::reproducible`), for
/// any length and any alignment of the slice (a NaN result is a NaN; its payload is the
/// device's). `+0.0` for an empty input. Runs on the GPU's stream with a workspace the `Gpu`
/// caches per type, and waits for the value.
///
/// ```no_run
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// // Values whose sum rounds: another order would give other bits.
/// let data: Vec<f32> = (0..1_000_003u32).map(|i| (i % 997) as f32 / 7.0 - 71.0).collect();
/// let x = gpu.upload(&data, "x")?;
/// // The same values one element into another buffer: another alignment, the same bits.
/// let shifted = gpu.upload(&[&[0.0f32][..], &data].concat(), "shifted")?;
/// let a = ferrocuda::reduce::sum_reproducible(&gpu, &x)?;
/// let b = ferrocuda::reduce::sum_reproducible(&gpu, &shifted.index(1..))?;
/// assert_eq!(a.to_bits(), b.to_bits());
/// # Ok(()) }
/// ```
pub fn sum_reproducible<T: Reproducible>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<T> {
    let kernel = gpu.kernel(entry::<T>()?)?;
    with_state(gpu, |state| state.run(gpu, &kernel, input))
}

/// The first level of the reproducible order: the sum of each chunk of
/// [`reproducible_chunk::<T>()`](reproducible_chunk) elements of `input` (the last one may be
/// short), in order, into `out[..chunks]`, enqueued on the GPU's stream without waiting. The
/// rest of the order is the same order applied to the chunk sums, so a sum cut at chunk
/// boundaries (one part per GPU) finishes with [`sum_reproducible`] of the concatenated chunk
/// sums and has the bits of the whole. `out` must hold `input.len().div_ceil(chunk)` elements.
pub fn chunk_sums_to_device<T: Reproducible>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    out: &mut DeviceSlice<T>,
) -> Result<()> {
    let chunks = input.len().div_ceil(reproducible_chunk::<T>());
    if out.len() < chunks {
        return Err(Error::LengthMismatch {
            expected: chunks,
            found: out.len(),
            what: format!(
                "reproducible chunk sums: {} elements make {chunks} chunks, but the output holds {}",
                input.len(),
                out.len()
            ),
        });
    }
    if chunks == 0 {
        return Ok(());
    }
    gpu.check_owned(input)?;
    gpu.check_owned(out)?;
    gpu.uses_on(gpu.stream(), &[Access::read(input), Access::write(out)])?;
    let kernel = gpu.kernel(entry::<T>()?)?;
    with_state(gpu, |state: &mut ReproState<T>| {
        // SAFETY: `input` holds `input.len()` elements and `out` at least `chunks`, both checked
        // above to be this GPU's.
        unsafe {
            ReproState::<T>::level(
                gpu,
                &kernel,
                state.max_grid,
                input.as_device_ptr(),
                input.len(),
                out.as_device_ptr(),
            )
        }
    })
    .map(|_| ())
}

/// The reproducible order's chunk: how many elements of `T` its first level sums into one.
pub fn reproducible_chunk<T: Reproducible>() -> usize {
    reduce_repro_chunk(size_of::<T>())
}

/// [`sum_reproducible`] into `result[0]` on the device, enqueued on the GPU's stream without
/// waiting (for the next kernel, or to time the kernels alone). `result` must hold at least
/// one element.
pub fn sum_reproducible_to_device<T: Reproducible>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    result: &mut DeviceSlice<T>,
) -> Result<()> {
    to_device(gpu, entry::<T>()?, input, result)
}

/// Enqueues the reproducible sum of `input` (read by the first-level kernel `first`) into
/// `result[0]`, without waiting: zero bits for an empty input (the module is not loaded for it).
fn to_device<S: Element, T: Reproducible>(
    gpu: &Gpu,
    first: Entry<(*const S, usize, *mut T)>,
    input: &DeviceSlice<S>,
    result: &mut DeviceSlice<T>,
) -> Result<()> {
    if result.is_empty() {
        return Err(Error::LengthMismatch {
            expected: 1,
            found: 0,
            what: "reproducible sum: the device result buffer is empty; it needs one element"
                .into(),
        });
    }
    gpu.check_owned(result)?;
    if input.is_empty() {
        let mut first = result.index_mut(..1);
        return gpu.memset_d8_async_on(gpu.stream(), &mut first, 0);
    }
    gpu.uses_on(gpu.stream(), &[Access::write(result)])?;
    let first = gpu.kernel(first)?;
    with_state(gpu, |state: &mut ReproState<T>| {
        state
            .enqueue(gpu, &first, input, result.as_device_ptr())
            .map(|_| ())
    })
}

/// The reproducible sum of 16-bit floats ([`F16`], [`Bf16`]) in `f32`: the bits of
/// [`sum_reproducible`]`::<f32>` of the input widened to `f32`, so the same on every GPU and on
/// the CPU (0 when empty). The first level reads the 16-bit input in the `f32` order's chunks
/// (`reduce_reproducible_half_*`); the levels above are the `f32` sum's, with the workspace the
/// `Gpu` caches for it. Waits for the value. An error for other element types.
///
/// [`F16`]: crate::runtime::element::F16
/// [`Bf16`]: crate::runtime::element::Bf16
pub fn sum_reproducible_to_f32<T: Element>(gpu: &Gpu, input: &DeviceSlice<T>) -> Result<f32> {
    let kernel = gpu.kernel(half_entry::<T>("sum_reproducible_to_f32")?)?;
    with_state(gpu, |state: &mut ReproState<f32>| {
        state.run(gpu, &kernel, input)
    })
}

/// [`sum_reproducible_to_f32`] into `result[0]` on the device, enqueued on the GPU's stream
/// without waiting. `result` must hold at least one element.
pub fn sum_reproducible_to_f32_device<T: Element>(
    gpu: &Gpu,
    input: &DeviceSlice<T>,
    result: &mut DeviceSlice<f32>,
) -> Result<()> {
    to_device(
        gpu,
        half_entry::<T>("sum_reproducible_to_f32_device")?,
        input,
        result,
    )
}

/// The first-level kernel of the 16-bit reproducible sum, or an error naming `call` for any
/// other element type.
fn half_entry<T: Element>(call: &str) -> Result<Entry<(*const T, usize, *mut f32)>> {
    ferrocuda_kernels::reduce::reduce_reproducible_half::<T>().ok_or_else(|| Error::Unsupported {
        what: format!(
            "{call} of {}: only f16 and bf16 (sum_reproducible takes f32 and f64)",
            T::TYPE
        ),
    })
}
