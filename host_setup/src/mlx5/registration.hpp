// Memory registration for the mlx5 provider: host memory with ibv_reg_mr; GPU memory with
// ibv_reg_dmabuf_mr on a dma-buf of the range, else ibv_reg_mr where nvidia_peermem is loaded,
// else an error naming both.
#pragma once
#include <cstddef>
#include <cstdint>

#include <infiniband/verbs.h>

#include "gpu_reach.hpp"

namespace gv::detail::mlx5 {

/// Whether the nvidia_peermem kernel module is loaded (/sys/module/nvidia_peermem).
bool peermem_loaded();

/// Throws gv::Error saying what failed and what to do; `access` holds gv::Access bits (the
/// ibv_access_flags values).
ibv_mr* register_memory(ibv_pd* pd, GpuReach& reach, void* addr, std::size_t len, std::uint32_t access);

}  // namespace gv::detail::mlx5
