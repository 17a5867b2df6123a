//! `timing_spin`: the "blocking kernel" of the host's timing harness (as in NVIDIA's nvbench).
//! It keeps the GPU busy while the host enqueues the start event, the kernel under test and the
//! stop event, so that the time between the events is the GPU's time for the kernel, not the
//! host's launch overhead.
use crate::entry::kernel;

/// Spins thread 0 for `ns` nanoseconds.
///
/// # Launch
/// `<<<1, 1>>>`, no shared memory.
///
/// # Safety
/// None beyond a valid launch; marked unsafe as every kernel entry is.
#[kernel]
pub unsafe fn timing_spin(ns: u64) {
    use crate::device::clock::globaltimer;
    let start = globaltimer();
    while globaltimer().wrapping_sub(start) < ns {}
}
