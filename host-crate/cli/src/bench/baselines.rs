//! The CUDA C and CUB baselines, compiled with nvcc for the device and run beside the Rust kernels.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::report::{Baseline, BenchConfig, Row};
use ferrocuda::reduce::ReduceVariant;
use ferrocuda::runtime::element::ElemType;
use ferrocuda::runtime::gpu::Gpu;

/// The CUDA C and CUB programs, compiled with nvcc for this device.
pub(super) struct Baselines {
    textbook: PathBuf,
    cub: PathBuf,
    pub(super) nvcc_version: String,
}

const COMMON_CUH: &str = include_str!("../../baselines/common.cuh");
const TEXTBOOK_CU: &str = include_str!("../../baselines/textbook.cu");
const CUB_CU: &str = include_str!("../../baselines/cub_reduce.cu");

impl Baselines {
    pub(super) fn prepare(gpu: &Gpu, dir: &Path) -> std::result::Result<Self, String> {
        let nvcc = crate::toolkit::find_tool("nvcc")
            .ok_or("nvcc not found (the baselines need the CUDA toolkit)")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let (major, minor) = gpu.props().compute_capability;
        let arch = format!("-arch=sm_{major}{minor}");
        let common = dir.join("common.cuh");
        std::fs::write(&common, COMMON_CUH)
            .map_err(|e| format!("writing {}: {e}", common.display()))?;
        let build = |name: &str, source: &str| -> std::result::Result<PathBuf, String> {
            let src = dir.join(format!("{name}.cu"));
            let exe = dir.join(name);
            std::fs::write(&src, source).map_err(|e| format!("writing {}: {e}", src.display()))?;
            let out = Command::new(&nvcc.path)
                .args(["-O3", "-std=c++17", &arch, "-o"])
                .arg(&exe)
                .arg(&src)
                .output()
                .map_err(|e| format!("running nvcc: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "nvcc failed on {name}.cu: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(exe)
        };
        Ok(Self {
            textbook: build("textbook", TEXTBOOK_CU)?,
            cub: build("cub_reduce", CUB_CU)?,
            nvcc_version: nvcc.version,
        })
    }

    /// Runs the baselines for the rows of one (type, n) and attaches their times.
    pub(super) fn attach(&self, cfg: &BenchConfig, ty: ElemType, n: usize, rows: &mut [Row]) {
        // As many timed runs as each ferrocuda row gets over its rounds.
        let reps = (cfg.reps * cfg.rounds.max(1)).to_string();
        let specs = |family: &str, names: &[&str]| -> Vec<String> {
            rows.iter()
                .filter(|r| r.family == family && names.iter().any(|n| r.variant == *n))
                .map(|r| {
                    format!(
                        "{}:{}",
                        r.variant.trim_end_matches(&format!("_r{}", cfg.radius)),
                        r.block
                    )
                })
                .collect()
        };
        let textbook_reduce: Vec<&str> = ReduceVariant::ALL
            .iter()
            .filter(|v| **v != ReduceVariant::Fast)
            .map(|v| v.name())
            .collect();
        let reduce_specs = specs("reduce", &textbook_reduce);
        let mut times = BTreeMap::new();
        if !reduce_specs.is_empty() {
            let mut c = Command::new(&self.textbook);
            c.args(["reduce", ty.name(), &n.to_string(), &reps])
                .args(&reduce_specs);
            parse_baseline(&mut c, "reduce", &mut times);
        }
        if matches!(ty, ElemType::F32 | ElemType::F64 | ElemType::I32) {
            let stencil_names: Vec<String> = ["naive", "shared"]
                .iter()
                .map(|v| format!("{v}_r{}", cfg.radius))
                .collect();
            let names: Vec<&str> = stencil_names.iter().map(String::as_str).collect();
            let stencil_specs = specs("stencil", &names);
            if !stencil_specs.is_empty() {
                let mut c = Command::new(&self.textbook);
                c.args([
                    "stencil",
                    ty.name(),
                    &n.to_string(),
                    &cfg.radius.to_string(),
                    &reps,
                ])
                .args(&stencil_specs);
                parse_baseline(&mut c, "stencil", &mut times);
            }
        }
        for r in rows.iter_mut() {
            let key = (
                r.family.clone(),
                r.variant
                    .trim_end_matches(&format!("_r{}", cfg.radius))
                    .to_string(),
                r.block,
            );
            if let Some(&us) = times.get(&key) {
                r.baselines.push(Baseline {
                    name: "cuda-c".into(),
                    median_us: us,
                    speedup: us / r.median_us,
                });
            }
        }
        if let Some(fast) = rows
            .iter_mut()
            .find(|r| r.family == "reduce" && r.variant == "fast")
        {
            let out = Command::new(&self.cub)
                .args(["sum", ty.name(), &n.to_string(), &reps])
                .output();
            if let Some(us) = out
                .ok()
                .and_then(|o| median_of(&String::from_utf8_lossy(&o.stdout)))
            {
                fast.baselines.push(Baseline {
                    name: "cub".into(),
                    median_us: us,
                    speedup: us / fast.median_us,
                });
            }
        }
    }
}

fn median_of(line: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("median_us="))
        .and_then(|v| v.parse().ok())
}

/// Runs a baseline command and records `(family, variant, block) -> median us` per line.
fn parse_baseline(c: &mut Command, family: &str, times: &mut BTreeMap<(String, String, u32), f64>) {
    let Ok(out) = c.output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((spec, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some((variant, block)) = spec.split_once(':') else {
            continue;
        };
        if let (Ok(block), Some(us)) = (block.parse(), median_of(rest)) {
            times.insert((family.to_string(), variant.to_string(), block), us);
        }
    }
}
