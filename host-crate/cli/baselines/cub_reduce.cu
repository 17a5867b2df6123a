// CUB's cub::DeviceReduce::{Sum, Min, Max}, timed exactly as ferrocuda times its kernels:
// a blocking kernel holds the GPU while the host enqueues start event, the reduction and stop
// event (nvbench's method), warm-up, median of the repetitions. Temporary storage is allocated
// once, outside the timed region. Compiled by nvcc at bench time on the GPU machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 cub_reduce.cu -o cub_reduce
//   ./cub_reduce <op: sum|min|max> <type: i32|u32|i64|u64|f32|f64|f16|bf16> <n> <seed> [reps]
//
// f16 and bf16 are summed only, `__half` / `__nv_bfloat16` in and `float` out, by
// `DeviceReduce::Reduce` with `cuda::std::plus<float>` and 0: CUB's sum accumulating in `float`,
// as ferrocuda's `sum_to_f32` and PyTorch do.
//
// The input is ferrocuda's `book_input(n, seed)` (input.h); inputs rotate over buffers that
// together exceed four L2 caches, as in ferrocuda's bench.
//
// Prints one line: `cub <op> <type> n=<n> median_us=<t> min_us=<t> max_us=<t>
// result_bits=0x<16 hex digits>`, the result's bits in its own type, zero-extended: the bench
// checks them against its CPU reference. `common.cuh` and `input.h` (shared with textbook.cu)
// must sit next to this file.
#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstring>
#include <string>

#include "common.cuh"


// `op` over `n` elements generated as `Host` (input.h's type), read on the device as `In`
// (the same bits), the result in `Out`.
template <typename Host, typename In, typename Out>
int run(const std::string& op, const char* type, size_t n, uint64_t seed, int reps) {
  static_assert(sizeof(Host) == sizeof(In), "the host's elements are the device's bits");
  std::vector<Host> h = random_input<Host>(n, seed);
  // Input buffers in rotation, together larger than L2 (as ferrocuda's bench does).
  size_t rot = rotation(n * sizeof(In));
  DeviceMemory mem;
  std::vector<In*> ins(rot);
  for (auto& p : ins) {
    mem.alloc(&p, n * sizeof(In));
    CHECK(cudaMemcpy(p, h.data(), n * sizeof(In), cudaMemcpyHostToDevice));
  }
  In* d_in = ins[0];
  Out* d_out;
  mem.alloc(&d_out, sizeof(Out));
  cudaStream_t s = nullptr;
  auto reduce = [&](void* tmp, size_t& bytes) {
    // A 16-bit float into `float`: the sum with `float` addition, written out, so that the
    // accumulator is `float` whatever `Sum` would deduce from `__half + float`.
    if constexpr (!std::is_same_v<In, Out>) {
      return cub::DeviceReduce::Reduce(tmp, bytes, d_in, d_out, (int64_t)n, ::cuda::std::plus<Out>{}, Out{}, s);
    } else {
      if (op == "sum") return cub::DeviceReduce::Sum(tmp, bytes, d_in, d_out, (int64_t)n, s);
      if (op == "min") return cub::DeviceReduce::Min(tmp, bytes, d_in, d_out, (int64_t)n, s);
      return cub::DeviceReduce::Max(tmp, bytes, d_in, d_out, (int64_t)n, s);
    }
  };
  size_t bytes = 0;
  CHECK(reduce(nullptr, bytes));
  void* tmp;
  mem.alloc(&tmp, std::max<size_t>(bytes, 1));
  std::string what = op + " " + type + " n=" + std::to_string(n);
  Timer tm;
  s = tm.s;
  tm.run("cub", what.c_str(), reps, [&](int i) { d_in = ins[i % rot]; }, [&](int) { CHECK(reduce(tmp, bytes)); });
  Out result;
  CHECK(cudaMemcpy(&result, d_out, sizeof(Out), cudaMemcpyDeviceToHost));
  std::printf(" result_bits=0x%016llx\n", (unsigned long long)book::bits_of(result));
  return 0;
}

template <typename T>
int run(const std::string& op, const char* type, size_t n, uint64_t seed, int reps) {
  return run<T, T, T>(op, type, n, seed, reps);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s <sum|min|max> <i32|u32|i64|u64|f32|f64|f16|bf16> <n> <seed> [reps]\n", argv[0]);
    return 2;
  }
  std::string op = argv[1], type = argv[2];
  size_t n = std::strtoull(argv[3], nullptr, 0);
  uint64_t seed = std::strtoull(argv[4], nullptr, 0);
  int reps = argc > 5 ? std::atoi(argv[5]) : 20;
  if (type == "i32") return run<int32_t>(op, "i32", n, seed, reps);
  if (type == "u32") return run<uint32_t>(op, "u32", n, seed, reps);
  if (type == "i64") return run<int64_t>(op, "i64", n, seed, reps);
  if (type == "u64") return run<uint64_t>(op, "u64", n, seed, reps);
  if (type == "f32") return run<float>(op, "f32", n, seed, reps);
  if (type == "f64") return run<double>(op, "f64", n, seed, reps);
  if ((type == "f16" || type == "bf16") && op != "sum") {
    std::fprintf(stderr, "%s is summed only (into float)\n", type.c_str());
    return 2;
  }
  if (type == "f16") return run<book::F16Bits, __half, float>(op, "f16", n, seed, reps);
  if (type == "bf16") return run<book::Bf16Bits, __nv_bfloat16, float>(op, "bf16", n, seed, reps);
  std::fprintf(stderr, "unknown type %s\n", type.c_str());
  return 2;
}
