// The host library's one CUDA error check, and a scoped current device. Included by the sources
// of CUDA builds only (src/soft/cuda_reach.cpp, src/soft/gpu_arena.cpp, src/mlx5/gpu_reach_cuda.cpp).
#pragma once
#include <cuda_runtime.h>

#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail {

/// What a failed CUDA call means for the user: the runtime's words, except where the machine
/// simply has no GPU (the runtime then blames the driver version).
inline std::string cuda_error_text(cudaError_t e) {
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    return std::string("no NVIDIA GPU or driver found (") + cudaGetErrorName(e) + ")";
  return cudaGetErrorString(e);
}

/// Throw gv::Error("<what>: <reason>") if `e` failed; the runtime's sticky last error is cleared.
inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(what + ": " + cuda_error_text(e));
  }
}

/// A CUDA driver function through the runtime (cudaGetDriverEntryPointByVersion, CUDA 12.0 ABI),
/// so no binary links libcuda; null when the driver lacks it or there is no driver.
inline void* driver_entry(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return f;
}

/// The number of GPUs (at least one); throws gv::Error("<who> needs a GPU: <reason>") without one.
inline int require_gpus(const std::string& who) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    throw Error(who + " needs a GPU: " +
                (e != cudaSuccess ? cuda_error_text(e) : std::string("no NVIDIA GPU or driver found (no CUDA device)")));
  }
  return n;
}

/// Makes `gpu` current for a scope and restores the caller's device.
class DeviceGuard {
 public:
  /// `must`: throw if the device cannot be made current (false on teardown paths).
  explicit DeviceGuard(int gpu, bool must = true) {
    (void)cudaGetDevice(&prev_);
    const cudaError_t e = cudaSetDevice(gpu);
    if (must) cuda_check(e, "cudaSetDevice(" + std::to_string(gpu) + ")");
    (void)cudaGetLastError();
  }
  ~DeviceGuard() { (void)cudaSetDevice(prev_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

}  // namespace gv::detail
