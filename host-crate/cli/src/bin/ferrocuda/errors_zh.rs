//! The errors a learner meets, explained in Chinese (`--lang zh`): each known message, found by
//! a phrase it contains, gets a Chinese sentence saying what went wrong and what to do; the
//! English message is printed beneath it, since it names the kernel and launch configuration.

/// A phrase of an English error message and its Chinese explanation.
const KNOWN: &[(&str, &str)] = &[
    (
        "no NVIDIA driver",
        "这台机器没有 NVIDIA 驱动。没有 GPU 也能学：在课程名前加 `--device cpu`，在 CPU 设备上运行同样的核函数（见 docs/cpu-device.md）。",
    ),
    (
        "does not exist: this machine has",
        "没有这个编号的 CUDA 设备：下面的英文给出本机有几块 GPU（编号从 0 开始）；没有 GPU 时在课程名前加 `--device cpu`。",
    ),
    (
        "no CUDA device",
        "找不到这个编号的 CUDA 设备。`ferrocuda info` 列出本机的 GPU；没有 GPU 时在课程名前加 `--device cpu`。",
    ),
    (
        "no NCCL",
        "找不到 NCCL（多 GPU 通信库）：多 GPU 课程需要它；下面的英文给出安装方法。",
    ),
    (
        "the CPU device has no hardware counters",
        "CPU 设备没有硬件性能计数器：`profile` 需要 NVIDIA GPU 和 Nsight Compute（ncu）。",
    ),
    (
        "ncu (Nsight Compute) not found",
        "找不到 ncu（Nsight Compute，CUDA 工具包的一部分）：安装 CUDA 工具包，并把 ncu 所在目录加入 PATH。",
    ),
    (
        "compute-sanitizer not found",
        "找不到 compute-sanitizer（CUDA 工具包的一部分）：安装 CUDA 工具包并加入 PATH；没有 GPU 时用 `--device cpu sanitize`，在 CPU 设备上做竞争检查。",
    ),
    (
        "is a warp function of 32 lanes",
        "这个核函数使用 32 线程的线程束函数（32 位掩码），而这个设备的 wave 宽 64 个线程：核函数是为 NVIDIA 的 32 线程线程束写的；去掉 `cpu:64`，或改用 `wave` 模块的函数（两种宽度都能用）。",
    ),
    (
        "width must be a power of two",
        "width（段宽）必须是 1 到 32 之间的 2 的幂：洗牌函数只接受 2 的幂（笔记列出的 6 不行）。",
    ),
    (
        "block must be 1..=32",
        "这个演示只用一个线程束，线程块大小必须在 1 到 32 之间。",
    ),
    (
        "needs a block size that is a power of two",
        "这个归约变体要求线程块大小是 64 到 1024 之间的 2 的幂（它的归约树每步减半）；下面的英文指出是哪个变体。",
    ),
    (
        "needs a block size that is a multiple of 32",
        "这个模板变体要求线程块大小是 32 的倍数（32 到 1024）；下面的英文指出是哪个变体。`--variant` 只选一个变体时，其他变体的要求就不再适用。",
    ),
    (
        "needs a block of at least the radius",
        "线程块的线程数不能少于模板半径 R：编号小于 R 的线程要装入两边的光环（halo）。换更大的线程块或更小的半径。",
    ),
    (
        "print-indices needs a grid of at least 1 block",
        "print-indices 需要至少 1 个线程块，每块 1 到 1024 个线程。",
    ),
    (
        "streams needs --n, --kernels and --reps",
        "streams 的 `--n`、`--kernels`、`--reps` 都至少为 1。",
    ),
    (
        "--block must be",
        "`--block`（每个线程块的线程数）超出了允许的范围；下面的英文给出范围。",
    ),
    (
        "weighted stencils are",
        "加权模板只有 f32 与 f64 版本：整数不能乘小数权重。",
    ),
    (
        "threads per block; CUDA allows at most 1024",
        "每个线程块最多 1024 个线程，核函数没有启动；下面的英文指出是哪个核函数、哪个配置。",
    ),
    (
        "invalid launch of kernel",
        "核函数的启动配置（网格、线程块或共享内存大小）超出了硬件的限制，核函数没有启动；下面的英文指出是哪个核函数、哪个配置、哪条限制。",
    ),
    (
        "cannot cover n",
        "用这样的线程块无法覆盖 n 个元素（网格会超过上限）；换更大的线程块或更小的 n。",
    ),
    (
        "dynamic shared memory",
        "申请的动态共享内存超过了每个线程块的上限；下面的英文给出申请量与上限。",
    ),
    (
        "unknown reduce variant",
        "没有这个归约变体；下面的英文列出所有可用的名字。",
    ),
    (
        "unknown stencil variant",
        "没有这个模板变体；下面的英文列出所有可用的名字。",
    ),
    (
        "unknown type",
        "不支持这个元素类型；可用的类型列在下面的英文里。",
    ),
    ("unknown op", "不支持这个运算；可用 sum（求和）、min、max。"),
    (
        "unknown kernel",
        "没有这个核函数；`ferrocuda occupancy` 不带 `--kernel` 时列出全部。",
    ),
    (
        "radius",
        "模板半径不合要求；下面的英文说明允许的半径与线程块大小。",
    ),
    (
        "the reproducible sum is",
        "可复现求和只用于 f32 或 f64 的求和（整数求和在每块 GPU 上本来就相同）。",
    ),
    ("has no", "这个变体没有该类型或运算的版本；下面的英文说明。"),
    (
        "--reps must be at least 1",
        "`--reps`（重复次数）至少为 1。",
    ),
    (
        "printf buffer",
        "要打印的行数超过了设备 printf 缓冲区能保存的行数；减少线程数（`--grid`、`--block`）。",
    ),
    (
        "differ from the CPU",
        "GPU 的结果与 CPU 参考结果不同：这正是检查要抓的错误；下面的英文指出是哪个核函数、哪些元素。",
    ),
    (
        "not caught on this run",
        "这次运行没有发现原样代码的错误；下面的英文列出是哪一段。",
    ),
    ("out of memory", "显存不足：减小 `--n`。"),
    (
        "warp --draw reads each source lane",
        "warp --draw 要求 --offset 小于 --width；下面的英文说明原因。",
    ),
];

/// The Chinese explanation of `message`, if it is one a learner can meet.
pub fn explain(message: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|(phrase, _)| message.contains(phrase))
        .map(|&(_, zh)| zh)
}
