// The Atomic-RMW study's kernels (ucsc-chpl gpu-atomic-rmw-microbenchmark): each of `threads`
// threads does `iters` relaxed read-modify-writes at the word its pattern names, at one scope.
// Shared by gv_scope and its GPU test, which checks every word against the host.
#pragma once
#include <cstdint>

#include "patterns.hpp"

namespace gv::scope {

enum class Op : std::uint8_t { kFetchAdd, kFetchAddUsed, kCas, kExch, kMin, kMax };
enum class Scope : std::uint8_t { kBlock, kDevice, kSystem };
inline constexpr int kOps = 6, kScopes = 3;

inline const char* op_name(Op o) {
  constexpr const char* n[] = {"FetchAdd", "FetchAddUsed", "CAS", "Exch", "Min", "Max"};
  return n[static_cast<int>(o)];
}
inline const char* scope_name(Scope s) {
  constexpr const char* n[] = {"Block", "Device", "System"};
  return n[static_cast<int>(s)];
}

/// What thread g writes at iteration it for Exch / Min / Max: unique, and decodable to (g, it).
GV_HD inline std::uint32_t rmw_value(std::uint64_t g, std::uint32_t it, std::uint32_t iters) {
  return static_cast<std::uint32_t>(g * iters + it + 1);
}

#if defined(__CUDACC__)
// The intrinsic of each op at each scope: name_block, name, name_system (relaxed atom.cta /
// atom.gpu / atom.sys), one dispatch written once.
#define GV_SCOPED_ATOMIC(fn, intrinsic)                                     \
  template <Scope S, class... A>                                           \
  __device__ inline unsigned fn(A... a) {                                  \
    if constexpr (S == Scope::kBlock) return intrinsic##_block(a...);      \
    else if constexpr (S == Scope::kDevice) return intrinsic(a...);        \
    else return intrinsic##_system(a...);                                  \
  }
GV_SCOPED_ATOMIC(at_add, atomicAdd)
GV_SCOPED_ATOMIC(at_cas, atomicCAS)
GV_SCOPED_ATOMIC(at_exch, atomicExch)
GV_SCOPED_ATOMIC(at_min, atomicMin)
GV_SCOPED_ATOMIC(at_max, atomicMax)
#undef GV_SCOPED_ATOMIC

template <Op O, Scope S>
__device__ inline unsigned rmw(unsigned* a, unsigned v) {
  if constexpr (O == Op::kFetchAdd || O == Op::kFetchAddUsed) return at_add<S>(a, 1u);
  else if constexpr (O == Op::kCas) {
    // The CAS retry loop adds 1: lock-free, each failure means another thread's CAS succeeded.
    unsigned old = *static_cast<volatile unsigned*>(a), seen;
    while ((seen = at_cas<S>(a, old, old + 1)) != old) old = seen;
    return old;
  } else if constexpr (O == Op::kExch) return at_exch<S>(a, v);
  else if constexpr (O == Op::kMin) return at_min<S>(a, v);
  else return at_max<S>(a, v);
}

/// `out` (kFetchAddUsed only): each thread's sum of the values its fetch_adds returned.
template <Op O, Scope S, Pattern P>
__global__ void rmw_kernel(unsigned* buf, std::uint64_t threads, std::uint64_t contention, std::uint64_t padding,
                           std::uint32_t iters, unsigned* out) {
  const std::uint64_t g = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (g >= threads) return;
  std::uint32_t state = lcg_seed(g);
  unsigned acc = 0;
  for (std::uint32_t it = 0; it < iters; ++it) {
    if constexpr (P == Pattern::kRandom) state = lcg_next(state);
    unsigned* a = buf + pattern_index(P, g, threads, contention, padding, state);
    const unsigned v = rmw_value(g, it, iters);
    if constexpr (P == Pattern::kBranched) {
      // Odd and even lanes in different branches: each half of a warp issues on its own.
      // (The asm in one branch only keeps the compiler from merging the two.)
      if (threadIdx.x & 1) {
        asm volatile("" ::: "memory");
        acc += rmw<O, S>(a, v);
      } else {
        acc += rmw<O, S>(a, v);
      }
    } else {
      acc += rmw<O, S>(a, v);
    }
  }
  if constexpr (O == Op::kFetchAddUsed) out[g] = acc;
}

/// Launches the instance for (o, s, p): 256 threads a block.
void launch_rmw(Op o, Scope s, Pattern p, unsigned* buf, std::uint64_t threads, std::uint64_t contention,
                std::uint64_t padding, std::uint32_t iters, unsigned* out, cudaStream_t stream);
#endif

/// Host reference: the value every word should hold after one launch over a buffer whose
/// words start at `init` (0 for adds and Max, ~0 for Min). Returns the first wrong word's
/// index, or -1 where all match. `words` is the buffer as copied back.
long long check_rmw(Op o, Pattern p, const std::uint32_t* words, std::uint64_t threads, std::uint64_t contention,
                    std::uint64_t padding, std::uint32_t iters, std::uint32_t init);

/// The word's starting value for op o.
inline std::uint32_t rmw_init(Op o) { return o == Op::kMin ? 0xffffffffu : 0u; }

}  // namespace gv::scope
