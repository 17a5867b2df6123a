"""CUB's device reduction through CuPy (`cupy.sum`/`min`/`max` call cub::DeviceReduce), timed
the same way ferrocuda times its kernels: CUDA events, warm-up, median of repetitions.

    python3 cupy_reduce.py [--sizes 2^20,2^24,2^28] [--types f32,i32] [--reps 20]

Prints one line per (op, type, size): median microseconds and GB/s of input read.
"""
import argparse
import statistics

import cupy as cp


def parse_count(s):
    s = s.strip()
    if s.startswith("2^"):
        return 1 << int(s[2:])
    return int(s)


def time_median(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2^20,2^24,2^28")
    ap.add_argument("--types", default="f32,i32")
    ap.add_argument("--ops", default="sum")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    dtypes = {"i32": cp.int32, "u32": cp.uint32, "i64": cp.int64, "u64": cp.uint64, "f32": cp.float32, "f64": cp.float64}
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"cub (cupy {cp.__version__}) on {name}")
    for op in a.ops.split(","):
        for t in a.types.split(","):
            for s in a.sizes.split(","):
                n = parse_count(s)
                x = cp.random.randint(0, 256, n).astype(dtypes[t]) if t[0] in "iu" else cp.random.uniform(-1, 1, n).astype(dtypes[t])
                out = cp.empty((), dtype=x.dtype if op != "sum" or t[0] == "f" else x.dtype)
                f = {"sum": lambda: cp.sum(x, out=out), "min": lambda: cp.min(x, out=out), "max": lambda: cp.max(x, out=out)}[op]
                sec = time_median(f, a.reps)
                print(f"cub {op} {t} n={n}: {sec * 1e6:.2f} us, {x.nbytes / sec / 1e9:.0f} GB/s")
                del x


if __name__ == "__main__":
    main()
