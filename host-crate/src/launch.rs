//! Launching kernels: a configuration, its validation against the device and the kernel, and
//! the launch itself. Every error names the kernel and the configuration.
use std::ffi::c_void;
use std::fmt;

use cust::function::{BlockSize, Function, FunctionAttribute, GridSize};
use cust::memory::DevicePointer;

use crate::error::{CudaContext, Error, KernelLaunch, Result};
use crate::gpu::Gpu;

/// Threads per block on every compute capability from 7.0.
pub const ARCH_MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Block dimensions on every compute capability from 7.0.
pub const ARCH_MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Grid dimensions on every compute capability from 7.0.
pub const ARCH_MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
/// The largest shared memory any supported GPU gives one block (227 KiB on sm_90 after
/// opting in).
pub const ARCH_MAX_SHARED_BYTES_PER_BLOCK: u32 = 227 * 1024;

/// Grid, block and dynamic shared memory of one launch (`<<<grid, block, shared>>>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1D launch.
    pub const fn linear(grid: u32, block: u32, dynamic_shared_bytes: u32) -> Self {
        Self {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dynamic_shared_bytes,
        }
    }

    /// One thread per element: `ceil(n / block)` blocks of `block` threads. `None` when that
    /// grid does not fit in `u32` or `block` is 0.
    pub fn per_element(n: usize, block: u32, dynamic_shared_bytes: u32) -> Option<Self> {
        let blocks = n.checked_add(block as usize)?.checked_sub(1)? / block.max(1) as usize;
        (block > 0).then_some(())?;
        Some(Self::linear(
            u32::try_from(blocks).ok()?,
            block,
            dynamic_shared_bytes,
        ))
    }

    /// Why this configuration cannot run on any GPU ferrocuda supports (compute capability 7.0
    /// and newer share these limits), or `None`. Checked without a device, so that the CLI
    /// rejects impossible launches even on a machine with no GPU.
    pub fn architectural_violation(&self) -> Option<String> {
        let threads = self.block_threads();
        if threads == 0 || self.grid_blocks() == 0 {
            return Some("grid and block dimensions must all be at least 1".into());
        }
        if threads > ARCH_MAX_THREADS_PER_BLOCK as u64 {
            return Some(format!(
                "{threads} threads per block; CUDA allows at most {ARCH_MAX_THREADS_PER_BLOCK}"
            ));
        }
        for (axis, (&b, &max)) in ["x", "y", "z"]
            .iter()
            .zip(self.block.iter().zip(&ARCH_MAX_BLOCK_DIM))
        {
            if b > max {
                return Some(format!("block {axis} = {b}; CUDA allows at most {max}"));
            }
        }
        for (axis, (&g, &max)) in ["x", "y", "z"]
            .iter()
            .zip(self.grid.iter().zip(&ARCH_MAX_GRID_DIM))
        {
            if g > max {
                return Some(format!("grid {axis} = {g}; CUDA allows at most {max}"));
            }
        }
        if self.dynamic_shared_bytes > ARCH_MAX_SHARED_BYTES_PER_BLOCK {
            return Some(format!(
                "{} B of dynamic shared memory; no supported GPU gives a block more than {ARCH_MAX_SHARED_BYTES_PER_BLOCK} B",
                self.dynamic_shared_bytes
            ));
        }
        None
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.iter().map(|&d| d as u64).product()
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }
}

impl fmt::Display for LaunchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims = |d: [u32; 3]| match d {
            [x, 1, 1] => x.to_string(),
            [x, y, 1] => format!("({x}, {y})"),
            [x, y, z] => format!("({x}, {y}, {z})"),
        };
        write!(
            f,
            "<<<grid {}, block {}, {} B dynamic shared>>>",
            dims(self.grid),
            dims(self.block),
            self.dynamic_shared_bytes
        )
    }
}

/// What the driver reports about a compiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: u32,
    /// Local memory per thread, bytes (spills and stack; 0 for every ferrocuda kernel).
    pub local_bytes: u32,
    /// The largest block this kernel can be launched with on this device.
    pub max_threads_per_block: u32,
}

/// A kernel of the loaded module.
pub struct Kernel<'g> {
    gpu: &'g Gpu,
    function: Function<'g>,
    symbol: String,
    attributes: KernelAttributes,
}

/// A value that may be passed to a kernel by value: what the kernels' `extern "ptx-kernel"`
/// signatures accept.
pub trait KernelParam: Copy {}
impl KernelParam for u32 {}
impl KernelParam for i32 {}
impl KernelParam for u64 {}
impl KernelParam for i64 {}
impl KernelParam for usize {}
impl KernelParam for f32 {}
impl KernelParam for f64 {}
impl<T: cust::memory::DeviceCopy> KernelParam for DevicePointer<T> {}
impl<const N: usize> KernelParam for [f32; N] {}
impl<const N: usize> KernelParam for [f64; N] {}

/// The address of one kernel argument, as `cuLaunchKernel` wants it.
pub fn param<T: KernelParam>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// `kernel_args![a, b, c]`: the argument array for [`Kernel::launch`]. The arguments must
/// live until the launch call returns (temporaries of the same statement do).
#[macro_export]
macro_rules! kernel_args {
    ($($arg:expr),* $(,)?) => { &[$($crate::launch::param(&$arg)),*] };
}

impl<'g> Kernel<'g> {
    pub(crate) fn new(gpu: &'g Gpu, symbol: &str) -> Result<Self> {
        let function = gpu
            .module()
            .get_function(symbol)
            .map_err(|cause| match cause {
                cust::error::CudaError::NotFound => Error::InvalidArgument {
                    what: format!("no kernel `{symbol}` in the loaded {} PTX", gpu.ptx_arch()),
                },
                cause => Error::Cuda {
                    call: "cuModuleGetFunction",
                    launch: None,
                    cause,
                },
            })?;
        let attr = |a| {
            function
                .get_attribute(a)
                .call("cuFuncGetAttribute")
                .map(|v| v as u32)
        };
        let attributes = KernelAttributes {
            registers: attr(FunctionAttribute::NumRegisters)?,
            static_shared_bytes: attr(FunctionAttribute::SharedMemorySizeBytes)?,
            local_bytes: attr(FunctionAttribute::LocalSizeBytes)?,
            max_threads_per_block: attr(FunctionAttribute::MaxThreadsPerBlock)?,
        };
        Ok(Self {
            gpu,
            function,
            symbol: symbol.into(),
            attributes,
        })
    }

    /// The PTX symbol.
    pub fn symbol(&self) -> &str {
        &self.symbol
    }

    /// Registers, static shared memory, local memory and block limit.
    pub fn attributes(&self) -> KernelAttributes {
        self.attributes
    }

    /// The driver's handle.
    pub(crate) fn raw_function(&self) -> cust::sys::CUfunction {
        self.function.to_raw()
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
        self.function
            .max_active_blocks_per_multiprocessor(
                BlockSize::x(block_threads),
                dynamic_shared_bytes as usize,
            )
            .call("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    }

    /// `cuOccupancyMaxPotentialBlockSize`: (minimum grid for full occupancy, block size).
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<(u32, u32)> {
        self.function
            .suggested_launch_configuration(dynamic_shared_bytes as usize, BlockSize::x(0))
            .call("cuOccupancyMaxPotentialBlockSize")
    }

    fn describe(&self, config: LaunchConfig) -> KernelLaunch {
        KernelLaunch {
            kernel: self.symbol.clone(),
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
        if shared > props.shared_mem_per_block as u64 {
            return fail(format!(
                "{} B static + {} B dynamic shared memory exceeds the {} B a block may use",
                self.attributes.static_shared_bytes,
                config.dynamic_shared_bytes,
                props.shared_mem_per_block
            ));
        }
        Ok(())
    }

    /// Validates `config`, then enqueues the kernel on the GPU's stream (asynchronous: errors
    /// during execution surface at the next synchronisation).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and type, and every device
    /// pointer among them must be valid for what the kernel's `# Safety` section requires.
    pub unsafe fn launch(&self, config: LaunchConfig, args: &[*mut c_void]) -> Result<()> {
        self.validate(config)?;
        self.gpu.make_current()?;
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        // SAFETY: forwarded to the caller; the configuration was validated.
        unsafe {
            self.gpu.stream().launch(
                &self.function,
                GridSize::xyz(gx, gy, gz),
                BlockSize::xyz(bx, by, bz),
                config.dynamic_shared_bytes,
                args,
            )
        }
        .launch("cuLaunchKernel", &self.describe(config))
    }

    /// [`launch`](Self::launch), then waits for the kernel and reports an execution error
    /// against this kernel and configuration.
    ///
    /// # Safety
    /// As [`launch`](Self::launch).
    pub unsafe fn launch_and_wait(&self, config: LaunchConfig, args: &[*mut c_void]) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch(config, args)? };
        self.gpu
            .stream()
            .synchronize()
            .launch("cuStreamSynchronize", &self.describe(config))
    }
}
