// Which provider a benchmark opens, with perftest's flag letters for the NIC:
//   --provider soft|mlx5   the software HCA (default) or a ConnectX HCA through rdma-core
//   -d DEVICE              mlx5: the RDMA device (default: the first with an ACTIVE port)
//   -i PORT                mlx5: its port, 1-based (default: the first ACTIVE one)
//   -x GID_INDEX           mlx5: the source GID index (RoCE; default: the first RoCE v2 GID)
#pragma once
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "args.hpp"

namespace gv::bench {

struct ProviderArgs {
  std::string provider = "soft";
  std::string device;
  int port = 0;
  int gid_index = -1;

  bool nic() const { return provider != "soft"; }
  /// The name for Device::open.
  std::string open_name() const { return device.empty() ? provider : device; }
  /// `o` with the NIC's port and GID index.
  gv::DeviceOptions options(gv::DeviceOptions o) const {
    o.ib_port = static_cast<std::uint8_t>(port);
    o.ib_gid_index = gid_index;
    return o;
  }

  /// Takes flag `a` (and its value) if it is one of these; false otherwise.
  bool take(const std::string& a, ArgWalker& args) {
    if (a == "--provider") {
      provider = args.value(a);
      if (provider != "soft" && provider != "mlx5")
        throw UsageError("--provider takes soft or mlx5, not '" + provider + "'");
    } else if (a == "-d" || a == "--ib-dev") {
      device = args.value(a);
    } else if (a == "-i" || a == "--ib-port") {
      port = static_cast<int>(args.number(a, 1, 255));
    } else if (a == "-x" || a == "--gid-index") {
      gid_index = static_cast<int>(args.number(a, 0, 255));
    } else {
      return false;
    }
    return true;
  }
  /// After parsing: the NIC flags need --provider mlx5.
  void check() const {
    if (!nic() && (!device.empty() || port != 0 || gid_index >= 0))
      throw UsageError("-d, -i and -x choose a NIC: add --provider mlx5");
  }
};

/// The usage lines of these flags (a string literal, to concatenate into a usage text).
#define GV_BENCH_PROVIDER_USAGE                                                                           \
  "  --provider P soft (the software HCA, default) or mlx5 (a ConnectX HCA through rdma-core)\n"           \
  "  -d DEVICE    mlx5: the RDMA device (default: the first with an ACTIVE port; gv_devices lists them)\n" \
  "  -i PORT      mlx5: its port (default: the first ACTIVE one)\n"                                       \
  "  -x INDEX     mlx5: the source GID index (RoCE; default: the first RoCE v2 GID, IPv4 first)\n"

}  // namespace gv::bench
