// The Seam over rdma-core (libibverbs + libmlx5 DEVX) and the CUDA runtime, and the factory the
// mlx5 provider asks for placement kGpu.
#pragma once
#include <memory>

#include <infiniband/verbs.h>

#include "../queues.hpp"
#include "queues.hpp"

namespace gv::mlx5::devx {

/// Queues of `ctx` in GPU memory of the current CUDA device. Throws gv::Error (DEVX not usable,
/// a capability missing, no CUDA) with what to do; the provider then offers the host placement.
std::unique_ptr<detail::mlx5::QueueFactory> make_gpu_queue_factory(ibv_context* ctx, const GpuQueueOptions& opt = {});

}  // namespace gv::mlx5::devx
