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
