//! Builds ./kernels to PTX (one file per architecture) for `ferrocuda::include_ptx!`.
fn main() {
    if let Err(err) = ferrocuda_builder::PtxBuilder::new("kernels").build_script() {
        eprintln!("error: building the PTX of ./kernels: {err}");
        std::process::exit(1);
    }
}
