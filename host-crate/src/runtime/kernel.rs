//! Kernels of a loaded module and their launches, typed by the kernel's own declaration.
//!
//! [`Gpu::kernel`] takes the handle `#[kernel]` generated for an entry point
//! (`ferrocuda_kernels::reduce::reduce_reproducible::<f32>()`), and the returned
//! [`Kernel`] launches only with arguments of the declared parameter types: a
//! [`DevicePointer<T>`] for a `*const T` or `*mut T` parameter, the value itself for a
//! [`ByValue`] one (`usize`, `u32`, `f32`, a `#[repr(C)]` struct). A wrong count or type is a
//! compile error; the launch stays `unsafe` only for what a type cannot say, the kernel's
//! `# Safety` section (how many elements each pointer holds). Every error names the kernel and
//! the configuration.
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::Deref;

use crate::runtime::pointer::{DeviceCopy, DevicePointer};
use cust::function::FunctionAttribute;
use cust::module::Module;
use cust::sys::CUfunction;
use ferrocuda_kernels::entry::{ByValue, DeviceGlobal, Entry, EntryInfo};
use ferrocuda_kernels::grid::GridBarrier;

use crate::runtime::config::LaunchConfig;
use crate::runtime::driver::cuda12;
use crate::runtime::error::{
    CudaContext, DriverError, Error, KernelLaunch, Result, check_raw, check_raw_launch,
};
pub use crate::runtime::gpu::KernelAttributes;
use crate::runtime::gpu::{EmbeddedPtx, Gpu, ResolvedKernel, choose_ptx, load_ptx};
use crate::runtime::stream::Stream;
use crate::runtime::track::Access;

/// The parameter list of a kernel known only by its [`EntryInfo`] (from the list of every
/// entry point): such a [`Kernel`] answers attribute and occupancy queries but cannot launch.
pub enum Untyped {}

/// A kernel of the loaded module whatever its parameter list: its declaration, attributes,
/// occupancy and the validation of a launch configuration. A [`Kernel`] dereferences to it.
pub struct KernelFunction<'g> {
    gpu: &'g Gpu,
    /// The driver's handle; valid while the module it came from is loaded, which the `'g`
    /// borrow of the module's owner guarantees.
    raw: CUfunction,
    /// From a module the `Gpu` keeps as long as itself (its own, or one of
    /// [`Gpu::kernel_in`]), whose functions' occupancy answers can be cached by handle; not a
    /// [`LoadedModule`].
    kept: bool,
    entry: &'static EntryInfo,
    attributes: KernelAttributes,
    /// The dynamic shared memory this handle has opted the function in to
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`), 0 before any opt-in.
    shared_opt_in: std::sync::atomic::AtomicU32,
}

// SAFETY: `raw` is a driver handle (`CUfunction`) that the driver lets any thread use while
// its context is current, and every use of it here enters the GPU's context first
// (`Gpu::enter`); the module it belongs to stays loaded for `'g` whichever thread holds
// the handle. The opt-in record is an atomic. cudarc's function handle is `Send + Sync` on the
// same grounds.
unsafe impl Send for KernelFunction<'_> {}
// SAFETY: as above; the driver's function calls are thread-safe.
unsafe impl Sync for KernelFunction<'_> {}

/// A kernel of the loaded module that launches with its declared parameter list `Args`.
pub struct Kernel<'g, Args = Untyped> {
    function: KernelFunction<'g>,
    args: PhantomData<fn(Args)>,
}

impl<'g, Args> Deref for Kernel<'g, Args> {
    type Target = KernelFunction<'g>;

    fn deref(&self) -> &KernelFunction<'g> {
        &self.function
    }
}

std::thread_local! {
    /// The kernel whose declared dynamic shared memory [`declared_dynamic_shared`] reports:
    /// the driver's callback takes the block size only.
    static DECLARED_SHARED: std::cell::Cell<Option<&'static EntryInfo>> =
        const { std::cell::Cell::new(None) };
}

/// The occupancy callback: the dynamic shared memory the kernel in [`DECLARED_SHARED`]
/// declares for a block of `block` threads.
unsafe extern "C" fn declared_dynamic_shared(block: std::ffi::c_int) -> usize {
    DECLARED_SHARED.with(|rule| {
        rule.get()
            .map_or(0, |e| e.dynamic_shared_bytes(block.max(0) as u32) as usize)
    })
}

/// A host value that may stand for a kernel parameter of type `P`.
///
/// # Safety
/// The bytes of `Self` must be what the kernel reads as a `P`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "the kernel declares this parameter as `{P}`",
    note = "pass a `DevicePointer<T>` for `*const T` / `*mut T`, and the value itself for a by-value parameter"
)]
pub unsafe trait KernelArg<P>: Copy {}

// SAFETY: a by-value parameter is passed as its own bytes.
unsafe impl<P: ByValue> KernelArg<P> for P {}
// SAFETY: `DevicePointer<T>` is a transparent device address, what a `*const T` parameter holds.
unsafe impl<T: DeviceCopy> KernelArg<*const T> for DevicePointer<T> {}
// SAFETY: as above, for `*mut T`.
unsafe impl<T: DeviceCopy> KernelArg<*mut T> for DevicePointer<T> {}

/// A tuple of arguments for a kernel whose parameter list is `Params`.
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel's parameters `{Params}`",
    label = "expected a tuple with one argument per parameter, in the declared order"
)]
pub trait LaunchArgs<Params> {
    /// Calls `f` with the address of each argument, as `cuLaunchKernel` wants them.
    fn with_addresses<R>(&self, f: impl FnOnce(&[*mut c_void]) -> R) -> R;
}

macro_rules! launch_args {
    ($($p:ident $a:ident $v:ident),*) => {
        impl<$($p, $a: KernelArg<$p>),*> LaunchArgs<($($p,)*)> for ($($a,)*) {
            fn with_addresses<R>(&self, f: impl FnOnce(&[*mut c_void]) -> R) -> R {
                let ($($v,)*) = self;
                f(&[$($v as *const $a as *mut c_void),*])
            }
        }
    };
}
launch_args!(P0 A0 a0);
launch_args!(P0 A0 a0, P1 A1 a1);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5, P6 A6 a6);
launch_args!(P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5, P6 A6 a6, P7 A7 a7);

/// The package whose PTX [`Gpu`] embeds.
pub const KERNELS_PACKAGE: &str = "ferrocuda-kernels";

/// Every entry point of the embedded PTX, as declared, sorted by symbol.
pub fn entry_points() -> Vec<&'static EntryInfo> {
    ferrocuda_kernels::entry::entry_points_of(KERNELS_PACKAGE)
}

/// The declared entry point of the embedded PTX with symbol `symbol`.
pub fn entry_point(symbol: &str) -> Option<&'static EntryInfo> {
    entry_points().into_iter().find(|e| e.symbol == symbol)
}

impl Gpu {
    /// The kernel behind `entry`, a handle generated by `#[kernel]` in `ferrocuda-kernels`.
    ///
    /// # Example
    /// ```no_run
    /// use ferrocuda::kernels::reduce::reduce_reproducible;
    /// # fn main() -> ferrocuda::Result<()> {
    /// let gpu = ferrocuda::Gpu::new(0)?;
    /// let n = 1000usize;
    /// let x = gpu.upload(&vec![1.0f32; n], "x")?;
    /// let mut out = gpu.alloc::<f32>(1, "out")?;
    /// // Kernel<'_, (*const f32, usize, *mut f32)>: the declared parameters.
    /// let chunk_sums = gpu.kernel(reduce_reproducible::<f32>().expect("an f32 instance"))?;
    /// // SAFETY: x holds n elements and out the one chunk sum of n <= 8192 elements; the block is
    /// // the 256 threads the kernel's `# Launch` asks for; `out` is held mutably, and nothing
    /// // else reads it, until the wait returns.
    /// let out_ptr = (&mut *out).as_device_ptr();
    /// unsafe {
    ///     chunk_sums.launch_and_wait(chunk_sums.config(1, 256), (x.as_device_ptr(), n, out_ptr))?
    /// };
    /// assert_eq!(gpu.download(&out)?[0], 1000.0);
    /// # Ok(()) }
    /// ```
    pub fn kernel<Args>(&self, entry: Entry<Args>) -> Result<Kernel<'_, Args>> {
        Ok(Kernel {
            function: KernelFunction::load(
                self,
                self.module(),
                self.ptx_arch(),
                entry.info(),
                true,
                KERNELS_PACKAGE,
            )?,
            args: PhantomData,
        })
    }

    /// The kernel behind one of [`ENTRY_POINTS`](ferrocuda_kernels::entry::ENTRY_POINTS), for
    /// attribute and occupancy queries.
    pub fn kernel_info(&self, entry: &'static EntryInfo) -> Result<Kernel<'_, Untyped>> {
        Ok(Kernel {
            function: KernelFunction::load(
                self,
                self.module(),
                self.ptx_arch(),
                entry,
                true,
                KERNELS_PACKAGE,
            )?,
            args: PhantomData,
        })
    }

    /// Loads the PTX of another kernel crate (a user's, built by `ferrocuda-builder` and
    /// embedded with [`include_ptx!`](crate::include_ptx)) next to ferrocuda's own: the newest
    /// architecture the device can run. Its kernels launch as typed as ferrocuda's, through
    /// [`LoadedModule::kernel`].
    ///
    /// # Example
    /// ```ignore
    /// static KERNELS: &[ferrocuda::EmbeddedPtx] = ferrocuda::include_ptx!("my_kernels");
    ///
    /// let module = gpu.load_module(KERNELS)?;
    /// let dot = module.kernel(my_kernels::dot::<f32>().unwrap())?;
    /// ```
    pub fn load_module(&self, ptx: &'static [EmbeddedPtx]) -> Result<LoadedModule<'_>> {
        let chosen = choose_ptx(self, ptx)?;
        let _current = self.enter()?;
        let module = load_ptx(chosen, self.props().driver_version)?;
        Ok(LoadedModule {
            gpu: self,
            module: std::mem::ManuallyDrop::new(module),
            ptx: chosen,
        })
    }

    /// The kernel behind `entry` in `ptx`, the PTX of another kernel crate (embedded with
    /// [`include_ptx!`](crate::include_ptx)): that crate's module is loaded on first use (the
    /// newest architecture the device runs) and kept, with its resolved kernels, until this
    /// `Gpu` is dropped. For a crate a program uses all along; [`load_module`](Self::load_module)
    /// loads one for a while and unloads it when dropped.
    ///
    /// # Example
    /// ```ignore
    /// static KERNELS: &[ferrocuda::EmbeddedPtx] = ferrocuda::include_ptx!("my_kernels");
    ///
    /// let dot = gpu.kernel_in(KERNELS, my_kernels::dot::<f32>().unwrap())?;
    /// ```
    pub fn kernel_in<Args>(
        &self,
        ptx: &'static [EmbeddedPtx],
        entry: Entry<Args>,
    ) -> Result<Kernel<'_, Args>> {
        let (module, chosen) = self.cached_module(ptx)?;
        Ok(Kernel {
            function: KernelFunction::load(
                self,
                module,
                chosen.arch,
                entry.info(),
                true,
                chosen.package,
            )?,
            args: PhantomData,
        })
    }

    /// [`kernel_info`](Self::kernel_info) for an entry point of the kernel crate whose PTX is
    /// `ptx`, loaded and kept as [`kernel_in`](Self::kernel_in) does.
    pub fn kernel_info_in(
        &self,
        ptx: &'static [EmbeddedPtx],
        entry: &'static EntryInfo,
    ) -> Result<Kernel<'_, Untyped>> {
        let (module, chosen) = self.cached_module(ptx)?;
        Ok(Kernel {
            function: KernelFunction::load(self, module, chosen.arch, entry, true, chosen.package)?,
            args: PhantomData,
        })
    }
}

/// A kernel crate's PTX loaded on a [`Gpu`] by [`Gpu::load_module`]; unloaded when dropped,
/// once the GPU's stream has finished its kernels (it borrows the `Gpu`, so it cannot outlive
/// the context). Kernels of it launched on another stream must have finished by then, as their
/// launch's `# Safety` says of the memory they use.
pub struct LoadedModule<'g> {
    gpu: &'g Gpu,
    /// Unloaded by the drop, with the context current.
    module: std::mem::ManuallyDrop<Module>,
    ptx: &'static EmbeddedPtx,
}

impl Drop for LoadedModule<'_> {
    /// Makes the context current on the dropping thread and waits for every stream of the
    /// context (a kernel of the module may have been launched on a caller's stream), so that
    /// `cuModuleUnload` runs in its context with none of its kernels left to run.
    fn drop(&mut self) {
        let _current = self.gpu.enter();
        let _ = self.gpu.synchronize_device();
        // SAFETY: dropped once, here; the `LoadedModule` is not used after its drop.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.module) };
    }
}

impl<'g> LoadedModule<'g> {
    /// The kernel behind `entry`, a `#[kernel]` handle of the crate this PTX was built from.
    pub fn kernel<Args>(&self, entry: Entry<Args>) -> Result<Kernel<'_, Args>> {
        Ok(Kernel {
            function: KernelFunction::load(
                self.gpu,
                &self.module,
                self.ptx.arch,
                entry.info(),
                false,
                self.ptx.package,
            )?,
            args: PhantomData,
        })
    }

    /// The architecture that was loaded.
    pub fn arch(&self) -> &'static str {
        self.ptx.arch
    }

    /// The driver's module, for what this API does not cover.
    ///
    /// # Safety
    /// cust's `Module::get_global` copies device bytes into any `DeviceCopy` type: a `bool`,
    /// `char` or `NonZero*` read that way must hold a valid value of its type.
    pub unsafe fn module(&self) -> &Module {
        &self.module
    }
}

impl<'g> KernelFunction<'g> {
    /// `function` of `module`. `kept`: the module lives as long as the `Gpu` (its functions'
    /// answers are cached). `package`: the package whose entry points the module holds.
    fn load(
        gpu: &'g Gpu,
        module: &'g Module,
        arch: &'static str,
        entry: &'static EntryInfo,
        kept: bool,
        package: &'static str,
    ) -> Result<Self> {
        let symbol = entry.symbol;
        if package != entry.package {
            return Err(Error::InvalidArgument {
                what: format!(
                    "kernel `{symbol}` belongs to package `{}`, not `{package}` whose PTX this is: take it with `Gpu::kernel_in` (or `Gpu::load_module`) and that package's PTX",
                    entry.package
                ),
            });
        }
        if !entry.built_for(arch) {
            let props = gpu.props();
            return Err(Error::Unsupported {
                what: format!(
                    "kernel `{symbol}` needs sm_{} or newer ({}); {} is compute capability {}.{} and runs the {arch} PTX",
                    entry.min_arch,
                    if entry.cluster_blocks > 0 {
                        "thread block clusters"
                    } else {
                        "Hopper's bulk copies"
                    },
                    props.name,
                    props.compute_capability.0,
                    props.compute_capability.1
                ),
            });
        }
        let resolve = || -> Result<ResolvedKernel> {
            let _current = gpu.enter()?;
            let function = module.get_function(symbol).map_err(|cause| match cause {
                cust::error::CudaError::NotFound => Error::Unsupported {
                    what: format!(
                        "no kernel `{symbol}` (package `{}`) in the loaded {arch} PTX",
                        entry.package
                    ),
                },
                cause => Error::Driver {
                    call: "cuModuleGetFunction",
                    launch: None,
                    error: DriverError::from_cust(cause),
                },
            })?;
            let attr = |a| {
                function
                    .get_attribute(a)
                    .call("cuFuncGetAttribute")
                    .map(|v| v as u32)
            };
            Ok(ResolvedKernel {
                raw: function.to_raw(),
                attributes: KernelAttributes {
                    registers: attr(FunctionAttribute::NumRegisters)?,
                    static_shared_bytes: attr(FunctionAttribute::SharedMemorySizeBytes)?,
                    local_bytes: attr(FunctionAttribute::LocalSizeBytes)?,
                    max_threads_per_block: attr(FunctionAttribute::MaxThreadsPerBlock)?,
                },
            })
        };
        let resolved = if kept {
            gpu.resolved_kernel(module, symbol, resolve)?
        } else {
            resolve()?
        };
        Ok(Self {
            gpu,
            raw: resolved.raw,
            kept,
            entry,
            attributes: resolved.attributes,
            shared_opt_in: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Opts the function in to `dynamic_shared_bytes` of dynamic shared memory when that is
    /// more than a block may use by default (48 KiB), as `cudaFuncSetAttribute(f,
    /// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)` does in CUDA C++. The attribute
    /// belongs to the `CUfunction`, which every handle of the kernel shares: it is only ever
    /// raised (read, compared and set under one process-wide lock), so a handle asking for less
    /// never takes away what another one opted in to. Past the device's opt-in limit it is
    /// `Unsupported`, naming the kernel; `launch` describes the launch for a driver error.
    fn opt_in_shared(&self, dynamic_shared_bytes: u32, launch: Option<LaunchConfig>) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        static OPT_IN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let props = self.gpu.props();
        let needed = self.attributes.static_shared_bytes as u64 + dynamic_shared_bytes as u64;
        if needed <= props.shared_mem_per_block as u64
            || dynamic_shared_bytes <= self.shared_opt_in.load(Relaxed)
        {
            return Ok(());
        }
        let limit = props
            .shared_mem_per_block_optin
            .max(props.shared_mem_per_block);
        if needed > limit as u64 {
            return Err(Error::Unsupported {
                what: format!(
                    "kernel `{}`: {} B static + {dynamic_shared_bytes} B dynamic shared memory exceeds the {limit} B a block may use on {}",
                    self.symbol(),
                    self.attributes.static_shared_bytes,
                    props.name
                ),
            });
        }
        let described = launch.map(|c| self.describe(c));
        let _serial = OPT_IN.lock().unwrap_or_else(|e| e.into_inner());
        let _current = self.gpu.enter()?;
        let attribute =
            cust::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        let mut current = 0;
        // SAFETY: a live function handle and a writable int.
        check_raw_launch("cuFuncGetAttribute", described.as_ref(), unsafe {
            cust::sys::cuFuncGetAttribute(&mut current, attribute, self.raw)
        })?;
        if (current.max(0) as u32) < dynamic_shared_bytes {
            // SAFETY: a live function handle; the size is within the device's opt-in limit
            // (checked above, so it fits an `i32`), and the driver checks it again.
            check_raw_launch("cuFuncSetAttribute", described.as_ref(), unsafe {
                cust::sys::cuFuncSetAttribute(self.raw, attribute, dynamic_shared_bytes as i32)
            })?;
        }
        self.shared_opt_in.fetch_max(dynamic_shared_bytes, Relaxed);
        Ok(())
    }

    /// Blocks per thread block cluster this kernel is declared with (`#[kernel(cluster = N)]`),
    /// 0 for a kernel launched without clusters.
    pub fn cluster_blocks(&self) -> u32 {
        self.entry.cluster_blocks
    }

    /// `cuOccupancyMaxActiveClusters`: the clusters of this kernel that can be resident on the
    /// whole GPU at once with `block_threads` threads and `dynamic_shared_bytes` per block
    /// (`ferrocuda occupancy` shows it). Refused for a kernel without clusters.
    pub fn max_active_clusters(
        &self,
        block_threads: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<u32> {
        let blocks = self.entry.cluster_blocks;
        if blocks == 0 {
            return Err(Error::InvalidArgument {
                what: format!("kernel `{}` is not launched in clusters", self.symbol()),
            });
        }
        self.opt_in_shared(dynamic_shared_bytes, None)?;
        let _current = self.gpu.enter()?;
        let mut attribute = cuda12::cluster_dimension(blocks);
        let config = cuda12::LaunchConfig {
            grid: [blocks, 1, 1],
            block: [block_threads, 1, 1],
            shared_mem_bytes: dynamic_shared_bytes,
            stream: std::ptr::null_mut(),
            attrs: &mut attribute,
            num_attrs: 1,
        };
        let mut clusters = 0;
        // SAFETY: a live function handle, a valid configuration and out-pointer.
        check_raw("cuOccupancyMaxActiveClusters", unsafe {
            cuda12::occupancy_max_active_clusters(&mut clusters, self.raw, &config)
        })?;
        Ok(clusters.max(0) as u32)
    }

    /// The PTX symbol.
    pub fn symbol(&self) -> &'static str {
        self.entry.symbol
    }

    /// What the kernel's declaration says.
    pub fn entry(&self) -> &'static EntryInfo {
        self.entry
    }

    /// A 1D launch of `grid` blocks of `block` threads with the dynamic shared memory the
    /// kernel declares for that block.
    pub fn config(&self, grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig::linear(grid, block, self.entry.dynamic_shared_bytes(block))
    }

    /// Registers, static shared memory, local memory and block limit.
    pub fn attributes(&self) -> KernelAttributes {
        self.attributes
    }

    /// The address of a `#[no_mangle]` device static (`device_global!`) of the module this
    /// kernel belongs to (the notes' `cudaGetSymbolAddress`), checked against its declared
    /// length: `cuFuncGetModule`, then `cuModuleGetGlobal`. The address is valid while that
    /// module is loaded (for the `Gpu`'s own module and those of [`Gpu::kernel_in`], as long as
    /// the `Gpu`; for a [`LoadedModule`], until it is dropped); launches that use it are
    /// `unsafe` and carry that condition.
    pub fn device_global<T: DeviceCopy>(
        &self,
        global: &DeviceGlobal<T>,
    ) -> Result<DevicePointer<T>> {
        let name = global.symbol;
        let cname = std::ffi::CString::new(name).map_err(|_| Error::InvalidArgument {
            what: format!("symbol `{name}` contains a NUL"),
        })?;
        let _current = self.gpu.enter()?;
        let mut module = std::ptr::null_mut();
        let (mut ptr, mut bytes) = (0, 0);
        // SAFETY: valid out-pointers; the function handle belongs to a loaded module.
        check_raw("cuFuncGetModule", unsafe {
            cust::sys::cuFuncGetModule(&mut module, self.raw)
        })?;
        // SAFETY: as above; `cname` is NUL-terminated.
        let r = unsafe {
            cust::sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, module, cname.as_ptr())
        };
        if r == cust::sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::InvalidArgument {
                what: format!(
                    "no device global `{name}` in the module of `{}`",
                    self.symbol()
                ),
            });
        }
        check_raw("cuModuleGetGlobal", r)?;
        if bytes != global.len * size_of::<T>() {
            return Err(Error::InvalidArgument {
                what: format!(
                    "device global `{name}` has {bytes} bytes; its declaration says {} elements of {} bytes",
                    global.len,
                    size_of::<T>()
                ),
            });
        }
        Ok(DevicePointer::from_raw(ptr))
    }

    /// The GPU this kernel belongs to.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
    pub fn max_active_blocks_per_sm(
        &self,
        block_threads: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<u32> {
        self.opt_in_shared(dynamic_shared_bytes, None)?;
        let ask = || {
            let mut blocks = 0;
            let _current = self.gpu.enter()?;
            // SAFETY: a live function handle and a writable count.
            check_raw("cuOccupancyMaxActiveBlocksPerMultiprocessor", unsafe {
                cust::sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &mut blocks,
                    self.raw,
                    block_threads as i32,
                    dynamic_shared_bytes as usize,
                )
            })?;
            Ok(blocks.max(0) as u32)
        };
        if self.kept {
            self.gpu
                .occupancy(self.raw as usize, block_threads, dynamic_shared_bytes, ask)
        } else {
            ask()
        }
    }

    /// Blocks of `block_threads` threads that can be resident on the whole GPU at once:
    /// [`max_active_blocks_per_sm`](Self::max_active_blocks_per_sm) times the SM count (the
    /// largest grid a cooperative launch takes, and the grid the fast paths size to).
    /// For a cluster kernel: the resident clusters
    /// ([`max_active_clusters`](Self::max_active_clusters)) times their blocks, since clusters
    /// are placed a GPC at a time.
    pub fn resident_blocks(&self, block_threads: u32, dynamic_shared_bytes: u32) -> Result<u32> {
        if self.entry.cluster_blocks > 0 {
            return Ok(
                self.max_active_clusters(block_threads, dynamic_shared_bytes)?
                    * self.entry.cluster_blocks,
            );
        }
        Ok(
            self.max_active_blocks_per_sm(block_threads, dynamic_shared_bytes)?
                * self.gpu.props().sm_count,
        )
    }

    /// `cuOccupancyMaxPotentialBlockSize`: (minimum grid for full occupancy, block size).
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<(u32, u32)> {
        let (mut grid, mut block) = (0, 0);
        let _current = self.gpu.enter()?;
        // SAFETY: a live function handle and writable outputs; no per-block-size callback.
        check_raw("cuOccupancyMaxPotentialBlockSize", unsafe {
            cust::sys::cuOccupancyMaxPotentialBlockSize(
                &mut grid,
                &mut block,
                self.raw,
                None,
                dynamic_shared_bytes as usize,
                0,
            )
        })?;
        Ok((grid.max(0) as u32, block.max(0) as u32))
    }

    /// `cuOccupancyMaxPotentialBlockSize` with, for each block size it tries, the dynamic
    /// shared memory the kernel declares for that block (the runtime API's
    /// `cudaOccupancyMaxPotentialBlockSizeVariableSMem`): for a kernel whose tile grows with
    /// the block, such as the stencils, a fixed figure would suggest for the wrong tile.
    /// Returns (minimum grid for full occupancy, block size).
    pub fn suggested_block_size_declared(&self) -> Result<(u32, u32)> {
        let (mut grid, mut block) = (0, 0);
        let _current = self.gpu.enter()?;
        DECLARED_SHARED.with(|rule| rule.set(Some(self.entry)));
        // SAFETY: a live function handle and writable outputs; the callback reads the rule set
        // just above, on this thread, for the duration of the call.
        let status = unsafe {
            cust::sys::cuOccupancyMaxPotentialBlockSize(
                &mut grid,
                &mut block,
                self.raw,
                Some(declared_dynamic_shared),
                0,
                0,
            )
        };
        DECLARED_SHARED.with(|rule| rule.set(None));
        check_raw("cuOccupancyMaxPotentialBlockSize", status)?;
        Ok((grid.max(0) as u32, block.max(0) as u32))
    }

    /// Whether the kernel synchronises its whole grid: it takes a [`GridBarrier`] parameter
    /// (recorded by `#[kernel]`), so it must run under [`Kernel::launch_cooperative`].
    pub fn is_cooperative(&self) -> bool {
        self.entry.cooperative
    }

    fn describe(&self, config: LaunchConfig) -> KernelLaunch {
        KernelLaunch {
            kernel: self.symbol().to_string(),
            config,
        }
    }

    /// Checks `config` against the device's and this kernel's limits.
    pub fn validate(&self, config: LaunchConfig) -> Result<()> {
        let props = self.gpu.props();
        let fail = |reason: String| {
            Err(Error::InvalidLaunch {
                launch: self.describe(config),
                reason,
            })
        };
        if let Some(reason) = config.architectural_violation() {
            return fail(reason);
        }
        let threads = config.block_threads();
        let declared = self.entry.dynamic_shared_bytes(config.block[0]);
        if config.block[1..] == [1, 1] && config.dynamic_shared_bytes < declared {
            return fail(format!(
                "the kernel declares {declared} B of dynamic shared memory for a block of {threads} threads; the launch gives {} B",
                config.dynamic_shared_bytes
            ));
        }
        let max_threads = props
            .max_threads_per_block
            .min(self.attributes.max_threads_per_block);
        if threads > max_threads as u64 {
            return fail(format!(
                "{threads} threads per block; this kernel allows at most {max_threads} on {}",
                props.name
            ));
        }
        for (axis, (&b, &max)) in ["x", "y", "z"]
            .iter()
            .zip(config.block.iter().zip(&props.max_block_dim))
        {
            if b > max {
                return fail(format!("block {axis} = {b} exceeds the device limit {max}"));
            }
        }
        for (axis, (&g, &max)) in ["x", "y", "z"]
            .iter()
            .zip(config.grid.iter().zip(&props.max_grid_dim))
        {
            if g > max {
                return fail(format!("grid {axis} = {g} exceeds the device limit {max}"));
            }
        }
        let shared =
            self.attributes.static_shared_bytes as u64 + config.dynamic_shared_bytes as u64;
        // Past the default (48 KiB) the launch opts the kernel in, up to the device's limit.
        if shared
            > props
                .shared_mem_per_block_optin
                .max(props.shared_mem_per_block) as u64
        {
            return fail(format!(
                "{} B static + {} B dynamic shared memory exceeds the {} B a block may use on {} (the default is {} B; a kernel opts in to more, up to that limit)",
                self.attributes.static_shared_bytes,
                config.dynamic_shared_bytes,
                props.shared_mem_per_block_optin,
                props.name,
                props.shared_mem_per_block
            ));
        }
        let cluster = self.entry.cluster_blocks;
        if cluster > 0 {
            if !props.cluster_launch {
                return fail(format!(
                    "this kernel runs in thread block clusters of {cluster}, and {} (compute capability {}.{}) has none",
                    props.name, props.compute_capability.0, props.compute_capability.1
                ));
            }
            if !config.grid[0].is_multiple_of(cluster) {
                return fail(format!(
                    "grid x = {} is not a multiple of the kernel's cluster of {cluster} blocks",
                    config.grid[0]
                ));
            }
        }
        Ok(())
    }
}

impl<Args> Kernel<'_, Args> {
    /// Validates `config`, then enqueues the kernel with `args` on the GPU's stream
    /// (asynchronous: errors during execution surface at the next synchronisation).
    ///
    /// # Safety
    /// Every device pointer among `args` must be valid for what the kernel's `# Safety`
    /// section requires (number, order and types of the arguments are checked by the compiler),
    /// until the kernel completes: memory it writes must be held mutably (`&mut DeviceSlice`) by
    /// the caller, and read by nothing else, until then. A [`DeviceBuffer`](crate::DeviceBuffer)
    /// dropped meanwhile is freed in the GPU's stream's order, so a launch on that stream is
    /// safe from it. The library's safe calls on other streams are ordered with this launch
    /// only if the caller says what it uses ([`Gpu::uses_on`](crate::Gpu::uses_on) before it),
    /// or orders them itself (an event).
    pub unsafe fn launch<A: LaunchArgs<Args>>(&self, config: LaunchConfig, args: A) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_on(self.gpu.stream(), config, args) }
    }

    /// [`launch`](Self::launch) on `stream`, a stream of this GPU's context (the caller's own,
    /// ordered with the caller's copies on it).
    ///
    /// # Safety
    /// As [`launch`](Self::launch); `stream` belongs to this GPU's context. A dropped buffer
    /// is freed in the order of the GPU's stream and of the streams the library saw use it,
    /// not of `stream`: the caller must keep every buffer the kernel uses alive until `stream`
    /// has finished it, or declare the launch's uses with
    /// [`Gpu::uses_on`](crate::Gpu::uses_on) right before it (then drops and later safe calls
    /// wait for it).
    pub unsafe fn launch_on<A: LaunchArgs<Args>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        let _current = self.gpu.enter()?;
        self.gpu.check_stream(stream)?;
        // Memory is allocated and freed in the GPU's stream's order: a caller's stream waits
        // for what that stream holds, as the library's own calls do.
        self.gpu.after_own_stream(stream)?;
        // SAFETY: forwarded to the caller; the context is current and the stream checked.
        unsafe { self.launch_prepared(stream, config, args) }
    }

    /// [`launch_on`](Self::launch_on) for the library's own calls, which made the context
    /// current and checked `stream` already (in [`Gpu::ordered`]): one driver call less per
    /// launch (entering the context is not free).
    ///
    /// # Safety
    /// As [`launch_on`](Self::launch_on); the GPU's context is current on this thread and
    /// `stream` belongs to it.
    pub(crate) unsafe fn launch_prepared<A: LaunchArgs<Args>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        self.validate(config)?;
        if self.is_cooperative() {
            return Err(Error::InvalidLaunch {
                launch: self.describe(config),
                reason: "this kernel synchronises its whole grid (it takes a `GridBarrier`): \
                         launch it with `Kernel::launch_cooperative`, which checks that every \
                         block can be resident at once"
                    .into(),
            });
        }
        // SAFETY: forwarded to the caller.
        unsafe { self.enqueue(stream, config, args, false) }
    }

    /// A cooperative launch (`cuLaunchCooperativeKernel`) on the GPU's stream: see
    /// [`launch_cooperative_on`](Self::launch_cooperative_on).
    ///
    /// # Safety
    /// As [`launch_cooperative_on`](Self::launch_cooperative_on).
    pub unsafe fn launch_cooperative<A: LaunchArgs<Args>>(
        &self,
        config: LaunchConfig,
        args: impl FnOnce(GridBarrier) -> A,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_cooperative_on(self.gpu.stream(), config, args) }
    }

    /// A cooperative launch (`cuLaunchCooperativeKernel`) on `stream`, for a kernel that
    /// synchronises its whole grid: `args` receives the launch's [`GridBarrier`] and returns
    /// the argument tuple. Refused, naming the numbers, when the grid has more blocks than can
    /// be resident at once with this block size and dynamic shared memory (the barrier would
    /// never open). The barrier is one of the `Gpu`'s kept ones, held by this call while it
    /// enqueues and declared written by the launch, so a later launch that gets the same
    /// barrier on another stream waits for this one on the GPU (and `stream` waits for the
    /// GPU's own stream, as [`launch_on`](Self::launch_on) does).
    ///
    /// # Safety
    /// As [`launch_on`](Self::launch_on); every thread of the grid reaches each `grid.sync()`;
    /// the barrier `args` receives goes into this launch's arguments and nowhere else (kept and
    /// passed to another launch, it would share a counter with it).
    pub unsafe fn launch_cooperative_on<A: LaunchArgs<Args>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: impl FnOnce(GridBarrier) -> A,
    ) -> Result<()> {
        self.validate(config)?;
        if self.entry.cluster_blocks > 0 {
            return Err(Error::InvalidLaunch {
                launch: self.describe(config),
                reason: "a cluster kernel cannot also be a cooperative launch here".into(),
            });
        }
        let threads = config.block_threads() as u32;
        let blocks = config.grid.iter().map(|&g| g as u64).product::<u64>();
        let per_sm = self.max_active_blocks_per_sm(threads, config.dynamic_shared_bytes)?;
        let sms = self.gpu.props().sm_count;
        let resident = per_sm as u64 * sms as u64;
        if blocks > resident {
            return Err(Error::InvalidLaunch {
                launch: self.describe(config),
                reason: format!(
                    "a cooperative launch needs all {blocks} blocks resident at once, but only \
                     {resident} fit on {} ({per_sm} per SM x {sms} SMs with {threads} threads \
                     and {} B of dynamic shared memory per block)",
                    self.gpu.props().name,
                    config.dynamic_shared_bytes
                ),
            });
        }
        self.gpu.with_grid_barrier(|barrier| {
            let address = barrier.as_device_ptr().as_raw();
            let uses = [Access::write(barrier)];
            self.gpu.ordered(stream, &uses, || {
                // SAFETY: a counter of the GPU's own, zeroed when made and left at a multiple
                // of 0x8000_0000 by every completed barrier; held by this call alone while it
                // enqueues, and ordered after the barrier's previous launch on any stream by
                // the record of its uses, so no other kernel uses it meanwhile; the grid is
                // co-resident (checked above, and the driver's cooperative launch refuses it
                // otherwise).
                let args = args(unsafe { GridBarrier::from_raw(address) });
                // SAFETY: forwarded to the caller; `ordered` made the context current and
                // checked the stream.
                unsafe { self.enqueue(stream, config, args, true) }
            })
        })
    }

    /// Enqueues a validated launch on `stream` with `cuLaunchKernel`, or with
    /// `cuLaunchCooperativeKernel` when `cooperative`.
    ///
    /// # Safety
    /// As [`launch`](Self::launch); `config` was validated; the context is current and `stream`
    /// belongs to it.
    unsafe fn enqueue<A: LaunchArgs<Args>>(
        &self,
        stream: &Stream,
        config: LaunchConfig,
        args: A,
        cooperative: bool,
    ) -> Result<()> {
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        self.opt_in_shared(config.dynamic_shared_bytes, Some(config))?;
        let cluster = self.entry.cluster_blocks;
        let (call, status) = args.with_addresses(|addresses| {
            let params = addresses.as_ptr() as *mut *mut c_void;
            let shared = config.dynamic_shared_bytes;
            // SAFETY: the argument types are the kernel's parameter types (`LaunchArgs`); the
            // pointers' validity is forwarded to the caller; the configuration was validated;
            // the driver only reads the argument array.
            unsafe {
                if cluster > 0 {
                    let mut attribute = cuda12::cluster_dimension(cluster);
                    let launch = cuda12::LaunchConfig {
                        grid: [gx, gy, gz],
                        block: [bx, by, bz],
                        shared_mem_bytes: shared,
                        stream: stream.raw(),
                        attrs: &mut attribute,
                        num_attrs: 1,
                    };
                    let status = cuda12::launch_kernel_ex(&launch, self.raw, params);
                    ("cuLaunchKernelEx", status)
                } else if cooperative {
                    let status = cust::sys::cuLaunchCooperativeKernel(
                        self.raw,
                        gx,
                        gy,
                        gz,
                        bx,
                        by,
                        bz,
                        shared,
                        stream.raw(),
                        params,
                    );
                    ("cuLaunchCooperativeKernel", status)
                } else {
                    let status = cust::sys::cuLaunchKernel(
                        self.raw,
                        gx,
                        gy,
                        gz,
                        bx,
                        by,
                        bz,
                        shared,
                        stream.raw(),
                        params,
                        std::ptr::null_mut(),
                    );
                    ("cuLaunchKernel", status)
                }
            }
        });
        check_raw_launch(call, Some(&self.describe(config)), status)
    }

    /// [`launch`](Self::launch), then waits for the kernel and reports an execution error
    /// against this kernel and configuration.
    ///
    /// # Safety
    /// As [`launch`](Self::launch).
    pub unsafe fn launch_and_wait<A: LaunchArgs<Args>>(
        &self,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch(config, args)? };
        self.gpu
            .wait_for_stream(self.gpu.stream(), Some(&self.describe(config)))
    }
}
