//! Embeds the PTX that `cargo xtask build-ptx` wrote to `target/ptx/`, one file per
//! architecture, and refuses to build with a missing or stale one: the fingerprint in
//! `target/ptx/manifest.txt` must equal the fingerprint of the kernel sources now.
use std::{env, fmt::Write as _, fs, path::PathBuf};

#[path = "../xtask/src/fingerprint.rs"]
mod fingerprint;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // The stand-in `libcuda.so` that `-lcuda` (from cust's build script) finds: see
    // `link/lib64/libcuda.so` and `src/runtime/driver`.
    println!(
        "cargo:rustc-link-search=native={}",
        manifest_dir.join("link/lib64").display()
    );
    let root = manifest_dir.join("..");
    let ptx_dir = root.join("target").join("ptx");
    let manifest = ptx_dir.join("manifest.txt");
    for f in fingerprint::kernel_source_files(&root).expect("cannot list kernels-crate sources") {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("kernels-crate/src").display()
    );
    println!("cargo:rerun-if-changed={}", manifest.display());

    let fix = "run `cargo xtask build-ptx` (or `cargo xtask test`, which builds it first)";
    let Ok(text) = fs::read_to_string(&manifest) else {
        panic!("no PTX at {}: {fix}", manifest.display());
    };
    let built = text
        .lines()
        .find_map(|l| l.strip_prefix("fingerprint "))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or_else(|| panic!("{} has no fingerprint line: {fix}", manifest.display()));
    let now = fingerprint::kernels_fingerprint(&root).expect("cannot hash kernels-crate sources");
    assert!(
        built == now,
        "the PTX in {} is stale: kernels-crate changed since it was built; {fix}",
        ptx_dir.display()
    );

    let mut table = String::from("&[\n");
    for arch in fingerprint::ARCHS {
        let file = ptx_dir.join(format!("{arch}.ptx"));
        assert!(file.is_file(), "{} is missing: {fix}", file.display());
        println!("cargo:rerun-if-changed={}", file.display());
        let cc: u32 = arch
            .trim_start_matches("sm_")
            .parse()
            .expect("arch names are sm_XY");
        writeln!(
            table,
            "    EmbeddedPtx {{ arch: {arch:?}, compute_capability: ({}, {}), source: include_str!({:?}) }},",
            cc / 10,
            cc % 10,
            file.canonicalize().unwrap().display().to_string()
        )
        .unwrap();
    }
    table.push(']');
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("embedded_ptx.rs");
    fs::write(out, table).unwrap();
}
