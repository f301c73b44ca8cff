// Moving bytes between local and peer memory with every member of a group: 16-byte vector
// loads and stores where both ends allow it (else the widest word they share), four words in
// flight per member so a warp or block keeps enough loads outstanding to fill a link.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../config.hpp"
#include "../group.hpp"

namespace gv::rma::detail {

#if GV_DEVICE_PASS
/// No __restrict__: the source may have been written by other blocks of the same kernel (a put
/// after a grid sync), and the compiler must not read it through the non-coherent path.
template <class W>
__device__ GV_INLINE void copy_words(W* d, const W* s, std::size_t n,
                                     unsigned me, unsigned stride) {
  std::size_t i = me;
  for (; i + 3 * std::size_t{stride} < n; i += 4 * std::size_t{stride}) {
    const W a = s[i], b = s[i + stride], c = s[i + 2 * stride], e = s[i + 3 * stride];
    d[i] = a;
    d[i + stride] = b;
    d[i + 2 * stride] = c;
    d[i + 3 * stride] = e;
  }
  for (; i < n; i += stride) d[i] = s[i];
}
#endif

/// Copy `n` bytes with every member of G; returns before the group has synchronised (the caller
/// syncs where it needs every member's stores behind one point).
template <class G>
GV_HD GV_INLINE void group_copy(void* dst, const void* src, std::size_t n) {
#if GV_DEVICE_PASS
  const unsigned me = G::index(), cnt = G::count();
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s);
  std::size_t done;
  if ((mis & 15u) == 0) {
    done = n & ~std::size_t{15};
    copy_words(reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(s), n / 16, me, cnt);
  } else if ((mis & 7u) == 0) {
    done = n & ~std::size_t{7};
    copy_words(reinterpret_cast<std::uint64_t*>(d), reinterpret_cast<const std::uint64_t*>(s), n / 8, me, cnt);
  } else if ((mis & 3u) == 0) {
    done = n & ~std::size_t{3};
    copy_words(reinterpret_cast<std::uint32_t*>(d), reinterpret_cast<const std::uint32_t*>(s), n / 4, me, cnt);
  } else {
    done = 0;
  }
  for (std::size_t i = done + me; i < n; i += cnt) d[i] = s[i];
#else
  if (n != 0) std::memmove(dst, src, n);
#endif
}

}  // namespace gv::rma::detail
