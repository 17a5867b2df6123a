// What the CUDA C baselines (textbook.cu, cub_reduce.cu) share with each other and with
// ferrocuda's bench: the error check, the blocking kernel, the timer, the input values
// (input.h), the input rotation and the L2 flush. `ferrocuda bench` writes this file and
// input.h next to them.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "input.h"

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t e = (call);                                                    \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));  \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// Holds the GPU for `ns` nanoseconds: the host enqueues start event, work and stop event
// meanwhile, so the events time GPU work only (nvbench's method; ferrocuda's `timing_spin`).
__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// 3 warm-up runs, then `reps` timed runs of `op` (each after `setup` and the blocking kernel);
// prints `<prefix> <what> median_us=<t> min_us=<t> max_us=<t>` (no newline).
struct Timer {
  cudaStream_t s;
  cudaEvent_t a, b;
  Timer() {
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(s);
  }
  template <typename Setup, typename Op>
  void run(const char* prefix, const char* what, int reps, Setup setup, Op op) {
    for (int i = 0; i < 3; i++) { setup(i); op(i); }
    CHECK(cudaStreamSynchronize(s));
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
      setup(i);
      spin<<<1, 1, 0, s>>>(50000);
      CHECK(cudaEventRecord(a, s));
      op(i);
      CHECK(cudaEventRecord(b, s));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaGetLastError());
      float ms;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1e3);
    }
    std::sort(t.begin(), t.end());
    double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    std::printf("%s %s median_us=%.3f min_us=%.3f max_us=%.3f", prefix, what, med, t.front(), t.back());
  }
};

// How many buffers of `bytes` it takes to exceed four L2 caches (1 to 64), as ferrocuda's bench.
static int rotation(size_t bytes) {
  int dev, l2;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  size_t want = 4 * (size_t)l2;
  return (int)std::max<size_t>(1, std::min<size_t>(64, (want + bytes - 1) / std::max<size_t>(bytes, 1)));
}

// A buffer twice the L2 size; `flush(s)` overwrites it so that nothing a setup step left in
// L2 serves the timed kernel (ferrocuda's `L2Flush`).
struct L2Flush {
  void* p = nullptr;
  size_t bytes = 0;
  L2Flush() {
    int dev, l2;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    bytes = std::max<size_t>(1, 2 * (size_t)l2);
    CHECK(cudaMalloc(&p, bytes));
  }
  ~L2Flush() { cudaFree(p); }
  void flush(cudaStream_t s) { CHECK(cudaMemsetAsync(p, 0, bytes, s)); }
};

// Device allocations freed together when it goes out of scope (one per benchmarked variant,
// so that a process running many variants does not keep every one's buffers).
struct DeviceMemory {
  std::vector<void*> blocks;
  template <typename T>
  void alloc(T** p, size_t bytes) {
    CHECK(cudaMalloc(reinterpret_cast<void**>(p), std::max<size_t>(bytes, 1)));
    blocks.push_back(*p);
  }
  ~DeviceMemory() {
    for (void* p : blocks) cudaFree(p);
  }
};
