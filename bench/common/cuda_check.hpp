// The benchmarks' one CUDA error check. A failed call throws std::runtime_error naming the call
// and the reason; every benchmark's main() reports it and exits 1.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gv::bench {

/// Throws std::runtime_error("<what>: <the runtime's reason>") when `e` is not cudaSuccess. (A
/// benchmark asks for the GPUs first and names a machine without one there.)
inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

}  // namespace gv::bench

/// A CUDA call checked, named by its own text.
#define GV_BENCH_CUDA(expr) ::gv::bench::cuda_check((expr), #expr)
