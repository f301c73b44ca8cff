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
};

/// `soft` are the options the World gives the software HCA; `gpu_mode` whether kernels use the
/// queues. Throws gv::Error for a GV_PROVIDER it does not know.
IbProvider world_ib_provider(const DeviceOptions& soft, bool gpu_mode);

}  // namespace gv::detail
