// The notes' reduction and stencil kernels written in CUDA C, the same algorithms as the Rust
// kernels of ferrocuda (with the same fixes: every thread reaches every barrier, bounds on
// every load, the last warp under `if (tid < offset)` + __syncwarp()). `ferrocuda bench`
// compiles this with nvcc on the GPU machine and runs it next to the Rust kernels, timed the
// same way: a blocking kernel holds the GPU while the host enqueues start event, kernel(s) and
// stop event; median of the repetitions; inputs rotated over buffers that together exceed four
// L2 caches; the in-place reductions flush L2 after copying their input to the scratch buffer.
// `common.cuh` and `input.h` (shared with cub_reduce.cu) must sit next to this file.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 textbook.cu -o textbook
//   ./textbook reduce <i32|u32|i64|u64|f32|f64> <n> <seed> <reps> <variant>:<block>...
//   ./textbook stencil <f32|f64|i32> <n> <seed> <radius> <reps> <naive|shared>:<block>...
//   ./textbook copy <n_bytes> <reps>
//
// The input of every variant is ferrocuda's `book_input(n, seed)` (input.h), generated on the
// host. Prints, per variant, `<variant>:<block> cuda-c <what> median_us=<t> min_us=<t>
// max_us=<t>` and then its result, which the bench checks against its CPU reference: a
// reduction's `result_bits=0x<16 hex digits>` (the sum's bits in its own type, zero-extended),
// a stencil's `output_fnv1a=0x<16 hex digits>` (the hash of its whole output's bytes). The copy
// prints no result: it moves bytes it never reads, and the bench does not run it.
#include <cooperative_groups.h>

#include "common.cuh"

#include <cstring>
#include <string>

namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned valid_len(size_t n, size_t start, size_t chunk) {
  return (unsigned)(n > start ? min(n - start, chunk) : 0);
}

template <typename T>
__device__ __forceinline__ void combine_pair(T* idata, unsigned tid, unsigned stride, unsigned len) {
  if (tid + stride < len) idata[tid] += idata[tid + stride];
}

template <typename T>
__global__ void reduceNeighbored(T* g_idata, T* g_odata, size_t n) {
  unsigned tid = threadIdx.x, bd = blockDim.x;
  size_t start = (size_t)blockIdx.x * bd;
  unsigned len = valid_len(n, start, bd);
  T* idata = g_idata + start;
  for (unsigned stride = 1; stride < bd; stride *= 2) {
    if (tid % (2 * stride) == 0) combine_pair(idata, tid, stride, len);
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T>
__global__ void reduceNeighboredLess(T* g_idata, T* g_odata, size_t n) {
  unsigned tid = threadIdx.x, bd = blockDim.x;
  size_t start = (size_t)blockIdx.x * bd;
  unsigned len = valid_len(n, start, bd);
  T* idata = g_idata + start;
  for (unsigned stride = 1; stride < bd; stride *= 2) {
    unsigned index = 2 * stride * tid;
    if (index < bd) combine_pair(idata, index, stride, len);
    __syncthreads();
  }
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T>
__device__ __forceinline__ void interleaved_tree(T* idata, unsigned tid, unsigned len, unsigned from, unsigned until) {
  for (unsigned stride = from; stride > until; stride >>= 1) {
    if (tid < stride) combine_pair(idata, tid, stride, len);
    __syncthreads();
  }
}

template <typename T>
__global__ void reduceInterleaved(T* g_idata, T* g_odata, size_t n) {
  unsigned tid = threadIdx.x, bd = blockDim.x;
  size_t start = (size_t)blockIdx.x * bd;
  T* idata = g_idata + start;
  interleaved_tree(idata, tid, valid_len(n, start, bd), bd / 2, 0);
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T, int U>
__device__ __forceinline__ T* unroll_into_place(T* g_idata, size_t n, unsigned* len) {
  unsigned tid = threadIdx.x, bd = blockDim.x;
  size_t start = (size_t)blockIdx.x * bd * U;
  size_t idx = start + tid;
  T sum = 0;
  if (idx + (size_t)(U - 1) * bd < n) {  // the notes' full chunk: all U loads, then the adds
    T a[U];
#pragma unroll
    for (int k = 0; k < U; k++) a[k] = g_idata[idx + (size_t)k * bd];
#pragma unroll
    for (int k = 0; k < U; k++) sum += a[k];
  } else {  // the partial chunk at the end, each load checked
#pragma unroll
    for (int k = 0; k < U; k++) {
      size_t i = idx + (size_t)k * bd;
      if (i < n) sum += g_idata[i];
    }
  }
  if (idx < n) g_idata[idx] = sum;
  __syncthreads();
  *len = valid_len(n, start, bd);
  return g_idata + start;
}

template <typename T, int U>
__global__ void reduceUnrolling(T* g_idata, T* g_odata, size_t n) {
  unsigned len;
  T* idata = unroll_into_place<T, U>(g_idata, n, &len);
  interleaved_tree(idata, threadIdx.x, len, blockDim.x / 2, 0);
  if (threadIdx.x == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T>
__device__ __forceinline__ void last_warp(T* idata, unsigned tid, unsigned len) {
  if (tid < 32) {
    for (unsigned offset = 32; offset > 0; offset >>= 1) {
      if (tid < offset) combine_pair(idata, tid, offset, len);
      __syncwarp();
    }
  }
}

template <typename T>
__global__ void reduceUnrollWarps8(T* g_idata, T* g_odata, size_t n) {
  unsigned len, tid = threadIdx.x;
  T* idata = unroll_into_place<T, 8>(g_idata, n, &len);
  interleaved_tree(idata, tid, len, blockDim.x / 2, 32);
  last_warp(idata, tid, len);
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T>
__device__ __forceinline__ void complete_tree(T* idata, unsigned tid, unsigned len, unsigned block) {
#pragma unroll
  for (unsigned half = 512; half >= 64; half /= 2) {
    if (block >= 2 * half && tid < half) combine_pair(idata, tid, half, len);
    if (block >= 2 * half) __syncthreads();
  }
}

template <typename T>
__global__ void reduceCompleteUnrollWarps8(T* g_idata, T* g_odata, size_t n) {
  unsigned len, tid = threadIdx.x;
  T* idata = unroll_into_place<T, 8>(g_idata, n, &len);
  complete_tree(idata, tid, len, blockDim.x);
  last_warp(idata, tid, len);
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

template <typename T, unsigned BLOCK>
__global__ void reduceCompleteUnroll(T* g_idata, T* g_odata, size_t n) {
  unsigned len, tid = threadIdx.x;
  T* idata = unroll_into_place<T, 8>(g_idata, n, &len);
  complete_tree(idata, tid, len, BLOCK);
  last_warp(idata, tid, len);
  if (tid == 0) g_odata[blockIdx.x] = idata[0];
}

// 樊哲勇 ch. 10: shared-memory tree to one warp, then the three finishes; atomic per block.
template <typename T>
__device__ __forceinline__ void tree_to_one_warp(T* s, T y, unsigned tid) {
  s[tid] = y;
  __syncthreads();
  for (unsigned offset = blockDim.x >> 1; offset >= 32; offset >>= 1) {
    if (tid < offset) s[tid] += s[tid + offset];
    __syncthreads();
  }
}

template <typename T>
__device__ __forceinline__ T load_or_zero(const T* x, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  return i < n ? x[i] : T(0);
}

template <typename T>
__global__ void reduce_syncwarp(const T* x, T* d_y, size_t n) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  unsigned tid = threadIdx.x;
  tree_to_one_warp(s, load_or_zero(x, n), tid);
  if (tid < 32) {
    for (unsigned offset = 16; offset > 0; offset >>= 1) {
      if (tid < offset) s[tid] += s[tid + offset];
      __syncwarp();
    }
  }
  if (tid == 0) atomicAdd(d_y, s[0]);
}

template <typename T>
__global__ void reduce_shfl(const T* x, T* d_y, size_t n) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  unsigned tid = threadIdx.x;
  tree_to_one_warp(s, load_or_zero(x, n), tid);
  if (tid < 32) {
    T y = s[tid];
    for (int offset = 16; offset > 0; offset >>= 1) y += __shfl_down_sync(0xffffffff, y, offset);
    if (tid == 0) atomicAdd(d_y, y);
  }
}

template <typename T>
__device__ __forceinline__ T tile_finish(const T* s, unsigned tid) {
  auto g = cg::tiled_partition<32>(cg::this_thread_block());
  T y = s[tid];
  if (tid < 32)
    for (int offset = g.size() >> 1; offset > 0; offset >>= 1) y += g.shfl_down(y, offset);
  return y;
}

template <typename T>
__global__ void reduce_cp(const T* x, T* d_y, size_t n) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  unsigned tid = threadIdx.x;
  tree_to_one_warp(s, load_or_zero(x, n), tid);
  T y = tile_finish(s, tid);
  if (tid == 0) atomicAdd(d_y, y);
}

template <typename T>
__global__ void reduce1_parallelism(const T* x, size_t n, T* d_y) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  unsigned tid = threadIdx.x;
  T y = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + tid; i < n; i += (size_t)gridDim.x * blockDim.x) y += x[i];
  tree_to_one_warp(s, y, tid);
  y = tile_finish(s, tid);
  if (tid == 0) d_y[blockIdx.x] = y;
}

// The cooperative-groups sum of 沐曦 MXMACA 教材第5章, with 16-byte loads (head/tail handled).
template <typename T>
__global__ void sum_kernel_block(T* sum, const T* x, size_t n) {
  extern __shared__ unsigned char smem[];
  T* temp = reinterpret_cast<T*>(smem);
  auto g = cg::this_thread_block();
  size_t gi = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  constexpr size_t lanes = 16 / sizeof(T);
  size_t mis = (size_t)x % 16, head = mis ? min((16 - mis) / sizeof(T), n) : 0;
  size_t vectors = (n - head) / lanes, tail = head + vectors * lanes;
  T my = 0;
  if (gi < head) my += x[gi];
  for (size_t i = gi; i < vectors; i += stride) {
    const T* v = x + head + i * lanes;
#pragma unroll
    for (size_t k = 0; k < lanes; k++) my += v[k];
  }
  if (tail + gi < n) my += x[tail + gi];
  unsigned lane = g.thread_rank();
  for (unsigned i = g.size() / 2; i > 0; i /= 2) {
    temp[lane] = my;
    g.sync();
    if (lane < i) my += temp[lane + i];
    g.sync();
  }
  if (lane == 0) atomicAdd(sum, my);
}

// 1D stencil: naive (2R+1 global loads per output) and the shared tile of the
// 《CUDA C/C++ Basics》学习笔记; zero boundary.
template <typename T>
__global__ void stencil_naive(const T* in, T* out, size_t n, int r) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T s = 0;
  for (int k = -r; k <= r; k++) {
    long long j = (long long)i + k;
    if (j >= 0 && j < (long long)n) s += in[j];
  }
  out[i] = s;
}

template <typename T>
__global__ void stencil_shared(const T* in, T* out, size_t n, int r) {
  extern __shared__ unsigned char smem[];
  T* temp = reinterpret_cast<T*>(smem);
  long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int l = threadIdx.x + r;
  temp[l] = g < (long long)n ? in[g] : T(0);
  if ((int)threadIdx.x < r) {
    long long left = g - r, right = g + blockDim.x;
    temp[l - r] = left >= 0 && left < (long long)n ? in[left] : T(0);
    temp[l + blockDim.x] = right < (long long)n ? in[right] : T(0);
  }
  __syncthreads();
  if (g < (long long)n) {
    T s = 0;
    for (int k = -r; k <= r; k++) s += temp[l + k];
    out[g] = s;
  }
}

__global__ void copy_float4(const float4* in, float4* out, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = in[i];
}

// ---- host side -------------------------------------------------------------------------

// The partials' combine of ferrocuda's host (`combine_partials`), so that both sides' results
// have the same bits: integers add with wrap-around in T, floats add in double in order and
// round once to T.
template <typename T>
T combine_partials(const std::vector<T>& partials) {
  if constexpr (std::is_floating_point_v<T>) {
    double sum = 0;
    for (T v : partials) sum += (double)v;
    return (T)sum;
  } else {
    // Unsigned, where wrap-around is defined; the bits are the same.
    using U = std::make_unsigned_t<T>;
    U sum = 0;
    for (T v : partials) sum += (U)v;
    T out;
    std::memcpy(&out, &sum, sizeof out);
    return out;
  }
}

template <typename T>
void print_result(T r) {
  std::printf(" result_bits=0x%016llx\n", (unsigned long long)book::bits_of(r));
}

template <typename T>
int reduce(const std::string& variant, size_t n, uint64_t seed, unsigned block, int reps) {
  auto h = random_input<T>(n, seed);
  int rot = rotation(n * sizeof(T));
  DeviceMemory mem;
  std::vector<T*> in(rot);
  for (auto& p : in) {
    mem.alloc(&p, n * sizeof(T));
    CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  T *scratch, *partials, *out;
  size_t max_grid = n / 64 + 10241;
  mem.alloc(&scratch, n * sizeof(T));
  mem.alloc(&partials, max_grid * sizeof(T));
  mem.alloc(&out, sizeof(T));
  Timer tm;
  auto blocks = [&](size_t per) { return (unsigned)std::max<size_t>(1, (n + per - 1) / per); };
  bool textbook = true, atomic = false;
  unsigned grid = blocks(block);
  void (*tb)(T*, T*, size_t) = nullptr;
  if (variant == "neighbored") tb = reduceNeighbored<T>;
  else if (variant == "neighbored_less") tb = reduceNeighboredLess<T>;
  else if (variant == "interleaved") tb = reduceInterleaved<T>;
  else if (variant == "unrolling2") { tb = reduceUnrolling<T, 2>; grid = blocks(2 * block); }
  else if (variant == "unrolling4") { tb = reduceUnrolling<T, 4>; grid = blocks(4 * block); }
  else if (variant == "unrolling8") { tb = reduceUnrolling<T, 8>; grid = blocks(8 * block); }
  else if (variant == "unroll_warps8") { tb = reduceUnrollWarps8<T>; grid = blocks(8 * block); }
  else if (variant == "complete_unroll_warps8") { tb = reduceCompleteUnrollWarps8<T>; grid = blocks(8 * block); }
  else if (variant == "complete_unroll") {
    grid = blocks(8 * block);
    switch (block) {
      case 64: tb = reduceCompleteUnroll<T, 64>; break;
      case 128: tb = reduceCompleteUnroll<T, 128>; break;
      case 256: tb = reduceCompleteUnroll<T, 256>; break;
      case 512: tb = reduceCompleteUnroll<T, 512>; break;
      case 1024: tb = reduceCompleteUnroll<T, 1024>; break;
      default: std::fprintf(stderr, "bad block\n"); return 2;
    }
  } else textbook = false;
  std::string what = "reduce " + variant;
  size_t shared = block * sizeof(T);
  if (textbook) {
    L2Flush l2;  // the scratch copy must not leave the input in L2 for the timed kernel
    tm.run("cuda-c", what.c_str(), reps,
           [&](int i) {
             CHECK(cudaMemcpyAsync(scratch, in[i % rot], n * sizeof(T), cudaMemcpyDeviceToDevice, tm.s));
             l2.flush(tm.s);
           },
           [&](int) { tb<<<grid, block, 0, tm.s>>>(scratch, partials, n); });
    std::vector<T> p(grid);
    CHECK(cudaMemcpy(p.data(), partials, grid * sizeof(T), cudaMemcpyDeviceToHost));
    print_result(combine_partials(p));
    return 0;
  }
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, int32_t>) {
    void (*af)(const T*, T*, size_t) = nullptr;
    if constexpr (std::is_floating_point_v<T>) {
      if (variant == "syncwarp") af = reduce_syncwarp<T>;
      else if (variant == "shfl") af = reduce_shfl<T>;
      else if (variant == "cg") af = reduce_cp<T>;
    }
    if (af) {
      atomic = true;
      tm.run("cuda-c", what.c_str(), reps, [&](int) { CHECK(cudaMemsetAsync(out, 0, sizeof(T), tm.s)); },
             [&](int i) { af<<<grid, block, shared, tm.s>>>(in[i % rot], out, n); });
    } else if (variant == "cg_vector4") {
      atomic = true;
      unsigned g = blocks((size_t)block * (16 / sizeof(T)));
      tm.run("cuda-c", what.c_str(), reps, [&](int) { CHECK(cudaMemsetAsync(out, 0, sizeof(T), tm.s)); },
             [&](int i) { sum_kernel_block<T><<<g, block, shared, tm.s>>>(out, in[i % rot], n); });
    } else if constexpr (std::is_floating_point_v<T>) {
      if (variant == "reduce1_parallelism" || variant == "reduce2_static") {
        atomic = true;
        tm.run("cuda-c", what.c_str(), reps, [&](int) {},
               [&](int i) {
                 reduce1_parallelism<T><<<10240, block, shared, tm.s>>>(in[i % rot], n, partials);
                 reduce1_parallelism<T><<<1, 1024, 1024 * sizeof(T), tm.s>>>(partials, 10240, out);
               });
      }
    }
  }
  if (!atomic) {
    std::fprintf(stderr, "unknown or unsupported reduce variant %s\n", variant.c_str());
    return 2;
  }
  T r;
  CHECK(cudaMemcpy(&r, out, sizeof(T), cudaMemcpyDeviceToHost));
  print_result(r);
  return 0;
}

template <typename T>
int stencil(const std::string& variant, size_t n, uint64_t seed, unsigned block, int r, int reps) {
  auto h = random_input<T>(n, seed);
  int rot = rotation(2 * n * sizeof(T));
  DeviceMemory mem;
  std::vector<T*> in(rot), out(rot);
  for (int k = 0; k < rot; k++) {
    mem.alloc(&in[k], n * sizeof(T));
    mem.alloc(&out[k], n * sizeof(T));
    CHECK(cudaMemcpy(in[k], h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  Timer tm;
  unsigned grid = (unsigned)((n + block - 1) / block);
  std::string what = "stencil " + variant;
  if (variant == "naive")
    tm.run("cuda-c", what.c_str(), reps, [](int) {}, [&](int i) { stencil_naive<T><<<grid, block, 0, tm.s>>>(in[i % rot], out[i % rot], n, r); });
  else if (variant == "shared")
    tm.run("cuda-c", what.c_str(), reps, [](int) {},
           [&](int i) { stencil_shared<T><<<grid, block, (block + 2 * r) * sizeof(T), tm.s>>>(in[i % rot], out[i % rot], n, r); });
  else {
    std::fprintf(stderr, "unknown stencil variant %s\n", variant.c_str());
    return 2;
  }
  // The last timed run's whole output (`h` is no longer needed: it takes it).
  CHECK(cudaMemcpy(h.data(), out[(reps - 1) % rot], n * sizeof(T), cudaMemcpyDeviceToHost));
  std::printf(" output_fnv1a=0x%016llx\n", (unsigned long long)book::fnv1a(h.data(), n * sizeof(T)));
  return 0;
}

int copy(size_t bytes, int reps) {
  size_t n = bytes / 16;
  int rot = rotation(2 * bytes);
  DeviceMemory mem;
  std::vector<float4*> in(rot), out(rot);
  for (int k = 0; k < rot; k++) {
    mem.alloc(&in[k], n * 16);
    mem.alloc(&out[k], n * 16);
    CHECK(cudaMemset(in[k], 1, n * 16));
  }
  int dev, sms;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  Timer tm;
  tm.run("cuda-c", "copy float4", reps, [](int) {}, [&](int i) { copy_float4<<<sms * 8, 256, 0, tm.s>>>(in[i % rot], out[i % rot], n); });
  std::printf("\n");
  return 0;
}

// `textbook reduce <type> <n> <seed> <reps> <variant>:<block>...` runs several variants on one
// input; `textbook stencil <type> <n> <seed> <radius> <reps> <variant>:<block>...` likewise.
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: see the comment at the top of textbook.cu\n");
    return 2;
  }
  std::string what = argv[1];
  if (what == "copy" && argc >= 4) return copy(std::strtoull(argv[2], nullptr, 0), std::atoi(argv[3]));
  auto each = [&](int first, auto body) {
    int rc = 0;
    for (int i = first; i < argc; i++) {
      std::string spec = argv[i];
      size_t colon = spec.find(':');
      if (colon == std::string::npos) return 2;
      std::printf("%s ", spec.c_str());
      int failed = body(spec.substr(0, colon), (unsigned)std::atoi(spec.c_str() + colon + 1));
      // A variant that ran ends its own line; one that did not must not run into the next.
      if (failed) std::printf("\n");
      rc |= failed;
      std::fflush(stdout);
    }
    return rc;
  };
  if (what == "reduce" && argc >= 7) {
    std::string t = argv[2];
    size_t n = std::strtoull(argv[3], nullptr, 0);
    uint64_t seed = std::strtoull(argv[4], nullptr, 0);
    int reps = std::atoi(argv[5]);
    return each(6, [&](const std::string& v, unsigned b) {
      if (t == "i32") return reduce<int32_t>(v, n, seed, b, reps);
      if (t == "u32") return reduce<uint32_t>(v, n, seed, b, reps);
      if (t == "i64") return reduce<long long>(v, n, seed, b, reps);
      if (t == "u64") return reduce<unsigned long long>(v, n, seed, b, reps);
      if (t == "f32") return reduce<float>(v, n, seed, b, reps);
      if (t == "f64") return reduce<double>(v, n, seed, b, reps);
      return 2;
    });
  }
  if (what == "stencil" && argc >= 8) {
    std::string t = argv[2];
    size_t n = std::strtoull(argv[3], nullptr, 0);
    uint64_t seed = std::strtoull(argv[4], nullptr, 0);
    int r = std::atoi(argv[5]), reps = std::atoi(argv[6]);
    return each(7, [&](const std::string& v, unsigned b) {
      if (t == "f32") return stencil<float>(v, n, seed, b, r, reps);
      if (t == "f64") return stencil<double>(v, n, seed, b, r, reps);
      if (t == "i32") return stencil<int32_t>(v, n, seed, b, r, reps);
      return 2;
    });
  }
  std::fprintf(stderr, "bad arguments\n");
  return 2;
}
