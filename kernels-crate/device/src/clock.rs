//! The clock the host's timing harness needs: `%globaltimer`, nanoseconds shared by the whole
//! GPU (the blocking kernel `timing_spin` spins on it).

/// `%globaltimer`: a GPU-wide nanosecond timer.
#[inline(always)]
pub fn globaltimer() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reading a special register has no preconditions. Not `pure`: every read must
        // happen, a spin loop depends on it.
        unsafe {
            core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack))
        };
        t
    }
    // A spin on the clock lets the other threads of the CPU device run.
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::intrinsics::interleave();
        crate::cpu::intrinsics::globaltimer()
    }
}
