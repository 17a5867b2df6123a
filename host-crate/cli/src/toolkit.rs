//! Finding the CUDA toolkit's programs (`nvcc` for the benchmark's baselines,
//! `compute-sanitizer` for `ferrocuda sanitize`, `ncu` for `ferrocuda profile`) on the machine
//! that runs ferrocuda, and reading what they printed.
use std::path::PathBuf;
use std::process::Command;

/// A toolkit program that answered `--version`.
#[derive(Clone, Debug)]
pub struct Tool {
    /// What to run.
    pub path: PathBuf,
    /// The last line of its `--version` output (`Build cuda_13.0.r13.0/compiler...`).
    pub version: String,
}

/// The first of `name` (on `PATH`), `$CUDA_HOME/bin/name` and `/usr/local/cuda/bin/name`
/// that runs and exits 0 with `--version`.
pub fn find_tool(name: &str) -> Option<Tool> {
    let mut candidates = vec![PathBuf::from(name)];
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        candidates.push(PathBuf::from(home).join("bin").join(name));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin").join(name));
    candidates.into_iter().find_map(|path| {
        let out = Command::new(&path).arg("--version").output().ok()?;
        out.status.success().then(|| Tool {
            version: String::from_utf8_lossy(&out.stdout)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or(name)
                .trim()
                .to_string(),
            path,
        })
    })
}

/// What a tool run under `ferrocuda` printed, stdout then stderr, as one text.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The last `n` lines of `text`, in order: what an error quotes of a tool that stopped.
pub fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}
