//! Running child processes the same way in every task.
//!
//! A command that does real work is echoed before it runs (`$ cargo …`), so a failure can be
//! reproduced by copy and paste, and a failure names the command and its exit status. Probes
//! (`rustc --print sysroot`, `nvidia-smi -L`) run quietly and hand back their output.

use std::env;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::error::{Context, Result, bail};

/// The command as a shell line: explicitly set variables (except `PATH`, too long to be
/// useful), the program, then the arguments, quoted where the shell would need it.
pub fn display(cmd: &Command) -> String {
    let envs = cmd
        .get_envs()
        .filter(|(name, _)| *name != "PATH")
        .filter_map(|(name, value)| Some(format!("{}={}", name.display(), quote(value?))));
    let words = std::iter::once(quote(cmd.get_program())).chain(cmd.get_args().map(quote));
    envs.chain(words).collect::<Vec<_>>().join(" ")
}

fn quote(word: &OsStr) -> String {
    let word = word.to_string_lossy();
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c));
    if plain {
        word.into_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Echoes `cmd`, runs it with inherited stdio and fails unless it exits successfully.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {}", display(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{}`", display(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", display(cmd));
    }
    Ok(())
}

/// Runs `cmd` quietly and returns its standard output; on failure the error carries its
/// standard error.
pub fn read(cmd: &mut Command) -> Result<String> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{}`", display(cmd)))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            display(cmd),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The first executable called `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file with an execute bit set.
pub fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}
