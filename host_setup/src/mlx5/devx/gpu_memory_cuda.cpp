#include "gpu_memory.hpp"

#include <cstdint>
#include <map>
#include <mutex>

#include "../../cuda_util.hpp"

namespace gv::mlx5::devx {
namespace {

constexpr std::size_t kAlign = std::size_t{64} << 10;

/// Aligned pointer -> what cudaMalloc returned (cudaMalloc promises 256 B, not 64 KiB).
std::mutex g_mu;
std::map<void*, void*> g_raw;

}  // namespace

void* gpu_queue_alloc(std::size_t bytes, int gpu) {
  (void)detail::require_gpus("the mlx5 provider's GPU placement");
  const detail::DeviceGuard on(gpu);
  void* raw = nullptr;
  detail::cuda_check(cudaMalloc(&raw, bytes + kAlign), "cudaMalloc for DEVX queue memory");
  auto* aligned = reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(raw) + kAlign - 1) & ~(kAlign - 1));
  // The legacy stream, synchronised alone: never waits for kernels on non-blocking streams.
  cudaError_t e = cudaMemset(aligned, 0, bytes);
  if (e == cudaSuccess) e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) {
    (void)cudaFree(raw);
    detail::cuda_check(e, "zeroing DEVX queue memory");
  }
  std::lock_guard lock(g_mu);
  g_raw[aligned] = raw;
  return aligned;
}

void gpu_queue_free(void* p) {
  void* raw = nullptr;
  {
    std::lock_guard lock(g_mu);
    auto it = g_raw.find(p);
    if (it == g_raw.end()) return;
    raw = it->second;
    g_raw.erase(it);
  }
  (void)cudaFree(raw);
}

void gpu_queue_write(void* dst, const void* src, std::size_t bytes) {
  detail::cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "writing DEVX queue memory");
}

int gpu_dmabuf_fd(void* p, std::size_t bytes, std::string* why) {
  // CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr, size_t, CUmemRangeHandleType, flags),
  // taken through the runtime so that nothing links libcuda.
  using Fn = int (*)(void*, unsigned long long, std::size_t, int, unsigned long long);
  const auto fn = reinterpret_cast<Fn>(detail::driver_entry("cuMemGetHandleForAddressRange"));
  if (fn == nullptr) {
    *why = "the CUDA driver has no cuMemGetHandleForAddressRange (needs a driver of CUDA 11.7 or later)";
    return -1;
  }
  constexpr int kDmaBufFd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
  int fd = -1;
  const int r = fn(&fd, reinterpret_cast<std::uintptr_t>(p), bytes, kDmaBufFd, 0);
  if (r != 0 || fd < 0) {
    *why = "cuMemGetHandleForAddressRange(DMA_BUF_FD) returned CUresult " + std::to_string(r) +
           " (dma-buf export needs Linux >= 6.1 with NVIDIA's open kernel modules)";
    return -1;
  }
  return fd;
}

}  // namespace gv::mlx5::devx
