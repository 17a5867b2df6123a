//! Symbol hygiene: ferrocuda loads the CUDA driver with `dlopen` and defines the driver API that
//! `cust` calls as trampolines (`host-crate/src/runtime/driver`). Those definitions must stay
//! inside the program that links ferrocuda: a shared library built on it (a Python extension,
//! a plugin) must not export `cuInit` and the rest, or it would interpose on the real driver
//! for every other library in the process.
//!
//! The check links the `ferrocuda` this suite was built with into a small `cdylib` with `rustc`
//! and reads its dynamic symbol table with the toolchain's `llvm-nm`: no `cu*` function may be
//! exported, while the trampolines must be present in it as local symbols (so the check
//! cannot pass on a library that never reached the driver).
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tools of the toolchain running this suite (`llvm-tools` is in `rust-toolchain.toml`).
fn llvm_tool(name: &str) -> PathBuf {
    let print = |what: &str| {
        let out = Command::new("rustc")
            .args(["--print", what])
            .current_dir(workspace())
            .output()
            .expect("rustc runs");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    Path::new(&print("sysroot"))
        .join("lib/rustlib")
        .join(print("host-tuple"))
        .join("bin")
        .join(name)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The newest `libferrocuda-*.rlib` beside this test's executable: the one it was linked with.
fn ferrocuda_rlib() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let rlib = std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("libferrocuda-") && name.ends_with(".rlib"))
        })
        .max_by_key(|path| path.metadata().and_then(|m| m.modified()).ok())
        .expect("the ferrocuda rlib this suite was built with");
    (rlib, deps)
}

/// `(name, kind)` of each symbol `llvm-nm` lists for `library` with `args`.
fn symbols(library: &Path, args: &[&str]) -> Vec<(String, String)> {
    let out = Command::new(llvm_tool("llvm-nm"))
        .args(args)
        .arg(library)
        .output()
        .expect("llvm-nm runs (rustup component llvm-tools)");
    assert!(
        out.status.success(),
        "llvm-nm: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().rev();
            let name = fields.next()?.to_owned();
            let kind = fields.next()?.to_owned();
            Some((name, kind))
        })
        .collect()
}

/// A driver API function's name: `cu` and a capital (`cuInit`, `cuMemAllocAsync`).
fn is_driver_function(name: &str) -> bool {
    name.strip_prefix("cu")
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c.is_ascii_uppercase())
}

#[test]
fn a_shared_library_built_on_ferrocuda_exports_no_driver_function() {
    let (rlib, deps) = ferrocuda_rlib();
    let scratch = std::env::temp_dir().join(format!("ferrocuda-symbols-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let source = scratch.join("probe.rs");
    std::fs::write(
        &source,
        "#[unsafe(no_mangle)]\n\
         pub extern \"C\" fn probe_gpu_opens() -> bool {\n    ferrocuda::Gpu::new(0).is_ok()\n}\n",
    )
    .unwrap();
    let library = scratch.join("libprobe.so");
    let out = Command::new("rustc")
        .current_dir(workspace())
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "cdylib",
            "-C",
            "opt-level=1",
        ])
        .arg("--extern")
        .arg(format!("ferrocuda={}", rlib.display()))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        // The stand-in `libcuda.so` that cust's `-lcuda` finds (ferrocuda's build script adds
        // the same directory for cargo builds).
        .arg("-L")
        .arg(format!(
            "native={}",
            workspace().join("host-crate/link/lib64").display()
        ))
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .output()
        .expect("rustc runs");
    assert!(
        out.status.success(),
        "linking a cdylib on {}: {}",
        rlib.display(),
        String::from_utf8_lossy(&out.stderr)
    );

    let exported: Vec<String> = symbols(&library, &["-D", "--defined-only"])
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| is_driver_function(name))
        .collect();
    let linked: Vec<(String, String)> = symbols(&library, &["--defined-only"])
        .into_iter()
        .filter(|(name, _)| is_driver_function(name))
        .collect();
    let _ = std::fs::remove_dir_all(&scratch);

    assert!(
        exported.is_empty(),
        "{} driver functions are exported by a cdylib linking ferrocuda, e.g. {:?}",
        exported.len(),
        &exported[..exported.len().min(8)]
    );
    assert!(
        linked.iter().any(|(name, _)| name == "cuInit"),
        "the probe never reached the driver's trampolines: {} cu* symbols, none is cuInit",
        linked.len()
    );
    let global: Vec<&(String, String)> = linked
        .iter()
        .filter(|(_, kind)| kind.chars().all(|c| c.is_ascii_uppercase()))
        .collect();
    assert!(
        global.is_empty(),
        "driver functions are global symbols of the cdylib: {:?}",
        &global[..global.len().min(8)]
    );
}

/// Two versions of ferrocuda in one program would each define the driver's symbols; cargo
/// refuses a dependency graph with two packages of the same `links` key.
#[test]
fn cargo_refuses_two_copies_of_ferrocuda_in_one_program() {
    let manifest = std::fs::read_to_string(workspace().join("host-crate/Cargo.toml")).unwrap();
    let links: Vec<&str> = manifest
        .lines()
        .filter(|line| line.trim_start().starts_with("links"))
        .collect();
    assert_eq!(
        links,
        ["links = \"ferrocuda\""],
        "host-crate/Cargo.toml must name the one `links` key ferrocuda claims"
    );
}
