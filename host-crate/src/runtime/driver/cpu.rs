//! The CPU device behind the driver API: the `cu*` functions the library calls, answered by the
//! host, so that everything above the driver (`Gpu`, streams, events, plans, `reduce`,
//! `stencil`, typed launches) runs unchanged on a machine without an NVIDIA GPU.
//!
//! It is chosen for the whole process, before the first driver call: `FERROCUDA_DEVICE=cpu` in
//! the environment, or [`select`] (what `--device cpu` and `Gpu::cpu` call). The trampolines of
//! `driver/mod.rs` then resolve each `cu*` name here instead of in `libcuda.so.1`; a function
//! the CPU device does not provide answers `CUDA_ERROR_NOT_SUPPORTED` and says so on stderr,
//! once, by name.
//!
//! - **Memory** is host memory: a device pointer is a host address, aligned to 256 bytes as
//!   `cuMemAlloc`'s are. Pinned host memory is ordinary host memory, mapped at its own address.
//! - **Work is synchronous**: a launch or a copy runs to its end inside the call, so every
//!   stream is always idle and an event records the host's clock when it is recorded.
//! - **Modules**: `cuModuleLoadData` reads the entry names of the PTX it is given; a function of
//!   the module is the kernel of that name compiled for the host (`#[kernel]` registers every
//!   instance in `ENTRY_POINTS`). A PTX entry without a host body cannot be launched here.
//! - **Launches** run on `ferrocuda_device::cpu`. What its checks find (`synccheck`) is printed
//!   to stderr and kept ([`take_findings`]); with `FERROCUDA_CPU_CHECK=fail` a finding fails
//!   the launch. A fault (deadlock, a warp mask naming an exited lane, a trap, a feature not
//!   emulated) is printed in one line naming the kernel and its configuration, and the launch
//!   returns an error status.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_uchar, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cust::sys::*;
pub use ferrocuda_device::cpu::Finding;
use ferrocuda_device::cpu::{Fault, Launch, Schedule};
use ferrocuda_device::entry::{DEVICE_GLOBALS, ENTRY_POINTS, EntryInfo};

use super::launch::{
    DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, LaunchConfig,
};

/// The value of `FERROCUDA_DEVICE` that chooses the CPU device.
pub const DEVICE_ENV: &str = "FERROCUDA_DEVICE";

/// `fail` makes a launch with a `synccheck` finding fail (the test suite sets it).
pub const CHECK_ENV: &str = "FERROCUDA_CPU_CHECK";

/// `in-order` (the default) or `random:SEED`.
pub const SCHEDULE_ENV: &str = "FERROCUDA_CPU_SCHEDULE";

/// `FERROCUDA_CPU_RACECHECK=1`: every launch runs under the CPU device's racecheck (slow: meant
/// for small launches, as compute-sanitizer's is).
pub const RACECHECK_ENV: &str = "FERROCUDA_CPU_RACECHECK";

/// The CPU device's name, as `cuDeviceGetName` gives it.
pub const NAME: &str = "ferrocuda CPU device (emulated; timings are not GPU timings)";

/// The name of the CPU device with 64-wide waves (`cpu:64`).
pub const NAME_WAVE64: &str =
    "ferrocuda CPU device, 64-wide waves (emulated; timings are not GPU timings)";

/// The lanes of the CPU device's waves: 32 (NVIDIA's warp), or 64 (沐曦 MXMACA's wave) when
/// chosen as `cpu:64`.
static WAVE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(32);

/// The CPU device's wave width (32 unless chosen as `cpu:64`).
pub fn wave_width() -> u32 {
    WAVE.load(Ordering::Relaxed)
}

/// The wave width a device choice names: `cpu` 32, `cpu:64` 64, `cpu:32` 32; `None` for
/// anything else.
pub fn parse_choice(text: &str) -> Option<u32> {
    match text.trim().to_ascii_lowercase().as_str() {
        "cpu" | "cpu:32" => Some(32),
        "cpu:64" => Some(64),
        _ => None,
    }
}

/// Chooses the CPU device with waves of `width` lanes (32 or 64) for this process. Returns
/// whether it is the process's device with that width: false when the NVIDIA driver already
/// answered a call, or the CPU device was chosen with another width.
pub fn select_with_waves(width: u32) -> bool {
    if width != 32 && width != 64 {
        return false;
    }
    match CHOICE.load(Ordering::Acquire) {
        CPU => wave_width() == width,
        NVIDIA => false,
        _ => {
            WAVE.store(width, Ordering::Relaxed);
            select()
        }
    }
}

/// Multiprocessors the CPU device reports: fixed, so that the grids the library sizes from it,
/// and so the order of a float sum's partials, are the same on every host.
pub const SM_COUNT: i32 = 4;

/// Which driver answers this process's calls: undecided until the first driver call that
/// needs one, then the CPU device or the NVIDIA driver for good.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const CPU: u8 = 1;
const NVIDIA: u8 = 2;

/// Whether the CPU device answers the driver calls of this process: chosen by [`select`], or by
/// `FERROCUDA_DEVICE=cpu` when no choice was made yet.
pub fn selected() -> bool {
    match CHOICE.load(Ordering::Acquire) {
        CPU => true,
        NVIDIA => false,
        _ => std::env::var(DEVICE_ENV)
            .ok()
            .and_then(|v| parse_choice(&v))
            .is_some_and(select_with_waves),
    }
}

/// Chooses the CPU device for this process. Returns whether it is the process's device: false
/// when the NVIDIA driver already answered a call.
pub fn select() -> bool {
    match CHOICE.compare_exchange(UNDECIDED, CPU, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(choice) => choice == CPU,
    }
}

/// Records that the NVIDIA driver answers this process's calls (it was loaded).
pub(super) fn nvidia_chosen() -> bool {
    match CHOICE.compare_exchange(UNDECIDED, NVIDIA, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(choice) => choice == NVIDIA,
    }
}

static FAIL_ON_FINDINGS: std::sync::LazyLock<AtomicBool> = std::sync::LazyLock::new(|| {
    AtomicBool::new(std::env::var(CHECK_ENV).is_ok_and(|v| v.trim() == "fail"))
});

/// Whether a launch with a `synccheck` finding fails (`CUDA_ERROR_LAUNCH_FAILED`) rather than
/// only printing it; `FERROCUDA_CPU_CHECK=fail` sets it at start.
pub fn fail_on_findings(fail: bool) {
    FAIL_ON_FINDINGS.store(fail, Ordering::Relaxed);
}

/// Whether a launch with a finding fails ([`fail_on_findings`]).
pub fn fails_on_findings() -> bool {
    FAIL_ON_FINDINGS.load(Ordering::Relaxed)
}

static RACECHECK: std::sync::LazyLock<AtomicBool> = std::sync::LazyLock::new(|| {
    AtomicBool::new(std::env::var(RACECHECK_ENV).is_ok_and(|v| v.trim() == "1"))
});

/// Whether the launches that follow run under racecheck: every shared memory access of every
/// thread checked against the other threads' since the last barrier, each hazard a finding.
pub fn racecheck(on: bool) {
    RACECHECK.store(on, Ordering::Relaxed);
}

/// Whether the launches that follow run under racecheck ([`racecheck`]).
pub fn racecheck_enabled() -> bool {
    RACECHECK.load(Ordering::Relaxed)
}

/// The `synccheck` and `racecheck` findings of the launches since the last call, oldest first.
pub fn take_findings() -> Vec<Finding> {
    std::mem::take(&mut *lock(&FINDINGS))
}

static FINDINGS: Mutex<Vec<Finding>> = Mutex::new(Vec::new());

thread_local! {
    /// The status and the one-line description of this thread's last failed launch: what
    /// `cuGetErrorString` answers for that status, so that the library's error names the fault.
    static LAST_FAULT: std::cell::RefCell<Option<(CUresult, &'static CStr)>> =
        const { std::cell::RefCell::new(None) };
}

/// Records `fault` as this thread's last, failing with `status`, and prints it.
fn record_fault(status: CUresult, fault: &Fault) -> CUresult {
    eprintln!("ferrocuda CPU device: {fault}");
    let text = std::ffi::CString::new(fault.to_string().replace('\0', " "))
        .unwrap_or_default()
        .into_boxed_c_str();
    // One leaked line per failed launch: failures end a program or a test, they do not loop.
    let text: &'static CStr = Box::leak(text);
    LAST_FAULT.with(|l| *l.borrow_mut() = Some((status, text)));
    status
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The CPU device's implementation of driver function `name`, as an untyped pointer.
pub(super) fn resolve(name: &CStr) -> Option<*mut c_void> {
    let name = name.to_str().ok()?;
    let found = TABLE.0.iter().find(|(n, _)| *n == name).map(|&(_, f)| f);
    if found.is_none() {
        static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let mut said = lock(&SAID);
        if !said.iter().any(|s| s == name) {
            eprintln!("ferrocuda CPU device: {name} is not provided (CUDA_ERROR_NOT_SUPPORTED)");
            said.push(name.to_owned());
        }
    }
    found
}

macro_rules! table {
    ($($name:ident),* $(,)?) => {
        /// Every driver function the CPU device provides.
        static TABLE: SyncTable<&[(&str, *mut c_void)]> =
            SyncTable(&[$((stringify!($name), $name as *mut c_void)),*]);
    };
}

struct SyncTable<T>(T);
// SAFETY: function pointers, read only.
unsafe impl<T> Sync for SyncTable<T> {}

table! {
    cuInit, cuDriverGetVersion, cuDeviceGet, cuDeviceGetCount, cuDeviceGetName,
    cuDeviceTotalMem_v2, cuDeviceGetAttribute, cuDeviceComputeCapability, cuDeviceGetPCIBusId,
    cuDeviceCanAccessPeer, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease_v2,
    cuCtxSetCurrent, cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2, cuCtxGetDevice,
    cuCtxSynchronize, cuCtxGetStreamPriorityRange, cuCtxCreate_v2, cuCtxDestroy_v2,
    cuCtxSetLimit, cuCtxGetLimit, cuCtxGetApiVersion, cuModuleLoadData, cuModuleLoadDataEx,
    cuModuleUnload, cuModuleGetFunction, cuModuleGetGlobal_v2, cuFuncGetAttribute,
    cuFuncSetAttribute, cuFuncGetModule, cuFuncSetCacheConfig, cuLaunchKernel,
    cuLaunchCooperativeKernel, cuLaunchKernelEx, cuOccupancyMaxActiveBlocksPerMultiprocessor,
    cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, cuOccupancyMaxPotentialBlockSize,
    cuOccupancyMaxActiveClusters, cuMemAlloc_v2, cuMemFree_v2, cuMemAllocHost_v2, cuMemFreeHost,
    cuMemHostAlloc, cuMemHostGetDevicePointer_v2, cuMemGetInfo_v2, cuMemcpyHtoD_v2,
    cuMemcpyDtoH_v2, cuMemcpyDtoD_v2, cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2,
    cuMemcpyDtoDAsync_v2, cuMemcpy, cuMemcpyAsync, cuMemsetD8_v2, cuMemsetD8Async,
    cuMemsetD32_v2, cuMemsetD32Async, cuPointerGetAttribute, cuMemAllocAsync, cuMemFreeAsync,
    cuMemHostRegister_v2, cuMemHostUnregister, cuStreamCreate, cuStreamCreateWithPriority,
    cuStreamDestroy_v2, cuStreamSynchronize, cuStreamQuery, cuStreamWaitEvent, cuStreamGetCtx,
    cuStreamGetPriority, cuStreamGetFlags, cuEventCreate, cuEventDestroy_v2, cuEventRecord,
    cuEventSynchronize, cuEventQuery, cuEventElapsedTime, cuGetErrorName, cuGetErrorString,
}

const OK: CUresult = CUresult::CUDA_SUCCESS;
const INVALID: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;

/// The one context of the one device: a fixed non-null handle.
fn context() -> CUcontext {
    static CONTEXT: u8 = 0;
    (&raw const CONTEXT).cast_mut().cast()
}

/// A context a program made itself (`cuCtxCreate`): the CPU device keeps one, as another
/// library's context on the device. The device's memory, modules and streams are the primary
/// context's, so a call that needs a context fails while this one is current, as a call of the
/// NVIDIA driver does with another context current than its memory's.
fn created_context() -> CUcontext {
    static CREATED: u8 = 0;
    (&raw const CREATED).cast_mut().cast()
}

thread_local! {
    /// The thread's current context (`cuCtxSetCurrent`): null, [`context`] or
    /// [`created_context`].
    static CURRENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// `CUDA_ERROR_INVALID_CONTEXT` unless the primary context is current on the calling thread:
/// the calls below that work in the current context check it.
fn in_context() -> Result<(), CUresult> {
    if CURRENT.with(std::cell::Cell::get) == context() as usize {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_INVALID_CONTEXT)
    }
}

/// Writes `value` through `out` unless it is null.
unsafe fn put<T>(out: *mut T, value: T) -> CUresult {
    if out.is_null() {
        return INVALID;
    }
    // SAFETY: non-null; the caller's contract makes it writable.
    unsafe { out.write(value) };
    OK
}

unsafe extern "C" fn cuInit(_flags: c_uint) -> CUresult {
    OK
}

unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    // The CUDA 12.0 API, whose functions the library calls.
    unsafe { put(version, 12000) }
}

unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    unsafe { put(device, 0) }
}

unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    unsafe { put(count, 1) }
}

fn check_device(dev: CUdevice) -> CUresult {
    if dev == 0 {
        OK
    } else {
        CUresult::CUDA_ERROR_INVALID_DEVICE
    }
}

unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    if name.is_null() || len <= 0 {
        return INVALID;
    }
    let bytes = if wave_width() == 64 {
        NAME_WAVE64
    } else {
        NAME
    }
    .as_bytes();
    let n = bytes.len().min(len as usize - 1);
    // SAFETY: `name` holds `len` bytes (the caller's contract).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), name.cast::<u8>(), n);
        *name.add(n) = 0;
    }
    check_device(dev)
}

/// The memory the CPU device reports: what the host had available when first asked, as
/// `/proc/meminfo` says, or 8 GiB.
fn host_memory() -> usize {
    static TOTAL: OnceLock<usize> = OnceLock::new();
    *TOTAL.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        text.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok())
            .map_or(8 << 30, |kib| kib * 1024)
    })
}

unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    let _ = check_device(dev);
    unsafe { put(bytes, host_memory()) }
}

/// Shared memory a block may use without opting in, and with.
const SHARED_PER_BLOCK: i32 = 48 * 1024;
const SHARED_PER_BLOCK_OPTIN: i32 = 227 * 1024;

/// The device's attributes: those of a Hopper-class GPU's execution model (so that every
/// kernel, the cluster kernels included, can be launched), with its own multiprocessor count.
fn attribute(a: c_int) -> i32 {
    use CUdevice_attribute_enum as A;
    match a {
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK as c_int => 1024,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X as c_int => 1024,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y as c_int => 1024,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z as c_int => 64,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X as c_int => i32::MAX,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y as c_int => 65535,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z as c_int => 65535,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK as c_int => SHARED_PER_BLOCK,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN as c_int => {
            SHARED_PER_BLOCK_OPTIN
        }
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR as c_int => {
            228 * 1024
        }
        x if x == A::CU_DEVICE_ATTRIBUTE_WARP_SIZE as c_int => wave_width() as c_int,
        x if x == A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT as c_int => SM_COUNT,
        x if x == A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as c_int => 9,
        x if x == A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as c_int => 0,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK as c_int => 65536,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR as c_int => 65536,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR as c_int => 2048,
        x if x == A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR as c_int => 32,
        x if x == A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE as c_int => 0,
        // A nominal host memory (DDR at 1.6 GHz over 128 bits, 51 GB/s): the CPU device has no
        // memory of its own to report, and its times are not GPU times.
        x if x == A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH as c_int => 128,
        x if x == A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE as c_int => 1_600_000,
        x if x == A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE as c_int => 0,
        x if x == A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH as c_int => 1,
        x if x == A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING as c_int => 1,
        x if x == A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY as c_int => 1,
        x if x == A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED as c_int => 1,
        x if x == A::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED as c_int => 1,
        x if x == A::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS as c_int => 0,
        x if x == A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT as c_int => 0,
        x if x == DEVICE_ATTRIBUTE_CLUSTER_LAUNCH => 1,
        _ => 0,
    }
}

unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: CUdevice_attribute,
    dev: CUdevice,
) -> CUresult {
    if dev != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    unsafe { put(pi, attribute(attrib as c_int)) }
}

unsafe extern "C" fn cuDeviceComputeCapability(
    major: *mut c_int,
    minor: *mut c_int,
    dev: CUdevice,
) -> CUresult {
    unsafe {
        put(major, 9);
        put(minor, 0);
    }
    check_device(dev)
}

unsafe extern "C" fn cuDeviceGetPCIBusId(id: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    let text = b"0000:00:00.0\0";
    if id.is_null() || (len as usize) < text.len() {
        return INVALID;
    }
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), id.cast::<u8>(), text.len()) };
    check_device(dev)
}

unsafe extern "C" fn cuDeviceCanAccessPeer(
    can: *mut c_int,
    _d: CUdevice,
    _p: CUdevice,
) -> CUresult {
    unsafe { put(can, 0) }
}

unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    if dev != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    unsafe { put(pctx, context()) }
}

unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    check_device(dev)
}

unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    if dev != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    CURRENT.with(|c| c.set(created_context() as usize));
    unsafe { put(pctx, created_context()) }
}

unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    CURRENT.with(|c| {
        if c.get() == ctx as usize {
            c.set(0);
        }
    });
    OK
}

unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    if !ctx.is_null() && ctx != context() && ctx != created_context() {
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    }
    CURRENT.with(|c| c.set(ctx as usize));
    OK
}

unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    unsafe { put(pctx, CURRENT.with(std::cell::Cell::get) as CUcontext) }
}

unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    unsafe { cuCtxSetCurrent(ctx) }
}

unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CUresult {
    if !pctx.is_null() {
        unsafe { cuCtxGetCurrent(pctx) };
    }
    OK
}

unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    unsafe { put(device, 0) }
}

unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    OK
}

unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !least.is_null() {
        unsafe { least.write(0) };
    }
    if !greatest.is_null() {
        unsafe { greatest.write(-5) };
    }
    OK
}

unsafe extern "C" fn cuCtxSetLimit(_limit: CUlimit, _value: usize) -> CUresult {
    OK
}

unsafe extern "C" fn cuCtxGetLimit(value: *mut usize, _limit: CUlimit) -> CUresult {
    unsafe { put(value, 1 << 20) }
}

unsafe extern "C" fn cuCtxGetApiVersion(_ctx: CUcontext, version: *mut c_uint) -> CUresult {
    unsafe { put(version, 12000) }
}

/// A loaded module: the entry names of its PTX, each with the static shared memory it uses.
struct Module {
    entries: Vec<(String, i32)>,
}

/// A function of a module: its kernel and its attributes.
struct Function {
    info: &'static EntryInfo,
    module: CUmodule,
    /// Bytes of its fixed-size shared arrays, as its PTX names them.
    static_shared: i32,
    max_dynamic_shared: Mutex<i32>,
}

fn is_symbol_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// The symbol at the start of `text`.
fn symbol(text: &str) -> &str {
    &text[..text.find(|c| !is_symbol_char(c)).unwrap_or(text.len())]
}

/// Whether `body` names `name` as a whole symbol.
fn names(body: &str, name: &str) -> bool {
    body.match_indices(name).any(|(at, _)| {
        let before = body[..at].chars().next_back();
        let after = body[at + name.len()..].chars().next();
        !before.is_some_and(is_symbol_char) && !after.is_some_and(is_symbol_char)
    })
}

/// The `.entry` names of a PTX text, each with the bytes of the fixed-size `.shared` arrays it
/// or a function it calls names (aligned, in declaration order), which is what `ptxas` gives
/// the kernel: the CPU device knows a kernel's static shared memory before it runs.
fn ptx_entries(ptx: &str) -> Vec<(String, i32)> {
    // (name, align, bytes) of each sized `.shared` array of the module.
    let mut arrays = Vec::new();
    // (name, is an entry, body) of each function.
    let mut functions: Vec<(&str, bool, String)> = Vec::new();
    for line in ptx.lines() {
        let t = line.trim_start();
        let head = t.strip_prefix(".visible ").unwrap_or(t);
        if let Some(decl) = t.strip_prefix(".shared .align ") {
            let align: usize = decl
                .split_whitespace()
                .next()
                .and_then(|a| a.parse().ok())
                .unwrap_or(1);
            let Some(at) = decl.find(".b8 ") else {
                continue;
            };
            let rest = &decl[at + 4..];
            let name = symbol(rest);
            let bytes = rest[name.len()..]
                .trim_start_matches('[')
                .split(']')
                .next()
                .and_then(|b| b.parse::<usize>().ok());
            if let Some(bytes) = bytes {
                arrays.push((name, align, bytes));
            }
        } else if let Some(rest) = head.strip_prefix(".entry ") {
            functions.push((symbol(rest), true, String::new()));
        } else if let Some(rest) = head.strip_prefix(".func ") {
            // `.func (.param .b32 r) name(`: the name follows the return parameter, if any.
            let rest = match rest.strip_prefix('(') {
                Some(r) => r.split_once(')').map_or(r, |(_, after)| after),
                None => rest,
            };
            functions.push((symbol(rest.trim_start()), false, String::new()));
        } else if let Some(f) = functions.last_mut() {
            f.2.push_str(line);
            f.2.push('\n');
        }
    }
    let body = |name: &str| {
        functions
            .iter()
            .find(|f| f.0 == name)
            .map_or("", |f| f.2.as_str())
    };
    functions
        .iter()
        .filter(|f| f.1)
        .map(|f| {
            // The entry and the functions it reaches.
            let mut reached = vec![f.0];
            let mut i = 0;
            while i < reached.len() {
                let text = body(reached[i]);
                for g in &functions {
                    if !g.1 && !reached.contains(&g.0) && names(text, g.0) {
                        reached.push(g.0);
                    }
                }
                i += 1;
            }
            let mut bytes = 0usize;
            for &(name, align, size) in &arrays {
                if reached.iter().any(|r| names(body(r), name)) {
                    bytes = bytes.next_multiple_of(align.max(1)) + size;
                }
            }
            (f.0.to_owned(), bytes as i32)
        })
        .collect()
}

unsafe extern "C" fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if image.is_null() {
        return INVALID;
    }
    // SAFETY: a PTX image is NUL-terminated text (the caller's contract).
    let text = unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_string_lossy();
    let loaded = Box::new(Module {
        entries: ptx_entries(&text),
    });
    unsafe { put(module, Box::into_raw(loaded).cast()) }
}

unsafe extern "C" fn cuModuleLoadDataEx(
    module: *mut CUmodule,
    image: *const c_void,
    _n: c_uint,
    _options: *mut CUjit_option,
    _values: *mut *mut c_void,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { cuModuleLoadData(module, image) }
}

unsafe extern "C" fn cuModuleUnload(module: CUmodule) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if module.is_null() {
        return INVALID;
    }
    // SAFETY: made by `cuModuleLoadData`; the driver's contract forbids using it after this.
    drop(unsafe { Box::from_raw(module.cast::<Module>()) });
    OK
}

unsafe extern "C" fn cuModuleGetFunction(
    hfunc: *mut CUfunction,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    if module.is_null() || name.is_null() {
        return INVALID;
    }
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    // SAFETY: a live module of `cuModuleLoadData`.
    let m = unsafe { &*module.cast::<Module>() };
    let Some(&(_, static_shared)) = m.entries.iter().find(|e| e.0 == name) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    let Some(info) = ENTRY_POINTS.iter().find(|e| e.symbol == name) else {
        eprintln!(
            "ferrocuda CPU device: the PTX has the entry point {name}, but no kernel of that \
             name was compiled into this program for the host"
        );
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    // Functions live as long as the process, as a module's functions live as long as it.
    let f = Box::leak(Box::new(Function {
        info,
        module,
        static_shared,
        max_dynamic_shared: Mutex::new(SHARED_PER_BLOCK),
    }));
    unsafe { put(hfunc, (f as *mut Function).cast()) }
}

unsafe extern "C" fn cuModuleGetGlobal_v2(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    _module: CUmodule,
    name: *const c_char,
) -> CUresult {
    if name.is_null() {
        return INVALID;
    }
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let Some(g) = DEVICE_GLOBALS.iter().find(|g| g.symbol == name) else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    if !dptr.is_null() {
        unsafe { dptr.write((g.address)() as CUdeviceptr) };
    }
    if !bytes.is_null() {
        unsafe { bytes.write(g.bytes) };
    }
    OK
}

unsafe fn function<'a>(f: CUfunction) -> Option<&'a Function> {
    // SAFETY: made by `cuModuleGetFunction` and never freed.
    (!f.is_null()).then(|| unsafe { &*f.cast::<Function>() })
}

unsafe extern "C" fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: CUfunction_attribute,
    f: CUfunction,
) -> CUresult {
    let Some(f) = (unsafe { function(f) }) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    use CUfunction_attribute_enum as A;
    let value = match attrib {
        A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => 1024,
        A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => *lock(&f.max_dynamic_shared),
        A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => f.static_shared,
        A::CU_FUNC_ATTRIBUTE_PTX_VERSION | A::CU_FUNC_ATTRIBUTE_BINARY_VERSION => 90,
        _ => 0,
    };
    unsafe { put(pi, value) }
}

unsafe extern "C" fn cuFuncSetAttribute(
    f: CUfunction,
    attrib: CUfunction_attribute,
    value: c_int,
) -> CUresult {
    let Some(f) = (unsafe { function(f) }) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    if attrib == CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES {
        if !(0..=SHARED_PER_BLOCK_OPTIN).contains(&value) {
            return INVALID;
        }
        *lock(&f.max_dynamic_shared) = value;
    }
    OK
}

unsafe extern "C" fn cuFuncGetModule(module: *mut CUmodule, f: CUfunction) -> CUresult {
    match unsafe { function(f) } {
        Some(f) => unsafe { put(module, f.module) },
        None => CUresult::CUDA_ERROR_INVALID_HANDLE,
    }
}

unsafe extern "C" fn cuFuncSetCacheConfig(_f: CUfunction, _config: CUfunc_cache) -> CUresult {
    OK
}

/// Runs a launch of `f` and turns its end into a status, printing what went wrong.
unsafe fn launch(
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    params: *mut *mut c_void,
    cooperative: bool,
    cluster: [c_uint; 3],
) -> CUresult {
    let Some(f) = (unsafe { function(f) }) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    let mut config = Launch::new(f.info.symbol, grid, block, shared as usize);
    // Dynamic shared memory up to the kernel's opt-in; static and dynamic together up to the
    // default per block, or the device's opt-in limit once the kernel opted in past it.
    let max_dynamic = *lock(&f.max_dynamic_shared);
    if shared as i32 > max_dynamic {
        return record_fault(
            INVALID,
            &Fault::InvalidLaunch(format!(
                "{}: {shared} bytes of dynamic shared memory, over the kernel's maximum of \
                 {max_dynamic} (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                f.info.symbol
            )),
        );
    }
    config.shared_limit = if max_dynamic > SHARED_PER_BLOCK {
        SHARED_PER_BLOCK_OPTIN
    } else {
        SHARED_PER_BLOCK
    } as usize;
    config.cooperative = cooperative;
    config.cluster = cluster;
    config.schedule = schedule();
    config.racecheck = RACECHECK.load(Ordering::Relaxed);
    config.warp_size = wave_width();
    if !f.info.params.is_empty() && params.is_null() {
        return INVALID;
    }
    // SAFETY: one pointer per parameter, each to a value of its type (the caller's contract,
    // checked by the typed launch).
    // A panic must not cross this `extern "C"` function: it becomes the launch's fault.
    let result =
        std::panic::catch_unwind(|| unsafe { (f.info.cpu)(params.cast_const().cast(), &config) })
            .unwrap_or_else(|payload| {
                let text = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(Fault::Trap(format!("{}: {text}", f.info.symbol)))
            });
    match result {
        Ok(outcome) => {
            let failed = FAIL_ON_FINDINGS.load(Ordering::Relaxed) && !outcome.findings.is_empty();
            for finding in &outcome.findings {
                eprintln!("ferrocuda CPU device: {finding}");
            }
            let first = outcome.findings.first().cloned();
            lock(&FINDINGS).extend(outcome.findings);
            if failed {
                let finding = first.expect("a finding");
                return record_fault(
                    CUresult::CUDA_ERROR_LAUNCH_FAILED,
                    &Fault::Contract(finding.to_string()),
                );
            }
            OK
        }
        Err(fault) => {
            let status = match fault {
                Fault::InvalidLaunch(_) => INVALID,
                Fault::Trap(_) => CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
                Fault::Deadlock(_) | Fault::Contract(_) => CUresult::CUDA_ERROR_LAUNCH_FAILED,
            };
            record_fault(status, &fault)
        }
    }
}

fn schedule() -> Schedule {
    static SCHEDULE: OnceLock<Schedule> = OnceLock::new();
    *SCHEDULE.get_or_init(|| match std::env::var(SCHEDULE_ENV) {
        Err(_) => Schedule::InOrder,
        Ok(text) => Schedule::parse(&text).unwrap_or_else(|e| {
            eprintln!("ferrocuda CPU device: {SCHEDULE_ENV}: {e}; running in order");
            Schedule::InOrder
        }),
    })
}

unsafe extern "C" fn cuLaunchKernel(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !extra.is_null() {
        return CUresult::CUDA_ERROR_NOT_SUPPORTED;
    }
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe {
        launch(
            f,
            [gx, gy, gz],
            [bx, by, bz],
            shared,
            params,
            false,
            [1, 1, 1],
        )
    }
}

unsafe extern "C" fn cuLaunchCooperativeKernel(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let blocks = gx as u64 * gy as u64 * gz as u64;
    let mut per_sm = 0;
    let threads = (bx * by * bz) as c_int;
    unsafe {
        cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, threads, shared as usize)
    };
    if blocks > per_sm as u64 * SM_COUNT as u64 {
        return CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    unsafe {
        launch(
            f,
            [gx, gy, gz],
            [bx, by, bz],
            shared,
            params,
            true,
            [1, 1, 1],
        )
    }
}

unsafe extern "C" fn cuLaunchKernelEx(
    config: *const LaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if config.is_null() || !extra.is_null() {
        return INVALID;
    }
    let config = unsafe { &*config };
    if !live(config.stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let mut cluster = [1, 1, 1];
    for i in 0..config.num_attrs as usize {
        // SAFETY: `attrs` holds `num_attrs` attributes.
        let a = unsafe { &*config.attrs.add(i) };
        if a.id == LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION {
            cluster = [a.value[0], a.value[1], a.value[2]];
        }
    }
    unsafe {
        launch(
            f,
            config.grid,
            config.block,
            config.shared_mem_bytes,
            params,
            false,
            cluster,
        )
    }
}

/// Blocks of `threads` threads and `shared` bytes that fit on one multiprocessor at once, by
/// the limits the device reports and the allocation rule of sm_80 and newer (shared memory in
/// 128-byte units, plus 1 KiB the system reserves per block); kernels use no registers here.
fn blocks_per_sm(threads: c_int, shared: usize) -> c_int {
    if threads <= 0 {
        return 0;
    }
    // Threads are allotted by whole waves, 2048 threads an SM.
    let wave = wave_width() as c_int;
    let warps = (threads + wave - 1) / wave;
    let by_warps = 2048 / wave / warps;
    let by_shared = if shared == 0 {
        c_int::MAX
    } else {
        let per_block = (shared + 1024).next_multiple_of(128);
        (228 * 1024 / per_block) as c_int
    };
    by_warps.min(by_shared).min(32)
}

unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    n: *mut c_int,
    f: CUfunction,
    threads: c_int,
    shared: usize,
) -> CUresult {
    let Some(f) = (unsafe { function(f) }) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    unsafe { put(n, blocks_per_sm(threads, shared + f.static_shared as usize)) }
}

unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    n: *mut c_int,
    f: CUfunction,
    threads: c_int,
    shared: usize,
    _flags: c_uint,
) -> CUresult {
    unsafe { cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, threads, shared) }
}

unsafe extern "C" fn cuOccupancyMaxPotentialBlockSize(
    min_grid: *mut c_int,
    block: *mut c_int,
    _f: CUfunction,
    to_shared: CUoccupancyB2DSize,
    shared: usize,
    limit: c_int,
) -> CUresult {
    let limit = if limit <= 0 { 1024 } else { limit.min(1024) };
    let mut best = (0, 0);
    let mut b = 32;
    while b <= limit {
        let bytes = match to_shared {
            Some(to) => unsafe { to(b) },
            None => shared,
        };
        let active = blocks_per_sm(b, bytes) * b;
        if active > best.0 {
            best = (active, b);
        }
        b += 32;
    }
    unsafe {
        put(block, best.1);
        put(min_grid, blocks_per_sm(best.1, shared) * SM_COUNT);
    }
    OK
}

unsafe extern "C" fn cuOccupancyMaxActiveClusters(
    n: *mut c_int,
    _f: CUfunction,
    config: *const LaunchConfig,
) -> CUresult {
    if config.is_null() {
        return INVALID;
    }
    let config = unsafe { &*config };
    let threads = (config.block[0] * config.block[1] * config.block[2]) as c_int;
    let blocks = blocks_per_sm(threads, config.shared_mem_bytes as usize) * SM_COUNT;
    let mut cluster = 1;
    for i in 0..config.num_attrs as usize {
        let a = unsafe { &*config.attrs.add(i) };
        if a.id == LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION {
            cluster = (a.value[0] * a.value[1] * a.value[2]).max(1) as c_int;
        }
    }
    unsafe { put(n, blocks / cluster) }
}

/// Live allocations: address to size (device memory and pinned host memory alike).
static ALLOCATIONS: Mutex<BTreeMap<usize, Allocation>> = Mutex::new(BTreeMap::new());

/// One live allocation: its size, and whether it is device memory (`cuMemAlloc`) rather than
/// page-locked host memory (`cuMemHostAlloc`), which the device's free memory does not count.
#[derive(Clone, Copy)]
struct Allocation {
    bytes: usize,
    device: bool,
}

/// The alignment of an allocation, as `cuMemAlloc` gives.
const ALIGN: usize = 256;

fn allocate(bytes: usize, device: bool) -> Option<usize> {
    let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN).ok()?;
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return None;
    }
    lock(&ALLOCATIONS).insert(p as usize, Allocation { bytes, device });
    Some(p as usize)
}

fn free(address: usize) -> CUresult {
    let Some(Allocation { bytes, .. }) = lock(&ALLOCATIONS).remove(&address) else {
        return INVALID;
    };
    let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN).expect("its layout");
    // SAFETY: allocated by `allocate` with this layout.
    unsafe { std::alloc::dealloc(address as *mut u8, layout) };
    OK
}

unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if bytes == 0 {
        return INVALID;
    }
    match allocate(bytes, true) {
        Some(p) => unsafe { put(dptr, p as CUdeviceptr) },
        None => CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    }
}

unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if dptr == 0 {
        return OK;
    }
    free(dptr as usize)
}

unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { cuMemAlloc_v2(dptr, bytes) }
}

unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { cuMemFree_v2(dptr) }
}

unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytes: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    match allocate(bytes, false) {
        Some(p) => unsafe { put(pp, p as *mut c_void) },
        None => CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    }
}

unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytes: usize,
    _flags: c_uint,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { cuMemAllocHost_v2(pp, bytes) }
}

unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    free(p as usize)
}

unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    pdptr: *mut CUdeviceptr,
    p: *mut c_void,
    _flags: c_uint,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { put(pdptr, p as CUdeviceptr) }
}

unsafe extern "C" fn cuMemHostRegister_v2(
    _p: *mut c_void,
    _bytes: usize,
    _flags: c_uint,
) -> CUresult {
    OK
}

unsafe extern "C" fn cuMemHostUnregister(_p: *mut c_void) -> CUresult {
    OK
}

unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    // The host's memory as the device's, less what is allocated on it: a program's own
    // allocations move it, and nothing else does.
    let t = host_memory();
    // In 2 MiB pages, as the NVIDIA driver reports it: a few bytes held by a cache do not show.
    let used: usize = lock(&ALLOCATIONS)
        .values()
        .filter(|a| a.device)
        .map(|a| a.bytes)
        .sum::<usize>()
        .next_multiple_of(2 << 20);
    let f = t.saturating_sub(used);
    unsafe {
        put(free, f);
        put(total, t);
    }
    OK
}

/// A copy between any two addresses of the host (every address is one here).
unsafe fn copy(dst: usize, src: usize, bytes: usize) -> CUresult {
    if bytes == 0 {
        return OK;
    }
    if dst == 0 || src == 0 {
        return INVALID;
    }
    // SAFETY: both ranges are valid (the caller's contract); `copy` allows overlap as the
    // driver's device-to-device copy does.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
    OK
}

unsafe extern "C" fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemcpyAsync(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { copy(dst as usize, src as usize, n) }
}

unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, value: c_uchar, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if n == 0 {
        return OK;
    }
    if dst == 0 {
        return INVALID;
    }
    unsafe { std::ptr::write_bytes(dst as *mut u8, value, n) };
    OK
}

unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    value: c_uchar,
    n: usize,
    s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { cuMemsetD8_v2(dst, value, n) }
}

unsafe extern "C" fn cuMemsetD32_v2(dst: CUdeviceptr, value: c_uint, n: usize) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    if n == 0 {
        return OK;
    }
    if dst == 0 || dst % 4 != 0 {
        return INVALID;
    }
    // SAFETY: `n` aligned words (the caller's contract).
    unsafe { std::slice::from_raw_parts_mut(dst as *mut u32, n) }.fill(value);
    OK
}

unsafe extern "C" fn cuMemsetD32Async(
    dst: CUdeviceptr,
    value: c_uint,
    n: usize,
    _s: CUstream,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { cuMemsetD32_v2(dst, value, n) }
}

unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: CUpointer_attribute,
    ptr: CUdeviceptr,
) -> CUresult {
    use CUpointer_attribute_enum as P;
    let known = lock(&ALLOCATIONS)
        .range(..=ptr as usize)
        .next_back()
        .is_some_and(|(&a, n)| (ptr as usize) < a + n.bytes.max(1));
    if !known {
        return INVALID;
    }
    match attribute {
        P::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL => unsafe { put(data.cast::<c_int>(), 0) },
        P::CU_POINTER_ATTRIBUTE_CONTEXT => unsafe { put(data.cast::<CUcontext>(), context()) },
        P::CU_POINTER_ATTRIBUTE_DEVICE_POINTER => unsafe { put(data.cast::<CUdeviceptr>(), ptr) },
        P::CU_POINTER_ATTRIBUTE_MEMORY_TYPE => unsafe {
            put(
                data.cast::<c_uint>(),
                CUmemorytype_enum::CU_MEMORYTYPE_DEVICE as c_uint,
            )
        },
        _ => CUresult::CUDA_ERROR_NOT_SUPPORTED,
    }
}

unsafe extern "C" fn cuGetErrorName(status: CUresult, text: *mut *const c_char) -> CUresult {
    unsafe { put(text, super::status::status_name(status).as_ptr()) }
}

/// The status's name, or for the status of this thread's last failed launch, the fault that
/// failed it (the kernel, its configuration, and what went wrong).
unsafe extern "C" fn cuGetErrorString(status: CUresult, text: *mut *const c_char) -> CUresult {
    let fault = LAST_FAULT
        .with(|l| *l.borrow())
        .filter(|&(s, _)| s == status);
    let found = fault.map_or_else(|| super::status::status_name(status), |(_, text)| text);
    unsafe { put(text, found.as_ptr()) }
}

/// A stream: a handle only (every call is done when it returns).
fn new_handle() -> *mut c_void {
    Box::into_raw(Box::new(0u64)).cast()
}

/// The streams made and not yet destroyed, by address: a call on any other stream (but the
/// legacy and per-thread default streams) is a use of a destroyed stream, which the driver may
/// not catch (its handle is freed memory).
static LIVE_STREAMS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// How many calls named a stream that was destroyed (or never made).
static DEAD_STREAM_USES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many calls so far named a stream that was destroyed or never made: `0` in a correct
/// program (the tests check it after handing streams back).
pub fn dead_stream_uses() -> u64 {
    DEAD_STREAM_USES.load(std::sync::atomic::Ordering::Relaxed)
}

fn new_stream() -> CUstream {
    let handle = new_handle();
    lock(&LIVE_STREAMS).push(handle as usize);
    handle.cast()
}

/// Whether `stream` may be used: a default stream, or one made and not destroyed; else the use
/// is counted and the call fails as the driver's does on a bad handle.
fn live(stream: CUstream) -> bool {
    let address = stream as usize;
    if address <= 2 || lock(&LIVE_STREAMS).contains(&address) {
        return true;
    }
    DEAD_STREAM_USES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    false
}

unsafe extern "C" fn cuStreamCreate(stream: *mut CUstream, _flags: c_uint) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { put(stream, new_stream()) }
}

unsafe extern "C" fn cuStreamCreateWithPriority(
    stream: *mut CUstream,
    _f: c_uint,
    _p: c_int,
) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { put(stream, new_stream()) }
}

unsafe extern "C" fn cuStreamDestroy_v2(stream: CUstream) -> CUresult {
    if stream.is_null() || !live(stream) {
        return INVALID;
    }
    // The handle's memory is never freed, so no later stream gets its address and a use of
    // this one after its destruction is always counted.
    lock(&LIVE_STREAMS).retain(|s| *s != stream as usize);
    OK
}

unsafe extern "C" fn cuStreamSynchronize(stream: CUstream) -> CUresult {
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    OK
}

unsafe extern "C" fn cuStreamQuery(stream: CUstream) -> CUresult {
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    OK
}

unsafe extern "C" fn cuStreamWaitEvent(stream: CUstream, _e: CUevent, _flags: c_uint) -> CUresult {
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    OK
}

unsafe extern "C" fn cuStreamGetCtx(s: CUstream, pctx: *mut CUcontext) -> CUresult {
    if !live(s) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { put(pctx, context()) }
}

unsafe extern "C" fn cuStreamGetPriority(_s: CUstream, priority: *mut c_int) -> CUresult {
    unsafe { put(priority, 0) }
}

unsafe extern "C" fn cuStreamGetFlags(_s: CUstream, flags: *mut c_uint) -> CUresult {
    unsafe { put(flags, 0) }
}

/// The instant an event was last recorded, as nanoseconds since the first event.
fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

unsafe extern "C" fn cuEventCreate(event: *mut CUevent, _flags: c_uint) -> CUresult {
    if let Err(status) = in_context() {
        return status;
    }
    unsafe { put(event, new_handle().cast()) }
}

unsafe extern "C" fn cuEventDestroy_v2(event: CUevent) -> CUresult {
    if event.is_null() {
        return INVALID;
    }
    drop(unsafe { Box::from_raw(event.cast::<u64>()) });
    OK
}

unsafe extern "C" fn cuEventRecord(event: CUevent, stream: CUstream) -> CUresult {
    if event.is_null() {
        return INVALID;
    }
    if !live(stream) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { event.cast::<u64>().write(now_ns()) };
    OK
}

unsafe extern "C" fn cuEventSynchronize(_event: CUevent) -> CUresult {
    OK
}

unsafe extern "C" fn cuEventQuery(_event: CUevent) -> CUresult {
    OK
}

unsafe extern "C" fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult {
    if start.is_null() || end.is_null() {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let (a, b) = unsafe { (start.cast::<u64>().read(), end.cast::<u64>().read()) };
    if a == 0 || b == 0 {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    unsafe { put(ms, (b as f64 - a as f64) as f32 / 1e6) }
}

/// Whether a warning that the CPU device is in use was printed (once per process).
static ANNOUNCED: AtomicBool = AtomicBool::new(false);

/// Says once on stderr that the CPU device runs this process's kernels.
pub fn announce() {
    if !ANNOUNCED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "ferrocuda: running on the CPU device (kernels emulated on the host; times are not \
             GPU times)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_entries_are_read_with_the_shared_arrays_they_or_their_callees_name() {
        let ptx = ".version 7.8\n\
                   .shared .align 16 .b8 tile[1024];\n\
                   .shared .align 16 .b8 tile_2[8];\n\
                   .shared .align 8 .b8 scratch[12];\n\
                   .extern .shared .align 8 .b8 dynamic[];\n\
                   .func (.param .b32 r) helper(\n)\n{\n\tmov.u32 %r1, scratch;\n}\n\
                   .visible .entry reduce_fast_sum_f32(\n\t.param .u64 a\n)\n{\n\
                   \tmov.u32 %r1, tile;\n\tcall.uni (r), helper, (a);\n}\n\
                   .entry plain_b512(\n)\n{\n\tmov.u32 %r1, tile_2;\n}\n";
        assert_eq!(
            ptx_entries(ptx),
            [
                ("reduce_fast_sum_f32".to_owned(), 1024 + 12),
                ("plain_b512".to_owned(), 8)
            ]
        );
    }

    #[test]
    fn every_provided_function_is_a_driver_function() {
        let api = include_str!("api.rs");
        for (name, _) in TABLE.0.iter() {
            let declared = api.contains(&format!("fn {name}("))
                || [
                    "cuLaunchKernelEx",
                    "cuOccupancyMaxActiveClusters",
                    "cuGetErrorName",
                    "cuGetErrorString",
                ]
                .contains(name);
            assert!(declared, "{name} is not a driver function");
        }
    }
}
