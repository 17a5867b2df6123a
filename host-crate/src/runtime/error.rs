//! Errors of the host library. Every CUDA failure names the call that failed and, where there
//! is one, the kernel and its launch configuration.
use std::fmt;

use crate::runtime::config::LaunchConfig;

/// The result type of the host library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which kernel launch an error belongs to: its PTX symbol and configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    /// The PTX entry point.
    pub kernel: String,
    /// Grid, block and dynamic shared memory.
    pub config: LaunchConfig,
}

impl fmt::Display for KernelLaunch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}` {}", self.kernel, self.config)
    }
}

/// Everything the host library can fail with. Non-exhaustive: a later version may add a
/// variant, so a `match` outside this crate needs a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda.so.1` cannot be loaded: no NVIDIA driver on this machine.
    #[error(transparent)]
    NoDriver(#[from] crate::runtime::driver::DriverMissing),
    /// The CUDA driver is there but no device is.
    #[error("no CUDA device: {reason}")]
    NoDevice {
        /// What the driver said.
        reason: String,
    },
    /// `--device` names a device that does not exist.
    #[error(
        "device {ordinal} does not exist: this machine has {count} CUDA device(s), numbered from 0"
    )]
    DeviceNotFound {
        /// The ordinal asked for.
        ordinal: u32,
        /// Devices present.
        count: u32,
    },
    /// The device's warp size differs from the one the kernels were written for.
    #[error(
        "device `{device}` has a warp size of {found}, but the kernels are built for {expected}-lane warps"
    )]
    WarpSizeMismatch {
        /// Device name.
        device: String,
        /// The device's warp size.
        found: u32,
        /// [`WARP_SIZE`](ferrocuda_kernels::config::WARP_SIZE).
        expected: u32,
    },
    /// No embedded PTX is old enough for the device.
    #[error("device `{device}` is compute capability {}.{}; the embedded PTX needs at least {}", .compute_capability.0, .compute_capability.1, .oldest)]
    NoPtxForDevice {
        /// Device name.
        device: String,
        /// The device's compute capability.
        compute_capability: (u32, u32),
        /// The oldest architecture embedded.
        oldest: &'static str,
    },
    /// The driver could not load the PTX (commonly: a driver older than the PTX ISA version).
    #[error("loading the {arch} PTX failed ({}); the driver supports CUDA {}.{}: {hint}", cuda_message(.cause), .driver_version / 1000, .driver_version % 1000 / 10)]
    ModuleLoad {
        /// The architecture of the PTX that failed.
        arch: &'static str,
        /// `cuDriverGetVersion`.
        driver_version: i32,
        /// What to do about it.
        hint: &'static str,
        /// The driver's error.
        cause: cust::error::CudaError,
    },
    /// A launch configuration the device or kernel cannot run, caught before launching.
    #[error("invalid launch of {launch}: {reason}")]
    InvalidLaunch {
        /// The launch.
        launch: KernelLaunch,
        /// Which limit it breaks.
        reason: String,
    },
    /// An argument outside what a kernel family supports.
    #[error("{what}")]
    InvalidArgument {
        /// What is wrong, naming the kernel or variant.
        what: String,
    },
    /// A device allocation larger than the free memory.
    #[error(
        "cannot allocate {bytes} bytes ({what}) on the device: {free} of {total} bytes are free"
    )]
    OutOfMemory {
        /// What the allocation was for.
        what: String,
        /// Bytes asked for.
        bytes: u128,
        /// Free device memory.
        free: usize,
        /// Total device memory.
        total: usize,
    },
    /// A driver call made directly (not through a `cust` wrapper) failed.
    #[error("{call} failed{}: {} ({status:?})", .launch.as_ref().map(|l| format!(" for {l}")).unwrap_or_default(), status_text(*.status))]
    Driver {
        /// The driver call.
        call: &'static str,
        /// The launch it belongs to, if any.
        launch: Option<KernelLaunch>,
        /// What the driver returned.
        status: cust::sys::CUresult,
    },
    /// NCCL cannot be loaded: the multi-GPU transport is missing on this machine.
    #[error(transparent)]
    NoNccl(#[from] NcclMissing),
    /// An NCCL call failed, or a communicator reported an asynchronous error.
    #[error("{call} failed on rank {rank} of {ranks}: {status} ({message})")]
    Nccl {
        /// The NCCL call, e.g. `ncclSend`, or `ncclCommGetAsyncError`.
        call: &'static str,
        /// The rank whose communicator failed.
        rank: usize,
        /// How many ranks the communicator has.
        ranks: usize,
        /// The `ncclResult_t` name.
        status: &'static str,
        /// NCCL's description (`ncclGetLastError`, else `ncclGetErrorString`).
        message: String,
    },
    /// A multi-GPU operation did not finish in its time limit: a peer died, hangs or never
    /// came. The communicator was aborted (never a hang).
    #[error(
        "{what} did not finish within {} s on rank {rank} of {ranks}: a peer died, hangs or never \
         joined; the communicator was aborted (raise the limit with \
         `FERROCUDA_NCCL_TIMEOUT` or `Team`'s timeout)",
        .timeout.as_secs_f64()
    )]
    Timeout {
        /// What was waited for.
        what: String,
        /// The rank that waited.
        rank: usize,
        /// How many ranks the communicator has.
        ranks: usize,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// A CUDA call failed.
    #[error("{call} failed{}: {}", .launch.as_ref().map(|l| format!(" for {l}")).unwrap_or_default(), cuda_message(.cause))]
    Cuda {
        /// The driver call, e.g. `cuLaunchKernel`.
        call: &'static str,
        /// The launch it belongs to, if any.
        launch: Option<KernelLaunch>,
        /// The driver's error.
        cause: cust::error::CudaError,
    },
}

/// The driver's description of `e` (cust quotes it; the quotes go).
fn cuda_message(e: &cust::error::CudaError) -> String {
    e.to_string().trim_matches('"').to_string()
}

/// The driver's description of a status code (`cuGetErrorString`; the code's name when the
/// driver has none to give).
fn status_text(status: cust::sys::CUresult) -> String {
    let mut text = std::ptr::null();
    // SAFETY: `cuGetErrorString` writes a pointer to a static string, or fails.
    let got = unsafe { crate::runtime::driver::cuGetErrorString(status, &mut text) };
    if got == cust::sys::CUresult::CUDA_SUCCESS && !text.is_null() {
        // SAFETY: non-null, NUL-terminated, static (the driver's table).
        unsafe { std::ffi::CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("{status:?}")
    }
}

/// Checks the result of a raw driver call made through `cust::sys`.
pub(crate) fn check_raw(call: &'static str, result: cust::sys::CUresult) -> Result<()> {
    check_raw_launch(call, None, result)
}

/// [`check_raw`] for a call that served a kernel launch.
pub(crate) fn check_raw_launch(
    call: &'static str,
    launch: Option<&KernelLaunch>,
    result: cust::sys::CUresult,
) -> Result<()> {
    if result == cust::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            call,
            launch: launch.cloned(),
            status: result,
        })
    }
}

/// Attaches the failing call (and launch) to a CUDA error: `cust_result.call("cuMemAlloc")?`
/// gives an [`Error::Cuda`] that names `cuMemAlloc`.
pub trait CudaContext<T> {
    /// Names the driver call.
    fn call(self, call: &'static str) -> Result<T>;
    /// Names the driver call and the launch it served.
    fn launch(self, call: &'static str, launch: &KernelLaunch) -> Result<T>;
}

impl<T> CudaContext<T> for cust::error::CudaResult<T> {
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|cause| Error::Cuda {
            call,
            launch: None,
            cause,
        })
    }
    fn launch(self, call: &'static str, launch: &KernelLaunch) -> Result<T> {
        self.map_err(|cause| Error::Cuda {
            call,
            launch: Some(launch.clone()),
            cause,
        })
    }
}

/// NCCL could not be loaded (or lacks an entry point ferrocuda calls): the multi-GPU layer
/// (`multi::nccl`) opens it at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NcclMissing {
    /// The library that was tried.
    pub library: String,
    /// What `dlopen` (or `dlsym`) said.
    pub reason: String,
}

impl fmt::Display for NcclMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no NCCL: {} cannot be loaded ({}); install NCCL (`apt install libnccl2`, or `pip \
             install nvidia-nccl-cu13` and name its lib/libnccl.so.2 in FERROCUDA_LIBNCCL) to \
             run on several GPUs",
            self.library, self.reason
        )
    }
}

impl std::error::Error for NcclMissing {}
