// Seeded test data that host and device compute alike: byte i of stream `seed` is a hash of
// both, so a kernel's output can be checked against the host without shipping references.
#pragma once
#include <cstdint>

#include <gpuverbs/config.hpp>

namespace gvt {

GV_HD inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Byte i of stream `seed` (never the poison byte 0xA5 pattern as a whole run).
GV_HD inline std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(mix64(seed * 0x100000001b3ull + (i >> 3)) >> (8 * (i & 7)));
}

/// What outputs are filled with before a test: a value no correct run leaves behind.
inline constexpr std::uint8_t kPoison = 0xA5;

}  // namespace gvt
