// gpu_reach.hpp without CUDA: nothing is GPU memory, and nothing can be mapped for a GPU.
#include <gpuverbs/host/verbs.hpp>

#include "gpu_reach.hpp"

namespace gv::detail::mlx5 {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string("mlx5: ") + what + " needs a CUDA build of gpuverbs (this one was built without nvcc)");
}

class NoReach final : public GpuReach {
 public:
  void* map_host(void*, std::size_t) override { no_cuda("mapping queues for GPUs (map_to_gpus)"); }
  void unmap_host(void*, std::size_t) override {}
  void* map_doorbell(void*, std::string& why) override {
    why = "this gpuverbs was built without CUDA";
    return nullptr;
  }
  void unmap_doorbell(void*) override {}
  void* alloc_device(std::size_t) override { no_cuda("GPU counters"); }
  void free_device(void*) override {}
  void* alloc_mapped(std::size_t) override { no_cuda("GPU-mapped host memory"); }
  void free_mapped(void*) override {}
  bool is_gpu_memory(const void*) const override { return false; }
  int dmabuf_fd(void*, std::size_t, std::uintptr_t&, std::string& why) override {
    why = "this gpuverbs was built without CUDA";
    return -1;
  }
};

}  // namespace

std::unique_ptr<GpuReach> make_gpu_reach() { return std::make_unique<NoReach>(); }

}  // namespace gv::detail::mlx5
