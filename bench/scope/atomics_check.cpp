#include <algorithm>
#include <vector>

#include "atomics_kernels.cuh"

namespace gv::scope {

long long check_rmw(Op o, Pattern p, const std::uint32_t* words, std::uint64_t threads, std::uint64_t contention,
                    std::uint64_t padding, std::uint32_t iters, std::uint32_t init) {
  const std::uint64_t total = pattern_words(threads, contention, padding);
  std::vector<std::uint32_t> want(total / padding, init);
  std::vector<bool> touched(want.size(), false);
  // Exch: the word ends holding one of the values written to it; record which slot each
  // value went to and check membership.
  std::vector<std::uint32_t> slot_of_value;
  if (o == Op::kExch) slot_of_value.resize(threads * iters + 1);
  for (std::uint64_t g = 0; g < threads; ++g) {
    std::uint32_t state = lcg_seed(g);
    for (std::uint32_t it = 0; it < iters; ++it) {
      if (p == Pattern::kRandom) state = lcg_next(state);
      const std::uint64_t slot = pattern_index(p, g, threads, contention, padding, state) / padding;
      const std::uint32_t v = rmw_value(g, it, iters);
      touched[slot] = true;
      switch (o) {
        case Op::kFetchAdd:
        case Op::kFetchAddUsed:
        case Op::kCas: ++want[slot]; break;
        case Op::kExch: slot_of_value[v] = static_cast<std::uint32_t>(slot); break;
        case Op::kMin: want[slot] = std::min(want[slot], v); break;
        case Op::kMax: want[slot] = std::max(want[slot], v); break;
      }
    }
  }
  for (std::uint64_t w = 0; w < total; ++w) {
    const std::uint32_t got = words[w];
    if (w % padding != 0) {
      if (got != init) return static_cast<long long>(w);  // padding words are never touched
      continue;
    }
    const std::uint64_t slot = w / padding;
    if (o == Op::kExch) {
      const bool ok = touched[slot] ? got >= 1 && got < slot_of_value.size() && slot_of_value[got] == slot : got == init;
      if (!ok) return static_cast<long long>(w);
    } else if (got != want[slot]) {
      return static_cast<long long>(w);
    }
  }
  return -1;
}

}  // namespace gv::scope
