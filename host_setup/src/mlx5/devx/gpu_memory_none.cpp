// Builds without CUDA: the GPU placement has no GPU memory to put queues in.
#include "gpu_memory.hpp"

#include <gpuverbs/host/verbs.hpp>

namespace gv::mlx5::devx {
namespace {
[[noreturn]] void no_cuda() {
  throw Error("the mlx5 provider's GPU placement needs a CUDA build of gpuverbs (this one has no nvcc): "
              "use the host placement");
}
}  // namespace

void* gpu_queue_alloc(std::size_t, int) { no_cuda(); }
void gpu_queue_free(void*) {}
void gpu_queue_write(void*, const void*, std::size_t) { no_cuda(); }
int gpu_dmabuf_fd(void*, std::size_t, std::string* why) {
  *why = "this build has no CUDA";
  return -1;
}

}  // namespace gv::mlx5::devx
