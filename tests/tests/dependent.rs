//! ferrocuda as a dependency, the way a user's program takes it: `examples/dot-product` (a
//! host crate with its own kernel crate, built by `ferrocuda-builder` from its `build.rs`) is
//! copied out of this repository into a scratch directory, its path dependencies pointed at
//! this checkout, and built there by a plain `cargo build` with the machine's default toolchain
//! (stable; the builder runs the kernels' nightly itself), with no xtask and nothing from this
//! workspace but the one documented setting (`CUDA_LIBRARY_PATH`, which cust's build script
//! wants on a machine without a CUDA toolkit). Then the binary it built runs: on a machine
//! without the NVIDIA driver it must say so in one line; with a GPU its dot product must match
//! the CPU.
//!
//! Slow (a fresh build of ferrocuda and its dependencies, and of the user's PTX for three
//! architectures), so it is one test; it needs the source tree and is not part of the GPU
//! bundle. The one thing it shares with this workspace's build is the PTX builder's directory
//! (`FERROCUDA_BUILDER_TARGET_DIR`, which a user with several workspaces may set too): `core`
//! for each architecture and ferrocuda's own kernels come from there, while the user's kernel
//! crate, at its new path, is compiled there afresh.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root exists")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            copy_dir(&path, &dest);
        } else {
            fs::copy(&path, &dest).unwrap();
        }
    }
}

#[test]
fn a_crate_outside_the_workspace_depends_on_ferrocuda_by_path_and_brings_its_own_kernels() {
    let root = workspace();
    let scratch = std::env::temp_dir().join(format!("ferrocuda-dependent-{}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    let krate = scratch.join("dot-product");
    copy_dir(&root.join("examples/dot-product"), &krate);
    assert!(
        !scratch.starts_with(&root),
        "the scratch crate must live outside the workspace"
    );

    // Point the relative path dependencies at this checkout, as a user's would point at theirs.
    let at = |relative: &str| root.join(relative).display().to_string();
    for (manifest, replacements) in [
        (
            krate.join("Cargo.toml"),
            vec![
                ("../../host-crate", at("host-crate")),
                ("../../builder", at("builder")),
            ],
        ),
        (
            krate.join("kernels/Cargo.toml"),
            vec![("../../../kernels-crate/device", at("kernels-crate/device"))],
        ),
    ] {
        let mut text = fs::read_to_string(&manifest).unwrap();
        for (from, to) in replacements {
            assert!(text.contains(from), "{} lacks {from}", manifest.display());
            text = text.replace(from, &to);
        }
        // Its own workspace, whatever directory the scratch space sits in.
        text.push_str("\n[workspace]\n");
        if manifest.ends_with("kernels/Cargo.toml") {
            // The kernel crate is built on its own by the builder's nested cargo.
        } else {
            text = text.replace(
                "\n[workspace]\n",
                "\n[workspace]\nexclude = [\"kernels\"]\n",
            );
        }
        fs::write(&manifest, text).unwrap();
    }
    // What README.md tells a dependent to add: CUDA_LIBRARY_PATH for cust's build script on a
    // machine without a CUDA toolkit. No toolchain pin: the default toolchain builds the host.
    fs::create_dir_all(krate.join(".cargo")).unwrap();
    fs::write(
        krate.join(".cargo/config.toml"),
        format!(
            "[env]\nCUDA_LIBRARY_PATH = {:?}\n",
            root.join("host-crate/link").display().to_string()
        ),
    )
    .unwrap();

    let mut build = Command::new("cargo");
    build.current_dir(&krate).args(["build", "--release"]);
    // Nothing of the outer build leaks in: this is a fresh user's shell.
    for name in [
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CUDA_LIBRARY_PATH",
    ] {
        build.env_remove(name);
    }
    let builds = ferrocuda_tests::workspace_ptx_builds(env!("CARGO_TARGET_TMPDIR"));
    build.env("FERROCUDA_BUILDER_TARGET_DIR", builds);
    let output = build.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "the dependent crate did not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out_dirs = krate.join("target/release/build");
    let table = fs::read_dir(&out_dirs)
        .unwrap()
        .map(|entry| entry.unwrap().path().join("out/dot_kernels_ptx.rs"))
        .find(|path| path.is_file())
        .expect("build.rs wrote the PTX table of dot-kernels");
    let table = fs::read_to_string(table).unwrap();
    for arch in ["sm_70", "sm_80", "sm_90"] {
        assert!(table.contains(&format!("arch: \"{arch}\"")), "{table}");
    }

    let binary = krate.join("target/release/dot-product");
    let run = Command::new(&binary)
        .arg("100003")
        .output()
        .expect("the binary starts");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    let has_driver = ferrocuda::runtime::driver::load().is_ok();
    if has_driver {
        // A driver but no device fails in one line too; with a device the result must match.
        if run.status.success() {
            assert!(stdout.contains("PASS"), "{stdout}");
        } else {
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains("no CUDA device"), "{stderr}");
        }
    } else {
        assert!(!run.status.success(), "ran without a driver: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("no NVIDIA driver"), "{stderr}");
    }
    fs::remove_dir_all(&scratch).unwrap();
}
