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
    #[error("loading the {arch} PTX failed: {cause}; the driver supports CUDA {}.{}: {hint}", .driver_version / 1000, .driver_version % 1000 / 10)]
    ModuleLoad {
        /// The architecture of the PTX that failed.
        arch: &'static str,
        /// `cuDriverGetVersion`.
        driver_version: i32,
        /// What to do about it.
        hint: &'static str,
        /// The driver's error.
        cause: DriverError,
    },
    /// A launch configuration the device or kernel cannot run, caught before launching.
    #[error("invalid launch of {launch}: {reason}")]
    InvalidLaunch {
        /// The launch.
        launch: KernelLaunch,
        /// Which limit it breaks.
        reason: String,
    },
    /// Two lengths that must agree do not: a copy's source and destination, a kernel's input
    /// and output, a result buffer too short for what is written into it.
    #[error("{what}")]
    LengthMismatch {
        /// The call and the two lengths, in one line.
        what: String,
        /// The length the call needed.
        expected: usize,
        /// The length it was given.
        found: usize,
    },
    /// A buffer or stream of another device (or another context) was given to this `Gpu`.
    #[error("{what}")]
    ForeignDevice {
        /// The call, the devices and what to do, in one line.
        what: String,
        /// The ordinal of the `Gpu` called.
        expected: u32,
        /// The ordinal the memory belongs to; `None` when it is not known (a stream of another
        /// context).
        found: Option<u32>,
    },
    /// What was asked for has no kernel, or the device cannot run it: an element type a family
    /// lacks, a block size or radius outside its instances, a kernel that needs a newer
    /// architecture, an operation only some types have.
    #[error("{what}")]
    Unsupported {
        /// What is missing and for what, naming the kernel or family.
        what: String,
    },
    /// Any other argument outside what a call accepts (an empty input whose result is
    /// undefined, overlapping input and output, a bad rank count, a malformed setting).
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
    /// A CUDA driver call failed: the call, the launch it served if any, and the driver's
    /// status.
    #[error("{call} failed{}: {error}", .launch.as_ref().map(|l| format!(" for {l}")).unwrap_or_default())]
    Driver {
        /// The driver call, e.g. `cuLaunchKernel`.
        call: &'static str,
        /// The launch it belongs to, if any.
        launch: Option<KernelLaunch>,
        /// What the driver returned.
        error: DriverError,
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
}

/// A status the CUDA driver returned (`CUresult`), other than success: its number, its name
/// (`CUDA_ERROR_OUT_OF_MEMORY`) and the driver's description of it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DriverError {
    status: cust::sys::CUresult,
}

impl DriverError {
    /// The error of a raw driver status.
    pub(crate) fn from_status(status: cust::sys::CUresult) -> Self {
        Self { status }
    }

    /// The error of a failed `cust` call: the status of the same number (cust numbers its
    /// errors as the driver does), or `CUDA_ERROR_UNKNOWN` for cust's own two (an allocation
    /// it refused, OptiX).
    pub(crate) fn from_cust(error: cust::error::CudaError) -> Self {
        Self::from_code(error as u32).unwrap_or(Self {
            status: cust::sys::CUresult::CUDA_ERROR_UNKNOWN,
        })
    }

    /// The error numbered `code` (`cudaError_enum`, e.g. 218 for `CUDA_ERROR_INVALID_PTX`), if
    /// the driver API has such a status other than success; for a program's own tests, or a
    /// status read from another library.
    #[must_use]
    pub fn from_code(code: u32) -> Option<Self> {
        crate::runtime::driver::status::status_of(code)
            .filter(|s| *s != cust::sys::CUresult::CUDA_SUCCESS)
            .map(|status| Self { status })
    }

    /// The status's number (`cudaError_enum`), e.g. 2 for out of memory.
    #[must_use]
    pub fn code(self) -> u32 {
        self.status as i32 as u32
    }

    /// The status's name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`.
    #[must_use]
    pub fn name(self) -> String {
        format!("{:?}", self.status)
    }

    /// The driver's description of the status (`cuGetErrorString`; its name when the driver
    /// has none to give).
    #[must_use]
    pub fn description(self) -> String {
        let mut text = std::ptr::null();
        // SAFETY: `cuGetErrorString` writes a pointer to a static string, or fails.
        let got = unsafe { crate::runtime::driver::cuGetErrorString(self.status, &mut text) };
        if got == cust::sys::CUresult::CUDA_SUCCESS && !text.is_null() {
            // SAFETY: non-null, NUL-terminated, static (the driver's table).
            unsafe { std::ffi::CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        } else {
            self.name()
        }
    }

    /// Whether the device ran out of memory (`CUDA_ERROR_OUT_OF_MEMORY`).
    #[must_use]
    pub fn is_out_of_memory(self) -> bool {
        self.status == cust::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
    }

    /// Whether a kernel faulted and the context is lost (an illegal address or instruction, a
    /// misaligned access, a trap, a failed or timed-out launch, an uncorrectable ECC error):
    /// every later call on the context fails.
    #[must_use]
    pub fn is_sticky(self) -> bool {
        use cust::sys::CUresult as S;
        matches!(
            self.status,
            S::CUDA_ERROR_ILLEGAL_ADDRESS
                | S::CUDA_ERROR_ILLEGAL_INSTRUCTION
                | S::CUDA_ERROR_MISALIGNED_ADDRESS
                | S::CUDA_ERROR_INVALID_ADDRESS_SPACE
                | S::CUDA_ERROR_INVALID_PC
                | S::CUDA_ERROR_HARDWARE_STACK_ERROR
                | S::CUDA_ERROR_ASSERT
                | S::CUDA_ERROR_LAUNCH_FAILED
                | S::CUDA_ERROR_LAUNCH_TIMEOUT
                | S::CUDA_ERROR_ECC_UNCORRECTABLE
        )
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description(), self.name())
    }
}

impl fmt::Debug for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DriverError({}, {})", self.code(), self.name())
    }
}

impl std::error::Error for DriverError {}

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
            error: DriverError::from_status(result),
        })
    }
}

/// Attaches the failing call (and launch) to an error of a `cust` call:
/// `cust_result.call("cuModuleLoadData")?` gives an [`Error::Driver`] that names it.
pub(crate) trait CudaContext<T> {
    /// Names the driver call.
    fn call(self, call: &'static str) -> Result<T>;
}

impl<T> CudaContext<T> for cust::error::CudaResult<T> {
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|e| Error::Driver {
            call,
            launch: None,
            error: DriverError::from_cust(e),
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
