// What the mlx5 provider needs of CUDA, in one seam: gpu_reach_cuda.cpp in CUDA builds,
// gpu_reach_none.cpp without CUDA (where nothing can be mapped for a GPU and no memory is GPU
// memory: host-thread handles and host memory registration still work).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gv::detail::mlx5 {

class GpuReach {
 public:
  virtual ~GpuReach() = default;

  /// Pin and map host memory [p, p + n) for every GPU (cudaHostRegister Mapped|Portable over
  /// its pages; pages another queue mapped already are shared, counted, and unmapped with their
  /// last user). Returns the device address of p.
  virtual void* map_host(void* p, std::size_t n) = 0;
  virtual void unmap_host(void* p, std::size_t n) = 0;

  /// Map the doorbell register's UAR page for the GPU as I/O memory. Returns its device address,
  /// or null with `why` saying what was refused and what to set (PeerMappingOverride=1).
  virtual void* map_doorbell(void* reg, std::string& why) = 0;
  virtual void unmap_doorbell(void* reg) = 0;

  /// Zeroed GPU memory for counters that kernels update atomically; freed with free_device.
  virtual void* alloc_device(std::size_t n) = 0;
  virtual void free_device(void* p) = 0;
  /// Zeroed pinned host memory at the same address for host and GPUs (flags the host raises,
  /// words the proxy reads); freed with free_mapped.
  virtual void* alloc_mapped(std::size_t n) = 0;
  virtual void free_mapped(void* p) = 0;

  /// Whether p is GPU memory of this process.
  virtual bool is_gpu_memory(const void* p) const = 0;
  /// A dma-buf fd for the GPU range [p, p + n) (cuMemGetHandleForAddressRange through the
  /// runtime's driver entry points), its page-aligned start in `base`; -1 with `why` otherwise.
  virtual int dmabuf_fd(void* p, std::size_t n, std::uintptr_t& base, std::string& why) = 0;
};

/// Without CUDA, every mapping call throws gv::Error saying the build has no CUDA.
std::unique_ptr<GpuReach> make_gpu_reach();

}  // namespace gv::detail::mlx5
