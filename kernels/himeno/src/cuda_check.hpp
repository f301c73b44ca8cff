// Himeno's one CUDA error check (gpu.cu, multi.cpp): a failed call throws std::runtime_error
// "himeno: <what> failed: <reason>".
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gv::himeno::detail {

inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("himeno: " + what + " failed: " + cudaGetErrorString(e));
}

}  // namespace gv::himeno::detail
