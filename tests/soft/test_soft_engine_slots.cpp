// How the GPU engine shares the QP table out among its warps (soft::engine_slot): a partition,
// one slot per warp in every round, and QP pairs created together (requesters in every other
// slot) spread over all warps, not only the even ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "soft/semantics/contexts.hpp"

namespace {

using gv::soft::engine_slot;

TEST(EngineSlots, EveryRoundGivesEachWarpOneSlotOfIt) {
  for (std::uint32_t warps = 1; warps <= gv::soft::kMaxEngineWarps; ++warps) {
    for (std::uint32_t round = 0; round < 3 * warps; ++round) {
      std::vector<int> owners(warps, 0);
      for (std::uint32_t w = 0; w < warps; ++w) {
        const std::uint32_t s = engine_slot(w, round, warps);
        ASSERT_GE(s, round * warps) << warps << " warps, round " << round;
        ASSERT_LT(s, (round + 1) * warps) << warps << " warps, round " << round;
        ++owners[s - round * warps];
      }
      for (std::uint32_t i = 0; i < warps; ++i) ASSERT_EQ(owners[i], 1) << warps << " warps, round " << round;
    }
  }
}

TEST(EngineSlots, EveryOtherSlotSpreadsOverAllWarps) {
  // Requesters of pairs created together sit in slots 0, 2, 4, ...: with warps even, slot %
  // warps gave them to half of the warps.
  for (std::uint32_t warps = 2; warps <= gv::soft::kMaxEngineWarps; warps *= 2) {
    for (std::uint32_t pairs = warps; pairs <= 4 * warps; pairs += warps) {
      std::vector<int> load(warps, 0);
      for (std::uint32_t round = 0; round * warps < 2 * pairs; ++round)
        for (std::uint32_t w = 0; w < warps; ++w)
          if (engine_slot(w, round, warps) % 2 == 0) ++load[w];
      const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
      EXPECT_LE(*hi - *lo, 1) << warps << " warps, " << pairs << " pairs: requesters per warp from " << *lo
                              << " to " << *hi;
    }
  }
}

}  // namespace
