//! Shared pieces of the ferrocuda test suite: the GPU-or-skip harness, random inputs for every
//! element type, and the names of the device-layer self-test kernels.
//!
//! GPU test binaries use `harness = false` and [`run_gpu_suite`]: every test asks for the
//! thread's [`Gpu`]; when there is no CUDA device, each test prints
//! `SKIPPED (no CUDA device: <reason>)` and counts as ignored, and the binary ends with a line
//! giving how many were skipped. Any other failure to open the GPU (a PTX that does not load,
//! say) fails the tests instead of skipping them. With `FERROCUDA_REQUIRE_GPU=1` (set by the
//! GPU bundle's `run.sh`) a missing device is a failure too.
use std::cell::RefCell;
use std::fmt::Debug;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use cust::memory::DeviceCopy;
use ferrocuda::cpu::SplitMix64;
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

/// The element types the kernels support, with what the tests need of them.
pub trait Element: DeviceCopy + Copy + PartialEq + Debug + Default + Send + Sync + 'static {
    /// The Rust name (`"f32"`), used in kernel symbols and test names.
    const NAME: &'static str;
    /// A random value spread over the type's range (floats in `[-1, 1)`).
    fn random(rng: &mut SplitMix64) -> Self;
    /// Equality of the bit patterns (floats: `-0.0 != 0.0`, NaN equal to itself).
    fn same_bits(self, other: Self) -> bool;
}

macro_rules! element_int {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            fn random(rng: &mut SplitMix64) -> Self { rng.next_u64() as $t }
            fn same_bits(self, other: Self) -> bool { self == other }
        }
    )*};
}
element_int!(i32, u32, i64, u64);

macro_rules! element_float {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
            fn random(rng: &mut SplitMix64) -> Self { rng.next_f64_signed() as $t }
            fn same_bits(self, other: Self) -> bool { self.to_bits() == other.to_bits() }
        }
    )*};
}
element_float!(f32, f64);

/// `n` random values of `T` from `seed`.
pub fn random_vec<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| T::random(&mut rng)).collect()
}

/// Device-layer self-test kernels (`kernels-crate/src/selftest.rs`).
pub mod selftest {
    /// `selftest_shfl_<type>` for each element type.
    pub fn shfl_symbol(type_name: &str) -> String {
        format!("selftest_shfl_{type_name}")
    }
    /// `selftest_atomic_add_<type>`.
    pub fn atomic_add_symbol(type_name: &str) -> String {
        format!("selftest_atomic_add_{type_name}")
    }
    /// `selftest_atomic_min_max_<type>`.
    pub fn atomic_min_max_symbol(type_name: &str) -> String {
        format!("selftest_atomic_min_max_{type_name}")
    }
    /// `selftest_tile_<n>`.
    pub fn tile_symbol(n: u32) -> String {
        format!("selftest_tile_{n}")
    }
    /// Tile sizes of `TiledPartition`.
    pub const TILE_SIZES: [u32; 6] = [1, 2, 4, 8, 16, 32];
    /// Every self-test kernel the suite launches.
    pub fn symbols() -> Vec<String> {
        let mut v: Vec<String> = ["u32", "i32", "f32", "u64", "i64", "f64"]
            .iter()
            .map(|t| shfl_symbol(t))
            .collect();
        v.extend(
            ["i32", "u32", "i64", "u64", "f32", "f64"]
                .iter()
                .map(|t| atomic_add_symbol(t)),
        );
        v.extend(
            ["i32", "u32", "i64", "u64"]
                .iter()
                .map(|t| atomic_min_max_symbol(t)),
        );
        v.extend(TILE_SIZES.iter().map(|&n| tile_symbol(n)));
        v.extend(
            [
                "selftest_vote",
                "selftest_atomic_cas_counter",
                "selftest_shared_static",
                "selftest_shared_dynamic",
                "selftest_sync_predicates",
                "selftest_indices_3d",
                "selftest_grid_stride_copy",
                "selftest_vector_copy_f32",
                "selftest_last_block_sum",
            ]
            .map(String::from),
        );
        v
    }
}
