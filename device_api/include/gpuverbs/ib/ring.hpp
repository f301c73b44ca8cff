// Ring arithmetic shared by posters, pollers and the software HCA.
//
// Producers and consumers keep 64-bit monotonic counters; hardware fields carry them modulo
// 2^16 (WQE index, doorbell record) or 2^24 (CQ consumer index). widen() recovers the 64-bit
// value from such a field, given a counter known to be at most 2^bits - 1 behind it.
#pragma once
#include <cstdint>

#include "../config.hpp"

namespace gv::ib {

GV_HD GV_INLINE constexpr bool is_pow2(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

GV_HD GV_INLINE constexpr std::uint32_t log2_pow2(std::uint64_t v) {
  std::uint32_t l = 0;
  while ((std::uint64_t{1} << l) < v) ++l;
  return l;
}

GV_HD GV_INLINE constexpr std::uint64_t round_up_pow2(std::uint64_t v) {
  return v <= 1 ? 1 : std::uint64_t{1} << log2_pow2(v);
}

/// Slot of counter c in a ring of `size` entries (a power of two).
GV_HD GV_INLINE constexpr std::uint32_t ring_slot(std::uint64_t c, std::uint32_t size) {
  return static_cast<std::uint32_t>(c & (size - 1));
}

/// The value v (`bits` wide) as a 64-bit counter at or after `base`.
GV_HD GV_INLINE constexpr std::uint64_t widen(std::uint64_t base, std::uint32_t v,
                                              std::uint32_t bits) {
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  return base + ((static_cast<std::uint64_t>(v) - base) & mask);
}

/// The value v (`bits` wide) as a 64-bit counter at or before `top`.
GV_HD GV_INLINE constexpr std::uint64_t widen_below(std::uint64_t top, std::uint32_t v,
                                                    std::uint32_t bits) {
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  return top - ((top - static_cast<std::uint64_t>(v)) & mask);
}

/// Owner bit the producer writes into the CQE for counter c, in a CQ of 2^log_size entries:
/// it flips each lap, so a consumer at counter c owns the entry iff the bits agree.
GV_HD GV_INLINE constexpr std::uint8_t owner_bit(std::uint64_t c, std::uint32_t log_size) {
  return static_cast<std::uint8_t>((c >> log_size) & 1u);
}

}  // namespace gv::ib
