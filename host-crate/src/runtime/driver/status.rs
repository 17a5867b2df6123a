//! The names of the driver's statuses, shared by the NVIDIA driver's error text and the CPU
//! device's.
use std::ffi::CStr;

use cust::sys::CUresult;

/// `CUDA_ERROR_...` for `status`, as a C string that lives as long as the process (one per
/// distinct status, made once).
pub(crate) fn status_name(status: CUresult) -> &'static CStr {
    static NAMES: std::sync::Mutex<Vec<(CUresult, &'static CStr)>> =
        std::sync::Mutex::new(Vec::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, name)) = names.iter().find(|(known, _)| *known == status) {
        return name;
    }
    let name = std::ffi::CString::new(format!("{status:?}"))
        .unwrap_or_default()
        .into_boxed_c_str();
    let name: &'static CStr = Box::leak(name);
    names.push((status, name));
    name
}

/// Every status of the driver API, in `cust_raw`'s order (`tests/tests/tidy.rs` checks the list
/// against its `cudaError_enum`): a status number is turned into a `CUresult` by looking it up
/// here, never by a cast.
pub(crate) const STATUSES: [CUresult; 87] = [
    CUresult::CUDA_SUCCESS,
    CUresult::CUDA_ERROR_INVALID_VALUE,
    CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    CUresult::CUDA_ERROR_NOT_INITIALIZED,
    CUresult::CUDA_ERROR_DEINITIALIZED,
    CUresult::CUDA_ERROR_PROFILER_DISABLED,
    CUresult::CUDA_ERROR_PROFILER_NOT_INITIALIZED,
    CUresult::CUDA_ERROR_PROFILER_ALREADY_STARTED,
    CUresult::CUDA_ERROR_PROFILER_ALREADY_STOPPED,
    CUresult::CUDA_ERROR_STUB_LIBRARY,
    CUresult::CUDA_ERROR_NO_DEVICE,
    CUresult::CUDA_ERROR_INVALID_DEVICE,
    CUresult::CUDA_ERROR_DEVICE_NOT_LICENSED,
    CUresult::CUDA_ERROR_INVALID_IMAGE,
    CUresult::CUDA_ERROR_INVALID_CONTEXT,
    CUresult::CUDA_ERROR_CONTEXT_ALREADY_CURRENT,
    CUresult::CUDA_ERROR_MAP_FAILED,
    CUresult::CUDA_ERROR_UNMAP_FAILED,
    CUresult::CUDA_ERROR_ARRAY_IS_MAPPED,
    CUresult::CUDA_ERROR_ALREADY_MAPPED,
    CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
    CUresult::CUDA_ERROR_ALREADY_ACQUIRED,
    CUresult::CUDA_ERROR_NOT_MAPPED,
    CUresult::CUDA_ERROR_NOT_MAPPED_AS_ARRAY,
    CUresult::CUDA_ERROR_NOT_MAPPED_AS_POINTER,
    CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
    CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT,
    CUresult::CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
    CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
    CUresult::CUDA_ERROR_INVALID_PTX,
    CUresult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT,
    CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE,
    CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
    CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
    CUresult::CUDA_ERROR_JIT_COMPILATION_DISABLED,
    CUresult::CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
    CUresult::CUDA_ERROR_INVALID_SOURCE,
    CUresult::CUDA_ERROR_FILE_NOT_FOUND,
    CUresult::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
    CUresult::CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
    CUresult::CUDA_ERROR_OPERATING_SYSTEM,
    CUresult::CUDA_ERROR_INVALID_HANDLE,
    CUresult::CUDA_ERROR_ILLEGAL_STATE,
    CUresult::CUDA_ERROR_NOT_FOUND,
    CUresult::CUDA_ERROR_NOT_READY,
    CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
    CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
    CUresult::CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING,
    CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
    CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
    CUresult::CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
    CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
    CUresult::CUDA_ERROR_ASSERT,
    CUresult::CUDA_ERROR_TOO_MANY_PEERS,
    CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
    CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
    CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
    CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
    CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
    CUresult::CUDA_ERROR_INVALID_PC,
    CUresult::CUDA_ERROR_LAUNCH_FAILED,
    CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
    CUresult::CUDA_ERROR_NOT_PERMITTED,
    CUresult::CUDA_ERROR_NOT_SUPPORTED,
    CUresult::CUDA_ERROR_SYSTEM_NOT_READY,
    CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
    CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
    CUresult::CUDA_ERROR_MPS_CONNECTION_FAILED,
    CUresult::CUDA_ERROR_MPS_RPC_FAILURE,
    CUresult::CUDA_ERROR_MPS_SERVER_NOT_READY,
    CUresult::CUDA_ERROR_MPS_MAX_CLIENTS_REACHED,
    CUresult::CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_MERGE,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    CUresult::CUDA_ERROR_CAPTURED_EVENT,
    CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
    CUresult::CUDA_ERROR_TIMEOUT,
    CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    CUresult::CUDA_ERROR_EXTERNAL_DEVICE,
    CUresult::CUDA_ERROR_UNKNOWN,
];

/// The status a driver call returned as a C `int`: `CUDA_ERROR_UNKNOWN` for a number `cust_raw`
/// does not know (a newer driver's).
pub(crate) fn from_int(code: std::ffi::c_int) -> CUresult {
    if code == 0 {
        return CUresult::CUDA_SUCCESS;
    }
    status_of(code as u32).unwrap_or(CUresult::CUDA_ERROR_UNKNOWN)
}

/// The status numbered `code`, if the driver API has one.
pub(crate) fn status_of(code: u32) -> Option<CUresult> {
    STATUSES.iter().copied().find(|s| *s as i32 as u32 == code)
}
