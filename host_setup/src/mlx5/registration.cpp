// registration.hpp.
#include "registration.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <gpuverbs/host/verbs.hpp>
#include <gpuverbs/types.hpp>

#include "../provider.hpp"

namespace gv::detail::mlx5 {

static_assert(std::uint32_t{kLocalWrite} == IBV_ACCESS_LOCAL_WRITE && std::uint32_t{kRemoteWrite} == IBV_ACCESS_REMOTE_WRITE &&
              std::uint32_t{kRemoteRead} == IBV_ACCESS_REMOTE_READ && std::uint32_t{kRemoteAtomic} == IBV_ACCESS_REMOTE_ATOMIC,
              "gv::Access carries the ibv_access_flags values");

bool peermem_loaded() {
  struct stat st{};
  return stat("/sys/module/nvidia_peermem", &st) == 0;
}

ibv_mr* register_memory(ibv_pd* pd, GpuReach& reach, void* addr, std::size_t len, std::uint32_t access) {
  const auto flags = static_cast<int>(access);
  const std::string range = "[" + hex(reinterpret_cast<std::uintptr_t>(addr)) + ", +" + std::to_string(len) + ")";
  if (!reach.is_gpu_memory(addr)) {
    if (ibv_mr* mr = ibv_reg_mr(pd, addr, len, flags)) return mr;
    const int e = errno;
    throw Error("reg_mr(mlx5): ibv_reg_mr of host memory " + range + " failed: " + std::strerror(e) +
                (e == ENOMEM || e == EPERM ? " (raise the locked-memory limit: ulimit -l unlimited)" : ""));
  }
  std::string dmabuf_why;
  std::uintptr_t base = 0;
  const int fd = reach.dmabuf_fd(addr, len, base, dmabuf_why);
  if (fd >= 0) {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    ibv_mr* mr = ibv_reg_dmabuf_mr(pd, a - base, len, a, fd, flags);
    const int e = errno;
    close(fd);  // the MR holds its own reference to the dma-buf
    if (mr != nullptr) return mr;
    dmabuf_why = std::string("ibv_reg_dmabuf_mr failed: ") + std::strerror(e);
  }
  if (peermem_loaded()) {
    if (ibv_mr* mr = ibv_reg_mr(pd, addr, len, flags)) return mr;
    const int e = errno;
    throw Error("reg_mr(mlx5): GPU memory " + range + ": dma-buf: " + dmabuf_why +
                "; ibv_reg_mr through nvidia_peermem failed: " + std::strerror(e));
  }
  throw Error("reg_mr(mlx5): GPU memory " + range + " cannot be registered: dma-buf: " + dmabuf_why +
              "; and nvidia_peermem is not loaded. Use a kernel with dma-buf (Linux >= 6.1 and the open "
              "NVIDIA kernel modules), or load the module: modprobe nvidia_peermem");
}

}  // namespace gv::detail::mlx5
