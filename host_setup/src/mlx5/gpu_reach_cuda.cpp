// gpu_reach.hpp in CUDA builds.
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "../cuda_util.hpp"
#include "devx/gpu_memory.hpp"
#include "gpu_reach.hpp"

namespace gv::detail::mlx5 {
namespace {

constexpr std::uintptr_t kUarPage = 4096;  // a UAR page is 4 KiB on every mlx5 device

std::uintptr_t page_size() {
  static const auto p = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return p;
}

class CudaReach final : public GpuReach {
 public:
  void* map_host(void* p, std::size_t n) override {
    require_gpus("the mlx5 provider's GPU mapping (DeviceOptions::map_to_gpus)");
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p), ps = page_size();
    const std::uintptr_t base = a & ~(ps - 1), end = (a + n + ps - 1) & ~(ps - 1);
    void* dbase = acquire(base, end - base, cudaHostRegisterMapped | cudaHostRegisterPortable, "cudaHostRegister of queue memory");
    return static_cast<char*>(dbase) + (a - base);
  }
  void unmap_host(void* p, std::size_t) override {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
    release(a & ~(page_size() - 1));
  }

  void* map_doorbell(void* reg, std::string& why) override {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(reg), base = a & ~(kUarPage - 1);
    try {
      void* d = acquire(base, kUarPage, cudaHostRegisterIoMemory | cudaHostRegisterMapped | cudaHostRegisterPortable,
                        "cudaHostRegister(IoMemory) of the doorbell register");
      return static_cast<char*>(d) + (a - base);
    } catch (const Error& e) {
      why = std::string(e.what()) +
            ". The GPU may not write the NIC's doorbell register: the NVIDIA driver needs "
            "options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\" (in /etc/modprobe.d, then "
            "reload the driver or reboot)";
      return nullptr;
    }
  }
  void unmap_doorbell(void* reg) override { release(reinterpret_cast<std::uintptr_t>(reg) & ~(kUarPage - 1)); }

  void* alloc_device(std::size_t n) override {
    require_gpus("the mlx5 provider's GPU counters");
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, n), "mlx5: cudaMalloc of queue counters");
    cuda_check(cudaMemset(p, 0, n), "mlx5: cudaMemset of queue counters");
    return p;
  }
  void free_device(void* p) override { (void)cudaFree(p); }
  void* alloc_mapped(std::size_t n) override {
    require_gpus("the mlx5 provider's GPU mapping (DeviceOptions::map_to_gpus)");
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable), "mlx5: cudaHostAlloc");
    std::memset(p, 0, n);
    return p;
  }
  void free_mapped(void* p) override { (void)cudaFreeHost(p); }

  bool is_gpu_memory(const void* p) const override {
    cudaPointerAttributes at{};
    const cudaError_t e = cudaPointerGetAttributes(&at, p);
    (void)cudaGetLastError();
    return e == cudaSuccess && at.type == cudaMemoryTypeDevice;
  }

  int dmabuf_fd(void* p, std::size_t n, std::uintptr_t& base, std::string& why) override {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p), ps = page_size();
    base = a & ~(ps - 1);
    const std::uintptr_t end = (a + n + ps - 1) & ~(ps - 1);
    return ::gv::mlx5::devx::gpu_dmabuf_fd(reinterpret_cast<void*>(base), end - base, &why);
  }

 private:
  struct Pages {
    std::size_t len;
    int refs;
    bool ours;  ///< registered here (else someone else had: never unregistered here)
    void* dev;
  };

  void* acquire(std::uintptr_t base, std::size_t len, unsigned flags, const char* what) {
    std::scoped_lock lk(mu_);
    if (auto it = pages_.find(base); it != pages_.end()) {
      ++it->second.refs;
      return it->second.dev;
    }
    void* hp = reinterpret_cast<void*>(base);
    const cudaError_t e = cudaHostRegister(hp, len, flags);
    bool ours = true;
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
      (void)cudaGetLastError();
      ours = false;  // records and UAR pages are shared; registered by the application or earlier
    } else {
      cuda_check(e, std::string("mlx5: ") + what);
    }
    void* dev = nullptr;
    const cudaError_t g = cudaHostGetDevicePointer(&dev, hp, 0);
    if (g != cudaSuccess) {
      if (ours) (void)cudaHostUnregister(hp);
      cuda_check(g, std::string("mlx5: cudaHostGetDevicePointer after ") + what);
    }
    pages_[base] = Pages{len, 1, ours, dev};
    return dev;
  }

  void release(std::uintptr_t base) {
    std::scoped_lock lk(mu_);
    auto it = pages_.find(base);
    if (it == pages_.end() || --it->second.refs > 0) return;
    if (it->second.ours) (void)cudaHostUnregister(reinterpret_cast<void*>(base));
    (void)cudaGetLastError();
    pages_.erase(it);
  }

  std::mutex mu_;
  std::map<std::uintptr_t, Pages> pages_;
};

}  // namespace

std::unique_ptr<GpuReach> make_gpu_reach() { return std::make_unique<CudaReach>(); }

}  // namespace gv::detail::mlx5
