//! The `Gpu`: one device, its primary context, a stream, and the kernels module loaded from the
//! best embedded PTX for it.
use crate::runtime::pointer::DeviceCopy;
use cust::context::Context;
use cust::device::{Device, DeviceAttribute};
use cust::module::Module;
use ferrocuda_kernels::config::WARP_SIZE;

use crate::runtime::current::{Current, RestoreLater};
use crate::runtime::element::Element;
use crate::runtime::error::{
    CudaContext, DriverError, Error, KernelLaunch, Result, check_raw, check_raw_launch,
};
use crate::runtime::event::Event;
use crate::runtime::memory::{ContextKeeper, DeviceBuffer, DeviceSlice};
use crate::runtime::stream::Stream;
use crate::runtime::track::{Access, Tracker};
pub use crate::runtime::wait::Wait;
use crate::runtime::workspace::WorkspacePool;

/// One architecture's PTX of a kernel crate, embedded in the binary by
/// [`include_ptx!`](crate::include_ptx) from what `ferrocuda-builder` built.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedPtx {
    /// The package of the kernel crate it was built from (what its entries' `package` says).
    pub package: &'static str,
    /// `sm_XY`.
    pub arch: &'static str,
    /// The oldest compute capability that can load it.
    pub compute_capability: (u32, u32),
    /// The PTX text.
    pub source: &'static str,
}

/// Every PTX the host carries, oldest architecture first.
pub static EMBEDDED_PTX: &[EmbeddedPtx] =
    include!(concat!(env!("OUT_DIR"), "/ferrocuda_kernels_ptx.rs"));

/// The newest embedded PTX that a device of compute capability `cc` can load.
pub fn best_ptx_for(cc: (u32, u32)) -> Option<&'static EmbeddedPtx> {
    best_ptx_in(EMBEDDED_PTX, cc)
}

/// The newest of `ptx` that a device of compute capability `cc` can load.
pub fn best_ptx_in(ptx: &'static [EmbeddedPtx], cc: (u32, u32)) -> Option<&'static EmbeddedPtx> {
    ptx.iter()
        .filter(|p| p.compute_capability <= cc)
        .max_by_key(|p| p.compute_capability)
}

/// What the driver reports about a compiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread, bytes (spills and stack; 0 for every kernel of the library).
    pub local_bytes: u32,
    /// The largest block this kernel can be launched with on this device.
    pub max_threads_per_block: u32,
}

/// A resolved kernel of a module: its handle and attributes, cached per [`Gpu`] by module and
/// symbol so that taking a kernel handle costs a map lookup, not five driver calls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResolvedKernel {
    pub(crate) raw: cust::sys::CUfunction,
    pub(crate) attributes: KernelAttributes,
}

// SAFETY: a cust::sys::CUfunction is a handle the driver lets any thread use (with its context current).
unsafe impl Send for ResolvedKernel {}

/// Answers computed once and kept: a map under a lock, filled on the first miss. The lock is
/// not held while an answer is computed (two threads may both compute it; both get the same).
struct Memo<K, V>(std::sync::Mutex<std::collections::HashMap<K, V>>);

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Self(Default::default())
    }
}

impl<K: std::hash::Hash + Eq, V: Copy> Memo<K, V> {
    fn get_or_try(&self, key: K, compute: impl FnOnce() -> Result<V>) -> Result<V> {
        let map = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(&found) = map().get(&key) {
            return Ok(found);
        }
        let found = compute()?;
        map().insert(key, found);
        Ok(found)
    }
}

// The promise made in `Gpu`'s documentation.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Gpu>();
};

/// Names a cached workspace: the family, and the element and accumulator types with what else
/// selects the kernel (for a reduction, its operator).
///
/// Crate-private, with [`Gpu::with_workspace`]: a workspace holds device state whose invariants
/// only its family keeps (a grid barrier's count, a ticket at zero), which safe code outside
/// must not be able to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WorkspaceKey {
    /// The family, e.g. `"reduce::fast"`.
    pub(crate) family: &'static str,
    /// The types, by `TypeId`.
    pub(crate) types: (std::any::TypeId, std::any::TypeId),
    /// Anything else that selects the kernel, e.g. the operator's name.
    pub(crate) variant: &'static str,
}

/// Loads one PTX into the current context; a failure names the architecture and the driver's
/// CUDA version (commonly: a driver older than the PTX ISA version).
pub(crate) fn load_ptx(ptx: &EmbeddedPtx, driver_version: i32) -> Result<Module> {
    Module::from_ptx(ptx.source, &[]).map_err(|cause| Error::ModuleLoad {
        arch: ptx.arch,
        driver_version,
        hint: "update the NVIDIA driver if it is older than the PTX ISA version, or build PTX for an older architecture",
        cause: DriverError::from_cust(cause),
    })
}

/// The newest of `ptx` that `gpu` runs, or an error naming what was offered.
pub(crate) fn choose_ptx(gpu: &Gpu, ptx: &'static [EmbeddedPtx]) -> Result<&'static EmbeddedPtx> {
    let cc = gpu.props().compute_capability;
    best_ptx_in(ptx, cc).ok_or_else(|| Error::Unsupported {
        what: format!(
            "none of the {} PTX architectures given ({}) runs on {} (compute capability {}.{})",
            ptx.len(),
            ptx.iter().map(|p| p.arch).collect::<Vec<_>>().join(", "),
            gpu.props().name,
            cc.0,
            cc.1
        ),
    })
}

/// A module loaded from one PTX table, with the architecture chosen.
type CachedModule = (Module, &'static EmbeddedPtx);

/// The modules [`Gpu::kernel_in`] loaded, by the address and length of their PTX table: each
/// loaded once and kept until the cache is dropped (with the `Gpu`, before its context).
#[derive(Default)]
pub(crate) struct ModuleCache(std::sync::Mutex<Vec<((usize, usize), *mut CachedModule)>>);

// SAFETY: the raw pointers are owned boxes of `Module`s (which are `Send + Sync`), reached only
// through the mutex and freed only by `drop`.
unsafe impl Send for ModuleCache {}
// SAFETY: as above.
unsafe impl Sync for ModuleCache {}

impl ModuleCache {
    /// The module of `ptx`, loaded by `load` if it is not yet. The lock is held while it loads,
    /// so that two threads asking at once load it once.
    pub(crate) fn get_or_load(
        &self,
        ptx: &'static [EmbeddedPtx],
        load: impl FnOnce() -> Result<CachedModule>,
    ) -> Result<(&Module, &'static EmbeddedPtx)> {
        let key = (ptx.as_ptr() as usize, ptx.len());
        let mut modules = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = match modules.iter().find(|(k, _)| *k == key) {
            Some(&(_, module)) => module,
            None => {
                let module = Box::into_raw(Box::new(load()?));
                modules.push((key, module));
                module
            }
        };
        // SAFETY: `found` came from `Box::into_raw` and is freed only in `drop`, which takes
        // `&mut self`: the shared borrow returned cannot outlive it.
        let (module, chosen) = unsafe { &*found };
        Ok((module, chosen))
    }
}

impl Drop for ModuleCache {
    fn drop(&mut self) {
        let modules = self
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, module) in modules.drain(..) {
            // SAFETY: made by `Box::into_raw` in `get_or_load`, freed once, here.
            drop(unsafe { Box::from_raw(module) });
        }
    }
}

/// What the host needs to know about a device, read once at start-up.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProps {
    /// Device ordinal.
    pub ordinal: u32,
    /// Marketing name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block dimensions (x, y, z).
    pub max_block_dim: [u32; 3],
    /// Grid dimensions (x, y, z).
    pub max_grid_dim: [u32; 3],
    /// Shared memory a block may use without opting in, bytes.
    pub shared_mem_per_block: u32,
    /// Shared memory a block may use after opting in, bytes.
    pub shared_mem_per_block_optin: u32,
    /// Shared memory per SM, bytes.
    pub shared_mem_per_sm: u32,
    /// Whether the device launches thread block clusters (compute capability 9.0 and newer).
    pub cluster_launch: bool,
    /// 32-bit registers per block.
    pub regs_per_block: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// L2 cache, bytes.
    pub l2_bytes: u32,
    /// Memory bus width, bits.
    pub memory_bus_width_bits: u32,
    /// Peak memory clock, kHz.
    pub memory_clock_khz: u32,
    /// Device memory, bytes.
    pub total_memory: usize,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
}

impl DeviceProps {
    /// Fails, naming the device, unless its warp is the 32 lanes every ferrocuda kernel is
    /// written for (shuffle masks, `lane_id`, one shared slot per warp).
    pub fn check_warp_size(&self) -> Result<()> {
        if self.warp_size == WARP_SIZE {
            return Ok(());
        }
        Err(Error::WarpSizeMismatch {
            device: self.name.clone(),
            found: self.warp_size,
            expected: WARP_SIZE,
        })
    }

    /// Whether the device runs kernels built for `sm_{min_arch}` and newer (its compute
    /// capability as `major * 10 + minor` reaches `min_arch`; 0 for every device).
    pub fn reaches_arch(&self, min_arch: u32) -> bool {
        let (major, minor) = self.compute_capability;
        major * 10 + minor >= min_arch
    }

    /// Reads the properties of `device`.
    pub fn query(ordinal: u32, device: Device) -> Result<Self> {
        let attr = |a: DeviceAttribute| {
            device
                .get_attribute(a)
                .call("cuDeviceGetAttribute")
                .map(|v| v as u32)
        };
        let raw = |a: cust::sys::CUdevice_attribute| -> Result<u32> {
            let mut v = 0;
            // SAFETY: `v` is a valid out-pointer; `device` came from the driver.
            check_raw("cuDeviceGetAttribute", unsafe {
                cust::sys::cuDeviceGetAttribute(&mut v, a, device.as_raw())
            })?;
            Ok(v as u32)
        };
        use DeviceAttribute::*;
        use cust::sys::CUdevice_attribute_enum as Raw;
        Ok(Self {
            ordinal,
            name: device.name().call("cuDeviceGetName")?,
            compute_capability: (attr(ComputeCapabilityMajor)?, attr(ComputeCapabilityMinor)?),
            sm_count: attr(MultiprocessorCount)?,
            warp_size: attr(WarpSize)?,
            max_threads_per_block: attr(MaxThreadsPerBlock)?,
            max_block_dim: [
                attr(MaxBlockDimX)?,
                attr(MaxBlockDimY)?,
                attr(MaxBlockDimZ)?,
            ],
            max_grid_dim: [attr(MaxGridDimX)?, attr(MaxGridDimY)?, attr(MaxGridDimZ)?],
            shared_mem_per_block: attr(MaxSharedMemoryPerBlock)?,
            shared_mem_per_block_optin: raw(
                Raw::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            shared_mem_per_sm: attr(MaxSharedMemoryPerMultiprocessor)?,
            cluster_launch: {
                let mut v = 0;
                // SAFETY: a valid out-pointer and device; a driver older than CUDA 12 does not
                // know the attribute and answers an error, read as "no clusters".
                let status = unsafe {
                    crate::runtime::driver::cuda12::device_attribute(
                        &mut v,
                        crate::runtime::driver::cuda12::DEVICE_ATTRIBUTE_CLUSTER_LAUNCH,
                        device.as_raw(),
                    )
                };
                status == cust::sys::CUresult::CUDA_SUCCESS && v != 0
            },
            regs_per_block: attr(MaxRegistersPerBlock)?,
            regs_per_sm: attr(MaxRegistersPerMultiprocessor)?,
            max_threads_per_sm: attr(MaxThreadsPerMultiprocessor)?,
            max_blocks_per_sm: raw(Raw::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            l2_bytes: attr(L2CacheSize)?,
            memory_bus_width_bits: attr(GlobalMemoryBusWidth)?,
            memory_clock_khz: attr(MemoryClockRate)?,
            total_memory: device.total_memory().call("cuDeviceTotalMem")?,
            driver_version: cust::CudaApiVersion::get()
                .map(|v| v.major() * 1000 + v.minor() * 10)
                .call("cuDriverGetVersion")?,
        })
    }

    /// The datasheet peak of device memory: two transfers per clock (DDR/HBM) over the bus.
    pub fn theoretical_bandwidth_gbs(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * (self.memory_bus_width_bits as f64 / 8.0) / 1e9
    }
}

/// A stream from [`Gpu::new_stream`], or one of another library from [`Gpu::adopt_stream`]: a
/// ferrocuda [`Stream`] (it derefs to one). The stream keeps the context it lives in (a retain
/// of the device's primary context), so it is never used or destroyed after that context; the
/// driver's stream is destroyed once the program and the record of the buffers it used both
/// let go of it. An adopted stream is never destroyed: its drop waits for it and hands it back.
pub struct GpuStream(Stream, Option<Gpu>);

impl std::ops::Deref for GpuStream {
    type Target = Stream;

    fn deref(&self) -> &Stream {
        &self.0
    }
}

impl Drop for GpuStream {
    /// An adopted stream is handed back to its owner: the host waits for everything on it, and
    /// the record of buffers' uses forgets it (their work is done), so ferrocuda never touches
    /// the driver's handle again.
    fn drop(&mut self) {
        if let Some(gpu) = self.1.take() {
            let _current = gpu.enter();
            if self.0.release().is_err() {
                // The stream's work failed, or could not be waited for: wait for the whole
                // context, so that nothing of it still runs when the record forgets it.
                let _ = gpu.synchronize_device();
            }
            gpu.0.tracker.forget(self.0.handle());
        }
    }
}

impl std::fmt::Debug for GpuStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The driver's stream flags.
const STREAM_DEFAULT: u32 = 0;
const STREAM_NON_BLOCKING: u32 = 1;

/// A device ready to run ferrocuda kernels.
///
/// A `Gpu` is `Send + Sync`: share it (`&Gpu`, a clone) between host threads as it is.
/// Every method makes the GPU's context current on the calling thread before its first driver
/// call, a thread's first call included, so no thread needs to prepare anything. Streams work
/// the same way: [`new_stream`](Self::new_stream) makes one from any thread, and any thread may
/// pass it to the `_on` methods (a stream of another context is refused, see
/// [`check_stream`](Self::check_stream)). Work on one stream runs in the order it was
/// enqueued, whichever thread enqueued it. The library's safe calls on two streams overlap on
/// the GPU unless they use the same buffer in ways that conflict (a write and another use): then
/// the later one's stream waits for the earlier one's work (an event wait, no host wait), as a
/// record of which stream used which allocation says (`runtime::track`; `docs/library.md`, "No
/// race from safe code"). A safe call on a caller's stream also waits for what the `Gpu`'s own
/// stream holds. What a caller enqueues with `unsafe` code is ordered only by what the caller
/// orders (the same stream, an [`Event`], [`uses_on`](Self::uses_on), a synchronisation).
///
/// Cloning a `Gpu` is cheap (an `Arc`): the clones are one device, one context, one stream,
/// one cache of kernels and workspaces, released when the last clone is dropped. Objects a
/// program keeps, such as a [`ReducePlan`](crate::reduce::ReducePlan), hold a clone rather
/// than a borrow, so that a program can keep them in one struct beside its `Gpu` (the model of
/// cudarc's `Arc<CudaContext>`). Kernel handles ([`Kernel`](crate::Kernel)) borrow the `Gpu`
/// instead: they are taken per launch from its cache (a map lookup), and a kernel of a
/// [`LoadedModule`](crate::LoadedModule) must not outlive that module.
#[derive(Clone)]
pub struct Gpu(std::sync::Arc<GpuState>);

/// What a [`Gpu`] and its clones share.
///
/// Fields drop in declaration order: module and stream go before the context they live in.
struct GpuState {
    /// The families' cached workspaces (`reduce::sum`'s buffers), by the family's key.
    workspaces: WorkspacePool<WorkspaceKey, Box<dyn std::any::Any + Send>>,
    /// Which stream used which allocation: how safe calls on two streams overlap and never
    /// race (`runtime::track`).
    tracker: Tracker,
    /// [`Wait`], as its code (a `Gpu` is shared between threads).
    wait: std::sync::atomic::AtomicU8,
    /// Kernels already resolved, by module (0 for `module`, else its box's address) and symbol.
    kernels: Memo<(usize, &'static str), ResolvedKernel>,
    /// Other kernel crates' modules, loaded by [`kernel_in`](Self::kernel_in) on first use.
    modules: ModuleCache,
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor` answers, by (function, block, shared).
    occupancy: Memo<(usize, u32, u32), u32>,
    module: Module,
    stream: Stream,
    ptx: &'static EmbeddedPtx,
    props: DeviceProps,
    _context: Context,
    /// The dropping thread's previous context, put back once every field above is gone (their
    /// drops need this context current).
    restore: RestoreLater,
}

/// The devices open in this process, by ordinal (see [`Gpu::new`]).
static OPEN: std::sync::Mutex<Vec<(u32, std::sync::Weak<GpuState>)>> =
    std::sync::Mutex::new(Vec::new());

impl ContextKeeper for GpuState {
    fn free(&self, address: u64) {
        let Ok(_current) = Current::enter(self._context.as_raw()) else {
            return;
        };
        // If the stream of the free cannot be made to wait for the other users, the host waits
        // for the whole context instead: freeing under a running kernel is not an option.
        let on = self
            .tracker
            .remove(address, &self.stream)
            .unwrap_or_else(|_| {
                // SAFETY: the context is current.
                let _ = unsafe { cust::sys::cuCtxSynchronize() };
                self.stream.handle().clone()
            });
        // SAFETY: an allocation of this context, freed once (its buffer is being dropped), on a
        // live stream (`on` holds it), ordered after every use the tracker knows of and every
        // `unsafe` one on the GPU's stream.
        let _ = unsafe { cust::sys::cuMemFreeAsync(address, on.raw()) };
    }
}

/// How many devices have a live `Gpu` in this process: with one, no slice of another device can
/// reach a call, and [`Gpu::check_owned`] asks the driver nothing.
static OPEN_DEVICES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for GpuState {
    /// Makes the context current on the dropping thread, which may never have used it, so that
    /// the module and stream are unloaded and destroyed in their own context, once the stream
    /// has finished its work.
    fn drop(&mut self) {
        OPEN_DEVICES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        // Work still enqueued, on any stream, may use the module and the workspaces about to
        // be freed.
        // The fields' drops (the module's unload, the workspaces' frees) run after this, in
        // this context: the thread's previous one comes back after the last of them.
        if let Ok(current) = Current::enter(self._context.as_raw()) {
            // SAFETY: the context is current.
            let _ = unsafe { cust::sys::cuCtxSynchronize() };
            self.restore.set(current.defer());
        }
    }
}

impl Gpu {
    /// Opens device `ordinal`: initialises the driver, checks the warp size, picks the newest
    /// PTX the device supports and loads it. A device already open in this process (some
    /// `Gpu` of it is alive) is not opened again: its `Gpu` is returned, a clone of that one,
    /// so that all work on one device goes through one stream and is ordered as one.
    ///
    /// On a machine without the NVIDIA driver this is [`Error::NoDriver`], without a device
    /// [`Error::NoDevice`]: one line each, saying what is missing.
    ///
    /// # Example
    /// ```no_run
    /// let gpu = match ferrocuda::Gpu::new(0) {
    ///     Ok(gpu) => gpu,
    ///     Err(err) => {
    ///         eprintln!("error: {err}");
    ///         std::process::exit(1);
    ///     }
    /// };
    /// println!("{} (sm_{}{}, PTX {})", gpu.props().name, gpu.props().compute_capability.0,
    ///     gpu.props().compute_capability.1, gpu.ptx_arch());
    /// ```
    pub fn new(ordinal: u32) -> Result<Self> {
        let mut open = OPEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.retain(|(_, state)| state.strong_count() > 0);
        if let Some(state) = open
            .iter()
            .find(|(o, _)| *o == ordinal)
            .and_then(|(_, state)| state.upgrade())
        {
            return Ok(Self(state));
        }
        let gpu = Self::open(ordinal)?;
        open.push((ordinal, std::sync::Arc::downgrade(&gpu.0)));
        Ok(gpu)
    }

    /// The CPU device: the same kernels, compiled for the host and run by an emulator of the
    /// CUDA execution model (`docs/cpu-device.md`), for a machine without an NVIDIA GPU. It is
    /// chosen for the whole process, so it must be asked for before any GPU is opened (or set
    /// `FERROCUDA_DEVICE=cpu`): after the NVIDIA driver was loaded this fails.
    pub fn cpu() -> Result<Self> {
        if !crate::runtime::driver::cpu::select() {
            return Err(Error::NoDevice {
                reason: "the CPU device must be chosen before the NVIDIA driver is loaded (this \
                         process already opened a GPU)"
                    .to_owned(),
            });
        }
        Self::new(0)
    }

    /// Whether this is the CPU device rather than an NVIDIA GPU.
    pub fn is_cpu(&self) -> bool {
        crate::runtime::driver::cpu::selected()
    }

    /// How many CUDA devices the driver shows (initialising it; opening none).
    pub fn count() -> Result<u32> {
        crate::runtime::driver::load()?;
        cust::init(cust::CudaFlags::empty()).map_err(|e| Error::NoDevice {
            reason: e.to_string().trim_matches('"').to_string(),
        })?;
        Device::num_devices().call("cuDeviceGetCount")
    }

    /// Opens device `ordinal` anew: [`new`](Self::new) when it is not open.
    fn open(ordinal: u32) -> Result<Self> {
        let count = Self::count()?;
        if count == 0 {
            return Err(Error::NoDevice {
                reason: "the driver reports 0 devices".into(),
            });
        }
        if ordinal >= count {
            return Err(Error::DeviceNotFound { ordinal, count });
        }
        let device = Device::get_device(ordinal).call("cuDeviceGet")?;
        let context = crate::runtime::current::retain_primary(device)?;
        // The module is loaded and the stream made in this context, whatever the thread had.
        let _current = Current::enter(context.as_raw())?;
        let props = DeviceProps::query(ordinal, device)?;
        // The CPU device may have 64-wide waves: a kernel written for 32 lanes is refused there
        // when it calls a warp function, by name.
        if !crate::runtime::driver::cpu::selected() {
            props.check_warp_size()?;
        }
        let ptx = best_ptx_for(props.compute_capability).ok_or_else(|| Error::NoPtxForDevice {
            device: props.name.clone(),
            compute_capability: props.compute_capability,
            oldest: EMBEDDED_PTX[0].arch,
        })?;
        let module = load_ptx(ptx, props.driver_version)?;
        // A blocking stream: it is ordered with work other code puts on the legacy default
        // stream, both ways.
        let stream = Stream::create(
            crate::runtime::current::retain_primary(device)?,
            STREAM_DEFAULT,
            None,
        )?;
        OPEN_DEVICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Self(std::sync::Arc::new(GpuState {
            wait: std::sync::atomic::AtomicU8::new(Wait::default().code()),
            workspaces: Default::default(),
            tracker: Default::default(),
            kernels: Default::default(),
            modules: Default::default(),
            occupancy: Default::default(),
            module,
            stream,
            ptx,
            props,
            _context: context,
            restore: RestoreLater::default(),
        })))
    }

    /// The device's properties.
    pub fn props(&self) -> &DeviceProps {
        &self.0.props
    }

    /// The PTX architecture loaded for this device.
    pub fn ptx_arch(&self) -> &'static str {
        self.0.ptx.arch
    }

    /// How this GPU's waits spend the host thread ([`Wait::Spin`] unless set).
    pub fn wait_policy(&self) -> Wait {
        Wait::from_code(self.0.wait.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Sets how this GPU's waits spend the host thread, for every thread that shares it, from
    /// the next wait on. Affects this `Gpu` and its clones (every `Gpu::new` of the device while
    /// one is alive), not the device's context.
    pub fn set_wait(&self, wait: Wait) {
        self.0
            .wait
            .store(wait.code(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Waits for everything enqueued on `stream` so far, as the wait policy says; a failure
    /// names the call that reported it and, when given, the launch it belongs to. Enters the
    /// context itself: a caller's guard may have ended with the call that enqueued the work.
    pub(crate) fn wait_for_stream(
        &self,
        stream: &Stream,
        launch: Option<&KernelLaunch>,
    ) -> Result<()> {
        if stream.is_released() {
            // An adopted stream handed back: everything on it had finished then.
            return Ok(());
        }
        let _current = self.enter()?;
        let raw = stream.raw();
        let (call, status) = self.wait_policy().until(
            // SAFETY: a live stream handle of this context, current on this thread.
            ("cuStreamQuery", &mut || unsafe {
                cust::sys::cuStreamQuery(raw)
            }),
            // SAFETY: as above.
            ("cuStreamSynchronize", &mut || unsafe {
                cust::sys::cuStreamSynchronize(raw)
            }),
        );
        check_raw_launch(call, launch, status)
    }

    /// The stream every ferrocuda launch goes to.
    pub fn stream(&self) -> &Stream {
        &self.0.stream
    }

    /// A new stream of this GPU's context, for the `_on` methods: made with the context current
    /// on the calling thread, so any thread may ask for one (and use it, or hand it to another
    /// thread). Non-blocking: it does not wait for the legacy default stream, nor the legacy
    /// stream for it, so its work overlaps the GPU's own stream. Buffers from
    /// [`alloc`](Self::alloc) and [`upload`](Self::upload) are ready for it when those return.
    ///
    /// The stream keeps the device's primary context alive (it retains it, as the `Gpu` does),
    /// so it stays valid after the `Gpu` that made it is dropped.
    pub fn new_stream(&self) -> Result<GpuStream> {
        self.make_stream(STREAM_NON_BLOCKING)
    }

    /// [`new_stream`](Self::new_stream), but blocking, as the GPU's own stream is: it waits for
    /// the legacy default stream and the legacy stream waits for it.
    pub fn new_blocking_stream(&self) -> Result<GpuStream> {
        self.make_stream(STREAM_DEFAULT)
    }

    fn make_stream(&self, flags: u32) -> Result<GpuStream> {
        self.make_stream_with_priority(flags, None)
    }

    /// A non-blocking stream of the device's highest priority (`high`) or its lowest: the
    /// multi-GPU stencil runs its halo cells and exchange on the first, its interior on the
    /// second, as NVIDIA's multi-GPU Jacobi does.
    pub(crate) fn new_stream_of_priority(&self, high: bool) -> Result<GpuStream> {
        let _current = self.enter()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: two writable ints; the context is current.
        check_raw("cuCtxGetStreamPriorityRange", unsafe {
            cust::sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
        })?;
        self.make_stream_with_priority(
            STREAM_NON_BLOCKING,
            Some(if high { greatest } else { least }),
        )
    }

    fn make_stream_with_priority(&self, flags: u32, priority: Option<i32>) -> Result<GpuStream> {
        let _current = self.enter()?;
        Ok(GpuStream(
            Stream::create(self.retain_context()?, flags, priority)?,
            None,
        ))
    }

    /// A stream made by another library (cuBLAS, PyTorch's `torch.cuda.current_stream()
    /// .cuda_stream`, cudarc, a raw `cuStreamCreate`), as a ferrocuda [`Stream`]: every `_on`
    /// call takes it, in order with that library's work on it, and ferrocuda never destroys it.
    /// Refused (`Error::ForeignDevice`) unless it is a stream of this GPU's context (the device's
    /// primary context, the one the CUDA runtime, PyTorch and CuPy use); the null handle is the
    /// legacy default stream; the per-thread default stream (`0x2`) is refused
    /// (`Error::InvalidArgument`). A stream being captured into a CUDA graph is not supported
    /// (the drop's wait would end the capture).
    ///
    /// What the other library's work on the stream reads or writes of ferrocuda's buffers, the
    /// program declares with [`uses_on`](Self::uses_on); memory the other library owns comes in
    /// as a [`View`](crate::View) or [`ViewMut`](crate::ViewMut)
    /// (`from_raw_parts`).
    ///
    /// Dropping the returned stream hands it back: the host waits for everything on it, and
    /// ferrocuda forgets it (buffers it used are then freed in the `Gpu`'s stream's order).
    ///
    /// # Safety
    /// `raw` is a live stream (`CUstream` / `cudaStream_t`) and stays one until the returned
    /// [`GpuStream`] is dropped.
    pub unsafe fn adopt_stream(&self, raw: *mut std::ffi::c_void) -> Result<GpuStream> {
        // `CU_STREAM_PER_THREAD`: a different stream on every thread, which one record of uses
        // cannot stand for.
        if raw as usize == 2 {
            return Err(Error::InvalidArgument {
                what: "adopt_stream: the per-thread default stream (CU_STREAM_PER_THREAD, 0x2) is \
                       another stream on every thread; adopt an explicit stream instead"
                    .into(),
            });
        }
        let _current = self.enter()?;
        // SAFETY: a live stream (the caller's contract); the context is current. The stream is
        // checked before it is used for anything else.
        let stream = unsafe { Stream::adopt(self.retain_context()?, raw.cast()) };
        self.check_stream(&stream)?;
        Ok(GpuStream(stream, Some(self.clone())))
    }

    /// A new retain of the device's primary context (what a stream or an event keeps).
    fn retain_context(&self) -> Result<Context> {
        let device = Device::get_device(self.0.props.ordinal).call("cuDeviceGet")?;
        crate::runtime::current::retain_primary(device)
    }

    /// A new event of this GPU's context; with `timing`, it keeps time stamps for
    /// [`Event::elapsed_ms`] (cheaper without).
    pub fn new_event(&self, timing: bool) -> Result<Event> {
        let _current = self.enter()?;
        Event::create(self.retain_context()?, timing)
    }

    /// Copies `src` into `dst` (the same length) and waits for the copy: a `cuMemcpyHtoDAsync`
    /// on the GPU's stream, after the work there and the work of every other stream that used
    /// `dst` (see `docs/library.md`, "No race from safe code").
    pub fn upload_into<T: DeviceCopy>(&self, dst: &mut DeviceSlice<T>, src: &[T]) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::LengthMismatch {
                expected: dst.len(),
                found: src.len(),
                what: format!(
                    "upload_into: {} host elements into a device slice of {}",
                    src.len(),
                    dst.len()
                ),
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        self.check_owned(dst)?;
        let stream = &self.0.stream;
        self.ordered(stream, &[Access::write(dst)], || {
            // SAFETY: `dst` holds `src.len()` elements and is held mutably; `src` stays borrowed
            // until the wait below.
            check_raw("cuMemcpyHtoDAsync", unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(
                    dst.as_device_ptr().as_raw(),
                    src.as_ptr().cast(),
                    std::mem::size_of_val(src),
                    stream.raw(),
                )
            })
        })?;
        self.wait_for_stream(stream, None)
    }

    /// The kernel `symbol` of the embedded module: from the cache, or resolved by `resolve` and
    /// cached (a module's functions live as long as the module, which lives as long as `self`).
    pub(crate) fn resolved_kernel(
        &self,
        module: &Module,
        symbol: &'static str,
        resolve: impl FnOnce() -> Result<ResolvedKernel>,
    ) -> Result<ResolvedKernel> {
        // The `Gpu`'s own module is 0 (its address moves with the `Gpu`); a cached module is
        // the address of its box, fixed until the `Gpu` is dropped.
        let module = if std::ptr::eq(module, &self.0.module) {
            0
        } else {
            std::ptr::from_ref(module) as usize
        };
        self.0.kernels.get_or_try((module, symbol), resolve)
    }

    /// The module of `ptx` (the newest architecture the device runs), loaded on first use and
    /// kept until this `Gpu` is dropped.
    pub(crate) fn cached_module(
        &self,
        ptx: &'static [EmbeddedPtx],
    ) -> Result<(&Module, &'static EmbeddedPtx)> {
        self.0.modules.get_or_load(ptx, || {
            let chosen = choose_ptx(self, ptx)?;
            let _current = self.enter()?;
            Ok((load_ptx(chosen, self.0.props.driver_version)?, chosen))
        })
    }

    /// The resident blocks per SM of `function` for `block` threads and `shared` bytes: cached,
    /// else asked by `ask` (a function's occupancy does not change while its module is loaded).
    pub(crate) fn occupancy(
        &self,
        function: usize,
        block: u32,
        shared: u32,
        ask: impl FnOnce() -> Result<u32>,
    ) -> Result<u32> {
        self.0.occupancy.get_or_try((function, block, shared), ask)
    }

    /// Runs `f` with a workspace of type `W` under `key` that no other call uses meanwhile:
    /// a free one this GPU kept from an earlier call, or a new one made by `make`. Afterwards
    /// it is kept for the next call of `key` (until the `Gpu` is dropped), whether `f`
    /// succeeded or failed; a workspace that a failed `f` may have left dirty must reset itself
    /// on its next use. If `f` panics, its workspace is dropped instead.
    ///
    /// No lock is held while `f` runs: `f` may itself call what takes a workspace
    /// (`reduce::sum`, a cooperative launch), of this key or another, and host threads sharing
    /// the `Gpu` run their calls at the same time, each with its own workspace (one is made for
    /// each call that finds none free, so a key keeps as many as ever ran at once).
    pub(crate) fn with_workspace<W: std::any::Any + Send, R>(
        &self,
        key: WorkspaceKey,
        make: impl FnOnce() -> Result<W>,
        f: impl FnOnce(&mut W) -> Result<R>,
    ) -> Result<R> {
        self.0.workspaces.with(
            key,
            || Ok(Box::new(make()?) as Box<dyn std::any::Any + Send>),
            |workspace| {
                f(workspace
                    .downcast_mut::<W>()
                    .expect("a workspace key is used with one type only"))
            },
        )
    }

    /// Runs `f` with a grid barrier for a cooperative launch (a zeroed `u32`, made on first
    /// use and kept; see [`Kernel::launch_cooperative_on`](crate::Kernel::launch_cooperative_on)),
    /// held by this call alone while `f` runs: calls at the same time get different barriers.
    /// The launch `f` enqueues declares the barrier as written (`Access::write`), so a later
    /// launch that gets the same barrier on another stream waits for it; each completed launch
    /// leaves the counter at a multiple of `0x8000_0000`.
    pub(crate) fn with_grid_barrier<R>(
        &self,
        f: impl FnOnce(&mut DeviceBuffer<u32>) -> Result<R>,
    ) -> Result<R> {
        let key = WorkspaceKey {
            family: "grid barrier",
            types: (std::any::TypeId::of::<u32>(), std::any::TypeId::of::<u32>()),
            variant: "",
        };
        self.with_workspace(
            key,
            || {
                Ok(self
                    .upload(&[0u32], "grid barrier of cooperative launches")?
                    .into_workspace())
            },
            f,
        )
    }

    /// Enqueues, through `enqueue`, work of a safe call on the caller's `stream` that makes
    /// `accesses`, after making the context current and checking the stream: the stream first
    /// waits for the GPU's own stream (when it is another) and for the other streams whose work
    /// on the same buffers conflicts; the call is entered as the buffers' newest user after
    /// `enqueue` returned or panicked (see `runtime::track`, and `docs/library.md`, "No race
    /// from safe code").
    pub(crate) fn ordered<R>(
        &self,
        stream: &Stream,
        accesses: &[Access],
        enqueue: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let _current = self.enter()?;
        self.check_stream(stream)?;
        self.ordered_recording(stream, accesses, true, enqueue)
    }

    /// [`ordered`](Self::ordered); with `record` false, no event is recorded after `enqueue`
    /// (for work the caller enqueues after this returns: a later waiter records one then).
    fn ordered_recording<R>(
        &self,
        stream: &Stream,
        accesses: &[Access],
        record: bool,
        enqueue: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let seen = self.0.tracker.begin(&self.0.stream, stream, accesses)?;
        /// Enters the call when dropped: also when `enqueue` panics.
        struct Enter<'a>(&'a GpuState, &'a Stream, &'a [Access], u64, bool);
        impl Drop for Enter<'_> {
            fn drop(&mut self) {
                let state = self.0;
                state
                    .tracker
                    .end(&state.stream, self.1, self.2, self.3, self.4);
            }
        }
        let _enter = Enter(&self.0, stream, accesses, seen, record);
        enqueue()
    }

    /// How many times the library made one of this GPU's streams wait for another (an event
    /// recorded on one, `cuStreamWaitEvent` on the other) so far: a program that means its
    /// streams to overlap can check that the calls it made added no wait it did not expect.
    pub fn cross_stream_waits(&self) -> u64 {
        self.0.tracker.joins()
    }

    /// Orders work the caller enqueues on `stream` itself (an `unsafe` launch, a raw copy)
    /// with the library's safe calls, as theirs are ordered: `stream` waits for the GPU's own
    /// stream and for the other streams' conflicting work on the buffers `accesses` name, and
    /// the accesses are entered as `stream`'s, so that later safe calls on other streams, and
    /// the buffers' drops, wait for them. Call it right before enqueueing that work; it adds
    /// waits and nothing else, so it is safe whatever the caller enqueues (or does not).
    pub fn uses_on(&self, stream: &Stream, accesses: &[Access]) -> Result<()> {
        let _current = self.enter()?;
        self.check_stream(stream)?;
        self.ordered_recording(stream, accesses, false, || Ok(()))
    }

    /// Makes `stream`, when it is not the GPU's own, wait for what the GPU's stream holds now
    /// (no host wait): what an `unsafe` launch on a caller's stream needs to find memory that
    /// was allocated, zeroed or freed in the GPU's stream's order ready. The context is
    /// current and `stream` checked.
    pub(crate) fn after_own_stream(&self, stream: &Stream) -> Result<()> {
        if stream.raw() == self.0.stream.raw() {
            return Ok(());
        }
        self.0
            .tracker
            .begin(&self.0.stream, stream, &[])
            .map(|_| ())
    }

    /// Fails, naming both, unless `stream` belongs to this GPU's context (a stream of another
    /// context would run the launch there, or fail with an opaque handle error).
    pub fn check_stream(&self, stream: &Stream) -> Result<()> {
        if stream.raw() == self.0.stream.raw() {
            return Ok(());
        }
        let mut context = std::ptr::null_mut();
        // SAFETY: a live stream handle and a writable context handle.
        check_raw("cuStreamGetCtx", unsafe {
            cust::sys::cuStreamGetCtx(stream.raw(), &mut context)
        })?;
        if context != self.0._context.as_raw() {
            return Err(Error::ForeignDevice {
                expected: self.0.props.ordinal,
                found: None,
                what: format!(
                    "the stream given belongs to another context than device {}'s ({}); create it \
                     with Gpu::new_stream",
                    self.0.props.ordinal, self.0.props.name
                ),
            });
        }
        Ok(())
    }

    /// Fails, naming both devices, unless `slice` is memory of this GPU's device. Asks the
    /// driver (`cuPointerGetAttribute`) only while another device also has a live `Gpu` in
    /// this process: with one, every slice safe code holds is this device's.
    pub fn check_owned<T: DeviceCopy>(&self, slice: &DeviceSlice<T>) -> Result<()> {
        if slice.is_empty() || OPEN_DEVICES.load(std::sync::atomic::Ordering::Relaxed) <= 1 {
            return Ok(());
        }
        let _current = self.enter()?;
        let mut ordinal: std::ffi::c_int = -1;
        // SAFETY: a writable int for CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL; the address is a
        // live allocation's (the slice borrows it).
        check_raw("cuPointerGetAttribute", unsafe {
            cust::sys::cuPointerGetAttribute(
                std::ptr::from_mut(&mut ordinal).cast(),
                cust::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                slice.as_device_ptr().as_raw(),
            )
        })?;
        if ordinal != self.0.props.ordinal as std::ffi::c_int {
            return Err(Error::ForeignDevice {
                expected: self.0.props.ordinal,
                found: u32::try_from(ordinal).ok(),
                what: format!(
                    "a device slice of device {ordinal} was given to device {} ({}): copy it there first",
                    self.0.props.ordinal, self.0.props.name
                ),
            });
        }
        Ok(())
    }

    /// The loaded module. Crate-private: cust's `Module::get_global` copies device bytes into
    /// any `DeviceCopy` type, which safe code must not reach (a device static is reached with
    /// [`KernelFunction::device_global`](crate::runtime::kernel::KernelFunction::device_global)).
    pub(crate) fn module(&self) -> &Module {
        &self.0.module
    }

    /// Makes this GPU's context current on the calling thread and leaves it so, as
    /// `cudaSetDevice` does: for driver calls a program makes itself (through `cust` or
    /// `cust::sys`). ferrocuda's own calls need nothing: each makes the context current while it
    /// runs and then gives the thread back the context it had (another library's, another
    /// device's), or leaves this one current where the thread had none, as the CUDA runtime's
    /// first call does (`docs/library.md`, "Working with other libraries").
    pub fn make_current(&self) -> Result<()> {
        cust::context::CurrentContext::set_current(&self.0._context).call("cuCtxSetCurrent")
    }

    /// Makes this GPU's context current on the calling thread while the guard lives, and puts
    /// the thread's previous context back after (`runtime::current`): what every entry point
    /// of the library does first.
    pub(crate) fn enter(&self) -> Result<Current> {
        Current::enter(self.0._context.as_raw())
    }

    /// The driver's handle of this GPU's context (the device's primary context), which lives as
    /// long as this `Gpu` or any clone of it.
    pub(crate) fn context_raw(&self) -> cust::sys::CUcontext {
        self.0._context.as_raw()
    }

    /// Sets every byte of `slice` to `byte` on the stream (`cuMemsetD8Async`, asynchronous).
    pub fn memset_d8_async<T: Element>(&self, slice: &mut DeviceSlice<T>, byte: u8) -> Result<()> {
        self.memset_d8_async_on(&self.0.stream, slice, byte)
    }

    /// [`memset_d8_async`](Self::memset_d8_async) on `stream`, a stream of this GPU's context.
    ///
    /// Only for [`Element`] types: any byte repeated is a valid integer or float, which it is
    /// not for every `DeviceCopy` type (a `bool`, a `char`, a `NonZero*`).
    pub fn memset_d8_async_on<T: Element>(
        &self,
        stream: &Stream,
        slice: &mut DeviceSlice<T>,
        byte: u8,
    ) -> Result<()> {
        if slice.is_empty() {
            return Ok(());
        }
        self.check_owned(slice)?;
        self.ordered(stream, &[Access::write(slice)], || {
            // SAFETY: the slice is `len` elements of device memory the caller holds mutably;
            // every byte pattern is a valid `Element` (an integer or a float).
            unsafe {
                memset_bytes_async(
                    slice.as_device_ptr().as_raw(),
                    byte,
                    slice.len() * size_of::<T>(),
                    stream,
                )
            }
        })
    }

    /// Copies `src` into `dst` on the device, enqueued on the GPU's stream without waiting
    /// (ordered with the kernels there). The two must have the same length; being a shared and
    /// a mutable borrow, they cannot overlap. Only for [`Element`] types, as
    /// [`memset_d8_async`](Self::memset_d8_async): copying the bytes of a buffer not yet written
    /// would hand out, in `dst`, values that are not valid for every `DeviceCopy` type.
    pub fn copy_on_device<T: Element>(
        &self,
        src: &DeviceSlice<T>,
        dst: &mut DeviceSlice<T>,
    ) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::LengthMismatch {
                expected: src.len(),
                found: dst.len(),
                what: format!(
                    "device copy: the source has {} elements, the destination {}",
                    src.len(),
                    dst.len()
                ),
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        self.check_owned(src)?;
        self.check_owned(dst)?;
        let stream = self.stream();
        self.ordered(stream, &[Access::read(src), Access::write(dst)], || {
            // SAFETY: both slices are `len` elements of this context's device memory, `src`
            // borrowed and `dst` borrowed mutably (so they do not overlap); the copy is ordered
            // on the stream with the work that wrote `src` and the work that reads `dst`.
            unsafe {
                copy_bytes_async(
                    dst.as_device_ptr().as_raw(),
                    src.as_device_ptr().as_raw(),
                    src.len() * size_of::<T>(),
                    stream,
                )
            }
        })
    }

    /// Fills `slice` with poison ([`Element::poison`]: a NaN for floats), so that an output a
    /// kernel fails to write is caught. Asynchronous on the stream.
    pub fn poison_async<T: Element>(&self, slice: &mut DeviceSlice<T>) -> Result<()> {
        self.memset_d8_async(slice, T::POISON_BYTE)
    }

    /// Waits for all work on the stream, as the [`wait_policy`](Self::wait_policy) says.
    pub fn synchronize(&self) -> Result<()> {
        self.wait_for_stream(&self.0.stream, None)
    }

    /// Waits for every stream of this GPU's context, the program's own streams included
    /// (`cuCtxSynchronize`), whatever the wait policy.
    pub fn synchronize_device(&self) -> Result<()> {
        let _current = self.enter()?;
        // SAFETY: the context is current.
        check_raw("cuCtxSynchronize", unsafe { cust::sys::cuCtxSynchronize() })
    }

    /// [`synchronize`](Self::synchronize) after `launch`: an error the wait reports names that
    /// kernel and its configuration.
    pub fn synchronize_launch(&self, launch: &KernelLaunch) -> Result<()> {
        self.synchronize_stream_launch(&self.0.stream, launch)
    }

    /// Waits for everything on `stream` (the wait policy's way); an error names `launch`.
    pub(crate) fn synchronize_stream_launch(
        &self,
        stream: &Stream,
        launch: &KernelLaunch,
    ) -> Result<()> {
        self.wait_for_stream(stream, Some(launch))
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let _current = self.enter()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: valid out-pointers; the context is current on this thread.
        check_raw("cuMemGetInfo", unsafe {
            cust::sys::cuMemGetInfo_v2(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// Allocates `len` elements, every byte zero (a valid value of every [`Element`]); an
    /// allocation the device cannot serve is reported as [`Error::OutOfMemory`] naming `what`
    /// and the free memory at that moment.
    ///
    /// The zeroing is a memset on the GPU's stream that this call waits for, so the buffer may
    /// go straight to any stream (a caller's own included). Where the contents are about to be
    /// overwritten anyway, [`alloc_uninit`](Self::alloc_uninit) skips the memset and the wait.
    pub fn alloc<T: Element>(&self, len: usize, what: &str) -> Result<DeviceBuffer<T>> {
        // SAFETY: `T` is an `Element`, valid for every byte pattern; the buffer is zeroed below
        // before the caller sees it.
        let mut buffer = unsafe { self.alloc_uninit::<T>(len, what)? };
        if !buffer.is_empty() {
            self.memset_d8_async(&mut buffer, 0)?;
            self.synchronize()?;
        }
        Ok(buffer)
    }

    /// Allocates `len` elements and leaves them as the device memory happens to hold them; an
    /// allocation the device cannot serve is reported as [`Error::OutOfMemory`] naming `what`
    /// and the free memory at that moment (asked of the driver only then: a successful
    /// allocation costs one driver call).
    ///
    /// # Safety
    /// Until every element has been written (by a kernel, a copy or a memset), the buffer must
    /// not be read as `T` on the host ([`download`](Self::download), a copy to host memory) or
    /// by a kernel that relies on its elements being valid `T` values, unless every bit pattern
    /// is a valid `T`, as it is for every [`Element`]. A `bool`, `char`, reference-free enum or
    /// `NonZero*` read from uninitialised memory is undefined behaviour.
    pub unsafe fn alloc_uninit<T: DeviceCopy>(
        &self,
        len: usize,
        what: &str,
    ) -> Result<DeviceBuffer<T>> {
        let _current = self.enter()?;
        let bytes = len as u128 * size_of::<T>() as u128;
        let out_of_memory = || -> Result<Error> {
            let (free, total) = self.memory_info()?;
            Ok(Error::OutOfMemory {
                what: what.into(),
                bytes,
                free,
                total,
            })
        };
        if bytes > self.0.props.total_memory as u128 {
            return Err(out_of_memory()?);
        }
        if len == 0 || size_of::<T>() == 0 {
            return Ok(DeviceBuffer::new(0, len, self.0.clone()));
        }
        let mut address = 0;
        // SAFETY: a writable address; the context is current. Reading the contents before they
        // are written is excluded by this function's own contract, forwarded to the caller.
        let status = unsafe {
            cust::sys::cuMemAllocAsync(&mut address, bytes as usize, self.0.stream.raw())
        };
        match status {
            cust::sys::CUresult::CUDA_SUCCESS => {
                self.0.tracker.insert(address, bytes as usize);
                Ok(DeviceBuffer::new(address, len, self.0.clone()))
            }
            cust::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(out_of_memory()?),
            status => Err(Error::Driver {
                call: "cuMemAllocAsync",
                launch: None,
                error: DriverError::from_status(status),
            }),
        }
    }

    /// Copies `data` to a new device buffer. The copy goes to the GPU's stream and this call
    /// waits for it, so the buffer is ready for any stream when it returns (a synchronous
    /// `cuMemcpyHtoD` from pageable memory may return before its data reached the device, which
    /// only streams ordered after the legacy default stream would see in time).
    pub fn upload<T: DeviceCopy>(&self, data: &[T], what: &str) -> Result<DeviceBuffer<T>> {
        let _current = self.enter()?;
        // SAFETY: every element is written by the copy below before the buffer is returned; if
        // the copy fails, the buffer is dropped unread.
        let buf = unsafe { self.alloc_uninit::<T>(data.len(), what)? };
        if !buf.is_empty() && size_of::<T>() > 0 {
            // SAFETY: the buffer holds `data.len()` elements; `data` stays borrowed until the
            // wait below, after which the driver no longer reads it.
            check_raw("cuMemcpyHtoDAsync", unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(
                    buf.as_device_ptr().as_raw(),
                    data.as_ptr().cast(),
                    std::mem::size_of_val(data),
                    self.0.stream.raw(),
                )
            })?;
            self.synchronize()?;
        }
        Ok(buf)
    }

    /// Copies `buf` (a buffer, or part of one: `buf.index(a..b)`) to the host, after the work
    /// on the GPU's stream and the work of every other stream that wrote it.
    pub fn download<T: DeviceCopy + Default + Clone>(
        &self,
        buf: &DeviceSlice<T>,
    ) -> Result<Vec<T>> {
        let mut out = vec![T::default(); buf.len()];
        self.download_into(buf, &mut out)?;
        Ok(out)
    }

    /// [`download`](Self::download) into `dst` (the same length), a slice the caller owns: no
    /// allocation.
    pub fn download_into<T: DeviceCopy>(&self, src: &DeviceSlice<T>, dst: &mut [T]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::LengthMismatch {
                expected: src.len(),
                found: dst.len(),
                what: format!(
                    "download_into: a device slice of {} elements into {} host elements",
                    src.len(),
                    dst.len()
                ),
            });
        }
        self.check_owned(src)?;
        let stream = &self.0.stream;
        if dst.is_empty() {
            // Still a synchronisation point, as a download of something is.
            return self.wait_for_stream(stream, None);
        }
        self.ordered(stream, &[Access::read(src)], || {
            // SAFETY: `src` holds `dst.len()` elements; `dst` is held mutably until the wait
            // below, and every byte the copy writes is a `T` the device held (`DeviceCopy`).
            check_raw("cuMemcpyDtoHAsync", unsafe {
                cust::sys::cuMemcpyDtoHAsync_v2(
                    dst.as_mut_ptr().cast(),
                    src.as_device_ptr().as_raw(),
                    std::mem::size_of_val(dst),
                    stream.raw(),
                )
            })
        })?;
        self.wait_for_stream(stream, None)
    }
}

/// `cuMemcpyDtoDAsync` of `bytes` bytes from `src` to `dst` on `stream`.
///
/// # Safety
/// The stream's context is current; `src` holds `bytes` readable and `dst` `bytes` writable
/// device bytes that do not overlap, ordered by the caller with every other use of both, and
/// valid as the destination's type.
pub(crate) unsafe fn copy_bytes_async(
    dst: u64,
    src: u64,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check_raw("cuMemcpyDtoDAsync", unsafe {
        cust::sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.raw())
    })
}

/// `cuMemsetD8Async` of `bytes` bytes at `dst` to `byte` on `stream`.
///
/// # Safety
/// As [`copy_bytes_async`], for `dst` alone.
pub(crate) unsafe fn memset_bytes_async(
    dst: u64,
    byte: u8,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check_raw("cuMemsetD8Async", unsafe {
        cust::sys::cuMemsetD8Async(dst, byte, bytes, stream.raw())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safe call whose enqueueing panics after its work went to the stream is still entered
    /// as its buffer's user: the next conflicting call, on another stream, waits for it.
    #[test]
    fn a_call_that_panics_after_enqueueing_is_still_its_buffers_user() {
        let gpu = Gpu::cpu().expect("the CPU device");
        let mut buffer = gpu.alloc::<f32>(16, "written").expect("alloc");
        let first = gpu.new_stream().expect("stream");
        let address = buffer.as_device_ptr().as_raw();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gpu.ordered(&first, &[Access::write(&mut buffer)], || -> Result<()> {
                // SAFETY: the buffer's 64 bytes, held by this test; the context is current.
                unsafe { memset_bytes_async(address, 1, 64, &first)? };
                panic!("after the enqueue");
            })
        }));
        assert!(caught.is_err(), "the enqueue panicked");
        let before = gpu.cross_stream_waits();
        // On the GPU's own stream: the one wait is for `first`.
        gpu.memset_d8_async(&mut buffer, 2).expect("memset");
        assert_eq!(
            gpu.cross_stream_waits(),
            before + 1,
            "the write on the GPU's stream waits for the one on another stream whose enqueue panicked"
        );
    }
}
