//! The waves lesson (`ferrocuda waves`, 沐曦 MXMACA 教材第5章): how a block is cut into waves of
//! the device's width, `__syncwave` with a 64-bit mask, divergence inside one wave, and the
//! occupancy API counting waves. The same kernels run on NVIDIA's 32-wide warps and on the
//! CPU device's 64-wide waves (`--device cpu:64`); every result is checked against what the
//! width implies.
use ferrocuda::runtime::config::LaunchConfig;
use ferrocuda::runtime::error::{Error, Result};
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lesson_kernels::lab::{WAVE_LESSON_MAX_BLOCK, wave_halves, wave_layout, wave_rotate};

use crate::occupancy::{self, Occupancy};

/// The notes' block: 200 threads (64 + 64 + 64 + 8 on a 64-wide device).
pub const NOTES_BLOCK: u32 = 200;

/// Block sizes of the occupancy table.
pub const OCCUPANCY_BLOCKS: [u32; 4] = [64, 200, 256, 1024];

/// What the lesson saw, each part checked.
#[derive(Clone, Debug)]
pub struct Waves {
    /// The device's wave width (`warpSize`).
    pub width: u32,
    /// Threads in the block.
    pub block: u32,
    /// Per wave: its first thread, its last thread, its lanes.
    pub waves: Vec<(u32, u32, u32)>,
    /// Per wave: the ballot of `lane < 32` (the divergence lesson).
    pub first_half: Vec<u64>,
    /// Whether every thread read its next lane's value after `syncwave`.
    pub rotate_ok: bool,
    /// Whether every thread's branch wrote what it must.
    pub halves_ok: bool,
    /// Occupancy of `wave_layout` at [`OCCUPANCY_BLOCKS`].
    pub occupancy: Vec<Occupancy>,
    /// Everything that differs from what the width implies (empty when all is right).
    pub mismatches: Vec<String>,
}

/// Runs the lesson with `block` threads (1 to 1024).
pub fn run(gpu: &Gpu, block: u32) -> Result<Waves> {
    if block == 0 || block as usize > WAVE_LESSON_MAX_BLOCK {
        return Err(Error::InvalidArgument {
            what: format!(
                "`{}`: a block of {block} threads; the lesson takes 1 to {WAVE_LESSON_MAX_BLOCK}",
                wave_layout().symbol()
            ),
        });
    }
    let width = gpu.props().warp_size;
    let b = block as usize;
    let count = b.div_ceil(width as usize);
    let config = LaunchConfig::linear(1, block, 0);
    let mut mismatches = Vec::new();

    // How the block is cut into waves.
    let out = gpu.upload(&vec![u32::MAX; b + b.div_ceil(32)], "wave layout output")?;
    let k = crate::kernel(gpu, wave_layout())?;
    // SAFETY: `out` holds `B + ceil(B / 32)` words.
    unsafe { k.launch_and_wait(config, (out.as_device_ptr(),))? };
    let words = gpu.download(&out)?;
    for (t, &w) in words[..b].iter().enumerate() {
        let want = (t as u32 / width) << 16 | t as u32 % width;
        if w != want {
            mismatches.push(format!(
                "thread {t}: wave {} lane {}, expected wave {} lane {}",
                w >> 16,
                w & 0xFFFF,
                want >> 16,
                want & 0xFFFF
            ));
        }
    }
    let waves: Vec<(u32, u32, u32)> = (0..count)
        .map(|i| {
            let first = i as u32 * width;
            let last = (first + width).min(block) - 1;
            (first, last, words[b + i])
        })
        .collect();
    for (i, &(first, last, lanes)) in waves.iter().enumerate() {
        if lanes != last - first + 1 {
            mismatches.push(format!(
                "wave {i}: {lanes} lanes, expected {}",
                last - first + 1
            ));
        }
    }

    // `syncwave`: each thread reads the next lane's slot.
    let out = gpu.upload(&vec![u32::MAX; b], "wave rotate output")?;
    let k = crate::kernel(gpu, wave_rotate())?;
    // SAFETY: `out` holds `B` words.
    unsafe { k.launch_and_wait(config, (out.as_device_ptr(),))? };
    let got = gpu.download(&out)?;
    let mut rotate_ok = true;
    for (t, &v) in got.iter().enumerate() {
        let (first, last, _) = waves[t / width as usize];
        let lanes = last - first + 1;
        let next = first + (t as u32 - first + 1) % lanes;
        if v != 3 * next + 1 {
            rotate_ok = false;
            if mismatches.len() < 16 {
                mismatches.push(format!(
                    "syncwave: thread {t} read {v}, expected {} (lane {next}'s)",
                    3 * next + 1
                ));
            }
        }
    }

    // Divergence inside a wave.
    let ballots = gpu.upload(&vec![u64::MAX; b.div_ceil(32)], "wave ballots")?;
    let c = gpu.upload(&vec![u32::MAX; b], "wave branch results")?;
    let k = crate::kernel(gpu, wave_halves())?;
    // SAFETY: `ballots` holds `ceil(B / 32)` words, `c` holds `B`.
    unsafe { k.launch_and_wait(config, (ballots.as_device_ptr(), c.as_device_ptr()))? };
    let first_half: Vec<u64> = gpu.download(&ballots)?[..count].to_vec();
    for (i, &(first, last, _)) in waves.iter().enumerate() {
        let lanes = last - first + 1;
        let want = (0..lanes.min(32)).fold(0u64, |m, l| m | 1 << l);
        if first_half[i] != want {
            mismatches.push(format!(
                "wave {i}: ballot(lane < 32) = {:#x}, expected {want:#x}",
                first_half[i]
            ));
        }
    }
    let c = gpu.download(&c)?;
    let halves_ok = c.iter().enumerate().all(|(t, &v)| {
        let t = t as u32;
        v == if t % width < 32 { t + 1000 } else { 2 * t }
    });
    if !halves_ok {
        mismatches.push("a thread's branch wrote the wrong value".to_owned());
    }

    let occupancy = OCCUPANCY_BLOCKS
        .into_iter()
        .map(|blk| occupancy::occupancy(gpu, wave_layout().info(), blk))
        .collect::<Result<Vec<_>>>()?;
    for o in &occupancy {
        if o.active_blocks != o.computed_blocks {
            mismatches.push(format!(
                "occupancy at {} threads: the driver says {} blocks per SM, the calculation {}",
                o.block, o.active_blocks, o.computed_blocks
            ));
        }
    }
    Ok(Waves {
        width,
        block,
        waves,
        first_half,
        rotate_ok,
        halves_ok,
        occupancy,
        mismatches,
    })
}
