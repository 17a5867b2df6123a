//! The `transfer` family: copies between page-locked host memory and the device, and a copy
//! overlapped with kernels on two streams, against the link and CuPy in the same run.
//!
//! Per size (the `api` sizes, f32 elements):
//! - `upload_async_on` (host to device) and `download_async_on` (device to host) from and into
//!   a [`PinnedBuffer`](ferrocuda::PinnedBuffer), event-timed on the GPU's stream as the other
//!   families are; checked by the data that arrives;
//! - baselines: `link`, the time the PCIe link's rate takes for the bytes (its generation and
//!   width as `nvidia-smi` reports them now, after the line code), so that `xlink` is the share
//!   of the link the copy reached; `cupy`, CuPy's copies from and into pinned memory on a
//!   stream (`ndarray.set` / `ndarray.get`), event-timed by `transfer_baselines.py`.
//!
//! And one row, `copy + stencils on two streams`: the largest size's upload on one stream while
//! another runs stencils over a second array (the streams lesson, `ferrocuda streams`), its
//! median against the two on one stream (`serial`), with the share of the shorter part hidden.
use std::process::{Command, Stdio};

use ferrocuda::runtime::element::ElemType;
use ferrocuda::runtime::error::Result;
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lessons::lab::stream_overlap;
use ferrocuda_lessons::timing::{Stats, time_samples};

use super::api::api_input;
use super::report::{Baseline, BaselineCheck, Row};

/// The Python side, embedded so that the binary carries it to the GPU machine.
const PYTHON_BASELINES: &str = include_str!("transfer_baselines.py");

/// The variants of the family.
pub const UPLOAD: &str = "upload_async_on (pinned, host to device)";
/// See [`UPLOAD`].
pub const DOWNLOAD: &str = "download_async_on (pinned, device to host)";
/// See [`UPLOAD`].
pub const OVERLAP: &str = "copy + stencils on two streams";

/// Timed repetitions per transfer row.
const REPS: usize = 20;

fn row(variant: &str, n: usize, bytes: u64, stats: &Stats, passed: bool, check: String) -> Row {
    let median_us = stats.median_s * 1e6;
    Row {
        family: "transfer".into(),
        variant: variant.into(),
        ty: ElemType::F32.name().into(),
        n: n as u64,
        block: 0,
        grid: "-".into(),
        bytes,
        median_us,
        min_us: stats.min_s * 1e6,
        max_us: stats.max_s * 1e6,
        gbs: bytes as f64 / (median_us * 1e3),
        pct_copy: 0.0,
        passed,
        check,
        baselines: Vec::new(),
    }
}

/// A copy row of `n` f32 from its samples (seconds), checked by whether the data `arrived`.
fn copy_row(variant: &str, n: usize, samples: Vec<f64>, arrived: bool) -> Row {
    let check = if arrived {
        "the data arrived"
    } else {
        "the data differs"
    };
    let bytes = (n * size_of::<f32>()) as u64;
    row(
        variant,
        n,
        bytes,
        &Stats::from_samples(samples),
        arrived,
        check.into(),
    )
}

/// The PCIe link of device `ordinal` now, as `nvidia-smi` reports it: (generation, lanes).
pub fn pcie_link(ordinal: u32) -> std::result::Result<(u32, u32), String> {
    let out = Command::new("nvidia-smi")
        .args([
            "-i",
            &ordinal.to_string(),
            "--query-gpu=pcie.link.gen.current,pcie.link.width.current",
            "--format=csv,noheader,nounits",
        ])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("nvidia-smi not runnable: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.trim().split(',').map(|f| f.trim().parse::<u32>());
    match (fields.next(), fields.next()) {
        (Some(Ok(generation)), Some(Ok(lanes))) if out.status.success() => Ok((generation, lanes)),
        _ => Err(format!("nvidia-smi answered {:?}", text.trim())),
    }
}

/// Bytes per second one direction of a PCIe link carries after its line code: 2.5, 5, 8, 16,
/// 32 and 64 GT/s per lane for generations 1 to 6, 8b/10b for the first two, 128b/130b after
/// (generation 6's FLIT code is counted as 128b/130b too: within 2 %).
pub fn pcie_bytes_per_s(generation: u32, lanes: u32) -> Option<f64> {
    let (gts, code) = match generation {
        1 => (2.5, 0.8),
        2 => (5.0, 0.8),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        6 => (64.0, 128.0 / 130.0),
        _ => return None,
    };
    Some(gts * 1e9 * code * f64::from(lanes) / 8.0)
}

/// Measures the family at `sizes`; `overlap_reps` timed rounds of the overlap row.
pub fn measure(gpu: &Gpu, sizes: &[usize], overlap_reps: usize) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &n in sizes {
        let host = api_input(n);
        let pinned = gpu.pin(&host)?;
        let mut device = gpu.alloc::<f32>(n, "transfer: device side")?;
        let mut back = gpu.alloc_pinned::<f32>(n)?;
        let up = time_samples(
            gpu,
            3,
            REPS,
            |_| Ok(()),
            |_| gpu.upload_async_on(gpu.stream(), &pinned, &mut device),
        )?;
        rows.push(copy_row(UPLOAD, n, up, gpu.download(&device)? == host));
        let down = time_samples(
            gpu,
            3,
            REPS,
            |_| Ok(()),
            |_| gpu.download_async_on(gpu.stream(), &device, &mut back),
        )?;
        rows.push(copy_row(DOWNLOAD, n, down, back.as_slice()? == &host[..]));
    }
    if let Some(&n) = sizes.iter().max() {
        // Stencils over as many elements as the copy moves; as many launches as make the two
        // parts of a size (a stencil moves twice the bytes at several times the link's rate).
        let kernels = if gpu.is_cpu() { 2 } else { 32 };
        let o = stream_overlap(gpu, n, kernels, overlap_reps)?;
        let best = o.concurrent_s.min(o.concurrent_kernels_first_s);
        let stats = Stats::from_samples(vec![best]);
        let mut r = row(
            OVERLAP,
            n,
            o.copy_bytes as u64,
            &stats,
            o.correct,
            format!(
                "{kernels} stencils; copy alone {:.1} us, stencils alone {:.1} us; {:.0}% of the \
                 shorter hidden",
                o.copy_s * 1e6,
                o.kernel_s * 1e6,
                o.hidden() * 100.0
            ),
        );
        r.baselines.push(Baseline::measured(
            "serial",
            o.serial_s * 1e6,
            best * 1e6,
            BaselineCheck::NotChecked,
        ));
        rows.push(r);
    }
    Ok(rows)
}

/// Attaches the `link` baseline (from `nvidia-smi`) to the copy rows; returns what it found or
/// why there is none.
pub fn attach_link(gpu: &Gpu, rows: &mut [Row]) -> String {
    if gpu.is_cpu() {
        return "none: the CPU device has no link".into();
    }
    let (generation, lanes) = match pcie_link(gpu.props().ordinal) {
        Ok(link) => link,
        Err(why) => return format!("none: {why}"),
    };
    let Some(rate) = pcie_bytes_per_s(generation, lanes) else {
        return format!("none: PCIe generation {generation} is not known here");
    };
    for r in rows
        .iter_mut()
        .filter(|r| r.variant == UPLOAD || r.variant == DOWNLOAD)
    {
        let link_us = r.bytes as f64 / rate * 1e6;
        r.baselines.push(Baseline::measured(
            "link",
            link_us,
            r.median_us,
            BaselineCheck::NotChecked,
        ));
    }
    format!(
        "PCIe gen {generation} x{lanes} now: {:.1} GB/s each way",
        rate / 1e9
    )
}

/// Runs `transfer_baselines.py` for `sizes` and attaches CuPy's medians to the copy rows;
/// returns what ran, or why nothing did.
pub fn attach_python(rows: &mut [Row], sizes: &[usize]) -> std::result::Result<String, String> {
    let text = super::api::run_python(PYTHON_BASELINES, REPS, sizes)?;
    let mut version = None;
    // Lines: `version cupy <version>` and `cupy <h2d|d2h> <n> <median_us> <checksum>`.
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["version", lib, v] => version = Some(format!("{lib} {v}")),
            [lib, direction, n, us, sum] => {
                let (Ok(n), Ok(us), Ok(sum)) =
                    (n.parse::<u64>(), us.parse::<f64>(), sum.parse::<f64>())
                else {
                    continue;
                };
                let want: f64 = super::api::python_expected(n as usize).0;
                let check = if sum == want {
                    BaselineCheck::Passed(format!("{sum} arrived"))
                } else {
                    BaselineCheck::Failed(format!("checksum {sum}, want {want}"))
                };
                let variant = match *direction {
                    "h2d" => UPLOAD,
                    "d2h" => DOWNLOAD,
                    _ => continue,
                };
                for r in rows.iter_mut().filter(|r| r.n == n && r.variant == variant) {
                    r.baselines
                        .push(Baseline::measured(lib, us, r.median_us, check.clone()));
                }
            }
            _ => {}
        }
    }
    version.ok_or_else(|| "python3 has no cupy".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates_follow_the_generations() {
        let gen4 = pcie_bytes_per_s(4, 16).unwrap();
        assert!((gen4 / 1e9 - 31.5).abs() < 0.1, "{gen4}");
        assert!((pcie_bytes_per_s(5, 16).unwrap() / gen4 - 2.0).abs() < 1e-9);
        assert!((pcie_bytes_per_s(2, 16).unwrap() / 1e9 - 8.0).abs() < 1e-9);
        assert_eq!(pcie_bytes_per_s(9, 16), None);
    }
}
