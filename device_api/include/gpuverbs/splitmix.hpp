// gv::splitmix64: the one seeded hash of the tree (tests, benchmarks, Himeno's initial fields).
// Stateless, so a value depends on its seed and index alone: host and device compute the same
// stream, and a rank or thread can regenerate any element without the others.
#pragma once
#include <cstdint>

#include <gpuverbs/config.hpp>

namespace gv {

/// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
/// the golden-ratio increment, then the variant-13 finaliser.
GV_HD constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace gv
