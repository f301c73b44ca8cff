// ib_provider.hpp.
#include "ib_provider.hpp"

#include <cstdlib>

namespace gv::detail {

IbProvider world_ib_provider(const DeviceOptions& soft, bool gpu_mode) {
  const char* env = std::getenv("GV_PROVIDER");
  const std::string name = env == nullptr || *env == '\0' ? "soft" : env;
  if (name == "soft") return IbProvider{name, soft};
  if (name != "mlx5" && name.rfind("mlx5_", 0) != 0)
    throw Error("World: GV_PROVIDER='" + name + "' must be soft or mlx5 (or an mlx5 device name such as mlx5_0; "
                "gv_devices lists them)");
  DeviceOptions o;  // the NIC's queues are rdma-core's: the arena and engine options do not apply
  o.map_to_gpus = gpu_mode;
  return IbProvider{name, o, gpu_mode};
}

}  // namespace gv::detail
