// gv_devices: what Device::open can open on this machine, like rdma-core's ibv_devices and
// ibv_devinfo together: the soft provider, then every RDMA device with its ports and GIDs.
//
//   gv_devices          # exit status 0; prints "no RDMA device found" where there is none
#include <cstdio>
#include <exception>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "../src/provider.hpp"

int main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s\n  lists the providers and RDMA devices gv::Device::open accepts\n", argv[0]);
    return 2;
  }
  try {
    std::printf("%-12s %s\n", "soft", "software HCA: always available (Device::open(\"soft\"))");
    std::printf("%s", gv::detail::rdma_device_report().c_str());
    const auto names = gv::Device::list();
    std::string usable;
    for (std::size_t i = 1; i < names.size(); ++i) usable += " " + names[i];
    std::printf("Device::open accepts: soft%s%s\n", usable.c_str(),
                names.size() > 1 ? " (and \"mlx5\" for the first of them)" : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gv_devices: %s\n", e.what());
    return 1;
  }
  return 0;
}
