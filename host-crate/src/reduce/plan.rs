//! Reductions you build once and run many times (the CUB / cuFFT pattern): a [`ReducePlan`]
//! resolves its kernel and reads the occupancy once, owns its partials and ticket and a
//! page-locked result slot, and reuses them for inputs of any length. What a call then costs is
//! one launch and the wait for its result — or, for [`ReducePlan::run_to_device`], the launch
//! alone.
//!
//! [`sum`](super::sum), [`min`](super::min), [`max`](super::max) and
//! [`sum_i32_to_i64`](super::sum_i32_to_i64) run the same plan state, cached in the [`Gpu`]
//! per type and operator ([`Gpu::with_workspace`]): a program that never builds a plan gets the
//! plan's speed.
//!
//! Bringing a result to the host costs no copy: the kernel writes it straight into a
//! page-locked slot mapped into the device's address space, and the call returns as soon as the
//! value arrives there (it watches the slot, not the stream: the last block's store reaches the
//! host before the kernel's completion does). The kernel may then still be retiring; whatever
//! the caller enqueues next on the stream is ordered after it, and a plan's next run on another
//! stream waits for it.
//!
//! Streams: every `_on` method enqueues on the caller's stream (of this GPU's context), so the
//! reduction is ordered with the caller's own copies and kernels on it. A plan's buffers are
//! reused by its next run, so a plan orders its runs itself: a run on another stream than the
//! previous one first waits (`cuStreamWaitEvent`) for the previous run to finish on the device.
//!
//! The result is the same bits as the lessons' `ReduceRun` with the fast variant gives
//! for the same input on the same device: the same kernel, grid and block.
use crate::runtime::pointer::DevicePointer;

use crate::runtime::memory::{DeviceBuffer, DeviceSlice};
use crate::runtime::stream::Stream;
use crate::runtime::track::Access;
use ferrocuda_kernels::config::REDUCE_FAST_ITEMS;

use super::kernel::{FAST_BLOCK, FastArgs, ReduceOp, fast_entry};
use crate::runtime::config::LaunchConfig;
use crate::runtime::element::Element;
use crate::runtime::error::{Error, KernelLaunch, Result, check_raw, check_raw_launch};
use crate::runtime::event::Marker;
use crate::runtime::gpu::{Gpu, Wait, WorkspaceKey};
use crate::runtime::kernel::Kernel;

/// What a plan owns; `'static`, so that a [`Gpu`] can keep one per type and operator.
pub(crate) struct PlanState<T: Element, A: Element> {
    op: ReduceOp,
    /// The kernel's PTX symbol, for error messages.
    symbol: &'static str,
    block: u32,
    /// The most blocks that are resident at once: the largest grid, and the partials' length.
    max_grid: u32,
    partials: DeviceBuffer<A>,
    ticket: DeviceBuffer<u32>,
    /// The result of [`ReducePlan::run`]: page-locked host memory the kernel writes directly.
    result: MappedSlot<A>,
    /// Recorded after each run; a run on another stream waits for it.
    done: Marker,
    /// The stream of the last run: a handle of it, compared by record (a later stream may get
    /// the same driver address).
    last_stream: Option<Stream>,
    /// False from a launch until it was enqueued and, for a waited run, finished: after a
    /// failure the ticket may be left non-zero, so the next run zeroes it first.
    ticket_clean: bool,
    _input: std::marker::PhantomData<fn(T)>,
}

impl<T: Element, A: Element> PlanState<T, A> {
    fn new(gpu: &Gpu, op: ReduceOp) -> Result<Self> {
        let kernel = fast_kernel::<T, A>(gpu, op)?;
        let block = FAST_BLOCK;
        let resident = kernel.resident_blocks(block, 0)?;
        let max_grid = resident.max(1);
        let _current = gpu.enter()?;
        // SAFETY: `A` is an `Element`, valid for every byte pattern; each run's blocks write
        // their partials before the last block reads them.
        let partials =
            unsafe { gpu.alloc_uninit(max_grid as usize, "reduction plan: per-block partials")? }
                .into_workspace();
        Ok(Self {
            op,
            symbol: kernel.symbol(),
            block,
            max_grid,
            partials,
            ticket: gpu
                .upload(&[0u32], "reduction plan: ticket")?
                .into_workspace(),
            result: MappedSlot::new(gpu)?,
            done: Marker::new()?,
            last_stream: None,
            ticket_clean: true,
            _input: std::marker::PhantomData,
        })
    }

    /// The grid for `n` elements: enough blocks for the tiles, at most the resident count.
    fn grid(&self, n: usize) -> u32 {
        let per_block = self.block as usize * (16 / size_of::<T>()) * REDUCE_FAST_ITEMS;
        n.div_ceil(per_block).clamp(1, self.max_grid as usize) as u32
    }

    /// Enqueues the reduction of `input` on `stream` into `result` (one element).
    fn enqueue(
        &mut self,
        gpu: &Gpu,
        stream: &Stream,
        input: &DeviceSlice<T>,
        result: DevicePointer<A>,
        result_access: Option<Access>,
    ) -> Result<()> {
        let n = input.len();
        if n == 0 && self.op != ReduceOp::Sum {
            return Err(Error::InvalidArgument {
                what: format!("the {} of an empty input is undefined", self.op.name()),
            });
        }
        gpu.check_owned(input)?;
        // The caller's thread may never have used this GPU: the waits and memsets below are
        // driver calls too; a stream of another context is refused before anything is enqueued.
        let all = [
            Access::read(input),
            Access::write(&mut self.partials),
            Access::write(&mut self.ticket),
            result_access.unwrap_or(Access::read(input)),
        ];
        let accesses = &all[..if result_access.is_some() { 4 } else { 3 }];
        gpu.ordered(stream, accesses, || {
            // From the GPU's kernel cache (a lookup): a `'static` state cannot hold the handle.
            let kernel = fast_kernel::<T, A>(gpu, self.op)?;
            if self
                .last_stream
                .as_ref()
                .is_some_and(|last| !last.same_stream(stream))
            {
                // The previous run, on another stream, may still use the partials and ticket.
                self.done.wait_on(stream)?;
            }
            if !self.ticket_clean {
                gpu.memset_d8_async_on(stream, &mut self.ticket, 0)?;
            }
            self.ticket_clean = false;
            let config = kernel.config(self.grid(n), self.block);
            // SAFETY: `input` holds `n` elements (a device slice, aligned to its type); the
            // partials hold `max_grid` >= grid elements; ticket and result one each; the ticket is
            // 0 (zeroed when created, left 0 by every completed run, re-zeroed after a failed one).
            // `ordered` made the context current and checked the stream.
            unsafe {
                kernel.launch_prepared(
                    stream,
                    config,
                    (
                        input.as_device_ptr(),
                        n,
                        self.partials.as_device_ptr(),
                        self.ticket.as_device_ptr(),
                        result,
                    ),
                )?
            };
            self.done.record(stream)?;
            if !self
                .last_stream
                .as_ref()
                .is_some_and(|last| last.same_stream(stream))
            {
                self.last_stream = Some(stream.share());
            }
            self.ticket_clean = true;
            Ok(())
        })
    }

    /// Enqueues on `stream` with the result written straight into mapped host memory, and
    /// waits for the value to arrive there: one launch and one wait, no copy.
    fn run_on(&mut self, gpu: &Gpu, stream: &Stream, input: &DeviceSlice<T>) -> Result<A> {
        let started = self.start(gpu, stream, input);
        self.finish(gpu, stream, input, started)
    }

    /// The first half of [`run_on`](Self::run_on): the launch into the result slot, not waited
    /// for; `None` when there is nothing to launch (the sum of nothing).
    fn start(&mut self, gpu: &Gpu, stream: &Stream, input: &DeviceSlice<T>) -> Option<Result<()>> {
        if input.is_empty() && self.op == ReduceOp::Sum {
            return None;
        }
        // A run that did not write would return this, not an earlier run's result; and the
        // wait watches for the slot to change from it.
        self.result.write(A::poison());
        Some(self.enqueue(gpu, stream, input, self.result.device_ptr(), None))
    }

    /// The second half: the value of what [`start`](Self::start) launched, once it arrived.
    fn finish(
        &mut self,
        gpu: &Gpu,
        stream: &Stream,
        input: &DeviceSlice<T>,
        started: Option<Result<()>>,
    ) -> Result<A> {
        // Nothing was launched: the sum of nothing (integers and floats alike: all-zero bits).
        let Some(enqueued) = started else {
            return Ok(A::default());
        };
        let outcome = self
            .result
            .collect(gpu, enqueued, &self.done, stream, |()| {
                self.launch_description(input.len())
            });
        if outcome.is_err() {
            self.ticket_clean = false;
        }
        outcome
    }

    fn launch_description(&self, n: usize) -> KernelLaunch {
        KernelLaunch {
            kernel: self.symbol.to_string(),
            config: LaunchConfig::linear(self.grid(n), self.block, 0),
        }
    }
}

impl<T: Element, A: Element> Drop for PlanState<T, A> {
    fn drop(&mut self) {
        // A run returns once its value arrived; its kernel may still be retiring (resetting
        // the ticket). Let it finish before the buffers are freed.
        self.done.synchronize();
    }
}

/// One element of page-locked host memory mapped into the device's address space
/// (`cuMemHostAlloc` with `DEVICEMAP`): the kernel's last block writes the result into it, so
/// bringing a result to the host costs no copy, only the wait.
pub(super) struct MappedSlot<A> {
    host: *mut A,
    device: cust::sys::CUdeviceptr,
    /// The context it was allocated in, entered to free it: a primary context that outlives
    /// the slot (its owner, a plan or a `Gpu`'s workspace, holds the `Gpu`).
    context: cust::sys::CUcontext,
}

// SAFETY: the slot is plain page-locked memory, read and written only by its owner (after the
// kernel wrote it) and by the kernel it is handed to; the context is a driver handle any thread
// may make current.
unsafe impl<A: Send> Send for MappedSlot<A> {}

impl<A: Element> MappedSlot<A> {
    pub(super) fn new(gpu: &Gpu) -> Result<Self> {
        let _current = gpu.enter()?;
        let mut host = std::ptr::null_mut();
        // SAFETY: a writable pointer; flags PORTABLE (1) | DEVICEMAP (2).
        check_raw("cuMemHostAlloc", unsafe {
            cust::sys::cuMemHostAlloc(&mut host, size_of::<A>(), 1 | 2)
        })?;
        let mut device = 0;
        // SAFETY: `host` was allocated mapped just above.
        let mapped = check_raw("cuMemHostGetDevicePointer", unsafe {
            cust::sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
        });
        let slot = Self {
            context: gpu.context_raw(),
            host: host.cast(),
            device,
        };
        mapped.map(|()| slot)
    }

    pub(super) fn device_ptr(&self) -> DevicePointer<A> {
        DevicePointer::from_raw(self.device)
    }

    pub(super) fn write(&mut self, value: A) {
        use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering::Release};
        // SAFETY: the slot is one page-aligned element of 2, 4 or 8 bytes (every `Element`), which
        // the GPU writes with one aligned store, so both sides access it whole and atomically;
        // `A` and the integer of its size are valid for each other's every bit pattern.
        unsafe {
            match size_of::<A>() {
                4 => AtomicU32::from_ptr(self.host.cast())
                    .store(std::mem::transmute_copy(&value), Release),
                8 => AtomicU64::from_ptr(self.host.cast())
                    .store(std::mem::transmute_copy(&value), Release),
                2 => AtomicU16::from_ptr(self.host.cast())
                    .store(std::mem::transmute_copy(&value), Release),
                _ => unreachable!("every Element is 2, 4 or 8 bytes"),
            }
        }
    }

    /// The slot's value, read atomically: the GPU may be writing it at the same time.
    fn read(&self) -> A {
        use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering::Acquire};
        // SAFETY: as in `write`.
        unsafe {
            match size_of::<A>() {
                4 => std::mem::transmute_copy(&AtomicU32::from_ptr(self.host.cast()).load(Acquire)),
                8 => std::mem::transmute_copy(&AtomicU64::from_ptr(self.host.cast()).load(Acquire)),
                2 => std::mem::transmute_copy(&AtomicU16::from_ptr(self.host.cast()).load(Acquire)),
                _ => unreachable!("every Element is 2, 4 or 8 bytes"),
            }
        }
    }

    /// The result of what `enqueued` launched, once the kernel wrote it over the poison
    /// written before the launch. With [`Wait::Spin`] or [`Wait::Yield`] (the GPU's policy) it
    /// polls the slot itself, which the last block's store reaches before the kernel's
    /// completion reaches the stream (measured: docs/tuning-notes.md). Every
    /// [`EVENT_CHECK`] it also asks `done`, the event recorded right after the launch (not the
    /// stream, which other work may keep busy), so that a kernel that failed is reported (with
    /// `launch`), and a result that happens to equal the poison is read once the kernel
    /// finished. With [`Wait::Block`] it blocks on `done`, then reads the slot. On any failure
    /// it waits for `stream`: a kernel enqueued before it may still write the slot, and must
    /// not do so after the next call's poison.
    pub(super) fn collect<L>(
        &self,
        gpu: &Gpu,
        enqueued: Result<L>,
        done: &Marker,
        stream: &Stream,
        launch: impl Fn(&L) -> KernelLaunch,
    ) -> Result<A> {
        let wait = gpu.wait_policy();
        let outcome = enqueued.and_then(|last| self.spin(wait, done, || launch(&last)));
        if outcome.is_err() {
            let _ = gpu.wait_for_stream(stream, None);
        }
        outcome
    }

    fn spin(&self, wait: Wait, done: &Marker, launch: impl Fn() -> KernelLaunch) -> Result<A> {
        if wait == Wait::Block {
            let (call, status) = done.wait(wait);
            check_raw_launch(call, Some(&launch()), status)?;
            return Ok(self.read());
        }
        let poison = A::poison();
        let mut next_check = std::time::Instant::now() + EVENT_CHECK;
        loop {
            let value = self.read();
            if !value.same_bits(poison) {
                return Ok(value);
            }
            if std::time::Instant::now() >= next_check {
                match done.query() {
                    cust::sys::CUresult::CUDA_SUCCESS => return Ok(self.read()),
                    cust::sys::CUresult::CUDA_ERROR_NOT_READY => {}
                    status => check_raw_launch("cuEventQuery", Some(&launch()), status)?,
                }
                next_check += EVENT_CHECK;
            }
            wait.pause();
        }
    }
}

/// How often [`MappedSlot::collect`] asks whether the kernel finished or failed.
const EVENT_CHECK: std::time::Duration = std::time::Duration::from_micros(50);

impl<A> Drop for MappedSlot<A> {
    fn drop(&mut self) {
        let _current = crate::runtime::current::Current::enter(self.context);
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        let _ = unsafe { cust::sys::cuMemFreeHost(self.host.cast()) };
    }
}

/// `op` over each `(gpu, input)`, with the states the GPUs cache, every launch enqueued before
/// any value is waited for, so that several GPUs reduce at once (in turn, N GPUs would take N
/// times one GPU's time). Each level holds its GPU's state while the next levels launch, and
/// waits for its own value on the way back. An input whose GPU comes again later (virtual ranks
/// share one) is reduced before the next launch: on one GPU's stream nothing would overlap, and
/// holding its state would only make the pool keep one more.
pub(crate) fn cached_many<T: Element, A: Element>(
    op: ReduceOp,
    inputs: &[(&Gpu, &DeviceSlice<T>)],
    values: &mut [A],
) -> Result<()> {
    let (Some(((gpu, input), inputs)), Some((value, values))) =
        (inputs.split_first(), values.split_first_mut())
    else {
        return Ok(());
    };
    let ordinal = gpu.props().ordinal;
    if inputs.iter().any(|(g, _)| g.props().ordinal == ordinal) {
        *value = cached(gpu, op, input)?;
        return cached_many(op, inputs, values);
    }
    gpu.with_workspace(
        workspace_key::<T, A>(op),
        || PlanState::<T, A>::new(gpu, op),
        |state| {
            let started = state.start(gpu, gpu.stream(), input);
            // The others launch while this one runs; whatever they return, this one's launch is
            // waited for before its state goes back to the pool, in its own context.
            let others = cached_many(op, inputs, values);
            let current = gpu.enter();
            let own = state.finish(gpu, gpu.stream(), input, started);
            let _current = current?;
            *value = own?;
            others
        },
    )
}

/// The key of the plan state a GPU caches for (`T`, `A`, `op`).
fn workspace_key<T: Element, A: Element>(op: ReduceOp) -> WorkspaceKey {
    WorkspaceKey {
        family: "reduce::fast",
        types: (std::any::TypeId::of::<T>(), std::any::TypeId::of::<A>()),
        variant: op.name(),
    }
}

/// The fast kernel for `T` into `A` with `op`, or why there is none.
fn fast_kernel<T: Element, A: Element>(
    gpu: &Gpu,
    op: ReduceOp,
) -> Result<Kernel<'_, FastArgs<T, A>>> {
    match fast_entry::<T, A>(op) {
        Some(entry) => gpu.kernel(entry),
        None => Err(Error::Unsupported {
            what: format!(
                "the fast reduction has no {} kernel for {}{}",
                op.name(),
                T::TYPE,
                if A::TYPE == T::TYPE {
                    String::new()
                } else {
                    format!(" into {}", A::TYPE)
                }
            ),
        }),
    }
}

/// A reduction built once for a GPU, an element type `T`, an accumulator `A` and an operator,
/// run on inputs of any length: the kernel and occupancy resolved once, the partials, ticket and
/// a page-locked result slot reused (see the guide's `docs/library.md`).
///
/// # Example
/// ```no_run
/// use ferrocuda::reduce::{ReduceOp, ReducePlan};
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = ferrocuda::Gpu::new(0)?;
/// let mut sum = ReducePlan::<f32>::new(&gpu, ReduceOp::Sum)?;
/// for n in [10, 1000, 1 << 20] {
///     let x = gpu.upload(&vec![1.0f32; n], "x")?;
///     assert_eq!(sum.run(&x)?, n as f32);
/// }
/// // Leave the result on the device, for the next kernel; nothing waits.
/// let x = gpu.upload(&vec![2.0f32; 100], "x")?;
/// let mut total = gpu.alloc::<f32>(1, "total")?;
/// sum.run_to_device(&x, &mut total)?;
/// assert_eq!(gpu.download(&total)?[0], 200.0);
/// # Ok(()) }
/// ```
///
/// The plan holds a clone of the [`Gpu`] (a cheap handle), not a borrow: it can live in a
/// struct beside the `Gpu`, or alone, as long as the program needs it.
///
/// ```no_run
/// use ferrocuda::reduce::{ReduceOp, ReducePlan};
/// use ferrocuda::{DeviceBuffer, Gpu};
///
/// /// A long-running program's state: the device, its data and the plans it reuses.
/// struct Simulation {
///     gpu: Gpu,
///     field: DeviceBuffer<f64>,
///     total: ReducePlan<f64>,
/// }
///
/// # fn main() -> ferrocuda::Result<()> {
/// let gpu = Gpu::new(0)?;
/// let mut sim = Simulation {
///     field: gpu.upload(&vec![0.5f64; 1 << 16], "field")?,
///     total: ReducePlan::new(&gpu, ReduceOp::Sum)?,
///     gpu,
/// };
/// assert_eq!(sim.total.run(&sim.field)?, 32768.0);
/// # let _ = &sim.gpu;
/// # Ok(()) }
/// ```
pub struct ReducePlan<T: Element, A: Element = T> {
    // Fields drop in declaration order: the state's buffers and events before the `Gpu`
    // clone, which may be the last one holding the context.
    state: PlanState<T, A>,
    gpu: Gpu,
}

impl<T: Element, A: Element> Drop for ReducePlan<T, A> {
    /// Waits for the GPU's stream (in the GPU's context, the thread's own given back after);
    /// the state's own drop waits for its last run on whichever stream it ran, and its mapped
    /// result slot enters the context to be freed.
    fn drop(&mut self) {
        let _ = self.gpu.synchronize();
    }
}

impl<T: Element, A: Element> ReducePlan<T, A> {
    /// A plan for `op` over `T` into `A` (`A = T`, or `i32` into `i64` for sums): resolves the
    /// kernel, reads its occupancy and allocates the buffers, once.
    pub fn new(gpu: &Gpu, op: ReduceOp) -> Result<Self> {
        Ok(Self {
            gpu: gpu.clone(),
            state: PlanState::new(gpu, op)?,
        })
    }

    /// The reduction of `input`, brought to the host (0 for the sum of nothing; `min` and `max`
    /// of nothing are an error). Runs on the GPU's stream and waits for the result.
    pub fn run(&mut self, input: &DeviceSlice<T>) -> Result<A> {
        self.state.run_on(&self.gpu, self.gpu.stream(), input)
    }

    /// [`run`](Self::run) on the caller's `stream` (of this GPU's context): ordered after what
    /// the caller enqueued there before, and waited for.
    pub fn run_on(&mut self, stream: &Stream, input: &DeviceSlice<T>) -> Result<A> {
        self.state.run_on(&self.gpu, stream, input)
    }

    /// Enqueues the reduction of `input` into `result[0]` on the GPU's stream and returns
    /// without waiting: the result stays on the device, for the next kernel on the stream.
    /// `result` must hold at least one element.
    pub fn run_to_device(
        &mut self,
        input: &DeviceSlice<T>,
        result: &mut DeviceSlice<A>,
    ) -> Result<()> {
        to_device(&mut self.state, &self.gpu, self.gpu.stream(), input, result)
    }

    /// [`run_to_device`](Self::run_to_device) on the caller's `stream`.
    pub fn run_to_device_on(
        &mut self,
        stream: &Stream,
        input: &DeviceSlice<T>,
        result: &mut DeviceSlice<A>,
    ) -> Result<()> {
        to_device(&mut self.state, &self.gpu, stream, input, result)
    }

    /// The grid this plan launches for `n` elements (at most the resident block count).
    pub fn grid(&self, n: usize) -> u32 {
        self.state.grid(n)
    }

    /// Threads per block.
    pub fn block(&self) -> u32 {
        self.state.block
    }
}

/// [`ReducePlan::run_to_device_on`], with the plan's two halves borrowed apart.
fn to_device<T: Element, A: Element>(
    state: &mut PlanState<T, A>,
    gpu: &Gpu,
    stream: &Stream,
    input: &DeviceSlice<T>,
    result: &mut DeviceSlice<A>,
) -> Result<()> {
    if result.is_empty() {
        return Err(Error::LengthMismatch {
            expected: 1,
            found: 0,
            what: "reduce plan: the device result buffer is empty; it needs one element".into(),
        });
    }
    gpu.check_owned(result)?;
    if input.is_empty() && state.op == ReduceOp::Sum {
        // The sum of nothing: zero bits, written on the stream like a result would be.
        let mut first = result.index_mut(..1);
        return gpu.memset_d8_async_on(stream, &mut first, 0);
    }
    // A failed enqueue leaves `ticket_clean` false, so the next run zeroes the ticket.
    let access = Access::write(result);
    state.enqueue(gpu, stream, input, result.as_device_ptr(), Some(access))
}

/// `op` over `input` with the state the GPU caches for (`T`, `A`, `op`).
pub(crate) fn cached<T: Element, A: Element>(
    gpu: &Gpu,
    op: ReduceOp,
    input: &DeviceSlice<T>,
) -> Result<A> {
    gpu.with_workspace(
        workspace_key::<T, A>(op),
        || PlanState::<T, A>::new(gpu, op),
        |state| state.run_on(gpu, gpu.stream(), input),
    )
}
