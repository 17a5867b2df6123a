//! Builds the PTX of `ferrocuda-lesson-kernels` (one file per architecture, with
//! `ferrocuda-builder`) for `ferrocuda::include_ptx!`.
fn main() {
    if let Err(err) =
        ferrocuda_builder::PtxBuilder::new("../../kernels-crate/lessons").build_script()
    {
        eprintln!("error: building the PTX of ferrocuda-lesson-kernels: {err}");
        std::process::exit(1);
    }
}
