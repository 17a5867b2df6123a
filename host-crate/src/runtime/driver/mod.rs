//! The CUDA driver, loaded when first used instead of linked: `libcuda.so.1` is opened with
//! `dlopen` on the first driver call, so a `ferrocuda` program starts (and its subcommands that
//! need no GPU work) on a machine without the NVIDIA driver, and fails there with one clear
//! [`DriverMissing`] instead of a loader error.
//!
//! How: `cust` declares the driver API as `extern "C"` functions (in `cust_raw`) and its build
//! script links `-lcuda`. This module *defines* every one of those functions (`api.rs`, one
//! line each), as a trampoline that resolves the real entry point with `dlsym` once and jumps
//! to it. The program's own definitions satisfy every `cu*` reference, so the linker's
//! `--as-needed` drops `libcuda` from the binary's needed libraries; the `libcuda.so` it is
//! given (`host-crate/link/lib64/libcuda.so`, added to the search path by `build.rs`) is an empty
//! linker script. This is what cudarc's `dynamic-loading` does, under cust's API.
//!
//! The `cu*` symbols are hidden (see `forward!`): they satisfy `cust` inside the program that
//! links ferrocuda and are never exported from it, and the package's `links` key keeps a second
//! copy of ferrocuda out of the same program.
use std::ffi::{CStr, c_char, c_int, c_uchar, c_uint, c_ulonglong, c_ushort, c_void};
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

#[allow(clippy::wildcard_imports)]
use cust::sys::*;

pub mod cpu;
pub(crate) mod cuda12;
pub(crate) mod launch;
pub(crate) mod status;

/// The library the NVIDIA driver installs; the unversioned `libcuda.so` is a development link.
pub const DRIVER_LIBRARY: &str = "libcuda.so.1";

/// Names another file to load instead of [`DRIVER_LIBRARY`] (a driver outside the loader's
/// path, or a path that does not exist, to try the no-driver behaviour on a GPU machine).
pub const DRIVER_LIBRARY_ENV: &str = "FERROCUDA_LIBCUDA";

/// `libcuda.so.1` could not be opened: there is no NVIDIA driver on this machine (or the loader
/// cannot find it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverMissing {
    /// The library that was tried.
    pub library: String,
    /// What `dlerror` said.
    pub reason: String,
}

impl fmt::Display for DriverMissing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no NVIDIA driver: {} cannot be loaded ({}); install the NVIDIA driver, or run \
             this on a machine with an NVIDIA GPU",
            self.library, self.reason
        )
    }
}

impl std::error::Error for DriverMissing {}

/// The `dlopen` handle, kept for the life of the process (never closed: entry points resolved
/// from it stay valid).
struct Handle(*mut c_void);

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

static DRIVER: OnceLock<Result<Handle, DriverMissing>> = OnceLock::new();

/// What `dlerror` says about the last `dlopen`/`dlsym` failure (also NCCL's loader's).
pub(crate) fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by libc.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "unknown dlopen error".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }
}

fn handle() -> Result<&'static Handle, &'static DriverMissing> {
    DRIVER
        .get_or_init(|| {
            let library = std::env::var(DRIVER_LIBRARY_ENV)
                .ok()
                .filter(|path| !path.is_empty())
                .unwrap_or_else(|| DRIVER_LIBRARY.to_owned());
            let Ok(name) = std::ffi::CString::new(library.clone()) else {
                return Err(DriverMissing {
                    library,
                    reason: "the name holds a NUL byte".to_owned(),
                });
            };
            // SAFETY: a valid C string; RTLD_LOCAL keeps the driver's symbols out of the global
            // scope, where they would collide with the trampolines below.
            let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if handle.is_null() {
                Err(DriverMissing {
                    library,
                    reason: dl_error(),
                })
            } else {
                Ok(Handle(handle))
            }
        })
        .as_ref()
}

/// Opens the driver library if it is not open yet. Every GPU path calls this first (through
/// `Gpu::new`), so a machine without a driver gets this error rather than a CUDA status.
pub fn load() -> Result<(), DriverMissing> {
    if cpu::selected() {
        cpu::announce();
        return Ok(());
    }
    handle().map(|_| ()).map_err(Clone::clone)?;
    cpu::nvidia_chosen();
    Ok(())
}

/// One trampoline's cached entry point: null until resolved.
struct Slot(AtomicPtr<c_void>);

impl Slot {
    const fn new() -> Self {
        Self(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The driver's `name` (NUL-terminated), resolved once; `Err` with the status to return
    /// when there is no driver or it lacks the function.
    fn resolve(&self, name: &CStr) -> Result<*mut c_void, CUresult> {
        let cached = self.0.load(Ordering::Acquire);
        if !cached.is_null() {
            return Ok(cached);
        }
        if cpu::selected() {
            let found = cpu::resolve(name).ok_or(CUresult::CUDA_ERROR_NOT_SUPPORTED)?;
            self.0.store(found, Ordering::Release);
            return Ok(found);
        }
        let handle = handle().map_err(|_| CUresult::CUDA_ERROR_STUB_LIBRARY)?;
        cpu::nvidia_chosen();
        // SAFETY: a live handle and a valid C string.
        let found = unsafe { libc::dlsym(handle.0, name.as_ptr()) };
        if found.is_null() {
            return Err(CUresult::CUDA_ERROR_NOT_FOUND);
        }
        self.0.store(found, Ordering::Release);
        Ok(found)
    }
}

/// Defines each listed driver function as a trampoline to the same symbol in `libcuda.so.1`.
/// When that cannot be resolved, the trampoline returns the status saying why, or, with
/// `else FALLBACK`, what `FALLBACK(args...)` returns.
///
/// Each definition is a Rust function with a mangled name, and the C symbol `cust` calls
/// (`cuInit`) is a one-instruction jump to it, declared by [`hidden_symbol!`] with hidden
/// visibility: the linker resolves `cust`'s calls to it, but no program or shared library built
/// on ferrocuda exports it, so it can never interpose on the real driver that another library in
/// the same process loads (`tests/tests/symbols.rs` checks a `cdylib`).
macro_rules! forward {
    ($( fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $(else $fallback:ident)?; )*) => { $(
        hidden_symbol!($name);
        #[allow(non_snake_case, clippy::missing_safety_doc)]
        pub(crate) unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            static SLOT: Slot = Slot::new();
            let name = const {
                match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(name) => name,
                    Err(_) => panic!("a driver function name holds a NUL"),
                }
            };
            match SLOT.resolve(name) {
                Ok(entry) => {
                    // SAFETY: `entry` is the driver's function of this name, whose C signature
                    // is the one declared here (both come from `cuda.h`), its `CUresult` read as
                    // the C `int` it is: a newer driver may return a status `cust_raw` lacks,
                    // which must not become a Rust enum value that does not exist.
                    let entry: unsafe extern "C" fn($($ty),*) -> c_int =
                        unsafe { std::mem::transmute::<*mut c_void, _>(entry) };
                    // SAFETY: the caller upholds the driver function's contract.
                    status::from_int(unsafe { entry($($arg),*) })
                }
                Err(status) => forward!(@unresolved status ($($arg),*) $($fallback)?),
            }
        }
    )* };
    (@unresolved $status:ident ($($arg:ident),*)) => { $status };
    (@unresolved $status:ident ($($arg:ident),*) $fallback:ident) => {{
        let _ = $status;
        // SAFETY: the fallback takes the same arguments under the same contract.
        unsafe { $fallback($($arg),*) }
    }};
}

/// Defines the C symbol `$name` with hidden visibility, as a tail jump to the Rust function of
/// the same name in this module (arguments and return untouched: the jump keeps every register
/// and the stack as the caller left them). Stable Rust has no visibility attribute, hence the
/// assembly: one section per symbol, so the linker drops the ones no caller uses.
macro_rules! hidden_symbol {
    ($name:ident) => {
        std::arch::global_asm!(
            concat!(".pushsection .text.ferrocuda.", stringify!($name), ",\"ax\",%progbits"),
            concat!(".globl ", stringify!($name)),
            concat!(".hidden ", stringify!($name)),
            concat!(".type ", stringify!($name), ",%function"),
            ".p2align 4",
            concat!(stringify!($name), ":"),
            tail_jump!(),
            concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
            ".popsection",
            target = sym $name,
        );
    };
}

/// The jump, after the landing pad an indirect call needs where control-flow protection is
/// on (`endbr64`, `bti c`: no-ops on processors without it).
#[cfg(target_arch = "x86_64")]
macro_rules! tail_jump {
    () => {
        "endbr64\n jmp {target}"
    };
}

#[cfg(target_arch = "aarch64")]
macro_rules! tail_jump {
    () => {
        "hint #34\n b {target}"
    };
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("ferrocuda's driver trampolines are written for x86_64 and aarch64 Linux (ELF)");

include!("api.rs");

/// The error-text functions, forwarded like the rest but with an answer of their own when the
/// driver cannot be loaded: the status's name (`CUDA_ERROR_INVALID_PTX`) for both. Formatting a
/// `cust` error calls them, and must not fail on a machine without the driver.
macro_rules! error_text {
    ($($name:ident),*) => {
        forward! { $( fn $name(error: CUresult, pStr: *mut *const c_char) else status_text_without_driver; )* }
    };
}

/// `cuGetErrorString` / `cuGetErrorName` without a driver: the status's name.
///
/// # Safety
/// `text` is null or writable.
unsafe fn status_text_without_driver(status: CUresult, text: *mut *const c_char) -> CUresult {
    if text.is_null() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: non-null and writable (the caller's contract).
    unsafe { *text = status::status_name(status).as_ptr() };
    CUresult::CUDA_SUCCESS
}

error_text!(cuGetErrorString, cuGetErrorName);
