// Big-endian fields as a strong type: a value written without a byte swap does not compile.
// Hardware formats (mlx5 WQEs, CQEs, doorbell records) are big-endian; both the GPU and the
// x86/Arm hosts we target are little-endian.
#pragma once
#include <cstdint>

#include "config.hpp"

namespace gv {

// On the GPU a swap is one byte permutation (PRMT): nvcc does not recognise the shifts and
// masks below, and spent about eight instructions on each swap of a WQE or CQE field (the
// engine's SASS held 113 such sequences). Constant evaluation is told by the builtin, not
// std::is_constant_evaluated(): that is a host function, and device code calling it is dropped
// by nvcc unless the user passes --expt-relaxed-constexpr.
GV_HD GV_INLINE constexpr std::uint16_t byteswap(std::uint16_t v) {
#if GV_DEVICE_PASS
  if (!__builtin_is_constant_evaluated()) return static_cast<std::uint16_t>(__byte_perm(v, 0, 0x4401));
#endif
  return static_cast<std::uint16_t>((v >> 8) | (v << 8));
}
GV_HD GV_INLINE constexpr std::uint32_t byteswap(std::uint32_t v) {
#if GV_DEVICE_PASS
  if (!__builtin_is_constant_evaluated()) return __byte_perm(v, 0, 0x0123);
#endif
  return (v >> 24) | ((v >> 8) & 0x0000ff00u) | ((v << 8) & 0x00ff0000u) | (v << 24);
}
GV_HD GV_INLINE constexpr std::uint64_t byteswap(std::uint64_t v) {
  return (static_cast<std::uint64_t>(byteswap(static_cast<std::uint32_t>(v))) << 32) |
         byteswap(static_cast<std::uint32_t>(v >> 32));
}

/// A big-endian field of T. Aggregate and trivially copyable, so it sits inside hardware
/// layouts; only from() and get() cross between host order and wire order.
template <class T>
struct BigEndian {
  T raw;  ///< bytes as they lie in memory (network order)

  GV_HD GV_INLINE static constexpr BigEndian from(T host) { return BigEndian{byteswap(host)}; }
  GV_HD GV_INLINE constexpr T get() const { return byteswap(raw); }
  friend constexpr bool operator==(BigEndian, BigEndian) = default;
};

using be16 = BigEndian<std::uint16_t>;
using be32 = BigEndian<std::uint32_t>;
using be64 = BigEndian<std::uint64_t>;
static_assert(sizeof(be16) == 2 && sizeof(be32) == 4 && sizeof(be64) == 8);

}  // namespace gv
