//! The CUDA C and CUB baselines, compiled with nvcc for the device and run beside the Rust
//! kernels. They generate the rows' own input (`input.h` is `book_input(n, seed)` in C++, with
//! the seed passed on their command line) and print their result's bits, which are checked
//! against the CPU references the rows are checked against: a speedup over a baseline is
//! reported only where the baseline computed the right answer. A requested baseline that fails
//! the check or prints no result stays in the report, as `FAIL` or `miss`.
use std::path::{Path, PathBuf};
use std::process::Command;

use super::report::{Baseline, BaselineCheck, BenchConfig, Row};
use ferrocuda::runtime::element::{ElemType, Element};
use ferrocuda::runtime::gpu::Gpu;
use ferrocuda_lessons::cpu::{Boundary, Check, ReduceReference, Split, Taps, stencil_at};
use ferrocuda_lessons::reduce::ReduceVariant;
use ferrocuda_lessons::stencil::StencilVariant;

/// The CUDA C and CUB programs, compiled with nvcc for this device.
pub(super) struct Baselines {
    textbook: PathBuf,
    cub: PathBuf,
    pub(super) nvcc_version: String,
}

const INPUT_H: &str = include_str!("../../baselines/input.h");
const COMMON_CUH: &str = include_str!("../../baselines/common.cuh");
const TEXTBOOK_CU: &str = include_str!("../../baselines/textbook.cu");
const CUB_CU: &str = include_str!("../../baselines/cub_reduce.cu");

/// Whether textbook.cu has `v`: every reduction but the fast path (CUB is its baseline) and the
/// grid-synchronised sum (which has no CUDA C version there).
fn has_textbook_reduce(v: ReduceVariant) -> bool {
    !matches!(
        v,
        ReduceVariant::Fast | ReduceVariant::FastCluster | ReduceVariant::GridSync
    )
}

/// Whether textbook.cu has the stencil `v` for `ty`.
pub(super) fn has_textbook_stencil(ty: ElemType, v: StencilVariant) -> bool {
    matches!(ty, ElemType::F32 | ElemType::F64 | ElemType::I32)
        && matches!(v, StencilVariant::Naive | StencilVariant::Shared)
}

impl Baselines {
    pub(super) fn prepare(gpu: &Gpu, dir: &Path) -> std::result::Result<Self, String> {
        let nvcc = crate::toolkit::find_tool("nvcc")
            .ok_or("nvcc not found (the baselines need the CUDA toolkit)")?;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let (major, minor) = gpu.props().compute_capability;
        let arch = format!("-arch=sm_{major}{minor}");
        for (name, text) in [("input.h", INPUT_H), ("common.cuh", COMMON_CUH)] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        let build = |name: &str, source: &str| -> std::result::Result<PathBuf, String> {
            let src = dir.join(format!("{name}.cu"));
            let exe = dir.join(name);
            std::fs::write(&src, source).map_err(|e| format!("writing {}: {e}", src.display()))?;
            let out = Command::new(&nvcc.path)
                .args(["-O3", "-std=c++17", &arch, "-o"])
                .arg(&exe)
                .arg(&src)
                .output()
                .map_err(|e| format!("running nvcc: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "nvcc failed on {name}.cu: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(exe)
        };
        Ok(Self {
            textbook: build("textbook", TEXTBOOK_CU)?,
            cub: build("cub_reduce", CUB_CU)?,
            nvcc_version: nvcc.version,
        })
    }

    /// Runs the baselines for the rows of one (type, n) on the rows' input and attaches their
    /// times and checks, judged by `expected`.
    pub(super) fn attach(
        &self,
        cfg: &BenchConfig,
        ty: ElemType,
        n: usize,
        expected: &Expected,
        rows: &mut [Row],
    ) {
        // As many timed runs as each ferrocuda row gets over its rounds.
        let reps = (cfg.reps * cfg.rounds.max(1)).to_string();
        let seed = super::input_seed(n).to_string();
        let n_arg = n.to_string();
        let radius_suffix = format!("_r{}", cfg.radius);
        let spec = |r: &Row| format!("{}:{}", r.variant.trim_end_matches(&radius_suffix), r.block);
        let reduce: Vec<usize> = (0..rows.len())
            .filter(|&i| {
                rows[i].family == "reduce"
                    && ReduceVariant::from_name(&rows[i].variant).is_some_and(has_textbook_reduce)
            })
            .collect();
        if !reduce.is_empty() {
            let specs: Vec<String> = reduce.iter().map(|&i| spec(&rows[i])).collect();
            let ran = Ran::of(
                Command::new(&self.textbook)
                    .args(["reduce", ty.name(), &n_arg, &seed, &reps])
                    .args(&specs),
            );
            let outcomes = outcomes(&ran, &specs, RESULT_BITS, &expected.sum);
            for (&i, o) in reduce.iter().zip(outcomes) {
                let ours = rows[i].median_us;
                rows[i].baselines.push(o.baseline("cuda-c", ours));
            }
        }
        let stencil: Vec<usize> = (0..rows.len())
            .filter(|&i| {
                rows[i].family == "stencil"
                    && StencilVariant::ALL.into_iter().any(|v| {
                        has_textbook_stencil(ty, v)
                            && rows[i].variant == format!("{}{radius_suffix}", v.name())
                    })
            })
            .collect();
        if !stencil.is_empty() {
            let specs: Vec<String> = stencil.iter().map(|&i| spec(&rows[i])).collect();
            let ran = Ran::of(
                Command::new(&self.textbook)
                    .args(["stencil", ty.name(), &n_arg, &seed])
                    .arg(cfg.radius.to_string())
                    .arg(&reps)
                    .args(&specs),
            );
            let judge = |got: u64| check_hash(got, expected.stencil_fnv1a);
            let outcomes = outcomes(&ran, &specs, OUTPUT_FNV1A, &judge);
            for (&i, o) in stencil.iter().zip(outcomes) {
                let ours = rows[i].median_us;
                rows[i].baselines.push(o.baseline("cuda-c", ours));
            }
        }
        if let Some(fast) = rows
            .iter_mut()
            .find(|r| r.family == "reduce" && r.variant == "fast")
        {
            let ran =
                Ran::of(Command::new(&self.cub).args(["sum", ty.name(), &n_arg, &seed, &reps]));
            let specs = ["cub".to_string()];
            let outcome = outcomes(&ran, &specs, RESULT_BITS, &expected.sum)
                .pop()
                .expect("one outcome per spec");
            let ours = fast.median_us;
            fast.baselines.push(outcome.baseline("cub", ours));
        }
    }
}

/// The field of a reduction's result: its bits in its own type, zero-extended, in hex.
pub(super) const RESULT_BITS: &str = "result_bits";
/// The field of a stencil's result: the 64-bit FNV-1a hash of its whole output's bytes.
pub(super) const OUTPUT_FNV1A: &str = "output_fnv1a";

/// What the baselines of one (type, n) must produce: the CPU references of its rows.
pub(super) struct Expected {
    /// Judges a sum's bits (its type's, zero-extended) against the rows' reduction reference.
    pub(super) sum: Box<dyn Fn(u64) -> Check>,
    /// [`stencil_fnv1a`] of the rows' input, where the textbook stencils run for this group.
    pub(super) stencil_fnv1a: Option<u64>,
}

impl Expected {
    /// The expectations of a group whose sums are checked against `reference` alone (no
    /// textbook stencil runs for it): the 16-bit float groups, whose sums are `f32`. `depth`
    /// bounds the roundings where the reference is not exact.
    pub(super) fn of_sum<A: ResultBits>(reference: &ReduceReference<A>, depth: f64) -> Self {
        let reference = reference.clone();
        Self {
            sum: Box::new(move |bits| check_sum(&reference, bits, depth)),
            stencil_fnv1a: None,
        }
    }

    /// The expectations of a group whose input is `x` and whose sum reference is `reference`;
    /// `stencil_radius` when the textbook stencils run for it (hashing the whole CPU stencil
    /// costs a pass over the input).
    pub(super) fn of<T: ResultBits>(
        x: &[T],
        reference: &ReduceReference<T>,
        stencil_radius: Option<u32>,
    ) -> Self {
        let reference = reference.clone();
        // Where the sum has no exact reference (never, for the bench's exactly summable
        // input), a bound that holds for any order of additions: n - 1 roundings.
        let depth = x.len() as f64;
        Self {
            sum: Box::new(move |bits| check_sum(&reference, bits, depth)),
            stencil_fnv1a: stencil_radius.map(|r| stencil_fnv1a(x, r, 1 << 22)),
        }
    }
}

/// `got`'s bits against the sum reference (see [`ReduceReference::check`]).
pub(super) fn check_sum<T: ResultBits>(
    reference: &ReduceReference<T>,
    bits: u64,
    depth: f64,
) -> Check {
    match T::from_result_bits(bits) {
        Some(got) => reference.check(got, depth),
        None => Check {
            passed: false,
            detail: format!("result bits 0x{bits:016x} do not fit {}", T::TYPE),
        },
    }
}

/// A stencil's output hash against the CPU's.
fn check_hash(got: u64, want: Option<u64>) -> Check {
    match want {
        Some(want) if got == want => Check {
            passed: true,
            detail: format!("output FNV-1a 0x{got:016x}, the CPU stencil's"),
        },
        Some(want) => Check {
            passed: false,
            detail: format!(
                "output FNV-1a got 0x{got:016x}, want 0x{want:016x} (the CPU stencil's)"
            ),
        },
        None => Check {
            passed: false,
            detail: "no CPU stencil was hashed for this group".into(),
        },
    }
}

/// An element type's value as the bits a baseline prints, and back.
pub trait ResultBits: Element {
    /// The bits, zero-extended to 64.
    fn to_result_bits(self) -> u64;
    /// The value of `bits`; `None` when they do not fit the type.
    fn from_result_bits(bits: u64) -> Option<Self>;
}

macro_rules! result_bits {
    ($($t:ty, $u:ty, $to:expr, $from:expr);*) => {$(
        impl ResultBits for $t {
            fn to_result_bits(self) -> u64 {
                let to: fn($t) -> $u = $to;
                u64::from(to(self))
            }
            fn from_result_bits(bits: u64) -> Option<Self> {
                let from: fn($u) -> $t = $from;
                <$u>::try_from(bits).ok().map(from)
            }
        }
    )*};
}
result_bits!(
    i32, u32, |v| v as u32, |b| b as i32;
    u32, u32, |v| v, |b| b;
    i64, u64, |v| v as u64, |b| b as i64;
    u64, u64, |v| v, |b| b;
    f32, u32, f32::to_bits, f32::from_bits;
    f64, u64, f64::to_bits, f64::from_bits;
    ferrocuda::runtime::element::F16, u16, |v| v.0, ferrocuda::runtime::element::F16;
    ferrocuda::runtime::element::Bf16, u16, |v| v.0, ferrocuda::runtime::element::Bf16
);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `bytes`, continuing from `h` (input.h's `fnv1a`).
pub(super) fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// FNV-1a of the elements' bytes in memory order (little-endian, as the device's host).
pub(super) fn fnv1a_elements<T: ResultBits>(x: &[T], mut h: u64) -> u64 {
    let size = size_of::<T>();
    for &v in x {
        h = fnv1a(&v.to_result_bits().to_le_bytes()[..size], h);
    }
    h
}

/// FNV-1a of the bytes of `ferrocuda_lessons::cpu::stencil(x, Sum { radius }, Zero)`, the textbook
/// stencils' taps and boundary, computed `chunk` outputs at a time over the host's cores (the
/// whole output of 2^28 `f64` would be 2 GiB more).
pub(super) fn stencil_fnv1a<T: ResultBits>(x: &[T], radius: u32, chunk: usize) -> u64 {
    let taps = Taps::<T>::Sum { radius };
    let mut out = vec![T::default(); chunk.min(x.len())];
    let mut h = FNV_OFFSET;
    for first in (0..x.len()).step_by(chunk.max(1)) {
        let part = &mut out[..chunk.min(x.len() - first)];
        Split::host().for_each_mut(part, |start, p| {
            for (k, v) in p.iter_mut().enumerate() {
                *v = stencil_at(x, &taps, Boundary::Zero, first + start + k);
            }
        });
        h = fnv1a_elements(part, h);
    }
    h
}

/// What one run of a baseline program left.
#[derive(Clone, Debug, Default)]
pub(super) struct Ran {
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// `None` when it exited 0; else its exit status, or why it did not start.
    pub(super) failure: Option<String>,
}

impl Ran {
    fn of(c: &mut Command) -> Self {
        match c.output() {
            Ok(out) => Self {
                stdout: String::from_utf8_lossy(&out.stdout).into(),
                stderr: String::from_utf8_lossy(&out.stderr).into(),
                failure: (!out.status.success()).then(|| out.status.to_string()),
            },
            Err(e) => Self {
                failure: Some(format!("could not run {}: {e}", c.get_program().display())),
                ..Self::default()
            },
        }
    }

    /// Why a spec has no result: what the program printed for it, how it ended, stderr's end.
    fn why_missing(&self, printed: &str) -> String {
        let status = self.failure.as_deref().unwrap_or("exit status: 0");
        let tail: Vec<&str> = self.stderr.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        if tail.is_empty() {
            format!("{printed} ({status})")
        } else {
            format!("{printed} ({status}; stderr: {})", tail.join(" / "))
        }
    }
}

/// One spec's result in a baseline program's output.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Outcome {
    /// A complete line: its median and its result's check.
    Ran { median_us: f64, check: Check },
    /// No complete line: why.
    Missing(String),
}

impl Outcome {
    /// As the row's baseline `name`, against our median `ours_us`.
    fn baseline(self, name: &str, ours_us: f64) -> Baseline {
        match self {
            Self::Ran { median_us, check } => {
                let check = if check.passed {
                    BaselineCheck::Passed(check.detail)
                } else {
                    BaselineCheck::Failed(check.detail)
                };
                Baseline::measured(name, median_us, ours_us, check)
            }
            Self::Missing(why) => Baseline::missing(name, why),
        }
    }
}

/// The outcome of each of `specs` (in order) in `ran`: the first line whose first word is the
/// spec, with `median_us=<t>` and `<field>=0x<hex>`, its value judged by `judge`; a spec
/// without such a line is missing, whatever the exit status (a crash in one variant leaves the
/// lines of those before it valid).
pub(super) fn outcomes(
    ran: &Ran,
    specs: &[String],
    field: &str,
    judge: &dyn Fn(u64) -> Check,
) -> Vec<Outcome> {
    specs
        .iter()
        .map(|spec| {
            let Some(line) = ran
                .stdout
                .lines()
                .find(|l| l.split_whitespace().next() == Some(spec.as_str()))
            else {
                return Outcome::Missing(ran.why_missing("printed no line"));
            };
            let value = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            };
            let median = value("median_us").and_then(|v| v.parse::<f64>().ok());
            let result = value(field)
                .and_then(|v| v.strip_prefix("0x"))
                .and_then(|v| u64::from_str_radix(v, 16).ok());
            match (median, result) {
                (Some(median_us), Some(bits)) => Outcome::Ran {
                    median_us,
                    check: judge(bits),
                },
                _ => Outcome::Missing(ran.why_missing(&format!(
                    "printed `{}`, without both median_us and {field}",
                    line.trim()
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda::runtime::element::{Bf16, F16};
    use ferrocuda_lessons::cpu::exact::{exact_value, layout_of, splitmix_at};
    use ferrocuda_lessons::cpu::{ReduceOp, book_input};

    const N: usize = 1 << 12;
    const BLOCK: usize = 512;

    /// textbook.cu is asked only for the reductions it has (another would be a `miss` in every
    /// row of its variant), and has each it is asked for.
    #[test]
    fn the_textbook_baseline_is_asked_for_its_own_reductions_only() {
        let source = include_str!("../../baselines/textbook.cu");
        for v in ReduceVariant::ALL {
            let named = source.contains(&format!("variant == \"{}\"", v.name()));
            assert_eq!(has_textbook_reduce(v), named, "{}", v.name());
        }
    }

    fn ran(stdout: &str) -> Ran {
        Ran {
            stdout: stdout.into(),
            ..Ran::default()
        }
    }

    fn line(spec: &str, bits: u64) -> String {
        format!(
            "{spec} cuda-c reduce interleaved median_us=12.500 min_us=12.000 max_us=13.000 \
             result_bits=0x{bits:016x}\n"
        )
    }

    /// The bench's input and its sum reference, and the judge of a sum's bits.
    fn sum_of<T: ResultBits>() -> (Vec<T>, Expected) {
        let x: Vec<T> = book_input(N, super::super::input_seed(N));
        let reference = ReduceReference::of(ReduceOp::Sum, &x, |v| v);
        let expected = Expected::of(&x, &reference, None);
        (x, expected)
    }

    fn total<T: ResultBits>(x: &[T]) -> T {
        x.iter().fold(T::default(), |a, &b| a.add(b))
    }

    fn judged<T: ResultBits>(result: T) -> Outcome {
        let (_, expected) = sum_of::<T>();
        let specs = ["interleaved:512".to_string()];
        let out = ran(&line(&specs[0], result.to_result_bits()));
        outcomes(&out, &specs, RESULT_BITS, &expected.sum)
            .pop()
            .expect("one outcome")
    }

    fn failed(o: &Outcome) -> bool {
        matches!(o, Outcome::Ran { check, .. } if !check.passed)
    }

    #[test]
    fn the_right_sum_is_marked_passed_with_its_speedup() {
        let (x, _) = sum_of::<f32>();
        let o = judged(total(&x));
        assert!(
            matches!(&o, Outcome::Ran { check, median_us } if check.passed && *median_us == 12.5)
        );
        let b = o.baseline("cuda-c", 10.0);
        assert_eq!(b.speedup, Some(1.25));
        assert!(matches!(b.check, BaselineCheck::Passed(_)));
        assert_eq!(b.cell("x"), "1.25x");
    }

    #[test]
    fn a_sum_one_block_short_is_marked_failed() {
        let (x, _) = sum_of::<f32>();
        let o = judged(total(&x[BLOCK..]));
        assert!(failed(&o), "{o:?}");
        let b = o.baseline("cuda-c", 10.0);
        assert_eq!(b.speedup, None);
        assert_eq!(b.cell(""), "FAIL");
        let detail = b.check.detail().expect("a detail");
        assert!(
            detail.contains("got") && detail.contains("want"),
            "{detail}"
        );
    }

    #[test]
    fn a_sum_with_one_block_twice_is_marked_failed() {
        let (x, _) = sum_of::<i32>();
        assert!(failed(&judged(total(&x).add(total(&x[..BLOCK])))));
        let (x, _) = sum_of::<f64>();
        assert!(failed(&judged(total(&x) + total(&x[..BLOCK]))));
    }

    #[test]
    fn a_zero_sum_is_marked_failed() {
        assert!(failed(&judged(0.0f32)));
        assert!(failed(&judged(0u64)));
    }

    #[test]
    fn a_doubled_sum_is_marked_failed() {
        let (x, _) = sum_of::<f32>();
        assert!(failed(&judged(2.0 * total(&x))));
        let (x, _) = sum_of::<u32>();
        assert!(failed(&judged(total(&x).wrapping_mul(2))));
    }

    #[test]
    fn a_64_bit_sum_beyond_2_to_53_is_compared_bit_for_bit() {
        // Integer sums have an exact reference at any size: one unit off at 2^60 is caught,
        // which a result printed through a double (`%.17g`) could not show.
        let reference = ReduceReference::of(ReduceOp::Sum, &[1u64 << 60, 1], |v| v);
        assert!(check_sum(&reference, (1 << 60) + 1, 2.0).passed);
        assert!(!check_sum(&reference, 1 << 60, 2.0).passed);
        let reference = ReduceReference::of(ReduceOp::Sum, &[-3i32], |v| v);
        assert!(check_sum(&reference, 0xffff_fffd, 1.0).passed);
        assert!(!check_sum(&reference, 0xffff_ffff_ffff_fffd, 1.0).passed);
    }

    #[test]
    fn a_spec_without_a_line_is_marked_missing_with_the_exit_status() {
        let (x, expected) = sum_of::<f32>();
        let specs = ["interleaved:512".to_string(), "neighbored:512".to_string()];
        let out = Ran {
            stdout: line(&specs[0], total(&x).to_result_bits()),
            stderr: "cudaMalloc failed: out of memory\n".into(),
            failure: Some("exit status: 1".into()),
        };
        let o = outcomes(&out, &specs, RESULT_BITS, &expected.sum);
        // The line that came before the failure still counts.
        assert!(matches!(&o[0], Outcome::Ran { check, .. } if check.passed));
        let Outcome::Missing(why) = &o[1] else {
            panic!("{:?}", o[1]);
        };
        assert!(why.contains("printed no line"), "{why}");
        assert!(
            why.contains("exit status: 1") && why.contains("out of memory"),
            "{why}"
        );
        let b = o[1].clone().baseline("cuda-c", 10.0);
        assert_eq!(
            (b.median_us, b.speedup, b.cell("")),
            (None, None, "miss".into())
        );
    }

    #[test]
    fn a_program_that_printed_nothing_leaves_every_spec_missing() {
        let (_, expected) = sum_of::<f32>();
        let specs = ["cub".to_string()];
        let o = outcomes(&ran(""), &specs, RESULT_BITS, &expected.sum);
        assert!(matches!(&o[0], Outcome::Missing(why) if why.contains("exit status: 0")));
        let crashed = Ran {
            failure: Some("signal: 11 (SIGSEGV)".into()),
            ..Ran::default()
        };
        let o = outcomes(&crashed, &specs, RESULT_BITS, &expected.sum);
        assert!(matches!(&o[0], Outcome::Missing(why) if why.contains("SIGSEGV")));
    }

    #[test]
    fn a_line_cut_short_or_in_the_old_format_is_marked_missing() {
        let (_, expected) = sum_of::<f32>();
        let specs = ["interleaved:512".to_string()];
        for stdout in [
            // Timed, then the process died before the result.
            "interleaved:512 cuda-c reduce interleaved median_us=12.5 min_us=12 max_us=13",
            // A result through a double, which no check can trust.
            "interleaved:512 cuda-c reduce interleaved median_us=12.5 result=2080.0",
            "interleaved:512 cuda-c reduce interleaved median_us=12.5 result_bits=0xzz",
            // A variant the program does not have ends its line empty.
            "interleaved:512 \nneighbored:512 cuda-c reduce neighbored median_us=1 result_bits=0x0",
        ] {
            let o = outcomes(&ran(stdout), &specs, RESULT_BITS, &expected.sum);
            assert!(matches!(&o[0], Outcome::Missing(_)), "{stdout}: {o:?}");
        }
    }

    #[test]
    fn a_cub_line_is_found_by_its_first_word() {
        let (x, expected) = sum_of::<i64>();
        let stdout = format!(
            "cub sum i64 n={N} median_us=7.25 min_us=7 max_us=8 result_bits=0x{:016x}\n",
            total(&x).to_result_bits()
        );
        let o = outcomes(&ran(&stdout), &["cub".into()], RESULT_BITS, &expected.sum);
        assert!(matches!(&o[0], Outcome::Ran { check, median_us: 7.25 } if check.passed));
    }

    /// A 16-bit group's CUB sum is `float`: the exact total's `f32` bits pass; one element
    /// short fails, and so does the total's 16-bit bits (CUB's `__half` result, not `float`).
    #[test]
    fn a_16_bit_sum_is_judged_as_f32() {
        for n in [N, (1 << 20) + 3] {
            let x: Vec<F16> = book_input(n, super::super::input_seed(n));
            let reference = ReduceReference::of(ReduceOp::Sum, &x, |v| v.to_f64() as f32);
            let expected = Expected::of_sum(&reference, n as f64);
            let exact: f64 = x.iter().map(|v| v.to_f64()).sum();
            let judge = |bits: u64| {
                let stdout = format!(
                    "cub sum f16 n={n} median_us=7.25 min_us=7 max_us=8 result_bits=0x{bits:016x}\n"
                );
                outcomes(&ran(&stdout), &["cub".into()], RESULT_BITS, &expected.sum)
                    .pop()
                    .expect("one outcome")
            };
            assert!(!failed(&judge((exact as f32).to_result_bits())), "n = {n}");
            let short = exact - x.iter().rev().find(|v| v.to_f64() != 0.0).unwrap().to_f64();
            assert!(failed(&judge((short as f32).to_result_bits())), "n = {n}");
            assert!(
                failed(&judge(F16::from_f64(exact).to_result_bits())),
                "n = {n}"
            );
        }
    }

    /// A few values of the 16-bit input, pinned where the caps bind (input.h must give them
    /// too: `input_h_generates_book_input` compares the two at these sizes).
    #[test]
    fn the_16_bit_layouts_keep_their_values() {
        use ferrocuda_lessons::cpu::exact::ExactLayout;
        assert_eq!(layout_of::<F16>(8), ExactLayout::Dense { group_sum: 1020 });
        assert_eq!(layout_of::<Bf16>(8), ExactLayout::Dense { group_sum: 256 });
        assert_eq!(layout_of::<f32>(8), ExactLayout::Dense { group_sum: 1020 });
        // f16 dense up to 2^24 / 4 groups of 4; bf16 the same total with smaller groups.
        assert_eq!(
            layout_of::<F16>(1 << 16),
            ExactLayout::Dense { group_sum: 1020 }
        );
        assert_eq!(
            layout_of::<Bf16>(1 << 16),
            ExactLayout::Dense { group_sum: 256 }
        );
        assert_eq!(
            layout_of::<F16>(1 << 20),
            ExactLayout::Dense { group_sum: 64 }
        );
        assert!(matches!(
            layout_of::<Bf16>((1 << 26) + 5),
            ExactLayout::Sparse { .. }
        ));
        let b: Vec<Bf16> = book_input(8, 8);
        assert!(b.iter().all(|v| v.to_f64() <= 256.0) && b.iter().any(|v| v.to_f64() > 20.0));
    }

    /// The 16-bit input is exact in its type and summable in `f32`, and dense: its total grows
    /// with `n` up to 2^24 (a block's range skipped changes it), not up to 2^11 or 2^8.
    #[test]
    fn the_16_bit_input_is_exact_in_its_type_and_dense() {
        fn check<T: ResultBits>(cap: f64) {
            for n in [1usize, 5, 1000, (1 << 20) + 3, 1 << 22] {
                let x: Vec<T> = book_input(n, super::super::input_seed(n));
                let v: Vec<f64> = x.iter().map(|e| e.to_f64()).collect();
                assert!(
                    v.iter().all(|&e| e >= 0.0 && e <= cap && e.fract() == 0.0),
                    "{n}"
                );
                let total: f64 = v.iter().sum();
                assert!(total <= (1u64 << 24) as f64, "{} n = {n}: {total}", T::TYPE);
                let zeros = v.iter().filter(|&&e| e == 0.0).count();
                assert!(zeros <= n / 2, "{} n = {n}: {zeros} zeros", T::TYPE);
            }
        }
        check::<F16>(1020.0);
        check::<Bf16>(256.0);
    }

    #[test]
    fn a_stencil_output_hash_is_checked_against_the_cpu_stencil() {
        let x: Vec<f32> = book_input(1000, 1000);
        let want = stencil_fnv1a(&x, 3, 1 << 22);
        let mut out = ferrocuda_lessons::cpu::stencil(&x, &Taps::Sum { radius: 3 }, Boundary::Zero);
        assert_eq!(fnv1a_elements(&out, FNV_OFFSET), want);
        assert!(check_hash(want, Some(want)).passed);
        // One output one unit off.
        out[999] += 1.0;
        let got = fnv1a_elements(&out, FNV_OFFSET);
        let c = check_hash(got, Some(want));
        assert!(!c.passed && c.detail.contains("want"), "{}", c.detail);
        assert!(!check_hash(want, None).passed);
    }

    #[test]
    fn the_stencil_hash_is_the_same_in_any_chunks() {
        let x: Vec<i32> = book_input(100, 7);
        let whole = ferrocuda_lessons::cpu::stencil(&x, &Taps::Sum { radius: 2 }, Boundary::Zero);
        let want = fnv1a_elements(&whole, FNV_OFFSET);
        for chunk in [1, 7, 64, 100, 1000] {
            assert_eq!(stencil_fnv1a(&x, 2, chunk), want, "chunk {chunk}");
        }
        assert_eq!(stencil_fnv1a::<f64>(&[], 3, 16), FNV_OFFSET);
    }

    #[test]
    fn result_bits_round_trip_and_refuse_what_does_not_fit() {
        assert_eq!((-1i32).to_result_bits(), 0xffff_ffff);
        assert_eq!(i32::from_result_bits(0xffff_ffff), Some(-1));
        assert_eq!(i32::from_result_bits(1 << 32), None);
        assert_eq!(1.5f32.to_result_bits(), 0x3fc0_0000);
        assert_eq!(f64::from_result_bits(0x3ff8_0000_0000_0000), Some(1.5));
        assert_eq!(u64::from_result_bits(u64::MAX), Some(u64::MAX));
        assert_eq!(i64::from_result_bits(u64::MAX), Some(-1));
    }

    /// A few values of the bench's input, pinned: input.h reproduces them in C++, so a change
    /// to the Rust generator must change input.h too (the test below compares the two).
    #[test]
    fn book_input_keeps_its_values() {
        // SplitMix64's first output from 0, as its reference implementation gives it.
        assert_eq!(splitmix_at(0, 0), 0xe220_a839_7b1d_cdaf);
        let f: Vec<f32> = book_input(100, 100);
        assert_eq!(
            f[..8],
            [619.0, 341.0, 17.0, 43.0, 226.0, 411.0, 155.0, 228.0]
        );
        let i: Vec<i32> = book_input(8, 8);
        assert_eq!(i, [54, 1, 1, 180, 202, 16, 43, 154]);
        let u: Vec<u64> = book_input(8, 1 << 40);
        assert_eq!(u, [137, 174, 208, 20, 145, 39, 188, 220]);
        for (n, digits, want) in [
            // Dense, four elements summing to 1020.
            (1usize << 28, 53, [735, 73, 102, 110, 745, 193, 5, 77]),
            // Dense, groups summing to 2 (some elements 0).
            (1 << 25, 24, [1, 1, 0, 0, 0, 1, 0, 1]),
            // Sparse, one 1 in every eight.
            ((1 << 26) + 5, 24, [0, 0, 0, 0, 0, 0, 0, 1]),
        ] {
            let got: Vec<u64> = (0..8)
                .map(|i| exact_value(n, n as u64, digits, i))
                .collect();
            assert_eq!(got, want, "n {n}, {digits} digits");
        }
    }

    /// The C++ compiler to check input.h with: `$CXX`, else the first of `c++`, `g++`,
    /// `clang++` that runs.
    fn cxx() -> Option<String> {
        let candidates = std::env::var("CXX")
            .into_iter()
            .chain(["c++", "g++", "clang++"].map(String::from));
        candidates.into_iter().find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    }

    const DRIVER: &str = r#"
#include "input.h"
#include <cstdio>
#include <cstdlib>
#include <string>
// `driver <type> <n> <seed> hash`: FNV-1a of random_input's bytes;
// `driver <type> <n> <seed> at <i>...`: the bits of elements i.
template <typename T>
int run(size_t n, uint64_t seed, int argc, char** argv) {
  if (std::string(argv[4]) == "hash") {
    std::vector<T> h = random_input<T>(n, seed);
    std::printf("%016llx\n", (unsigned long long)book::fnv1a(h.data(), n * sizeof(T)));
    return 0;
  }
  book::BookInput<T> in(n, seed);
  for (int k = 5; k < argc; k++)
    std::printf("%016llx\n", (unsigned long long)book::bits_of(in.at(std::strtoull(argv[k], nullptr, 0))));
  return 0;
}
int main(int argc, char** argv) {
  if (argc < 5) return 2;
  std::string t = argv[1];
  size_t n = std::strtoull(argv[2], nullptr, 0);
  uint64_t seed = std::strtoull(argv[3], nullptr, 0);
  if (t == "i32") return run<int32_t>(n, seed, argc, argv);
  if (t == "u32") return run<uint32_t>(n, seed, argc, argv);
  if (t == "i64") return run<long long>(n, seed, argc, argv);
  if (t == "u64") return run<unsigned long long>(n, seed, argc, argv);
  if (t == "f32") return run<float>(n, seed, argc, argv);
  if (t == "f64") return run<double>(n, seed, argc, argv);
  if (t == "f16") return run<book::F16Bits>(n, seed, argc, argv);
  if (t == "bf16") return run<book::Bf16Bits>(n, seed, argc, argv);
  return 2;
}
"#;

    /// Element `i` of `book_input::<T>(n, seed)`, alone (its documented definition).
    fn book_value<T: ResultBits>(n: usize, seed: u64, i: usize) -> T {
        if T::TYPE.is_float() {
            T::from_f64(layout_of::<T>(n).value(seed, i as u64) as f64)
        } else {
            ferrocuda_lessons::cpu::from_random_bits::<T>(splitmix_at(seed, i as u64) & 0xFF)
        }
    }

    fn run_driver(driver: &Path, ty: ElemType, n: usize, seed: u64, rest: &[String]) -> Vec<u64> {
        let out = Command::new(driver)
            .args([ty.name().to_string(), n.to_string(), seed.to_string()])
            .args(rest)
            .output()
            .expect("the input.h driver runs");
        assert!(out.status.success(), "input.h driver: {}", out.status);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| u64::from_str_radix(l, 16).expect("hex"))
            .collect()
    }

    /// input.h's whole input (small sizes) and sampled elements (up to 2^32) against Rust's.
    fn input_h_matches<T: ResultBits>(driver: &Path, n_whole: &[usize], n_sampled: &[usize]) {
        let ty = T::TYPE;
        for &n in n_whole {
            for seed in [super::super::input_seed(n), 0xdead_beef_0123_4567] {
                let x: Vec<T> = book_input(n, seed);
                let mut sample = (0..n).step_by(97);
                assert!(sample.all(|i| x[i].same_bits(book_value::<T>(n, seed, i))));
                let got = run_driver(driver, ty, n, seed, &["hash".into()]);
                assert_eq!(
                    got,
                    [fnv1a_elements(&x, FNV_OFFSET)],
                    "random_input<{ty}>({n}, {seed}) differs from book_input"
                );
            }
        }
        for &n in n_sampled {
            let seed = super::super::input_seed(n);
            // The first groups, the last elements, and some anywhere.
            let mut idx: Vec<usize> = (0..40).chain(n - 40..n).collect();
            idx.extend((0..40).map(|k| (splitmix_at(7, k) % n as u64) as usize));
            let args: Vec<String> = ["at".to_string()]
                .into_iter()
                .chain(idx.iter().map(usize::to_string))
                .collect();
            let got = run_driver(driver, ty, n, seed, &args);
            let want: Vec<u64> = idx
                .iter()
                .map(|&i| book_value::<T>(n, seed, i).to_result_bits())
                .collect();
            assert_eq!(
                got, want,
                "input.h's {ty} elements of n = {n} differ from book_input"
            );
        }
    }

    #[test]
    fn input_h_generates_book_input() {
        let Some(cxx) = cxx() else {
            eprintln!(
                "SKIPPED input_h_generates_book_input: no C++ compiler ($CXX, c++, g++, \
                 clang++); the baselines' input generator is NOT compared with book_input"
            );
            return;
        };
        let dir = std::env::temp_dir().join(format!("ferrocuda-input-h-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let source = dir.join("driver.cpp");
        std::fs::write(&source, DRIVER).expect("writing the driver");
        let driver = dir.join("driver");
        // The `input.h` this binary carries (what the benchmark compiles on the GPU machine),
        // not the source tree's: the test runs wherever the binary does.
        std::fs::write(dir.join("input.h"), INPUT_H).expect("writing input.h");
        let out = Command::new(&cxx)
            .args(["-std=c++17", "-O2", "-pthread", "-Wall", "-Werror", "-I"])
            .arg(&dir)
            .arg(&source)
            .arg("-o")
            .arg(&driver)
            .output()
            .expect("the C++ compiler runs");
        assert!(
            out.status.success(),
            "{cxx} failed on input.h: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let big = [(1usize << 26) + 5, 1 << 25, 1 << 28, (1 << 32) + 3];
        input_h_matches::<f32>(&driver, &[100, (1 << 20) + 3], &big);
        input_h_matches::<f64>(&driver, &[100, (1 << 20) + 3], &big);
        input_h_matches::<i32>(&driver, &[100, (1 << 20) + 3], &big);
        input_h_matches::<u32>(&driver, &[1000], &[1 << 28]);
        input_h_matches::<i64>(&driver, &[1000], &[1 << 28]);
        input_h_matches::<u64>(&driver, &[100, (1 << 20) + 3], &big);
        // The 16-bit floats: dense with values up to 1020 (f16) and 256 (bf16) at small n,
        // sparse from a few thousand elements.
        let small = [1, 3, 4, 5, 8, 100, 1000, 1 << 16, (1 << 20) + 3];
        input_h_matches::<F16>(&driver, &small, &big);
        input_h_matches::<Bf16>(&driver, &small, &big);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
