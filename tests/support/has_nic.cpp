// Exit 0 when an mlx5 device with an ACTIVE port is present, 77 (ctest's skip code in these
// tests) when not, saying why: the gate of the nic tests that run programs.
#include <cstdio>

#include <gpuverbs/host/verbs.hpp>

int main() {
  const auto names = gv::Device::list();
  if (names.size() > 1) {
    std::printf("mlx5 device: %s\n", names[1].c_str());
    return 0;
  }
  std::printf("skipped: no mlx5 device with an ACTIVE port on this machine (gv_devices lists what there is)\n");
  return 77;
}
