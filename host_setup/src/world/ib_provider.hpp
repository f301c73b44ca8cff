// Which provider the World's ib transport opens: GV_PROVIDER=soft (the default) or mlx5 (a
// ConnectX HCA; GV_PROVIDER=mlx5_0 names the device, as GV_IB_HCA does). The World's one hook
// into the provider choice: world.cpp opens what this returns, everything else is unchanged
// (QpInfo, exchanged through the bootstrap, carries the fabric address for mlx5).
#pragma once
#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gv::detail {

struct IbProvider {
  std::string name;      ///< for Device::open
  DeviceOptions options;
  /// The heap belongs in GPU memory (cudaMalloc, registered with reg_mr: the NIC reaches it
  /// through dma-buf or nvidia_peermem) rather than in Device::alloc memory: a NIC under GPU
  /// ranks, whose kernels then use the heap at GPU-memory speed and whose p2p peers in other
  /// processes open it through CUDA IPC, as for the soft GPU engine's arena.
  bool gpu_heap = false;
};

/// `soft` are the options the World gives the software HCA; `gpu_mode` whether kernels use the
/// queues. Throws gv::Error for a GV_PROVIDER it does not know.
IbProvider world_ib_provider(const DeviceOptions& soft, bool gpu_mode);

}  // namespace gv::detail
