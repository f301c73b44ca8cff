// How many timed rounds a method row's median is taken over, beside its plain row. Plain C++, so
// CPU tests check the rule.
#pragma once
#include <cstddef>

namespace gv::scope {

/// The plain row's figure: the median of this many single enqueues.
inline constexpr int kPlainRuns = 11;

/// The rounds a method row's median wants after Google Benchmark ran `ran` of them. Beside its
/// plain row: at least kPlainRuns and an odd count, since the median of an even count
/// (sorted[n / 2], the benchmarks' one statistics helper) is the upper of the middle two, and
/// of two rounds the slower, where a long round makes Google Benchmark stop after one or two.
constexpr std::size_t median_rounds(std::size_t ran, bool beside_plain) {
  if (!beside_plain) return ran;
  const std::size_t n = ran < static_cast<std::size_t>(kPlainRuns) ? static_cast<std::size_t>(kPlainRuns) : ran;
  return n % 2 == 0 ? n + 1 : n;
}

}  // namespace gv::scope
