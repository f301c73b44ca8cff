// The groups an rma operation runs at: one thread, a warp, or a block. Every member of the
// group calls the operation with the same arguments; data moves with all members, control
// (reservations, doorbells, signals, waits) with the leader, whose status every member gets.
//
// On the host a "warp" or "block" is the calling thread alone: host ranks run the same code
// at thread scope, so the CPU-only tests exercise every operation's semantics.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../config.hpp"

namespace gv::rma {

/// One thread.
struct Thread {
  GV_HD GV_INLINE static unsigned index() { return 0; }
  GV_HD GV_INLINE static unsigned count() { return 1; }
  GV_HD GV_INLINE static void sync() {}
  template <class T>
  GV_HD GV_INLINE static T from_leader(T v) { return v; }
  /// The queue a thread's verbs work goes through: one per block, so a block's operations to
  /// one peer keep their order whatever group issues them (see Peer::lanes).
  GV_HD GV_INLINE static std::uint32_t queue_hint();
};

/// The 32 lanes of a converged warp.
struct Warp {
  GV_HD GV_INLINE static unsigned index() {
#if GV_DEVICE_PASS
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
#else
    return 0;
#endif
  }
  GV_HD GV_INLINE static unsigned count() { return GV_DEVICE_PASS ? 32u : 1u; }
  GV_HD GV_INLINE static void sync() {
#if GV_DEVICE_PASS
    __syncwarp();
#endif
  }
  template <class T>
  GV_HD GV_INLINE static T from_leader(T v) {
#if GV_DEVICE_PASS
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0 && sizeof(T) <= 16);
    std::uint32_t w[sizeof(T) / 4];
    std::memcpy(w, &v, sizeof(T));
    for (auto& x : w) x = __shfl_sync(0xffffffffu, x, 0);
    std::memcpy(&v, w, sizeof(T));
#endif
    return v;
  }
  GV_HD GV_INLINE static std::uint32_t queue_hint() { return Thread::queue_hint(); }
};

/// Every thread of a block (any shape). Operations at block scope synchronise the block.
struct Block {
  GV_HD GV_INLINE static unsigned index() {
#if GV_DEVICE_PASS
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
#else
    return 0;
#endif
  }
  GV_HD GV_INLINE static unsigned count() {
#if GV_DEVICE_PASS
    return blockDim.x * blockDim.y * blockDim.z;
#else
    return 1;
#endif
  }
  GV_HD GV_INLINE static void sync() {
#if GV_DEVICE_PASS
    __syncthreads();
#endif
  }
  template <class T>
  GV_HD GV_INLINE static T from_leader(T v) {
#if GV_DEVICE_PASS
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16);
    __shared__ alignas(16) unsigned char slot[16];
    if (index() == 0) std::memcpy(slot, &v, sizeof(T));
    __syncthreads();
    std::memcpy(&v, slot, sizeof(T));
    __syncthreads();  // the slot may be reused by the next call
#endif
    return v;
  }
  GV_HD GV_INLINE static std::uint32_t queue_hint() { return Thread::queue_hint(); }
};

template <class G>
inline constexpr bool is_group_v = std::is_same_v<G, Thread> || std::is_same_v<G, Warp> || std::is_same_v<G, Block>;

#if !GV_DEVICE_PASS
namespace detail {
/// Host threads take queue hints round-robin, once per thread.
inline std::uint32_t host_queue_hint() {
  static std::uint32_t next = 0;  // races only reorder hints, never break them
  thread_local const std::uint32_t mine = __atomic_fetch_add(&next, 1u, __ATOMIC_RELAXED);
  return mine;
}
}  // namespace detail
#endif

GV_HD GV_INLINE std::uint32_t Thread::queue_hint() {
#if GV_DEVICE_PASS
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
#else
  return detail::host_queue_hint();
#endif
}

}  // namespace gv::rma
