//! Builds the PTX of `ferrocuda-kernels` (one file per architecture, with `ferrocuda-builder`)
//! and embeds it: `runtime::gpu::EMBEDDED_PTX` includes the table this writes. An unchanged
//! kernel crate costs nothing: the builder prints `rerun-if-changed` for every source file the
//! PTX came from.
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    // The stand-in `libcuda.so` that `-lcuda` (from cust's build script) finds: see
    // `link/lib64/libcuda.so` and `src/runtime/driver`.
    println!(
        "cargo:rustc-link-search=native={}",
        manifest_dir.join("link/lib64").display()
    );
    if let Err(err) = ferrocuda_builder::PtxBuilder::new("../kernels-crate").build_script() {
        eprintln!("error: building the PTX of ferrocuda-kernels: {err}");
        std::process::exit(1);
    }
}
