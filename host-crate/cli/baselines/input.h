// The benchmark's input and output hash, in plain C++ (no CUDA), so that a host compiler can
// check it against ferrocuda without a GPU. `random_input<T>(n, seed)` is, element for element
// (`F16Bits` / `Bf16Bits` for f16 / bf16),
// `ferrocuda_lessons::cpu::book_input::<T>(n, seed)`: integers `splitmix_at(seed, i) & 0xFF`,
// floats the exactly summable values of `ExactLayout::of(n, digits).value(seed, i)`
// (host-crate/lessons/src/cpu/exact.rs, mirrored here line for line). With the same input on
// both sides, a baseline's result has one right answer, the CPU reference of the bench's rows.
// `ferrocuda bench` writes this file next to common.cuh.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

namespace book {

// SplitMix64's increment.
constexpr uint64_t GAMMA = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Output `i` (from 0) of SplitMix64 seeded with `seed`, without the outputs before it.
inline uint64_t splitmix_at(uint64_t seed, uint64_t i) { return mix(seed + (i + 1) * GAMMA); }

// The largest group sum of the dense layout.
constexpr uint64_t MAX_GROUP_SUM = 1020;

inline uint64_t div_ceil(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Dense: groups of four summing to `group_sum`. Sparse: groups of `group` holding one 1.
struct ExactLayout {
  bool dense;
  uint64_t group_sum;
  uint64_t group;

  // Groups summing to at most `max_group_sum`, so that every element is exact in the type.
  static ExactLayout of(uint64_t n, unsigned digits, uint64_t max_group_sum = MAX_GROUP_SUM) {
    uint64_t budget = 1ULL << digits;
    uint64_t groups = std::max<uint64_t>(div_ceil(n, 4), 1);
    uint64_t group_sum = std::min(budget / groups, max_group_sum);
    if (group_sum >= 1) return {true, group_sum, 0};
    uint64_t group = 8;
    while (div_ceil(n, group) > budget) group *= 2;
    return {false, 0, group};
  }

  uint64_t value(uint64_t seed, uint64_t i) const {
    if (dense) {
      uint64_t bits = splitmix_at(seed, i / 4);
      uint64_t base = group_sum >= 4 ? 1 : 0;
      uint64_t t = group_sum >= 4 ? group_sum - 4 : group_sum;
      uint64_t cuts[3];
      for (int k = 0; k < 3; k++) cuts[k] = (((bits >> (16 * k)) & 0xFFFF) * (t + 1)) >> 16;
      std::sort(cuts, cuts + 3);
      uint64_t part;
      switch (i % 4) {
        case 0: part = cuts[0]; break;
        case 1: part = cuts[1] - cuts[0]; break;
        case 2: part = cuts[2] - cuts[1]; break;
        default: part = t - cuts[2]; break;
      }
      return base + part;
    }
    uint64_t place = splitmix_at(seed, i / group) % group;
    return i % group == place ? 1 : 0;
  }
};

// The 16-bit floats, as their bits: plain C++ has no half type. A CUDA program reads a
// buffer of them as `__half` / `__nv_bfloat16` (the same 16 bits).
struct F16Bits {
  uint16_t bits;
};
struct Bf16Bits {
  uint16_t bits;
};

// The bits of the integer `v` as an IEEE half (1 sign, 5 exponent, 10 fraction bits), for an
// integer it holds exactly (at most 11 significant bits: the exact layout's values are at most
// 1020).
inline uint16_t f16_bits_of_int(uint64_t v) {
  if (v == 0) return 0;
  int e = 0;
  while ((v >> (e + 1)) != 0) e++;
  uint64_t fraction = e <= 10 ? (v << (10 - e)) & 0x3FF : (v >> (e - 10)) & 0x3FF;
  return (uint16_t)(((e + 15) << 10) | fraction);
}

// The bits of the integer `v` as a bfloat16 (the high half of the float), for an integer it
// holds exactly (at most 256, as the exact layout's bf16 values are).
inline uint16_t bf16_bits_of_int(uint64_t v) {
  float f = (float)v;
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

// The significand bits of the type a float type is summed in (the 16-bit floats in float):
// totals up to 2^digits are exact there.
template <typename T>
constexpr unsigned digits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  else return 24;
}

// The largest group sum: every element (at most that) exact in the type itself; bf16 holds
// integers exactly up to 256.
template <typename T>
constexpr uint64_t max_group_sum() {
  return std::is_same_v<T, Bf16Bits> ? 256 : MAX_GROUP_SUM;
}

// Element `i` of the input of `n` elements of `T` from `seed`.
template <typename T>
struct BookInput {
  ExactLayout layout;
  uint64_t seed;

  BookInput(size_t n, uint64_t seed)
      : layout(ExactLayout::of(n, digits<T>(), max_group_sum<T>())), seed(seed) {}

  T at(uint64_t i) const {
    if constexpr (std::is_same_v<T, F16Bits>) return F16Bits{f16_bits_of_int(layout.value(seed, i))};
    else if constexpr (std::is_same_v<T, Bf16Bits>) return Bf16Bits{bf16_bits_of_int(layout.value(seed, i))};
    else if constexpr (std::is_floating_point_v<T>) return (T)(double)layout.value(seed, i);
    else return (T)(splitmix_at(seed, i) & 0xFF);
  }
};

// 64-bit FNV-1a of `bytes` bytes: the stencil baselines' result is this hash of their whole
// output, so that one line checks every element.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ULL) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 0x100000001b3ULL;
  return h;
}

// `v`'s bits in its own type, zero-extended: what a baseline prints as `result_bits=0x...`
// (a sum of 64-bit integers beyond 2^53 would not survive a print through double).
template <typename T>
uint64_t bits_of(T v) {
  static_assert(sizeof(T) <= 8, "a result of at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

}  // namespace book

// The bench's input, generated over the host's cores: each element depends on its index alone,
// so any split gives the same values (2^28 elements are a few seconds on one core).
template <typename T>
std::vector<T> random_input(size_t n, uint64_t seed) {
  std::vector<T> h(n);
  book::BookInput<T> input(n, seed);
  size_t threads = std::max(1u, std::thread::hardware_concurrency());
  size_t chunk = std::max<size_t>((n + threads - 1) / threads, 1 << 16);
  std::vector<std::thread> pool;
  for (size_t start = 0; start < n; start += chunk) {
    size_t end = std::min(n, start + chunk);
    pool.emplace_back([&h, input, start, end] {
      for (size_t i = start; i < end; i++) h[i] = input.at(i);
    });
  }
  for (auto& t : pool) t.join();
  return h;
}
