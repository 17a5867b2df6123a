//! Device `printf` (the exercises of 沐曦 MXMACA 教材第5章 print `threadIdx` and `blockIdx` from a kernel).
//!
//! CUDA's device `printf` is the PTX ABI function `vprintf(format, args)`. The kernel writes
//! the format's address and the packed arguments into a buffer; the driver formats them on the
//! host and prints to the process's standard output when the host next synchronises with the
//! GPU (a stream or context synchronisation, a blocking copy). The buffer is 1 MiB by default
//! (`cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE)`); what does not fit is lost. The order of lines
//! from different warps is not defined.
//!
//! [`printf!`](crate::printf) and [`println!`](crate::println) check the arguments against the
//! C conversions at compile time (see the macro for the table).

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The PTX ABI's `vprintf`: `format` a NUL-terminated string in global memory, `args` the
    /// arguments packed as a `#[repr(C)]` struct. Returns the number of arguments, or a
    /// negative value on error.
    pub fn vprintf(format: *const u8, args: *const u8) -> i32;
}

#[cfg(not(target_arch = "nvptx64"))]
pub use crate::cpu::print::vprintf;
