// Builds without rdma-core (GPUVERBS_WITH_MLX5=OFF, or libibverbs/libmlx5 not found): no RDMA
// device can be opened, and open() says why.
#include "../provider.hpp"

namespace gv::detail {

std::unique_ptr<Provider> open_mlx5_provider(std::string_view name, const DeviceOptions&) {
  throw Error("Device::open(" + std::string(name) +
              "): this gpuverbs was built without the mlx5 provider (rdma-core's libibverbs and libmlx5 were "
              "not found, or GPUVERBS_WITH_MLX5=OFF); install libibverbs-dev and rebuild. gv_devices lists "
              "what can be opened");
}

std::vector<std::string> list_mlx5_devices() { return {}; }

std::string rdma_device_report() {
  return "mlx5: not built (rdma-core's libibverbs/libmlx5 were not found, or GPUVERBS_WITH_MLX5=OFF)\n";
}

}  // namespace gv::detail
