// CUB's cub::DeviceReduce::{Sum, Min, Max}, timed exactly as ferrocuda times its kernels:
// a blocking kernel holds the GPU while the host enqueues start event, the reduction and stop
// event (nvbench's method), warm-up, median of the repetitions. Temporary storage is allocated
// once, outside the timed region. Compiled by nvcc at bench time on the GPU machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 cub_reduce.cu -o cub_reduce
//   ./cub_reduce <op: sum|min|max> <type: i32|u32|i64|u64|f32|f64> <n> [reps]
//
// Inputs rotate over buffers that together exceed the L2 cache, as in ferrocuda's bench.
//
// Prints one line: `cub <op> <type> n=<n> median_us=<t> min_us=<t> max_us=<t> gbs=<read GB/s>
// result=<value>`.
#include <cub/cub.cuh>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e = (call);                                                            \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));          \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

template <typename T>
void fill(std::vector<T>& h, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& v : h) {
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
    } else {
      v = static_cast<T>(rng() & 0xFF);
    }
  }
}

template <typename T>
int run(const std::string& op, const char* type, size_t n, int reps) {
  std::vector<T> h(n);
  fill(h, 1);
  // Input buffers in rotation, together larger than L2 (as ferrocuda's bench does).
  int dev, l2;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  size_t rot = std::max<size_t>(1, std::min<size_t>(64, (4 * (size_t)l2 + n * sizeof(T) - 1) / (n * sizeof(T))));
  std::vector<T*> ins(rot);
  for (auto& p : ins) {
    CHECK(cudaMalloc(&p, n * sizeof(T)));
    CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  T* d_in = ins[0];
  T* d_out;
  CHECK(cudaMalloc(&d_out, sizeof(T)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto reduce = [&](void* tmp, size_t& bytes) {
    if (op == "sum") return cub::DeviceReduce::Sum(tmp, bytes, d_in, d_out, (int64_t)n, s);
    if (op == "min") return cub::DeviceReduce::Min(tmp, bytes, d_in, d_out, (int64_t)n, s);
    return cub::DeviceReduce::Max(tmp, bytes, d_in, d_out, (int64_t)n, s);
  };
  size_t bytes = 0;
  CHECK(reduce(nullptr, bytes));
  void* tmp;
  CHECK(cudaMalloc(&tmp, std::max<size_t>(bytes, 1)));
  for (int i = 0; i < 3; i++) CHECK(reduce(tmp, bytes));
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    d_in = ins[i % rot];
    spin<<<1, 1, 0, s>>>(50000);
    CHECK(cudaEventRecord(a, s));
    CHECK(reduce(tmp, bytes));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
  T result;
  CHECK(cudaMemcpy(&result, d_out, sizeof(T), cudaMemcpyDeviceToHost));
  std::printf("cub %s %s n=%zu median_us=%.3f min_us=%.3f max_us=%.3f gbs=%.1f result=%.17g\n", op.c_str(), type, n, med,
              t.front(), t.back(), n * sizeof(T) / med / 1e3, (double)result);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <sum|min|max> <i32|u32|i64|u64|f32|f64> <n> [reps]\n", argv[0]);
    return 2;
  }
  std::string op = argv[1], type = argv[2];
  size_t n = std::strtoull(argv[3], nullptr, 0);
  int reps = argc > 4 ? std::atoi(argv[4]) : 20;
  if (type == "i32") return run<int32_t>(op, "i32", n, reps);
  if (type == "u32") return run<uint32_t>(op, "u32", n, reps);
  if (type == "i64") return run<int64_t>(op, "i64", n, reps);
  if (type == "u64") return run<uint64_t>(op, "u64", n, reps);
  if (type == "f32") return run<float>(op, "f32", n, reps);
  if (type == "f64") return run<double>(op, "f64", n, reps);
  std::fprintf(stderr, "unknown type %s\n", type.c_str());
  return 2;
}
