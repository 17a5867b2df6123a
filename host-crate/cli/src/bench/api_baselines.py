# Per-call cost of the `api` family's work from Python, for `ferrocuda bench` (embedded in the
# binary and fed to `python3 - CALLS N...`). For each library present (CuPy, PyTorch) and each
# size: 30 warm-up calls, then CALLS calls each timed with time.perf_counter; prints
#   version <lib> <version>
#   <lib> sum <n> <median_us>        float(x.sum()) / t.sum().item(): result on the host
#   <lib> stencil <n> <median_us>    conv1d with 7 ones, zero padding: CALLS calls back to back
#                                    and one synchronize, divided by CALLS (median of 5)
# The input is f32 and already on the device, as in the Rust rows.
import statistics
import sys
import time

calls = int(sys.argv[1])
sizes = [int(n) for n in sys.argv[2:]]


def median_us(call):
    for _ in range(30):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


try:
    import cupy

    print("version cupy", cupy.__version__, flush=True)
    for n in sizes:
        x = (cupy.arange(n, dtype=cupy.int64) * 37 % 101 - 50).astype(cupy.float32)
        print("cupy sum", n, f"{median_us(lambda: float(x.sum())):.3f}", flush=True)
        del x
    cupy.get_default_memory_pool().free_all_blocks()
except ImportError:
    pass

try:
    import torch

    if torch.cuda.is_available():
        print("version torch", torch.__version__, flush=True)
        for n in sizes:
            t = ((torch.arange(n, dtype=torch.int64, device="cuda") * 37) % 101 - 50).float()
            print("torch sum", n, f"{median_us(lambda: t.sum().item()):.3f}", flush=True)
            w = torch.ones(1, 1, 7, device="cuda")
            v = t.view(1, 1, n)

            def pipelined():
                for _ in range(30):
                    torch.nn.functional.conv1d(v, w, padding=3)
                torch.cuda.synchronize()
                per_call = []
                for _ in range(5):
                    start = time.perf_counter()
                    for _ in range(calls):
                        torch.nn.functional.conv1d(v, w, padding=3)
                    torch.cuda.synchronize()
                    per_call.append((time.perf_counter() - start) * 1e6 / calls)
                return statistics.median(per_call)

            print("torch stencil", n, f"{pipelined():.3f}", flush=True)
            del t, v
            torch.cuda.empty_cache()
except ImportError:
    pass
