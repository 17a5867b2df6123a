//! The notes' wrong listings, run as printed beside the corrected kernels (`ferrocuda <lesson>
//! --as-printed`): each [`Listing`] launches the kernel of `ferrocuda_lesson_kernels::broken`
//! that reproduces the listing, the corrected kernel on the same input, and the CPU's answer,
//! and says which check catches the listing: the oracle (a wrong answer) or the race checker.
//!
//! A racy listing can give the right answer on a GPU (its lanes happened to run in step); the
//! race checker still reports it. On the CPU device the lesson runs the CPU device's racecheck
//! on the launch itself and counts the hazards; on a GPU, `ferrocuda sanitize --tools
//! racecheck` runs `compute-sanitizer` on the same kernels.
use ferrocuda::runtime::driver::cpu as cpu_device;
use ferrocuda::{Gpu, Result};

use crate::kernels::broken::{
    broken_math_kernel4_precedence, broken_reduce_neighbored_early_return_i32,
    broken_reduce_unrolling2_offset_i32, broken_reduce_v_loop_f32, broken_reduce_volatile_warp_i32,
    broken_reduce1_offset32_f32, broken_stencil_1d_no_sync_f32,
};
use crate::kernels::lab::math_kernel4;
use crate::lab::divergence_expected;
use crate::reduce::{ReduceOp, ReduceRun, ReduceVariant};

/// The chapter a listing belongs to (the lesson whose `--as-printed` runs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chapter {
    /// `ferrocuda divergence --as-printed`.
    Divergence,
    /// `ferrocuda reduce --as-printed`.
    Reduce,
    /// `ferrocuda stencil --as-printed`.
    Stencil,
}

/// What catches a wrong listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Catch {
    /// Its answer differs from the CPU's.
    Oracle,
    /// A race: the race checker reports it, whatever answer a run happens to give.
    Racecheck,
}

/// One wrong listing of the notes.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    /// The chapter whose lesson runs it.
    pub chapter: Chapter,
    /// The listing's name in the notes.
    pub name: &'static str,
    /// The note, by book and chapter.
    pub source: &'static str,
    /// The wrong line(s), as printed.
    pub printed: &'static str,
    /// The corrected kernel run beside it.
    pub corrected: &'static str,
    /// What catches it on a GPU.
    pub catch: Catch,
    /// Why it goes wrong, in English and in Chinese.
    pub why: (&'static str, &'static str),
}

/// Every wrong listing, in the notes' order.
pub const LISTINGS: [Listing; 7] = [
    Listing {
        chapter: Chapter::Divergence,
        name: "mathKernel4",
        source: "《CUDA C编程权威指南》第3章 simpleDivergence.cu",
        printed: "if (itid & 0x01 == 0)",
        corrected: "math_kernel4: if ((itid & 1) == 0)",
        catch: Catch::Oracle,
        why: (
            "`==` binds tighter than `&`: the test is `itid & (0x01 == 0)`, that is `itid & 0`, \
             never true, so every thread takes the else side and no warp takes the if side",
            "`==` 的优先级高于 `&`：条件其实是 `itid & (0x01 == 0)`，即 `itid & 0`，永远为假，\
             所以所有线程都走 else 分支，没有一个线程束走 if 分支",
        ),
    },
    Listing {
        chapter: Chapter::Reduce,
        name: "reduce1",
        source: "樊哲勇《CUDA编程基础与实践》第10章的学习笔记",
        printed: "for (int offset = 32; offset > 0; offset >>= 1) temp += g.shfl_down(temp, offset);",
        corrected: "reduce1_parallelism: offset = g.size() >> 1 (16)",
        catch: Catch::Oracle,
        why: (
            "a shuffle takes only the low 5 bits of its offset (PTX shfl.sync uses b[4:0]), so an \
             offset of 32 is an offset of 0 and each lane reads its own value: the first step \
             doubles every partial; the note launches reduce1 twice, so the total is 4 times the sum",
            "洗牌只取偏移量的低 5 位（PTX 的 shfl.sync 用 b[4:0]），偏移 32 等于偏移 0，每个线程读到的是\
             自己的值：第一步把每个部分和翻倍；笔记调用两次 reduce1，所以总和是正确结果的 4 倍",
        ),
    },
    Listing {
        chapter: Chapter::Reduce,
        name: "reduceUnrolling2",
        source: "学习笔记《CUDA执行模型》 归约初步展开",
        printed: "g_idata[idx] += g_idata[idx + blockDim.x*2*stride]",
        corrected: "unrolling2: g_idata[idx] += g_idata[idx + blockDim.x]",
        catch: Catch::Oracle,
        why: (
            "`stride` is not defined before this line; at its first value, 1, each block adds the \
             first data block of the next pair, which that pair's block is updating at the same \
             time (a race across blocks), instead of its own second one: the second data blocks \
             are never summed, so the answer is wrong on every run; its exact value depends on \
             the order the blocks ran in",
            "这一行之前没有定义 `stride`；取它的第一个值 1 时，每个线程块加上的是下一对的第一个数据块\
             （那一对的线程块正在同时改写它：线程块之间的竞争），而不是自己的第二个数据块：每对的第二个\
             数据块从未被加上，所以每次运行答案都错；错成多少取决于各线程块运行的先后",
        ),
    },
    Listing {
        chapter: Chapter::Reduce,
        name: "reduceNeighbored",
        source: "《CUDA C编程权威指南》3.4",
        printed: "if (idx >= n) return; ... idata[tid] += idata[tid + stride]; __syncthreads();",
        corrected: "neighbored: no early return; idata[tid + stride] read only below n",
        catch: Catch::Oracle,
        why: (
            "with n not a multiple of the block, the last block's threads past n return before \
             the barriers, which CUDA C++ does not allow (on sm_70 and later bar.sync waits only \
             for threads that have not exited, so the GPU does not hang), and the threads below n \
             add idata[tid + stride] past n: elements that are not part of the input",
            "n 不是线程块大小的整数倍时，最后一个线程块中超出 n 的线程在屏障之前就返回了，CUDA C++ 不允许\
             这样做（sm_70 及以后的 bar.sync 只等待尚未退出的线程，所以 GPU 不会卡住）；而 n 以内的线程\
             照样读取 idata[tid + stride]，加上了 n 之后、不属于输入的元素",
        ),
    },
    Listing {
        chapter: Chapter::Reduce,
        name: "reduce (v loop)",
        source: "樊哲勇《CUDA编程基础与实践》第10章的学习笔记",
        printed: "v += s_y[tid + offset]; __syncwarp(); s_y[tid] += s_y[tid + offset]; __syncwarp();",
        corrected: "syncwarp: if (tid < offset) s_y[tid] += s_y[tid + offset]; __syncwarp();",
        catch: Catch::Racecheck,
        why: (
            "every lane still adds into s_y[tid] while another lane reads it between the same \
             two barriers (lane 0 reads s_y[16] as lane 16 writes it): a race; `v` is never used",
            "每个线程仍在同一对屏障之间写 s_y[tid]，而另一个线程正在读它（0 号线程读 s_y[16] 时，16 号\
             线程正在写它）：这是竞争；`v` 算出来却从未被使用",
        ),
    },
    Listing {
        chapter: Chapter::Reduce,
        name: "reduceUnrollWarp8 (volatile)",
        source: "学习笔记《CUDA执行模型》 warp同步执行",
        printed: "volatile int *vmem = idata; vmem[tid] += vmem[tid + 32]; ... vmem[tid] += vmem[tid + 1];",
        corrected: "unroll_warps8: if (tid < offset) ...; __syncwarp(); at each step",
        catch: Catch::Racecheck,
        why: (
            "volatile makes every access a real load or store but orders nothing between lanes: \
             since Volta the lanes of a warp need not run in step, so a lane can read vmem[tid + 16] \
             before its owner has added into it",
            "volatile 只保证每次访问都真正读写内存，并不规定线程之间的先后：从 Volta 起线程束内的线程\
             不一定同步前进，一个线程可能在 vmem[tid + 16] 的主人加完之前就读了它",
        ),
    },
    Listing {
        chapter: Chapter::Stencil,
        name: "stencil_1d",
        source: "《CUDA C/C++ Basics》学习笔记",
        printed: "temp[lindex] = in[gindex]; ... (no __syncthreads()) ... result += temp[lindex + offset];",
        corrected: "shared: __syncthreads() between filling the tile and reading it",
        catch: Catch::Racecheck,
        why: (
            "without the barrier a thread can read a tile slot (a halo, or a neighbour's element) \
             before the thread that fills it has written it",
            "没有这道屏障，一个线程可能在负责写入的线程写好之前，就读取了共享内存 tile 中的某个位置\
             （光环 halo，或相邻线程的元素）",
        ),
    },
];

/// A listing's run: its answer, the corrected kernel's, the CPU's, and what caught it.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The listing.
    pub listing: Listing,
    /// The problem size.
    pub n: usize,
    /// What the listing as printed gave (a value, or the error its launch ended with).
    pub as_printed: String,
    /// What the corrected kernel gave.
    pub corrected: String,
    /// The CPU's answer.
    pub expected: String,
    /// Whether the listing ran to its end and its answer differs from the CPU's.
    pub wrong: bool,
    /// The error the listing's launch ended with, if it did not run to its end (on the CPU
    /// device with `FERROCUDA_CPU_CHECK=fail`, a barrier that exited threads never reach).
    pub launch_error: Option<String>,
    /// Whether the corrected kernel's answer equals the CPU's.
    pub corrected_ok: bool,
    /// On the CPU device, the race checker's reports on the listing's launch (the first few
    /// hazards, then one line counting the rest).
    pub hazards: Option<Vec<String>>,
}

impl Outcome {
    /// How many shared addresses the race checker found hazards at: the reports shown plus
    /// the count of the line that sums up the rest.
    pub fn hazard_addresses(&self) -> usize {
        self.hazards
            .iter()
            .flatten()
            .map(|h| more_count(h).unwrap_or(1))
            .sum()
    }

    /// Whether a check caught the listing: a wrong answer, or a race reported.
    pub fn caught(&self) -> bool {
        self.wrong
            || self.launch_error.is_some()
            || self.hazards.as_ref().is_some_and(|h| !h.is_empty())
    }
}

/// The listings of `chapter`.
pub fn listings(chapter: Chapter) -> Vec<Listing> {
    LISTINGS
        .into_iter()
        .filter(|l| l.chapter == chapter)
        .collect()
}

/// Inputs whose sums are exact in `f32` and `i32`: 1, 2, ..., 7, 1, 2, ...
fn small_ints(n: usize) -> Vec<i32> {
    (0..n).map(|i| (i % 7) as i32 + 1).collect()
}

/// Runs `listing` on `gpu` and its corrected kernel beside it. On the CPU device, the race
/// checker watches the listing's launch.
pub fn run(gpu: &Gpu, listing: &Listing) -> Result<Outcome> {
    let watch = gpu.is_cpu() && listing.catch == Catch::Racecheck;
    let (failing, racing) = (
        cpu_device::fails_on_findings(),
        cpu_device::racecheck_enabled(),
    );
    if watch {
        // The findings of earlier launches are the caller's to read before this one.
        cpu_device::take_findings();
        cpu_device::fail_on_findings(false);
        cpu_device::racecheck(true);
    }
    let run = run_listing(gpu, listing);
    let hazards = if watch {
        cpu_device::racecheck(racing);
        cpu_device::fail_on_findings(failing);
        Some(
            cpu_device::take_findings()
                .into_iter()
                .filter(|f| f.tool == "racecheck")
                .map(|f| f.message)
                .collect(),
        )
    } else {
        None
    };
    let (n, answer, expected) = run?;
    let (corrected, corrected_ok) = run_corrected(gpu, listing, n, &expected)?;
    let (as_printed, launch_error) = match answer {
        Ok(v) => (v, None),
        Err(e) => (format!("error: {e}"), Some(e.to_string())),
    };
    let wrong = launch_error.is_none() && as_printed != expected;
    Ok(Outcome {
        listing: *listing,
        n,
        as_printed,
        corrected,
        expected,
        wrong,
        launch_error,
        corrected_ok,
        hazards,
    })
}

/// The listing's launch: `(n, its answer or the error its launch ended with, the CPU's
/// answer)`.
fn run_listing(gpu: &Gpu, listing: &Listing) -> Result<(usize, Result<String>, String)> {
    let answer = |r: Result<String>| r;
    Ok(match listing.name {
        "mathKernel4" => {
            let (n, block, work) = (256, 128, 8);
            let got = divergence_run(gpu, broken_math_kernel4_precedence(), n, block, work);
            (
                n,
                answer(got),
                divergence_summary(&divergence_want(n, work)),
            )
        }
        "reduce1" => {
            // The note's two launches: N -> GRID partials, then <<<1, 1024>>> in place.
            let (n, grid, block) = (100_000, 40, 128);
            let x: Vec<f32> = small_ints(n).into_iter().map(|v| v as f32).collect();
            let want: f32 = x.iter().sum();
            let got = (|| {
                let d_x = gpu.upload(&x, "reduce1 input")?;
                let d_y = gpu.alloc::<f32>(grid as usize, "reduce1 partials")?;
                let k = crate::kernel(gpu, broken_reduce1_offset32_f32())?;
                // SAFETY: `d_x` holds `n` floats and `d_y` one per block of the first launch;
                // the second launch reads and writes `d_y` with one block, as the kernel allows.
                unsafe {
                    k.launch_and_wait(
                        k.config(grid, block),
                        (d_x.as_device_ptr(), d_y.as_device_ptr(), n),
                    )?;
                    k.launch_and_wait(
                        k.config(1, 1024),
                        (d_y.as_device_ptr(), d_y.as_device_ptr(), grid as usize),
                    )?;
                }
                Ok(format!("{}", gpu.download(&d_y)?[0]))
            })();
            (n, answer(got), format!("{want}"))
        }
        "reduceUnrolling2" => {
            let (n, block) = (1 << 14, 128usize);
            let x = small_ints(n);
            let grid = n.div_ceil(2 * block);
            let got = partial_sums(
                gpu,
                broken_reduce_unrolling2_offset_i32(),
                &x,
                n,
                grid,
                block,
            );
            (n, answer(got), x.iter().sum::<i32>().to_string())
        }
        "reduceNeighbored" => {
            // The first n elements of a longer array: the rest of the last block's chunk holds
            // the array's next elements, which are not part of the sum.
            let (n, block) = (1000usize, 128usize);
            let grid = n.div_ceil(block);
            // The kernel reads its last block's whole chunk.
            let x = small_ints(grid * block);
            let got = partial_sums(
                gpu,
                broken_reduce_neighbored_early_return_i32(),
                &x,
                n,
                grid,
                block,
            );
            (n, answer(got), x[..n].iter().sum::<i32>().to_string())
        }
        "reduce (v loop)" => {
            let (n, block) = (1024usize + 3, 128usize);
            let x: Vec<f32> = small_ints(n).into_iter().map(|v| v as f32).collect();
            let got = (|| {
                let grid = n.div_ceil(block);
                let d_x = gpu.upload(&x, "v loop input")?;
                let d_y = gpu.alloc::<f32>(grid, "v loop partials")?;
                let k = crate::kernel(gpu, broken_reduce_v_loop_f32())?;
                // SAFETY: `n` floats in, one partial per block out.
                unsafe {
                    k.launch_and_wait(
                        k.config(grid as u32, block as u32),
                        (d_x.as_device_ptr(), d_y.as_device_ptr(), n),
                    )?
                };
                Ok(format!("{}", gpu.download(&d_y)?.iter().sum::<f32>()))
            })();
            (n, answer(got), format!("{}", x.iter().sum::<f32>()))
        }
        "reduceUnrollWarp8 (volatile)" => {
            let (n, block) = (1024usize + 3, 128usize);
            let x = small_ints(n);
            let grid = n.div_ceil(block);
            let got = (|| {
                let d_x = gpu.upload(&x, "volatile warp input")?;
                let d_y = gpu.alloc::<i32>(grid, "volatile warp partials")?;
                let k = crate::kernel(gpu, broken_reduce_volatile_warp_i32())?;
                // SAFETY: `n` ints in, one partial per block out.
                unsafe {
                    k.launch_and_wait(
                        k.config(grid as u32, block as u32),
                        (d_x.as_device_ptr(), d_y.as_device_ptr(), n),
                    )?
                };
                Ok(gpu.download(&d_y)?.iter().sum::<i32>().to_string())
            })();
            (n, answer(got), x.iter().sum::<i32>().to_string())
        }
        "stencil_1d" => {
            let (n, block) = (1000usize, 128usize);
            let x: Vec<f32> = small_ints(n).into_iter().map(|v| v as f32).collect();
            let want = stencil_want(&x);
            let got = (|| {
                let d_x = gpu.upload(&x, "stencil input")?;
                let out = gpu.upload(&vec![f32::NAN; n], "stencil output (poisoned)")?;
                let k = crate::kernel(gpu, broken_stencil_1d_no_sync_f32())?;
                // SAFETY: `n` floats each way.
                unsafe {
                    k.launch_and_wait(
                        k.config(n.div_ceil(block) as u32, block as u32),
                        (d_x.as_device_ptr(), out.as_device_ptr(), n),
                    )?
                };
                Ok(stencil_summary(&gpu.download(&out)?, &want))
            })();
            (n, answer(got), stencil_summary(&want, &want))
        }
        other => unreachable!("no run for listing {other}"),
    })
}

/// The corrected kernel's answer on the same input, and whether it equals `expected`.
fn run_corrected(gpu: &Gpu, listing: &Listing, n: usize, expected: &str) -> Result<(String, bool)> {
    let reduce_i32 = |variant: ReduceVariant| -> Result<String> {
        let d = gpu.upload(&small_ints(n), "corrected input")?;
        Ok(ReduceRun::<i32>::new(gpu, variant, ReduceOp::Sum, &d, 128)?
            .run()?
            .to_string())
    };
    let reduce_f32 = |variant: ReduceVariant| -> Result<String> {
        let x: Vec<f32> = small_ints(n).into_iter().map(|v| v as f32).collect();
        let d = gpu.upload(&x, "corrected input")?;
        Ok(format!(
            "{}",
            ReduceRun::<f32>::new(gpu, variant, ReduceOp::Sum, &d, 128)?.run()?
        ))
    };
    let got = match listing.name {
        "mathKernel4" => divergence_run(gpu, math_kernel4(), n, 128, 8)?,
        "reduce1" => reduce_f32(ReduceVariant::Reduce1Parallelism)?,
        "reduceUnrolling2" => reduce_i32(ReduceVariant::Unrolling2)?,
        "reduceNeighbored" => reduce_i32(ReduceVariant::Neighbored)?,
        "reduce (v loop)" => reduce_f32(ReduceVariant::Syncwarp)?,
        "reduceUnrollWarp8 (volatile)" => reduce_i32(ReduceVariant::UnrollWarps8)?,
        "stencil_1d" => {
            use crate::stencil::{Boundary, StencilRun, StencilVariant, Taps};
            let x: Vec<f32> = small_ints(n).into_iter().map(|v| v as f32).collect();
            let input = gpu.upload(&x, "stencil input")?;
            let mut output = gpu.alloc::<f32>(n, "stencil output")?;
            let taps = Taps::<f32>::Sum { radius: 3 };
            StencilRun::new(
                gpu,
                StencilVariant::Shared,
                &taps,
                Boundary::Zero,
                &input,
                &mut output,
                128,
            )?
            .run()?;
            stencil_summary(&gpu.download(&output)?, &stencil_want(&x))
        }
        other => unreachable!("no corrected kernel for listing {other}"),
    };
    let ok = got == expected;
    Ok((got, ok))
}

/// A `simpleDivergence` kernel's output over `n` elements, summarised.
fn divergence_run(
    gpu: &Gpu,
    entry: crate::lab::DivergenceKernel,
    n: usize,
    block: u32,
    work: u32,
) -> Result<String> {
    let c = gpu.upload(&vec![f32::NAN; n], "divergence output (poisoned)")?;
    let k = crate::kernel(gpu, entry)?;
    // SAFETY: `c` holds `n` floats.
    unsafe {
        k.launch_and_wait(
            k.config(n.div_ceil(block as usize) as u32, block),
            (c.as_device_ptr(), n, work),
        )?
    };
    let got = gpu.download(&c)?;
    let if_side = crate::lab::divergence_side(100.0, work);
    Ok(divergence_summary(
        &got.iter()
            .map(|v| v.to_bits() == if_side.to_bits())
            .collect::<Vec<_>>(),
    ))
}

/// Which threads `math_kernel4` sends to the `if` side.
fn divergence_want(n: usize, work: u32) -> Vec<bool> {
    let if_side = crate::lab::divergence_side(100.0, work);
    (0..n)
        .map(|tid| divergence_expected(3, tid, work).to_bits() == if_side.to_bits())
        .collect()
}

/// `warps taking if: 0 2 4 6 of 8` from which threads took the `if` side.
fn divergence_summary(if_side: &[bool]) -> String {
    let warps: Vec<String> = if_side
        .chunks(32)
        .enumerate()
        .filter(|(_, w)| w.iter().all(|&t| t))
        .map(|(i, _)| i.to_string())
        .collect();
    let threads = if_side.iter().filter(|&&t| t).count();
    format!(
        "if side: {threads} of {} threads, warps [{}] of {}",
        if_side.len(),
        warps.join(" "),
        if_side.len().div_ceil(32)
    )
}

/// The notes' stencil, `R = 3`, zero outside the input.
fn stencil_want(x: &[f32]) -> Vec<f32> {
    (0..x.len() as i64)
        .map(|i| {
            (i - 3..=i + 3)
                .filter(|&j| j >= 0 && (j as usize) < x.len())
                .map(|j| x[j as usize])
                .sum()
        })
        .collect()
}

/// `all 1000 outputs right` or `37 of 1000 outputs wrong (first at 0: NaN, want 10)`.
fn stencil_summary(got: &[f32], want: &[f32]) -> String {
    let bad: Vec<usize> = (0..want.len())
        .filter(|&i| got[i].to_bits() != want[i].to_bits())
        .collect();
    match bad.first() {
        None => format!("all {} outputs right", want.len()),
        Some(&i) => format!(
            "{} of {} outputs wrong (first at {i}: {}, want {})",
            bad.len(),
            want.len(),
            got[i],
            want[i]
        ),
    }
}

/// A textbook-style kernel `(g_idata, g_odata, n)` over a scratch copy of `x`, its partials
/// summed on the host.
fn partial_sums(
    gpu: &Gpu,
    entry: ferrocuda::kernels::entry::Entry<(*mut i32, *mut i32, usize)>,
    x: &[i32],
    n: usize,
    grid: usize,
    block: usize,
) -> Result<String> {
    debug_assert!(x.len() >= n);
    let d = gpu.upload(x, "listing input (overwritten)")?;
    let partials = gpu.alloc::<i32>(grid, "listing partials")?;
    let k = crate::kernel(gpu, entry)?;
    // SAFETY: `d` holds `x.len() >= grid * block` ints for the kernels that read their whole
    // chunk (and `n` for the rest); one partial per block out.
    unsafe {
        k.launch_and_wait(
            k.config(grid as u32, block as u32),
            (d.as_device_ptr(), partials.as_device_ptr(), n),
        )?
    };
    Ok(gpu
        .download(&partials)?
        .iter()
        .fold(0i32, |a, &b| a.wrapping_add(b))
        .to_string())
}

/// `263` of a report `...: 263 more shared addresses with hazards`.
fn more_count(report: &str) -> Option<usize> {
    let head = report.strip_suffix(" more shared addresses with hazards")?;
    head.rsplit(' ').next()?.parse().ok()
}
