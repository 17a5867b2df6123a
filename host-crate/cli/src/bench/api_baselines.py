# Per-call cost of the `api` family's work from Python, for `ferrocuda bench` (embedded in the
# binary and fed to `python3 - CALLS N...`). For each library present (CuPy, PyTorch) and each
# size: 30 warm-up calls, then CALLS calls each timed with time.perf_counter; prints
#   version <lib> <version>
#   <lib> sum <n> <median_us> <result>        float(x.sum()) / t.sum().item(): result on the
#                                             host; <result> is the last call's
#   <lib> sum_<t> <n> <median_us> <result>    t = f16, bf16: the same input as that 16-bit type,
#                                             x.sum(dtype=float32): summed in float, as ours
#   <lib> native_<t> <n> <median_us> <result> its plain x.sum(), the result in the 16-bit type
#   <lib> stencil <n> <median_us> <checksum>  conv1d with 7 ones, zero padding: CALLS calls back
#                                             to back and one synchronize, divided by CALLS
#                                             (median of 5); <checksum> is the output's sum in
#                                             float64 (exact: the outputs are small integers)
# The input is f32 and already on the device, as in the Rust rows, and the same as theirs
# (`api_input` in api.rs): 1 or 2 at every 32nd element, 0 elsewhere, so that every float sum
# of it is exact and the bench can check each result.
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
        result = call()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples), result


def api_input(i):
    """`api_input` of api.rs, as int64, from an int64 `arange`."""
    return (i % 32 == 0) * (1 + (i // 32) % 2)


try:
    import cupy

    print("version cupy", cupy.__version__, flush=True)
    for n in sizes:
        x = api_input(cupy.arange(n, dtype=cupy.int64)).astype(cupy.float32)
        us, result = median_us(lambda: float(x.sum()))
        print("cupy sum", n, f"{us:.3f}", repr(result), flush=True)
        h = x.astype(cupy.float16)  # CuPy has no bfloat16
        us, result = median_us(lambda: float(h.sum(dtype=cupy.float32)))
        print("cupy sum_f16", n, f"{us:.3f}", repr(result), flush=True)
        us, result = median_us(lambda: float(h.sum()))
        print("cupy native_f16", n, f"{us:.3f}", repr(result), flush=True)
        del x, h
    cupy.get_default_memory_pool().free_all_blocks()
except ImportError:
    pass

try:
    import torch

    if torch.cuda.is_available():
        print("version torch", torch.__version__, flush=True)
        for n in sizes:
            t = api_input(torch.arange(n, dtype=torch.int64, device="cuda")).float()
            us, result = median_us(lambda: t.sum().item())
            print("torch sum", n, f"{us:.3f}", repr(float(result)), flush=True)
            for name, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
                h = t.to(dtype)
                us, result = median_us(lambda: h.sum(dtype=torch.float32).item())
                print(f"torch sum_{name}", n, f"{us:.3f}", repr(float(result)), flush=True)
                us, result = median_us(lambda: h.sum().item())
                print(f"torch native_{name}", n, f"{us:.3f}", repr(float(result)), flush=True)
                del h
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

            checksum = torch.nn.functional.conv1d(v, w, padding=3).double().sum().item()
            print("torch stencil", n, f"{pipelined():.3f}", repr(float(checksum)), flush=True)
            del t, v
            torch.cuda.empty_cache()
except ImportError:
    pass
