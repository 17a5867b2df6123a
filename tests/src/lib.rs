//! Shared pieces of the ferrocuda test suite: the GPU-or-skip harness, and random inputs for
//! every element type (`random_vec`, from the library's one element trait).
//!
//! GPU test binaries use `harness = false` and [`run_gpu_suite`]: every test asks for the
//! thread's [`Gpu`]. Without the NVIDIA driver (or with `FERROCUDA_DEVICE=cpu`) the tests run
//! on the CPU device, at the sizes [`scaled`] gives and with the same checks; a test that needs
//! what only a GPU machine has ([`hardware_test`]: NCCL, compute-sanitizer) prints
//! `SKIPPED (needs ...)` and counts as ignored. When the driver is there but no device is, each
//! test prints `SKIPPED (no CUDA device: <reason>)`. Any other failure to open the GPU (a PTX
//! that does not load, say) fails the tests instead of skipping them. With
//! `FERROCUDA_REQUIRE_GPU=1` (set by the GPU bundle's `run.sh`) a missing device is a failure.
//!
//! A test of several GPUs ([`multi_gpu_test`]) on a machine with fewer prints
//! `SKIPPED (needs N GPUs, found K)` and counts as ignored; `FERROCUDA_REQUIRE_GPUS=N` makes
//! that a failure, for a run on a machine that must have N.
use std::cell::RefCell;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ferrocuda::{Error, Gpu};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// What a test returns.
pub type TestResult = anyhow::Result<()>;

/// Whether `gpu` runs kernels built for `sm_{min_arch}` and newer (the thread block cluster and
/// bulk-copy variants need sm_90); when it does not, says so loudly on stderr, naming `what`,
/// so that a test on an older GPU leaves those variants out visibly.
pub fn arch_allows(gpu: &Gpu, what: &str, min_arch: u32) -> bool {
    let ok = gpu.props().reaches_arch(min_arch);
    if !ok {
        let (major, minor) = gpu.props().compute_capability;
        eprintln!(
            "SKIPPED {what}: needs sm_{min_arch} or newer; {} is compute capability {major}.{minor}",
            gpu.props().name
        );
    }
    ok
}

thread_local! {
    static GPU: RefCell<Option<Result<&'static Gpu, SkipOrFail>>> = const { RefCell::new(None) };
}

#[derive(Clone)]
enum SkipOrFail {
    Skip(String),
    Fail(String),
}

static SKIPPED: AtomicU64 = AtomicU64::new(0);
static ON_CPU_DEVICE: AtomicBool = AtomicBool::new(false);

/// An input size of a GPU test: `n` on a GPU. On the CPU device, which runs the threads of a
/// grid one after another, a size over 2^16 is 1024 times smaller with its low ten bits kept
/// (`2^24` -> `2^14`, `2^20 + 3` -> `2^10 + 3`), so that odd sizes stay odd, and the checks are
/// the same.
pub fn scaled(n: usize) -> usize {
    if ON_CPU_DEVICE.load(Ordering::Relaxed) && n > 1 << 16 {
        (n >> 10) | (n & 1023)
    } else {
        n
    }
}
static HARDWARE_ONLY: AtomicU64 = AtomicU64::new(0);
static TOO_FEW_GPUS: AtomicU64 = AtomicU64::new(0);

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
    Trial::ignorable_test(name.clone(), move || {
        // Before the thread's `Gpu` is opened: opening it runs in its own context too.
        let theirs = AnotherLibrarysContext::on_cpu_device();
        match thread_gpu() {
            Ok(gpu) => {
                let result = completed(test(gpu));
                match theirs.map(AnotherLibrarysContext::still_current) {
                    Some(Err(e)) if result.is_ok() => Err(Failed::from(e)),
                    _ => result,
                }
            }
            Err(e) => skip_or_fail(e, &name),
        }
    })
    .with_kind("gpu")
}

/// A test that needs what only an NVIDIA GPU machine has (`needs`: "NCCL",
/// "compute-sanitizer"): on a GPU it is a [`gpu_test`]; on the CPU device it is skipped, loudly,
/// naming what it needs.
pub fn hardware_test(
    name: &str,
    needs: &'static str,
    test: impl FnOnce(&Gpu) -> TestResult + Send + 'static,
) -> Trial {
    let name = name.to_string();
    Trial::ignorable_test(name.clone(), move || match thread_gpu() {
        Ok(gpu) if gpu.is_cpu() => Ok(hardware_only(needs, &name)),
        Ok(gpu) => completed(test(gpu)),
        Err(e) => skip_or_fail(e, &name),
    })
    .with_kind("gpu")
}

/// On the CPU device, every [`gpu_test`] runs with another library's context current on its
/// thread (`cuCtxCreate`), as in a program that also uses one: the CPU device fails a call that
/// needs a context while that one is current, so every library call the test makes (the
/// thread's first `Gpu::new` included) must run in the device's own context, entered by the
/// call itself, and not in what an earlier call left current; and when the test ends, the
/// other context must be current again. Destroyed when the test ends. (Cheap on the CPU
/// device; on a GPU a context costs hundreds of MB, and `gpu_streams` checks the same there.)
/// Test code that calls the driver itself makes the device's context current first
/// (`Gpu::make_current`) and gives the thread's back after ([`KeepContext`]), as a program
/// must.
struct AnotherLibrarysContext(cust::sys::CUcontext);

impl AnotherLibrarysContext {
    fn on_cpu_device() -> Option<Self> {
        if !ON_CPU_DEVICE.load(Ordering::Relaxed) {
            return None;
        }
        let mut context = std::ptr::null_mut();
        // SAFETY: a writable handle and the CPU device's one device.
        let status = unsafe { cust::sys::cuCtxCreate_v2(&mut context, 0, 0) };
        assert_eq!(status, cust::sys::CUresult::CUDA_SUCCESS, "cuCtxCreate");
        Some(Self(context))
    }

    /// Fails unless it is still the thread's current context.
    fn still_current(self) -> Result<(), String> {
        let current = current_context().unwrap_or(std::ptr::null_mut());
        if current == self.0 {
            Ok(())
        } else {
            Err(format!(
                "the test ended with another context current ({current:?}) than the one it \
                 began with ({:?}): a library call did not give the thread its context back",
                self.0
            ))
        }
    }
}

impl Drop for AnotherLibrarysContext {
    fn drop(&mut self) {
        // SAFETY: made by `cuCtxCreate`, destroyed once, here.
        let _ = unsafe { cust::sys::cuCtxDestroy_v2(self.0) };
    }
}

/// The thread's current context, as the driver reports it.
pub fn current_context() -> anyhow::Result<cust::sys::CUcontext> {
    let mut context = std::ptr::null_mut();
    // SAFETY: a writable handle.
    let status = unsafe { cust::sys::cuCtxGetCurrent(&mut context) };
    anyhow::ensure!(
        status == cust::sys::CUresult::CUDA_SUCCESS,
        "cuCtxGetCurrent: {status:?}"
    );
    Ok(context)
}

/// The thread's current context when made, current again when dropped: for test code that
/// makes the device's context current itself (`Gpu::make_current`) before driver calls.
pub struct KeepContext(cust::sys::CUcontext);

impl KeepContext {
    pub fn new() -> Self {
        Self(current_context().unwrap_or(std::ptr::null_mut()))
    }
}

impl Default for KeepContext {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for KeepContext {
    fn drop(&mut self) {
        // SAFETY: the context current when this was made, which the test keeps alive.
        let _ = unsafe { cust::sys::cuCtxSetCurrent(self.0) };
    }
}

fn hardware_only(needs: &str, name: &str) -> Completion {
    println!("SKIPPED (needs {needs}, which the CPU device does not have) {name}");
    HARDWARE_ONLY.fetch_add(1, Ordering::Relaxed);
    Completion::ignored_with(format!("needs {needs}"))
}

/// A test of every GPU the driver shows, `min_gpus` or more (`gpus[i]` is device `i`); skipped,
/// loudly, on a machine with fewer, unless `FERROCUDA_REQUIRE_GPUS` asks for as many.
pub fn multi_gpu_test(
    name: &str,
    min_gpus: u32,
    test: impl FnOnce(&[Gpu]) -> TestResult + Send + 'static,
) -> Trial {
    let name = name.to_string();
    Trial::ignorable_test(name.clone(), move || {
        // Read first: a machine that must have GPUs fails without any, never skips.
        let required = match std::env::var("FERROCUDA_REQUIRE_GPUS") {
            Err(_) => 0,
            Ok(v) => v.trim().parse::<u32>().map_err(|_| {
                Failed::from(format!(
                    "FERROCUDA_REQUIRE_GPUS={v:?} is not a number of GPUs"
                ))
            })?,
        };
        match thread_gpu() {
            Ok(gpu) if gpu.is_cpu() => {
                return Ok(hardware_only("several NVIDIA GPUs and NCCL", &name));
            }
            Err(SkipOrFail::Skip(reason)) if required > 0 => {
                return Err(Failed::from(format!(
                    "FERROCUDA_REQUIRE_GPUS={required}, but no CUDA device: {reason}"
                )));
            }
            Err(e) => return skip_or_fail(e, &name),
            Ok(_) => {}
        }
        let count = Gpu::count().map_err(|e| Failed::from(format!("cuDeviceGetCount: {e}")))?;
        if count < min_gpus {
            if required >= min_gpus {
                return Err(Failed::from(format!(
                    "needs {min_gpus} GPUs, the driver shows {count} \
                     (FERROCUDA_REQUIRE_GPUS={required})"
                )));
            }
            println!("SKIPPED (needs {min_gpus} GPUs, found {count}) {name}");
            TOO_FEW_GPUS.fetch_add(1, Ordering::Relaxed);
            return Ok(Completion::ignored_with(format!(
                "needs {min_gpus} GPUs, found {count}"
            )));
        }
        let gpus = (0..count)
            .map(Gpu::new)
            .collect::<ferrocuda::Result<Vec<_>>>()
            .map_err(|e| Failed::from(format!("opening the {count} CUDA devices: {e}")))?;
        completed(test(&gpus))
    })
    .with_kind("gpu")
}

fn completed(result: TestResult) -> Result<Completion, Failed> {
    result
        .map(|()| Completion::Completed)
        .map_err(|e| Failed::from(format!("{e:#}")))
}

fn skip_or_fail(e: SkipOrFail, name: &str) -> Result<Completion, Failed> {
    match e {
        SkipOrFail::Skip(reason) => {
            println!("SKIPPED (no CUDA device: {reason}) {name}");
            SKIPPED.fetch_add(1, Ordering::Relaxed);
            Ok(Completion::ignored_with(format!(
                "no CUDA device: {reason}"
            )))
        }
        SkipOrFail::Fail(msg) => Err(Failed::from(msg)),
    }
}

/// Runs a GPU test binary: one test thread unless `--test-threads` says otherwise (a GPU is one
/// shared resource, and one thread keeps one context and one module load).
pub fn run_gpu_suite(trials: Vec<Trial>) -> ExitCode {
    let mut args = Arguments::from_args();
    // The CPU device when asked for (`FERROCUDA_DEVICE=cpu`) or when there is no NVIDIA driver
    // and no GPU is required: the kernels run on the host, and a synccheck finding fails the
    // launch that made it. One test at a time, as on a GPU: a test that measures the device's
    // free memory must be alone on it.
    let required = std::env::var("FERROCUDA_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let on_cpu = ferrocuda::runtime::driver::cpu::selected()
        || (!required
            && ferrocuda::runtime::driver::load().is_err()
            && ferrocuda::runtime::driver::cpu::select());
    if on_cpu {
        ferrocuda::runtime::driver::cpu::fail_on_findings(true);
        ON_CPU_DEVICE.store(true, Ordering::Relaxed);
    }
    args.test_threads.get_or_insert(1);
    let conclusion = libtest_mimic::run(&args, trials);
    let skipped = SKIPPED.load(Ordering::Relaxed);
    if skipped > 0 {
        println!(
            "SKIPPED: {skipped} GPU tests did not run (no CUDA device); this is NOT a GPU pass"
        );
    }
    let hardware = HARDWARE_ONLY.load(Ordering::Relaxed);
    if hardware > 0 {
        println!(
            "SKIPPED: {hardware} tests need NVIDIA hardware or its tools (named above); the \
             CPU device ran the rest"
        );
    }
    let too_few = TOO_FEW_GPUS.load(Ordering::Relaxed);
    if too_few > 0 {
        println!(
            "SKIPPED: {too_few} multi-GPU tests did not run (this machine has fewer GPUs than \
             they need); this is NOT a multi-GPU pass"
        );
    }
    conclusion.exit_code()
}

pub use ferrocuda_lessons::cpu::{exact_sum_input, random_vec};

/// The reduction suite's configurations, shared by the GPU suite (`gpu_reduce`) and the CPU
/// test that proves its oracle rejects wrong answers for each of them (`cpu_oracle`).
pub mod reduce_suite {
    use ferrocuda::runtime::element::Element;
    use ferrocuda_lessons::cpu::SplitMix64;
    use ferrocuda_lessons::reduce::{ReduceVariant, complete_unroll_blocks};

    /// Block sizes tried with every variant that accepts them (`complete_unroll` runs its own).
    pub const BLOCKS: [u32; 5] = [64, 128, 256, 512, 1024];

    /// The largest input of the sweep.
    pub const LARGEST: usize = 1 << 24;

    /// Elements in each input pool: the largest input plus room to start it at 4096 offsets.
    pub const POOL_LEN: usize = LARGEST + 4096;

    /// [`POOL_LEN`] for the device the suite runs on: the largest input it [`scaled`]s to, plus
    /// room for the offsets.
    ///
    /// [`scaled`]: super::scaled
    pub fn pool_len() -> usize {
        super::scaled(LARGEST) + 4096
    }

    /// The sizes tried with `block`: tiny, around a warp, around the block, just past the
    /// unrolled block, and large enough to fill the GPU.
    pub fn sizes(block: u32) -> [usize; 12] {
        let b = block as usize;
        [
            1,
            2,
            31,
            32,
            33,
            1000,
            b - 1,
            b,
            b + 1,
            8 * b + 5,
            super::scaled((1 << 20) + 3),
            super::scaled(LARGEST),
        ]
    }

    /// The block sizes the sweep runs `variant` with.
    pub fn blocks(variant: ReduceVariant) -> Vec<u32> {
        match variant {
            ReduceVariant::CompleteUnroll => complete_unroll_blocks(),
            _ => BLOCKS.to_vec(),
        }
        .into_iter()
        .filter(|&b| variant.block_error(b).is_none())
        .collect()
    }

    /// The sizes of the constant and alternating-sign float inputs (bounded, not exact, checks).
    pub const PATTERN_SIZES: [usize; 2] = [LARGEST, (1 << 20) + 3];

    /// `0.1` everywhere (not exactly summable: checked against a rounding bound).
    pub fn constant_pool<T: Element>() -> Vec<T> {
        vec![T::from_f64(0.1); pool_len()]
    }

    /// Each aligned group of four holds `+v, -v, 1, 1` in a random order, `v` an integer from 1
    /// to `m`, where `m` keeps `sum(|x|)` of any `LARGEST` elements within `2^EXACT_INT_BITS`
    /// (`m = 1` for `f32`): an exactly summable input whose partial sums rise and cancel, whose
    /// every group adds 2, so that no block's share is zero, and with no zero element, so that a
    /// single element dropped or counted twice always changes the sum.
    pub fn alternating_pool<T: Element>() -> Vec<T> {
        // A group's `sum(|x|)` is `2v + 2`; `LARGEST / 4` groups must stay within the budget.
        let per_group = (1u64 << T::EXACT_INT_BITS.min(60)) / (LARGEST as u64 / 4);
        let m = (per_group.saturating_sub(2) / 2).clamp(1, 255);
        let mut rng = SplitMix64::new(seed(&format!("alternating {} pool", T::TYPE)));
        (0..pool_len() / 4)
            .flat_map(|_| {
                let bits = rng.next_u64();
                let v = (1 + (bits >> 8) % m) as f64;
                let mut group = [v, -v, 1.0, 1.0];
                // One of the 24 orders, from the low bits.
                let mut order = bits & 0xFF;
                for i in (1..4).rev() {
                    let j = (order % (i as u64 + 1)) as usize;
                    order /= i as u64 + 1;
                    group.swap(i, j);
                }
                group.map(T::from_f64)
            })
            .collect()
    }

    /// A seed from a name (FNV-1a): every trial draws its own inputs, the same on every run.
    pub fn seed(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The seed of the exactly summable pool of element type `ty`.
    pub fn exact_pool_seed(ty: &str) -> u64 {
        seed(&format!("{ty} exact pool"))
    }
}

/// The workspace's shared PTX build directory (`FERROCUDA_BUILDER_TARGET_DIR`) for a test whose
/// `CARGO_TARGET_TMPDIR` is `target_tmpdir`: `ferrocuda-builder/` beside it in the target
/// directory, where the workspace's own build scripts put their nested PTX builds.
pub fn workspace_ptx_builds(target_tmpdir: &str) -> std::path::PathBuf {
    std::path::Path::new(target_tmpdir)
        .parent()
        .expect("the target directory holds tmp/")
        .join("ferrocuda-builder")
}
