//! Shared pieces of the ferrocuda test suite: the GPU-or-skip harness, and random inputs for
//! every element type (`random_vec`, from the library's one element trait).
//!
//! GPU test binaries use `harness = false` and [`run_gpu_suite`]: every test asks for the
//! thread's [`Gpu`]; when there is no CUDA device, each test prints
//! `SKIPPED (no CUDA device: <reason>)` and counts as ignored, and the binary ends with a line
//! giving how many were skipped. Any other failure to open the GPU (a PTX that does not load,
//! say) fails the tests instead of skipping them. With `FERROCUDA_REQUIRE_GPU=1` (set by the
//! GPU bundle's `run.sh`) a missing device is a failure too.
use std::cell::RefCell;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrocuda::{Error, Gpu};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// What a test returns.
pub type TestResult = anyhow::Result<()>;

thread_local! {
    static GPU: RefCell<Option<Result<&'static Gpu, SkipOrFail>>> = const { RefCell::new(None) };
}

#[derive(Clone)]
enum SkipOrFail {
    Skip(String),
    Fail(String),
}

static SKIPPED: AtomicU64 = AtomicU64::new(0);

fn thread_gpu() -> Result<&'static Gpu, SkipOrFail> {
    GPU.with(|cell| {
        cell.borrow_mut()
            .get_or_insert_with(|| {
                let ordinal = std::env::var("FERROCUDA_DEVICE")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let required = std::env::var("FERROCUDA_REQUIRE_GPU").is_ok_and(|v| v == "1");
                match Gpu::new(ordinal) {
                    // One GPU per test thread for the whole run: leaking it keeps the context
                    // alive as long as the thread, which is what the tests need.
                    Ok(gpu) => Ok(&*Box::leak(Box::new(gpu))),
                    Err(Error::NoDevice { reason }) if !required => Err(SkipOrFail::Skip(reason)),
                    Err(Error::NoDriver(missing)) if !required => {
                        Err(SkipOrFail::Skip(missing.to_string()))
                    }
                    Err(e) => Err(SkipOrFail::Fail(format!(
                        "cannot open CUDA device {ordinal}: {e}"
                    ))),
                }
            })
            .clone()
    })
}

/// A test that needs a GPU.
pub fn gpu_test(name: &str, test: impl FnOnce(&Gpu) -> TestResult + Send + 'static) -> Trial {
    let name = name.to_string();
    Trial::ignorable_test(name.clone(), move || match thread_gpu() {
        Ok(gpu) => test(gpu)
            .map(|()| Completion::Completed)
            .map_err(|e| Failed::from(format!("{e:#}"))),
        Err(SkipOrFail::Skip(reason)) => {
            println!("SKIPPED (no CUDA device: {reason}) {name}");
            SKIPPED.fetch_add(1, Ordering::Relaxed);
            Ok(Completion::ignored_with(format!(
                "no CUDA device: {reason}"
            )))
        }
        Err(SkipOrFail::Fail(msg)) => Err(Failed::from(msg)),
    })
    .with_kind("gpu")
}

/// Runs a GPU test binary: one test thread unless `--test-threads` says otherwise (a GPU is one
/// shared resource, and one thread keeps one context and one module load).
pub fn run_gpu_suite(trials: Vec<Trial>) -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    let conclusion = libtest_mimic::run(&args, trials);
    let skipped = SKIPPED.load(Ordering::Relaxed);
    if skipped > 0 {
        println!(
            "SKIPPED: {skipped} GPU tests did not run (no CUDA device); this is NOT a GPU pass"
        );
    }
    conclusion.exit_code()
}

pub use ferrocuda::cpu::random_vec;
