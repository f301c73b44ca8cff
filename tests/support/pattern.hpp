// Seeded test data that host and device compute alike: byte i of stream `seed` is a hash of
// both, so a kernel's output can be checked against the host without shipping references.
#pragma once
#include <cstdint>

#include <gpuverbs/config.hpp>
#include <gpuverbs/splitmix.hpp>

namespace gvt {


/// Byte i of stream `seed` (never the poison byte 0xA5 pattern as a whole run).
GV_HD inline std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(gv::splitmix64(seed * 0x100000001b3ull + (i >> 3)) >> (8 * (i & 7)));
}

/// What outputs are filled with before a test: a value no correct run leaves behind.
inline constexpr std::uint8_t kPoison = 0xA5;

}  // namespace gvt
