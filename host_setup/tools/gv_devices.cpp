// gv_devices: what Device::open can open on this machine, like rdma-core's ibv_devices and
// ibv_devinfo together: the soft provider, then every RDMA device with its ports and GIDs.
//
//   gv_devices                 # exit status 0; says "no RDMA device found" where there is none
//   gv_devices --probe [NAME]  # open NAME (default mlx5) for GPU kernels, create a CQ and a QP
//                              # (which maps the doorbell register for the GPU, or falls back to
//                              # the proxy thread) and print Device::describe(): the mode in use.
//                              # Exit status 1 when it cannot be opened (the reason is printed).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <gpuverbs/host/verbs.hpp>

#include "../src/provider.hpp"

namespace {

int list() {
  std::printf("%-12s %s\n", "soft", "software HCA: always available (Device::open(\"soft\"))");
  std::printf("%s", gv::detail::rdma_device_report().c_str());
  const auto names = gv::Device::list();
  std::string usable;
  for (std::size_t i = 1; i < names.size(); ++i) usable += " " + names[i];
  std::printf("Device::open accepts: soft%s%s\n", usable.c_str(),
              names.size() > 1 ? " (and \"mlx5\" for the first of them)" : "");
  return 0;
}

int probe(const char* name) {
  gv::DeviceOptions o;
  o.map_to_gpus = true;
  auto dev = gv::Device::open(name, o);
  auto pd = dev->alloc_pd();
  auto cq = dev->create_cq(64);
  auto qp = pd->create_qp(*cq, *cq, {});
  std::printf("%s\n", dev->describe().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool want_probe = argc >= 2 && std::strcmp(argv[1], "--probe") == 0;
  if ((argc > 1 && !want_probe) || argc > 3) {
    std::fprintf(stderr,
                 "usage: %s [--probe [NAME]]\n  lists the providers and RDMA devices gv::Device::open accepts;\n"
                 "  --probe opens NAME (default mlx5) for GPU kernels and prints the mode it runs in\n",
                 argv[0]);
    return 2;
  }
  try {
    return want_probe ? probe(argc == 3 ? argv[2] : "mlx5") : list();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gv_devices: %s\n", e.what());
    return 1;
  }
}
