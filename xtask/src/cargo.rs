//! The workspace's own (host) cargo: building, and finding what a build produced.
//!
//! Executables are found through cargo's JSON messages rather than by guessing paths under
//! `target/`, so `CARGO_TARGET_DIR`, profiles and hash suffixes need no special cases.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::{cmd, json};

/// A cargo command run in `root`: the cargo that runs this xtask (`$CARGO`), so the pinned
/// toolchain builds everything.
pub fn cargo(root: &Path) -> Command {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.current_dir(root);
    cargo
}

/// An executable a cargo build produced.
pub struct Artifact {
    /// The package name, e.g. `ferrocuda-tests`.
    pub package: String,
    /// The target name, e.g. `ferrocuda` or an integration test's file stem.
    pub target: String,
    /// The target kinds: `lib`, `bin`, `test`, `example`, ….
    pub kinds: Vec<String>,
    /// Built in test mode (`profile.test`): unit tests and integration tests, `harness =
    /// false` ones included; false for plain binaries, such as those built for
    /// `CARGO_BIN_EXE_*`.
    pub test: bool,
    pub executable: PathBuf,
}

/// Runs a cargo build command (`build`, `test --no-run`, …) with JSON messages and returns
/// the executables it produced. Diagnostics still reach the terminal, rendered as usual.
pub fn executables(root: &Path, command: &mut Command) -> Result<Vec<Artifact>> {
    let packages = package_names(root)?;
    command
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    eprintln!("$ {}", cmd::display(command));
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start `{}`", cmd::display(command)))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut artifacts = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Ok(message) = json::parse(&line) else {
            // Not a cargo message: a build script or tool printing to stdout.
            println!("{line}");
            continue;
        };
        if let Some(artifact) = artifact(&message, &packages) {
            artifacts.push(artifact);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{}` failed ({status})", cmd::display(command));
    }
    Ok(artifacts)
}

fn artifact(message: &json::Value, packages: &HashMap<String, String>) -> Option<Artifact> {
    if message.get("reason")?.as_str()? != "compiler-artifact" {
        return None;
    }
    let executable = PathBuf::from(message.get("executable")?.as_str()?);
    let target = message.get("target")?;
    let package_id = message.get("package_id")?.as_str()?;
    Some(Artifact {
        package: packages.get(package_id)?.clone(),
        target: target.get("name")?.as_str()?.to_owned(),
        kinds: target
            .get("kind")?
            .items()
            .iter()
            .filter_map(|k| Some(k.as_str()?.to_owned()))
            .collect(),
        test: message.get("profile")?.get("test")?.as_bool()?,
        executable,
    })
}

/// Package id to package name, for the workspace members (`cargo metadata --no-deps`).
fn package_names(root: &Path) -> Result<HashMap<String, String>> {
    let metadata = cmd::read(cargo(root).args(["metadata", "--no-deps", "--format-version", "1"]))?;
    let metadata = json::parse(&metadata).context("parsing `cargo metadata` output")?;
    let packages = metadata
        .get("packages")
        .context("`cargo metadata` lists no packages")?;
    Ok(packages
        .items()
        .iter()
        .filter_map(|package| {
            Some((
                package.get("id")?.as_str()?.to_owned(),
                package.get("name")?.as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// The release `ferrocuda` binary.
pub fn build_ferrocuda(root: &Path) -> Result<Artifact> {
    let mut build = cargo(root);
    build.args([
        "build",
        "--release",
        "--package",
        "ferrocuda-cli",
        "--bin",
        "ferrocuda",
    ]);
    executables(root, &mut build)?
        .into_iter()
        .find(|artifact| {
            artifact.kinds.iter().any(|kind| kind == "bin") && artifact.target == "ferrocuda"
        })
        .context("cargo built no `ferrocuda` binary")
}
