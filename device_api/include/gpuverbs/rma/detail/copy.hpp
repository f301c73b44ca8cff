// Moving bytes between local and peer memory with every member of a group: 16-byte vector
// loads and stores where both ends allow it (else the widest word they share), several words in
// flight per member (16 for a thread, 4 for each member of a warp or block) so enough loads are
// outstanding to fill a link.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../group.hpp"

namespace gv::rma::detail {

#if GV_DEVICE_PASS
/// No __restrict__: the source may have been written by other blocks of the same kernel (a put
/// after a grid sync), and the compiler must not read it through the non-coherent path.
/// K words at i, i + stride, ...: every load issued before the first store.
template <unsigned K, class W>
__device__ GV_INLINE void copy_batch(W* d, const W* s, std::size_t i, unsigned stride) {
  W v[K];
#pragma unroll
  for (unsigned j = 0; j < K; ++j) v[j] = s[i + j * std::size_t{stride}];
#pragma unroll
  for (unsigned j = 0; j < K; ++j) d[i + j * std::size_t{stride}] = v[j];
}

/// Batches of kDepth words per member, then one of kDepth / 2, then of 4, then what is left (fewer
/// than 4 words a member) as one batch whose loads and stores are predicated: every load before
/// the first store, and no loop. Word by word, each remaining word was a load waited for before
/// its store, and a put of one word a member paid the loop's control around it: on an H200
/// (2026-11-26) a block's put of 512 B (one word each for 32 of 512 threads) took 0.38 us a call
/// against 0.15 for a plain strided loop.
template <unsigned kDepth, class W>
__device__ GV_INLINE void copy_words(W* d, const W* s, std::size_t n, unsigned me, unsigned stride) {
  const std::size_t st = stride;
  std::size_t i = me;
  if constexpr (kDepth > 4) {
    for (; i + (kDepth - 1) * st < n; i += kDepth * st) copy_batch<kDepth>(d, s, i, stride);
    // Half a batch where it fits: a thread's 128 B are one round trip, not two batches of 4.
    if (i + (kDepth / 2 - 1) * st < n) {
      copy_batch<kDepth / 2>(d, s, i, stride);
      i += kDepth / 2 * st;
    }
  }
  for (; i + 3 * st < n; i += 4 * st) copy_batch<4>(d, s, i, stride);
  // Initialised: left undefined where a member has fewer words, they gave the face's ping-pong
  // kernel 207 registers instead of 106 (ptxas, sm_90), too many for a block of 512 threads.
  W v[3] = {};
#pragma unroll
  for (unsigned j = 0; j < 3; ++j)
    if (i + j * st < n) v[j] = s[i + j * st];
#pragma unroll
  for (unsigned j = 0; j < 3; ++j)
    if (i + j * st < n) d[i + j * st] = v[j];
}

/// Bytes [at, n) of a copy, fewer than 16: the widest words both ends allow (a put of 8 bytes
/// is one 8-byte store, not eight byte stores). An aligned 8-byte tail returns after its word:
/// the narrower words' tests that followed it were some 40 instructions between a put_signal's
/// data and its fence (gv_rma on one H200, ranks on SMs 0 and 1, 8 processes of each binary: a
/// thread's 8-byte put_signal over its floor 1.14 -> 1.09, a block's 1.17 -> 1.13, medians;
/// bench/results/archive/2026-11-27-h200-rma-ab-copy-tail.txt).
__device__ GV_INLINE void copy_tail(unsigned char* d, const unsigned char* s, std::size_t at, std::size_t n) {
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s);
  if (n - at >= 8 && ((mis | at) & 7u) == 0) {
    *reinterpret_cast<std::uint64_t*>(d + at) = *reinterpret_cast<const std::uint64_t*>(s + at);
    at += 8;
    if (at == n) return;
  }
  if (n - at >= 4 && ((mis | at) & 3u) == 0) {
    *reinterpret_cast<std::uint32_t*>(d + at) = *reinterpret_cast<const std::uint32_t*>(s + at);
    at += 4;
  }
  if (n - at >= 2 && ((mis | at) & 1u) == 0) {
    *reinterpret_cast<std::uint16_t*>(d + at) = *reinterpret_cast<const std::uint16_t*>(s + at);
    at += 2;
  }
  for (; at < n; ++at) d[at] = s[at];
}
#endif

/// Copy `n` bytes with every member of G; returns before the group has synchronised (the caller
/// syncs where it needs every member's stores behind one point). kNearLoads: the source is in
/// this GPU's memory (a put); a get's loads cross the link.
template <class G, bool kNearLoads = false>
GV_HD GV_INLINE void group_copy(void* dst, const void* src, std::size_t n) {
#if GV_DEVICE_PASS
  const unsigned me = G::index(), cnt = G::count();
  // One thread keeps 16 loads in flight (a 4 KiB put is 16 round trips to memory, not 64); a
  // warp or a block has enough members for 4 each.
  constexpr unsigned kDepth = std::is_same_v<G, Thread> ? 16 : 4;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (n < 16) {
    // A few bytes (a put_signal's 8): the leader's widest words and nothing else to decide. Through
    // the general path below an 8-byte put_signal took 0.2 us longer per half round trip on an
    // H200 (2026-11-26): some 65 more instructions, every one on the critical path.
    if (me == 0) copy_tail(d, s, 0, n);
    return;
  }
  const std::uintptr_t mis = reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s);
  if constexpr (kNearLoads && std::is_same_v<G, Block>) {
    // A block's put of up to 8 whole 16-byte words a member: one word at a time, as NVSHMEM
    // copies. The block's warps keep enough loads in flight, and the batches below only lengthened
    // each member's path: on one H100 (2026-11-26, 512 threads) gv_rma's bandwidth rose 23-38 %
    // wherever a member has up to 8 words (8-132 blocks at 4-256 KiB). Beyond that the batches'
    // loads in flight win (this loop for all sizes: one block at 256 KiB 45.6 -> 38.4 GB/s, 8 at
    // 16 MiB 379 -> 182).
    if (((mis & 15u) == 0) & (n / 16 <= std::size_t{8} * cnt)) {
      for (std::size_t i = me; i < n / 16; i += cnt)
        reinterpret_cast<uint4*>(d)[i] = reinterpret_cast<const uint4*>(s)[i];
      if ((n & 15u) != 0 && me == 0) copy_tail(d, s, n & ~std::size_t{15}, n);
      return;
    }
  }
  std::size_t done;
  if ((mis & 15u) == 0) {
    done = n & ~std::size_t{15};
    copy_words<kDepth>(reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(s), n / 16, me, cnt);
  } else if ((mis & 7u) == 0) {
    done = n & ~std::size_t{7};
    copy_words<kDepth>(reinterpret_cast<std::uint64_t*>(d), reinterpret_cast<const std::uint64_t*>(s), n / 8, me, cnt);
  } else if ((mis & 3u) == 0) {
    done = n & ~std::size_t{3};
    copy_words<kDepth>(reinterpret_cast<std::uint32_t*>(d), reinterpret_cast<const std::uint32_t*>(s), n / 4, me, cnt);
  } else {
    done = 0;
  }
  if (done == n) return;  // whole words: the common case decides nothing more
  if (n - done < 16) {
    if (me == 0) copy_tail(d, s, done, n);
  } else {
    for (std::size_t i = done + me; i < n; i += cnt) d[i] = s[i];
  }
#else
  if (n != 0) std::memmove(dst, src, n);
#endif
}

}  // namespace gv::rma::detail
