//! Clocks: `%globaltimer` (nanoseconds, shared by the whole GPU) and `clock64()` (cycles of
//! this SM).

/// `%globaltimer`: a GPU-wide nanosecond timer.
#[inline(always)]
pub fn globaltimer() -> u64 {
    let t: u64;
    // SAFETY: reading a special register has no preconditions. Not `pure`: every read must
    // happen, a spin loop depends on it.
    unsafe {
        core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack))
    };
    t
}

/// `clock64()`: this SM's cycle counter.
#[inline(always)]
pub fn clock64() -> u64 {
    let t: u64;
    // SAFETY: as `globaltimer`.
    unsafe {
        core::arch::asm!("mov.u64 {t}, %clock64;", t = out(reg64) t, options(nomem, nostack))
    };
    t
}
