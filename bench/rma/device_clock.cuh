// Device clocks and shared patterns of the measured loops of gv_rma and shmem_perf (one of which builds
// against NVSHMEM, so this header needs nothing but CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gv::bench {

/// A measured loop's wall time and cycles, for calibrating per-iteration cycles to nanoseconds.
struct Timing {
  std::uint64_t ns = 0, cycles = 0;
};

__device__ __forceinline__ std::uint64_t gtimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Makes the thread wait for `v` before it reads the clock that ends an iteration: a fetched
/// value that nothing consumes until the next iteration's operand lets the end clock run ahead
/// of the round trip, and the wait lands between iterations, outside every sample. A volatile
/// store to shared memory must have its operand, and clock64() is not moved above it.
__device__ __forceinline__ void settle(std::uint64_t v) {
  __shared__ std::uint64_t slot;
  asm volatile("st.volatile.shared.u64 [%0], %1;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(&slot))), "l"(v)
               : "memory");
}

/// The clock of a measured loop: iterations after `warmup` record their cycles (when `record`),
/// and the measured span's wall time calibrates cycles to nanoseconds.
struct LoopClock {
  int warmup;
  std::uint64_t* cycles;
  bool record;
  std::uint64_t t0 = 0, c0 = 0, lap = 0;
  __device__ void begin(int i) {
    if (i == warmup + 1) {
      t0 = gtimer();
      c0 = clock64();
    }
    lap = clock64();
  }
  __device__ void end(int i) {
    if (record && i > warmup) cycles[i - warmup - 1] = clock64() - lap;
  }
  __device__ void finish(Timing* t) {
    if (record) *t = Timing{gtimer() - t0, static_cast<std::uint64_t>(clock64()) - c0};
  }
};

/// The words an atomic chain walks: kChainWords words kChainStride bytes apart, the next one every
/// iteration. One SM's atomic round trip depends on which L2 partition holds the word (one H200,
/// one thread, 64 words 4 KiB apart in one allocation: 0.14-0.17 us for half of them, 0.23-0.27 for
/// the others), so a chain on a single word measures where that word happens to lie, and two builds
/// whose words lie differently (the face's heap and NVSHMEM's, an rma call and its raw anchor)
/// would compare placements, not code. Every atomic chain of gv_rma and shmem_perf walks this.
inline constexpr unsigned kChainWords = 32;
inline constexpr std::size_t kChainStride = 4096;
inline constexpr std::size_t kChainBytes = kChainWords * kChainStride;
template <class T>
__device__ __forceinline__ T* chain_word(T* base, int i) {
  return base + (static_cast<unsigned>(i) % kChainWords) * (kChainStride / sizeof(T));
}

}  // namespace gv::bench
