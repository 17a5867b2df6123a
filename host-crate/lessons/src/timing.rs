//! Event timing: warm-up, repetitions, median / min / max, and bandwidth from a byte count.
use ferrocuda::DeviceBuffer;

use ferrocuda_lesson_kernels::timing::timing_spin;

use ferrocuda::runtime::config::LaunchConfig;
use ferrocuda::runtime::error::Result;
use ferrocuda::runtime::gpu::Gpu;

/// Repetition statistics of one timed operation, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Median of the repetitions.
    pub median_s: f64,
    /// Fastest repetition.
    pub min_s: f64,
    /// Slowest repetition.
    pub max_s: f64,
    /// Repetitions timed.
    pub reps: usize,
}

impl Stats {
    /// From per-repetition times (at least one).
    pub fn from_samples(mut samples: Vec<f64>) -> Self {
        assert!(!samples.is_empty(), "at least one timed repetition");
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median_s = if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2.0
        };
        Self {
            median_s,
            min_s: samples[0],
            max_s: samples[n - 1],
            reps: n,
        }
    }

    /// Effective bandwidth at the median, GB/s (10^9 bytes per second).
    pub fn gbs(&self, bytes: u64) -> f64 {
        bytes as f64 / self.median_s / 1e9
    }
}

/// How long the blocking kernel holds the GPU before each timed repetition: longer than the
/// host needs to enqueue an event, a few launches and another event.
pub const SPIN_NS: u64 = 50_000;

/// Whether the blocking kernel does its one job: an event pair around one `timing_spin` of
/// [`SPIN_NS`] must measure at least that long (the check of `timing_spin` in the sanitizer's
/// cases; slower tools only lengthen it).
pub fn spin_holds_the_gpu(gpu: &Gpu) -> Result<bool> {
    gpu.synchronize()?;
    let spin = crate::kernel(gpu, timing_spin())?;
    let (start, stop) = (gpu.new_event(true)?, gpu.new_event(true)?);
    start.record(gpu.stream())?;
    // SAFETY: `timing_spin` takes one u64 and touches no memory.
    unsafe { spin.launch(LaunchConfig::linear(1, 1, 0), (SPIN_NS,))? };
    stop.record(gpu.stream())?;
    stop.synchronize()?;
    let elapsed = start.elapsed_ms(&stop)?;
    Ok(f64::from(elapsed) * 1e6 >= SPIN_NS as f64)
}

/// Runs `setup` then `op`, `warmup` times untimed, then `reps` times with only `op` between two
/// events on the GPU's stream. Both receive the repetition index (to rotate inputs).
///
/// Before each timed repetition a blocking kernel (`timing_spin`, [`SPIN_NS`]) occupies the
/// GPU while the host enqueues start event, `op` and stop event (nvbench's method): the
/// measured interval is GPU time only. Without it, an idle GPU would time the host's launch
/// overhead too, which swamps small kernels (on an H200 the fast f32 sum of 2^20 elements
/// measured 7.5 us with it and 5.8 us without: docs/tuning-notes.md).
pub fn time_on_stream(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    setup: impl FnMut(usize) -> Result<()>,
    op: impl FnMut(usize) -> Result<()>,
) -> Result<Stats> {
    time_samples(gpu, warmup, reps, setup, op).map(Stats::from_samples)
}

/// [`time_on_stream`]'s repetition times, in seconds, in the order they ran (at least one).
pub fn time_samples(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    mut setup: impl FnMut(usize) -> Result<()>,
    mut op: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    for i in 0..warmup {
        setup(i)?;
        op(i)?;
    }
    gpu.synchronize()?;
    let spin = crate::kernel(gpu, timing_spin())?;
    let (start, stop) = (gpu.new_event(true)?, gpu.new_event(true)?);
    let mut samples = Vec::with_capacity(reps.max(1));
    for i in 0..reps.max(1) {
        setup(i)?;
        // SAFETY: `timing_spin` takes one u64 and touches no memory.
        unsafe { spin.launch(LaunchConfig::linear(1, 1, 0), (SPIN_NS,))? };
        start.record(gpu.stream())?;
        op(i)?;
        stop.record(gpu.stream())?;
        stop.synchronize()?;
        samples.push(f64::from(start.elapsed_ms(&stop)?) / 1e3);
    }
    Ok(samples)
}

/// A buffer twice the size of the L2 cache: writing it evicts whatever an untimed setup step
/// (the scratch copy of the in-place reductions) left in L2, so that the timed kernel reads
/// from device memory as it would in real use (nvbench flushes L2 the same way).
pub struct L2Flush {
    buffer: DeviceBuffer<u32>,
}

impl L2Flush {
    /// Allocates `2 x L2` bytes.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let words = (2 * gpu.props().l2_bytes as usize / size_of::<u32>()).max(1);
        Ok(Self {
            buffer: gpu.alloc(words, "L2 flush buffer")?,
        })
    }

    /// Enqueues the memset on the GPU's stream (asynchronous).
    pub fn flush(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.memset_d8_async(&mut self.buffer, 0)
    }
}

/// The device-to-device copy bandwidth (`cuMemcpyDtoDAsync` of `bytes`), counting bytes read
/// plus bytes written: the practical ceiling every memory-bound kernel is compared with.
pub fn copy_bandwidth(gpu: &Gpu, bytes: usize, reps: usize) -> Result<(Stats, u64)> {
    let words = bytes.div_ceil(4).max(1);
    let src = gpu.upload(&vec![0x5a5a_5a5au32; words], "copy-bandwidth source")?;
    let mut dst: DeviceBuffer<u32> = gpu.alloc(words, "copy-bandwidth destination")?;
    let stats = time_on_stream(
        gpu,
        3,
        reps,
        |_| Ok(()),
        |_| gpu.copy_on_device(&src, &mut dst),
    )?;
    Ok((stats, 2 * 4 * words as u64))
}
