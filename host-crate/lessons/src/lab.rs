//! The warp and execution-model lab: the notes' warp-function program (`ferrocuda warp`) and
//! the `simpleDivergence` kernels (`ferrocuda divergence`), each checked against the CPU.
use ferrocuda_kernels::entry::Entry;
use ferrocuda_lesson_kernels::config::WARP_DEMO_WORDS;
use ferrocuda_lesson_kernels::lab::{
    math_kernel1, math_kernel2, math_kernel3, math_kernel4, warp_functions_demo,
};

use crate::cpu::warp::{self as model, ShflMode, WARP_SIZE};
use crate::timing::{Stats, time_on_stream};
use ferrocuda::runtime::config::LaunchConfig;
use ferrocuda::runtime::error::{Error, Result};
use ferrocuda::runtime::gpu::Gpu;

/// The column names of the demo's table.
pub const WARP_DEMO_COLUMNS: [&str; WARP_DEMO_WORDS] = [
    "tid",
    "lane",
    "ballot(t>0)",
    "ballot(t==0)",
    "all(t)",
    "all@b>0(t)",
    "any(t)",
    "any@b==0(t)",
    "shfl(y,src)",
    "shfl_up",
    "shfl_down",
    "shfl_xor",
];

/// The demo's arguments: `<<<1, block>>>`, segments of `width` lanes, broadcast from
/// `src_lane`, shifts and butterfly by `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpDemo {
    /// Threads (one warp at most).
    pub block: u32,
    /// Segment width `w`.
    pub width: u32,
    /// Source lane of the broadcast.
    pub src_lane: u32,
    /// Delta of up/down and lane mask of xor.
    pub offset: u32,
}

impl WarpDemo {
    /// The notes' configuration: 16 threads, width 8, broadcast from lane 2, offset 4 (which
    /// reproduces the book's table: down 4,5,6,7,4,5,6,7; xor 4,5,6,7,0,1,2,3).
    pub const NOTES: WarpDemo = WarpDemo {
        block: 16,
        width: 8,
        src_lane: 2,
        offset: 4,
    };

    /// Checks the arguments without a GPU.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| {
            Err(Error::InvalidArgument {
                what: format!("`{}`: {what}", warp_functions_demo().symbol()),
            })
        };
        if self.block == 0 || self.block > WARP_SIZE {
            return bad(format!(
                "block must be 1..=32 threads (the demo is one warp), not {}",
                self.block
            ));
        }
        if !self.width.is_power_of_two() || self.width > WARP_SIZE {
            return bad(format!(
                "width must be a power of two from 1 to 32, not {} (the notes list 6 among the widths; shuffles only take powers of two)",
                self.width
            ));
        }
        if self.src_lane >= WARP_SIZE || self.offset >= WARP_SIZE {
            return bad(format!(
                "src_lane and offset must be below 32 (got {} and {})",
                self.src_lane, self.offset
            ));
        }
        Ok(())
    }

    /// The mask naming the lanes that exist (the notes' FULL_MASK names 32).
    pub fn mask(&self) -> u32 {
        if self.block >= 32 {
            u32::MAX
        } else {
            (1 << self.block) - 1
        }
    }

    /// Runs the demo: one row of [`WARP_DEMO_COLUMNS`] per lane.
    pub fn run(&self, gpu: &Gpu) -> Result<Vec<[u32; WARP_DEMO_WORDS]>> {
        self.validate()?;
        let kernel = crate::kernel(gpu, warp_functions_demo())?;
        let out = gpu.upload(
            &vec![0xA5A5_A5A5u32; WARP_DEMO_WORDS * self.block as usize],
            "warp demo output",
        )?;
        let config = LaunchConfig::linear(1, self.block, 0);
        // SAFETY: `out` holds 12 words per lane; the arguments were validated.
        unsafe {
            kernel.launch_and_wait(
                config,
                (out.as_device_ptr(), self.width, self.src_lane, self.offset),
            )?
        };
        let words = gpu.download(&out)?;
        Ok(words
            .chunks(WARP_DEMO_WORDS)
            .map(|c| c.try_into().expect("12 words per lane"))
            .collect())
    }

    /// What each lane must write, from the CPU warp model; `None` where CUDA leaves the value
    /// undefined (a shuffle source outside the mask).
    pub fn expected(&self) -> Vec<[Option<u32>; WARP_DEMO_WORDS]> {
        let lanes = self.block as usize;
        let tids: Vec<u32> = (0..self.block).collect();
        let y: Vec<u32> = tids.iter().map(|t| t & (self.width - 1)).collect();
        let nonzero: Vec<bool> = tids.iter().map(|&t| t != 0).collect();
        let mask = self.mask();
        let ballot_pos = model::ballot(&nonzero, mask);
        let ballot_zero = model::ballot(&tids.iter().map(|&t| t == 0).collect::<Vec<_>>(), mask);
        let shfl = |mode, b| model::shfl(mode, &y, mask, b, self.width);
        let (bcast, up, down, xor) = (
            shfl(ShflMode::Idx, self.src_lane),
            shfl(ShflMode::Up, self.offset),
            shfl(ShflMode::Down, self.offset),
            shfl(ShflMode::Xor, self.offset),
        );
        let vote_in = |m: u32, t: usize, v: bool| {
            Some(if m & (1 << t) != 0 {
                v as u32
            } else {
                u32::MAX
            })
        };
        (0..lanes)
            .map(|t| {
                [
                    Some(t as u32),
                    Some(y[t]),
                    Some(ballot_pos),
                    Some(ballot_zero),
                    Some(model::all(&nonzero, mask) as u32),
                    vote_in(ballot_pos, t, model::all(&nonzero, ballot_pos)),
                    Some(model::any(&nonzero, mask) as u32),
                    vote_in(ballot_zero, t, model::any(&nonzero, ballot_zero)),
                    bcast[t],
                    up[t],
                    down[t],
                    xor[t],
                ]
            })
            .collect()
    }
}

/// A `simpleDivergence` kernel: `(c, n, work)`.
pub type DivergenceKernel = Entry<(*mut f32, usize, u32)>;

/// The four `simpleDivergence` kernels and what each branches on.
pub fn divergence_kernels() -> [(DivergenceKernel, &'static str); 4] {
    [
        (
            math_kernel1(),
            "if tid % 2 == 0: even/odd lanes split every warp",
        ),
        (
            math_kernel2(),
            "if (tid / warpSize) % 2 == 0: whole warps take one side",
        ),
        (
            math_kernel3(),
            "two predicated ifs on tid % 2: still divergent",
        ),
        (
            math_kernel4(),
            "book's (itid & 0x01 == 0) bug fixed to ((tid >> 5) & 1) == 0: warp-uniform",
        ),
    ]
}

/// The value `math_kernel*` computes on one side: `work` steps of `v = v * 0.999 + 1`.
pub fn divergence_side(seed: f32, work: u32) -> f32 {
    (0..work).fold(seed, |v, _| v * 0.999 + 1.0)
}

/// What kernel `k` (0-based) writes to `c[tid]`.
pub fn divergence_expected(k: usize, tid: usize, work: u32) -> f32 {
    let first_side = match k {
        0 | 2 => tid.is_multiple_of(2),
        _ => (tid / WARP_SIZE as usize).is_multiple_of(2),
    };
    if first_side {
        divergence_side(100.0, work)
    } else {
        divergence_side(200.0, work)
    }
}

/// One divergence kernel timed and checked.
#[derive(Clone, Debug)]
pub struct DivergenceRow {
    /// PTX symbol.
    pub kernel: &'static str,
    /// What it branches on.
    pub branch: &'static str,
    /// Event timing.
    pub stats: Stats,
    /// Elements that differ from the CPU.
    pub mismatches: usize,
}

/// Runs the four kernels over `n` elements with `block` threads and `work` steps per side.
pub fn divergence(
    gpu: &Gpu,
    n: usize,
    block: u32,
    work: u32,
    reps: usize,
) -> Result<Vec<DivergenceRow>> {
    let config =
        LaunchConfig::per_element(n.max(1), block, 0).ok_or_else(|| Error::InvalidArgument {
            what: format!("divergence: cannot cover n = {n} with blocks of {block}"),
        })?;
    let mut rows = Vec::new();
    for (k, (entry, branch)) in divergence_kernels().into_iter().enumerate() {
        let c = gpu.upload(&vec![f32::NAN; n], "divergence output (poisoned)")?;
        let kernel = crate::kernel(gpu, entry)?;
        kernel.validate(config)?;
        let launch = || {
            if n == 0 {
                return Ok(());
            }
            // SAFETY: `c` holds `n` floats.
            unsafe { kernel.launch(config, (c.as_device_ptr(), n, work)) }
        };
        let stats = time_on_stream(gpu, 2, reps, |_| Ok(()), |_| launch())?;
        let got = gpu.download(&c)?;
        let mismatches = got
            .iter()
            .enumerate()
            .filter(|&(i, v)| v.to_bits() != divergence_expected(k, i, work).to_bits())
            .count();
        rows.push(DivergenceRow {
            kernel: entry.symbol(),
            branch,
            stats,
            mismatches,
        });
    }
    Ok(rows)
}

/// What [`stream_overlap`] measured: a host-to-device copy and a kernel, each alone, one after
/// the other on one stream, and side by side on two streams; every time from events.
#[derive(Clone, Debug)]
pub struct StreamOverlap {
    /// Bytes copied (page-locked host memory to the device).
    pub copy_bytes: usize,
    /// Elements of the stencil's input.
    pub n: usize,
    /// Medians, in seconds: the copy alone, the kernel alone, both on one stream, both on two
    /// streams.
    pub copy_s: f64,
    /// See above.
    pub kernel_s: f64,
    /// See above.
    pub serial_s: f64,
    /// See above (the copy enqueued before the kernels).
    pub concurrent_s: f64,
    /// Both on two streams, the kernels enqueued before the copy.
    pub concurrent_kernels_first_s: f64,
    /// Stencil launches in the kernel part.
    pub kernels: usize,
    /// Whether the copy arrived whole and the stencil's output matches the CPU.
    pub correct: bool,
}

impl StreamOverlap {
    /// The share of the shorter operation hidden behind the longer one when they run on two
    /// streams: 0 for none, 1 for all of it.
    pub fn hidden(&self) -> f64 {
        let shorter = self.copy_s.min(self.kernel_s);
        let best = self.concurrent_s.min(self.concurrent_kernels_first_s);
        ((self.serial_s - best) / shorter).clamp(0.0, 1.0)
    }
}

/// Streams and events (流、事件, the system-level synchronisation of 沐曦 MXMACA 教材第5章),
/// shown on a real run:
/// a copy of `n` `f32` from page-locked host memory to the device on one stream, and `kernels`
/// launches of the R = 3 stencil over another `n` on a second stream (on two streams, once with
/// the copy enqueued first and once with the kernels first). Events time each part: the second stream
/// waits (`cuStreamWaitEvent`) for an event recorded after the start event on the first, and
/// the first waits for an event recorded after the kernel on the second before the stop
/// event, so the interval covers both. Then the whole device synchronises
/// (`cuCtxSynchronize`) and the results are checked. The copy engine and the SMs are separate
/// units, so the two can overlap; the fraction hidden is measured, not assumed.
pub fn stream_overlap(gpu: &Gpu, n: usize, kernels: usize, reps: usize) -> Result<StreamOverlap> {
    use crate::cpu::{Boundary, Taps, check_stencil};
    use ferrocuda::Stream;

    if n == 0 || kernels == 0 {
        return Err(Error::InvalidArgument {
            what: "stream overlap: n and the kernel count must be at least 1".into(),
        });
    }
    let host: Vec<f32> = (0..n).map(|i| (i % 251) as f32).collect();
    let pinned = gpu.pin(&host)?;
    let mut copy_dst = gpu.alloc::<f32>(n, "stream overlap: copy destination")?;
    let stencil_in = gpu.upload(&host, "stream overlap: stencil input")?;
    let mut stencil_out = gpu.alloc::<f32>(n, "stream overlap: stencil output")?;
    let taps = Taps::<f32>::Sum { radius: 3 };
    let copy_stream = gpu.new_stream()?;
    let kernel_stream = gpu.new_stream()?;
    let (start, stop) = (gpu.new_event(true)?, gpu.new_event(true)?);
    let gate = gpu.new_event(false)?;

    // `stream` waits for what `from` holds now: an untimed event recorded there.
    let wait = |stream: &Stream, from: &Stream| -> Result<()> {
        gate.record(from)?;
        stream.wait_event(&gate)
    };
    // One timed round: `copy` and/or `kernel`, on one stream or two.
    let mut round =
        |copy: bool, kernel: bool, two_streams: bool, kernels_first: bool| -> Result<f64> {
            let first = &copy_stream;
            let second = if two_streams {
                &kernel_stream
            } else {
                &copy_stream
            };
            start.record(first)?;
            wait(second, first)?;
            let mut enqueue_copy = || gpu.upload_async_on(first, &pinned, &mut copy_dst);
            if copy && !kernels_first {
                enqueue_copy()?;
            }
            if kernel {
                for _ in 0..kernels {
                    crate::stencil::apply_into_on(
                        gpu,
                        second,
                        &stencil_in,
                        &mut stencil_out,
                        &taps,
                        Boundary::Zero,
                    )?;
                }
            }
            if copy && kernels_first {
                enqueue_copy()?;
            }
            wait(first, second)?;
            stop.record(first)?;
            // Device-wide synchronisation: every stream of the context.
            gpu.synchronize_device()?;
            Ok(f64::from(start.elapsed_ms(&stop)?) / 1e3)
        };
    let mut median = |copy, kernel, two, kernels_first| -> Result<f64> {
        round(copy, kernel, two, kernels_first)?; // warm-up
        let samples = (0..reps.max(1))
            .map(|_| round(copy, kernel, two, kernels_first))
            .collect::<Result<Vec<_>>>()?;
        Ok(Stats::from_samples(samples).median_s)
    };
    let copy_s = median(true, false, false, false)?;
    let kernel_s = median(false, true, false, false)?;
    let serial_s = median(true, true, false, false)?;
    let concurrent_s = median(true, true, true, false)?;
    let concurrent_kernels_first_s = median(true, true, true, true)?;
    let copied = gpu.download(&copy_dst)?;
    let correct = copied == host
        && check_stencil(&host, &taps, Boundary::Zero, &gpu.download(&stencil_out)?).passed;
    Ok(StreamOverlap {
        copy_bytes: n * size_of::<f32>(),
        n,
        copy_s,
        kernel_s,
        serial_s,
        concurrent_s,
        concurrent_kernels_first_s,
        kernels,
        correct,
    })
}
