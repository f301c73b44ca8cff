// The Atomic-RMW study's access patterns (UCSC gpu-atomic-rmw-microbenchmark): which word of the
// buffer thread g of n touches. Host and device compute them alike, so the host checks a kernel's
// words against the same functions and CPU tests pin them.
#pragma once
#include <cstdint>

#include <gpuverbs/config.hpp>

namespace gv::scope {

enum class Pattern : std::uint8_t { kContiguous, kCrossWarp, kBranched, kRandom };
inline constexpr int kPatterns = 4;

/// Words a sweep point needs: `contention` threads share each word, `padding` words apart.
/// Every pattern stays inside this many words.
GV_HD inline std::uint64_t pattern_words(std::uint64_t threads, std::uint64_t contention, std::uint64_t padding) {
  return (threads + contention - 1) / contention * padding;
}

/// One LCG step (Numerical Recipes' constants, the study's generator).
GV_HD inline std::uint32_t lcg_next(std::uint32_t x) { return x * 1664525u + 1013904223u; }

/// The random pattern's first state for thread g (distinct per thread, never all alike).
GV_HD inline std::uint32_t lcg_seed(std::uint64_t g) { return lcg_next(static_cast<std::uint32_t>(g) ^ 0x9e3779b9u); }

/// Word of thread g at the pattern's fixed places. kRandom's place depends on the iteration:
/// `state` is the thread's LCG state for it (lcg_seed, then lcg_next once per iteration).
/// kBranched touches the contiguous word; what differs is that odd and even lanes take
/// different branches in the kernel (half of each warp at a time).
GV_HD inline std::uint64_t pattern_index(Pattern p, std::uint64_t g, std::uint64_t threads, std::uint64_t contention,
                                         std::uint64_t padding, std::uint32_t state) {
  const std::uint64_t words = pattern_words(threads, contention, padding);
  switch (p) {
    case Pattern::kContiguous:
    case Pattern::kBranched: return g / contention * padding;
    case Pattern::kCrossWarp: return g * padding % words;
    case Pattern::kRandom: return state % (words / padding) * padding;
  }
  return 0;
}

inline const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kContiguous: return "Contiguous";
    case Pattern::kCrossWarp: return "CrossWarp";
    case Pattern::kBranched: return "Branched";
    case Pattern::kRandom: return "Random";
  }
  return "?";
}

}  // namespace gv::scope
