//! What each lesson prints around its output in the chosen language: in Chinese a heading and
//! what the columns mean before the output; in both languages, after it, the one line saying
//! what to look at.
use ferrocuda_lessons::lang;

/// A lesson's words: `(subcommand, Chinese heading, Chinese column explanation, what to look
/// at in English, in Chinese)`.
type Words = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

const LESSONS: &[Words] = &[
    (
        "print-indices",
        "线程、线程块与线程束：每个线程用设备端 printf 打印自己的 threadIdx.x 与 blockIdx.x（沐曦 MXMACA 教材第5章的练习）",
        "每行一个线程；行的先后就是各线程束实际运行的先后。",
        "one line per thread; the lines of a warp come out together, in the order the warps ran; threads 32 and up of a block are its second warp",
        "每个线程一行；同一个线程束的行连在一起，按线程束实际运行的先后出现；每个线程块的 32 号及以后的线程属于它的第二个线程束",
    ),
    (
        "divergence",
        "分支发散（branch divergence）：simpleDivergence 的四个核函数（《CUDA执行模型》、沐曦 MXMACA 教材第5章）",
        "列：kernel 核函数；median us 中位时间（微秒）；vs k2 与 math_kernel2 的时间之比；check 与 CPU 结果对照；branch 分支条件。",
        "math_kernel1 and math_kernel3 (even and odd lanes of a warp take different sides) against math_kernel2, whose branch is the same for a whole warp; every check PASS",
        "math_kernel1 与 math_kernel3（同一线程束的奇偶线程走不同分支）比整个线程束走同一分支的 math_kernel2 慢多少；每个 check 都应为 PASS",
    ),
    (
        "waves",
        "宽度为 64 的 wave（沐曦 MXMACA 教材第5章）：200 个线程如何分组、wave 内的同步与分化、按 wave 计的占有率",
        "lanes 每个 wave 的线程数；ballot 表决结果（64 位掩码）；waves/block 每个线程块的 wave 数。",
        "the lanes of each wave (64, 64, 64, 8 on 64-wide waves), the ballot of lane < 32, and waves/block in the occupancy table",
        "每个 wave 的线程数（64 宽时为 64、64、64、8）、lane < 32 的表决结果，以及占有率表中的 waves/block",
    ),
    (
        "warp",
        "线程束内基本函数（樊哲勇《CUDA编程基础与实践》第10章）：表决函数与洗牌函数，16 个线程、每段 8 个线程",
        "每行一个线程（lane）；各列是 __ballot_sync、__all_sync、__any_sync、__shfl_sync、__shfl_up_sync、__shfl_down_sync、__shfl_xor_sync 的结果。",
        "shfl_xor takes lane t ^ m's value; shfl_up and shfl_down keep their own value at a segment's edge; the last line says every column equals the CPU's warp model",
        "shfl_xor 一列取的是第 t ^ m 号线程的值；shfl_up、shfl_down 在段的边缘保留自己的值；最后一行说明每一列都与 CPU 的线程束模型一致",
    ),
    (
        "stencil",
        "共享内存（shared memory）与一维模板（1D stencil）（《CUDA C/C++ Basics》学习笔记）",
        "列：variant 变体；median us 中位时间（微秒）；GB/s 有效带宽；%copy 占设备内复制带宽的百分比；check 与 CPU 对照。",
        "the naive, shared and fast rows and their %copy; the shared tile of the notes is not faster than the naive kernel on a GPU with large caches; every check PASS",
        "naive、shared、fast 三行的 %copy；在缓存很大的 GPU 上，笔记的共享内存版本并不比朴素版本快；每个 check 都应为 PASS",
    ),
    (
        "reduce",
        "并行归约（reduction）（《CUDA C编程权威指南》3.4、《CUDA执行模型》、樊哲勇《CUDA编程基础与实践》第10章）",
        "列：variant 变体；median us 中位时间（微秒）；GB/s 有效带宽；%copy 占设备内复制带宽的百分比；check 与 CPU 结果对照。",
        "the median time falling down the ladder, the %copy column rising, every check PASS",
        "自上而下中位时间减少、%copy 增大，每个 check 都应为 PASS",
    ),
    (
        "occupancy",
        "占有率（occupancy）（《CUDA执行模型》、沐曦 MXMACA 教材第5章）：寄存器、共享内存、线程束数与线程块数上限决定每个 SM 的线程块数",
        "列：blk/SM 驱动给出的每 SM 线程块数；computed 手算的结果；limited by 限制因素；sugg. 驱动建议的线程块大小。",
        "blk/SM (the driver's) equal to computed (the calculation) on every row, and the limited-by column",
        "每一行驱动给出的 blk/SM 与手算的 computed 相等，以及 limited by（限制因素）一列",
    ),
    (
        "streams",
        "流（stream）与事件（event）（沐曦 MXMACA 教材第5章）：一次主机到设备的复制与一串核函数，在一个流上与两个流上",
        "每行一种安排及其耗时（毫秒）；overlap 是较短部分被较长部分掩盖的比例。",
        "on two streams the total is close to the longer of the copy and the kernels, not their sum (the overlap line)",
        "两个流时总时间接近复制与核函数中较长的一个，而不是两者之和（overlap 一行）",
    ),
    (
        "sanitize",
        "竞争检查（racecheck）：每个库核函数，以及笔记中按原样运行会出错的核函数",
        "每行一个核函数；各列是各检查工具发现的问题数。",
        "every library kernel with 0 hazards, and the notes' racy listings (broken_*) flagged",
        "每个库核函数的竞争数为 0，而笔记中有竞争的代码（broken_*）被报告出来",
    ),
    (
        "profile",
        "性能分析（profiling）：笔记中 nvprof 的指标，用 Nsight Compute 测量",
        "每行一个核函数；各列是占有率、全局加载效率与吞吐、共享内存效率、每个线程束的指令数与分支效率。",
        "achieved occupancy, global load efficiency and branch efficiency per kernel, beside the notes' own figures",
        "每个核函数的实际占有率、全局加载效率与分支效率，并与笔记中的数字对照",
    ),
];

/// The pictures of `--draw`: `(subcommand, Chinese heading, what to look at in English, in
/// Chinese)`.
const PICTURES: &[PictureWords] = &[
    (
        "reduce",
        "归约树：每一步哪些线程在做加法（由核函数实际运行记录）",
        "neighbored has adding threads in both warps until the second-to-last step, most of their lanes idle; neighbored_less and interleaved do the same adds with the adding threads packed into warp 0, so warp 1 adds in no step at all (its threads still run the loop and reach every barrier, only their branch is never taken)",
        "neighbored 直到倒数第二步，两个线程束里都有做加法的线程，但大半线程空闲；neighbored_less 与 interleaved 做同样多的加法，却把做加法的线程集中在 0 号线程束里，1 号线程束在任何一步都不做加法（它的线程照样执行循环、到达每道屏障，只是分支从不成立）",
    ),
    (
        "divergence",
        "分支发散：每个线程束中哪些线程走 if 分支（由每个线程实际写出的结果得到）",
        "math_kernel1 and math_kernel3 split every warp (mask 0x55555555), so each warp runs both sides one after the other; math_kernel2 and math_kernel4 keep each warp on one side",
        "math_kernel1 与 math_kernel3 把每个线程束一分为二（掩码 0x55555555），每个线程束要先后执行两个分支；math_kernel2 与 math_kernel4 让每个线程束只走一边",
    ),
    (
        "stencil",
        "一维模板的共享内存 tile：每个线程块的 tile 装了输入的哪些元素（由核函数实际运行记录）",
        "each block stages its own 8 cells and R = 3 more on each side, its halos, which belong to its neighbours; block 0's left halo (-3..-1) and the last block's right halo lie outside the input and hold the boundary's zeros",
        "每个线程块装入自己的 8 个元素，再在两边各多装 R = 3 个，即光环（halo），它们属于相邻的线程块；0 号线程块左边的光环（-3..-1）和最后一个线程块右边的光环在输入之外，装的是边界值 0",
    ),
    (
        "warp",
        "洗牌函数：每个线程读到的是哪个线程的值（由演示程序的输出得到）",
        "shfl_xor with mask m swaps each lane t with lane t ^ m inside its segment (with the notes' m = 4 and segments of 8, lanes 0-3 with 4-7); shfl_up and shfl_down read their own lane where the source would leave the segment",
        "掩码为 m 的 shfl_xor 在段内把第 t 号线程与第 t ^ m 号交换（笔记的 m = 4、段宽 8 时，0-3 号与 4-7 号交换）；shfl_up、shfl_down 的源线程若落在段外，就读自己的值",
    ),
];

const AS_PRINTED: Words = (
    "--as-printed",
    "笔记中有错的代码，按原样运行",
    "每段代码：原文、修正、原样运行的结果、修正后的结果、CPU 参考结果，以及由哪种检查发现。",
    "",
    "",
);

fn words(lesson: &str) -> Option<&'static Words> {
    LESSONS.iter().find(|w| w.0 == lesson)
}

/// How a lesson runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The lesson itself.
    Lesson,
    /// `--as-printed`: the notes' wrong listings.
    AsPrinted,
    /// `--draw`: its pictures.
    Draw,
}

type PictureWords = (&'static str, &'static str, &'static str, &'static str);

fn picture(lesson: &str) -> Option<&'static PictureWords> {
    PICTURES.iter().find(|p| p.0 == lesson)
}

/// Before a lesson's output, in Chinese: its heading and what the columns mean.
pub fn intro(lesson: &str, mode: Mode) {
    if !lang::chinese() {
        return;
    }
    match mode {
        Mode::Lesson | Mode::AsPrinted => {
            let w = if mode == Mode::AsPrinted {
                Some(&AS_PRINTED)
            } else {
                words(lesson)
            };
            if let Some(&(_, heading, columns, _, _)) = w {
                println!("【{heading}】");
                println!("{columns}");
            }
        }
        Mode::Draw => {
            if let Some(&(_, heading, _, _)) = picture(lesson) {
                println!("【{heading}】");
            }
        }
    }
}

/// After a lesson's output: what to look at (`--as-printed` prints its own).
pub fn look_at(lesson: &str, mode: Mode) {
    match mode {
        Mode::Lesson => {
            if let Some(&(_, _, _, en, zh)) = words(lesson) {
                lang::look_at(en, zh);
            }
        }
        Mode::Draw => {
            if let Some(&(_, _, en, zh)) = picture(lesson) {
                lang::look_at(en, zh);
            }
        }
        Mode::AsPrinted => {}
    }
}
