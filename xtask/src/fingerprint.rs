//! A fingerprint of everything that decides which PTX `cargo xtask build-ptx` produces.
//!
//! `build-ptx` writes it as the `fingerprint` line of `target/ptx/manifest.txt`. The host
//! crate's build script includes this very file
//! (`#[path = "../xtask/src/fingerprint.rs"] mod fingerprint;`), recomputes it and compares, so
//! a host build notices PTX that is older than the kernel sources instead of embedding it.
//! Sharing one file is what keeps the two computations identical; it is also why this file
//! uses nothing but `std`, and why every item is either public API or used by it (the build
//! script compiles it as a private module, where anything unused would warn).
//!
//! The hash is 64-bit FNV-1a: the job is to notice edits, not to resist an adversary, and a
//! dozen lines here beat a hashing dependency in both crates.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The GPU architectures PTX is built for, lowest first. This is the one definition of the
/// list: `build-ptx` builds these by default, and the host loads the highest one that is not
/// above the device's compute capability (PTX for `sm_90` does not load on an `sm_80` device).
pub const ARCHS: &[&str] = &["sm_70", "sm_80", "sm_90"];

/// The kernels crate's directory, relative to the workspace root.
const KERNELS_DIR: &str = "kernels-crate";

/// The toolchain pin: another nightly means another `core` and another LLVM, so other PTX.
const TOOLCHAIN_FILE: &str = "rust-toolchain.toml";

/// Every file the PTX depends on, as `workspace_root` joined with a relative path, in the
/// order they are hashed: the files under `kernels-crate/src` (sorted, dot-files such as editor
/// swap files left out), then `kernels-crate/Cargo.toml`, then `rust-toolchain.toml`.
///
/// A build script should emit `cargo:rerun-if-changed` for each of these and for the directory
/// `kernels-crate/src` itself, so that a new source file also triggers a rerun.
pub fn kernel_source_files(workspace_root: &Path) -> io::Result<Vec<PathBuf>> {
    let kernels = workspace_root.join(KERNELS_DIR);
    let mut files = Vec::new();
    collect_files(&kernels.join("src"), &mut files)?;
    files.sort();
    files.push(kernels.join("Cargo.toml"));
    files.push(workspace_root.join(TOOLCHAIN_FILE));
    Ok(files)
}

/// The FNV-1a 64 hash of the relative path and contents of each of
/// [`kernel_source_files`], then of [`ARCHS`] joined with commas. Each piece is prefixed with
/// its length, so moving bytes between a path and a file's contents changes the hash.
/// Paths are hashed with `/` separators whatever the platform.
pub fn kernels_fingerprint(workspace_root: &Path) -> io::Result<u64> {
    let mut hash = Fnv1a64::new();
    for file in kernel_source_files(workspace_root)? {
        let relative = file.strip_prefix(workspace_root).unwrap_or(&file);
        let relative: Vec<_> = relative
            .components()
            .map(|part| part.as_os_str().to_string_lossy())
            .collect();
        hash.write_piece(relative.join("/").as_bytes());
        let contents = fs::read(&file).map_err(|err| {
            io::Error::new(err.kind(), format!("reading {}: {err}", file.display()))
        })?;
        hash.write_piece(&contents);
    }
    hash.write_piece(ARCHS.join(",").as_bytes());
    Ok(hash.finish())
}

/// Appends every file below `dir` (recursively, skipping dot-entries) to `files`.
fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    let entries = fs::read_dir(dir)
        .map_err(|err| io::Error::new(err.kind(), format!("listing {}: {err}", dir.display())))?;
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// 64-bit FNV-1a (<http://www.isthe.com/chongo/tech/comp/fnv/>).
struct Fnv1a64(u64);

impl Fnv1a64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Self {
        Self(Self::OFFSET_BASIS)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(Self::PRIME);
        }
    }

    /// Hashes the length of `bytes` (little-endian `u64`), then `bytes`.
    fn write_piece(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        let digest = |bytes: &[u8]| {
            let mut hash = Fnv1a64::new();
            hash.write(bytes);
            hash.finish()
        };
        assert_eq!(digest(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(digest(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(digest(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fingerprint_changes_with_a_kernel_source_and_ignores_dot_files() {
        let root = std::env::temp_dir().join(format!("xtask-fingerprint-{}", std::process::id()));
        let src = root.join(KERNELS_DIR).join("src");
        fs::create_dir_all(src.join("device")).unwrap();
        fs::write(root.join(KERNELS_DIR).join("Cargo.toml"), "[package]").unwrap();
        fs::write(root.join(TOOLCHAIN_FILE), "[toolchain]").unwrap();
        fs::write(src.join("lib.rs"), "mod device;").unwrap();
        fs::write(src.join("device").join("mod.rs"), "").unwrap();

        let before = kernels_fingerprint(&root).unwrap();
        fs::write(src.join(".lib.rs.swp"), "editor state").unwrap();
        assert_eq!(kernels_fingerprint(&root).unwrap(), before);
        fs::write(src.join("device").join("mod.rs"), "// edited").unwrap();
        let after = kernels_fingerprint(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();

        assert_ne!(after, before);
    }
}
