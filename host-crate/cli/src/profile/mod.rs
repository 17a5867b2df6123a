//! `ferrocuda profile`: the metrics the notes profile with (《CUDA C编程权威指南》3.4 and
//! 《CUDA执行模型》: nvprof's `achieved_occupancy`, `gld_efficiency`, `gld_throughput`,
//! `inst_per_warp`, `branch_efficiency`, and from 《CUDA执行模型》's table `gst_throughput` and
//! `shared_efficiency`), collected with Nsight Compute (`ncu`), whose names 《CUDA执行模型》 maps
//! them to, for the textbook reduction ladder, the divergence kernels and the stencils.
//!
//! The driver re-runs this binary (`ferrocuda profile-cases`) under `ncu --metrics ...`, parses
//! its report ([`parse_report`]) and prints one row per kernel beside the notes' own figures
//! ([`NOTES`]).

/// The Nsight Compute metrics collected, each with what it stands for.
pub const METRICS: [(&str, &str); 10] = [
    ("gpu__time_duration.sum", "kernel time"),
    (
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "achieved_occupancy",
    ),
    (
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
        "gld_efficiency",
    ),
    (
        "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum.per_second",
        "gld_throughput",
    ),
    (
        "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum.per_second",
        "gst_throughput",
    ),
    (
        "smsp__sass_average_data_bytes_per_wavefront_mem_shared.pct",
        "shared_efficiency",
    ),
    ("smsp__inst_executed.sum", "inst_per_warp (numerator)"),
    ("smsp__warps_launched.sum", "inst_per_warp (denominator)"),
    (
        "smsp__sass_branch_targets.sum",
        "branch_efficiency (all branches)",
    ),
    (
        "smsp__sass_branch_targets_threads_divergent.sum",
        "branch_efficiency (divergent)",
    ),
];

/// Kernels that run in the profiled program but are not among its cases: the blocking kernel
/// that [`timing`](ferrocuda_lessons::timing) launches before a timed run.
pub const NOT_CASES: [&str; 1] = ["timing_spin"];

/// The `--metrics` argument of `ncu`.
pub fn metrics_argument() -> String {
    METRICS.map(|(m, _)| m).join(",")
}

/// One kernel launch of an `ncu` report: its name, launch shape and metric values, each in
/// the report's base unit (seconds for times, bytes/second for throughputs, percent).
#[derive(Clone, Debug, PartialEq)]
pub struct Profiled {
    /// The kernel's name as `ncu` prints it.
    pub kernel: String,
    /// `(grid)x(block)` as printed.
    pub shape: String,
    /// `(metric, value)` in base units.
    pub metrics: Vec<(String, f64)>,
}

impl Profiled {
    /// The value of `metric`, if the report has it.
    pub fn get(&self, metric: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(m, _)| m == metric)
            .map(|&(_, v)| v)
    }

    /// nvprof's `inst_per_warp`: instructions executed over warps launched.
    pub fn inst_per_warp(&self) -> Option<f64> {
        Some(self.get("smsp__inst_executed.sum")? / self.get("smsp__warps_launched.sum")?)
    }

    /// nvprof's `branch_efficiency`: the share of branches that did not diverge, in percent.
    pub fn branch_efficiency(&self) -> Option<f64> {
        let all = self.get("smsp__sass_branch_targets.sum")?;
        let divergent = self.get("smsp__sass_branch_targets_threads_divergent.sum")?;
        (all > 0.0).then(|| 100.0 * (all - divergent) / all)
    }
}

/// A value with its unit as `ncu` prints it, in base units: `us` and `ms` to seconds,
/// `Kbyte/second` and the like to bytes/second, thousands separators dropped.
fn base_value(unit: &str, value: &str) -> Option<f64> {
    let v: f64 = value.replace(',', "").parse().ok()?;
    let scale = match unit {
        "ns" | "nsecond" => 1e-9,
        "us" | "usecond" => 1e-6,
        "ms" | "msecond" => 1e-3,
        "s" | "second" => 1.0,
        u if u.ends_with("byte/second") || u.ends_with("byte/s") => match u.chars().next() {
            Some('K') => 1e3,
            Some('M') => 1e6,
            Some('G') => 1e9,
            Some('T') => 1e12,
            _ => 1.0,
        },
        _ => 1.0,
    };
    Some(v * scale)
}

/// Parses `ncu`'s default report: a header line per launch (`  name (g, 1, 1)x(b, 1, 1),
/// Context 1, Stream 13, Device 0, CC 9.0`), then `Metric Name / Metric Unit / Metric Value`
/// rows. Lines of the profiled program and `==PROF==` lines are skipped.
pub fn parse_report(text: &str) -> Vec<Profiled> {
    let mut launches: Vec<Profiled> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if line.starts_with("  ")
            && !line.starts_with("    ")
            && trimmed.contains(")x(")
            && trimmed.contains(", Context ")
        {
            let (head, _) = trimmed.split_once(", Context ").unwrap_or((trimmed, ""));
            let (kernel, shape) = head.split_once(" (").unwrap_or((head, ""));
            launches.push(Profiled {
                kernel: kernel.to_string(),
                shape: format!("({shape}"),
                metrics: Vec::new(),
            });
            continue;
        }
        let Some(current) = launches.last_mut() else {
            continue;
        };
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        if words.len() < 2 || !words[0].contains("__") {
            continue;
        }
        let (unit, value) = if words.len() >= 3 {
            (words[words.len() - 2], words[words.len() - 1])
        } else {
            ("", words[1])
        };
        if let Some(v) = base_value(unit, value) {
            current.metrics.push((words[0].to_string(), v));
        }
    }
    launches
}

/// One kernel of the book's nvprof table (《CUDA C编程权威指南》3.4, `reduceInteger` on a
/// Quadro P2000, 16 Mi `int`, block 512), as printed there.
#[derive(Clone, Copy, Debug)]
pub struct NotesRow {
    /// Our variant name.
    pub variant: &'static str,
    /// `achieved_occupancy` (a fraction).
    pub achieved_occupancy: f64,
    /// `inst_per_warp`.
    pub inst_per_warp: f64,
    /// `gld_efficiency`, percent.
    pub gld_efficiency: f64,
    /// `gld_throughput`, GB/s.
    pub gld_throughput_gbs: f64,
}

/// The nvprof metrics of 《CUDA C编程权威指南》3.4, copied from its output (one run per kernel).
pub const NOTES: [NotesRow; 9] = [
    NotesRow {
        variant: "neighbored",
        achieved_occupancy: 0.952602,
        inst_per_warp: 412.0,
        gld_efficiency: 25.02,
        gld_throughput_gbs: 71.861,
    },
    NotesRow {
        variant: "neighbored_less",
        achieved_occupancy: 0.928851,
        inst_per_warp: 145.5625,
        gld_efficiency: 25.02,
        gld_throughput_gbs: 120.87,
    },
    NotesRow {
        variant: "interleaved",
        achieved_occupancy: 0.916347,
        inst_per_warp: 117.8125,
        gld_efficiency: 96.15,
        gld_throughput_gbs: 39.495,
    },
    NotesRow {
        variant: "unrolling2",
        achieved_occupancy: 0.928883,
        inst_per_warp: 138.8125,
        gld_efficiency: 98.04,
        gld_throughput_gbs: 70.189,
    },
    NotesRow {
        variant: "unrolling4",
        achieved_occupancy: 0.931381,
        inst_per_warp: 153.8125,
        gld_efficiency: 98.68,
        gld_throughput_gbs: 92.195,
    },
    NotesRow {
        variant: "unrolling8",
        achieved_occupancy: 0.933528,
        inst_per_warp: 177.8125,
        gld_efficiency: 99.21,
        gld_throughput_gbs: 112.11,
    },
    NotesRow {
        variant: "unroll_warps8",
        achieved_occupancy: 0.643794,
        inst_per_warp: 118.0,
        gld_efficiency: 99.43,
        gld_throughput_gbs: 125.17,
    },
    NotesRow {
        variant: "complete_unroll_warps8",
        achieved_occupancy: 0.631070,
        inst_per_warp: 119.5,
        gld_efficiency: 99.43,
        gld_throughput_gbs: 123.77,
    },
    NotesRow {
        variant: "complete_unroll",
        achieved_occupancy: 0.632865,
        inst_per_warp: 112.5,
        gld_efficiency: 99.43,
        gld_throughput_gbs: 124.54,
    },
];

/// The notes' row for a kernel symbol (`reduce_neighbored_i32` -> `neighbored`).
pub fn notes_row(symbol: &str) -> Option<&'static NotesRow> {
    let stem = symbol.strip_prefix("reduce_")?;
    NOTES
        .iter()
        .filter(|r| stem.starts_with(r.variant))
        .max_by_key(|r| r.variant.len())
}

/// The report's table: one row per profiled kernel (its first launch; [`NOT_CASES`] left out),
/// with the notes' figures beside the reduction ladder's rows. A kernel with no global load
/// shows `-` for load efficiency and throughput (`ncu` reports 0 there), and a kernel without
/// shared memory `-` for shared efficiency (0 there: no wavefront to be efficient with). `None`
/// when the report holds no launch of a case.
pub fn table(launches: &[Profiled]) -> Option<String> {
    if !launches
        .iter()
        .any(|l| !NOT_CASES.contains(&l.kernel.as_str()))
    {
        return None;
    }
    use std::fmt::Write as _;
    let mut seen = std::collections::BTreeSet::new();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| kernel | launch | time us | achieved occupancy % | gld efficiency % | gld throughput GB/s | gst throughput GB/s | shared efficiency % | inst per warp | branch efficiency % | notes: occupancy % | notes: gld efficiency % | notes: inst per warp |"
    );
    let _ = writeln!(
        t,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let f = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for l in launches {
        if NOT_CASES.contains(&l.kernel.as_str()) || !seen.insert(l.kernel.clone()) {
            continue;
        }
        let notes = notes_row(&l.kernel);
        let load_throughput = l.get("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum.per_second");
        let no_loads = load_throughput == Some(0.0);
        let load_throughput = load_throughput.filter(|_| !no_loads);
        let load_efficiency = l
            .get("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
            .filter(|_| !no_loads);
        let shared_efficiency = l
            .get("smsp__sass_average_data_bytes_per_wavefront_mem_shared.pct")
            .filter(|&e| e > 0.0);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.kernel,
            l.shape,
            f(l.get("gpu__time_duration.sum").map(|s| s * 1e6), 2),
            f(
                l.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
                1
            ),
            f(load_efficiency, 1),
            f(load_throughput.map(|b| b / 1e9), 0),
            f(
                l.get("l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum.per_second")
                    .map(|b| b / 1e9),
                0
            ),
            f(shared_efficiency, 1),
            f(l.inst_per_warp(), 1),
            f(l.branch_efficiency(), 1),
            f(notes.map(|r| 100.0 * r.achieved_occupancy), 1),
            f(notes.map(|r| r.gld_efficiency), 2),
            f(notes.map(|r| r.inst_per_warp), 1),
        );
    }
    Some(t)
}
