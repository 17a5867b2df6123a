//! # ferrocuda-cli
//!
//! The tools behind the `ferrocuda` command line, built on the `ferrocuda` library and kept out
//! of it, so that a program depending on the library pulls none of this:
//! [`bench`](mod@bench) (the benchmark, its report and charts), [`sanitize`] (the
//! compute-sanitizer pass), [`toolkit`] (finding `nvcc` and `compute-sanitizer`), [`args`] (size
//! arguments). The command itself is `src/bin/ferrocuda/`.
pub mod args;
pub mod bench;
pub mod profile;
pub mod sanitize;
pub mod toolkit;
