# CuPy's copies between page-locked host memory and the device, for `ferrocuda bench`'s
# `transfer` family (embedded in the binary and fed to `python3 - REPS N...`). For each size:
# a pinned host array (cupy.cuda.alloc_pinned_memory) and a device array of N float32, the same
# input as the Rust rows (`api_input` in api.rs); 3 untimed copies, then REPS copies each
# between two events on a non-blocking stream; prints
#   version cupy <version>
#   cupy h2d <n> <median_us> <checksum>   x.set(host, stream): host to device
#   cupy d2h <n> <median_us> <checksum>   x.get(stream, out=host): device to host
# where <checksum> is the float64 sum of what arrived (exact: the values are small integers).
import statistics
import sys

reps = int(sys.argv[1])
sizes = [int(n) for n in sys.argv[2:]]

try:
    import cupy
    import numpy
except ImportError:
    sys.exit(0)

print("version cupy", cupy.__version__, flush=True)
stream = cupy.cuda.Stream(non_blocking=True)
for n in sizes:
    i = numpy.arange(n, dtype=numpy.int64)
    values = ((i % 32 == 0) * (1 + (i // 32) % 2)).astype(numpy.float32)
    memory = cupy.cuda.alloc_pinned_memory(n * 4)
    host = numpy.frombuffer(memory, numpy.float32, n)
    host[:] = values
    device = cupy.empty(n, dtype=cupy.float32)

    def median_us(copy):
        for _ in range(3):
            copy()
        stream.synchronize()
        samples = []
        for _ in range(reps):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            copy()
            end.record(stream)
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1e3)
        return statistics.median(samples)

    us = median_us(lambda: device.set(host, stream=stream))
    print("cupy h2d", n, f"{us:.3f}", repr(float(device.sum(dtype=cupy.float64))), flush=True)
    host[:] = 0
    us = median_us(lambda: device.get(stream=stream, out=host))
    stream.synchronize()
    print("cupy d2h", n, f"{us:.3f}", repr(float(host.sum(dtype=numpy.float64))), flush=True)
    del device, host, memory
cupy.get_default_memory_pool().free_all_blocks()
